//! MCP at a hub acting on another machine (issue 26), against a real codex on machine beta (the
//! mock model) through a real nats-server: a session started on beta (`start_session` with
//! `machine`) under beta's own project roots — its first prompt run there, a retry with the same
//! key finding it, a directory outside beta's roots refused by beta as its own MCP refuses it —
//! then its goal set, read (beta's own answer) and cleared, and a fork, each decided by beta.

use super::hub::{hub, link};
use super::*;
use crate::suite::mcp::{Transport, ok, run_client};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

/// The error code of a refused tool call.
pub(super) fn refused(answer: &Value) -> String {
    assert_eq!(answer["isError"], true, "{answer:#}");
    answer["structured"]["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer:#}"))
        .to_string()
}

// See: issue 26 (MCP at the hub: goal, fork, start on another machine).
#[test]
fn mcp_at_the_hub_starts_a_session_on_another_machine_and_sets_its_goal_and_forks_it() {
    let root_dir = temp_dir("cohost-hub-mcp-root-");
    let root = root_dir.path().canonicalize().unwrap();
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let outside = temp_dir("cohost-hub-mcp-outside-");
    let nats = NatsServer::start();
    let url = nats.url();
    let beta = CodexFixture::start_with_args(&[
        "--nats",
        &url,
        "--machine",
        "beta",
        "--nats-commands",
        "--mcp-allowed-root",
        root.to_str().unwrap(),
    ]);
    let (_tmux_h, hub) = hub(&nats);
    hub.wait_for("beta at the hub", CATCH_UP, |h| link(h, "beta"));
    beta.mock
        .push(Step::text("Hello over MCP.").when_user_contains("First words over MCP"));

    // Started on beta from the hub's MCP, with a first prompt; a retry finds the same session;
    // outside beta's roots it is beta's refusal; an unknown machine is the hub's.
    let start = json!({ "runtime": "codex", "cwd": project, "approval_policy": "never",
        "machine": "beta", "prompt": "First words over MCP", "idempotency_key": "mcp-start-1" });
    let plan = json!([
        { "tool": "start_session", "arguments": start },
        { "tool": "start_session", "arguments": start },
        { "tool": "start_session", "arguments": { "runtime": "codex",
          "cwd": outside.path(), "machine": "beta" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "machine": "gamma" } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let started = ok(run.one(0)).clone();
    let remote = started["session"]["id"].as_str().unwrap().to_string();
    assert_eq!(started["session"]["machine"], "beta", "{started:#}");
    let id = remote
        .strip_prefix("beta/")
        .unwrap_or_else(|| panic!("a qualified id: {started:#}"))
        .to_string();
    assert!(started["task"]["taskId"].is_string(), "{started:#}");
    let again = ok(run.one(1));
    assert_eq!(again["session"]["id"], remote.as_str(), "{again:#}");
    assert_eq!(
        again["task"]["taskId"], started["task"]["taskId"],
        "{again:#}"
    );
    assert_eq!(refused(run.one(2)), "permission_denied");
    assert!(
        run.one(2)["text"].as_str().unwrap().contains("`beta`"),
        "{:#}",
        run.one(2)
    );
    assert_eq!(refused(run.one(3)), "machine_not_found");
    let view = beta.view(&id);
    assert_eq!(view["cwd"], project.to_str().unwrap(), "{view:#}");
    assert_eq!(view["approvalPolicy"], "never", "{view:#}");
    let turns = beta.wait_turns_completed(&id, 1);
    assert_eq!(turns.len(), 1, "the first prompt ran once: {turns:?}");

    // Its goal, set and read at the hub: beta's (its event, its own answer), then cleared.
    let plan = json!([
        { "tool": "goal_set", "arguments": { "session_id": remote,
          "objective": "Ship it", "status": "paused" } },
        { "tool": "goal_get", "arguments": { "session_id": remote } },
        { "tool": "goal_get", "arguments": { "session_id": "beta/cs_nope" } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let set = ok(run.one(0));
    assert_eq!(set["data"]["goal"]["objective"], "Ship it", "{set:#}");
    beta.wait_event(&id, "goal.updated from the hub's MCP", |e| {
        e["type"] == "goal.updated" && e["data"]["goal"]["objective"] == "Ship it"
    });
    let own = beta
        .daemon
        .get(&format!("/api/sessions/{id}/goal"))
        .assert_ok();
    // MCP bounds every answer (`truncated`); the rest is beta's answer.
    let mut got = ok(run.one(1)).clone();
    assert_eq!(got["truncated"], false, "{got:#}");
    got.as_object_mut().unwrap().remove("truncated");
    assert_eq!(got, own, "beta's own goal");
    assert_eq!(refused(run.one(2)), "session_not_found");
    let plan = json!([
        { "tool": "goal_clear", "arguments": { "session_id": remote } },
        { "tool": "fork", "arguments": { "session_id": remote } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    assert_eq!(ok(run.one(0))["data"]["cleared"], true, "{:#}", run.one(0));
    beta.wait_event(&id, "goal.cleared from the hub's MCP", |e| {
        e["type"] == "goal.cleared"
    });

    // The fork: a new session on beta, forked from it, named as the hub names it.
    let forked = ok(run.one(1));
    assert_eq!(forked["ok"], true, "{forked:#}");
    assert_eq!(forked["session"]["machine"], "beta", "{forked:#}");
    let child = forked["session"]["id"].as_str().unwrap();
    let child_id = child
        .strip_prefix("beta/")
        .unwrap_or_else(|| panic!("a qualified id: {forked:#}"));
    let view = beta.view(child_id);
    assert_eq!(view["forkedFrom"]["sessionId"], id.as_str(), "{view:#}");
}
