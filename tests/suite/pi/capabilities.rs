//! What else a hosted Pi session does: its model switched between turns (and the thinking
//! level with it), a fork into a session of its own, a daemon killed mid-turn (the session
//! continues on Pi's session file, nothing stored twice), and Pi killed under a session (lost,
//! prompts refused saying why, resumed by a restart of cohost).

use super::{PiFixture, items, of_type};
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn models_are_listed_and_a_switched_model_answers_the_next_turn() {
    let fx = PiFixture::start();
    let models = fx.daemon.get("/api/models?runtime=pi").assert_ok();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{models}"))
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["mock/mock-model", "mock/mock-model-2"], "{models}");

    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::text("From model one."));
    let turn = fx.start_turn(&id, "Which model are you?");
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let first = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(first.body["model"], "mock-model", "{:?}", first.body);

    // Refused by field: not `provider/model`, or a model Pi does not know.
    let path = format!("/api/sessions/{id}/model");
    fx.daemon
        .put(&path, &json!({ "model": "mock-model-2" }))
        .assert_error(400, "invalid_field", Some("model"));
    let unknown = fx
        .daemon
        .put(&path, &json!({ "model": "mock/nope" }))
        .assert_error(400, "invalid_field", Some("model"));
    assert!(
        unknown.to_string().contains("Model not found"),
        "Pi's reason is given: {unknown}"
    );

    let switched = fx
        .daemon
        .put(
            &path,
            &json!({ "model": "mock/mock-model-2", "thinkingLevel": "off" }),
        )
        .assert_ok();
    assert_eq!(switched["ok"], true, "{switched}");
    assert_eq!(switched["data"]["model"], "mock/mock-model-2", "{switched}");
    assert_eq!(switched["data"]["thinkingLevel"], "off", "{switched}");

    fx.mock.push(Step::text("From model two."));
    let turn2 = fx.start_turn(&id, "And now?");
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let second = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(second.body["model"], "mock-model-2", "{:?}", second.body);
    let body = second.body.to_string();
    assert!(
        body.contains("Which model are you?") && body.contains("From model one."),
        "the conversation goes on under the new model: {body}"
    );
    assert_eq!(
        items(&fx.events(&id), &turn2, "agentMessage")[0]["text"],
        "From model two."
    );
    assert_eq!(of_type(&fx.events(&id), "turn.started").len(), 2);
}

/// `POST …/fork`: a new session whose Pi starts from a copy of the parent's session file
/// (`--fork`): the parent's conversation is in the fork's model requests, a prompt to the fork
/// is answered there only, and the parent goes on unchanged.
#[test]
fn a_fork_continues_the_conversation_in_a_session_of_its_own() {
    let fx = PiFixture::start();
    let parent = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::text("The secret is 42."));
    let turn = fx.start_turn(&parent, "Remember the parent secret");
    let done = fx.wait_turn(&parent, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&parent));

    fx.daemon
        .post(
            &format!("/api/sessions/{parent}/fork"),
            &json!({ "afterTurnId": turn }),
        )
        .assert_error(400, "invalid_field", Some("afterTurnId"));
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{parent}/fork"), &json!({}));
    assert_eq!(resp.status, 201, "{}", resp.body);
    let forked = resp.json();
    assert_eq!(forked["ok"], true, "{forked}");
    let child = forked["data"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(child, parent);
    let view = fx.daemon.get(&format!("/api/sessions/{child}")).assert_ok();
    let parent_view = fx
        .daemon
        .get(&format!("/api/sessions/{parent}"))
        .assert_ok();
    assert_eq!(view["runtime"], "pi", "{view}");
    assert_eq!(view["state"], "live", "{view}");
    assert_eq!(view["forkedFrom"]["sessionId"], parent.as_str(), "{view}");
    assert_eq!(view["approvalPolicy"], "never", "{view}");
    assert!(
        view["threadId"].as_str().is_some_and(|t| !t.is_empty()),
        "{view}"
    );
    assert_ne!(
        view["threadId"], parent_view["threadId"],
        "a Pi session of its own"
    );

    fx.mock
        .push(Step::text("fork reply").when_user_contains("fork prompt"));
    let turn = fx.start_turn(&child, "fork prompt");
    let done = fx.wait_turn(&child, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&child));
    let request = fx.mock.main_requests().last().cloned().unwrap();
    let body = request.body.to_string();
    assert!(
        body.contains("Remember the parent secret") && body.contains("The secret is 42."),
        "the fork's model sees the parent's conversation: {body}"
    );
    assert_eq!(
        items(&fx.events(&child), &turn, "agentMessage")[0]["text"],
        "fork reply"
    );
    // The fork's events are its own; the parent saw nothing of the fork's prompt.
    assert_eq!(of_type(&fx.events(&child), "turn.started").len(), 1);
    assert_eq!(of_type(&fx.events(&parent), "turn.started").len(), 1);

    // The parent goes on without the fork's turn in its conversation.
    fx.mock
        .push(Step::text("parent reply").when_user_contains("parent again"));
    let turn = fx.start_turn(&parent, "parent again");
    let done = fx.wait_turn(&parent, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&parent));
    let request = fx.mock.main_requests().last().cloned().unwrap();
    let body = request.body.to_string();
    assert!(
        body.contains("The secret is 42.") && !body.contains("fork prompt"),
        "the parent's conversation stays its own: {body}"
    );
}

/// `kill -9` of the daemon while a turn waits for an approval (Pi goes with it): the restarted
/// daemon resumes the session on Pi's session file, the cut turn ends `interrupted` once (its
/// approval resolved by the runtime, a late answer refused, the command it asked for closed
/// `interrupted` and never run), nothing stored is repeated, and the next prompt completes
/// with the whole conversation.
#[test]
fn a_daemon_killed_mid_turn_resumes_the_session_without_losing_or_repeating_an_event() {
    let mut fx = PiFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "on-request" }));
    let thread = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok()["threadId"].clone();
    fx.mock
        .push(Step::tool_use("bash", json!({"command": "echo one"})))
        .push(Step::text("First done.").when_tool_result());
    let turn1 = fx.start_turn(&id, "first turn");
    let asked = fx.wait_event(&id, "the first approval", |e| {
        e["type"] == "approval.requested"
    });
    fx.decide(&id, asked["data"]["approvalId"].as_str().unwrap(), "accept")
        .assert_ok();
    let done = fx.wait_turn(&id, &turn1);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));

    fx.mock
        .push(Step::tool_use("bash", json!({"command": "touch cut.txt"})))
        .push(Step::text("Should never come.").when_tool_result());
    let turn2 = fx.start_turn(&id, "second turn");
    let asked = fx.wait_event(&id, "the second approval", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn2.as_str()
    });
    let approval = asked["data"]["approvalId"].as_str().unwrap().to_string();
    let before = fx.events(&id);
    fx.daemon.kill9();
    fx.daemon.start_again_on_the_same_port();

    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    assert_eq!(done["data"]["lost"], true, "{}", fx.dump(&id));
    let last_before = before.last().and_then(|e| e["seq"].as_u64()).unwrap();
    fx.wait_event(&id, "the session bound again", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64() > Some(last_before)
    });
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["state"], "live", "{view}");
    assert_eq!(
        view["threadId"], thread,
        "the same Pi session, resumed: {view}"
    );
    assert_eq!(view["pendingApprovals"], 0, "{view}");
    fx.decide(&id, &approval, "accept")
        .assert_error(409, "approval_resolved", None);

    fx.mock
        .push(Step::text("Third done.").when_user_contains("third turn"));
    let turn3 = fx.start_turn(&id, "third turn");
    let done = fx.wait_turn(&id, &turn3);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let request = fx.mock.main_requests().last().cloned().unwrap();
    let body = request.body.to_string();
    assert!(
        body.contains("first turn") && body.contains("First done.") && body.contains("second turn"),
        "the resumed Pi carries the conversation: {body}"
    );
    assert!(
        !fx.work.join("cut.txt").exists(),
        "the cut command never ran"
    );

    // Each turn started and ended once; every item started was completed, once.
    let events = fx.events(&id);
    for kind in ["turn.started", "turn.completed"] {
        assert_eq!(of_type(&events, kind).len(), 3, "{kind}\n{}", fx.dump(&id));
    }
    let mut completed: std::collections::HashMap<String, usize> = Default::default();
    for event in of_type(&events, "item.completed") {
        *completed
            .entry(event["data"]["item"]["id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert!(
        completed.values().all(|n| *n == 1),
        "an item stored twice: {completed:?}\n{}",
        fx.dump(&id)
    );
    for started in of_type(&events, "item.started") {
        let item_id = started["data"]["item"]["id"].as_str().unwrap();
        assert!(
            completed.contains_key(item_id),
            "item {item_id} never completed\n{}",
            fx.dump(&id)
        );
    }
    let cut = items(&events, &turn2, "command");
    assert_eq!(cut.len(), 1, "{}", fx.dump(&id));
    assert_eq!(cut[0]["status"], "interrupted", "{}", fx.dump(&id));
    let resolved: Vec<_> = of_type(&events, "approval.resolved")
        .into_iter()
        .filter(|e| e["data"]["approvalId"] == approval.as_str())
        .collect();
    assert_eq!(resolved.len(), 1, "{}", fx.dump(&id));
    assert_eq!(resolved[0]["data"]["by"], "runtime");
    // What was stored before the kill is still there, in the same order.
    let seqs: Vec<u64> = before.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let kept: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .filter(|seq| seqs.contains(seq))
        .collect();
    assert_eq!(kept, seqs);
    assert_eq!(
        items(&events, &turn3, "agentMessage")[0]["text"],
        "Third done."
    );
}

/// Pi killed under a live session: the session is `lost`, saying why; a prompt is refused at
/// once with that reason (not after waiting for a Pi that will not come back); a restart of
/// cohost resumes the session — `restarting` first, then bound to a new Pi — and the next
/// prompt completes.
#[test]
fn a_pi_that_dies_leaves_its_session_lost_refusing_prompts_until_a_restart_resumes_it() {
    let mut fx = PiFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.run_turn(&id, "first turn", "First done.");
    let pid = fx.kill_backend(&id);
    fx.wait_event(&id, "the session lost", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "lost"
    });
    fx.assert_refused_as_lost(&id, &format!("pi (pid {pid}) went away"));

    let last = fx
        .events(&id)
        .last()
        .and_then(|e| e["seq"].as_u64())
        .unwrap();
    fx.daemon.kill9();
    fx.daemon.start_again_on_the_same_port();
    fx.wait_event(&id, "the session resumed", |e| {
        e["type"] == "session.status"
            && e["data"]["state"] == "restarting"
            && e["data"]["message"] == "cohost restarted: resuming the session"
            && e["seq"].as_u64() > Some(last)
    });
    fx.wait_event(&id, "the session bound again", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64() > Some(last)
    });
    fx.run_turn(&id, "after the restart", "Back again.");
}
