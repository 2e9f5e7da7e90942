//! The pane a runtime's TUI runs in: `cohost-runner` started by tmux in a pane cohost opens, with
//! the session's private directory holding `launch.json` (what to run, written here) and
//! `runner.jsonl` (the runner's lifecycle, read here). cohost types only into a pane it verified:
//! the pane id and runner pid recorded in `session.pane` must still match tmux's `#{pane_pid}`.
//!
//! A runtime whose TUI attaches to a session cohost hosts (codex, OpenCode) co-drives it with
//! [`open_terminal`] (the runner, a `launch.json` from the runtime's terminal spec, the pane) and
//! [`relaunch`]: the secrets the spec carries stay in the 0600 file and the TUI's environment,
//! never in an argv.

use std::path::{Path, PathBuf};

use crate::core::{CoreError, CoreHandle};
use crate::protocol::boundary::{self, Launch};
use crate::protocol::{EventKind, Runtime, SessionPane};
use crate::runtime::{HostError, TerminalSpec};
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

/// Runs `cohost-runner <dir>` in the existing pane `pane_id` instead of what it runs (a rehome:
/// the pane of an adopted agent that quit, kept by `remain-on-exit`, or the shell it was started
/// from, which the runner replaces), and records it as `session.pane`. The caller verified the
/// pane.
#[allow(clippy::too_many_arguments)]
pub async fn respawn(
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
    pane_id: &str,
    tmux_session: &str,
    cwd: &Path,
    runner: &Path,
    dir: &Path,
) -> Result<SessionPane, PaneError> {
    let cwd = cwd.to_string_lossy().into_owned();
    let runner = runner.to_string_lossy().into_owned();
    let dir = dir.to_string_lossy().into_owned();
    tmux.tmux()
        .run(&[
            "respawn-pane",
            "-k",
            "-t",
            pane_id,
            "-c",
            &cwd,
            "--",
            &runner,
            &dir,
        ])
        .await
        .map_err(PaneError::Open)?;
    let pid = tmux.tmux().pane_pid(pane_id).await.ok_or_else(|| {
        PaneError::Open(TmuxError::Failed {
            args: "respawn-pane".into(),
            stderr: format!("pane {pane_id} is gone"),
        })
    })?;
    tmux.refresh().await;
    let record = SessionPane {
        pane_id: pane_id.to_string(),
        tmux_session: tmux_session.to_string(),
        runner_pid: pid,
    };
    core.append(
        Some(session_id.to_string()),
        EventKind::SessionPane(record.clone()),
    )
    .await?;
    Ok(record)
}

/// [`respawn`] for a rehome: only once the adopted agent's pane still has the process it had
/// at the adoption (the shell the agent was started from, or the pane kept by `remain-on-exit`
/// after the agent quit); then the pane's own `remain-on-exit` is given back. `Err` says what
/// failed, for the caller's message (the agent has quit by then).
#[allow(clippy::too_many_arguments)]
pub async fn respawn_adopted(
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
    adopted: &crate::protocol::SessionAdopted,
    cwd: &Path,
    runner: &Path,
    dir: &Path,
) -> Result<SessionPane, String> {
    let pane = adopted.pane_id.as_str();
    match tmux.tmux().pane_pid(pane).await {
        Some(pid) if pid == adopted.pane_pid => {}
        _ => {
            return Err(format!(
                "pane {pane} is gone or runs something else now; the session goes on without a terminal (open one with POST …/terminal)"
            ));
        }
    }
    let record = respawn(
        core,
        tmux,
        session_id,
        pane,
        &adopted.tmux_session,
        cwd,
        runner,
        dir,
    )
    .await
    .map_err(|e| format!("could not start the TUI in pane {pane}: {e}"))?;
    let _ = tmux
        .tmux()
        .run(&["set-option", "-p", "-u", "-t", pane, "remain-on-exit"])
        .await;
    Ok(record)
}

/// The private directory of a session's terminal, `root/<session>` (0700): `launch.json`,
/// `runner.jsonl`.
pub fn terminal_dir(runtime: Runtime, root: &Path, session_id: &str) -> Result<PathBuf, HostError> {
    let dir = root.join(session_id);
    super::private_dir(&dir).map_err(|e| {
        HostError::failed_by(runtime, format!("cannot create {}: {e}", dir.display()), e)
    })?;
    Ok(dir)
}

/// Writes `dir/launch.json` from a terminal spec (with its real secrets: the file is 0600, and
/// they reach the TUI through its environment).
pub fn write_spec(
    runtime: Runtime,
    dir: &Path,
    session_id: &str,
    spec: TerminalSpec,
) -> Result<(), HostError> {
    let mut argv = vec![spec.command];
    argv.extend(spec.args);
    let launch = Launch {
        argv,
        cwd: Some(PathBuf::from(spec.cwd)),
        env: spec.env.into_iter().map(|(k, v)| (k, Some(v))).collect(),
        seed_claude: None,
        session_id: Some(session_id.to_string()),
    };
    write_launch(dir, &launch).map_err(|e| {
        HostError::failed_by(
            runtime,
            format!("could not write {}: {e}", dir.join("launch.json").display()),
            e,
        )
    })
}

/// Opens a co-driving pane for a session that has none: `cohost-runner dir` in a new window of
/// `tmux_session` (default [`DEFAULT_TMUX_SESSION`](super::DEFAULT_TMUX_SESSION)), in `cwd`.
/// The caller has written (or will write) `dir/launch.json`; a runner finding none waits.
pub async fn open_terminal(
    runtime: Runtime,
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
    tmux_session: Option<String>,
    cwd: &Path,
    dir: &Path,
) -> Result<SessionPane, HostError> {
    let runner = runner(runtime)?;
    let tmux_session = tmux_session.unwrap_or_else(|| super::DEFAULT_TMUX_SESSION.to_string());
    open(core, tmux, session_id, &tmux_session, cwd, &runner, dir)
        .await
        .map_err(|e| HostError::failed_by(runtime, e.to_string(), e))
}

/// `cohost-runner`, or why a pane cannot be opened without it.
pub fn runner(runtime: Runtime) -> Result<PathBuf, HostError> {
    super::sibling_binary("cohost-runner", "COHOST_RUNNER_BIN")
        .map_err(|e| HostError::unavailable(runtime, e))
}

/// Refuses a second terminal for a session that has one.
pub fn refuse_second(session_id: &str, pane_id: Option<&str>) -> Result<(), HostError> {
    match pane_id {
        Some(_) => Err(HostError::Invalid(format!(
            "session `{session_id}` already has a terminal"
        ))),
        None => Ok(()),
    }
}

/// The session's pane, for a relaunch: it must still run the runner cohost started there.
pub async fn relaunchable(
    core: &CoreHandle,
    tmux: &SessionCache,
    session_id: &str,
) -> Result<SessionPane, HostError> {
    let pane = core
        .read(|state| state.sessions.get(session_id).and_then(|s| s.pane.clone()))
        .ok_or_else(|| HostError::Invalid(format!("session `{session_id}` has no terminal")))?;
    if tmux.tmux().pane_pid(&pane.pane_id).await != Some(pane.runner_pid) {
        return Err(HostError::Closed(session_id.to_string()));
    }
    Ok(pane)
}

/// Makes the runner in `dir` launch again from its (rewritten) `launch.json`: the TUI it runs,
/// if any, is stopped, and the runner launches as soon as it is not running.
pub fn relaunch(dir: &Path, runner_pid: u32) {
    // Which TUI runs is read before the runner is woken: an idle runner launches at once on
    // SIGUSR1, and reading after it would find (and stop) the TUI just launched.
    let running = running_child(dir);
    super::send_signal(runner_pid, libc::SIGUSR1);
    if let Some(pid) = running {
        super::send_signal(pid, libc::SIGTERM);
    }
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
