//! A co-driving pane as the suites watch it (codex's TUI, OpenCode's `opencode attach`): its
//! screen, waited on until it shows what a test expects ([`wait_screen_until`],
//! [`wait_screen`]), and the journal its runner writes (`runner.jsonl`: [`runner_journal`],
//! the TUI's starts in [`started_pids`]).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Binaries;
use super::daemon::TestDaemon;
use super::tmux::TmuxServer;

/// What the pane shows now.
pub fn screen(tmux: &TmuxServer, pane: &str) -> String {
    tmux.run(&["capture-pane", "-p", "-t", pane])
}

/// Waits (at most `timeout`) until the pane's screen is one `pred` accepts (`what` says what
/// it waits for) and returns it; fails with the screen and the daemon's stderr.
#[track_caller]
pub fn wait_screen_until<B: Binaries>(
    daemon: &TestDaemon<B>,
    tmux: &TmuxServer,
    pane: &str,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let screen = screen(tmux, pane);
        if pred(&screen) {
            return screen;
        }
        if Instant::now() >= deadline {
            daemon.fail(&format!(
                "the TUI in pane {pane} never showed {what} within {timeout:?}; screen:\n{screen}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`wait_screen_until`] the pane shows `needle`.
#[track_caller]
pub fn wait_screen<B: Binaries>(
    daemon: &TestDaemon<B>,
    tmux: &TmuxServer,
    pane: &str,
    timeout: Duration,
    needle: &str,
) -> String {
    wait_screen_until(daemon, tmux, pane, timeout, &format!("{needle:?}"), |s| {
        s.contains(needle)
    })
}

/// The lines of the `runner.jsonl` of session `id`'s pane (`$COHOST_HOME/RUNTIME/sessions/ID/`),
/// none before the runner wrote any.
pub fn runner_journal<B: Binaries>(daemon: &TestDaemon<B>, runtime: &str, id: &str) -> Vec<Value> {
    let path = daemon
        .home()
        .join(runtime)
        .join("sessions")
        .join(id)
        .join("runner.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The pids the runner started the TUI with (its `started` lines), in order.
pub fn started_pids<B: Binaries>(daemon: &TestDaemon<B>, runtime: &str, id: &str) -> Vec<u32> {
    runner_journal(daemon, runtime, id)
        .iter()
        .filter(|e| e["event"] == "started")
        .map(|e| e["pid"].as_u64().unwrap() as u32)
        .collect()
}
