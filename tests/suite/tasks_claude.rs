//! Tasks and leases on claude sessions: a draft in the box takes control, a running task is
//! cancelled with one Escape, and a task survives a daemon restart with its TUI.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

/// Polls `GET /api/tasks/{task}` until `pred` holds; returns the task view.
#[track_caller]
fn wait_task(fx: &ClaudeFixture, task: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = fx.daemon.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone();
        if pred(&view) {
            return view;
        }
        if Instant::now() >= deadline {
            let session = view["sessionId"].as_str().unwrap_or_default();
            let events: Vec<String> = fx
                .events(session)
                .iter()
                .filter(|e| e["type"] != "usage")
                .map(|e| format!("{} {}", e["type"], e["data"]))
                .collect();
            fx.fail(&format!(
                "task {task} never became {what}: {view:#}\nevents:\n{}",
                events.join("\n")
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn queue_task(fx: &ClaudeFixture, id: &str, text: &str) -> String {
    let resp = fx.daemon.post(
        &format!("/api/sessions/{id}/tasks"),
        &json!({ "text": text }),
    );
    assert_eq!(resp.status, 202, "{}", resp.body);
    resp.json()["task"]["taskId"].as_str().unwrap().to_string()
}

fn wait_screen(fx: &ClaudeFixture, id: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fx.screen(id).contains(needle) {
        if Instant::now() >= deadline {
            fx.fail(&format!("the screen never showed {needle:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_draft_in_claudes_box_takes_control_and_the_task_waits_for_the_release() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        Step::text("Done after the human let go.").when_user_contains("Queued behind a draft"),
    );
    let id = fx.create(json!({}));
    // Claude is up and idle.
    fx.wait_event(&id, "the session live", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "live"
    });
    let pane = fx.pane(&id);
    fx.tmux
        .run(&["send-keys", "-t", &pane, "-l", "a human is typing here"]);
    wait_screen(&fx, &id, "a human is typing here");

    let task = queue_task(&fx, &id, "Queued behind a draft");
    let waiting = wait_task(&fx, &task, "back in the queue for the human", |t| {
        t["waitingReason"] == "human_control"
    });
    assert_eq!(waiting["state"], "waiting", "{waiting:#}");
    assert_eq!(waiting["phase"], "queued", "{waiting:#}");
    let lease = fx
        .daemon
        .get(&format!("/api/sessions/{id}/lease"))
        .assert_ok();
    assert_eq!(lease["lease"]["holder"], "human", "{lease:#}");
    assert_eq!(lease["lease"]["reason"], "human_typing", "{lease:#}");
    let screen = fx.screen(&id);
    assert!(
        screen.contains("a human is typing here"),
        "the draft is untouched:\n{screen}"
    );
    assert!(
        !screen.contains("Queued behind a draft"),
        "nothing typed into it:\n{screen}"
    );
    // Clearing the box is not a release: the task keeps waiting.
    fx.tmux.run(&["send-keys", "-t", &pane, "Escape", "Escape"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(fx.mock.main_requests().is_empty());
    let still = wait_task(&fx, &task, "waiting", |t| t["state"] == "waiting");
    assert_eq!(still["waitingReason"], "human_control");

    // The human releases: the task is delivered and completes.
    let out = fx.daemon.cli_ok(&["release", &id]);
    assert!(out.contains("is managed (generation 2)"), "{out}");
    let done = wait_task(&fx, &task, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["leaseGenerationAtDelivery"], 2, "{done:#}");
    let result = fx
        .daemon
        .get(&format!("/api/tasks/{task}/result"))
        .assert_ok();
    assert_eq!(result["text"], "Done after the human let go.", "{result:#}");
}

#[test]
fn cancelling_a_running_claude_task_interrupts_its_turn() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::hang().when_user_contains("A task that hangs"));
    fx.mock
        .push(Step::text("The next task ran.").when_user_contains("The task after it"));
    let id = fx.create(json!({}));
    let running = queue_task(&fx, &id, "A task that hangs");
    let next = queue_task(&fx, &id, "The task after it");
    wait_task(&fx, &running, "accepted", |t| t["phase"] == "accepted");
    let behind = wait_task(&fx, &next, "waiting", |t| t["state"] == "waiting");
    assert_eq!(
        behind["waitingReason"], "queued_behind_other_task",
        "{behind:#}"
    );
    assert_eq!(behind["position"], 0, "{behind:#}");

    let cancelled = fx
        .daemon
        .post(&format!("/api/tasks/{running}/cancel"), &json!({}))
        .assert_ok();
    // Claude's interrupt watches the screen until the turn stops, so the answer may already
    // say how it ended.
    assert!(
        cancelled["outcome"] == "abort_sent" || cancelled["outcome"] == "aborted",
        "{cancelled:#}"
    );
    let ended = wait_task(&fx, &running, "finished", |t| t["phase"] == "finished");
    assert_eq!(ended["state"], "cancelled", "{ended:#}");
    assert_eq!(ended["cancelOutcome"], "aborted", "{ended:#}");
    // The queue moves on.
    let done = wait_task(&fx, &next, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["resultExcerpt"], "The next task ran.", "{done:#}");
}

#[test]
fn a_claude_task_in_flight_finishes_after_a_daemon_restart() {
    let mut fx = ClaudeFixture::start();
    fx.mock.push(
        Step::text("Finished while cohost was away.")
            .delay(Duration::from_secs(4))
            .when_user_contains("Outlive the daemon"),
    );
    let id = fx.create(json!({}));
    let task = queue_task(&fx, &id, "Outlive the daemon");
    wait_task(&fx, &task, "accepted", |t| t["phase"] == "accepted");
    fx.daemon.restart();
    // The TUI kept running in tmux; the restarted daemon follows its turn to the end.
    let done = wait_task(&fx, &task, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(
        done["resultExcerpt"], "Finished while cohost was away.",
        "{done:#}"
    );
    assert_eq!(fx.mock.main_requests().len(), 1, "delivered once");
}

#[test]
fn typing_into_claudes_box_during_a_task_takes_control_and_withholds_its_cancel() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::hang().when_user_contains("A long claude task"));
    let id = fx.create(json!({}));
    let task = queue_task(&fx, &id, "A long claude task");
    wait_task(&fx, &task, "accepted", |t| t["phase"] == "accepted");
    let pane = fx.pane(&id);
    fx.tmux
        .run(&["send-keys", "-t", &pane, "-l", "wait, let me add something"]);
    wait_screen(&fx, &id, "wait, let me add something");
    let lease = fx.wait_event(&id, "the lease moving to the human", |e| {
        e["type"] == "lease.changed" && e["data"]["holder"] == "human"
    });
    assert_eq!(lease["data"]["reason"], "human_typing", "{lease}");
    let cancelled = fx
        .daemon
        .post(&format!("/api/tasks/{task}/cancel"), &json!({}))
        .assert_ok();
    assert_eq!(cancelled["outcome"], "abort_withheld", "{cancelled:#}");
    assert_eq!(
        cancelled["task"]["abortWithheld"], "human_control",
        "{cancelled:#}"
    );
    assert_eq!(cancelled["task"]["state"], "running", "{cancelled:#}");
    // No Escape reached the pane: the human's text is still there.
    std::thread::sleep(Duration::from_millis(500));
    assert!(fx.screen(&id).contains("wait, let me add something"));
}

#[test]
fn a_prompt_claude_took_but_confirmed_late_is_reported_sent_not_failed() {
    // A slow UserPromptSubmit hook (a loaded machine): it writes its line 12 s after Claude
    // took the prompt, past the 10 s cohost first waits for the confirmation. Every other hook
    // runs as usual.
    let dir = crate::support::temp_dir("cohost-slow-hook-");
    let real = std::path::Path::new(crate::support::BIN).with_file_name("cohost-hook");
    let wrapper = dir.path().join("slow-hook");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ \"$1\" = UserPromptSubmit ] && sleep 12\nexec '{}' \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fx = ClaudeFixture::start_with(&[], &[("COHOST_HOOK_BIN", wrapper.to_str().unwrap())]);
    fx.mock.push(
        Step::text("Answered after a late confirmation.").when_user_contains("Confirm me late"),
    );
    let id = fx.create(json!({}));
    let task = queue_task(&fx, &id, "Confirm me late");
    let done = wait_task(&fx, &task, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["acceptedAs"], "turn", "{done:#}");
    assert_eq!(
        done["resultExcerpt"], "Answered after a late confirmation.",
        "{done:#}"
    );
    assert_eq!(fx.mock.main_requests().len(), 1, "sent once");
}
