//! One `opencode serve` child: spawned on loopback with a generated password (never in argv:
//! `OPENCODE_SERVER_PASSWORD` in its environment), its port read from its stdout line
//! `opencode server listening on http://127.0.0.1:PORT`, its version probed on
//! `/global/health` (a release outside `peers::OPENCODE` is refused), supervised
//! (`common::child`): its own process group, a parent-death signal, the whole group killed when
//! the handle is dropped, and the last lines of its stderr (and stdout) kept for error messages.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::client::Client;
use super::wire::Health;
use crate::runtime::common::child::{
    ChildLog, Group, OutputTail, Supervised, supervise, tail_suffix,
};

/// How long the server may take to print its port and answer `/global/health` (it answered
/// 5–6 s after spawn on two loaded cores).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a stopped server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// The Basic-auth user (OpenCode's default; `OPENCODE_SERVER_USERNAME` sets it).
pub const USERNAME: &str = "opencode";

/// The server's stderr lines (debug) and its exit, in this module's log.
const LOG: ChildLog = ChildLog {
    line: |pid, line| tracing::debug!(pid, "opencode: {line}"),
    exit: |pid, status| tracing::info!(pid, ?status, "opencode serve exited"),
};

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
    /// The last lines of its stderr (and stdout).
    pub tail: OutputTail,
    group: Group,
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
            .stdin(Stdio::null());
        let Supervised {
            pid,
            tail,
            stdout,
            group,
            ..
        } = supervise(&mut command, LOG).map_err(|source| SpawnError::Spawn {
            bin: bin.to_path_buf(),
            source,
        })?;
        tracing::info!(pid, bin = %bin.display(), cwd = %cwd.display(), "spawned opencode serve");
        let (port_tx, mut port_rx) = tokio::sync::watch::channel(None::<u16>);
        if let Some(stdout) = stdout {
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
        let port = tokio::time::timeout(START_TIMEOUT, async {
            tokio::select! {
                port = port_rx.wait_for(Option::is_some) => port.ok().and_then(|p| *p),
                () = group.exited() => None,
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
            group,
        })
    }

    /// Whether the server has exited.
    pub fn has_exited(&self) -> bool {
        self.group.has_exited()
    }

    /// Stops the server: SIGTERM to its group, then SIGKILL after a grace period.
    pub async fn stop(&self) {
        self.group.signal(libc::SIGTERM);
        self.group.kill_after(STOP_GRACE).await;
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
