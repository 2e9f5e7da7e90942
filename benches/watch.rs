//! The passive watchers on a large synthetic history: `cargo bench --bench watch`.
//!
//! Generates 10,000 session files (≈2 GB) in the layouts of the agents cohost watches (Claude
//! Code and Codex, plus Pi and Droid, whose watchers come later: their files are the rest of the
//! history a machine holds), most of them old, some modified today, a few in the last five
//! minutes. Then, against the real (release) daemon with `--watchers all` and that directory as
//! its `HOME`:
//!
//! 1. start-up catch-up: wall time until `/api/watch` says `caughtUp`, the engine's own figure,
//!    and the bytes it read;
//! 2. the daemon's VmRSS after the catch-up and after the live writers;
//! 3. an idle minute: engine wakeups and bytes read (`/api/watch` counters);
//! 4. four live writers (two Claude transcripts, two Codex rollouts) appending records that each
//!    change a status: append → `agent.updated` on `/api/events/stream`, p50/p99/max;
//! 5. the reference's approach (opensessions: every 2 s, walk every root, stat every file, and
//!    re-read and parse in full every file modified in the last 5 minutes) on the same history
//!    in the same run, for the same minute: bytes read and CPU time, and the ratio.
//!
//! `WATCH_BENCH_FILES` (default 10000), `WATCH_BENCH_MB` (default 2000) and
//! `WATCH_BENCH_IDLE_SECS` (default 60) scale it down for a quick look. The history is
//! generated under `$TMPDIR` and removed at the end. See docs/benchmarks-watch.md.
//!
//! Adding a layout: a [`Layout`] variant, its share in [`LAYOUTS`], and its `path` and `record`
//! (the `watch-more` formats: OpenCode's database is one file, not a layout of many).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use cohost_testkit::bench::{self, loadavg, ms, percentile};
use cohost_testkit::{Binaries, TestDaemon, TmuxServer};

struct Cohost;
impl Binaries for Cohost {
    const COHOST: &'static str = env!("CARGO_BIN_EXE_cohost");
}

const TARGET_CATCH_UP: Duration = Duration::from_secs(2);
const TARGET_RSS_KB: u64 = 64 * 1024;
const TARGET_P99: Duration = Duration::from_millis(10);
const WRITER_SAMPLES: usize = 100;
/// The reference's poll period and "recent" window.
const REFERENCE_TICK: Duration = Duration::from_secs(2);
const REFERENCE_RECENT: Duration = Duration::from_secs(5 * 60);

fn main() -> ExitCode {
    bench::main(
        "watch",
        "a target was missed or a sample was lost, see above",
        run(),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    ClaudeCode,
    Codex,
    Pi,
    Droid,
}

/// Each layout's share of the files (out of 10).
const LAYOUTS: [(Layout, usize); 4] = [
    (Layout::ClaudeCode, 4),
    (Layout::Codex, 4),
    (Layout::Pi, 1),
    (Layout::Droid, 1),
];

fn uuid(i: usize, salt: u32) -> String {
    format!(
        "{:08x}-{:04x}-7{:03x}-8{:03x}-{:012x}",
        salt,
        (i >> 16) & 0xffff,
        i & 0xfff,
        (i >> 12) & 0xfff,
        i as u64 * 7919
    )
}

impl Layout {
    fn path(self, home: &Path, i: usize) -> PathBuf {
        let id = uuid(i, self as u32 + 1);
        let project = format!("-home-me-proj{}", i % 50);
        match self {
            Layout::ClaudeCode => home
                .join(".claude/projects")
                .join(project)
                .join(format!("{id}.jsonl")),
            Layout::Codex => home
                .join(".codex/sessions/2026")
                .join(format!("{:02}", 1 + i % 12))
                .join(format!("{:02}", 1 + i % 28))
                .join(format!("rollout-2026-01-01T00-00-00-{id}.jsonl")),
            Layout::Pi => home
                .join(".pi/agent/sessions")
                .join(format!("--home-me-proj{}--", i % 50))
                .join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl")),
            Layout::Droid => home
                .join(".factory/sessions")
                .join(project)
                .join(format!("{id}.jsonl")),
        }
    }

    /// One record of the layout, ~1 KB, for thread `id`; `n` varies it.
    fn record(self, id: &str, n: usize) -> String {
        let text = "lorem ipsum dolor sit amet ".repeat(30);
        let value = match self {
            Layout::ClaudeCode => json!({
                "type": "assistant", "sessionId": id, "cwd": "/home/me/proj",
                "timestamp": "2026-01-01T00:00:00.000Z", "uuid": format!("u{n}"),
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}
            }),
            Layout::Codex => json!({
                "timestamp": "2026-01-01T00:00:00.000Z", "ordinal": n, "type": "response_item",
                "payload": {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]}
            }),
            Layout::Pi => json!({
                "type": "message", "id": format!("m{n}"),
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                            "stopReason": "stop"}
            }),
            Layout::Droid => json!({
                "type": "message", "id": format!("m{n}"),
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}
            }),
        };
        format!("{value}\n")
    }

    /// The lines that open a thread and end its turn (done), so no thread is left mid-turn.
    fn frame(self, id: &str) -> (String, String) {
        match self {
            Layout::ClaudeCode => (
                format!(
                    "{}\n",
                    json!({"type": "user", "sessionId": id, "cwd": "/home/me/proj",
                           "message": {"role": "user", "content": "Generate a history"},
                           "origin": {"kind": "human"}})
                ),
                format!(
                    "{}\n",
                    json!({"type": "system", "subtype": "turn_duration"})
                ),
            ),
            Layout::Codex => (
                format!(
                    "{}\n",
                    json!({"type": "session_meta", "payload": {"id": id, "cwd": "/home/me/proj"}})
                ),
                format!(
                    "{}\n",
                    json!({"type": "event_msg", "payload": {"type": "task_complete"}})
                ),
            ),
            Layout::Pi | Layout::Droid => (
                format!(
                    "{}\n",
                    json!({"type": "session", "id": id, "cwd": "/home/me/proj"})
                ),
                format!(
                    "{}\n",
                    json!({"type": "message", "message": {"stopReason": "stop"}})
                ),
            ),
        }
    }
}

struct History {
    files: usize,
    bytes: u64,
    recent_5min: usize,
    recent_day: usize,
}

/// Writes the synthetic history: sizes from 20 KB to ~380 KB (mean ≈ `total / files`), mtimes
/// spread over 90 days, 2% within the last day, 0.5% within the last five minutes.
fn generate(home: &Path, files: usize, total_bytes: u64) -> anyhow::Result<History> {
    let mean = (total_bytes / files as u64).max(4096);
    let now = SystemTime::now();
    let mut bytes = 0;
    let (mut recent_5min, mut recent_day) = (0, 0);
    let mut index = 0;
    for (layout, share) in LAYOUTS {
        let count = files * share / 10;
        for _ in 0..count {
            index += 1;
            let path = layout.path(home, index);
            std::fs::create_dir_all(path.parent().context("no parent")?)?;
            let id = uuid(index, layout as u32 + 1);
            // A deterministic spread around the mean: 0.1× … 1.9×.
            let size = mean / 10 + (mean * 18 / 10) * ((index * 7919) % 1000) as u64 / 1000;
            let (open, close) = layout.frame(&id);
            let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
            out.write_all(open.as_bytes())?;
            let mut written = open.len() as u64;
            let mut n = 0;
            while written < size {
                let record = layout.record(&id, n);
                out.write_all(record.as_bytes())?;
                written += record.len() as u64;
                n += 1;
            }
            out.write_all(close.as_bytes())?;
            written += close.len() as u64;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            let age = if index % 200 == 0 {
                recent_5min += 1;
                Duration::from_secs((index % 240) as u64)
            } else if index % 50 == 0 {
                recent_day += 1;
                Duration::from_secs(3600 + (index % 80_000) as u64)
            } else {
                Duration::from_secs(2 * 86_400 + (index as u64 * 6007) % (88 * 86_400))
            };
            file.set_modified(now - age)?;
            bytes += written;
        }
    }
    Ok(History {
        files: index,
        bytes,
        recent_5min,
        recent_day,
    })
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far.
fn own_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = text.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn process_cpu(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = text.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The reference's loop for `duration`: every 2 s, walk the roots, stat every file, re-read and
/// parse in full those modified in the last 5 minutes. Returns (ticks, bytes read, lines
/// parsed, files stat'ed per tick, CPU time).
fn reference(roots: &[PathBuf], duration: Duration) -> (u64, u64, u64, u64, Duration) {
    let cpu_start = own_cpu();
    let start = Instant::now();
    let (mut ticks, mut bytes, mut lines, mut stats) = (0u64, 0u64, 0u64, 0u64);
    while start.elapsed() < duration {
        let tick = Instant::now();
        ticks += 1;
        let mut stack: Vec<PathBuf> = roots.to_vec();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() {
                    stack.push(path);
                    continue;
                }
                stats += 1;
                let recent = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|age| age <= REFERENCE_RECENT);
                if recent && let Ok(data) = std::fs::read(&path) {
                    bytes += data.len() as u64;
                    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        if serde_json::from_slice::<Value>(line).is_ok() {
                            lines += 1;
                        }
                    }
                }
            }
        }
        if let Some(rest) = REFERENCE_TICK.checked_sub(tick.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    let per_tick = stats / ticks.max(1);
    (ticks, bytes, lines, per_tick, own_cpu() - cpu_start)
}

fn watch_stats(daemon: &TestDaemon<Cohost>) -> Value {
    daemon.get("/api/watch").json()
}

async fn run() -> anyhow::Result<bool> {
    tokio::task::block_in_place(run_blocking)
}

fn run_blocking() -> anyhow::Result<bool> {
    let files = env_number("WATCH_BENCH_FILES", 10_000) as usize;
    let total = env_number("WATCH_BENCH_MB", 2000) * 1024 * 1024;
    let idle = Duration::from_secs(env_number("WATCH_BENCH_IDLE_SECS", 60));
    let dir = tempfile::Builder::new()
        .prefix("cohost-watch-bench-")
        .tempdir()?;
    let home = dir.path().join("home");
    println!(
        "watch bench: generating {files} files (≈{} MB) under {}",
        total >> 20,
        dir.path().display()
    );
    let started = Instant::now();
    let history = generate(&home, files, total)?;
    println!(
        "  generated {} files, {:.2} GB in {:.1} s ({} modified in the last 5 min, {} earlier today)",
        history.files,
        history.bytes as f64 / 1e9,
        started.elapsed().as_secs_f64(),
        history.recent_5min,
        history.recent_day
    );
    // Drop the history from the page cache's point of view as far as we can: nothing to do
    // without root; both the daemon and the reference read it warm, which favours neither.
    let tmux = TmuxServer::new();
    let home_text = home.to_string_lossy().into_owned();
    let spawned = Instant::now();
    let daemon: TestDaemon<Cohost> = TestDaemon::start_with_env(
        Some(tmux.socket()),
        &[],
        &[
            ("COHOST_WATCHERS", "all"),
            ("HOME", &home_text),
            ("RUST_LOG", "warn"),
        ],
    );
    let pid = daemon.pid();
    let stats = daemon.wait_for("the catch-up", Duration::from_secs(120), |daemon| {
        let stats = watch_stats(daemon);
        (stats["caughtUp"] == true).then_some(stats)
    });
    let catch_up_wall = spawned.elapsed();
    let catch_up_ms = stats["catchUpMs"].as_u64().unwrap_or(0);
    let catch_up_bytes = stats["bytesRead"].as_u64().unwrap_or(0);
    let rss_after_catch_up = rss_kb(pid);
    let mut ok = true;
    println!("\n## Start-up catch-up");
    println!(
        "  files known {}, watched dirs {}, threads {}, read {:.1} MB in {} file reads",
        stats["filesKnown"],
        stats["watchedDirs"],
        stats["instances"],
        catch_up_bytes as f64 / 1e6,
        stats["fileReads"]
    );
    println!(
        "  engine catch-up {catch_up_ms} ms; spawn → caughtUp {} (target < {})",
        ms(catch_up_wall),
        ms(TARGET_CATCH_UP)
    );
    if Duration::from_millis(catch_up_ms) > TARGET_CATCH_UP {
        println!("  MISSED: catch-up over target");
        ok = false;
    }
    println!("  VmRSS after catch-up: {} MB", rss_after_catch_up / 1024);

    // The checkpoint is saved 2 s after the catch-up; then nothing changes.
    std::thread::sleep(Duration::from_secs(3));
    println!("\n## Idle ({} s, nothing changes)", idle.as_secs());
    let before = watch_stats(&daemon);
    let cpu_before = process_cpu(pid);
    std::thread::sleep(idle);
    let after = watch_stats(&daemon);
    let cpu_idle = process_cpu(pid) - cpu_before;
    let delta =
        |field: &str| after[field].as_u64().unwrap_or(0) - before[field].as_u64().unwrap_or(0);
    let (idle_wakeups, idle_bytes, idle_scans) =
        (delta("wakeups"), delta("bytesRead"), delta("procScans"));
    println!(
        "  cohost: {idle_wakeups} wakeups, {idle_bytes} bytes read, {idle_scans} /proc scans, {} daemon CPU",
        ms(cpu_idle)
    );
    // The reference scans every agent's root, the watched ones and the others.
    let roots = vec![
        home.join(".claude/projects"),
        home.join(".codex/sessions"),
        home.join(".pi/agent/sessions"),
        home.join(".factory/sessions"),
    ];
    let (ticks, ref_bytes, ref_lines, ref_stats, ref_cpu) = reference(&roots, idle);
    println!(
        "  reference: {ticks} ticks, {:.1} MB read, {ref_lines} lines parsed, {ref_stats} files stat'ed per tick, {} CPU",
        ref_bytes as f64 / 1e6,
        ms(ref_cpu)
    );
    if idle_bytes > 0 || idle_wakeups > 0 {
        println!("  note: cohost was not idle");
    }

    // Live writers.
    println!("\n## Live writers (append → agent.updated on SSE)");
    let mut sse = daemon
        .sse(&format!("?after={}", daemon.head()), None)
        .map_err(|resp| anyhow::anyhow!("SSE answered {}: {}", resp.status, resp.body))?;
    sse.set_read_timeout(Duration::from_secs(10));
    let writers: Vec<(Layout, PathBuf, String)> = (0..4)
        .map(|w| {
            let layout = if w % 2 == 0 {
                Layout::ClaudeCode
            } else {
                Layout::Codex
            };
            let path = layout.path(&home, 1_000_000 + w);
            let id = match layout {
                Layout::Codex => {
                    let stem = path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    stem[stem.len() - 36..].to_string()
                }
                _ => path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            (layout, path, id)
        })
        .collect();
    let live_before = watch_stats(&daemon);
    let live_cpu_before = process_cpu(pid);
    let live_started = Instant::now();
    let mut latencies = Vec::new();
    let mut lost = 0;
    for n in 0..WRITER_SAMPLES {
        for (layout, path, id) in &writers {
            std::fs::create_dir_all(path.parent().context("no parent")?)?;
            // Alternate a turn start and a turn end: each append changes the status.
            let (status, record) = match (layout, n % 2) {
                (Layout::ClaudeCode, 0) => (
                    "running",
                    format!(
                        "{}\n",
                        json!({"type": "user", "cwd": "/home/me/proj", "message": {"role": "user", "content": format!("prompt {n}")}, "origin": {"kind": "human"}})
                    ),
                ),
                (Layout::ClaudeCode, _) => (
                    "done",
                    format!(
                        "{}\n",
                        json!({"type": "system", "subtype": "turn_duration"})
                    ),
                ),
                (_, 0) => (
                    "running",
                    format!(
                        "{}\n",
                        json!({"type": "event_msg", "payload": {"type": "task_started"}})
                    ),
                ),
                (_, _) => (
                    "done",
                    format!(
                        "{}\n",
                        json!({"type": "event_msg", "payload": {"type": "task_complete"}})
                    ),
                ),
            };
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            let wrote = Instant::now();
            file.write_all(record.as_bytes())?;
            drop(file);
            let deadline = wrote + Duration::from_secs(5);
            let mut seen = false;
            while Instant::now() < deadline {
                let Some(event) = sse.next_event() else { break };
                let event = event.json();
                if event["type"] == "agent.updated"
                    && event["data"]["threadId"] == id.as_str()
                    && event["data"]["status"] == status
                {
                    latencies.push(wrote.elapsed());
                    seen = true;
                    break;
                }
            }
            if !seen {
                lost += 1;
            }
        }
    }
    let live_elapsed = live_started.elapsed();
    let live_after = watch_stats(&daemon);
    let live_cpu = process_cpu(pid) - live_cpu_before;
    latencies.sort();
    let (p50, p99, max) = (
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.last().copied().unwrap_or_default(),
    );
    let live_bytes = live_after["bytesRead"].as_u64().unwrap_or(0)
        - live_before["bytesRead"].as_u64().unwrap_or(0);
    println!(
        "  {} appends by 4 writers in {:.1} s: p50 {} p99 {} max {} (target p99 < {}); {lost} lost",
        latencies.len() + lost,
        live_elapsed.as_secs_f64(),
        ms(p50),
        ms(p99),
        ms(max),
        ms(TARGET_P99)
    );
    println!(
        "  cohost read {} bytes for them, {} daemon CPU",
        live_bytes,
        ms(live_cpu)
    );
    if p99 > TARGET_P99 || lost > 0 {
        println!("  MISSED: latency over target or samples lost");
        ok = false;
    }
    let rss_end = rss_kb(pid);
    println!("\n## Memory");
    println!(
        "  VmRSS after catch-up {} MB, after the writers {} MB (target < {} MB)",
        rss_after_catch_up / 1024,
        rss_end / 1024,
        TARGET_RSS_KB / 1024
    );
    if rss_after_catch_up.max(rss_end) > TARGET_RSS_KB {
        println!("  MISSED: RSS over target");
        ok = false;
    }
    println!("\n## Per idle minute: cohost vs the reference's approach");
    let per_minute = |value: u64| value as f64 * 60.0 / idle.as_secs_f64();
    println!(
        "  bytes read: cohost {:.0}, reference {:.0} ({:.1} MB)",
        per_minute(idle_bytes),
        per_minute(ref_bytes),
        per_minute(ref_bytes) / 1e6
    );
    println!(
        "  CPU: cohost daemon {} , reference {} (ratio {})",
        ms(cpu_idle.mul_f64(60.0 / idle.as_secs_f64())),
        ms(ref_cpu.mul_f64(60.0 / idle.as_secs_f64())),
        if cpu_idle.is_zero() {
            "∞: cohost used no measurable CPU".to_string()
        } else {
            format!("{:.0}×", ref_cpu.as_secs_f64() / cpu_idle.as_secs_f64())
        }
    );
    println!(
        "  wakeups: cohost {:.0}, reference {:.0} (one per 2 s tick)",
        per_minute(idle_wakeups),
        per_minute(ticks)
    );
    println!("\n  load average at the end: {}", loadavg());
    drop(sse);
    drop(daemon);
    drop(tmux);
    let removing = Instant::now();
    dir.close()?;
    println!(
        "  removed the history in {:.1} s",
        removing.elapsed().as_secs_f64()
    );
    if history.files == 0 {
        bail!("no history generated");
    }
    Ok(ok)
}
