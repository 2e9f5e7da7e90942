//! Thread capabilities of the codex host against the real app-server: goals (with the autonomous
//! turns an active goal starts), fork, model list, and the chat slash commands.

use serde_json::{Value, json};

use crate::suite::codex::host::{api, completed_items, dump, of_type};
use crate::support::codex_host::{CodexFixture, eventually};
use crate::support::mock_responses::Step;

fn goal(fx: &CodexFixture, id: &str, method: &str, body: Option<Value>) -> Value {
    api(
        &fx.daemon,
        method,
        &format!("/api/sessions/{id}/goal"),
        body.as_ref(),
    )
    .assert_ok()
}

fn command(fx: &CodexFixture, id: &str, text: &str) -> Value {
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/command"),
            &json!({ "text": text }),
        )
        .assert_ok()
}

#[test]
fn a_goal_is_set_runs_turns_on_its_own_and_is_cleared() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));

    let got = goal(&fx, &id, "GET", None);
    assert_eq!(got, json!({ "ok": true, "data": { "goal": null } }));

    let set = goal(
        &fx,
        &id,
        "PUT",
        Some(json!({ "objective": "x", "status": "paused" })),
    );
    assert_eq!(set["ok"], true, "{set}");
    assert_eq!(set["data"]["goal"]["objective"], "x", "{set}");
    assert_eq!(set["data"]["goal"]["status"], "paused", "{set}");
    let got = goal(&fx, &id, "GET", None);
    assert_eq!(got["data"]["goal"]["objective"], "x", "{got}");
    assert_eq!(got["data"]["goal"]["status"], "paused", "{got}");
    fx.wait_event(&id, "goal.updated (paused)", |e| {
        e["type"] == "goal.updated" && e["data"]["goal"]["status"] == "paused"
    });
    assert_eq!(fx.view(&id)["goal"]["objective"], "x");
    assert!(
        fx.mock.main_requests().is_empty(),
        "a paused goal runs nothing"
    );

    // Active with a small budget: codex works on its own until the budget is spent.
    fx.mock
        .set_default(Step::text("Working on it.").usage(3000, 0, 10));
    let set = goal(
        &fx,
        &id,
        "PUT",
        Some(json!({ "status": "active", "tokenBudget": 1000 })),
    );
    assert_eq!(set["ok"], true, "{set}");
    assert_eq!(set["data"]["goal"]["status"], "active", "{set}");
    assert_eq!(set["data"]["goal"]["tokenBudget"], 1000, "{set}");
    let started = fx.wait_event(&id, "a turn started by the goal", |e| {
        e["type"] == "turn.started"
    });
    assert_eq!(
        started["data"]["source"],
        "goal",
        "a turn codex started for the goal: {}",
        dump(&fx.events(&id))
    );
    fx.wait_event(&id, "the goal out of budget", |e| {
        e["type"] == "goal.updated" && e["data"]["goal"]["status"] == "budgetLimited"
    });
    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    assert!(
        completed_items(&events, "userMessage").is_empty(),
        "goal turns have no user message:\n{}",
        dump(&events)
    );
    assert!(
        of_type(&events, "turn.started")
            .iter()
            .all(|e| e["data"]["source"] == "goal"),
        "{}",
        dump(&events)
    );
    // Goal turns had no `turn/start` from cohost.
    assert!(of_type(&events, "message.sent").is_empty());

    let cleared = goal(&fx, &id, "DELETE", None);
    assert_eq!(cleared["ok"], true, "{cleared}");
    assert_eq!(cleared["data"]["cleared"], true, "{cleared}");
    fx.wait_event(&id, "goal.cleared", |e| e["type"] == "goal.cleared");
    assert!(fx.view(&id)["goal"].is_null());
    assert_eq!(goal(&fx, &id, "GET", None)["data"]["goal"], Value::Null);

    // The same through the chat commands.
    let got = command(&fx, &id, "/goal");
    assert_eq!(got, json!({ "ok": true, "data": { "goal": null } }));
    fx.mock.set_default(Step::text("ok"));
    let set = command(&fx, &id, "/goal write the tests");
    assert_eq!(set["ok"], true, "{set}");
    assert_eq!(set["data"]["goal"]["objective"], "write the tests", "{set}");
    let got = command(&fx, &id, "/goal");
    assert_eq!(got["data"]["goal"]["objective"], "write the tests", "{got}");
    let cleared = command(&fx, &id, "/goal clear");
    assert_eq!(cleared["ok"], true, "{cleared}");
    assert_eq!(cleared["data"]["cleared"], true, "{cleared}");
    eventually("a second goal.cleared", || {
        (of_type(&fx.events(&id), "goal.cleared").len() == 2).then_some(())
    });

    // Bad goal bodies never reach codex.
    api(
        &fx.daemon,
        "PUT",
        &format!("/api/sessions/{id}/goal"),
        Some(&json!({ "status": "sleeping" })),
    )
    .assert_error(400, "invalid_field", Some("status"));
    api(
        &fx.daemon,
        "PUT",
        &format!("/api/sessions/{id}/goal"),
        Some(&json!({})),
    )
    .assert_error(400, "invalid_request", None);
}

#[test]
fn a_session_is_forked_with_its_history() {
    let fx = CodexFixture::start();
    let parent = fx.create(json!({ "approvalPolicy": "never" }));

    // Nothing to fork before the first turn has finished (codex has no rollout yet).
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{parent}/fork"), &json!({}));
    assert_eq!(resp.status, 200, "{}", resp.body);
    let refused = resp.json();
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["reason"], "no_active_thread", "{refused}");
    assert!(refused["message"].is_string(), "{refused}");
    let via_command = command(&fx, &parent, "/fork");
    assert_eq!(via_command["reason"], "no_active_thread", "{via_command}");

    fx.mock
        .push(Step::text("parent reply one").when_user_contains("parent prompt one"));
    fx.mock
        .push(Step::text("parent reply two").when_user_contains("parent prompt two"));
    let turn1 = fx.send(&parent, "parent prompt one")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_turns_completed(&parent, 1);

    // Fork the whole thread (no body at all).
    let resp = api(
        &fx.daemon,
        "POST",
        &format!("/api/sessions/{parent}/fork"),
        None,
    );
    assert_eq!(resp.status, 201, "{}", resp.body);
    let forked = resp.json();
    assert_eq!(forked["ok"], true, "{forked}");
    let child = forked["data"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(child, parent);
    let view = fx.view(&child);
    assert_eq!(view["forkedFrom"]["sessionId"], parent.as_str(), "{view}");
    assert_eq!(view["state"], "live", "{view}");
    assert!(view["threadId"].is_string(), "{view}");
    assert_ne!(view["threadId"], fx.view(&parent)["threadId"], "{view}");
    assert_eq!(view["cwd"], fx.view(&parent)["cwd"]);

    let events = fx.events(&child);
    let texts = |events: &[Value], kind: &str| -> Vec<String> {
        completed_items(events, kind)
            .iter()
            .map(|e| e["data"]["item"]["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        texts(&events, "userMessage"),
        ["parent prompt one"],
        "{}",
        dump(&events)
    );
    assert_eq!(
        texts(&events, "agentMessage"),
        ["parent reply one"],
        "{}",
        dump(&events)
    );
    let backfilled = of_type(&events, "turn.completed");
    assert_eq!(backfilled.len(), 1, "{}", dump(&events));
    assert_eq!(backfilled[0]["data"]["turnId"], turn1.as_str());

    // The fork is a session of its own: it takes sends, and its model sees the parent's history.
    fx.mock
        .push(Step::text("fork reply").when_user_contains("fork prompt"));
    let sent = fx.send(&child, "fork prompt");
    assert_eq!(sent["outcome"], "started", "{sent}");
    assert_ne!(sent["turnId"], turn1.as_str());
    fx.wait_turns_completed(&child, 2);
    let events = fx.events(&child);
    assert_eq!(
        texts(&events, "agentMessage"),
        ["parent reply one", "fork reply"],
        "{}",
        dump(&events)
    );
    let request = fx.mock.main_requests().pop().unwrap();
    assert_eq!(request.last_user_text(), "fork prompt");
    assert!(
        request.body["input"]
            .to_string()
            .contains("parent reply one")
    );
    crate::suite::codex::host::assert_no_duplicate_turns_or_items(&events);
    // The parent did not see the fork's turn.
    assert_eq!(of_type(&fx.events(&parent), "turn.started").len(), 1);

    // Fork cut after a turn: only the history up to it.
    fx.send(&parent, "parent prompt two");
    fx.wait_turns_completed(&parent, 2);
    let resp = fx.daemon.post(
        &format!("/api/sessions/{parent}/fork"),
        &json!({ "afterTurnId": turn1 }),
    );
    assert_eq!(resp.status, 201, "{}", resp.body);
    let cut = resp.json()["data"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let view = fx.view(&cut);
    assert_eq!(view["forkedFrom"]["afterTurnId"], turn1.as_str(), "{view}");
    let events = fx.events(&cut);
    assert_eq!(
        texts(&events, "agentMessage"),
        ["parent reply one"],
        "{}",
        dump(&events)
    );

    // `/fork` forks too.
    let via_command = command(&fx, &parent, "/fork");
    assert_eq!(via_command["ok"], true, "{via_command}");
    let third = via_command["data"]["session"]["id"].as_str().unwrap();
    assert_eq!(fx.view(third)["forkedFrom"]["sessionId"], parent.as_str());
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        4,
        "{sessions}"
    );
}

#[test]
fn models_are_listed_for_codex_only() {
    let fx = CodexFixture::start();
    let models = fx.daemon.get("/api/models?runtime=codex").assert_ok();
    assert_eq!(models["ok"], true, "{models}");
    // `data` is the list itself (the page's form control reads it as one).
    let list = models["data"]
        .as_array()
        .expect("data is the list of models");
    assert!(!list.is_empty(), "{models}");
    assert!(list.iter().all(|m| m["id"].is_string()), "{models}");
    // codex is the default runtime.
    let default = fx.daemon.get("/api/models").assert_ok();
    assert_eq!(default["ok"], true, "{default}");

    let claude = fx.daemon.get("/api/models?runtime=claude").assert_ok();
    assert_eq!(claude["ok"], false, "{claude}");
    assert_eq!(claude["reason"], "unsupported", "{claude}");
    assert!(claude["message"].is_string(), "{claude}");

    let id = fx.create(json!({}));
    let via_command = command(&fx, &id, "/models");
    assert_eq!(via_command["ok"], true, "{via_command}");
    assert_eq!(via_command["data"], models["data"]);
    let out = fx.daemon.cli_ok(&["models"]);
    let first = list[0]["id"].as_str().unwrap();
    assert!(out.contains(first), "`cohost models` lists {first}: {out}");
}
