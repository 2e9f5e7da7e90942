//! End-to-end tests of the built `cohost-runner` binary: each test gives it a temp session dir
//! with a launch.json whose argv is `/bin/sh -c "…"`, drives it with signals as the daemon (or
//! the pane's terminal) would, and reads `runner.jsonl`. They must never leave a runner behind
//! (a guard kills it) and every wait has a timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUNNER: &str = env!("CARGO_BIN_EXE_cohost-runner");
const WAIT: Duration = Duration::from_secs(15);

/// A running cohost-runner, killed on drop if a test fails before stopping it.
struct Runner {
    child: Child,
    dir: PathBuf,
}

impl Drop for Runner {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Runner {
    fn start(dir: &Path) -> Runner {
        Self::start_with(dir, |_| {})
    }

    fn start_with(dir: &Path, configure: impl FnOnce(&mut Command)) -> Runner {
        let mut cmd = Command::new(RUNNER);
        cmd.arg(dir)
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("pane.out")).unwrap())
            .stderr(fs::File::create(dir.join("pane.err")).unwrap())
            // Its own process group, so a test can signal "the foreground group" like a tty does.
            .process_group(0);
        configure(&mut cmd);
        Runner {
            child: cmd.spawn().unwrap(),
            dir: dir.to_path_buf(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, name: &str) {
        send(name, &self.pid().to_string());
    }

    /// Signals the runner's whole process group (runner + child), as a typed Ctrl-C would.
    fn signal_group(&self, name: &str) {
        send(name, &format!("-{}", self.pid()));
    }

    fn events(&self) -> Vec<Value> {
        events(&self.dir)
    }

    /// Polls runner.jsonl until `done` holds.
    fn wait_for(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let events = self.events();
            if done(&events) {
                return events;
            }
            if start.elapsed() > WAIT {
                panic!(
                    "timed out waiting for {what}; runner.jsonl: {events:#?}; pane: {}",
                    fs::read_to_string(self.dir.join("pane.err")).unwrap_or_default()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < WAIT, "the runner did not exit");
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn stop(mut self) {
        self.signal("TERM");
        let status = self.wait_exit();
        assert_eq!(status.code(), Some(0), "runner exit status");
        let events = self.events();
        let last = events.last().unwrap();
        assert_eq!(last["event"], "stopped", "{events:#?}");
        assert_eq!(last["signal"], 15);
        assert_eq!(last["runnerPid"], self.pid());
    }
}

fn send(signal: &str, target: &str) {
    let status = Command::new("/bin/sh")
        .args(["-c", &format!("kill -s {signal} -- {target}")])
        .status()
        .unwrap();
    assert!(status.success(), "kill -s {signal} {target}");
}

fn events(dir: &Path) -> Vec<Value> {
    match fs::read_to_string(dir.join("runner.jsonl")) {
        Ok(text) => text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn count(events: &[Value], event: &str) -> usize {
    events.iter().filter(|e| e["event"] == event).count()
}

fn write_launch(dir: &Path, script: &str, extra: Value) {
    let mut launch = json!({
        "argv": ["/bin/sh", "-c", script],
        "cwd": dir,
        "env": {},
        "seedClaude": null,
    });
    for (k, v) in extra.as_object().unwrap() {
        launch[k] = v.clone();
    }
    fs::write(dir.join("launch.json"), launch.to_string()).unwrap();
}

fn wait_file(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(start.elapsed() < WAIT, "no {}", path.display());
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn started_and_exited_lines_carry_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(dir.path(), "exit 3", json!({}));
    let runner = Runner::start(dir.path());
    let events = runner.wait_for("exited", |e| count(e, "exited") == 1);
    assert_eq!(events.len(), 2, "{events:#?}");
    let (started, exited) = (&events[0], &events[1]);
    assert_eq!(started["event"], "started");
    assert_eq!(started["runnerPid"], runner.pid());
    assert_eq!(started["launch"], 1);
    let child = started["pid"].as_u64().unwrap();
    assert_ne!(child, u64::from(runner.pid()));
    assert!(started["at"].as_u64().unwrap() > 1_600_000_000_000);
    assert_eq!(
        exited,
        &json!({
            "event": "exited", "runnerPid": runner.pid(), "pid": child,
            "code": 3, "signal": null, "at": exited["at"], "launch": 1,
        })
    );
    assert!(exited["at"].as_u64().unwrap() >= started["at"].as_u64().unwrap());

    // Idle: the pane says how to relaunch (the id falls back to the session dir's name).
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let start = Instant::now();
    while !fs::read_to_string(dir.path().join("pane.out"))
        .unwrap()
        .contains(&format!("cohost relaunch {name}"))
    {
        assert!(start.elapsed() < WAIT, "no relaunch hint in the pane");
        thread::sleep(Duration::from_millis(20));
    }
    runner.stop();
}

#[test]
fn a_signal_death_is_reported_as_signal() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(dir.path(), "kill -s KILL $$", json!({}));
    let runner = Runner::start(dir.path());
    let events = runner.wait_for("exited", |e| count(e, "exited") == 1);
    let exited = events.last().unwrap();
    assert_eq!(exited["code"], Value::Null);
    assert_eq!(exited["signal"], 9);
    runner.stop();
}

#[test]
fn sigusr1_after_exit_relaunches_with_the_reread_launch() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(dir.path(), "exit 0", json!({}));
    let runner = Runner::start(dir.path());
    runner.wait_for("first exit", |e| count(e, "exited") == 1);
    // Idle now; a stray SIGINT (Ctrl-C in the idle pane) must not end the runner.
    runner.signal("INT");
    // The daemon rewrites launch.json (say with --resume) and asks for a relaunch.
    write_launch(
        dir.path(),
        "echo second-launch > marker; exit 5",
        json!({"env": {"COHOST_SESSION_ID": "sess-42"}}),
    );
    runner.signal("USR1");
    let events = runner.wait_for("second exit", |e| count(e, "exited") == 2);
    let tail: Vec<_> = events
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["launch"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        tail,
        [("started", 1), ("exited", 1), ("started", 2), ("exited", 2)]
    );
    assert_eq!(events[3]["code"], 5);
    assert_ne!(events[0]["pid"], events[2]["pid"]);
    assert_eq!(
        fs::read_to_string(dir.path().join("marker")).unwrap(),
        "second-launch\n"
    );
    let pane = fs::read_to_string(dir.path().join("pane.out")).unwrap();
    assert!(pane.contains("cohost relaunch sess-42"), "{pane:?}");
    runner.stop();
}

#[test]
fn sigusr1_while_running_relaunches_right_after_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(
        dir.path(),
        "touch running; while [ ! -f release ]; do sleep 0.02; done; exit 7",
        json!({}),
    );
    let runner = Runner::start(dir.path());
    runner.wait_for("started", |e| count(e, "started") == 1);
    wait_file_exists(&dir.path().join("running"));
    runner.signal("USR1");
    write_launch(dir.path(), "exit 9", json!({}));
    // Give the runner time to take the signal before the child exits.
    thread::sleep(Duration::from_millis(200));
    fs::write(dir.path().join("release"), "").unwrap();
    let events = runner.wait_for("second exit", |e| count(e, "exited") == 2);
    assert_eq!(events[1]["code"], 7);
    assert_eq!(events[1]["launch"], 1);
    assert_eq!(events[2]["event"], "started");
    assert_eq!(events[2]["launch"], 2);
    assert_eq!(events[3]["code"], 9);
    // And then it stays idle: no third launch without another SIGUSR1.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(runner.events().len(), 4);
    runner.stop();
}

fn wait_file_exists(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < WAIT, "no {}", path.display());
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_stops_an_idle_runner() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(dir.path(), "exit 0", json!({}));
    let runner = Runner::start(dir.path());
    runner.wait_for("exited", |e| count(e, "exited") == 1);
    runner.stop();
}

#[test]
fn sighup_while_running_is_forwarded_and_stops_the_runner() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(
        dir.path(),
        "trap 'exit 42' HUP; touch running; while true; do sleep 0.02; done",
        json!({}),
    );
    let mut runner = Runner::start(dir.path());
    runner.wait_for("started", |e| count(e, "started") == 1);
    wait_file_exists(&dir.path().join("running"));
    runner.signal("HUP");
    assert_eq!(runner.wait_exit().code(), Some(0));
    let events = runner.events();
    let kinds: Vec<_> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["started", "exited", "stopped"]);
    assert_eq!(events[1]["code"], 42);
    assert_eq!(events[2]["signal"], 1);
}

#[test]
fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(
        dir.path(),
        "trap '' TERM; touch running; while true; do sleep 0.05; done",
        json!({}),
    );
    let mut runner = Runner::start(dir.path());
    runner.wait_for("started", |e| count(e, "started") == 1);
    wait_file_exists(&dir.path().join("running"));
    let start = Instant::now();
    runner.signal("TERM");
    assert_eq!(runner.wait_exit().code(), Some(0));
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(9) && elapsed < Duration::from_secs(14),
        "{elapsed:?}"
    );
    let events = runner.events();
    assert_eq!(events[1]["event"], "exited");
    assert_eq!(events[1]["signal"], 9);
    assert_eq!(events[2]["event"], "stopped");
    assert_eq!(events[2]["signal"], 15);
}

#[test]
fn sigint_to_the_foreground_group_ends_the_child_not_the_runner() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(dir.path(), "touch running; exec sleep 30", json!({}));
    let mut runner = Runner::start(dir.path());
    runner.wait_for("started", |e| count(e, "started") == 1);
    wait_file_exists(&dir.path().join("running"));
    thread::sleep(Duration::from_millis(100));
    runner.signal_group("INT");
    let events = runner.wait_for("exited", |e| count(e, "exited") == 1);
    assert_eq!(events[1]["signal"], 2);
    thread::sleep(Duration::from_millis(200));
    assert!(runner.is_running(), "SIGINT must not end the runner");
    runner.stop();
}

#[test]
fn the_env_overlay_cwd_and_a_clean_signal_state_reach_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let out = dir.path().join("child.txt");
    let script = format!(
        "{{ echo \"FOO=$FOO\"; echo \"KEEP=$KEEP\"; echo \"GONE=${{GONE-unset}}\"; pwd; \
         grep -E '^Sig(Blk|Ign)' /proc/self/status; }} > '{}'",
        out.display()
    );
    write_launch(
        dir.path(),
        &script,
        json!({"cwd": work, "env": {"FOO": "bar baz", "GONE": null, "KEEP": "overridden"}}),
    );
    let runner = Runner::start_with(dir.path(), |cmd| {
        cmd.env("GONE", "1").env("KEEP", "runner");
    });
    runner.wait_for("exited", |e| count(e, "exited") == 1);
    let text = wait_file(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "FOO=bar baz");
    assert_eq!(lines[1], "KEEP=overridden");
    assert_eq!(lines[2], "GONE=unset");
    assert_eq!(Path::new(lines[3]), work.canonicalize().unwrap());
    // The runner blocks signals; its children must not inherit that, nor ignore any of the
    // standard signals 1-31. (glibc's posix_spawn leaves its internal real-time signals 32 and
    // 33 ignored in every spawned child, so only the low 31 bits are checked.)
    let mask = |line: &str, name: &str| {
        let hex = line.strip_prefix(&format!("{name}:\t")).unwrap();
        u64::from_str_radix(hex, 16).unwrap()
    };
    assert_eq!(mask(lines[4], "SigBlk"), 0, "{}", lines[4]);
    assert_eq!(mask(lines[5], "SigIgn") & 0x7fff_ffff, 0, "{}", lines[5]);
    runner.stop();
}

#[test]
fn a_child_that_is_not_a_shell_starts_with_no_signal_blocked() {
    // A shell unblocks signals itself, which hides an inherited mask: run grep directly.
    let dir = tempfile::tempdir().unwrap();
    let launch = json!({
        "argv": ["/bin/grep", "-E", "^SigBlk", "/proc/self/status"],
        "cwd": dir.path(),
    });
    fs::write(dir.path().join("launch.json"), launch.to_string()).unwrap();
    let runner = Runner::start(dir.path());
    runner.wait_for("exited", |e| count(e, "exited") == 1);
    let out = fs::read_to_string(dir.path().join("pane.out")).unwrap();
    let line = out
        .lines()
        .find(|l| l.starts_with("SigBlk:"))
        .unwrap_or_else(|| panic!("no SigBlk line in {out:?}"));
    assert_eq!(
        line, "SigBlk:\t0000000000000000",
        "the runner's mask leaked"
    );
    runner.stop();
}

#[test]
fn the_seed_merges_into_an_existing_claude_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    let real = dir.path().join("real-ws");
    fs::create_dir(&real).unwrap();
    let link = dir.path().join("ws-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let key = "sk-ant-mock-0000-ABCDEFGHIJKLMNOPQRST";
    let suffix = &key[key.len() - 20..];
    let existing = json!({
        "theme": "dark",
        "numStartups": 7,
        "hasCompletedOnboarding": false,
        "customApiKeyResponses": {"approved": ["older-key-suffix-xyz"], "rejected": [suffix]},
        "projects": {"/elsewhere": {"allowedTools": ["Bash(ls:*)"], "hasTrustDialogAccepted": true}},
        "oauthAccount": {"nested": {"deep": [1, 2, 3]}},
    });
    fs::write(home.join(".claude.json"), existing.to_string()).unwrap();
    // The child copies the config it sees at launch, proving the seed ran before it.
    let seen = dir.path().join("seen.json");
    write_launch(
        dir.path(),
        &format!("cat \"$HOME/.claude.json\" > '{}'", seen.display()),
        json!({
            "env": {"HOME": home},
            "seedClaude": {"home": home, "apiKey": key, "trustDirs": [link]},
        }),
    );
    let runner = Runner::start(dir.path());
    let events = runner.wait_for("exited", |e| count(e, "exited") == 1);
    assert_eq!(count(&events, "warning"), 0, "{events:#?}");
    let config: Value =
        serde_json::from_str(&fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    let realpath = real.canonicalize().unwrap().display().to_string();
    assert_eq!(
        config,
        json!({
            "theme": "dark",
            "numStartups": 7,
            "hasCompletedOnboarding": true,
            "customApiKeyResponses": {"approved": ["older-key-suffix-xyz", suffix], "rejected": []},
            "projects": {
                "/elsewhere": {"allowedTools": ["Bash(ls:*)"], "hasTrustDialogAccepted": true},
                realpath.clone(): {"hasTrustDialogAccepted": true},
            },
            "oauthAccount": {"nested": {"deep": [1, 2, 3]}},
        })
    );
    assert!(config["projects"].get(link.display().to_string()).is_none());
    let seen: Value = serde_json::from_str(&fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(seen, config);
    let leftovers: Vec<_> = fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, [".claude.json"], "no temp files left behind");
    runner.stop();
}

#[test]
fn the_seed_creates_a_missing_claude_json_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("fresh-home");
    write_launch(
        dir.path(),
        "exit 0",
        json!({"seedClaude": {"home": home, "apiKey": null, "trustDirs": [dir.path()]}}),
    );
    let runner = Runner::start(dir.path());
    runner.wait_for("exited", |e| count(e, "exited") == 1);
    let path = home.join(".claude.json");
    let config: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let realpath = dir.path().canonicalize().unwrap().display().to_string();
    assert_eq!(
        config,
        json!({"hasCompletedOnboarding": true, "projects": {realpath: {"hasTrustDialogAccepted": true}}})
    );
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    runner.stop();
}

#[test]
fn a_corrupt_claude_json_is_moved_aside_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    fs::write(home.join(".claude.json"), "{not json").unwrap();
    write_launch(
        dir.path(),
        "exit 0",
        json!({"seedClaude": {"home": home, "trustDirs": []}}),
    );
    let runner = Runner::start(dir.path());
    let events = runner.wait_for("exited", |e| count(e, "exited") == 1);
    let kinds: Vec<_> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["warning", "started", "exited"]);
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("cohost-corrupt-")
    );
    let config: Value =
        serde_json::from_str(&fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(config, json!({"hasCompletedOnboarding": true}));
    let aside = fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".cohost-corrupt-"))
        .unwrap();
    assert_eq!(fs::read_to_string(aside).unwrap(), "{not json");
    runner.stop();
}

#[test]
fn launch_errors_are_reported_and_the_runner_waits() {
    let dir = tempfile::tempdir().unwrap();
    // 1: no launch.json.
    let mut runner = Runner::start(dir.path());
    let events = runner.wait_for("error", |e| count(e, "error") == 1);
    assert_eq!(events[0]["launch"], 1);
    assert_eq!(events[0]["runnerPid"], runner.pid());
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("launch.json")
    );
    thread::sleep(Duration::from_millis(200));
    assert!(runner.is_running());
    // 2: bad JSON.
    fs::write(dir.path().join("launch.json"), "{\"argv\": [").unwrap();
    runner.signal("USR1");
    let events = runner.wait_for("error 2", |e| count(e, "error") == 2);
    assert_eq!(events[1]["launch"], 2);
    // 3: empty argv.
    fs::write(dir.path().join("launch.json"), r#"{"argv": []}"#).unwrap();
    runner.signal("USR1");
    let events = runner.wait_for("error 3", |e| count(e, "error") == 3);
    assert!(events[2]["message"].as_str().unwrap().contains("argv"));
    // 4: exec failure.
    fs::write(
        dir.path().join("launch.json"),
        json!({"argv": ["/nonexistent/claude", "--x"], "cwd": dir.path(), "env": {}}).to_string(),
    )
    .unwrap();
    runner.signal("USR1");
    let events = runner.wait_for("error 4", |e| count(e, "error") == 4);
    assert!(
        events[3]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/claude")
    );
    assert_eq!(count(&events, "started"), 0);
    // 5: fixed, it launches.
    write_launch(dir.path(), "exit 0", json!({}));
    runner.signal("USR1");
    let events = runner.wait_for("started", |e| count(e, "exited") == 1);
    assert_eq!(events[4]["event"], "started");
    assert_eq!(events[4]["launch"], 5);
    let pane = fs::read_to_string(dir.path().join("pane.out")).unwrap();
    assert!(pane.contains("launch failed"), "{pane:?}");
    runner.stop();
}

#[test]
fn the_child_gets_sighup_if_the_runner_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    write_launch(
        dir.path(),
        "trap 'echo hup > got-hup; exit 0' HUP; touch running; while true; do sleep 0.02; done",
        json!({}),
    );
    let mut runner = Runner::start(dir.path());
    runner.wait_for("started", |e| count(e, "started") == 1);
    wait_file_exists(&dir.path().join("running"));
    runner.signal("KILL");
    runner.wait_exit();
    assert_eq!(wait_file(&dir.path().join("got-hup")), "hup\n");
}
