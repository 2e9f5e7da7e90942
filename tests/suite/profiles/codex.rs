//! A codex session started from a profile: its instructions, model, effort, MCP server and
//! approval policy reach the real codex app-server (both releases) and the mock model.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ConfigFile, echo_server_toml};
use crate::suite::codex::host::{dump, of_type};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::{Received, Step, input_items};

const INSTRUCTIONS: &str = "PROFILE-INSTRUCTIONS-c0d3x: review every change twice.";

/// Whether the request's `tools` offer the MCP server `echo` (codex puts an MCP server's tools
/// in a namespace `mcp__echo`).
fn offers_echo(request: &Received) -> bool {
    request.body["tools"].as_array().is_some_and(|tools| {
        tools
            .iter()
            .any(|tool| tool.to_string().contains("mcp__echo"))
    })
}

/// The text of every `developer` / `system` message in the request's input and `instructions`.
fn instruction_text(request: &Received) -> String {
    let mut text = request.body["instructions"]
        .as_str()
        .unwrap_or("")
        .to_string();
    for item in input_items(&request.body) {
        if matches!(item["role"].as_str(), Some("developer" | "system")) {
            text.push_str(&item["content"].to_string());
        }
    }
    text
}

#[test]
fn a_codex_session_takes_its_profiles_instructions_model_effort_mcp_server_and_approvals() {
    let scratch = tempfile::tempdir().unwrap();
    let ready = scratch.path().join("echo-listed");
    // Written before the daemon starts (it reads the config file then); `cwd` is set by the
    // request, the rest by the chain `reviewer` -> `base`.
    let config = ConfigFile::new(&format!(
        "[profiles.base]\nruntime = \"codex\"\ninstructions_file = \"review.md\"\napproval_policy = \"untrusted\"\nsandbox = \"read-only\"\n{}\n[profiles.reviewer]\nextends = \"base\"\nmodel = \"profile-model-7\"\neffort = \"high\"\n",
        echo_server_toml("base", &ready)
    ));
    config.write_beside("review.md", INSTRUCTIONS);
    let mut fx = CodexFixture::start_with_env(&[], "", &[config.env()]);

    let created = fx.daemon.post(
        "/api/sessions",
        &json!({ "profile": "reviewer", "cwd": fx.work() }),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let view = fx.view(&id);
    assert_eq!(view["runtime"], "codex", "{view}");
    assert_eq!(view["model"], "profile-model-7", "{view}");
    assert_eq!(view["approvalPolicy"], "untrusted", "{view}");
    assert_eq!(view["sandbox"], "read-only", "{view}");
    let profile = &view["profile"];
    assert_eq!(profile["name"], "reviewer", "{view}");
    assert_eq!(profile["effort"], "high", "{view}");
    assert_eq!(profile["instructions"], INSTRUCTIONS, "{view}");
    assert_eq!(profile["sources"]["model"], "profile reviewer", "{view}");
    assert_eq!(profile["sources"]["instructions"], "profile base", "{view}");
    assert_eq!(profile["sources"]["cwd"], "request", "{view}");
    assert_eq!(
        profile["mcpServers"]["echo"]["env"]["COHOST_TEST_MCP_READY"], "(redacted)",
        "a server's environment is not shown: {view}"
    );

    // Nor is it in the log: the server's real environment is kept apart, 0600.
    let logged = fx.wait_event(&id, "session.created", |e| e["type"] == "session.created");
    assert!(
        !logged.to_string().contains(ready.to_str().unwrap()),
        "{logged}"
    );

    // codex offers an MCP server's tools once it has listed them.
    crate::support::wait_until(
        "codex to list the profile's echo MCP server's tools",
        Duration::from_secs(60),
        || ready.exists().then_some(()),
    );
    fx.mock.push(Step::namespaced_call(
        "mcp__echo",
        "echo",
        json!({ "text": "hi" }),
    ));
    fx.mock.push(Step::text("The tool said hi."));
    fx.send(&id, "Call the echo tool");
    // `untrusted`: codex asks before the MCP tool runs (an elicitation of its own).
    let asked = fx.wait_event(&id, "codex to ask before the MCP tool runs", |e| {
        e["type"] == "input.requested" && e["data"]["kind"] == "elicitation"
    });
    assert_eq!(asked["data"]["server"], "echo", "{asked}");
    let request = asked["data"]["requestId"].as_str().unwrap();
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/requests/{request}"),
            &json!({ "decision": "accept" }),
        )
        .assert_ok();
    let done = fx.wait_turns_completed(&id, 1);
    assert_eq!(
        done[0]["data"]["status"],
        "completed",
        "{}",
        dump(&fx.events(&id))
    );
    let requests = fx.mock.main_requests();
    assert!(requests.len() >= 2, "two model requests: {requests:?}");
    let first = &requests[0];
    assert!(
        instruction_text(first).contains(INSTRUCTIONS),
        "the profile's instructions reach the model: {}",
        first.body
    );
    assert_eq!(first.body["model"], "profile-model-7", "{}", first.body);
    assert_eq!(first.body["reasoning"]["effort"], "high", "{}", first.body);
    assert!(
        offers_echo(first),
        "the echo tool is offered: {}",
        first.body["tools"]
    );
    let answer = requests[1].body.to_string();
    assert!(
        answer.contains("echo:hi"),
        "the tool's answer comes back to the model: {answer}"
    );

    // And before it runs a command.
    fx.mock.push(Step::exec("touch made.txt"));
    fx.mock.push(Step::text("Asked first."));
    fx.send(&id, "Make a file");
    let asked = fx.wait_event(&id, "an approval", |e| e["type"] == "approval.requested");
    assert_eq!(asked["data"]["kind"], "command", "{asked}");
    let approval = asked["data"]["approvalId"].as_str().unwrap();
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "decline" }),
        )
        .assert_ok();
    fx.wait_turns_completed(&id, 2);

    // A fork keeps the profile's values as the session started with them.
    let forked = fx
        .daemon
        .post(&format!("/api/sessions/{id}/fork"), &json!({}));
    assert_eq!(forked.status, 201, "{}", forked.body);
    let forked = forked.json();
    let fork_id = forked["data"]["session"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{forked}"));
    let fork = fx.view(fork_id);
    assert_eq!(fork["profile"]["name"], "reviewer", "{fork}");
    assert_eq!(fork["profile"]["instructions"], INSTRUCTIONS, "{fork}");
    assert_eq!(fork["model"], "profile-model-7", "{fork}");
    // The fork started from the parent's real values (kept apart from the log), not the
    // redacted ones: its own kept profile holds the server's environment.
    let kept = std::fs::read_to_string(
        fx.daemon
            .home()
            .join("profiles")
            .join(format!("{fork_id}.json")),
    )
    .unwrap();
    assert!(kept.contains(ready.to_str().unwrap()), "{kept}");
    let fork_created = fx.wait_event(fork_id, "the fork's session.created", |e| {
        e["type"] == "session.created"
    });
    assert!(
        !fork_created.to_string().contains(ready.to_str().unwrap()),
        "{fork_created}"
    );
    let approvals: Vec<Value> = of_type(&fx.events(&id), "approval.requested")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(approvals.len(), 1, "{approvals:?}");

    // A daemon restart resumes the thread with the profile's real MCP server environment, read
    // back from where it was kept: the server, started again, writes `ready` where that
    // environment says.
    std::fs::remove_file(&ready).unwrap();
    fx.daemon.restart();
    crate::support::wait_until(
        "the resumed thread to start the profile's echo MCP server with its real environment",
        Duration::from_secs(60),
        || ready.exists().then_some(()),
    );
    fx.wait_event(&id, "the session bound again", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64() > done[0]["seq"].as_u64()
    });
}
