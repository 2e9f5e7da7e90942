//! Finding the `codex` binary and running `codex app-server` children: one child per backend,
//! spoken to over stdio or over a loopback WebSocket guarded by a capability token.
//!
//! [`find_codex`] resolves the binary (`COHOST_CODEX_BIN`, else `codex` on `PATH`) and, when it is
//! the npm package's node launcher (`@openai/codex/bin/codex.js`), the native binary that launcher
//! would run — spawning it directly saves a node process per backend. [`AppServerProcess::spawn`]
//! starts the child in its own process group, killed on drop and (on Linux) when the daemon dies,
//! drains its stderr into a bounded [`StderrTail`] for error messages, and hands back a connected
//! [`RpcClient`]. This module never interprets codex's JSON-RPC methods beyond reaching a
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

// ---------------------------------------------------------------------------------------------
// stderr tail

/// The last lines a child wrote to stderr (ANSI colours stripped), shared between the task
/// draining the pipe and whoever needs them for an error message. Cheap to clone.
#[derive(Clone)]
pub struct StderrTail {
    inner: Arc<TailInner>,
}

struct TailInner {
    max_lines: usize,
    lines: Mutex<VecDeque<String>>,
    /// Bumped on every pushed line; `finished` once the pipe reached EOF. Lets waiters sleep
    /// until something changes.
    progress: watch::Sender<TailProgress>,
}

#[derive(Clone, Copy, Debug, Default)]
struct TailProgress {
    n_lines: u64,
    finished: bool,
}

impl fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrTail")
            .field("lines", &self.lines())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl StderrTail {
    /// An empty tail keeping at most `max_lines` lines.
    pub fn new(max_lines: usize) -> Self {
        StderrTail {
            inner: Arc::new(TailInner {
                max_lines: max_lines.max(1),
                lines: Mutex::new(VecDeque::new()),
                progress: watch::Sender::new(TailProgress::default()),
            }),
        }
    }

    /// Starts a task that drains `reader` line by line into a new tail, logging each line at
    /// debug level under `label` (e.g. `codex[1234]`).
    pub fn drain<R>(reader: R, label: String) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = StderrTail::new(STDERR_TAIL_LINES);
        let writer = tail.clone();
        tokio::spawn(async move {
            let mut lines = LineReader::new(reader, STDERR_LINE_MAX_BYTES);
            loop {
                match lines.next_line().await {
                    Ok(Some(LineEvent::Line(line))) => {
                        let line = strip_ansi(&String::from_utf8_lossy(line));
                        tracing::debug!(target: "cohost::runtime::codex::stderr", child = %label, "{line}");
                        writer.push_line(&line);
                    }
                    Ok(Some(LineEvent::TooLong { n_bytes })) => {
                        writer.push_line(&format!("[{n_bytes}-byte stderr line omitted]"));
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::debug!(child = %label, %err, "reading child stderr failed");
                        break;
                    }
                }
            }
            writer.finish();
        });
        tail
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.inner
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a line, dropping the oldest one when full.
    pub fn push_line(&self, line: &str) {
        {
            let mut lines = self.lock();
            if lines.len() == self.inner.max_lines {
                lines.pop_front();
            }
            lines.push_back(line.to_owned());
        }
        self.inner
            .progress
            .send_modify(|progress| progress.n_lines += 1);
    }

    /// Marks the stream as ended (the drain task does this at EOF).
    pub fn finish(&self) {
        self.inner
            .progress
            .send_modify(|progress| progress.finished = true);
    }

    /// Whether the stream has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.progress.borrow().finished
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// The kept lines joined with newlines (empty when there are none).
    pub fn render(&self) -> String {
        self.lines().join("\n")
    }

    /// Waits until the stream has ended, for at most `timeout`; returns whether it has.
    pub async fn wait_finished(&self, timeout: Duration) -> bool {
        let mut progress = self.inner.progress.subscribe();
        matches!(
            tokio::time::timeout(timeout, progress.wait_for(|progress| progress.finished)).await,
            Ok(Ok(_))
        )
    }

    /// The first kept line for which `find` returns something, waiting for new lines until
    /// `deadline`. `None` when the deadline passes or the stream ends without a match.
    async fn wait_for_line<T>(
        &self,
        deadline: Instant,
        mut find: impl FnMut(&str) -> Option<T>,
    ) -> Option<T> {
        let mut progress = self.inner.progress.subscribe();
        loop {
            let finished = progress.borrow_and_update().finished;
            if let Some(found) = self.lock().iter().find_map(|line| find(line)) {
                return Some(found);
            }
            if finished {
                return None;
            }
            match tokio::time::timeout_at(deadline, progress.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

/// Removes ANSI CSI escape sequences (codex colours its tracing output).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, then one final byte in 0x40..=0x7e.
            for next in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&next) {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// finding the binary

/// The codex binary cohost runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexBin {
    /// The executable to spawn: the native binary, never the node launcher.
    pub path: PathBuf,
    /// What `codex --version` said (`0.169.0`), once [`CodexBin::detect_version`] ran.
    pub version: Option<String>,
    /// When `path` was found through the npm launcher: the `@openai/codex` package directory.
    /// Children then get the env the launcher would have set (`CODEX_MANAGED_PACKAGE_ROOT`,
    /// `CODEX_MANAGED_BY_NPM=1`), so codex behaves exactly as when started through it.
    pub package_root: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// [`find_codex`]: `COHOST_CODEX_BIN` is unset and no `codex` is on `PATH`. Install codex or
    /// set the variable.
    #[error("codex not found: {CODEX_BIN_ENV} is not set and no executable `codex` is on PATH")]
    NotFound,
    /// `COHOST_CODEX_BIN` (or a path given to [`resolve_codex_bin`]) names no file.
    #[error("codex binary {path} does not exist")]
    Missing { path: PathBuf },
    /// The binary or the npm launcher could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The npm launcher has no native binary for this platform next to it (the optional
    /// platform package was not installed). `tried` lists where we looked.
    #[error(
        "{launcher} is the npm launcher, but no native codex binary for {target} was found (tried: {tried:?}); reinstall @openai/codex with optional dependencies"
    )]
    NativeMissing {
        launcher: PathBuf,
        target: String,
        tried: Vec<PathBuf>,
    },
    /// The npm launcher supports no native build for this OS/architecture.
    #[error("{launcher} is the npm launcher, and it ships no native codex for {os}/{arch}")]
    UnsupportedPlatform {
        launcher: PathBuf,
        os: &'static str,
        arch: &'static str,
    },
    /// `codex --version` failed or printed no version.
    #[error("`{path} --version` failed: {message}")]
    Version { path: PathBuf, message: String },
}

impl CodexBin {
    /// The version, when [`CodexBin::detect_version`] found one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Runs `<bin> --version` with `CODEX_HOME=codex_home` (codex writes helper links under
    /// `$CODEX_HOME/tmp` even for `--version`, so this must not be the user's home), records the
    /// first `x.y.z` it prints and returns it.
    pub async fn detect_version(&mut self, codex_home: &Path) -> Result<String, FindError> {
        let version_error = |message: String| FindError::Version {
            path: self.path.clone(),
            message,
        };
        let mut command = Command::new(&self.path);
        command
            .arg("--version")
            .env("CODEX_HOME", codex_home)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
            .await
            .map_err(|_| version_error(format!("no answer within {VERSION_TIMEOUT:?}")))?
            .map_err(|err| version_error(err.to_string()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(version_error(format!(
                "{}: {}",
                output.status,
                stderr.trim()
            )));
        }
        let version = parse_version(&stdout)
            .ok_or_else(|| version_error(format!("no version in {:?}", stdout.trim())))?;
        self.version = Some(version.clone());
        Ok(version)
    }
}

/// The first `x.y.z` (digits and dots, three parts) in `text`, with any `-suffix` it carries.
fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|word| {
        let word = word.trim_start_matches('v');
        let core = word.split(['-', '+']).next()?;
        let parts: Vec<&str> = core.split('.').collect();
        let numeric = parts.len() == 3
            && parts
                .iter()
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
        numeric.then(|| word.to_owned())
    })
}

/// Finds the codex binary: `$COHOST_CODEX_BIN` if set, else the first executable `codex` on
/// `PATH`; an npm launcher is resolved to the native binary it wraps ([`resolve_codex_bin`]).
/// The version is not probed here; see [`CodexBin::detect_version`].
pub fn find_codex() -> Result<CodexBin, FindError> {
    find_codex_in(std::env::var_os(CODEX_BIN_ENV), std::env::var_os("PATH"))
}

fn find_codex_in(
    env_bin: Option<OsString>,
    path_var: Option<OsString>,
) -> Result<CodexBin, FindError> {
    if let Some(bin) = env_bin.filter(|bin| !bin.is_empty()) {
        return resolve_codex_bin(Path::new(&bin));
    }
    let path_var = path_var.ok_or(FindError::NotFound)?;
    std::env::split_paths(&path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("codex"))
        .find(|candidate| is_executable_file(candidate))
        .map_or(Err(FindError::NotFound), |found| resolve_codex_bin(&found))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Turns a `codex` path into the binary to spawn. A native binary is returned as is. The npm
/// launcher (`bin/codex.js` of `@openai/codex`, a script whose shebang runs `node`) is resolved
/// like the launcher itself does: the platform package `@openai/codex-<os>-<arch>` found by
/// node's module lookup from the launcher's real directory, then
/// `vendor/<target-triple>/bin/codex` inside it, falling back to the launcher package's own
/// `vendor/` directory. For 0.169.0 on x86_64 Linux that is
/// `…/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex`.
pub fn resolve_codex_bin(path: &Path) -> Result<CodexBin, FindError> {
    if !path.exists() {
        return Err(FindError::Missing {
            path: path.to_owned(),
        });
    }
    if !is_node_script(path)? {
        return Ok(CodexBin {
            path: path.to_owned(),
            version: None,
            package_root: None,
        });
    }
    let read_error = |source| FindError::Read {
        path: path.to_owned(),
        source,
    };
    let launcher = std::fs::canonicalize(path).map_err(read_error)?;
    let unsupported = || FindError::UnsupportedPlatform {
        launcher: launcher.clone(),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    };
    let (target, platform_package) =
        native_target(std::env::consts::OS, std::env::consts::ARCH).ok_or_else(unsupported)?;
    let bin_dir = launcher.parent().ok_or_else(unsupported)?;
    let package_root = bin_dir.parent().ok_or_else(unsupported)?.to_owned();

    let relative_binary = Path::new("vendor").join(target).join("bin").join("codex");
    let mut tried = Vec::new();
    // node's lookup: `<dir>/node_modules/<package>` for every ancestor that is not itself a
    // `node_modules` directory, nearest first.
    for dir in bin_dir.ancestors() {
        if dir.file_name().is_some_and(|name| name == "node_modules") {
            continue;
        }
        let package_dir = dir.join("node_modules").join(platform_package);
        if package_dir.join("package.json").is_file() {
            let candidate = package_dir.join(&relative_binary);
            if candidate.is_file() {
                return Ok(CodexBin {
                    path: candidate,
                    version: None,
                    package_root: Some(package_root),
                });
            }
            tried.push(candidate);
        }
    }
    let fallback = package_root.join(&relative_binary);
    if fallback.is_file() {
        return Ok(CodexBin {
            path: fallback,
            version: None,
            package_root: Some(package_root),
        });
    }
    tried.push(fallback);
    Err(FindError::NativeMissing {
        launcher,
        target: target.to_owned(),
        tried,
    })
}

/// The launcher's target triple and platform package for an OS/arch pair (its table, minus
/// Windows, which cohost does not run on).
fn native_target(os: &str, arch: &str) -> Option<(&'static str, &'static str)> {
    match (os, arch) {
        ("linux" | "android", "x86_64") => {
            Some(("x86_64-unknown-linux-musl", "@openai/codex-linux-x64"))
        }
        ("linux" | "android", "aarch64") => {
            Some(("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64"))
        }
        ("macos", "x86_64") => Some(("x86_64-apple-darwin", "@openai/codex-darwin-x64")),
        ("macos", "aarch64") => Some(("aarch64-apple-darwin", "@openai/codex-darwin-arm64")),
        _ => None,
    }
}

/// Whether the file starts with a `#!` line that mentions `node`.
fn is_node_script(path: &Path) -> Result<bool, FindError> {
    let read_error = |source| FindError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let mut head = [0u8; 256];
    let mut n_read = 0;
    while n_read < head.len() {
        match file.read(&mut head[n_read..]) {
            Ok(0) => break,
            Ok(n) => n_read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(read_error(err)),
        }
    }
    let head = &head[..n_read];
    let first_line = head.split(|byte| *byte == b'\n').next().unwrap_or_default();
    Ok(first_line.starts_with(b"#!") && first_line.windows(4).any(|window| window == b"node"))
}

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
    /// The WebSocket token file could not be read, or is empty.
    #[error("cannot read websocket token file {path}: {message}")]
    TokenFile { path: PathBuf, message: String },
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
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        set_parent_death_signal(&mut command);

        let mut child = command.spawn().map_err(|source| SpawnError::Spawn {
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
        let group_guard = KillGroupOnDrop {
            pgid: pid,
            armed: true,
        };
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
    group_guard.armed = false;
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

/// SIGKILLs a process group when dropped while armed.
struct KillGroupOnDrop {
    pgid: u32,
    armed: bool,
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

/// Sends `signal` to the process group `pgid` (the child's pid, as it leads its own group).
fn signal_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return; // never signal "every process" or init by accident
    }
    // `kill` with a negative pid signals the group; it is a plain syscall with no memory
    // safety concerns, which the libc crate nevertheless marks unsafe.
    #[allow(unsafe_code)]
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let result = unsafe { libc::kill(-pgid, signal) };
    if result == -1 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, signal, %err, "signalling codex process group failed");
        }
    }
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(command: &mut Command) {
    let parent_pid = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it calls prctl(2) and getppid(2) (plain syscalls), reads errno, and
    // builds an io::Error from a raw OS code — no allocation, no locks, nothing shared with
    // other threads of the parent. `parent_pid` is a copied integer.
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
            // The daemon may have died between fork and prctl; then no signal will ever come.
            if libc::getppid() != parent_pid {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}

fn read_token(path: &Path) -> Result<String, SpawnError> {
    let token_error = |message: String| SpawnError::TokenFile {
        path: path.to_owned(),
        message,
    };
    let token = std::fs::read_to_string(path).map_err(|err| token_error(err.to_string()))?;
    let token = token.trim();
    if token.is_empty() {
        return Err(token_error("the file is empty".to_owned()));
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
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::symlink;

    const WAIT: Duration = Duration::from_secs(10);

    /// Writes an executable script. The file is written by a `sh` child, not by this process:
    /// a file this process had open for writing could be inherited by a child another test is
    /// forking at that moment, and exec'ing it would then fail with ETXTBSY.
    fn write_executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                "printf '%s' \"$2\" > \"$1\" && chmod 755 \"$1\"",
                "sh",
            ])
            .arg(path)
            .arg(text)
            .status()
            .unwrap();
        assert!(status.success(), "writing {} failed", path.display());
    }

    /// Lays out an npm install like `npm install --prefix DIR @openai/codex` does; returns
    /// (`node_modules/.bin/codex`, the native binary).
    fn fake_npm_install(prefix: &Path, with_platform_package: bool) -> (PathBuf, PathBuf) {
        let (target, platform_package) =
            native_target(std::env::consts::OS, std::env::consts::ARCH).unwrap();
        let node_modules = prefix.join("node_modules");
        let launcher = node_modules.join("@openai/codex/bin/codex.js");
        write_executable(
            &launcher,
            "#!/usr/bin/env node\n// Unified entry point for the Codex CLI.\n",
        );
        std::fs::write(
            node_modules.join("@openai/codex/package.json"),
            r#"{"name":"@openai/codex"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(node_modules.join(".bin")).unwrap();
        symlink(
            "../@openai/codex/bin/codex.js",
            node_modules.join(".bin/codex"),
        )
        .unwrap();
        let native = if with_platform_package {
            let package = node_modules.join(platform_package);
            std::fs::create_dir_all(&package).unwrap();
            std::fs::write(package.join("package.json"), "{}").unwrap();
            package.join("vendor").join(target).join("bin/codex")
        } else {
            node_modules
                .join("@openai/codex/vendor")
                .join(target)
                .join("bin/codex")
        };
        write_executable(&native, "#!/bin/sh\necho 'codex-cli 9.8.7'\n");
        (node_modules.join(".bin/codex"), native)
    }

    #[test]
    fn npm_launcher_resolves_to_the_platform_package_binary() {
        let dir = tempfile::tempdir().unwrap();
        let (launcher, native) = fake_npm_install(dir.path(), true);
        let bin = resolve_codex_bin(&launcher).unwrap();
        assert_eq!(bin.path, std::fs::canonicalize(&native).unwrap());
        assert_eq!(
            bin.package_root,
            Some(std::fs::canonicalize(dir.path().join("node_modules/@openai/codex")).unwrap())
        );
        assert_eq!(bin.version, None);
    }

    #[test]
    fn npm_launcher_falls_back_to_its_own_vendor_dir() {
        let dir = tempfile::tempdir().unwrap();
        let (launcher, native) = fake_npm_install(dir.path(), false);
        let bin = resolve_codex_bin(&launcher).unwrap();
        assert_eq!(bin.path, std::fs::canonicalize(&native).unwrap());
    }

    #[test]
    fn npm_launcher_without_native_binary_is_an_error_naming_the_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (launcher, native) = fake_npm_install(dir.path(), true);
        std::fs::remove_file(&native).unwrap();
        let err = resolve_codex_bin(&launcher).unwrap_err();
        let FindError::NativeMissing { tried, .. } = &err else {
            panic!("expected NativeMissing, got {err:?}");
        };
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert!(err.to_string().contains("npm launcher"), "{err}");
    }

    #[test]
    fn native_binary_and_other_scripts_are_used_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("codex");
        write_executable(&script, "#!/bin/sh\nexec true\n");
        let bin = resolve_codex_bin(&script).unwrap();
        assert_eq!(bin.path, script);
        assert_eq!(bin.package_root, None);

        let elf = dir.path().join("codex-elf");
        std::fs::write(&elf, b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
        assert_eq!(resolve_codex_bin(&elf).unwrap().path, elf);

        assert!(matches!(
            resolve_codex_bin(&dir.path().join("nope")),
            Err(FindError::Missing { .. })
        ));
    }

    #[test]
    fn find_prefers_the_env_override_then_path() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("a/codex");
        let second = dir.path().join("b/codex");
        write_executable(&second, "#!/bin/sh\n");
        std::fs::create_dir_all(first.parent().unwrap()).unwrap();
        std::fs::write(&first, "not executable").unwrap();
        let path_var = std::env::join_paths([dir.path().join("a"), dir.path().join("b")]).unwrap();

        let found = find_codex_in(None, Some(path_var.clone())).unwrap();
        assert_eq!(found.path, second, "skips the non-executable one");

        let override_bin = dir.path().join("override");
        write_executable(&override_bin, "#!/bin/sh\n");
        let found = find_codex_in(Some(override_bin.clone().into()), Some(path_var)).unwrap();
        assert_eq!(found.path, override_bin);

        assert!(matches!(
            find_codex_in(None, Some(dir.path().join("empty").into())),
            Err(FindError::NotFound)
        ));
        assert!(matches!(
            find_codex_in(Some(dir.path().join("missing").into()), None),
            Err(FindError::Missing { .. })
        ));
    }

    #[tokio::test]
    async fn detect_version_runs_the_binary_with_the_given_home() {
        let dir = tempfile::tempdir().unwrap();
        let bin_path = dir.path().join("codex");
        write_executable(
            &bin_path,
            "#!/bin/sh\n[ \"$1\" = --version ] || exit 3\necho \"codex-cli 0.169.0 home=$CODEX_HOME\"\n",
        );
        let mut bin = resolve_codex_bin(&bin_path).unwrap();
        let version = bin.detect_version(dir.path()).await.unwrap();
        assert_eq!(version, "0.169.0");
        assert_eq!(bin.version(), Some("0.169.0"));

        write_executable(&bin_path, "#!/bin/sh\necho oops >&2\nexit 2\n");
        let err = bin.detect_version(dir.path()).await.unwrap_err();
        assert!(err.to_string().contains("oops"), "{err}");
    }

    #[test]
    fn parse_version_finds_the_semver() {
        assert_eq!(
            parse_version("codex-cli 0.169.0\n").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            parse_version("codex-cli v1.2.3-alpha.1").as_deref(),
            Some("1.2.3-alpha.1")
        );
        assert_eq!(parse_version("codex-cli dev"), None);
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let tail = StderrTail::new(3);
        for n in 0..5 {
            tail.push_line(&format!("line {n}"));
        }
        assert_eq!(tail.lines(), vec!["line 2", "line 3", "line 4"]);
        assert_eq!(tail.render(), "line 2\nline 3\nline 4");
        assert!(!tail.is_finished());
        tail.finish();
        assert!(tail.is_finished());
    }

    #[tokio::test]
    async fn stderr_drain_strips_colours_and_finishes_at_eof() {
        let (mut writer, reader) = tokio::io::duplex(1024);
        let tail = StderrTail::drain(reader, "test".into());
        writer
            .write_all(
                b"\x1b[2m2026-11-29T13:53:39Z\x1b[0m \x1b[31mERROR\x1b[0m no bwrap\nsecond\n",
            )
            .await
            .unwrap();
        drop(writer);
        assert!(tail.wait_finished(WAIT).await);
        assert_eq!(
            tail.lines(),
            vec!["2026-11-29T13:53:39Z ERROR no bwrap", "second"]
        );
    }

    #[test]
    fn banner_port_reads_the_listening_line() {
        assert_eq!(
            banner_port("  listening on: ws://127.0.0.1:40033"),
            Some(40033)
        );
        assert_eq!(banner_port("  readyz: http://127.0.0.1:40033/readyz"), None);
    }

    #[test]
    fn ws_token_is_random_hex_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let first = write_ws_token(&path).unwrap();
        let second = write_ws_token(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), second);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_token(&path).unwrap(), second);
    }

    fn fake_bin(dir: &Path, script: &str) -> CodexBin {
        let path = dir.join("fake-codex");
        write_executable(&path, script);
        resolve_codex_bin(&path).unwrap()
    }

    /// The supervisor, pipes and env plumbing, with a shell script standing in for codex.
    #[tokio::test]
    async fn spawn_stdio_round_trips_and_passes_env() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_bin(
            dir.path(),
            "#!/bin/sh\n\
             echo \"args=$* home=$CODEX_HOME extra=$EXTRA\" >&2\n\
             while read -r line; do\n\
               case \"$line\" in *initialized*) continue;; esac\n\
               echo '{\"id\":1,\"result\":{\"ok\":true}}'\n\
             done\n\
             echo 'stdin closed' >&2\n",
        );
        let home = dir.path().join("home");
        let (process, rpc, _incoming) = AppServerProcess::spawn(
            &bin,
            &home,
            Listen::Stdio,
            &["--strict-config".to_owned()],
            &[("EXTRA".to_owned(), "yes".to_owned())],
        )
        .await
        .unwrap();
        let result = tokio::time::timeout(WAIT, rpc.initialize("cohost-test", "0.0.0"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(result, json!({"ok": true}));

        let status = tokio::time::timeout(WAIT, process.shutdown(WAIT))
            .await
            .unwrap()
            .unwrap();
        // Either stdin EOF or SIGTERM ended it, well within the grace period.
        assert!(status.success() || status.code().is_none(), "{status}");
        let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
        assert!(reason.contains("EOF"), "{reason}");
        let stderr = process.stderr_tail().render();
        assert!(
            stderr.contains(&format!(
                "args=app-server --strict-config home={} extra=yes",
                home.display()
            )),
            "{stderr}"
        );
        assert!(matches!(
            rpc.request("model/list", json!({})).await,
            Err(RpcError::Closed { .. })
        ));
    }

    #[tokio::test]
    async fn shutdown_escalates_to_sigkill_for_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let bin = fake_bin(
            dir.path(),
            &format!(
                "#!/bin/sh\ntrap '' TERM\nsh -c 'trap \"\" TERM; exec sleep 300' &\necho $! > {}\nexec 0<&-\nwhile :; do sleep 1; done\n",
                pid_file.display()
            ),
        );
        let (process, rpc, _incoming) =
            AppServerProcess::spawn(&bin, dir.path(), Listen::Stdio, &[], &[])
                .await
                .unwrap();
        let deadline = Instant::now() + WAIT;
        let grandchild: i32 = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && let Ok(pid) = text.trim().parse()
            {
                break pid;
            }
            assert!(Instant::now() < deadline, "grandchild never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(process.try_status().is_none());

        let started = Instant::now();
        let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_millis(300)))
            .await
            .unwrap()
            .unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        assert!(tokio::time::timeout(WAIT, rpc.closed()).await.is_ok());
        // The grandchild shared the group and died with it.
        let deadline = Instant::now() + WAIT;
        while Path::new(&format!("/proc/{grandchild}")).exists()
            && !std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .unwrap_or_default()
                .contains(") Z")
        {
            assert!(
                Instant::now() < deadline,
                "grandchild {grandchild} survived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn dropping_the_handle_kills_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_bin(dir.path(), "#!/bin/sh\nexec sleep 300\n");
        let (process, rpc, _incoming) =
            AppServerProcess::spawn(&bin, dir.path(), Listen::Stdio, &[], &[])
                .await
                .unwrap();
        let pid = process.pid();
        assert!(pid > 0);
        drop(process);
        let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
        assert!(reason.contains("EOF"), "{reason}");
        let deadline = Instant::now() + WAIT;
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < deadline, "child {pid} survived its handle");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether `pid` is gone or a zombie (nobody may be left to reap it in a test process).
    fn is_dead(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.contains(") Z"))
    }

    #[test]
    fn dropping_the_runtime_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let bin = fake_bin(
            dir.path(),
            &format!(
                "#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n",
                pid_file.display()
            ),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (process, rpc, incoming) = runtime
            .block_on(AppServerProcess::spawn(
                &bin,
                dir.path(),
                Listen::Stdio,
                &[],
                &[],
            ))
            .unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        let grandchild: i32 = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && let Ok(pid) = text.trim().parse()
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "grandchild never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let leader = i32::try_from(process.pid()).unwrap();
        // The handle is still alive: only the supervisor task dies with the runtime.
        drop(runtime);
        while !(is_dead(leader) && is_dead(grandchild)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the group outlived the runtime"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        drop((process, rpc, incoming));
    }

    #[tokio::test]
    async fn websocket_child_that_exits_early_reports_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        write_ws_token(&token_file).unwrap();
        let bin = fake_bin(
            dir.path(),
            "#!/bin/sh\necho 'Error: approval_policy = \"untrusted\" is no longer supported' >&2\nexit 1\n",
        );
        let err = AppServerProcess::spawn(
            &bin,
            dir.path(),
            Listen::WebSocket {
                port: 0,
                token_file,
            },
            &[],
            &[],
        )
        .await
        .unwrap_err();
        let SpawnError::ExitedEarly { stderr_tail, .. } = &err else {
            panic!("expected ExitedEarly, got {err:?}");
        };
        assert!(stderr_tail.contains("no longer supported"), "{err}");
    }

    #[tokio::test]
    async fn websocket_spawn_needs_a_token_file() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_bin(dir.path(), "#!/bin/sh\nexit 0\n");
        let err = AppServerProcess::spawn(
            &bin,
            dir.path(),
            Listen::WebSocket {
                port: 0,
                token_file: dir.path().join("missing"),
            },
            &[],
            &[],
        )
        .await
        .unwrap_err();
        assert!(matches!(err, SpawnError::TokenFile { .. }), "{err:?}");
    }

    // ------------------------------------------------------------------ real codex

    /// The real codex (`scripts/test` installs the pinned npm package and exports this).
    fn real_codex_bin() -> PathBuf {
        match std::env::var_os("COHOST_TEST_CODEX_BIN") {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => panic!(
                "COHOST_TEST_CODEX_BIN is not set: run ./scripts/test (it installs the pinned \
                 @openai/codex and exports it), or export COHOST_TEST_CODEX_BIN=<path to codex> \
                 for a local cargo test"
            ),
        }
    }

    /// A CODEX_HOME that never reaches the network: a mock provider on a closed port and the
    /// plugin sync off (see the wire notes, §1).
    fn offline_home(dir: &Path) -> PathBuf {
        let home = dir.join("codex-home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.toml"),
            "model = \"mock-model\"\n\
             model_provider = \"mock\"\n\
             \n\
             [model_providers.mock]\n\
             name = \"mock\"\n\
             base_url = \"http://127.0.0.1:9/v1\"\n\
             wire_api = \"responses\"\n\
             \n\
             [features]\n\
             plugins = false\n",
        )
        .unwrap();
        home
    }

    async fn initialize_and_list_models(rpc: &RpcClient, what: &str) {
        let init = tokio::time::timeout(WAIT, rpc.initialize("cohost-test", "0.1.0"))
            .await
            .unwrap_or_else(|_| panic!("{what}: initialize timed out"))
            .unwrap_or_else(|err| panic!("{what}: initialize failed: {err}"));
        let user_agent = init["userAgent"].as_str().unwrap_or_default();
        assert!(user_agent.starts_with("cohost-test/"), "{what}: {init}");
        let models = tokio::time::timeout(WAIT, rpc.request("model/list", json!({})))
            .await
            .unwrap_or_else(|_| panic!("{what}: model/list timed out"))
            .unwrap_or_else(|err| panic!("{what}: model/list failed: {err}"));
        let data = models["data"].as_array().cloned().unwrap_or_default();
        assert!(!data.is_empty(), "{what}: empty model list: {models}");
        assert!(data[0]["id"].is_string(), "{what}: {models}");
    }

    #[tokio::test]
    async fn real_npm_launcher_resolves_to_the_native_binary() {
        let launcher = real_codex_bin();
        let mut bin = resolve_codex_bin(&launcher).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let version = bin.detect_version(dir.path()).await.unwrap();
        assert!(parse_version(&version).is_some(), "{version}");
        if is_node_script(&launcher).unwrap() {
            let (target, platform_package) =
                native_target(std::env::consts::OS, std::env::consts::ARCH).unwrap();
            let expected_tail = Path::new("node_modules")
                .join(platform_package)
                .join("vendor")
                .join(target)
                .join("bin/codex");
            assert!(
                bin.path.ends_with(&expected_tail),
                "{} does not end with {}",
                bin.path.display(),
                expected_tail.display()
            );
            assert!(!is_node_script(&bin.path).unwrap());
            assert!(bin.package_root.is_some());
        }
    }

    #[tokio::test]
    async fn real_codex_app_server_over_stdio_and_websocket() {
        let bin = resolve_codex_bin(&real_codex_bin()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let home = offline_home(dir.path());

        // stdio
        let (process, rpc, _incoming) =
            AppServerProcess::spawn(&bin, &home, Listen::Stdio, &[], &[])
                .await
                .unwrap();
        initialize_and_list_models(&rpc, "stdio").await;
        let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_secs(3)))
            .await
            .expect("stdio app-server did not stop");
        assert!(status.is_some(), "stdio exit status unknown");
        tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();

        // WebSocket with a capability token, on a port codex picks.
        let token_file = dir.path().join("ws-token");
        let token = write_ws_token(&token_file).unwrap();
        let (process, rpc, _incoming) = AppServerProcess::spawn(
            &bin,
            &home,
            Listen::WebSocket {
                port: 0,
                token_file,
            },
            &[],
            &[],
        )
        .await
        .unwrap_or_else(|err| panic!("websocket spawn failed: {err}"));
        let url = process.ws_url().unwrap().to_owned();
        initialize_and_list_models(&rpc, "websocket").await;

        // A second client with the token shares the server; one without it is refused.
        let (second, _second_incoming) = RpcClient::connect_ws(&url, Some(&token)).await.unwrap();
        initialize_and_list_models(&second, "second websocket client").await;
        let refused = RpcClient::connect_ws(&url, None).await.unwrap_err();
        assert!(
            matches!(&refused, RpcError::Handshake { message, .. } if message.contains("401")),
            "{refused:?}"
        );
        let refused = RpcClient::connect_ws(&url, Some("wrong-token"))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, RpcError::Handshake { message, .. } if message.contains("401")),
            "{refused:?}"
        );

        let status = tokio::time::timeout(WAIT, process.shutdown(Duration::from_secs(3)))
            .await
            .expect("websocket app-server did not stop");
        assert!(status.is_some(), "websocket exit status unknown");
        let reason = tokio::time::timeout(WAIT, rpc.closed()).await.unwrap();
        assert!(!reason.is_empty());
    }
}
