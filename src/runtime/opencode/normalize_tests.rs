//! The forwarder on the events of OpenCode 1.18.33 as `/event` sends them (shapes and order
//! from `hosting-opencode-pi-observed.md` §1.4–1.7: a bash turn, an abort mid-stream, a
//! permission asked and replied, a prompt folded into a running turn).

use super::*;
use crate::protocol::{EventKind, Item, TurnStatus};

const SES: &str = "ses_dcc4b4745ffe";

fn ev(line: &str) -> Event {
    Event::parse(line).unwrap_or_else(|| panic!("unparsed: {line}"))
}

fn user(id: &str, part: &str, text: &str) -> Vec<String> {
    vec![
        format!(
            r#"{{"id":"evt_1","type":"message.updated","properties":{{"sessionID":"{SES}","info":{{"id":"{id}","sessionID":"{SES}","role":"user","time":{{"created":1796164000000}}}}}}}}"#
        ),
        format!(
            r#"{{"id":"evt_2","type":"message.part.updated","properties":{{"sessionID":"{SES}","part":{{"id":"{part}","sessionID":"{SES}","messageID":"{id}","type":"text","text":"{text}"}},"time":1796164000001}}}}"#
        ),
    ]
}

fn status(kind: &str) -> String {
    format!(
        r#"{{"id":"evt_3","type":"session.status","properties":{{"sessionID":"{SES}","status":{{"type":"{kind}"}}}}}}"#
    )
}

fn idle() -> String {
    format!(r#"{{"id":"evt_4","type":"session.idle","properties":{{"sessionID":"{SES}"}}}}"#)
}

fn assistant(id: &str, extra: &str) -> String {
    format!(
        r#"{{"id":"evt_5","type":"message.updated","properties":{{"sessionID":"{SES}","info":{{"id":"{id}","sessionID":"{SES}","role":"assistant","time":{{"created":1796164000100{extra}}},"modelID":"mock-model","providerID":"mock"}}}}}}"#
    )
}

fn tool(message: &str, state: &str) -> String {
    format!(
        r#"{{"id":"evt_6","type":"message.part.updated","properties":{{"sessionID":"{SES}","part":{{"id":"prt_tool1","sessionID":"{SES}","messageID":"{message}","type":"tool","callID":"toolu_mock_3b78","tool":"bash","state":{state}}}}}}}"#
    )
}

fn text(message: &str, part: &str, text: &str, end: bool) -> String {
    let time = if end {
        r#"{"start":1,"end":2}"#
    } else {
        r#"{"start":1}"#
    };
    format!(
        r#"{{"id":"evt_7","type":"message.part.updated","properties":{{"sessionID":"{SES}","part":{{"id":"{part}","sessionID":"{SES}","messageID":"{message}","type":"text","text":"{text}","time":{time}}}}}}}"#
    )
}

fn delta(message: &str, part: &str, delta: &str) -> String {
    format!(
        r#"{{"id":"evt_8","type":"message.part.delta","properties":{{"sessionID":"{SES}","messageID":"{message}","partID":"{part}","field":"text","delta":"{delta}"}}}}"#
    )
}

fn run(forwarder: &mut Forwarder, lines: &[String]) -> Vec<Effect> {
    lines
        .iter()
        .flat_map(|line| forwarder.apply(ev(line)))
        .collect()
}

fn stored(effects: &[Effect]) -> Vec<EventKind> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Store(kind) => Some(kind.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_bash_turn_becomes_a_turn_with_its_prompt_command_and_reply() {
    let mut forwarder = Forwarder {
        pending_api: 1,
        ..Forwarder::default()
    };
    let mut lines = user("msg_u1", "prt_u1", "run echo hi");
    lines.extend([
        status("busy"),
        assistant("msg_a1", ""),
        tool("msg_a1", r#"{"status":"pending","input":{},"raw":""}"#),
        tool(
            "msg_a1",
            r#"{"status":"running","input":{"command":"echo hi","description":"Echo"},"time":{"start":1}}"#,
        ),
        tool(
            "msg_a1",
            r#"{"status":"completed","input":{"command":"echo hi"},"output":"hi\n","metadata":{"exit":0},"title":"echo hi","time":{"start":1000,"end":1230}}"#,
        ),
        assistant("msg_a1", r#","completed":1796164000200"#),
        status("busy"),
        assistant("msg_a2", ""),
        text("msg_a2", "prt_t1", "", false),
        delta("msg_a2", "prt_t1", "It "),
        delta("msg_a2", "prt_t1", "printed hi."),
        text("msg_a2", "prt_t1", "It printed hi.", true),
        assistant("msg_a2", r#","completed":1796164000300"#),
        status("busy"),
        status("idle"),
        idle(),
    ]);
    let effects = run(&mut forwarder, &lines);
    let kinds = stored(&effects);
    let names: Vec<&str> = kinds.iter().map(EventKind::type_name).collect();
    assert_eq!(
        names,
        [
            "turn.started",
            "item.completed",
            "item.started",
            "item.completed",
            "item.started",
            "item.completed",
            "turn.completed"
        ],
        "{kinds:#?}"
    );
    let EventKind::TurnStarted(started) = &kinds[0] else {
        panic!()
    };
    assert_eq!(started.turn_id, "msg_u1");
    assert_eq!(started.source, crate::protocol::TurnSource::Api);
    let EventKind::ItemCompleted(prompt) = &kinds[1] else {
        panic!()
    };
    assert_eq!(
        prompt.item,
        Item::UserMessage {
            id: "prt_u1".into(),
            text: "run echo hi".into()
        }
    );
    let EventKind::ItemCompleted(command) = &kinds[3] else {
        panic!()
    };
    assert_eq!(
        command.item,
        Item::Command {
            id: "prt_tool1".into(),
            command: "echo hi".into(),
            cwd: None,
            status: "completed".into(),
            exit_code: Some(0),
            output: Some("hi\n".into()),
            duration_ms: Some(230),
        }
    );
    let EventKind::ItemCompleted(reply) = &kinds[5] else {
        panic!()
    };
    assert_eq!(
        reply.item,
        Item::AgentMessage {
            id: "prt_t1".into(),
            text: "It printed hi.".into(),
            interrupted: false
        }
    );
    let EventKind::TurnCompleted(done) = &kinds[6] else {
        panic!()
    };
    assert_eq!(done.status, TurnStatus::Completed);
    let deltas: Vec<&Effect> = effects
        .iter()
        .filter(|e| matches!(e, Effect::Publish(EventKind::ItemDelta(_))))
        .collect();
    assert_eq!(deltas.len(), 2, "{effects:#?}");
    assert!(forwarder.current.is_none());
    assert_eq!(forwarder.pending_api, 0);
}

#[test]
fn an_abort_mid_stream_ends_the_turn_interrupted_with_the_text_so_far() {
    let mut forwarder = Forwarder::default();
    let mut lines = user("msg_u1", "prt_u1", "tell a long story");
    lines.extend([
        status("busy"),
        assistant("msg_a1", ""),
        text("msg_a1", "prt_t1", "", false),
        delta("msg_a1", "prt_t1", "Once upon"),
        format!(r#"{{"id":"evt_9","type":"session.error","properties":{{"sessionID":"{SES}","error":{{"name":"MessageAbortedError","data":{{"message":"Aborted"}}}}}}}}"#),
        status("idle"),
        idle(),
        // Late: the partial text and the aborted message, after the idle.
        text("msg_a1", "prt_t1", "Once upon", false),
        format!(r#"{{"id":"evt_10","type":"message.updated","properties":{{"sessionID":"{SES}","info":{{"id":"msg_a1","sessionID":"{SES}","role":"assistant","time":{{"created":1,"completed":2}},"error":{{"name":"MessageAbortedError","data":{{"message":"Aborted"}}}}}}}}}}"#),
        idle(),
    ]);
    let kinds = stored(&run(&mut forwarder, &lines));
    let names: Vec<&str> = kinds.iter().map(EventKind::type_name).collect();
    assert_eq!(
        names,
        [
            "turn.started",
            "item.completed",
            "item.started",
            "item.completed",
            "turn.completed"
        ],
        "{kinds:#?}"
    );
    let EventKind::ItemCompleted(partial) = &kinds[3] else {
        panic!()
    };
    assert_eq!(
        partial.item,
        Item::AgentMessage {
            id: "prt_t1".into(),
            text: "Once upon".into(),
            interrupted: true
        }
    );
    let EventKind::TurnCompleted(done) = &kinds[4] else {
        panic!()
    };
    assert_eq!(done.status, TurnStatus::Interrupted);
}

#[test]
fn a_permission_asked_is_held_as_an_approval_of_the_running_command() {
    let mut forwarder = Forwarder::default();
    let mut lines = user("msg_u1", "prt_u1", "run echo one");
    lines.extend([
        status("busy"),
        assistant("msg_233b63e38001", ""),
        tool(
            "msg_233b63e38001",
            r#"{"status":"running","input":{"command":"echo one"},"time":{"start":1}}"#,
        ),
        format!(r#"{{"id":"evt_…","type":"permission.asked","properties":{{"id":"per_233b645b5001","sessionID":"{SES}","permission":"bash","patterns":["echo one"],"metadata":{{"command":"echo one"}},"always":["echo *"],"tool":{{"messageID":"msg_233b63e38001","callID":"toolu_mock_3b78"}}}}}}"#),
        format!(r#"{{"id":"evt_…","type":"permission.replied","properties":{{"sessionID":"{SES}","requestID":"per_233b645b5001","reply":"once"}}}}"#),
    ]);
    let effects = run(&mut forwarder, &lines);
    let hold = effects
        .iter()
        .position(|e| {
            *e == Effect::HoldApproval {
                approval_id: "per_233b645b5001".into(),
            }
        })
        .expect("held");
    let Effect::Store(EventKind::ApprovalRequested(approval)) = &effects[hold + 1] else {
        panic!("{effects:#?}")
    };
    assert_eq!(approval.approval_id.as_str(), "per_233b645b5001");
    assert_eq!(approval.kind.as_str(), "command");
    assert_eq!(approval.turn_id, "msg_u1");
    assert_eq!(approval.item_id.as_deref(), Some("prt_tool1"));
    assert_eq!(approval.command.as_deref(), Some("echo one"));
    assert_eq!(effects[hold + 2], Effect::Report(AgentStatus::Waiting));
    assert_eq!(
        effects.last(),
        Some(&Effect::ApprovalSettled {
            approval_id: "per_233b645b5001".into()
        })
    );
}

#[test]
fn a_rejected_tool_is_declined_and_a_prompt_while_busy_joins_the_turn() {
    let mut forwarder = Forwarder::default();
    let mut lines = user("msg_u1", "prt_u1", "create a file");
    lines.push(status("busy"));
    lines.extend(user("msg_u2", "prt_u2", "and then stop"));
    lines.extend([
        assistant("msg_a1", ""),
        tool(
            "msg_a1",
            r#"{"status":"error","input":{"command":"touch x"},"error":"The user rejected permission to use this specific tool call.","time":{"start":1,"end":2}}"#,
        ),
        idle(),
    ]);
    let kinds = stored(&run(&mut forwarder, &lines));
    let prompts: Vec<&Item> = kinds
        .iter()
        .filter_map(|k| match k {
            EventKind::ItemCompleted(item) if item.turn_id == "msg_u1" => Some(&item.item),
            _ => None,
        })
        .collect();
    assert!(matches!(prompts[0], Item::UserMessage { text, .. } if text == "create a file"));
    assert!(matches!(prompts[1], Item::UserMessage { text, .. } if text == "and then stop"));
    assert!(
        matches!(prompts[2], Item::Command { status, .. } if status == "declined"),
        "{prompts:#?}"
    );
}

#[test]
fn history_backfills_the_same_turns_and_closes_an_orphan_reply_as_interrupted() {
    let history: Vec<MessageWithParts> = serde_json::from_str(&format!(
        r#"[
 {{"info":{{"id":"msg_u1","sessionID":"{SES}","role":"user","time":{{"created":10}}}},"parts":[{{"id":"prt_u1","messageID":"msg_u1","type":"text","text":"one"}}]}},
 {{"info":{{"id":"msg_a1","sessionID":"{SES}","role":"assistant","time":{{"created":11,"completed":20}},"finish":"stop"}},"parts":[{{"id":"prt_s","type":"step-start"}},{{"id":"prt_t1","messageID":"msg_a1","type":"text","text":"first"}}]}},
 {{"info":{{"id":"msg_u2","sessionID":"{SES}","role":"user","time":{{"created":15}}}},"parts":[{{"id":"prt_u2","messageID":"msg_u2","type":"text","text":"folded"}}]}},
 {{"info":{{"id":"msg_a2","sessionID":"{SES}","role":"assistant","time":{{"created":21,"completed":30}},"finish":"stop"}},"parts":[{{"id":"prt_t2","messageID":"msg_a2","type":"text","text":"second"}}]}},
 {{"info":{{"id":"msg_u3","sessionID":"{SES}","role":"user","time":{{"created":40}}}},"parts":[{{"id":"prt_u3","messageID":"msg_u3","type":"text","text":"three"}}]}},
 {{"info":{{"id":"msg_a3","sessionID":"{SES}","role":"assistant","time":{{"created":41}}}},"parts":[{{"id":"prt_t3","messageID":"msg_a3","type":"text","text":""}}]}}
]"#
    ))
    .unwrap();
    let kinds = history_events(&history);
    let turns: Vec<(String, Option<TurnStatus>)> = kinds
        .iter()
        .filter_map(|k| match k {
            EventKind::TurnStarted(t) => Some((t.turn_id.clone(), None)),
            EventKind::TurnCompleted(t) => Some((t.turn_id.clone(), Some(t.status))),
            _ => None,
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("msg_u1".to_string(), None),
            ("msg_u1".to_string(), Some(TurnStatus::Completed)),
            ("msg_u3".to_string(), None),
            ("msg_u3".to_string(), Some(TurnStatus::Interrupted)),
        ]
    );
    let items = kinds
        .iter()
        .filter(|k| matches!(k, EventKind::ItemCompleted(_)))
        .count();
    assert_eq!(items, 6, "{kinds:#?}");
}

fn history_events(messages: &[MessageWithParts]) -> Vec<EventKind> {
    super::history(messages)
}

#[test]
fn a_turn_cohost_did_not_send_is_the_panes_when_one_is_open() {
    let source = |has_terminal: bool| {
        let mut forwarder = Forwarder {
            has_terminal,
            ..Forwarder::default()
        };
        let mut lines = user("msg_u9", "prt_u9", "typed by a person");
        lines.push(status("busy"));
        let kinds = stored(&run(&mut forwarder, &lines));
        let Some(EventKind::TurnStarted(started)) = kinds.first() else {
            panic!("{kinds:#?}")
        };
        started.source
    };
    assert_eq!(source(false), crate::protocol::TurnSource::Other);
    assert_eq!(source(true), crate::protocol::TurnSource::Terminal);
}
