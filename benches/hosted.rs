//! Hosted-runtime benchmark for `cohost serve`: `cargo bench --bench hosted`.
//!
//! Puts OpenCode (`opencode serve`) and Pi (`pi --mode rpc`) beside codex, in one run, with
//! the real pinned peers (`$COHOST_TEST_CODEX_BIN`, `$COHOST_TEST_OPENCODE_BIN`,
//! `$COHOST_TEST_PI_BIN` under `$COHOST_TEST_PI_NODE`; also Pi's newest release when
//! `$PI_NEWEST_BIN` and `$PI_NEWEST_NODE` are exported) and the kit's Messages mock as their model:
//!
//! 1. **`POST /api/sessions` → 201 with a live session**, cold (the first session of a runtime
//!    after the daemon started) and warm (the later ones), for each runtime, with each runtime's
//!    ratio to codex's.
//! 2. **Model delta → SSE latency added by cohost** for OpenCode and Pi. The mock stamps each
//!    streamed text delta with CLOCK_REALTIME just before it writes it ([`Step::stamped`]); the
//!    peer turns it into its own event; a reader of cohost's `/api/sessions/{id}/events/stream`
//!    and a direct reader of the peer's own stream take the time the frame (or the chunk of
//!    stdout) carrying it arrives. OpenCode: the direct reader subscribes to the `/event` stream
//!    of the very `opencode serve` the daemon runs for the session, so both readers see the same
//!    events. Pi: a second `pi --mode rpc` driven by this process, its turns alternating with the
//!    hosted one's. "Added by cohost" is cohost's figure minus the direct one, per percentile,
//!    measured side by side (and, for OpenCode, per event).
//!
//! Exits non-zero on any failure (a missing peer, an unexpected status, a missing or duplicated
//! event, a daemon that does not start or stop cleanly). See `docs/benchmarks-hosted.md`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, HOST};
use hyper::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use cohost_testkit::bench::{self, Conn, CpuUse, Daemon, loadavg, ms, percentile, sorted};
use cohost_testkit::codex_home::{
    CODEX_BIN_ENV, MOCK_API_KEY, MOCK_API_KEY_ENV, try_write_codex_home,
};
use cohost_testkit::hosted::{MOCK_MODELS, write_opencode_config, write_pi_agent_dir};
use cohost_testkit::mock_messages::{MockMessages, Step, now_ns};
use cohost_testkit::{SCRUBBED_ENV, TmuxServer};

/// Daemon starts for the cold samples; each runtime's first session after a start is cold.
const COLD_SAMPLES: usize = 5;
/// Warm sessions of each runtime after its cold one, on the same daemon.
const WARM_PER_DAEMON: usize = 4;
/// Stamped text deltas per measured turn, and the pause between two of them.
const DELTAS: usize = 100;
const DELTA_GAP: Duration = Duration::from_millis(5);
/// Measured turns per row (after one unmeasured warm-up turn each).
const ROUNDS: usize = 8;
/// Deltas slower than this are counted per reader, to show where a tail comes from.
const SLOW_DELTA: Duration = Duration::from_millis(10);
const TURN_TIMEOUT: Duration = Duration::from_secs(120);
const HTTP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a daemon gets to shut down (and stop its peers) after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// The daemon under test (the release build `cargo bench` made).
const COHOST: &str = env!("CARGO_BIN_EXE_cohost");

/// Variables that would change how the daemon behaves, besides the kit's [`SCRUBBED_ENV`].
const BENCH_SCRUBBED_ENV: [&str; 5] = [
    "COHOST_CODEX_BIN",
    "COHOST_CODEX_TRANSPORT",
    "COHOST_OPENCODE_BIN",
    "COHOST_PI_BIN",
    "RUST_LOG",
];

fn main() -> ExitCode {
    bench::main("hosted", "see above", run())
}

// ---------------------------------------------------------------------------------------------
// the peers

/// The peers of this run, from the environment `./scripts/test` writes (`target/stress/env.sh`).
struct Peers {
    codex: PathBuf,
    opencode: PathBuf,
    pis: Vec<PiRelease>,
}

#[derive(Clone)]
struct PiRelease {
    /// `pi 0.73.1`: how the rows name it.
    label: String,
    bin: PathBuf,
    node: PathBuf,
}

fn env_file(var: &str) -> anyhow::Result<PathBuf> {
    let value = std::env::var_os(var).filter(|v| !v.is_empty()).with_context(|| {
        format!(
            "{var} is not set: source the env file ./scripts/test writes (. target/stress/env.sh, after ./scripts/test --setup-only), which names the pinned peers"
        )
    })?;
    let path = PathBuf::from(value);
    if !path.is_file() {
        bail!("{var}={} does not exist", path.display());
    }
    Ok(path)
}

impl Peers {
    fn find() -> anyhow::Result<Peers> {
        let codex = env_file(CODEX_BIN_ENV)?;
        let opencode = env_file("COHOST_TEST_OPENCODE_BIN")?;
        let oldest = PiRelease {
            label: format!(
                "pi {}",
                std::env::var("COHOST_TEST_PI_VERSION").unwrap_or_else(|_| "?".into())
            ),
            bin: env_file("COHOST_TEST_PI_BIN")?,
            node: env_file("COHOST_TEST_PI_NODE")?,
        };
        let mut pis = vec![oldest];
        // The newest release too, when the env file's variables are exported
        // (`set -a; . target/stress/env.sh; set +a`).
        if std::env::var_os("PI_NEWEST_BIN").is_some() {
            let newest = PiRelease {
                label: format!(
                    "pi {}",
                    std::env::var("PI_NEWEST").unwrap_or_else(|_| "?".into())
                ),
                bin: env_file("PI_NEWEST_BIN")?,
                node: env_file("PI_NEWEST_NODE")?,
            };
            if newest.bin != pis[0].bin {
                pis.push(newest);
            }
        }
        Ok(Peers {
            codex,
            opencode,
            pis,
        })
    }
}

/// A private HOME for the peers: OpenCode's config (`.config/opencode/opencode.json`) and Pi's
/// agent directory (`.pi/agent`), both with the mock as their only provider and its first
/// model, as the suites write them (`cohost_testkit::hosted`).
fn write_peer_home(home: &Path, mock: &MockMessages) -> anyhow::Result<()> {
    write_opencode_config(home, mock, &MOCK_MODELS[..1])?;
    write_pi_agent_dir(home, mock, &MOCK_MODELS[..1])?;
    Ok(())
}

/// `node`'s directory first on PATH (Pi's launcher runs `env node`), then Pi's own.
fn pi_path(pi: &PiRelease) -> OsString {
    let mut path = OsString::new();
    for dir in [pi.node.parent(), pi.bin.parent()].into_iter().flatten() {
        path.push(dir);
        path.push(":");
    }
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

// ---------------------------------------------------------------------------------------------
// the daemons

/// Where everything of the run lives.
struct Setup {
    dir: PathBuf,
    peers: Peers,
    /// The peers' HOME (OpenCode's config, Pi's agent directory).
    home: PathBuf,
    codex_home: PathBuf,
    /// One working directory per runtime.
    work: HashMap<&'static str, PathBuf>,
}

/// What one daemon hosts: every daemon hosts codex and OpenCode and one Pi release, except the
/// second one (Pi's newest release), which hosts only Pi.
#[derive(Clone, Copy, PartialEq)]
enum DaemonKind {
    Main,
    PiNewest,
}

/// One row of the start table: a runtime on a daemon.
#[derive(Clone)]
struct Target {
    label: String,
    runtime: &'static str,
    daemon: DaemonKind,
}

impl Setup {
    fn new(dir: &Path, peers: Peers, mock: &MockMessages) -> anyhow::Result<Setup> {
        let home = dir.join("peer-home");
        write_peer_home(&home, mock)?;
        let mut work = HashMap::new();
        for runtime in ["codex", "opencode", "pi"] {
            let path = dir.join(format!("work-{runtime}"));
            std::fs::create_dir_all(&path)?;
            work.insert(runtime, path.canonicalize()?);
        }
        // codex's model provider is a closed local port: no codex turn runs here, and
        // thread/start makes no model request.
        let codex_home = dir.join("codex-home");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        try_write_codex_home(
            &codex_home,
            &format!("http://127.0.0.1:{port}/v1"),
            &work["codex"],
        )?;
        Ok(Setup {
            dir: dir.to_path_buf(),
            peers,
            home,
            codex_home,
            work,
        })
    }

    fn targets(&self) -> Vec<Target> {
        let mut targets = vec![
            Target {
                label: "codex (WebSocket)".into(),
                runtime: "codex",
                daemon: DaemonKind::Main,
            },
            Target {
                label: "opencode".into(),
                runtime: "opencode",
                daemon: DaemonKind::Main,
            },
        ];
        for (index, pi) in self.peers.pis.iter().enumerate() {
            targets.push(Target {
                label: pi.label.clone(),
                runtime: "pi",
                daemon: if index == 0 {
                    DaemonKind::Main
                } else {
                    DaemonKind::PiNewest
                },
            });
        }
        targets
    }

    fn daemon_kinds(&self) -> Vec<DaemonKind> {
        if self.peers.pis.len() > 1 {
            vec![DaemonKind::Main, DaemonKind::PiNewest]
        } else {
            vec![DaemonKind::Main]
        }
    }

    /// Starts `cohost serve` (release build) of `kind`, on its own cohost home (the same one
    /// each time: the sessions are closed before each stop, so a restarted daemon restores
    /// nothing).
    fn start(&self, kind: DaemonKind, tmux: &TmuxServer) -> anyhow::Result<Daemon> {
        let (name, pi) = match kind {
            DaemonKind::Main => ("main", &self.peers.pis[0]),
            DaemonKind::PiNewest => ("pi-newest", &self.peers.pis[1]),
        };
        let mut command = bench::serve_command(Path::new(COHOST), tmux);
        for var in SCRUBBED_ENV.into_iter().chain(BENCH_SCRUBBED_ENV) {
            command.env_remove(var);
        }
        command
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("PATH", pi_path(pi))
            .env("COHOST_PI_BIN", &pi.bin)
            .env("COHOST_OPENCODE_BIN", &self.peers.opencode)
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
            .env("OPENCODE_DISABLE_SHARE", "1")
            .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
            .env("COHOST_CODEX_BIN", &self.peers.codex)
            .env("CODEX_HOME", &self.codex_home)
            .env(MOCK_API_KEY_ENV, MOCK_API_KEY);
        let home = self.dir.join(format!("cohost-{name}"));
        Daemon::start(
            command,
            &home,
            self.dir.join(format!("daemon-{name}.stderr")),
        )
    }
}

/// `POST /api/sessions`, timed from the request to the whole 201 answer, which must show a
/// live session (codex: with its thread). Returns the session id and the time.
async fn create_session(
    conn: &mut Conn,
    runtime: &str,
    work: &Path,
) -> anyhow::Result<(String, Duration)> {
    let mut body = json!({"runtime": runtime, "cwd": work.to_string_lossy()});
    if runtime == "pi" {
        // No gate extension, as the directly driven Pi of part 2 (no tool runs here anyway).
        body["approvalPolicy"] = json!("never");
    }
    let (answer, elapsed) = conn
        .create_timed(&body)
        .await
        .with_context(|| format!("creating a {runtime} session"))?;
    let session = &answer["session"];
    if session["state"] != "live" || (runtime == "codex" && !session["threadId"].is_string()) {
        bail!("POST /api/sessions ({runtime}) answered 201 without a live session: {answer}");
    }
    Ok((bench::session_id(&answer)?, elapsed))
}

// ---------------------------------------------------------------------------------------------
// part 1: session start

/// Cold and warm `POST /api/sessions` times of every target. Each round starts the daemons,
/// then takes each target in turn (the order rotates from round to round): its cold session,
/// its warm ones, then closes them all.
async fn session_start(
    setup: &Setup,
    tmux: &TmuxServer,
) -> anyhow::Result<Vec<(Vec<Duration>, Vec<Duration>)>> {
    let targets = setup.targets();
    let mut times = vec![(Vec::new(), Vec::new()); targets.len()];
    for round in 0..COLD_SAMPLES {
        let mut daemons = Vec::new();
        for kind in setup.daemon_kinds() {
            daemons.push((kind, setup.start(kind, tmux)?));
        }
        for step in 0..targets.len() {
            let index = (round + step) % targets.len();
            let target = &targets[index];
            let daemon = daemons
                .iter()
                .find(|(kind, _)| *kind == target.daemon)
                .map(|(_, daemon)| daemon)
                .context("no daemon for a target")?;
            let mut conn = Conn::open(daemon, HTTP_TIMEOUT).await?;
            conn.call(Method::GET, "/api/health", None, StatusCode::OK)
                .await?;
            let work = &setup.work[target.runtime];
            let mut ids = Vec::new();
            let (id, elapsed) = create_session(&mut conn, target.runtime, work).await?;
            times[index].0.push(elapsed);
            ids.push(id);
            for _ in 0..WARM_PER_DAEMON {
                let (id, elapsed) = create_session(&mut conn, target.runtime, work).await?;
                times[index].1.push(elapsed);
                ids.push(id);
            }
            conn.close_sessions(&ids).await?;
        }
        for (_, mut daemon) in daemons {
            daemon.stop(STOP_GRACE)?;
        }
    }
    Ok(times)
}

// ---------------------------------------------------------------------------------------------
// part 2: model delta → reader latency

/// One measured event: a delta (`index` < [`DELTAS`]) or the text's completion
/// (`index` = [`DELTAS`], stamped with the last delta's time).
#[derive(Debug, Clone, Copy)]
struct Stamp {
    turn: usize,
    index: usize,
    /// CLOCK_REALTIME ns: the mock's write, and this process's read.
    sent: i64,
    received: i64,
}

impl Stamp {
    fn latency(&self) -> Duration {
        Duration::from_nanos((self.received - self.sent).max(0) as u64)
    }
}

/// What one reader saw of one turn.
#[derive(Default)]
struct TurnSeen {
    deltas: Vec<Stamp>,
    completed: Vec<Stamp>,
    /// The latest stamp of the deltas seen so far: a completion's send time.
    last_sent: i64,
}

impl TurnSeen {
    /// Files the stamps `<i>:<ns>` of a delta's text (a peer may join deltas).
    fn delta(&mut self, turn: usize, text: &str, received: i64) {
        for (index, sent) in stamps(text) {
            self.last_sent = self.last_sent.max(sent);
            self.deltas.push(Stamp {
                turn,
                index,
                sent,
                received,
            });
        }
    }

    /// The text's completion, if its text is the measured one.
    fn completed(&mut self, turn: usize, text: Option<&str>, received: i64) {
        if text.is_some_and(|text| stamps(text).next().is_none()) {
            return;
        }
        if self.last_sent > 0 {
            self.completed.push(Stamp {
                turn,
                index: DELTAS,
                sent: self.last_sent,
                received,
            });
        }
    }
}

/// The `<index>:<ns>` words of a stamped text.
fn stamps(text: &str) -> impl Iterator<Item = (usize, i64)> + '_ {
    text.split_whitespace().filter_map(|word| {
        let (index, ns) = word.split_once(':')?;
        Some((index.parse().ok()?, ns.parse().ok()?))
    })
}

/// One row of the latency table: every stamp of one reader over the measured turns.
#[derive(Default)]
struct Row {
    deltas: Vec<Stamp>,
    completed: Vec<Stamp>,
}

impl Row {
    fn add(&mut self, seen: TurnSeen) {
        self.deltas.extend(seen.deltas);
        self.completed.extend(seen.completed);
    }
}

struct Summary {
    samples: usize,
    missing: usize,
    duplicates: usize,
    p50: Duration,
    p90: Duration,
    p99: Duration,
    max: Duration,
}

/// Latency percentiles of `stamps`, checked against the `expected` (turn, index) pairs.
fn summarize(stamps: &[Stamp], expected: &[(usize, usize)]) -> Summary {
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    for stamp in stamps {
        if !seen.insert((stamp.turn, stamp.index)) {
            duplicates += 1;
        }
    }
    let missing = expected.iter().filter(|key| !seen.contains(key)).count();
    let mut latencies: Vec<Duration> = stamps.iter().map(Stamp::latency).collect();
    latencies.sort_unstable();
    Summary {
        samples: latencies.len(),
        missing,
        duplicates,
        p50: percentile(&latencies, 50.0),
        p90: percentile(&latencies, 90.0),
        p99: percentile(&latencies, 99.0),
        max: latencies.last().copied().unwrap_or_default(),
    }
}

/// Per-event differences (cohost − direct) of the events both readers saw: OpenCode's two
/// readers see the same events.
fn paired(cohost: &[Stamp], direct: &[Stamp]) -> Vec<i64> {
    let direct: HashMap<(usize, usize), i64> = direct
        .iter()
        .map(|s| ((s.turn, s.index), s.received))
        .collect();
    let mut diffs: Vec<i64> = cohost
        .iter()
        .filter_map(|s| Some(s.received - direct.get(&(s.turn, s.index))?))
        .collect();
    diffs.sort_unstable();
    diffs
}

/// Reads a session's SSE stream until `turn.completed`, timestamping each `data:` line with
/// the arrival of the frame that completed it.
async fn read_cohost(body: Incoming, turn: usize) -> anyhow::Result<TurnSeen> {
    let mut seen = TurnSeen::default();
    let ended = bench::read_lines_until(body, |received, line| {
        let Some(data) = line.strip_prefix(b"data:") else {
            return Ok(None);
        };
        let event: Value = serde_json::from_slice(data)
            .with_context(|| format!("bad SSE data {:?}", String::from_utf8_lossy(data)))?;
        let data = &event["data"];
        match event["type"].as_str() {
            Some("item.delta") => {
                seen.delta(turn, data["delta"].as_str().unwrap_or_default(), received)
            }
            Some("item.completed") if data["item"]["type"] == "agentMessage" => {
                seen.completed(turn, data["item"]["text"].as_str(), received)
            }
            Some("turn.completed") => return Ok(Some(())),
            _ => {}
        }
        Ok(None)
    })
    .await?;
    if ended.is_none() {
        bail!("cohost's SSE stream ended before turn.completed");
    }
    Ok(seen)
}

/// Subscribes to the session's cohost stream; the reader runs until the turn completes.
async fn subscribe_cohost(
    daemon: &Daemon,
    session: &str,
    turn: usize,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<TurnSeen>>> {
    let mut conn = Conn::open(daemon, HTTP_TIMEOUT).await?;
    let path = format!("/api/sessions/{session}/events/stream");
    let response = conn.send(Method::GET, &path, None).await?;
    let body = bench::stream_body(response, &format!("GET {path}")).await?;
    // The stream is subscribed once its headers are here.
    Ok(tokio::spawn(async move {
        let _conn = conn;
        read_cohost(body, turn).await
    }))
}

async fn join(
    reader: tokio::task::JoinHandle<anyhow::Result<TurnSeen>>,
    what: &str,
) -> anyhow::Result<TurnSeen> {
    let abort = reader.abort_handle();
    match tokio::time::timeout(TURN_TIMEOUT, reader).await {
        Ok(joined) => joined?,
        Err(_) => {
            abort.abort();
            bail!("{what}: the turn did not end within {TURN_TIMEOUT:?}")
        }
    }
}

/// The mock's answer to the prompt naming `marker`: the stamped deltas.
fn push_step(mock: &MockMessages, marker: &str) {
    mock.push(
        Step::stamped(DELTAS)
            .delay(DELTA_GAP)
            .when_user_contains(marker),
    );
}

async fn post_prompt(daemon: &Daemon, session: &str, text: &str) -> anyhow::Result<()> {
    let mut conn = Conn::open(daemon, HTTP_TIMEOUT).await?;
    conn.call(
        Method::POST,
        &format!("/api/sessions/{session}/messages"),
        Some(&json!({ "text": text })),
        StatusCode::OK,
    )
    .await?;
    Ok(())
}

// ---- OpenCode: the daemon's own `opencode serve`, read directly ----

/// The `opencode serve` the daemon runs for a session: its port (from its `--port` argument)
/// and its password (from its environment), read from `/proc` (same user).
struct OpencodeServer {
    port: u16,
    auth: String,
}

fn proc_children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let after = stat.rsplit_once(')')?.1.to_owned();
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

fn find_opencode_server(daemon: &Daemon) -> anyhow::Result<OpencodeServer> {
    for pid in proc_children(daemon.pid()) {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a == "serve") {
            continue;
        }
        let Some(port) = args
            .iter()
            .position(|a| a == "--port")
            .and_then(|i| args.get(i + 1)?.parse().ok())
        else {
            continue;
        };
        let environ = std::fs::read(format!("/proc/{pid}/environ"))?;
        let var = |name: &str| {
            environ.split(|b| *b == 0).find_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                entry.strip_prefix(&format!("{name}=")).map(str::to_owned)
            })
        };
        let password = var("OPENCODE_SERVER_PASSWORD")
            .context("the opencode serve child has no OPENCODE_SERVER_PASSWORD")?;
        let user = var("OPENCODE_SERVER_USERNAME").unwrap_or_else(|| "opencode".into());
        use base64::Engine;
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        return Ok(OpencodeServer { port, auth });
    }
    bail!(
        "no `opencode serve` child of the daemon (pid {}) found in /proc",
        daemon.pid()
    )
}

/// Subscribes to the server's `/event` stream (confirmed by its `server.connected`); the reader
/// runs until `session.idle`.
async fn subscribe_opencode(
    server: &OpencodeServer,
    turn: usize,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<TurnSeen>>> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    let mut sender = bench::handshake(addr).await?;
    let request = Request::builder()
        .method(Method::GET)
        .uri("/event")
        .header(HOST, addr.to_string())
        .header(AUTHORIZATION, &server.auth)
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))?;
    let response = sender.send_request(request).await?;
    let mut body = bench::stream_body(response, "opencode GET /event").await?;
    // Wait for `server.connected`: from then on the server publishes to this stream.
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let frame = tokio::time::timeout(HTTP_TIMEOUT, body.frame())
            .await
            .context("opencode /event: no server.connected")?
            .context("opencode /event ended")??;
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
        if buf.windows(16).any(|w| w == b"server.connected") {
            break;
        }
    }
    Ok(tokio::spawn(async move {
        let _sender = sender;
        read_opencode(body, turn).await
    }))
}

async fn read_opencode(body: Incoming, turn: usize) -> anyhow::Result<TurnSeen> {
    let mut seen = TurnSeen::default();
    let ended = bench::read_lines_until(body, |received, line| {
        let Some(data) = line.strip_prefix(b"data:") else {
            return Ok(None);
        };
        let Ok(event) = serde_json::from_slice::<Value>(data) else {
            return Ok(None);
        };
        let p = &event["properties"];
        match event["type"].as_str() {
            Some("message.part.delta") if p["field"] == "text" => {
                seen.delta(turn, p["delta"].as_str().unwrap_or_default(), received)
            }
            Some("message.part.updated")
                if p["part"]["type"] == "text" && p["part"]["time"]["end"].is_number() =>
            {
                let text = p["part"]["text"].as_str();
                if seen.completed.is_empty() {
                    seen.completed(turn, text, received)
                }
            }
            Some("session.idle") => return Ok(Some(())),
            Some("session.status") if p["status"]["type"] == "idle" => return Ok(Some(())),
            _ => {}
        }
        Ok(None)
    })
    .await?;
    if ended.is_none() {
        bail!("opencode's /event stream ended before session.idle");
    }
    Ok(seen)
}

// ---- Pi: a `pi --mode rpc` driven here ----

struct DirectPi {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    buf: Vec<u8>,
    next_id: u64,
}

impl DirectPi {
    /// Starts Pi as cohost does (its own agent directory, a copy of the peer home's; its own
    /// session directory; `PI_OFFLINE`), without the gate extension.
    fn start(setup: &Setup, pi: &PiRelease, name: &str) -> anyhow::Result<DirectPi> {
        let root = setup.dir.join(format!("direct-{name}"));
        let agent_dir = root.join("agent");
        let session_dir = root.join("sessions");
        std::fs::create_dir_all(&agent_dir)?;
        std::fs::create_dir_all(&session_dir)?;
        for file in ["models.json", "settings.json"] {
            std::fs::copy(
                setup.home.join(".pi/agent").join(file),
                agent_dir.join(file),
            )?;
        }
        let mut child = tokio::process::Command::new(&pi.bin)
            .args(["--mode", "rpc", "--session-dir"])
            .arg(&session_dir)
            .current_dir(&setup.work["pi"])
            .env("HOME", &setup.home)
            .env("PATH", pi_path(pi))
            .env("PI_CODING_AGENT_DIR", &agent_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(root.join("stderr"))?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", pi.bin.display()))?;
        let stdin = child.stdin.take().context("pi stdin")?;
        let stdout = child.stdout.take().context("pi stdout")?;
        Ok(DirectPi {
            child,
            stdin,
            stdout,
            buf: Vec::new(),
            next_id: 1,
        })
    }

    /// One prompt, read to its `agent_end`; each stdout line timestamped with the arrival of
    /// the read that completed it.
    async fn turn(&mut self, turn: usize, text: &str) -> anyhow::Result<TurnSeen> {
        let id = format!("bench-{}", self.next_id);
        self.next_id += 1;
        let command = json!({"id": id, "type": "prompt", "message": text});
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await?;
        self.stdin.flush().await?;
        let mut seen = TurnSeen::default();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = self.stdout.read(&mut chunk).await?;
            if n == 0 {
                bail!("pi's stdout ended mid-turn");
            }
            let received = now_ns();
            self.buf.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            let mut done = false;
            while let Some(end) = self.buf[start..].iter().position(|b| *b == b'\n') {
                let line = &self.buf[start..start + end];
                start += end + 1;
                if done {
                    continue;
                }
                let Ok(event) = serde_json::from_slice::<Value>(line) else {
                    continue;
                };
                match event["type"].as_str() {
                    Some("response") if event["id"] == id.as_str() && event["success"] != true => {
                        bail!("pi refused the prompt: {event}");
                    }
                    Some("message_update") => {
                        let update = &event["assistantMessageEvent"];
                        match update["type"].as_str() {
                            Some("text_delta") => seen.delta(
                                turn,
                                update["delta"].as_str().unwrap_or_default(),
                                received,
                            ),
                            Some("text_end") => {
                                seen.completed(turn, update["content"].as_str(), received)
                            }
                            _ => {}
                        }
                    }
                    Some("agent_end") => done = true,
                    _ => {}
                }
            }
            self.buf.drain(..start);
            if done {
                return Ok(seen);
            }
        }
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The rows of part 2.
struct Latency {
    opencode_cohost: Row,
    opencode_direct: Row,
    /// Per Pi release: (cohost, direct).
    pi: Vec<(String, Row, Row)>,
    /// The measured turns of each row (turn numbers).
    turns: Vec<usize>,
}

async fn latency(setup: &Setup, tmux: &TmuxServer, mock: &MockMessages) -> anyhow::Result<Latency> {
    let mut daemons = Vec::new();
    for kind in setup.daemon_kinds() {
        daemons.push(setup.start(kind, tmux)?);
    }
    let mut conn = Conn::open(&daemons[0], HTTP_TIMEOUT).await?;
    let (opencode, _) = create_session(&mut conn, "opencode", &setup.work["opencode"]).await?;
    let server = find_opencode_server(&daemons[0])?;
    let mut pis = Vec::new();
    for (index, pi) in setup.peers.pis.iter().enumerate() {
        let daemon = &daemons[index.min(daemons.len() - 1)];
        let mut conn = Conn::open(daemon, HTTP_TIMEOUT).await?;
        let (session, _) = create_session(&mut conn, "pi", &setup.work["pi"]).await?;
        let direct = DirectPi::start(setup, pi, &format!("pi-{index}"))?;
        pis.push((index, session, direct));
    }

    let mut report = Latency {
        opencode_cohost: Row::default(),
        opencode_direct: Row::default(),
        pi: setup
            .peers
            .pis
            .iter()
            .map(|pi| (pi.label.clone(), Row::default(), Row::default()))
            .collect(),
        turns: Vec::new(),
    };
    let mut marker = 0;
    let mut next_marker = || {
        marker += 1;
        format!("latency turn {marker}, reply")
    };
    // Round 0 warms every path up and is not measured.
    for round in 0..=ROUNDS {
        let measured = round > 0;
        if measured {
            report.turns.push(round);
        }
        // OpenCode: both readers on the same turn.
        let text = next_marker();
        push_step(mock, &text);
        let direct = subscribe_opencode(&server, round).await?;
        let cohost = subscribe_cohost(&daemons[0], &opencode, round).await?;
        post_prompt(&daemons[0], &opencode, &text).await?;
        let cohost = join(cohost, "opencode, cohost's SSE").await?;
        let direct = join(direct, "opencode, its /event").await?;
        if measured {
            report.opencode_cohost.add(cohost);
            report.opencode_direct.add(direct);
        }
        // Pi: the hosted one's turn, then the direct one's.
        for (index, session, direct_pi) in &mut pis {
            let daemon = &daemons[(*index).min(daemons.len() - 1)];
            let text = next_marker();
            push_step(mock, &text);
            let cohost = subscribe_cohost(daemon, session, round).await?;
            post_prompt(daemon, session, &text).await?;
            let cohost = join(cohost, "pi, cohost's SSE").await?;
            let text = next_marker();
            push_step(mock, &text);
            let direct = tokio::time::timeout(TURN_TIMEOUT, direct_pi.turn(round, &text))
                .await
                .context("pi, direct: the turn did not end in time")??;
            if measured {
                report.pi[*index].1.add(cohost);
                report.pi[*index].2.add(direct);
            }
        }
    }
    for (_, _, direct) in pis {
        direct.stop().await;
    }
    for mut daemon in daemons {
        daemon.stop(STOP_GRACE)?;
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// the report

fn list_ms(values: &[Duration]) -> String {
    values
        .iter()
        .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join(" ")
}

fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        return "-".into();
    }
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

fn start_row(name: &str, values: &[Duration], codex: &[Duration], each: bool) {
    let s = sorted(values);
    let c = sorted(codex);
    println!(
        "  {:<26} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}   {}",
        name,
        values.len(),
        ms(s.first().copied().unwrap_or_default()),
        ms(percentile(&s, 50.0)),
        ms(percentile(&s, 90.0)),
        ms(s.last().copied().unwrap_or_default()),
        ratio(percentile(&s, 50.0), percentile(&c, 50.0)),
        ratio(percentile(&s, 90.0), percentile(&c, 90.0)),
        if each { list_ms(values) } else { String::new() }
    );
}

fn latency_header() {
    println!(
        "  {:<44} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "reader", "samples", "missing", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
}

fn latency_row(name: &str, s: &Summary) {
    println!(
        "  {:<44} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        name,
        s.samples,
        s.missing,
        ms(s.p50),
        ms(s.p90),
        ms(s.p99),
        ms(s.max)
    );
}

fn signed(a: Duration, b: Duration) -> String {
    format!("{:+.3}", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0)
}

fn added_row(name: &str, cohost: &Summary, direct: &Summary) {
    println!(
        "  {:<44} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        name,
        "",
        "",
        signed(cohost.p50, direct.p50),
        signed(cohost.p90, direct.p90),
        signed(cohost.p99, direct.p99),
        signed(cohost.max, direct.max)
    );
}

fn paired_row(name: &str, diffs: &[i64]) {
    let pick = |p: f64| -> String {
        if diffs.is_empty() {
            return "-".into();
        }
        let rank = ((p / 100.0) * diffs.len() as f64).ceil() as usize;
        let v = diffs[rank.clamp(1, diffs.len()) - 1];
        format!("{:+.3}", v as f64 / 1e6)
    };
    println!(
        "  {:<44} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        name,
        diffs.len(),
        "",
        pick(50.0),
        pick(90.0),
        pick(99.0),
        pick(100.0)
    );
}

/// How many CPUs processes outside this bench's tree kept busy on average between `start` and
/// `end` ([`CpuUse::sample_tree`]), and how many the bench, its daemons and peers did.
fn others(start: Option<CpuUse>, end: Option<CpuUse>, cpus: usize) -> String {
    match (start, end) {
        (Some(start), Some(end)) if end.total > start.total => {
            let busy = end.busy.saturating_sub(start.busy);
            let ours = end.ours.saturating_sub(start.ours);
            let elapsed = (end.total - start.total) as f64 / cpus.max(1) as f64;
            format!(
                "{:.2} of {cpus} CPUs busy with processes outside this bench's tree, {:.2} with the bench, its daemons and peers",
                busy.saturating_sub(ours) as f64 / elapsed,
                ours as f64 / elapsed
            )
        }
        _ => "CPU use unknown".into(),
    }
}

async fn run() -> anyhow::Result<bool> {
    let cpus = bench::cpus();
    let started = Instant::now();
    let cpu_start = CpuUse::sample_tree();
    println!(
        "cohost hosted-runtimes benchmark ({cpus} CPUs, release build); load average at start: {}",
        loadavg()
    );
    let peers = Peers::find()?;
    println!(
        "  codex {}\n  opencode {}\n{}",
        peers.codex.display(),
        peers.opencode.display(),
        peers
            .pis
            .iter()
            .map(|pi| format!(
                "  {} {} (node {})",
                pi.label,
                pi.bin.display(),
                pi.node.display()
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let dir = tempfile::Builder::new()
        .prefix("cohost-bench-hosted")
        .tempdir()?;
    let mock = MockMessages::start();
    let setup = Setup::new(dir.path(), peers, &mock)?;
    let session_dir = dir.path().join("tmux-session");
    std::fs::create_dir_all(&session_dir)?;
    let tmux = TmuxServer::with_sessions(&[("bench", &session_dir)]);

    let starts = session_start(&setup, &tmux).await?;
    println!(
        "part 1 done in {:.1} s; load average {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    let latency = latency(&setup, &tmux, &mock).await?;

    // ---- report ----
    let targets = setup.targets();
    println!();
    println!(
        "POST /api/sessions -> 201 live (request sent -> whole answer read), {COLD_SAMPLES} daemon starts, {WARM_PER_DAEMON} warm after each cold"
    );
    println!(
        "  {:<26} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}   each cold (ms)",
        "runtime", "n", "min ms", "p50 ms", "p90 ms", "max ms", "p50/cdx", "p90/cdx"
    );
    let (codex_cold, codex_warm) = &starts[0];
    for (target, (cold, warm)) in targets.iter().zip(&starts) {
        start_row(&format!("{}, cold", target.label), cold, codex_cold, true);
        start_row(&format!("{}, warm", target.label), warm, codex_warm, false);
    }

    let expected: Vec<(usize, usize)> = latency
        .turns
        .iter()
        .flat_map(|turn| (0..DELTAS).map(move |i| (*turn, i)))
        .collect();
    let expected_done: Vec<(usize, usize)> =
        latency.turns.iter().map(|turn| (*turn, DELTAS)).collect();
    let mut ok = true;
    let mut check = |name: &str, s: &Summary| {
        if s.missing > 0 || s.duplicates > 0 {
            println!(
                "FAILURE: {name}: {} samples, {} missing, {} duplicated",
                s.samples, s.missing, s.duplicates
            );
            ok = false;
        }
    };
    println!();
    println!(
        "Model text delta -> reader, {ROUNDS} turns of {DELTAS} deltas {} ms apart per row; sent = the mock's",
        DELTA_GAP.as_millis()
    );
    println!(
        "  CLOCK_REALTIME just before it writes the delta; received = the frame/read carrying the event"
    );
    let section = |title: &str,
                   cohost: &Row,
                   direct: &Row,
                   direct_name: &str,
                   pair: bool,
                   check: &mut dyn FnMut(&str, &Summary)| {
        println!();
        println!("  {title}");
        latency_header();
        for (what, c, d, exp) in [
            ("delta", &cohost.deltas, &direct.deltas, expected.as_slice()),
            (
                "completed",
                &cohost.completed,
                &direct.completed,
                expected_done.as_slice(),
            ),
        ] {
            let sc = summarize(c, exp);
            let sd = summarize(d, exp);
            let cohost_name = if what == "delta" {
                "cohost SSE item.delta"
            } else {
                "cohost SSE item.completed (from last delta)"
            };
            let direct_name = format!("{direct_name}, {what}");
            latency_row(&direct_name, &sd);
            latency_row(cohost_name, &sc);
            added_row("  added by cohost (cohost - direct)", &sc, &sd);
            if pair {
                paired_row("  added, per event (same events)", &paired(c, d));
            }
            if what == "delta"
                && let Some(worst) = c.iter().max_by_key(|s| s.received - s.sent)
            {
                let twin = d
                    .iter()
                    .find(|s| s.turn == worst.turn && s.index == worst.index)
                    .map(|s| format!("{} ms", ms(s.latency())))
                    .unwrap_or_else(|| "-".into());
                let over =
                    |stamps: &[Stamp]| stamps.iter().filter(|s| s.latency() > SLOW_DELTA).count();
                println!(
                    "    slowest cohost delta: turn {} #{} {} ms (direct, same turn and index: {twin}); over {} ms: cohost {}, direct {}",
                    worst.turn,
                    worst.index,
                    ms(worst.latency()),
                    SLOW_DELTA.as_millis(),
                    over(c),
                    over(d)
                );
            }
            check(&format!("{title} {cohost_name}"), &sc);
            check(&format!("{title} {direct_name}"), &sd);
        }
    };
    section(
        "OpenCode: both readers on the same turns of the daemon's opencode serve",
        &latency.opencode_cohost,
        &latency.opencode_direct,
        "opencode /event (direct)",
        true,
        &mut check,
    );
    for (label, cohost, direct) in &latency.pi {
        section(
            &format!(
                "{label}: hosted and direct `pi --mode rpc`, turns alternating (different processes)"
            ),
            cohost,
            direct,
            "pi stdout (direct)",
            false,
            &mut check,
        );
    }

    println!();
    if ok {
        println!("every measured event arrived exactly once; every request answered as expected");
    }
    println!(
        "load average at the end: {}; {}; total bench time {:.1} s",
        loadavg(),
        others(cpu_start, CpuUse::sample_tree(), cpus),
        started.elapsed().as_secs_f64()
    );
    drop(tmux);
    Ok(ok)
}
