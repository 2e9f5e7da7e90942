//! The hosted Pi session through cohost's HTTP API: start, a streamed turn with a tool call,
//! approvals through cohost's gate extension (accept runs the tool; decline keeps it from
//! running and the model is told; a second answer is refused), interrupts (mid-stream; with an
//! approval pending, whose late answer never runs the tool), steering and a queued task, and
//! what Pi sessions cannot do (refused, or `unsupported` with the reason).

use super::{PEER, PiFixture, TURN_TIMEOUT, items, of_type};
use crate::support::hosted_cases;
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn a_session_starts_over_http_and_runs_a_streamed_tool_turn() {
    let fx = PiFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["runtime"], "pi", "{view}");
    assert_eq!(view["state"], "live", "{view}");
    assert_eq!(view["approvalPolicy"], "never", "{view}");
    assert!(
        !view["threadId"].as_str().unwrap_or("").is_empty(),
        "bound to pi's session id: {view}"
    );

    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "echo hi > ran.txt"}),
        ))
        .push(Step::text("It ran, all of it.").when_tool_result());
    let turn = fx.start_turn(&id, "Run the command please");
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    assert!(fx.work.join("ran.txt").exists(), "the command ran");

    let events = fx.events(&id);
    let started = of_type(&events, "turn.started");
    assert_eq!(started.len(), 1, "{}", fx.dump(&id));
    assert_eq!(started[0]["data"]["source"], "api");
    let prompts = items(&events, &turn, "userMessage");
    assert_eq!(prompts.len(), 1, "{}", fx.dump(&id));
    assert_eq!(prompts[0]["text"], "Run the command please");
    let commands = items(&events, &turn, "command");
    assert_eq!(commands.len(), 1, "{}", fx.dump(&id));
    assert_eq!(commands[0]["command"], "echo hi > ran.txt");
    assert_eq!(commands[0]["status"], "completed");
    assert_eq!(commands[0]["exitCode"], 0);
    let replies = items(&events, &turn, "agentMessage");
    assert_eq!(replies.len(), 1, "{}", fx.dump(&id));
    assert_eq!(replies[0]["text"], "It ran, all of it.");
    // The tool's start came before its end, the reply after both, and all before the end.
    let position = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        events.iter().position(pred).unwrap_or(usize::MAX)
    };
    let tool_started =
        position(&|e| e["type"] == "item.started" && e["data"]["item"]["type"] == "command");
    let tool_done =
        position(&|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "command");
    let reply_done =
        position(&|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "agentMessage");
    let turn_done = position(&|e| e["type"] == "turn.completed");
    assert!(
        tool_started < tool_done && tool_done < reply_done && reply_done < turn_done,
        "{}",
        fx.dump(&id)
    );
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["lastAgentMessage"], "It ran, all of it.", "{view}");
}

#[test]
fn approvals_run_the_tool_once_accepted_and_never_when_declined() {
    hosted_cases::approvals_run_the_tool_once_accepted_and_never_when_declined(
        &PiFixture::start(),
        &PEER,
    );
}

#[test]
fn an_interrupt_mid_stream_ends_the_turn_and_the_next_prompt_completes() {
    let fx = PiFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    assert_eq!(fx.interrupt(&id), json!({ "interrupted": false }));

    fx.mock.push(Step::text("Once upon a time\n").then_hang());
    let turn = fx.start_turn(&id, "Tell me a long story");
    fx.wait_event(&id, "the reply to start", |e| {
        e["type"] == "item.started" && e["data"]["item"]["type"] == "agentMessage"
    });
    assert_eq!(fx.interrupt(&id), json!({ "interrupted": true }));
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    let events = fx.events(&id);
    let partial = items(&events, &turn, "agentMessage");
    assert_eq!(partial.len(), 1, "{}", fx.dump(&id));
    assert_eq!(partial[0]["interrupted"], true, "{}", fx.dump(&id));

    fx.mock.push(Step::text("The end."));
    let turn2 = fx.start_turn(&id, "Just say the end");
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let events = fx.events(&id);
    assert_eq!(
        items(&events, &turn2, "agentMessage")
            .last()
            .map(|m| m["text"].clone()),
        Some(json!("The end.")),
        "{}",
        fx.dump(&id)
    );
}

/// Pi's `abort` waits while a gate dialog is open: the interrupt cancels it first (stored as
/// resolved by the runtime), the turn ends `interrupted`, a late answer is 409, and the tool
/// never runs.
#[test]
fn an_interrupt_settles_a_pending_approval_and_a_late_answer_never_runs_the_tool() {
    hosted_cases::an_interrupt_settles_a_pending_approval_and_a_late_answer_never_runs_the_tool(
        &PiFixture::start(),
        &PEER,
    );
}

/// A prompt sent while a turn runs steers it (Pi's `steer`: the next model call of the same
/// run carries it; one turn); a task queued through cohost meanwhile waits for the turn's end
/// and runs as a turn of its own.
#[test]
fn a_prompt_while_busy_steers_the_turn_and_a_queued_task_waits_for_its_end() {
    let fx = PiFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock
        .push(
            Step::text("First part of a slow answer.")
                .delay(std::time::Duration::from_millis(1500)),
        )
        .push(Step::text("Saw the steer.").when_user_contains("steer prompt"))
        .push(Step::text("Queued task done.").when_user_contains("queued task"));
    let turn = fx.start_turn(&id, "first prompt");
    fx.mock.wait_for_requests(1, TURN_TIMEOUT);
    let steered = fx.send(&id, "steer prompt");
    assert_eq!(steered["outcome"], "steered", "{steered}");
    assert_eq!(steered["turnId"], turn.as_str(), "{steered}");
    let queued = fx.daemon.post(
        &format!("/api/sessions/{id}/tasks"),
        &json!({ "text": "queued task" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);
    let task = queued.json();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let events = fx.events(&id);
    fx.assert_prompts(&id, &turn, &["first prompt", "steer prompt"]);
    let replies: Vec<&str> = items(&events, &turn, "agentMessage")
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(
        replies,
        ["First part of a slow answer.", "Saw the steer."],
        "{}",
        fx.dump(&id)
    );

    hosted_cases::the_queued_task_runs_as_a_turn_of_its_own(&fx, &id, &task, &turn);
}

/// What does not apply to Pi is refused by field, and what Pi cannot do answers
/// `unsupported` with the reason: no co-driving terminal.
#[test]
fn pi_refuses_what_it_cannot_do_and_says_why() {
    let fx = PiFixture::start();
    for (field, value) in [
        ("sandbox", json!("read-only")),
        ("permissionMode", json!("default")),
        ("approvalPolicy", json!("on-failure")),
        ("terminal", json!(true)),
        ("model", json!("mock-model-2")),
    ] {
        fx.assert_refused(field, value);
    }
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    // No terminal of any kind: the spec, a pane, a relaunch — each says why.
    for resp in [
        fx.daemon.get(&format!("/api/sessions/{id}/terminal")),
        fx.daemon
            .post(&format!("/api/sessions/{id}/terminal"), &json!({})),
        fx.daemon
            .post(&format!("/api/sessions/{id}/relaunch"), &json!({})),
    ] {
        let error = resp.assert_error(400, "unsupported", None);
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("cannot be co-driven")),
            "{error}"
        );
    }
    assert!(
        fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok()["paneId"].is_null(),
        "no pane was opened"
    );
    let doctor = fx.daemon.get("/api/doctor").assert_ok();
    let pi = &doctor["pi"];
    assert_eq!(pi["found"], true, "{doctor:#}");
    assert_eq!(
        pi["version"],
        crate::support::pinned_version(&cohost::peers::PI),
        "{doctor:#}"
    );
    assert_eq!(pi["versionPlace"], "tested", "{doctor:#}");
    assert_eq!(
        pi["approvalPolicies"],
        json!(["untrusted", "on-request", "never"]),
        "{doctor:#}"
    );
    assert!(
        pi["coDriving"]
            .as_str()
            .unwrap_or("")
            .contains("cannot be co-driven"),
        "{doctor:#}"
    );
    assert_eq!(pi["issues"], json!([]), "{doctor:#}");
}
