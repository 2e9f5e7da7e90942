//! Claude-native sessions: the real claude TUI in tmux, driven and followed by the daemon.

use serde_json::{Value, json};

use cohost::peers::CLAUDE;
use cohost::runtime::claude::normalize::unwrap_pasted;

use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;
use crate::support::pinned_version;

#[test]
fn a_turn_is_seen_as_events_in_order_each_item_once() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Hello from the mock."));
    let id = fx.create(json!({}));
    let view = fx.view(&id);
    assert!(view["threadId"].is_string(), "{view}");
    let (status, sent) = fx.send(&id, "Say hello");
    if status != 200 {
        fx.fail(&format!("send answered {status}: {sent}"));
    }
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    let kinds: Vec<String> = events
        .iter()
        .filter(|e| {
            let kind = e["type"].as_str().unwrap();
            // The inject's records (and the mode the first hook reports) race the turn:
            // checked on their own below.
            ![
                "usage",
                "session.status",
                "message.sent",
                "session.pane",
                "session.permission_mode",
                "notification",
            ]
            .contains(&kind)
                && !kind.starts_with("task.")
        })
        .map(|e| {
            let t = e["type"].as_str().unwrap().to_string();
            match e["data"]["item"]["type"].as_str() {
                Some(item) => format!("{t}:{item}"),
                None => t,
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session.created",
            "session.bound",
            "turn.started",
            "item.completed:userMessage",
            "item.completed:agentMessage",
            "turn.completed",
        ],
        "{events:#?}"
    );
    // cohost launched it in `default` mode, and Claude's hooks say so.
    let modes: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "session.permission_mode")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(
        modes,
        [&json!({ "mode": "default", "allowed": true })],
        "{events:#?}"
    );
    assert_eq!(events[0]["data"]["permissionMode"], "default");
    let view = fx.view(&id);
    assert_eq!(view["permissionMode"], "default", "{view}");
    assert_eq!(view["permissionModeAllowed"], true, "{view}");
    let started = events.iter().find(|e| e["type"] == "turn.started").unwrap();
    assert_eq!(started["data"]["source"], "api");
    assert_eq!(started["data"]["turnId"], sent["turnId"]);
    let reply = events
        .iter()
        .find(|e| e["data"]["item"]["type"] == "agentMessage")
        .unwrap();
    assert_eq!(reply["data"]["item"]["text"], "Hello from the mock.");
    // The prompt is tracked as a task that the turn finished.
    let task = sent["taskId"].as_str().unwrap();
    let view = fx.daemon.get(&format!("/api/tasks/{task}")).assert_ok();
    assert_eq!(view["task"]["state"], "completed", "{view:#}");
    assert_eq!(view["task"]["turnId"], sent["turnId"], "{view:#}");
    assert_eq!(
        view["task"]["resultExcerpt"], "Hello from the mock.",
        "{view:#}"
    );
}

#[test]
fn a_permission_request_is_approved_over_the_api_and_another_denied() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch approved.txt", "description": "Create a file"}),
        )
        .then_text("Created it."),
    );
    let id = fx.create(json!({}));
    let (status, sent) = fx.send(&id, "Make a file");
    assert_eq!(status, 200, "{sent}");
    let requested = fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(requested["data"]["command"], "touch approved.txt");
    let answer = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": "accept" }),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    fx.wait_turns_completed(&id, 1);
    assert!(
        fx.work.join("approved.txt").exists(),
        "the approved command ran"
    );
    let resolved: Vec<_> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "approval.resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["data"]["decision"], "accept");
    // The same id again is stale.
    let again = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": "decline" }),
    );
    again.assert_error(409, "approval_resolved", None);

    fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch denied.txt", "description": "Create another"}),
        )
        .then_text("Understood, I will not."),
    );
    let (status, sent) = fx.send(&id, "Make another file");
    assert_eq!(status, 200, "{sent}");
    let second = fx.wait_event(&id, "a second approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["approvalId"] != approval.as_str()
    });
    let second_id = second["data"]["approvalId"].as_str().unwrap().to_string();
    // Every surface sees it waiting: nothing ran (Claude 2.1.332 would run it unasked in its
    // default `auto` mode; cohost launched the session in `default`).
    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    let pending: Vec<&Value> = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["pending"] == true)
        .collect();
    assert_eq!(pending.len(), 1, "{listed:#}");
    assert_eq!(pending[0]["request"]["approvalId"], second_id.as_str());
    assert_eq!(pending[0]["request"]["command"], "touch denied.txt");
    assert!(!fx.work.join("denied.txt").exists(), "nothing ran unasked");
    let answer = fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{second_id}"),
        &json!({ "decision": "decline" }),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    fx.wait_turns_completed(&id, 2);
    assert!(
        !fx.work.join("denied.txt").exists(),
        "the denied command did not run"
    );
}

#[test]
fn a_multi_line_prompt_arrives_as_one_prompt() {
    let fx = ClaudeFixture::start();
    fx.mock.push(Step::text("Got all of it."));
    let id = fx.create(json!({}));
    let text = "Line one\n\n  indented `two` with $HOME and \"quotes\"\nline three";
    let (status, sent) = fx.send(&id, text);
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started");
    fx.wait_turns_completed(&id, 1);
    let main = fx.mock.main_requests();
    assert_eq!(main.len(), 1, "one model request");
    // Claude 2.1.332 wraps a paste of more than two newlines in `<pasted_content>` (in its hook
    // too, which cohost must still recognise as its own prompt); 2.1.197 does not.
    let received = main[0].last_user_text();
    if pinned_version(&CLAUDE) == CLAUDE.newest {
        assert!(received.contains("<pasted_content id="), "{received:?}");
    }
    assert_eq!(unwrap_pasted(&received).trim(), text);
    let events = fx.events(&id);
    let users: Vec<_> = events
        .iter()
        .filter(|e| e["data"]["item"]["type"] == "userMessage")
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["data"]["item"]["text"], text, "stored as typed");
    let started: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "turn.started")
        .collect();
    assert_eq!(started.len(), 1, "{events:#?}");
    assert_eq!(started[0]["data"]["source"], "api", "{events:#?}");
    assert_eq!(started[0]["data"]["turnId"], sent["turnId"]);
}

#[test]
fn injection_is_refused_while_a_human_draft_is_in_the_box() {
    let fx = ClaudeFixture::start();
    let id = fx.create(json!({}));
    let pane = fx.pane(&id);
    fx.tmux
        .run(&["send-keys", "-t", &pane, "-l", "half typed by a human"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !fx.screen(&id).contains("half typed by a human") {
        assert!(
            std::time::Instant::now() < deadline,
            "the draft never showed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, answer) = fx.send(&id, "an injected prompt");
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "human_typing");
    let screen = fx.screen(&id);
    assert!(
        screen.contains("half typed by a human"),
        "the draft is untouched:\n{screen}"
    );
    assert!(
        !screen.contains("an injected prompt"),
        "nothing was typed into it:\n{screen}"
    );
    assert!(fx.mock.main_requests().is_empty());
}

/// A person at the pane can cycle Claude's permission mode with shift+tab, and on both supported
/// releases the cycle reaches `auto` (default → acceptEdits → plan → auto), in which Claude runs
/// tools it judges safe without asking. This daemon does not allow `auto`, so cohost's PreToolUse
/// hook asks instead, and the question reaches every surface as an approval.
#[test]
fn a_mode_the_daemon_does_not_allow_still_asks_through_cohost() {
    let fx = ClaudeFixture::start();
    let id = fx.create(json!({}));
    let pane = fx.pane(&id);
    let wait_footer = |what: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let screen = fx.screen(&id);
            if screen.contains(what) {
                return screen;
            }
            if std::time::Instant::now() >= deadline {
                fx.fail(&format!("the footer never said {what:?}:\n{screen}"));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    // A key sent in the TUI's first seconds can be dropped: press again only while the footer
    // still shows the mode before (never past the one wanted).
    const CYCLE: [&str; 3] = ["accept edits on", "plan mode on", "auto mode on"];
    for (step, footer) in CYCLE.iter().enumerate() {
        for attempt in 0.. {
            fx.tmux.run(&["send-keys", "-t", &pane, "BTab"]);
            std::thread::sleep(std::time::Duration::from_secs(2));
            let screen = fx.screen(&id);
            if screen.contains(footer) {
                break;
            }
            // Still in the mode before (the key was dropped), or something else went wrong.
            let unchanged = match step {
                0 => !CYCLE.iter().any(|f| screen.contains(f)),
                _ => screen.contains(CYCLE[step - 1]),
            };
            if attempt == 3 || !unchanged {
                fx.fail(&format!("shift+tab did not reach {footer:?}:\n{screen}"));
            }
        }
    }
    wait_footer("auto mode on");

    fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch unasked.txt", "description": "Create a file"}),
        )
        .then_text("Understood."),
    );
    let (status, sent) = fx.send(&id, "Make a file in auto mode");
    assert_eq!(status, 200, "{sent}");
    let requested = fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    assert_eq!(requested["data"]["command"], "touch unasked.txt");
    assert!(!fx.work.join("unasked.txt").exists(), "nothing ran unasked");
    let view = fx.view(&id);
    assert_eq!(view["permissionMode"], "auto", "{view}");
    assert_eq!(view["permissionModeAllowed"], false, "{view}");
    let events = fx.events(&id);
    let alarms: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "error" && e["data"]["code"] == "permission_mode_not_allowed")
        .collect();
    assert_eq!(alarms.len(), 1, "one alarm: {events:#?}");
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "decline" }),
        )
        .assert_ok();
    fx.wait_turns_completed(&id, 1);
    assert!(
        !fx.work.join("unasked.txt").exists(),
        "the declined command did not run"
    );
}

#[test]
fn doctor_reports_the_installed_claude() {
    let fx = ClaudeFixture::start();
    let doctor = fx.daemon.get("/api/doctor").assert_ok();
    let claude = &doctor["claude"];
    assert_eq!(claude["found"], true, "{doctor:#}");
    assert_eq!(
        claude["version"],
        pinned_version(&CLAUDE).as_str(),
        "{doctor:#}"
    );
    assert_eq!(claude["versionPlace"], "tested", "{doctor:#}");
    assert_eq!(claude["hooksInstallable"], true, "{doctor:#}");
    assert_eq!(claude["permissionMode"], "default", "{doctor:#}");
    assert_eq!(claude["issues"], json!([]), "{doctor:#}");
    assert_eq!(claude["warnings"], json!([]), "{doctor:#}");
}
