//! One `pi --mode rpc` child per hosted session, and the RPC peer over its stdio: commands
//! written one per line with an id of ours, responses matched by that id (or, for Pi 0.73.1's
//! id-less answer to a command it does not know, by the command's name), events handed on in
//! order through a bounded channel. The child runs in the session's directory with its own
//! agent directory (`PI_CODING_AGENT_DIR`: its config, copied from the user's) and session
//! directory (`--session-dir`), Pi's offline switches, and cohost's gate extension (`-e`) when
//! the session's policy asks before tools act. Supervision (`common::child`): its own process
//! group, a parent-death signal, the whole group killed when the handle is dropped, the last
//! lines of its stderr kept for error messages; lines read through the crate's bounded line
//! buffer.
//!
//! Pi is run through its launcher, which runs the first `node` on the daemon's `PATH` — the
//! node `cohost doctor` reports (Pi 1.x needs Node ≥ 22.19).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use super::wire::{ExtensionUiResponse, Line, PiEvent, RpcCommand, RpcResponse};
use crate::runtime::common::child::{
    ChildLog, Group, OutputTail, Supervised, supervise, tail_suffix,
};
use crate::runtime::common::lock;
use crate::tail::{LineBuffer, Piece};

/// The longest line read from Pi. 0.73.1 repeats the whole assistant message in every
/// `message_update`, so a long reply makes long lines; past this a line is skipped (logged).
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;
/// Events waiting for the session's dispatch task: Pi's stdout waits when it is full.
const EVENT_CAPACITY: usize = 1024;
/// How long a command may take to be answered (`abort` answers once the run has ended).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `pi --version` may take (0.73.1 took ~2 s on two loaded cores).
const VERSION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped Pi gets between closing its stdin and SIGKILL (it exits in ~0.03 s).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Pi's stderr lines (debug) and its exit, in this module's log.
const LOG: ChildLog = ChildLog {
    line: |pid, line| tracing::debug!(pid, "pi: {line}"),
    exit: |pid, status| tracing::info!(pid, ?status, "pi exited"),
};

/// Why Pi could not be run or answered.
#[derive(Debug, thiserror::Error)]
pub enum PiError {
    #[error("cannot run {}: {source}", bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    /// Pi answered `success:false`.
    #[error("pi refused `{command}`: {message}")]
    Refused {
        command: &'static str,
        message: String,
    },
    #[error("pi did not answer `{command}` within {}s", REQUEST_TIMEOUT.as_secs())]
    Timeout { command: &'static str },
    #[error("pi (pid {pid}) exited{}", tail_suffix(.stderr_tail))]
    Exited { pid: u32, stderr_tail: String },
    #[error("writing to pi failed: {0}")]
    Write(std::io::Error),
}

impl PiError {
    /// Pi refused the command with this message (`Model not found: …`).
    pub fn refusal(&self) -> Option<&str> {
        match self {
            PiError::Refused { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// Finds `pi`: `COHOST_PI_BIN` if set, else `PATH`.
pub fn find_pi() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("COHOST_PI_BIN").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("COHOST_PI_BIN={} does not exist", path.display()))
        };
    }
    crate::runtime::common::which("pi").ok_or_else(|| {
        "pi was not found on PATH (install @earendil-works/pi-coding-agent, or set COHOST_PI_BIN)"
            .to_string()
    })
}

/// `pi --version`'s `x.y.z`, run as sessions run it (the node on `PATH`); the error names the
/// last line Pi printed (under too old a Node: its `SyntaxError`).
pub async fn version(bin: &Path) -> Result<String, String> {
    let mut command = Command::new(bin);
    command
        .arg("--version")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
        .await
        .map_err(|_| "`pi --version` did not answer in time".to_string())?
        .map_err(|error| format!("`pi --version` failed: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "`pi --version` failed ({}): {}",
            output.status,
            last.unwrap_or("").trim()
        ));
    }
    // Pi 0.73.1 prints its version on stderr, 1.6.0 on stdout.
    let stderr = String::from_utf8_lossy(&output.stderr);
    crate::peers::version_in(&stdout)
        .or_else(|| crate::peers::version_in(&stderr))
        .ok_or_else(|| format!("`pi --version` printed {:?}", stdout.trim()))
}

/// How to start one session's Pi.
#[derive(Debug, Clone)]
pub struct Launch {
    pub bin: PathBuf,
    pub cwd: PathBuf,
    /// `PI_CODING_AGENT_DIR`.
    pub agent_dir: PathBuf,
    /// `--session-dir`.
    pub session_dir: PathBuf,
    /// The gate extension (`-e`), when the policy asks before tools act.
    pub gate: Option<PathBuf>,
    /// `--session <file>`: resume this session file.
    pub resume: Option<PathBuf>,
    /// `--fork <file>`: start a new session file holding a copy of this one's conversation
    /// (when there is nothing to resume).
    pub fork: Option<PathBuf>,
}

struct Pending {
    id: String,
    command: &'static str,
    reply: oneshot::Sender<RpcResponse>,
}

/// A running `pi --mode rpc`. Dropping it kills its whole process group.
pub struct PiProcess {
    pub pid: u32,
    pub tail: OutputTail,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Arc<Mutex<Vec<Pending>>>,
    next_id: AtomicU64,
    group: Group,
}

impl std::fmt::Debug for PiProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiProcess").field("pid", &self.pid).finish()
    }
}

impl PiProcess {
    /// Starts Pi; its events arrive on the returned channel, which ends when Pi's output does.
    pub fn spawn(launch: &Launch) -> Result<(Arc<PiProcess>, mpsc::Receiver<PiEvent>), PiError> {
        let mut command = Command::new(&launch.bin);
        command
            .args(["--mode", "rpc", "--session-dir"])
            .arg(&launch.session_dir);
        if let Some(file) = &launch.resume {
            command.arg("--session").arg(file);
        } else if let Some(file) = &launch.fork {
            command.arg("--fork").arg(file);
        }
        if let Some(gate) = &launch.gate {
            command.arg("-e").arg(gate);
        }
        command
            .current_dir(&launch.cwd)
            .env("PI_CODING_AGENT_DIR", &launch.agent_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .stdin(Stdio::piped());
        let Supervised {
            pid,
            tail,
            stdin,
            stdout,
            group,
        } = supervise(&mut command, LOG).map_err(|source| PiError::Spawn {
            bin: launch.bin.clone(),
            source,
        })?;
        tracing::info!(pid, bin = %launch.bin.display(), cwd = %launch.cwd.display(), "spawned pi --mode rpc");
        let pending: Arc<Mutex<Vec<Pending>>> = Arc::default();
        let (events_tx, events_rx) = mpsc::channel(EVENT_CAPACITY);
        if let Some(stdout) = stdout {
            tokio::spawn(read_lines(pid, stdout, Arc::clone(&pending), events_tx));
        }
        Ok((
            Arc::new(PiProcess {
                pid,
                tail,
                stdin: tokio::sync::Mutex::new(stdin),
                pending,
                next_id: AtomicU64::new(1),
                group,
            }),
            events_rx,
        ))
    }

    async fn write_line(&self, mut line: String) -> Result<(), PiError> {
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(self.exited_error());
        };
        pipe.write_all(line.as_bytes())
            .await
            .map_err(PiError::Write)?;
        pipe.flush().await.map_err(PiError::Write)
    }

    fn exited_error(&self) -> PiError {
        PiError::Exited {
            pid: self.pid,
            stderr_tail: self.tail.render(),
        }
    }

    /// Sends `command` and waits for its answer: its `data` (null when it has none).
    pub async fn request(&self, command: RpcCommand) -> Result<Value, PiError> {
        let id = format!("c{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let name = command.name();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).push(Pending {
            id: id.clone(),
            command: name,
            reply: tx,
        });
        if let Err(error) = self.write_line(command.line(&id)).await {
            lock(&self.pending).retain(|p| p.id != id);
            return Err(error);
        }
        let response = match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(response)) => response,
            Ok(Err(_)) => return Err(self.exited_error()),
            Err(_) => {
                lock(&self.pending).retain(|p| p.id != id);
                return Err(PiError::Timeout { command: name });
            }
        };
        if response.success {
            Ok(response.data.unwrap_or(Value::Null))
        } else {
            Err(PiError::Refused {
                command: name,
                message: response.error.unwrap_or_default(),
            })
        }
    }

    /// Answers an extension dialog (Pi sends no response to it).
    pub async fn answer_dialog(&self, answer: &ExtensionUiResponse) -> Result<(), PiError> {
        let line = serde_json::to_string(answer).map_err(|e| PiError::Write(e.into()))?;
        self.write_line(line).await
    }

    pub fn has_exited(&self) -> bool {
        self.group.has_exited()
    }

    /// Stops Pi: its stdin closed (it exits), then SIGKILL to its group after a grace period.
    pub async fn stop(&self) {
        lock_take(&self.stdin).await;
        self.group.kill_after(STOP_GRACE).await;
    }
}

async fn lock_take(stdin: &tokio::sync::Mutex<Option<ChildStdin>>) {
    drop(stdin.lock().await.take());
}

/// Reads Pi's stdout: responses go to their waiting request, events to the channel. At the
/// end, every waiting request fails (its sender is dropped) and the channel closes.
async fn read_lines(
    pid: u32,
    mut stdout: tokio::process::ChildStdout,
    pending: Arc<Mutex<Vec<Pending>>>,
    events: mpsc::Sender<PiEvent>,
) {
    let mut buffer = LineBuffer::at(0).with_max_line(MAX_LINE_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut lines: Vec<Line> = Vec::new();
        buffer.feed(&chunk[..n], |piece| match piece {
            Piece::Line { bytes, .. } => {
                let text = String::from_utf8_lossy(bytes);
                match Line::parse(text.trim_end_matches('\r')) {
                    Some(line) => lines.push(line),
                    None => tracing::warn!(pid, line = %text.chars().take(200).collect::<String>(), "unreadable pi line"),
                }
            }
            Piece::Overlong { start, .. } => {
                tracing::warn!(pid, offset = start, limit = MAX_LINE_BYTES, "skipping an over-long pi line")
            }
        });
        for line in lines {
            match line {
                Line::Response(response) => {
                    let waiting = {
                        let mut pending = lock(&pending);
                        let index = match &response.id {
                            Some(id) => pending.iter().position(|p| &p.id == id),
                            // Pi 0.73.1 answers a command it does not know without its id.
                            None => pending.iter().position(|p| p.command == response.command),
                        };
                        index.map(|i| pending.remove(i))
                    };
                    match waiting {
                        Some(waiting) => {
                            let _ = waiting.reply.send(response);
                        }
                        None => {
                            tracing::debug!(pid, command = %response.command, "a pi response nobody waits for")
                        }
                    }
                }
                Line::Event(event) => {
                    if events.send(event).await.is_err() {
                        break 'read;
                    }
                }
            }
        }
    }
    lock(&pending).clear();
}
