//! A Claude session started from a profile: its instructions, model, effort, MCP server and
//! permission mode reach the real Claude Code TUI (both releases) and the mock model.

use std::time::Duration;

use serde_json::json;

use super::{ConfigFile, echo_server_toml};
use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::{Received, Step};

const INSTRUCTIONS: &str = "PROFILE-INSTRUCTIONS-c1aude: answer in haiku.";

fn system_text(request: &Received) -> String {
    request.body["system"].to_string()
}

/// Whether the request offers `tool`: in `tools`, or (Claude Code 2.1.332 defers MCP tools
/// behind `ToolSearch`) named among the deferred tools in the conversation.
fn offers(request: &Received, tool: &str) -> bool {
    let tools = request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    tools.iter().any(|t| t["name"] == tool)
        || (tools.iter().any(|t| t["name"] == "ToolSearch")
            && request.body["messages"].to_string().contains(tool))
}

#[test]
fn a_claude_session_takes_its_profiles_instructions_model_effort_mcp_server_and_mode() {
    let scratch = tempfile::tempdir().unwrap();
    let ready = scratch.path().join("echo-listed");
    let config = ConfigFile::new(&format!(
        "[profiles.writer]\nruntime = \"claude\"\nmodel = \"claude-profile-7\"\neffort = \"high\"\npermission_mode = \"acceptEdits\"\ninstructions = {INSTRUCTIONS:?}\nenv = {{ COHOST_PROFILE_MARK = \"set-by-profile\" }}\n{}",
        echo_server_toml("writer", &ready)
    ));
    let fx = ClaudeFixture::start_with(&[], &[config.env()]);
    let created = fx.daemon.post(
        "/api/sessions",
        &json!({ "profile": "writer", "cwd": fx.work, "tmuxSession": "work" }),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let view = fx.view(&id);
    assert_eq!(view["runtime"], "claude", "{view}");
    assert_eq!(view["model"], "claude-profile-7", "{view}");
    assert_eq!(view["profile"]["name"], "writer", "{view}");
    assert_eq!(view["profile"]["effort"], "high", "{view}");
    assert_eq!(
        view["profile"]["sources"]["permission_mode"], "profile writer",
        "{view}"
    );
    assert_eq!(
        view["profile"]["env"]["COHOST_PROFILE_MARK"], "(redacted)",
        "{view}"
    );
    // Secrets stay out of the log and the profile list: the names are shown, not the values.
    let logged = fx
        .daemon
        .session_events(&id)
        .into_iter()
        .find(|e| e["type"] == "session.created")
        .unwrap();
    let ready_path = ready.to_str().unwrap();
    assert_eq!(
        logged["data"]["profile"]["env"]["COHOST_PROFILE_MARK"], "(redacted)",
        "{logged}"
    );
    assert_eq!(
        logged["data"]["profile"]["mcpServers"]["echo"]["env"]["COHOST_TEST_MCP_READY"],
        "(redacted)",
        "{logged}"
    );
    let listed = fx.daemon.get("/api/profiles").assert_ok().to_string();
    for secret in ["set-by-profile", ready_path] {
        assert!(
            !logged.to_string().contains(secret) && !listed.contains(secret),
            "{secret} shown: {logged} {listed}"
        );
    }
    // The generated MCP config is private to the daemon's user.
    let mcp_json = fx.daemon.home().join("claude").join(&id).join("mcp.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&mcp_json).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "{}", mcp_json.display());

    crate::support::wait_until(
        "Claude to list the profile's echo MCP server's tools",
        Duration::from_secs(60),
        || ready.exists().then_some(()),
    );
    fx.mock
        .push(Step::tool_use("mcp__echo__echo", json!({ "text": "hi" })).then_text("unused"));
    fx.mock
        .push(Step::text("The tool said hi.").when_tool_result());
    let (status, sent) = fx.send(&id, "Call the echo tool");
    assert_eq!(status, 200, "{sent}");
    // `acceptEdits` lets edits through but still asks before an MCP tool runs.
    let asked = fx.wait_event(&id, "an approval for the MCP tool", |e| {
        e["type"] == "approval.requested"
    });
    let approval = asked["data"]["approvalId"].as_str().unwrap();
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "accept" }),
        )
        .assert_ok();
    fx.wait_turns_completed(&id, 1);
    let requests = fx.mock.main_requests();
    let first = &requests[0];
    assert!(
        system_text(first).contains(INSTRUCTIONS),
        "the profile's instructions reach the model: {}",
        first.body["system"]
    );
    assert_eq!(
        first.body["model"], "claude-profile-7",
        "{}",
        first.body["model"]
    );
    assert!(
        offers(first, "mcp__echo__echo"),
        "{:?} {}",
        first.body["tools"]
            .as_array()
            .map(|t| t.iter().map(|t| t["name"].to_string()).collect::<Vec<_>>()),
        first.body.to_string().contains("mcp__echo")
    );
    let answered = requests
        .iter()
        .find(|r| r.body["messages"].to_string().contains("echo:hi"));
    assert!(
        answered.is_some(),
        "the tool's answer comes back to the model: {:?}",
        requests
            .iter()
            .map(|r| r.body["messages"].to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        first.body["output_config"]["effort"], "high",
        "the profile's effort reaches the request: {}",
        first.body
    );
    // The profile's environment is the TUI's (the runner starts it from launch.json).
    let launch: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mcp_json.with_file_name("launch.json")).unwrap())
            .unwrap();
    assert_eq!(
        launch["env"]["COHOST_PROFILE_MARK"], "set-by-profile",
        "{launch}"
    );
    // The instructions reach Claude through a private file, not its argv (`ps` shows argv).
    let argv = launch["argv"].to_string();
    assert!(
        !argv.contains(INSTRUCTIONS) && argv.contains("--append-system-prompt-file"),
        "{launch}"
    );
    let instructions = mcp_json.with_file_name("instructions.md");
    assert_eq!(
        std::fs::read_to_string(&instructions).unwrap(),
        INSTRUCTIONS
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&instructions).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "{}", instructions.display());
    let view = fx.view(&id);
    assert_eq!(view["permissionMode"], "acceptEdits", "{view}");

    // A relaunch starts the TUI with the profile's real environment again, read back from
    // where it was kept (the log has it redacted).
    let relaunched = fx
        .daemon
        .post(&format!("/api/sessions/{id}/relaunch"), &json!({}));
    assert_eq!(relaunched.status, 200, "{}", relaunched.body);
    let launch: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mcp_json.with_file_name("launch.json")).unwrap())
            .unwrap();
    assert!(launch["argv"].to_string().contains("--resume"), "{launch}");
    assert_eq!(
        launch["env"]["COHOST_PROFILE_MARK"], "set-by-profile",
        "{launch}"
    );
}
