//! The web page on long sessions: `cargo bench --bench web`.
//!
//! A closed codex session of 1,000 and of 100,000 events (200 and 20,000 turns: a prompt, a
//! command, a Markdown answer, the turn's start and end) is appended to the log of a stopped
//! release daemon; the daemon starts again and replays it. Then, in Debian's headless Chromium
//! (the test kit's `Browser`), for each size, three times, a fresh page:
//!
//! 1. open: from `goto` to the session's last answer shown (the page reads the session's last
//!    window of events, `GET …/events?last=N`, and streams after it);
//! 2. the entries in the DOM and the page's JS heap;
//! 3. a click on "Show tasks and control changes" (the window rendered again) to its result on
//!    screen;
//! 4. on the 100,000-event session, scrolling back 10,000 events (2,000 turns): a script in the
//!    page holds the transcript at its top, frame after frame (`requestAnimationFrame`), as a
//!    person dragging the scroll bar up would: each time at the top older entries load (from
//!    the page, then from the daemon a window at a time), until the question 2,000 turns back is
//!    the oldest shown. Measured in the page, with no WebDriver round trip in the loop: the
//!    time, the frames and the gaps between them (a long gap is a frame the page could not draw:
//!    jank), then the heap again.
//!
//! Reported as medians and as the ratio 100,000 / 1,000 measured in the same run: a page that
//! keeps every event grows with the session; one that reads windows should not (target ≤ 1.5×
//! for the open and the heap, ≤ 2× for the click). See docs/benchmarks.md "The web page on
//! long sessions".

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cohost_testkit::browser::Browser;
use cohost_testkit::web::long_session;
use cohost_testkit::{Binaries, TestDaemon, TmuxServer};

struct Cohost;
impl Binaries for Cohost {
    const COHOST: &'static str = env!("CARGO_BIN_EXE_cohost");
}

const SIZES: [usize; 2] = [200, 20_000];
const RUNS: usize = 3;
const TARGET_OPEN_RATIO: f64 = 1.5;
const TARGET_HEAP_RATIO: f64 = 1.5;
const TARGET_CLICK_RATIO: f64 = 2.0;
/// Turns scrolled back on the large session: 10,000 events.
const SCROLL_TURNS: usize = 2_000;
const WAIT: Duration = Duration::from_secs(120);
/// A frame gap above this is a frame the page could not draw in time (three at 60 Hz).
const LONG_FRAME_MS: f64 = 50.0;

/// Scrolling back SCROLL_TURNS turns, measured in the page.
#[derive(Clone, Copy, Default)]
struct Scroll {
    ms: f64,
    frames: u64,
    gap_p50: f64,
    gap_p99: f64,
    gap_max: f64,
    long_frames: u64,
    heap_mb: f64,
}

struct Sample {
    open: Duration,
    entries: u64,
    heap_mb: f64,
    click: Duration,
    /// The large session only.
    scroll: Option<Scroll>,
}

/// Holds the transcript at its top each frame until the oldest question shown is at most
/// `arguments[0]`; the result lands in `window.__scroll`.
const SCROLL_SCRIPT: &str = r#"
const target = arguments[0];
const log = document.getElementById('log');
const R = (window.__scroll = { gaps: [], done: false, ms: 0 });
const t0 = performance.now();
let last = t0;
function step(now) {
  R.gaps.push(now - last);
  last = now;
  const first = document.querySelector('#entries .msg.user .text');
  const n = first ? parseInt(first.textContent.replace('Question ', ''), 10) : NaN;
  if (n <= target) {
    R.ms = now - t0;
    R.done = true;
    return;
  }
  if (log.scrollTop > 0) log.scrollTop = 0;
  requestAnimationFrame(step);
}
requestAnimationFrame(step);
"#;

fn main() -> ExitCode {
    let tmux = TmuxServer::new();
    let mut daemon: TestDaemon<Cohost> = TestDaemon::start(&tmux, &[]);
    let mut sessions = Vec::new();
    for turns in SIZES {
        daemon.stop();
        let long = long_session(daemon.home(), turns, &format!("cs_bench{turns:011}"));
        let mut bytes = Vec::new();
        for line in &long.lines {
            cohost::core::log_line::encode(line, &mut bytes);
        }
        long.append(&bytes);
        daemon.start_again();
        sessions.push((turns, long.session.clone(), long.events));
    }
    let mut medians = Vec::new();
    for (turns, session, events) in &sessions {
        let mut samples = Vec::new();
        for _ in 0..RUNS {
            samples.push(sample(&daemon, session, *turns, *turns > SCROLL_TURNS));
        }
        let median = |f: &dyn Fn(&Sample) -> f64| {
            let mut v: Vec<f64> = samples.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let open = median(&|s| s.open.as_secs_f64() * 1000.0);
        let click = median(&|s| s.click.as_secs_f64() * 1000.0);
        let heap = median(&|s| s.heap_mb);
        println!(
            "{events:>7} events: open {open:7.0} ms · {} entries in the DOM · JS heap {heap:.1} MB · toggle {click:6.0} ms",
            samples[0].entries,
        );
        if samples[0].scroll.is_some() {
            let of = |f: fn(&Scroll) -> f64| median(&|s| s.scroll.map_or(0.0, |x| f(&x)));
            println!(
                "{:>7} events scrolled back: {:7.0} ms · {:.0} frames · frame gap p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms · {:.0} frames over {LONG_FRAME_MS} ms · JS heap then {:.1} MB",
                SCROLL_TURNS * 5,
                of(|x| x.ms),
                of(|x| x.frames as f64),
                of(|x| x.gap_p50),
                of(|x| x.gap_p99),
                of(|x| x.gap_max),
                of(|x| x.long_frames as f64),
                of(|x| x.heap_mb),
            );
        }
        medians.push((open, heap, click));
    }
    let open_ratio = medians[1].0 / medians[0].0;
    let heap_ratio = medians[1].1 / medians[0].1;
    let click_ratio = medians[1].2 / medians[0].2;
    println!(
        "ratio 100,000 / 1,000 events: open {open_ratio:.2}× (target ≤ {TARGET_OPEN_RATIO}×), JS heap {heap_ratio:.2}× (target ≤ {TARGET_HEAP_RATIO}×), toggle {click_ratio:.2}× (target ≤ {TARGET_CLICK_RATIO}×)"
    );
    if open_ratio > TARGET_OPEN_RATIO
        || heap_ratio > TARGET_HEAP_RATIO
        || click_ratio > TARGET_CLICK_RATIO
    {
        eprintln!("web bench: FAILED (a ratio is over its target)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn sample(daemon: &TestDaemon<Cohost>, session: &str, turns: usize, scroll: bool) -> Sample {
    let b = Browser::start();
    b.set_viewport(1440, 900);
    let url = format!(
        "http://127.0.0.1:{}/#token={}&session={session}",
        daemon.port(),
        daemon.token()
    );
    let last = format!("Answer {}", turns - 1);
    let t0 = Instant::now();
    b.goto(&url);
    b.wait_text("#entries", &last, WAIT);
    let open = t0.elapsed();
    let entries = b
        .exec(
            "return document.getElementById('entries').childElementCount;",
            vec![],
        )
        .as_u64()
        .unwrap_or(0);
    let heap_mb = || {
        b.exec(
            "return performance.memory ? performance.memory.usedJSHeapSize : 0;",
            vec![],
        )
        .as_f64()
        .unwrap_or(0.0)
            / 1e6
    };
    let heap = heap_mb();
    let t1 = Instant::now();
    b.click("#showBook");
    b.wait_text("#entries", "Session closed", WAIT);
    let click = t1.elapsed();
    b.click("#showBook");
    let scroll = scroll.then(|| {
        b.exec(SCROLL_SCRIPT, vec![serde_json::json!(turns - SCROLL_TURNS)]);
        let result = b.wait_for("the question 10,000 events back", WAIT, || {
            let r = b.exec(
                "return window.__scroll.done ? window.__scroll : null;",
                vec![],
            );
            (!r.is_null()).then_some(r)
        });
        let mut gaps: Vec<f64> = result["gaps"]
            .as_array()
            .map(|v| v.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default();
        // The first gap is from the script's start to the first frame, not between frames.
        if !gaps.is_empty() {
            gaps.remove(0);
        }
        gaps.sort_by(f64::total_cmp);
        let at = |p: f64| {
            gaps.get(((gaps.len() as f64 * p) as usize).min(gaps.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        Scroll {
            ms: result["ms"].as_f64().unwrap_or(0.0),
            frames: gaps.len() as u64,
            gap_p50: at(0.5),
            gap_p99: at(0.99),
            gap_max: gaps.last().copied().unwrap_or(0.0),
            long_frames: gaps.iter().filter(|g| **g > LONG_FRAME_MS).count() as u64,
            heap_mb: heap_mb(),
        }
    });
    Sample {
        open,
        entries,
        heap_mb: heap,
        click,
        scroll,
    }
}
