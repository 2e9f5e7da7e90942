//! The web page on long sessions: `cargo bench --bench web`.
//!
//! A closed codex session of 1,000 and of 10,000 events (200 and 2,000 turns: a prompt, a
//! command, a Markdown answer, the turn's start and end) is appended to the log of a stopped
//! release daemon; the daemon starts again and replays it. Then, in Debian's headless Chromium
//! (the test kit's `Browser`), for each size, three times, a fresh page:
//!
//! 1. open: from `goto` to the session's last answer shown (the page streams every event of the
//!    session from seq 0, renders only the last window of entries);
//! 2. the entries in the DOM and the page's JS heap;
//! 3. a click on "Show tasks and control changes" (the whole window rendered again) to its result
//!    on screen.
//!
//! Reported as medians and as the ratio 10,000 / 1,000 measured in the same run: a page that
//! renders every entry grows with the session; a windowed one should not (target ≤ 3× for the
//! open, ≤ 2× for the click). See docs/benchmarks.md "The web page on long sessions".

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cohost_testkit::browser::Browser;
use cohost_testkit::web::long_session;
use cohost_testkit::{Binaries, TestDaemon, TmuxServer};

struct Cohost;
impl Binaries for Cohost {
    const COHOST: &'static str = env!("CARGO_BIN_EXE_cohost");
}

const SIZES: [usize; 2] = [200, 2_000];
const RUNS: usize = 3;
const TARGET_OPEN_RATIO: f64 = 3.0;
const TARGET_CLICK_RATIO: f64 = 2.0;
const WAIT: Duration = Duration::from_secs(120);

struct Sample {
    open: Duration,
    entries: u64,
    heap_mb: f64,
    click: Duration,
}

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
            samples.push(sample(&daemon, session, *turns));
        }
        let median = |f: &dyn Fn(&Sample) -> f64| {
            let mut v: Vec<f64> = samples.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let open = median(&|s| s.open.as_secs_f64() * 1000.0);
        let click = median(&|s| s.click.as_secs_f64() * 1000.0);
        println!(
            "{events:>6} events: open {open:7.0} ms · {} entries in the DOM · JS heap {:.1} MB · toggle {click:6.0} ms",
            samples[0].entries,
            median(&|s| s.heap_mb)
        );
        medians.push((open, click));
    }
    let open_ratio = medians[1].0 / medians[0].0;
    let click_ratio = medians[1].1 / medians[0].1;
    println!(
        "ratio 10,000 / 1,000 events: open {open_ratio:.2}× (target ≤ {TARGET_OPEN_RATIO}×), toggle {click_ratio:.2}× (target ≤ {TARGET_CLICK_RATIO}×)"
    );
    if open_ratio > TARGET_OPEN_RATIO || click_ratio > TARGET_CLICK_RATIO {
        eprintln!("web bench: FAILED (a ratio is over its target)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn sample(daemon: &TestDaemon<Cohost>, session: &str, turns: usize) -> Sample {
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
    let heap = b
        .exec(
            "return performance.memory ? performance.memory.usedJSHeapSize : 0;",
            vec![],
        )
        .as_f64()
        .unwrap_or(0.0);
    let t1 = Instant::now();
    b.click("#showBook");
    b.wait_text("#entries", "Session closed", WAIT);
    let click = t1.elapsed();
    Sample {
        open,
        entries,
        heap_mb: heap / 1e6,
        click,
    }
}
