//! Co-driving and the tracker: the real `opencode attach` TUI on a session's own server, in a
//! tmux pane cohost opens (the turns before and after it opened on its screen, a prompt typed
//! there a `terminal` turn that hands the session to the person, its password in a 0600
//! `launch.json` and the TUI's environment, never in an argv; a second pane refused; after a
//! daemon restart, the TUI attached again to the session's new server), and the session as an agent instance in the
//! tracker — in the tmux session of its directory, then in its pane once it has one — whose
//! status follows its turns and approvals, with OpenCode's passive watcher (which reads the same
//! database) suppressing its own instance of the same session.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::{OpencodeFixture, TURN_TIMEOUT};
use crate::support::mock_messages::Step;
use crate::support::{Value, json};

/// Waits until the pane shows `needle`, failing with the screen.
#[track_caller]
fn wait_screen(fx: &OpencodeFixture, pane: &str, needle: &str) -> String {
    let deadline = Instant::now() + TURN_TIMEOUT;
    loop {
        let screen = fx.tmux.run(&["capture-pane", "-p", "-t", pane]);
        if screen.contains(needle) {
            return screen;
        }
        if Instant::now() >= deadline {
            fx.daemon.fail(&format!(
                "the attached TUI never showed {needle:?}; screen:\n{screen}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Types like a person: the text, until the TUI shows it, then Enter.
fn type_prompt(fx: &OpencodeFixture, pane: &str, text: &str) {
    fx.tmux.run(&["send-keys", "-t", pane, "-l", text]);
    wait_screen(fx, pane, text);
    fx.tmux.run(&["send-keys", "-t", pane, "Enter"]);
}

/// Runs an API turn `prompt` → `reply` to its end.
fn api_turn(fx: &OpencodeFixture, id: &str, prompt: &str, reply: &str) {
    fx.mock.push(Step::text(reply).when_user_contains(prompt));
    let sent = fx.send(id, prompt);
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = fx.wait_turn(id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(id));
}

/// `POST …/terminal`: a pane for the session; returns its view.
fn open_pane(fx: &OpencodeFixture, id: &str) -> Value {
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{id}/terminal"), &json!({}));
    if resp.status != 201 {
        fx.daemon.fail(&format!(
            "POST terminal answered {}: {}",
            resp.status, resp.body
        ));
    }
    resp.json()["session"].clone()
}

/// The lines of the pane's `runner.jsonl`.
fn journal(fx: &OpencodeFixture, id: &str) -> Vec<Value> {
    let path = fx
        .daemon
        .home()
        .join("opencode/sessions")
        .join(id)
        .join("runner.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn a_pane_attaches_opencodes_tui_to_the_sessions_server() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    api_turn(
        &fx,
        &id,
        "Before the pane",
        "Reply from before the pane opened.",
    );

    let view = open_pane(&fx, &id);
    let pane = view["paneId"].as_str().unwrap().to_string();
    assert_eq!(view["tmuxSession"], "cohost", "{view}");
    // The TUI attached to the session: it shows the turn that ran before it opened...
    wait_screen(&fx, &pane, "Reply from before the pane opened.");
    // ... and a turn sent through the API while it is attached.
    api_turn(
        &fx,
        &id,
        "While attached",
        "Reply while the TUI is attached.",
    );
    wait_screen(&fx, &pane, "Reply while the TUI is attached.");

    // A prompt typed in the TUI is the person's turn: `terminal`, and the session is theirs.
    fx.mock
        .push(Step::text("Reply to the person.").when_user_contains("Typed in the pane"));
    type_prompt(&fx, &pane, "Typed in the pane");
    let started = fx.wait_event(&id, "the typed turn", |e| {
        e["type"] == "turn.started" && e["data"]["source"] == "terminal"
    });
    fx.wait_turn(&id, started["data"]["turnId"].as_str().unwrap());
    wait_screen(&fx, &pane, "Reply to the person.");
    let lease = fx
        .daemon
        .wait_for("the lease to move to the person", TURN_TIMEOUT, |d| {
            let lease = d.get(&format!("/api/sessions/{id}/lease")).assert_ok()["lease"].clone();
            (lease["holder"] == "human").then_some(lease)
        });
    assert_eq!(lease["reason"], "terminal_input", "{lease}");

    // The password is in the 0600 launch.json's environment and the TUI's, never an argv.
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
        .assert_ok();
    let password = spec["env"]["OPENCODE_SERVER_PASSWORD"]
        .as_str()
        .unwrap()
        .to_string();
    let launch_path = fx
        .daemon
        .home()
        .join("opencode/sessions")
        .join(&id)
        .join("launch.json");
    let mode = std::fs::metadata(&launch_path)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", launch_path.display());
    let launch: Value = serde_json::from_slice(&std::fs::read(&launch_path).unwrap()).unwrap();
    assert_eq!(launch["env"]["OPENCODE_SERVER_PASSWORD"], password.as_str());
    assert!(!launch["argv"].to_string().contains(&password), "{launch}");
    assert_eq!(launch["argv"][1], "attach", "{launch}");
    let started = started_pids(&fx, &id);
    assert_eq!(started.len(), 1, "{:?}", journal(&fx, &id));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", started[0])).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.contains("attach"), "{cmdline}");
    assert!(!cmdline.contains(&password), "the password is no argument");

    // A second terminal is refused; the first stays.
    fx.daemon
        .post(&format!("/api/sessions/{id}/terminal"), &json!({}))
        .assert_error(400, "invalid_request", None);
    let again = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(again["paneId"], pane.as_str(), "{again}");
}

/// The pids the runner started the TUI with, in order.
fn started_pids(fx: &OpencodeFixture, id: &str) -> Vec<u32> {
    journal(fx, id)
        .iter()
        .filter(|e| e["event"] == "started")
        .map(|e| e["pid"].as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn a_daemon_restart_attaches_the_panes_tui_to_the_new_server() {
    let mut fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never", "terminal": true }));
    let pane = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok()["paneId"]
        .as_str()
        .unwrap()
        .to_string();
    api_turn(
        &fx,
        &id,
        "Before the restart",
        "Reply from before the restart.",
    );
    wait_screen(&fx, &pane, "Reply from before the restart.");
    let first = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok()["args"][1]
        .clone();

    // The server goes with the daemon; the pane (and its runner) stay in tmux.
    fx.daemon.restart();
    fx.daemon
        .wait_for("the TUI launched again", TURN_TIMEOUT, |_| {
            (started_pids(&fx, &id).len() == 2).then_some(())
        });
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    assert_ne!(spec["args"][1], first, "a new server: {spec}");
    let launch: Value = serde_json::from_slice(
        &std::fs::read(
            fx.daemon
                .home()
                .join("opencode/sessions")
                .join(&id)
                .join("launch.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(launch["argv"][2], spec["args"][1], "{launch}");
    assert_eq!(
        fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok()["paneId"],
        pane.as_str()
    );
    // The new TUI shows the session, and what runs on the new server.
    api_turn(
        &fx,
        &id,
        "After the restart",
        "Reply from after the restart.",
    );
    let screen = wait_screen(&fx, &pane, "Reply from after the restart.");
    assert!(
        screen.contains("Reply from before the restart."),
        "the history: {screen}"
    );
}

#[test]
fn the_tracker_follows_a_hosted_opencode_session_and_the_watcher_does_not_repeat_it() {
    let fx = OpencodeFixture::start_with(&[], &[("COHOST_WATCHERS", "opencode")]);
    let id = fx.create(json!({}));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    let thread = view["threadId"].as_str().unwrap().to_string();
    let key = format!("opencode:{thread}");
    let status = |session: &str| -> Option<String> {
        fx.daemon
            .instance(session, &key)
            .and_then(|i| i["status"].as_str().map(str::to_string))
    };

    // A turn that asks before it acts: running, waiting while the approval is pending.
    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "touch tracked.txt", "description": "Create tracked.txt"}),
        ))
        .push(Step::text("Tracked and done.").when_tool_result());
    let turn = fx.send(&id, "Create tracked.txt")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    fx.daemon
        .wait_for("the instance waiting in `work`", TURN_TIMEOUT, |_| {
            (status("work").as_deref() == Some("waiting")).then_some(())
        });
    let instance = fx.daemon.instance("work", &key).unwrap();
    assert_eq!(instance["agent"], "opencode", "{instance}");
    assert_eq!(instance["source"], "hosted", "{instance}");
    assert_eq!(instance["threadId"], thread.as_str(), "{instance}");
    assert!(instance["paneId"].is_null(), "{instance}");
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    fx.decide(&id, approval, "accept").assert_ok();
    fx.wait_turn(&id, &turn);
    fx.daemon
        .wait_for("the instance done in `work`", TURN_TIMEOUT, |_| {
            (status("work").as_deref() == Some("done")).then_some(())
        });
    assert_eq!(fx.daemon.instance("work", &key).unwrap()["unseen"], true);
    // What the tracker showed, in order: running, the tool, waiting, then done.
    let reported: Vec<String> = fx
        .daemon
        .events_after(0)
        .iter()
        .filter(|e| e["type"] == "agent.updated" && e["data"]["threadId"] == thread.as_str())
        .map(|e| e["data"]["status"].as_str().unwrap().to_string())
        .collect();
    let first = |s: &str| reported.iter().position(|r| r == s);
    assert_eq!(
        reported.first().map(String::as_str),
        Some("running"),
        "{reported:?}"
    );
    assert!(first("waiting") > first("running"), "{reported:?}");
    assert_eq!(
        reported.last().map(String::as_str),
        Some("done"),
        "{reported:?}"
    );

    // OpenCode's watcher reads the database the session's server writes, follows the same
    // session, and leaves it to the hosted instance.
    let explain = format!("/api/state/work/agents/{key}/explain");
    fx.daemon
        .wait_for("the watcher to follow the session", TURN_TIMEOUT, |d| {
            let answer = d.get(&explain).assert_ok();
            (answer["watcher"]["placement"] == "suppressed").then_some(answer)
        });
    let answer = fx.daemon.get(&explain).assert_ok();
    assert!(
        answer["watcher"]["placedBy"]
            .as_str()
            .is_some_and(|by| by.contains(id.as_str())),
        "{answer:#}"
    );
    assert_eq!(answer["source"], "hosted", "{answer:#}");
    let watched: Vec<Value> = fx
        .daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["type"] == "agent.updated" && e["data"]["source"] != "hosted")
        .collect();
    assert!(watched.is_empty(), "only the hosted instance: {watched:#?}");

    // With a pane, the instance is the pane's, and leaves `work`.
    let opened = open_pane(&fx, &id);
    let pane = opened["paneId"].as_str().unwrap().to_string();
    fx.daemon
        .wait_for("the instance in the pane's session", TURN_TIMEOUT, |d| {
            d.instance("cohost", &key)
                .filter(|i| i["paneId"] == pane.as_str())
        });
    assert!(fx.daemon.instance("work", &key).is_none());
    api_turn(&fx, &id, "Again with a pane", "Done with a pane.");
    fx.daemon.wait_for(
        "the instance done in the pane's session",
        TURN_TIMEOUT,
        |_| (status("cohost").as_deref() == Some("done")).then_some(()),
    );
    assert!(fx.daemon.instance("work", &key).is_none());
    // Seen, it waits for its next prompt.
    fx.daemon
        .post("/api/focus", &json!({ "session": "cohost" }))
        .assert_ok();
    assert_eq!(status("cohost").as_deref(), Some("idle"));
}
