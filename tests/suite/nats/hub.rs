//! The hub (`serve --hub`) against a real nats-server: two daemons as two machines (own homes,
//! tmux servers and machine names; one hosting a real codex against the mock model) and a hub
//! daemon viewing both — their agents and sessions in the hub's state and session list with
//! their machine, a remote session's events with that machine's seqs, the hub restarted (and
//! killed) resuming from its durable consumer, a stopped machine shown `down` in bound, and
//! commands at the hub run by the owning machine: a prompt and an interrupt (codex), a Claude
//! approval resolved once with a second answer the owning machine's 409.

use std::time::Instant;

use super::*;
use crate::support::claude_host::ClaudeFixture;
use crate::support::codex_host::CodexFixture;
use crate::support::mock_messages::Step as ClaudeStep;
use crate::support::mock_responses::Step;

/// The hub's bound: a machine silent this long is `down`.
pub(crate) const DOWN_AFTER_SECS: u64 = 3;

/// Starts a hub daemon named `hub` viewing every machine publishing into `nats`.
pub(crate) fn hub(nats: &NatsServer) -> (TmuxServer, TestDaemon) {
    hub_with(nats, &[])
}

/// [`hub`] with more arguments of `serve`.
pub(crate) fn hub_with(nats: &NatsServer, extra: &[&str]) -> (TmuxServer, TestDaemon) {
    let (tmux, _) = tmux_with_sessions(&["desk"]);
    let url = nats.url();
    let down_after = DOWN_AFTER_SECS.to_string();
    let mut args = vec![
        "--nats",
        &url,
        "--machine",
        "hub",
        "--hub",
        "--hub-down-after",
        &down_after,
    ];
    args.extend_from_slice(extra);
    let daemon = TestDaemon::start(&tmux, &args);
    (tmux, daemon)
}

/// Machine `alpha`, a hosted Claude taking the hub's commands whose next turn asks to run a
/// Bash command, and a hub viewing it: alpha, its session's id, the hub.
pub(crate) fn claude_asking_and_a_hub(
    nats: &NatsServer,
) -> (ClaudeFixture, String, (TmuxServer, TestDaemon)) {
    let url = nats.url();
    let alpha =
        ClaudeFixture::start_with_args(&["--nats", &url, "--machine", "alpha", "--nats-commands"]);
    alpha.mock.push(
        ClaudeStep::tool_use(
            "Bash",
            json!({"command": "touch approved.txt", "description": "Create a file"}),
        )
        .then_text("Created it."),
    );
    let id = alpha.create(json!({}));
    (alpha, id, hub(nats))
}

/// The hub's link entry for `machine` in `/api/health`.
pub(crate) fn link(hub: &TestDaemon, machine: &str) -> Option<Value> {
    health(hub)["hub"]["machines"]
        .as_array()?
        .iter()
        .find(|m| m["machine"] == machine)
        .cloned()
}

/// A tmux session of `/api/state` by its (qualified) name.
fn state_session(state: &Value, name: &str) -> Option<Value> {
    state["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

/// Whether a tmux session of `/api/state` lists an agent of `agent`.
fn has_agent(session: &Value, agent: &str) -> bool {
    session["agents"]
        .as_array()
        .is_some_and(|agents| agents.iter().any(|a| a["agent"] == agent))
}

/// A session's events as its own machine logged them (tracker sessions have no events route).
pub(crate) fn own_events(daemon: &TestDaemon, session: &str) -> Vec<Value> {
    daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["session"] == session)
        .collect()
}

/// Compares the hub's read of a remote session with the machine's own events: the same
/// events (seqs and bodies), each once; prints the counts.
pub(crate) fn assert_same(hub_events: &[Value], own: &[Value], what: &str) {
    let got = seqs(hub_events);
    let mut unique = got.clone();
    unique.sort_unstable();
    unique.dedup();
    let duplicated = got.len() - unique.len();
    let want = seqs(own);
    let lost = want.iter().filter(|s| !got.contains(s)).count();
    eprintln!(
        "{what}: on the machine {}, at the hub {}, lost {lost}, duplicated {duplicated}",
        want.len(),
        got.len()
    );
    assert_eq!(
        got, want,
        "{what}: the hub's read must be the machine's events"
    );
    assert_eq!(hub_events, own, "{what}: the same events, byte for byte");
}

/// Waits until the hub holds every event `machine` logged (its link shows no lag and the
/// machine's own head).
pub(crate) fn wait_caught_up(hub: &TestDaemon, machine: &TestDaemon, name: &str) -> Value {
    wait_published(machine);
    let head = machine.head();
    hub.wait_for(&format!("the hub caught up with {name}"), CATCH_UP, |h| {
        link(h, name).filter(|l| l["receivedSeq"].as_u64() >= Some(head) && l["lag"] == 0)
    })
}

#[test]
fn a_hub_views_two_machines_and_resumes_from_its_durable_consumer() {
    let nats = NatsServer::start();
    let url = nats.url();
    // Machine A: agents reported over the API.
    let (_tmux_a, alpha) = publishing(&nats, "alpha");
    for i in 0..6 {
        post(&alpha, i);
    }
    // Machine B: a hosted codex session (real codex, the mock model) and a reported agent.
    let beta = CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta"]);
    beta.daemon.report(&json!({
        "agent": "claude-code",
        "status": "running",
        "tmuxSession": "work",
        "threadId": "b1",
    }));
    beta.mock.push(Step::text("Hello from beta."));
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    beta.send(&id, "Say hello");
    beta.wait_turns_completed(&id, 1);

    let (_tmux_h, mut hub) = hub(&nats);
    let remote = format!("beta/{id}");
    // Both machines' agents and B's hosted session in the hub's state and session list.
    let mut seen = Value::Null;
    let state = hub.wait_for("both machines in the hub's state", CATCH_UP, |h| {
        let state = h.state();
        if state != seen {
            eprintln!("hub state: {state}");
            seen = state.clone();
        }
        let a = state_session(&state, "alpha/work")?;
        let b = state_session(&state, "beta/work")?;
        (has_agent(&a, "codex") && has_agent(&b, "claude-code")).then_some(state)
    });
    let a = state_session(&state, "alpha/work").unwrap();
    assert_eq!(a["machine"], "alpha", "{a}");
    assert_eq!(a["machineLink"], "up", "{a}");
    assert_eq!(a["agents"][0]["machine"], "alpha", "{a}");
    assert_eq!(
        state_session(&state, "beta/work").unwrap()["machine"],
        "beta"
    );
    // The hub's own session keeps its local name, with its machine.
    let desk = state_session(&state, "desk").expect("the hub's own session");
    assert_eq!(desk["machine"], "hub", "{desk}");
    assert!(desk.get("machineLink").is_none(), "{desk}");
    let machines: Vec<&str> = state["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ["alpha", "beta"], "{state}");
    let sessions = hub.wait_for("B's codex session in the hub's list", CATCH_UP, |h| {
        let list = h.get("/api/sessions").assert_ok();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == remote.as_str() && s["turns"] == 1)
            .cloned()
    });
    assert_eq!(sessions["machine"], "beta", "{sessions}");
    assert_eq!(sessions["machineLink"], "up", "{sessions}");
    assert_eq!(sessions["runtime"], "codex", "{sessions}");

    // B's session's events at the hub: B's seqs, each once; the cursor is B's seq.
    wait_caught_up(&hub, &beta.daemon, "beta");
    assert_same(
        &hub.session_events(&remote),
        &beta.events(&id),
        "B's first turn",
    );
    let qualified = hub
        .get(&format!(
            "/api/sessions/beta%2F{id}/events?after=0&limit=1000"
        ))
        .assert_ok();
    assert_eq!(qualified["machine"], "beta");
    assert_eq!(
        qualified["events"].as_array().unwrap().len(),
        beta.events(&id).len()
    );
    let last = seqs(&beta.events(&id)).pop().unwrap();
    let page = hub
        .get(&format!("/api/sessions/beta/{id}/events?after={last}"))
        .assert_ok();
    assert_eq!(page["events"], json!([]), "{page}");
    assert_eq!(page["next"], last, "{page}");
    // A turn on B shows up at the hub with the same seqs.
    beta.mock.push(Step::text("Second answer."));
    beta.send(&id, "Again");
    beta.wait_turns_completed(&id, 2);
    wait_caught_up(&hub, &beta.daemon, "beta");
    let after_first: Vec<Value> = beta
        .events(&id)
        .into_iter()
        .filter(|e| e["seq"].as_u64() > Some(last))
        .collect();
    let read = hub
        .get(&format!(
            "/api/sessions/beta/{id}/events?after={last}&limit=1000"
        ))
        .assert_ok();
    assert_same(
        read["events"].as_array().unwrap(),
        &after_first,
        "B's second turn",
    );
    // A's tracker session, read at the hub.
    wait_caught_up(&hub, &alpha, "alpha");
    assert_same(
        &hub.session_events("alpha/work"),
        &own_events(&alpha, "work"),
        "A's reports",
    );
    // Unknown names answer clearly.
    let missing = hub.get("/api/sessions/gamma/x/events");
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(
        missing.json()["error"]["code"],
        "machine_not_found",
        "{}",
        missing.body
    );
    let missing = hub.get("/api/sessions/beta/cs_nope/events");
    assert_eq!(
        missing.json()["error"]["code"],
        "session_not_found",
        "{}",
        missing.body
    );
    // The hub is a reader: its own log holds none of the machines' events.
    let own = hub.events_after(0);
    assert!(
        own.iter()
            .all(|e| e["session"] != id.as_str() && e["session"] != "work"),
        "the hub's log holds another machine's events"
    );

    // The hub restarted: it resumes from its durable consumer (nothing delivered twice).
    hub.restart();
    for i in 6..12 {
        post(&alpha, i);
    }
    beta.mock.push(Step::text("Third answer."));
    beta.send(&id, "Once more");
    beta.wait_turns_completed(&id, 3);
    let a_link = wait_caught_up(&hub, &alpha, "alpha");
    let b_link = wait_caught_up(&hub, &beta.daemon, "beta");
    assert_same(
        &hub.session_events("alpha/work"),
        &own_events(&alpha, "work"),
        "A after the hub restarted",
    );
    assert_same(
        &hub.session_events(&remote),
        &beta.events(&id),
        "B after the hub restarted",
    );
    assert_eq!(a_link["duplicatesDropped"], 0, "{a_link}");
    assert_eq!(b_link["duplicatesDropped"], 0, "{b_link}");

    // The hub killed with -9 while A reports: what it lost in flight comes again, once.
    for i in 12..40 {
        post(&alpha, i);
    }
    hub.kill9();
    for i in 40..50 {
        post(&alpha, i);
    }
    hub.start_again();
    let a_link = wait_caught_up(&hub, &alpha, "alpha");
    eprintln!("after the hub's kill -9: {a_link}");
    assert_same(
        &hub.session_events("alpha/work"),
        &own_events(&alpha, "work"),
        "A after the hub was killed",
    );
}

#[test]
fn a_stopped_machine_is_shown_down_within_the_bound_with_its_last_state() {
    let nats = NatsServer::start();
    let (_tmux_a, mut alpha) = publishing(&nats, "alpha");
    post(&alpha, 1);
    let (_tmux_h, hub) = hub(&nats);
    let up = hub.wait_for("alpha up at the hub", CATCH_UP, |h| {
        link(h, "alpha").filter(|l| l["link"] == "up" && l["receivedSeq"].as_u64() >= Some(1))
    });
    eprintln!("up: {up}");
    wait_caught_up(&hub, &alpha, "alpha");
    alpha.stop();
    let stopped = Instant::now();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    let down = hub.wait_for("alpha down at the hub", bound * 4, |h| {
        link(h, "alpha").filter(|l| l["link"] == "down")
    });
    let took = stopped.elapsed();
    eprintln!("down after {took:?} (bound {bound:?}): {down}");
    // Its last heartbeat may be up to a second before the stop; the hub looks every request.
    assert!(took <= bound + Duration::from_secs(2), "{took:?}");
    assert!(down["lastHeard"].as_u64().is_some(), "{down}");
    // Its last known state is still shown, marked down, never as idle.
    let state = hub.state();
    let work = state_session(&state, "alpha/work").expect("alpha's last known session");
    assert_eq!(work["machineLink"], "down", "{work}");
    assert_eq!(work["agents"][0]["agent"], "codex", "{work}");
    assert_eq!(work["agents"][0]["status"], "waiting", "{work}");
    let machines = &state["machines"];
    assert_eq!(machines[0]["machine"], "alpha", "{machines}");
    assert_eq!(machines[0]["link"], "down", "{machines}");
}

#[test]
fn a_prompt_sent_at_the_hub_runs_once_on_its_machine_and_streams_back() {
    let nats = NatsServer::start();
    let url = nats.url();
    let mut beta =
        CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta", "--nats-commands"]);
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    // A machine that takes no commands.
    let (_tmux_a, alpha) = publishing(&nats, "alpha");
    post(&alpha, 0);
    let (_tmux_h, hub) = hub(&nats);
    let remote = format!("beta/{id}");
    hub.wait_for("B's session and A at the hub", CATCH_UP, |h| {
        let list = h.get("/api/sessions").assert_ok();
        let listed = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == remote.as_str());
        (listed && link(h, "alpha").is_some()).then_some(())
    });
    // The prompt goes to B with its idempotency key, runs there, and its turn streams back.
    beta.mock.push(Step::text("Hello, hub."));
    let body = json!({ "text": "Hello from the hub", "idempotencyKey": "hub-1" });
    let path = format!("/api/sessions/beta/{id}/messages");
    let sent = hub.post(&path, &body).assert_ok();
    assert_eq!(sent["outcome"], "started", "{sent}");
    assert_eq!(sent["duplicate"], false, "{sent}");
    beta.wait_turns_completed(&id, 1);
    // A retry of the same command never acts twice.
    let retry = hub.post(&path, &body).assert_ok();
    assert_eq!(retry["duplicate"], true, "{retry}");
    assert_eq!(retry["turnId"], sent["turnId"], "{retry}");
    // The qualified id as one segment is the same session and the same command.
    let qualified = hub
        .post(&format!("/api/sessions/beta%2F{id}/messages"), &body)
        .assert_ok();
    assert_eq!(qualified["duplicate"], true, "{qualified}");
    assert_eq!(qualified["turnId"], sent["turnId"], "{qualified}");
    assert_eq!(
        beta.mock.main_requests().len(),
        1,
        "the model saw the prompt once"
    );
    wait_caught_up(&hub, &beta.daemon, "beta");
    let at_hub = hub.session_events(&remote);
    assert_same(&at_hub, &beta.events(&id), "the hub's prompt's turn");
    let completed: Vec<&Value> = at_hub
        .iter()
        .filter(|e| e["type"] == "turn.completed")
        .collect();
    assert_eq!(completed.len(), 1, "{at_hub:?}");
    // An interrupt at the hub ends the turn running on B (the hang answers this prompt only,
    // and the interrupt waits until codex asked the model for it).
    beta.mock
        .push(Step::hang().when_user_contains("Wait for me"));
    let asked = beta.mock.main_requests().len();
    let waiting = hub
        .post(
            &path,
            &json!({ "text": "Wait for me", "idempotencyKey": "hub-wait" }),
        )
        .assert_ok();
    assert_eq!(waiting["outcome"], "started", "{waiting}");
    beta.mock.wait_for_requests(asked + 1, CATCH_UP);
    let interrupt = format!("/api/sessions/beta/{id}/interrupt");
    let stopped = hub.post(&interrupt, &json!({})).assert_ok();
    assert_eq!(stopped["interrupted"], true, "{stopped}");
    let turns = beta.wait_turns_completed(&id, 2);
    assert_eq!(turns[1]["data"]["status"], "interrupted", "{turns:?}");
    let idle = hub
        .post(&format!("/api/sessions/beta%2F{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(idle["interrupted"], false, "{idle}");
    // The owning machine's refusal is the one it gives locally (status and code); unknown
    // machines answer clearly.
    let refused = hub.post(
        "/api/sessions/beta/cs_nope/messages",
        &json!({ "text": "x" }),
    );
    let local = beta
        .daemon
        .post("/api/sessions/cs_nope/messages", &json!({ "text": "x" }));
    assert_eq!(
        refused.status, local.status,
        "{} / {}",
        refused.body, local.body
    );
    assert_eq!(
        refused.json()["error"]["code"],
        local.json()["error"]["code"],
        "{} / {}",
        refused.body,
        local.body
    );
    assert!(refused.body.contains("machine `beta`"), "{}", refused.body);
    let unknown = hub.post("/api/sessions/gamma/x/messages", &json!({ "text": "x" }));
    assert_eq!(
        unknown.json()["error"]["code"],
        "machine_not_found",
        "{}",
        unknown.body
    );
    // A machine that takes no commands, and a stopped one: a clear error naming it, in bound.
    let started = Instant::now();
    let none = hub.post("/api/sessions/alpha/work/messages", &json!({ "text": "x" }));
    assert_eq!(none.status, 503, "{}", none.body);
    assert_eq!(
        none.json()["error"]["code"],
        "machine_unreachable",
        "{}",
        none.body
    );
    assert!(none.body.contains("`alpha`"), "{}", none.body);
    beta.daemon.stop();
    let stopped = hub.post(&path, &json!({ "text": "x", "idempotencyKey": "hub-2" }));
    let took = started.elapsed();
    eprintln!(
        "commands to machines that take none answered in {took:?}: {}",
        stopped.body
    );
    assert_eq!(stopped.status, 503, "{}", stopped.body);
    assert!(stopped.body.contains("`beta`"), "{}", stopped.body);
    assert!(took < Duration::from_secs(25), "{took:?}");
}

#[test]
fn a_claude_approval_answered_at_the_hub_is_resolved_once_on_its_machine() {
    let nats = NatsServer::start();
    let (alpha, id, (_tmux_h, hub)) = claude_asking_and_a_hub(&nats);
    let remote = format!("alpha/{id}");
    let (status, sent) = alpha.send(&id, "Make a file");
    assert_eq!(status, 200, "{sent}");
    // The approval reaches the hub through A's stream, and is answered there.
    hub.wait_for("A at the hub", CATCH_UP, |h| link(h, "alpha"));
    let requested = hub.wait_for("A's approval at the hub", CATCH_UP, |h| {
        h.session_events(&remote)
            .into_iter()
            .find(|e| e["type"] == "approval.requested")
    });
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/sessions/alpha/{id}/approvals/{approval}");
    let answer = hub
        .post(&path, &json!({ "decision": "accept" }))
        .assert_ok();
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["decision"], "accept", "{answer}");
    alpha.wait_turns_completed(&id, 1);
    assert!(
        alpha.work.join("approved.txt").exists(),
        "the command approved at the hub ran on A"
    );
    let resolved: Vec<Value> = alpha
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "approval.resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["data"]["decision"], "accept", "{resolved:?}");
    assert_eq!(resolved[0]["data"]["by"], "hub:hub", "{resolved:?}");
    // A second answer, at the hub (either form of the id) or on A, is A's 409.
    for path in [
        path.clone(),
        format!("/api/sessions/alpha%2F{id}/approvals/{approval}"),
    ] {
        hub.post(&path, &json!({ "decision": "decline" }))
            .assert_error(409, "approval_resolved", None);
    }
    alpha
        .daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "decline" }),
        )
        .assert_error(409, "approval_resolved", None);
    // The hub's view holds the one resolution, as A logged it.
    wait_caught_up(&hub, &alpha.daemon, "alpha");
    let at_hub = hub.session_events(&remote);
    assert_same(&at_hub, &alpha.events(&id), "the approved turn");
}

/// User messages on a machine whose text contains `needle`.
pub(crate) fn user_messages(events: &[Value], needle: &str) -> usize {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["type"] == "userMessage"
                && e["data"]["item"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(needle))
        })
        .count()
}

#[test]
fn a_task_queued_at_the_hub_for_a_stopped_machine_runs_once_when_it_returns() {
    let nats = NatsServer::start();
    let url = nats.url();
    let mut beta =
        CodexFixture::start_with_args(&["--nats", &url, "--machine", "beta", "--nats-commands"]);
    let id = beta.create(json!({ "approvalPolicy": "never" }));
    let (_tmux_h, mut hub) = hub(&nats);
    let remote = format!("beta/{id}");
    hub.wait_for("B's session at the hub", CATCH_UP, |h| {
        let list = h.get("/api/sessions").assert_ok();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == remote.as_str())
            .then_some(())
    });
    // B stops: the hub shows it down within its bound.
    beta.daemon.stop();
    let stopped = Instant::now();
    let bound = Duration::from_secs(DOWN_AFTER_SECS);
    let down = hub.wait_for("beta down at the hub", bound * 4, |h| {
        link(h, "beta").filter(|l| l["link"] == "down")
    });
    let took_down = stopped.elapsed();
    eprintln!("beta down at the hub after {took_down:?} (bound {bound:?}): {down}");
    assert!(took_down <= bound + Duration::from_secs(2), "{took_down:?}");
    // A task queued at the hub waits there, for beta, shown so.
    let tasks = format!("/api/sessions/beta/{id}/tasks");
    let body = json!({ "text": "Queued while beta was away", "idempotencyKey": "away-1" });
    let queued = hub.post(&tasks, &body);
    assert_eq!(queued.status, 202, "{}", queued.body);
    let task = queued.json()["task"].clone();
    let task_id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(task["state"], "waiting", "{task}");
    assert_eq!(task["waitingReason"], "machine_unreachable", "{task}");
    assert_eq!(task["machine"], "beta", "{task}");
    assert_eq!(task["sessionId"], remote.as_str(), "{task}");
    // A retry at the hub (either form of the id) finds the same task.
    let retry = hub.post(&format!("/api/sessions/beta%2F{id}/tasks"), &body);
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(
        retry.json()["task"]["taskId"],
        task_id.as_str(),
        "{}",
        retry.body
    );
    assert_eq!(retry.json()["replayed"], true, "{}", retry.body);
    // A second task, cancelled at the hub while it waits, never runs.
    let second = hub
        .post(&tasks, &json!({ "text": "Cancelled before beta returned" }))
        .json();
    let second_id = second["task"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(second["task"]["state"], "waiting", "{second}");
    let cancelled = hub
        .post(&format!("/api/tasks/{second_id}/cancel"), &json!({}))
        .assert_ok();
    assert_eq!(cancelled["task"]["state"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["outcome"], "cancelled_before_delivery",
        "{cancelled}"
    );
    // A direct command to beta fails clearly, naming it, within the bound.
    let asked = Instant::now();
    let direct = hub.post(
        &format!("/api/sessions/beta/{id}/messages"),
        &json!({ "text": "Are you there?" }),
    );
    let took_direct = asked.elapsed();
    assert_eq!(direct.status, 503, "{}", direct.body);
    assert_eq!(
        direct.json()["error"]["code"],
        "machine_unreachable",
        "{}",
        direct.body
    );
    assert!(direct.body.contains("`beta`"), "{}", direct.body);
    assert!(took_direct < Duration::from_secs(12), "{took_direct:?}");
    // The hub restarts: the waiting task is kept, still waiting for beta.
    hub.restart();
    let kept = hub.get(&format!("/api/tasks/{task_id}")).assert_ok();
    assert_eq!(kept["task"]["state"], "waiting", "{kept}");
    assert_eq!(kept["task"]["machine"], "beta", "{kept}");
    assert_eq!(
        kept["task"]["waitingReason"], "machine_unreachable",
        "{kept}"
    );
    // Beta returns: the task is delivered into its queue and runs there, once.
    beta.mock.push(Step::text("Done while you were away."));
    beta.daemon.start_again();
    let done = hub.wait_for("the hub's task completed on beta", CATCH_UP, |h| {
        let task = h.get(&format!("/api/tasks/{task_id}")).assert_ok()["task"].clone();
        (task["state"] == "completed").then_some(task)
    });
    eprintln!("the task at the hub: {done}");
    assert_eq!(done["machine"], "beta", "{done}");
    let machine_task = done["machineTaskId"].as_str().unwrap().to_string();
    assert_eq!(done["resultExcerpt"], "Done while you were away.", "{done}");
    let on_beta = beta
        .daemon
        .get(&format!("/api/tasks/{machine_task}"))
        .assert_ok();
    assert_eq!(on_beta["task"]["state"], "completed", "{on_beta}");
    // The cancelled task stays cancelled after the machine returned.
    let never = hub.get(&format!("/api/tasks/{second_id}")).assert_ok();
    assert_eq!(never["task"]["state"], "cancelled", "{never}");
    beta.wait_turns_completed(&id, 1);
    let events = beta.events(&id);
    let ran = user_messages(&events, "Queued while beta was away");
    let cancelled_ran = user_messages(&events, "Cancelled before beta returned");
    let direct_ran = user_messages(&events, "Are you there?");
    let queued_on_beta = events.iter().filter(|e| e["type"] == "task.queued").count();
    let model_saw = beta
        .mock
        .main_requests()
        .iter()
        .filter(|r| r.body.to_string().contains("Queued while beta was away"))
        .count();
    eprintln!(
        "down after {took_down:?}; direct command refused in {took_direct:?}; on beta: the queued task's user messages {ran}, tasks queued {queued_on_beta}, model requests with it {model_saw}, the cancelled task's {cancelled_ran}, the refused prompt's {direct_ran}"
    );
    assert_eq!(ran, 1, "the task ran once on beta");
    assert_eq!(queued_on_beta, 1, "one task reached beta's queue");
    assert_eq!(model_saw, 1, "the model saw the task once");
    assert_eq!(cancelled_ran, 0, "the cancelled task never ran");
    assert_eq!(direct_ran, 0, "the refused prompt never ran");
    // A retry of the first task after delivery finds it, delivered, and queues nothing on beta.
    let late = hub.post(&tasks, &body);
    assert_eq!(late.status, 200, "{}", late.body);
    assert_eq!(
        late.json()["task"]["taskId"],
        task_id.as_str(),
        "{}",
        late.body
    );
    let queued_after = beta
        .events(&id)
        .iter()
        .filter(|e| e["type"] == "task.queued")
        .count();
    assert_eq!(queued_after, 1);
}
