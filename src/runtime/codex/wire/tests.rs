//! Literal wire lines as codex-cli 0.169.0 writes them (the section numbers below are those
//! of the wire notes docs/peers.md summarises) and, for 0.171.0, the release notes (their literal
//! `initialize` result, and items built field by field from its `generate-ts` deltas: C3
//! `environmentId`, C4 `AgentMessageDisplay`, C5 `bioPolicy`).

use super::*;
use serde_json::json;

fn params_of(line: &str) -> (String, Value) {
    let message: Value = serde_json::from_str(line).unwrap();
    (
        message["method"].as_str().unwrap().to_string(),
        message["params"].clone(),
    )
}

fn notification(line: &str) -> ServerNotification {
    let (method, params) = params_of(line);
    ServerNotification::parse(&method, &params)
}

#[test]
fn initialize_request_and_both_releases_answers() {
    // §4: what the client sends (cohost sends no `requestAttestation`).
    let params = InitializeParams {
        client_info: ClientInfo {
            name: "codex-probe".into(),
            title: Some("Codex probe".into()),
            version: "0.1.0".into(),
        },
        capabilities: Some(InitializeCapabilities {
            experimental_api: true,
            request_attestation: Some(false),
            ..InitializeCapabilities::default()
        }),
    };
    assert_eq!(
        serde_json::to_value(&params).unwrap(),
        json!({"clientInfo":{"name":"codex-probe","title":"Codex probe","version":"0.1.0"},"capabilities":{"experimentalApi":true,"requestAttestation":false}})
    );
    for (line, version) in [
        (
            r#"{"id":1,"result":{"userAgent":"probe/0.169.0 (Debian 12.0.0; x86_64) xterm (probe; 0.1)","codexHome":"$PROBE/wire/h169","platformFamily":"unix","platformOs":"linux"}}"#,
            "0.169.0",
        ),
        (
            r#"{"id":1,"result":{"userAgent":"probe/0.171.0 (Debian 12.0.0; x86_64) xterm (probe; 0.1)","codexHome":"$PROBE/wire/h171","platformFamily":"unix","platformOs":"linux"}}"#,
            "0.171.0",
        ),
    ] {
        let result = serde_json::from_str::<Value>(line).unwrap()["result"].clone();
        let answer = response::<InitializeParams>(result);
        assert!(answer.user_agent.unwrap().contains(version));
        assert_eq!(answer.platform_os.as_deref(), Some("linux"));
    }
}

#[test]
fn thread_start_request_and_answer() {
    // §5.
    let params = ThreadStartParams {
        cwd: Some("$PROBE/work".into()),
        model: None,
        approval_policy: Some(AskForApproval::Never),
        sandbox: Some("workspace-write".into()),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&params).unwrap(),
        json!({"cwd":"$PROBE/work","approvalPolicy":"never","sandbox":"workspace-write"})
    );
    let result = json!({"thread":{"id":"01a2276b-fc47-74d2-8490-62f8454ea7c9","environments":[{"environmentId":"local","cwd":"$PROBE/work","runtimeWorkspaceRoots":["$PROBE/work"]}],"extra":null,"sessionId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"mock","model":"mock-model","reasoningEffort":null,"createdAt":1795957718,"updatedAt":1795957718,"recencyAt":1795957718,"status":{"type":"idle"},"path":"$PROBE/home_probe/sessions/2026/11/29/rollout-2026-11-29T13-08-38-01a2276b-fc47-74d2-8490-62f8454ea7c9.jsonl","cwd":"$PROBE/work","cliVersion":"0.169.0","originator":"codex-probe","source":"vscode","canAcceptDirectInput":true,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":null,"daybreakEnabled":null,"turns":[]},"model":"mock-model","modelProvider":"mock","serviceTier":null,"disabledPluginIds":[],"cwd":"$PROBE/work","runtimeWorkspaceRoots":["$PROBE/work"],"instructionSources":[],"approvalPolicy":"never","approvalsReviewer":"user","sandbox":{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false},"activePermissionProfile":null,"reasoningEffort":null,"multiAgentMode":"explicitRequestOnly"});
    let thread = response::<ThreadStartParams>(result).thread.unwrap();
    assert_eq!(
        thread.id.as_deref(),
        Some("01a2276b-fc47-74d2-8490-62f8454ea7c9")
    );
    assert!(thread.turns.is_empty());
}

#[test]
fn turn_start_steer_and_interrupt() {
    // §6, §8, §9.
    let start = TurnStartParams {
        collaboration_mode: None,
        thread_id: "01a2276b-fc47-74d2-8490-62f8454ea7c9".into(),
        input: vec![UserInput::text("Say hello")],
    };
    assert_eq!(
        serde_json::to_value(&start).unwrap(),
        json!({"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","input":[{"type":"text","text":"Say hello","text_elements":[]}]})
    );
    let answer = response::<TurnStartParams>(
        json!({"turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":null,"completedAt":null,"durationMs":null}}),
    );
    let turn = answer.turn.unwrap();
    assert_eq!(turn.status, Some(TurnStatus::InProgress));
    assert_eq!(turn.error, None);
    assert_eq!(turn.duration_ms, None);

    let steer = TurnSteerParams {
        thread_id: "01a2276c-3aec-7701-8036-044891b86e10".into(),
        input: vec![UserInput::text("Actually, keep it short.")],
        expected_turn_id: "01a2276c-3b0c-7d93-960f-a7f556ec75d8".into(),
    };
    assert_eq!(
        serde_json::to_value(&steer).unwrap(),
        json!({"threadId":"01a2276c-3aec-7701-8036-044891b86e10","input":[{"type":"text","text":"Actually, keep it short.","text_elements":[]}],"expectedTurnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"})
    );
    let steered =
        response::<TurnSteerParams>(json!({"turnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"}));
    assert_eq!(
        steered.turn_id.as_deref(),
        Some("01a2276c-3b0c-7d93-960f-a7f556ec75d8")
    );

    let interrupt = TurnInterruptParams {
        thread_id: "01a2276c-5359-7161-b89e-00c5286c76fd".into(),
        turn_id: "01a2276c-5370-7892-bd51-f236f1d05db4".into(),
    };
    assert_eq!(
        serde_json::to_value(&interrupt).unwrap(),
        json!({"threadId":"01a2276c-5359-7161-b89e-00c5286c76fd","turnId":"01a2276c-5370-7892-bd51-f236f1d05db4"})
    );
}

#[test]
fn a_whole_turn_of_notifications() {
    // §6, every notification kind of one turn, literally.
    let ServerNotification::TurnStarted(started) = notification(
        r#"{"method":"turn/started","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":1795957718,"completedAt":null,"durationMs":null}},"emittedAtMs":1795957718137}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        started.turn.unwrap().id.as_deref(),
        Some("01a2276b-fc56-70f0-a40b-38adadde74a3")
    );

    let ServerNotification::ItemCompleted(user) = notification(
        r#"{"method":"item/completed","params":{"item":{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":1795957718151},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718151},"emittedAtMs":1795957718153}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        user.item,
        Some(ThreadItem::UserMessage(UserMessageThreadItem {
            id: Some("01a2276b-fc86-7740-a55e-f2b63515f5e7".into()),
            content: vec![UserInput::text("Say hello")],
        }))
    );

    let ServerNotification::ItemCompleted(reasoning) = notification(
        r#"{"method":"item/completed","params":{"item":{"type":"reasoning","id":"rs_2dd21b680a72","summary":["Thinking about the greeting."],"content":[],"startedAtMs":1795957718192,"completedAtMs":1795957718394},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718394},"emittedAtMs":1795957718398}"#,
    ) else {
        panic!()
    };
    assert!(
        matches!(reasoning.item, Some(ThreadItem::Reasoning(r)) if r.summary == ["Thinking about the greeting."])
    );

    let ServerNotification::ReasoningSummaryTextDelta(delta) = notification(
        r#"{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"rs_2dd21b680a72","delta":"Thinking ","summaryIndex":0},"emittedAtMs":1795957718193}"#,
    ) else {
        panic!()
    };
    assert_eq!(delta.delta.as_deref(), Some("Thinking "));
    assert_eq!(delta.summary_index, Some(0));

    let ServerNotification::AgentMessageDelta(delta) = notification(
        r#"{"method":"item/agentMessage/delta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"msg_edb77357f05a","delta":"Hello "},"emittedAtMs":1795957718400}"#,
    ) else {
        panic!()
    };
    assert_eq!(delta.item_id.as_deref(), Some("msg_edb77357f05a"));

    let ServerNotification::ItemCompleted(message) = notification(
        r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718647},"emittedAtMs":1795957718649}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        message.turn_id.as_deref(),
        Some("01a2276b-fc56-70f0-a40b-38adadde74a3")
    );
    assert!(
        matches!(message.item, Some(ThreadItem::AgentMessage(m)) if m.text.as_deref() == Some("Hello from the mock model!"))
    );

    let ServerNotification::ThreadTokenUsageUpdated(usage) = notification(
        r#"{"method":"thread/tokenUsage/updated","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","tokenUsage":{"total":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"last":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"modelContextWindow":258400}},"emittedAtMs":1795957718655}"#,
    ) else {
        panic!()
    };
    let usage = usage.token_usage.unwrap();
    assert_eq!(usage.model_context_window, Some(258400));
    assert_eq!(usage.total.unwrap().cached_input_tokens, Some(1000));

    let ServerNotification::TurnCompleted(completed) = notification(
        r#"{"method":"turn/completed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795957718,"completedAt":1795957718,"durationMs":553}},"emittedAtMs":1795957718663}"#,
    ) else {
        panic!()
    };
    let turn = completed.turn.unwrap();
    assert_eq!(turn.status, Some(TurnStatus::Completed));
    assert_eq!(turn.duration_ms, Some(553));
    assert_eq!(turn.items.len(), 1);

    // Notifications cohost does not read are `Other`, whatever their params.
    assert_eq!(
        notification(
            r#"{"method":"thread/status/changed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","status":{"type":"idle"}},"emittedAtMs":1795957718663}"#
        ),
        ServerNotification::Other {
            method: "thread/status/changed".into()
        }
    );
}

#[test]
fn command_and_file_change_items() {
    // §6.1 and §7.3.
    let ServerNotification::ItemCompleted(done) = notification(
        r#"{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_2_0ea7db88","pluginId":null,"scriptPath":null,"command":"/bin/bash -lc 'echo hi'","cwd":"$PROBE/work","processId":"52895","source":"unifiedExecStartup","status":"completed","commandActions":[{"type":"unknown","command":"echo hi"}],"aggregatedOutput":"pyenv: cannot rehash: $HOME/.pyenv/shims isn't writable\nhi\n","exitCode":0,"durationMs":0,"startedAtMs":1795957720106,"completedAtMs":1795957720108},"threadId":"01a2276c-0314-7c23-9d88-f6b93044f24e","turnId":"01a2276c-032e-7ed0-adda-9c729a9781c6","contentTokenCount":null,"completedAtMs":1795957720108},"emittedAtMs":1795957720110}"#,
    ) else {
        panic!()
    };
    let Some(ThreadItem::CommandExecution(command)) = done.item else {
        panic!()
    };
    assert_eq!(command.status, Some(CommandExecutionStatus::Completed));
    assert_eq!(command.exit_code, Some(0));
    assert_eq!(command.command.as_deref(), Some("/bin/bash -lc 'echo hi'"));

    let ServerNotification::ItemStarted(started) = notification(
        r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"call_10_44e031fc","changes":[{"path":"$PROBE/work/patched.txt","kind":{"type":"add"},"diff":"hello from patch\n"}],"status":"inProgress","startedAtMs":1795957726012,"completedAtMs":null},"threadId":"01a2276c-1ac4-7c71-9116-7c5c7c8f7a06","turnId":"01a2276c-1adb-70e3-8180-b0529ef141d7","startedAtMs":1795957726012},"emittedAtMs":1795957726013}"#,
    ) else {
        panic!()
    };
    let Some(ThreadItem::FileChange(patch)) = started.item else {
        panic!()
    };
    assert_eq!(patch.status, Some(PatchApplyStatus::InProgress));
    assert_eq!(
        patch.changes[0].kind,
        Some(PatchChangeKind {
            kind: Some(PatchChangeType::Add),
            move_path: None
        })
    );
}

#[test]
fn approval_requests_and_the_answer() {
    // §7.1: `availableDecisions` mixes strings and amendment objects.
    let (method, params) = params_of(
        r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","turnId":"01a2276c-0957-7223-a020-d4df7b389d7e","itemId":"call_4_9f701721","startedAtMs":1795957721535,"environmentId":"local","command":"/bin/bash -lc 'touch approved.txt'","cwd":"$PROBE/work","commandActions":[{"type":"unknown","command":"touch approved.txt"}],"proposedExecpolicyAmendment":["touch","approved.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","approved.txt"]}},"cancel"]}}"#,
    );
    let ServerRequest::CommandExecutionRequestApproval(request) =
        ServerRequest::parse(&method, &params)
    else {
        panic!()
    };
    assert_eq!(request.item_id.as_deref(), Some("call_4_9f701721"));
    assert_eq!(request.environment_id.as_deref(), Some("local"));
    assert_eq!(request.available_decisions.len(), 3);
    assert_eq!(
        ThreadScoped::of(&params),
        Some("01a2276c-0934-74d3-82f8-8f4b59a055cb")
    );

    // §7.3.
    let (method, params) = params_of(
        r#"{"method":"item/fileChange/requestApproval","id":0,"params":{"threadId":"01a2276c-1ac4-7c71-9116-7c5c7c8f7a06","turnId":"01a2276c-1adb-70e3-8180-b0529ef141d7","itemId":"call_10_44e031fc","startedAtMs":1795957726014,"reason":null,"grantRoot":null}}"#,
    );
    let ServerRequest::FileChangeRequestApproval(request) = ServerRequest::parse(&method, &params)
    else {
        panic!()
    };
    assert_eq!(request.reason, None);
    assert_eq!(request.item_id.as_deref(), Some("call_10_44e031fc"));

    // §7.4: a question, relayed as an input request, answered with `answers`.
    let (method, params) = params_of(
        r#"{"method":"item/tool/requestUserInput","id":0,"params":{"threadId":"01a2276c-20f0-7411-91c7-7d5ac1cf6cdc","turnId":"01a2276c-2108-76c2-ae9f-e10e01185d69","itemId":"call_12_0d3ad089","questions":[{"id":"confirm_path","header":"Confirm","question":"Proceed with the plan?","isOther":true,"isSecret":false,"options":[{"label":"Yes (Recommended)","description":"Continue the current plan."},{"label":"No","description":"Stop and revisit the approach."}]}],"isBlocking":false,"autoResolutionMs":null}}"#,
    );
    let ServerRequest::ToolRequestUserInput(request) = ServerRequest::parse(&method, &params)
    else {
        panic!()
    };
    assert_eq!(request.item_id.as_deref(), Some("call_12_0d3ad089"));
    assert_eq!(request.questions.len(), 1);
    assert_eq!(request.questions[0].is_other, Some(true));
    assert_eq!(
        request.questions[0].options[0].label.as_deref(),
        Some("Yes (Recommended)")
    );
    let answer = ToolRequestUserInputResponse {
        answers: [(
            "confirm_path".to_string(),
            ToolRequestUserInputAnswer {
                answers: vec!["Yes (Recommended)".into()],
            },
        )]
        .into_iter()
        .collect(),
    };
    assert_eq!(
        serde_json::to_value(&answer).unwrap(),
        serde_json::json!({"answers":{"confirm_path":{"answers":["Yes (Recommended)"]}}})
    );

    let answer = CommandExecutionRequestApprovalResponse {
        decision: "accept".into(),
    };
    assert_eq!(
        serde_json::to_string(&answer).unwrap(),
        r#"{"decision":"accept"}"#
    );

    // §7.5: the request is made moot by an interrupt.
    let ServerNotification::ServerRequestResolved(resolved) = notification(
        r#"{"method":"serverRequest/resolved","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","requestId":0},"emittedAtMs":1795957731896}"#,
    ) else {
        panic!()
    };
    assert_eq!(resolved.request_id, Some(RequestId::Int(0)));
}

#[test]
fn turn_failures_and_error_infos() {
    // §14.
    let ServerNotification::Error(error) = notification(
        r#"{"method":"error","params":{"error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"willRetry":false,"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d"},"emittedAtMs":1795957768863}"#,
    ) else {
        panic!()
    };
    let error = error.error.unwrap();
    assert_eq!(
        error.codex_error_info,
        Some(CodexErrorInfo::Code(CodexErrorCode::InternalServerError))
    );
    let ServerNotification::TurnCompleted(failed) = notification(
        r#"{"method":"turn/completed","params":{"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turn":{"id":"01a2276c-c22a-7780-b174-dbbe00fbb40d","rootTurnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d","items":[],"itemsView":"notLoaded","status":"failed","error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"startedAt":1795957768,"completedAt":1795957768,"durationMs":114}},"emittedAtMs":1795957768872}"#,
    ) else {
        panic!()
    };
    assert_eq!(failed.turn.unwrap().status, Some(TurnStatus::Failed));

    // 0.171 (C5): `bioPolicy`; the object members; codes a newer codex adds.
    let info = |value: Value| serde_json::from_value::<CodexErrorInfo>(value).unwrap();
    assert_eq!(info(json!("bioPolicy")).code(), Some("bioPolicy"));
    assert_eq!(info(json!("somethingNew")).code(), Some("somethingNew"));
    assert_eq!(info(json!("other")).code(), Some("other"));
    let detailed = info(json!({"httpConnectionFailed": {"httpStatusCode": 502}}));
    assert_eq!(detailed.code(), None);
    assert!(
        matches!(&detailed, CodexErrorInfo::Detailed { kind, details } if kind == "httpConnectionFailed" && details["httpStatusCode"] == 502)
    );
}

#[test]
fn newer_codex_items_parse() {
    // 0.171 (C3): `mcpToolCall` gains `environmentId`.
    let mcp: ThreadItem = serde_json::from_value(json!({"type":"mcpToolCall","id":"call_1","server":"docs","environmentId":null,"tool":"search","status":"completed","arguments":{"q":"x"},"appContext":null,"mcpAppUi":null,"pluginId":null,"readOnlyHint":true,"result":{"content":[]},"error":null,"durationMs":12})).unwrap();
    let ThreadItem::McpToolCall(call) = &mcp else {
        panic!()
    };
    assert_eq!(call.environment_id, None);
    assert_eq!(call.status, Some(McpToolCallStatus::Completed));
    assert_eq!(call.result, Some(json!({"content":[]})));

    // 0.171 (C4): `moderation.display` is a union tagged by `mode`; 0.169 had flat fields.
    for moderation in [
        json!({"moderated":true,"display":{"mode":"hide","version":1,"replacement":{"kind":"wellbeingPromptHelpline"}}}),
        json!({"moderated":true,"display":{"mode":"show","version":1,"trustedContacts":"check"}}),
        json!({"moderated":true,"display":{"mode":"block","version":1,"reason":{"kind":"cyber"}}}),
        json!({"moderated":true,"display":{"action":"show","blockType":null,"cyberTrustedAccess":null,"checkTrustedContacts":null}}),
    ] {
        let item: ThreadItem = serde_json::from_value(
            json!({"type":"agentMessage","moderation":moderation,"id":"msg_1","text":"Hi","phase":null,"memoryCitation":null,"delivery":null,"questions":null}),
        )
        .unwrap();
        assert!(matches!(&item, ThreadItem::AgentMessage(m) if m.text.as_deref() == Some("Hi")));
    }

    // Item kinds cohost does not type, or that a newer codex adds.
    let sleep: ThreadItem =
        serde_json::from_value(json!({"type":"sleep","id":"s1","durationMs":5})).unwrap();
    assert_eq!(
        sleep,
        ThreadItem::Other {
            kind: "sleep".into(),
            id: Some("s1".into())
        }
    );
    assert!(serde_json::from_value::<ThreadItem>(json!({"id":"x"})).is_err());
    assert!(serde_json::from_value::<ThreadItem>(json!(["userMessage"])).is_err());

    // C2: a notification 0.171 added.
    assert_eq!(
        ServerNotification::parse(
            "thread/search/partial",
            &json!({"requestId": 3, "data": []})
        ),
        ServerNotification::Other {
            method: "thread/search/partial".into()
        }
    );
}

#[test]
fn goals_and_a_resumed_history() {
    // §12.
    let set = ThreadGoalSetParams {
        thread_id: "01a2276c-7845-7dd2-995a-b6920d40c4aa".into(),
        origin: Some(ThreadGoalMutationOrigin::User),
        objective: Some("Make hello.txt say hi".into()),
        status: Some("paused".into()),
        token_budget: Some(5000),
    };
    assert_eq!(
        serde_json::to_value(&set).unwrap(),
        json!({"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","objective":"Make hello.txt say hi","status":"paused","tokenBudget":5000,"origin":"user"})
    );
    let ServerNotification::ThreadGoalUpdated(updated) = notification(
        r#"{"method":"thread/goal/updated","params":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","turnId":null,"goal":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","objective":"Make hello.txt say hi","status":"paused","tokenBudget":5000,"tokensUsed":0,"timeUsedSeconds":0,"createdAt":1795957750,"updatedAt":1795957750}},"emittedAtMs":1795957750034}"#,
    ) else {
        panic!()
    };
    assert_eq!(updated.turn_id, None);
    assert_eq!(updated.goal.unwrap()["status"], "paused");
    assert!(matches!(
        notification(
            r#"{"method":"thread/goal/cleared","params":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa"},"emittedAtMs":1795957765076}"#
        ),
        ServerNotification::ThreadGoalCleared(_)
    ));

    // §13: a turn of a thread's history (as `thread/resume` carries them).
    let resumed = response::<ThreadResumeParams>(
        serde_json::from_str(
            r#"{"thread":{"id":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turns":[{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":1795957718151},{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795957718,"completedAt":1795957718,"durationMs":553}]},"model":"mock-model"}"#,
        )
        .unwrap(),
    );
    let thread = resumed.thread.unwrap();
    assert_eq!(thread.turns.len(), 1);
    assert_eq!(thread.turns[0].items.len(), 2);

    // A response that does not parse reads as empty rather than failing.
    assert_eq!(
        response::<TurnSteerParams>(json!("unexpected")),
        TurnSteerResponse::default()
    );
}
