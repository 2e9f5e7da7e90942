//! The checks every runtime makes of an agent a person started by hand and cohost adopted: before
//! the adoption, that the pane is there and the agent's process lives under the pane's process
//! ([`check_agent`]); on every tick of the adopted session, that this still holds ([`problem`]:
//! the pane in tmux every [`PANE_CHECK_TICKS`] ticks, `/proc` every tick); and why the session
//! ends ([`AdoptedEnd`]). Reads tmux and `/proc` only; types nothing.

use crate::process;
use crate::protocol::SessionAdopted;
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError};
use crate::tmux::Tmux;

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

fn refuse(refusal: AdoptRefusal, message: String) -> HostError {
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
