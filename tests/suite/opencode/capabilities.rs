//! What else a hosted OpenCode session does: models listed and chosen, doctor, fork, and a
//! daemon killed mid-turn (the session is restored, the cut turn ends `interrupted`, nothing
//! is stored twice, the next prompt completes).

use std::collections::HashMap;

use super::{OpencodeFixture, items, of_type};
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn models_are_listed_a_chosen_model_is_used_and_doctor_reports_opencode() {
    let fx = OpencodeFixture::start();
    let doctor = fx.daemon.get("/api/doctor").assert_ok();
    let section = &doctor["opencode"];
    assert_eq!(section["found"], true, "{doctor}");
    assert_eq!(
        section["version"],
        cohost::peers::OPENCODE.newest,
        "{doctor}"
    );
    assert_eq!(section["versionPlace"], "tested", "{doctor}");
    assert_eq!(section["issues"], json!([]), "{doctor}");

    // Listed before any session runs (a server is started for it).
    let models = fx.daemon.get("/api/models?runtime=opencode").assert_ok();
    assert_eq!(models["ok"], true, "{models}");
    let list = models["data"].as_array().unwrap();
    let ids: Vec<&str> = list.iter().filter_map(|m| m["id"].as_str()).collect();
    assert!(ids.contains(&"mock/mock-model"), "{models}");
    assert!(ids.contains(&"mock/mock-model-2"), "{models}");
    let default = list.iter().find(|m| m["id"] == "mock/mock-model").unwrap();
    assert_eq!(default["isDefault"], true, "{models}");
    assert!(
        !models.to_string().contains("sk-ant-mock"),
        "no provider key leaks: {models}"
    );

    // A session on the second model: the model is asked by that name.
    fx.daemon
        .post(
            "/api/sessions",
            &json!({"runtime": "opencode", "cwd": fx.work, "model": "mock-model-2"}),
        )
        .assert_error(400, "invalid_field", Some("model"));
    let id = fx.create(json!({ "model": "mock/mock-model-2", "approvalPolicy": "never" }));
    fx.mock.push(Step::text("From model two."));
    let turn = fx.send(&id, "Which model?")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let request = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(request.body["model"], "mock-model-2", "{:?}", request.body);

    // Options that do not apply are refused by name.
    for (field, value) in [
        ("sandbox", json!("read-only")),
        ("permissionMode", json!("default")),
        ("approvalPolicy", json!("on-failure")),
        ("terminal", json!(true)),
    ] {
        fx.daemon
            .post(
                "/api/sessions",
                &json!({"runtime": "opencode", "cwd": fx.work, field: value}),
            )
            .assert_error(400, "invalid_field", Some(field));
    }
}

#[test]
fn a_fork_continues_the_conversation_in_a_session_of_its_own() {
    let fx = OpencodeFixture::start();
    let parent = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::text("The secret is 42."));
    let turn = fx.send(&parent, "Remember the parent secret")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_turn(&parent, &turn);

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
    assert_eq!(view["forkedFrom"]["sessionId"], parent.as_str(), "{view}");
    assert_eq!(view["approvalPolicy"], "never", "{view}");
    assert_ne!(
        view["threadId"],
        fx.daemon
            .get(&format!("/api/sessions/{parent}"))
            .assert_ok()["threadId"]
    );

    fx.mock
        .push(Step::text("fork reply").when_user_contains("fork prompt"));
    let turn = fx.send(&child, "fork prompt")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    let done = fx.wait_turn(&child, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&child));
    let request = fx.mock.main_requests().last().cloned().unwrap();
    let body = request.body.to_string();
    assert!(
        body.contains("Remember the parent secret") && body.contains("The secret is 42."),
        "the fork's model sees the parent's conversation: {body}"
    );
    // The parent's events stay its own.
    assert_eq!(of_type(&fx.events(&child), "turn.started").len(), 1);
}

#[test]
fn a_daemon_killed_mid_turn_restores_the_session_without_repeating_an_event() {
    let mut fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "echo one", "description": "Echo one"}),
        ))
        .push(Step::text("First done.").when_tool_result());
    let turn1 = fx.send(&id, "first turn")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_turn(&id, &turn1);

    fx.mock.push(Step::text("A long answer\n").then_hang());
    let turn2 = fx.send(&id, "second turn")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_event(&id, "the second reply to stream", |e| {
        e["type"] == "item.started"
            && e["data"]["turnId"] == turn2.as_str()
            && e["data"]["item"]["type"] == "agentMessage"
    });
    let before = fx.events(&id);
    fx.daemon.kill9();
    fx.daemon.start_again();
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    fx.wait_event(&id, "the session bound again", |e| {
        e["type"] == "session.bound"
            && e["seq"].as_u64() > before.last().and_then(|l| l["seq"].as_u64())
    });

    fx.mock.push(Step::text("Third done."));
    let sent = fx.send(&id, "third turn");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn3 = sent["turnId"].as_str().unwrap().to_string();
    let done = fx.wait_turn(&id, &turn3);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));

    // Nothing stored twice: each turn started and ended once, each item completed once.
    let events = fx.events(&id);
    assert_eq!(
        of_type(&events, "turn.started").len(),
        3,
        "{}",
        fx.dump(&id)
    );
    assert_eq!(
        of_type(&events, "turn.completed").len(),
        3,
        "{}",
        fx.dump(&id)
    );
    let mut completed: HashMap<String, usize> = HashMap::new();
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
    // What was stored before the kill is still there, in the same order.
    let seqs: Vec<u64> = before.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let kept: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .filter(|seq| seqs.contains(seq))
        .collect();
    assert_eq!(kept, seqs);
    assert_eq!(
        items(&events, &turn1, "command").len(),
        1,
        "{}",
        fx.dump(&id)
    );
    assert_eq!(
        items(&events, &turn3, "agentMessage")[0]["text"],
        "Third done."
    );
}
