//! Rehoming an adopted Claude from the page (issue 25), in a real Chromium against the real daemon
//! and a real Claude Code TUI started by hand in a pane and adopted: All agents' Rehome, pressed
//! while a person's text is in Claude's input box, is refused and the page shows the daemon's
//! reason (nothing done); the session's own Rehome, pressed when it is idle, moves it under
//! cohost's runner and hooks in the same pane — the same session and Claude session, hosted — and
//! the cockpit's next prompt completes there (a Claude rehomed before its first prompt, which has
//! no transcript to resume, keeps its session id too). (Named `cockpit_…` so the newest half of
//! the matrix, which runs `suite::web::cockpit`, runs it too.)

use std::time::Duration;

use crate::suite::claude::adopt::{AGENT, ByHand, adopt, fixture, wait_instance};
use crate::suite::web::cockpit_rehome::rehome_from_page;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::claude_env::is_running;
use crate::support::mock_messages::Step;

/// Long enough for a Claude turn, or a rehome (Claude ends, the conversation resumes), on a
/// loaded machine.
const TURN: Duration = Duration::from_secs(60);

#[test]
fn an_adopted_claude_is_rehomed_from_the_page_and_its_next_prompt_from_the_cockpit_completes() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    let claude = hand.claude_pid(&fx).expect("claude's session file");
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    let key = watched["key"].as_str().unwrap().to_string();
    let claude_session = watched["threadId"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&fx, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();

    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}&session={id}",
        fx.daemon.port(),
        fx.daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b.wait_visible("#rehome", UI_TIMEOUT);
    b.wait_visible("#disown", UI_TIMEOUT);
    b.wait_text("#sessionBadges", "adopted", UI_TIMEOUT);

    // A person's draft in the box: All agents' Rehome is refused, the page says why, and nothing
    // is done; Claude keeps running, adopted.
    hand.keys(&fx, &["-l", "half typed by a person"]);
    hand.wait_screen(&fx, "the person's draft", |s| {
        s.contains("half typed by a person")
    });
    let row_rehome = format!("#agents button[data-key=\"r:{key}\"]");
    b.click("#showAgents");
    b.wait_visible(&row_rehome, UI_TIMEOUT);
    b.click(&row_rehome);
    let shown = b.wait_text("#errors", "human_typing", TURN);
    assert!(
        shown.contains(&format!("rehome {AGENT} in hand")),
        "{shown}"
    );
    assert!(hand.screen(&fx).contains("half typed by a person"));
    assert!(is_running(claude), "a refused rehome leaves claude running");
    assert_eq!(fx.view(&id)["control"], "adopted");
    hand.keys(&fx, &["Escape", "Escape"]);
    hand.wait_screen(&fx, "the cleared box", |s| {
        !s.contains("half typed by a person")
    });
    hand.wait_ready(&fx);

    // Idle: the session's Rehome moves it under cohost's runner, the same session and Claude
    // session, now hosted.
    rehome_from_page(&b, TURN);
    let view = fx.view(&id);
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert_eq!(view["threadId"], claude_session.as_str(), "{view:#}");
    assert_eq!(view["paneId"], hand.pane.as_str(), "{view:#}");
    assert!(!is_running(claude), "the person's claude ended");

    // The cockpit's next prompt is typed by cohost into the resumed Claude and completes.
    fx.mock.push(Step::text("Hosted reply, to the page."));
    b.type_into("#prompt", "After the rehome, from the page");
    b.click("#sendNow");
    b.wait_text("#entries", "Hosted reply, to the page.", TURN);
    let prompt = fx.wait_event(&id, "the page's prompt", |e| {
        e["type"] == "item.completed"
            && e["data"]["item"]["type"] == "userMessage"
            && e["data"]["item"]["text"] == "After the rehome, from the page"
    });
    let done = fx.wait_event(&id, "the page's turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == prompt["data"]["turnId"]
    });
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    hand.wait_screen(&fx, "the hosted reply in the pane", |s| {
        s.contains("Hosted reply, to the page.")
    });
    // A Claude rehomed before its first prompt had no transcript to resume: it started under
    // the same session id, and its first prompt is that session's.
    assert_eq!(fx.view(&id)["threadId"], claude_session.as_str());
    let problems = b.problems();
    assert!(
        problems
            .iter()
            .all(|p| p.contains("/rehome") && p.contains("409")),
        "{problems:#?}"
    );
}
