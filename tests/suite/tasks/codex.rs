//! Tasks and leases over HTTP and the CLI, on codex sessions.
//!
//! Every test runs the real daemon hosting the real codex app-server against the mock model
//! server: what a task did is checked against what the model actually received.

use std::time::Duration;

use crate::support::codex_host::{CodexFixture, TURN_TIMEOUT, eventually};
use crate::support::http::Resp;
use crate::support::mock_responses::Step;
use crate::support::*;

/// Long enough for the dispatcher (which looks at waiting work every second) to have delivered
/// anything it was going to deliver.
const QUIET: Duration = Duration::from_millis(1500);

fn post_task(d: &TestDaemon, session: &str, body: Value) -> Resp {
    d.post(&format!("/api/sessions/{session}/tasks"), &body)
}

/// Queues `text` (with an optional key); must be a new task (202). Returns the task view.
#[track_caller]
fn queue_task(d: &TestDaemon, session: &str, text: &str, key: Option<&str>) -> Value {
    let mut body = json!({ "text": text });
    if let Some(key) = key {
        body["idempotencyKey"] = json!(key);
    }
    let resp = post_task(d, session, body);
    if resp.status != 202 {
        d.fail(&format!("send answered {}: {}", resp.status, resp.body));
    }
    let answer = resp.json();
    assert_eq!(answer["replayed"], false, "{answer:#}");
    answer["task"].clone()
}

fn id_of(task: &Value) -> String {
    task["taskId"].as_str().expect("taskId").to_string()
}

#[track_caller]
fn task(d: &TestDaemon, task: &str) -> Value {
    d.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone()
}

/// Waits until the task has finished; returns its view.
#[track_caller]
fn wait_finished(d: &TestDaemon, id: &str) -> Value {
    d.wait_for(&format!("task {id} to finish"), TURN_TIMEOUT, |d| {
        let view = task(d, id);
        (view["phase"] == "finished").then_some(view)
    })
}

fn edit(d: &TestDaemon, task: &str, body: Value) -> Resp {
    d.post(&format!("/api/tasks/{task}/edit"), &body)
}

fn supersede(d: &TestDaemon, task: &str, body: Value) -> Resp {
    d.post(&format!("/api/tasks/{task}/supersede"), &body)
}

fn set_lease(d: &TestDaemon, session: &str, body: Value) -> Resp {
    d.post(&format!("/api/sessions/{session}/lease"), &body)
}

#[track_caller]
fn queue(d: &TestDaemon, session: &str) -> Value {
    d.get(&format!("/api/sessions/{session}/queue")).assert_ok()
}

fn pending_ids(queue: &Value) -> Vec<String> {
    queue["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect()
}

/// The last user message of every main-conversation request the model received.
fn prompts(fx: &CodexFixture) -> Vec<String> {
    fx.mock
        .main_requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect()
}

/// The whole result of a finished task, from the result route (one chunk).
#[track_caller]
fn result_text(d: &TestDaemon, task: &str) -> String {
    let chunk = d.get(&format!("/api/tasks/{task}/result")).assert_ok();
    assert_eq!(chunk["available"], true, "{chunk:#}");
    assert_eq!(chunk["eof"], true, "{chunk:#}");
    chunk["text"].as_str().unwrap().to_string()
}

fn session_opts() -> Value {
    json!({ "approvalPolicy": "never", "sandbox": "workspace-write" })
}

#[test]
fn edits_and_supersedes_compare_and_swap_and_release_delivers_them_in_order() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock.push(
        Step::text("Reply to the replacement.").when_user_contains("Replacement for task one"),
    );
    fx.mock
        .push(Step::text("Reply to task two.").when_user_contains("Task two, edit 32"));
    let id = fx.create(session_opts());

    // A human holds the session: queued work waits.
    let lease = set_lease(d, &id, json!({ "action": "takeover", "by": "alice" })).assert_ok();
    assert_eq!(lease["lease"]["holder"], "human", "{lease:#}");
    assert_eq!(lease["lease"]["generation"], 1, "{lease:#}");
    assert_eq!(lease["lease"]["reason"], "takeover", "{lease:#}");
    assert_eq!(lease["lease"]["by"], "alice", "{lease:#}");
    let t1 = queue_task(d, &id, "Task one, original", None);
    let t2 = queue_task(d, &id, "Task two, original", None);
    for (view, position) in [(&t1, 0), (&t2, 1)] {
        assert_eq!(view["state"], "waiting", "{view:#}");
        assert_eq!(view["phase"], "queued", "{view:#}");
        assert_eq!(view["revision"], 1, "{view:#}");
        assert_eq!(view["position"], position, "{view:#}");
        assert_eq!(view["waitingReason"], "human_control", "{view:#}");
    }
    let (t1, t2) = (id_of(&t1), id_of(&t2));

    // A stale revision is refused, naming the current one; nothing changes.
    let error = edit(d, &t1, json!({ "revision": 7, "text": "Task one, stale" })).assert_error(
        409,
        "revision_conflict",
        None,
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("revision 1") && message.contains("not 7"),
        "{error:#}"
    );
    assert_eq!(task(d, &t1)["promptPreview"], "Task one, original");

    // The right revision: applied in place, revision bumped, same id and position.
    let body = json!({ "revision": 1, "text": "Task one, edited", "idempotencyKey": "edit-1" });
    let edited = edit(d, &t1, body.clone()).assert_ok();
    assert_eq!(edited["replayed"], false, "{edited:#}");
    let view = &edited["task"];
    assert_eq!(view["taskId"], t1.as_str(), "{edited:#}");
    assert_eq!(view["revision"], 2, "{edited:#}");
    assert_eq!(view["position"], 0, "{edited:#}");
    assert_eq!(view["state"], "waiting", "{edited:#}");
    assert_eq!(view["promptPreview"], "Task one, edited", "{edited:#}");
    assert_eq!(view["promptBytes"], "Task one, edited".len(), "{edited:#}");
    assert!(edited.get("superseded").is_none(), "{edited:#}");

    // The same edit again with its key: replayed, not applied twice (still revision 2).
    let again = edit(d, &t1, body).assert_ok();
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(again["task"]["revision"], 2, "{again:#}");
    assert_eq!(again["task"]["promptPreview"], "Task one, edited");
    // Without a key, the old revision is stale now.
    let error = edit(d, &t1, json!({ "revision": 1, "text": "Task one, again" })).assert_error(
        409,
        "revision_conflict",
        None,
    );
    assert!(
        error["message"].as_str().unwrap().contains("revision 2"),
        "{error:#}"
    );

    // Supersede: also compare-and-swap.
    supersede(
        d,
        &t1,
        json!({ "revision": 1, "text": "Replacement for task one" }),
    )
    .assert_error(409, "revision_conflict", None);
    let body =
        json!({ "revision": 2, "text": "Replacement for task one", "idempotencyKey": "sup-1" });
    let superseded = supersede(d, &t1, body.clone()).assert_ok();
    assert_eq!(superseded["replayed"], false, "{superseded:#}");
    let replacement = &superseded["task"];
    let r1 = id_of(replacement);
    assert_ne!(r1, t1);
    assert_eq!(replacement["supersedes"], t1.as_str(), "{superseded:#}");
    assert_eq!(replacement["state"], "waiting", "{superseded:#}");
    assert_eq!(replacement["revision"], 1, "{superseded:#}");
    assert_eq!(
        replacement["position"], 0,
        "the replacement takes t1's place, before t2: {superseded:#}"
    );
    assert_eq!(replacement["promptPreview"], "Replacement for task one");
    let old = &superseded["superseded"];
    assert_eq!(old["taskId"], t1.as_str(), "{superseded:#}");
    assert_eq!(old["state"], "cancelled", "{superseded:#}");
    assert_eq!(old["phase"], "finished", "{superseded:#}");
    assert_eq!(old["cancelOutcome"], "cancelled_before_delivery");
    assert_eq!(old["supersededBy"], r1.as_str(), "{superseded:#}");
    assert!(old.get("position").is_none(), "{superseded:#}");

    // The same supersede again: the same replacement, nothing new queued.
    let again = supersede(d, &t1, body).assert_ok();
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(again["task"]["taskId"], r1.as_str(), "{again:#}");
    assert_eq!(again["superseded"]["taskId"], t1.as_str(), "{again:#}");
    // Its key belongs to the replacement: using it to supersede another task is refused.
    supersede(
        d,
        &t2,
        json!({ "revision": 1, "text": "Anything", "idempotencyKey": "sup-1" }),
    )
    .assert_error(400, "invalid_request", None);

    let q = queue(d, &id);
    assert_eq!(pending_ids(&q), [r1.clone(), t2.clone()], "{q:#}");
    assert_eq!(q["pendingTotal"], 2, "{q:#}");
    assert_eq!(q["recent"][0]["taskId"], t1.as_str(), "{q:#}");
    assert_eq!(q["recent"][0]["supersededBy"], r1.as_str(), "{q:#}");
    assert_eq!(q["pending"][1]["waitingReason"], "human_control", "{q:#}");

    // A finished (superseded) task can be neither edited nor superseded, whatever the revision.
    let current = task(d, &t1)["revision"].as_u64().unwrap();
    let error = edit(d, &t1, json!({ "revision": current, "text": "Too late" })).assert_error(
        409,
        "not_waiting",
        None,
    );
    assert!(
        error["message"].as_str().unwrap().contains("cancelled"),
        "{error:#}"
    );
    supersede(
        d,
        &t1,
        json!({ "revision": current, "text": "Too late", "idempotencyKey": "sup-2" }),
    )
    .assert_error(409, "not_waiting", None);

    // 32 in-place edits of t2 (keyed or not), then the limit.
    let mut revision = 1;
    for n in 1..=32 {
        let mut body = json!({ "revision": revision, "text": format!("Task two, edit {n}") });
        if n % 2 == 0 {
            body["idempotencyKey"] = json!(format!("t2-edit-{n}"));
        }
        let edited = edit(d, &t2, body).assert_ok();
        assert_eq!(edited["replayed"], false, "edit {n}: {edited:#}");
        assert_eq!(edited["task"]["taskId"], t2.as_str());
        assert_eq!(edited["task"]["position"], 1, "edit {n}: {edited:#}");
        assert_eq!(
            edited["task"]["revision"],
            revision + 1,
            "edit {n}: {edited:#}"
        );
        revision = edited["task"]["revision"].as_u64().unwrap();
    }
    let error = edit(
        d,
        &t2,
        json!({ "revision": revision, "text": "Task two, edit 33" }),
    )
    .assert_error(409, "edit_limit", None);
    assert!(
        error["message"].as_str().unwrap().contains("supersede"),
        "{error:#}"
    );
    // A replayed key still answers after the limit, and changes nothing.
    let replay = edit(
        d,
        &t2,
        json!({ "revision": 1, "text": "Task two, edit 2", "idempotencyKey": "t2-edit-2" }),
    )
    .assert_ok();
    assert_eq!(replay["replayed"], true, "{replay:#}");
    assert_eq!(replay["task"]["revision"], revision, "{replay:#}");
    assert_eq!(replay["task"]["promptPreview"], "Task two, edit 32");

    // Nothing reached the model while the human held the lease.
    std::thread::sleep(QUIET);
    assert!(prompts(&fx).is_empty(), "{:?}", prompts(&fx));

    // Release: the replacement, then t2 with its last edit, in queue order.
    let released = set_lease(d, &id, json!({ "action": "release", "by": "alice" })).assert_ok();
    assert_eq!(released["lease"]["holder"], "managed", "{released:#}");
    assert_eq!(released["lease"]["generation"], 2, "{released:#}");
    assert_eq!(released["dropped"], json!([]), "{released:#}");
    let done_r1 = wait_finished(d, &r1);
    let done_t2 = wait_finished(d, &t2);
    for (view, reply) in [
        (&done_r1, "Reply to the replacement."),
        (&done_t2, "Reply to task two."),
    ] {
        assert_eq!(view["state"], "completed", "{view:#}");
        assert_eq!(view["acceptedAs"], "turn", "{view:#}");
        assert_eq!(view["leaseGenerationAtDelivery"], 2, "{view:#}");
        assert_eq!(view["resultExcerpt"], reply, "{view:#}");
        assert_eq!(result_text(d, id_of(view).as_str()), reply);
    }
    assert!(
        done_r1["finishedAt"].as_u64() <= done_t2["deliveredAt"].as_u64(),
        "one at a time, in order: {done_r1:#} {done_t2:#}"
    );
    let seen = prompts(&fx);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].contains("Replacement for task one"), "{seen:?}");
    assert!(seen[1].contains("Task two, edit 32"), "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|p| p.contains("Task one") || p.contains("original")),
        "{seen:?}"
    );
    assert_eq!(fx.mock.defaulted(), 0);

    // A completed task is not waiting either.
    let error = edit(
        d,
        &r1,
        json!({ "revision": done_r1["revision"], "text": "After the fact" }),
    )
    .assert_error(409, "not_waiting", None);
    assert!(
        error["message"].as_str().unwrap().contains("completed"),
        "{error:#}"
    );
    let q = queue(d, &id);
    assert_eq!(q["pendingTotal"], 0, "{q:#}");
    assert!(q["running"].as_array().unwrap().is_empty(), "{q:#}");
    let recent: Vec<String> = q["recent"].as_array().unwrap().iter().map(id_of).collect();
    assert_eq!(recent, [t2, r1, t1], "newest first: {q:#}");
}

#[test]
fn idempotency_keys_and_the_lease_survive_a_daemon_restart() {
    let mut fx = CodexFixture::start();
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock
        .push(Step::text("Reply to the start prompt.").when_user_contains("Start prompt, once"));
    fx.mock
        .push(Step::text("Reply to the kept task.").when_user_contains("Kept across the restart"));

    // A session started with a key and a prompt: the prompt is a task too.
    let create = json!({
        "runtime": "codex",
        "cwd": fx.work,
        "approvalPolicy": "never",
        "prompt": "Start prompt, once",
        "idempotencyKey": "start-key",
    });
    let first = fx.daemon.post("/api/sessions", &create);
    assert_eq!(first.status, 201, "{}", first.body);
    let first = first.json();
    let id = first["session"]["id"].as_str().unwrap().to_string();
    assert_eq!(first["inject"]["outcome"], "started", "{first:#}");
    let start_task = first["taskId"].as_str().expect("taskId").to_string();
    let done = wait_finished(&fx.daemon, &start_task);
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(
        done["resultExcerpt"], "Reply to the start prompt.",
        "{done:#}"
    );

    // Under a human lease, a keyed task waits.
    let lease = set_lease(&fx.daemon, &id, json!({ "action": "takeover" })).assert_ok();
    assert_eq!(lease["lease"]["generation"], 1, "{lease:#}");
    let sent = queue_task(&fx.daemon, &id, "Kept across the restart", Some("K"));
    let kept = id_of(&sent);
    assert_eq!(sent["waitingReason"], "human_control", "{sent:#}");

    fx.daemon.restart();
    let d = &fx.daemon;
    eventually("the session restored", || {
        (fx.view(&id)["state"] == "live").then_some(())
    });

    // The same send: the same task, still waiting for the human.
    let again = post_task(
        d,
        &id,
        json!({ "text": "Kept across the restart", "idempotencyKey": "K" }),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    let again = again.json();
    assert_eq!(again["replayed"], true, "{again:#}");
    let view = &again["task"];
    assert_eq!(view["taskId"], kept.as_str(), "{again:#}");
    assert_eq!(view["state"], "waiting", "{again:#}");
    assert_eq!(view["phase"], "queued", "{again:#}");
    assert_eq!(view["revision"], 1, "{again:#}");
    assert_eq!(view["waitingReason"], "human_control", "{again:#}");
    // A retry carrying another text is still the first task (the key decides).
    let other = post_task(
        d,
        &id,
        json!({ "text": "Something else", "idempotencyKey": "K" }),
    );
    assert_eq!(other.status, 200, "{}", other.body);
    assert_eq!(
        other.json()["task"]["promptPreview"],
        "Kept across the restart"
    );
    let lease = d.get(&format!("/api/sessions/{id}/lease")).assert_ok();
    assert_eq!(lease["lease"]["holder"], "human", "{lease:#}");
    assert_eq!(lease["lease"]["generation"], 1, "{lease:#}");
    assert_eq!(lease["lease"]["reason"], "takeover", "{lease:#}");
    // The session view says it too.
    let view = fx.view(&id);
    assert_eq!(view["lease"]["holder"], "human", "{view:#}");
    assert_eq!(view["waitingTasks"], 1, "{view:#}");

    // The retried create: the same session and the same start task, nothing sent again.
    let retry = d.post("/api/sessions", &create);
    assert_eq!(retry.status, 201, "{}", retry.body);
    let retry = retry.json();
    assert_eq!(retry["session"]["id"], id.as_str(), "{retry:#}");
    assert_eq!(retry["inject"]["duplicate"], true, "{retry:#}");
    assert_eq!(
        retry["inject"]["turnId"], first["inject"]["turnId"],
        "{retry:#}"
    );
    assert_eq!(retry["taskId"], start_task.as_str(), "{retry:#}");
    assert_eq!(task(d, &start_task)["state"], "completed");

    std::thread::sleep(QUIET);
    assert_eq!(
        prompts(&fx).len(),
        1,
        "only the start prompt: {:?}",
        prompts(&fx)
    );

    // Released after the restart: delivered, completed, once.
    let released = set_lease(d, &id, json!({ "action": "release" })).assert_ok();
    assert_eq!(released["lease"]["generation"], 2, "{released:#}");
    let done = wait_finished(d, &kept);
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["leaseGenerationAtDelivery"], 2, "{done:#}");
    assert_eq!(result_text(d, &kept), "Reply to the kept task.");
    let again = post_task(
        d,
        &id,
        json!({ "text": "Kept across the restart", "idempotencyKey": "K" }),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["task"]["state"], "completed");
    std::thread::sleep(QUIET);
    let seen = prompts(&fx);
    assert_eq!(
        seen.iter()
            .filter(|p| p.contains("Kept across the restart"))
            .count(),
        1,
        "{seen:?}"
    );
    assert_eq!(
        seen.iter()
            .filter(|p| p.contains("Start prompt, once"))
            .count(),
        1,
        "{seen:?}"
    );
    assert_eq!(fx.mock.defaulted(), 0);
}

#[test]
fn a_codex_task_running_when_the_daemon_stops_ends_unknown() {
    let mut fx = CodexFixture::start();
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock
        .push(Step::hang().when_user_contains("Hang until the restart"));
    fx.mock
        .push(Step::text("Reply after the restart.").when_user_contains("After the restart"));
    let id = fx.create(session_opts());
    let hung = id_of(&queue_task(&fx.daemon, &id, "Hang until the restart", None));
    fx.daemon.wait_for("the task accepted", TURN_TIMEOUT, |d| {
        (task(d, &hung)["phase"] == "accepted").then_some(())
    });
    fx.mock.wait_for_requests(1, TURN_TIMEOUT);
    let running = task(&fx.daemon, &hung);
    assert_eq!(running["state"], "running", "{running:#}");

    fx.daemon.restart();
    let d = &fx.daemon;
    let view = wait_finished(d, &hung);
    assert_eq!(view["state"], "unknown", "{view:#}");
    assert_eq!(view["phase"], "finished", "{view:#}");
    assert!(
        view["error"].as_str().unwrap_or("").contains("restarted"),
        "{view:#}"
    );
    assert!(view.get("cancelOutcome").is_none(), "{view:#}");
    let chunk = d.get(&format!("/api/tasks/{hung}/result")).assert_ok();
    assert_eq!(chunk["available"], false, "{chunk:#}");
    assert_eq!(chunk["eof"], true, "{chunk:#}");

    // Cancelling it afterwards changes nothing; its outcome is not known.
    let cancel = d
        .post(&format!("/api/tasks/{hung}/cancel"), &json!({}))
        .assert_ok();
    assert_eq!(cancel["replayed"], true, "{cancel:#}");
    assert_eq!(cancel["outcome"], "outcome_unknown", "{cancel:#}");
    assert_eq!(cancel["task"]["state"], "unknown", "{cancel:#}");
    assert_eq!(task(d, &hung)["revision"], view["revision"]);

    // The session takes queued work again.
    eventually("the session restored", || {
        (fx.view(&id)["state"] == "live").then_some(())
    });
    let next = id_of(&queue_task(d, &id, "After the restart", None));
    let done = wait_finished(d, &next);
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(
        done["resultExcerpt"], "Reply after the restart.",
        "{done:#}"
    );
    let q = queue(d, &id);
    assert_eq!(q["recent"][1]["taskId"], hung.as_str(), "{q:#}");
    assert_eq!(q["recent"][1]["state"], "unknown", "{q:#}");
}

#[test]
fn the_cli_takes_over_drops_the_queue_and_round_trips_a_task() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock
        .push(Step::text("Reply for the round trip.").when_user_contains("Round trip prompt"));
    let id = fx.create(session_opts());

    let out = d.cli_ok(&["takeover", &id]);
    assert_eq!(out.trim(), format!("human now holds {id} (generation 1)"));
    let out = d.cli_ok(&["takeover", &id]);
    assert_eq!(
        out.trim(),
        format!("human now holds {id} (generation 1)"),
        "a second takeover changes nothing"
    );

    let out = d.cli_ok(&["task", "send", &id, "Dropped task one"]);
    let (one, state) = out.trim().split_once(' ').unwrap();
    assert!(one.starts_with("task_"), "{out}");
    assert_eq!(state, "waiting", "{out}");
    let out = d.cli_ok(&[
        "task",
        "send",
        &id,
        "Dropped task two",
        "--idempotency-key",
        "k2",
    ]);
    let two = out.split_whitespace().next().unwrap().to_string();
    let out = d.cli_ok(&[
        "task",
        "send",
        &id,
        "Dropped task two",
        "--idempotency-key",
        "k2",
    ]);
    assert_eq!(out.trim(), format!("{two} waiting (already sent)"));
    assert_eq!(task(d, one)["source"], "cli");

    // An edit from the CLI, compare-and-swap on the revision.
    let out = d.cli_ok(&[
        "task",
        "edit",
        one,
        "Dropped task one, edited",
        "--revision",
        "1",
    ]);
    let edited: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(edited["task"]["revision"], 2, "{edited:#}");
    let refused = d.cli(&["task", "edit", one, "Stale", "--revision", "1"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("revision"),
        "{refused:?}"
    );

    let out = d.cli_ok(&["queue", &id]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "lease: human (generation 1)", "{out}");
    assert_eq!(lines.len(), 3, "{out}");
    for (line, (task_id, prompt)) in lines[1..].iter().zip([
        (one, "Dropped task one, edited"),
        (two.as_str(), "Dropped task two"),
    ]) {
        assert!(line.starts_with("waiting "), "{out}");
        assert!(line.contains(task_id), "{out}");
        assert!(line.contains("human_control"), "{out}");
        assert!(line.ends_with(prompt), "{out}");
    }
    let json_out: Value = serde_json::from_str(&d.cli_ok(&["queue", &id, "--json"])).unwrap();
    assert_eq!(json_out["pendingTotal"], 2, "{json_out:#}");
    assert_eq!(json_out["lease"]["holder"], "human", "{json_out:#}");
    assert_eq!(json_out["lease"]["by"], "cli", "{json_out:#}");

    // Release dropping the queue: both cancelled, nothing reaches the model.
    let out = d.cli_ok(&["release", &id, "--drop-queued"]);
    assert_eq!(
        out.trim(),
        format!("{id} is managed (generation 2); 2 waiting task(s) dropped")
    );
    for dropped in [one, two.as_str()] {
        let view = task(d, dropped);
        assert_eq!(view["state"], "cancelled", "{view:#}");
        assert_eq!(view["phase"], "finished", "{view:#}");
        assert_eq!(
            view["cancelOutcome"], "cancelled_before_delivery",
            "{view:#}"
        );
        assert!(
            view["error"].as_str().unwrap().contains("dropped"),
            "{view:#}"
        );
    }
    let no_result = d.cli(&["task", "result", one]);
    assert!(!no_result.status.success());
    assert!(
        String::from_utf8_lossy(&no_result.stderr).contains("has no result"),
        "{no_result:?}"
    );
    std::thread::sleep(QUIET);
    assert!(prompts(&fx).is_empty(), "{:?}", prompts(&fx));
    // Releasing a managed session changes nothing.
    let out = d.cli_ok(&["release", &id]);
    assert_eq!(
        out.trim(),
        format!("{id} is managed (generation 2); 0 waiting task(s) dropped")
    );

    // A prompt round trip through the CLI.
    let out = d.cli_ok(&["task", "send", &id, "Round trip prompt"]);
    let trip = out.split_whitespace().next().unwrap().to_string();
    let done = wait_finished(d, &trip);
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(
        d.cli_ok(&["task", "result", &trip]),
        "Reply for the round trip.\n"
    );
    // Every read command's --json is the route's answer, unchanged.
    let status: Value =
        serde_json::from_str(&d.cli_ok(&["task", "status", &trip, "--json"])).unwrap();
    assert_eq!(status["task"]["taskId"], trip.as_str(), "{status:#}");
    assert_eq!(status["task"]["state"], "completed", "{status:#}");
    assert_eq!(status, d.get(&format!("/api/tasks/{trip}")).assert_ok());
    let readable = d.cli_ok(&["task", "status", &trip]);
    assert!(
        readable.contains(&format!("task:      {trip}"))
            && readable.contains("state:     completed"),
        "{readable}"
    );
    let result: Value =
        serde_json::from_str(&d.cli_ok(&["task", "result", &trip, "--json"])).unwrap();
    assert_eq!(
        result,
        d.get(&format!("/api/tasks/{trip}/result")).assert_ok()
    );
    let queue: Value = serde_json::from_str(&d.cli_ok(&["queue", &id, "--json"])).unwrap();
    assert_eq!(
        queue,
        d.get(&format!("/api/sessions/{id}/queue")).assert_ok()
    );
    let sessions: Value = serde_json::from_str(&d.cli_ok(&["sessions", "--json"])).unwrap();
    assert_eq!(sessions, d.get("/api/sessions").assert_ok());
    let out = d.cli_ok(&["task", "cancel", &trip]);
    assert_eq!(out.trim(), "completed finished_before_abort");
    let out = d.cli_ok(&["queue", &id]);
    assert!(out.starts_with("lease: managed (generation 2)\n"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("recent ") && l.contains(&trip) && l.contains("completed")),
        "{out}"
    );
    let seen = prompts(&fx);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("Round trip prompt"), "{seen:?}");
}

#[test]
fn a_direct_message_is_tracked_as_an_accepted_task() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock
        .push(Step::text("Direct reply.").when_user_contains("Direct prompt"));
    fx.mock
        .push(Step::text("Keyed direct reply.").when_user_contains("Keyed direct prompt"));
    let id = fx.create(session_opts());

    let sent = fx.send(&id, "Direct prompt");
    assert_eq!(sent["outcome"], "started", "{sent:#}");
    let direct = sent["taskId"].as_str().expect("taskId").to_string();
    // Never waiting: accepted at once, or already finished if the turn was that fast.
    let view = task(d, &direct);
    assert!(
        view["phase"] == "accepted" || view["phase"] == "finished",
        "{view:#}"
    );
    assert_eq!(view["acceptedAs"], "turn", "{view:#}");
    assert_eq!(view["turnId"], sent["turnId"], "{view:#}");
    assert_eq!(view["source"], "api", "{view:#}");
    assert!(view.get("position").is_none(), "{view:#}");
    let done = wait_finished(d, &direct);
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["resultExcerpt"], "Direct reply.", "{done:#}");
    assert_eq!(result_text(d, &direct), "Direct reply.");
    let q = queue(d, &id);
    assert_eq!(q["recent"][0]["taskId"], direct.as_str(), "{q:#}");
    assert_eq!(q["pendingTotal"], 0, "{q:#}");

    // With a key, a retried message is the same task and is not sent again.
    let body = json!({ "text": "Keyed direct prompt", "idempotencyKey": "m-1" });
    let first = d
        .post(&format!("/api/sessions/{id}/messages"), &body)
        .assert_ok();
    let keyed = first["taskId"].as_str().unwrap().to_string();
    assert_ne!(keyed, direct);
    let again = d
        .post(&format!("/api/sessions/{id}/messages"), &body)
        .assert_ok();
    assert_eq!(again["taskId"], keyed.as_str(), "{again:#}");
    assert_eq!(again["duplicate"], true, "{again:#}");
    let done = wait_finished(d, &keyed);
    assert_eq!(done["resultExcerpt"], "Keyed direct reply.", "{done:#}");
    // Nothing more is sent: the dispatcher had a whole period to send a duplicate.
    std::thread::sleep(QUIET);
    assert_eq!(prompts(&fx).len(), 2, "{:?}", prompts(&fx));
    let q = queue(d, &id);
    let recent: Vec<String> = q["recent"].as_array().unwrap().iter().map(id_of).collect();
    assert_eq!(recent, [keyed, direct], "{q:#}");

    // A key a queued task already holds is that task's: a direct message with it is refused,
    // nothing is sent, and the key still finds the queued task.
    set_lease(d, &id, json!({ "action": "takeover" })).assert_ok();
    let queued = id_of(&queue_task(
        d,
        &id,
        "Queued with a shared key",
        Some("shared"),
    ));
    let refused = d.post(
        &format!("/api/sessions/{id}/messages"),
        &json!({ "text": "Direct with a shared key", "idempotencyKey": "shared" }),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "idempotency_key_in_use", "{error}");
    assert_eq!(error["field"], "idempotencyKey", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(&queued),
        "{error}"
    );
    let waiting = task(d, &queued);
    assert_eq!(waiting["state"], "waiting", "{waiting:#}");
    let again = post_task(
        d,
        &id,
        json!({ "text": "Queued with a shared key", "idempotencyKey": "shared" }),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["task"]["taskId"], queued.as_str());
    set_lease(d, &id, json!({ "action": "release", "dropQueued": true })).assert_ok();
    assert_eq!(task(d, &queued)["state"], "cancelled");
    // Nothing more is sent: the dispatcher had a whole period to send the dropped task.
    std::thread::sleep(QUIET);
    let seen = prompts(&fx);
    assert_eq!(seen.len(), 2, "nothing more was sent: {seen:?}");
}

#[test]
fn bad_task_requests_are_refused_and_change_nothing() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock
        .push(Step::text("Grüße aus dem Mock.").when_user_contains("Say hello in German"));
    let id = fx.create(session_opts());
    let done_id = id_of(&queue_task(d, &id, "Say hello in German", None));
    let done = wait_finished(d, &done_id);
    assert_eq!(done["state"], "completed", "{done:#}");
    let reply = "Grüße aus dem Mock.";
    assert_eq!(done["resultBytes"], reply.len(), "{done:#}");

    // The turn's trailing events are stored first: its end's notification and the tracker's
    // `done` for the hosted session, the last ones a finished turn writes.
    d.wait_for(
        "the turn's notification and the tracker's done",
        TURN_TIMEOUT,
        |d| {
            let events = d.events_after(0);
            let ended = events.iter().position(|e| e["type"] == "turn.completed")?;
            let after = &events[ended..];
            (after
                .iter()
                .any(|e| e["type"] == "notification" && e["data"]["kind"] == "turn-ended")
                && after.iter().any(|e| {
                    e["type"] == "agent.updated"
                        && e["data"]["source"] == "hosted"
                        && e["data"]["status"] == "done"
                }))
            .then_some(())
        },
    );
    let head = d.head();
    let fingerprint = d.stored_fingerprint();
    let tasks = format!("/api/sessions/{id}/tasks");

    // Sends.
    for text in ["", "   \n\t"] {
        post_task(d, &id, json!({ "text": text })).assert_error(400, "invalid_request", None);
    }
    let huge = "x".repeat(64 * 1024 + 1);
    post_task(d, &id, json!({ "text": huge })).assert_error(413, "payload_too_large", None);
    for key in [String::new(), "k".repeat(257)] {
        let error = post_task(d, &id, json!({ "text": "hi", "idempotencyKey": key })).assert_error(
            400,
            "invalid_request",
            None,
        );
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("idempotencyKey"),
            "{error:#}"
        );
    }
    post_task(d, &id, json!({ "text": "hi", "source": "mcp" })).assert_error(
        400,
        "invalid_field",
        Some("source"),
    );
    post_task(d, &id, json!({ "text": "hi", "bogus": 1 })).assert_error(
        400,
        "invalid_field",
        Some("bogus"),
    );
    d.post(&tasks, &json!({}))
        .assert_error(400, "missing_field", Some("text"));
    post_task(d, "cs_nope", json!({ "text": "hi" })).assert_error(404, "session_not_found", None);

    // Unknown sessions and tasks.
    d.get("/api/sessions/cs_nope/queue")
        .assert_error(404, "session_not_found", None);
    d.get("/api/sessions/cs_nope/lease")
        .assert_error(404, "session_not_found", None);
    set_lease(d, "cs_nope", json!({ "action": "takeover" })).assert_error(
        404,
        "session_not_found",
        None,
    );
    d.get("/api/tasks/task_nope")
        .assert_error(404, "task_not_found", None);
    d.get("/api/tasks/task_nope/result")
        .assert_error(404, "task_not_found", None);
    d.post("/api/tasks/task_nope/cancel", &json!({}))
        .assert_error(404, "task_not_found", None);
    edit(d, "task_nope", json!({ "revision": 1, "text": "x" })).assert_error(
        404,
        "task_not_found",
        None,
    );
    supersede(d, "task_nope", json!({ "revision": 1, "text": "x" })).assert_error(
        404,
        "task_not_found",
        None,
    );

    // Edits: the body is checked before the task.
    edit(d, &done_id, json!({ "text": "x" })).assert_error(400, "missing_field", Some("revision"));
    edit(d, &done_id, json!({ "revision": "one", "text": "x" })).assert_error(
        400,
        "invalid_field",
        Some("revision"),
    );
    edit(d, &done_id, json!({ "revision": 1, "text": " " })).assert_error(
        400,
        "invalid_request",
        None,
    );

    // The lease.
    let error = set_lease(d, &id, json!({ "action": "steal" })).assert_error(
        400,
        "invalid_field",
        Some("action"),
    );
    assert!(
        error["message"].as_str().unwrap().contains("steal"),
        "{error:#}"
    );
    set_lease(d, &id, json!({})).assert_error(400, "missing_field", Some("action"));
    set_lease(d, &id, json!({ "action": "takeover", "dropQueued": true })).assert_error(
        400,
        "invalid_field",
        Some("dropQueued"),
    );
    set_lease(
        d,
        &id,
        json!({ "action": "takeover", "by": "b".repeat(257) }),
    )
    .assert_error(400, "invalid_field", Some("by"));

    // Results.
    let result = format!("/api/tasks/{done_id}/result");
    let past = reply.len() + 1;
    let error =
        d.get(&format!("{result}?offset={past}"))
            .assert_error(400, "invalid_request", None);
    assert!(
        error["message"].as_str().unwrap().contains("offset"),
        "{error:#}"
    );
    for max in [0, 16 * 1024 + 1] {
        let error =
            d.get(&format!("{result}?maxBytes={max}"))
                .assert_error(400, "invalid_request", None);
        assert!(
            error["message"].as_str().unwrap().contains("maxBytes"),
            "{error:#}"
        );
    }
    d.get(&format!("{result}?offset=abc"))
        .assert_error(400, "invalid_field", Some("offset"));
    d.get(&format!("{result}?offset=-1"))
        .assert_error(400, "invalid_field", Some("offset"));
    d.get(&format!("{result}?maxBytes=1.5"))
        .assert_error(400, "invalid_field", Some("maxBytes"));

    // Nothing above was stored.
    assert_eq!(d.head(), head);
    assert_eq!(d.stored_fingerprint(), fingerprint);

    // Valid reads: the end is an empty last chunk, and an offset inside `ü` moves to its start.
    let end = d
        .get(&format!("{result}?offset={}", reply.len()))
        .assert_ok();
    assert_eq!(end["text"], "", "{end:#}");
    assert_eq!(end["eof"], true, "{end:#}");
    let inside = reply.find('ü').unwrap() + 1;
    let chunk = d
        .get(&format!("{result}?offset={inside}&maxBytes=4"))
        .assert_ok();
    assert_eq!(chunk["offset"], inside - 1, "{chunk:#}");
    assert_eq!(
        chunk["text"], "üß",
        "cut on a character boundary: {chunk:#}"
    );
    assert_eq!(chunk["nextOffset"], inside - 1 + "üß".len(), "{chunk:#}");
    assert_eq!(chunk["eof"], false, "{chunk:#}");
    let one = d
        .get(&format!("{result}?offset={inside}&maxBytes=1"))
        .assert_ok();
    assert_eq!(
        one["text"], "ü",
        "a chunk smaller than a character holds that character"
    );

    // A closed session takes no more tasks.
    let closed = crate::suite::codex::host::api(d, "DELETE", &format!("/api/sessions/{id}"), None);
    closed.assert_ok();
    post_task(d, &id, json!({ "text": "hi" })).assert_error(409, "session_closed", None);
    assert_eq!(fx.mock.main_requests().len(), 1);
}

#[test]
fn a_cancel_asked_under_an_older_lease_generation_withholds_the_abort() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock.set_default(Step::text("Default reply."));
    fx.mock
        .push(Step::hang().when_user_contains("Hang for the stale cancel"));
    let id = fx.create(session_opts());
    let running = id_of(&queue_task(d, &id, "Hang for the stale cancel", None));
    d.wait_for("the task accepted", TURN_TIMEOUT, |d| {
        (task(d, &running)["phase"] == "accepted").then_some(())
    });
    // The client saw generation 0; control went to a human and came back meanwhile.
    set_lease(d, &id, json!({ "action": "takeover" })).assert_ok();
    let lease = set_lease(d, &id, json!({ "action": "release" })).assert_ok();
    assert_eq!(lease["lease"]["generation"], 2, "{lease:#}");
    let cancelled = d
        .post(
            &format!("/api/tasks/{running}/cancel"),
            &json!({ "leaseGeneration": 0 }),
        )
        .assert_ok();
    assert_eq!(cancelled["outcome"], "abort_withheld", "{cancelled:#}");
    assert_eq!(
        cancelled["task"]["abortWithheld"], "lease_changed",
        "{cancelled:#}"
    );
    assert_eq!(cancelled["task"]["state"], "running", "{cancelled:#}");
    // A repeat reports the same outcome and sends nothing.
    let again = d
        .post(&format!("/api/tasks/{running}/cancel"), &json!({}))
        .assert_ok();
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(again["outcome"], "abort_withheld", "{again:#}");
    std::thread::sleep(QUIET);
    assert_eq!(
        task(d, &running)["state"],
        "running",
        "the turn was not interrupted"
    );
    // The owner interrupts it themselves; the outcome stays withheld.
    d.post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    let done = wait_finished(d, &running);
    assert_eq!(done["state"], "cancelled", "{done:#}");
    assert_eq!(done["cancelOutcome"], "abort_withheld", "{done:#}");
    assert_eq!(done["humanIntervened"], true, "{done:#}");
}

/// A message that steers a running turn is a task that ends with that turn, and the queue moves
/// on; a cancel ends a steering task by interrupting the turn it joined.
#[test]
fn a_message_that_steers_a_turn_finishes_with_it_and_the_queue_moves_on() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    fx.mock.set_default(Step::text("Unexpected prompt."));
    fx.mock.push(
        Step::text(crate::suite::codex::host::words(30))
            .delay(Duration::from_millis(100))
            // Never ends by itself: the steer finds it running however slow the machine.
            .then_hang()
            .when_user_contains("Write a long answer"),
    );
    fx.mock
        .push(Step::text("Short answer.").when_user_contains("keep it short"));
    fx.mock
        .push(Step::text("Queued reply.").when_user_contains("Queued after the steer"));
    fx.mock.push(
        Step::text("Streaming slowly")
            .then_hang()
            .when_user_contains("Another long one"),
    );
    // The steer restarts the model request: it hangs too, so the cancel finds the turn running.
    fx.mock
        .push(Step::hang().when_user_contains("Never mind this one"));
    fx.mock
        .push(Step::text("Last reply.").when_user_contains("The last task"));
    let id = fx.create(session_opts());

    let first = fx.send(&id, "Write a long answer");
    assert_eq!(first["outcome"], "started", "{first}");
    fx.mock.wait_for_requests(1, TURN_TIMEOUT);
    let steer = fx.send(&id, "Actually, keep it short.");
    assert_eq!(steer["outcome"], "steered", "{steer}");
    let steer_task = steer["taskId"].as_str().unwrap().to_string();
    assert_eq!(task(d, &steer_task)["acceptedAs"], "steer");
    let queued = id_of(&queue_task(d, &id, "Queued after the steer", None));

    // The turn both joined ends: so do both tasks, with its answer; then the queue delivers.
    let steered = wait_finished(d, &steer_task);
    assert_eq!(steered["state"], "completed", "{steered:#}");
    assert_eq!(result_text(d, &steer_task), "Short answer.");
    let opener = first["taskId"].as_str().unwrap();
    assert_eq!(task(d, opener)["state"], "completed");
    let next = wait_finished(d, &queued);
    assert_eq!(next["state"], "completed", "{next:#}");
    assert_eq!(result_text(d, &queued), "Queued reply.");

    // Cancelling a steering task interrupts the turn it joined; the queue goes on after it.
    let long = fx.send(&id, "Another long one");
    assert_eq!(long["outcome"], "started", "{long}");
    fx.mock.wait_for_requests(4, TURN_TIMEOUT);
    let steer = fx.send(&id, "Never mind this one.");
    assert_eq!(steer["outcome"], "steered", "{steer}");
    let steer_task = steer["taskId"].as_str().unwrap().to_string();
    let last = id_of(&queue_task(d, &id, "The last task", None));
    let cancel = d
        .post(&format!("/api/tasks/{steer_task}/cancel"), &json!({}))
        .assert_ok();
    // The outcome so far (CancelResult): the turn may have ended interrupted before the
    // interrupt call returned.
    assert!(
        cancel["outcome"] == "abort_sent" || cancel["outcome"] == "aborted",
        "{cancel:#}"
    );
    let cancelled = wait_finished(d, &steer_task);
    assert_eq!(cancelled["state"], "cancelled", "{cancelled:#}");
    assert_eq!(cancelled["cancelOutcome"], "aborted", "{cancelled:#}");
    let last = wait_finished(d, &last);
    assert_eq!(last["state"], "completed", "{last:#}");
    assert_eq!(
        prompts(&fx).last().map(|p| p.trim().to_string()).as_deref(),
        Some("The last task")
    );
}
