//! An OpenCode session driven over MCP with the real Python SDK (`tests/mcp/client.py`):
//! started with an approval policy, switched to the second model (`set_model`), a prompt sent
//! as a task, the approval listed and answered, the task waited for.

use super::OpencodeFixture;
use crate::suite::mcp::{Transport, run_client};
use crate::support::json;
use crate::support::mock_messages::Step;

#[track_caller]
fn structured(answer: &serde_json::Value) -> &serde_json::Value {
    assert_eq!(answer["isError"], false, "{answer:#}");
    &answer["structured"]
}

#[test]
fn mcp_runs_an_opencode_session_through_an_approval_to_its_result() {
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().canonicalize().unwrap();
    let fx = OpencodeFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    fx.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "touch approved.txt", "description": "Create approved.txt"}),
        ))
        .push(Step::text("Created it.").when_tool_result());
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "opencode", "cwd": project,
          "approval_policy": "untrusted" },
          "save": { "session": "/session/id" } },
        { "tool": "set_model", "arguments": { "session_id": "$session", "model": "mock/mock-model-2" } },
        { "tool": "send", "arguments": { "session_id": "$session", "prompt": "Create approved.txt" },
          "save": { "task": "/task/taskId" } },
        { "tool": "events", "arguments": { "session_id": "$session", "after": 0, "wait_seconds": 10 },
          "until_type": "approval.requested", "max_calls": 30 },
        { "tool": "list_approvals", "arguments": { "session_id": "$session" },
          "save": { "approval": "/approvals/0/request/approvalId" } },
        { "tool": "resolve_approval", "arguments": { "session_id": "$session",
          "approval_id": "$approval", "decision": "accept" } },
        { "tool": "wait_task", "arguments": { "task_id": "$task", "timeout_seconds": 60 } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    let start_tool = run
        .tools
        .iter()
        .find(|t| t["name"] == "start_session")
        .unwrap();
    assert!(
        start_tool.to_string().contains("\"opencode\""),
        "start_session's schema lists opencode: {start_tool}"
    );
    let started = structured(run.one(0));
    assert_eq!(started["session"]["runtime"], "opencode", "{started:#}");
    assert_eq!(
        started["session"]["approvalPolicy"], "untrusted",
        "{started:#}"
    );
    let switched = structured(run.one(1));
    assert_eq!(switched["ok"], true, "{switched:#}");
    assert_eq!(
        switched["data"]["model"], "mock/mock-model-2",
        "{switched:#}"
    );
    let listed = structured(run.one(4));
    assert_eq!(listed["approvals"][0]["pending"], true, "{listed:#}");
    let waited = structured(run.one(6));
    assert_eq!(waited["finished"], true, "{waited:#}");
    assert_eq!(waited["task"]["state"], "completed", "{waited:#}");
    assert_eq!(waited["task"]["resultExcerpt"], "Created it.", "{waited:#}");
    assert!(
        project.join("approved.txt").exists(),
        "the approved command ran"
    );
    let models: Vec<String> = fx
        .mock
        .main_requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        models,
        ["mock-model-2", "mock-model-2"],
        "{}",
        fx.mock.summary()
    );
}
