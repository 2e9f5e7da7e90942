//! The codex watcher against the real codex TUI (the pinned releases, through the version
//! matrix), run in panes of a private tmux server with a private `HOME` and `CODEX_HOME`,
//! talking to the scripted [`MockResponses`]. The daemon runs with only `--watchers codex` and
//! learns everything from the rollouts and `session_index.jsonl`.
//!
//! Each test owns its mock, tmux server, homes and daemon, so they run in parallel.

use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::watch::common::{
    assert_no_repeats, daemon_watching, explain, headless_argv, in_order, instance_events, rules,
    statuses, wait_caught_up, wait_instance, wait_instances,
};
use crate::support::claude_env::is_running;
use crate::support::codex_home::{MOCK_API_KEY, MOCK_API_KEY_ENV, codex_bin, write_codex_home};
use crate::support::mock_responses::{MockResponses, Step};
use crate::support::tmux::TmuxServer;
use crate::support::{TestDaemon, temp_dir};

const AGENT: &str = "codex";
const WAIT: Duration = Duration::from_secs(30);

struct Tui {
    pane: String,
    pid: u32,
}

/// A private HOME, CODEX_HOME, tmux server and mock for codex TUIs.
struct Rig {
    tmux: TmuxServer,
    mock: MockResponses,
    home: PathBuf,
    codex_home: PathBuf,
    work: PathBuf,
    tuis: Vec<u32>,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn new() -> Rig {
        let mock = MockResponses::start();
        let dir = temp_dir("cohost-watch-codex-");
        let home = dir.path().join("home");
        let codex_home = home.join(".codex");
        let work = dir.path().join("ws");
        std::fs::create_dir_all(&work).expect("mkdir ws");
        let work = work.canonicalize().expect("canonical ws");
        write_codex_home(&codex_home, &mock.base_url(), &work);
        Rig {
            tmux: TmuxServer::new(),
            mock,
            home,
            codex_home,
            work,
            tuis: Vec::new(),
            _dir: dir,
        }
    }

    fn env(&self) -> Vec<(String, String)> {
        [
            ("HOME", self.home.to_string_lossy().into_owned()),
            ("CODEX_HOME", self.codex_home.to_string_lossy().into_owned()),
            (MOCK_API_KEY_ENV, MOCK_API_KEY.to_owned()),
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("TERM", "xterm-256color".to_owned()),
            ("LANG", "C.UTF-8".to_owned()),
            ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// Starts the codex TUI as tmux session `session` and waits for its prompt.
    fn start(&mut self, session: &str) -> Tui {
        let argv = vec![codex_bin().to_string_lossy().into_owned()];
        let (pane, pid) = self.tmux.launch(session, &self.work, &self.env(), &argv);
        self.tuis.push(pid);
        let tui = Tui { pane, pid };
        self.wait(&tui, "the codex prompt", || {
            self.screen(&tui).contains("Ask Codex to do anything")
        });
        thread::sleep(Duration::from_millis(500));
        tui
    }

    /// Runs `codex ARGS…` the way a script does, from a shell in a new pane of tmux session
    /// `session`; the shell then prints `headless-exit=<status>` and stays, so the pane does.
    fn start_headless(&mut self, session: &str, args: &[&str]) -> Tui {
        let argv = headless_argv(&codex_bin(), args);
        let (pane, pid) = self.tmux.launch(session, &self.work, &self.env(), &argv);
        self.tuis.push(pid);
        Tui { pane, pid }
    }

    fn screen(&self, tui: &Tui) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", &tui.pane])
    }

    fn wait(&self, tui: &Tui, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "timed out after {WAIT:?} waiting for {what}\n--- screen ---\n{}",
                self.screen(tui)
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, tui: &Tui, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", tui.pane.as_str()];
        args.extend_from_slice(keys);
        self.tmux.run(&args);
    }

    fn submit(&self, tui: &Tui, text: &str) {
        self.tmux.run(&["send-keys", "-t", &tui.pane, "-l", text]);
        self.wait(tui, "the typed prompt", || self.screen(tui).contains(text));
        thread::sleep(Duration::from_millis(200));
        self.keys(tui, &["Enter"]);
    }

    /// The app-server daemons codex 0.169+ leaves behind (`$CODEX_HOME/app-server-daemon`).
    fn kill_daemons(&self) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let needle = self.codex_home.to_string_lossy().into_owned();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for pid in &self.tuis {
            if is_running(*pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _ = self.tmux.command(&["kill-server"]);
        self.kill_daemons();
    }
}

fn daemon(rig: &Rig) -> TestDaemon {
    let codex_home = rig.codex_home.to_string_lossy().into_owned();
    daemon_watching(&rig.tmux, AGENT, &rig.home, &[("CODEX_HOME", &codex_home)])
}

fn status_is(status: &'static str) -> impl Fn(&Value) -> bool {
    move |instance| instance["status"] == status
}

fn escalated_touch() -> Step {
    Step::exec_with(json!({
        "cmd": "touch made_by_codex.txt",
        "sandbox_permissions": "require_escalated",
        "justification": "Need to create a file"
    }))
}

#[test]
fn watch_codex_tool_turn_runs_then_runs_a_tool_then_is_done() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock.push(Step::exec("echo hi"));
    rig.mock
        .push(Step::text("The command ran. Done.").when_last_input("function_call_output"));
    rig.submit(&tui, "Run echo hi please");
    let (session, done) = wait_instance(&daemon, AGENT, "the finished turn", |i| {
        i["status"] == "done" && i["lastUserPrompt"] == "Run echo hi please"
    });
    assert_eq!(session, "work", "{done:#}");
    assert_eq!(
        done["paneId"], tui.pane,
        "placed by the TUI's process: {done:#}"
    );
    assert_eq!(done["source"], "watcher:codex");
    assert_eq!(done["liveness"], "alive");
    let key = done["key"].as_str().expect("key").to_owned();
    let events = instance_events(&daemon, &key);
    let seen = statuses(&events);
    assert!(
        in_order(&seen, &["running", "tool-running", "done"]),
        "statuses in order: {seen:?}"
    );
    assert_no_repeats(&events);
    let explained = explain(&daemon, "work", &key);
    let rules = rules(&explained);
    assert!(
        rules
            .iter()
            .any(|r| r.contains("event_msg/task_complete → done")),
        "{rules:#?}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r.contains("runs in the thread's cwd → alive")),
        "the TUI was found by its cwd (the rollout's writer is the shared app-server): {rules:#?}"
    );
    // The TUI names the thread (session_index.jsonl) after the first turn starts.
    wait_instance(&daemon, AGENT, "a title", |i| i["threadName"].is_string());
}

#[test]
fn watch_codex_approval_left_open_stays_waiting() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock.push(escalated_touch());
    rig.mock
        .push(Step::text("Made it.").when_last_input("function_call_output"));
    rig.submit(&tui, "Touch please");
    rig.wait(&tui, "the approval dialog", || {
        rig.screen(&tui).contains("touch made_by_codex.txt")
    });
    let (session, waiting) = wait_instance(&daemon, AGENT, "waiting", status_is("waiting"));
    let key = waiting["key"].as_str().expect("key").to_owned();
    let head = daemon.head();
    thread::sleep(Duration::from_secs(30));
    let (_, still) = wait_instance(&daemon, AGENT, "still waiting", |_| true);
    assert_eq!(still["status"], "waiting", "{still:#}");
    let later: Vec<Value> = daemon
        .events_after(head)
        .into_iter()
        .filter(|e| e["data"]["threadId"] == still["threadId"] || e["data"]["key"] == key)
        .filter(|e| e["data"]["status"] != "waiting")
        .collect();
    assert!(
        later.is_empty(),
        "no other status after 30 s of silence: {later:#?}"
    );
    let explained = explain(&daemon, &session, &key);
    assert!(
        rules(&explained)
            .iter()
            .any(|r| r.contains("no tool process")),
        "{explained:#}"
    );
    // Approving runs the command: the turn goes on and ends.
    rig.keys(&tui, &["y"]);
    wait_instance(&daemon, AGENT, "done after approval", status_is("done"));
}

#[test]
fn watch_codex_interrupted_turn() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock
        .push(Step::text("Once upon a time there was a long story").then_hang());
    rig.submit(&tui, "Write a long story");
    wait_instance(&daemon, AGENT, "running", status_is("running"));
    // The reply streams (the model now hangs): Escape interrupts it.
    rig.wait(&tui, "the streamed text", || {
        rig.screen(&tui).contains("Once upon a time")
    });
    rig.keys(&tui, &["Escape"]);
    let (_, interrupted) = wait_instance(&daemon, AGENT, "interrupted", status_is("interrupted"));
    assert_eq!(interrupted["lastUserPrompt"], "Write a long story");
}

#[test]
fn watch_codex_failed_turn() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock.push(Step::failed("server_error", "mock failure"));
    rig.submit(&tui, "Fail please");
    let (session, failed) = wait_instance(&daemon, AGENT, "error", status_is("error"));
    let key = failed["key"].as_str().expect("key").to_owned();
    let explained = explain(&daemon, &session, &key);
    assert!(
        rules(&explained)
            .iter()
            .any(|r| r.contains("task_complete with error → error")),
        "a failed turn is an error, not done: {explained:#}"
    );
}

#[test]
fn watch_codex_exit_ends_the_instance_without_stale() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let daemon = daemon(&rig);
    rig.mock.push(Step::text("Hello."));
    rig.submit(&tui, "Say hello");
    let (_, done) = wait_instance(&daemon, AGENT, "done", status_is("done"));
    let key = done["key"].as_str().expect("key").to_owned();
    // A second window keeps the tmux session (and server) after the TUI's pane goes: the
    // state lists only live tmux sessions, so with the server gone the instance could only be
    // seen exited if the watcher's exit won the race against tmux's session-closed hook (under
    // load it lost once: `instances: []`).
    rig.tmux.run(&["new-window", "-d", "-t", "work"]);
    rig.submit(&tui, "/quit");
    // The pane goes away with the TUI.
    let deadline = Instant::now() + WAIT;
    while is_running(tui.pid) {
        assert!(Instant::now() < deadline, "the TUI did not quit");
        thread::sleep(Duration::from_millis(50));
    }
    let (_, ended) = wait_instance(&daemon, AGENT, "exited", |i| i["liveness"] == "exited");
    assert_eq!(
        ended["status"], "done",
        "an exit is not a stale guess: {ended:#}"
    );
    let seen = statuses(&instance_events(&daemon, &key));
    assert!(!seen.iter().any(|s| s == "stale"), "{seen:?}");
}

/// `codex exec` started from a shell in a pane, as scripts run it: its turn ends `done` when
/// the run exits after its last record, and never `stale`.
#[test]
fn watch_codex_exec_run_in_a_pane_ends_done() {
    let mut rig = Rig::new();
    let daemon = daemon(&rig);
    rig.mock.push(Step::text("Exec answer."));
    let run = rig.start_headless(
        "work",
        &["exec", "--skip-git-repo-check", "Answer from a script"],
    );
    rig.wait(&run, "the run's exit", || {
        rig.screen(&run).contains("headless-exit=0")
    });
    // Placed in its pane: found through the shell that started it, even after it exited.
    let (session, done) = wait_instance(&daemon, AGENT, "the run done, exited, in its pane", |i| {
        i["status"] == "done" && i["liveness"] == "exited" && i["paneId"] == run.pane.as_str()
    });
    assert_eq!(session, "work", "{done:#}");
    let key = done["key"].as_str().expect("key").to_owned();
    let seen = statuses(&instance_events(&daemon, &key));
    assert!(!seen.iter().any(|s| s == "stale"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("done"), "{seen:?}");
}

#[test]
fn watch_codex_second_session_in_another_pane_is_a_second_instance() {
    two_tuis_in_one_directory_each_in_its_own_pane(false);
}

/// The younger TUI's thread comes first: no rule by start time may pair it with the older TUI.
#[test]
fn watch_codex_the_younger_tuis_thread_first_is_still_placed_in_its_pane() {
    two_tuis_in_one_directory_each_in_its_own_pane(true);
}

fn two_tuis_in_one_directory_each_in_its_own_pane(younger_first: bool) {
    let mut rig = Rig::new();
    let first = rig.start("one");
    let second = rig.start("two");
    let daemon = daemon(&rig);
    rig.mock
        .push(Step::text("First.").when_user_contains("first one"));
    rig.mock
        .push(Step::text("Second.").when_user_contains("second one"));
    if younger_first {
        rig.submit(&second, "The second one");
        rig.wait(&second, "the younger TUI's answer", || {
            rig.screen(&second).contains("Second.")
        });
        rig.submit(&first, "The first one");
    } else {
        rig.submit(&first, "The first one");
        rig.submit(&second, "The second one");
    }
    // Both TUIs run in one directory and share one app-server, which writes both rollouts: no
    // file names the TUI of a thread. The daemon tells them apart by the prompt each pane shows
    // (a thread is placed by its cwd until then): wait for each in its own pane's session.
    let want = vec![
        (
            "one".to_owned(),
            first.pane.clone(),
            "The first one".to_owned(),
        ),
        (
            "two".to_owned(),
            second.pane.clone(),
            "The second one".to_owned(),
        ),
    ];
    wait_instances(
        &daemon,
        AGENT,
        "two finished instances, each in its own pane",
        |found| {
            let mut placed: Vec<(String, String, String)> = found
                .iter()
                .filter(|(_, i)| i["status"] == "done")
                .map(|(s, i)| {
                    (
                        s.clone(),
                        i["paneId"].as_str().unwrap_or("").to_owned(),
                        i["lastUserPrompt"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            placed.sort();
            (found.len() == 2 && placed == want).then_some(())
        },
    );
}

#[test]
fn watch_codex_daemon_restart_mid_turn_loses_and_repeats_nothing() {
    let mut rig = Rig::new();
    let tui = rig.start("work");
    let mut daemon = daemon(&rig);
    rig.mock
        .push(Step::text("Once upon a time there was a long story").then_hang());
    rig.submit(&tui, "Write a long story");
    let (_, running) = wait_instance(&daemon, AGENT, "running", status_is("running"));
    let key = running["key"].as_str().expect("key").to_owned();
    // Everything the watcher learns of this turn lands before counting: its process (alive, in
    // its pane), the prompt, and the title (session_index.jsonl, written after the turn starts).
    wait_instance(&daemon, AGENT, "alive in its pane, titled", |i| {
        i["liveness"] == "alive"
            && i["paneId"].is_string()
            && i["lastUserPrompt"] == "Write a long story"
            && i["threadName"].is_string()
    });
    let before = instance_events(&daemon, &key);
    daemon.restart();
    let (_, after) = wait_instance(&daemon, AGENT, "running after the restart", |_| true);
    assert_eq!(after["status"], "running", "{after:#}");
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
    // Interrupt while the daemon is down: read from the saved offset at the next start.
    daemon.stop();
    rig.keys(&tui, &["Escape"]);
    thread::sleep(Duration::from_secs(2));
    daemon.start_again();
    wait_instance(
        &daemon,
        AGENT,
        "interrupted after the restart",
        status_is("interrupted"),
    );
    let events = instance_events(&daemon, &key);
    assert_no_repeats(&events);
    assert!(in_order(&statuses(&events), &["running", "interrupted"]));
}
