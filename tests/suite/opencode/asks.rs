//! OpenCode's `question` tool through cohost: the question is an input request (listed over
//! HTTP, answered once: the model's next request carries the answer, a second answer is 409),
//! declined (the tool is dismissed, the turn ends), answered in OpenCode itself (as from an
//! attached TUI: cohost's request is resolved by the runtime), and settled by an interrupt
//! (rejected in OpenCode, so nothing stays pending there, and a late answer is 409).

use super::{OpencodeFixture, items, of_type};
use crate::support::json;
use crate::support::mock_messages::Step;
use serde_json::Value;

const QUESTION: &str = "Which colour?";

/// The question tool's input the mock model sends.
fn question_input() -> Value {
    json!({"questions": [{"question": QUESTION, "header": "Colour", "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cold"},
    ]}]})
}

/// Sends `prompt` (the mock answers it with a question) and waits for the input request;
/// returns the turn and the request.
fn ask(fx: &OpencodeFixture, id: &str, prompt: &str) -> (String, Value) {
    fx.mock
        .push(Step::tool_use("question", question_input()).when_user_contains(prompt));
    let turn = fx.send(id, prompt)["turnId"].as_str().unwrap().to_string();
    let requested = fx.wait_event(id, "the question", |e| {
        e["type"] == "input.requested" && e["data"]["turnId"] == turn.as_str()
    });
    (turn, requested["data"].clone())
}

fn answer(
    fx: &OpencodeFixture,
    id: &str,
    request: &str,
    body: Value,
) -> crate::support::http::Resp {
    fx.daemon
        .post(&format!("/api/sessions/{id}/requests/{request}"), &body)
}

/// The session's own `opencode serve` (its address and password, from the terminal spec), to
/// act on it as another client would.
struct Server {
    base: String,
    basic: String,
    agent: ureq::Agent,
}

impl Server {
    fn of(fx: &OpencodeFixture, id: &str) -> Server {
        let spec = fx
            .daemon
            .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
            .assert_ok();
        let password = spec["env"]["OPENCODE_SERVER_PASSWORD"].as_str().unwrap();
        use base64::Engine;
        Server {
            base: spec["args"][1].as_str().unwrap().to_string(),
            basic: base64::engine::general_purpose::STANDARD.encode(format!("opencode:{password}")),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .new_agent(),
        }
    }

    fn pending_questions(&self) -> Value {
        let mut answer = self
            .agent
            .get(&format!("{}/question", self.base))
            .header("Authorization", &format!("Basic {}", self.basic))
            .call()
            .unwrap();
        assert_eq!(answer.status(), 200);
        serde_json::from_str(&answer.body_mut().read_to_string().unwrap()).unwrap()
    }

    fn reply(&self, request: &str, answers: Value) -> u16 {
        self.agent
            .post(&format!("{}/question/{request}/reply", self.base))
            .header("Authorization", &format!("Basic {}", self.basic))
            .header("Content-Type", "application/json")
            .send(json!({ "answers": answers }).to_string())
            .unwrap()
            .status()
            .as_u16()
    }
}

#[test]
fn a_question_is_answered_over_http_once_and_the_model_gets_the_answer() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({}));
    let (turn, request) = ask(&fx, &id, "Pick a colour for me");
    fx.mock.push(Step::text("Blue it is.").when_tool_result());
    let request_id = request["requestId"].as_str().unwrap().to_string();
    assert!(request_id.starts_with("que_"), "{request}");

    // Listed over HTTP, pending, with what OpenCode asks.
    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/requests"))
        .assert_ok();
    let entry = &listed["requests"][0];
    assert_eq!(entry["pending"], true, "{listed}");
    let asked = &entry["request"];
    assert_eq!(asked["kind"], "question", "{listed}");
    assert_eq!(asked["turnId"], turn.as_str(), "{listed}");
    assert_eq!(asked["decisions"], json!(["decline"]), "{listed}");
    let question = &asked["questions"][0];
    assert_eq!(question["id"], QUESTION, "{listed}");
    assert_eq!(question["header"], "Colour", "{listed}");
    assert_eq!(
        question["options"],
        json!([{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cold"}]),
        "{listed}"
    );
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["pendingRequests"], 1, "{view}");

    // An answer to a question it does not ask is refused by field.
    answer(
        &fx,
        &id,
        &request_id,
        json!({"answers": {"Which shape?": "Round"}}),
    )
    .assert_error(400, "invalid_field", Some("answers"));
    answer(
        &fx,
        &id,
        &request_id,
        json!({"answers": {QUESTION: "Blue"}}),
    )
    .assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));

    // The model's next request carries the answer, as the question tool's result.
    let last = fx.mock.main_requests().last().cloned().unwrap();
    let results = last.tool_results();
    assert!(
        results
            .iter()
            .any(|r| r.to_string().contains(r#"\"Which colour?\"=\"Blue\""#)),
        "the model was not told the answer: {results:?}"
    );
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 1, "{}", fx.dump(&id));
    assert_eq!(resolved[0]["data"]["by"], "api");
    assert_eq!(resolved[0]["data"]["answers"], json!({QUESTION: ["Blue"]}));
    let tools = items(&events, &turn, "tool");
    assert_eq!(tools.len(), 1, "{}", fx.dump(&id));
    assert_eq!(tools[0]["name"], "question");
    assert_eq!(tools[0]["status"], "completed");
    assert_eq!(
        request["itemId"], tools[0]["id"],
        "the request names its item"
    );
    assert_eq!(
        items(&events, &turn, "agentMessage")[0]["text"],
        "Blue it is."
    );

    // A second answer.
    answer(&fx, &id, &request_id, json!({"answers": {QUESTION: "Red"}})).assert_error(
        409,
        "request_resolved",
        None,
    );
    answer(&fx, &id, &request_id, json!({"decision": "decline"})).assert_error(
        409,
        "request_resolved",
        None,
    );
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["pendingRequests"], 0, "{view}");
}

#[test]
fn a_declined_question_ends_the_turn_and_one_answered_in_opencode_resolves_the_request() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));

    // Declined: OpenCode dismisses the question, the tool is declined, the turn ends without
    // another model request.
    let (turn, request) = ask(&fx, &id, "Decline this one");
    let request_id = request["requestId"].as_str().unwrap().to_string();
    let asked_before = fx.mock.main_requests().len();
    answer(&fx, &id, &request_id, json!({"decision": "accept"})).assert_error(
        400,
        "invalid_field",
        Some("decision"),
    );
    answer(&fx, &id, &request_id, json!({"decision": "decline"})).assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let events = fx.events(&id);
    let tools = items(&events, &turn, "tool");
    assert_eq!(tools.len(), 1, "{}", fx.dump(&id));
    assert_eq!(tools[0]["status"], "declined", "{}", fx.dump(&id));
    assert_eq!(fx.mock.main_requests().len(), asked_before);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(
        resolved[0]["data"]["decision"],
        "decline",
        "{}",
        fx.dump(&id)
    );
    assert_eq!(resolved[0]["data"]["by"], "api");
    answer(&fx, &id, &request_id, json!({"answers": {QUESTION: "Red"}})).assert_error(
        409,
        "request_resolved",
        None,
    );

    // Answered in OpenCode by another client (as in an attached TUI): cohost's request is
    // resolved by the runtime with that answer, and an answer through cohost is 409.
    let (turn, request) = ask(&fx, &id, "Answer this one elsewhere");
    fx.mock.push(Step::text("Red, then.").when_tool_result());
    let request_id = request["requestId"].as_str().unwrap().to_string();
    let server = Server::of(&fx, &id);
    assert_eq!(server.reply(&request_id, json!([["Red"]])), 200);
    let resolved = fx.wait_event(&id, "the question resolved", |e| {
        e["type"] == "input.resolved" && e["data"]["requestId"] == request_id.as_str()
    });
    assert_eq!(resolved["data"]["by"], "runtime", "{resolved}");
    assert_eq!(
        resolved["data"]["answers"],
        json!({QUESTION: ["Red"]}),
        "{resolved}"
    );
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    answer(
        &fx,
        &id,
        &request_id,
        json!({"answers": {QUESTION: "Blue"}}),
    )
    .assert_error(409, "request_resolved", None);
    let events = fx.events(&id);
    assert_eq!(
        items(&events, &turn, "agentMessage")[0]["text"],
        "Red, then.",
        "{}",
        fx.dump(&id)
    );
}

#[test]
fn an_interrupt_settles_a_pending_question_and_a_late_answer_never_reaches_opencode() {
    let fx = OpencodeFixture::start();
    let id = fx.create(json!({}));
    let (turn, request) = ask(&fx, &id, "Ask and wait");
    let request_id = request["requestId"].as_str().unwrap().to_string();
    let server = Server::of(&fx, &id);
    assert_eq!(
        server.pending_questions()[0]["id"],
        request_id.as_str(),
        "OpenCode holds the question"
    );

    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted, json!({ "interrupted": true }));
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    let events = fx.events(&id);
    let resolved = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 1, "{}", fx.dump(&id));
    assert_eq!(resolved[0]["data"]["requestId"], request_id.as_str());
    assert_eq!(resolved[0]["data"]["by"], "runtime");
    // OpenCode keeps a question past an abort: cohost rejected it, so none is left.
    assert_eq!(server.pending_questions(), json!([]), "{}", fx.dump(&id));

    // The late answer is refused by cohost and never reaches OpenCode; the next prompt
    // completes.
    answer(
        &fx,
        &id,
        &request_id,
        json!({"answers": {QUESTION: "Blue"}}),
    )
    .assert_error(409, "request_resolved", None);
    fx.mock
        .push(Step::text("Nothing else.").when_user_contains("Anything else?"));
    let turn2 = fx.send(&id, "Anything else?")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    let last = fx.mock.main_requests().last().cloned().unwrap();
    assert!(
        !last.body.to_string().contains(r#"\"Which colour?\"=\""#),
        "no answer reached the model: {}",
        last.body
    );
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["pendingRequests"], 0, "{view}");
}
