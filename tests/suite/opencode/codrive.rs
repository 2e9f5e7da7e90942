//! Co-driving and the tracker: the real `opencode attach` TUI on a session's own server, in a
//! tmux pane cohost opens (the turns before and after it opened on its screen, a prompt typed
//! there a `terminal` turn that hands the session to the person, its password in a 0600
//! `launch.json` and the TUI's environment, never in an argv; a second pane refused; after a
//! daemon restart, the TUI attached again to the session's new server), and the session as an agent instance in the
//! tracker — in the tmux session of its directory, then in its pane once it has one — whose
//! status follows its turns and approvals, with OpenCode's passive watcher (which reads the same
//! database) suppressing its own instance of the same session.

use std::os::unix::fs::PermissionsExt;

use super::{OpencodeFixture, PEER, TURN_TIMEOUT};
use crate::support::hosted_cases::{Tracked, the_tracker_follows_a_session_through_an_approval};
use crate::support::mock_messages::Step;
use crate::support::panes;
use crate::support::{Value, json};

/// Waits until the pane shows `needle`, failing with the screen.
#[track_caller]
fn wait_screen(fx: &OpencodeFixture, pane: &str, needle: &str) -> String {
    panes::wait_screen(&fx.daemon, &fx.tmux, pane, TURN_TIMEOUT, needle)
}

/// Types like a person: the text, until the TUI shows it, then Enter.
fn type_prompt(fx: &OpencodeFixture, pane: &str, text: &str) {
    fx.tmux.run(&["send-keys", "-t", pane, "-l", text]);
    wait_screen(fx, pane, text);
    fx.tmux.run(&["send-keys", "-t", pane, "Enter"]);
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
    panes::runner_journal(&fx.daemon, "opencode", id)
}

/// The pids the runner started the TUI with, in order.
fn started_pids(fx: &OpencodeFixture, id: &str) -> Vec<u32> {
    panes::started_pids(&fx.daemon, "opencode", id)
}

#[test]
fn a_pane_attaches_opencodes_tui_to_the_sessions_server() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.run_turn(&id, "Before the pane", "Reply from before the pane opened.");

    let view = open_pane(&fx, &id);
    let pane = view["paneId"].as_str().unwrap().to_string();
    assert_eq!(view["tmuxSession"], "cohost", "{view}");
    // The TUI attached to the session: it shows the turn that ran before it opened...
    wait_screen(&fx, &pane, "Reply from before the pane opened.");
    // ... and a turn sent through the API while it is attached.
    fx.run_turn(&id, "While attached", "Reply while the TUI is attached.");
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

#[test]
fn a_daemon_restart_attaches_the_panes_tui_to_the_new_server() {
    let mut fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never", "terminal": true }));
    let pane = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok()["paneId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.run_turn(&id, "Before the restart", "Reply from before the restart.");
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
    // The new TUI shows the session's history once it has loaded it (under load its start
    // takes seconds: a turn run before it subscribed would reach it only in part), and then
    // what runs on the new server.
    wait_screen(&fx, &pane, "Reply from before the restart.");
    fx.run_turn(&id, "After the restart", "Reply from after the restart.");
    let screen = wait_screen(&fx, &pane, "Reply from after the restart.");
    assert!(
        screen.contains("Reply from before the restart."),
        "the history: {screen}"
    );
}

#[test]
fn the_tracker_follows_a_hosted_opencode_session_and_the_watcher_does_not_repeat_it() {
    let fx = OpencodeFixture::start_with(&[], &[("COHOST_WATCHERS", "opencode")]);
    let Tracked { id, key, .. } = the_tracker_follows_a_session_through_an_approval(&fx, &PEER);

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
    fx.run_turn(&id, "Again with a pane", "Done with a pane.");
    fx.wait_tracker_status("cohost", &key, "done");
    assert!(fx.daemon.instance("work", &key).is_none());
    // Seen, it waits for its next prompt.
    fx.daemon
        .post("/api/focus", &json!({ "session": "cohost" }))
        .assert_ok();
    assert_eq!(fx.tracker_status("cohost", &key).as_deref(), Some("idle"));
}
