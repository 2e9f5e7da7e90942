//! Claude-native sessions: the real claude TUI in tmux, driven and followed by the daemon.

use serde_json::json;

use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

#[test]
fn a_turn_is_seen_as_events_in_order_each_item_once() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Hello from the mock."));
    let id = fx.create(json!({}));
    let view = fx.view(&id);
    assert!(view["threadId"].is_string(), "{view}");
    let (status, sent) = fx.send(&id, "Say hello");
    if status != 200 {
        fx.fail(&format!("send answered {status}: {sent}"));
    }
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    let kinds: Vec<String> = events
        .iter()
        .filter(|e| {
            let kind = e["type"].as_str().unwrap();
            // The inject's records race the turn: checked on their own below.
            !["usage", "session.status", "message.sent", "session.pane"].contains(&kind)
                && !kind.starts_with("task.")
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
            "item.completed:agentMessage",
            "turn.completed",
        ],
        "{events:#?}"
    );
    let started = events.iter().find(|e| e["type"] == "turn.started").unwrap();
    assert_eq!(started["data"]["source"], "api");
    assert_eq!(started["data"]["turnId"], sent["turnId"]);
    let reply = events
        .iter()
        .find(|e| e["data"]["item"]["type"] == "agentMessage")
        .unwrap();
    assert_eq!(reply["data"]["item"]["text"], "Hello from the mock.");
    // The prompt is tracked as a task that the turn finished.
    let task = sent["taskId"].as_str().unwrap();
    let view = fx.daemon.get(&format!("/api/tasks/{task}")).assert_ok();
    assert_eq!(view["task"]["state"], "completed", "{view:#}");
    assert_eq!(view["task"]["turnId"], sent["turnId"], "{view:#}");
    assert_eq!(
        view["task"]["resultExcerpt"], "Hello from the mock.",
        "{view:#}"
    );
}

#[test]
fn a_permission_request_is_approved_over_the_api_and_another_denied() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch approved.txt", "description": "Create a file"}),
        )
        .then_text("Created it."),
    );
    let id = fx.create(json!({}));
    let (status, sent) = fx.send(&id, "Make a file");
    assert_eq!(status, 200, "{sent}");
    let requested = fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(requested["data"]["command"], "touch approved.txt");
    let answer = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": "accept" }),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    fx.wait_turns_completed(&id, 1);
    assert!(
        fx.work.join("approved.txt").exists(),
        "the approved command ran"
    );
    let resolved: Vec<_> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "approval.resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["data"]["decision"], "accept");
    // The same id again is stale.
    let again = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": "decline" }),
    );
    again.assert_error(409, "approval_resolved", None);

    fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch denied.txt", "description": "Create another"}),
        )
        .then_text("Understood, I will not."),
    );
    let (status, sent) = fx.send(&id, "Make another file");
    assert_eq!(status, 200, "{sent}");
    let second = fx.wait_event(&id, "a second approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["approvalId"] != approval.as_str()
    });
    let second_id = second["data"]["approvalId"].as_str().unwrap().to_string();
    let answer = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{second_id}"),
        &json!({ "decision": "decline" }),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    fx.wait_turns_completed(&id, 2);
    assert!(
        !fx.work.join("denied.txt").exists(),
        "the denied command did not run"
    );
}

#[test]
fn a_multi_line_prompt_arrives_as_one_prompt() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Got all of it."));
    let id = fx.create(json!({}));
    let text = "Line one\n\n  indented `two` with $HOME and \"quotes\"\nline three";
    let (status, sent) = fx.send(&id, text);
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started");
    fx.wait_turns_completed(&id, 1);
    let main = fx.mock.main_requests();
    assert_eq!(main.len(), 1, "one model request");
    assert_eq!(main[0].last_user_text().trim(), text);
    let users: Vec<_> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["data"]["item"]["type"] == "userMessage")
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["data"]["item"]["text"], text);
}

#[test]
fn injection_is_refused_while_a_human_draft_is_in_the_box() {
    let fx = ClaudeFixture::start();
    let id = fx.create(json!({}));
    let pane = fx.pane(&id);
    fx.tmux
        .run(&["send-keys", "-t", &pane, "-l", "half typed by a human"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !fx.screen(&id).contains("half typed by a human") {
        assert!(
            std::time::Instant::now() < deadline,
            "the draft never showed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, answer) = fx.send(&id, "an injected prompt");
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "human_typing");
    let screen = fx.screen(&id);
    assert!(
        screen.contains("half typed by a human"),
        "the draft is untouched:\n{screen}"
    );
    assert!(
        !screen.contains("an injected prompt"),
        "nothing was typed into it:\n{screen}"
    );
    assert!(fx.mock.main_requests().is_empty());
}
