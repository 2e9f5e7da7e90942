//! Federation's throughput, latency and the hub's memory beside one machine's, in one run:
//! `cargo bench --bench federation`.
//!
//! A real `nats-server` with JetStream (the kit's, `$COHOST_TEST_NATS_SERVER`) and this build's
//! `cohost serve`, each daemon with its own home and private tmux server:
//!
//! 1. **single machine**: one daemon without NATS. `POST /api/agent-event` from `WORKERS`
//!    keep-alive connections for `SECONDS` (events/s), then `SAMPLES` POSTs one at a time:
//!    latency POST → the event on the daemon's own `GET /api/events/stream`;
//! 2. **through a hub**: `MACHINES` daemons publishing (`serve --nats URL --machine mN`) and a
//!    hub (`serve --hub`) consuming. The same load on every machine at once: the events/s the
//!    machines took, and the events/s that arrived at the hub (its `/api/health` `receivedSeq`,
//!    polled) until it held the last one; then `SAMPLES` POSTs one at a time, round-robin over
//!    the machines: latency POST → the event on the machine's own SSE, and → the event on the
//!    hub's SSE of that machine's session (`GET /api/sessions/{machine}/bench/events/stream`;
//!    an agent event's session is its tmux session);
//! 3. **a synthetic fleet**: `SYNTHETIC` machines that no daemon runs, published straight into
//!    JetStream by this bench with async-nats exactly as the daemon's publisher does (stream
//!    `COHOST_<machine>`, subject `cohost.ev.<machine>.<session>`, `Nats-Msg-Id`
//!    `<machine>:<home id>:<seq>`, `Nats-Expected-Last-Sequence`, windows of 256 acks, the
//!    view in the KV bucket `cohost_machines`), the event and the view copied from a real
//!    machine's: the hub's intake events/s, and its VmRSS before and after each round.
//!
//! Scale with `COHOST_BENCH_FED_{MACHINES,WORKERS,SECONDS,SAMPLES,SYNTHETIC,EVENTS,ROUNDS}`.
//! Exits non-zero when a POST fails, an event does not reach a stream or the hub within
//! `DEADLINE`, or a daemon does not stop cleanly. See docs/benchmarks.md "Federation".

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use async_nats::jetstream::{self, message::PublishMessage, stream};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use cohost_testkit::TmuxServer;
use cohost_testkit::bench::{
    self, Conn, CpuUse, Daemon, Failures, cpus, loadavg, ms, percentile, sorted,
};
use cohost_testkit::mock_messages::now_ns;
use cohost_testkit::nats::NatsServer;

/// The daemon under test (the build `cargo bench` made).
const COHOST: &str = env!("CARGO_BIN_EXE_cohost");
/// The tmux session every agent event names: the session of the events at the hub.
const SESSION: &str = "bench";
/// How long one request, an event's way to a stream, or the hub's catching up may take.
const DEADLINE: Duration = Duration::from_secs(60);
/// The pause between two POSTs of the latency phases.
const LATENCY_GAP: Duration = Duration::from_millis(5);
/// How often the hub's health is read while it takes events in.
const POLL: Duration = Duration::from_millis(50);
/// How long a daemon gets to stop after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// The publisher's window (src/federation/publisher.rs `WINDOW`).
const WINDOW: usize = 256;
/// The stream's duplicate window (the publisher's `DUPLICATE_WINDOW`).
const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The synthetic machines' home id (the daemon's is 8 hex digits of `federation/home-id`).
const SYNTHETIC_HOME: &str = "0bence00";

fn main() -> ExitCode {
    bench::main("federation", "see the failures above", run())
}

/// A whole-number knob from `COHOST_BENCH_FED_<name>`, else `default`.
fn knob(name: &str, default: usize) -> anyhow::Result<usize> {
    let var = format!("COHOST_BENCH_FED_{name}");
    match std::env::var(&var) {
        Ok(value) => value
            .trim()
            .parse()
            .with_context(|| format!("{var}={value:?} is not a whole number")),
        Err(_) => Ok(default),
    }
}

struct Plan {
    machines: usize,
    workers: usize,
    seconds: usize,
    samples: usize,
    synthetic: usize,
    events: usize,
    rounds: usize,
}

/// One daemon, its tmux server and its home, dropped in that order.
struct Node {
    name: String,
    daemon: Daemon,
    _tmux: TmuxServer,
    home: PathBuf,
}

impl Node {
    fn start(dir: &Path, name: &str, args: &[&str]) -> anyhow::Result<Node> {
        let root = dir.join(name);
        std::fs::create_dir_all(&root)?;
        let tmux = TmuxServer::with_sessions(&[(SESSION, &root)]);
        let mut command = bench::serve_command(Path::new(COHOST), &tmux);
        command
            .args(args)
            .env_remove("COHOST_FSYNC")
            .env_remove("COHOST_LISTEN")
            .env_remove("COHOST_NATS")
            .env_remove("TMUX");
        let home = root.join("home");
        let daemon = Daemon::start(command, &home, root.join("daemon.stderr"))
            .with_context(|| format!("starting {name}"))?;
        Ok(Node {
            name: name.to_string(),
            daemon,
            _tmux: tmux,
            home,
        })
    }

    async fn conn(&self) -> anyhow::Result<Conn> {
        Conn::open(&self.daemon, DEADLINE).await
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.daemon.pid())
    }
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Bytes of the files under `dir` (recursively).
fn du(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => du(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

fn report(worker: usize, i: usize) -> Value {
    json!({
        "agent": "bench",
        "status": if i.is_multiple_of(2) { "running" } else { "waiting" },
        "tmuxSession": SESSION,
        "threadId": format!("w{worker}"),
    })
}

/// `POST /api/agent-event`; the event's seq.
async fn post(conn: &mut Conn, worker: usize, i: usize) -> anyhow::Result<u64> {
    let answer = conn
        .call(
            Method::POST,
            "/api/agent-event",
            Some(&report(worker, i)),
            StatusCode::OK,
        )
        .await?;
    answer["seq"]
        .as_u64()
        .with_context(|| format!("POST /api/agent-event answered without a seq: {answer}"))
}

// ---------------------------------------------------------------------------------------------
// load

/// What a load phase did: events the machines took, over how long, and the newest seq of each.
struct Load {
    events: u64,
    seconds: f64,
    started: Instant,
    ended: Instant,
    heads: Vec<u64>,
    post: Vec<Duration>,
}

/// `workers` connections per daemon POST for `span`, all daemons at once.
async fn load(
    nodes: &[&Node],
    workers: usize,
    span: Duration,
    failures: &Arc<Failures>,
) -> anyhow::Result<Load> {
    let mut conns = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for worker in 0..workers {
            conns.push((n, worker, node.conn().await?));
        }
    }
    let events = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let end = started + span;
    let mut tasks = Vec::new();
    for (n, worker, mut conn) in conns {
        let events = Arc::clone(&events);
        let failures = Arc::clone(failures);
        tasks.push(tokio::spawn(async move {
            let mut head = 0;
            let mut times = Vec::new();
            let mut i = 0;
            while Instant::now() < end {
                let t0 = Instant::now();
                match post(&mut conn, worker, i).await {
                    Ok(seq) => {
                        times.push(t0.elapsed());
                        head = head.max(seq);
                        events.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => failures.record(format!("{error:#}")),
                }
                i += 1;
            }
            (n, head, times)
        }));
    }
    let mut heads = vec![0; nodes.len()];
    let mut post = Vec::new();
    for task in tasks {
        let (n, head, times) = task.await?;
        heads[n] = heads[n].max(head);
        post.extend(times);
    }
    let ended = Instant::now();
    Ok(Load {
        events: events.load(Ordering::Relaxed),
        seconds: (ended - started).as_secs_f64(),
        started,
        ended,
        heads,
        post: sorted(&post),
    })
}

/// The hub's `receivedSeq` of each machine it knows.
async fn received(hub: &mut Conn) -> anyhow::Result<BTreeMap<String, u64>> {
    let health = hub
        .call(Method::GET, "/api/health", None, StatusCode::OK)
        .await?;
    Ok(health["hub"]["machines"]
        .as_array()
        .map(|machines| {
            machines
                .iter()
                .filter_map(|m| {
                    Some((
                        m["machine"].as_str()?.to_string(),
                        m["receivedSeq"].as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Polls the hub every [`POLL`] until it holds seq `want[m]` of every machine `m`; returns when
/// the poll that saw it did.
async fn wait_hub(
    hub: &mut Conn,
    want: &BTreeMap<String, u64>,
    what: &str,
) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let got = received(hub).await?;
        if want
            .iter()
            .all(|(machine, seq)| got.get(machine).is_some_and(|g| g >= seq))
        {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            let behind: Vec<String> = want
                .iter()
                .filter(|(m, seq)| got.get(*m).is_none_or(|g| g < *seq))
                .take(5)
                .map(|(m, seq)| format!("{m}: {:?} of {seq}", got.get(m)))
                .collect();
            bail!("{what}: the hub did not catch up within {DEADLINE:?} ({behind:?})");
        }
        tokio::time::sleep(POLL).await;
    }
}

// ---------------------------------------------------------------------------------------------
// latency

/// Follows an SSE stream of `node` at `path`, sending `(tag, seq, arrival ns)` for every `id:`
/// line; the task ends with the stream (it is aborted at the end of its phase).
async fn follow(
    node: &Node,
    path: &str,
    tag: usize,
    seen: mpsc::UnboundedSender<(usize, u64, i64)>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut conn = node.conn().await?;
    let response = conn.send(Method::GET, path, None).await?;
    let body = bench::stream_body(response, &format!("GET {path} on {}", node.name)).await?;
    Ok(tokio::spawn(async move {
        let _conn = conn;
        let _ = bench::read_lines_until(body, |arrived, line| {
            if let Some(id) = line.strip_prefix(b"id:")
                && let Some(seq) = std::str::from_utf8(id)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
            {
                let _ = seen.send((tag, seq, arrived));
            }
            Ok(None::<()>)
        })
        .await;
    }))
}

/// The latencies of one path, sorted, and the events that never came.
struct Arrivals {
    times: Vec<Duration>,
    missing: usize,
}

/// `samples` POSTs one at a time, round-robin over `nodes`, `LATENCY_GAP` apart; each of
/// `paths` (a receiver fed by [`follow`] with the node's index as tag) must show every event.
/// Returns each path's POST → arrival latencies.
async fn latency(
    nodes: &[&Node],
    samples: usize,
    paths: Vec<mpsc::UnboundedReceiver<(usize, u64, i64)>>,
) -> anyhow::Result<Vec<Arrivals>> {
    let mut conns = Vec::new();
    for node in nodes {
        conns.push(node.conn().await?);
    }
    // (node, seq) → when its POST was written.
    let mut sent: HashMap<(usize, u64), i64> = HashMap::with_capacity(samples);
    for i in 0..samples {
        let n = i % nodes.len();
        let t0 = now_ns();
        let seq = post(&mut conns[n], 1000, i).await?;
        sent.insert((n, seq), t0);
        tokio::time::sleep(LATENCY_GAP).await;
    }
    let mut out = Vec::new();
    for mut path in paths {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut times = Vec::with_capacity(samples);
        while times.len() < sent.len() {
            match tokio::time::timeout_at(deadline, path.recv()).await {
                Ok(Some((n, seq, arrived))) => {
                    if let Some(t0) = sent.get(&(n, seq)) {
                        times.push(Duration::from_nanos((arrived - t0).max(0) as u64));
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        out.push(Arrivals {
            missing: sent.len() - times.len(),
            times: sorted(&times),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// the synthetic fleet

/// One synthetic machine's stream position: the last event seq and stream sequence.
struct Synthetic {
    name: String,
    seq: u64,
    stream_seq: u64,
}

/// An event as the daemon serializes it (`{"seq":…` first: the hub's reader relies on it), of
/// the kind and data of a real machine's event.
fn event_json(seq: u64, kind: &str, data: &str) -> String {
    format!(
        r#"{{"seq":{seq},"ts":{},"session":"{SESSION}","sessionSeq":{seq},"type":"{kind}","data":{data}}}"#,
        now_ns() / 1_000_000
    )
}

/// Creates the machine's stream as the publisher does (`ensure_stream`).
async fn ensure_stream(js: &jetstream::Context, machine: &str) -> anyhow::Result<u64> {
    let mut stream = js
        .get_or_create_stream(stream::Config {
            name: format!("COHOST_{machine}"),
            subjects: vec![
                format!("cohost.ev.{machine}"),
                format!("cohost.ev.{machine}.>"),
            ],
            storage: stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating the stream of {machine}"))?;
    Ok(stream.info().await?.state.last_sequence)
}

/// Puts `machine`'s view (the real machine's, renamed) into the bucket.
async fn put_view(
    kv: &jetstream::kv::Store,
    template: &Value,
    machine: &str,
    acked: u64,
) -> anyhow::Result<()> {
    let mut view = template.clone();
    view["machine"] = json!(machine);
    view["ackedSeq"] = json!(acked);
    view["at"] = json!(now_ns() / 1_000_000);
    kv.put(machine, serde_json::to_vec(&view)?.into())
        .await
        .with_context(|| format!("putting the view of {machine}"))?;
    Ok(())
}

/// Publishes `count` events of `machine` after its last, in windows of [`WINDOW`] whose acks
/// are awaited in order, each with its id and the stream sequence it must follow.
async fn publish(
    js: jetstream::Context,
    mut machine: Synthetic,
    count: usize,
    kind: Arc<str>,
    data: Arc<str>,
) -> anyhow::Result<Synthetic> {
    let subject = format!("cohost.ev.{}.{SESSION}", machine.name);
    let mut left = count;
    while left > 0 {
        let n = left.min(WINDOW);
        let mut acks = Vec::with_capacity(n);
        for k in 0..n {
            let seq = machine.seq + 1 + k as u64;
            let message = PublishMessage::build()
                .payload(event_json(seq, &kind, &data).into())
                .message_id(format!("{}:{SYNTHETIC_HOME}:{seq}", machine.name))
                .expected_last_sequence(machine.stream_seq + k as u64);
            acks.push((seq, js.send_publish(subject.clone(), message).await?));
        }
        for (seq, ack) in acks {
            let ack = ack
                .await
                .with_context(|| format!("the ack of {} seq {seq}", machine.name))?;
            machine.seq = seq;
            machine.stream_seq = ack.sequence;
        }
        left -= n;
    }
    Ok(machine)
}

// ---------------------------------------------------------------------------------------------
// the run

fn row(name: &str, times: &[Duration], missing: usize) {
    println!(
        "  {name:<52} {:>6}  {:>8}  {:>8}  {:>8}  {:>7}",
        times.len(),
        ms(percentile(times, 50.0)),
        ms(percentile(times, 99.0)),
        ms(times.last().copied().unwrap_or_default()),
        missing
    );
}

fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        "-".into()
    } else {
        format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
    }
}

async fn run() -> anyhow::Result<bool> {
    let plan = Plan {
        machines: knob("MACHINES", 3)?.max(1),
        workers: knob("WORKERS", 4)?.max(1),
        seconds: knob("SECONDS", 3)?.max(1),
        samples: knob("SAMPLES", 300)?.max(1),
        synthetic: knob("SYNTHETIC", 100)?,
        events: knob("EVENTS", 200)?.max(1),
        rounds: knob("ROUNDS", 2)?.max(1),
    };
    let started = Instant::now();
    println!("load average at start: {}; {} CPUs", loadavg(), cpus());
    let cpu_start = CpuUse::sample_tree();
    let failures = Arc::new(Failures::new(5));
    let dir = tempfile::Builder::new()
        .prefix("cohost-bench-federation")
        .tempdir()?;
    let span = Duration::from_secs(plan.seconds as u64);

    // ---- 1. one machine, no NATS ----
    let solo = Node::start(dir.path(), "solo", &[])?;
    let solo_load = load(&[&solo], plan.workers, span, &failures).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let solo_stream = follow(&solo, "/api/events/stream", 0, tx).await?;
    let solo_latency = latency(&[&solo], plan.samples, vec![rx]).await?;
    solo_stream.abort();
    let solo_rss = solo.rss_kib()?;

    // ---- 2. real machines through a hub ----
    let nats = NatsServer::start();
    let url = nats.url();
    let hub = Node::start(
        dir.path(),
        "hub",
        &["--nats", &url, "--machine", "hub", "--hub"],
    )?;
    let hub_rss_idle = hub.rss_kib()?;
    let mut machines = Vec::new();
    for m in 0..plan.machines {
        let name = format!("m{}", m + 1);
        machines.push(Node::start(
            dir.path(),
            &name,
            &["--nats", &url, "--machine", &name],
        )?);
    }
    let nodes: Vec<&Node> = machines.iter().collect();
    let mut hub_conn = hub.conn().await?;
    let fed_load = load(&nodes, plan.workers, span, &failures).await?;
    let want: BTreeMap<String, u64> = machines
        .iter()
        .zip(&fed_load.heads)
        .map(|(node, head)| (node.name.clone(), *head))
        .collect();
    let fed_caught_up = wait_hub(&mut hub_conn, &want, "the load of the real machines").await?;
    // Single-machine load of one machine alone (its publisher on), for the same comparison.
    let one_load = load(&nodes[..1], plan.workers, span, &failures).await?;
    let one_want = BTreeMap::from([(machines[0].name.clone(), one_load.heads[0])]);
    let one_caught_up = wait_hub(&mut hub_conn, &one_want, "the load of one machine").await?;

    // Latency: every machine's own stream and the hub's stream of its session.
    let (own_tx, own_rx) = mpsc::unbounded_channel();
    let (hub_tx, hub_rx) = mpsc::unbounded_channel();
    let mut streams = Vec::new();
    for (n, node) in machines.iter().enumerate() {
        streams.push(follow(node, "/api/events/stream", n, own_tx.clone()).await?);
        let path = format!("/api/sessions/{}/{SESSION}/events/stream", node.name);
        streams.push(follow(&hub, &path, n, hub_tx.clone()).await?);
    }
    drop((own_tx, hub_tx));
    let fed_latency = latency(&nodes, plan.samples, vec![own_rx, hub_rx]).await?;
    for stream in streams {
        stream.abort();
    }
    let hub_rss_real = hub.rss_kib()?;

    // ---- 3. a synthetic fleet ----
    let mut synthetic_rows = Vec::new();
    let mut hub_rss_discovered = hub_rss_real;
    let mut discovered_secs = 0.0;
    if plan.synthetic > 0 {
        let client = async_nats::connect(&url).await?;
        // Every machine's task holds a window of unacknowledged publishes before it awaits
        // them, so the client's bound on acks in flight (5,000 by default, waited on when
        // reached) must hold all windows at once: 100 machines each holding part of a window
        // would wait on each other for ever.
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(5))
            .max_ack_inflight(WINDOW * plan.synthetic)
            .build(client);
        let kv = js.get_key_value("cohost_machines").await?;
        // A real machine's view and event, as templates.
        let view: Value = serde_json::from_slice(
            &kv.get(&machines[0].name)
                .await?
                .context("no view of the first machine in the bucket")?,
        )?;
        let mut first = machines[0].conn().await?;
        let page = first
            .call(
                Method::GET,
                "/api/events?after=0&limit=50",
                None,
                StatusCode::OK,
            )
            .await?;
        let template = page["events"]
            .as_array()
            .and_then(|events| events.iter().find(|e| e["type"] == "agent.updated"))
            .with_context(|| format!("no agent.updated event in {page}"))?;
        let kind: Arc<str> = Arc::from("agent.updated");
        let data: Arc<str> = Arc::from(serde_json::to_string(&template["data"])?);

        let discovery = Instant::now();
        let mut fleet = Vec::new();
        for s in 0..plan.synthetic {
            let name = format!("syn{s:03}");
            let stream_seq = ensure_stream(&js, &name).await?;
            put_view(&kv, &view, &name, 0).await?;
            fleet.push(Synthetic {
                name,
                seq: 0,
                stream_seq,
            });
        }
        // Discovered: every synthetic machine listed (receivedSeq 0) in the hub's health.
        let deadline = Instant::now() + DEADLINE;
        loop {
            let got = received(&mut hub_conn).await?;
            if fleet.iter().all(|m| got.contains_key(&m.name)) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the hub knows {} of the {} synthetic machines after {DEADLINE:?}",
                    fleet.iter().filter(|m| got.contains_key(&m.name)).count(),
                    fleet.len()
                );
            }
            tokio::time::sleep(POLL).await;
        }
        discovered_secs = discovery.elapsed().as_secs_f64();
        hub_rss_discovered = hub.rss_kib()?;
        for round in 0..plan.rounds {
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for machine in fleet.drain(..) {
                tasks.push(tokio::spawn(publish(
                    js.clone(),
                    machine,
                    plan.events,
                    Arc::clone(&kind),
                    Arc::clone(&data),
                )));
            }
            let deadline = tokio::time::Instant::now() + DEADLINE;
            for task in tasks {
                let Ok(machine) = tokio::time::timeout_at(deadline, task).await else {
                    bail!(
                        "synthetic round {}: publishing did not finish within {DEADLINE:?}",
                        round + 1
                    );
                };
                fleet.push(machine??);
            }
            let published = t0.elapsed();
            for machine in &fleet {
                put_view(&kv, &view, &machine.name, machine.seq).await?;
            }
            let want: BTreeMap<String, u64> =
                fleet.iter().map(|m| (m.name.clone(), m.seq)).collect();
            let done = wait_hub(
                &mut hub_conn,
                &want,
                &format!("synthetic round {}", round + 1),
            )
            .await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            synthetic_rows.push((
                round + 1,
                (plan.synthetic * plan.events) as f64 / published.as_secs_f64(),
                (plan.synthetic * plan.events) as f64 / (done - t0).as_secs_f64(),
                hub.rss_kib()?,
            ));
        }
    }
    let hub_disk = du(&hub.home.join("hub"));
    let cpu_end = CpuUse::sample_tree();

    // ---- report ----
    let solo_rate = solo_load.events as f64 / solo_load.seconds;
    let fed_rate = fed_load.events as f64 / fed_load.seconds;
    let fed_hub_rate = fed_load.events as f64 / (fed_caught_up - fed_load.started).as_secs_f64();
    let one_rate = one_load.events as f64 / one_load.seconds;
    let one_hub_rate = one_load.events as f64 / (one_caught_up - one_load.started).as_secs_f64();
    println!();
    println!(
        "POST /api/agent-event throughput ({} keep-alive connections per machine, {} s, fsync always)",
        plan.workers, plan.seconds
    );
    println!(
        "  {:<52} {:>8}  {:>10}  {:>10}  {:>12}  {:>12}",
        "", "events", "events/s", "at hub/s", "hub behind", "POST p99 ms"
    );
    println!(
        "  {:<52} {:>8}  {:>10.0}  {:>10}  {:>12}  {:>12}",
        "single machine, no NATS",
        solo_load.events,
        solo_rate,
        "-",
        "-",
        ms(percentile(&solo_load.post, 99.0))
    );
    println!(
        "  {:<52} {:>8}  {:>10.0}  {:>10.0}  {:>12}  {:>12}",
        "one machine publishing, a hub consuming",
        one_load.events,
        one_rate,
        one_hub_rate,
        format!("{} ms", ms(one_caught_up - one_load.ended)),
        ms(percentile(&one_load.post, 99.0))
    );
    println!(
        "  {:<52} {:>8}  {:>10.0}  {:>10.0}  {:>12}  {:>12}",
        format!(
            "{} machines publishing at once, a hub consuming",
            plan.machines
        ),
        fed_load.events,
        fed_rate,
        fed_hub_rate,
        format!("{} ms", ms(fed_caught_up - fed_load.ended)),
        ms(percentile(&fed_load.post, 99.0))
    );
    println!(
        "  (at hub/s: the events over the time from the first POST until the hub held the last; \
         hub behind: from the last POST's answer until then)"
    );
    println!();
    println!(
        "POST -> SSE latency ({} events one at a time, {} ms apart; ms)",
        plan.samples,
        LATENCY_GAP.as_millis()
    );
    println!(
        "  {:<52} {:>6}  {:>8}  {:>8}  {:>8}  {:>7}",
        "", "events", "p50", "p99", "max", "missing"
    );
    row(
        "single machine: its own /api/events/stream",
        &solo_latency[0].times,
        solo_latency[0].missing,
    );
    row(
        &format!(
            "{} machines: the machine's own /api/events/stream",
            plan.machines
        ),
        &fed_latency[0].times,
        fed_latency[0].missing,
    );
    row(
        "  the hub's /api/sessions/{machine}/bench/events/stream",
        &fed_latency[1].times,
        fed_latency[1].missing,
    );
    let solo_p50 = percentile(&solo_latency[0].times, 50.0);
    let solo_p99 = percentile(&solo_latency[0].times, 99.0);
    let hub_p50 = percentile(&fed_latency[1].times, 50.0);
    let hub_p99 = percentile(&fed_latency[1].times, 99.0);
    println!(
        "  hub path / single machine: p50 {}, p99 {}; throughput at the hub / single machine: {:.2}x ({} machines), {:.2}x (one)",
        ratio(hub_p50, solo_p50),
        ratio(hub_p99, solo_p99),
        fed_hub_rate / solo_rate,
        plan.machines,
        one_hub_rate / solo_rate
    );
    println!();
    println!("Memory (VmRSS)");
    println!(
        "  {:<52} {:>10}",
        "single machine after its run",
        mib(solo_rss)
    );
    println!("  {:<52} {:>10}", "hub idle after start", mib(hub_rss_idle));
    let real_events = fed_load.events + one_load.events + plan.samples as u64;
    println!(
        "  {:<52} {:>10}",
        format!(
            "hub after {} real machines (~{real_events} events)",
            plan.machines
        ),
        mib(hub_rss_real)
    );
    if plan.synthetic > 0 {
        println!(
            "  {:<52} {:>10}   ({discovered_secs:.1} s to list them all)",
            format!("hub with {} synthetic machines known", plan.synthetic),
            mib(hub_rss_discovered)
        );
        let mut before = hub_rss_discovered;
        for (round, published, intake, rss) in &synthetic_rows {
            let per_event =
                (*rss as f64 - before as f64) * 1024.0 / (plan.synthetic * plan.events) as f64;
            println!(
                "  {:<52} {:>10}   (+{:.0} B/event; published {published:.0}/s, hub intake {intake:.0}/s)",
                format!(
                    "hub after round {round}: {} x {} synthetic events",
                    plan.synthetic, plan.events
                ),
                mib(*rss),
                per_event
            );
            before = *rss;
        }
        if let Some((_, _, intake, _)) = synthetic_rows.last() {
            println!(
                "  synthetic intake at the hub / single machine's ingest: {:.2}x",
                intake / solo_rate
            );
        }
    }
    println!(
        "  the hub's copies on disk ($COHOST_HOME/hub): {:.1} MiB",
        hub_disk as f64 / (1024.0 * 1024.0)
    );

    // ---- checks and teardown ----
    let mut ok = true;
    for (name, path) in [
        ("single machine's stream", &solo_latency[0]),
        ("machines' own streams", &fed_latency[0]),
        ("hub's streams", &fed_latency[1]),
    ] {
        if path.missing > 0 {
            println!("{name}: {} events never came", path.missing);
            ok = false;
        }
    }
    let mut all = vec![solo, hub];
    all.extend(machines);
    for node in &mut all {
        if let Err(error) = node.daemon.stop(STOP_GRACE) {
            println!("{}: {error:#}", node.name);
            ok = false;
        }
    }
    drop(nats);
    let failed = failures.count();
    if failed > 0 {
        println!("{failed} FAILURES; first ones:");
        for sample in failures.first() {
            println!("  {sample}");
        }
        ok = false;
    }
    println!();
    println!(
        "{}; load average at the end: {}; total bench time {:.1} s",
        CpuUse::others(cpu_start, cpu_end, cpus()),
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    Ok(ok)
}
