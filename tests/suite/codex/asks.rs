//! What codex asks a person, through cohost, against the real app-server and the Responses
//! mock: questions (`request_user_input` in plan mode), plan approval, MCP elicitations, images
//! in prompts, and the attention notifications with `--notify-command`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::suite::codex::host::{dump, of_type, session_sse};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::{Step, input_items};

fn ask(questions: Value) -> Step {
    Step::function_call("request_user_input", json!({ "questions": questions }))
}

fn color_question() -> Value {
    json!([{
        "id": "color",
        "header": "Color",
        "question": "Which color?",
        "options": [
            { "label": "Red (Recommended)", "description": "warm" },
            { "label": "Blue", "description": "cold" }
        ]
    }])
}

fn set_mode(fx: &CodexFixture, id: &str, mode: &str) -> Value {
    fx.daemon
        .put(
            &format!("/api/sessions/{id}/mode"),
            &json!({ "mode": mode }),
        )
        .assert_ok()
}

fn answer(fx: &CodexFixture, id: &str, request: &str, body: Value) -> crate::support::http::Resp {
    fx.daemon
        .post(&format!("/api/sessions/{id}/requests/{request}"), &body)
}

fn wait_request(fx: &CodexFixture, id: &str, kind: &str) -> Value {
    fx.wait_event(id, &format!("input.requested ({kind})"), |e| {
        e["type"] == "input.requested" && e["data"]["kind"] == kind
    })
}

/// The `output` of the `function_call_output` for `call_id` in any request the mock received.
fn tool_output(fx: &CodexFixture, call_id: &str) -> Option<String> {
    fx.mock
        .received()
        .iter()
        .rev()
        .find_map(|r| r.function_call_output(call_id))
}

fn notifications<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    of_type(events, "notification")
        .into_iter()
        .filter(|e| e["data"]["kind"] == kind)
        .collect()
}

#[test]
fn a_question_answered_over_http_reaches_the_model_and_a_second_answer_is_refused() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    // request_user_input is a plan-mode tool.
    let mode = set_mode(&fx, &id, "plan");
    assert_eq!(mode["ok"], true, "{mode}");
    assert_eq!(fx.view(&id)["mode"], "plan");
    fx.mock.push(ask(color_question()));
    fx.mock.push(Step::text("Blue it is."));
    let sent = fx.send(&id, "Pick a color with me");
    let turn = sent["turnId"].as_str().unwrap().to_string();

    let requested = wait_request(&fx, &id, "question");
    let data = &requested["data"];
    let request = data["requestId"].as_str().unwrap().to_string();
    assert_eq!(data["turnId"], turn.as_str(), "{requested}");
    assert!(request.starts_with(&format!("in:{turn}:")), "{request}");
    assert_eq!(data["questions"][0]["id"], "color", "{requested}");
    assert_eq!(data["questions"][0]["options"][1]["label"], "Blue");
    assert_eq!(
        data["questions"][0]["isOther"], true,
        "codex offers a free-form answer"
    );
    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/requests"))
        .assert_ok();
    assert_eq!(listed["requests"][0]["pending"], true, "{listed}");
    assert_eq!(fx.view(&id)["pendingRequests"], 1);

    // Bad answers name their field and change nothing.
    answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "shape": "Round" } }),
    )
    .assert_error(400, "invalid_field", Some("answers"));
    answer(&fx, &id, &request, json!({ "decision": "accept" })).assert_error(
        400,
        "invalid_field",
        Some("decision"),
    );
    answer(&fx, &id, &request, json!({ "answer": "Blue" })).assert_error(
        400,
        "invalid_field",
        Some("answer"),
    );
    answer(
        &fx,
        &id,
        "in:made:up:question",
        json!({ "answers": { "color": "Blue" } }),
    )
    .assert_error(404, "request_not_found", None);

    let ok = answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "color": "Blue" } }),
    )
    .assert_ok();
    assert_eq!(ok["ok"], true);
    // First answer wins: the second changes nothing.
    answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "color": "Red (Recommended)" } }),
    )
    .assert_error(409, "request_resolved", None);
    fx.wait_turns_completed(&id, 1);

    let output = tool_output(&fx, "call_mock_1")
        .or_else(|| {
            // The call id is the mock's; find it from the item the request named.
            let call = data["itemId"].as_str()?.rsplit(':').next()?.to_string();
            tool_output(&fx, &call)
        })
        .unwrap_or_else(|| {
            panic!(
                "no tool output for the question: {:?}",
                fx.mock.received().len()
            )
        });
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        output,
        json!({ "answers": { "color": { "answers": ["Blue"] } } }),
        "the model gets the answer as the tool's output"
    );
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 1, "{}", dump(&events));
    assert_eq!(resolved[0]["data"]["by"], "api");
    assert_eq!(resolved[0]["data"]["answers"], json!({ "color": ["Blue"] }));
    assert_eq!(fx.view(&id)["pendingRequests"], 0);
    // One input-needed for the question, one turn-ended for the turn.
    let needed = notifications(&events, "input-needed");
    assert_eq!(needed.len(), 1, "{}", dump(&events));
    assert_eq!(needed[0]["data"]["requestId"], request.as_str());
    assert_eq!(
        notifications(&events, "turn-ended").len(),
        1,
        "{}",
        dump(&events)
    );
}

#[test]
fn a_question_whose_turn_is_interrupted_resolves_by_runtime() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    set_mode(&fx, &id, "plan");
    fx.mock.push(ask(color_question()));
    fx.send(&id, "Ask me something");
    let requested = wait_request(&fx, &id, "question");
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true);
    let resolved = fx.wait_event(&id, "input.resolved", |e| {
        e["type"] == "input.resolved" && e["data"]["requestId"] == request.as_str()
    });
    assert_eq!(resolved["data"]["by"], "runtime", "{resolved}");
    answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "color": "Blue" } }),
    )
    .assert_error(409, "request_resolved", None);
    let done = fx.wait_turns_completed(&id, 1);
    assert_eq!(done[0]["data"]["status"], "interrupted");
}

#[test]
fn a_secret_answer_reaches_the_model_but_never_the_log() {
    let mut fx = CodexFixture::start();
    let id = fx.create(json!({}));
    set_mode(&fx, &id, "plan");
    let secret = "hunter2-secret-answer";
    fx.mock.push(ask(json!([{
        "id": "token",
        "header": "Token",
        "question": "Paste the deploy token",
        "isSecret": true,
        "options": [
            { "label": "Staging", "description": "the staging token" },
            { "label": "Production", "description": "the production token" }
        ]
    }])));
    fx.mock.push(Step::text("Thanks."));
    fx.send(&id, "Deploy it");
    let requested = wait_request(&fx, &id, "question");
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    let question = &requested["data"]["questions"][0];
    assert_eq!(
        question["isSecret"], true,
        "codex passes the secret flag through: {requested}"
    );
    answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "token": secret } }),
    )
    .assert_ok();
    fx.wait_turns_completed(&id, 1);
    let call = requested["data"]["itemId"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let output = tool_output(&fx, &call).expect("the tool output");
    assert!(output.contains(secret), "the agent gets it: {output}");
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(
        resolved[0]["data"]["withheld"],
        json!(["token"]),
        "{}",
        dump(&events)
    );
    assert!(!dump(&events).contains(secret), "not in any event");
    let listed = fx.daemon.get(&format!("/api/sessions/{id}/requests")).body;
    assert!(!listed.contains(secret), "not in the request list");
    fx.daemon.stop();
    for entry in std::fs::read_dir(fx.daemon.log_dir()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        assert!(!text.contains(secret), "the secret is in the log file");
    }
    let snapshot =
        std::fs::read_to_string(fx.daemon.home().join("snapshot.json")).unwrap_or_default();
    assert!(!snapshot.contains(secret), "the secret is in the snapshot");
}

#[test]
fn a_plan_is_approved_then_implemented_in_default_mode() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    set_mode(&fx, &id, "plan");
    fx.mock.push(Step::text(
        "Here is my plan.\n<proposed_plan>\n# Greeting\n1. Write hello.txt\n</proposed_plan>\n",
    ));
    fx.send(&id, "Plan a greeting file");
    let requested = wait_request(&fx, &id, "plan");
    let plan = requested["data"]["plan"].as_str().unwrap_or_default();
    assert!(plan.contains("1. Write hello.txt"), "{requested}");
    assert_eq!(requested["data"]["decisions"], json!(["approve", "reject"]));
    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    let plans: Vec<&Value> = of_type(&events, "item.completed")
        .into_iter()
        .filter(|e| e["data"]["item"]["type"] == "plan")
        .collect();
    assert_eq!(
        plans.len(),
        1,
        "the plan item is an event: {}",
        dump(&events)
    );
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    // The plan outlives its turn: still pending after it ended.
    assert_eq!(fx.view(&id)["pendingRequests"], 1);

    answer(
        &fx,
        &id,
        &request,
        json!({ "decision": "approve", "feedback": "x" }),
    )
    .assert_error(400, "invalid_field", Some("feedback"));
    fx.mock.push(Step::text("Implemented."));
    answer(&fx, &id, &request, json!({ "decision": "approve" })).assert_ok();
    fx.wait_turns_completed(&id, 2);
    assert_eq!(fx.view(&id)["mode"], "default");
    let last = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(last.last_user_text(), "Implement the plan.");
    let developer: String = input_items(&last.body)
        .iter()
        .filter(|i| i["role"] == "developer")
        .map(|i| i.to_string())
        .collect();
    assert!(
        developer.contains("Collaboration Mode: Default"),
        "the implementing turn runs in default mode"
    );
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 1, "{}", dump(&events));
    assert_eq!(resolved[0]["data"]["decision"], "approve");
    assert_eq!(resolved[0]["data"]["mode"], "default");
    answer(&fx, &id, &request, json!({ "decision": "reject" })).assert_error(
        409,
        "request_resolved",
        None,
    );
}

#[test]
fn the_plan_streams_as_deltas_and_the_turn_plan_is_an_event() {
    // The mock's model gets no `update_plan` tool unless the config turns it on.
    let fx = CodexFixture::start_with_config(&[], "\n[tools.update_plan]\nenabled = true\n");
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let mut sse = session_sse(&fx.daemon, &id, Some(0), None);
    set_mode(&fx, &id, "plan");
    fx.mock.push(
        Step::text(
            "Here is my plan.\n<proposed_plan>\n# Greeting\n1. Write hello.txt\n2. Say hi\n</proposed_plan>\n",
        )
        .delay(Duration::from_millis(20)),
    );
    fx.send(&id, "Plan a greeting file");
    // The plan item's text streams live (no id), like the agent's message.
    let mut plan_deltas = Vec::new();
    let completed_plan = loop {
        let event = sse.next_event().expect("the stream ended before the plan");
        let value = event.json();
        if value["type"] == "item.delta" && value["data"]["kind"] == "plan" {
            assert!(event.id.is_none(), "deltas are live only: {value}");
            plan_deltas.push(value);
        } else if value["type"] == "item.completed" && value["data"]["item"]["type"] == "plan" {
            break value;
        }
    };
    assert!(!plan_deltas.is_empty(), "plan deltas stream");
    let streamed: String = plan_deltas
        .iter()
        .map(|d| d["data"]["delta"].as_str().unwrap())
        .collect();
    assert!(streamed.contains("1. Write hello.txt"), "{streamed:?}");
    let plan_item = completed_plan["data"]["item"]["id"].as_str().unwrap();
    for delta in &plan_deltas {
        assert_eq!(delta["data"]["itemId"], plan_item, "{delta}");
    }
    fx.wait_turns_completed(&id, 1);

    // In default mode the model keeps a step list with `update_plan`: each update is an event.
    set_mode(&fx, &id, "default");
    let steps = json!([
        { "step": "Write hello.txt", "status": "completed" },
        { "step": "Say hi", "status": "in_progress" }
    ]);
    fx.mock.push(Step::function_call(
        "update_plan",
        json!({ "explanation": "Halfway there", "plan": steps }),
    ));
    fx.mock.push(Step::text("Updated the plan."));
    let turn = fx.send(&id, "Go on")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    fx.wait_turns_completed(&id, 2);
    let events = fx.events(&id);
    let updates = of_type(&events, "turn.plan_updated");
    let received: Vec<String> = fx
        .mock
        .main_requests()
        .iter()
        .map(|r| {
            let tools: Vec<String> = r.body["tools"]
                .as_array()
                .map(|t| t.iter().map(|t| t["name"].to_string()).collect())
                .unwrap_or_default();
            let outputs: Vec<&Value> = input_items(&r.body)
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .collect();
            format!("tools {tools:?} outputs {outputs:?}")
        })
        .collect();
    assert_eq!(updates.len(), 1, "{}\n{received:#?}", dump(&events));
    assert_eq!(
        updates[0]["data"],
        json!({
            "turnId": turn,
            "explanation": "Halfway there",
            "plan": [
                { "step": "Write hello.txt", "status": "completed" },
                { "step": "Say hi", "status": "inProgress" }
            ]
        })
    );
}

#[test]
fn a_rejected_plan_sends_the_feedback_and_stays_in_plan_mode() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    set_mode(&fx, &id, "plan");
    fx.mock.push(Step::text(
        "<proposed_plan>\n# Plan A\n1. Do A\n</proposed_plan>\n",
    ));
    fx.send(&id, "Plan it");
    let requested = wait_request(&fx, &id, "plan");
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    fx.wait_turns_completed(&id, 1);
    fx.mock.push(Step::text("Revised."));
    answer(
        &fx,
        &id,
        &request,
        json!({ "decision": "reject", "feedback": "Use plan B instead" }),
    )
    .assert_ok();
    fx.wait_turns_completed(&id, 2);
    let last = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(last.last_user_text(), "Use plan B instead");
    assert_eq!(fx.view(&id)["mode"], "plan");
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved[0]["data"]["feedback"], "Use plan B instead");
}

#[test]
fn an_image_prompt_reaches_the_model_as_an_image_input() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    fx.mock.push(Step::text("A single pixel."));
    let sent = fx
        .daemon
        .post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": "What is this?", "images": [{ "mediaType": "image/png", "data": png }] }),
        )
        .assert_ok();
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 1);
    let last = fx.mock.main_requests().last().cloned().unwrap();
    let user = input_items(&last.body)
        .iter()
        .rev()
        .find(|i| i["role"] == "user")
        .cloned()
        .unwrap();
    let image = user["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "input_image")
        .unwrap_or_else(|| panic!("no input_image in {user}"));
    assert_eq!(
        image["image_url"],
        format!("data:image/png;base64,{png}"),
        "{image}"
    );
    // Bounded and checked: a bad type, bad base64, too many.
    let bad = |images: Value| {
        fx.daemon.post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": "x", "images": images }),
        )
    };
    bad(json!([{ "mediaType": "image/tiff", "data": png }])).assert_error(
        400,
        "invalid_field",
        Some("images"),
    );
    bad(json!([{ "mediaType": "image/png", "data": "not base64!" }])).assert_error(
        400,
        "invalid_field",
        Some("images"),
    );
    let five: Vec<Value> = (0..5)
        .map(|_| json!({ "mediaType": "image/png", "data": png }))
        .collect();
    bad(json!(five)).assert_error(400, "invalid_field", Some("images"));
}

#[test]
fn notifications_once_per_occurrence_across_a_restart_and_to_the_notify_command() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let out_path = out.path().to_str().unwrap().to_string();
    let command = format!("cat >> '{out_path}'");
    let mut fx = CodexFixture::start_with_args(&["--notify-command", &command]);
    let id = fx.create(json!({}));
    set_mode(&fx, &id, "plan");
    fx.mock.push(ask(color_question()));
    fx.mock.push(Step::text("Done."));
    fx.send(&id, "Ask me");
    let requested = wait_request(&fx, &id, "question");
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    answer(
        &fx,
        &id,
        &request,
        json!({ "answers": { "color": "Blue" } }),
    )
    .assert_ok();
    fx.wait_turns_completed(&id, 1);
    let read_lines = || -> Vec<Value> {
        std::fs::read_to_string(&out_path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while read_lines().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let delivered = read_lines();
    let kinds: Vec<&str> = delivered
        .iter()
        .map(|n| n["data"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["input-needed", "turn-ended"], "{delivered:?}");
    assert_eq!(delivered[0]["type"], "notification");
    assert_eq!(delivered[0]["session"], id.as_str());

    // A restart replays the log: nothing is notified again, nothing stored twice.
    fx.daemon.restart();
    fx.mock.push(Step::text("Second."));
    fx.send(&id, "Once more");
    fx.wait_turns_completed(&id, 2);
    // The second turn's notification, stored and run: a replayed one would have come before it
    // (the restart replays the log before the turn starts).
    fx.daemon.wait_for(
        "the second turn-ended notification, stored and given to the command",
        Duration::from_secs(10),
        |_| {
            (notifications(&fx.events(&id), "turn-ended").len() >= 2 && read_lines().len() >= 3)
                .then_some(())
        },
    );
    let events = fx.events(&id);
    assert_eq!(
        notifications(&events, "input-needed").len(),
        1,
        "{}",
        dump(&events)
    );
    assert_eq!(
        notifications(&events, "turn-ended").len(),
        2,
        "{}",
        dump(&events)
    );
    let ids: Vec<&str> = of_type(&events, "notification")
        .iter()
        .map(|n| n["data"]["id"].as_str().unwrap())
        .collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    let delivered = read_lines();
    let kinds: Vec<&str> = delivered
        .iter()
        .map(|n| n["data"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["input-needed", "turn-ended", "turn-ended"],
        "the command ran once per notification: {delivered:?}"
    );
}

#[test]
fn an_mcp_elicitation_is_declined_then_accepted_with_content() {
    let python = std::env::var("COHOST_TEST_PYTHON")
        .expect("COHOST_TEST_PYTHON (./scripts/test installs the Python MCP SDK and sets it)");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp/elicit_server.py");
    let marker = tempfile::tempdir().unwrap();
    let ready = marker.path().join("listed");
    let extra = format!(
        "[mcp_servers.asker]\ncommand = {python:?}\nargs = [{:?}]\nstartup_timeout_sec = 30\nenv = {{ COHOST_TEST_MCP_READY = {:?} }}\n",
        script.to_str().unwrap(),
        ready.to_str().unwrap()
    );
    let fx = CodexFixture::start_with_config(&[], &extra);
    let id = fx.create(json!({}));
    // codex offers an MCP server's tools once it has listed them: wait for that.
    crate::support::wait_until(
        "codex to list the asker MCP server's tools",
        Duration::from_secs(60),
        || ready.exists().then_some(()),
    );

    // codex asks whether the MCP tool may run as an elicitation of its own, from the server.
    let run_tool = |n: usize, body: Value| -> (Value, Value) {
        fx.mock
            .push(Step::namespaced_call("mcp__asker", "ask_name", json!({})));
        fx.mock.push(Step::text("Done."));
        fx.send(&id, "Ask my name");
        let requested = fx.wait_event(&id, "an elicitation", |e| {
            e["type"] == "input.requested"
                && e["data"]["kind"] == "elicitation"
                && of_type(&fx.events(&id), "input.requested").len() >= n
                && e == of_type(&fx.events(&id), "input.requested")[n - 1]
        });
        let request = requested["data"]["requestId"].as_str().unwrap().to_string();
        answer(&fx, &id, &request, body).assert_ok();
        let done = fx.wait_turns_completed(&id, n);
        let events = fx.events(&id);
        let tool = of_type(&events, "item.completed")
            .into_iter()
            .filter(|e| e["data"]["item"]["name"] == "ask_name")
            .nth(n - 1)
            .cloned()
            .unwrap_or_else(|| panic!("no tool item: {}", dump(&events)));
        assert_eq!(done[n - 1]["data"]["status"], "completed");
        (requested, tool)
    };

    let (requested, tool) = run_tool(1, json!({ "decision": "decline" }));
    let data = &requested["data"];
    assert_eq!(data["server"], "asker", "{requested}");
    assert!(
        data["message"]
            .as_str()
            .unwrap_or("")
            .contains("\"ask_name\""),
        "{requested}"
    );
    assert_eq!(data["schema"]["type"], "object", "{requested}");
    assert_eq!(data["decisions"], json!(["accept", "decline", "cancel"]));
    assert_ne!(
        tool["data"]["item"]["status"], "completed",
        "a declined tool does not run: {tool}"
    );

    let (_, tool) = run_tool(2, json!({ "decision": "accept", "content": {} }));
    let output = tool["data"]["item"]["output"].as_str().unwrap_or_default();
    assert_eq!(tool["data"]["item"]["status"], "completed", "{tool}");
    assert!(output.contains("action="), "the MCP tool ran: {output}");
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 2, "{}", dump(&events));
    assert_eq!(resolved[0]["data"]["decision"], "decline");
    assert_eq!(resolved[1]["data"]["decision"], "accept");
    assert_eq!(resolved[1]["data"]["content"], json!({}));
}

#[test]
fn the_cli_sets_the_mode_lists_requests_and_answers_one() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({}));
    assert_eq!(fx.daemon.cli_ok(&["mode", &id, "plan"]).trim(), "plan");
    let refused = fx
        .daemon
        .cli_command(&["mode", &id, "sideways"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("sideways"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        fx.daemon
            .cli_ok(&["requests", &id])
            .contains("nothing is waiting")
    );
    fx.mock.push(ask(color_question()));
    fx.mock.push(Step::text("Blue."));
    fx.send(&id, "Ask me");
    let requested = wait_request(&fx, &id, "question");
    let request = requested["data"]["requestId"].as_str().unwrap().to_string();
    let listed = fx.daemon.cli_ok(&["requests", &id]);
    assert!(listed.contains(&request), "{listed}");
    assert!(listed.contains("color: Which color?"), "{listed}");
    assert!(listed.contains("Red (Recommended) | Blue"), "{listed}");
    let answered = fx
        .daemon
        .cli_ok(&["answer", &id, &request, "--answer", "color=Blue"]);
    assert!(answered.contains(&request), "{answered}");
    fx.wait_turns_completed(&id, 1);
    let again = fx
        .daemon
        .cli_command(&[
            "answer",
            &id,
            &request,
            "--answer",
            "color=Red (Recommended)",
        ])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already resolved"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let all: Value =
        serde_json::from_str(&fx.daemon.cli_ok(&["requests", &id, "--all", "--json"])).unwrap();
    assert_eq!(
        all["requests"][0]["resolved"]["answers"],
        json!({ "color": ["Blue"] })
    );
    // The slash commands: /plan off, and /answer with nothing pending.
    let off = fx
        .daemon
        .post(
            &format!("/api/sessions/{id}/command"),
            &json!({ "text": "/plan off" }),
        )
        .assert_ok();
    assert_eq!(off["ok"], true, "{off}");
    assert_eq!(fx.view(&id)["mode"], "default");
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/command"),
            &json!({ "text": "/answer Blue" }),
        )
        .assert_error(409, "no_pending_request", None);
}
