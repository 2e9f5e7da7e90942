//! Finding the `codex` binary and running `codex app-server` children: one child per backend,
//! spoken to over stdio or over a loopback WebSocket guarded by a capability token.
//!
//! [`find_codex`] resolves the binary (`COHOST_CODEX_BIN`, else `codex` on `PATH`) and, when it is
//! the npm package's node launcher (`@openai/codex/bin/codex.js`), the native binary that launcher
//! would run — spawning it directly saves a node process per backend. [`AppServerProcess::spawn`]
//! starts the child in its own process group (`common::child`), killed on drop and (on Linux)
//! when the daemon dies, drains its stderr into a bounded [`StderrTail`] for error messages, and
//! hands back a connected [`RpcClient`]. This module never interprets codex's JSON-RPC methods beyond reaching a
//! connection, never touches the developer's environment (children get their env through
//! `Command::env`), and never signals a process it did not start.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::rpc::{Incoming, LineEvent, LineReader, RpcClient, RpcError};
use crate::runtime::common::child::{KillGroupOnDrop, signal_group, spawn_in_group};

/// How many of a child's last stderr lines are kept for error messages. Codex's fatal errors
/// (config problems, panics with a backtrace header) fit comfortably; older lines are in the
/// debug log.
pub const STDERR_TAIL_LINES: usize = 64;

/// A stderr line longer than this is replaced by a marker in the tail (it is still counted).
const STDERR_LINE_MAX_BYTES: usize = 8 * 1024;

/// How long [`AppServerProcess::spawn`] waits for a WebSocket child to print its port and
/// answer `GET /readyz`. Codex is ready in ~0.3 s on an idle machine; a loaded CI runner
/// starting several backends at once can take many times that.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause between `/readyz` probes.
const READY_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The longest one `/readyz` probe may take.
const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest `codex --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// How many commands ([`ProcessCommand`]) may queue for a child's supervisor task. Commands are
/// rare (a signal at shutdown), so a handful is plenty.
const PROCESS_COMMAND_CAPACITY: usize = 8;

/// How long [`AppServerProcess::shutdown`] waits to queue the close of the connection before it
/// signals the child anyway.
const CLOSE_STDIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The env var that overrides where the codex binary is.
pub const CODEX_BIN_ENV: &str = "COHOST_CODEX_BIN";

/// The package-manager markers the npm launcher clears before it sets its own; see
/// [`CodexBin::package_root`].
const PACKAGE_MANAGER_ENV: [&str; 4] = [
    "CODEX_MANAGED_BY_NPM",
    "CODEX_MANAGED_BY_BUN",
    "CODEX_MANAGED_BY_PNPM",
    "CODEX_MANAGED_BY_VITE_PLUS",
];

mod bin;
mod stderr;

pub use bin::*;
pub use stderr::*;

// ---------------------------------------------------------------------------------------------
// running app-server

/// How cohost talks to an `app-server` child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// JSON lines over the child's stdin/stdout; the connection is the child's only client.
    Stdio,
    /// `--listen ws://127.0.0.1:PORT --ws-auth capability-token --ws-token-file FILE`, so other
    /// clients (the TUI's `--remote`) can share the server. `port: 0` lets codex pick a free port,
    /// which is read from its startup banner. `token_file` must already hold the token (see
    /// [`write_ws_token`]); cohost presents it as `Authorization: Bearer`.
    WebSocket { port: u16, token_file: PathBuf },
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The child could not be started (binary missing, not executable).
    #[error("failed to spawn {bin} app-server: {source}")]
    Spawn {
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The WebSocket token file could not be read, or is empty (`source` is `None`).
    #[error("cannot read websocket token file {path}: {message}")]
    TokenFile {
        path: PathBuf,
        message: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// The WebSocket child did not announce its port or answer `/readyz` within
    /// [`READY_TIMEOUT`]; it has been killed.
    #[error(
        "codex app-server (pid {pid}) was not ready within {after:?} ({detail}); stderr:\n{stderr_tail}"
    )]
    NotReady {
        pid: u32,
        after: Duration,
        detail: String,
        stderr_tail: String,
    },
    /// The child exited while we waited for it to become ready (bad config, port in use).
    #[error(
        "codex app-server (pid {pid}) exited before it was ready ({status}); stderr:\n{stderr_tail}"
    )]
    ExitedEarly {
        pid: u32,
        status: String,
        stderr_tail: String,
    },
    /// The child was ready but the WebSocket connection failed; it has been killed.
    #[error("cannot connect to codex app-server (pid {pid}): {source}; stderr:\n{stderr_tail}")]
    Connect {
        pid: u32,
        #[source]
        source: RpcError,
        stderr_tail: String,
    },
    /// A pipe we asked for was not there (a tokio invariant; should not happen).
    #[error("codex app-server (pid {pid}) has no {pipe} pipe")]
    MissingPipe { pid: u32, pipe: &'static str },
}

/// What the handle asks of the supervisor task that owns the [`Child`].
enum ProcessCommand {
    /// Send a signal to the child's process group (unless it has been reaped already).
    SignalGroup(libc::c_int),
}

/// The child's state as the supervisor publishes it.
#[derive(Debug, Clone, Copy)]
enum ChildState {
    Running,
    /// Reaped; `None` when waiting for it failed, so the status is unknown.
    Exited(Option<ExitStatus>),
}

/// A running `codex app-server`. A supervisor task owns the child: it reaps it, publishes the
/// exit status, and — when this handle is dropped — SIGKILLs the whole process group, so a
/// backend never outlives its handle. After the child exits, anything left in its process
/// group (tool commands codex started) is SIGKILLed too.
pub struct AppServerProcess {
    pid: u32,
    stderr_tail: StderrTail,
    state: watch::Receiver<ChildState>,
    commands: mpsc::Sender<ProcessCommand>,
    rpc: RpcClient,
    ws_url: Option<String>,
}

impl fmt::Debug for AppServerProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppServerProcess")
            .field("pid", &self.pid)
            .field("ws_url", &self.ws_url)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

impl AppServerProcess {
    /// Starts `<bin> app-server [--listen …] <extra_args>` with `CODEX_HOME=codex_home` plus
    /// `env`, and connects to it. For [`Listen::WebSocket`] this waits (up to [`READY_TIMEOUT`])
    /// for `GET /readyz` to answer 200 and connects with the capability token. The returned
    /// client is not yet initialized; call [`RpcClient::initialize`].
    ///
    /// On Linux the child gets a parent-death signal. The kernel sends it when the *thread* that
    /// spawned the child exits, so call this from a runtime worker or the main thread, never
    /// from a `spawn_blocking` thread that may be retired.
    pub async fn spawn(
        bin: &CodexBin,
        codex_home: &Path,
        listen: Listen,
        extra_args: &[String],
        env: &[(String, String)],
    ) -> Result<(AppServerProcess, RpcClient, mpsc::Receiver<Incoming>), SpawnError> {
        let token = match &listen {
            Listen::Stdio => None,
            Listen::WebSocket { token_file, .. } => Some(read_token(token_file)?),
        };

        let mut command = Command::new(&bin.path);
        command.arg("app-server");
        if let Listen::WebSocket { port, token_file } = &listen {
            command
                .arg("--listen")
                .arg(format!("ws://127.0.0.1:{port}"))
                .args(["--ws-auth", "capability-token", "--ws-token-file"])
                .arg(token_file);
        }
        command.args(extra_args);
        command.env("CODEX_HOME", codex_home);
        if let Some(package_root) = &bin.package_root {
            for name in PACKAGE_MANAGER_ENV {
                command.env_remove(name);
            }
            command
                .env("CODEX_MANAGED_PACKAGE_ROOT", package_root)
                .env("CODEX_MANAGED_BY_NPM", "1");
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let piped = || match listen {
            Listen::Stdio => Stdio::piped(),
            Listen::WebSocket { .. } => Stdio::null(),
        };
        command
            .stdin(piped())
            .stdout(piped())
            .stderr(Stdio::piped());

        let mut child = spawn_in_group(&mut command).map_err(|source| SpawnError::Spawn {
            bin: bin.path.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or_default();
        let label = format!("codex[{pid}]");
        tracing::info!(pid, bin = %bin.path.display(), codex_home = %codex_home.display(), ?listen, "spawned codex app-server");

        let missing = |pipe| SpawnError::MissingPipe { pid, pipe };
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        let stderr_tail = StderrTail::drain(stderr, label.clone());
        let stdio = match listen {
            Listen::Stdio => {
                let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
                let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
                Some((stdin, stdout))
            }
            Listen::WebSocket { .. } => None,
        };

        let (commands_tx, commands_rx) = mpsc::channel(PROCESS_COMMAND_CAPACITY);
        let (state_tx, state_rx) = watch::channel(ChildState::Running);
        // If the supervisor is dropped before it reaps the child (the runtime shutting down, even
        // before the task first ran), the guard it owns takes the whole group down:
        // `kill_on_drop` alone would kill only the leader.
        let group_guard = KillGroupOnDrop::new(pid);
        tokio::spawn(supervise(child, pid, commands_rx, state_tx, group_guard));

        let (rpc, incoming, ws_url) = match (stdio, &listen) {
            (Some((stdin, stdout)), _) => {
                let (rpc, incoming) =
                    RpcClient::from_stdio_labeled(stdin, stdout, Some(stderr_tail.clone()), label);
                (rpc, incoming, None)
            }
            (None, Listen::WebSocket { port, .. }) => {
                // On any error below, dropping `commands_tx` makes the supervisor kill the child.
                let port = wait_until_ready(pid, *port, &stderr_tail, state_rx.clone()).await?;
                let url = format!("ws://127.0.0.1:{port}");
                let (rpc, incoming) = RpcClient::connect_ws(&url, token.as_deref())
                    .await
                    .map_err(|source| SpawnError::Connect {
                        pid,
                        source,
                        stderr_tail: stderr_tail.render(),
                    })?;
                rpc.attach_stderr_tail(stderr_tail.clone());
                (rpc, incoming, Some(url))
            }
            (None, Listen::Stdio) => return Err(missing("stdin")),
        };

        let process = AppServerProcess {
            pid,
            stderr_tail,
            state: state_rx,
            commands: commands_tx,
            rpc: rpc.clone(),
            ws_url,
        };
        Ok((process, rpc, incoming))
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The child's last stderr lines.
    pub fn stderr_tail(&self) -> &StderrTail {
        &self.stderr_tail
    }

    /// `ws://127.0.0.1:PORT` for a WebSocket child (the real port, also when spawned with 0).
    pub fn ws_url(&self) -> Option<&str> {
        self.ws_url.as_deref()
    }

    /// The exit status if the child has exited, without waiting. `Some(None)` means it exited
    /// but its status could not be collected.
    pub fn try_status(&self) -> Option<Option<ExitStatus>> {
        match *self.state.borrow() {
            ChildState::Running => None,
            ChildState::Exited(status) => Some(status),
        }
    }

    /// Waits for the child to exit and returns its status (`None` if it could not be
    /// collected). Does not signal it.
    pub async fn wait(&self) -> Option<ExitStatus> {
        let mut state = self.state.clone();
        let exited = state
            .wait_for(|state| matches!(state, ChildState::Exited(_)))
            .await
            .map(|state| *state);
        match exited {
            Ok(ChildState::Exited(status)) => status,
            // The supervisor always publishes before it ends; if it is gone, so is the child.
            Ok(ChildState::Running) | Err(_) => None,
        }
    }

    /// Stops the child: closes our side of the connection (stdin EOF makes a stdio
    /// `app-server` exit), SIGTERMs its process group, waits up to `grace`, then SIGKILLs the
    /// group. Returns the exit status (`None` if it could not be collected).
    pub async fn shutdown(&self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.try_status() {
            return status;
        }
        // Closing queues behind any unsent lines; a child that stopped reading must not stall
        // the shutdown, so this wait is bounded and the signals follow regardless.
        let _ = tokio::time::timeout(grace.min(CLOSE_STDIN_TIMEOUT), self.rpc.close()).await;
        self.signal_group(libc::SIGTERM).await;
        if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
            return status;
        }
        tracing::warn!(
            pid = self.pid,
            ?grace,
            "codex app-server ignored SIGTERM; killing its process group"
        );
        self.kill().await;
        self.wait().await
    }

    /// SIGKILLs the child's process group now.
    pub async fn kill(&self) {
        self.signal_group(libc::SIGKILL).await;
    }

    async fn signal_group(&self, signal: libc::c_int) {
        // A send error means the supervisor is gone: the child has been reaped already.
        let _ = self
            .commands
            .send(ProcessCommand::SignalGroup(signal))
            .await;
    }
}

/// Owns the child: reaps it, runs signal commands while it is alive (so a signal can never hit
/// a recycled pid), kills the group when the handle is dropped, and publishes the exit.
async fn supervise(
    mut child: Child,
    pid: u32,
    mut commands: mpsc::Receiver<ProcessCommand>,
    state: watch::Sender<ChildState>,
    mut group_guard: KillGroupOnDrop,
) {
    let waited = loop {
        tokio::select! {
            waited = child.wait() => break waited,
            command = commands.recv() => match command {
                Some(ProcessCommand::SignalGroup(signal)) => signal_group(pid, signal),
                None => {
                    tracing::debug!(pid, "codex app-server handle dropped; killing its process group");
                    signal_group(pid, libc::SIGKILL);
                    break child.wait().await;
                }
            },
        }
    };
    // The leader is gone; take down whatever it left running in its group.
    group_guard.disarm();
    signal_group(pid, libc::SIGKILL);
    let status = match waited {
        Ok(status) => {
            tracing::info!(pid, %status, "codex app-server exited");
            Some(status)
        }
        Err(err) => {
            tracing::warn!(pid, %err, "waiting for codex app-server failed");
            None
        }
    };
    state.send_replace(ChildState::Exited(status));
}

fn read_token(path: &Path) -> Result<String, SpawnError> {
    let token = std::fs::read_to_string(path).map_err(|source| SpawnError::TokenFile {
        path: path.to_owned(),
        message: source.to_string(),
        source: Some(source),
    })?;
    let token = token.trim();
    if token.is_empty() {
        return Err(SpawnError::TokenFile {
            path: path.to_owned(),
            message: "the file is empty".to_owned(),
            source: None,
        });
    }
    Ok(token.to_owned())
}

/// Writes a fresh random capability token (64 hex characters) to `path` with mode 0600,
/// replacing any old one, and returns it.
pub fn write_ws_token(path: &Path) -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|err| std::io::Error::other(err.to_string()))?;
    let token: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // An existing file keeps its mode on open; make sure the token is private anyway.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    std::io::Write::write_all(&mut file, token.as_bytes())?;
    Ok(token)
}

/// Waits until a WebSocket child has a port (the one asked for, or the one its banner names
/// when asked for 0) and answers `GET /readyz` with 200. Fails early if it exits.
async fn wait_until_ready(
    pid: u32,
    port: u16,
    stderr_tail: &StderrTail,
    mut state: watch::Receiver<ChildState>,
) -> Result<u16, SpawnError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let exited_early = |state: ChildState, stderr_tail: &StderrTail| {
        let status = match state {
            ChildState::Exited(Some(status)) => status.to_string(),
            ChildState::Exited(None) | ChildState::Running => "status unknown".to_owned(),
        };
        SpawnError::ExitedEarly {
            pid,
            status,
            stderr_tail: stderr_tail.render(),
        }
    };
    let not_ready = |detail: &str, stderr_tail: &StderrTail| SpawnError::NotReady {
        pid,
        after: READY_TIMEOUT,
        detail: detail.to_owned(),
        stderr_tail: stderr_tail.render(),
    };

    let port = if port != 0 {
        port
    } else {
        // The watch guard must not live across an await (it is not Send): copy the state out
        // inside the select, wait for stderr after it.
        let waited = tokio::select! {
            found = stderr_tail.wait_for_line(deadline, banner_port) => Ok(found),
            exited = state.wait_for(|state| matches!(state, ChildState::Exited(_))) => {
                Err(exited.map(|state| *state).unwrap_or(ChildState::Exited(None)))
            }
        };
        let found = match waited {
            Ok(found) => found,
            Err(state) => {
                // Let the last stderr lines arrive before quoting them.
                stderr_tail.wait_finished(Duration::from_millis(500)).await;
                return Err(exited_early(state, stderr_tail));
            }
        };
        match found {
            Some(port) => port,
            None => {
                // stderr ended without a banner: the child is almost certainly exiting, and
                // its supervisor may not have reaped it yet. Give it a moment to say how.
                let settle = Instant::now() + Duration::from_secs(2);
                let exited = tokio::time::timeout_at(
                    settle.min(deadline),
                    state.wait_for(|state| matches!(state, ChildState::Exited(_))),
                )
                .await;
                if let Ok(Ok(exited)) = exited {
                    let exited = *exited;
                    return Err(exited_early(exited, stderr_tail));
                }
                return Err(not_ready(
                    "it never printed its listening port",
                    stderr_tail,
                ));
            }
        }
    };

    loop {
        let state_now = *state.borrow_and_update();
        if let ChildState::Exited(_) = state_now {
            stderr_tail.wait_finished(Duration::from_millis(500)).await;
            return Err(exited_early(state_now, stderr_tail));
        }
        if readyz(port).await {
            return Ok(port);
        }
        if Instant::now() >= deadline {
            return Err(not_ready(
                &format!("GET http://127.0.0.1:{port}/readyz never answered 200"),
                stderr_tail,
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(READY_POLL_INTERVAL) => {}
            _ = state.changed() => {}
        }
    }
}

/// The port in codex's banner line `  listening on: ws://127.0.0.1:40033`.
fn banner_port(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once("listening on: ws://")?;
    let address = rest.split_whitespace().next()?;
    let (_, port) = address.trim_end_matches('/').rsplit_once(':')?;
    port.parse().ok()
}

/// One `GET /readyz` probe; true on a 200 answer.
async fn readyz(port: u16) -> bool {
    let probe = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let request =
            format!("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = Vec::new();
        let mut buf = [0u8; 256];
        while !head.contains(&b'\n') && head.len() < 1024 {
            let n_read = stream.read(&mut buf).await.ok()?;
            if n_read == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n_read]);
        }
        let status_line = String::from_utf8_lossy(&head);
        let status = status_line.split_whitespace().nth(1)?;
        Some(status == "200")
    };
    matches!(
        tokio::time::timeout(READY_PROBE_TIMEOUT, probe).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests;
