//! What Claude asks a person, through cohost, against the real Claude TUI and the Messages mock:
//! `AskUserQuestion` answered over MCP, `ExitPlanMode` rejected with feedback then approved, and
//! plan mode toggled on an idle live session.

use serde_json::{Value, json};

use super::mcp::{Transport, run_client};
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
