//! Literal payloads and lines as Claude Code 2.1.197 and 2.1.332 write them (docs/peers.md
//! summarises them; where the captures elide a part with `…` outside a string, the part is left
//! out).

use serde_json::{Value, json};

use super::*;

/// The line `cohost-hook` writes (the shared boundary type) reads back the same here.
#[test]
fn the_hooks_own_line_reads_back() {
    let written = crate::protocol::boundary::HookLine {
        received_at: 1795957500811,
        event: "PermissionRequest".into(),
        request_id: Some("9f0c".into()),
        payload: serde_json::json!({"session_id":"s1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls"}}),
    };
    let read = HookLine::from_value(&serde_json::to_value(&written).unwrap());
    assert_eq!(read.received_at, Some(written.received_at));
    assert_eq!(read.event.as_deref(), Some("PermissionRequest"));
    assert_eq!(read.request_id.as_deref(), Some("9f0c"));
    assert!(
        matches!(read.payload.event, HookEvent::PermissionRequest(_)),
        "{read:?}"
    );
}

fn hook(event: &str, payload: &str) -> HookLine {
    HookLine::from_value(&json!({
        "receivedAt": 1795957501000u64,
        "event": event,
        "payload": serde_json::from_str::<Value>(payload).unwrap(),
    }))
}

fn record(line: &str) -> TranscriptRecord {
    serde_json::from_str(line).unwrap()
}

#[test]
fn hook_payloads_of_2_1_197() {
    let start = hook(
        "SessionStart",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "hook_event_name": "SessionStart", "source": "startup", "model": "claude-opus-4-8[1m]"}"#,
    );
    assert_eq!(start.received_at, Some(1795957501000));
    assert_eq!(
        start.payload.common.session_id.as_deref(),
        Some("3c74e8a3-0d49-463f-801d-b8088269916a")
    );
    assert_eq!(start.payload.common.permission_mode, None);
    assert!(
        matches!(&start.payload.event, HookEvent::SessionStart(s) if s.source.as_deref() == Some("startup"))
    );

    let submit = hook(
        "UserPromptSubmit",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": "Say hello"}"#,
    );
    assert_eq!(
        submit.payload.common.prompt_id.as_deref(),
        Some("125e97e0-3976-4d40-8b1f-3b09b0e7b342")
    );
    assert_eq!(
        submit.payload.common.permission_mode,
        Some(PermissionMode::Default)
    );
    assert!(
        matches!(&submit.payload.event, HookEvent::UserPromptSubmit(u) if u.prompt.as_deref() == Some("Say hello"))
    );

    let pre = hook(
        "PreToolUse",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "Print hi"}, "tool_use_id": "toolu_mock_4e5418d5b9534157bf66"}"#,
    );
    let HookEvent::PreToolUse(pre) = &pre.payload.event else {
        panic!()
    };
    assert_eq!(pre.tool_name.as_deref(), Some("Bash"));
    assert_eq!(
        BashToolInput::of(pre.tool_input.as_ref())
            .command
            .as_deref(),
        Some("echo hi")
    );

    let post = hook(
        "PostToolUse",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "Print hi"}, "tool_response": {"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}, "tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "duration_ms": 86}"#,
    );
    let HookEvent::PostToolUse(post) = &post.payload.event else {
        panic!()
    };
    assert_eq!(post.duration_ms, Some(86));
    assert_eq!(
        post.tool_response
            .as_ref()
            .map(ToolResponse::text)
            .as_deref(),
        Some("hi")
    );

    let failure = hook(
        "PostToolUseFailure",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "de438983-b10e-4981-8659-e04f1f81fabc", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_input": {"command": "ls ./nonexistent_subdir", "description": "List missing"}, "tool_use_id": "toolu_mock_a781a51f869e451b802d", "error": "Exit code 2\nls: cannot access './nonexistent_subdir': No such file or directory", "is_interrupt": false, "duration_ms": 21}"#,
    );
    assert!(
        matches!(&failure.payload.event, HookEvent::PostToolUseFailure(f) if f.error.as_deref().unwrap().starts_with("Exit code 2") && f.is_interrupt == Some(false))
    );

    let permission = HookLine::from_value(
        &json!({"receivedAt": 1, "event": "PermissionRequest", "requestId": "r-7", "payload": serde_json::from_str::<Value>(r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "288b3cd3-9a66-4e46-9315-1eb88dcc67a0", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch made_by_claude.txt", "description": "Create file"}, "permission_suggestions": [{"type": "addDirectories", "directories": ["$PROBE/ws_s01_basic"], "destination": "session"}, {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}"#).unwrap()}),
    );
    assert_eq!(permission.request_id.as_deref(), Some("r-7"));
    let HookEvent::PermissionRequest(request) = &permission.payload.event else {
        panic!()
    };
    assert_eq!(request.permission_suggestions.len(), 2);
    assert_eq!(
        BashToolInput::of(request.tool_input.as_ref()),
        BashToolInput {
            command: Some("touch made_by_claude.txt".into()),
            description: Some("Create file".into())
        }
    );

    let stop = hook(
        "Stop",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Hello from the mock. word word word END.", "background_tasks": [], "session_crons": []}"#,
    );
    assert!(
        matches!(&stop.payload.event, HookEvent::Stop(s) if s.last_assistant_message.as_deref() == Some("Hello from the mock. word word word END.") && s.stop_hook_active == Some(false))
    );

    let failure = hook(
        "StopFailure",
        r#"{"session_id": "9cee02f2-1a30-458c-99f6-7f534849df22", "transcript_path": "$PROBE/results/s05_print_mode/home/.claude/projects/-probe-ws-s05-print-mode/9cee02f2-1a30-458c-99f6-7f534849df22.jsonl", "cwd": "$PROBE/ws_s05_print_mode", "prompt_id": "7a968e6b-9f18-4f61-9ce9-126d70943884", "effort": {"level": "high"}, "hook_event_name": "StopFailure", "error": "unknown", "last_assistant_message": "API Error: 400 mock says no"}"#,
    );
    assert!(
        matches!(&failure.payload.event, HookEvent::StopFailure(f) if f.error.as_deref() == Some("unknown"))
    );

    let end = hook(
        "SessionEnd",
        r#"{"session_id": "869115aa-8b3a-40d4-be5f-f9aed0966f43", "transcript_path": "$PROBE/results/s04_resume/home/.claude/projects/-probe-ws-s04-resume/869115aa-8b3a-40d4-be5f-f9aed0966f43.jsonl", "cwd": "$PROBE/ws_s04_resume", "prompt_id": "2d017a7c-28f5-4332-91cd-35d755bf2a4b", "hook_event_name": "SessionEnd", "reason": "clear"}"#,
    );
    assert!(
        matches!(&end.payload.event, HookEvent::SessionEnd(e) if e.reason.as_deref() == Some("clear"))
    );

    let idle = hook(
        "Notification",
        r#"{"session_id": "886e3646-cae2-4498-a73e-53f7bfa964f8", "transcript_path": "$PROBE/results/s06_more_hooks/home/.claude/projects/-probe-ws-s06-more-hooks/886e3646-cae2-4498-a73e-53f7bfa964f8.jsonl", "cwd": "$PROBE/ws_s06_more_hooks/sub", "prompt_id": "54e32f8a-1543-4f42-a4a1-bc384a769642", "hook_event_name": "Notification", "message": "Claude is waiting for your input", "notification_type": "idle_prompt"}"#,
    );
    assert!(
        matches!(&idle.payload.event, HookEvent::Notification(n) if n.notification_type.as_deref() == Some("idle_prompt"))
    );

    // An Agent tool's response is not Bash's shape: kept as JSON.
    let agent = hook(
        "PostToolUse",
        r#"{"session_id": "886e3646-cae2-4498-a73e-53f7bfa964f8", "prompt_id": "6c63ee13-965b-4593-9dee-ddc3a6a7f3a3", "hook_event_name": "PostToolUse", "tool_name": "Agent", "tool_input": {"description": "probe subagent", "subagent_type": "general-purpose"}, "tool_response": {"status": "completed", "agentId": "a0fe57af55ef54084", "content": [{"type": "text", "text": "Subagent report: all good."}], "totalDurationMs": 281}, "tool_use_id": "toolu_mock_86212010e74d4fe4ae1b", "duration_ms": 281}"#,
    );
    let HookEvent::PostToolUse(agent) = &agent.payload.event else {
        panic!()
    };
    assert!(matches!(agent.tool_response, Some(ToolResponse::Other(_))));

    // Events cohost does not read, and payloads that are not Claude's JSON.
    let batch = hook(
        "PostToolBatch",
        r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "hook_event_name": "PostToolBatch", "tool_calls": [{"tool_name": "Bash", "tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "tool_response": "hi"}]}"#,
    );
    assert_eq!(
        batch.payload.event,
        HookEvent::Other("PostToolBatch".into())
    );
    let truncated = HookLine::from_value(
        &json!({"receivedAt": 1, "event": "PostToolUse", "payload": {"truncated": true, "bytes": 5_000_000, "limit": 4_194_304, "head": "{\"session_id\""}}),
    );
    assert!(
        matches!(&truncated.payload.event, HookEvent::PostToolUse(p) if p.tool_use_id.is_none())
    );
    let text =
        HookLine::from_value(&json!({"receivedAt": 1, "event": "Stop", "payload": "not json"}));
    assert_eq!(
        text.payload,
        HookPayload {
            common: HookCommon::default(),
            event: HookEvent::Stop(StopHookInput::default()),
        }
    );
}

#[test]
fn lines_cohost_makes_read_like_their_json() {
    assert_eq!(
        HookLine::session_end("exited"),
        HookLine::from_value(
            &json!({"event": "SessionEnd", "payload": {"hook_event_name": "SessionEnd", "reason": "exited"}})
        )
    );
    let payload = json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch x"}});
    assert_eq!(
        HookLine::permission_request(7, "r1", &payload),
        HookLine::from_value(
            &json!({"receivedAt": 7, "event": "PermissionRequest", "requestId": "r1", "payload": payload})
        )
    );
}

#[test]
fn hook_payloads_of_2_1_332() {
    // L1: auto mode is reported; new fields (`effort`, `background_tasks`) are ignored.
    let submit = hook(
        "UserPromptSubmit",
        r#"{"prompt_id":"f548fb5c-…","permission_mode":"auto","hook_event_name":"UserPromptSubmit","prompt":"TOUCH please"}"#,
    );
    assert_eq!(
        submit.payload.common.permission_mode,
        Some(PermissionMode::Auto)
    );
    let pre = hook(
        "PreToolUse",
        r#"{"prompt_id":"f548fb5c-…","permission_mode":"auto","effort":{"level":"medium"},"tool_name":"Bash","tool_input":{"command":"touch made.txt"},"tool_use_id":"toolu_af81…"}"#,
    );
    assert!(
        matches!(&pre.payload.event, HookEvent::PreToolUse(p) if p.tool_use_id.as_deref() == Some("toolu_af81…"))
    );
    let post = hook(
        "PostToolUse",
        r#"{"permission_mode":"auto","tool_response":{"stdout":"","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":true},"duration_ms":82}"#,
    );
    assert!(
        matches!(&post.payload.event, HookEvent::PostToolUse(p) if p.tool_response.as_ref().map(ToolResponse::text).as_deref() == Some(""))
    );
    let stop = hook(
        "Stop",
        r#"{"permission_mode":"auto","last_assistant_message":"Done after the tool.","background_tasks":[],"session_crons":[]}"#,
    );
    assert!(
        matches!(&stop.payload.event, HookEvent::Stop(s) if s.last_assistant_message.as_deref() == Some("Done after the tool."))
    );
    // A permission mode a newer Claude adds is kept as sent.
    let odd = hook("Stop", r#"{"permission_mode":"supervised"}"#);
    assert_eq!(
        odd.payload
            .common
            .permission_mode
            .as_ref()
            .map(PermissionMode::as_str),
        Some("supervised")
    );
    // L4: the wrapped paste arrives as the prompt (unwrapped by the normalizer).
    let paste = hook(
        "UserPromptSubmit",
        r#"{"prompt_id":"p","prompt":"\n\n<pasted_content id=\"0fb6\">\nFirst line of a multi-line prompt\n  indented second line\n</pasted_content id=\"0fb6\">\n"}"#,
    );
    assert!(
        matches!(&paste.payload.event, HookEvent::UserPromptSubmit(u) if u.prompt.as_deref().unwrap().contains("<pasted_content"))
    );
}

#[test]
fn transcript_records_of_2_1_197() {
    let TranscriptRecord::User(head, prompt) = record(
        r#"{"parentUuid": null, "isSidechain": false, "promptId": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "type": "user", "message": {"role": "user", "content": "Say hello"}, "uuid": "3ef9e7c5-d2c0-4e43-a8dc-c78ad4ff242e", "timestamp": "2026-11-29T13:05:01.511Z", "permissionMode": "default", "origin": {"kind": "human"}, "promptSource": "typed", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s01_basic", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a", "version": "2.1.197", "gitBranch": "HEAD"}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        head.uuid.as_deref(),
        Some("3ef9e7c5-d2c0-4e43-a8dc-c78ad4ff242e")
    );
    assert_eq!(head.is_sidechain, Some(false));
    assert_eq!(prompt.prompt_source, Some(PromptSource::Typed));
    assert_eq!(
        prompt.content(),
        Some(&UserContent::Text("Say hello".into()))
    );

    let TranscriptRecord::Assistant(_, reply) = record(
        r#"{"parentUuid": "1ed51a13-8d15-47b5-a320-ca310e9d6e15", "isSidechain": false, "message": {"id": "msg_mock_0002_a7861594c19d", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [{"type": "text", "text": "Hello from the mock. word word END."}], "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 22245, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 63, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": "", "iterations": [], "speed": "standard"}, "stop_details": null}, "requestId": "req_mock_ab0c00fd50d549af", "type": "assistant", "uuid": "f4019d42-d4ee-42fb-a1bf-689db526c181", "timestamp": "2026-11-29T13:05:07.421Z", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s01_basic", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a", "version": "2.1.197", "gitBranch": "HEAD"}"#,
    ) else {
        panic!()
    };
    let message = reply.message.unwrap();
    assert_eq!(message.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(message.usage.unwrap().input_tokens, Some(22245));
    assert_eq!(
        message.content,
        [AssistantContentBlock::Text(TextBlock {
            text: Some("Hello from the mock. word word END.".into())
        })]
    );

    let TranscriptRecord::Assistant(_, tool) = record(
        r#"{"parentUuid": "8dc77705-9f25-41d6-9982-de14937246a6", "isSidechain": false, "message": {"id": "msg_mock_0005_e9c7840ea5aa", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [{"type": "tool_use", "id": "toolu_mock_4e5418d5b9534157bf66", "name": "Bash", "input": {"command": "echo hi", "description": "Print hi"}}], "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 22332, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 44}, "stop_details": null}, "requestId": "req_mock_26afdca765af44e5", "type": "assistant", "uuid": "f9165ba6-2cc7-431f-be18-6de23498f30f"}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        tool.message.unwrap().content,
        [AssistantContentBlock::ToolUse(ToolUseBlock {
            id: Some("toolu_mock_4e5418d5b9534157bf66".into()),
            name: Some("Bash".into()),
            input: Some(json!({"command": "echo hi", "description": "Print hi"})),
        })]
    );

    let TranscriptRecord::User(_, result) = record(
        r#"{"parentUuid": "f9165ba6-2cc7-431f-be18-6de23498f30f", "isSidechain": false, "promptId": "00f4130d-955b-49f3-8941-a9d2228d21f8", "type": "user", "message": {"role": "user", "content": [{"tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "type": "tool_result", "content": "hi", "is_error": false}]}, "uuid": "93d4f33c-c488-4a5f-9348-30cb2a363243", "timestamp": "2026-11-29T13:05:08.566Z", "toolUseResult": {"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}, "sourceToolAssistantUUID": "f9165ba6-2cc7-431f-be18-6de23498f30f"}"#,
    ) else {
        panic!()
    };
    let Some(UserContent::Blocks(blocks)) = result.content() else {
        panic!()
    };
    let [UserContentBlock::ToolResult(result)] = blocks.as_slice() else {
        panic!("{blocks:?}")
    };
    assert_eq!(result.text(), "hi");
    assert_eq!(result.is_error, Some(false));

    let TranscriptRecord::System(_, end) = record(
        r#"{"parentUuid": "6736a104-bf2b-4803-91ce-26268903ab66", "isSidechain": false, "type": "system", "subtype": "turn_duration", "durationMs": 5859, "messageCount": 5, "timestamp": "2026-11-29T13:05:07.493Z", "uuid": "29814aa1-6f59-4efa-9ea5-53904b0b41a9", "isMeta": false}"#,
    ) else {
        panic!()
    };
    assert_eq!(end.subtype.as_deref(), Some("turn_duration"));
    assert_eq!(end.duration_ms, Some(5859));

    // Synthetic lines: an interrupt's partial text, an API error.
    let TranscriptRecord::Assistant(_, partial) = record(
        r#"{"parentUuid": "abdc31b6-2321-4034-9b5e-ed283de37915", "isSidechain": false, "type": "assistant", "uuid": "2885e6b1-1291-49dd-b83f-b2ac780c4f14", "timestamp": "2026-11-29T13:05:22.705Z", "message": {"id": "c036838e-6783-4be4-866a-a4188acef180", "container": null, "model": "<synthetic>", "role": "assistant", "stop_details": null, "stop_reason": "stop_sequence", "stop_sequence": "", "type": "message", "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": null, "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": null, "iterations": null, "speed": null}, "content": [{"type": "text", "text": "Streaming slowly: w00 w01 w02 w03 w04 w05 w06 w07 w08 w09 w1"}], "context_management": null}, "isApiErrorMessage": false}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        partial.message.unwrap().model.as_deref(),
        Some("<synthetic>")
    );
    assert_eq!(partial.is_api_error_message, Some(false));
    let TranscriptRecord::Assistant(_, error) = record(
        r#"{"parentUuid": "496b649c-b4c0-4e0a-95d7-2cdac30aae05", "isSidechain": false, "type": "assistant", "uuid": "0a4b39fd-ec6e-4e30-910e-0fcee68630cd", "timestamp": "2026-11-29T13:07:30.940Z", "message": {"id": "11250bd9-9642-4c1c-aad2-3235e8a864d8", "container": null, "model": "<synthetic>", "role": "assistant", "stop_details": null, "stop_reason": "stop_sequence", "stop_sequence": "", "type": "message", "usage": {"input_tokens": 0, "output_tokens": 0}, "content": [{"type": "text", "text": "API Error: 400 mock says no"}], "context_management": null}, "requestId": "req_mock_f1d79185e5844fdf", "error": "unknown", "isApiErrorMessage": true, "apiErrorStatus": 400, "userType": "external", "entrypoint": "sdk-cli"}"#,
    ) else {
        panic!()
    };
    assert_eq!(error.is_api_error_message, Some(true));
    assert_eq!(error.api_error_status, Some(json!(400)));

    let TranscriptRecord::User(_, marker) = record(
        r#"{"parentUuid": "2885e6b1-1291-49dd-b83f-b2ac780c4f14", "isSidechain": false, "promptId": "d8b68b95-921d-48e7-8c23-b38346f7bcde", "type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}, "uuid": "a3cabaae-33fb-4540-a45f-ce0cb1297a4e", "timestamp": "2026-11-29T13:05:22.708Z", "interruptedMessageId": "msg_mock_0003_9890340d89f0"}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        marker.interrupted_message_id.as_deref(),
        Some("msg_mock_0003_9890340d89f0")
    );

    // Meta and summary prompts are told apart by their flags.
    let TranscriptRecord::User(_, caveat) = record(
        r#"{"parentUuid": null, "isSidechain": false, "promptId": "2d017a7c-28f5-4332-91cd-35d755bf2a4b", "type": "user", "message": {"role": "user", "content": "<local-command-caveat>Caveat: …</local-command-caveat>"}, "isMeta": true, "uuid": "12b5ea11-186b-4a02-a9fb-0c9f1b59f473"}"#,
    ) else {
        panic!()
    };
    assert_eq!(caveat.is_meta, Some(true));
    let TranscriptRecord::User(_, summary) = record(
        r#"{"parentUuid": "f7e3cf42-ea27-4c13-96ae-31c07f33c3dc", "isSidechain": false, "promptId": "a6c86d36-2251-4c9a-b79a-52ddcba95ee9", "type": "user", "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context."}, "isVisibleInTranscriptOnly": true, "isCompactSummary": true, "uuid": "3ca561b4-0655-4baf-9f78-60976eae417e"}"#,
    ) else {
        panic!()
    };
    assert!(summary.is_compact_summary());

    // A subagent's line.
    let sidechain = record(
        r#"{"parentUuid": null, "isSidechain": true, "promptId": "6c63ee13-965b-4593-9dee-ddc3a6a7f3a3", "agentId": "a0fe57af55ef54084", "type": "user", "message": {"role": "user", "content": "Report status."}, "uuid": "ed101b93-ef0c-439d-8aa4-61b0fb712601"}"#,
    );
    assert_eq!(sidechain.head().is_sidechain, Some(true));

    // Kinds cohost does not read.
    for (line, kind) in [
        (
            r#"{"type": "mode", "mode": "normal", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
            "mode",
        ),
        (
            r#"{"type": "permission-mode", "permissionMode": "default", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
            "permission-mode",
        ),
        (
            r#"{"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-11-29T13:06:14.999Z", "sessionId": "95e1d598-2527-4ab5-a6dc-71e482c0617c", "content": "Queued prompt A"}"#,
            "queue-operation",
        ),
        (
            r#"{"type": "last-prompt", "lastPrompt": "List a missing dir", "leafUuid": "e9816098-413d-4606-ac9f-1f472fa7e6fc", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
            "last-prompt",
        ),
        (
            r#"{"type": "ai-title", "aiTitle": "Mock title", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
            "ai-title",
        ),
        (
            r#"{"parentUuid": "7e9dd641-ea8b-4f3c-a0d7-734c474c5483", "isSidechain": false, "attachment": {"type": "queued_command", "prompt": "Injected during tool", "commandMode": "prompt", "origin": {"kind": "human"}, "timestamp": "2026-11-29T13:06:20.875Z"}, "type": "attachment", "uuid": "8645b7a7-d606-4890-abb7-2261e9fee55e"}"#,
            "attachment",
        ),
    ] {
        let record = record(line);
        assert!(matches!(record, TranscriptRecord::Other(_)), "{line}");
        assert_eq!(record.head().kind.as_deref(), Some(kind));
    }
}

#[test]
fn transcript_records_of_2_1_332() {
    // L6: an aborted partial reply names the real model and has no stop reason.
    let TranscriptRecord::Assistant(head, partial) = record(
        r#"{"parentUuid":"6eda…","message":{"id":"msg_ae01365aeb57","type":"message","role":"assistant","model":"claude-mock","content":[{"type":"text","text":"word0 word1 … word15"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"apiBlockIndex":0,"requestRef":"b9a4…","requestedModel":"claude-opus-5-5","promptCacheRequested":"5m","type":"assistant","uuid":"e9f88735-…","timestamp":"2026-12-01T09:18:23.092Z","isAbortedMidStream":true,"effort":"medium","perTurnEffort":"medium","madeBy":"model"}"#,
    ) else {
        panic!()
    };
    assert_eq!(head.uuid.as_deref(), Some("e9f88735-…"));
    assert_eq!(partial.is_aborted_mid_stream, Some(true));
    let message = partial.message.unwrap();
    assert_eq!(message.model.as_deref(), Some("claude-mock"));
    assert_eq!(message.stop_reason, None);
    assert_eq!(message.id.as_deref(), Some("msg_ae01365aeb57"));
    let TranscriptRecord::User(_, marker) = record(
        r#"{"parentUuid":"e9f88735-…","promptId":"c66f5bd0-…","type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"rowSource":"harness","interruptedMessageId":"msg_ae01365aeb57"}"#,
    ) else {
        panic!()
    };
    assert_eq!(marker.interrupted_message_id, message.id);

    // L5: a queued prompt's own line.
    let TranscriptRecord::User(_, queued) = record(
        r#"{"type":"user","promptId":"94a7033d-…","promptSource":"queued","sentAtMs":1796116683151,"turnPosition":{"promptIndex":3,"turnIndex":3},"message":{"role":"user","content":"And then this"}}"#,
    ) else {
        panic!()
    };
    assert_eq!(queued.prompt_source, Some(PromptSource::Queued));

    // L1/L8: tool results carry `permissionDecision`; new kinds are passed over.
    let TranscriptRecord::User(_, result) = record(
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_af81…","type":"tool_result","content":"(Bash completed with no output)","is_error":false}]},"sandboxed":false,"permissionDecision":{"decision":"accept","source":"config","reasonType":"mode"}}"#,
    ) else {
        panic!()
    };
    assert!(
        matches!(result.content(), Some(UserContent::Blocks(b)) if matches!(&b[0], UserContentBlock::ToolResult(r) if r.text() == "(Bash completed with no output)"))
    );
    for line in [
        r#"{"type":"permission-mode","permissionMode":"auto","sessionId":"24f3f4a0-…"}"#,
        r#"{"attachment":{"type":"auto_mode","autoModeConsentFlow":false,"finishExposedWork":false,"bashFirst":true,"bashFirstSteer":"relaxed","steerOnly":true,"bypass":false},"type":"attachment","rendered":[{"content":"<system-reminder>\nWhile auto mode is active:…"}],"renderedRole":"system"}"#,
        r#"{"type":"atis-latch","atis":""}"#,
        r#"{"type":"tools-used","tools":["Bash"]}"#,
        r#"{"type":"queue-operation","operation":"enqueue","content":"And then this"}"#,
    ] {
        assert!(matches!(record(line), TranscriptRecord::Other(_)), "{line}");
    }
}

#[test]
fn what_does_not_fit_reads_as_absent() {
    // Wrong types, odd content, non-objects: nothing fails, positions of blocks are kept.
    let TranscriptRecord::Assistant(_, odd) = record(
        r#"{"type":"assistant","uuid":7,"message":{"model":5,"content":["x",{"type":"thinking","thinking":"…"},{"type":"text","text":"kept"}],"stop_reason":3,"usage":null}}"#,
    ) else {
        panic!()
    };
    let message = odd.message.unwrap();
    assert_eq!(message.model, None);
    assert_eq!(message.stop_reason, None);
    assert_eq!(message.usage, Some(Usage::default()));
    assert_eq!(message.content.len(), 3);
    assert_eq!(
        message.content[0],
        AssistantContentBlock::Other(String::new())
    );
    assert_eq!(
        message.content[1],
        AssistantContentBlock::Other("thinking".into())
    );
    for line in [
        json!(null),
        json!([1]),
        json!("x"),
        json!({"message": [1, 2]}),
    ] {
        let record = TranscriptRecord::from_value(&line);
        assert!(matches!(record, TranscriptRecord::Other(_)), "{line}");
    }
    let TranscriptRecord::User(_, user) =
        TranscriptRecord::from_value(&json!({"type":"user","message":{"content":{"a":1}}}))
    else {
        panic!()
    };
    assert_eq!(user.content(), None);
    assert_eq!(RecordHead::of_line(r#"["user","u1"]"#), None);
    assert_eq!(
        RecordHead::of_line(r#"{"type":"user","uuid":"u1","message":{"content":"x"}}"#)
            .and_then(|head| head.uuid),
        Some("u1".into())
    );
}

#[test]
fn the_session_file() {
    // §6.
    let file = SessionFile::from_slice(r#"{"pid":20072,"sessionId":"3c74e8a3-…","cwd":"$PROBE/ws_s01_basic","startedAt":1795957500794,"procStart":"144789","version":"2.1.197","peerProtocol":1,"kind":"interactive","entrypoint":"cli","name":"ws-s01-basic-e9","nameSource":"derived","status":"waiting","updatedAt":1795957509799,"statusUpdatedAt":1795957509799,"waitingFor":"permission prompt"}"#.as_bytes()).unwrap();
    assert_eq!(file.pid, Some(20072));
    assert_eq!(file.status.as_deref(), Some("waiting"));
    assert_eq!(file.waiting_for.as_deref(), Some("permission prompt"));
    assert_eq!(file.cwd.as_deref(), Some("$PROBE/ws_s01_basic"));
    assert_eq!(file.status_updated_at, Some(1795957509799));
    assert_eq!(file.updated_at, Some(1795957509799));
    assert_eq!(SessionFile::from_slice(b"[\"idle\"]"), None);
    assert_eq!(
        SessionFile::from_slice(b"{\"status\":\"busy\"} trailing"),
        None
    );
}

#[test]
fn what_the_watcher_reads_besides() {
    // The head of a message line, a typed prompt's origin, and the title lines.
    let TranscriptRecord::User(head, prompt) = record(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"Run echo hi please"},"uuid":"a1","timestamp":"2026-12-01T09:08:01.330Z","sessionId":"tool-turn","cwd":"/home/me/proj","entrypoint":"sdk-cli","promptId":"p1","origin":{"kind":"human"},"promptSource":"typed"}"#,
    ) else {
        panic!()
    };
    assert_eq!(head.timestamp.as_deref(), Some("2026-12-01T09:08:01.330Z"));
    assert_eq!(head.cwd.as_deref(), Some("/home/me/proj"));
    assert_eq!(head.entrypoint.as_deref(), Some("sdk-cli"));
    assert_eq!(prompt.origin.and_then(|o| o.kind).as_deref(), Some("human"));
    let title = |line: &str| TitleRecord::from_value(&serde_json::from_str(line).unwrap());
    assert_eq!(
        title(r#"{"type":"ai-title","aiTitle":"Mock title","sessionId":"tool-turn"}"#).ai_title,
        Some("Mock title".into())
    );
    assert_eq!(
        title(r#"{"type":"custom-title","customTitle":"Mine"}"#).custom_title,
        Some("Mine".into())
    );
    assert_eq!(
        title(r#"{"type":"custom-title","customTitle":7}"#),
        TitleRecord::default()
    );
    assert_eq!(title("[1]"), TitleRecord::default());
}

#[test]
fn a_queued_command_attachment_names_the_prompt_it_delivered() {
    let prompt = |line: &str| QueuedCommandRecord::prompt_of(&serde_json::from_str(line).unwrap());
    // Literal, claude-code-observed.md (`attachment/queued_command`, 2.1.197).
    assert_eq!(
        prompt(
            r#"{"parentUuid": "7e9dd641-ea8b-4f3c-a0d7-734c474c5483", "isSidechain": false, "attachment": {"type": "queued_command", "prompt": "Injected during tool", "commandMode": "prompt", "origin": {"kind": "human"}, "timestamp": "2026-11-29T13:06:20.875Z"}, "type": "attachment", "uuid": "8645b7a7-d606-4890-abb7-2261e9fee55e", "timestamp": "2026-11-29T13:06:20.875Z", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s03_injection", "sessionId": "95e1d598-2527-4ab5-a6dc-71e482c0617c", "version": "2.1.197", "gitBranch": "HEAD"}"#
        )
        .as_deref(),
        Some("Injected during tool")
    );
    // Other attachments, other lines, and a prompt of the wrong type: none.
    assert_eq!(
        prompt(r#"{"attachment":{"type":"auto_mode","bypass":false},"type":"attachment"}"#),
        None
    );
    assert_eq!(
        prompt(r#"{"type":"queue-operation","operation":"enqueue","content":"And then this"}"#),
        None
    );
    assert_eq!(
        prompt(r#"{"type":"attachment","attachment":{"type":"queued_command","prompt":7}}"#),
        None
    );
    assert_eq!(prompt("[1]"), None);
}

#[test]
fn the_project_folder_of_a_working_directory() {
    // docs/peers.md: `$PROBE/ws_s01_basic` becomes `-probe-ws-s01-basic`.
    assert_eq!(
        project_dir_name("/probe/ws_s01_basic"),
        "-probe-ws-s01-basic"
    );
    assert_eq!(project_dir_name("/home/me/my.proj"), "-home-me-my-proj");
    // Over 200 characters: cut, and the base-36 absolute value of Java's string hash appended
    // (Java's `"/" + "a" * 250` hashes to -931632369).
    let long = format!("/{}", "a".repeat(250));
    assert_eq!(
        project_dir_name(&long),
        format!("-{}-feo44x", "a".repeat(199))
    );
}

#[test]
fn a_submitted_prompt_is_a_typed_line_only() {
    let user = |line: &str| match record(line) {
        TranscriptRecord::User(_, user) => user,
        other => panic!("not a user line: {other:?}"),
    };
    let typed = user(
        r#"{"type":"user","promptId":"p1","message":{"role":"user","content":"Say hello"},"uuid":"u1"}"#,
    );
    assert_eq!(typed.submitted_prompt(), Some("Say hello"));
    for line in [
        r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>x</local-command-caveat>"}}"#,
        r#"{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"}}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}}"#,
        r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued"}}"#,
    ] {
        assert_eq!(user(line).submitted_prompt(), None, "{line}");
    }
}

#[test]
fn the_model_a_conversation_last_ran_on() {
    let lines = [
        r#"{"type":"assistant","uuid":"a0","isSidechain":false,"message":{"id":"m0","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Earlier"}],"stop_reason":"end_turn"}}"#,
        r#"{"type":"assistant","uuid":"a1","isSidechain":false,"message":{"id":"m1","model":"claude-opus-4-8","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn"}}"#,
        // A subagent's line, an interrupt's made-up line, a prompt and a torn line after it.
        r#"{"type":"assistant","uuid":"a2","isSidechain":true,"message":{"id":"m2","model":"claude-haiku-4-5","content":[],"stop_reason":"end_turn"}}"#,
        r#"{"type":"assistant","uuid":"a3","isSidechain":false,"message":{"id":"m3","model":"<synthetic>","content":[{"type":"text","text":"Once"}],"stop_reason":"stop_sequence"}}"#,
        r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"next"}}"#,
        r#"{"type":"assistant","uuid":"a4","message":{"model":"claude-"#,
    ];
    assert_eq!(
        last_model(lines.iter().copied()).as_deref(),
        Some("claude-opus-4-8")
    );
    assert_eq!(
        last_model(lines[..1].iter().copied()).as_deref(),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(last_model(lines[2..].iter().copied()), None);
    assert_eq!(last_model(std::iter::empty()), None);
}
