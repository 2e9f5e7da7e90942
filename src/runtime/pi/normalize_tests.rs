//! The forwarder on the lines Pi 0.73.1 and 1.6.0 write (`hosting-opencode-pi-observed.md`
//! §2.4–2.9; long fields cut, as there).

use super::*;
use crate::runtime::pi::wire::Line;

fn run(forwarder: &mut Forwarder, lines: &[&str]) -> Vec<Effect> {
    let mut out = Vec::new();
    for line in lines {
        match Line::parse(line) {
            Some(Line::Event(event)) => out.extend(forwarder.apply(event)),
            other => panic!("not an event: {line} → {other:?}"),
        }
    }
    out
}

/// The stored events, as `type` (+ the item's type and status where there is one).
fn stored(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Store(kind) => Some(describe(kind)),
            _ => None,
        })
        .collect()
}

fn describe(kind: &EventKind) -> String {
    match kind {
        EventKind::TurnStarted(t) => format!("turn.started {}", t.turn_id),
        EventKind::TurnCompleted(t) => format!("turn.completed {} {:?}", t.turn_id, t.status),
        EventKind::ItemStarted(i) => format!("item.started {}", item(&i.item)),
        EventKind::ItemCompleted(i) => format!("item.completed {}", item(&i.item)),
        EventKind::ApprovalRequested(a) => format!("approval.requested {}", a.approval_id),
        EventKind::Error(e) => format!("error {}", e.message),
        other => format!("{other:?}"),
    }
}

fn item(item: &Item) -> String {
    match item {
        Item::UserMessage { text, .. } => format!("userMessage {text:?}"),
        Item::AgentMessage {
            text, interrupted, ..
        } => format!(
            "agentMessage {text:?}{}",
            if *interrupted { " interrupted" } else { "" }
        ),
        Item::Command {
            command,
            status,
            exit_code,
            ..
        } => format!("command {command:?} {status} {exit_code:?}"),
        Item::Tool { name, status, .. } => format!("tool {name} {status}"),
        other => format!("{other:?}"),
    }
}

/// A full turn with one bash call (§2.4), as 1.6.0 writes it (`message_update` without the
/// whole message, `agent_end {willRetry:false}`, then `agent_settled`).
const TURN_1_6_0: &[&str] = &[
    r#"{"type":"agent_start"}"#,
    r#"{"type":"turn_start"}"#,
    r#"{"type":"message_start","message":{"role":"system","content":"","sections":{"preamble":"…"},"toolsAdded":["read","bash","edit","write"]}}"#,
    r#"{"type":"message_end","message":{"role":"system","content":"","sections":{"preamble":"…"},"toolsAdded":["read","bash","edit","write"]}}"#,
    r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Run echo hi please"}],"timestamp":1796164001000}}"#,
    r#"{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"Run echo hi please"}],"timestamp":1796164001000}}"#,
    r#"{"type":"message_start","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"mock","model":"mock-model","stopReason":"pending","timestamp":1796164001100}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","contentIndex":0,"id":"toolu_01","toolName":"bash"},"usage":{}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_delta","contentIndex":0,"delta":"{\"command\":"},"usage":{}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":0,"toolCall":{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"echo hi"}}},"usage":{}}"#,
    r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"echo hi"}}],"stopReason":"toolUse","rawStopReason":"tool_use","timestamp":1796164001100}}"#,
    r#"{"type":"tool_execution_start","toolCallId":"toolu_01","toolName":"bash","args":{"command":"echo hi"}}"#,
    r#"{"type":"tool_execution_update","toolCallId":"toolu_01","toolName":"bash","args":{"command":"echo hi"},"partialResult":{"content":[{"type":"text","text":"hi\n"}]}}"#,
    r#"{"type":"tool_execution_end","toolCallId":"toolu_01","toolName":"bash","result":{"content":[{"type":"text","text":"hi\n"}],"details":{},"durationMs":12,"structuredContent":{"output":"hi\n","truncated":false,"exit_code":0,"wall_time_seconds":0.01}},"isError":false}"#,
    r#"{"type":"message_start","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"bash","content":[{"type":"text","text":"hi\n"}],"isError":false,"timestamp":1796164001200}}"#,
    r#"{"type":"message_end","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"bash","content":[{"type":"text","text":"hi\n"}],"isError":false,"timestamp":1796164001200}}"#,
    r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
    r#"{"type":"turn_start"}"#,
    r#"{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending","timestamp":1796164001300}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0},"usage":{}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"It "},"usage":{}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"ran."},"usage":{}}"#,
    r#"{"type":"message_update","assistantMessageEvent":{"type":"text_end","contentIndex":0,"content":"It ran."},"usage":{}}"#,
    r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"It ran."}],"stopReason":"stop","rawStopReason":"end_turn","timestamp":1796164001300}}"#,
    r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
    r#"{"type":"agent_end","messages":[],"willRetry":false}"#,
    r#"{"type":"agent_settled","aborted":false}"#,
];

#[test]
fn a_bash_turn_of_pi_1_6_0_is_one_turn_with_its_items_in_order() {
    let mut forwarder = Forwarder::default();
    forwarder.pending_api.push_back("turn-api-1".into());
    let effects = run(&mut forwarder, TURN_1_6_0);
    assert_eq!(
        stored(&effects),
        [
            "turn.started turn-api-1",
            "item.completed userMessage \"Run echo hi please\"",
            "item.started command \"echo hi\" inProgress None",
            "item.completed command \"echo hi\" completed Some(0)",
            "item.started agentMessage \"\"",
            "item.completed agentMessage \"It ran.\"",
            "turn.completed turn-api-1 Completed",
        ]
    );
    let Some(Effect::Store(EventKind::TurnStarted(started))) = effects.first() else {
        panic!("{effects:?}")
    };
    assert_eq!(started.source, TurnSource::Api);
    let deltas: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Publish(EventKind::ItemDelta(d)) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["It ", "ran."]);
    assert_eq!(forwarder.current, None);
}

#[test]
fn pi_1_6_0_ends_the_run_at_agent_settled_not_agent_end() {
    let mut forwarder = Forwarder::default();
    let until_end = &TURN_1_6_0[..TURN_1_6_0.len() - 1];
    let effects = run(&mut forwarder, until_end);
    assert!(
        !stored(&effects)
            .iter()
            .any(|e| e.starts_with("turn.completed")),
        "{effects:?}"
    );
    assert!(forwarder.current.is_some());
    let effects = run(&mut forwarder, &[TURN_1_6_0[TURN_1_6_0.len() - 1]]);
    assert_eq!(
        stored(&effects),
        ["turn.completed turn-1796164001000 Completed"]
    );
}

#[test]
fn pi_0_73_1_ends_the_run_at_agent_end_and_its_full_updates_read_the_same() {
    // 0.73.1: `message_update` carries the whole message too; `agent_end` has no `willRetry`;
    // `message_start`'s stopReason is a placeholder "stop".
    let lines = [
        r#"{"type":"agent_start"}"#,
        r#"{"type":"turn_start"}"#,
        r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Say hi"}],"timestamp":1796164002000}}"#,
        r#"{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"stop","timestamp":1796164002100}}"#,
        r#"{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0,"partial":{"role":"assistant","content":[{"type":"text","text":""}]}},"message":{"role":"assistant","content":[{"type":"text","text":""}]}}"#,
        r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hi","partial":{"role":"assistant","content":[{"type":"text","text":"Hi"}]}},"message":{"role":"assistant","content":[{"type":"text","text":"Hi"}]}}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Hi"}],"stopReason":"stop","timestamp":1796164002100}}"#,
        r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
        r#"{"type":"agent_end","messages":[]}"#,
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    assert_eq!(
        stored(&effects),
        [
            "turn.started turn-1796164002000",
            "item.completed userMessage \"Say hi\"",
            "item.started agentMessage \"\"",
            "item.completed agentMessage \"Hi\"",
            "turn.completed turn-1796164002000 Completed",
        ]
    );
}

#[test]
fn an_aborted_stream_ends_the_turn_interrupted_with_the_partial_text() {
    // §2.6: abort 1 s into a stream → message_end `aborted` with the partial text kept.
    let lines = [
        r#"{"type":"agent_start"}"#,
        r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Tell me a long story"}],"timestamp":1796164003000}}"#,
        r#"{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending","timestamp":1796164003100}}"#,
        r#"{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0},"usage":{}}"#,
        r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Once upon a time\n"},"usage":{}}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Once upon a time\n"}],"stopReason":"aborted","errorMessage":"This operation was aborted","timestamp":1796164003100}}"#,
        r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
        r#"{"type":"agent_end","messages":[],"willRetry":false}"#,
        r#"{"type":"agent_settled","aborted":true}"#,
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    assert_eq!(
        stored(&effects),
        [
            "turn.started turn-1796164003000",
            "item.completed userMessage \"Tell me a long story\"",
            "item.started agentMessage \"\"",
            "item.completed agentMessage \"Once upon a time\\n\" interrupted",
            "turn.completed turn-1796164003000 Interrupted",
        ]
    );
}

#[test]
fn a_steered_message_is_an_item_of_the_running_turn() {
    // §2.5: after the tool results, `turn_end`, `turn_start`, the steering user message.
    let lines = [
        r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Run two things"}],"timestamp":1796164004000}}"#,
        r#"{"type":"queue_update","steering":["STEER: also say B"],"followUp":[]}"#,
        r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
        r#"{"type":"turn_start"}"#,
        r#"{"type":"queue_update","steering":[],"followUp":[]}"#,
        r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"STEER: also say B"}],"timestamp":1796164004500}}"#,
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    assert_eq!(
        stored(&effects),
        [
            "turn.started turn-1796164004000",
            "item.completed userMessage \"Run two things\"",
            "item.completed userMessage \"STEER: also say B\"",
        ]
    );
}

#[test]
fn the_gates_confirm_is_an_approval_and_a_declined_call_is_declined() {
    // §2.9: the dialog comes after `tool_execution_start`; a declined call ends with the
    // gate's reason as an error result.
    let ask = serde_json::json!({"toolName":"bash","toolCallId":"toolu_02","input":{"command":"touch declined.txt"}}).to_string();
    let request = serde_json::json!({"type":"extension_ui_request","id":"18039491-5b6d-4c90-9cd0-419f0fbc012a","method":"confirm","title":GATE_TITLE,"message":ask}).to_string();
    let end = serde_json::json!({"type":"tool_execution_end","toolCallId":"toolu_02","toolName":"bash","result":{"content":[{"type":"text","text":DECLINE_REASON}],"details":{}},"isError":true}).to_string();
    let lines = [
        r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Create declined.txt"}],"timestamp":1796164005000}}"#,
        r#"{"type":"tool_execution_start","toolCallId":"toolu_02","toolName":"bash","args":{"command":"touch declined.txt"}}"#,
        request.as_str(),
        end.as_str(),
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    assert!(effects.contains(&Effect::HoldApproval {
        approval_id: "18039491-5b6d-4c90-9cd0-419f0fbc012a".into()
    }));
    let approval = effects
        .iter()
        .find_map(|e| match e {
            Effect::Store(EventKind::ApprovalRequested(a)) => Some(a.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(approval.kind.as_str(), "command");
    assert_eq!(approval.turn_id, "turn-1796164005000");
    assert_eq!(approval.item_id.as_deref(), Some("toolu_02"));
    assert_eq!(approval.command.as_deref(), Some("touch declined.txt"));
    assert_eq!(
        stored(&effects).last().unwrap(),
        "item.completed command \"touch declined.txt\" declined None"
    );
    // The tracker: running, the tool running, waiting for the answer, running again.
    let reports: Vec<AgentStatus> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Report(status) => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(
        reports,
        [
            AgentStatus::Running,
            AgentStatus::ToolRunning,
            AgentStatus::Waiting,
            AgentStatus::Running
        ]
    );
}

#[test]
fn other_dialogs_are_dismissed_and_notices_ignored() {
    let lines = [
        r#"{"type":"extension_ui_request","id":"u-1","method":"select","title":"Pick one","options":["a","b"]}"#,
        r#"{"type":"extension_ui_request","id":"u-2","method":"notify","message":"hello","notifyType":"info"}"#,
        r#"{"type":"extension_ui_request","id":"u-3","method":"confirm","title":"Allow bash?","message":"echo hi"}"#,
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    let dismissed: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::DismissDialog { request_id } => Some(request_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(dismissed, ["u-1", "u-3"]);
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::HoldApproval { .. }))
    );
}

#[test]
fn a_failed_model_call_fails_the_turn() {
    let lines = [
        r#"{"type":"message_start","message":{"role":"user","content":"This one fails","timestamp":1796164006000}}"#,
        r#"{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending","timestamp":1796164006100}}"#,
        r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"400 mock failure","timestamp":1796164006100}}"#,
        r#"{"type":"agent_end","messages":[]}"#,
    ];
    let mut forwarder = Forwarder::default();
    let effects = run(&mut forwarder, &lines);
    let [.., Effect::Store(EventKind::TurnCompleted(done)), report] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert_eq!(*report, Effect::Report(AgentStatus::Error));
    assert_eq!(done.status, TurnStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("400 mock failure"));
}

#[test]
fn an_interrupt_closes_a_tool_left_running() {
    let mut forwarder = Forwarder::default();
    run(
        &mut forwarder,
        &[
            r#"{"type":"message_start","message":{"role":"user","content":"go","timestamp":7}}"#,
            r#"{"type":"tool_execution_start","toolCallId":"toolu_03","toolName":"write","args":{"path":"a.txt","content":"x"}}"#,
        ],
    );
    forwarder.interrupt_requested = true;
    let effects = run(&mut forwarder, &[r#"{"type":"agent_end","messages":[]}"#]);
    assert_eq!(
        stored(&effects),
        [
            "item.completed tool write interrupted",
            "turn.completed turn-7 Interrupted"
        ]
    );
}

#[test]
fn bash_exit_codes_are_read_from_its_error_text() {
    assert_eq!(exit_code_in("oops\n\nCommand exited with code 3"), Some(3));
    assert_eq!(exit_code_in("fine"), None);
}

/// A cut run as Pi's session file holds it (entries as both releases write them; 1.6.0's
/// `system` message is skipped): from the last stored user message on, each message's items,
/// named as the forwarder names them live.
#[test]
fn a_cut_run_is_backfilled_from_the_session_file_from_its_stored_prompt_on() {
    let file = [
        r#"{"type":"session","version":3,"id":"01a233be","timestamp":"2026-12-01T22:33:59.681Z","cwd":"/w"}"#,
        r#"{"type":"model_change","id":"a1","parentId":null,"provider":"mock","modelId":"mock-model"}"#,
        r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"user","content":[{"type":"text","text":"earlier"}],"timestamp":900}}"#,
        r#"{"type":"message","id":"a3","parentId":"a2","message":{"role":"system","content":"","sections":{}}}"#,
        r#"{"type":"message","id":"a4","parentId":"a3","message":{"role":"user","content":[{"type":"text","text":"Run echo one"}],"timestamp":1000}}"#,
        r#"{"type":"message","id":"a5","parentId":"a4","message":{"role":"assistant","content":[{"type":"text","text":"Running it."},{"type":"toolCall","id":"toolu_1","name":"bash","arguments":{"command":"echo one"}}],"stopReason":"toolUse","timestamp":1001}}"#,
        r#"{"type":"message","id":"a6","parentId":"a5","message":{"role":"toolResult","toolCallId":"toolu_1","toolName":"bash","content":[{"type":"text","text":"one\n"}],"isError":false,"timestamp":1002}}"#,
        r#"not json"#,
        r#"{"type":"message","id":"a7","parentId":"a6","message":{"role":"assistant","content":[{"type":"text","text":"It said one"}],"stopReason":"aborted","timestamp":1003}}"#,
    ]
    .join("\n");
    let messages = file_messages(&file);
    assert_eq!(messages.len(), 6);
    let events = backfill(&messages, "pi-turn-1", |id| {
        id == "user-1000" || id == "user-900"
    });
    let described: Vec<String> = events.iter().map(describe).collect();
    assert_eq!(
        described,
        [
            r#"item.completed userMessage "Run echo one""#,
            r#"item.completed agentMessage "Running it.""#,
            r#"item.completed command "echo one" completed Some(0)"#,
            r#"item.completed agentMessage "It said one" interrupted"#,
        ]
    );
    let ids: Vec<&str> = events
        .iter()
        .map(|e| match e {
            EventKind::ItemCompleted(i) => i.item.id(),
            _ => "",
        })
        .collect();
    assert_eq!(ids, ["user-1000", "msg-1001-0", "toolu_1", "msg-1003-0"]);
    // No stored prompt in the file (Pi 0.73.1 before its first reply): nothing to backfill.
    assert!(backfill(&messages, "pi-turn-1", |_| false).is_empty());
}
