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
    wait_screen_where(fx, id, &format!("{needle:?}"), |screen| {
        screen.contains(needle)
    });
}

/// Captures the pane until `pred` holds of its text; fails naming `what` it never showed.
fn wait_screen_where(fx: &ClaudeFixture, id: &str, what: &str, pred: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pred(&fx.screen(id)) {
        if Instant::now() >= deadline {
            fx.fail(&format!("the screen never showed {what}"));
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
    if done["state"] != "completed" {
        let events: Vec<String> = fx
            .events(&id)
            .iter()
            .filter(|e| e["type"] != "usage")
            .map(|e| format!("{} {}", e["type"], e["data"]))
            .collect();
        fx.fail(&format!("{done:#}\nevents:\n{}", events.join("\n")));
    }
    assert_eq!(done["resultExcerpt"], "The next task ran.", "{done:#}");
}

/// Writes over every cell of the pane's terminal, as anything else writing to it would (and as
/// 2.1.197 did to itself after an Escape under load), and waits until the pane shows it: Claude
/// draws only the cells it changes, so the box stays gone until Claude redraws everything.
fn damage_screen(fx: &ClaudeFixture, id: &str) {
    use std::io::Write;
    let pane = fx.pane(id);
    let display = |format: &str| fx.tmux.run(&["display", "-p", "-t", &pane, format]);
    let tty = display("#{pane_tty}").trim().to_string();
    let width: usize = display("#{pane_width}").trim().parse().unwrap();
    let height: usize = display("#{pane_height}").trim().parse().unwrap();
    let row = "x".repeat(width);
    let mut cells = b"\x1b[H".to_vec();
    cells.extend(vec![row.as_str(); height].join("\r\n").into_bytes());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&tty)
        .and_then(|mut tty| tty.write_all(&cells))
        .unwrap_or_else(|e| fx.fail(&format!("cannot write to the pane's terminal {tty}: {e}")));
    wait_screen_where(fx, id, "the cells written over it", |screen| {
        screen.starts_with(&row) && !screen.contains('❯')
    });
}

/// The pane lost Claude's box while a task's turn ran: cancelling the task still ends the turn
/// (cohost asks the TUI to redraw, then sees it idle and clears the prompt Claude handed back),
/// and the next task is typed into the box the redraw brought back. 2.1.197 repaints the box
/// itself when the Escape changes it; 2.1.332 leaves it damaged, so only the redraw ends the
/// turn there (without it the task stays `abort_sent`, as in CI).
#[test]
fn a_task_cancelled_while_the_pane_shows_no_box_ends_and_the_next_one_runs() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::hang().when_user_contains("Cancel me on a damaged pane"));
    fx.mock.push(
        Step::text("Typed after the redraw.").when_user_contains("The task after the damage"),
    );
    let id = fx.create(json!({}));
    let (status, running) = fx.send(&id, "Cancel me on a damaged pane");
    assert_eq!(status, 200, "{running}");
    assert_eq!(running["outcome"], "started", "{running}");
    let running = running["taskId"].as_str().unwrap().to_string();
    fx.mock.wait_for_requests(1, Duration::from_secs(30));
    damage_screen(&fx, &id);
    let next = queue_task(&fx, &id, "The task after the damage");

    fx.daemon
        .post(&format!("/api/tasks/{running}/cancel"), &json!({}))
        .assert_ok();
    let ended = wait_task(&fx, &running, "finished", |t| t["phase"] == "finished");
    assert_eq!(ended["state"], "cancelled", "{ended:#}");
    assert_eq!(ended["cancelOutcome"], "aborted", "{ended:#}");
    let done = wait_task(&fx, &next, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["resultExcerpt"], "Typed after the redraw.", "{done:#}");
    // The prompt Claude handed back was cleared, not sent along with the next one.
    let requests = fx.mock.main_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let last = requests[1].last_user_text();
    assert!(
        last.contains("The task after the damage") && !last.contains("Cancel me"),
        "{last}"
    );
}

/// The pane lost Claude's box while Claude was idle, where nothing makes Claude draw again: a
/// prompt is still typed, into the box cohost's redraw brings back.
#[test]
fn a_prompt_sent_while_the_idle_pane_shows_no_box_is_typed_after_a_redraw() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::text("Typed into a redrawn box.").when_user_contains("After the damage"));
    let id = fx.create(json!({}));
    fx.wait_event(&id, "the session live", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "live"
    });
    wait_screen(&fx, &id, "? for shortcuts");
    damage_screen(&fx, &id);
    let (status, sent) = fx.send(&id, "After the damage");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let task = sent["taskId"].as_str().unwrap().to_string();
    let done = wait_task(&fx, &task, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(
        done["resultExcerpt"], "Typed into a redrawn box.",
        "{done:#}"
    );
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

/// A message sent while a turn runs is queued by Claude: its task ends with the turn the prompt
/// gets later (not the one it waited behind), the queue moves on, and a cancel of such a task
/// interrupts its own turn once that starts — never the turn it waits behind.
#[test]
fn a_prompt_claude_queued_behind_a_turn_finishes_with_its_own_turn() {
    let fx = ClaudeFixture::start();
    let long: Vec<String> = (1..=40).map(|i| format!("word{i}")).collect();
    fx.mock.push(
        Step::text(long.join(" "))
            .delay(Duration::from_millis(100))
            .when_user_contains("Write a long answer"),
    );
    fx.mock
        .push(Step::text("Second answer.").when_user_contains("And then this"));
    fx.mock
        .push(Step::text("Third answer.").when_user_contains("The queued task"));
    let id = fx.create(json!({}));
    let (status, first) = fx.send(&id, "Write a long answer");
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["outcome"], "started", "{first}");
    let first_turn = first["turnId"].as_str().unwrap().to_string();
    fx.mock.wait_for_requests(1, Duration::from_secs(30));
    let (status, second) = fx.send(&id, "And then this");
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["outcome"], "queued", "{second}");
    let second_task = second["taskId"].as_str().unwrap().to_string();
    let third_task = queue_task(&fx, &id, "The queued task");

    let done = wait_task(&fx, &second_task, "finished", |t| t["phase"] == "finished");
    assert_eq!(done["state"], "completed", "{done:#}");
    assert_eq!(done["resultExcerpt"], "Second answer.", "{done:#}");
    assert_ne!(done["turnId"], first_turn.as_str(), "{done:#}");
    assert_eq!(done["acceptedAs"], "queued", "{done:#}");
    let opener = first["taskId"].as_str().unwrap();
    let opener = wait_task(&fx, opener, "finished", |t| t["phase"] == "finished");
    assert_eq!(opener["resultExcerpt"], long.join(" "), "{opener:#}");
    let third = wait_task(&fx, &third_task, "finished", |t| t["phase"] == "finished");
    assert_eq!(third["state"], "completed", "{third:#}");
    assert_eq!(third["resultExcerpt"], "Third answer.", "{third:#}");

    // Cancelled while it waits behind a turn: the turn it waits behind runs to its end.
    fx.mock.push(
        Step::text(long.join(" "))
            .delay(Duration::from_millis(100))
            .when_user_contains("Another long answer"),
    );
    fx.mock
        .push(Step::hang().when_user_contains("Cancel me later"));
    fx.mock
        .push(Step::text("After the cancel.").when_user_contains("The last task"));
    let (status, running) = fx.send(&id, "Another long answer");
    assert_eq!(status, 200, "{running}");
    let running_task = running["taskId"].as_str().unwrap().to_string();
    fx.mock.wait_for_requests(4, Duration::from_secs(30));
    let (status, queued) = fx.send(&id, "Cancel me later");
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["outcome"], "queued", "{queued}");
    let queued_task = queued["taskId"].as_str().unwrap().to_string();
    let last_task = queue_task(&fx, &id, "The last task");
    let cancel = fx
        .daemon
        .post(&format!("/api/tasks/{queued_task}/cancel"), &json!({}))
        .assert_ok();
    assert_eq!(cancel["task"]["state"], "running", "{cancel:#}");
    let ran = wait_task(&fx, &running_task, "finished", |t| t["phase"] == "finished");
    assert_eq!(ran["state"], "completed", "not interrupted: {ran:#}");
    let cancelled = wait_task(&fx, &queued_task, "finished", |t| t["phase"] == "finished");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled:#}");
    assert_eq!(cancelled["cancelOutcome"], "aborted", "{cancelled:#}");
    let last = wait_task(&fx, &last_task, "finished", |t| t["phase"] == "finished");
    assert_eq!(last["state"], "completed", "{last:#}");
    assert_eq!(last["resultExcerpt"], "After the cancel.", "{last:#}");
}
