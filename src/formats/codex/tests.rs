//! Literal lines as codex 0.169 writes them (docs/reference: the watchers' observations; where
//! the captures elide a part with `…` outside a string, the part is left out).

use serde_json::json;

use super::*;

fn line(text: &str) -> RolloutLine {
    RolloutLine::from_slice(text.as_bytes()).unwrap()
}

#[test]
fn rollout_lines_of_0_169() {
    let meta = line(
        r#"{"timestamp":"2026-12-01T09:08:38.420Z","ordinal":0,"type":"session_meta","payload":{"id":"01a230dc-f6f8-7663-b1a5-db280f67d13e","cwd":"/home/me/proj","originator":"codex_cli_rs","cli_version":"0.169.0","base_instructions":{"text":"You are Codex…"}}}"#,
    );
    assert_eq!(meta.timestamp.as_deref(), Some("2026-12-01T09:08:38.420Z"));
    assert_eq!(
        meta.item,
        RolloutItem::SessionMeta(SessionMeta {
            id: Some("01a230dc-f6f8-7663-b1a5-db280f67d13e".into()),
            cwd: Some("/home/me/proj".into()),
        })
    );

    let call = line(
        r#"{"timestamp":"2026-12-01T09:08:48.926Z","ordinal":24,"type":"response_item","payload":{"type":"function_call","status":"completed","id":"fc_ea278f7205e8","name":"exec_command","arguments":"{\"cmd\": \"touch made_by_codex.txt\", \"sandbox_permissions\": \"require_escalated\", …}","call_id":"call_4_697d3013"}}"#,
    );
    let RolloutItem::ResponseItem(item) = &call.item else {
        panic!("{call:?}")
    };
    assert_eq!(item.kind(), "function_call");
    assert_eq!(
        *item,
        ResponseItem::FunctionCall(ToolCallItem {
            call_id: Some("call_4_697d3013".into()),
            id: Some("fc_ea278f7205e8".into()),
        })
    );

    let complete = line(
        r#"{"timestamp":"2026-12-01T09:08:39.301Z","ordinal":18,"type":"event_msg","payload":{"type":"task_complete","turn_id":"01a230dc-fc15-…","last_agent_message":"The command ran. Done.","started_at":1796116118,"completed_at":1796116119,"duration_ms":735,"time_to_first_token_ms":184}}"#,
    );
    assert!(
        matches!(&complete.item, RolloutItem::EventMsg(EventMsg::TaskComplete(t)) if !t.has_error())
    );
    let failed = line(
        r#"{"type":"event_msg","payload":{"type":"task_complete","last_agent_message":null,"error":{"message":"stream disconnected before completion: mock failure","codex_error_info":"other"}}}"#,
    );
    assert!(
        matches!(&failed.item, RolloutItem::EventMsg(EventMsg::TaskComplete(t)) if t.has_error())
    );

    let aborted = line(
        r#"{"timestamp":"2026-12-01T09:09:09.616Z","ordinal":41,"type":"event_msg","payload":{"type":"turn_aborted","turn_id":"01a230dd-61d7-…","reason":"interrupted","started_at":1796116144,"completed_at":1796116149,"duration_ms":4999}}"#,
    );
    assert_eq!(
        aborted.item,
        RolloutItem::EventMsg(EventMsg::TurnAborted(TurnAbortedEvent {
            turn_id: Some("01a230dd-61d7-…".into()),
            reason: Some("interrupted".into()),
            duration_ms: Some(4999),
        }))
    );

    let prompt = line(
        r#"{"timestamp":"2026-12-01T09:08:38.471Z","ordinal":8,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a230dc-f6f8-7663-b1a5-db280f67d13e","turn_id":"t1","item":{"type":"UserMessage","id":"u1","content":[{"type":"text","text":"Run echo hi please","text_elements":[]}]}}}"#,
    );
    let RolloutItem::EventMsg(EventMsg::ItemCompleted(completed)) = &prompt.item else {
        panic!("{prompt:?}")
    };
    let item = completed.item.as_ref().unwrap();
    assert_eq!(item.kind.as_deref(), Some("UserMessage"));
    assert_eq!(item.content[0].text.as_deref(), Some("Run echo hi please"));

    let message = line(
        r#"{"timestamp":"2026-12-01T09:08:38.451Z","ordinal":3,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/me/proj</cwd>\n</environment_context>"}]}}"#,
    );
    let RolloutItem::ResponseItem(ResponseItem::Message(message)) = &message.item else {
        panic!("{message:?}")
    };
    assert_eq!(message.role.as_deref(), Some("user"));
    assert!(
        message.content[0]
            .text
            .as_deref()
            .unwrap()
            .starts_with("<environment_context>")
    );

    let usage = line(
        r#"{"timestamp":"2026-12-01T09:08:48.930Z","ordinal":25,"type":"token_usage_record","payload":{"input_tokens":10}}"#,
    );
    assert_eq!(usage.item, RolloutItem::Other("token_usage_record".into()));
}

/// A command the agent ran, as the real codex TUI wrote it in an adopted pane (recorded from
/// `suite::codex::adopt_approvals` against the mock model): 0.169.0, then 0.171.0 with output.
const COMMAND_0_169: &str = r#"{"timestamp":"2026-12-03T22:46:00.073Z","ordinal":21,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a23e15-ed17-7702-9bf1-9a4a03120d54","turn_id":"01a23e15-f33e-7723-82fe-ad1317be28ee","item":{"type":"CommandExecution","id":"call_mock_6","process_id":"20150","command":["/bin/bash","-lc","touch made_by_codex.txt"],"cwd":"file:///tmp/cohost-adopt-codex-1uqCKU/ws","parsed_cmd":[{"type":"unknown","cmd":"touch made_by_codex.txt"}],"source":"unified_exec_startup","status":"completed","aggregated_output":"","exit_code":0,"duration":{"secs":0,"nanos":21570}},"started_at_ms":1796337955881,"completed_at_ms":1796337960073}}"#;
pub(crate) const COMMAND_0_171: &str = r#"{"timestamp":"2026-12-03T22:59:38.970Z","ordinal":21,"type":"event_msg","payload":{"type":"item_completed","thread_id":"01a23e22-77f3-7981-8198-e28f0ce9f8f3","turn_id":"01a23e22-7cce-7602-befc-f2fab0a6683f","item":{"type":"CommandExecution","id":"call_mock_6","process_id":"77103","command":["/bin/bash","-lc","touch made_by_codex.txt && echo made it"],"cwd":"file:///tmp/cohost-adopt-codex-run2Gu/ws","parsed_cmd":[{"type":"unknown","cmd":"touch made_by_codex.txt && echo made it"}],"source":"unified_exec_startup","status":"completed","aggregated_output":"made it\n","exit_code":0,"duration":{"secs":0,"nanos":24967}},"started_at_ms":1796338777539,"completed_at_ms":1796338778970}}"#;

#[test]
fn command_execution_items_of_0_169_and_0_171() {
    for (text, cmd, output, workspace) in [
        (
            COMMAND_0_169,
            "touch made_by_codex.txt",
            "",
            "/tmp/cohost-adopt-codex-1uqCKU/ws",
        ),
        (
            COMMAND_0_171,
            "touch made_by_codex.txt && echo made it",
            "made it\n",
            "/tmp/cohost-adopt-codex-run2Gu/ws",
        ),
    ] {
        let RolloutItem::EventMsg(EventMsg::ItemCompleted(completed)) = line(text).item else {
            panic!("{text}")
        };
        assert!(completed.turn_id.is_some());
        let item = completed.item.unwrap();
        assert_eq!(item.kind.as_deref(), Some("CommandExecution"));
        assert_eq!(item.id.as_deref(), Some("call_mock_6"));
        assert_eq!(item.command, vec!["/bin/bash", "-lc", cmd]);
        assert_eq!(item.cwd_path().as_deref(), Some(workspace));
        assert_eq!(item.status.as_deref(), Some("completed"));
        assert_eq!(item.aggregated_output.as_deref(), Some(output));
        assert_eq!(item.exit_code, Some(0));
        assert_eq!(item.duration.and_then(|d| d.as_millis()), Some(0));
    }
    let cwd = |cwd: &str| {
        TurnItem {
            cwd: Some(cwd.into()),
            ..TurnItem::default()
        }
        .cwd_path()
    };
    assert_eq!(
        cwd("file:///home/me/my%20proj").as_deref(),
        Some("/home/me/my proj")
    );
    assert_eq!(cwd("/home/me").as_deref(), Some("/home/me"));
    assert_eq!(cwd("file:///bad%2"), None);
    assert_eq!(cwd("https://example.com/x"), None);
    let duration = ItemDuration {
        secs: Some(2),
        nanos: Some(345_678_901),
    };
    assert_eq!(duration.as_millis(), Some(2345));
}

#[test]
fn odd_lines_read_with_fields_absent() {
    assert_eq!(RolloutLine::from_slice(b"{\"type\":"), None, "not JSON");
    let odd = RolloutLine::from_value(&json!([1, 2]));
    assert_eq!(
        (odd.timestamp, odd.item),
        (None, RolloutItem::Other(String::new()))
    );
    let odd =
        RolloutLine::from_value(&json!({"timestamp": 5, "type": "session_meta", "payload": "x"}));
    assert_eq!(odd.timestamp, None);
    assert_eq!(odd.item, RolloutItem::SessionMeta(SessionMeta::default()));
    let odd = RolloutLine::from_value(
        &json!({"type": "event_msg", "payload": {"type": "task_complete", "error": null}}),
    );
    assert!(matches!(odd.item, RolloutItem::EventMsg(EventMsg::TaskComplete(t)) if !t.has_error()));
    let odd = RolloutLine::from_value(
        &json!({"type": "response_item", "payload": {"type": "message", "role": 1, "content": ["x", {"text": 2}, {"text": "y"}]}}),
    );
    assert_eq!(
        odd.item,
        RolloutItem::ResponseItem(ResponseItem::Message(MessageItem {
            role: None,
            content: vec![
                ContentItem { text: None },
                ContentItem {
                    text: Some("y".into())
                }
            ],
        }))
    );
    let odd = RolloutLine::from_value(
        &json!({"type": "event_msg", "payload": {"type": "shutdown_complete"}}),
    );
    assert_eq!(
        odd.item,
        RolloutItem::EventMsg(EventMsg::Other("shutdown_complete".into()))
    );
}

#[test]
fn session_index_line_of_0_169() {
    let entry = SessionIndexEntry::from_slice(
        br#"{"id":"01a230dc-f6f8-7663-b1a5-db280f67d13e","thread_name":"Echo hi test","updated_at":"2026-12-01T09:08:39.027366275Z"}"#,
    )
    .unwrap();
    assert_eq!(
        entry,
        SessionIndexEntry {
            id: Some("01a230dc-f6f8-7663-b1a5-db280f67d13e".into()),
            thread_name: Some("Echo hi test".into()),
            updated_at: Some("2026-12-01T09:08:39.027366275Z".into()),
        }
    );
    assert_eq!(
        SessionIndexEntry::from_slice(b"[\"x\"]"),
        Some(SessionIndexEntry::default())
    );
    assert_eq!(SessionIndexEntry::from_slice(b"{"), None);
}
