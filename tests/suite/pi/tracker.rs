//! A hosted Pi session is an agent instance in the tracker, in the tmux session of its
//! directory, whose status follows its turns and its gate's approvals; Pi's passive watcher,
//! watching the user's session directory, never sees the session (its files are in the
//! session's own directory under cohost's home), so it shows once.

use super::{PEER, PiFixture, TURN_TIMEOUT};
use crate::support::hosted_cases::{Tracked, the_tracker_follows_a_session_through_an_approval};
use crate::support::json;

#[test]
fn the_tracker_follows_a_hosted_pi_session_through_an_approval() {
    let fx = PiFixture::start_with(&[], &[("COHOST_WATCHERS", "pi")]);
    let Tracked { id, key, .. } = the_tracker_follows_a_session_through_an_approval(&fx, &PEER);

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
    assert_eq!(fx.tracker_status("work", &key).as_deref(), Some("idle"));
}
