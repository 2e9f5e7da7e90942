//! Tasks and queues at a hub for another machine's session (issue 26), against a real codex on
//! machine beta (the mock model) through a real nats-server: beta's queue and lease read at the
//! hub (HTTP), its mode set from the hub's MCP under beta's lease rule; with beta stopped, the
//! hub's waiting tasks shown in the session's queue, its lease refused naming beta, hub tasks
//! edited and superseded at the hub (HTTP and MCP, with the revision and idempotency rules of a
//! local queue), one cancelled, a result asked before it ran refused; once beta returns, only
//! the last texts run there, once each, and their results, statuses and edits are beta's.

use std::time::Instant;

use super::hub::{DOWN_AFTER_SECS, hub, link, user_messages};
use super::hub_mcp::refused;
use super::hub_ops::listed;
use super::*;
use crate::suite::mcp::{Transport, ok, run_client};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

/// The hub's task `task` (`GET /api/tasks/{task}` at the hub).
fn hub_task(hub: &TestDaemon, task: &str) -> Value {
    hub.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone()
}

/// The task of `tasks` with id `task`.
fn find<'a>(tasks: &'a Value, task: &str) -> Option<&'a Value> {
    tasks.as_array()?.iter().find(|t| t["taskId"] == task)
}

// See: issue 26 (queues, leases, hub tasks and modes of another machine at the hub).
#[test]
fn a_hub_reads_another_machines_queue_and_edits_its_waiting_tasks_which_run_once_as_edited() {
    let nats = NatsServer::start();
    let url = nats.url();
    let mut beta =
        CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta", "--nats-commands"]);
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    let (_tmux_h, hub) = hub(&nats);
    let remote = format!("beta/{id}");
    listed(&hub, &remote);
    let queue_path = format!("/api/sessions/beta/{id}/queue");
    let lease_path = format!("/api/sessions/beta/{id}/lease");

    // Up: the queue and the lease at the hub are beta's own, read from beta now.
    let queue = hub.get(&queue_path).assert_ok();
    assert_eq!(queue["sessionId"], remote.as_str(), "{queue}");
    assert_eq!(queue["machineLink"], "up", "{queue}");
    beta.daemon
        .post(
            &format!("/api/sessions/{id}/lease"),
            &json!({ "action": "takeover", "by": "tester" }),
        )
        .assert_ok();
    let lease = hub.get(&lease_path).assert_ok();
    let own = beta
        .daemon
        .get(&format!("/api/sessions/{id}/lease"))
        .assert_ok();
    assert_eq!(lease["lease"]["holder"], "human", "{lease}");
    assert_eq!(lease, own, "beta's own lease");
    let queued_path = hub
        .get(&format!("/api/sessions/beta%2F{id}/queue"))
        .assert_ok();
    assert_eq!(queued_path["lease"], own["lease"], "{queued_path}");

    // MCP at the hub sets beta's mode as MCP does on beta: refused while a person holds the
    // lease, then set (beta logs it).
    let set_mode = |mode: &str| json!({ "tool": "set_mode", "arguments": { "session_id": remote, "mode": mode } });
    let run = run_client(&hub, Transport::Http, &json!([set_mode("plan")]), |_| {});
    assert_eq!(refused(run.one(0)), "human_control");
    assert!(
        run.one(0)["text"].as_str().unwrap().contains("`beta`"),
        "{:#}",
        run.one(0)
    );
    beta.daemon
        .post(
            &format!("/api/sessions/{id}/lease"),
            &json!({ "action": "release" }),
        )
        .assert_ok();
    let plan = json!([set_mode("plan"), set_mode("default")]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    assert_eq!(ok(run.one(0))["ok"], true, "{:#}", run.one(0));
    assert_eq!(ok(run.one(1))["ok"], true, "{:#}", run.one(1));
    beta.wait_event(&id, "the hub's mode on beta", |e| {
        e["type"] == "session.mode" && e["data"]["mode"] == "plan"
    });
    beta.wait_event(&id, "the hub's second mode on beta", |e| {
        e["type"] == "session.mode" && e["data"]["mode"] == "default"
    });
    hub.wait_for("beta's lease managed again at the hub", CATCH_UP, |h| {
        (listed(h, &remote)["lease"]["holder"] == "managed").then_some(())
    });

    // beta stops: its lease cannot be read from the hub, said at once, naming beta.
    beta.daemon.stop();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    hub.wait_for("beta down at the hub", bound * 4, |h| {
        link(h, "beta").filter(|l| l["link"] == "down")
    });
    let asked = Instant::now();
    let refusal = hub
        .get(&lease_path)
        .assert_error(503, "machine_unreachable", None);
    let took_lease = asked.elapsed();
    assert!(refusal.to_string().contains("`beta`"), "{refusal}");
    assert!(took_lease < Duration::from_secs(2), "{took_lease:?}");

    // Tasks queued at the hub wait there, and the session's queue at the hub shows them.
    let tasks = format!("/api/sessions/beta/{id}/tasks");
    let a = hub
        .post(&tasks, &json!({ "text": "Queued for beta while away" }))
        .json()["task"]
        .clone();
    let a_id = a["taskId"].as_str().unwrap().to_string();
    assert_eq!(a["state"], "waiting", "{a}");
    let b = hub
        .post(&tasks, &json!({ "text": "Task B to be superseded" }))
        .json()["task"]
        .clone();
    let b_id = b["taskId"].as_str().unwrap().to_string();
    let queue = hub.get(&queue_path).assert_ok();
    eprintln!("beta's queue at the hub while beta is down: {queue}");
    assert_eq!(queue["machineLink"], "down", "{queue}");
    assert_eq!(queue["sessionId"], remote.as_str(), "{queue}");
    assert_eq!(queue["lease"]["holder"], "managed", "{queue}");
    assert_eq!(queue["pendingTotal"], 2, "{queue}");
    let waiting = find(&queue["pending"], &a_id).unwrap_or_else(|| panic!("{queue}"));
    assert_eq!(waiting["waitingReason"], "machine_unreachable", "{queue}");
    assert_eq!(waiting["machine"], "beta", "{queue}");
    assert_eq!(waiting["position"], 0, "{queue}");
    assert_eq!(find(&queue["pending"], &b_id).unwrap()["position"], 1);

    // Its result is refused: it has not run, and beta is named.
    let not_run = hub.get(&format!("/api/tasks/{a_id}/result")).assert_error(
        503,
        "machine_unreachable",
        None,
    );
    assert!(not_run.to_string().contains("has not run"), "{not_run}");
    assert!(not_run.to_string().contains("`beta`"), "{not_run}");

    // Edited at the hub: the revision moves on; the same key again finds the edit; a stale
    // revision is refused.
    let edit = |revision: u64, text: &str, key: &str| json!({ "revision": revision, "text": text, "idempotencyKey": key });
    let edit_path = format!("/api/tasks/{a_id}/edit");
    let edited = hub
        .post(&edit_path, &edit(0, "Edited at the hub", "e-1"))
        .assert_ok();
    assert_eq!(edited["task"]["revision"], 1, "{edited}");
    assert_eq!(
        edited["task"]["promptPreview"], "Edited at the hub",
        "{edited}"
    );
    assert_eq!(edited["replayed"], false, "{edited}");
    let again = hub
        .post(&edit_path, &edit(0, "Edited at the hub", "e-1"))
        .assert_ok();
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["task"]["revision"], 1, "{again}");
    hub.post(&edit_path, &edit(0, "A stale edit", "e-2"))
        .assert_error(409, "revision_conflict", None);

    // B superseded at the hub: cancelled, its replacement in its place; a retry finds it.
    let supersede_path = format!("/api/tasks/{b_id}/supersede");
    let body = edit(0, "Replacement of B from the hub", "s-1");
    let superseded = hub.post(&supersede_path, &body).assert_ok();
    let c_id = superseded["task"]["taskId"].as_str().unwrap().to_string();
    assert!(c_id.starts_with("hubtask_"), "{superseded}");
    assert_eq!(
        superseded["task"]["supersedes"],
        b_id.as_str(),
        "{superseded}"
    );
    assert_eq!(superseded["task"]["position"], 1, "{superseded}");
    assert_eq!(
        superseded["superseded"]["state"], "cancelled",
        "{superseded}"
    );
    assert_eq!(superseded["superseded"]["supersededBy"], c_id.as_str());
    let retried = hub.post(&supersede_path, &body).assert_ok();
    assert_eq!(retried["task"]["taskId"], c_id.as_str(), "{retried}");
    assert_eq!(retried["replayed"], true, "{retried}");
    hub.post(
        &edit_path.replace(&a_id, &b_id),
        &edit(0, "Too late", "e-3"),
    )
    .assert_error(409, "not_waiting", None);

    // MCP at the hub: a task sent and cancelled, A read and edited again, C superseded, and
    // A's result refused as over HTTP.
    let plan = json!([
        { "tool": "send", "arguments": { "session_id": remote,
          "prompt": "Sent over MCP then cancelled" } },
        { "tool": "task_status", "arguments": { "task_id": a_id } },
        { "tool": "edit_task", "arguments": { "task_id": a_id, "revision": 1,
          "prompt": "Edited over MCP while beta was away" } },
        { "tool": "supersede_task", "arguments": { "task_id": c_id, "revision": 0,
          "prompt": "Superseded over MCP" } },
        { "tool": "task_result", "arguments": { "task_id": a_id } },
        { "tool": "wait_task", "arguments": { "task_id": a_id, "timeout_seconds": 0.5 } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let d_id = ok(run.one(0))["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let status = ok(run.one(1));
    assert_eq!(status["task"]["state"], "waiting", "{status:#}");
    assert_eq!(status["task"]["revision"], 1, "{status:#}");
    assert_eq!(ok(run.one(2))["task"]["revision"], 2, "{:#}", run.one(2));
    let e = ok(run.one(3));
    let e_id = e["task"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(e["superseded"]["taskId"], c_id.as_str(), "{e:#}");
    assert_eq!(refused(run.one(4)), "machine_unreachable");
    let waited = ok(run.one(5));
    assert_eq!(waited["finished"], false, "{waited:#}");
    let plan = json!([{ "tool": "cancel_task", "arguments": { "task_id": d_id } }]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let cancelled = ok(run.one(0));
    assert_eq!(
        cancelled["outcome"], "cancelled_before_delivery",
        "{cancelled:#}"
    );

    // beta returns: A (its last text) and E are delivered and run there once each; nothing
    // else of what waited at the hub reaches it.
    beta.mock
        .push(Step::text("Answer to A.").when_user_contains("Edited over MCP while beta was away"));
    beta.mock
        .push(Step::text("Answer to E.").when_user_contains("Superseded over MCP"));
    beta.daemon.start_again();
    let plan = json!([{ "tool": "wait_task", "arguments": { "task_id": e_id,
        "timeout_seconds": 60 } }]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    let waited = ok(run.one(0));
    assert_eq!(waited["finished"], true, "{waited:#}");
    assert_eq!(waited["task"]["state"], "completed", "{waited:#}");
    let done_a = hub.wait_for("A completed on beta", CATCH_UP, |h| {
        let task = hub_task(h, &a_id);
        (task["state"] == "completed").then_some(task)
    });
    let a_on_beta = done_a["machineTaskId"].as_str().unwrap().to_string();
    let e_on_beta = waited["task"]["machineTaskId"]
        .as_str()
        .unwrap()
        .to_string();

    // Results at the hub: beta's, over HTTP and MCP.
    let result = hub.get(&format!("/api/tasks/{a_id}/result")).assert_ok();
    assert_eq!(result["taskId"], a_id.as_str(), "{result}");
    assert_eq!(result["text"], "Answer to A.", "{result}");
    let plan = json!([
        { "tool": "task_result", "arguments": { "task_id": e_id } },
        { "tool": "task_status", "arguments": { "task_id": a_on_beta } },
    ]);
    let run = run_client(&hub, Transport::Http, &plan, |_| {});
    assert_eq!(ok(run.one(0))["text"], "Answer to E.", "{:#}", run.one(0));
    // beta's own id of A, asked at the hub: the hub knows it is beta's.
    let own_a = ok(run.one(1));
    assert_eq!(own_a["task"]["taskId"], a_on_beta.as_str(), "{own_a:#}");
    assert_eq!(own_a["task"]["machine"], "beta", "{own_a:#}");
    assert_eq!(own_a["task"]["sessionId"], remote.as_str(), "{own_a:#}");

    // The queue at the hub is beta's again, the delivered tasks named as the hub named them.
    let queue = hub.get(&queue_path).assert_ok();
    eprintln!("beta's queue at the hub after delivery: {queue}");
    assert_eq!(queue["machineLink"], "up", "{queue}");
    assert_eq!(queue["pendingTotal"], 0, "{queue}");
    let recent_a = find(&queue["recent"], &a_id).unwrap_or_else(|| panic!("{queue}"));
    assert_eq!(recent_a["machineTaskId"], a_on_beta.as_str(), "{queue}");
    assert_eq!(recent_a["state"], "completed", "{queue}");
    assert!(find(&queue["recent"], &e_id).is_some(), "{queue}");

    // An edit of a delivered task is beta's to refuse.
    let late = hub
        .post(&edit_path, &edit(2, "After it ran", "e-4"))
        .assert_error(409, "not_waiting", None);
    assert!(late.to_string().contains("`beta`"), "{late}");

    beta.wait_turns_completed(&id, 2);
    let events = beta.events(&id);
    let count = |needle: &str| user_messages(&events, needle);
    let queued_on_beta = events.iter().filter(|e| e["type"] == "task.queued").count();
    eprintln!(
        "on beta: A's last text {}, E's {}, tasks queued {queued_on_beta}; A {a_on_beta}, E {e_on_beta}",
        count("Edited over MCP while beta was away"),
        count("Superseded over MCP")
    );
    assert_eq!(count("Edited over MCP while beta was away"), 1);
    assert_eq!(count("Superseded over MCP"), 1);
    for never in [
        "Queued for beta while away",
        "Edited at the hub",
        "Task B to be superseded",
        "Replacement of B from the hub",
        "Sent over MCP then cancelled",
    ] {
        assert_eq!(count(never), 0, "`{never}` never ran on beta");
    }
    assert_eq!(queued_on_beta, 2, "two tasks reached beta's queue");
}
