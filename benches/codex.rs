//! Codex-host benchmark for `cohost serve`: `cargo bench --bench codex`.
//!
//! 1. **Notification → SSE latency added by cohost.** This binary re-executes itself as a fake
//!    `codex app-server` (when `COHOST_BENCH_FAKE_APP_SERVER=1`) that speaks codex's wire over
//!    stdio or over its loopback WebSocket (`initialize`, `thread/start`, `turn/start`, then
//!    `turn/started`, `item/agentMessage/delta`, `item/completed`, `turn/completed`) and stamps
//!    every measured notification with the CLOCK_REALTIME nanoseconds taken just before it writes
//!    it. Daemons are pointed at it with `COHOST_CODEX_BIN=<this binary>` (WebSocket backends, the
//!    default; stdio backends; WebSocket with `--fsync never`); an SSE reader on
//!    `/api/sessions/{id}/events/stream` takes the time when the frame carrying the event arrives.
//!    The same fake read directly by this process (pipe, WebSocket) with no cohost in between is
//!    the baseline, in the same run and alternating turn by turn, so "added by cohost" is a
//!    difference measured side by side. Paths: live-only `item.delta` (no `id:`), the same in a
//!    stream that also carries stored items, and stored `item.completed` (fsync'd, `id:`). A disk
//!    probe fdatasyncs beside the daemons to tell the disk's share of the stored path's tail.
//! 2. **`POST /api/sessions` → 201 with a live thread**, against the real pinned codex
//!    (`$COHOST_TEST_CODEX_BIN`, else the copy `./scripts/test --setup-only` installs) in an
//!    offline CODEX_HOME, over both transports: cold (first session after a daemon start, the
//!    backend is spawned) and warm (later sessions on the same backend). Also against the fake,
//!    which shows cohost's own share of the creation time.
//!
//! Exits non-zero on any failure (an unexpected status, a missing, duplicated or misrouted event,
//! a daemon that does not start or stop cleanly). A missed target is reported, not a failure.
//! See `docs/benchmarks-codex.md`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use cohost_testkit::bench::{self, Conn, Daemon, loadavg, ms, percentile, sorted};
use cohost_testkit::codex_home::{
    CODEX_BIN_ENV, MOCK_API_KEY, MOCK_API_KEY_ENV, try_write_codex_home,
};
use cohost_testkit::{SCRUBBED_ENV, TmuxServer};

/// Set on a process to make this binary act as a fake `codex app-server`.
const FAKE_ENV: &str = "COHOST_BENCH_FAKE_APP_SERVER";
/// Events per measured path, measured in `ROUNDS` turns that alternate the direct and the
/// cohost runs, so that both see the same background load.
const LATENCY_EVENTS: usize = 2000;
const ROUNDS: usize = 4;
/// Pause after `turn/started` before the first measured line (a real turn spends this time,
/// and much more, waiting for the model), so that the turn's own stored events are not in
/// front of the first measured one.
const SETTLE: Duration = Duration::from_millis(20);
/// Pause between two measured deltas (live-only path).
const DELTA_GAP: Duration = Duration::from_millis(1);
/// Pause between two measured stored items: longer than one fsync here, so that items do not
/// queue behind each other's fsync and the figure is a latency, not a backlog.
const ITEM_GAP: Duration = Duration::from_millis(3);
/// An unmeasured turn first, so that every path (and the page cache) is warm.
const WARMUP_DELTAS: usize = 200;
const WARMUP_ITEMS: usize = 50;
/// Daemon starts for the cold creation samples (real codex), WebSocket (the default) and stdio.
const COLD_SAMPLES: usize = 5;
const COLD_SAMPLES_STDIO: usize = 3;
/// Warm creations after each cold one (on the same backend).
const WARM_PER_DAEMON: usize = 4;
/// Warm creations against the fake app-server.
const FAKE_WARM_SESSIONS: usize = 10;
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the disk probe fdatasyncs.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a daemon gets to shut down (and stop its codex backends) after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);

const TARGET_ADDED_P99: Duration = Duration::from_millis(2);
const PINNED_CODEX: &str = "@openai/codex@0.169.0";

/// The daemon under test (the release build `cargo bench` made).
const COHOST: &str = env!("CARGO_BIN_EXE_cohost");

/// Variables that would change how the daemon behaves, besides the kit's [`SCRUBBED_ENV`];
/// removed from its environment.
const BENCH_SCRUBBED_ENV: [&str; 3] = ["COHOST_CODEX_BIN", "COHOST_CODEX_TRANSPORT", "RUST_LOG"];

fn main() -> ExitCode {
    if std::env::var_os(FAKE_ENV).is_some_and(|v| v == "1") {
        return fake::run();
    }
    bench::main("codex", "see above", run())
}

/// CLOCK_REALTIME in nanoseconds: the fake and the readers run on the same machine.
fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// What one fake turn emits; travels as the text of `turn/start`'s input.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TurnSpec {
    deltas: usize,
    items: usize,
    gap: Duration,
    /// When non-zero, an unmeasured stored item (an `item/completed`) after every `mix` deltas:
    /// how deltas fare when the same stream also carries events that are written and fsync'd.
    mix: usize,
}

impl TurnSpec {
    fn text(&self) -> String {
        format!(
            "cohost-bench deltas={} items={} gap_us={} mix={}",
            self.deltas,
            self.items,
            self.gap.as_micros(),
            self.mix
        )
    }

    fn parse(text: &str) -> Option<TurnSpec> {
        let mut spec = TurnSpec {
            deltas: 0,
            items: 0,
            gap: Duration::ZERO,
            mix: 0,
        };
        let mut words = text.split_whitespace();
        if words.next()? != "cohost-bench" {
            return None;
        }
        for word in words {
            let (key, value) = word.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            match key {
                "deltas" => spec.deltas = value as usize,
                "items" => spec.items = value as usize,
                "gap_us" => spec.gap = Duration::from_micros(value),
                "mix" => spec.mix = value as usize,
                _ => return None,
            }
        }
        Some(spec)
    }
}

/// A measured event's payload: `<index>:<send time ns>`.
fn parse_stamp(text: &str) -> Option<(usize, i64)> {
    let (index, ns) = text.split_once(':')?;
    Some((index.parse().ok()?, ns.parse().ok()?))
}

// ---------------------------------------------------------------------------------------------
// the fake app-server

mod fake {
    //! A stand-in for `codex app-server`: the message shapes of codex's wire (docs/peers.md, "codex app-server")
    //! §3–§6 over either transport cohost uses — JSON lines on stdio, or (with `--listen
    //! ws://127.0.0.1:0 --ws-auth capability-token --ws-token-file F`) one JSON text frame per
    //! message on a loopback WebSocket, with codex's `listening on: ws://…` banner on stderr,
    //! `GET /readyz` and the bearer check — and timestamps in the measured payloads.

    use std::io::{BufRead, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::ExitCode;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, OnceLock};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};
    use tokio_tungstenite::tungstenite;
    use tungstenite::handshake::server::{ErrorResponse, Request, Response};
    use tungstenite::protocol::{Role, WebSocket};

    use super::{SETTLE, TurnSpec, now_ns};

    static IDS: AtomicU64 = AtomicU64::new(1);

    /// Where lines go: stdout, or the one WebSocket client (a write-only handle on a clone of
    /// its socket; the reader owns the other).
    enum Sink {
        Stdout,
        Ws(Box<Mutex<WebSocket<TcpStream>>>),
    }

    static SINK: OnceLock<Sink> = OnceLock::new();

    /// A codex-looking UUID (v7 layout), unique within this process.
    fn uuid() -> String {
        let n = IDS.fetch_add(1, Ordering::Relaxed);
        let ms = now_ns() / 1_000_000;
        format!(
            "{:08x}-{:04x}-7{:03x}-8{:03x}-{:012x}",
            (ms >> 16) & 0xffff_ffff,
            ms & 0xffff,
            std::process::id() & 0xfff,
            n & 0xfff,
            n
        )
    }

    fn emitted_at() -> i64 {
        now_ns() / 1_000_000
    }

    /// Sends one message (`line` ends with a newline). On stdio: one `write` of the whole line
    /// (line-buffered stdout passes a line ending in a newline straight through) under the
    /// stdout lock. On the WebSocket: one text frame, written and flushed under the lock.
    fn emit(line: &str) -> bool {
        match SINK.get() {
            Some(Sink::Stdout) | None => {
                let mut out = std::io::stdout().lock();
                out.write_all(line.as_bytes()).is_ok() && out.flush().is_ok()
            }
            Some(Sink::Ws(ws)) => {
                let mut ws = ws.lock().unwrap_or_else(|e| e.into_inner());
                ws.send(tungstenite::Message::text(line.trim_end())).is_ok()
            }
        }
    }

    fn emit_value(value: &Value) -> bool {
        emit(&format!("{value}\n"))
    }

    pub fn run() -> ExitCode {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if args.first().map(String::as_str) != Some("app-server") {
            eprintln!("fake codex: only `app-server` is supported (got {args:?})");
            return ExitCode::FAILURE;
        }
        let flag = |name: &str| {
            args.iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        match flag("--listen") {
            None => {
                let _ = SINK.set(Sink::Stdout);
                let mut peer = Peer::default();
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if !peer.handle(&line) {
                        break;
                    }
                }
                // stdin closed: the host is done with us (codex exits the same way).
                ExitCode::SUCCESS
            }
            Some(listen) => match serve_ws(&listen, flag("--ws-token-file")) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("fake codex: {error}");
                    ExitCode::FAILURE
                }
            },
        }
    }

    /// Accepts `GET /readyz` probes and one WebSocket client; returns when that client leaves.
    fn serve_ws(listen: &str, token_file: Option<String>) -> Result<(), String> {
        let address = listen
            .strip_prefix("ws://")
            .ok_or_else(|| format!("unsupported --listen {listen}"))?;
        let token = match token_file {
            Some(path) => Some(
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {path}: {e}"))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        let listener = TcpListener::bind(address).map_err(|e| format!("bind {address}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        // codex's banner, which cohost reads the port from.
        eprintln!("codex app-server (fake, cohost bench)");
        eprintln!("  listening on: ws://{local}");
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let token = token.clone();
                let done = done_tx.clone();
                std::thread::spawn(move || {
                    if connection(stream, token.as_deref()) {
                        let _ = done.send(());
                    }
                });
            }
        });
        let _ = done_rx.recv();
        Ok(())
    }

    /// One accepted connection: a readiness probe (answered, false) or the WebSocket client
    /// (served until it leaves, true).
    #[allow(clippy::result_large_err)] // the handshake callback's type is tungstenite's
    fn connection(mut stream: TcpStream, token: Option<&str>) -> bool {
        let _ = stream.set_nodelay(true);
        let mut head = [0u8; 64];
        let mut seen = 0;
        // Peek until the request line is complete, to route without consuming it.
        while seen < head.len() {
            match stream.peek(&mut head) {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen = n,
            }
            if head[..seen].contains(&b'\n') {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if head[..seen].starts_with(b"GET /readyz") {
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            return false;
        }
        let check = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
            let presented = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match token {
                Some(token) if presented != Some(token) => {
                    let mut refusal = ErrorResponse::new(Some("bad capability token".into()));
                    *refusal.status_mut() = tungstenite::http::StatusCode::UNAUTHORIZED;
                    Err(refusal)
                }
                _ => Ok(response),
            }
        };
        let Ok(mut reader) = tungstenite::accept_hdr(stream, check) else {
            return false;
        };
        let Ok(clone) = reader.get_ref().try_clone() else {
            return false;
        };
        let writer = WebSocket::from_raw_socket(clone, Role::Server, None);
        if SINK.set(Sink::Ws(Box::new(Mutex::new(writer)))).is_err() {
            return false; // one client only
        }
        let mut peer = Peer::default();
        loop {
            match reader.read() {
                Ok(tungstenite::Message::Text(text)) => {
                    if !peer.handle(text.as_str()) {
                        return true;
                    }
                }
                Ok(tungstenite::Message::Close(_)) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    }

    /// The state of the one connection.
    struct Peer {
        cwd: String,
    }

    impl Default for Peer {
        fn default() -> Self {
            Peer { cwd: "/".into() }
        }
    }

    impl Peer {
        /// Handles one incoming message; false when the connection is gone.
        fn handle(&mut self, line: &str) -> bool {
            let Ok(message) = serde_json::from_str::<Value>(line) else {
                return true; // codex drops malformed lines too
            };
            let (Some(id), Some(method)) = (
                message.get("id"),
                message.get("method").and_then(Value::as_str),
            ) else {
                return true; // a notification, or an answer to a server request
            };
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            let result = match method {
                "initialize" => json!({
                    "userAgent": "cohost/0.169.0 (cohost bench fake app-server)",
                    "codexHome": std::env::var("CODEX_HOME").unwrap_or_default(),
                    "platformFamily": "unix",
                    "platformOs": "linux",
                }),
                "thread/start" => {
                    if let Some(dir) = params.get("cwd").and_then(Value::as_str) {
                        self.cwd = dir.to_string();
                    }
                    let thread = thread_object(&uuid(), &self.cwd);
                    let answer = json!({
                        "thread": thread,
                        "model": "mock-model",
                        "modelProvider": "mock",
                        "serviceTier": null,
                        "cwd": self.cwd,
                        "approvalPolicy": params.get("approvalPolicy").cloned().unwrap_or(json!("on-request")),
                        "approvalsReviewer": "user",
                        "sandbox": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": false},
                        "reasoningEffort": null,
                    });
                    return emit_value(&json!({"id": id, "result": answer}))
                        && emit_value(&json!({
                            "method": "thread/started",
                            "params": {"thread": thread},
                            "emittedAtMs": emitted_at(),
                        }));
                }
                "turn/start" => {
                    let thread = params
                        .get("threadId")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let text = params
                        .pointer("/input/0/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let spec = TurnSpec::parse(text).unwrap_or(TurnSpec {
                        deltas: 1,
                        items: 0,
                        gap: Duration::ZERO,
                        mix: 0,
                    });
                    let turn = uuid();
                    let answer = json!({"turn": {
                        "id": turn, "rootTurnId": turn, "items": [], "itemsView": "notLoaded",
                        "status": "inProgress", "error": null, "startedAt": null,
                        "completedAt": null, "durationMs": null,
                    }});
                    if !emit_value(&json!({"id": id, "result": answer})) {
                        return false;
                    }
                    std::thread::spawn(move || run_turn(&thread, &turn, spec));
                    return true;
                }
                // thread/unsubscribe, turn/interrupt and anything else: an empty success.
                _ => json!({}),
            };
            emit_value(&json!({"id": id, "result": result}))
        }
    }

    fn thread_object(id: &str, cwd: &str) -> Value {
        let now = now_ns() / 1_000_000_000;
        json!({
            "id": id, "sessionId": id, "forkedFromId": null, "preview": "", "ephemeral": false,
            "historyMode": "paginated", "modelProvider": "mock", "model": "mock-model",
            "reasoningEffort": null, "createdAt": now, "updatedAt": now,
            "status": {"type": "idle"}, "path": null, "cwd": cwd, "cliVersion": "0.169.0",
            "originator": "cohost", "source": "vscode", "name": null, "turns": [],
        })
    }

    fn agent_message(item: &str, text: &str, started: i64, completed: Option<i64>) -> String {
        let completed = completed.map_or("null".to_string(), |ms| ms.to_string());
        format!(
            r#"{{"type":"agentMessage","moderation":null,"id":"{item}","text":"{text}","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":{started},"completedAtMs":{completed}}}"#
        )
    }

    fn item_completed(thread: &str, turn: &str, item: &str, text: &str, started: i64) -> String {
        let now = emitted_at();
        let item = agent_message(item, text, started, Some(now));
        format!(
            r#"{{"method":"item/completed","params":{{"item":{item},"threadId":"{thread}","turnId":"{turn}","contentTokenCount":null,"completedAtMs":{now}}},"emittedAtMs":{now}}}
"#
        )
    }

    /// One turn: status active, `turn/started`, the deltas of one agentMessage (each
    /// `<i>:<ns>`), then `items` completed agentMessages (text `<i>:<ns>`), status idle,
    /// `turn/completed`. `gap` before each measured line.
    fn run_turn(thread: &str, turn: &str, spec: TurnSpec) {
        let began = Instant::now();
        let started_s = now_ns() / 1_000_000_000;
        let status = |status: &str| {
            format!(
                r#"{{"method":"thread/status/changed","params":{{"threadId":"{thread}","status":{status}}},"emittedAtMs":{}}}
"#,
                emitted_at()
            )
        };
        let turn_object = |state: &str, completed: &str, duration: &str, items: &str| {
            format!(
                r#"{{"id":"{turn}","rootTurnId":"{turn}","items":[{items}],"itemsView":"{}","status":"{state}","error":null,"startedAt":{started_s},"completedAt":{completed},"durationMs":{duration}}}"#,
                if items.is_empty() {
                    "notLoaded"
                } else {
                    "summary"
                }
            )
        };
        if !emit(&status(r#"{"type":"active","activeFlags":[]}"#)) {
            return;
        }
        let started = turn_object("inProgress", "null", "null", "");
        if !emit(&format!(
            r#"{{"method":"turn/started","params":{{"threadId":"{thread}","turn":{started}}},"emittedAtMs":{}}}
"#,
            emitted_at()
        )) {
            return;
        }
        std::thread::sleep(SETTLE);
        let mut last_item = String::new();
        if spec.deltas > 0 {
            let item = format!("msg_{}", uuid().replace('-', ""));
            let item_started = emitted_at();
            let opened = agent_message(&item, "", item_started, None);
            if !emit(&format!(
                r#"{{"method":"item/started","params":{{"item":{opened},"threadId":"{thread}","turnId":"{turn}","startedAtMs":{item_started}}},"emittedAtMs":{item_started}}}
"#
            )) {
                return;
            }
            for index in 0..spec.deltas {
                std::thread::sleep(spec.gap);
                let ns = now_ns();
                let line = format!(
                    r#"{{"method":"item/agentMessage/delta","params":{{"threadId":"{thread}","turnId":"{turn}","itemId":"{item}","delta":"{index}:{ns}"}},"emittedAtMs":{}}}
"#,
                    ns / 1_000_000
                );
                if !emit(&line) {
                    return;
                }
                if spec.mix > 0 && (index + 1) % spec.mix == 0 {
                    std::thread::sleep(spec.gap);
                    let other = format!("msg_m{index}_{}", uuid().replace('-', ""));
                    let now = emitted_at();
                    if !emit(&item_completed(thread, turn, &other, "mixed", now)) {
                        return;
                    }
                }
            }
            if !emit(&item_completed(
                thread,
                turn,
                &item,
                "deltas done",
                item_started,
            )) {
                return;
            }
            last_item = agent_message(&item, "deltas done", item_started, Some(emitted_at()));
        }
        for index in 0..spec.items {
            std::thread::sleep(spec.gap);
            let item = format!("msg_i{index}_{}", uuid().replace('-', ""));
            let ns = now_ns();
            let line = item_completed(
                thread,
                turn,
                &item,
                &format!("{index}:{ns}"),
                ns / 1_000_000,
            );
            if !emit(&line) {
                return;
            }
        }
        if !emit(&status(r#"{"type":"idle"}"#)) {
            return;
        }
        let done = turn_object(
            "completed",
            &(now_ns() / 1_000_000_000).to_string(),
            &began.elapsed().as_millis().to_string(),
            &last_item,
        );
        emit(&format!(
            r#"{{"method":"turn/completed","params":{{"threadId":"{thread}","turn":{done}}},"emittedAtMs":{}}}
"#,
            emitted_at()
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// measurements

/// One measured event.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    index: usize,
    /// CLOCK_REALTIME ns: the fake's write, and this process's read.
    sent: i64,
    received: i64,
    /// The daemon's `ts` for a stored event: when its core sequenced it (ms since the epoch).
    sequenced_ms: Option<i64>,
}

impl Stamp {
    fn latency_ns(&self) -> i64 {
        self.received - self.sent
    }

    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_ns().max(0) as u64)
    }
}

/// The latencies of one measured path, checked for completeness.
#[derive(Default)]
struct Samples {
    stamps: Vec<Stamp>,
}

struct Summary {
    expected: usize,
    samples: usize,
    missing: usize,
    /// The first few missing indexes (index within its turn = index % events per turn).
    missing_first: Vec<usize>,
    duplicates: usize,
    negative: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    /// The slowest event, to split its time.
    worst: Option<Stamp>,
}

impl Samples {
    /// Adds another turn's samples, their indexes shifted by `offset`.
    fn merge(&mut self, other: Samples, offset: usize) {
        self.stamps
            .extend(other.stamps.into_iter().map(|stamp| Stamp {
                index: stamp.index + offset,
                ..stamp
            }));
    }

    fn summarize(&self, expected: usize) -> Summary {
        let mut seen = HashSet::with_capacity(self.stamps.len());
        let mut duplicates = 0;
        for stamp in &self.stamps {
            if !seen.insert(stamp.index) {
                duplicates += 1;
            }
        }
        let missing_all: Vec<usize> = (0..expected).filter(|i| !seen.contains(i)).collect();
        let missing = missing_all.len();
        let missing_first = missing_all.into_iter().take(10).collect();
        let negative = self.stamps.iter().filter(|s| s.latency_ns() < 0).count();
        let mut latencies: Vec<Duration> = self.stamps.iter().map(Stamp::latency).collect();
        latencies.sort_unstable();
        Summary {
            expected,
            samples: latencies.len(),
            missing,
            missing_first,
            duplicates,
            negative,
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
            max: latencies.last().copied().unwrap_or_default(),
            worst: self.stamps.iter().copied().max_by_key(Stamp::latency_ns),
        }
    }
}

fn signed_ms(a: Duration, b: Duration) -> String {
    format!("{:+.3}", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0)
}

/// What a turn's events yielded: deltas and stored items, by path.
#[derive(Default)]
struct TurnResult {
    deltas: Samples,
    items: Samples,
    /// Deltas that came with an `id:` or stored items without one (SSE only).
    misrouted: usize,
}

/// Files an event's payload under deltas or items when it is a measured one.
fn record(
    result: &mut TurnResult,
    is_delta: bool,
    payload: Option<&str>,
    received: i64,
    sequenced_ms: Option<i64>,
) {
    if let Some((index, sent)) = payload.and_then(parse_stamp) {
        let samples = if is_delta {
            &mut result.deltas
        } else {
            &mut result.items
        };
        samples.stamps.push(Stamp {
            index,
            sent,
            received,
            sequenced_ms,
        });
    }
}

// ---- baseline: the fake read directly by this process ----

type WsClient =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The two transports cohost speaks to codex, read here with no cohost in between.
enum DirectIo {
    Pipe {
        stdin: tokio::process::ChildStdin,
        lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    },
    Ws(Box<WsClient>),
}

struct DirectPeer {
    child: tokio::process::Child,
    io: Option<DirectIo>,
    next_id: u64,
    thread: String,
}

impl DirectPeer {
    /// Starts the fake and connects to it over `transport`, as cohost would (for the WebSocket:
    /// the banner's port, the capability token, TCP_NODELAY), then starts a thread.
    async fn start(
        work: &Path,
        codex_home: &Path,
        transport: Transport,
    ) -> anyhow::Result<DirectPeer> {
        let exe = std::env::current_exe().context("cannot find this benchmark's executable")?;
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("app-server")
            .env(FAKE_ENV, "1")
            .env("CODEX_HOME", codex_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let token_file = codex_home.join("direct-ws-token");
        let token = format!("{:x}", now_ns());
        if transport == Transport::WebSocket {
            std::fs::write(&token_file, &token)?;
            command
                .args([
                    "--listen",
                    "ws://127.0.0.1:0",
                    "--ws-auth",
                    "capability-token",
                ])
                .arg("--ws-token-file")
                .arg(&token_file);
        }
        let mut child = command
            .spawn()
            .context("cannot start the fake app-server")?;
        let stdin = child.stdin.take().context("no stdin pipe")?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let stderr = child.stderr.take().context("no stderr pipe")?;
        let mut stderr = tokio::io::BufReader::new(stderr).lines();
        let io = match transport {
            Transport::Stdio => {
                tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
                DirectIo::Pipe {
                    stdin,
                    lines: tokio::io::BufReader::new(stdout).lines(),
                }
            }
            Transport::WebSocket => {
                let port = loop {
                    let line = tokio::time::timeout(HTTP_TIMEOUT, stderr.next_line())
                        .await
                        .context("the fake app-server printed no banner")??
                        .context("the fake app-server exited before its banner")?;
                    if let Some(port) = line
                        .split_once("listening on: ws://")
                        .and_then(|(_, address)| address.trim().rsplit_once(':'))
                        .and_then(|(_, port)| port.parse::<u16>().ok())
                    {
                        break port;
                    }
                };
                tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
                use tokio_tungstenite::tungstenite::client::IntoClientRequest;
                let mut request = format!("ws://127.0.0.1:{port}").into_client_request()?;
                request
                    .headers_mut()
                    .insert(AUTHORIZATION, format!("Bearer {token}").parse()?);
                let (ws, _) =
                    tokio_tungstenite::connect_async_with_config(request, None, true).await?;
                DirectIo::Ws(Box::new(ws))
            }
        };
        let mut peer = DirectPeer {
            child,
            io: Some(io),
            next_id: 1,
            thread: String::new(),
        };
        peer.request(
            "initialize",
            json!({"clientInfo": {"name": "cohost-bench", "title": null, "version": "0.1.0"},
                   "capabilities": {"experimentalApi": true}}),
        )
        .await?;
        peer.send(&json!({"method": "initialized"})).await?;
        let answer = peer
            .request("thread/start", json!({"cwd": work.to_string_lossy()}))
            .await?;
        peer.thread = answer
            .pointer("/thread/id")
            .and_then(Value::as_str)
            .context("thread/start answered without a thread id")?
            .to_string();
        Ok(peer)
    }

    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        match self.io.as_mut().context("the connection is closed")? {
            DirectIo::Pipe { stdin, .. } => {
                stdin.write_all(format!("{message}\n").as_bytes()).await?;
                stdin.flush().await?;
            }
            DirectIo::Ws(ws) => {
                use futures_util::SinkExt;
                ws.send(tokio_tungstenite::tungstenite::Message::text(
                    message.to_string(),
                ))
                .await?;
            }
        }
        Ok(())
    }

    /// The next message and when it was read (CLOCK_REALTIME ns), before parsing it.
    async fn next_message(&mut self) -> anyhow::Result<(Value, i64)> {
        let io = self.io.as_mut().context("the connection is closed")?;
        let read = async {
            match io {
                DirectIo::Pipe { lines, .. } => {
                    let line = lines
                        .next_line()
                        .await?
                        .context("the fake app-server closed its stdout")?;
                    anyhow::Ok((now_ns(), line))
                }
                DirectIo::Ws(ws) => loop {
                    use futures_util::StreamExt;
                    let message = ws
                        .next()
                        .await
                        .context("the fake app-server closed the websocket")??;
                    let received = now_ns();
                    if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
                        break anyhow::Ok((received, text.as_str().to_string()));
                    }
                },
            }
        };
        let (received, line) = tokio::time::timeout(TURN_TIMEOUT, read)
            .await
            .context("the fake app-server went silent")??;
        Ok((serde_json::from_str(&line)?, received))
    }

    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))
            .await?;
        loop {
            let (message, _) = self.next_message().await?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    }

    /// Runs one turn and reads every notification until `turn/completed`.
    async fn turn(&mut self, spec: TurnSpec) -> anyhow::Result<TurnResult> {
        let id = self.next_id;
        self.next_id += 1;
        let thread = self.thread.clone();
        self.send(&json!({"id": id, "method": "turn/start", "params": {
            "threadId": thread,
            "input": [{"type": "text", "text": spec.text(), "text_elements": []}],
        }}))
        .await?;
        let mut result = TurnResult::default();
        loop {
            let (message, received) = self.next_message().await?;
            match message.get("method").and_then(Value::as_str) {
                Some("item/agentMessage/delta") => record(
                    &mut result,
                    true,
                    message.pointer("/params/delta").and_then(Value::as_str),
                    received,
                    None,
                ),
                Some("item/completed") => record(
                    &mut result,
                    false,
                    message.pointer("/params/item/text").and_then(Value::as_str),
                    received,
                    None,
                ),
                Some("turn/completed") => return Ok(result),
                _ => {}
            }
        }
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(DirectIo::Ws(mut ws)) = self.io.take() {
            use futures_util::SinkExt;
            let _ = ws.close().await;
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if !status.success() {
                    bail!("the fake app-server exited with {status}");
                }
                Ok(())
            }
            Err(_) => {
                let _ = self.child.kill().await;
                bail!("the fake app-server did not exit after stdin closed")
            }
        }
    }
}

// ---- the daemon ----

/// Starts `cohost serve` (release build) with `home`, `args` and `env`, and its stderr appended to
/// `stderr_path`.
fn start_daemon(
    home: &Path,
    tmux: &TmuxServer,
    args: &[&str],
    env: &[(&str, OsString)],
    stderr_path: PathBuf,
) -> anyhow::Result<Daemon> {
    let mut command = bench::serve_command(Path::new(COHOST), tmux);
    command.args(args);
    for name in SCRUBBED_ENV.into_iter().chain(BENCH_SCRUBBED_ENV) {
        command.env_remove(name);
    }
    command.env_remove(FAKE_ENV);
    for (name, value) in env {
        command.env(name, value);
    }
    Daemon::start(command, home, stderr_path)
}

async fn connect(daemon: &Daemon) -> anyhow::Result<Conn> {
    Conn::open(daemon, HTTP_TIMEOUT).await
}

/// `POST /api/sessions`, timed from the request to the whole 201 answer, which must show a live
/// session with a thread. Returns the session id and the time.
async fn create_session(conn: &mut Conn, work: &Path) -> anyhow::Result<(String, Duration)> {
    let body = json!({"runtime": "codex", "cwd": work.to_string_lossy()});
    let (answer, elapsed) = conn.create_timed(&body).await?;
    let session = &answer["session"];
    if session["state"] != "live" || !session["threadId"].is_string() {
        bail!("POST /api/sessions answered 201 without a live thread: {answer}");
    }
    Ok((bench::session_id(&answer)?, elapsed))
}

/// Reads a session's SSE stream until `turn.completed`, timestamping each `data:` line with the
/// arrival of the frame that completed it.
async fn read_stream(body: Incoming) -> anyhow::Result<TurnResult> {
    let mut result = TurnResult::default();
    let mut has_id = false;
    let ended = bench::read_lines_until(body, |received, line| {
        if line.is_empty() {
            has_id = false; // end of one SSE event
        } else if line.starts_with(b"id:") {
            has_id = true;
        } else if let Some(data) = line.strip_prefix(b"data:") {
            let event: Value = serde_json::from_slice(data)
                .with_context(|| format!("bad SSE data {:?}", String::from_utf8_lossy(data)))?;
            match event["type"].as_str() {
                Some("item.delta") => {
                    result.misrouted += usize::from(has_id);
                    record(
                        &mut result,
                        true,
                        event["data"]["delta"].as_str(),
                        received,
                        None,
                    );
                }
                Some("item.completed") => {
                    let payload = event["data"]["item"]["text"].as_str();
                    if payload.and_then(parse_stamp).is_some() && !has_id {
                        result.misrouted += 1;
                    }
                    let sequenced = event["ts"].as_i64();
                    record(&mut result, false, payload, received, sequenced);
                }
                Some("turn.completed") => return Ok(Some(())),
                _ => {}
            }
        }
        Ok(None)
    })
    .await?;
    if ended.is_none() {
        bail!("the SSE stream ended before turn.completed");
    }
    Ok(result)
}

/// Sends one turn through the daemon and collects the session's events over SSE.
async fn cohost_turn(daemon: &Daemon, session: &str, spec: TurnSpec) -> anyhow::Result<TurnResult> {
    let mut stream_conn = connect(daemon).await?;
    let path = format!("/api/sessions/{session}/events/stream");
    let response = stream_conn.send(Method::GET, &path, None).await?;
    let body = bench::stream_body(response, &format!("GET {path}")).await?;
    // The stream is subscribed once its headers are here; only now start the turn.
    let reader = tokio::spawn(read_stream(body));
    let mut conn = connect(daemon).await?;
    let answer = conn
        .call(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(&json!({"text": spec.text()})),
            StatusCode::OK,
        )
        .await;
    if let Err(error) = answer {
        reader.abort();
        return Err(error);
    }
    let abort = reader.abort_handle();
    match tokio::time::timeout(TURN_TIMEOUT, reader).await {
        Ok(joined) => joined?,
        Err(_) => {
            abort.abort();
            bail!("turn.completed did not arrive over SSE within {TURN_TIMEOUT:?}")
        }
    }
}

/// The pinned codex (`$COHOST_TEST_CODEX_BIN`, else where `./scripts/test` installs it).
fn real_codex_bin() -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os(CODEX_BIN_ENV).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set")?;
            PathBuf::from(home)
                .join(".cache/cohost/peers")
                .join(PINNED_CODEX)
                .join("node_modules/.bin/codex")
        }
    };
    if !path.is_file() {
        bail!(
            "no codex at {} (set {CODEX_BIN_ENV}, or run ./scripts/test --setup-only to install {PINNED_CODEX})",
            path.display()
        );
    }
    Ok(path)
}

/// The kit's offline CODEX_HOME ([`cohost_testkit::codex_home`]) whose model provider is a
/// closed local port: no turn runs here, and thread/start makes no model request.
fn write_codex_home(dir: &Path, work: &Path) -> anyhow::Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    try_write_codex_home(dir, &format!("http://127.0.0.1:{port}/v1"), work)?;
    Ok(())
}

/// How cohost talks to its codex backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// JSON lines on the child's stdio (`COHOST_CODEX_TRANSPORT=stdio`).
    Stdio,
    /// A loopback WebSocket with a capability token: cohost's default.
    WebSocket,
}

impl Transport {
    /// The daemon environment that selects this transport.
    fn env(self) -> Vec<(&'static str, OsString)> {
        match self {
            Transport::Stdio => vec![("COHOST_CODEX_TRANSPORT", "stdio".into())],
            Transport::WebSocket => Vec::new(),
        }
    }
}

/// Where a measured turn runs.
enum Target<'a> {
    Direct(&'a mut DirectPeer),
    Cohost(&'a Daemon, &'a str),
}

async fn run_turn(target: Target<'_>, spec: TurnSpec) -> anyhow::Result<TurnResult> {
    match target {
        Target::Direct(peer) => peer.turn(spec).await,
        Target::Cohost(daemon, session) => cohost_turn(daemon, session, spec).await,
    }
}

/// Who reads the fake's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// This process, from the fake's stdout pipe (no cohost).
    DirectPipe,
    /// This process, from the fake's WebSocket (no cohost).
    DirectWs,
    /// A daemon with stdio backends, then its SSE stream.
    CohostStdio,
    /// A daemon with WebSocket backends (the default), then its SSE stream.
    CohostWs,
    /// The same with `--fsync never`.
    CohostWsNosync,
}

/// What a measured turn carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Deltas only; the deltas are measured.
    Deltas,
    /// Deltas with a stored item after every `MIX_EVERY`; the deltas are measured.
    Mixed,
    /// Stored items only; the items are measured.
    Items,
}

/// One stored item per this many deltas in the mixed load.
const MIX_EVERY: usize = 10;

/// Every measurement, in table order.
const MEASURES: [(Load, Via, &str); 11] = [
    (
        Load::Deltas,
        Via::DirectPipe,
        "direct, stdio pipe (no cohost)",
    ),
    (Load::Deltas, Via::CohostStdio, "cohost SSE, stdio backend"),
    (Load::Deltas, Via::DirectWs, "direct, WebSocket (no cohost)"),
    (
        Load::Deltas,
        Via::CohostWs,
        "cohost SSE, WebSocket backend (default)",
    ),
    (Load::Mixed, Via::DirectWs, "direct, WebSocket (no cohost)"),
    (
        Load::Mixed,
        Via::CohostWs,
        "cohost SSE, WebSocket backend (default)",
    ),
    (
        Load::Items,
        Via::DirectPipe,
        "direct, stdio pipe (no cohost)",
    ),
    (Load::Items, Via::CohostStdio, "cohost SSE, stdio backend"),
    (Load::Items, Via::DirectWs, "direct, WebSocket (no cohost)"),
    (
        Load::Items,
        Via::CohostWs,
        "cohost SSE, WebSocket backend (default)",
    ),
    (
        Load::Items,
        Via::CohostWsNosync,
        "cohost SSE, WebSocket backend, --fsync never",
    ),
];

struct LatencyReport {
    /// One per entry of `MEASURES`.
    summaries: Vec<Summary>,
    misrouted: usize,
    probe: DiskProbeResult,
    /// Session creation against the fake: (cold, warm) per transport.
    fake_stdio: (Duration, Vec<Duration>),
    fake_ws: (Duration, Vec<Duration>),
}

impl LatencyReport {
    fn get(&self, load: Load, via: Via) -> &Summary {
        let index = MEASURES
            .iter()
            .position(|(l, v, _)| *l == load && *v == via)
            .unwrap_or(0);
        &self.summaries[index]
    }
}

/// fdatasync timings taken beside the daemons, on their filesystem, to tell the disk's share.
struct DiskProbe {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(i64, i64)>>,
}

#[derive(Default)]
struct DiskProbeResult {
    /// (start, duration) in ns, CLOCK_REALTIME.
    syncs: Vec<(i64, i64)>,
}

impl DiskProbe {
    /// Appends 64 bytes and fdatasyncs them every `PROBE_INTERVAL`.
    fn start(dir: &Path) -> anyhow::Result<DiskProbe> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("disk-probe"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            use std::io::Write;
            let mut syncs = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let start = now_ns();
                if file.write_all(&[b'x'; 64]).is_err() || file.sync_data().is_err() {
                    break;
                }
                syncs.push((start, now_ns() - start));
                std::thread::sleep(PROBE_INTERVAL);
            }
            syncs
        });
        Ok(DiskProbe { stop, handle })
    }

    fn finish(self) -> DiskProbeResult {
        self.stop.store(true, Ordering::Relaxed);
        DiskProbeResult {
            syncs: self.handle.join().unwrap_or_default(),
        }
    }
}

impl DiskProbeResult {
    fn sorted(&self) -> Vec<Duration> {
        let mut durations: Vec<Duration> = self
            .syncs
            .iter()
            .map(|(_, d)| Duration::from_nanos((*d).max(0) as u64))
            .collect();
        durations.sort_unstable();
        durations
    }

    /// The longest probe fdatasync that overlapped `[from, to]`.
    fn longest_within(&self, from: i64, to: i64) -> Option<Duration> {
        self.syncs
            .iter()
            .filter(|(start, d)| *start <= to && start + d >= from)
            .map(|(_, d)| Duration::from_nanos((*d).max(0) as u64))
            .max()
    }
}

/// What every fake-backed daemon shares.
struct FakeSetup<'a> {
    dir: &'a Path,
    tmux: &'a TmuxServer,
    work: &'a Path,
    codex_home: &'a Path,
}

/// A fake-backed daemon with one session; also times its first (cold) and later (warm) session
/// creations.
async fn fake_daemon(
    setup: &FakeSetup<'_>,
    name: &str,
    args: &[&str],
    transport: Transport,
    warm_sessions: usize,
) -> anyhow::Result<(Daemon, String, Duration, Vec<Duration>)> {
    let FakeSetup {
        dir,
        tmux,
        work,
        codex_home,
    } = *setup;
    let exe = std::env::current_exe().context("cannot find this benchmark's executable")?;
    let mut env = vec![
        ("COHOST_CODEX_BIN", exe.into_os_string()),
        (FAKE_ENV, "1".into()),
        // An empty user CODEX_HOME: nothing of the real ~/.codex is copied.
        ("CODEX_HOME", codex_home.as_os_str().to_owned()),
    ];
    env.extend(transport.env());
    let daemon = start_daemon(
        &dir.join(format!("home-{name}")),
        tmux,
        args,
        &env,
        dir.join(format!("daemon-{name}.stderr")),
    )?;
    let mut conn = connect(&daemon).await?;
    conn.call(Method::GET, "/api/health", None, StatusCode::OK)
        .await?;
    let (session, cold) = create_session(&mut conn, work).await?;
    let mut warm = Vec::new();
    let mut extra = Vec::new();
    for _ in 0..warm_sessions {
        let (id, elapsed) = create_session(&mut conn, work).await?;
        warm.push(elapsed);
        extra.push(id);
    }
    conn.close_sessions(&extra).await?;
    Ok((daemon, session, cold, warm))
}

/// Part 1: the same fake turns read directly and through daemons, alternating.
async fn latency(dir: &Path, tmux: &TmuxServer) -> anyhow::Result<LatencyReport> {
    let work = dir.join("work-fake");
    let codex_home = dir.join("codex-home-fake");
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&codex_home)?;
    let work = work.canonicalize()?;
    let per_round = LATENCY_EVENTS / ROUNDS;
    let spec = |load: Load| match load {
        Load::Deltas => TurnSpec {
            deltas: per_round,
            items: 0,
            gap: DELTA_GAP,
            mix: 0,
        },
        Load::Mixed => TurnSpec {
            deltas: per_round,
            items: 0,
            gap: DELTA_GAP,
            mix: MIX_EVERY,
        },
        Load::Items => TurnSpec {
            deltas: 0,
            items: per_round,
            gap: ITEM_GAP,
            mix: 0,
        },
    };
    let warmup = TurnSpec {
        deltas: WARMUP_DELTAS,
        items: WARMUP_ITEMS,
        gap: DELTA_GAP,
        mix: MIX_EVERY,
    };

    let setup = FakeSetup {
        dir,
        tmux,
        work: &work,
        codex_home: &codex_home,
    };
    let (mut ws, ws_session, ws_cold, ws_warm) = fake_daemon(
        &setup,
        "fake-ws",
        &[],
        Transport::WebSocket,
        FAKE_WARM_SESSIONS,
    )
    .await?;
    let (mut stdio, stdio_session, stdio_cold, stdio_warm) = fake_daemon(
        &setup,
        "fake-stdio",
        &[],
        Transport::Stdio,
        FAKE_WARM_SESSIONS,
    )
    .await?;
    // A daemon that never fsyncs: the stored path without the disk, to show where its time goes.
    let (mut nosync, nosync_session, _, _) = fake_daemon(
        &setup,
        "fake-ws-nosync",
        &["--fsync", "never"],
        Transport::WebSocket,
        0,
    )
    .await?;
    let mut pipe = DirectPeer::start(&work, &codex_home, Transport::Stdio).await?;
    let mut direct_ws = DirectPeer::start(&work, &codex_home, Transport::WebSocket).await?;

    let probe = DiskProbe::start(dir)?;
    let mut samples: Vec<Samples> = MEASURES.iter().map(|_| Samples::default()).collect();
    let mut misrouted = 0;
    let vias = [
        Via::DirectPipe,
        Via::DirectWs,
        Via::CohostStdio,
        Via::CohostWs,
        Via::CohostWsNosync,
    ];
    // Round 0 is the unmeasured warm-up: one mixed turn through every reader.
    for round in 0..=ROUNDS {
        let jobs: Vec<(Option<usize>, Via, TurnSpec)> = if round == 0 {
            vias.iter().map(|via| (None, *via, warmup)).collect()
        } else {
            MEASURES
                .iter()
                .enumerate()
                .map(|(index, (load, via, _))| (Some(index), *via, spec(*load)))
                .collect()
        };
        for (measure, via, spec) in jobs {
            let target = match via {
                Via::DirectPipe => Target::Direct(&mut pipe),
                Via::DirectWs => Target::Direct(&mut direct_ws),
                Via::CohostStdio => Target::Cohost(&stdio, &stdio_session),
                Via::CohostWs => Target::Cohost(&ws, &ws_session),
                Via::CohostWsNosync => Target::Cohost(&nosync, &nosync_session),
            };
            let turn = run_turn(target, spec)
                .await
                .with_context(|| format!("a turn read via {via:?} ({spec:?})"))?;
            let Some(measure) = measure else { continue };
            misrouted += turn.misrouted;
            let offset = (round - 1) * per_round;
            let measured = match MEASURES[measure].0 {
                Load::Deltas | Load::Mixed => turn.deltas,
                Load::Items => turn.items,
            };
            samples[measure].merge(measured, offset);
        }
    }
    let probe = probe.finish();
    pipe.stop().await?;
    direct_ws.stop().await?;
    ws.stop(STOP_GRACE)?;
    stdio.stop(STOP_GRACE)?;
    nosync.stop(STOP_GRACE)?;

    let expected = per_round * ROUNDS;
    Ok(LatencyReport {
        summaries: samples.iter().map(|s| s.summarize(expected)).collect(),
        misrouted,
        probe,
        fake_stdio: (stdio_cold, stdio_warm),
        fake_ws: (ws_cold, ws_warm),
    })
}

/// Part 2: session creation against the real codex, cold and warm, over `transport`.
async fn creation(
    dir: &Path,
    tmux: &TmuxServer,
    codex: &Path,
    transport: Transport,
    cold_samples: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let name = match transport {
        Transport::Stdio => "codex-stdio",
        Transport::WebSocket => "codex-ws",
    };
    let work = dir.join(format!("work-{name}"));
    std::fs::create_dir_all(&work)?;
    let work = work.canonicalize()?;
    let codex_home = dir.join(format!("codex-home-{name}"));
    write_codex_home(&codex_home, &work)?;
    let home = dir.join(format!("home-{name}"));
    let mut env = vec![
        ("COHOST_CODEX_BIN", codex.as_os_str().to_owned()),
        ("CODEX_HOME", codex_home.into_os_string()),
        (MOCK_API_KEY_ENV, MOCK_API_KEY.into()),
    ];
    env.extend(transport.env());
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..cold_samples {
        // The same home each time, with every session closed before the stop: the restarted
        // daemon restores nothing, so its first session spawns the backend.
        let mut daemon = start_daemon(
            &home,
            tmux,
            &[],
            &env,
            dir.join(format!("daemon-{name}.stderr")),
        )?;
        let mut conn = connect(&daemon).await?;
        conn.call(Method::GET, "/api/health", None, StatusCode::OK)
            .await?;
        let mut ids = Vec::new();
        let (id, elapsed) = create_session(&mut conn, &work).await?;
        cold.push(elapsed);
        ids.push(id);
        for _ in 0..WARM_PER_DAEMON {
            let (id, elapsed) = create_session(&mut conn, &work).await?;
            warm.push(elapsed);
            ids.push(id);
        }
        conn.close_sessions(&ids).await?;
        drop(conn);
        daemon.stop(STOP_GRACE)?;
    }
    Ok((cold, warm))
}

fn list_ms(values: &[Duration]) -> String {
    values
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join(" ")
}

fn latency_header() {
    println!(
        "  {:<46} {:>7} {:>7} {:>8} {:>8} {:>8}",
        "path", "samples", "missing", "p50 ms", "p99 ms", "max ms"
    );
}

fn latency_row(name: &str, s: &Summary) {
    println!(
        "  {:<46} {:>7} {:>7} {:>8} {:>8} {:>8}",
        name,
        s.samples,
        s.missing,
        ms(s.p50),
        ms(s.p99),
        ms(s.max)
    );
}

fn added_row(name: &str, cohost: &Summary, direct: &Summary) {
    println!(
        "  {:<46} {:>7} {:>7} {:>8} {:>8} {:>8}",
        name,
        "",
        "",
        signed_ms(cohost.p50, direct.p50),
        signed_ms(cohost.p99, direct.p99),
        signed_ms(cohost.max, direct.max)
    );
}

fn creation_row(name: &str, values: &[Duration], each: bool) {
    let values_sorted = sorted(values);
    println!(
        "  {:<42} {:>7} {:>8} {:>8} {:>8}   {}",
        name,
        values.len(),
        ms(values_sorted.first().copied().unwrap_or_default()),
        ms(percentile(&values_sorted, 50.0)),
        ms(values_sorted.last().copied().unwrap_or_default()),
        if each { list_ms(values) } else { String::new() }
    );
}

async fn run() -> anyhow::Result<bool> {
    let cpus = bench::cpus();
    let started = Instant::now();
    println!(
        "cohost codex-host benchmark ({cpus} CPUs, release build); load average at start: {}",
        loadavg()
    );
    let codex = real_codex_bin()?;
    let dir = tempfile::Builder::new()
        .prefix("cohost-bench-codex")
        .tempdir()?;
    // The tmux session lives in a directory unrelated to the work directories, so codex
    // sessions are not mirrored into it (that is measured by the ingest benchmark).
    let session_dir = dir.path().join("tmux-session");
    std::fs::create_dir_all(&session_dir)?;
    let tmux = TmuxServer::with_sessions(&[("bench", &session_dir)]);

    let latency = latency(dir.path(), &tmux).await?;
    let (ws_cold, ws_warm) = creation(
        dir.path(),
        &tmux,
        &codex,
        Transport::WebSocket,
        COLD_SAMPLES,
    )
    .await?;
    let (stdio_cold, stdio_warm) = creation(
        dir.path(),
        &tmux,
        &codex,
        Transport::Stdio,
        COLD_SAMPLES_STDIO,
    )
    .await?;

    // ---- report ----
    println!();
    println!(
        "Notification -> consumer latency, fake app-server: {LATENCY_EVENTS} events per row in {ROUNDS} turns,"
    );
    println!(
        "  rows alternating turn by turn; CLOCK_REALTIME stamp taken just before the fake writes the"
    );
    println!("  message, receipt = the frame (SSE) or line/message (direct) read by this process");
    let section = |load: Load, title: String| {
        println!();
        println!("  {title}");
        latency_header();
        for (index, (l, _, name)) in MEASURES.iter().enumerate() {
            if *l == load {
                latency_row(name, &latency.summaries[index]);
            }
        }
    };
    let l = &latency;
    section(
        Load::Deltas,
        format!(
            "live-only: item/agentMessage/delta -> SSE item.delta (no id:), one every {} ms",
            DELTA_GAP.as_millis()
        ),
    );
    added_row(
        "  added by cohost, stdio (cohost - pipe)",
        l.get(Load::Deltas, Via::CohostStdio),
        l.get(Load::Deltas, Via::DirectPipe),
    );
    added_row(
        "  added by cohost, WebSocket (cohost - ws)",
        l.get(Load::Deltas, Via::CohostWs),
        l.get(Load::Deltas, Via::DirectWs),
    );
    section(
        Load::Mixed,
        format!(
            "live-only in a mixed stream: the same deltas, with a stored item/completed after every {MIX_EVERY}"
        ),
    );
    added_row(
        "  added by cohost, WebSocket (cohost - ws)",
        l.get(Load::Mixed, Via::CohostWs),
        l.get(Load::Mixed, Via::DirectWs),
    );
    section(
        Load::Items,
        format!(
            "stored: item/completed -> SSE item.completed (id:, fsync'd unless noted), one every {} ms",
            ITEM_GAP.as_millis()
        ),
    );
    added_row(
        "  added by cohost, stdio (cohost - pipe)",
        l.get(Load::Items, Via::CohostStdio),
        l.get(Load::Items, Via::DirectPipe),
    );
    added_row(
        "  added by cohost, WebSocket (cohost - ws)",
        l.get(Load::Items, Via::CohostWs),
        l.get(Load::Items, Via::DirectWs),
    );
    added_row(
        "  added, WebSocket, --fsync never",
        l.get(Load::Items, Via::CohostWsNosync),
        l.get(Load::Items, Via::DirectWs),
    );
    println!();
    let probe = l.probe.sorted();
    println!(
        "  disk probe beside the daemons (64 B + fdatasync every {} ms during part 1): {} syncs, p50 {} ms, p99 {} ms, max {} ms",
        PROBE_INTERVAL.as_millis(),
        probe.len(),
        ms(percentile(&probe, 50.0)),
        ms(percentile(&probe, 99.0)),
        ms(probe.last().copied().unwrap_or_default())
    );
    println!(
        "  slowest stored event per daemon, split at the daemon's `ts` (when its core sequenced it; ms resolution):"
    );
    for via in [Via::CohostStdio, Via::CohostWs, Via::CohostWsNosync] {
        let Some(worst) = l.get(Load::Items, via).worst else {
            continue;
        };
        let name = MEASURES
            .iter()
            .find(|(load, v, _)| *load == Load::Items && *v == via)
            .map(|(_, _, name)| *name)
            .unwrap_or_default();
        let split = worst
            .sequenced_ms
            .map(|ts| {
                let before = ts as f64 - worst.sent as f64 / 1e6;
                let after = worst.received as f64 / 1e6 - ts as f64;
                format!("~{before:.0} ms to be sequenced, ~{after:.0} ms sequenced -> SSE")
            })
            .unwrap_or_else(|| "no ts".into());
        let overlapping = l
            .probe
            .longest_within(worst.sent, worst.received)
            .map(|d| format!("longest probe fdatasync meanwhile {} ms", ms(d)))
            .unwrap_or_else(|| "no probe fdatasync meanwhile".into());
        println!(
            "    {name}: {} ms = {split}; {overlapping}",
            ms(worst.latency())
        );
    }

    println!();
    println!(
        "POST /api/sessions -> 201 {{state: live, threadId}} (request sent -> whole answer read)"
    );
    println!(
        "  {:<42} {:>7} {:>8} {:>8} {:>8}   each (ms)",
        "backend", "samples", "min ms", "p50 ms", "max ms"
    );
    creation_row("real codex, WebSocket, cold", &ws_cold, true);
    creation_row("real codex, WebSocket, warm", &ws_warm, false);
    creation_row("real codex, stdio, cold", &stdio_cold, true);
    creation_row("real codex, stdio, warm", &stdio_warm, false);
    creation_row(
        "fake app-server, WebSocket, cold",
        &[latency.fake_ws.0],
        true,
    );
    creation_row(
        "fake app-server, WebSocket, warm",
        &latency.fake_ws.1,
        false,
    );
    creation_row(
        "fake app-server, stdio, cold",
        &[latency.fake_stdio.0],
        true,
    );
    creation_row("fake app-server, stdio, warm", &latency.fake_stdio.1, false);
    println!("  real codex: {} ({PINNED_CODEX})", codex.display());
    println!(
        "  cold = first session after a daemon start (backend spawned); the first cold sample of each"
    );
    println!(
        "  transport runs on a fresh cohost home, the others on the same home with its sessions closed"
    );

    println!();
    let verdict = |cohost: &Summary, direct: &Summary| {
        let added = cohost.p99.saturating_sub(direct.p99);
        format!(
            "{} ({} ms)",
            if added < TARGET_ADDED_P99 {
                "met"
            } else {
                "MISSED"
            },
            ms(added)
        )
    };
    println!(
        "target p99 added by cohost < {} ms:",
        TARGET_ADDED_P99.as_millis()
    );
    println!(
        "  WebSocket (default): item.delta {}, mixed item.delta {}, item.completed {}",
        verdict(
            l.get(Load::Deltas, Via::CohostWs),
            l.get(Load::Deltas, Via::DirectWs)
        ),
        verdict(
            l.get(Load::Mixed, Via::CohostWs),
            l.get(Load::Mixed, Via::DirectWs)
        ),
        verdict(
            l.get(Load::Items, Via::CohostWs),
            l.get(Load::Items, Via::DirectWs)
        ),
    );
    println!(
        "  stdio:               item.delta {}, item.completed {}",
        verdict(
            l.get(Load::Deltas, Via::CohostStdio),
            l.get(Load::Deltas, Via::DirectPipe)
        ),
        verdict(
            l.get(Load::Items, Via::CohostStdio),
            l.get(Load::Items, Via::DirectPipe)
        ),
    );

    let mut ok = true;
    let mut check = |name: &str, summary: &Summary| {
        if summary.missing > 0 || summary.duplicates > 0 || summary.samples != summary.expected {
            println!(
                "FAILURE: {name}: {} of {} events received, {} missing, {} duplicated",
                summary.samples, summary.expected, summary.missing, summary.duplicates
            );
            if !summary.missing_first.is_empty() {
                let per_turn = LATENCY_EVENTS / ROUNDS;
                let which: Vec<String> = summary
                    .missing_first
                    .iter()
                    .map(|i| format!("turn {} event {}", i / per_turn + 1, i % per_turn))
                    .collect();
                println!("  missing: {}", which.join(", "));
            }
            ok = false;
        }
        if summary.negative > 0 {
            println!(
                "note: {name}: {} negative latencies (clock step?) counted as 0",
                summary.negative
            );
        }
    };
    for (index, (load, _, name)) in MEASURES.iter().enumerate() {
        check(&format!("{name} ({load:?})"), &latency.summaries[index]);
    }
    if latency.misrouted > 0 {
        println!(
            "FAILURE: {} events on the wrong SSE path (a delta with an id:, or a stored item without one)",
            latency.misrouted
        );
        ok = false;
    }
    if ok {
        println!(
            "every measured event arrived exactly once on its path; every request answered as expected"
        );
    }
    println!(
        "load average at the end: {}; total bench time {:.1} s",
        loadavg(),
        started.elapsed().as_secs_f64()
    );
    drop(tmux);
    Ok(ok)
}
