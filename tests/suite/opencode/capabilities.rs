//! What else a hosted OpenCode session does: models listed, chosen and switched (an unknown
//! one refused; the switch survives a daemon restart), doctor, fork, and a daemon killed
//! mid-turn (the session is restored, the cut turn ends `interrupted`, nothing is stored twice,
//! the next prompt completes).

use std::collections::HashMap;

use super::{OpencodeFixture, items, of_type};
use crate::support::hosted_cases;
use crate::support::json;
use crate::support::mock_messages::Step;

/// Asserts the last main request the mock received asked for `model`.
#[track_caller]
fn assert_asked_last(fx: &OpencodeFixture, model: &str) {
    let request = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(request.body["model"], model, "{}", fx.mock.summary());
}

#[test]
fn models_are_listed_a_chosen_model_is_used_and_doctor_reports_opencode() {
    let mut fx = OpencodeFixture::start();
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
    fx.run_turn(&id, "Which model?", "From model two.");
    assert_asked_last(&fx, "mock-model-2");
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["model"], "mock/mock-model-2", "{view}");

    // Switched to the other model: the next turn's request names it, and the view says so.
    let path = format!("/api/sessions/{id}/model");
    let switched = fx
        .daemon
        .put(&path, &json!({ "model": "mock/mock-model" }))
        .assert_ok();
    assert_eq!(switched["ok"], true, "{switched}");
    assert_eq!(switched["data"]["model"], "mock/mock-model", "{switched}");
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["model"], "mock/mock-model", "{view}");
    let stored = fx.wait_event(&id, "session.model", |e| e["type"] == "session.model");
    assert_eq!(stored["data"]["model"], "mock/mock-model", "{stored}");
    fx.run_turn(&id, "And now?", "From model one.");
    assert_asked_last(&fx, "mock-model");

    // Refused by field, naming the model, and nothing changes: not `provider/model`, an
    // unknown model of a known provider, an unknown provider (OpenCode itself would fail the
    // prompt and every prompt after it).
    for (model, names) in [
        ("mock-model-2", "mock-model-2"),
        ("mock/nope", "mock/nope"),
        ("ghost/mock-model", "ghost"),
    ] {
        let error = fx
            .daemon
            .put(&path, &json!({ "model": model }))
            .assert_error(400, "invalid_field", Some("model"));
        assert!(
            error["message"].as_str().unwrap_or("").contains(names),
            "{error}"
        );
    }
    fx.daemon
        .put(
            &path,
            &json!({ "model": "mock/mock-model-2", "thinkingLevel": "high" }),
        )
        .assert_error(400, "invalid_request", None);
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["model"], "mock/mock-model", "{view}");
    fx.run_turn(&id, "After the refusals", "Still model one.");
    assert_asked_last(&fx, "mock-model");

    // The switch is durable: after a daemon restart (a new server for the session, which was
    // created on model two) the next prompt still names model one.
    let before = fx.events(&id).last().and_then(|e| e["seq"].as_u64());
    fx.daemon.kill9();
    fx.daemon.start_again();
    fx.wait_event(&id, "the session bound again", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64() > before
    });
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["model"], "mock/mock-model", "{view}");
    fx.run_turn(&id, "After the restart", "Model one again.");
    assert_asked_last(&fx, "mock-model");

    // Options that do not apply are refused by name.
    for (field, value) in [
        ("sandbox", json!("read-only")),
        ("permissionMode", json!("default")),
        ("approvalPolicy", json!("on-failure")),
        // A pane's tmux session, without a pane.
        ("tmuxSession", json!("work")),
    ] {
        fx.assert_refused(field, value);
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

    fx.run_turn(&child, "fork prompt", "fork reply");
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

/// A prompt sent while a turn runs joins it (OpenCode folds it into the running loop's next
/// model call: `steered`, one turn, one request carrying it); a task queued through cohost
/// while the turn runs waits for its end and runs as a turn of its own.
#[test]
fn a_prompt_while_busy_joins_the_turn_and_a_queued_task_waits_for_its_end() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock
        .push(
            Step::text("First part of a slow answer, then the rest.")
                .delay(std::time::Duration::from_millis(400)),
        )
        .push(Step::text("Saw the steer.").when_user_contains("steer prompt"))
        .push(Step::text("Queued task done.").when_user_contains("queued task"));
    let turn = fx.send(&id, "first prompt")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.mock.wait_for_requests(1, super::TURN_TIMEOUT);
    // Busy as cohost knows it: the turn's start stored (OpenCode's stream can reach cohost
    // after the model's request reaches the mock).
    fx.wait_event(&id, "the first turn started", |e| {
        e["type"] == "turn.started" && e["data"]["turnId"] == turn.as_str()
    });
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
    assert_eq!(replies.last(), Some(&"Saw the steer."), "{}", fx.dump(&id));

    // The queued task: delivered after the turn, as a turn of its own.
    hosted_cases::the_queued_task_runs_as_a_turn_of_its_own(&fx, &id, &task, &turn);
}

/// Two prompts back to back, the second sent before OpenCode's stream has shown the first
/// one's turn (its `busy` comes most of a second after the prompt): OpenCode runs both in one
/// busy period, so the second is answered `steered` into the first's turn, never `started`
/// with a turn that would never show. The first turn is held open by an approval until both
/// are answered.
#[test]
fn a_prompt_sent_before_the_last_ones_turn_showed_joins_that_turn() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({}));
    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "touch held.txt", "description": "Create held.txt"}),
        ))
        .set_default(Step::text("Both prompts seen."));
    let first = fx.send(&id, "first prompt");
    assert_eq!(first["outcome"], "started", "{first}");
    let turn = first["turnId"].as_str().unwrap().to_string();
    let second = fx.send(&id, "second prompt");
    assert_eq!(second["outcome"], "steered", "{second}\n{}", fx.dump(&id));
    assert_eq!(second["turnId"], turn.as_str(), "{second}");

    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    fx.decide(&id, approval, "accept").assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let events = fx.events(&id);
    fx.assert_prompts(&id, &turn, &["first prompt", "second prompt"]);
    let turns = of_type(&events, "turn.started");
    assert_eq!(turns.len(), 1, "{}", fx.dump(&id));
    assert_eq!(turns[0]["data"]["source"], "api", "{}", fx.dump(&id));
}

/// `opencode attach` on the session's own server: the spec names the server and the
/// session, keeps the password out of argv, redacts it unless asked, and the password it
/// gives opens the server (which refuses anyone without it).
#[test]
fn the_terminal_spec_attaches_opencodes_tui_to_the_sessions_server() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({}));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    let args: Vec<&str> = spec["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(args[0], "attach", "{spec}");
    assert!(args[1].starts_with("http://127.0.0.1:"), "{spec}");
    assert_eq!(
        args[2..4],
        ["--session", view["threadId"].as_str().unwrap()]
    );
    assert_eq!(
        spec["env"]["OPENCODE_SERVER_PASSWORD"], "<redacted>",
        "{spec}"
    );
    let full = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
        .assert_ok();
    let password = full["env"]["OPENCODE_SERVER_PASSWORD"].as_str().unwrap();
    assert_eq!(password.len(), 32, "{full}");
    assert!(
        !full["args"].to_string().contains(password),
        "the password stays out of argv"
    );
    let health = format!("{}/global/health", args[1]);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let refused = agent.get(&health).call().unwrap();
    assert_eq!(refused.status(), 401);
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("opencode:{password}"));
    let mut answer = agent
        .get(&health)
        .header("Authorization", &format!("Basic {basic}"))
        .call()
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body = answer.body_mut().read_to_string().unwrap();
    assert!(body.contains(cohost::peers::OPENCODE.newest), "{body}");
}

/// `cohost start opencode` starts a session from the command line, with its first prompt,
/// and `cohost sessions` lists it.
#[test]
fn the_cli_starts_an_opencode_session() {
    let fx = OpencodeFixture::start();
    fx.mock
        .push(Step::text("Hello from the CLI.").when_user_contains("Say hi"));
    let out = fx.daemon.cli_ok(&[
        "start",
        "opencode",
        "--cwd",
        fx.work.to_str().unwrap(),
        "--approval-policy",
        "never",
        "Say hi",
    ]);
    let id = out.trim().to_string();
    assert!(id.starts_with("cs_"), "{out:?}");
    fx.wait_event(&id, "the first turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["status"] == "completed"
    });
    let events = fx.events(&id);
    let reply = of_type(&events, "item.completed")
        .into_iter()
        .find(|e| e["data"]["item"]["type"] == "agentMessage")
        .unwrap_or_else(|| panic!("no reply:\n{}", fx.dump(&id)));
    assert_eq!(reply["data"]["item"]["text"], "Hello from the CLI.");
    let sessions = fx.daemon.cli_ok(&["sessions"]);
    let line = sessions
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not in `cohost sessions`: {sessions}"));
    assert!(line.contains("opencode") && line.contains("live"), "{line}");
}
