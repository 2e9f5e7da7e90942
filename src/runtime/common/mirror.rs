//! A hosted session is also an agent instance in the tracker: its host reports the agent's
//! status as `agent.updated` in the tmux session the agent lives in — the one of its pane when
//! it has one, else the one whose directory matches its working directory (sessions holding
//! cohost's own panes are passed over for that). It shows once: reported in another tmux session
//! than before (a pane opened since), it leaves the one it was in.

use crate::core::{CoreHandle, now_ms};
use crate::protocol::{AgentStatus, AgentUpdate, EventKind, InstanceRef, Liveness};
use crate::tmux::SessionCache;

/// Where a hosted agent shows in the tracker.
pub enum Placement<'a> {
    /// In its pane's tmux session, with the pane id.
    Pane {
        tmux_session: &'a str,
        pane_id: &'a str,
    },
    /// In the tmux session whose directory contains `cwd`.
    Cwd(&'a str),
}

/// One report of a hosted agent's status.
pub struct Report<'a> {
    /// The agent's name in the tracker (`codex`, `claude-code`).
    pub agent: &'a str,
    /// Its instance key: the runtime's thread or session id.
    pub thread_id: &'a str,
    /// The cohost session, whose name (the one its lists show) is the instance's name.
    pub session_id: &'a str,
    pub placement: Placement<'a>,
    pub status: AgentStatus,
    pub liveness: Liveness,
}

/// Reports a hosted agent's status to the tracker. Nothing is reported when the tmux session
/// cannot be found (the tracker only knows tmux sessions).
pub async fn report(core: &CoreHandle, tmux: &SessionCache, report: Report<'_>) {
    let Report {
        agent,
        thread_id,
        session_id,
        placement,
        status,
        liveness,
    } = report;
    let list = tmux.get();
    let (tmux_session, pane_id) = match placement {
        Placement::Pane {
            tmux_session,
            pane_id,
        } => {
            if !list.sessions.iter().any(|s| s.name == tmux_session) {
                return;
            }
            (tmux_session.to_string(), Some(pane_id.to_string()))
        }
        Placement::Cwd(cwd) => {
            let pane_sessions: std::collections::HashSet<String> = core.read(|state| {
                state
                    .sessions
                    .iter()
                    .filter_map(|s| s.pane.as_ref().map(|p| p.tmux_session.clone()))
                    .collect()
            });
            let projects = crate::tmux::SessionList {
                sessions: list
                    .sessions
                    .iter()
                    .filter(|s| !pane_sessions.contains(&s.name))
                    .cloned()
                    .collect(),
                running: list.running,
                server_pid: list.server_pid,
            };
            let Ok(name) = crate::tmux::resolve(&projects, None, Some(cwd))
                .or_else(|_| crate::tmux::resolve(&list, None, Some(cwd)))
            else {
                return;
            };
            (name, None)
        }
    };
    let name = core
        .read(|state| state.sessions.name_of(session_id))
        .unwrap_or_else(|| session_id.to_string());
    let elsewhere: Vec<String> = core.read(|state| {
        state
            .tracker
            .hosted_instances(thread_id)
            .into_iter()
            .filter(|(session, update, _)| *session != tmux_session && update.agent == agent)
            .map(|(session, _, _)| session)
            .collect()
    });
    for session in elsewhere {
        let _ = core
            .append(
                Some(session),
                EventKind::AgentPruned(InstanceRef {
                    key: crate::protocol::instance_key(agent, Some(thread_id)),
                }),
            )
            .await;
    }
    let update = AgentUpdate {
        agent: agent.to_string(),
        status,
        ts: now_ms(),
        thread_id: Some(thread_id.to_string()),
        thread_name: Some(name),
        last_user_prompt: None,
        pane_id,
        liveness: Some(liveness),
        source: Some(crate::protocol::SOURCE_HOSTED.to_string()),
        tokenless: false,
    };
    let _ = core
        .append(Some(tmux_session), EventKind::AgentUpdated(update))
        .await;
}
