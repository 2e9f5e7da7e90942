//! Claude-native sessions, continued: a prompt queued behind a running turn, Escape, a daemon
//! restart under a running TUI, a malformed hooks line, exit and relaunch, fork, bad inputs.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_host::ClaudeFixture;
use crate::support::codex_host::CodexFixture;
use crate::support::mock_messages::{Received, Step};

/// How long the polls of this file wait for something that takes about a second.
const WAIT: Duration = Duration::from_secs(30);

/// Polls `f` every 50 ms until it returns `Some`; fails with every pane's screen after `WAIT`.
#[track_caller]
fn wait_for<T>(fx: &ClaudeFixture, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = f() {
            return value;
        }
        if Instant::now() >= deadline {
            fx.fail(&format!(
                "timed out waiting for {what}\nmock: {}",
                fx.mock.summary()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn session_dir(fx: &ClaudeFixture, id: &str) -> PathBuf {
    fx.daemon.home().join("claude").join(id)
}

/// The `event` of every line of the session's `hooks.jsonl` (what `cohost-hook` recorded).
fn hook_events(fx: &ClaudeFixture, id: &str) -> Vec<String> {
    std::fs::read_to_string(session_dir(fx, id).join("hooks.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| v["event"].as_str().map(str::to_string))
        .collect()
}

/// The lines of the session's `runner.jsonl`.
fn runner_lines(fx: &ClaudeFixture, id: &str) -> Vec<Value> {
    std::fs::read_to_string(session_dir(fx, id).join("runner.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect()
}

fn interrupt(fx: &ClaudeFixture, id: &str) -> (u16, Value) {
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}));
    (resp.status, resp.json())
}

/// Sends and insists on `outcome`; returns the answer.
#[track_caller]
fn send_expecting(fx: &ClaudeFixture, id: &str, text: &str, outcome: &str) -> Value {
    let (status, sent) = fx.send(id, text);
    if status != 200 || sent["outcome"] != outcome {
        fx.fail(&format!(
            "sending {text:?} answered {status}: {sent} (expected {outcome})"
        ));
    }
    sent
}

/// Types `text` into the pane the way a person does (no paste), waits until the TUI shows it,
/// then presses Enter.
pub fn type_in_pane(fx: &ClaudeFixture, pane: &str, text: &str) {
    fx.tmux.run(&["send-keys", "-t", pane, "-l", text]);
    wait_for(fx, &format!("{text:?} on the screen of {pane}"), || {
        fx.tmux
            .run(&["capture-pane", "-p", "-t", pane])
            .contains(text)
            .then_some(())
    });
    // The TUI takes a keystroke burst in pieces; give it a moment before Enter.
    std::thread::sleep(Duration::from_millis(300));
    fx.tmux.run(&["send-keys", "-t", pane, "Enter"]);
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn user_messages(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "userMessage")
        .map(|e| {
            (
                e["data"]["turnId"].as_str().unwrap_or_default().to_string(),
                e["data"]["item"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn dump(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("{} {} {}", e["seq"], e["type"], e["data"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The whole-log invariants: no item stored twice, every turn started once and completed once
/// (in that order), every item between its turn's start and end, and each prompt text stored
/// exactly once.
#[track_caller]
fn assert_consistent(fx: &ClaudeFixture, events: &[Value], prompts: &[&str]) {
    let mut problems = Vec::new();
    let mut items = HashSet::new();
    let mut started: HashMap<String, usize> = HashMap::new();
    let mut completed: HashMap<String, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let kind = e["type"].as_str().unwrap_or_default();
        let turn = e["data"]["turnId"].as_str().unwrap_or_default().to_string();
        match kind {
            "item.started" | "item.completed" => {
                let id = e["data"]["item"]["id"].as_str().unwrap_or_default();
                if !items.insert((kind.to_string(), id.to_string())) {
                    problems.push(format!("{kind} {id} stored twice"));
                }
                if !started.contains_key(&turn) {
                    problems.push(format!("{kind} {id} outside a started turn ({turn:?})"));
                }
                if completed.contains_key(&turn) {
                    problems.push(format!("{kind} {id} after its turn completed"));
                }
            }
            "turn.started" if started.insert(turn.clone(), i).is_some() => {
                problems.push(format!("turn {turn} started twice"));
            }
            "turn.completed" => {
                if completed.insert(turn.clone(), i).is_some() {
                    problems.push(format!("turn {turn} completed twice"));
                }
                if !started.contains_key(&turn) {
                    problems.push(format!("turn {turn} completed but never started"));
                }
            }
            _ => {}
        }
    }
    for turn in started.keys() {
        if !completed.contains_key(turn) {
            problems.push(format!("turn {turn} started but never completed"));
        }
    }
    let users = user_messages(events);
    for prompt in prompts {
        let n = users.iter().filter(|(_, text)| text == prompt).count();
        if n != 1 {
            problems.push(format!("prompt {prompt:?} stored {n} times"));
        }
    }
    if !problems.is_empty() {
        fx.fail(&format!(
            "the session log is inconsistent:\n{}\nevents:\n{}",
            problems.join("\n"),
            dump(events)
        ));
    }
}

/// Every text of every message of a model request, as one string.
fn conversation_text(request: &Received) -> String {
    request.body["messages"].to_string()
}

/// The claude-code tracker instance of the session (in its tmux session `work`).
fn tracker_instance(fx: &ClaudeFixture, id: &str) -> Option<Value> {
    let pane = fx.pane(id);
    fx.daemon.session("work")["agents"]
        .as_array()?
        .iter()
        .find(|a| a["paneId"] == pane.as_str())
        .cloned()
}

// 1. ---------------------------------------------------------------------------------------

#[test]
fn a_prompt_sent_mid_turn_is_queued_and_runs_after_the_turn() {
    let fx = ClaudeFixture::start();
    let long: Vec<String> = (1..=60).map(|i| format!("word{i}")).collect();
    let long = long.join(" ");
    fx.mock.push(
        Step::text(long.clone())
            .delay(Duration::from_millis(100))
            .when_user_contains("Write a long answer"),
    );
    fx.mock
        .push(Step::text("Second answer.").when_user_contains("And then this"));
    let id = fx.create(json!({}));
    let first = send_expecting(&fx, &id, "Write a long answer", "started");
    let first_turn = first["turnId"].as_str().unwrap().to_string();
    // The reply is streaming.
    wait_for(&fx, "the first model request", || {
        (!fx.mock.main_requests().is_empty()).then_some(())
    });
    let queued = send_expecting(&fx, &id, "And then this", "queued");
    assert_eq!(queued["turnId"], first_turn.as_str(), "{queued}");
    // The first turn was still running when the prompt was queued.
    let events = fx.events(&id);
    assert!(
        of_type(&events, "turn.completed").is_empty(),
        "the first turn ended before the queued answer: {}",
        dump(&events)
    );

    let done = fx.wait_turns_completed(&id, 2);
    let events = fx.events(&id);
    assert_eq!(done[0]["data"]["turnId"], first_turn.as_str());
    assert_eq!(done[0]["data"]["status"], "completed", "{}", dump(&events));
    assert_eq!(done[1]["data"]["status"], "completed", "{}", dump(&events));
    let starts = of_type(&events, "turn.started");
    assert_eq!(starts.len(), 2, "{}", dump(&events));
    let second_turn = starts[1]["data"]["turnId"].as_str().unwrap().to_string();
    assert_ne!(second_turn, first_turn);
    assert_eq!(starts[1]["data"]["source"], "api", "{}", dump(&events));
    let users = user_messages(&events);
    assert_eq!(
        users,
        [
            (first_turn.clone(), "Write a long answer".to_string()),
            (second_turn.clone(), "And then this".to_string()),
        ],
        "{}",
        dump(&events)
    );
    let replies: Vec<&Value> = events
        .iter()
        .filter(|e| e["data"]["item"]["type"] == "agentMessage")
        .collect();
    assert_eq!(replies.len(), 2, "{}", dump(&events));
    assert_eq!(replies[0]["data"]["item"]["text"], long.as_str());
    assert_eq!(replies[1]["data"]["turnId"], second_turn.as_str());
    assert_eq!(replies[1]["data"]["item"]["text"], "Second answer.");
    // Nothing lost, nothing sent twice: two model requests, the second asking the queued prompt.
    let main = fx.mock.main_requests();
    assert_eq!(main.len(), 2, "{}", fx.mock.summary());
    assert_eq!(main[1].last_user_text().trim(), "And then this");
    let sent = of_type(&events, "message.sent");
    let outcomes: Vec<&Value> = sent.iter().map(|e| &e["data"]["outcome"]).collect();
    assert_eq!(outcomes, [&json!("started"), &json!("queued")]);
    assert_consistent(&fx, &events, &["Write a long answer", "And then this"]);
}

// 2. ---------------------------------------------------------------------------------------

/// A person types a prompt into Claude's pane and presses Escape the moment its hook has run:
/// Claude's busy spell can be shorter than the 200 ms between two readings of its session
/// file, and before the first token no hook and no transcript line says the turn ended. The turn still ends `interrupted`: the session file's `idle` began after the prompt's
/// `UserPromptSubmit` ran (without that rule the turn stayed running in most runs).
#[test]
fn a_persons_escape_right_after_their_prompt_ends_the_turn() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::hang().when_user_contains("Stop me at once"));
    let id = fx.create(json!({}));
    wait_for(&fx, "the TUI's input box", || {
        fx.screen(&id).contains("? for shortcuts").then_some(())
    });
    let pane = fx.pane(&id);
    fx.tmux
        .run(&["send-keys", "-t", &pane, "-l", "Stop me at once"]);
    wait_for(&fx, "the typed prompt in the box", || {
        fx.screen(&id).contains("Stop me at once").then_some(())
    });
    let prompts = |fx: &ClaudeFixture| {
        hook_events(fx, &id)
            .iter()
            .filter(|e| *e == "UserPromptSubmit")
            .count()
    };
    fx.tmux.run(&["send-keys", "-t", &pane, "Enter"]);
    // The prompt's hook has run (its line is written before the hook exits): Escape now.
    let deadline = Instant::now() + WAIT;
    while prompts(&fx) == 0 {
        if Instant::now() >= deadline {
            fx.fail("the prompt's UserPromptSubmit hook never ran");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    fx.tmux.run(&["send-keys", "-t", &pane, "Escape"]);

    let started = fx.wait_event(&id, "the typed turn", |e| e["type"] == "turn.started");
    assert_eq!(started["data"]["source"], "terminal", "{started}");
    let turn = started["data"]["turnId"].as_str().unwrap().to_string();
    let done = fx.wait_event(&id, "the typed turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    let instance = wait_for(&fx, "the tracker instance to leave running", || {
        tracker_instance(&fx, &id).filter(|a| a["status"] != "running")
    });
    assert_eq!(instance["status"], "interrupted", "{instance}");
}

#[test]
fn escape_interrupts_a_streaming_turn_and_the_session_goes_on() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        Step::text("Working on it, line one.\n")
            .then_hang()
            .when_user_contains("Start a long job"),
    );
    fx.mock
        .push(Step::hang().when_user_contains("Another long job"));
    fx.mock
        .push(Step::text("Fresh answer.").when_user_contains("Something short"));
    let id = fx.create(json!({}));
    assert_eq!(
        interrupt(&fx, &id),
        (200, json!({ "interrupted": false })),
        "nothing runs yet"
    );

    // Mid-stream: partial text is on screen when Escape goes in.
    let sent = send_expecting(&fx, &id, "Start a long job", "started");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    wait_for(&fx, "the partial reply on screen", || {
        fx.screen(&id)
            .contains("Working on it, line one.")
            .then_some(())
    });
    assert_eq!(interrupt(&fx, &id), (200, json!({ "interrupted": true })));
    let done = fx.wait_event(&id, "the interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    fx.mock.wait_for_disconnects(1, WAIT);
    // The tracker no longer shows it running.
    let instance = wait_for(&fx, "the tracker instance to leave running", || {
        tracker_instance(&fx, &id).filter(|a| a["status"] != "running")
    });
    assert_eq!(instance["status"], "interrupted", "{instance}");

    // Before the first token: Claude puts the prompt back in the box; cohost clears it.
    let sent = send_expecting(&fx, &id, "Another long job", "started");
    let turn2 = sent["turnId"].as_str().unwrap().to_string();
    wait_for(&fx, "the second model request", || {
        (fx.mock.main_requests().len() >= 2).then_some(())
    });
    assert_eq!(interrupt(&fx, &id), (200, json!({ "interrupted": true })));
    let done = fx.wait_event(&id, "the second interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn2.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    let screen = fx.screen(&id);
    let analyzed_draft = screen
        .lines()
        .rfind(|l| l.starts_with("❯\u{a0}"))
        .map(|l| l.trim_start_matches("❯\u{a0}").trim().to_string());
    assert_eq!(
        analyzed_draft.as_deref(),
        Some(""),
        "the restored prompt was cleared from the box:\n{screen}"
    );

    // The session takes a new prompt as a new turn.
    let sent = send_expecting(&fx, &id, "Something short", "started");
    let turn3 = sent["turnId"].as_str().unwrap().to_string();
    let done = fx.wait_turns_completed(&id, 3);
    assert_eq!(done[2]["data"]["turnId"], turn3.as_str());
    assert_eq!(done[2]["data"]["status"], "completed");

    // Idle again: an interrupt is a no-op. Once the TUI itself says idle, cohost (which reads
    // its session file when asked to interrupt) presses no Escape.
    wait_for(&fx, "the TUI's session file to say idle", || {
        (fx.env.session_status().as_deref() == Some("idle")).then_some(())
    });
    assert_eq!(interrupt(&fx, &id), (200, json!({ "interrupted": false })));
    let events = fx.events(&id);
    assert_consistent(
        &fx,
        &events,
        &["Start a long job", "Another long job", "Something short"],
    );
}

// 3. ---------------------------------------------------------------------------------------

enum Restart {
    Graceful,
    Kill9,
}

fn a_daemon_restart_picks_the_session_up_again(how: Restart) {
    let mut fx = ClaudeFixture::start();
    fx.mock
        .push(Step::text("First answer.").when_user_contains("Before the restart"));
    fx.mock
        .push(Step::text("Typed answer.").when_user_contains("typed while cohost was down"));
    fx.mock
        .push(Step::hang().when_user_contains("Hang after the restart"));
    fx.mock
        .push(Step::text("After answer.").when_user_contains("After the restart"));
    let id = fx.create(json!({}));
    let pane = fx.pane(&id);
    let thread = fx.view(&id)["threadId"].clone();
    send_expecting(&fx, &id, "Before the restart", "started");
    fx.wait_turns_completed(&id, 1);
    let panes_before = fx.tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]);

    match how {
        Restart::Graceful => fx.daemon.stop(),
        Restart::Kill9 => {
            fx.daemon.kill9();
            Default::default()
        }
    };
    // With cohost down, someone types a prompt into the pane and Claude answers it.
    type_in_pane(&fx, &pane, "typed while cohost was down");
    wait_for(&fx, "the typed turn's Stop hook in hooks.jsonl", || {
        (hook_events(&fx, &id)
            .iter()
            .filter(|e| *e == "Stop")
            .count()
            >= 2)
            .then_some(())
    });
    fx.daemon.start_again();

    let done = fx.wait_turns_completed(&id, 2);
    let events = fx.events(&id);
    assert_eq!(done[1]["data"]["status"], "completed", "{}", dump(&events));
    let starts = of_type(&events, "turn.started");
    assert_eq!(starts.len(), 2, "{}", dump(&events));
    assert_eq!(starts[1]["data"]["source"], "terminal", "{}", dump(&events));
    let typed = events
        .iter()
        .find(|e| e["data"]["item"]["text"] == "Typed answer.")
        .unwrap_or_else(|| fx.fail(&format!("no typed reply:\n{}", dump(&events))));
    assert_eq!(typed["data"]["turnId"], starts[1]["data"]["turnId"]);

    // Same pane, same conversation, no new pane.
    let view = fx.view(&id);
    assert_eq!(view["paneId"], pane.as_str(), "{view}");
    assert_eq!(view["threadId"], thread, "{view}");
    assert_eq!(
        fx.tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]),
        panes_before
    );
    assert_eq!(of_type(&events, "session.pane").len(), 1);

    // And it is driven again: an Escape before the first token (whose only trace is the TUI's
    // session file going busy → idle), then a plain turn.
    let hang = send_expecting(&fx, &id, "Hang after the restart", "started");
    wait_for(&fx, "the hanging model request", || {
        (fx.mock.main_requests().len() >= 3).then_some(())
    });
    assert_eq!(interrupt(&fx, &id), (200, json!({ "interrupted": true })));
    let done = fx.wait_event(&id, "the interrupted turn after the restart", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == hang["turnId"]
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    send_expecting(&fx, &id, "After the restart", "started");
    fx.wait_turns_completed(&id, 4);
    let events = fx.events(&id);
    assert_consistent(
        &fx,
        &events,
        &[
            "Before the restart",
            "typed while cohost was down",
            "Hang after the restart",
            "After the restart",
        ],
    );
    assert_eq!(fx.mock.main_requests().len(), 4, "{}", fx.mock.summary());
    // Usage comes from transcript lines, each under the line's own id: a tail that replays
    // lines after the restart cannot store one twice.
    let usage: Vec<&str> = of_type(&events, "usage")
        .iter()
        .map(|e| {
            e["data"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("usage without an id: {e}"))
        })
        .collect();
    assert!(!usage.is_empty(), "{}", dump(&events));
    let unique: std::collections::HashSet<&&str> = usage.iter().collect();
    assert_eq!(unique.len(), usage.len(), "{usage:?}");
}

#[test]
fn a_graceful_daemon_restart_follows_the_session_again_without_gaps() {
    a_daemon_restart_picks_the_session_up_again(Restart::Graceful);
}

#[test]
fn a_killed_daemon_follows_the_session_again_without_gaps() {
    a_daemon_restart_picks_the_session_up_again(Restart::Kill9);
}

// 4. ---------------------------------------------------------------------------------------

#[test]
fn a_malformed_hooks_line_is_an_error_event_and_the_session_goes_on() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Still fine."));
    let id = fx.create(json!({}));
    let hooks = session_dir(&fx, &id).join("hooks.jsonl");
    let offset = std::fs::metadata(&hooks)
        .unwrap_or_else(|e| fx.fail(&format!("no hooks.jsonl yet: {e}")))
        .len();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&hooks)
        .and_then(|mut f| f.write_all(b"{this is not json\n"))
        .unwrap();
    let error = fx.wait_event(&id, "a parse_error event", |e| {
        e["type"] == "error" && e["data"]["code"] == "parse_error"
    });
    let message = error["data"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("hooks.jsonl") && message.contains(&offset.to_string()),
        "the message names the file and the offset {offset}: {error}"
    );
    let sent = send_expecting(&fx, &id, "Are you still there?", "started");
    let done = fx.wait_turns_completed(&id, 1);
    assert_eq!(done[0]["data"]["turnId"], sent["turnId"]);
    let events = fx.events(&id);
    assert_eq!(
        of_type(&events, "error").len(),
        1,
        "one error, once: {}",
        dump(&events)
    );
    assert_consistent(&fx, &events, &["Are you still there?"]);
}

// 5. ---------------------------------------------------------------------------------------

#[test]
fn an_exited_tui_is_relaunched_with_its_history() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        Step::text("I will remember pineapple.").when_user_contains("The secret word is pineapple"),
    );
    fx.mock
        .push(Step::text("It was pineapple.").when_user_contains("What was the secret word?"));
    let id = fx.create(json!({}));
    let thread = fx.view(&id)["threadId"].clone();
    let pane = fx.pane(&id);
    send_expecting(&fx, &id, "The secret word is pineapple", "started");
    fx.wait_turns_completed(&id, 1);

    // The human quits claude; the pane (the runner) stays.
    type_in_pane(&fx, &pane, "/exit");
    let exited = fx.wait_event(&id, "session.status exited", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "exited"
    });
    assert!(exited["data"]["message"].is_string(), "{exited}");
    // Nothing reads the pane now: a send is refused at once, and nothing is typed.
    let asked = Instant::now();
    let (status, answer) = fx.send(&id, "Is anybody there?");
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (503, Some("not_ready")),
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("TUI has exited") && message.contains("nothing was typed"),
        "{answer}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "refused in {:?}",
        asked.elapsed()
    );

    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{id}/relaunch"), &json!({}));
    assert_eq!(resp.status, 200, "{}", resp.body);
    wait_for(&fx, "a second `started` in runner.jsonl", || {
        (runner_lines(&fx, &id)
            .iter()
            .filter(|l| l["event"] == "started")
            .count()
            >= 2)
            .then_some(())
    });
    let launch: Value =
        serde_json::from_slice(&std::fs::read(session_dir(&fx, &id).join("launch.json")).unwrap())
            .unwrap();
    let argv: Vec<&str> = launch["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let resume = argv.iter().position(|a| *a == "--resume");
    assert!(
        resume.is_some_and(|i| argv.get(i + 1).copied() == thread.as_str()),
        "launch.json resumes {thread}: {argv:?}"
    );
    fx.wait_event(&id, "session.status live again", |e| {
        e["type"] == "session.status"
            && e["data"]["state"] == "live"
            && e["seq"].as_u64() > exited["seq"].as_u64()
    });

    let sent = send_expecting(&fx, &id, "What was the secret word?", "started");
    let done = fx.wait_turns_completed(&id, 2);
    assert_eq!(done[1]["data"]["turnId"], sent["turnId"]);
    let view = fx.view(&id);
    assert_eq!(view["threadId"], thread, "the same conversation: {view}");
    assert_eq!(view["paneId"], pane.as_str(), "the same pane: {view}");
    let main = fx.mock.main_requests();
    assert_eq!(main.len(), 2, "{}", fx.mock.summary());
    let last = main.last().unwrap();
    assert_eq!(last.last_user_text().trim(), "What was the secret word?");
    assert!(
        conversation_text(last).contains("The secret word is pineapple"),
        "the resumed conversation carries the first prompt: {}",
        conversation_text(last)
    );
    let events = fx.events(&id);
    assert_consistent(
        &fx,
        &events,
        &["The secret word is pineapple", "What was the secret word?"],
    );
}

// 6. ---------------------------------------------------------------------------------------

/// The tracker instances of claude-code in the tmux session `work`.
fn claude_instances(fx: &ClaudeFixture) -> Vec<Value> {
    fx.daemon.session("work")["agents"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["agent"] == "claude-code")
        .collect()
}

#[test]
fn a_fork_runs_in_its_own_pane_with_the_parent_history() {
    let fx = ClaudeFixture::start();
    fx.mock
        .push(Step::text("Noted: mango.").when_user_contains("The parent's secret is mango"));
    fx.mock
        .push(Step::text("It is mango.").when_user_contains("What is the secret?"));
    fx.mock
        .push(Step::text("Parent goes on.").when_user_contains("The parent goes on"));
    let parent = fx.create(json!({}));
    let parent_turn =
        send_expecting(&fx, &parent, "The parent's secret is mango", "started")["turnId"].clone();
    fx.wait_turns_completed(&parent, 1);
    let parent_view = fx.view(&parent);
    let parent_thread = parent_view["threadId"].clone();

    let bad = fx.daemon.post(
        &format!("/api/sessions/{parent}/fork"),
        &json!({ "afterTurnId": "x" }),
    );
    bad.assert_error(400, "invalid_field", Some("afterTurnId"));

    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{parent}/fork"), &json!({}));
    if resp.status != 201 {
        fx.fail(&format!("fork answered {}: {}", resp.status, resp.body));
    }
    let forked = resp.json();
    assert_eq!(forked["ok"], true, "{forked}");
    let child = forked["data"]["session"]["id"]
        .as_str()
        .unwrap_or_else(|| fx.fail(&format!("no session id in {forked}")))
        .to_string();
    assert_ne!(child, parent);
    let view = fx.view(&child);
    assert_eq!(view["forkedFrom"]["sessionId"], parent.as_str(), "{view}");
    assert!(view["paneId"].is_string(), "{view}");
    assert_ne!(view["paneId"], parent_view["paneId"], "{view}");

    // The parent goes on; the fork, which starts out naming the parent's conversation and
    // transcript, does not take the parent's new turn for its own.
    send_expecting(&fx, &parent, "The parent goes on", "started");
    fx.wait_turns_completed(&parent, 2);
    let early = fx.events(&child);
    assert!(
        of_type(&early, "turn.started").is_empty() && user_messages(&early).is_empty(),
        "the fork ran nothing yet:\n{}",
        dump(&early)
    );

    let sent = send_expecting(&fx, &child, "What is the secret?", "started");
    let fork_turn = sent["turnId"].clone();
    assert_ne!(fork_turn, parent_turn);
    let done = fx.wait_event(&child, "the fork's turn to complete", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == fork_turn
    });
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let request = fx
        .mock
        .main_requests()
        .into_iter()
        .find(|r| r.last_user_text().contains("What is the secret?"))
        .unwrap();
    assert!(
        conversation_text(&request).contains("The parent's secret is mango")
            && !conversation_text(&request).contains("The parent goes on"),
        "the fork's model sees the parent's history up to the fork: {}",
        conversation_text(&request)
    );
    // Claude gives the fork a conversation id of its own once it writes to it (before that,
    // `--fork-session` reports the parent's).
    let child_thread = wait_for(&fx, "the fork's own thread id", || {
        let thread = fx.view(&child)["threadId"].clone();
        (thread.is_string() && thread != parent_thread).then_some(thread)
    });
    assert_eq!(fx.view(&parent)["threadId"], parent_thread);
    assert_ne!(child_thread, parent_thread);

    // The fork's log holds the fork's own turn only: the history its transcript starts with
    // (a copy of the parent's, ids and all) is the parent's.
    let events = fx.events(&child);
    assert_eq!(
        user_messages(&events),
        [(
            fork_turn.as_str().unwrap().to_string(),
            "What is the secret?".to_string()
        )],
        "{}",
        dump(&events)
    );
    assert_eq!(
        of_type(&events, "turn.started").len(),
        1,
        "{}",
        dump(&events)
    );
    assert_consistent(&fx, &events, &["What is the secret?"]);
    // The parent's log did not see the fork's turn.
    let parent_events = fx.events(&parent);
    let parent_texts: Vec<String> = user_messages(&parent_events)
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert_eq!(
        parent_texts,
        ["The parent's secret is mango", "The parent goes on"],
        "{}",
        dump(&parent_events)
    );
    assert_eq!(
        user_messages(&parent_events)[0].0,
        parent_turn.as_str().unwrap()
    );
    // Each session is its own tracker instance, on its own pane: the fork, which reported the
    // parent's conversation id at first, did not take over the parent's instance.
    let instances = wait_for(&fx, "a tracker instance for the fork's thread", || {
        let instances = claude_instances(&fx);
        instances
            .iter()
            .any(|a| a["threadId"] == child_thread)
            .then_some(instances)
    });
    let of_thread = |thread: &Value| -> Vec<&Value> {
        instances
            .iter()
            .filter(|a| a["threadId"] == *thread)
            .collect()
    };
    assert_eq!(of_thread(&parent_thread).len(), 1, "{instances:#?}");
    assert_eq!(
        of_thread(&parent_thread)[0]["paneId"],
        parent_view["paneId"],
        "the parent's instance keeps the parent's pane: {instances:#?}"
    );
    assert_eq!(
        of_thread(&child_thread)[0]["paneId"],
        view["paneId"],
        "{instances:#?}"
    );
}

// 7. ---------------------------------------------------------------------------------------

#[test]
fn bad_claude_requests_are_refused() {
    let fx = CodexFixture::start();
    let work = fx.work.to_string_lossy().into_owned();
    let create = |body: Value| fx.daemon.post("/api/sessions", &body);
    let claude = |extra: Value| {
        let mut body = json!({ "runtime": "claude", "cwd": work, "tmuxSession": "work" });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        create(body)
    };
    claude(json!({ "approvalPolicy": "never" })).assert_error(
        400,
        "invalid_field",
        Some("approvalPolicy"),
    );
    claude(json!({ "sandbox": "read-only" })).assert_error(400, "invalid_field", Some("sandbox"));
    claude(json!({ "permissionMode": "yolo" })).assert_error(
        400,
        "invalid_field",
        Some("permissionMode"),
    );
    claude(json!({ "permissionMode": "" })).assert_error(
        400,
        "invalid_field",
        Some("permissionMode"),
    );
    claude(json!({ "tmuxSession": "a:b" })).assert_error(400, "invalid_field", Some("tmuxSession"));
    claude(json!({ "cwd": "relative/dir" })).assert_error(400, "invalid_field", Some("cwd"));
    create(json!({ "runtime": "codex", "cwd": work, "permissionMode": "plan" })).assert_error(
        400,
        "invalid_field",
        Some("permissionMode"),
    );
    // None of these made a session.
    let listed = fx.daemon.get("/api/sessions").assert_ok();
    assert_eq!(
        listed["sessions"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );

    // Relaunch is for sessions with a terminal.
    let codex = fx.create(json!({}));
    let resp = fx
        .daemon
        .post(&format!("/api/sessions/{codex}/relaunch"), &json!({}));
    assert_eq!(resp.status, 400, "{}", resp.body);
    assert!(resp.json()["error"]["code"].is_string(), "{}", resp.body);
    fx.daemon
        .post("/api/sessions/cs_0000000000000000/relaunch", &json!({}))
        .assert_error(404, "session_not_found", None);
    fx.daemon
        .post("/api/sessions/cs_0000000000000000/interrupt", &json!({}))
        .assert_error(404, "session_not_found", None);
    fx.daemon
        .post("/api/sessions/cs_0000000000000000/fork", &json!({}))
        .assert_error(404, "session_not_found", None);
}
