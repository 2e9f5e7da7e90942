//! Co-driving: the real codex TUI attached to a thread cohost hosts, in a tmux pane.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

/// Waits until the pane shows `needle`, failing with the screen.
#[track_caller]
pub fn wait_screen(fx: &CodexFixture, pane: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let screen = fx.tmux.run(&["capture-pane", "-p", "-t", pane]);
        if screen.contains(needle) {
            return screen;
        }
        if Instant::now() >= deadline {
            fx.daemon.fail(&format!(
                "the TUI never showed {needle:?}; screen:\n{screen}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Types like a human: the text, a pause (or the TUI takes it as a paste), then Enter.
pub fn type_prompt(fx: &CodexFixture, pane: &str, text: &str) {
    fx.tmux.run(&["send-keys", "-t", pane, "-l", text]);
    std::thread::sleep(Duration::from_millis(600));
    fx.tmux.run(&["send-keys", "-t", pane, "Enter"]);
}

#[test]
fn a_turn_typed_in_the_tui_appears_in_the_stream_and_an_api_turn_on_screen() {
    let fx = CodexFixture::start();
    fx.mock
        .push(Step::text("Reply to the first prompt.").when_user_contains("First from the API"));
    fx.mock
        .push(Step::text("Reply to the human.").when_user_contains("Hello from the TUI"));
    fx.mock
        .push(Step::text("Reply to the API.").when_user_contains("Hello from the API"));
    // codex cannot resume a thread before its first turn: the TUI opens once that turn is done.
    let id = fx.create(
        json!({ "terminal": true, "approvalPolicy": "never", "prompt": "First from the API" }),
    );
    fx.wait_turns_completed(&id, 1);
    let pane = fx.view(&id)["paneId"].as_str().unwrap().to_string();
    wait_screen(&fx, &pane, "Reply to the first prompt.");
    wait_screen(&fx, &pane, "Ask Codex to do anything");

    type_prompt(&fx, &pane, "Hello from the TUI");
    fx.wait_turns_completed(&id, 2);
    let starts: Vec<_> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "turn.started")
        .collect();
    assert_eq!(starts[0]["data"]["source"], "api", "{starts:?}");
    assert_eq!(starts[1]["data"]["source"], "terminal", "{starts:?}");
    fx.wait_event(&id, "the reply to the human", |e| {
        e["data"]["item"]["text"] == "Reply to the human."
    });

    let sent = fx.send(&id, "Hello from the API");
    assert_eq!(
        sent["outcome"],
        "started",
        "{sent} {:#?}",
        fx.events(&id)
            .iter()
            .map(|e| format!("{} {}", e["type"], e["data"]))
            .collect::<Vec<_>>()
    );
    fx.wait_turns_completed(&id, 3);
    wait_screen(&fx, &pane, "Reply to the API.");

    // The spec without a token redacts it; the pane got the real one through its environment.
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    assert_eq!(spec["env"]["COHOST_CODEX_WS_TOKEN"], "<redacted>");
    assert!(
        spec["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--remote")
    );
    let with_token = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
        .assert_ok();
    assert_ne!(with_token["env"]["COHOST_CODEX_WS_TOKEN"], "<redacted>");
    let token = with_token["env"]["COHOST_CODEX_WS_TOKEN"].as_str().unwrap();
    assert!(
        !with_token["args"].to_string().contains(token),
        "the token is never an argument"
    );
}
