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
