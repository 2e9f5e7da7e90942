//! The rest of a hub's commands to another machine's session (issue 26), against a real codex
//! on machine beta (the mock model) and a hub daemon, both through a real nats-server: the goal
//! set and cleared, the models listed and the model set, the control lease taken over and
//! released (a task from the hub waits under it as locally), MCP's interrupt refused while a
//! human holds beta's lease exactly as beta's own MCP refuses it and taken without it, a fork,
//! and a session started on beta from the hub that runs a prompt — every answer beta's own,
//! every refusal beta's, and a stopped beta `machine_unreachable` in bound.

use std::time::Instant;

use super::hub::hub;
use super::*;
use crate::suite::codex::host::api;
use crate::suite::mcp::{Transport, ok, run_client};
use crate::support::codex_host::CodexFixture;
use crate::support::http::Resp;
use crate::support::mock_responses::Step;

/// Waits until the hub lists `id` (qualified) and returns its entry.
pub(super) fn listed(hub: &TestDaemon, id: &str) -> Value {
    hub.wait_for(&format!("{id} in the hub's list"), CATCH_UP, |h| {
        let list = h.get("/api/sessions").assert_ok();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
    })
}

/// Asserts the hub's answer is beta's own: the same status and body (an error's code, with
/// the message naming beta).
fn same_answer(at_hub: &Resp, on_beta: &Resp, what: &str) {
    same_refusal(at_hub, on_beta, what);
    if at_hub.status >= 300 {
        assert!(at_hub.body.contains("machine `beta`"), "{}", at_hub.body);
    }
}

/// The same status and body, or the same error code (a body's shape the hub checks as beta
/// does, before sending it).
fn same_refusal(at_hub: &Resp, on_beta: &Resp, what: &str) {
    assert_eq!(
        at_hub.status, on_beta.status,
        "{what}: {} / {}",
        at_hub.body, on_beta.body
    );
    if at_hub.status < 300 {
        assert_eq!(
            at_hub.json(),
            on_beta.json(),
            "{what}: {} / {}",
            at_hub.body,
            on_beta.body
        );
    } else {
        assert_eq!(
            at_hub.json()["error"]["code"],
            on_beta.json()["error"]["code"],
            "{what}: {} / {}",
            at_hub.body,
            on_beta.body
        );
    }
}

#[test]
fn goal_models_lease_fork_and_a_new_session_at_the_hub_are_decided_by_their_machine() {
    let nats = NatsServer::start();
    let url = nats.url();
    let beta =
        CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta", "--nats-commands"]);
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    let (_tmux_h, hub) = hub(&nats);
    let remote = format!("beta/{id}");
    listed(&hub, &remote);

    // The goal, set at the hub, is beta's (its event, its view), read back and cleared there.
    let set = api(
        &hub,
        "PUT",
        &format!("/api/sessions/beta/{id}/goal"),
        Some(&json!({ "objective": "Ship it", "status": "paused" })),
    )
    .assert_ok();
    assert_eq!(set["ok"], true, "{set}");
    assert_eq!(set["data"]["goal"]["objective"], "Ship it", "{set}");
    beta.wait_event(&id, "goal.updated from the hub", |e| {
        e["type"] == "goal.updated" && e["data"]["goal"]["objective"] == "Ship it"
    });
    assert_eq!(beta.view(&id)["goal"]["status"], "paused");
    let got = api(
        &hub,
        "GET",
        &format!("/api/sessions/beta%2F{id}/goal"),
        None,
    )
    .assert_ok();
    assert_eq!(got["data"]["goal"]["objective"], "Ship it", "{got}");
    hub.wait_for("beta's goal.updated at the hub", CATCH_UP, |h| {
        h.session_events(&remote)
            .into_iter()
            .find(|e| e["type"] == "goal.updated")
    });
    let bad = json!({ "status": "sleeping" });
    same_answer(
        &api(
            &hub,
            "PUT",
            &format!("/api/sessions/beta/{id}/goal"),
            Some(&bad),
        ),
        &api(
            &beta.daemon,
            "PUT",
            &format!("/api/sessions/{id}/goal"),
            Some(&bad),
        ),
        "a bad goal",
    );
    let cleared = api(
        &hub,
        "DELETE",
        &format!("/api/sessions/beta/{id}/goal"),
        None,
    )
    .assert_ok();
    assert_eq!(cleared["data"]["cleared"], true, "{cleared}");
    beta.wait_event(&id, "goal.cleared from the hub", |e| {
        e["type"] == "goal.cleared"
    });

    // Models: beta's list, and beta's answer to setting a codex session's model.
    same_answer(
        &hub.get("/api/models?machine=beta&runtime=codex"),
        &beta.daemon.get("/api/models?runtime=codex"),
        "beta's models",
    );
    let model = json!({ "model": "gpt-test" });
    same_answer(
        &hub.put(&format!("/api/sessions/beta%2F{id}/model"), &model),
        &beta
            .daemon
            .put(&format!("/api/sessions/{id}/model"), &model),
        "the model",
    );
    hub.get("/api/models?machine=gamma")
        .assert_error(404, "machine_not_found", None);

    // The lease: taken over from the hub, held on beta; a task from the hub waits under it.
    let lease = format!("/api/sessions/beta/{id}/lease");
    let taken = hub
        .post(&lease, &json!({ "action": "takeover" }))
        .assert_ok();
    assert_eq!(taken["lease"]["holder"], "human", "{taken}");
    let on_beta = beta
        .daemon
        .get(&format!("/api/sessions/{id}/lease"))
        .assert_ok();
    assert_eq!(on_beta["lease"], taken["lease"], "{on_beta}");
    let bad = json!({ "action": "takeover", "dropQueued": true });
    same_refusal(
        &hub.post(&lease, &bad),
        &beta.daemon.post(&format!("/api/sessions/{id}/lease"), &bad),
        "a bad lease body",
    );
    beta.mock
        .push(Step::text("Ran after the release.").when_user_contains("Under the lease"));
    let queued = hub.post(
        &format!("/api/sessions/beta/{id}/tasks"),
        &json!({ "text": "Under the lease" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);
    let task = queued.json()["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let waiting = hub.wait_for("the hub's task waiting on beta's lease", CATCH_UP, |h| {
        let task = h.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone();
        (task["waitingReason"] == "human_control").then_some(task)
    });
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    // Delivered, the task is beta's to edit and supersede: the hub forwards both, and names the
    // replacement as a hub task of its own, which runs after the release.
    let edited = hub
        .post(
            &format!("/api/tasks/{task}/edit"),
            &json!({ "revision": waiting["revision"], "text": "Under the lease, edited" }),
        )
        .assert_ok();
    assert_eq!(edited["task"]["taskId"], task.as_str(), "{edited}");
    let machine_task = edited["task"]["machineTaskId"].as_str().unwrap();
    let on_beta = beta
        .daemon
        .get(&format!("/api/tasks/{machine_task}"))
        .assert_ok();
    assert_eq!(
        on_beta["task"]["promptPreview"], "Under the lease, edited",
        "{on_beta}"
    );
    let superseded = hub
        .post(
            &format!("/api/tasks/{task}/supersede"),
            &json!({ "revision": edited["task"]["revision"],
                "text": "Under the lease, superseded", "idempotencyKey": "sup-1" }),
        )
        .assert_ok();
    let replacement = superseded["task"]["taskId"].as_str().unwrap().to_string();
    assert!(replacement.starts_with("hubtask_"), "{superseded}");
    assert_eq!(
        superseded["task"]["supersedes"],
        task.as_str(),
        "{superseded}"
    );
    assert_eq!(
        superseded["superseded"]["state"], "cancelled",
        "{superseded}"
    );
    assert_eq!(
        superseded["superseded"]["supersededBy"],
        replacement.as_str(),
        "{superseded}"
    );
    let task = replacement;

    // MCP's interrupt while a human holds beta's lease: refused at the hub as beta's own MCP
    // refuses it.
    let interrupt =
        |session: &str| json!([{ "tool": "interrupt", "arguments": { "session_id": session } }]);
    let at_hub = run_client(&hub, Transport::Http, &interrupt(&remote), |_| {});
    let refused = at_hub.one(0).clone();
    let local = run_client(&beta.daemon, Transport::Http, &interrupt(&id), |_| {});
    let local = local.one(0).clone();
    eprintln!("MCP interrupt under a human lease: at the hub {refused}, on beta {local}");
    assert_eq!(refused["isError"], true, "{refused:#}");
    assert_eq!(local["isError"], true, "{local:#}");
    let error = |answer: &Value| answer["structured"]["error"].clone();
    assert_eq!(error(&refused)["code"], "human_control", "{refused:#}");
    assert_eq!(
        error(&refused)["kind"],
        error(&local)["kind"],
        "{refused:#}"
    );
    assert_eq!(
        error(&refused)["code"],
        error(&local)["code"],
        "{refused:#}"
    );
    // An HTTP interrupt from the hub is the human's, as locally: not refused.
    let http = hub
        .post(&format!("/api/sessions/beta/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(http["interrupted"], false, "{http}");

    // Released from the hub: the task runs on beta; MCP's interrupt is taken.
    let released = hub
        .post(&lease, &json!({ "action": "release" }))
        .assert_ok();
    assert_eq!(released["lease"]["holder"], "managed", "{released}");
    assert_eq!(released["dropped"], json!([]), "{released}");
    let done = hub.wait_for("the hub's task completed on beta", CATCH_UP, |h| {
        let task = h.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone();
        (task["state"] == "completed").then_some(task)
    });
    assert_eq!(done["resultExcerpt"], "Ran after the release.", "{done}");
    let taken = run_client(&hub, Transport::Http, &interrupt(&remote), |_| {});
    let taken = taken.one(0).clone();
    assert_eq!(ok(&taken)["interrupted"], false, "{taken:#}");

    // A fork at the hub: a new session on beta, with beta's history, listed at the hub.
    let resp = hub.post(&format!("/api/sessions/beta%2F{id}/fork"), &json!({}));
    assert_eq!(resp.status, 201, "{}", resp.body);
    let forked = resp.json();
    let child = forked["data"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(forked["data"]["session"]["machine"], "beta", "{forked}");
    let child_id = child
        .strip_prefix("beta/")
        .unwrap_or_else(|| panic!("a qualified id: {forked}"))
        .to_string();
    let view = beta.view(&child_id);
    assert_eq!(view["forkedFrom"]["sessionId"], id.as_str(), "{view}");
    listed(&hub, &child);

    // A session started on beta from the hub (its key travels: a retry finds it), then a prompt.
    let create = json!({
        "runtime": "codex",
        "cwd": beta.work,
        "approvalPolicy": "never",
        "machine": "beta",
        "idempotencyKey": "hub-start-1",
    });
    let resp = hub.post("/api/sessions", &create);
    assert_eq!(resp.status, 201, "{}", resp.body);
    let started = resp.json()["session"].clone();
    let new = started["id"].as_str().unwrap().to_string();
    assert_eq!(started["machine"], "beta", "{started}");
    let again = hub.post("/api/sessions", &create);
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(
        again.json()["session"]["id"],
        new.as_str(),
        "{}",
        again.body
    );
    let new_id = new.strip_prefix("beta/").unwrap().to_string();
    assert_eq!(beta.view(&new_id)["runtime"], "codex");
    listed(&hub, &new);
    beta.mock
        .push(Step::text("Hello from the new one.").when_user_contains("First words"));
    let sent = hub
        .post(
            &format!("/api/sessions/{}/messages", new.replace('/', "%2F")),
            &json!({ "text": "First words" }),
        )
        .assert_ok();
    assert_eq!(sent["outcome"], "started", "{sent}");
    beta.wait_turns_completed(&new_id, 1);
    let bad = json!({ "runtime": "codex", "cwd": "relative/dir" });
    same_answer(
        &hub.post("/api/sessions", &merged_machine(&bad)),
        &beta.daemon.post("/api/sessions", &bad),
        "a bad create",
    );
    hub.post(
        "/api/sessions",
        &json!({ "runtime": "codex", "cwd": "/", "machine": "gamma" }),
    )
    .assert_error(404, "machine_not_found", None);

    // beta stopped: each command is `machine_unreachable`, naming it, in bound.
    let mut beta = beta;
    beta.daemon.stop();
    let asked = Instant::now();
    let goal = api(
        &hub,
        "PUT",
        &format!("/api/sessions/beta/{id}/goal"),
        Some(&json!({ "objective": "x" })),
    );
    let lease = hub.post(&lease, &json!({ "action": "takeover" }));
    let start = hub.post("/api/sessions", &create);
    let took = asked.elapsed();
    eprintln!("three commands to a stopped beta answered in {took:?}");
    for resp in [goal, lease, start] {
        resp.assert_error(503, "machine_unreachable", None);
        assert!(resp.body.contains("`beta`"), "{}", resp.body);
    }
    assert!(took < Duration::from_secs(40), "{took:?}");
}

/// `body` with `"machine": "beta"`.
fn merged_machine(body: &Value) -> Value {
    let mut body = body.clone();
    body["machine"] = json!("beta");
    body
}
