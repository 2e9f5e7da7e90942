//! End-to-end ingest benchmark for `cohost serve`: `cargo bench --bench ingest`.
//!
//! Starts the real (release) daemon with a temporary `COHOST_HOME` against a private tmux server
//! on a temporary socket, then measures over keep-alive HTTP/1.1 connections:
//!
//! 1. `POST /api/agent-event` throughput at concurrency 1, 8 and 64 (fsync always, the default);
//! 2. POST→SSE delivery latency with 1 and with 100 subscribers on `/api/events/stream` (or
//!    the levels `COHOST_BENCH_SUBSCRIBERS` lists, `1,10,100,1000` for the growth table), with
//!    the slope of p50 and p99 against the number of subscribers between the first and last;
//!    Then the same with one subscriber while 63 other connections post flat out (c=64 in all):
//!    POST → SSE under load;
//! 3. the daemon's VmRSS idle after start and after 100,000 events.
//!
//! Exits non-zero if any request fails (non-200, transport error) or an SSE subscriber misses an
//! event. See `docs/benchmarks.md`.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};

use cohost_testkit::TmuxServer;
use cohost_testkit::bench::{self, CpuUse, Daemon, Failures, loadavg, ms, percentile};

const SESSION: &str = "bench";
const THROUGHPUT_LEVELS: [usize; 3] = [1, 8, 64];
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);
const LATENCY_SAMPLES: usize = 1000;
const LATENCY_GAP: Duration = Duration::from_millis(2);
/// The subscriber levels unless `COHOST_BENCH_SUBSCRIBERS` lists others.
const SUBSCRIBER_LEVELS: [usize; 2] = [1, 100];
const RSS_EVENTS: u64 = 100_000;
/// How long subscribers get to deliver the last events after the sender has finished.
const DELIVERY_GRACE: Duration = Duration::from_secs(10);

/// How long the daemon gets to shut down after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(15);

const TARGET_EVENTS_PER_SEC: f64 = 10_000.0;
const TARGET_P99: Duration = Duration::from_millis(5);

/// The daemon under test (the release build `cargo bench` made).
const COHOST: &str = env!("CARGO_BIN_EXE_cohost");

fn main() -> ExitCode {
    bench::main("ingest", "requests or deliveries failed, see above", run())
}

/// Everything that must be torn down, dropped in this order: the daemon, the tmux server and
/// the temp directory.
struct Fixture {
    daemon: Daemon,
    _tmux: TmuxServer,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn start() -> anyhow::Result<Fixture> {
        let dir = tempfile::Builder::new().prefix("cohost-bench").tempdir()?;
        let tmux = TmuxServer::with_sessions(&[(SESSION, dir.path())]);
        let mut command = bench::serve_command(Path::new(COHOST), &tmux);
        command
            .env_remove("COHOST_FSYNC")
            .env_remove("COHOST_LISTEN")
            .env_remove("TMUX");
        let daemon = Daemon::start(
            command,
            &dir.path().join("home"),
            dir.path().join("daemon.stderr"),
        )?;
        Ok(Fixture {
            daemon,
            _tmux: tmux,
            dir,
        })
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

async fn connect(daemon: &Daemon) -> anyhow::Result<Conn> {
    Ok(Conn {
        sender: bench::handshake(daemon.addr).await?,
        host: daemon.host.clone(),
    })
}

/// How many threads the token-less workers report, at most: the daemon keeps 16 instances per
/// agent reported without the token and refuses a 17th while all 16 were reported just now
/// (`too_many_instances`), so workers beyond 16 share the threads of the first ones.
const TOKENLESS_THREADS: usize = 16;

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
        conns.push(connect(&fixture.daemon).await?);
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
            let body = event_body(&format!("c{concurrency}-w{}", worker % TOKENLESS_THREADS));
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

/// The subscriber levels to measure: `COHOST_BENCH_SUBSCRIBERS` (`1,10,100,1000`), else
/// [`SUBSCRIBER_LEVELS`].
fn subscriber_levels() -> anyhow::Result<Vec<usize>> {
    let Ok(list) = std::env::var("COHOST_BENCH_SUBSCRIBERS") else {
        return Ok(SUBSCRIBER_LEVELS.to_vec());
    };
    let levels = list
        .split(',')
        .map(|n| {
            n.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .with_context(|| {
                    format!("COHOST_BENCH_SUBSCRIBERS={list}: `{n}` is not a number from 1 to 1000")
                })
        })
        .collect::<anyhow::Result<Vec<usize>>>()?;
    if levels.is_empty() || !levels.is_sorted() {
        bail!("COHOST_BENCH_SUBSCRIBERS={list}: list rising levels, e.g. 1,10,100,1000");
    }
    Ok(levels)
}

/// Opens one SSE stream and returns its body once the response headers arrive (by then the
/// daemon has subscribed to the live broadcast).
async fn open_stream(fixture: &Fixture) -> anyhow::Result<(Conn, Incoming)> {
    let mut conn = connect(&fixture.daemon).await?;
    let request = Request::get("/api/events/stream")
        .header(HOST, &conn.host)
        .header(AUTHORIZATION, format!("Bearer {}", fixture.daemon.token))
        .body(Full::new(Bytes::new()))?;
    conn.sender.ready().await?;
    let response = conn.sender.send_request(request).await?;
    let body = bench::stream_body(response, "GET /api/events/stream").await?;
    Ok((conn, body))
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
    let mut sender = connect(&fixture.daemon).await?;
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

/// How many connections post flat out beside the latency sender in the loaded row (64 in all).
const LOAD_CONNECTIONS: usize = 63;

/// [`delivery_latency`] with one subscriber while [`LOAD_CONNECTIONS`] other connections post
/// back to back: POST → SSE under c=64 load. The load's events reach the subscriber too (it reads
/// every one); only the sender's are timed.
async fn loaded_delivery_latency(
    fixture: &Fixture,
    posted: &Arc<AtomicU64>,
    failures: &Arc<Failures>,
) -> anyhow::Result<(LatencyRow, u64)> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load_posted = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(LOAD_CONNECTIONS);
    for worker in 0..LOAD_CONNECTIONS {
        let mut conn = connect(&fixture.daemon).await?;
        let (stop, posted, load_posted, failures) = (
            Arc::clone(&stop),
            Arc::clone(posted),
            Arc::clone(&load_posted),
            Arc::clone(failures),
        );
        workers.push(tokio::spawn(async move {
            // 15 load threads and the sender's `latency`: 16, the token-less bound.
            let body = event_body(&format!("load-w{}", worker % (TOKENLESS_THREADS - 1)));
            while !stop.load(Ordering::Relaxed) {
                match conn.post_event(body.clone()).await {
                    Ok((StatusCode::OK, _)) => {
                        posted.fetch_add(1, Ordering::Relaxed);
                        load_posted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok((status, body)) => {
                        failures.record(format!(
                            "POST /api/agent-event (load): {status}: {}",
                            String::from_utf8_lossy(&body)
                        ));
                        break;
                    }
                    Err(error) => {
                        failures.record(format!("POST /api/agent-event (load): {error:#}"));
                        break;
                    }
                }
            }
        }));
    }
    let row = delivery_latency(fixture, 1, posted, failures).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await?;
    }
    Ok((row?, load_posted.load(Ordering::Relaxed)))
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
        let mut conn = connect(&fixture.daemon).await?;
        let posted = Arc::clone(posted);
        let failures = Arc::clone(failures);
        workers.push(tokio::spawn(async move {
            let body = event_body(&format!("fill-w{}", worker % TOKENLESS_THREADS));
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
    let mut conn = connect(&fixture.daemon).await?;
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
    let cpus = bench::cpus();
    let started = Instant::now();
    let mut fixture = Fixture::start()?;
    let pid = fixture.daemon.pid();
    let cpu_start = CpuUse::sample(Some(pid));
    println!(
        "cohost ingest benchmark: daemon pid {pid} on {} ({cpus} CPUs, fsync=always, release build)",
        fixture.daemon.addr
    );
    println!("load average at start: {}", loadavg());
    let posted = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Failures::new(5));

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
    for subscribers in subscriber_levels()? {
        latency_rows.push(delivery_latency(&fixture, subscribers, &posted, &failures).await?);
    }
    let (loaded, load_events) = loaded_delivery_latency(&fixture, &posted, &failures).await?;

    let total_posted = posted.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss_end, hwm) = rss_kib(pid)?;
    let cpu_end = CpuUse::sample(Some(pid));
    let head = health_seq(&fixture).await?;
    let log_size = log_bytes(&fixture.dir.path().join("home"));

    // ---- report ----
    let slope = |pick: fn(&LatencyRow) -> Duration| -> Option<f64> {
        let (first, last) = (latency_rows.first()?, latency_rows.last()?);
        let (a, b) = (pick(first).as_secs_f64(), pick(last).as_secs_f64());
        (last.subscribers > first.subscribers && a > 0.0 && b > 0.0)
            .then(|| (b / a).ln() / (last.subscribers as f64 / first.subscribers as f64).ln())
    };
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
    if let (Some(p50), Some(p99)) = (slope(|r| r.p50), slope(|r| r.p99)) {
        println!(
            "  slope of log(latency) against log(subscribers), first to last level: p50 {p50:.2}, p99 {p99:.2} (1.0: linear)"
        );
    }
    println!(
        "  {:>11}  {:>6}  {:>8}  {:>7}  {:>8}  {:>8}  {:>8}   under c=64 load ({LOAD_CONNECTIONS} more connections posting back to back: {load_events} events)",
        loaded.subscribers,
        loaded.events,
        loaded.samples,
        loaded.missing,
        ms(loaded.p50),
        ms(loaded.p99),
        ms(loaded.max)
    );
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
    fixture.daemon.stop(STOP_GRACE)?;
    let failed = failures.count();
    if failed > 0 {
        println!("{failed} FAILURES; first ones:");
        for sample in failures.first() {
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
