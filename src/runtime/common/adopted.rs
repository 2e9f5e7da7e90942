//! The checks every runtime makes of an agent a person started by hand and cohost adopted: before
//! the adoption, that the pane is there and the agent's process lives under the pane's process
//! ([`check_agent`]); on every tick of the adopted session, that this still holds ([`problem`]:
//! the pane in tmux every [`PANE_CHECK_TICKS`] ticks, `/proc` every tick); and why the session
//! ends ([`AdoptedEnd`]). And the frame every adoption logs: the refusal of an agent another
//! session already drives ([`refuse_driven`]), the session's start ([`log_start`]: created,
//! adopted, pane, bound), its instance in the tracker ([`report`]), the check before anything
//! is typed ([`verify_before_typing`]) and its end ([`log_end`]). Reads tmux and `/proc`, appends
//! to the log; types nothing.

use crate::core::CoreHandle;
use crate::process;
use crate::protocol::{
    AgentStatus, EventKind, InstanceRef, Liveness, Runtime, SessionAdopted, SessionBound,
    SessionClosed, SessionCreated, SessionPane, TurnCompleted, TurnStatus,
};
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError, InjectOutcome};
use crate::tmux::{SessionCache, Tmux};

/// What an adopted TUI's screen shows of its input box (codex's composer, Pi's and OpenCode's
/// box), as its screen reader reads a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputBox {
    /// Nothing typed (a placeholder or the cursor alone): ready for a prompt.
    Empty,
    /// Text a person typed and has not sent (lines joined with `\n`).
    Draft(String),
    /// No input box could be read (the reason): nothing may be typed.
    Unreadable(String),
}

/// Session ticks between looks at the adopted pane in tmux (`/proc` is read every tick).
pub const PANE_CHECK_TICKS: u32 = 5;

/// Why an adopted session ends; its `session.closed` says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdoptedEnd {
    /// Given back (`disown`): the agent keeps running, watched only.
    Disowned,
    /// The pane is gone.
    PaneGone(String),
    /// The agent exited (its pane may show a shell now).
    AgentExited(String),
    /// The pane runs something else than the agent that was adopted.
    PaneChanged(String),
    /// The agent quit in its pane to be resumed under cohost's own host there (a rehome): the
    /// session goes on, hosted; nothing of the adoption is followed any more.
    Rehomed,
}

impl AdoptedEnd {
    /// The `session.closed` reason; `agent` names the agent (`claude`, `codex`).
    pub fn reason(&self, agent: &str) -> String {
        match self {
            AdoptedEnd::Disowned => {
                format!("disowned: the adopted {agent} keeps running in its pane, watched only")
            }
            AdoptedEnd::PaneGone(why) => format!("pane gone: {why}; nothing more is typed there"),
            AdoptedEnd::AgentExited(why) => {
                format!("agent exited: {why}; nothing more is typed in its pane")
            }
            AdoptedEnd::PaneChanged(why) => {
                format!("pane changed: {why}; nothing more is typed there")
            }
            AdoptedEnd::Rehomed => {
                format!("rehomed: the {agent} in its pane now runs under cohost's own host")
            }
        }
    }
}

/// An adoption refused, saying why.
pub fn refuse(refusal: AdoptRefusal, message: String) -> HostError {
    HostError::CannotAdopt { refusal, message }
}

/// What a pane's process is, for a message (`` `sh` (pid 4200) ``).
pub fn describe(pid: u32) -> String {
    match process::comm(pid) {
        Some(name) => format!("`{name}` (pid {pid})"),
        None => format!("pid {pid}"),
    }
}

/// The agent the watcher placed in `request`'s pane, checked: the pane is there, the process
/// lives, `is_agent` says it runs `agent` (`claude`, `codex`), and it runs under the pane's
/// process. Answers the pane's pid, the agent's pid and its `/proc` stat; or the refusal.
pub async fn check_agent(
    tmux: &Tmux,
    request: &AdoptRequest,
    agent: &str,
    is_agent: impl Fn(u32) -> bool,
) -> Result<(u32, u32, process::Stat), HostError> {
    let pane = &request.pane_id;
    let Some(pane_pid) = tmux.pane_pid(pane).await else {
        return Err(refuse(
            AdoptRefusal::PaneGone,
            format!("pane {pane} is gone: there is nothing to adopt"),
        ));
    };
    let Some(pid) = request.pid else {
        return Err(refuse(
            AdoptRefusal::NotAdoptable,
            format!(
                "the watcher knows no {agent} process for {}: it cannot be adopted",
                request.key
            ),
        ));
    };
    let exited = || {
        refuse(
            AdoptRefusal::AgentExited,
            format!(
                "{agent} (pid {pid}) has exited; pane {pane} runs {} now",
                describe(pane_pid)
            ),
        )
    };
    let stat = process::stat(pid)
        .filter(|stat| !stat.zombie)
        .ok_or_else(exited)?;
    if !is_agent(pid) {
        return Err(exited());
    }
    if !process::ancestors(pid).contains(&pane_pid) {
        return Err(refuse(
            AdoptRefusal::PaneChanged,
            format!(
                "{agent} (pid {pid}) does not run in pane {pane}, which runs {} now",
                describe(pane_pid)
            ),
        ));
    }
    Ok((pane_pid, pid, stat))
}

/// Whether the adopted agent still runs, under the pane's process: what `/proc` says (the pane
/// itself is asked of tmux by [`problem`] or the caller).
pub fn agent_problem(adopted: &SessionAdopted, agent: &str) -> Option<AdoptedEnd> {
    let pid = adopted.pid;
    if !process::alive(pid, Some(adopted.pid_start)) {
        return Some(AdoptedEnd::AgentExited(format!(
            "{agent} (pid {pid}) exited"
        )));
    }
    if !process::ancestors(pid).contains(&adopted.pane_pid) {
        return Some(AdoptedEnd::PaneChanged(format!(
            "{agent} (pid {pid}) no longer runs under pane {}'s process (pid {})",
            adopted.pane_id, adopted.pane_pid
        )));
    }
    None
}

/// An adopted session's look at its agent on tick `ticks`: the pane in tmux every
/// [`PANE_CHECK_TICKS`] (gone, or running another process), `/proc` every tick; a pane closed
/// with its agent counts as the pane gone. `Some`: the session ends.
pub async fn problem(
    tmux: &Tmux,
    adopted: &SessionAdopted,
    agent: &str,
    ticks: u32,
) -> Option<AdoptedEnd> {
    let looked = ticks.is_multiple_of(PANE_CHECK_TICKS);
    if looked {
        match tmux.pane_pid(&adopted.pane_id).await {
            None => {
                return Some(AdoptedEnd::PaneGone(format!(
                    "pane {} closed",
                    adopted.pane_id
                )));
            }
            Some(pid) if pid != adopted.pane_pid => {
                return Some(AdoptedEnd::PaneChanged(format!(
                    "pane {} runs {} now",
                    adopted.pane_id,
                    describe(pid)
                )));
            }
            Some(_) => {}
        }
    }
    let end = agent_problem(adopted, agent)?;
    // Closing a pane ends the agent in it: say which went first.
    if !looked && tmux.pane_pid(&adopted.pane_id).await.is_none() {
        return Some(AdoptedEnd::PaneGone(format!(
            "pane {} closed",
            adopted.pane_id
        )));
    }
    Some(end)
}

/// Refuses to adopt an agent session a cohost session already drives (hosted, or adopted
/// before); `agent` names it in the message (`codex thread`, `pi session`).
pub fn refuse_driven(
    core: &CoreHandle,
    request: &AdoptRequest,
    agent: &str,
) -> Result<(), HostError> {
    let driver = core.read(|state| {
        state
            .sessions
            .driving(&request.agent_session_id)
            .map(|s| s.id.clone())
    });
    match driver {
        Some(driver) => Err(refuse(
            AdoptRefusal::AlreadyDriven,
            format!(
                "session `{driver}` already drives {agent} {}",
                request.agent_session_id
            ),
        )),
        None => Ok(()),
    }
}

/// The adopted agent's working directory: the watcher's, else its process's (`/proc`), else
/// none.
pub fn cwd(request: &AdoptRequest, pid: u32) -> String {
    request
        .cwd
        .clone()
        .or_else(|| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
}

/// Logs an adopted session's start: `session.created` (the runtime, the directory),
/// `session.adopted` (`record`), `session.pane` and `session.bound` (the agent's session on
/// `backend`).
pub async fn log_start(
    core: &CoreHandle,
    session_id: &str,
    runtime: Runtime,
    cwd: String,
    record: &SessionAdopted,
    backend: &str,
) -> Result<(), HostError> {
    let session = Some(session_id.to_string());
    core.append(
        session.clone(),
        EventKind::SessionCreated(SessionCreated {
            runtime,
            cwd,
            model: None,
            approval_policy: None,
            permission_mode: None,
            sandbox: None,
            budget: None,
            forked_from: None,
            idempotency_key: None,
            profile: None,
        }),
    )
    .await?;
    core.append(session.clone(), EventKind::SessionAdopted(record.clone()))
        .await?;
    core.append(
        session.clone(),
        EventKind::SessionPane(SessionPane {
            pane_id: record.pane_id.clone(),
            tmux_session: record.tmux_session.clone(),
            runner_pid: record.pane_pid,
        }),
    )
    .await?;
    core.append(
        session,
        EventKind::SessionBound(SessionBound {
            thread_id: record.agent_session_id.clone(),
            backend: backend.into(),
        }),
    )
    .await?;
    Ok(())
}

/// Whether session `id` is an adopted one of `runtime` (by the log: also after its end).
pub fn is_adopted(core: &CoreHandle, runtime: Runtime, id: &str) -> bool {
    core.read(|state| {
        state
            .sessions
            .get(id)
            .is_some_and(|s| s.created.runtime == runtime && s.adopted.is_some())
    })
}

/// The adopted sessions of `runtime` the log says are open (to follow again after a restart).
pub fn open_sessions(core: &CoreHandle, runtime: Runtime) -> Vec<(String, SessionAdopted)> {
    core.read(|state| {
        state
            .sessions
            .iter()
            .filter(|s| s.created.runtime == runtime && !s.is_closed())
            .filter_map(|s| s.adopted.clone().map(|a| (s.id.clone(), a)))
            .collect()
    })
}

/// Reports an adopted agent's status to the tracker, in its pane (`agent`: the tracker's name).
pub async fn report(
    core: &CoreHandle,
    tmux: &SessionCache,
    record: &SessionAdopted,
    session_id: &str,
    agent: &str,
    status: AgentStatus,
    liveness: Liveness,
) {
    mirror::report(
        core,
        tmux,
        Report {
            agent,
            thread_id: &record.agent_session_id,
            session_id,
            placement: Placement::Pane {
                tmux_session: &record.tmux_session,
                pane_id: &record.pane_id,
            },
            status,
            liveness,
        },
    )
    .await;
}

/// The pane, checked again right before anything is typed: the session has not `ended`, the
/// pane still runs the process it ran at the adoption, the agent still lives under it.
pub async fn verify_before_typing(
    tmux: &Tmux,
    record: &SessionAdopted,
    session_id: &str,
    ended: bool,
    agent: &str,
) -> Result<(), HostError> {
    if ended {
        return Err(HostError::Closed(session_id.to_string()));
    }
    match tmux.pane_pid(&record.pane_id).await {
        Some(pid) if pid == record.pane_pid => {}
        _ => {
            return Err(HostError::ClosedBecause(format!(
                "session `{session_id}`: pane {} is gone or runs something else; nothing is typed",
                record.pane_id
            )));
        }
    }
    if let Some(end) = agent_problem(record, agent) {
        return Err(HostError::ClosedBecause(format!(
            "session `{session_id}`: {}",
            end.reason(agent)
        )));
    }
    Ok(())
}

/// The end of a prompt typed into an adopted TUI whose agent recorded it as turn `turn_id`:
/// waits (until `deadline`) for the follower to have stored that turn in the session, so the
/// answer never names a turn the stream has not shown, then logs `message.sent` started with
/// the caller's idempotency `key`.
pub async fn started_once_stored(
    core: &CoreHandle,
    runtime: Runtime,
    session_id: &str,
    turn_id: String,
    key: Option<String>,
    pane: &str,
    deadline: tokio::time::Instant,
) -> Result<InjectOutcome, HostError> {
    while !core.read(|state| {
        state.sessions.get(session_id).is_some_and(|s| {
            s.active_turn.as_deref() == Some(turn_id.as_str())
                || s.last_turn.as_ref().is_some_and(|t| t.turn_id == turn_id)
        })
    }) {
        if tokio::time::Instant::now() >= deadline {
            return Err(HostError::failed(
                runtime,
                format!("the turn of the prompt typed in pane {pane} was never stored"),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(crate::runtime::common::inject::record(
        core,
        session_id,
        crate::protocol::InjectState::Started,
        &turn_id,
        key,
    )
    .await?)
}

/// Drops the tracker instance `key` in `tmux_session` when it is a hosted session's (the
/// adopted one's own), so the watcher's shows again.
pub async fn prune_own_instance(core: &CoreHandle, tmux_session: &str, key: String) {
    let ours = core.read(|state| {
        state
            .tracker
            .instance(tmux_session, &key)
            .is_some_and(|(u, _)| u.source.as_deref() == Some(crate::protocol::SOURCE_HOSTED))
    });
    if ours {
        let _ = core
            .append(
                Some(tmux_session.to_string()),
                EventKind::AgentPruned(InstanceRef { key }),
            )
            .await;
    }
}

/// Logs an adopted session's end: its `open_turn` interrupted and lost (unless given back or
/// rehomed: then the turn goes on in the pane), its tracker instance pruned when it is the
/// session's own (the watcher's shows again), and `session.closed` with the reason (unless
/// rehomed: the session goes on, hosted). `agent` is the tracker's name of the agent.
pub async fn log_end(
    core: &CoreHandle,
    session_id: &str,
    record: &SessionAdopted,
    agent: &str,
    open_turn: Option<String>,
    end: &AdoptedEnd,
) {
    let session = Some(session_id.to_string());
    if let Some(turn_id) =
        open_turn.filter(|_| !matches!(end, AdoptedEnd::Disowned | AdoptedEnd::Rehomed))
    {
        let _ = core
            .append(
                session.clone(),
                EventKind::TurnCompleted(TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: true,
                }),
            )
            .await;
    }
    prune_own_instance(
        core,
        &record.tmux_session,
        format!("{agent}:{}", record.agent_session_id),
    )
    .await;
    if *end == AdoptedEnd::Rehomed {
        return;
    }
    let _ = core
        .append(
            session,
            EventKind::SessionClosed(SessionClosed {
                reason: end.reason(agent),
            }),
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_under_its_own_parent_has_no_problem() {
        let me = std::process::id();
        let stat = process::stat(me).unwrap();
        let adopted = SessionAdopted {
            key: "k".into(),
            agent_session_id: "s".into(),
            tmux_session: "t".into(),
            pane_id: "%1".into(),
            pane_pid: stat.ppid,
            pid: me,
            pid_start: stat.start_time,
            session_file: String::new(),
            transcript: String::new(),
        };
        assert_eq!(agent_problem(&adopted, "codex"), None);
        let moved = SessionAdopted {
            pane_pid: u32::MAX,
            ..adopted.clone()
        };
        assert!(matches!(
            agent_problem(&moved, "codex"),
            Some(AdoptedEnd::PaneChanged(_))
        ));
        let restarted = SessionAdopted {
            pid_start: stat.start_time + 1,
            ..adopted
        };
        assert!(matches!(
            agent_problem(&restarted, "codex"),
            Some(AdoptedEnd::AgentExited(_))
        ));
    }
}
