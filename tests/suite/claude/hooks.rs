//! The machine-wide Claude hook (`cohost hooks install|uninstall`) with the real Claude Code
//! TUI (the pinned releases, through the version matrix), started by hand in a pane of a
//! private tmux server, its config in a private `CLAUDE_CONFIG_DIR` whose `settings.json` has a
//! hook of the person's own, talking to the scripted [`MockMessages`]. The daemon watches
//! Claude (`--watchers claude-code`); the hooks add their statuses to what the watcher reads.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::watch::common::{
    daemon_watching, explain, in_order, instance_events, rules, statuses, wait_instance,
};
use crate::support::claude_env::ClaudeEnv;
use crate::support::claude_panes::ClaudePanes;
use crate::support::mock_messages::{MockMessages, Step};
use crate::support::{TestDaemon, run_with_timeout, temp_dir};

const AGENT: &str = "claude-code";
const WAIT: Duration = Duration::from_secs(45);

/// A private Claude config (`CLAUDE_CONFIG_DIR`), tmux server and mock, and one claude TUI.
struct Rig {
    claude: ClaudePanes,
    /// `CLAUDE_CONFIG_DIR`.
    config: PathBuf,
    /// Where the person's own hook writes a line per event it ran for.
    user_log: PathBuf,
    _work: tempfile::TempDir,
}

cohost_testkit::rig_of_claude_panes!(Rig);

impl Rig {
    fn new() -> Rig {
        let mock = MockMessages::start();
        let work = temp_dir("cohost-claude-hooks-");
        let mut env = ClaudeEnv::new(&mock.base_url(), &work.path().join("ws"));
        let config = env.home().join("claude-config");
        std::fs::create_dir_all(&config).expect("mkdir the config dir");
        // Claude reads `.claude.json` from its config dir too.
        std::fs::copy(env.claude_json(), config.join(".claude.json")).expect("copy .claude.json");
        env.set_var("CLAUDE_CONFIG_DIR", &config.to_string_lossy());
        let user_log = work.path().join("user-hook.log");
        let mut claude = ClaudePanes::new(env, mock, WAIT);
        claude.sessions_dir = config.join("sessions");
        claude.shown_on_timeout.push(user_log.clone());
        Rig {
            claude,
            config,
            user_log,
            _work: work,
        }
    }

    fn settings(&self) -> PathBuf {
        self.config.join("settings.json")
    }

    /// The person's settings: four-space indentation, other keys, and a hook of their own on
    /// two of the events cohost adds its hook to (one of them with a matcher).
    fn personal_settings(&self) -> String {
        let log = self.user_log.display();
        format!(
            r#"{{
    "model": "claude-opus-4-8",
    "hooks": {{
        "PreToolUse": [
            {{
                "matcher": "Bash",
                "hooks": [
                    {{ "type": "command", "command": "echo pre >> '{log}'" }}
                ]
            }}
        ],
        "Stop": [
            {{
                "hooks": [
                    {{ "type": "command", "command": "echo stop >> '{log}'" }}
                ]
            }}
        ]
    }},
    "cleanupPeriodDays": 30
}}
"#
        )
    }

    /// The person's own hook's lines so far.
    fn user_hook_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.user_log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `cohost hooks ARGS` for the daemon's home, with the TUI's `HOME` and config dir.
    fn hooks(&self, daemon: &TestDaemon, args: &[&str]) -> Output {
        let mut command = daemon.cli_command(&[&["hooks"], args].concat());
        command
            .env("HOME", self.env.home())
            .env("CLAUDE_CONFIG_DIR", &self.config);
        run_with_timeout(&mut command, Duration::from_secs(30))
    }

    fn hooks_ok(&self, daemon: &TestDaemon, args: &[&str]) -> String {
        let output = self.hooks(daemon, args);
        assert!(
            output.status.success(),
            "cohost hooks {args:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

fn has_rule(daemon: &TestDaemon, session: &str, key: &str, rule: &str) -> bool {
    rules(&explain(daemon, session, key))
        .iter()
        .any(|r| r.contains(rule))
}

/// Waits for the watched instance to satisfy `check` with `rule` among its evidence.
#[track_caller]
fn wait_reported(
    daemon: &TestDaemon,
    what: &str,
    rule: &str,
    check: impl Fn(&Value) -> bool,
) -> (String, String) {
    let (session, instance) = wait_instance(daemon, AGENT, what, |instance| {
        check(instance) && instance["key"].as_str().is_some()
    });
    let key = instance["key"].as_str().unwrap_or("").to_owned();
    daemon.wait_for(
        &format!("{what}: `{rule}` in the evidence"),
        WAIT,
        |daemon| has_rule(daemon, &session, &key, rule).then_some(()),
    );
    (session, key)
}

#[test]
fn claude_hooks_install_report_pass_through_and_uninstall_byte_for_byte() {
    let mut rig = Rig::new();
    let original = rig.personal_settings();
    std::fs::write(rig.settings(), &original).expect("write the person's settings");
    let config = rig.config.to_string_lossy().into_owned();
    let home = rig.env.home().to_string_lossy().into_owned();
    let mut daemon = daemon_watching(
        &rig.tmux,
        AGENT,
        Path::new(&home),
        &[("CLAUDE_CONFIG_DIR", &config)],
    );

    // Install: the person's entries first and unchanged, cohost's after them.
    let said = rig.hooks_ok(&daemon, &["install"]);
    assert!(said.contains("added cohost's hook"), "{said}");
    let installed = std::fs::read_to_string(rig.settings()).expect("read the settings");
    // Every line of theirs is still there, in order (an item cohost's follows gains a comma).
    let mut lines = installed.lines();
    for line in original.lines() {
        assert!(
            lines.any(|l| l.starts_with(line)),
            "`{line}` is gone or moved:\n{installed}"
        );
    }
    let before: Value = serde_json::from_str(&original).expect("their JSON");
    let value: Value = serde_json::from_str(&installed).expect("still JSON");
    assert_eq!(value["cleanupPeriodDays"], 30);
    for event in ["PreToolUse", "Stop"] {
        let list = value["hooks"][event].as_array().expect("a list");
        assert_eq!(list.len(), 2, "{event}: {list:?}");
        assert_eq!(
            list[0], before["hooks"][event][0],
            "theirs first, unchanged"
        );
        let ours = list[1]["hooks"][0]["command"].as_str().unwrap_or("");
        assert!(
            ours.contains("cohost-hook --home") && ours.ends_with(event),
            "{ours}"
        );
    }
    assert!(
        rig.config.join("settings.json.cohost-backup").is_file(),
        "a backup before the first change"
    );
    assert_eq!(
        std::fs::read_to_string(rig.config.join("settings.json.cohost-backup")).ok(),
        Some(original.clone())
    );
    // Again: nothing changes, and it says so.
    let said = rig.hooks_ok(&daemon, &["install"]);
    assert!(said.contains("nothing changed"), "{said}");
    assert_eq!(
        std::fs::read_to_string(rig.settings()).ok(),
        Some(installed.clone())
    );
    let status = rig.hooks_ok(&daemon, &["status"]);
    assert!(status.contains("hooks:     installed"), "{status}");
    assert!(
        status.contains(&rig.settings().display().to_string()),
        "{status}"
    );

    // A Claude started by hand now reports to the daemon: its turn's statuses come from the
    // hooks as well as from its files.
    let tui = rig.start("work");
    rig.mock
        .push(Step::text("Thinking about it...\n").then_hang());
    rig.submit(&tui, "Think slowly");
    let (session, key) = wait_reported(
        &daemon,
        "running from the hook",
        "claude-code hook: UserPromptSubmit → running",
        |i| i["status"] == "running",
    );
    assert_eq!(session, "work");
    // An Escape fires no hook: the transcript's interrupt, written after the hook's report,
    // still ends the turn.
    rig.wait(&tui, "the streamed text", || {
        rig.screen(&tui).contains("Thinking about it")
    });
    rig.keys(&tui, &["Escape"]);
    wait_instance(&daemon, AGENT, "interrupted", |i| {
        i["status"] == "interrupted"
    });

    // A tool turn: tool-running and done from the hooks; the person's hooks ran too.
    rig.mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "echo hi", "description": "Print hi" }),
    ));
    rig.mock.push(Step::text("Done.").when_tool_result());
    rig.submit(&tui, "Run echo hi please");
    wait_reported(
        &daemon,
        "done from the hook",
        "claude-code hook: Stop → done",
        |i| i["status"] == "done" && i["lastUserPrompt"] == "Run echo hi please",
    );
    let seen = statuses(&instance_events(&daemon, &key));
    assert!(
        in_order(
            &seen,
            &["running", "interrupted", "running", "tool-running", "done"]
        ),
        "{seen:?}"
    );
    assert!(
        has_rule(
            &daemon,
            &session,
            &key,
            "claude-code hook: PreToolUse → tool-running"
        ) || has_rule(
            &daemon,
            &session,
            &key,
            "claude-code hook: PostToolUse → running"
        ),
        "{:#}",
        explain(&daemon, &session, &key)
    );
    assert!(
        rig.user_hook_lines()
            .ends_with(&["pre".to_owned(), "stop".to_owned()]),
        "{:?}",
        rig.user_hook_lines()
    );

    // A tool that needs permission: the daemon says the session is not cohost's, the hook
    // prints nothing, and Claude asks in its own dialog (waiting, from the hook).
    rig.mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "touch made.txt", "description": "Create made.txt" }),
    ));
    rig.mock.push(Step::text("Made it.").when_tool_result());
    rig.submit(&tui, "Touch a file please");
    wait_reported(
        &daemon,
        "waiting from the hook",
        "claude-code hook: PermissionRequest → waiting",
        |i| i["status"] == "waiting",
    );
    rig.wait(&tui, "Claude's own permission dialog", || {
        rig.status_of(&tui).as_deref() == Some("waiting")
    });
    thread::sleep(Duration::from_secs(1));
    rig.keys(&tui, &["Enter"]);
    wait_instance(&daemon, AGENT, "done after the dialog", |i| {
        i["status"] == "done" && i["lastUserPrompt"] == "Touch a file please"
    });
    assert!(rig.env.workdir().join("made.txt").exists());

    // The daemon stops: the same Claude runs a tool call, the hooks pass straight through.
    daemon.stop();
    let before = rig.user_hook_lines().len();
    let asked = rig.mock.main_requests().len();
    rig.mock.push(Step::tool_use(
        "Bash",
        json!({ "command": "echo again", "description": "Print again" }),
    ));
    rig.mock.push(Step::text("Again done.").when_tool_result());
    let started = Instant::now();
    rig.submit(&tui, "Run echo again please");
    rig.wait(&tui, "the turn's end with the daemon down", || {
        rig.mock.main_requests().len() >= asked + 2
            && rig.user_hook_lines().len() >= before + 2
            && rig.status_of(&tui).as_deref() == Some("idle")
            && rig.screen(&tui).contains("Again done.")
    });
    let took = started.elapsed();
    assert_eq!(&rig.user_hook_lines()[before..], ["pre", "stop"]);
    assert!(
        rig.mock.main_requests().iter().skip(asked).any(|r| r
            .tool_results()
            .iter()
            .any(|t| t.to_string().contains("again"))),
        "the tool ran: {}",
        rig.mock.summary()
    );
    eprintln!("a tool turn with the daemon stopped took {took:?}");

    // Uninstall: the person's file as it was, byte for byte.
    let said = rig.hooks_ok(&daemon, &["uninstall"]);
    assert!(said.contains("byte for byte"), "{said}");
    assert_eq!(std::fs::read_to_string(rig.settings()).ok(), Some(original));
    assert!(!rig.config.join("settings.json.cohost-backup").exists());
    let status = rig.hooks_ok(&daemon, &["status"]);
    assert!(status.contains("hooks:     not installed"), "{status}");
}
