//! What the benchmarks share: the runtime around their `run`, a `cohost serve` process
//! ([`Daemon`], started on a [`crate::TmuxServer`]), an HTTP/1.1 connection (and [`Conn`], one
//! with the daemon's token: requests whose status is checked, sessions created and timed),
//! lines of a streamed body stamped with their arrival ([`read_lines_until`]), failure counting
//! and report helpers, and the CPU use of the machine ([`CpuUse`]).
//!
//! The benches (`benches/*.rs`, each its own `harness = false` binary) use only part of it. Unlike
//! [`crate::TestDaemon`], [`Daemon`] reports errors instead of panicking, leaves the daemon's
//! logging as the caller's environment sets it and sends its stderr to a file, so that what is
//! measured is the daemon, not the harness.
//!
//! Bench code reports errors rather than panicking, so the crate's test-code allowance does not
//! hold here.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::TmuxServer;
use crate::mock_messages::now_ns;

/// Runs `run` to its end on a multi-threaded tokio runtime and turns its outcome into the exit
/// code: `Ok(false)` is a failed run (`failed` says where to look), `Err` an aborted one. On
/// Ctrl-C or SIGTERM, dropping `run` drops its fixtures, which stop the daemons and the private
/// tmux server (tmux daemonizes, so nothing else would). `bench` names the benchmark in messages.
///
/// `cargo bench` passes `--bench` (and any filter); the benchmarks have a single fixed plan.
pub fn main(
    bench: &str,
    failed: &str,
    run: impl Future<Output = anyhow::Result<bool>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{bench} bench: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run => outcome,
            signal = interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
        }
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{bench} bench: FAILED ({failed})");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("{bench} bench: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
            _ = interrupt.recv() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

// ---------------------------------------------------------------------------------------------
// the daemon

/// `cohost serve` (`cohost` is the build `cargo bench` made: the bench's
/// `env!("CARGO_BIN_EXE_cohost")`) on a free loopback port against `tmux`; the caller adds its
/// own arguments and environment, then passes it to [`Daemon::start`].
pub fn serve_command(cohost: &Path, tmux: &TmuxServer) -> Command {
    let mut command = Command::new(cohost);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--tmux-socket"])
        .arg(tmux.socket())
        // The passive watchers would read the developer's own agents' files: off, unless the
        // caller turns them on.
        .env("COHOST_WATCHERS", "none");
    command
}

/// One running `cohost serve`, killed on drop unless [`Daemon::stop`] stopped it.
pub struct Daemon {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// The `Host` header for requests to it.
    pub host: String,
    pub token: String,
    stderr_path: PathBuf,
}

impl Daemon {
    /// Spawns `command` (from [`serve_command`]) with `COHOST_HOME=home` (and XDG_CONFIG_HOME an
    /// empty directory, unless `command` sets it) and its stderr appended to `stderr_path`, reads
    /// the address it announces on stdout, then its token.
    pub fn start(
        mut command: Command,
        home: &Path,
        stderr_path: PathBuf,
    ) -> anyhow::Result<Daemon> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)?;
        // No config file: the developer's own would change what is measured. A caller that
        // sets XDG_CONFIG_HOME itself (for a peer's own config) keeps it: cohost's would be
        // `cohost/config.toml` under it.
        if !command
            .get_envs()
            .any(|(name, value)| name == "XDG_CONFIG_HOME" && value.is_some())
        {
            command.env("XDG_CONFIG_HOME", home.join("no-config"));
        }
        let mut child = command
            .env("COHOST_HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("failed to start cohost serve")?;
        let stdout = child.stdout.take();
        let mut daemon = Daemon {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            host: String::new(),
            token: String::new(),
            stderr_path,
        };
        let mut line = String::new();
        if let Some(stdout) = stdout {
            BufReader::new(stdout).read_line(&mut line)?;
        }
        let Some(addr) = line.trim().strip_prefix("cohost listening on ") else {
            bail!(
                "cohost serve did not announce its address (stdout: {line:?}); stderr:\n{}",
                daemon.stderr_tail()
            );
        };
        daemon.addr = addr
            .parse()
            .with_context(|| format!("bad address {addr:?}"))?;
        daemon.host = daemon.addr.to_string();
        daemon.token = std::fs::read_to_string(home.join("token"))?
            .trim()
            .to_string();
        Ok(daemon)
    }

    /// The process id; 0 once stopped.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The last 20 lines the daemon wrote to its stderr file.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM and wait for the graceful shutdown, which must exit 0; SIGKILL if it takes
    /// longer than `grace` (whole seconds).
    pub fn stop(&mut self, grace: Duration) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!(
                        "cohost serve exited with {status}; stderr:\n{}",
                        self.stderr_tail()
                    );
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "cohost serve did not stop within {} s of SIGTERM",
                    grace.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Opens one keep-alive HTTP/1.1 connection to `addr` (TCP_NODELAY), its driver spawned.
pub async fn handshake(addr: SocketAddr) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// One keep-alive HTTP/1.1 connection to a [`Daemon`], with its token.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    bearer: String,
    /// How long a [`Conn::call`] may wait for the whole answer.
    timeout: Duration,
}

impl Conn {
    /// Connects to `daemon` ([`handshake`]); a call gets `timeout` for its whole answer.
    pub async fn open(daemon: &Daemon, timeout: Duration) -> anyhow::Result<Conn> {
        Ok(Conn {
            sender: handshake(daemon.addr).await?,
            host: daemon.host.clone(),
            bearer: format!("Bearer {}", daemon.token),
            timeout,
        })
    }

    /// Sends a request (`body` as JSON) and returns the response as its headers arrive.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<hyper::Response<Incoming>> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.host)
            .header(AUTHORIZATION, &self.bearer);
        let body = match body {
            Some(body) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(body.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        self.sender.ready().await?;
        Ok(self.sender.send_request(request.body(body)?).await?)
    }

    /// A request whose answer must have status `expect`; returns the JSON body.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        expect: StatusCode,
    ) -> anyhow::Result<Value> {
        let what = format!("{method} {path}");
        let timeout = self.timeout;
        let exchange = async {
            let response = self.send(method, path, body).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .with_context(|| format!("{what}: no answer within {timeout:?}"))??;
        if status != expect {
            bail!(
                "{what} answered {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
        serde_json::from_slice(&bytes).with_context(|| format!("{what}: the answer is not JSON"))
    }

    /// `POST /api/sessions` with `body`, timed from the request to the whole 201 answer.
    /// Returns the answer and the time.
    pub async fn create_timed(&mut self, body: &Value) -> anyhow::Result<(Value, Duration)> {
        let started = Instant::now();
        let answer = self
            .call(
                Method::POST,
                "/api/sessions",
                Some(body),
                StatusCode::CREATED,
            )
            .await?;
        Ok((answer, started.elapsed()))
    }

    /// Closes each session of `ids` (`DELETE /api/sessions/{id}`).
    pub async fn close_sessions(&mut self, ids: &[String]) -> anyhow::Result<()> {
        for id in ids {
            self.call(
                Method::DELETE,
                &format!("/api/sessions/{id}"),
                None,
                StatusCode::OK,
            )
            .await?;
        }
        Ok(())
    }
}

/// The id of the session in a create's answer.
pub fn session_id(answer: &Value) -> anyhow::Result<String> {
    Ok(answer["session"]["id"]
        .as_str()
        .with_context(|| format!("no session id in {answer}"))?
        .to_string())
}

/// The body of an SSE stream's response (`what` is its request, for the error), which must be
/// 200: by the time its headers arrive, the daemon has subscribed the stream.
pub async fn stream_body(
    response: hyper::Response<Incoming>,
    what: &str,
) -> anyhow::Result<Incoming> {
    if response.status() != StatusCode::OK {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        bail!("{what}: {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(response.into_body())
}

/// Reads a streamed body line by line (each without its `\n`), stamping every line with the
/// arrival ([`now_ns`]) of the frame that completed it, until `on_line` returns something
/// (returned) or fails; `None` when the body ends first.
pub async fn read_lines_until<T>(
    mut body: Incoming,
    mut on_line: impl FnMut(i64, &[u8]) -> anyhow::Result<Option<T>>,
) -> anyhow::Result<Option<T>> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let Some(frame) = body.frame().await else {
            return Ok(None);
        };
        let received = now_ns();
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        let mut start = 0;
        while let Some(end) = buf[start..].iter().position(|b| *b == b'\n') {
            let line = &buf[start..start + end];
            start += end + 1;
            if let Some(found) = on_line(received, line)? {
                return Ok(Some(found));
            }
        }
        buf.drain(..start);
    }
}

// ---------------------------------------------------------------------------------------------
// failures and figures

/// Failures across the run: counted, and the first few kept for the report.
pub struct Failures {
    count: AtomicU64,
    keep: usize,
    samples: std::sync::Mutex<Vec<String>>,
}

impl Failures {
    /// Keeps the first `keep` failures' descriptions.
    pub fn new(keep: usize) -> Failures {
        Failures {
            count: AtomicU64::new(0),
            keep,
            samples: std::sync::Mutex::default(),
        }
    }

    pub fn record(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() < self.keep {
            samples.push(what);
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The descriptions kept, oldest first.
    pub fn first(&self) -> Vec<String> {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `values`, sorted.
pub fn sorted(values: &[Duration]) -> Vec<Duration> {
    let mut values = values.to_vec();
    values.sort_unstable();
    values
}

/// The `p`th percentile (nearest rank) of `sorted`; zero when it is empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// The number of CPUs this process may use; 0 when unknown.
pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0)
}

/// The 1/5/15-minute load averages: other work on the machine skews every figure here.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// CPU time in clock ticks: the whole machine (`/proc/stat`) and this bench plus the daemon,
/// so that a run disturbed by other work on the machine says so.
#[derive(Clone, Copy)]
pub struct CpuUse {
    pub total: u64,
    pub busy: u64,
    pub ours: u64,
}

impl CpuUse {
    /// Now; `ours` counts this process and the daemon `daemon` if given. None when a figure
    /// cannot be read.
    pub fn sample(daemon: Option<u32>) -> Option<CpuUse> {
        let (total, busy) = machine_ticks()?;
        let mut ours = process_ticks(std::process::id())?;
        if let Some(pid) = daemon {
            ours += process_ticks(pid)?;
        }
        Some(CpuUse { total, busy, ours })
    }

    /// Now; `ours` counts this process and every process under it (the daemons, the peers they
    /// run, and the children each has waited for).
    pub fn sample_tree() -> Option<CpuUse> {
        let (total, busy) = machine_ticks()?;
        let times = |pid: u32| -> Option<(u32, u64)> {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = text.rsplit_once(')')?.1.to_owned();
            let f: Vec<&str> = after.split_whitespace().collect();
            let ppid = f.get(1)?.parse().ok()?;
            // utime, stime, cutime, cstime.
            let sum = (11..=14)
                .map(|i| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
                .sum();
            Some((ppid, sum))
        };
        let me = std::process::id();
        let mut parents = std::collections::HashMap::new();
        let mut cpu = std::collections::HashMap::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok())
                && let Some((ppid, sum)) = times(pid)
            {
                parents.insert(pid, ppid);
                cpu.insert(pid, sum);
            }
        }
        let ours: u64 = cpu
            .iter()
            .filter(|(pid, _)| {
                let mut pid = **pid;
                for _ in 0..64 {
                    if pid == me {
                        return true;
                    }
                    match parents.get(&pid) {
                        Some(&parent) if parent != 0 => pid = parent,
                        _ => return false,
                    }
                }
                false
            })
            .map(|(_, sum)| *sum)
            .sum();
        Some(CpuUse { total, busy, ours })
    }

    /// How many CPUs other processes kept busy on average between `start` and `end`.
    pub fn others(start: Option<CpuUse>, end: Option<CpuUse>, cpus: usize) -> String {
        match (start, end) {
            (Some(start), Some(end)) if end.total > start.total => {
                let busy = end.busy.saturating_sub(start.busy);
                let ours = end.ours.saturating_sub(start.ours);
                let elapsed = (end.total - start.total) as f64 / cpus.max(1) as f64;
                format!(
                    "{:.2} of {cpus} CPUs busy with other processes",
                    busy.saturating_sub(ours) as f64 / elapsed
                )
            }
            _ => "CPU use by other processes unknown".into(),
        }
    }
}

/// Clock ticks per second of `/proc`'s CPU times: Linux's USER_HZ, 100 on every architecture
/// cohost runs on (the ABI fixes it; `getconf CLK_TCK`).
pub const TICKS_PER_SEC: f64 = 100.0;

/// Process `pid`'s CPU time (`/proc/<pid>/stat`: utime + stime) in clock ticks; None when it
/// cannot be read.
pub fn process_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after `(comm)`: utime and stime are the 12th and 13th.
    let after = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The machine's CPU time in clock ticks (`/proc/stat`): all of it, and the busy part.
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4)?;
    Some((total, total.saturating_sub(idle)))
}
