//! What Claude asks a person, through cohost, against the real Claude TUI and the Messages mock:
//! `AskUserQuestion` answered over MCP, `ExitPlanMode` rejected with feedback then approved, and
//! plan mode toggled on an idle live session.

use serde_json::{Value, json};

use crate::suite::mcp::{Transport, run_client};
use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

fn questions() -> Value {
    json!([{
        "question": "Which color?",
        "header": "Color",
        "options": [
            { "label": "Red", "description": "warm" },
            { "label": "Blue", "description": "cold" }
        ],
        "multiSelect": false
    }])
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// Every `tool_result` the mock received, in order.
fn tool_results(fx: &ClaudeFixture) -> Vec<Value> {
    fx.mock
        .main_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .collect()
}

fn result_text(result: &Value) -> String {
    match &result["content"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[test]
fn ask_user_question_is_answered_over_mcp_and_the_model_gets_the_choice() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::tool_use(
        "AskUserQuestion",
        json!({ "questions": questions() }),
    ));
    fx.mock.push(Step::text("Blue it is.").when_tool_result());
    let id = fx.create(json!({}));
    let (status, sent) = fx.send(&id, "Pick a color with me");
    assert_eq!(status, 200, "{sent}");
    let requested = fx.wait_event(&id, "input.requested", |e| e["type"] == "input.requested");
    let data = &requested["data"];
    assert_eq!(data["kind"], "question", "{requested}");
    assert_eq!(data["questions"][0]["id"], "Which color?");
    assert_eq!(data["questions"][0]["options"][1]["label"], "Blue");
    let request = data["requestId"].as_str().unwrap().to_string();
    assert_eq!(fx.view(&id)["pendingRequests"], 1);

    let plan = json!([
        { "tool": "list_requests", "arguments": { "session_id": id } },
        { "tool": "answer_request", "arguments": {
            "session_id": id, "request_id": request, "answers": { "Which color?": "Blue" } } },
        { "tool": "answer_request", "arguments": {
            "session_id": id, "request_id": request, "answers": { "Which color?": "Red" } } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    let listed = run.one(0);
    assert_eq!(
        listed["structured"]["requests"][0]["request"]["requestId"],
        request.as_str(),
        "{listed:#}"
    );
    let answered = run.one(1);
    assert_eq!(answered["isError"], false, "{answered:#}");
    let again = run.one(2);
    assert_eq!(again["isError"], true, "{again:#}");
    assert_eq!(again["structured"]["error"]["code"], "request_resolved");

    fx.wait_turns_completed(&id, 1);
    let results = tool_results(&fx);
    assert_eq!(results.len(), 1, "{results:#?}");
    let text = result_text(&results[0]);
    assert!(
        text.contains("\"Which color?\"=\"Blue\""),
        "the model gets the choice: {text}"
    );
    assert_ne!(results[0]["is_error"], true, "{results:#?}");
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 1, "{events:#?}");
    assert_eq!(
        resolved[0]["data"]["answers"],
        json!({ "Which color?": ["Blue"] })
    );
    assert_eq!(
        of_type(&events, "approval.requested").len(),
        0,
        "not an approval"
    );
}

#[test]
fn exit_plan_mode_is_rejected_with_feedback_then_approved() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::tool_use(
        "ExitPlanMode",
        json!({ "plan": "# Plan A\n1. Do A" }),
    ));
    fx.mock.push(
        Step::tool_use("ExitPlanMode", json!({ "plan": "# Plan B\n1. Do B" })).when_tool_result(),
    );
    fx.mock
        .push(Step::text("Implementing plan B.").when_tool_result());
    let id = fx.create(json!({ "permissionMode": "plan" }));
    let (status, sent) = fx.send(&id, "Plan something");
    assert_eq!(status, 200, "{sent}");
    let first = fx.wait_event(&id, "the first plan", |e| {
        e["type"] == "input.requested" && e["data"]["kind"] == "plan"
    });
    let first_id = first["data"]["requestId"].as_str().unwrap().to_string();
    assert_eq!(first["data"]["decisions"], json!(["approve", "reject"]));
    let rejected = fx.daemon.post(
        &format!("/api/sessions/{id}/requests/{first_id}"),
        &json!({ "decision": "reject", "feedback": "Use plan B instead" }),
    );
    rejected.assert_ok();
    let second = fx.wait_event(&id, "the second plan", |e| {
        e["type"] == "input.requested"
            && e["data"]["kind"] == "plan"
            && e["data"]["requestId"] != first_id.as_str()
    });
    let second_id = second["data"]["requestId"].as_str().unwrap().to_string();
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/requests/{second_id}"),
            &json!({ "decision": "approve", "mode": "acceptEdits" }),
        )
        .assert_ok();
    fx.wait_turns_completed(&id, 1);
    let results = tool_results(&fx);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(
        result_text(&results[0]),
        "Use plan B instead",
        "the feedback reaches the model"
    );
    assert_eq!(results[0]["is_error"], true);
    assert_ne!(
        results[1]["is_error"], true,
        "the approved plan: {results:#?}"
    );
    assert!(
        result_text(&results[1]).contains("approved"),
        "{results:#?}"
    );
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 2, "{events:#?}");
    assert_eq!(resolved[0]["data"]["feedback"], "Use plan B instead");
    assert_eq!(resolved[1]["data"]["decision"], "approve");
    assert_eq!(resolved[1]["data"]["mode"], "acceptEdits");
}

#[test]
fn plan_mode_is_toggled_on_an_idle_live_session() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Planning only."));
    fx.mock.push(Step::text("Back to normal."));
    let id = fx.create(json!({}));
    let set = |mode: &str| {
        fx.daemon
            .put(
                &format!("/api/sessions/{id}/mode"),
                &json!({ "mode": mode }),
            )
            .assert_ok()
    };
    // A mode the daemon does not allow is refused by field.
    fx.daemon
        .put(
            &format!("/api/sessions/{id}/mode"),
            &json!({ "mode": "bypassPermissions" }),
        )
        .assert_error(400, "invalid_field", Some("mode"));
    // Wait until the TUI is idle and ready (its first ready box).
    crate::support::codex_host::eventually("the TUI to be ready", || {
        (fx.view(&id)["state"] == "live" && fx.screen(&id).contains('❯')).then_some(())
    });
    let answer = set("plan");
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(
        fx.screen(&id).contains("plan mode on"),
        "{}",
        fx.screen(&id)
    );
    let (status, sent) = fx.send(&id, "Think about it");
    assert_eq!(status, 200, "{sent}");
    fx.wait_turns_completed(&id, 1);
    let seen = fx.wait_event(&id, "permission_mode plan", |e| {
        e["type"] == "session.permission_mode" && e["data"]["mode"] == "plan"
    });
    assert_eq!(seen["data"]["mode"], "plan");
    assert_eq!(fx.view(&id)["mode"], "plan");

    let answer = set("default");
    assert_eq!(answer["ok"], true, "{answer}");
    let (status, sent) = fx.send(&id, "Now do it");
    assert_eq!(status, 200, "{sent}");
    fx.wait_turns_completed(&id, 2);
    fx.wait_event(&id, "permission_mode default again", |e| {
        e["type"] == "session.permission_mode"
            && e["data"]["mode"] == "default"
            && e["seq"].as_u64() > seen["seq"].as_u64()
    });
}

/// Claude's `Notification` hook: the permission dialog it reports (6 s after it opened) is the
/// approval's wait, notified once already; the idle prompt after the turn is a wait of its own.
#[test]
fn claude_waiting_notifies_input_needed_once_per_wait() {
    let fx = ClaudeFixture::start();
    // Claude reports an idle prompt after `messageIdleNotifThresholdMs` (60 s by default).
    let path = fx.env.claude_json();
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["messageIdleNotifThresholdMs"] = json!(1500);
    std::fs::write(&path, config.to_string()).unwrap();
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
    let dialog = fx.wait_event(&id, "the permission dialog reported", |e| {
        e["type"] == "session.attention" && e["data"]["type"] == "permission_prompt"
    });
    assert_eq!(
        dialog["data"]["message"], "Claude needs your permission",
        "{dialog}"
    );
    let input_needed = |events: &[Value]| -> Vec<Value> {
        of_type(events, "notification")
            .into_iter()
            .filter(|e| e["data"]["kind"] == "input-needed")
            .cloned()
            .collect()
    };
    let notified = input_needed(&fx.events(&id));
    assert_eq!(
        notified.len(),
        1,
        "the approval's wait, once: {notified:#?}"
    );
    assert_eq!(notified[0]["data"]["requestId"], approval.as_str());
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "accept" }),
        )
        .assert_ok();
    let done = fx.wait_turns_completed(&id, 1);
    let idle = fx.wait_event(&id, "the idle prompt reported", |e| {
        e["type"] == "session.attention" && e["data"]["type"] == "idle_prompt"
    });
    assert!(idle["seq"].as_u64() > done[0]["seq"].as_u64(), "{idle}");
    let waiting = fx.wait_event(&id, "input-needed for the idle prompt", |e| {
        e["type"] == "notification"
            && e["data"]["kind"] == "input-needed"
            && e["data"]["cause"] == idle["seq"]
    });
    assert_eq!(
        waiting["data"]["body"], "Claude is waiting for your input",
        "{waiting}"
    );
    assert_eq!(waiting["data"]["agent"], "claude");
    assert_eq!(waiting["seq"].as_u64(), idle["seq"].as_u64().map(|s| s + 1));
    let events = fx.events(&id);
    let attention = of_type(&events, "session.attention");
    let notified = input_needed(&events);
    assert_eq!(
        notified.len(),
        1 + attention
            .iter()
            .filter(|e| e["data"]["type"] == "idle_prompt")
            .count(),
        "one per wait: {notified:#?}"
    );
}
