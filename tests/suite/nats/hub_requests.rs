//! What waits for a person on another machine, at the hub (issue 26): a real Claude on machine
//! alpha asks for a permission, then asks a question; both are listed at the hub over HTTP and
//! MCP with the qualified session id (`alpha/<id>`), exactly as alpha lists them, answered from
//! the hub's entry (HTTP, then MCP), then listed resolved; a second answer is alpha's 409. With
//! alpha stopped and down, the hub's lists are `machine_unreachable` naming alpha at once, never
//! an empty list.

use std::time::Instant;

use super::hub::{DOWN_AFTER_SECS, claude_asking_and_a_hub, link};
use super::*;
use crate::suite::mcp::{Transport, ok, run_client};
use crate::support::mock_messages::Step as ClaudeStep;

/// `%2F` for the `/` of a qualified id in a path segment.
fn enc(id: &str) -> String {
    id.replace('/', "%2F")
}

/// The hub's `kind` list (`approvals` or `requests`) of a session, once it has a pending entry.
fn pending_at_hub(hub: &TestDaemon, remote: &str, kind: &str) -> Value {
    let path = format!("/api/sessions/{}/{kind}", enc(remote));
    hub.wait_for(&format!("a pending entry in {path}"), CATCH_UP, |h| {
        let resp = h.get(&path);
        if resp.status != 200 {
            eprintln!("{path}: {} {}", resp.status, resp.body);
            return None;
        }
        let list = resp.json();
        list[kind]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["pending"] == true)
            .then_some(list)
    })
}

/// The hub's list once it has no pending entry (and at least one resolved).
fn resolved_at_hub(hub: &TestDaemon, remote: &str, kind: &str) -> Value {
    let path = format!("/api/sessions/{}/{kind}", enc(remote));
    hub.wait_for(&format!("no pending entry in {path}"), CATCH_UP, |h| {
        let list = h.get(&path).assert_ok();
        let entries = list[kind].as_array().unwrap();
        (!entries.is_empty() && entries.iter().all(|e| e["pending"] == false)).then_some(list)
    })
}

/// The hub's list as alpha's own, but for each entry's qualified `sessionId`.
fn same_as_alpha(at_hub: &Value, alpha: &TestDaemon, id: &str, kind: &str) {
    let own = alpha.get(&format!("/api/sessions/{id}/{kind}")).assert_ok();
    let mut stripped = at_hub.clone();
    for entry in stripped[kind].as_array_mut().unwrap() {
        assert_eq!(entry["sessionId"], format!("alpha/{id}"), "{at_hub:#}");
        entry.as_object_mut().unwrap().remove("sessionId");
    }
    assert_eq!(stripped, own, "the hub's {kind} are alpha's");
}

// See: issue 26 (another machine's pending approvals and requests at the hub).
#[test]
fn another_machines_approval_and_question_are_listed_at_the_hub_and_answered_from_its_entries() {
    let nats = NatsServer::start();
    let (alpha, id, (_tmux_h, hub)) = claude_asking_and_a_hub(&nats);
    let remote = format!("alpha/{id}");
    let (status, sent) = alpha.send(&id, "Make a file");
    assert_eq!(status, 200, "{sent}");

    // The permission prompt: listed at the hub over HTTP, as alpha lists it, with alpha/<id>.
    let listed = pending_at_hub(&hub, &remote, "approvals");
    same_as_alpha(&listed, &alpha.daemon, &id, "approvals");
    let entry = listed["approvals"][0].clone();
    assert_eq!(entry["sessionId"], remote.as_str(), "{listed:#}");
    assert_eq!(entry["pending"], true, "{listed:#}");
    let approval = entry["request"]["approvalId"].as_str().unwrap().to_string();

    // … and over MCP, the same entry; no input request is waiting.
    let plan = json!([
        { "tool": "list_approvals", "arguments": { "session_id": remote } },
        { "tool": "list_requests", "arguments": { "session_id": remote } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let over_mcp = ok(run.one(0));
    assert_eq!(over_mcp["approvals"], listed["approvals"], "{over_mcp:#}");
    assert_eq!(ok(run.one(1))["requests"], json!([]), "{:#}", run.one(1));

    // Answered from the hub's entry (its session id, its approval id): run once on alpha, then
    // listed resolved at the hub; a second answer is alpha's 409.
    let path = format!(
        "/api/sessions/{}/approvals/{approval}",
        enc(entry["sessionId"].as_str().unwrap())
    );
    let answered = hub
        .post(&path, &json!({ "decision": "accept", "by": "tester" }))
        .assert_ok();
    assert_eq!(answered["ok"], true, "{answered}");
    let resolved = resolved_at_hub(&hub, &remote, "approvals");
    assert_eq!(
        resolved["approvals"][0]["resolved"]["decision"], "accept",
        "{resolved:#}"
    );
    assert_eq!(resolved["approvals"][0]["resolved"]["by"], "tester");
    same_as_alpha(&resolved, &alpha.daemon, &id, "approvals");
    hub.post(&path, &json!({ "decision": "decline" }))
        .assert_error(409, "approval_resolved", None);
    alpha.wait_turns_completed(&id, 1);
    assert!(alpha.work.join("approved.txt").exists());

    // A question: listed at the hub (HTTP and MCP), answered over MCP from the hub's entry.
    alpha.mock.push(ClaudeStep::tool_use(
        "AskUserQuestion",
        json!({ "questions": [{
            "question": "Which color?",
            "header": "Color",
            "options": [
                { "label": "Red", "description": "warm" },
                { "label": "Blue", "description": "cold" }
            ],
            "multiSelect": false
        }] }),
    ));
    alpha
        .mock
        .push(ClaudeStep::text("Blue it is.").when_tool_result());
    let (status, sent) = alpha.send(&id, "Pick a color with me");
    assert_eq!(status, 200, "{sent}");
    let listed = pending_at_hub(&hub, &remote, "requests");
    same_as_alpha(&listed, &alpha.daemon, &id, "requests");
    let entry = listed["requests"][0].clone();
    assert_eq!(entry["request"]["kind"], "question", "{listed:#}");
    let request = entry["request"]["requestId"].as_str().unwrap().to_string();
    let plan = json!([
        { "tool": "list_requests", "arguments": { "session_id": remote } },
        { "tool": "answer_request", "arguments": { "session_id": entry["sessionId"],
          "request_id": request, "answers": { "Which color?": "Blue" } } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let over_mcp = ok(run.one(0));
    assert_eq!(over_mcp["requests"], listed["requests"], "{over_mcp:#}");
    assert_eq!(ok(run.one(1))["ok"], true, "{:#}", run.one(1));
    let resolved = resolved_at_hub(&hub, &remote, "requests");
    same_as_alpha(&resolved, &alpha.daemon, &id, "requests");
    hub.post(
        &format!("/api/sessions/{}/requests/{request}", enc(&remote)),
        &json!({ "answers": { "Which color?": "Red" } }),
    )
    .assert_error(409, "request_resolved", None);
    alpha.wait_turns_completed(&id, 2);

    // alpha stopped: once it is down, both lists say so at once, naming it — over HTTP and MCP.
    let mut alpha = alpha;
    alpha.daemon.stop();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    hub.wait_for("alpha down at the hub", bound * 4, |h| {
        link(h, "alpha").filter(|l| l["link"] == "down")
    });
    let asked = Instant::now();
    for kind in ["approvals", "requests"] {
        let resp = hub.get(&format!("/api/sessions/{}/{kind}", enc(&remote)));
        resp.assert_error(503, "machine_unreachable", None);
        assert!(resp.body.contains("`alpha` is down"), "{}", resp.body);
        assert!(resp.body.contains("last heard"), "{}", resp.body);
    }
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "refused at once, took {took:?}"
    );
    let plan = json!([{ "tool": "list_approvals", "arguments": { "session_id": remote } }]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let refused = run.one(0);
    assert_eq!(refused["isError"], true, "{refused:#}");
    assert_eq!(
        refused["structured"]["error"]["code"], "machine_unreachable",
        "{refused:#}"
    );
    assert!(
        refused["text"]
            .as_str()
            .unwrap()
            .contains("`alpha` is down"),
        "{refused:#}"
    );
}
