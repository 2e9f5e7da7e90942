//! The codex host against the real codex app-server and the mock Responses server.

use serde_json::{Value, json};

use crate::support::codex_host::{CodexFixture, types};
use crate::support::mock_responses::Step;

#[test]
fn a_full_turn_is_streamed_into_session_events_in_order() {
    let fx = CodexFixture::start();
    fx.mock.push(Step::reasoning(
        "Thinking it over.",
        "Hello from the mock model!",
    ));
    let id = fx.create(json!({ "approvalPolicy": "never", "sandbox": "workspace-write" }));
    let view = fx.view(&id);
    assert_eq!(view["state"], "live", "{view}");
    assert!(view["threadId"].is_string(), "{view}");

    let sent = fx.send(&id, "Say hello");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn_id = sent["turnId"].as_str().unwrap().to_string();
    fx.wait_turns_completed(&id, 1);

    let events = fx.events(&id);
    let kinds: Vec<String> = events
        .iter()
        // `message.sent` records the inject's outcome when `turn/start` answers, which races
        // the turn's own notifications; it is checked on its own below.
        .filter(|e| {
            !["usage", "session.status", "message.sent"].contains(&e["type"].as_str().unwrap())
        })
        .map(|e| {
            let t = e["type"].as_str().unwrap().to_string();
            match e["data"]["item"]["type"].as_str() {
                Some(item) => format!("{t}:{item}"),
                None => t,
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session.created",
            "session.bound",
            "turn.started",
            "item.completed:userMessage",
            "item.completed:reasoning",
            "item.completed:agentMessage",
            "turn.completed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
        "{events:#?}"
    );
    let started = events.iter().find(|e| e["type"] == "turn.started").unwrap();
    assert_eq!(started["data"]["turnId"], turn_id.as_str());
    assert_eq!(started["data"]["source"], "api");
    let reply = events
        .iter()
        .find(|e| e["data"]["item"]["type"] == "agentMessage")
        .unwrap();
    assert_eq!(reply["data"]["item"]["text"], "Hello from the mock model!");
    let done = events
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap();
    assert_eq!(done["data"]["status"], "completed");
    // Per-session seqs count up from 1 with no gap.
    let session_seqs: Vec<u64> = events
        .iter()
        .map(|e| e["sessionSeq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        session_seqs,
        (1..=session_seqs.len() as u64).collect::<Vec<_>>()
    );
    let sent_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.sent")
        .collect();
    assert_eq!(sent_events.len(), 1, "{:?}", types(&events));
    assert_eq!(sent_events[0]["data"]["turnId"], turn_id.as_str());
}
