//! The perf guard for ingest: `cargo bench --bench ingest_ratio`.
//!
//! Measures `POST /api/agent-event` on the real (release) `cohost serve` against a bare axum
//! handler built here from the same axum, tokio and hyper versions, in the same run, and prints
//! the ratio. The bare handler does the minimum the route must: typed JSON (cohost's own
//! `AgentEventParams`) → the state map → a broadcast → a JSON answer with a sequence number. No
//! log, no fsync, no checks; it runs in a process of its own (this bench re-executed), like the
//! daemon.
//!
//! Load: 64 keep-alive connections posting back to back for 8 s after a 1 s warm-up, 12 agent
//! instances (3 tmux sessions × 4 threads), every request changing an instance's status
//! (running ↔ tool-running). Three runs of each, interleaved (bare, cohost, cohost, bare, bare,
//! cohost), the medians compared; beside each rate, the server process's CPU time and context
//! switches per request over the measured window (from /proc), steadier than the rates when other
//! processes share the machine. Then concurrency 1, in five rounds: cohost's POST p50 beside the
//! p50 of a 250-byte append + `fdatasync` on the same file system, measured right after it in
//! each round; the target is checked on the median of the rounds' ratios.
//!
//! Beside them, the bare handler made durable (`durable`): the same handler, each request's line
//! written by one writer thread in batches, over zeros written ahead, and `fdatasync`ed before
//! the request answers — the least a route that keeps cohost's promise (on disk before it is
//! acknowledged, one writer) must do, measured on this machine in the same run. Its rate over
//! the bare handler's is the ceiling of any such route here; its c=1 p50 the floor.
//! Order: bare, durable, cohost, cohost, durable, bare, durable, bare, cohost.
//!
//! `COHOST_BENCH_BEFORE=/path/to/cohost` adds a second daemon from that binary (say, a copy of
//! `target/release/cohost` kept from before a change), in its own home beside this build's, and
//! interleaves it with the others (bare, before, durable, cohost, cohost, durable, before, bare,
//! durable, before, bare, cohost), so a change is measured against its before in one sitting;
//! its c=1 p50 is measured beside this build's too. The bare handler's c=1 p50 is printed as
//! well: the HTTP round trip alone, the floor under cohost's.
//!
//! Exits non-zero when a request fails; a missed target is reported, not a failure (the figure
//! and its spread go in docs/benchmarks.md).

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};

use cohost_testkit::TmuxServer;
use cohost_testkit::bench::{self, CpuUse, Daemon, Failures, loadavg, ms, percentile};

const SESSIONS: [&str; 3] = ["ing0", "ing1", "ing2"];
const THREADS_PER_SESSION: usize = 4;
const CONCURRENCY: usize = 64;
const WARMUP: Duration = Duration::from_secs(1);
const MEASURE: Duration = Duration::from_secs(8);
const LATENCY_RUN: Duration = Duration::from_secs(3);
/// c=1 is measured in rounds, each server once and the fdatasync probe after them: one run moved
/// 1.22x–1.68x between rounds of one sitting (docs/benchmarks.md), with where the threads ran.
const C1_ROUNDS: usize = 5;
const FSYNC_SAMPLES: usize = 2000;
const TARGET_RATIO: f64 = 0.8;
const TARGET_C1_FSYNC: f64 = 1.2;
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Set in the environment of the re-executed bench: serve the bare handler instead.
const BARE_ENV: &str = "COHOST_BENCH_BARE_SERVER";
/// A cohost binary to measure beside this build (the before of an A/B).
const BEFORE_ENV: &str = "COHOST_BENCH_BEFORE";

const COHOST: &str = env!("CARGO_BIN_EXE_cohost");

fn main() -> ExitCode {
    if let Some(mode) = std::env::var_os(BARE_ENV) {
        // "1": the bare handler; a directory: the bare handler made durable, its log there.
        let durable = (mode != "1").then(|| std::path::PathBuf::from(mode));
        return bare::serve(durable);
    }
    bench::main("ingest_ratio", "requests failed, see above", run())
}

/// The bare handler: what any implementation of the route must do, and nothing more. Made
/// durable (`Target::Durable`), it also does the least any route that keeps cohost's promise
/// must: each request's line handed to one writer thread, which writes what it has in one
/// write over zeros written ahead (as cohost's log does), `fdatasync`s it, and only then lets
/// the requests answer (a group commit; the seq is the writer's). No checksum, no state
/// derived, no checks.
mod bare {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, mpsc};

    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::routing::post;
    use axum::{Json, Router};
    use cohost_protocol::{AgentEventParams, AgentStatus};
    use tokio::sync::{broadcast, oneshot};

    /// An instance: (tmux session, agent, thread).
    type Instance = (String, String, String);

    /// A line for the writer, and where its seq goes once it is on disk.
    type Write = (Vec<u8>, oneshot::Sender<u64>);

    /// Zeros written ahead of the lines at a time (cohost's log: `PREALLOCATE`).
    const AHEAD: u64 = 16 << 20;

    #[derive(Clone)]
    struct Bare {
        seq: Arc<AtomicU64>,
        statuses: Arc<Mutex<HashMap<Instance, AgentStatus>>>,
        bus: broadcast::Sender<Arc<AgentEventParams>>,
        writer: Option<mpsc::Sender<Write>>,
    }

    /// The writer thread: batches of what is queued, each written and `fdatasync`ed once.
    fn write_lines(dir: PathBuf, lines: mpsc::Receiver<Write>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        std::fs::create_dir_all(&dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.join("durable.log"))?;
        let mut len = 0u64;
        let mut end = 0u64;
        let mut seq = 0u64;
        let mut buf = Vec::new();
        while let Ok(first) = lines.recv() {
            let mut batch = vec![first];
            while batch.len() < 1024
                && let Ok(more) = lines.try_recv()
            {
                batch.push(more);
            }
            buf.clear();
            for (line, _) in &batch {
                buf.extend_from_slice(line);
                buf.push(b'\n');
            }
            while end + buf.len() as u64 > len {
                file.write_all_at(&vec![0u8; AHEAD as usize], len)?;
                len += AHEAD;
            }
            file.write_all_at(&buf, end)?;
            end += buf.len() as u64;
            file.sync_data()?;
            for (_, reply) in batch {
                seq += 1;
                let _ = reply.send(seq);
            }
        }
        Ok(())
    }

    async fn agent_event(
        State(bare): State<Bare>,
        Json(params): Json<AgentEventParams>,
    ) -> Result<Json<serde_json::Value>, (StatusCode, &'static str)> {
        let seq = match &bare.writer {
            Some(writer) => {
                let (reply, written) = oneshot::channel();
                let line = serde_json::to_vec(&params).unwrap_or_default();
                let failed = (StatusCode::INTERNAL_SERVER_ERROR, "the writer failed");
                writer.send((line, reply)).map_err(|_| failed)?;
                written.await.map_err(|_| failed)?
            }
            None => bare.seq.fetch_add(1, Ordering::Relaxed) + 1,
        };
        let session = params.tmux_session.clone().unwrap_or_default();
        bare.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                (
                    session.clone(),
                    params.agent.clone(),
                    params.thread_id.clone().unwrap_or_default(),
                ),
                params.status,
            );
        let _ = bare.bus.send(Arc::new(params));
        Ok(Json(
            serde_json::json!({"ok": true, "seq": seq, "session": session}),
        ))
    }

    pub fn serve(durable: Option<PathBuf>) -> ExitCode {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("bare handler: {error}");
                return ExitCode::FAILURE;
            }
        };
        let outcome: anyhow::Result<()> = runtime.block_on(async {
            let (bus, _) = broadcast::channel(1024);
            // A subscriber, as the daemon has its SSE readers and tracker.
            let mut receiver = bus.subscribe();
            tokio::spawn(async move { while receiver.recv().await.is_ok() {} });
            let writer = durable.map(|dir| {
                let (writer, lines) = mpsc::channel();
                std::thread::spawn(move || {
                    if let Err(error) = write_lines(dir, lines) {
                        // Its requests then answer `ok: false`, which fails the bench.
                        eprintln!("bare handler's writer: {error}");
                    }
                });
                writer
            });
            let app = Router::new()
                .route("/api/agent-event", post(agent_event))
                .with_state(Bare {
                    seq: Arc::default(),
                    statuses: Arc::default(),
                    bus,
                    writer,
                });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            println!("bare listening on {}", listener.local_addr()?);
            axum::serve(listener, app).await?;
            Ok(())
        });
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("bare handler: {error:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// The bare handler's process; killed on drop.
struct BareServer {
    child: Child,
    addr: std::net::SocketAddr,
}

impl BareServer {
    /// The bare handler; with `durable`, made durable with its log in that directory.
    fn start(durable: Option<&Path>) -> anyhow::Result<BareServer> {
        use std::io::BufRead as _;
        let mode = durable.map_or_else(|| "1".into(), |dir| dir.as_os_str().to_owned());
        let mut child = Command::new(std::env::current_exe()?)
            .env(BARE_ENV, mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("failed to start the bare handler")?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            std::io::BufReader::new(stdout).read_line(&mut line)?;
        }
        let Some(addr) = line.trim().strip_prefix("bare listening on ") else {
            let _ = child.kill();
            bail!("the bare handler did not announce its address (stdout: {line:?})");
        };
        let addr = addr.parse().context("the bare handler's address")?;
        Ok(BareServer { child, addr })
    }
}

impl Drop for BareServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Dropped in this order: the daemons, the bare handler, the tmux server, the directory.
struct Fixture {
    daemon: Daemon,
    before: Option<Daemon>,
    bare: BareServer,
    durable: BareServer,
    _tmux: TmuxServer,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn start(before: Option<&Path>) -> anyhow::Result<Fixture> {
        let dir = tempfile::Builder::new()
            .prefix("cohost-bench-ratio")
            .tempdir()?;
        let sessions: Vec<(&str, &Path)> = SESSIONS.iter().map(|s| (*s, dir.path())).collect();
        let tmux = TmuxServer::with_sessions(&sessions);
        let start = |binary: &Path, name: &str| {
            let mut command = bench::serve_command(binary, &tmux);
            command
                .env_remove("COHOST_FSYNC")
                .env_remove("COHOST_LISTEN")
                .env_remove("TMUX");
            Daemon::start(
                command,
                &dir.path().join(name),
                dir.path().join(format!("{name}.stderr")),
            )
        };
        let daemon = start(Path::new(COHOST), "home")?;
        let before = match before {
            Some(binary) => Some(
                start(binary, "home-before")
                    .with_context(|| format!("the before binary {}", binary.display()))?,
            ),
            None => None,
        };
        let bare = BareServer::start(None)?;
        let durable = BareServer::start(Some(&dir.path().join("durable")))?;
        Ok(Fixture {
            daemon,
            before,
            bare,
            durable,
            _tmux: tmux,
            dir,
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Bare,
    Cohost,
    Before,
    Durable,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Bare => "bare",
            Target::Cohost => "cohost",
            Target::Before => "before",
            Target::Durable => "durable",
        }
    }
}

struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    async fn open(addr: std::net::SocketAddr) -> anyhow::Result<Conn> {
        Ok(Conn {
            sender: bench::handshake(addr).await?,
            host: addr.to_string(),
        })
    }

    async fn post(&mut self, body: Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
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

/// The two bodies worker `worker` alternates between: its instance running, then running a tool.
fn bodies(worker: usize) -> [Bytes; 2] {
    let instance = worker % (SESSIONS.len() * THREADS_PER_SESSION);
    let session = SESSIONS[instance % SESSIONS.len()];
    let thread = instance / SESSIONS.len();
    ["running", "tool-running"].map(|status| {
        Bytes::from(format!(
            r#"{{"agent":"bench","status":"{status}","tmuxSession":"{session}","threadId":"t{thread}"}}"#
        ))
    })
}

struct Run {
    per_sec: f64,
    p50: Duration,
    /// The server process's CPU time and context switches per counted request, over the
    /// measured window; None when /proc could not be read.
    cost: Option<Cost>,
}

/// What one request cost the server process, measured from /proc over the measured window.
#[derive(Clone, Copy)]
struct Cost {
    cpu_us: f64,
    switches: f64,
}

/// The process's CPU time (clock ticks) and its threads' context switches (voluntary and not).
fn process_usage(pid: u32) -> Option<(u64, u64)> {
    let ticks = bench::process_ticks(pid)?;
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        switches += status
            .lines()
            .filter(|line| line.contains("ctxt_switches:"))
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Some((ticks, switches))
}

/// `concurrency` workers on their own keep-alive connections, posting back to back: `warmup`
/// unmeasured, then `measure` counted. Only 200 answers count; any other fails the bench.
async fn load(
    addr: std::net::SocketAddr,
    server: u32,
    concurrency: usize,
    warmup: Duration,
    measure: Duration,
    failures: &Arc<Failures>,
) -> anyhow::Result<Run> {
    let mut conns = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        conns.push(Conn::open(addr).await?);
    }
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + warmup;
    let measure_to = measure_from + measure;
    let counted = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(concurrency);
    for (worker, mut conn) in conns.into_iter().enumerate() {
        let failures = Arc::clone(failures);
        let counted = Arc::clone(&counted);
        workers.push(tokio::spawn(async move {
            let bodies = bodies(worker);
            let mut latencies = Vec::new();
            tokio::time::sleep_until(start.into()).await;
            for n in 0usize.. {
                let sent = Instant::now();
                if sent >= measure_to {
                    break;
                }
                match conn.post(bodies[n % 2].clone()).await {
                    Ok((StatusCode::OK, _)) => {
                        let done = Instant::now();
                        if sent >= measure_from && done <= measure_to {
                            counted.fetch_add(1, Ordering::Relaxed);
                            latencies.push(done - sent);
                        }
                    }
                    Ok((status, body)) => {
                        failures.record(format!(
                            "POST /api/agent-event: {status}: {}",
                            String::from_utf8_lossy(&body)
                        ));
                        break;
                    }
                    Err(error) => {
                        failures.record(format!("POST /api/agent-event: {error:#}"));
                        break;
                    }
                }
            }
            latencies
        }));
    }
    let usage = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        let first = process_usage(server);
        tokio::time::sleep_until(measure_to.into()).await;
        first.zip(process_usage(server))
    });
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await?);
    }
    latencies.sort_unstable();
    let requests = counted.load(Ordering::Relaxed);
    let cost = usage
        .await?
        .filter(|_| requests > 0)
        .map(|(first, last)| Cost {
            cpu_us: (last.0 - first.0) as f64 / bench::TICKS_PER_SEC * 1e6 / requests as f64,
            switches: (last.1 - first.1) as f64 / requests as f64,
        });
    Ok(Run {
        per_sec: requests as f64 / measure.as_secs_f64(),
        p50: percentile(&latencies, 50.0),
        cost,
    })
}

/// The p50 of appending a 250-byte line to a file in `dir` and `fdatasync`ing it.
fn fdatasync_p50(dir: &Path) -> anyhow::Result<Duration> {
    use std::io::Write as _;
    let path = dir.join("fdatasync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let line = [b'x'; 250];
    let mut samples = Vec::with_capacity(FSYNC_SAMPLES);
    for _ in 0..FSYNC_SAMPLES {
        let started = Instant::now();
        file.write_all(&line)?;
        file.sync_data()?;
        samples.push(started.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    samples.sort_unstable();
    Ok(percentile(&samples, 50.0))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The smallest and the largest of `values`.
fn bounds(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    (min, max)
}

fn spread(values: &[f64]) -> String {
    let (min, max) = bounds(values);
    format!("{min:.0}–{max:.0}")
}

/// `values` in seconds, as a range in ms.
fn spread_ms(values: &[f64]) -> String {
    let (min, max) = bounds(values);
    format!("{:.3}–{:.3}", min * 1000.0, max * 1000.0)
}

async fn run() -> anyhow::Result<bool> {
    use Target::{Bare, Before, Cohost, Durable};
    let cpus = bench::cpus();
    let before_binary = std::env::var_os(BEFORE_ENV).map(std::path::PathBuf::from);
    let mut fixture = Fixture::start(before_binary.as_deref())?;
    println!(
        "cohost ingest vs the bare handler: daemon pid {} on {}, bare on {} ({cpus} CPUs, fsync=always, release build)",
        fixture.daemon.pid(),
        fixture.daemon.addr,
        fixture.bare.addr
    );
    if let (Some(before), Some(binary)) = (&fixture.before, &before_binary) {
        println!(
            "before: {} as daemon pid {} on {}",
            binary.display(),
            before.pid(),
            before.addr
        );
    }
    println!("load average at start: {}", loadavg());
    let failures = Arc::new(Failures::new(5));
    // This process and its children (the daemons, the bare handler) are ours.
    let cpu_start = CpuUse::sample_tree();

    let order: &[Target] = if fixture.before.is_some() {
        &[
            Bare, Before, Durable, Cohost, Cohost, Durable, Before, Bare, Durable, Before, Bare,
            Cohost,
        ]
    } else {
        &[
            Bare, Durable, Cohost, Cohost, Durable, Bare, Durable, Bare, Cohost,
        ]
    };
    let mut rates: [Vec<f64>; 4] = Default::default();
    println!();
    println!(
        "c={CONCURRENCY}, {:.0} s warm-up, {:.0} s measured, {} instances, every request a status change",
        WARMUP.as_secs_f64(),
        MEASURE.as_secs_f64(),
        SESSIONS.len() * THREADS_PER_SESSION
    );
    let addr = |target: Target| match target {
        Bare => Some((fixture.bare.addr, fixture.bare.child.id())),
        Durable => Some((fixture.durable.addr, fixture.durable.child.id())),
        Cohost => Some((fixture.daemon.addr, fixture.daemon.pid())),
        Before => fixture
            .before
            .as_ref()
            .map(|daemon| (daemon.addr, daemon.pid())),
    };
    let mut costs: [Vec<Cost>; 4] = Default::default();
    for (n, &target) in order.iter().enumerate() {
        let Some((addr, pid)) = addr(target) else {
            continue;
        };
        let run = load(addr, pid, CONCURRENCY, WARMUP, MEASURE, &failures).await?;
        let cost = run.cost.map_or_else(String::new, |cost| {
            format!(
                "  {:>5.1} us CPU, {:.2} context switches per request",
                cost.cpu_us, cost.switches
            )
        });
        println!(
            "  run {}: {:>6}  {:>8.0} req/s  p50 {} ms{cost}",
            n + 1,
            target.name(),
            run.per_sec,
            ms(run.p50)
        );
        rates[target as usize].push(run.per_sec);
        costs[target as usize].extend(run.cost);
        if failures.count() > 0 {
            break;
        }
    }
    let mut ok = failures.count() == 0;
    if ok {
        println!();
        let bare_median = median(rates[Bare as usize].clone());
        for target in [Bare, Durable, Before, Cohost] {
            let runs = &rates[target as usize];
            if !runs.is_empty() {
                println!(
                    "  {:<6} median {:>8.0} req/s (runs {})",
                    target.name(),
                    median(runs.clone()),
                    spread(runs)
                );
            }
        }
        // The server's own CPU per request: steadier than the rates on a busy machine, as it
        // does not count what other processes take.
        for target in [Bare, Durable, Before, Cohost] {
            let runs = &costs[target as usize];
            if !runs.is_empty() {
                println!(
                    "  {:<6} median {:>5.1} us CPU, {:.2} context switches per request",
                    target.name(),
                    median(runs.iter().map(|cost| cost.cpu_us).collect()),
                    median(runs.iter().map(|cost| cost.switches).collect())
                );
            }
        }
        let ratio = median(rates[Cohost as usize].clone()) / bare_median;
        let durable = median(rates[Durable as usize].clone());
        println!(
            "  ratio durable/bare {:.2} (the ceiling of a route that fsyncs before it answers, on this machine); cohost/durable {:.2}",
            durable / bare_median,
            median(rates[Cohost as usize].clone()) / durable
        );
        if !rates[Before as usize].is_empty() {
            let before = median(rates[Before as usize].clone());
            println!(
                "  ratio before/bare {:.2}; cohost/before {:.2}",
                before / bare_median,
                median(rates[Cohost as usize].clone()) / before
            );
        }
        println!(
            "  ratio cohost/bare {ratio:.2} (target >= {TARGET_RATIO}: {})",
            if ratio >= TARGET_RATIO {
                "met"
            } else {
                "NOT met"
            }
        );

        println!();
        println!(
            "c=1, {C1_ROUNDS} rounds ({:.0} s warm-up, {:.0} s measured, per server), the fdatasync probe after each:",
            WARMUP.as_secs_f64(),
            LATENCY_RUN.as_secs_f64()
        );
        let targets: Vec<Target> = [Bare, Durable, Before, Cohost]
            .into_iter()
            .filter(|target| addr(*target).is_some())
            .collect();
        let mut p50s: [Vec<f64>; 4] = Default::default();
        // Each daemon's p50 in a round over the fdatasync probe measured right after it.
        let mut ratios: [Vec<f64>; 4] = Default::default();
        let mut fsyncs = Vec::with_capacity(C1_ROUNDS);
        for round in 1..=C1_ROUNDS {
            let mut line = format!("  round {round}:");
            let mut measured = Vec::with_capacity(targets.len());
            for &target in &targets {
                let Some((addr, pid)) = addr(target) else {
                    continue;
                };
                let p50 = load(addr, pid, 1, WARMUP, LATENCY_RUN, &failures)
                    .await?
                    .p50;
                line += &format!("  {} {} ms", target.name(), ms(p50));
                measured.push((target, p50.as_secs_f64()));
            }
            let fsync = fdatasync_p50(&fixture.dir.path().join("home"))?.as_secs_f64();
            fsyncs.push(fsync);
            for (target, p50) in measured {
                p50s[target as usize].push(p50);
                if target != Bare {
                    ratios[target as usize].push(p50 / fsync);
                }
            }
            println!(
                "{line}  fdatasync {fsync_ms:.3} ms",
                fsync_ms = fsync * 1000.0
            );
        }
        for &target in &targets {
            let p50 = &p50s[target as usize];
            if target == Bare {
                // What HTTP on loopback costs with no log: the floor under cohost's figure.
                println!(
                    "c=1: bare POST p50 median {:.3} ms (rounds {}; no log, no fsync: the round trip alone)",
                    median(p50.clone()) * 1000.0,
                    spread_ms(p50)
                );
                continue;
            }
            let round_ratios = &ratios[target as usize];
            let c1_ratio = median(round_ratios.clone());
            let (min, max) = bounds(round_ratios);
            if target == Durable {
                // A route that does nothing but the durable write: the floor under cohost's.
                println!(
                    "c=1: durable POST p50 median {:.3} ms (rounds {}); per round {min:.2}x–{max:.2}x the fdatasync, median {c1_ratio:.2}x (the floor of a route that fsyncs before it answers)",
                    median(p50.clone()) * 1000.0,
                    spread_ms(p50),
                );
                continue;
            }
            println!(
                "c=1: {} POST p50 median {:.3} ms (rounds {}), fdatasync p50 median {:.3} ms (rounds {}); per round {min:.2}x–{max:.2}x, median {c1_ratio:.2}x (target <= {TARGET_C1_FSYNC}x: {})",
                target.name(),
                median(p50.clone()) * 1000.0,
                spread_ms(p50),
                median(fsyncs.clone()) * 1000.0,
                spread_ms(&fsyncs),
                if c1_ratio <= TARGET_C1_FSYNC {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
        ok = failures.count() == 0;
    }
    let cpu_end = CpuUse::sample_tree();
    println!(
        "CPU used by other processes during the run (not this bench, its daemons or the bare handler): {}",
        CpuUse::others(cpu_start, cpu_end, cpus)
    );
    println!("load average at end: {}", loadavg());
    for failure in failures.first() {
        eprintln!("failure: {failure}");
    }
    fixture.daemon.stop(STOP_GRACE)?;
    if let Some(before) = &mut fixture.before {
        before.stop(STOP_GRACE)?;
    }
    Ok(ok)
}
