//! The claude-code watcher against the real Claude Code TUI (the pinned releases, through the
//! version matrix), run in panes of a private tmux server in a private `HOME`, talking to the
//! scripted [`MockMessages`]. The daemon runs with only `--watchers claude-code`, its `HOME`
//! the TUI's, and nothing else tells it about the agent: every status comes from the files
//! Claude writes (`~/.claude/sessions/<pid>.json`, the transcript).
//!
//! Each test owns its mock, tmux server, `HOME` and daemon, so they run in parallel.

use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::watch::common::{
    STATUS_WAIT, assert_no_repeats, daemon_watching, explain, headless_argv, in_order,
    instance_events, instances, rules, statuses, wait_caught_up, wait_instance,
};
use crate::support::claude_env::ClaudeEnv;
use crate::support::claude_panes::{ClaudePanes, Tui};
use crate::support::mock_messages::{MockMessages, Step};
use crate::support::{TestDaemon, temp_dir};

const AGENT: &str = "claude-code";
const WAIT: Duration = Duration::from_secs(30);

/// A private HOME, tmux server and mock for claude TUIs.
struct Rig {
    claude: ClaudePanes,
    _work: tempfile::TempDir,
}

cohost_testkit::rig_of_claude_panes!(Rig);

impl Rig {
    fn new() -> Rig {
        let mock = MockMessages::start();
        let work = temp_dir("cohost-watch-claude-");
        let env = ClaudeEnv::new(&mock.base_url(), &work.path().join("ws"));
        Rig {
            claude: ClaudePanes::new(env, mock, WAIT),
            _work: work,
        }
    }

    /// Runs `claude ARGS…` the way a script does, from a shell in a new pane of tmux session
    /// `session`; the shell then prints `headless-exit=<status>` and stays, so the pane does.
    fn start_headless(&mut self, session: &str, args: &[&str]) -> Tui {
        let argv = headless_argv(&self.env.claude_bin(), args);
        self.launch(session, &argv)
    }

    /// Presses `key` in a dialog once it has been up for a second (2.1.332 ignores a key sent
    /// the moment its dialog appears).
    fn answer_dialog(&self, tui: &Tui, key: &str) {
        thread::sleep(Duration::from_secs(1));
        self.keys(tui, &[key]);
    }
}

fn daemon(rig: &Rig) -> TestDaemon {
    daemon_watching(&rig.tmux, AGENT, rig.env.home(), &[])
}

fn status_is(status: &'static str) -> impl Fn(&Value) -> bool {
    move |instance| instance["status"] == status
}

fn touch_step() -> Step {
    Step::tool_use(
        "Bash",
        json!({ "command": "touch made.txt", "description": "Create made.txt" }),
    )
}

#[test]
fn watch_claude_tool_turn_runs_then_runs_a_tool_then_is_done() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    // The idle TUI is seen at start-up (its session file, its live pid), placed in its pane.
    let (session, idle) = wait_instance(&daemon, AGENT, "the idle claude", status_is("idle"));
    assert_eq!(session, "work");
    assert_eq!(idle["paneId"], tui.pane);
    assert_eq!(idle["source"], "watcher:claude-code");
    assert_eq!(idle["liveness"], "alive");

    rig.mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "echo hi", "description": "Print hi" }),
    ));
    rig.mock.push(Step::text("Done.").when_tool_result());
    rig.submit(&tui, "Run echo hi please");
    let (_, done) = wait_instance(&daemon, AGENT, "the finished turn", |i| {
        i["status"] == "done" && i["lastUserPrompt"] == "Run echo hi please"
    });
    let key = done["key"].as_str().expect("key").to_owned();
    let events = instance_events(&daemon, &key);
    let seen = statuses(&events);
    assert!(
        in_order(&seen, &["idle", "running", "tool-running", "done"]),
        "statuses in order: {seen:?}"
    );
    assert_no_repeats(&events);
    // `cohost state` shows the source; `cohost explain` the evidence.
    let state = daemon.cli_ok(&["state"]);
    assert!(state.contains("watcher:claude-code"), "{state}");
    let explained = explain(&daemon, "work", &key);
    assert_eq!(explained["source"], "watcher:claude-code");
    assert_eq!(explained["watcher"]["placement"], "pane");
    let rules = rules(&explained);
    assert!(
        rules
            .iter()
            .any(|r| r.contains("system/turn_duration → done")),
        "{rules:#?}"
    );
    assert!(
        explained["watcher"]["files"]
            .as_array()
            .is_some_and(|files| files
                .iter()
                .any(|f| f.as_str().is_some_and(|f| f.ends_with(".jsonl")))),
        "{explained:#}"
    );
    let text = daemon.cli_ok(&["explain", "work", AGENT]);
    assert!(text.contains("turn_duration"), "{text}");
    assert!(text.contains("@"), "offsets are shown: {text}");
}

#[test]
fn watch_claude_approval_left_open_stays_waiting() {
    let mut rig = Rig::new();
    let daemon = {
        let tui = rig.start("work");
        let daemon = daemon(&rig);
        rig.mock.push(touch_step());
        rig.mock.push(Step::text("Made it.").when_tool_result());
        rig.submit(&tui, "Touch a file please");
        daemon
    };
    let (_, waiting) = wait_instance(&daemon, AGENT, "waiting", status_is("waiting"));
    let key = waiting["key"].as_str().expect("key").to_owned();
    let head = daemon.head();
    // Thirty seconds of silence: nobody answers, nothing is written. Still waiting, and the
    // watcher said nothing else (no stale guess).
    thread::sleep(Duration::from_secs(30));
    let (_, still) = wait_instance(&daemon, AGENT, "still waiting", |_| true);
    assert_eq!(still["status"], "waiting", "{still:#}");
    let later: Vec<Value> = daemon
        .events_after(head)
        .into_iter()
        .filter(|e| e["data"]["threadId"] == still["threadId"] || e["data"]["key"] == key)
        .collect();
    assert!(
        later
            .iter()
            .all(|e| e["type"] == "agent.updated" && e["data"]["status"] == "waiting"),
        "nothing but waiting after 30 s of silence (2.1.197's title may still land): {later:#?}"
    );
    let explained = explain(&daemon, &waiting_session(&daemon), &key);
    assert!(
        rules(&explained)
            .iter()
            .any(|r| r.contains("waiting (permission prompt)")),
        "{explained:#}"
    );
}

fn waiting_session(daemon: &TestDaemon) -> String {
    instances(daemon, AGENT)[0].0.clone()
}

#[test]
fn watch_claude_interrupted_turn() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    rig.submit(&tui, "Write a long story");
    wait_instance(&daemon, AGENT, "running", status_is("running"));
    rig.wait(&tui, "the streamed text", || {
        rig.screen(&tui).contains("Once upon a time")
    });
    rig.keys(&tui, &["Escape"]);
    let (_, interrupted) = wait_instance(&daemon, AGENT, "interrupted", status_is("interrupted"));
    assert_eq!(interrupted["lastUserPrompt"], "Write a long story");
}

#[test]
fn watch_claude_failed_turn() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    // Every main request fails (2.1.332 sends the turn's request again after a first 400):
    // Claude ends the turn with an API error.
    rig.mock
        .set_default(Step::http_status(400, "mock failure: invalid request"));
    rig.submit(&tui, "Fail please");
    let (_, failed) = wait_instance(&daemon, AGENT, "error", status_is("error"));
    let key = failed["key"].as_str().expect("key").to_owned();
    let explained = explain(&daemon, "work", &key);
    assert!(
        rules(&explained)
            .iter()
            .any(|r| r.contains("isApiErrorMessage → error")),
        "{explained:#}"
    );
}

#[test]
fn watch_claude_exit_ends_the_instance_without_stale() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock.push(Step::text("Hello."));
    rig.submit(&tui, "Say hello");
    let (_, done) = wait_instance(&daemon, AGENT, "done", status_is("done"));
    let key = done["key"].as_str().expect("key").to_owned();
    // Ctrl-C twice exits the TUI: it removes its session file.
    rig.keys(&tui, &["C-c"]);
    thread::sleep(Duration::from_millis(300));
    rig.keys(&tui, &["C-c"]);
    let (_, ended) = wait_instance(&daemon, AGENT, "exited", |i| i["liveness"] == "exited");
    assert_eq!(
        ended["status"], "done",
        "an exit is not a stale guess: {ended:#}"
    );
    let seen = statuses(&instance_events(&daemon, &key));
    assert!(!seen.iter().any(|s| s == "stale"), "{seen:?}");
    let explained = explain(&daemon, "work", &key);
    assert!(
        rules(&explained)
            .iter()
            .any(|r| r.contains("removed (the TUI exited)") || r.contains("exited (pidfd)")),
        "{explained:#}"
    );
}

/// `claude -p` started from a shell in a pane, as scripts run it: its one turn ends `done` —
/// the transcript's last record is the answer and the process exits, with no `turn_duration`
/// line or Stop to say so — and never `stale`, whichever of the two the daemon sees first.
#[test]
fn watch_claude_print_mode_run_in_a_pane_ends_done() {
    let mut rig = Rig::new();
    let daemon = daemon(&rig);
    rig.mock.push(Step::text("Headless hello."));
    let run = rig.start_headless("work", &["-p", "Say hello from a script"]);
    rig.wait(&run, "the run's answer and exit", || {
        let screen = rig.screen(&run);
        screen.contains("Headless hello.") && screen.contains("headless-exit=0")
    });
    // Placed in its pane: found through the shell that started it, even after it exited.
    let (session, done) = wait_instance(&daemon, AGENT, "the run done, exited, in its pane", |i| {
        i["status"] == "done" && i["liveness"] == "exited" && i["paneId"] == run.pane.as_str()
    });
    assert_eq!(session, "work", "{done:#}");
    assert_eq!(
        done["lastUserPrompt"], "Say hello from a script",
        "{done:#}"
    );
    let key = done["key"].as_str().expect("key").to_owned();
    let seen = statuses(&instance_events(&daemon, &key));
    let explained = explain(&daemon, "work", &key);
    assert!(
        !seen.iter().any(|s| s == "stale"),
        "{seen:?}\n{explained:#}"
    );
    // A run this short may be read whole after it exited: its prompt and answer then say `done`
    // at once, with no `running` in between.
    assert_eq!(
        seen.last().map(String::as_str),
        Some("done"),
        "{seen:?}\n{explained:#}"
    );
}

#[test]
fn watch_claude_second_session_in_another_pane_is_a_second_instance() {
    let mut rig = Rig::new();
    let first = rig.start("one");
    let second = rig.start("two");
    let daemon = daemon(&rig);
    let both = daemon.wait_for("two instances", STATUS_WAIT, |daemon| {
        let found = instances(daemon, AGENT);
        (found.len() == 2).then_some(found)
    });
    let mut placed: Vec<(String, String)> = both
        .iter()
        .map(|(session, i)| {
            (
                session.clone(),
                i["paneId"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    placed.sort();
    assert_eq!(
        placed,
        vec![
            ("one".to_owned(), first.pane.clone()),
            ("two".to_owned(), second.pane.clone())
        ]
    );
    // A turn in the second one changes only the second instance.
    rig.mock.push(Step::text("Second."));
    rig.submit(&second, "Only the second");
    let deadline = Instant::now() + STATUS_WAIT;
    loop {
        let found = instances(&daemon, AGENT);
        let two = found.iter().find(|(s, _)| s == "two");
        let one = found.iter().find(|(s, _)| s == "one");
        if two.is_some_and(|t| t.1["status"] == "done")
            && one.is_some_and(|o| o.1["status"] == "idle")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second done, the first idle: {found:#?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    daemon.wait_for("the second done", STATUS_WAIT, |daemon| {
        let found = instances(daemon, AGENT);
        let two = found.iter().find(|(s, _)| s == "two")?;
        let one = found.iter().find(|(s, _)| s == "one")?;
        (two.1["status"] == "done" && one.1["status"] == "idle").then_some(())
    });
}

#[test]
fn watch_claude_daemon_restart_mid_turn_loses_and_repeats_nothing() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let mut daemon = daemon(&rig);
    rig.mock.push(touch_step());
    rig.mock.push(Step::text("Made it.").when_tool_result());
    rig.submit(&tui, "Touch a file please");
    let (_, waiting) = wait_instance(&daemon, AGENT, "waiting", status_is("waiting"));
    let key = waiting["key"].as_str().expect("key").to_owned();
    // Everything the watcher learns of this turn lands before counting: its process (alive, in
    // its pane), the prompt, and the title (2.1.197 writes one; 2.1.332 none).
    let titled =
        crate::support::pinned_version(&cohost::peers::CLAUDE) == cohost::peers::CLAUDE.oldest;
    wait_instance(&daemon, AGENT, "alive in its pane, titled", |i| {
        i["liveness"] == "alive"
            && i["paneId"].is_string()
            && i["lastUserPrompt"] == "Touch a file please"
            && (!titled || i["threadName"].is_string())
    });
    let before = instance_events(&daemon, &key);
    // Restart while the approval is open: the status survives, nothing is emitted again.
    daemon.restart();
    let (_, after) = wait_instance(&daemon, AGENT, "waiting after the restart", |_| true);
    assert_eq!(after["status"], "waiting", "{after:#}");
    // Caught up, then a quiet window: a re-emitted update would be in it.
    wait_caught_up(&daemon);
    thread::sleep(Duration::from_secs(2));
    let after_restart = instance_events(&daemon, &key);
    assert_eq!(
        after_restart.len(),
        before.len(),
        "a restart emits nothing that did not change: {:#?}",
        &after_restart[before.len().min(after_restart.len())..]
    );
    // Stop the daemon, approve while it is down: the turn finishes unseen.
    daemon.stop();
    rig.answer_dialog(&tui, "Enter");
    rig.wait(&tui, "the turn's end on disk", || {
        rig.status_of(&tui).as_deref() == Some("idle")
            && rig.env.workdir().join("made.txt").exists()
    });
    thread::sleep(Duration::from_secs(2));
    daemon.start_again();
    // What happened while it was down is read from the saved offsets: the final status.
    let (_, done) = wait_instance(&daemon, AGENT, "done after the restart", status_is("done"));
    assert_eq!(done["lastUserPrompt"], "Touch a file please");
    let events = instance_events(&daemon, &key);
    assert_no_repeats(&events);
    let seen = statuses(&events);
    // `busy` may be rewritten to `waiting` before the watcher reads the session file (a
    // snapshot keeps only its last state), so `running` is not required between them.
    assert!(in_order(&seen, &["idle", "waiting", "done"]), "{seen:?}");
}

#[test]
fn watch_claude_hosted_session_shows_once() {
    // The claude-host fixture's daemon runs in the TUI's HOME, so the watcher sees the hosted
    // session's own files: its instance must not show beside the hosted one.
    let fx =
        crate::support::claude_host::ClaudeFixture::start_with(&[], &[("COHOST_WATCHERS", AGENT)]);
    let id = fx.create(json!({}));
    fx.mock.push(Step::text("Hosted hello."));
    let (status, answer) = fx.send(&id, "Hello from the host");
    assert!(status < 300, "send answered {status}: {answer}");
    fx.wait_turns_completed(&id, 1);
    // The watcher has read the session's files by now (it follows them as they are written).
    fx.daemon
        .wait_for("the watcher saw the hosted thread", STATUS_WAIT, |daemon| {
            let stats = daemon.get("/api/watch").json();
            (stats["instances"].as_u64() >= Some(1)).then_some(())
        });
    thread::sleep(Duration::from_secs(1));
    let shown = instances(&fx.daemon, AGENT);
    assert_eq!(
        shown.len(),
        1,
        "one instance, not one per source: {shown:#?}"
    );
    assert_eq!(shown[0].1["source"], "hosted", "{shown:#?}");
    let watched: Vec<Value> = fx
        .daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["type"] == "agent.updated" && e["data"]["source"] == "watcher:claude-code")
        .collect();
    assert!(
        watched.is_empty(),
        "the watcher never reported it: {watched:#?}"
    );
}
