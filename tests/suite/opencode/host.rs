//! The hosted OpenCode session through cohost's HTTP API: start, a streamed turn with a tool
//! call, approvals (accept runs the tool; decline keeps it from running and the model is told;
//! a second answer is refused), and interrupts (mid-stream; with an approval pending, whose
//! late answer never runs the tool).

use super::{OpencodeFixture, PEER, items, of_type};
use crate::support::hosted_cases;
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn a_session_starts_over_http_and_runs_a_tool_turn() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["runtime"], "opencode", "{view}");
    assert_eq!(view["state"], "live", "{view}");
    assert!(
        view["threadId"].as_str().unwrap_or("").starts_with("ses_"),
        "{view}"
    );

    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "echo hi > ran.txt", "description": "Write ran.txt"}),
        ))
        .push(Step::text("It ran.").when_tool_result());
    let sent = fx.send(&id, "Run the command please");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    assert!(turn.starts_with("msg_"), "{sent}");
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));

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
    assert_eq!(replies[0]["text"], "It ran.");
    assert!(fx.work.join("ran.txt").exists(), "the command ran");
    // The tool's start came before its end, and both before the turn's end.
    let position = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        events.iter().position(pred).unwrap_or(usize::MAX)
    };
    let tool_started =
        position(&|e| e["type"] == "item.started" && e["data"]["item"]["type"] == "command");
    let tool_done =
        position(&|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "command");
    let turn_done = position(&|e| e["type"] == "turn.completed");
    assert!(
        tool_started < tool_done && tool_done < turn_done,
        "{}",
        fx.dump(&id)
    );
}

#[test]
fn approvals_run_the_tool_once_accepted_and_never_when_declined() {
    hosted_cases::approvals_run_the_tool_once_accepted_and_never_when_declined(
        &OpencodeFixture::start(),
        &PEER,
    );
}

#[test]
fn an_interrupt_mid_stream_ends_the_turn_and_the_next_prompt_completes() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    assert_eq!(fx.interrupt(&id), json!({ "interrupted": false }));

    fx.mock.push(Step::text("Once upon a time\n").then_hang());
    let turn = fx.send(&id, "Tell me a long story")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_event(&id, "the reply to start", |e| {
        e["type"] == "item.started" && e["data"]["item"]["type"] == "agentMessage"
    });
    fx.mock.wait_for_requests(1, super::TURN_TIMEOUT);
    assert_eq!(fx.interrupt(&id), json!({ "interrupted": true }));
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));

    fx.mock.push(Step::text("The end."));
    let next = fx.send(&id, "Just say the end");
    assert_eq!(next["outcome"], "started", "{next}");
    let turn2 = next["turnId"].as_str().unwrap().to_string();
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

#[test]
fn an_interrupt_settles_a_pending_approval_and_a_late_answer_never_runs_the_tool() {
    hosted_cases::an_interrupt_settles_a_pending_approval_and_a_late_answer_never_runs_the_tool(
        &OpencodeFixture::start(),
        &PEER,
    );
}

/// A new session whose turn waits for the approval of `touch never.txt`: (session, turn,
/// approval).
fn turn_waiting_for_approval(fx: &OpencodeFixture) -> (String, String, String) {
    let id = fx.create(json!({}));
    fx.mock.push(Step::tool_use(
        "bash",
        json!({"command": "touch never.txt", "description": "Create never.txt"}),
    ));
    let turn = fx.send(&id, "Create never.txt")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    (id, turn, approval)
}

/// The approval of `touch never.txt` settled by the runtime: an answer is refused, and the
/// command never ran.
#[track_caller]
fn assert_approval_settled(fx: &OpencodeFixture, id: &str, approval: &str) {
    let resolved = fx.wait_event(id, "the approval settled", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == approval
    });
    assert_eq!(resolved["data"]["by"], "runtime", "{resolved}");
    fx.decide(id, approval, "accept")
        .assert_error(409, "approval_resolved", None);
    assert!(!fx.work.join("never.txt").exists());
}

/// A daemon restarted while it cannot start OpenCode any more (its binary gone): the turn the
/// old server ran ends `interrupted` and lost, its approval settled, and the session is `lost`
/// — not left with a turn open until a restart that can bind it.
#[test]
fn a_daemon_restarted_without_opencode_ends_the_cut_turn_and_leaves_the_session_lost() {
    let link_dir = tempfile::Builder::new()
        .prefix("cohost-opencode-link-")
        .tempdir()
        .unwrap();
    let link = link_dir.path().join("opencode");
    std::os::unix::fs::symlink(super::opencode_bin(), &link).unwrap();
    let mut fx =
        OpencodeFixture::start_with(&[], &[("COHOST_OPENCODE_BIN", link.to_str().unwrap())]);
    let (id, turn, approval) = turn_waiting_for_approval(&fx);
    std::fs::remove_file(&link).unwrap();
    fx.daemon.restart();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    assert_eq!(done["data"]["lost"], true, "{}", fx.dump(&id));
    assert_eq!(
        done["data"]["error"],
        "the daemon stopped during the turn",
        "{}",
        fx.dump(&id)
    );
    fx.wait_event(&id, "the session lost", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "lost"
    });
    assert_approval_settled(&fx, &id, &approval);
    fx.assert_refused_as_lost(&id, "");
}

/// The session's server dies while an approval waits: the turn ends `interrupted` (`lost`),
/// the session is `lost` with the reason, and the approval is settled (an answer is 409).
#[test]
fn a_server_that_dies_ends_the_turn_and_settles_its_pending_approval() {
    let fx = OpencodeFixture::start();
    let (id, turn, approval) = turn_waiting_for_approval(&fx);
    let pid = fx.kill_backend(&id);
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    assert_eq!(done["data"]["lost"], true, "{}", fx.dump(&id));
    let lost = fx.wait_event(&id, "the session lost", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "lost"
    });
    assert!(
        lost["data"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("went away"),
        "{lost}"
    );
    assert_approval_settled(&fx, &id, &approval);
    // A prompt to the lost session is refused at once, saying why (not after waiting for a
    // binding that will not come).
    fx.assert_refused_as_lost(&id, &format!("the opencode server (pid {pid}) went away"));
}
