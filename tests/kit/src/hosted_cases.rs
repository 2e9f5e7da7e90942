//! The scenarios a session of each runtime cohost drives through the peer's API (OpenCode, Pi)
//! passes alike, on a [`HostedFixture`]: approvals answered (accept runs the tool once, decline
//! never, a second answer refused), an interrupt settling a pending approval (a late answer
//! never runs the tool), a queued task run as a turn of its own, a session driven over MCP
//! through an approval (the plan and what its run must answer), the session's instance in the
//! tracker through an approval, and the web page's New session form. Where the runtimes differ — the input of the model's `bash` call, the decisions an
//! approval offers, the shape of an approval id — the suite says so in its [`Peer`].

use std::path::Path;

use serde_json::{Value, json};

use super::Binaries;
use super::browser::{Browser, UI_TIMEOUT};
use super::hosted::{HostedFixture, TURN_TIMEOUT, items, of_type};
use super::mock_messages::Step;

/// Whether `id` is a random (version 4) UUID as JavaScript's `crypto.randomUUID()` writes it:
/// lowercase hex in groups of 8-4-4-4-12, the third group starting with `4`, the fourth with
/// `8`, `9`, `a` or `b`.
pub fn is_random_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    lens == [8, 4, 4, 4, 12]
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        && groups[2].starts_with('4')
        && groups[3].starts_with(['8', '9', 'a', 'b'])
}

/// How a runtime's sessions look where the shared scenarios meet them.
pub struct Peer {
    /// The input of the model's `bash` call running `command` (and saying what it does).
    pub bash: fn(command: &str, description: &str) -> Value,
    /// The decisions an approval offers.
    pub decisions: &'static [&'static str],
    /// The shape of the runtime's approval ids, in words, for failure messages.
    pub approval_id: &'static str,
    /// Whether an approval id has that shape.
    pub approval_id_ok: fn(&str) -> bool,
    /// An approval id of the runtime's shape that no session ever had.
    pub made_up_approval: &'static str,
}

fn approval_id(requested: &Value) -> String {
    requested["data"]["approvalId"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval id in {requested}"))
        .to_string()
}

/// Under the default policy an approval is asked before the command runs; accepted, it runs
/// once and the approval is resolved by the API; a bad decision, a second answer and an
/// unknown approval are refused; declined, the command never runs and the model is told.
pub fn approvals_run_the_tool_once_accepted_and_never_when_declined<B: Binaries>(
    fx: &HostedFixture<B>,
    peer: &Peer,
) {
    let id = fx.create(json!({}));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(
        view["approvalPolicy"], "on-request",
        "the default policy asks: {view}"
    );

    // Accept: the command runs once.
    fx.mock
        .push(Step::tool_use(
            "bash",
            (peer.bash)("touch approved.txt", "Create approved.txt"),
        ))
        .push(Step::text("Created it.").when_tool_result());
    let turn = fx.start_turn(&id, "Create approved.txt");
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    let data = &requested["data"];
    let approval = approval_id(&requested);
    assert!(
        (peer.approval_id_ok)(&approval),
        "the approval id is not {}: {requested}",
        peer.approval_id
    );
    assert_eq!(data["kind"], "command", "{requested}");
    assert_eq!(data["turnId"], turn.as_str(), "{requested}");
    assert_eq!(data["command"], "touch approved.txt", "{requested}");
    assert_eq!(data["decisions"], json!(peer.decisions));
    assert!(
        !fx.work.join("approved.txt").exists(),
        "nothing runs before the answer"
    );
    fx.decide(&id, &approval, "maybe")
        .assert_error(400, "invalid_field", Some("decision"));
    fx.decide(&id, &approval, "accept").assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    assert!(fx.work.join("approved.txt").exists(), "the command ran");
    let events = fx.events(&id);
    let command = items(&events, &turn, "command");
    assert_eq!(command.len(), 1, "{}", fx.dump(&id));
    assert_eq!(command[0]["status"], "completed");
    assert_eq!(
        data["itemId"], command[0]["id"],
        "the approval names its item"
    );
    let resolved = of_type(&events, "approval.resolved");
    assert_eq!(resolved.len(), 1, "{}", fx.dump(&id));
    assert_eq!(resolved[0]["data"]["decision"], "accept");
    assert_eq!(resolved[0]["data"]["by"], "api");
    // A second answer, and one to an approval that never was.
    fx.decide(&id, &approval, "accept")
        .assert_error(409, "approval_resolved", None);
    fx.decide(&id, peer.made_up_approval, "accept")
        .assert_error(404, "approval_not_found", None);

    // Decline: the command does not run, and the model's next request says it was refused.
    fx.mock
        .push(Step::tool_use(
            "bash",
            (peer.bash)("touch declined.txt", "Create declined.txt"),
        ))
        .push(Step::text("Fine, I did not.").when_tool_result());
    let turn2 = fx.start_turn(&id, "Create declined.txt");
    let requested = fx.wait_event(&id, "the second approval", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn2.as_str()
    });
    let declined = approval_id(&requested);
    fx.decide(&id, &declined, "decline").assert_ok();
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    assert!(
        !fx.work.join("declined.txt").exists(),
        "a declined command must not run"
    );
    let events = fx.events(&id);
    let command = items(&events, &turn2, "command");
    assert_eq!(command.len(), 1, "{}", fx.dump(&id));
    assert_eq!(command[0]["status"], "declined", "{}", fx.dump(&id));
    let last = fx.mock.main_requests().last().cloned().unwrap();
    let results = last.tool_results();
    let refusal = results
        .iter()
        .find(|r| {
            r.to_string()
                .contains("declined this tool call through cohost")
        })
        .unwrap_or_else(|| panic!("the model was not told: {results:?}"));
    assert_eq!(refusal["is_error"], true, "{refusal}");
    assert_eq!(
        items(&events, &turn2, "agentMessage")[0]["text"],
        "Fine, I did not."
    );
    fx.decide(&id, &declined, "accept")
        .assert_error(409, "approval_resolved", None);
}

/// An interrupt while an approval waits: the approval is resolved by the runtime (`cancel`),
/// the turn ends `interrupted`, a late answer is 409, and the tool never runs (a next turn
/// completes and its file is still not there).
pub fn an_interrupt_settles_a_pending_approval_and_a_late_answer_never_runs_the_tool<
    B: Binaries,
>(
    fx: &HostedFixture<B>,
    peer: &Peer,
) {
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    fx.mock
        .push(Step::tool_use(
            "bash",
            (peer.bash)("touch late.txt", "Create late.txt"),
        ))
        .push(Step::text("Ran it.").when_tool_result());
    let turn = fx.start_turn(&id, "Create late.txt");
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    let approval = approval_id(&requested);

    assert_eq!(fx.interrupt(&id), json!({ "interrupted": true }));
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "interrupted", "{}", fx.dump(&id));
    let events = fx.events(&id);
    let resolved = of_type(&events, "approval.resolved");
    assert_eq!(resolved.len(), 1, "{}", fx.dump(&id));
    assert_eq!(resolved[0]["data"]["approvalId"], approval.as_str());
    assert_eq!(resolved[0]["data"]["decision"], "cancel");
    assert_eq!(resolved[0]["data"]["by"], "runtime");

    // The late answer is refused, and nothing runs the tool: a next turn completes and the
    // file is still not there.
    fx.decide(&id, &approval, "accept")
        .assert_error(409, "approval_resolved", None);
    fx.mock.push(Step::text("Nothing else."));
    let turn2 = fx.start_turn(&id, "Anything else?");
    let done = fx.wait_turn(&id, &turn2);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    assert!(
        !fx.work.join("late.txt").exists(),
        "the tool must never run"
    );
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["pendingApprovals"], 0, "{view}");
}

/// A task queued (`POST …/tasks`, answered `task`) while `turn` ran: delivered after that turn,
/// as a turn of its own; the registry finishes it from its turn's end (no event of its own)
/// with the turn's reply, `Queued task done.`, as its result; two turns in all.
pub fn the_queued_task_runs_as_a_turn_of_its_own<B: Binaries>(
    fx: &HostedFixture<B>,
    id: &str,
    task: &Value,
    turn: &str,
) {
    let task_id = task["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task id in {task}"))
        .to_string();
    let accepted = fx.wait_event(id, "the task accepted", |e| {
        e["type"] == "task.accepted" && e["data"]["taskId"] == task_id.as_str()
    });
    let task_turn = accepted["data"]["turnId"].as_str().unwrap().to_string();
    assert_ne!(task_turn, turn);
    assert_eq!(accepted["data"]["acceptedAs"], "turn", "{accepted}");
    let done = fx.wait_turn(id, &task_turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(id));
    let finished = fx.daemon.wait_for("the task finished", TURN_TIMEOUT, |d| {
        let view = d.get(&format!("/api/tasks/{task_id}")).assert_ok()["task"].clone();
        (view["phase"] == "finished").then_some(view)
    });
    assert_eq!(finished["state"], "completed", "{finished}");
    assert!(
        finished.to_string().contains("Queued task done."),
        "the task's result is its turn's reply: {finished}"
    );
    assert_eq!(of_type(&fx.events(id), "turn.started").len(), 2);
}

/// A hosted session as the tracker shows it: cohost's session id, the peer's own session id
/// (`threadId`) and the instance's key (`RUNTIME:THREAD`).
pub struct Tracked {
    pub id: String,
    pub thread: String,
    pub key: String,
}

/// A session created in the work directory is an instance of the runtime's agent in tmux
/// session `work` (source `hosted`, no pane), which follows a turn whose tool asks first:
/// `waiting` while the approval is pending, `done` and unseen once it is accepted and the turn
/// completed; the tracker said `running` first, `waiting` after it, and `done` last.
pub fn the_tracker_follows_a_session_through_an_approval<B: Binaries>(
    fx: &HostedFixture<B>,
    peer: &Peer,
) -> Tracked {
    let id = fx.create(json!({}));
    let view = fx.daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    let thread = view["threadId"].as_str().unwrap().to_string();
    let key = format!("{}:{thread}", fx.runtime);

    fx.mock
        .push(Step::tool_use(
            "bash",
            (peer.bash)("touch tracked.txt", "Create tracked.txt"),
        ))
        .push(Step::text("Tracked and done.").when_tool_result());
    let turn = fx.start_turn(&id, "Create tracked.txt");
    let requested = fx.wait_event(&id, "the approval", |e| e["type"] == "approval.requested");
    fx.wait_tracker_status("work", &key, "waiting");
    let instance = fx.daemon.instance("work", &key).unwrap();
    assert_eq!(instance["agent"], fx.runtime, "{instance}");
    assert_eq!(instance["source"], "hosted", "{instance}");
    assert_eq!(instance["threadId"], thread.as_str(), "{instance}");
    assert!(instance["paneId"].is_null(), "{instance}");
    fx.decide(&id, &approval_id(&requested), "accept")
        .assert_ok();
    let done = fx.wait_turn(&id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{}", fx.dump(&id));
    fx.wait_tracker_status("work", &key, "done");
    assert_eq!(fx.daemon.instance("work", &key).unwrap()["unseen"], true);
    // What the tracker showed, in order: running, the tool, waiting for its answer, then done.
    let reported: Vec<String> = fx
        .daemon
        .events_after(0)
        .iter()
        .filter(|e| e["type"] == "agent.updated" && e["data"]["threadId"] == thread.as_str())
        .map(|e| e["data"]["status"].as_str().unwrap().to_string())
        .collect();
    let first = |s: &str| reported.iter().position(|r| r == s);
    assert_eq!(
        reported.first().map(String::as_str),
        Some("running"),
        "{reported:?}"
    );
    assert!(first("waiting") > first("running"), "{reported:?}");
    assert_eq!(
        reported.last().map(String::as_str),
        Some("done"),
        "{reported:?}"
    );
    Tracked { id, thread, key }
}

/// Queues the mock's answers for [`check_mcp_approval_run`] and returns the plan of the MCP
/// client: start a session in `project` under `untrusted`, with `switch_to` switch it to that
/// model (`set_model`, step 1; the later steps one further), send a prompt as a task, wait for
/// its approval, list and accept it, wait for the task.
pub fn mcp_approval_plan<B: Binaries>(
    fx: &HostedFixture<B>,
    peer: &Peer,
    project: &Path,
    switch_to: Option<&str>,
) -> Value {
    fx.mock
        .push(Step::tool_use(
            "bash",
            (peer.bash)("touch approved.txt", "Create approved.txt"),
        ))
        .push(Step::text("Created it.").when_tool_result());
    let start = json!(
        { "tool": "start_session", "arguments": { "runtime": fx.runtime, "cwd": project,
          "approval_policy": "untrusted" },
          "save": { "session": "/session/id" } });
    let switch = switch_to.map(|model| {
        json!({ "tool": "set_model", "arguments": { "session_id": "$session", "model": model } })
    });
    let rest = json!([
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
    let mut plan = vec![start];
    plan.extend(switch);
    plan.extend(rest.as_array().unwrap().iter().cloned());
    Value::Array(plan)
}

/// What an MCP tool answered, asserting it is no error.
#[track_caller]
pub fn structured(answer: &Value) -> &Value {
    assert_eq!(answer["isError"], false, "{answer:#}");
    &answer["structured"]
}

/// What a run of [`mcp_approval_plan`] must answer: `start_session` offers the runtime, the
/// session starts under the policy (`started`, step 0), the approval is listed pending
/// (`listed`, step 3), the task completes with the reply (`waited`, step 5; with a model
/// switch, steps 4 and 6), and the approved command ran in `project`.
pub fn check_mcp_approval_run<B: Binaries>(
    fx: &HostedFixture<B>,
    project: &Path,
    tools: &[Value],
    [started, listed, waited]: [&Value; 3],
) {
    let runtime = fx.runtime;
    let start_tool = tools.iter().find(|t| t["name"] == "start_session").unwrap();
    assert!(
        start_tool.to_string().contains(&format!("\"{runtime}\"")),
        "start_session's schema lists {runtime}: {start_tool}"
    );
    let started = structured(started);
    assert_eq!(started["session"]["runtime"], runtime, "{started:#}");
    assert_eq!(
        started["session"]["approvalPolicy"], "untrusted",
        "{started:#}"
    );
    let listed = structured(listed);
    assert_eq!(listed["approvals"][0]["pending"], true, "{listed:#}");
    let waited = structured(waited);
    assert_eq!(waited["finished"], true, "{waited:#}");
    assert_eq!(waited["task"]["state"], "completed", "{waited:#}");
    assert_eq!(waited["task"]["resultExcerpt"], "Created it.", "{waited:#}");
    assert!(
        project.join("approved.txt").exists(),
        "the approved command ran"
    );
}

/// The web page's New session form in the real browser: the runtime offered (the daemon lists
/// it on `GET /api/runtimes`), its approval policies, its models suggested (the page read
/// `/api/models?runtime=…`), and the first prompt's turn shown in the transcript; the session
/// runs under the policy chosen.
pub fn the_new_session_form_starts_a_session<B: Binaries>(fx: &HostedFixture<B>) {
    let runtime = fx.runtime;
    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}",
        fx.daemon.port(),
        fx.daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b.click("#showHosted");
    b.click("#newToggle");
    b.wait_for(&format!("{runtime} offered"), UI_TIMEOUT, || {
        b.exists(&format!("#newRuntime option[value='{runtime}']"))
            .then_some(())
    });
    b.exec(
        &format!(
            "const s = document.getElementById('newRuntime'); s.value = '{runtime}'; s.dispatchEvent(new Event('change'));"
        ),
        vec![],
    );
    b.wait_text("#newModeField label", "Approval policy", UI_TIMEOUT);
    b.wait_for(
        &format!("{runtime}'s models suggested"),
        TURN_TIMEOUT,
        || {
            let values = b.exec(
                "return [...document.querySelectorAll('#modelList option')].map((o) => o.value);",
                vec![],
            );
            values
                .as_array()
                .is_some_and(|v| v.iter().any(|m| m == "mock/mock-model-2"))
                .then_some(())
        },
    );
    let modes = b.exec(
        "return [...document.querySelectorAll('#newMode option')].map((o) => o.value);",
        vec![],
    );
    assert_eq!(modes, json!(["on-request", "untrusted", "never"]));
    b.type_into("#newCwd", fx.work.to_str().unwrap());
    b.exec(
        "const s = document.getElementById('newMode'); s.value = 'never'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    fx.mock.push(Step::text("Started from the page."));
    b.type_into("#newPrompt", "Hello from the form");
    b.click("#newStart");
    b.wait_text("#entries", "Started from the page.", TURN_TIMEOUT);
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    let created = &sessions["sessions"][0];
    assert_eq!(created["runtime"], runtime, "{sessions}");
    assert_eq!(created["approvalPolicy"], "never", "{sessions}");
    b.assert_no_problems();
}

#[cfg(test)]
mod tests {
    use super::is_random_uuid;

    #[test]
    fn only_a_version_4_uuid_is_a_random_uuid() {
        // A dialog id Pi wrote (docs: hosting-opencode-pi-observed.md, 2.9).
        assert!(is_random_uuid("18039491-5b6d-4c90-9cd0-419f0fbc012a"));
        for not in [
            "",
            "made-up",
            "per_233b645b5001",
            "18039491-5b6d-1c90-9cd0-419f0fbc012a",
            "18039491-5b6d-4c90-7cd0-419f0fbc012a",
            "18039491-5B6D-4c90-9cd0-419f0fbc012a",
            "18039491-5b6d-4c90-9cd0-419f0fbc012",
            "180394915b6d4c909cd0419f0fbc012a",
        ] {
            assert!(!is_random_uuid(not), "{not}");
        }
    }
}
