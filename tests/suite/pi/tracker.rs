//! A hosted Pi session is an agent instance in the tracker, in the tmux session of its
//! directory, whose status follows its turns and its gate's approvals; Pi's passive watcher,
//! watching the user's session directory, never sees the session (its files are in the
//! session's own directory under cohost's home), so it shows once.

use super::{PiFixture, TURN_TIMEOUT};
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn the_tracker_follows_a_hosted_pi_session_through_an_approval() {
    let fx = PiFixture::start_with(&[], &[("COHOST_WATCHERS", "pi")]);
    let id = fx.create(json!({}));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    let thread = view["threadId"].as_str().unwrap().to_string();
    let key = format!("pi:{thread}");
    let status = || -> Option<String> {
        fx.daemon
            .instance("work", &key)
            .and_then(|i| i["status"].as_str().map(str::to_string))
    };

    // A turn whose tool the gate asks about: waiting while the approval is pending.
    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "touch tracked.txt"}),
        ))
        .push(Step::text("Tracked and done.").when_tool_result());
    let turn = fx.start_turn(&id, "Create tracked.txt");
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    fx.daemon
        .wait_for("the instance waiting in `work`", TURN_TIMEOUT, |_| {
            (status().as_deref() == Some("waiting")).then_some(())
        });
    let instance = fx.daemon.instance("work", &key).unwrap();
    assert_eq!(instance["agent"], "pi", "{instance}");
    assert_eq!(instance["source"], "hosted", "{instance}");
    assert_eq!(instance["threadId"], thread.as_str(), "{instance}");
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    fx.decide(&id, approval, "accept").assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    fx.daemon
        .wait_for("the instance done in `work`", TURN_TIMEOUT, |_| {
            (status().as_deref() == Some("done")).then_some(())
        });
    assert_eq!(fx.daemon.instance("work", &key).unwrap()["unseen"], true);
    // What the tracker showed, in order: running, the tool, waiting for its answer, the tool
    // again, then done.
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

    // Pi's watcher runs, on the user's session directory, which the hosted session never
    // writes: it follows nothing, and the instance shows once.
    let watch = fx
        .daemon
        .wait_for("the watcher's catch-up", TURN_TIMEOUT, |d| {
            let watch = d.get("/api/watch").assert_ok();
            (watch["caughtUp"] == true).then_some(watch)
        });
    assert_eq!(watch["agents"], json!(["pi"]), "{watch:#}");
    let session_file =
        std::fs::read_to_string(fx.daemon.home().join("pi").join(&id).join("session-file"))
            .unwrap();
    let roots = watch["roots"].as_array().unwrap();
    assert!(!roots.is_empty(), "{watch:#}");
    for root in roots {
        let root = root["path"].as_str().unwrap();
        assert!(
            !session_file.trim().starts_with(root),
            "the session's file {session_file} is under the watched {root}"
        );
    }
    assert_eq!(watch["instances"], 0, "{watch:#}");
    let explain = fx
        .daemon
        .get(&format!("/api/state/work/agents/{key}/explain"))
        .assert_ok();
    assert!(explain["watcher"].is_null(), "{explain:#}");
    let state = fx.daemon.state();
    let everywhere: Vec<&serde_json::Value> = state["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["agents"].as_array().unwrap())
        .chain(state["unplaced"].as_array().into_iter().flatten())
        .filter(|a| a["agent"] == "pi")
        .collect();
    assert_eq!(everywhere.len(), 1, "{state:#}");

    // Seen, it waits for its next prompt.
    fx.daemon
        .post("/api/focus", &json!({ "session": "work" }))
        .assert_ok();
    assert_eq!(status().as_deref(), Some("idle"));
}
