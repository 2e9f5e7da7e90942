//! One `opencode serve` child: spawned on loopback with a generated password (never in argv:
//! `OPENCODE_SERVER_PASSWORD` in its environment), its port read from its stdout line
//! `opencode server listening on http://127.0.0.1:PORT`, its version probed on
//! `/global/health` (a release outside `peers::OPENCODE` is refused), supervised: its own
//! process group, a parent-death signal, the whole group killed when the handle is dropped,
//! and the last lines of its stderr kept for error messages.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::client::Client;
use super::wire::Health;
use crate::runtime::common::lock;

/// How long the server may take to print its port and answer `/global/health` (it answered
/// 5–6 s after spawn on two loaded cores).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How many of its last stderr (and stdout) lines are kept.
const TAIL_LINES: usize = 30;
/// The longest line kept.
const TAIL_LINE_MAX: usize = 400;
/// How long a stopped server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// The Basic-auth user (OpenCode's default; `OPENCODE_SERVER_USERNAME` sets it).
pub const USERNAME: &str = "opencode";

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot run {}: {source}", bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("opencode serve (pid {pid}) exited before it listened{}", tail_suffix(.stderr_tail))]
    Exited { pid: u32, stderr_tail: String },
    #[error("opencode serve (pid {pid}) did not listen within {}s{}", START_TIMEOUT.as_secs(), tail_suffix(.stderr_tail))]
    Timeout { pid: u32, stderr_tail: String },
    #[error("opencode serve (pid {pid}) does not answer /global/health with JSON: {message}")]
    Probe { pid: u32, message: String },
    #[error(
        "opencode {version} is outside the releases cohost supports ({supported}); install opencode-ai@{newest}"
    )]
    Unsupported {
        version: String,
        supported: String,
        newest: &'static str,
    },
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its last output:\n{tail}")
    }
}

/// The bounded tail of a child's output.
#[derive(Clone, Default)]
pub struct OutputTail(Arc<Mutex<VecDeque<String>>>);

impl OutputTail {
    fn push(&self, line: &str) {
        let mut line = line.trim_end().to_string();
        if line.len() > TAIL_LINE_MAX {
            let mut cut = TAIL_LINE_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        let mut lines = lock(&self.0);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub fn render(&self) -> String {
        lock(&self.0).iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Finds `opencode`: `COHOST_OPENCODE_BIN` if set, else PATH.
pub fn find_opencode() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("COHOST_OPENCODE_BIN").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "COHOST_OPENCODE_BIN={} does not exist",
                path.display()
            ))
        };
    }
    crate::runtime::common::which("opencode").ok_or_else(|| {
        "opencode was not found on PATH (install opencode-ai, or set COHOST_OPENCODE_BIN)"
            .to_string()
    })
}

/// A password no other process can guess: 32 random hex digits.
fn generate_password() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A running `opencode serve`. Dropping it kills the server's whole process group.
pub struct ServerProcess {
    pub pid: u32,
    pub client: Client,
    pub version: String,
    /// The generated password (for `opencode attach -p`, never logged).
    pub password: String,
    pub tail: OutputTail,
    exited: tokio::sync::watch::Receiver<bool>,
    guard: KillGroupOnDrop,
}

impl std::fmt::Debug for ServerProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerProcess")
            .field("pid", &self.pid)
            .field("port", &self.client.port())
            .field("version", &self.version)
            .finish()
    }
}

impl ServerProcess {
    /// Starts `opencode serve` in `cwd` and waits until it answers with a supported version.
    pub async fn spawn(bin: &Path, cwd: &Path) -> Result<ServerProcess, SpawnError> {
        let password = generate_password();
        // `--port 0` is not an ephemeral port to OpenCode (it takes 4096 when free): ask the
        // kernel for a free one; the port the server prints is the one used either way.
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .unwrap_or(0);
        let mut command = Command::new(bin);
        command
            .args(["serve", "--hostname", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .current_dir(cwd)
            .env("OPENCODE_SERVER_PASSWORD", &password)
            .env("OPENCODE_SERVER_USERNAME", USERNAME)
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        set_parent_death_signal(&mut command);
        let mut child = command.spawn().map_err(|source| SpawnError::Spawn {
            bin: bin.to_path_buf(),
            source,
        })?;
        let pid = child.id().unwrap_or_default();
        let guard = KillGroupOnDrop { pgid: pid };
        tracing::info!(pid, bin = %bin.display(), cwd = %cwd.display(), "spawned opencode serve");
        let tail = OutputTail::default();
        if let Some(stderr) = child.stderr.take() {
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(pid, "opencode: {line}");
                    tail.push(&line);
                }
            });
        }
        let (port_tx, mut port_rx) = tokio::sync::watch::channel(None::<u16>);
        if let Some(stdout) = child.stdout.take() {
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(port) = listening_port(&line) {
                        let _ = port_tx.send(Some(port));
                    }
                    tail.push(&line);
                }
            });
        }
        let (exited_tx, exited) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let status = child.wait().await;
            tracing::info!(pid, ?status, "opencode serve exited");
            let _ = exited_tx.send(true);
        });
        let mut exited_rx = exited.clone();
        let port = tokio::time::timeout(START_TIMEOUT, async {
            tokio::select! {
                port = port_rx.wait_for(Option::is_some) => port.ok().and_then(|p| *p),
                _ = exited_rx.wait_for(|e| *e) => None,
            }
        })
        .await;
        let port = match port {
            Ok(Some(port)) => port,
            Ok(None) => {
                return Err(SpawnError::Exited {
                    pid,
                    stderr_tail: tail.render(),
                });
            }
            Err(_) => {
                return Err(SpawnError::Timeout {
                    pid,
                    stderr_tail: tail.render(),
                });
            }
        };
        let client = Client::new(port, USERNAME, &password);
        let health: Health =
            client
                .get("/global/health")
                .await
                .map_err(|error| SpawnError::Probe {
                    pid,
                    message: error.to_string(),
                })?;
        let version = health.version.unwrap_or_default();
        check_version(&version)?;
        Ok(ServerProcess {
            pid,
            client,
            version,
            password,
            tail,
            exited,
            guard,
        })
    }

    /// Whether the server has exited.
    pub fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    /// Stops the server: SIGTERM to its group, then SIGKILL after a grace period.
    pub async fn stop(&self) {
        signal_group(self.guard.pgid, libc::SIGTERM);
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(STOP_GRACE, exited.wait_for(|e| *e)).await;
        signal_group(self.guard.pgid, libc::SIGKILL);
    }
}

/// Refuses a release outside the supported range, naming it and the range.
pub fn check_version(version: &str) -> Result<(), SpawnError> {
    let supported = crate::peers::OPENCODE;
    match supported.place(version) {
        Some(crate::peers::Place::Tested) => Ok(()),
        _ => Err(SpawnError::Unsupported {
            version: if version.is_empty() {
                "(no version)".to_string()
            } else {
                version.to_string()
            },
            supported: supported.range(),
            newest: supported.newest,
        }),
    }
}

/// The port of `opencode server listening on http://127.0.0.1:PORT`.
pub fn listening_port(line: &str) -> Option<u16> {
    let rest = line
        .trim()
        .strip_prefix("opencode server listening on http://")?;
    let (_, port) = rest.rsplit_once(':')?;
    port.trim_end_matches('/').parse().ok()
}

struct KillGroupOnDrop {
    pgid: u32,
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

fn signal_group(pgid: u32, signal: i32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let _ = unsafe { libc::kill(-pgid, signal) };
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(command: &mut Command) {
    let parent_pid = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: prctl(2) and getppid(2) (plain syscalls) and an io::Error from a raw
    // OS code — no allocation, no locks. `parent_pid` is a copied integer.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent_pid {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_read_from_the_listening_line() {
        assert_eq!(
            listening_port("opencode server listening on http://127.0.0.1:4802"),
            Some(4802)
        );
        assert_eq!(
            listening_port("Warning: OPENCODE_SERVER_PASSWORD is not set; server is unsecured."),
            None
        );
    }

    #[test]
    fn a_release_outside_the_range_is_refused_by_name() {
        assert!(check_version(crate::peers::OPENCODE.newest).is_ok());
        let error = check_version("1.17.0").unwrap_err().to_string();
        assert!(error.contains("opencode 1.17.0"), "{error}");
        assert!(error.contains(&crate::peers::OPENCODE.range()), "{error}");
        assert!(check_version("").is_err());
    }

    #[test]
    fn passwords_are_random_and_long() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
