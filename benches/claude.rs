//! Claude-host ingest benchmark: `cargo bench --bench claude`.
//!
//! 1. **Hook line → SSE latency, end to end through the real daemon.** `cohost serve` (release)
//!    runs with a temporary `COHOST_HOME` and `HOME`, against a private tmux server. A claude
//!    session is created through `POST /api/sessions` with `COHOST_CLAUDE_BIN` pointing at a
//!    stand-in script: `cohost-runner` starts it in a tmux pane exactly as it would start the
//!    TUI, and the script appends a `SessionStart` line to the session's `hooks.jsonl` (what
//!    `cohost-hook` would write) and then idles. The bench then plays `cohost-hook`: it appends
//!    `UserPromptSubmit`, then `PreToolUse`/`PostToolUse` lines (the payload shapes of
//!    docs/peers.md "Hooks", each tool call with a unique `tool_use_id`), one `O_APPEND`
//!    write per line, a few ms apart, and an SSE subscriber on `/api/sessions/{id}/events/stream`
//!    timestamps the `item.started` / `item.completed` event whose item id carries that
//!    `tool_use_id`. Run once on a quiet daemon and once while another client posts a steady
//!    stream of `/api/agent-event`s.
//! 2. **Transcript backlog ingest throughput, in-process.** A transcript of ≥ 64 MiB in the §4
//!    line shapes (prompts, assistant text, tool_use, tool_result with `toolUseResult`, turn
//!    metadata; text sizes drawn log-uniformly) is generated into a temporary file, then measured:
//!    (a) `serde_json::from_str::<Value>` over every line in memory (the baseline); (b)
//!    `cohost::tail::spawn_tail` from offset 0 until the checkpoint reaches the end of the
//!    file; (c) (b) plus, per line, what the host's session task does before storing: parse to a
//!    `Value` and `Normalizer::transcript_line`; (d) (c) plus `save_checkpoint` after every line as
//!    `src/claude/host.rs` does, for a bounded time (shows what the daemon's own loop adds).
//!
//! Exits non-zero on any failure (the daemon or a helper does not start, a request fails, an
//! event is missing, a tailed line is malformed or lost). A missed target is reported, not a
//! failure. See `docs/benchmarks-claude.md`.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use cohost::protocol::EventKind;
use cohost::runtime::claude::normalize::{Normalizer, Output};
use cohost::tail::{self, Checkpoint, TailItem};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use cohost_testkit::bench::{self, CpuUse, Daemon, Failures, loadavg, ms, percentile};
use cohost_testkit::{SCRUBBED_ENV, TmuxServer};

/// The tmux session the claude pane opens in.
const SESSION: &str = "bench";
/// Claude's own ids, as the stand-in reports them.
const CLAUDE_SESSION: &str = "5f0c2a4e-8b1d-4c37-9a6e-2d4b7e91c3f0";
const PROMPT_ID: &str = "8a3e51c2-6f4d-4b9a-b0e7-3c2d1f9a8e64";

/// Measured tool calls per run; each is a `PreToolUse` and a `PostToolUse` line.
const TOOL_CALLS: usize = 1000;
const WARMUP_CALLS: usize = 50;
/// Pause after each hook line is written.
const LINE_GAP: Duration = Duration::from_millis(3);
/// A slower pace for a shorter extra run: does the daemon keep up when lines come further apart?
const SLOW_GAP: Duration = Duration::from_millis(20);
const SLOW_CALLS: usize = 250;
/// The background client posts one agent event per interval (500/s).
const BACKGROUND_INTERVAL: Duration = Duration::from_millis(2);
/// How long the subscriber gets for the last events once all lines are written.
const DELIVERY_GRACE: Duration = Duration::from_secs(15);
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the daemon gets to shut down after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(15);
const TARGET_P99: Duration = Duration::from_millis(10);

/// Size of the generated transcript backlog.
const TRANSCRIPT_BYTES: u64 = 64 << 20;
/// Repetitions of each transcript measurement (median reported).
const REPS: usize = 5;
/// How long (d) runs: it is far slower than the others.
const CHECKPOINT_BUDGET: Duration = Duration::from_secs(3);
/// The channel capacity between a tailer and the session task in `src/claude/host.rs`.
const HOST_TAIL_CHANNEL: usize = 1024;
/// (c)/(a) must be at least this.
const TARGET_RATIO: f64 = 0.5;

/// The daemon under test (the release build `cargo bench` made).
const COHOST: &str = env!("CARGO_BIN_EXE_cohost");

/// Variables that would change how the daemon behaves, besides the kit's [`SCRUBBED_ENV`];
/// removed from its environment.
const BENCH_SCRUBBED_ENV: [&str; 5] = [
    "COHOST_CODEX_BIN",
    "COHOST_CLAUDE_BIN",
    "COHOST_RUNNER_BIN",
    "COHOST_HOOK_BIN",
    "RUST_LOG",
];

fn main() -> ExitCode {
    bench::main("claude", "see above", run())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

// ---------------------------------------------------------------------------------------------
// Helpers the daemon needs: cohost-runner (the pane's process) and cohost-hook (named in the
// session's settings.json): binaries of this package, which `cargo bench` builds.

fn helper_binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let runner = PathBuf::from(env!("CARGO_BIN_EXE_cohost-runner"));
    let hook = PathBuf::from(env!("CARGO_BIN_EXE_cohost-hook"));
    for path in [&runner, &hook] {
        if !path.is_file() {
            bail!("{} is missing after the build", path.display());
        }
    }
    Ok((runner, hook))
}

// ---------------------------------------------------------------------------------------------
// The daemon fixture.

/// Everything that must be torn down, dropped in this order: the daemon, the tmux server (and
/// with it the pane's runner and its stand-in claude) and the temp directory.
struct Fixture {
    daemon: Daemon,
    _tmux: TmuxServer,
    /// The daemon's `COHOST_HOME`.
    home: PathBuf,
    /// The tmux session's directory and the claude session's cwd.
    work: PathBuf,
    /// The transcript path the stand-in claude and the hook lines report.
    transcript: PathBuf,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn start(runner: &Path, hook: &Path) -> anyhow::Result<Fixture> {
        let dir = tempfile::Builder::new()
            .prefix("cohost-claude-bench")
            .tempdir()?;
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        let transcript = dir
            .path()
            .join("user/.claude/projects/-bench-work")
            .join(format!("{CLAUDE_SESSION}.jsonl"));
        let user_home = dir.path().join("user");
        let bin = dir.path().join("bin");
        for path in [&user_home, &bin, &work] {
            std::fs::create_dir_all(path)?;
        }
        if let Some(parent) = transcript.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let fake_claude = bin.join("claude");
        std::fs::write(&fake_claude, fake_claude_script(&transcript, &work))?;
        std::fs::set_permissions(&fake_claude, std::fs::Permissions::from_mode(0o755))?;

        let tmux = TmuxServer::with_sessions(&[(SESSION, &work)]);
        let mut command = bench::serve_command(Path::new(COHOST), &tmux);
        for name in SCRUBBED_ENV.into_iter().chain(BENCH_SCRUBBED_ENV) {
            command.env_remove(name);
        }
        command
            // The runner seeds `$HOME/.claude.json` for the TUI: keep that in the temp dir.
            .env("HOME", &user_home)
            .env("COHOST_CLAUDE_BIN", &fake_claude)
            .env("COHOST_RUNNER_BIN", runner)
            .env("COHOST_HOOK_BIN", hook);
        let daemon = Daemon::start(command, &home, dir.path().join("daemon.stderr"))?;
        Ok(Fixture {
            daemon,
            _tmux: tmux,
            home,
            work,
            transcript,
            dir,
        })
    }
}

/// The stand-in for `claude`: reports `SessionStart` the way `cohost-hook` would (one line
/// appended to `$COHOST_SESSION_DIR/hooks.jsonl`), then idles like a TUI waiting for a prompt.
/// The runner kills it when the tmux server goes away; `sleep` bounds it regardless.
fn fake_claude_script(transcript: &Path, work: &Path) -> String {
    let line = hook_line(
        "SessionStart",
        json!({
            "session_id": CLAUDE_SESSION,
            "transcript_path": transcript,
            "cwd": work,
            "hook_event_name": "SessionStart",
            "source": "startup",
            "model": "claude-opus-4-8[1m]",
        }),
    );
    format!(
        "#!/bin/sh\n# A stand-in for claude (cohost's claude bench).\nprintf '%s' '{}' >> \"$COHOST_SESSION_DIR/hooks.jsonl\"\nexec sleep 600\n",
        line.replace('\'', "'\\''")
    )
}

/// One `hooks.jsonl` line as `cohost-hook` writes it, with its newline.
fn hook_line(event: &str, payload: Value) -> String {
    let mut line =
        json!({ "receivedAt": now_ms(), "event": event, "payload": payload }).to_string();
    line.push('\n');
    line
}

/// Appends `bytes` with one `write` on an `O_APPEND` file, as `cohost-hook` does.
fn append(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let written = file.write(bytes)?;
    if written != bytes.len() {
        bail!("short write to {}", path.display());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// HTTP.

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    token: String,
}

async fn connect(fixture: &Fixture) -> anyhow::Result<Conn> {
    Ok(Conn {
        sender: bench::handshake(fixture.daemon.addr).await?,
        host: fixture.daemon.host.clone(),
        token: fixture.daemon.token.clone(),
    })
}

impl Conn {
    fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        Ok(Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.host)
            .header(AUTHORIZATION, format!("Bearer {}", self.token))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))?)
    }

    /// Sends one request; the status and the whole response body.
    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = self.request(method, path, body)?;
        let exchange = async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(HTTP_TIMEOUT, exchange)
            .await
            .with_context(|| format!("{path}: no answer within {HTTP_TIMEOUT:?}"))?
    }

    /// Opens an SSE stream and returns its body once the response headers arrive (by then the
    /// daemon has subscribed it to the live broadcast).
    async fn stream(mut self, path: &str) -> anyhow::Result<(Conn, Incoming)> {
        let request = self.request(Method::GET, path, Bytes::new())?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let body = bench::stream_body(response, &format!("GET {path}")).await?;
        Ok((self, body))
    }
}

/// An event the SSE subscriber read: its type, its item id if any, and when its chunk arrived.
struct Seen {
    kind: String,
    item: Option<String>,
    at: Instant,
}

/// Reads SSE frames and reports every `data:` event, stamped with the arrival of its chunk.
async fn read_stream(mut body: Incoming, tx: mpsc::UnboundedSender<Seen>) -> anyhow::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    while let Some(frame) = body.frame().await {
        let at = Instant::now();
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            if let Some(rest) = buf[..end].strip_prefix(b"data:")
                && let Ok(event) = serde_json::from_slice::<Value>(rest.trim_ascii())
            {
                let seen = Seen {
                    kind: event["type"].as_str().unwrap_or("").to_string(),
                    item: event
                        .pointer("/data/item/id")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    at,
                };
                if tx.send(seen).is_err() {
                    return Ok(());
                }
            }
            buf.drain(..=end);
        }
    }
    bail!("the SSE stream ended")
}

// ---------------------------------------------------------------------------------------------
// 1. Hook line → SSE latency.

fn payload_base(fixture: &Fixture) -> serde_json::Map<String, Value> {
    let mut base = serde_json::Map::new();
    base.insert("session_id".into(), json!(CLAUDE_SESSION));
    base.insert("transcript_path".into(), json!(fixture.transcript));
    base.insert("cwd".into(), json!(fixture.work));
    base.insert("prompt_id".into(), json!(PROMPT_ID));
    base.insert("permission_mode".into(), json!("default"));
    base.insert("effort".into(), json!({ "level": "high" }));
    base
}

/// The tool input and response of call `i`: Bash, Read, Grep and Edit in turn, with outputs of
/// a few hundred bytes to a few KB.
fn tool_call(i: usize) -> (&'static str, Value, Value) {
    match i % 4 {
        0 => (
            "Bash",
            json!({ "command": format!("cargo test -p cohost --lib claude::tail::tests::case_{i}"), "description": "Run one tail test" }),
            json!({
                "stdout": format!("running 1 test\ntest claude::tail::tests::case_{i} ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 412 filtered out; finished in 0.04s\n"),
                "stderr": "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.21s\n     Running unittests src/lib.rs (target/debug/deps/cohost-3f1c)",
                "interrupted": false, "isImage": false, "noOutputExpected": false,
            }),
        ),
        1 => {
            let content: String = (0..60)
                .map(|n| format!("    let value_{n} = line.get(\"field_{n}\").and_then(Value::as_str); // {i}\n"))
                .collect();
            (
                "Read",
                json!({ "file_path": "/work/main/src/claude/tail.rs", "offset": i % 900, "limit": 60 }),
                json!({ "type": "text", "file": { "filePath": "/work/main/src/claude/tail.rs", "content": content, "numLines": 60, "startLine": i % 900, "totalLines": 1190 } }),
            )
        }
        2 => (
            "Grep",
            json!({ "pattern": "spawn_tail", "path": "/work/main/src", "output_mode": "content", "-n": true }),
            json!({
                "mode": "content", "numFiles": 3, "filenames": [],
                "content": "src/claude/host.rs:1063:        tail::spawn_tail(\nsrc/claude/host.rs:1072:        tail::spawn_tail(\nsrc/claude/tail.rs:119:pub fn spawn_tail(\n",
                "numLines": 3,
            }),
        ),
        _ => (
            "Edit",
            json!({ "file_path": "/work/main/README.md", "old_string": format!("figure {i}"), "new_string": format!("figure {}", i + 1), "replace_all": false }),
            json!({ "filePath": "/work/main/README.md", "oldString": format!("figure {i}"), "newString": format!("figure {}", i + 1), "structuredPatch": [{ "oldStart": 88, "oldLines": 1, "newStart": 88, "newLines": 1, "lines": [format!("-figure {i}"), format!("+figure {}", i + 1)] }], "userModified": false }),
        ),
    }
}

/// A hook line to write, and the event it must produce: (event type, item id).
struct Planned {
    expect: (&'static str, String),
    line: String,
}

fn plan_calls(fixture: &Fixture, run: &str, calls: usize) -> Vec<Planned> {
    let base = payload_base(fixture);
    let mut planned = Vec::with_capacity(calls * 2);
    for i in 0..calls {
        let tool_use_id = format!("toolu_bench_{run}_{i:05}");
        let item_id = format!("{PROMPT_ID}:{tool_use_id}");
        let (name, input, response) = tool_call(i);
        let mut pre = base.clone();
        pre.insert("hook_event_name".into(), json!("PreToolUse"));
        pre.insert("tool_name".into(), json!(name));
        pre.insert("tool_input".into(), input.clone());
        pre.insert("tool_use_id".into(), json!(tool_use_id));
        planned.push(Planned {
            expect: ("item.started", item_id.clone()),
            line: hook_line("PreToolUse", Value::Object(pre)),
        });
        let mut post = base.clone();
        post.insert("hook_event_name".into(), json!("PostToolUse"));
        post.insert("tool_name".into(), json!(name));
        post.insert("tool_input".into(), input);
        post.insert("tool_response".into(), response);
        post.insert("tool_use_id".into(), json!(tool_use_id));
        post.insert("duration_ms".into(), json!(20 + i % 70));
        planned.push(Planned {
            expect: ("item.completed", item_id),
            line: hook_line("PostToolUse", Value::Object(post)),
        });
    }
    planned
}

struct LatencyRow {
    label: String,
    what: &'static str,
    samples: usize,
    missing: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// One latency run: rows for `item.started`, `item.completed` and both, plus what says whether
/// the daemon kept up.
struct LatencyRun {
    rows: Vec<LatencyRow>,
    /// Mean time between two written lines (the gap plus the timer's overshoot).
    line_interval: Duration,
    /// Samples over the p99 target.
    over_target: usize,
    /// While lines were queued (two consecutive samples over 20 ms), the median time between two
    /// deliveries: the daemon's service time per hook line under that load.
    queued_interval: Option<Duration>,
    queued_samples: usize,
}

/// Writes the planned lines `gap` apart and matches them with what the subscriber reads.
///
/// With `COHOST_BENCH_DUMP=<dir>`, writes `<dir>/<label>.txt`: one line per hook line with the
/// expected event, its item id, when it was written (ms since the first) and its latency (ms).
async fn hook_latency(
    label: &str,
    hooks: &Path,
    planned: Vec<Planned>,
    gap: Duration,
    seen: &mut mpsc::UnboundedReceiver<Seen>,
    failures: &Failures,
) -> anyhow::Result<LatencyRun> {
    type Arrived = HashMap<(String, String), Instant>;
    let mut sent: Vec<((&'static str, String), Instant)> = Vec::with_capacity(planned.len());
    let mut arrived: Arrived = HashMap::with_capacity(planned.len());
    let drain = |seen: &mut mpsc::UnboundedReceiver<Seen>, arrived: &mut Arrived| {
        while let Ok(event) = seen.try_recv() {
            if let Some(item) = event.item {
                arrived.entry((event.kind, item)).or_insert(event.at);
            }
        }
    };
    for plan in planned {
        let at = Instant::now();
        append(hooks, plan.line.as_bytes())?;
        sent.push((plan.expect, at));
        drain(seen, &mut arrived);
        tokio::time::sleep(gap).await;
    }
    let deadline = tokio::time::Instant::now() + DELIVERY_GRACE;
    let got = |arrived: &Arrived, (kind, item): &(&'static str, String)| {
        arrived.get(&(kind.to_string(), item.clone())).copied()
    };
    while !sent.iter().all(|(key, _)| got(&arrived, key).is_some()) {
        match tokio::time::timeout_at(deadline, seen.recv()).await {
            Ok(Some(event)) => {
                if let Some(item) = event.item {
                    arrived.entry((event.kind, item)).or_insert(event.at);
                }
                drain(seen, &mut arrived);
            }
            Ok(None) => bail!("the SSE subscriber stopped"),
            Err(_) => break,
        }
    }
    // Per line in write order: the latency, if the event arrived.
    let latencies: Vec<Option<Duration>> = sent
        .iter()
        .map(|(key, at)| got(&arrived, key).map(|g| g.saturating_duration_since(*at)))
        .collect();
    if let Some(dump) = std::env::var_os("COHOST_BENCH_DUMP") {
        let mut text = String::new();
        if let Some((_, first)) = sent.first() {
            for (((kind, item), at), latency) in sent.iter().zip(&latencies) {
                text.push_str(&format!(
                    "{kind} {item} {:.3} {:.3}\n",
                    at.duration_since(*first).as_secs_f64() * 1000.0,
                    latency.map(|l| l.as_secs_f64() * 1000.0).unwrap_or(-1.0)
                ));
            }
        }
        let mut path = PathBuf::from(dump);
        path.push(format!("{}.txt", label.replace(['/', ' ', '+', ','], "_")));
        std::fs::write(path, text)?;
    }
    let mut rows = Vec::new();
    let mut all = Vec::new();
    let mut missing_all = 0;
    for what in ["item.started", "item.completed"] {
        let mut of_kind = Vec::new();
        let mut missing = 0;
        for (((kind, _), _), latency) in sent.iter().zip(&latencies) {
            if *kind != what {
                continue;
            }
            match latency {
                Some(latency) => of_kind.push(*latency),
                None => missing += 1,
            }
        }
        if missing > 0 {
            failures.record(format!(
                "{label}: {missing} {what} events never reached the SSE subscriber"
            ));
        }
        of_kind.sort_unstable();
        all.extend_from_slice(&of_kind);
        missing_all += missing;
        rows.push(latency_row(label, what, &of_kind, missing));
    }
    all.sort_unstable();
    rows.push(latency_row(label, "both", &all, missing_all));

    let line_interval = match (sent.first(), sent.last()) {
        (Some((_, first)), Some((_, last))) if sent.len() > 1 => {
            last.duration_since(*first) / (sent.len() as u32 - 1)
        }
        _ => Duration::ZERO,
    };
    let queued = Duration::from_millis(20);
    let mut intervals = Vec::new();
    for i in 1..sent.len() {
        if let (Some(prev), Some(this)) = (latencies[i - 1], latencies[i])
            && prev > queued
            && this > queued
        {
            let delivered_prev = sent[i - 1].1 + prev;
            let delivered = sent[i].1 + this;
            intervals.push(delivered.saturating_duration_since(delivered_prev));
        }
    }
    intervals.sort_unstable();
    Ok(LatencyRun {
        rows,
        line_interval,
        over_target: all.iter().filter(|l| **l >= TARGET_P99).count(),
        queued_interval: (!intervals.is_empty()).then(|| percentile(&intervals, 50.0)),
        queued_samples: intervals.len(),
    })
}

fn latency_row(label: &str, what: &'static str, sorted: &[Duration], missing: usize) -> LatencyRow {
    LatencyRow {
        label: label.to_string(),
        what,
        samples: sorted.len(),
        missing,
        p50: percentile(sorted, 50.0),
        p99: percentile(sorted, 99.0),
        max: sorted.last().copied().unwrap_or_default(),
    }
}

/// Posts one agent event per `BACKGROUND_INTERVAL` until cancelled; returns (posted, seconds,
/// the sorted POST round trips, each an append acknowledged after the log's fsync).
async fn background_load(
    mut conn: Conn,
    cancel: CancellationToken,
    failures: Arc<Failures>,
) -> (u64, f64, Vec<Duration>) {
    let mut tick = tokio::time::interval(BACKGROUND_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut posted = 0u64;
    let mut round_trips = Vec::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let body = Bytes::from(format!(
            r#"{{"agent":"bench-background","status":"running","tmuxSession":"{SESSION}","threadId":"background-{}"}}"#,
            posted % 8
        ));
        let sent = Instant::now();
        match conn.send(Method::POST, "/api/agent-event", body).await {
            Ok((StatusCode::OK, _)) => {
                posted += 1;
                round_trips.push(sent.elapsed());
            }
            Ok((status, body)) => failures.record(format!(
                "background POST /api/agent-event: {status}: {}",
                String::from_utf8_lossy(&body)
            )),
            Err(error) => {
                failures.record(format!("background POST /api/agent-event: {error:#}"));
                break;
            }
        }
    }
    round_trips.sort_unstable();
    (posted, started.elapsed().as_secs_f64(), round_trips)
}

struct HookReport {
    create_ms: f64,
    runs: Vec<LatencyRun>,
    background_rate: f64,
    background_round_trips: Vec<Duration>,
}

async fn hook_benchmark(fixture: &Fixture, failures: &Arc<Failures>) -> anyhow::Result<HookReport> {
    let mut conn = connect(fixture).await?;
    let body = json!({ "runtime": "claude", "cwd": fixture.work, "tmuxSession": SESSION });
    let create_started = Instant::now();
    let (status, answer) = conn
        .send(Method::POST, "/api/sessions", Bytes::from(body.to_string()))
        .await?;
    let create_ms = create_started.elapsed().as_secs_f64() * 1000.0;
    if status != StatusCode::CREATED {
        bail!(
            "POST /api/sessions answered {status}: {}\ndaemon stderr:\n{}",
            String::from_utf8_lossy(&answer),
            fixture.daemon.stderr_tail()
        );
    }
    let answer: Value = serde_json::from_slice(&answer)?;
    let id = answer
        .pointer("/session/id")
        .and_then(Value::as_str)
        .context("no session id in the POST /api/sessions answer")?
        .to_string();
    let hooks = fixture.home.join("claude").join(&id).join("hooks.jsonl");
    let start_line = std::fs::read_to_string(&hooks)
        .with_context(|| format!("the stand-in claude wrote no {}", hooks.display()))?;
    if !start_line.contains("SessionStart") {
        bail!("{} holds no SessionStart line", hooks.display());
    }

    let (_stream_conn, body) = connect(fixture)
        .await?
        .stream(&format!("/api/sessions/{id}/events/stream"))
        .await?;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_stream(body, tx));

    // The turn every tool call belongs to.
    let mut prompt = payload_base(fixture);
    prompt.insert("hook_event_name".into(), json!("UserPromptSubmit"));
    prompt.insert(
        "prompt".into(),
        json!("Run the tail tests and fix what fails"),
    );
    append(
        &hooks,
        hook_line("UserPromptSubmit", Value::Object(prompt)).as_bytes(),
    )?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, seen.recv()).await {
            Ok(Some(event)) if event.kind == "turn.started" => break,
            Ok(Some(_)) => {}
            Ok(None) => bail!("the SSE subscriber stopped before turn.started"),
            Err(_) => bail!(
                "no turn.started within 10 s of UserPromptSubmit; daemon stderr:\n{}",
                fixture.daemon.stderr_tail()
            ),
        }
    }

    let warmup = plan_calls(fixture, "warmup", WARMUP_CALLS);
    hook_latency("warm-up", &hooks, warmup, LINE_GAP, &mut seen, failures).await?;

    let gap_ms = LINE_GAP.as_millis();
    let mut runs = Vec::new();
    let quiet = plan_calls(fixture, "quiet", TOOL_CALLS);
    let label = format!("{gap_ms} ms gap, quiet");
    runs.push(hook_latency(&label, &hooks, quiet, LINE_GAP, &mut seen, failures).await?);

    let cancel = CancellationToken::new();
    let background = tokio::spawn(background_load(
        connect(fixture).await?,
        cancel.clone(),
        Arc::clone(failures),
    ));
    // Let the background settle before the first measured line.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let loaded = plan_calls(fixture, "loaded", TOOL_CALLS);
    let label = format!(
        "{gap_ms} ms gap, +{:.0} ev/s",
        1.0 / BACKGROUND_INTERVAL.as_secs_f64()
    );
    runs.push(hook_latency(&label, &hooks, loaded, LINE_GAP, &mut seen, failures).await?);
    cancel.cancel();
    let (posted, seconds, background_round_trips) = background.await?;

    let slow = plan_calls(fixture, "slow", SLOW_CALLS);
    let label = format!("{} ms gap, quiet", SLOW_GAP.as_millis());
    runs.push(hook_latency(&label, &hooks, slow, SLOW_GAP, &mut seen, failures).await?);
    reader.abort();
    Ok(HookReport {
        create_ms,
        runs,
        background_rate: posted as f64 / seconds.max(1e-9),
        background_round_trips,
    })
}

// ---------------------------------------------------------------------------------------------
// 2. Transcript backlog.

/// xorshift64*: deterministic, fast, good enough for picking sizes and words.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A size between `lo` and `hi`, log-uniform: mostly small, sometimes large.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let (lo, hi) = ((lo as f64).ln(), (hi as f64).ln());
        (lo + u * (hi - lo)).exp() as usize
    }

    fn uuid(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    fn hex(&mut self, len: usize) -> String {
        let mut out = format!("{:016x}{:016x}", self.next(), self.next());
        out.truncate(len);
        out
    }
}

/// Words for prose, space-separated.
const WORDS: &str = r#"the tailer reads each line from its checkpoint and hands it to session task which stores event before turn ends so a restart resumes exactly hook fires transcript lands later `cohost` `spawn_tail` offset inode rotated truncated JSON normalizer tool result — café → "quoted" path/to/file.rs (see above) OK."#;

const CODE: [&str; 16] = [
    "fn read_available(&mut self) -> Result<(), Stop> {",
    "    let mut chunk = vec![0u8; READ_CHUNK_BYTES];",
    "    while let Some(newline) = rest.iter().position(|&byte| byte == b'\\n') {",
    "        let (head, tail) = rest.split_at(newline);",
    "    match serde_json::from_str::<Value>(&line) {",
    "        Err(err) => tracing::warn!(path = %self.path.display(), \"bad line\"),",
    "    }",
    "}",
    "",
    "#[tokio::test]",
    "async fn tail_holds_a_partial_line_until_its_newline() {",
    "    append(&path, b\"{\\\"a\\\":1}\\n{\\\"b\\\":\");",
    "    assert_eq!(tail.next_line().await.0, \"{\\\"a\\\":1}\");",
    "\tlet tab = \"\\t\"; // tabs and escapes",
    "    let s = format!(\"{}/{}\", dir.display(), name);",
    "use std::collections::HashMap;",
];

fn prose(rng: &mut Rng, len: usize) -> String {
    let words: Vec<&str> = WORDS.split(' ').collect();
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        out.push_str(words[rng.below(words.len())]);
        match rng.below(20) {
            0 => out.push_str(".\n\n"),
            1 => out.push_str(", "),
            2 => out.push_str("\n- "),
            _ => out.push(' '),
        }
    }
    out
}

fn code(rng: &mut Rng, len: usize, numbered: bool) -> String {
    let mut out = String::with_capacity(len + 96);
    let mut n = 1 + rng.below(800);
    while out.len() < len {
        if numbered {
            out.push_str(&format!("{n:>6}\u{2192}"));
        }
        out.push_str(CODE[rng.below(CODE.len())]);
        out.push('\n');
        n += 1;
    }
    out
}

/// What the generator wrote, to check the ingest against.
struct Backlog {
    bytes: u64,
    lines: u64,
    turns: u64,
    tool_uses: u64,
}

struct Writer<'a> {
    rng: Rng,
    out: BufWriter<std::fs::File>,
    cwd: &'a str,
    ms: u64,
    parent: Option<String>,
    lines: u64,
    bytes: u64,
}

impl Writer<'_> {
    fn timestamp(&mut self) -> String {
        self.ms += 1 + self.rng.below(4000) as u64;
        let total = self.ms;
        format!(
            "2026-11-29T{:02}:{:02}:{:02}.{:03}Z",
            (total / 3_600_000) % 24,
            (total / 60_000) % 60,
            (total / 1000) % 60,
            total % 1000
        )
    }

    fn write(&mut self, line: &Value) -> anyhow::Result<()> {
        let text = serde_json::to_string(line)?;
        self.out.write_all(text.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.lines += 1;
        self.bytes += text.len() as u64 + 1;
        Ok(())
    }

    /// A conversation line with the common envelope; returns its uuid.
    fn message(&mut self, mut fields: serde_json::Map<String, Value>) -> anyhow::Result<String> {
        let uuid = self.rng.uuid();
        let timestamp = self.timestamp();
        fields.insert("parentUuid".into(), json!(self.parent));
        fields.insert("isSidechain".into(), json!(false));
        fields.insert("uuid".into(), json!(uuid));
        fields.insert("timestamp".into(), json!(timestamp));
        fields.insert("userType".into(), json!("external"));
        fields.insert("entrypoint".into(), json!("cli"));
        fields.insert("cwd".into(), json!(self.cwd));
        fields.insert("sessionId".into(), json!(CLAUDE_SESSION));
        fields.insert("version".into(), json!("2.1.197"));
        fields.insert("gitBranch".into(), json!("main"));
        self.write(&Value::Object(fields))?;
        self.parent = Some(uuid.clone());
        Ok(uuid)
    }

    fn assistant(
        &mut self,
        message_id: &str,
        request_id: &str,
        block: Value,
        stop: Option<&str>,
    ) -> anyhow::Result<String> {
        let usage = json!({
            "input_tokens": 2000 + self.rng.below(60_000),
            "cache_creation_input_tokens": self.rng.below(4000),
            "cache_read_input_tokens": self.rng.below(40_000),
            "output_tokens": 20 + self.rng.below(2000),
            "server_tool_use": { "web_search_requests": 0, "web_fetch_requests": 0 },
            "service_tier": "standard",
            "cache_creation": { "ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0 },
            "inference_geo": "", "iterations": [], "speed": "standard",
        });
        let mut fields = serde_json::Map::new();
        fields.insert(
            "message".into(),
            json!({
                "id": message_id, "type": "message", "role": "assistant", "model": "claude-opus-4-8",
                "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage,
                "stop_details": null,
            }),
        );
        fields.insert("requestId".into(), json!(request_id));
        fields.insert("type".into(), json!("assistant"));
        self.message(fields)
    }

    /// One turn: a prompt, 0–8 tool rounds, a reply, and the turn's end.
    fn turn(&mut self, backlog: &mut Backlog) -> anyhow::Result<()> {
        let prompt_id = self.rng.uuid();
        let snapshot_id = self.rng.uuid();
        let ts = self.timestamp();
        self.write(&json!({
            "type": "file-history-snapshot", "messageId": snapshot_id,
            "snapshot": { "messageId": snapshot_id, "trackedFileBackups": {}, "timestamp": ts },
            "isSnapshotUpdate": false,
        }))?;
        let len = self.rng.size(12, 3000);
        let text = prose(&mut self.rng, len);
        let mut fields = serde_json::Map::new();
        fields.insert("promptId".into(), json!(prompt_id));
        fields.insert("type".into(), json!("user"));
        fields.insert("message".into(), json!({ "role": "user", "content": text }));
        fields.insert("permissionMode".into(), json!("default"));
        fields.insert("origin".into(), json!({ "kind": "human" }));
        fields.insert("promptSource".into(), json!("typed"));
        self.message(fields)?;

        let rounds = self.rng.below(9);
        for _ in 0..rounds {
            let message_id = format!("msg_{}", self.rng.hex(24));
            let request_id = format!("req_{}", self.rng.hex(24));
            if self.rng.chance(60) {
                let len = self.rng.size(40, 2500);
                let text = prose(&mut self.rng, len);
                self.assistant(
                    &message_id,
                    &request_id,
                    json!({ "type": "text", "text": text }),
                    None,
                )?;
            }
            let tool_use_id = format!("toolu_{}", self.rng.hex(24));
            let (name, input, result_text, structured) = self.tool();
            let assistant_uuid = self.assistant(
                &message_id,
                &request_id,
                json!({ "type": "tool_use", "id": tool_use_id, "name": name, "input": input }),
                Some("tool_use"),
            )?;
            backlog.tool_uses += 1;
            let is_error = self.rng.chance(5);
            let mut fields = serde_json::Map::new();
            fields.insert("promptId".into(), json!(prompt_id));
            fields.insert("type".into(), json!("user"));
            fields.insert(
                "message".into(),
                json!({ "role": "user", "content": [{ "tool_use_id": tool_use_id, "type": "tool_result", "content": result_text, "is_error": is_error }] }),
            );
            fields.insert("toolUseResult".into(), structured);
            fields.insert("sourceToolAssistantUUID".into(), json!(assistant_uuid));
            self.message(fields)?;
        }

        let message_id = format!("msg_{}", self.rng.hex(24));
        let request_id = format!("req_{}", self.rng.hex(24));
        let len = self.rng.size(30, 5000);
        let reply = prose(&mut self.rng, len);
        let reply_uuid = self.assistant(
            &message_id,
            &request_id,
            json!({ "type": "text", "text": reply }),
            Some("end_turn"),
        )?;
        let hook_command = "/work/main/target/release/cohost-hook Stop";
        let mut fields = serde_json::Map::new();
        fields.insert("type".into(), json!("system"));
        fields.insert("subtype".into(), json!("stop_hook_summary"));
        fields.insert("hookCount".into(), json!(1));
        fields.insert(
            "hookInfos".into(),
            json!([{ "command": hook_command, "durationMs": 3 + self.rng.below(40) }]),
        );
        fields.insert("hookErrors".into(), json!([]));
        fields.insert("hookAdditionalContext".into(), json!([]));
        fields.insert("preventedContinuation".into(), json!(false));
        fields.insert("stopReason".into(), json!(""));
        fields.insert("hasOutput".into(), json!(false));
        fields.insert("level".into(), json!("suggestion"));
        fields.insert("toolUseID".into(), json!(self.rng.uuid()));
        self.message(fields)?;
        let mut fields = serde_json::Map::new();
        fields.insert("type".into(), json!("system"));
        fields.insert("subtype".into(), json!("turn_duration"));
        fields.insert("durationMs".into(), json!(800 + self.rng.below(120_000)));
        fields.insert("messageCount".into(), json!(3 + rounds * 2));
        fields.insert("isMeta".into(), json!(false));
        self.message(fields)?;
        self.write(&json!({ "type": "last-prompt", "lastPrompt": "Run the tail tests and fix what fails", "leafUuid": reply_uuid, "sessionId": CLAUDE_SESSION }))?;
        if self.rng.chance(10) {
            self.write(&json!({ "type": "ai-title", "aiTitle": "Fix the tailer tests", "sessionId": CLAUDE_SESSION }))?;
        }
        backlog.turns += 1;
        Ok(())
    }

    /// A tool call: name, input, the tool_result text and the structured `toolUseResult`.
    fn tool(&mut self) -> (&'static str, Value, String, Value) {
        match self.rng.below(10) {
            // Reads dominate real transcripts' bytes: numbered file contents, twice per line.
            0..=3 => {
                let len = self.rng.size(300, 40_000);
                let content = code(&mut self.rng, len, true);
                let lines = content.lines().count();
                let path = format!("{}/src/claude/file_{}.rs", self.cwd, self.rng.below(40));
                (
                    "Read",
                    json!({ "file_path": path }),
                    content.clone(),
                    json!({ "type": "text", "file": { "filePath": path, "content": content, "numLines": lines, "startLine": 1, "totalLines": lines } }),
                )
            }
            4..=6 => {
                let len = self.rng.size(10, 8000);
                let stdout = code(&mut self.rng, len, false);
                let command = format!("cargo test -p cohost --lib case_{}", self.rng.below(500));
                (
                    "Bash",
                    json!({ "command": command, "description": "Run the tests" }),
                    stdout.clone(),
                    json!({ "stdout": stdout, "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false }),
                )
            }
            7 => {
                let len = self.rng.size(50, 3000);
                let content = code(&mut self.rng, len, false);
                (
                    "Grep",
                    json!({ "pattern": "spawn_tail", "path": self.cwd, "output_mode": "content" }),
                    content.clone(),
                    json!({ "mode": "content", "numFiles": 3, "filenames": [], "content": content, "numLines": 12 }),
                )
            }
            _ => {
                let old_len = self.rng.size(20, 1500);
                let old = code(&mut self.rng, old_len, false);
                let new_len = self.rng.size(20, 1500);
                let new = code(&mut self.rng, new_len, false);
                let path = format!("{}/src/claude/tail.rs", self.cwd);
                (
                    "Edit",
                    json!({ "file_path": path, "old_string": old, "new_string": new, "replace_all": false }),
                    format!("The file {path} has been updated."),
                    json!({ "filePath": path, "oldString": old, "newString": new, "originalFile": null, "structuredPatch": [], "userModified": false, "replaceAll": false }),
                )
            }
        }
    }
}

fn generate_backlog(path: &Path) -> anyhow::Result<Backlog> {
    let file = std::fs::File::create(path)?;
    let mut writer = Writer {
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        out: BufWriter::with_capacity(1 << 20, file),
        cwd: "/work/main",
        ms: 13 * 3_600_000,
        parent: None,
        lines: 0,
        bytes: 0,
    };
    writer.write(&json!({ "type": "permission-mode", "permissionMode": "default", "sessionId": CLAUDE_SESSION }))?;
    let mut backlog = Backlog {
        bytes: 0,
        lines: 0,
        turns: 0,
        tool_uses: 0,
    };
    while writer.bytes < TRANSCRIPT_BYTES {
        writer.turn(&mut backlog)?;
    }
    writer.out.flush()?;
    writer.out.get_ref().sync_all()?;
    backlog.bytes = writer.bytes;
    backlog.lines = writer.lines;
    let on_disk = std::fs::metadata(path)?.len();
    if on_disk != backlog.bytes {
        bail!(
            "the backlog has {on_disk} bytes on disk, {} written",
            backlog.bytes
        );
    }
    Ok(backlog)
}

/// (a): parse every line in memory.
fn baseline(lines: &[&str]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for line in lines {
        let value: Value = serde_json::from_str(line)?;
        std::hint::black_box(&value);
    }
    Ok(started.elapsed())
}

/// Where (c)'s CPU goes, one step at a time on this thread over the lines in memory: the
/// tailer's JSON check (`IgnoredAny`), the session task's parse to a `Value`, and
/// `Normalizer::transcript_line` on the parsed value.
fn breakdown(lines: &[&str]) -> anyhow::Result<[Duration; 3]> {
    let started = Instant::now();
    for line in lines {
        serde_json::from_str::<serde::de::IgnoredAny>(line)?;
    }
    let check = started.elapsed();
    let mut parse = Duration::ZERO;
    let mut normalize = Duration::ZERO;
    let mut normalizer = Normalizer::new();
    for line in lines {
        let t0 = Instant::now();
        let value: Value = serde_json::from_str(line)?;
        let t1 = Instant::now();
        let outputs = normalizer.transcript_line(&value);
        let t2 = Instant::now();
        std::hint::black_box(&outputs);
        parse += t1 - t0;
        normalize += t2 - t1;
    }
    Ok([check, parse, normalize])
}

/// What a tail run consumed.
#[derive(Default)]
struct Consumed {
    lines: u64,
    bytes: u64,
    item_started: u64,
    turn_completed: u64,
    stored: u64,
    /// (d): how long each `save_checkpoint` took.
    saves: Vec<Duration>,
}

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    /// (b) only receive.
    Tail,
    /// (c) parse + normalize.
    Normalize,
    /// (d) (c) + save_checkpoint per line, until the budget runs out.
    Checkpoint,
}

/// Tails `path` from offset 0 until the checkpoint reaches `end` (or, for `Stage::Checkpoint`,
/// until the budget runs out), doing `stage`'s work per line in a spawned consumer task.
async fn tail_run(
    path: &Path,
    end: u64,
    stage: Stage,
    scratch: &Path,
) -> anyhow::Result<(Duration, Consumed)> {
    let (tx, mut rx) = mpsc::channel::<(TailItem, Checkpoint)>(HOST_TAIL_CHANNEL);
    let cancel = CancellationToken::new();
    let checkpoint_file = scratch.join("transcript.checkpoint.json");
    let started = Instant::now();
    let tailer = tail::spawn_tail(path.to_path_buf(), None, tx, cancel.clone());
    let consumer = tokio::spawn(async move {
        let mut normalizer = Normalizer::new();
        let mut consumed = Consumed::default();
        while let Some((item, checkpoint)) = rx.recv().await {
            match item {
                TailItem::Line { line, .. } => {
                    consumed.lines += 1;
                    if stage != Stage::Tail {
                        let value: Value = serde_json::from_str(&line)?;
                        for output in normalizer.transcript_line(&value) {
                            if let Output::Store(kind) = output {
                                consumed.stored += 1;
                                match kind {
                                    EventKind::ItemStarted(_) => consumed.item_started += 1,
                                    EventKind::TurnCompleted(_) => consumed.turn_completed += 1,
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                TailItem::Malformed { offset, error, .. } => {
                    bail!("the tailer reported a malformed line at {offset}: {error}")
                }
                TailItem::Rotated { .. } | TailItem::Truncated => {
                    bail!("the tailer reported a rotation or truncation of a static file")
                }
            }
            if stage == Stage::Checkpoint {
                let save = Instant::now();
                tail::save_checkpoint(&checkpoint_file, &checkpoint).await?;
                consumed.saves.push(save.elapsed());
                if started.elapsed() >= CHECKPOINT_BUDGET {
                    consumed.bytes = checkpoint.offset;
                    return Ok((started.elapsed(), consumed));
                }
            }
            if checkpoint.offset >= end {
                consumed.bytes = checkpoint.offset;
                return Ok((started.elapsed(), consumed));
            }
        }
        bail!("the tailer stopped before the end of the file")
    });
    let outcome = tokio::time::timeout(Duration::from_secs(60), consumer).await;
    cancel.cancel();
    let _ = tailer.await;
    match outcome {
        Ok(joined) => joined?,
        Err(_) => bail!("tailing the backlog took more than 60 s"),
    }
}

/// The same steps as `save_checkpoint` (write a temporary file, fsync it, rename it over the
/// checkpoint, fsync the directory) with blocking std calls on this thread: the syscall floor.
fn checkpoint_floor(dir: &Path, count: usize) -> anyhow::Result<Vec<Duration>> {
    let file = dir.join("floor.checkpoint.json");
    let tmp = dir.join("floor.checkpoint.json.tmp");
    let mut times = Vec::with_capacity(count);
    for offset in 0..count {
        let bytes = serde_json::to_vec(
            &json!({ "path": file, "inode": 1234567, "offset": offset * 2900 }),
        )?;
        let started = Instant::now();
        let mut out = std::fs::File::create(&tmp)?;
        out.write_all(&bytes)?;
        out.sync_all()?;
        drop(out);
        std::fs::rename(&tmp, &file)?;
        std::fs::File::open(dir)?.sync_all()?;
        times.push(started.elapsed());
    }
    times.sort_unstable();
    Ok(times)
}

struct ThroughputRow {
    what: &'static str,
    median: f64,
    best: f64,
    bytes: u64,
    lines_per_sec: f64,
}

fn throughput_row(
    what: &'static str,
    bytes: u64,
    lines: u64,
    times: &mut [Duration],
) -> ThroughputRow {
    times.sort_unstable();
    let median = times[times.len() / 2].as_secs_f64();
    let best = times[0].as_secs_f64();
    ThroughputRow {
        what,
        median: mb(bytes) / median,
        best: mb(bytes) / best,
        bytes,
        lines_per_sec: lines as f64 / median,
    }
}

struct TranscriptReport {
    backlog: Backlog,
    generate_secs: f64,
    rows: Vec<ThroughputRow>,
    checkpoint: (Duration, Consumed),
    floor: Vec<Duration>,
    normalized: Consumed,
    /// Medians of [`breakdown`]'s three steps.
    steps: [Duration; 3],
    cpu: String,
}

async fn transcript_benchmark() -> anyhow::Result<TranscriptReport> {
    let dir = tempfile::Builder::new()
        .prefix("cohost-claude-backlog")
        .tempdir()?;
    let path = dir.path().join(format!("{CLAUDE_SESSION}.jsonl"));
    let generated = Instant::now();
    let backlog = generate_backlog(&path)?;
    let generate_secs = generated.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&path)?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    if lines.len() as u64 != backlog.lines {
        bail!(
            "the backlog has {} lines, {} written",
            lines.len(),
            backlog.lines
        );
    }

    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu_start = CpuUse::sample(None);
    let mut times: [Vec<Duration>; 3] = Default::default();
    let mut steps: [Vec<Duration>; 3] = Default::default();
    let mut normalized = Consumed::default();
    for _ in 0..REPS {
        times[0].push(baseline(&lines)?);
        for (step, took) in steps.iter_mut().zip(breakdown(&lines)?) {
            step.push(took);
        }
        let (took, consumed) = tail_run(&path, backlog.bytes, Stage::Tail, dir.path()).await?;
        if consumed.lines != backlog.lines || consumed.bytes != backlog.bytes {
            bail!(
                "the tailer delivered {} lines / {} bytes of {} / {}",
                consumed.lines,
                consumed.bytes,
                backlog.lines,
                backlog.bytes
            );
        }
        times[1].push(took);
        let (took, consumed) = tail_run(&path, backlog.bytes, Stage::Normalize, dir.path()).await?;
        if consumed.lines != backlog.lines || consumed.item_started != backlog.tool_uses {
            bail!(
                "normalizing delivered {} lines and {} item.started, expected {} and {}",
                consumed.lines,
                consumed.item_started,
                backlog.lines,
                backlog.tool_uses
            );
        }
        times[2].push(took);
        normalized = consumed;
    }
    let rows = vec![
        throughput_row(
            "(a) serde_json::from_str::<Value> per line, in memory",
            backlog.bytes,
            backlog.lines,
            &mut times[0],
        ),
        throughput_row(
            "(b) spawn_tail, offset 0 -> last checkpoint",
            backlog.bytes,
            backlog.lines,
            &mut times[1],
        ),
        throughput_row(
            "(c) (b) + from_str::<Value> + Normalizer::transcript_line",
            backlog.bytes,
            backlog.lines,
            &mut times[2],
        ),
    ];
    let cpu = CpuUse::others(cpu_start, CpuUse::sample(None), cpus);
    let steps = steps.map(|mut times| {
        times.sort_unstable();
        times[times.len() / 2]
    });
    let mut checkpoint = tail_run(&path, backlog.bytes, Stage::Checkpoint, dir.path()).await?;
    checkpoint.1.saves.sort_unstable();
    let floor = checkpoint_floor(dir.path(), 300)?;
    Ok(TranscriptReport {
        backlog,
        generate_secs,
        rows,
        checkpoint,
        floor,
        steps,
        cpu,
        normalized,
    })
}

// ---------------------------------------------------------------------------------------------

async fn run() -> anyhow::Result<bool> {
    let cpus = bench::cpus();
    let started = Instant::now();
    let (runner, hook) = helper_binaries()?;
    let failures = Arc::new(Failures::new(8));
    println!("cohost claude benchmark ({cpus} CPUs, release build)");
    println!("load average at start: {}", loadavg());

    // ---- 1. hook line -> SSE ----
    let mut fixture = Fixture::start(&runner, &hook)?;
    println!(
        "daemon pid {} on {} (fsync=always); stand-in claude via cohost-runner in tmux session `{SESSION}`",
        fixture.daemon.pid(),
        fixture.daemon.addr
    );
    // How fast this disk syncs right now: the hook path waits for several fsyncs per line.
    let disk_before = checkpoint_floor(fixture.dir.path(), 100)?;
    let cpu_start = CpuUse::sample(Some(fixture.daemon.pid()));
    let hooks = hook_benchmark(&fixture, &failures).await;
    let hook_cpu = CpuUse::others(cpu_start, CpuUse::sample(Some(fixture.daemon.pid())), cpus);
    let stopped = fixture.daemon.stop(STOP_GRACE);
    let hooks = hooks?;
    stopped?;
    drop(fixture);

    // ---- 2. transcript backlog ----
    let transcript = transcript_benchmark().await?;

    // ---- report ----
    println!();
    println!(
        "1. Hook line -> SSE latency (real daemon; POST /api/sessions took {:.0} ms)",
        hooks.create_ms
    );
    println!(
        "   {TOOL_CALLS} tool calls per run ({SLOW_CALLS} in the {} ms one) = PreToolUse + PostToolUse lines,",
        SLOW_GAP.as_millis()
    );
    println!("   one O_APPEND write each, `gap` apart (plus the timer's overshoot);");
    println!(
        "   write -> SSE chunk with the event on /api/sessions/{{id}}/events/stream; target p99 < {} ms",
        TARGET_P99.as_millis()
    );
    println!(
        "   {:<22} {:<15} {:>7} {:>7} {:>8} {:>8} {:>8}",
        "daemon load", "event", "samples", "missing", "p50 ms", "p99 ms", "max ms"
    );
    for row in hooks.runs.iter().flat_map(|run| &run.rows) {
        println!(
            "   {:<22} {:<15} {:>7} {:>7} {:>8} {:>8} {:>8}",
            row.label,
            row.what,
            row.samples,
            row.missing,
            ms(row.p50),
            ms(row.p99),
            ms(row.max)
        );
    }
    println!(
        "   background client: {:.0} agent-events/s, POST round trip (append + fsync) p50 {} ms, p99 {} ms",
        hooks.background_rate,
        ms(percentile(&hooks.background_round_trips, 50.0)),
        ms(percentile(&hooks.background_round_trips, 99.0))
    );
    println!("   during the runs: {hook_cpu}");
    println!(
        "   disk before the runs: write + fsync + rename + fsync of the directory (std::fs, 100 calls) p50 {} ms, p99 {} ms",
        ms(percentile(&disk_before, 50.0)),
        ms(percentile(&disk_before, 99.0))
    );
    for run in &hooks.runs {
        let label = run.rows.first().map(|row| row.label.as_str()).unwrap_or("");
        let queued = match run.queued_interval {
            Some(interval) => format!(
                "while queued ({} pairs > 20 ms) one line was delivered per {} ms (median)",
                run.queued_samples,
                ms(interval)
            ),
            None => "never queued beyond 20 ms".to_string(),
        };
        println!(
            "   {label}: a line written every {} ms on average; {} samples >= {} ms; {queued}",
            ms(run.line_interval),
            run.over_target,
            TARGET_P99.as_millis()
        );
    }

    let backlog = &transcript.backlog;
    println!();
    println!(
        "2. Transcript backlog ingest, in-process ({:.1} MB, {} lines, {} turns, {} tool calls; generated in {:.1} s)",
        mb(backlog.bytes),
        backlog.lines,
        backlog.turns,
        backlog.tool_uses,
        transcript.generate_secs
    );
    println!(
        "   median of {REPS} runs (best in the next column); target (c)/(a) >= {TARGET_RATIO}"
    );
    println!(
        "   {:<60} {:>8} {:>8} {:>10} {:>7}",
        "stage", "MB/s", "best", "lines/s", "vs (a)"
    );
    let base = transcript.rows[0].median;
    for row in &transcript.rows {
        println!(
            "   {:<60} {:>8.1} {:>8.1} {:>10.0} {:>7.2}",
            row.what,
            row.median,
            row.best,
            row.lines_per_sec,
            row.median / base
        );
        debug_assert_eq!(row.bytes, backlog.bytes);
    }
    let (took, consumed) = &transcript.checkpoint;
    let secs = took.as_secs_f64();
    println!(
        "   {:<60} {:>8.1} {:>8} {:>10.0} {:>7.2}",
        "(d) (c) + save_checkpoint per line (the host before it batched)",
        mb(consumed.bytes) / secs,
        "-",
        consumed.lines as f64 / secs,
        mb(consumed.bytes) / secs / base
    );
    println!(
        "       (d) ran {:.1} s over the first {} lines ({:.1} MB): {:.0} us per line",
        secs,
        consumed.lines,
        mb(consumed.bytes),
        secs * 1e6 / consumed.lines.max(1) as f64
    );
    let saves = &consumed.saves;
    println!(
        "       save_checkpoint (tokio::fs) per call: p50 {} ms, p99 {} ms; the same syscalls with std::fs, {} calls: p50 {} ms, p99 {} ms",
        ms(percentile(saves, 50.0)),
        ms(percentile(saves, 99.0)),
        transcript.floor.len(),
        ms(percentile(&transcript.floor, 50.0)),
        ms(percentile(&transcript.floor, 99.0))
    );
    let [check, parse, normalize] = transcript.steps;
    let rate = |took: Duration| mb(backlog.bytes) / took.as_secs_f64().max(1e-9);
    println!(
        "   where (c)'s CPU goes, each step alone on one thread, in memory (median): IgnoredAny check {:.0} MB/s,",
        rate(check)
    );
    println!(
        "       from_str::<Value> {:.0} MB/s, transcript_line {:.0} MB/s; the three in series {:.0} MB/s",
        rate(parse),
        rate(normalize),
        rate(check + parse + normalize)
    );
    println!("   during (a)-(c): {}", transcript.cpu);
    let normalized = &transcript.normalized;
    println!(
        "   (c) produced {} events to store: {} item.started (= tool calls), {} turn.completed",
        normalized.stored, normalized.item_started, normalized.turn_completed
    );

    println!();
    let worst = hooks
        .runs
        .iter()
        .flat_map(|run| &run.rows)
        .filter(|row| {
            row.what == "both"
                && row
                    .label
                    .starts_with(&format!("{} ms", LINE_GAP.as_millis()))
        })
        .map(|row| row.p99)
        .max()
        .unwrap_or_default();
    let ratio = transcript.rows[2].median / base;
    println!(
        "target hook -> SSE p99 < {} ms at a {} ms gap: {} (worst p99 {} ms)",
        TARGET_P99.as_millis(),
        LINE_GAP.as_millis(),
        if worst < TARGET_P99 { "met" } else { "MISSED" },
        ms(worst)
    );
    println!(
        "target backlog (c) >= {TARGET_RATIO} x serde_json baseline: {} ({:.1} MB/s vs {:.1} MB/s = {ratio:.2})",
        if ratio >= TARGET_RATIO {
            "met"
        } else {
            "MISSED"
        },
        transcript.rows[2].median,
        base
    );
    println!("load average at end: {}", loadavg());
    println!("total run time {:.1} s", started.elapsed().as_secs_f64());

    let failed = failures.count();
    if failed > 0 {
        println!();
        println!("{failed} failures, first ones:");
        for sample in failures.first() {
            println!("  {sample}");
        }
    }
    Ok(failed == 0)
}
