//! The passive watchers for OpenCode, Pi and Droid against the real CLIs (the releases
//! `./scripts/test` pins, `COHOST_TEST_{OPENCODE,PI,DROID}_BIN`; Pi at both ends of its range,
//! one per run of the version matrix, with `COHOST_TEST_PI_NODE`), each in a private HOME, run in
//! a pane of a private tmux server against the kit's Messages mock, with a daemon watching that
//! HOME (`COHOST_WATCHERS=<agent>`, `HOME=<private home>`). Each checks what the tracker shows:
//! statuses in order, title, prompt, source, and that a restart repeats nothing.
//!
//! What a CLI cannot do offline is named in its test: Pi has no approval prompts; Droid's TUI
//! needs a Factory login (only `droid exec` runs offline, one turn per process).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cohost::peers::{DROID, OPENCODE, PI, Supported};

use crate::support::mock_messages::{MockMessages, Step};
use crate::support::{TestDaemon, TmuxServer, Value, json, pinned_version};

/// What a peer's TUI may take to start or to answer: OpenCode's TUI, started beside four
/// builds (load 14 on 2 cores), spent 30 s before its log's first line and 23 s in its `init`,
/// and a blank pane after 60 s failed this suite's wait once; 90 s as the hosted suites.
const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The peer's executable, as `./scripts/test` exports it; panics (never skips) when unset.
fn peer_bin(peer: &Supported) -> PathBuf {
    pinned_version(peer);
    let var = format!("COHOST_TEST_{}_BIN", peer.name.to_uppercase());
    let bin = std::env::var(&var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests through ./scripts/test, which installs {} {} and {} {}",
            peer.package,
            peer.oldest,
            peer.newest_package(),
            peer.newest
        )
    });
    assert!(Path::new(&bin).is_file(), "{var}={bin} does not exist");
    PathBuf::from(bin)
}

/// A private HOME, a project directory, a tmux server with a session `proj` there, the mock
/// and a daemon watching `agent` in that HOME.
struct Watched {
    tmux: TmuxServer,
    home: PathBuf,
    proj: PathBuf,
    mock: MockMessages,
    daemon: TestDaemon,
    agent: &'static str,
    _dir: tempfile::TempDir,
}

impl Watched {
    fn new(agent: &'static str) -> Watched {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let proj = dir.path().join("proj");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&proj).unwrap();
        let tmux = TmuxServer::with_sessions(&[("proj", &proj)]);
        let mock = MockMessages::start();
        let daemon = TestDaemon::start_with_env(
            Some(tmux.socket()),
            &[],
            &[("COHOST_WATCHERS", agent), ("HOME", home.to_str().unwrap())],
        );
        Watched {
            tmux,
            home,
            proj,
            mock,
            daemon,
            agent,
            _dir: dir,
        }
    }

    /// Runs `command` (with `env`) in a new window of `proj`; returns its pane id.
    fn run_in_pane(&self, env: &[(&str, String)], command: &[&str]) -> String {
        let mut args: Vec<String> = [
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-t",
            "=proj:",
            "-c",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(self.proj.to_string_lossy().into_owned());
        args.push("env".into());
        args.push(format!("HOME={}", self.home.display()));
        for (key, value) in env {
            args.push(format!("{key}={value}"));
        }
        args.extend(command.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let pane = self.tmux.run(&args).trim().to_string();
        self.tmux
            .run(&["resize-window", "-t", &pane, "-x", "200", "-y", "50"]);
        pane
    }

    /// The end of the newest log the peer keeps under its HOME (OpenCode writes
    /// `~/.local/share/opencode/log/*.log`), for a failure that shows only a blank screen.
    fn peer_log_tail(&self) -> String {
        let dir = self.home.join(".local/share/opencode/log");
        let newest = std::fs::read_dir(&dir).ok().and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .max()
                .map(|(_, path)| path)
        });
        match newest.and_then(|path| Some((std::fs::read_to_string(&path).ok()?, path))) {
            Some((text, path)) => {
                let lines: Vec<&str> = text.lines().collect();
                format!(
                    "{} (last 40 lines):\n{}",
                    path.display(),
                    lines[lines.len().saturating_sub(40)..].join("\n")
                )
            }
            None => format!("no peer log under {}", dir.display()),
        }
    }

    fn screen(&self, pane: &str) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", pane])
    }

    /// Waits for the pane to show `needle`; on a timeout, fails with the screen.
    fn wait_screen(&self, pane: &str, what: &str, needle: &str) {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            let screen = self.screen(pane);
            if screen.contains(needle) {
                return;
            }
            if std::time::Instant::now() >= deadline {
                self.daemon.fail(&format!(
                    "timed out after {TURN_TIMEOUT:?} waiting for {what} (`{needle}`); the pane:\n{screen}\ninstances: {:#?}\n{}",
                    self.instances(),
                    self.peer_log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types a prompt and submits it once the TUI shows it (under load a TUI still finishing
    /// an interrupted turn may not have taken the keys yet: Enter before that submits nothing).
    fn type_prompt(&self, pane: &str, text: &str) {
        self.tmux.run(&["send-keys", "-t", pane, "-l", text]);
        let shown: String = text.chars().take(16).collect();
        self.wait_screen(pane, &format!("the typed prompt `{text}`"), &shown);
        std::thread::sleep(Duration::from_millis(300));
        self.tmux.run(&["send-keys", "-t", pane, "Enter"]);
    }

    /// The watcher's `agent.updated` events (their `data`), in order.
    fn updates(&self) -> Vec<Value> {
        self.daemon
            .events_after(0)
            .into_iter()
            .filter(|e| e["type"] == "agent.updated" && e["data"]["agent"] == self.agent)
            .map(|e| e["data"].clone())
            .collect()
    }

    /// The thread's statuses in order, repeats folded. A leading `idle` is dropped: an agent
    /// whose thread is seen before its first prompt (OpenCode's session row and its first
    /// message land in separate WAL commits) is rightly `idle` then, and whether the watcher
    /// reads in between depends on the machine's load.
    fn statuses_of(&self, thread: &str) -> Vec<String> {
        let mut statuses: Vec<String> = Vec::new();
        for update in self.updates() {
            if update["threadId"] == thread {
                let status = update["status"].as_str().unwrap().to_string();
                if statuses.last() != Some(&status) {
                    statuses.push(status);
                }
            }
        }
        if statuses.first().is_some_and(|s| s == "idle") {
            statuses.remove(0);
        }
        statuses
    }

    /// The instances of this agent in `/api/state`, any session (unplaced included).
    fn instances(&self) -> Vec<Value> {
        let state = self.daemon.state();
        state["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["agents"].as_array().cloned().unwrap_or_default())
            .filter(|a| a["agent"] == self.agent)
            .collect()
    }

    /// Waits for an instance of this agent with `status`; on a timeout, fails with the
    /// instances, how the daemon explains each, and every pane's screen.
    fn wait_status(&self, status: &str) -> Value {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            let found = self.instances();
            if let Some(hit) = found.iter().find(|a| a["status"] == status) {
                return hit.clone();
            }
            if std::time::Instant::now() >= deadline {
                let screens: Vec<String> = self
                    .tmux
                    .run(&["list-panes", "-a", "-F", "#{pane_id}"])
                    .lines()
                    .map(|pane| format!("--- {pane} ---\n{}", self.screen(pane)))
                    .collect();
                let screens = screens.join("\n");
                self.daemon.fail(&format!(
                    "timed out after {TURN_TIMEOUT:?} waiting for a {} instance {status}; instances: {found:#?}\nwatch: {:#}\nscreens:\n{screens}",
                    self.agent,
                    self.daemon.get("/api/watch").json()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Restarts the daemon and checks nothing was lost or repeated: an update after the restart
    /// says something the instance's last one did not (a late field, such as a title or the
    /// pane, may still arrive), and never changes its status.
    fn restart_repeats_nothing(&mut self) {
        let before = self.updates().len();
        let instances = self.instances();
        self.daemon.restart();
        // Caught up, then a quiet window: a re-emitted update would be in it.
        crate::suite::watch::common::wait_caught_up(&self.daemon);
        std::thread::sleep(Duration::from_secs(2));
        let updates = self.updates();
        let key = |u: &Value| format!("{}:{}", u["agent"], u["threadId"]);
        let said = |u: &Value| {
            [
                "status",
                "threadName",
                "lastUserPrompt",
                "paneId",
                "liveness",
            ]
            .map(|f| u[f].clone())
        };
        for (at, new) in updates.iter().enumerate().skip(before) {
            let last = updates[..at]
                .iter()
                .rev()
                .find(|u| key(u) == key(new))
                .unwrap_or_else(|| panic!("the restart made up an instance: {new:#}"));
            assert_ne!(
                said(last),
                said(new),
                "the restart re-emitted agent.updated: {new:#}"
            );
            assert_eq!(
                last["status"], new["status"],
                "the restart changed a status: {last:#} then {new:#}"
            );
        }
        let after = self.instances();
        for instance in &instances {
            let kept = after.iter().find(|a| a["key"] == instance["key"]);
            assert_eq!(
                kept.map(|a| &a["status"]),
                Some(&instance["status"]),
                "status lost across the restart: {instance} vs {after:?}"
            );
        }
    }
}

/// The node `./scripts/test` runs this run's Pi with (`COHOST_TEST_PI_NODE`: Pi 1.6.0 needs
/// Node ≥ 22.19, which the scripts install for it); panics (never skips) when unset.
fn pi_node() -> PathBuf {
    let node = std::env::var("COHOST_TEST_PI_NODE").unwrap_or_else(|_| {
        panic!(
            "COHOST_TEST_PI_NODE is not set: run the tests through ./scripts/test, which names \
             the node each Pi runs with"
        )
    });
    assert!(
        Path::new(&node).is_file(),
        "COHOST_TEST_PI_NODE={node} does not exist"
    );
    PathBuf::from(node)
}

/// `PATH` with the directory of this run's node first (Pi's launcher runs `env node`).
fn path_with_pi_node() -> String {
    let node = pi_node();
    format!(
        "{}:{}",
        node.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn pi_env(w: &Watched) -> Vec<(&'static str, String)> {
    let agent_dir = w.home.join(".pi/agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(
        agent_dir.join("models.json"),
        json!({"providers": {"mock": {
            "baseUrl": w.mock.base_url(), "api": "anthropic-messages", "apiKey": "sk-ant-mock-0000",
            "models": [{"id": "mock-model", "name": "Mock Model", "contextWindow": 200000, "maxTokens": 8000}]}}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.join("settings.json"),
        r#"{"defaultProvider":"mock","defaultModel":"mock-model"}"#,
    )
    .unwrap();
    vec![
        ("PATH", path_with_pi_node()),
        ("PI_OFFLINE", "1".into()),
        ("PI_SKIP_VERSION_CHECK", "1".into()),
        ("PI_TELEMETRY", "0".into()),
    ]
}

/// Pi: a tool turn, an interrupted turn (Escape), a failed turn (HTTP 400), the session named,
/// a restart in the middle, a second Pi in another pane, and the first Pi exiting (its instance
/// ends, found by its process: Pi names no pid in its files and holds none open, so the watcher
/// finds the `pi` process by the session's cwd). Pi has no approval prompts, so no waiting
/// state exists to check.
#[test]
fn pi_turns_in_tmux_panes_are_watched() {
    let bin = peer_bin(&PI);
    let mut w = Watched::new("pi");
    let env = pi_env(&w);
    let pane = w.run_in_pane(&env, &[bin.to_str().unwrap()]);
    w.wait_screen(&pane, "pi's prompt", "mock-model");

    w.mock
        .push(Step::tool_use("bash", json!({"command": "echo hi"})))
        .push(Step::text("Done.").when_tool_result());
    w.type_prompt(&pane, "Run echo hi please");
    let done = w.wait_status("done");
    let thread = done["threadId"].as_str().unwrap().to_string();
    assert_eq!(done["source"], "watcher:pi", "{done}");
    assert_eq!(done["lastUserPrompt"], "Run echo hi please", "{done}");
    assert_eq!(
        w.statuses_of(&thread),
        ["running", "tool-running", "running", "done"]
    );

    w.restart_repeats_nothing();

    w.mock.push(Step::text("Once upon a time\n").then_hang());
    w.type_prompt(&pane, "Tell me a long story");
    w.wait_screen(&pane, "the partial reply", "Once upon a time");
    w.tmux.run(&["send-keys", "-t", &pane, "Escape"]);
    w.wait_status("interrupted");

    w.mock.push(Step::http_status(400, "mock failure"));
    w.type_prompt(&pane, "This one fails");
    w.wait_status("error");

    w.type_prompt(&pane, "/name My watcher test");
    w.daemon
        .wait_for("the session's name as title", TURN_TIMEOUT, |_| {
            w.instances()
                .into_iter()
                .find(|a| a["threadName"] == "My watcher test")
        });
    assert_eq!(
        w.statuses_of(&thread),
        [
            "running",
            "tool-running",
            "running",
            "done",
            "running",
            "interrupted",
            "running",
            "error"
        ]
    );

    // A second Pi in another pane: a second instance.
    let second = w.run_in_pane(&env, &[bin.to_str().unwrap()]);
    w.wait_screen(&second, "the second pi's prompt", "mock-model");
    w.type_prompt(&second, "Say hello");
    w.daemon
        .wait_for("a second pi instance, done", TURN_TIMEOUT, |_| {
            let instances = w.instances();
            let other = instances
                .iter()
                .find(|a| a["threadId"] != thread.as_str() && a["status"] == "done");
            (instances.len() == 2 && other.is_some()).then_some(())
        });

    // The first Pi exits (its pane is closed): its instance ends, not stale; the second stays.
    let first = w
        .instances()
        .into_iter()
        .find(|a| a["threadId"] == thread.as_str())
        .unwrap();
    assert_eq!(
        first["liveness"], "alive",
        "the first pi's process was found: {first}"
    );
    w.tmux.run(&["kill-pane", "-t", &pane]);
    w.daemon
        .wait_for("the first pi instance to end", TURN_TIMEOUT, |_| {
            w.instances()
                .iter()
                .find(|a| a["threadId"] == thread.as_str())
                .is_none_or(|a| a["liveness"] == "exited")
                .then_some(())
        });
    let instances = w.instances();
    assert!(
        !instances.iter().any(|a| a["status"] == "stale"),
        "{instances:?}"
    );
    assert!(
        instances
            .iter()
            .any(|a| a["threadId"] != thread.as_str() && a["liveness"] == "alive"),
        "the second pi is still alive: {instances:?}"
    );
}

/// `GET /api/doctor` of a daemon whose `PATH` starts with `first`.
fn doctor_with_path_first(first: &[&Path]) -> (Value, String) {
    let mut dirs: Vec<PathBuf> = first.iter().map(|dir| dir.to_path_buf()).collect();
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(dirs).unwrap();
    let daemon = TestDaemon::start_with_env(
        None,
        &[],
        &[
            ("PATH", path.to_str().unwrap()),
            ("COHOST_WATCHERS", "none"),
        ],
    );
    let doctor = daemon.get("/api/doctor").assert_ok();
    let output = daemon.cli(&["doctor"]);
    (doctor, String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A stand-in `node` that only answers `--version` with `version`, in a directory of its own.
fn fake_node(dir: &Path, version: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = dir.join(format!("node-{version}"));
    std::fs::create_dir_all(&home).unwrap();
    let node = home.join("node");
    std::fs::write(&node, format!("#!/bin/sh\necho v{version}\n")).unwrap();
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    home
}

/// `cohost doctor` on the Pi of this run of the matrix, found on `PATH`: its release and its
/// package, read from the installed package (0.73.1 from `@mariozechner/pi-coding-agent`, 1.6.0
/// from `@earendil-works/pi-coding-agent`), inside the tested range; the Node its package asks
/// for (`engines.node`: 0.73.1 `>=20.6.0`, 1.6.0 `>=22.19.0`). With the node it runs with first on
/// `PATH`, no warning; with an older one, a warning naming that node, its version and what is
/// needed — never an issue.
#[test]
fn pi_doctor_reports_the_installed_pi_and_the_node_it_needs() {
    let bin = peer_bin(&PI);
    let version = pinned_version(&PI);
    let (package, needed) = if version == PI.oldest {
        (PI.package, "20.6.0")
    } else {
        (PI.newest_package(), "22.19.0")
    };
    let pi_dir = bin.parent().unwrap();
    let node = pi_node();

    let (doctor, printed) = doctor_with_path_first(&[pi_dir, node.parent().unwrap()]);
    let pi = &doctor["pi"];
    assert_eq!(pi["found"], true, "{doctor:#}");
    assert_eq!(pi["path"], bin.to_str().unwrap(), "{pi:#}");
    assert_eq!(pi["version"], version.as_str(), "{pi:#}");
    assert_eq!(pi["package"], package, "{pi:#}");
    assert_eq!(pi["versionPlace"], "tested", "{pi:#}");
    assert_eq!(
        pi["supported"]["newestPackage"],
        PI.newest_package(),
        "{pi:#}"
    );
    assert_eq!(pi["nodeNeeded"], needed, "{pi:#}");
    assert_eq!(pi["nodePath"], node.to_str().unwrap(), "{pi:#}");
    assert_eq!(pi["warnings"], json!([]), "{pi:#}");
    assert_eq!(pi["issues"], json!([]), "{pi:#}");
    assert!(
        printed.contains(&format!("pi version:     {version} {package}")),
        "{printed}"
    );

    // Older nodes: 18.19 is older than both ends need, 20.20 only than 1.6.0 needs.
    let scratch = tempfile::tempdir().unwrap();
    for old in ["18.19.0", "20.20.2"] {
        let fake = fake_node(scratch.path(), old);
        let (doctor, printed) = doctor_with_path_first(&[pi_dir, &fake]);
        let pi = &doctor["pi"];
        assert_eq!(pi["nodeVersion"], old, "{pi:#}");
        assert_eq!(pi["issues"], json!([]), "{pi:#}");
        let too_old = cohost::peers::compare(old, needed) == Some(std::cmp::Ordering::Less);
        let warnings: Vec<&str> = pi["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        if too_old {
            assert_eq!(warnings.len(), 1, "{pi:#}");
            let warning = warnings[0];
            for part in [
                format!("pi {version}"),
                format!("Node {needed}"),
                fake.join("node").display().to_string(),
                old.to_string(),
            ] {
                assert!(warning.contains(&part), "`{part}` in {warning}");
            }
            assert!(
                doctor["warnings"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(warning)),
                "{doctor:#}"
            );
            assert!(
                printed.contains(&format!("warning: {warning}")),
                "{printed}"
            );
        } else {
            assert_eq!(warnings, Vec::<&str>::new(), "node {old}: {pi:#}");
        }
    }
}

fn opencode_env(w: &Watched, permission_ask: bool) -> Vec<(&'static str, String)> {
    let config_dir = w.home.join(".config/opencode");
    std::fs::create_dir_all(&config_dir).unwrap();
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
        "model": "mock/mock-model", "small_model": "mock/mock-model",
        "provider": {"mock": {"npm": "@ai-sdk/anthropic", "name": "Mock Anthropic",
            "options": {"baseURL": format!("{}/v1", w.mock.base_url()), "apiKey": "sk-ant-mock-0000"},
            "models": {"mock-model": {"name": "Mock Model", "tool_call": true,
                "limit": {"context": 200000, "output": 8000}}}}}
    });
    if permission_ask {
        config["permission"] = json!({"bash": "ask"});
    }
    std::fs::write(config_dir.join("opencode.json"), config.to_string()).unwrap();
    [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    ]
    .into_iter()
    .map(|name| (name, "1".to_string()))
    .collect()
}

/// OpenCode: a tool turn whose approval is left open 30 s (OpenCode writes nothing while it
/// asks: the instance shows tool-running, and stays so — never stale), then approved; an
/// interrupted turn (Esc Esc); a failed turn (HTTP 400); a restart in the middle; the agent
/// exiting (its process, found by its open database, ends → the instance ends).
#[test]
fn opencode_turns_in_a_tmux_pane_are_watched() {
    let bin = peer_bin(&OPENCODE);
    let mut w = Watched::new("opencode");
    let env = opencode_env(&w, true);
    let pane = w.run_in_pane(&env, &[bin.to_str().unwrap()]);
    w.wait_screen(&pane, "opencode's prompt", "Ask anything");

    w.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "echo hi", "description": "Print hi"}),
        ))
        .push(Step::text("Done.").when_tool_result());
    w.type_prompt(&pane, "Run echo hi please");
    w.wait_screen(&pane, "the permission dialog", "Permission required");
    let asking = w.wait_status("tool-running");
    let thread = asking["threadId"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(30));
    let still = w
        .instances()
        .into_iter()
        .find(|a| a["threadId"] == thread.as_str())
        .unwrap();
    assert_eq!(
        still["status"], "tool-running",
        "after 30 s of silence: {still}"
    );
    w.tmux.run(&["send-keys", "-t", &pane, "Enter"]);
    let done = w.wait_status("done");
    assert_eq!(done["source"], "watcher:opencode", "{done}");
    assert_eq!(done["lastUserPrompt"], "Run echo hi please", "{done}");
    assert_eq!(
        w.statuses_of(&thread),
        ["running", "tool-running", "running", "done"]
    );

    w.restart_repeats_nothing();

    w.mock.push(Step::text("Once upon a time\n").then_hang());
    w.type_prompt(&pane, "Tell me a long story");
    w.wait_screen(&pane, "the partial reply", "Once upon a time");
    // OpenCode interrupts on a second Escape while its first one's hint is up: wait for the hint
    // (a loaded machine renders late), then press again.
    w.tmux.run(&["send-keys", "-t", &pane, "Escape"]);
    w.wait_screen(&pane, "the interrupt hint", "again to interrupt");
    w.tmux.run(&["send-keys", "-t", &pane, "Escape"]);
    w.wait_status("interrupted");

    w.mock.push(Step::http_status(400, "mock failure"));
    w.type_prompt(&pane, "This one fails");
    let deadline = std::time::Instant::now() + TURN_TIMEOUT;
    let failed = loop {
        let found = w.instances().into_iter().find(|a| a["status"] == "error");
        if found.is_some() || std::time::Instant::now() >= deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        failed.is_some(),
        "no error status; statuses {:?}; the pane:\n{}",
        w.statuses_of(&thread),
        w.screen(&pane)
    );

    // Exit: the instance ends (pruned or ended), not stale.
    w.tmux.run(&["send-keys", "-t", &pane, "C-c"]);
    w.daemon
        .wait_for("the opencode instance to end", TURN_TIMEOUT, |_| {
            let instances = w.instances();
            let gone = instances
                .iter()
                .find(|a| a["threadId"] == thread.as_str())
                .is_none_or(|a| a["liveness"] == "exited");
            gone.then_some(())
        });
    assert!(
        !w.instances().iter().any(|a| a["status"] == "stale"),
        "{:?}",
        w.instances()
    );
}

/// Droid: `droid exec` runs one turn per process offline (its TUI needs a Factory login, so the
/// approval, the Esc interrupt and a second TUI session are not runnable offline; the recorded
/// files of `src/watch/droid.rs`'s tests cover an interrupted exec). A tool turn completes; a
/// failed turn is an error; a restart in the middle repeats nothing; a second exec is a second
/// instance.
#[test]
fn droid_exec_turns_in_a_tmux_pane_are_watched() {
    let bin = peer_bin(&DROID);
    let mut w = Watched::new("droid");
    let factory = w.home.join(".factory");
    std::fs::create_dir_all(&factory).unwrap();
    std::fs::write(
        factory.join("settings.json"),
        json!({"customModels": [{"model": "mock-model", "displayName": "Mock",
            "baseUrl": w.mock.base_url(), "apiKey": "sk-ant-mock-0000",
            "provider": "anthropic", "maxOutputTokens": 8192}]})
        .to_string(),
    )
    .unwrap();
    let env = vec![
        ("FACTORY_DROID_AUTO_UPDATE_ENABLED", "false".to_string()),
        ("FACTORY_DISABLE_KEYRING", "1".to_string()),
    ];
    let bin = bin.to_str().unwrap();

    w.mock
        .push(Step::tool_use(
            "Execute",
            json!({"command": "echo hi", "riskLevel": "low", "riskLevelReason": "prints"}),
        ))
        .push(Step::text("The command printed hi. Done.").when_tool_result());
    w.run_in_pane(
        &env,
        &[
            "sh",
            "-c",
            &format!("{bin} exec -m custom:Mock-0 --auto low 'Run echo hi please'; sleep 600"),
        ],
    );
    let done = w.wait_status("done");
    let thread = done["threadId"].as_str().unwrap().to_string();
    assert_eq!(done["source"], "watcher:droid", "{done}");
    assert_eq!(done["threadName"], "Run echo hi please", "{done}");
    assert_eq!(done["lastUserPrompt"], "Run echo hi please", "{done}");
    let statuses = w.statuses_of(&thread);
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("done"),
        "{statuses:?}"
    );
    assert!(statuses.iter().any(|s| s == "tool-running"), "{statuses:?}");

    w.restart_repeats_nothing();

    w.mock.push(Step::http_status(400, "mock failure"));
    w.run_in_pane(
        &env,
        &[
            "sh",
            "-c",
            &format!("{bin} exec -m custom:Mock-0 'This one fails'; sleep 600"),
        ],
    );
    let failed = w.wait_status("error");
    assert_ne!(
        failed["threadId"],
        thread.as_str(),
        "a second exec is a second instance"
    );
    assert_eq!(failed["lastUserPrompt"], "This one fails", "{failed}");
    assert_eq!(w.instances().len(), 2, "{:?}", w.instances());
}
