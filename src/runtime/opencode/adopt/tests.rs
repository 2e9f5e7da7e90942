//! The reader of an adopted OpenCode's database ([`read`]): a running turn held back, steps
//! that end in tool calls, prompts without their text yet, an abort; and the comparisons the
//! adopter makes.

use serde_json::{Value, json};

use super::approval::approval_request;
use super::turns::REJECTED;
use super::*;
use crate::protocol::ApprovalKind;
use crate::protocol::TurnStatus;
use crate::runtime::opencode::wire::MessageWithParts;

fn user(id: &str, created: u64, text: &str) -> Value {
    json!({"info": {"id": id, "sessionID": "ses_a", "role": "user", "time": {"created": created}},
        "parts": [{"id": format!("prt_{id}"), "sessionID": "ses_a", "messageID": id,
            "type": "text", "text": text}]})
}

fn assistant(
    id: &str,
    created: u64,
    completed: Option<u64>,
    finish: Option<&str>,
    text: &str,
) -> Value {
    json!({"info": {"id": id, "sessionID": "ses_a", "role": "assistant",
            "time": {"created": created, "completed": completed}, "finish": finish},
        "parts": [{"id": format!("prt_{id}"), "sessionID": "ses_a", "messageID": id,
            "type": "text", "text": text}]})
}

fn messages(values: &[Value]) -> Vec<MessageWithParts> {
    values
        .iter()
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .collect()
}

fn ends(read: &Read) -> Vec<(String, TurnStatus)> {
    read.events
        .iter()
        .filter_map(|k| match k {
            EventKind::TurnCompleted(c) => Some((c.turn_id.clone(), c.status)),
            _ => None,
        })
        .collect()
}

fn texts(read: &Read) -> Vec<String> {
    read.events
        .iter()
        .filter_map(|k| match k {
            EventKind::ItemCompleted(i) => match &i.item {
                Item::UserMessage { text, .. } | Item::AgentMessage { text, .. } => {
                    Some(text.clone())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A turn still streaming is held back: its start and prompt are read, not its unfinished
/// text nor the `interrupted` end `history` would give it; once OpenCode completes it, it
/// reads as completed.
#[test]
fn a_running_turn_is_held_back_until_the_database_shows_its_end() {
    let done = [
        user("msg_1", 1, "first"),
        assistant("msg_2", 2, Some(3), Some("stop"), "one"),
    ];
    let streaming = [
        &done[..],
        &[
            user("msg_3", 4, "second"),
            assistant("msg_4", 5, None, None, "half"),
        ],
    ]
    .concat();
    let read_now = read(&messages(&streaming), None);
    assert_eq!(read_now.running.as_deref(), Some("msg_3"));
    assert_eq!(
        ends(&read_now),
        [("msg_1".to_string(), TurnStatus::Completed)]
    );
    assert_eq!(texts(&read_now), ["first", "one", "second"]);
    assert_eq!(adopted_after(&read_now).as_deref(), Some("msg_1"));

    // A step that ended in tool calls does not end the turn; its text is read.
    let stepped = [
        &done[..],
        &[
            user("msg_3", 4, "second"),
            assistant("msg_4", 5, Some(6), Some("tool-calls"), "calling"),
            assistant("msg_5", 7, None, None, "hal"),
        ],
    ]
    .concat();
    let read_now = read(&messages(&stepped), Some("msg_1"));
    assert_eq!(read_now.running.as_deref(), Some("msg_3"));
    assert_eq!(ends(&read_now), []);
    assert_eq!(texts(&read_now), ["second", "calling"]);

    let finished = [
        &done[..],
        &[
            user("msg_3", 4, "second"),
            assistant("msg_4", 5, Some(6), Some("tool-calls"), "calling"),
            assistant("msg_5", 7, Some(8), Some("stop"), "whole"),
        ],
    ]
    .concat();
    let read_now = read(&messages(&finished), Some("msg_1"));
    assert_eq!(read_now.running, None);
    assert_eq!(
        ends(&read_now),
        [("msg_3".to_string(), TurnStatus::Completed)]
    );
    assert_eq!(texts(&read_now), ["second", "calling", "whole"]);
    assert_eq!(adopted_after(&read_now).as_deref(), Some("msg_3"));
}

/// A prompt just stored, before any reply, is a running turn; a prompt whose text part is not
/// stored yet is not read at all (its source is told by its text).
/// Every prompt of the session is known, the turns before the adoption's checkpoint too: the
/// screen may show any of them.
#[test]
fn every_prompt_is_read_also_before_the_checkpoint() {
    let all = [
        user("msg_1", 1, "before the adoption"),
        assistant("msg_2", 2, Some(3), Some("stop"), "one"),
        user("msg_3", 4, "after it"),
        assistant("msg_4", 5, Some(6), Some("stop"), "two"),
    ];
    let read_now = read(&messages(&all), Some("msg_1"));
    assert_eq!(texts(&read_now), ["after it", "two"]);
    assert_eq!(read_now.prompts, ["before the adoption", "after it"]);
}

#[test]
fn a_prompt_without_its_text_yet_is_not_read() {
    let mut bare = user("msg_1", 1, "first");
    bare["parts"] = json!([]);
    let read_now = read(&messages(&[bare]), None);
    assert_eq!(read_now, Read::default());
    assert!(read_now.prompts.is_empty());
    let read_now = read(&messages(&[user("msg_1", 1, "first")]), None);
    assert_eq!(read_now.running.as_deref(), Some("msg_1"));
    assert_eq!(texts(&read_now), ["first"]);
    assert_eq!(adopted_after(&read_now), None);
}

#[test]
fn an_aborted_turn_ends_interrupted_and_prompts_compare_without_whitespace() {
    let mut aborted = assistant("msg_2", 2, None, None, "Once");
    aborted["info"]["error"] =
        json!({"name": "MessageAbortedError", "data": {"message": "Aborted"}});
    let read_now = read(&messages(&[user("msg_1", 1, "story"), aborted]), None);
    assert_eq!(read_now.running, None);
    assert_eq!(
        ends(&read_now),
        [("msg_1".to_string(), TurnStatus::Interrupted)]
    );
    assert_eq!(
        squeezed("Tell me a\nlong  story"),
        squeezed("Tell me a long story")
    );
    assert_ne!(squeezed("a b"), squeezed("a c"));
    assert!(!is_opencode(std::process::id()));
}

/// A permission rejected without a message ends the turn (OpenCode calls the model no more),
/// though its last step completed with `tool-calls`; rejected with feedback, the turn goes on.
#[test]
fn a_rejected_permission_ends_the_turn_unless_it_carries_feedback() {
    let step = |error: &str| {
        let mut step = assistant("msg_2", 2, Some(3), Some("tool-calls"), "");
        step["parts"] = json!([{"id": "prt_tool", "sessionID": "ses_a", "messageID": "msg_2",
            "type": "tool", "tool": "bash", "callID": "toolu_1",
            "state": {"status": "error", "input": {"command": "touch x"}, "error": error,
                "time": {"start": 2, "end": 3}}}]);
        step
    };
    let rejected = read(
        &messages(&[user("msg_1", 1, "touch please"), step(REJECTED)]),
        None,
    );
    assert_eq!(rejected.running, None);
    assert_eq!(
        ends(&rejected),
        [("msg_1".to_string(), TurnStatus::Completed)]
    );
    let feedback = "The user rejected permission to use this specific tool call with the following feedback: no";
    let goes_on = read(
        &messages(&[user("msg_1", 1, "touch please"), step(feedback)]),
        None,
    );
    assert_eq!(goes_on.running.as_deref(), Some("msg_1"));
    assert_eq!(ends(&goes_on), []);
}

/// A dialog's approval: a shell command as `command`, an edit as `fileChange`, another
/// permission as `tool` with its body in the reason; offered `accept` and `cancel`.
#[test]
fn a_permission_dialog_is_an_approval_of_its_kind() {
    let asked = |title: &str, body: &[&str]| screen::Asked {
        title: title.into(),
        body: body.iter().map(|l| l.to_string()).collect(),
    };
    let command = approval_request("msg_1".into(), 0, &asked("# Shell command", &["$ echo hi"]));
    assert_eq!(command.approval_id.to_string(), "ap:msg_1:screen0:command");
    assert_eq!(command.kind, ApprovalKind::Command);
    assert_eq!(command.command.as_deref(), Some("echo hi"));
    assert_eq!(
        command.reason.as_deref(),
        Some("opencode asks for permission: # Shell command")
    );
    let decisions: Vec<String> = command.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(decisions, ["accept", "cancel"]);
    let edit = approval_request(
        "msg_1".into(),
        1,
        &asked("\u{2192} Edit a.txt", &["-a", "+b"]),
    );
    assert_eq!(edit.kind, ApprovalKind::FileChange);
    assert_eq!(edit.command, None);
    let tool = approval_request(
        "msg_1".into(),
        2,
        &asked("\u{2699} Call tool x", &["Tool: x"]),
    );
    assert_eq!(tool.approval_id.to_string(), "ap:msg_1:screen2:tool");
    assert_eq!(
        tool.reason.as_deref(),
        Some("opencode asks for permission: \u{2699} Call tool x: Tool: x")
    );
}
