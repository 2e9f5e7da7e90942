//! Adopting and giving back a Claude started by hand through MCP (issue 25), with the kit's real
//! MCP client (the Python SDK) over HTTP: `adopt`, its refusals, `disown` and its refusals; the
//! agent keeps running in its pane, nothing is typed there, and the watcher shows it again.

use serde_json::json;

use super::adopt::{ByHand, HAND, fixture, wait_instance};
use crate::suite::mcp::{Transport, run_client};
use crate::support::claude_env::is_running;

/// The input box's line of a Claude screen (`❯` and what is typed after it).
fn input_box(screen: &str) -> String {
    screen
        .lines()
        .find(|line| line.starts_with('❯'))
        .unwrap_or_default()
        .replace('\u{a0}', " ")
}

#[test]
fn mcp_adopts_refuses_and_disowns_a_claude_started_by_hand() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    let pid = hand.claude_pid(&fx).expect("claude's session file");
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    let key = watched["key"].as_str().unwrap().to_string();
    // A session cohost hosts, which `disown` refuses.
    let hosted = fx.create(json!({}));
    let screen = hand.screen(&fx);

    let plan = json!([
        { "tool": "adopt", "arguments": { "tmux_session": HAND, "key": key },
          "save": { "id": "/session/id" } },
        { "tool": "adopt", "arguments": { "tmux_session": HAND, "key": key } },
        { "tool": "adopt", "arguments": { "tmux_session": HAND, "key": "claude-code:no-such-session" } },
        { "tool": "adopt", "arguments": { "tmux_session": "no-such-tmux-session", "key": key } },
        { "tool": "disown", "arguments": { "session_id": hosted } },
        { "tool": "disown", "arguments": { "session_id": "$id" } },
        { "tool": "disown", "arguments": { "session_id": "$id" } },
        { "tool": "disown", "arguments": { "session_id": "no-such-session" } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});

    let adopted = run.one(0);
    assert_eq!(adopted["isError"], false, "{adopted:#}");
    let view = &adopted["structured"]["session"];
    let id = view["id"].as_str().unwrap().to_string();
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["paneId"], hand.pane.as_str(), "{view:#}");
    assert_eq!(view["adopted"]["pid"], pid, "{view:#}");
    assert_eq!(view["adopted"]["key"], key.as_str(), "{view:#}");

    let refusal = |index: usize, code: &str| {
        let answer = run.one(index);
        assert_eq!(answer["isError"], true, "step {index}: {answer:#}");
        assert_eq!(
            answer["structured"]["error"]["code"], code,
            "step {index}: {answer:#}"
        );
        let message = answer["structured"]["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(!message.is_empty(), "step {index}: {answer:#}");
        message.to_string()
    };
    let driven = refusal(1, "already_driven");
    assert!(driven.contains(&id), "{driven}");
    refusal(2, "instance_not_found");
    refusal(3, "instance_not_found");
    let not_adopted = refusal(4, "not_adopted");
    assert!(not_adopted.contains(&hosted), "{not_adopted}");

    // Given back: the session closed, saying so; Claude runs on, watched only again.
    let disowned = run.one(5);
    assert_eq!(disowned["isError"], false, "{disowned:#}");
    let view = &disowned["structured"]["session"];
    assert_eq!(view["id"], id.as_str(), "{view:#}");
    assert_eq!(view["state"], "closed", "{view:#}");
    let closed = fx.wait_event(&id, "session.closed", |e| e["type"] == "session.closed");
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("disowned")),
        "{closed}"
    );
    refusal(6, "session_closed");
    refusal(7, "session_not_found");
    let again = wait_instance(&fx, "the watched instance again", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    assert_eq!(again["control"], "watched", "{again:#}");
    assert!(again.get("sessionId").is_none(), "{again:#}");
    assert!(is_running(pid), "claude keeps running after disown");
    // Nothing was typed: the input box is as empty as before (the logo above it animates in
    // the newest release, so the whole screen is not compared).
    assert_eq!(
        input_box(&hand.screen(&fx)),
        input_box(&screen),
        "nothing typed into the pane by adopting, refusing or disowning"
    );
    assert_eq!(input_box(&screen).trim_end(), "❯", "{screen}");
    // The hosted session was not touched by the refusal.
    assert_eq!(fx.view(&hosted)["state"], "live");
}
