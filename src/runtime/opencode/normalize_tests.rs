//! The forwarder on the events of OpenCode 1.18.33 as `/event` sends them (shapes and order
//! from `hosting-opencode-pi-observed.md` §1.4–1.7: a bash turn, an abort mid-stream, a
//! permission asked and replied, a prompt folded into a running turn; a question asked,
//! answered and dismissed, recorded from a live server).

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
        pending_api: ["msg_u1".to_string()].into(),
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
    assert!(forwarder.pending_api.is_empty());
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

/// `question.asked` and its tool part, recorded from OpenCode 1.18.33 (`opencode serve`, the
/// `question` tool called by a mock model with one question): the part is `pending` before the
/// question is asked and `running` while it waits.
const QUESTION_PENDING: &str = r#"{"id":"evt_23aa6b028001TsJWXwKnOe0Nxh","type":"message.part.updated","properties":{"sessionID":"ses_dcc4b4745ffe","part":{"id":"prt_23aa6b0240014YCLENmQvKpAm2","messageID":"msg_23aa6a84900165n5Le6edJE7zA","sessionID":"ses_dcc4b4745ffe","type":"tool","tool":"question","callID":"toolu_q1","state":{"status":"pending","input":{},"raw":""}},"time":1796280332324}}"#;
const QUESTION_ASKED: &str = r#"{"id":"evt_23aa6b04e002l6TikA3NvuB4vb","type":"question.asked","properties":{"id":"que_23aa6b04e001ClFYXKwgcn4fQv","sessionID":"ses_dcc4b4745ffe","questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}]}],"tool":{"messageID":"msg_23aa6a84900165n5Le6edJE7zA","callID":"toolu_q1"}}}"#;
const QUESTION_RUNNING: &str = r#"{"id":"evt_23aa6b057001Xnf820ne5XhpN6","type":"message.part.updated","properties":{"sessionID":"ses_dcc4b4745ffe","part":{"type":"tool","tool":"question","callID":"toolu_q1","state":{"status":"running","input":{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}]}]},"time":{"start":1796280332375}},"id":"prt_23aa6b0240014YCLENmQvKpAm2","sessionID":"ses_dcc4b4745ffe","messageID":"msg_23aa6a84900165n5Le6edJE7zA"},"time":1796280332375}}"#;
/// `POST /question/:id/reply {"answers":[["Blue"]]}`.
const QUESTION_REPLIED: &str = r#"{"id":"evt_23aa6c1a5001y5NqA6SVoraEq9","type":"question.replied","properties":{"sessionID":"ses_dcc4b4745ffe","requestID":"que_23aa6b04e001ClFYXKwgcn4fQv","answers":[["Blue"]]}}"#;
const QUESTION_ANSWERED: &str = r#"{"id":"evt_23aa6c1c2001crb3vSyQr22A2v","type":"message.part.updated","properties":{"sessionID":"ses_dcc4b4745ffe","part":{"type":"tool","tool":"question","callID":"toolu_q1","state":{"status":"completed","input":{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}]}]},"output":"User has answered your questions: \"Which colour?\"=\"Blue\". You can now continue with the user's answers in mind.","metadata":{"answers":[["Blue"]],"truncated":false},"title":"Asked 1 question","time":{"start":1796280332375,"end":1796280336834}},"id":"prt_23aa6b0240014YCLENmQvKpAm2","sessionID":"ses_dcc4b4745ffe","messageID":"msg_23aa6a84900165n5Le6edJE7zA"},"time":1796280336834}}"#;
/// `POST /question/:id/reject`: the part fails, and the turn ends without another model call.
const QUESTION_REJECTED: &str = r#"{"id":"evt_23aa6fc470010gZay6WBzn7eno","type":"question.rejected","properties":{"sessionID":"ses_dcc4b4745ffe","requestID":"que_23aa6b04e001ClFYXKwgcn4fQv"}}"#;
const QUESTION_DISMISSED: &str = r#"{"id":"evt_23aa6fc68001EubyyWsei7v8g6","type":"message.part.updated","properties":{"sessionID":"ses_dcc4b4745ffe","part":{"type":"tool","tool":"question","callID":"toolu_q1","state":{"status":"error","input":{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}]}]},"error":"The user dismissed this question","time":{"start":1796280347535,"end":1796280351847}},"id":"prt_23aa6b0240014YCLENmQvKpAm2","sessionID":"ses_dcc4b4745ffe","messageID":"msg_23aa6a84900165n5Le6edJE7zA"},"time":1796280351848}}"#;

fn question_turn() -> Vec<String> {
    let mut lines = user("msg_u1", "prt_u1", "Ask me a colour");
    lines.extend([
        status("busy"),
        assistant("msg_23aa6a84900165n5Le6edJE7zA", ""),
        QUESTION_PENDING.to_string(),
        QUESTION_ASKED.to_string(),
        QUESTION_RUNNING.to_string(),
    ]);
    lines
}

#[test]
fn a_question_asked_is_an_input_request_of_the_running_tool() {
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &question_turn());
    let asked = effects
        .iter()
        .position(|e| matches!(e, Effect::AskQuestion(_)))
        .unwrap_or_else(|| panic!("{effects:#?}"));
    let Effect::AskQuestion(request) = &effects[asked] else {
        unreachable!()
    };
    assert_eq!(request.request_id, "que_23aa6b04e001ClFYXKwgcn4fQv");
    assert_eq!(request.kind, crate::protocol::InputKind::Question);
    assert_eq!(request.turn_id.as_deref(), Some("msg_u1"));
    // Asked while the part was still `pending`: its call id already names the item.
    assert_eq!(
        request.item_id.as_deref(),
        Some("prt_23aa6b0240014YCLENmQvKpAm2")
    );
    assert_eq!(request.decisions, ["decline"]);
    let [question] = request.questions.as_slice() else {
        panic!("{request:#?}")
    };
    assert_eq!(question.id, "Which colour?");
    assert_eq!(question.question, "Which colour?");
    assert_eq!(question.header.as_deref(), Some("Colour"));
    let labels: Vec<(&str, Option<&str>)> = question
        .options
        .iter()
        .map(|o| (o.label.as_str(), o.description.as_deref()))
        .collect();
    assert_eq!(labels, [("Red", Some("warm")), ("Blue", Some("cold"))]);
    // OpenCode takes a typed answer unless `custom: false`; one choice unless `multiple`.
    assert!(question.is_other && !question.multi_select && !question.is_secret);
    assert_eq!(effects[asked + 1], Effect::Report(AgentStatus::Waiting));
    // The tool is an item of the turn, running while the question waits.
    let kinds = stored(&effects);
    let started: Vec<&Item> = kinds
        .iter()
        .filter_map(|k| match k {
            EventKind::ItemStarted(item) => Some(&item.item),
            _ => None,
        })
        .collect();
    assert!(
        matches!(started.as_slice(), [Item::Tool { name, status, .. }] if name == "question" && status == "inProgress"),
        "{started:#?}"
    );
}

#[test]
fn a_question_answered_or_dismissed_elsewhere_settles_it_and_its_tool() {
    // Answered (here: in an attached TUI): settled with OpenCode's answers, the tool completes
    // with what the model was told.
    let mut forwarder = Forwarder::default();
    run(&mut forwarder, &question_turn());
    let effects = run(
        &mut forwarder,
        &[QUESTION_REPLIED.to_string(), QUESTION_ANSWERED.to_string()],
    );
    assert_eq!(
        effects[0],
        Effect::QuestionSettled {
            request_id: "que_23aa6b04e001ClFYXKwgcn4fQv".into(),
            answers: Some(vec![vec!["Blue".into()]]),
        }
    );
    let completed = stored(&effects);
    assert!(
        matches!(&completed[..], [EventKind::ItemCompleted(ItemEvent { item: Item::Tool { status, output: Some(output), .. }, .. })]
            if status == "completed" && output.contains(r#""Which colour?"="Blue""#)),
        "{completed:#?}"
    );

    // Dismissed: settled without answers, the tool is declined, and the turn completes.
    let mut forwarder = Forwarder::default();
    run(&mut forwarder, &question_turn());
    let effects = run(
        &mut forwarder,
        &[
            QUESTION_REJECTED.to_string(),
            QUESTION_DISMISSED.to_string(),
            idle(),
        ],
    );
    assert_eq!(
        effects[0],
        Effect::QuestionSettled {
            request_id: "que_23aa6b04e001ClFYXKwgcn4fQv".into(),
            answers: None,
        }
    );
    let kinds = stored(&effects);
    assert!(
        matches!(&kinds[0], EventKind::ItemCompleted(ItemEvent { item: Item::Tool { status, .. }, .. }) if status == "declined"),
        "{kinds:#?}"
    );
    assert!(
        matches!(kinds.last(), Some(EventKind::TurnCompleted(done)) if done.status == TurnStatus::Completed),
        "{kinds:#?}"
    );
}

#[test]
fn questions_with_the_same_text_get_distinct_ids_and_keep_their_flags() {
    let request: crate::runtime::opencode::wire::QuestionRequest = serde_json::from_str(
        r#"{"id":"que_1","sessionID":"ses_1","questions":[
            {"question":"Pick","header":"","options":[],"custom":false},
            {"question":"Pick","header":"Again","options":[{"label":"A","description":""}],"multiple":true}]}"#,
    )
    .unwrap();
    let asked = question_request(&request, None, None);
    let ids: Vec<&str> = asked.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["Pick", "Pick (2)"]);
    assert!(!asked.questions[0].is_other && asked.questions[0].header.is_none());
    assert!(asked.questions[1].multi_select && asked.questions[1].is_other);
    assert_eq!(asked.questions[1].options[0].description, None);
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

/// A forwarder that waits on where cohost's prompts `ids` go, as the inject does.
fn awaiting(ids: &[&str]) -> Forwarder {
    Forwarder {
        pending_api: ids.iter().map(|id| id.to_string()).collect(),
        placed: ids.iter().map(|id| (id.to_string(), None)).collect(),
        ..Forwarder::default()
    }
}

#[test]
fn a_second_prompt_sent_before_the_first_ones_turn_started_joins_that_turn() {
    // Both prompts' messages show before OpenCode's loop says `busy` (0.9 s after the first, in
    // §1.4): the loop takes both, in one busy period.
    let mut forwarder = awaiting(&["msg_u1", "msg_u2"]);
    let mut lines = user("msg_u1", "prt_u1", "first");
    lines.extend(user("msg_u2", "prt_u2", "second"));
    let effects = run(&mut forwarder, &lines);
    assert!(stored(&effects).is_empty(), "{effects:#?}");
    assert_eq!(forwarder.placed["msg_u1"], Some(Placement::Opens));
    assert_eq!(
        forwarder.placed["msg_u2"],
        Some(Placement::Joins("msg_u1".into()))
    );
    let kinds = stored(&run(&mut forwarder, &[status("busy")]));
    let Some(EventKind::TurnStarted(started)) = kinds.first() else {
        panic!("{kinds:#?}")
    };
    assert_eq!(started.turn_id, "msg_u1");
    assert_eq!(started.source, crate::protocol::TurnSource::Api);
    let prompts = kinds
        .iter()
        .filter(|k| matches!(k, EventKind::ItemCompleted(item) if item.turn_id == "msg_u1"))
        .count();
    assert_eq!(prompts, 2, "{kinds:#?}");
    assert!(
        forwarder.pending_api.is_empty(),
        "{:?}",
        forwarder.pending_api
    );
}

#[test]
fn a_prompt_while_a_turn_runs_joins_it_and_one_after_it_ended_opens_its_own() {
    let mut forwarder = awaiting(&["msg_u1"]);
    let mut lines = user("msg_u1", "prt_u1", "first");
    lines.push(status("busy"));
    run(&mut forwarder, &lines);
    assert_eq!(
        forwarder.placed.remove("msg_u1"),
        Some(Some(Placement::Opens))
    );

    forwarder.pending_api.insert("msg_u2".into());
    forwarder.placed.insert("msg_u2".into(), None);
    run(&mut forwarder, &user("msg_u2", "prt_u2", "meanwhile"));
    assert_eq!(
        forwarder.placed.remove("msg_u2"),
        Some(Some(Placement::Joins("msg_u1".into())))
    );
    assert!(
        forwarder.pending_api.is_empty(),
        "{:?}",
        forwarder.pending_api
    );

    run(&mut forwarder, &[idle()]);
    forwarder.pending_api.insert("msg_u3".into());
    forwarder.placed.insert("msg_u3".into(), None);
    // OpenCode sends a message's parts again as they change: the first placement stands.
    let mut lines = user("msg_u3", "prt_u3", "after");
    lines.extend(user("msg_u3", "prt_u3", "after"));
    run(&mut forwarder, &lines);
    assert_eq!(forwarder.placed["msg_u3"], Some(Placement::Opens));
}

#[test]
fn a_prompt_of_ours_folded_into_a_persons_turn_joins_it_and_the_turn_stays_theirs() {
    let mut forwarder = Forwarder {
        has_terminal: true,
        ..awaiting(&["msg_u2"])
    };
    let mut lines = user("msg_u1", "prt_u1", "typed by a person");
    lines.extend(user("msg_u2", "prt_u2", "sent by cohost"));
    lines.push(status("busy"));
    let kinds = stored(&run(&mut forwarder, &lines));
    assert_eq!(
        forwarder.placed["msg_u2"],
        Some(Placement::Joins("msg_u1".into()))
    );
    let Some(EventKind::TurnStarted(started)) = kinds.first() else {
        panic!("{kinds:#?}")
    };
    assert_eq!(started.source, crate::protocol::TurnSource::Terminal);
    // A prompt nobody waits on is not recorded.
    assert!(!forwarder.placed.contains_key("msg_u1"));
    assert!(
        forwarder.pending_api.is_empty(),
        "{:?}",
        forwarder.pending_api
    );
}
