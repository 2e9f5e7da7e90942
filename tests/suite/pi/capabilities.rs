//! What else a hosted Pi session does: its model switched between turns (and the thinking
//! level with it), a fork into a session of its own, and a daemon killed mid-turn (the session
//! continues on Pi's session file, nothing stored twice).

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
