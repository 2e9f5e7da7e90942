//! End-to-end ingest benchmark for `cohost serve`: `cargo bench --bench ingest`.
//!
//! Starts the real (release) daemon with a temporary `COHOST_HOME` against a private tmux server
//! on a temporary socket, then measures over keep-alive HTTP/1.1 connections:
//!
//! 1. `POST /api/agent-event` throughput at concurrency 1, 8 and 64 (fsync always, the default);
//! 2. POST→SSE delivery latency with 1 and with 100 subscribers on `/api/events/stream`;
//! 3. the daemon's VmRSS idle after start and after 100,000 events.
//!
//! Exits non-zero if any request fails (non-200, transport error) or an SSE subscriber misses an
//! event. See `docs/benchmarks.md`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

const SESSION: &str = "bench";
const THROUGHPUT_LEVELS: [usize; 3] = [1, 8, 64];
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);
const LATENCY_SAMPLES: usize = 1000;
const LATENCY_GAP: Duration = Duration::from_millis(2);
const SUBSCRIBER_LEVELS: [usize; 2] = [1, 100];
const RSS_EVENTS: u64 = 100_000;
/// How long subscribers get to deliver the last events after the sender has finished.
const DELIVERY_GRACE: Duration = Duration::from_secs(10);

const TARGET_EVENTS_PER_SEC: f64 = 10_000.0;
const TARGET_P99: Duration = Duration::from_millis(5);

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and any filter); this benchmark has a single fixed plan.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ingest bench: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // On Ctrl-C or SIGTERM, dropping `run` drops its `Fixture`, which stops the daemon and the
    // private tmux server (tmux daemonizes, so nothing else would).
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run() => outcome,
            signal = interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
        }
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("ingest bench: FAILED (requests or deliveries failed, see above)");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("ingest bench: FAILED: {error:#}");
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

/// Everything that must be torn down: the daemon, the tmux server and the temp directory.
struct Fixture {
    dir: tempfile::TempDir,
    socket: PathBuf,
    daemon: Option<Child>,
    addr: SocketAddr,
    token: String,
    host: String,
}

impl Fixture {
    fn start() -> anyhow::Result<Fixture> {
        let dir = tempfile::Builder::new().prefix("cohost-bench").tempdir()?;
        let socket = dir.path().join("tmux.sock");
        let home = dir.path().join("home");
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", SESSION])
            .env_remove("TMUX")
            .status()
            .context("failed to run tmux (is it installed?)")?;
        if !status.success() {
            bail!("tmux new-session failed: {status}");
        }
        let mut fixture = Fixture {
            dir,
            socket,
            daemon: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: String::new(),
            host: String::new(),
        };
        let stderr = std::fs::File::create(fixture.stderr_path())?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_cohost"))
            .args(["serve", "--listen", "127.0.0.1:0", "--tmux-socket"])
            .arg(&fixture.socket)
            .env("COHOST_HOME", &home)
            .env_remove("COHOST_FSYNC")
            .env_remove("COHOST_LISTEN")
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("failed to start cohost serve")?;
        let stdout = child.stdout.take();
        fixture.daemon = Some(child);
        let mut line = String::new();
        if let Some(stdout) = stdout {
            BufReader::new(stdout).read_line(&mut line)?;
        }
        let Some(addr) = line.trim().strip_prefix("cohost listening on ") else {
            bail!(
                "cohost serve did not announce its address (stdout: {line:?}); stderr:\n{}",
                fixture.stderr_tail()
            );
        };
        fixture.addr = addr
            .parse()
            .with_context(|| format!("bad address {addr:?}"))?;
        fixture.host = fixture.addr.to_string();
        fixture.token = std::fs::read_to_string(home.join("token"))?
            .trim()
            .to_string();
        Ok(fixture)
    }

    fn pid(&self) -> u32 {
        self.daemon.as_ref().map(Child::id).unwrap_or(0)
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.path().join("daemon.stderr")
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(self.stderr_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM and wait for the graceful shutdown; SIGKILL if it takes too long.
    fn stop_daemon(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.daemon.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
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
                bail!("cohost serve did not stop within 15 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .env_remove("TMUX")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn rss_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

async fn connect(addr: SocketAddr, host: &str) -> anyhow::Result<Conn> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Conn {
        sender,
        host: host.to_string(),
    })
}

fn event_body(thread: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"agent":"bench","status":"running","tmuxSession":"{SESSION}","threadId":"{thread}"}}"#
    ))
}

impl Conn {
    /// POSTs one agent event; the status and the whole response body.
    async fn post_event(&mut self, body: Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = Request::post("/api/agent-event")
            .header(HOST, &self.host)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

fn parse_seq(body: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    if value.get("ok")?.as_bool()? {
        value.get("seq")?.as_u64()
    } else {
        None
    }
}

/// Failures across the run: counted, and the first few kept for the report.
#[derive(Default)]
struct Failures {
    count: AtomicU64,
    samples: std::sync::Mutex<Vec<String>>,
}

impl Failures {
    fn record(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() < 5 {
            samples.push(what);
        }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

struct ThroughputRow {
    concurrency: usize,
    events: u64,
    seconds: f64,
    p50: Duration,
    p99: Duration,
    failed: u64,
}

/// Runs `concurrency` workers, each on its own keep-alive connection, posting back to back:
/// `warmup` unmeasured, then `measure` counted. Only requests that complete 200 count.
async fn throughput(
    fixture: &Fixture,
    concurrency: usize,
    warmup: Duration,
    measure: Duration,
    posted: &Arc<AtomicU64>,
    failures: &Arc<Failures>,
) -> anyhow::Result<ThroughputRow> {
    let mut conns = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        conns.push(connect(fixture.addr, &fixture.host).await?);
    }
    let failed_before = failures.count();
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + warmup;
    let measure_to = measure_from + measure;
    let mut workers = Vec::with_capacity(concurrency);
    for (worker, mut conn) in conns.into_iter().enumerate() {
        let posted = Arc::clone(posted);
        let failures = Arc::clone(failures);
        workers.push(tokio::spawn(async move {
            let body = event_body(&format!("c{concurrency}-w{worker}"));
            let mut latencies = Vec::new();
            tokio::time::sleep_until(start.into()).await;
            loop {
                let sent = Instant::now();
                if sent >= measure_to {
                    break;
                }
                match conn.post_event(body.clone()).await {
                    Ok((StatusCode::OK, _)) => {
                        posted.fetch_add(1, Ordering::Relaxed);
                        let done = Instant::now();
                        if sent >= measure_from && done <= measure_to {
                            latencies.push(done - sent);
                        }
                    }
                    Ok((status, body)) => failures.record(format!(
                        "POST /api/agent-event: {status}: {}",
                        String::from_utf8_lossy(&body)
                    )),
                    Err(error) => {
                        failures.record(format!("POST /api/agent-event: {error:#}"));
                        break;
                    }
                }
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await?);
    }
    latencies.sort_unstable();
    Ok(ThroughputRow {
        concurrency,
        events: latencies.len() as u64,
        seconds: measure.as_secs_f64(),
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        failed: failures.count() - failed_before,
    })
}

struct LatencyRow {
    subscribers: usize,
    events: usize,
    samples: usize,
    missing: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// Opens one SSE stream and returns its body once the response headers arrive (by then the
/// daemon has subscribed to the live broadcast).
async fn open_stream(fixture: &Fixture) -> anyhow::Result<(Conn, Incoming)> {
    let mut conn = connect(fixture.addr, &fixture.host).await?;
    let request = Request::get("/api/events/stream")
        .header(HOST, &conn.host)
        .header(AUTHORIZATION, format!("Bearer {}", fixture.token))
        .body(Full::new(Bytes::new()))?;
    conn.sender.ready().await?;
    let response = conn.sender.send_request(request).await?;
    if response.status() != StatusCode::OK {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        bail!(
            "GET /api/events/stream: {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok((conn, response.into_body()))
}

/// Reads SSE frames, timestamping each `data:` line with the seq of the `id:` before it,
/// until the sender's last seq (sent through `last`) has been seen.
async fn subscriber(
    body: Incoming,
    mut last: tokio::sync::watch::Receiver<Option<u64>>,
) -> anyhow::Result<Vec<(u64, Instant)>> {
    let mut body = body;
    let mut seen = Vec::with_capacity(LATENCY_SAMPLES + 16);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut id: Option<u64> = None;
    let mut newest = 0u64;
    loop {
        if let Some(last) = *last.borrow()
            && newest >= last
        {
            return Ok(seen);
        }
        tokio::select! {
            frame = body.frame() => {
                let now = Instant::now();
                let Some(frame) = frame else { bail!("the SSE stream ended early") };
                let Ok(data) = frame?.into_data() else { continue };
                buf.extend_from_slice(&data);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line = &buf[..end];
                    if let Some(rest) = line.strip_prefix(b"id:") {
                        id = std::str::from_utf8(rest).ok().and_then(|s| s.trim().parse().ok());
                    } else if line.starts_with(b"data:")
                        && let Some(seq) = id.take()
                    {
                        seen.push((seq, now));
                        newest = newest.max(seq);
                    }
                    buf.drain(..=end);
                }
            }
            changed = last.changed() => {
                if changed.is_err() {
                    bail!("the sender went away");
                }
            }
        }
    }
}

/// `subscribers` SSE streams; one sender posts `LATENCY_SAMPLES` events one at a time with a
/// `LATENCY_GAP` pause; latency = POST sent → `data:` line read, per (subscriber, event).
async fn delivery_latency(
    fixture: &Fixture,
    subscribers: usize,
    posted: &Arc<AtomicU64>,
    failures: &Arc<Failures>,
) -> anyhow::Result<LatencyRow> {
    let (last_tx, last_rx) = tokio::sync::watch::channel(None);
    let mut tasks = Vec::with_capacity(subscribers);
    let mut stream_conns = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let (conn, body) = open_stream(fixture).await?;
        stream_conns.push(conn);
        tasks.push(tokio::spawn(subscriber(body, last_rx.clone())));
    }
    let mut sender = connect(fixture.addr, &fixture.host).await?;
    let body = event_body("latency");
    // A few unmeasured events first so that every path is warm.
    for _ in 0..20 {
        let (status, _) = sender.post_event(body.clone()).await?;
        if status == StatusCode::OK {
            posted.fetch_add(1, Ordering::Relaxed);
        } else {
            failures.record(format!("POST /api/agent-event (warm-up): {status}"));
        }
    }
    let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(LATENCY_SAMPLES);
    let mut last_seq = 0;
    for _ in 0..LATENCY_SAMPLES {
        let sent = Instant::now();
        match sender.post_event(body.clone()).await {
            Ok((StatusCode::OK, response)) => match parse_seq(&response) {
                Some(seq) => {
                    posted.fetch_add(1, Ordering::Relaxed);
                    sent_at.insert(seq, sent);
                    last_seq = last_seq.max(seq);
                }
                None => failures.record(format!(
                    "POST /api/agent-event: 200 without a seq: {}",
                    String::from_utf8_lossy(&response)
                )),
            },
            Ok((status, response)) => failures.record(format!(
                "POST /api/agent-event: {status}: {}",
                String::from_utf8_lossy(&response)
            )),
            Err(error) => {
                failures.record(format!("POST /api/agent-event: {error:#}"));
                break;
            }
        }
        tokio::time::sleep(LATENCY_GAP).await;
    }
    let _ = last_tx.send(Some(last_seq));
    let deadline = tokio::time::Instant::now() + DELIVERY_GRACE;
    let mut latencies = Vec::with_capacity(subscribers * sent_at.len());
    let mut missing = 0;
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(Ok(seen))) => {
                let mut matched = 0;
                for (seq, at) in seen {
                    if let Some(sent) = sent_at.get(&seq) {
                        latencies.push(at.saturating_duration_since(*sent));
                        matched += 1;
                    }
                }
                missing += sent_at.len().saturating_sub(matched);
            }
            Ok(Ok(Err(error))) => {
                failures.record(format!("SSE subscriber: {error:#}"));
                missing += sent_at.len();
            }
            Ok(Err(join)) => bail!("SSE subscriber panicked: {join}"),
            Err(_) => {
                abort.abort();
                failures.record(format!(
                    "SSE subscriber: not all events within {DELIVERY_GRACE:?}"
                ));
                missing += sent_at.len();
            }
        }
    }
    if missing > 0 {
        failures.record(format!(
            "SSE: {missing} (subscriber, event) deliveries missing"
        ));
    }
    drop(stream_conns);
    latencies.sort_unstable();
    Ok(LatencyRow {
        subscribers,
        events: sent_at.len(),
        samples: latencies.len(),
        missing,
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        max: latencies.last().copied().unwrap_or_default(),
    })
}

/// Posts at concurrency 64 until `posted` reaches `total`.
async fn fill_to(
    fixture: &Fixture,
    total: u64,
    posted: &Arc<AtomicU64>,
    failures: &Arc<Failures>,
) -> anyhow::Result<()> {
    let mut workers = Vec::new();
    for worker in 0..64 {
        let mut conn = connect(fixture.addr, &fixture.host).await?;
        let posted = Arc::clone(posted);
        let failures = Arc::clone(failures);
        workers.push(tokio::spawn(async move {
            let body = event_body(&format!("fill-w{worker}"));
            // Claim a slot before posting so that exactly `total` are posted; give it back
            // when the post is not made or fails. A failure fails the run: stop, don't retry.
            loop {
                if posted.fetch_add(1, Ordering::Relaxed) >= total {
                    posted.fetch_sub(1, Ordering::Relaxed);
                    break;
                }
                let failure = match conn.post_event(body.clone()).await {
                    Ok((StatusCode::OK, _)) => continue,
                    Ok((status, body)) => format!(
                        "POST /api/agent-event: {status}: {}",
                        String::from_utf8_lossy(&body)
                    ),
                    Err(error) => format!("POST /api/agent-event: {error:#}"),
                };
                posted.fetch_sub(1, Ordering::Relaxed);
                failures.record(failure);
                break;
            }
        }));
    }
    for worker in workers {
        worker.await?;
    }
    Ok(())
}

async fn health_seq(fixture: &Fixture) -> anyhow::Result<u64> {
    let mut conn = connect(fixture.addr, &fixture.host).await?;
    let request = Request::get("/api/health")
        .header(HOST, &conn.host)
        .body(Full::new(Bytes::new()))?;
    conn.sender.ready().await?;
    let response = conn.sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if status != StatusCode::OK {
        bail!("GET /api/health: {status}");
    }
    let value: serde_json::Value = serde_json::from_slice(&body)?;
    value
        .get("seq")
        .and_then(serde_json::Value::as_u64)
        .context("GET /api/health without a seq")
}

/// The 1/5/15-minute load averages: other work on the machine skews every figure here.
fn loadavg() -> String {
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
struct CpuUse {
    total: u64,
    busy: u64,
    ours: u64,
}

impl CpuUse {
    fn sample(daemon: u32) -> Option<CpuUse> {
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
        let process = |path: String| -> Option<u64> {
            let text = std::fs::read_to_string(path).ok()?;
            // Fields after the `(comm)`: state is the 3rd field, utime and stime the 14th and 15th.
            let after = text.rsplit_once(')')?.1;
            let fields: Vec<&str> = after.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        };
        let ours = process("/proc/self/stat".into())? + process(format!("/proc/{daemon}/stat"))?;
        Some(CpuUse {
            total,
            busy: total.saturating_sub(idle),
            ours,
        })
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn log_bytes(home: &Path) -> u64 {
    std::fs::read_dir(home.join("log"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

async fn run() -> anyhow::Result<bool> {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let started = Instant::now();
    let mut fixture = Fixture::start()?;
    let pid = fixture.pid();
    let cpu_start = CpuUse::sample(pid);
    println!(
        "cohost ingest benchmark: daemon pid {pid} on {} ({cpus} CPUs, fsync=always, release build)",
        fixture.addr
    );
    println!("load average at start: {}", loadavg());
    let posted = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Failures::default());

    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss_idle, _) = rss_kib(pid)?;

    // Memory first, on a known count: exactly RSS_EVENTS events at concurrency 64. This also
    // fills the in-memory ring (65,536 events), so the timed runs below see the steady state.
    let fill_started = Instant::now();
    fill_to(&fixture, RSS_EVENTS, &posted, &failures).await?;
    let fill_secs = fill_started.elapsed().as_secs_f64();
    let filled = posted.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss_filled, _) = rss_kib(pid)?;

    let mut rows = Vec::new();
    for concurrency in THROUGHPUT_LEVELS {
        rows.push(throughput(&fixture, concurrency, WARMUP, MEASURE, &posted, &failures).await?);
    }

    let mut latency_rows = Vec::new();
    for subscribers in SUBSCRIBER_LEVELS {
        latency_rows.push(delivery_latency(&fixture, subscribers, &posted, &failures).await?);
    }

    let total_posted = posted.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss_end, hwm) = rss_kib(pid)?;
    let cpu_end = CpuUse::sample(pid);
    let head = health_seq(&fixture).await?;
    let log_size = log_bytes(&fixture.dir.path().join("home"));

    // ---- report ----
    println!();
    println!(
        "POST /api/agent-event throughput (keep-alive, one connection per worker, fsync always;"
    );
    println!(
        "  {:.1} s warm-up then {:.0} s measured; target >= {TARGET_EVENTS_PER_SEC:.0}/s at concurrency 64)",
        WARMUP.as_secs_f64(),
        MEASURE.as_secs_f64()
    );
    println!(
        "  {:>11}  {:>8}  {:>10}  {:>12}  {:>12}  {:>7}",
        "concurrency", "events", "events/s", "POST p50 ms", "POST p99 ms", "non-200"
    );
    for row in &rows {
        println!(
            "  {:>11}  {:>8}  {:>10.0}  {:>12}  {:>12}  {:>7}",
            row.concurrency,
            row.events,
            row.events as f64 / row.seconds,
            ms(row.p50),
            ms(row.p99),
            row.failed
        );
    }
    println!();
    println!(
        "POST -> SSE delivery latency ({LATENCY_SAMPLES} events, one POST at a time, {} ms gap;",
        LATENCY_GAP.as_millis()
    );
    println!(
        "  over all (subscriber, event) pairs; target p99 < {} ms)",
        TARGET_P99.as_millis()
    );
    println!(
        "  {:>11}  {:>6}  {:>8}  {:>7}  {:>8}  {:>8}  {:>8}",
        "subscribers", "events", "samples", "missing", "p50 ms", "p99 ms", "max ms"
    );
    for row in &latency_rows {
        println!(
            "  {:>11}  {:>6}  {:>8}  {:>7}  {:>8}  {:>8}  {:>8}",
            row.subscribers,
            row.events,
            row.samples,
            row.missing,
            ms(row.p50),
            ms(row.p99),
            ms(row.max)
        );
    }
    println!();
    println!("Daemon memory (/proc/{pid}/status)");
    println!("  {:<44} {:>10}", "VmRSS idle after start", mib(rss_idle));
    println!(
        "  {:<44} {:>10}   (posted at concurrency 64: {:.0}/s)",
        format!("VmRSS after {filled} events"),
        mib(rss_filled),
        filled as f64 / fill_secs
    );
    println!(
        "  {:<44} {:>10}   (VmHWM {})",
        format!("VmRSS at the end, after {total_posted} events"),
        mib(rss_end),
        mib(hwm)
    );
    println!(
        "  log head seq {head}; log {:.1} MiB on disk",
        log_size as f64 / (1024.0 * 1024.0)
    );

    let c64 = rows.iter().find(|row| row.concurrency == 64);
    let worst_p99 = latency_rows
        .iter()
        .map(|row| row.p99)
        .max()
        .unwrap_or_default();
    println!();
    if let Some(c64) = c64 {
        let rate = c64.events as f64 / c64.seconds;
        println!(
            "target ingest >= {TARGET_EVENTS_PER_SEC:.0}/s at c64: {} ({rate:.0}/s)",
            if rate >= TARGET_EVENTS_PER_SEC {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    println!(
        "target POST->SSE p99 < {} ms: {} (worst p99 {} ms)",
        TARGET_P99.as_millis(),
        if worst_p99 < TARGET_P99 {
            "met"
        } else {
            "MISSED"
        },
        ms(worst_p99)
    );

    let mut ok = true;
    if head < total_posted {
        println!("log head seq {head} is below the {total_posted} events acknowledged");
        ok = false;
    }
    fixture.stop_daemon()?;
    let failed = failures.count();
    if failed > 0 {
        println!("{failed} FAILURES; first ones:");
        for sample in failures
            .samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            println!("  {sample}");
        }
        ok = false;
    } else {
        println!("all {total_posted} POSTs answered 200; every SSE subscriber got every event");
    }
    if let (Some(start), Some(end)) = (cpu_start, cpu_end) {
        let total = end.total.saturating_sub(start.total).max(1) as f64;
        let busy = end.busy.saturating_sub(start.busy) as f64;
        let ours = (end.ours.saturating_sub(start.ours) as f64).min(busy);
        let pct = |ticks: f64| 100.0 * ticks / total;
        println!(
            "machine CPU busy during the run: {:.0}% of {cpus} CPUs (bench client + daemon {:.0}%, \
             other processes {:.0}%)",
            pct(busy),
            pct(ours),
            pct(busy - ours)
        );
    }
    println!(
        "load average at the end: {}; total bench time {:.1} s",
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    Ok(ok)
}
