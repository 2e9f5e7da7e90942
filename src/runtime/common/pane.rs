//! The pane a runtime's TUI runs in: `cohost-runner` started by tmux in a pane cohost opens, with
//! the session's private directory holding `launch.json` (what to run, written here) and
//! `runner.jsonl` (the runner's lifecycle, read here). cohost types only into a pane it verified:
//! the pane id and runner pid recorded in `session.pane` must still match tmux's `#{pane_pid}`.

use std::path::Path;

use crate::core::{CoreError, CoreHandle};
use crate::protocol::boundary::{self, Launch};
use crate::protocol::{EventKind, SessionPane};
use crate::tmux::{SessionCache, TmuxError};

/// Why [`open`] opened no pane, or could not record the one it opened.
#[derive(Debug, thiserror::Error)]
pub enum PaneError {
    /// tmux could not open the pane.
    #[error("could not open a tmux pane: {0}")]
    Open(#[source] TmuxError),
    /// The pane opened, but `session.pane` could not be logged.
    #[error(transparent)]
    Record(#[from] CoreError),
}

/// Writes `dir/launch.json` for the runner (0600: it may hold a token).
pub fn write_launch(dir: &Path, launch: &Launch) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(launch).map_err(std::io::Error::other)?;
    super::write_private(&dir.join("launch.json"), &bytes)
}

/// Reads `dir/launch.json` back (for a relaunch that changes it).
pub fn read_launch(dir: &Path) -> Option<Launch> {
    serde_json::from_slice(&std::fs::read(dir.join("launch.json")).ok()?).ok()
}

/// The pid of the TUI the runner in `dir` says is running: its last `started` not followed by
/// `exited` or `stopped`.
pub fn running_child(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("runner.jsonl")).ok()?;
    boundary::running_child(text.lines())
}

/// Opens a pane running `cohost-runner <dir>` in `tmux_session` (a new window named after the
/// session) and records it as `session.pane`.
pub async fn open(
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
    tmux_session: &str,
    cwd: &Path,
    runner: &Path,
    dir: &Path,
) -> Result<SessionPane, PaneError> {
    let pane = tmux
        .tmux()
        .open_pane(
            tmux_session,
            session_id,
            cwd,
            &[],
            &[
                runner.to_string_lossy().into_owned(),
                dir.to_string_lossy().into_owned(),
            ],
        )
        .await
        .map_err(PaneError::Open)?;
    tmux.refresh().await;
    let record = SessionPane {
        pane_id: pane.pane_id,
        tmux_session: tmux_session.to_string(),
        runner_pid: pane.pid,
    };
    core.append(
        Some(session_id.to_string()),
        EventKind::SessionPane(record.clone()),
    )
    .await?;
    Ok(record)
}

/// Why a session's pane cannot be typed into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneProblem {
    /// The session has no pane (yet).
    None,
    /// The pane is gone.
    Gone,
    /// The pane now runs another process than the runner cohost started there.
    Foreign {
        pane_id: String,
        pid: u32,
        runner_pid: u32,
    },
}

/// The session's pane, verified: it must still run the runner cohost started there.
pub async fn verified(
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
) -> Result<String, PaneProblem> {
    let pane = core
        .read(|state| state.sessions.get(session_id).and_then(|s| s.pane.clone()))
        .ok_or(PaneProblem::None)?;
    match tmux.tmux().pane_pid(&pane.pane_id).await {
        Some(pid) if pid == pane.runner_pid => Ok(pane.pane_id),
        Some(pid) => Err(PaneProblem::Foreign {
            pane_id: pane.pane_id,
            pid,
            runner_pid: pane.runner_pid,
        }),
        None => Err(PaneProblem::Gone),
    }
}
