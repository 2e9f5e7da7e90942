//! The forwarder on message sequences codex 0.169's app-server sent, as recorded by the probes
//! behind `docs/peers.md` (one turn, a tool call, an approval, a question, an interrupt with an
//! approval pending, a steer, model errors), each checked against the effects expected, in
//! order. Lines starting `<<` are literal; bare JSON lines are trimmed to the fields read, or built
//! in the recorded shape where a probe's exact sequence was not kept (each test says which). No
//! process, no socket.

use std::collections::HashMap;

use serde_json::Value;

use super::{Effect, Forwarder, SessionFacts};
use crate::protocol::{EventKind, Item};
use crate::runtime::codex::rpc::RequestId;
use crate::runtime::codex::wire::ServerNotification;

#[derive(Default, Clone, Copy)]
struct Facts {
    goal_active: bool,
    has_goal: bool,
    has_terminal: bool,
}

impl SessionFacts for Facts {
    fn goal_active(&self) -> bool {
        self.goal_active
    }
    fn has_goal(&self) -> bool {
        self.has_goal
    }
    fn has_terminal(&self) -> bool {
        self.has_terminal
    }
}

/// Feeds recorded lines (`<< {...}` as the probes wrote them, or bare JSON) to `forwarder` the way
/// the dispatch task does: a line with an `id` is a server request, any other a notification.
fn feed(forwarder: &mut Forwarder, facts: Facts, lines: &[&str]) -> Vec<String> {
    let mut shown = Vec::new();
    for line in lines {
        let message: Value = serde_json::from_str(line.trim().trim_start_matches("<<").trim())
            .unwrap_or_else(|e| panic!("{e}: {line}"));
        let method = message["method"].as_str().unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let effects = match message.get("id") {
            Some(id) => {
                let id: RequestId = serde_json::from_value(id.clone()).unwrap();
                Forwarder::request(id, method, &params)
            }
            None => forwarder.apply(ServerNotification::parse(method, &params), &facts),
        };
        shown.extend(effects.iter().map(show));
    }
    shown
}

/// Runs `lines` through a fresh forwarder and compares every effect, in order.
fn check(lines: &[&str], expected: &[&str]) {
    check_with(&mut Forwarder::default(), Facts::default(), lines, expected);
}

fn check_with(forwarder: &mut Forwarder, facts: Facts, lines: &[&str], expected: &[&str]) {
    let got = feed(forwarder, facts, lines);
    // One effect per line, so a failure shows where the sequences part.
    assert_eq!(got.join("\n"), expected.join("\n"));
}

fn show(effect: &Effect) -> String {
    match effect {
        Effect::Touch => "touch".into(),
        Effect::Store(kind) => format!("store {}", event(kind)),
        Effect::Publish(kind) => format!("publish {}", event(kind)),
        Effect::Report(status) => format!("report {status:?}"),
        Effect::RequestResolved(id) => format!("request resolved {id}"),
        Effect::TurnEnded => "turn ended".into(),
        Effect::HoldApproval {
            approval_id,
            rpc_id,
        } => format!("hold approval {approval_id} for request {rpc_id}"),
        Effect::HoldInput { request_id, rpc_id } => {
            format!("hold input {request_id} for request {rpc_id}")
        }
        Effect::Refuse { rpc_id, method } => format!("refuse request {rpc_id} {method}"),
    }
}

fn event(kind: &EventKind) -> String {
    let detail = match kind {
        EventKind::TurnStarted(t) => format!("{} {:?}", t.turn_id, t.source),
        EventKind::TurnCompleted(t) => format!("{} {:?} {:?}", t.turn_id, t.status, t.error),
        EventKind::ItemStarted(i) | EventKind::ItemCompleted(i) => item(&i.item),
        EventKind::ItemDelta(d) => format!("{} {} {:?}", d.item_id, d.kind, d.delta),
        EventKind::ApprovalRequested(a) => format!("{} {:?}", a.approval_id, a.item_id),
        EventKind::InputRequested(r) => format!("{} {:?}", r.request_id, r.kind),
        EventKind::Error(e) => format!("{:?} {:?}", e.message, e.code),
        EventKind::Usage(u) => format!("{} total {}", u.turn_id, u.total.total),
        _ => String::new(),
    };
    format!("{} {detail}", kind.type_name())
        .trim_end()
        .to_string()
}

fn item(item: &Item) -> String {
    match item {
        Item::UserMessage { id, text } => format!("{id} user {text:?}"),
        Item::AgentMessage {
            id,
            text,
            interrupted,
        } => format!(
            "{id} agent {text:?}{}",
            if *interrupted { " interrupted" } else { "" }
        ),
        Item::Reasoning { id, summary } => format!("{id} reasoning {summary:?}"),
        Item::Command { id, status, .. } => format!("{id} command {status}"),
        Item::FileChange { id, status, .. } => format!("{id} fileChange {status}"),
        Item::Tool {
            id, name, status, ..
        } => format!("{id} tool {name} {status}"),
        Item::Plan { id, text } => format!("{id} plan {text:?}"),
        Item::Other { id, kind } => format!("{id} {kind}"),
    }
}

// `wire/s02_turn`: one turn, one of each notification (deltas collapsed to one of each kind).
const TURN: [&str; 16] = [
    r#"<< {"method":"thread/status/changed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","status":{"type":"active","activeFlags":[]}},"emittedAtMs":1795957718137}"#,
    r#"<< {"method":"turn/started","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":1795957718,"completedAt":null,"durationMs":null}},"emittedAtMs":1795957718137}"#,
    r#"<< {"method":"warning","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","message":"Model metadata for `mock-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."},"emittedAtMs":1795957718104}"#,
    r#"<< {"method":"item/started","params":{"item":{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":null},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","startedAtMs":1795957718151},"emittedAtMs":1795957718151}"#,
    r#"<< {"method":"item/completed","params":{"item":{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":1795957718151},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718151},"emittedAtMs":1795957718153}"#,
    r#"<< {"method":"item/started","params":{"item":{"type":"reasoning","id":"rs_2dd21b680a72","summary":[],"content":[],"startedAtMs":1795957718192,"completedAtMs":null},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","startedAtMs":1795957718192},"emittedAtMs":1795957718192}"#,
    r#"<< {"method":"item/reasoning/summaryPartAdded","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"rs_2dd21b680a72","summaryIndex":0},"emittedAtMs":1795957718193}"#,
    r#"<< {"method":"item/reasoning/summaryTextDelta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"rs_2dd21b680a72","delta":"Thinking ","summaryIndex":0},"emittedAtMs":1795957718193}"#,
    r#"<< {"method":"item/completed","params":{"item":{"type":"reasoning","id":"rs_2dd21b680a72","summary":["Thinking about the greeting."],"content":[],"startedAtMs":1795957718192,"completedAtMs":1795957718394},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718394},"emittedAtMs":1795957718398}"#,
    r#"<< {"method":"item/started","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":null},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","startedAtMs":1795957718399},"emittedAtMs":1795957718399}"#,
    r#"<< {"method":"item/agentMessage/delta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"msg_edb77357f05a","delta":"Hello "},"emittedAtMs":1795957718400}"#,
    r#"<< {"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718647},"emittedAtMs":1795957718649}"#,
    r#"<< {"method":"thread/tokenUsage/updated","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","tokenUsage":{"total":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"last":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"modelContextWindow":258400}},"emittedAtMs":1795957718655}"#,
    r#"<< {"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}},"emittedAtMs":1795957718655}"#,
    r#"<< {"method":"thread/status/changed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","status":{"type":"idle"}},"emittedAtMs":1795957718663}"#,
    r#"<< {"method":"turn/completed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795957718,"completedAt":1795957718,"durationMs":553}},"emittedAtMs":1795957718663}"#,
];

const T: &str = "01a2276b-fc56-70f0-a40b-38adadde74a3";

#[test]
fn a_turn_stores_its_start_items_usage_and_end_in_order() {
    let expected = [
        "touch".to_string(),
        format!("store turn.started {T} Other"),
        "report Running".to_string(),
        format!(
            r#"store item.completed {T}:01a2276b-fc86-7740-a55e-f2b63515f5e7 user "Say hello""#
        ),
        format!(r#"publish item.delta {T}:rs_2dd21b680a72 reasoning "Thinking ""#),
        format!(
            r#"store item.completed {T}:rs_2dd21b680a72 reasoning ["Thinking about the greeting."]"#
        ),
        format!(r#"publish item.delta {T}:msg_edb77357f05a agentMessage "Hello ""#),
        format!(r#"store item.completed {T}:msg_edb77357f05a agent "Hello from the mock model!""#),
        format!("store usage {T} total 1234"),
        format!("store turn.completed {T} Completed None"),
        "report Done".to_string(),
        "turn ended".to_string(),
    ];
    check(
        &TURN,
        &expected.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

#[test]
fn a_turn_cohost_started_is_an_api_turn_and_the_running_turn_is_tracked() {
    let mut forwarder = Forwarder {
        pending_api: 1,
        ..Forwarder::default()
    };
    let got = feed(&mut forwarder, Facts::default(), &TURN[1..2]);
    assert_eq!(got[1], format!("store turn.started {T} Api"));
    assert_eq!(forwarder.pending_api, 0);
    assert_eq!(forwarder.current.as_deref(), Some(T));
    feed(&mut forwarder, Facts::default(), &TURN[15..]);
    assert_eq!(forwarder.current, None);
}

#[test]
fn a_turn_nobody_here_started_is_a_goal_turn_then_a_terminal_turn() {
    let goal = Facts {
        goal_active: true,
        has_goal: true,
        has_terminal: true,
    };
    let got = feed(&mut Forwarder::default(), goal, &TURN[1..2]);
    assert_eq!(got[1], format!("store turn.started {T} Goal"));
    let terminal = Facts {
        has_terminal: true,
        ..Facts::default()
    };
    let got = feed(&mut Forwarder::default(), terminal, &TURN[1..2]);
    assert_eq!(got[1], format!("store turn.started {T} Terminal"));
}

// `wire/s03_exec`: a command runs without approval (policy `never`).
#[test]
fn a_command_is_stored_when_it_starts_and_when_it_completes() {
    check(
        &[
            r#"<< {"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_2_0ea7db88","pluginId":null,"scriptPath":null,"command":"/bin/bash -lc 'echo hi'","cwd":"$PROBE/work","processId":"52895","source":"unifiedExecStartup","status":"inProgress","commandActions":[{"type":"unknown","command":"echo hi"}],"aggregatedOutput":null,"exitCode":null,"durationMs":null,"startedAtMs":1795957720106,"completedAtMs":null},"threadId":"01a2276c-0314-7c23-9d88-f6b93044f24e","turnId":"01a2276c-032e-7ed0-adda-9c729a9781c6","startedAtMs":1795957720106},"emittedAtMs":1795957720108}"#,
            r#"<< {"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_2_0ea7db88","pluginId":null,"scriptPath":null,"command":"/bin/bash -lc 'echo hi'","cwd":"$PROBE/work","processId":"52895","source":"unifiedExecStartup","status":"completed","commandActions":[{"type":"unknown","command":"echo hi"}],"aggregatedOutput":"pyenv: cannot rehash: $HOME/.pyenv/shims isn't writable\nhi\n","exitCode":0,"durationMs":0,"startedAtMs":1795957720106,"completedAtMs":1795957720108},"threadId":"01a2276c-0314-7c23-9d88-f6b93044f24e","turnId":"01a2276c-032e-7ed0-adda-9c729a9781c6","contentTokenCount":null,"completedAtMs":1795957720108},"emittedAtMs":1795957720110}"#,
            r#"{"method":"turn/completed","params":{"threadId":"01a2276c-0314-7c23-9d88-f6b93044f24e","turn":{"id":"01a2276c-032e-7ed0-adda-9c729a9781c6","items":[],"status":"completed","error":null,"durationMs":900}}}"#,
        ],
        &[
            "store item.started 01a2276c-032e-7ed0-adda-9c729a9781c6:call_2_0ea7db88 command inProgress",
            "store item.completed 01a2276c-032e-7ed0-adda-9c729a9781c6:call_2_0ea7db88 command completed",
            "store turn.completed 01a2276c-032e-7ed0-adda-9c729a9781c6 Completed None",
            "report Done",
            "turn ended",
        ],
    );
}

// `s04a`: an approval requested while the command waits, answered, then the turn goes on.
#[test]
fn an_approval_requested_mid_turn_is_held_stored_and_resolved() {
    check(
        &[
            r#"<< {"method":"thread/status/changed","params":{"threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","status":{"type":"active","activeFlags":["waitingOnApproval"]}},"emittedAtMs":1795957721535}"#,
            r#"<< {"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_4_9f701721","pluginId":null,"scriptPath":null,"command":"/bin/bash -lc 'touch approved.txt'","cwd":"$PROBE/work","processId":null,"source":"agent","status":"inProgress","commandActions":[{"type":"unknown","command":"touch approved.txt"}],"aggregatedOutput":null,"exitCode":null,"durationMs":null,"startedAtMs":1795957721535,"completedAtMs":null},"threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","turnId":"01a2276c-0957-7223-a020-d4df7b389d7e","startedAtMs":1795957721535},"emittedAtMs":1795957721536}"#,
            r#"<< {"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","turnId":"01a2276c-0957-7223-a020-d4df7b389d7e","itemId":"call_4_9f701721","startedAtMs":1795957721535,"environmentId":"local","command":"/bin/bash -lc 'touch approved.txt'","cwd":"$PROBE/work","commandActions":[{"type":"unknown","command":"touch approved.txt"}],"proposedExecpolicyAmendment":["touch","approved.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","approved.txt"]}},"cancel"]}}"#,
            r#"<< {"method":"serverRequest/resolved","params":{"threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","requestId":0},"emittedAtMs":1795957721537}"#,
        ],
        &[
            "store item.started 01a2276c-0957-7223-a020-d4df7b389d7e:call_4_9f701721 command inProgress",
            "hold approval ap:01a2276c-0957-7223-a020-d4df7b389d7e:call_4_9f701721:command for request 0",
            r#"store approval.requested ap:01a2276c-0957-7223-a020-d4df7b389d7e:call_4_9f701721:command Some("01a2276c-0957-7223-a020-d4df7b389d7e:call_4_9f701721")"#,
            "report Waiting",
            "request resolved 0",
        ],
    );
}

// `s04e` and a request nothing relays.
#[test]
fn a_question_is_held_as_an_input_request_and_other_requests_are_refused() {
    check(
        &[
            r#"<< {"method":"item/tool/requestUserInput","id":0,"params":{"threadId":"01a2276c-20f0-7411-91c7-7d5ac1cf6cdc","turnId":"01a2276c-2108-76c2-ae9f-e10e01185d69","itemId":"call_12_0d3ad089","questions":[{"id":"confirm_path","header":"Confirm","question":"Proceed with the plan?","isOther":true,"isSecret":false,"options":[{"label":"Yes (Recommended)","description":"Continue the current plan."},{"label":"No","description":"Stop and revisit the approach."}]}],"isBlocking":false,"autoResolutionMs":null}}"#,
            r#"{"method":"account/chatgptAuthTokens/refresh","id":1,"params":{"threadId":"01a2276c-20f0-7411-91c7-7d5ac1cf6cdc"}}"#,
        ],
        &[
            "hold input in:01a2276c-2108-76c2-ae9f-e10e01185d69:call_12_0d3ad089:question for request 0",
            "store input.requested in:01a2276c-2108-76c2-ae9f-e10e01185d69:call_12_0d3ad089:question Question",
            "report Waiting",
            "refuse request 1 account/chatgptAuthTokens/refresh",
        ],
    );
}

// `s04g`: a command waits on an approval, the turn is interrupted; codex sends no
// `item/completed` for the command, and the partial answer it streamed is dropped. The turn's end
// and the request's resolution are literal; the start, the deltas and the command item are built
// in the shape of `s02`/`s04a`'s.
#[test]
fn an_interrupted_turn_closes_its_open_items_and_keeps_the_streamed_text() {
    check(
        &[
            r#"{"method":"turn/started","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","turn":{"id":"01a2276c-31d6-7dd2-a865-40b76229009e","items":[],"status":"inProgress","error":null}}}"#,
            r#"{"method":"item/agentMessage/delta","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","turnId":"01a2276c-31d6-7dd2-a865-40b76229009e","itemId":"msg_1","delta":"I will "}}"#,
            r#"{"method":"item/agentMessage/delta","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","turnId":"01a2276c-31d6-7dd2-a865-40b76229009e","itemId":"msg_1","delta":"touch it."}}"#,
            r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_9","command":"/bin/bash -lc 'touch x'","cwd":"/w","status":"inProgress"},"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","turnId":"01a2276c-31d6-7dd2-a865-40b76229009e"}}"#,
            r#"<< {"method":"thread/status/changed","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","status":{"type":"idle"}},"emittedAtMs":1795957731896}"#,
            r#"<< {"method":"turn/completed","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","turn":{"id":"01a2276c-31d6-7dd2-a865-40b76229009e","rootTurnId":"01a2276c-31d6-7dd2-a865-40b76229009e","items":[],"itemsView":"notLoaded","status":"interrupted","error":null,"startedAt":1795957731,"completedAt":1795957731,"durationMs":93}},"emittedAtMs":1795957731896}"#,
            r#"<< {"method":"serverRequest/resolved","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","requestId":0},"emittedAtMs":1795957731896}"#,
        ],
        &[
            "touch",
            "store turn.started 01a2276c-31d6-7dd2-a865-40b76229009e Other",
            "report Running",
            r#"publish item.delta 01a2276c-31d6-7dd2-a865-40b76229009e:msg_1 agentMessage "I will ""#,
            r#"publish item.delta 01a2276c-31d6-7dd2-a865-40b76229009e:msg_1 agentMessage "touch it.""#,
            "store item.started 01a2276c-31d6-7dd2-a865-40b76229009e:call_9 command inProgress",
            "store item.completed 01a2276c-31d6-7dd2-a865-40b76229009e:call_9 command interrupted",
            r#"store item.completed 01a2276c-31d6-7dd2-a865-40b76229009e:msg_1 agent "I will touch it." interrupted"#,
            "store turn.completed 01a2276c-31d6-7dd2-a865-40b76229009e Interrupted None",
            "report Interrupted",
            "turn ended",
            "request resolved 0",
        ],
    );
}

// `wire/s05_steer` (instant interrupt): the steer abandons the streaming answer, which gets no
// `item/completed`; the turn then completes with a new answer (lines built in the recorded
// shape, with the probe's ids and texts).
#[test]
fn a_stream_a_completed_turn_abandoned_is_dropped() {
    check(
        &[
            r#"{"method":"item/agentMessage/delta","params":{"threadId":"01a2276c-3aec-7701-8036-044891b86e10","turnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8","itemId":"msg_a","delta":"one two "}}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"userMessage","id":"u2","content":[{"type":"text","text":"Actually, keep it short.","text_elements":[]}]},"threadId":"01a2276c-3aec-7701-8036-044891b86e10","turnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"}}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"msg_b","text":"Steer received: Actually, keep it short."},"threadId":"01a2276c-3aec-7701-8036-044891b86e10","turnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"}}"#,
            r#"{"method":"turn/completed","params":{"threadId":"01a2276c-3aec-7701-8036-044891b86e10","turn":{"id":"01a2276c-3b0c-7d93-960f-a7f556ec75d8","items":[],"status":"completed","error":null}}}"#,
        ],
        &[
            r#"publish item.delta 01a2276c-3b0c-7d93-960f-a7f556ec75d8:msg_a agentMessage "one two ""#,
            r#"store item.completed 01a2276c-3b0c-7d93-960f-a7f556ec75d8:u2 user "Actually, keep it short.""#,
            r#"store item.completed 01a2276c-3b0c-7d93-960f-a7f556ec75d8:msg_b agent "Steer received: Actually, keep it short.""#,
            "store turn.completed 01a2276c-3b0c-7d93-960f-a7f556ec75d8 Completed None",
            "report Done",
            "turn ended",
        ],
    );
}

// `wire/s11_model_errors`: the error is stored, then the turn fails.
#[test]
fn a_model_error_is_stored_and_the_turn_fails() {
    check(
        &[
            r#"<< {"method":"error","params":{"error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"willRetry":false,"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d"},"emittedAtMs":1795957768863}"#,
            r#"<< {"method":"turn/completed","params":{"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turn":{"id":"01a2276c-c22a-7780-b174-dbbe00fbb40d","rootTurnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d","items":[],"itemsView":"notLoaded","status":"failed","error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"startedAt":1795957768,"completedAt":1795957768,"durationMs":114}},"emittedAtMs":1795957768872}"#,
            r#"<< {"method":"error","params":{"error":{"message":"stream disconnected before completion: mock response.failed","codexErrorInfo":"other","additionalDetails":null,"misalignment":null},"willRetry":false,"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turnId":"01a2276c-c49f-7642-8d75-7ff058c5f5f3"},"emittedAtMs":1795957769439}"#,
            r#"<< {"method":"thread/status/changed","params":{"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","status":{"type":"systemError"}},"emittedAtMs":1795957768863}"#,
        ],
        &[
            r#"store error "We’re currently experiencing high demand, which may cause temporary errors." Some("internalServerError")"#,
            r#"store turn.completed 01a2276c-c22a-7780-b174-dbbe00fbb40d Failed Some("We’re currently experiencing high demand, which may cause temporary errors.")"#,
            "report Error",
            "turn ended",
            r#"store error "stream disconnected before completion: mock response.failed" Some("other")"#,
        ],
    );
}

// Two sessions on one backend: the dispatch task routes by `threadId` to each session's own
// forwarder; a thread it does not host is dropped, and a turn's end closes only its own items.
#[test]
fn each_thread_is_forwarded_to_its_own_session() {
    let lines = [
        r#"{"method":"turn/started","params":{"threadId":"th-a","turn":{"id":"tu-a","status":"inProgress"}}}"#,
        r#"{"method":"turn/started","params":{"threadId":"th-b","turn":{"id":"tu-b","status":"inProgress"}}}"#,
        r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c1","command":"sleep 5","status":"inProgress"},"threadId":"th-a","turnId":"tu-a"}}"#,
        r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c2","command":"sleep 5","status":"inProgress"},"threadId":"th-b","turnId":"tu-b"}}"#,
        r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c3","command":"ls","status":"inProgress"},"threadId":"th-elsewhere","turnId":"tu-x"}}"#,
        r#"{"method":"turn/completed","params":{"threadId":"th-b","turn":{"id":"tu-b","status":"interrupted"}}}"#,
        r#"{"method":"turn/completed","params":{"threadId":"th-a","turn":{"id":"tu-a","status":"completed"}}}"#,
    ];
    let threads: HashMap<String, String> = [("th-a", "s-a"), ("th-b", "s-b")]
        .map(|(t, s)| (t.to_string(), s.to_string()))
        .into();
    let mut forwarders: HashMap<String, Forwarder> = HashMap::new();
    let mut got = Vec::new();
    for line in lines {
        let message: Value = serde_json::from_str(line).unwrap();
        let notification =
            ServerNotification::parse(message["method"].as_str().unwrap(), &message["params"]);
        let Some(session) = notification.thread_id().and_then(|t| threads.get(t)) else {
            continue;
        };
        let forwarder = forwarders.entry(session.clone()).or_default();
        for effect in forwarder.apply(notification, &Facts::default()) {
            if let Effect::Store(_) = effect {
                got.push(format!("{session}: {}", show(&effect)));
            }
        }
    }
    assert_eq!(
        got,
        [
            "s-a: store turn.started tu-a Other",
            "s-b: store turn.started tu-b Other",
            "s-a: store item.started tu-a:c1 command inProgress",
            "s-b: store item.started tu-b:c2 command inProgress",
            "s-b: store item.completed tu-b:c2 command interrupted",
            "s-b: store turn.completed tu-b Interrupted None",
            "s-a: store item.completed tu-a:c1 command completed",
            "s-a: store turn.completed tu-a Completed None",
        ]
    );
}

#[test]
fn the_end_of_another_turn_leaves_the_running_turn_alone() {
    let mut forwarder = Forwarder::default();
    feed(
        &mut forwarder,
        Facts::default(),
        &[
            r#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"tu-2","status":"inProgress"}}}"#,
            r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c1","command":"make","status":"inProgress"},"threadId":"th","turnId":"tu-2"}}"#,
        ],
    );
    let got = feed(
        &mut forwarder,
        Facts::default(),
        &[
            r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu-1","status":"interrupted"}}}"#,
        ],
    );
    assert_eq!(
        got,
        [
            "store turn.completed tu-1 Interrupted None",
            "report Interrupted",
            "turn ended"
        ]
    );
    assert_eq!(forwarder.current.as_deref(), Some("tu-2"));
    let got = feed(
        &mut forwarder,
        Facts::default(),
        &[
            r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu-2","status":"failed","error":{"message":"boom"}}}}"#,
        ],
    );
    assert_eq!(got[0], "store item.completed tu-2:c1 command failed");
}

// Plan mode: the plan streams, completes, and is offered as a `plan` request; a goal cleared
// is stored only when the session had one (`thread/resume` always sends `thread/goal/cleared`).
#[test]
fn a_completed_plan_is_offered_and_a_goal_cleared_is_stored_only_when_there_was_one() {
    let lines = [
        r#"{"method":"item/plan/delta","params":{"threadId":"th","turnId":"tu","itemId":"tu-plan","delta":"1. Write"}}"#,
        r#"{"method":"item/completed","params":{"item":{"type":"plan","id":"tu-plan","text":"1. Write\n2. Say hi"},"threadId":"th","turnId":"tu"}}"#,
        r#"<< {"method":"thread/goal/cleared","params":{"threadId":"01a2276c-5d60-73d0-a71e-47ba7cee3b47"},"emittedAtMs":1795957743986}"#,
    ];
    check(
        &lines,
        &[
            r#"publish item.delta tu:tu-plan plan "1. Write""#,
            r#"store item.completed tu:tu-plan plan "1. Write\n2. Say hi""#,
            "store input.requested in:tu:plan:plan Plan",
        ],
    );
    let had_goal = Facts {
        has_goal: true,
        ..Facts::default()
    };
    let got = feed(&mut Forwarder::default(), had_goal, &lines[2..]);
    assert_eq!(got, ["store goal.cleared"]);
}

#[test]
fn items_a_previous_run_left_open_are_closed_when_their_turn_ends() {
    let open = HashMap::from([(
        "tu:c1".to_string(),
        (
            "tu".to_string(),
            Item::Command {
                id: "tu:c1".into(),
                command: "make".into(),
                cwd: None,
                status: "inProgress".into(),
                exit_code: None,
                output: None,
                duration_ms: None,
            },
        ),
    )]);
    let mut forwarder = Forwarder::with_open_items(open);
    check_with(
        &mut forwarder,
        Facts::default(),
        &[
            r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"tu","status":"interrupted"}}}"#,
        ],
        &[
            "store item.completed tu:c1 command interrupted",
            "store turn.completed tu Interrupted None",
            "report Interrupted",
            "turn ended",
        ],
    );
}
