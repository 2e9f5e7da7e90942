//! Adopting from the page (issue 25), in a real Chromium against the real daemon and a real
//! Claude started by hand in a pane: All agents offers Adopt on the watched instance, shows the
//! daemon's reason when it refuses, gives an adopted one back with Disown, and Adopt opens the
//! new session, to which the page sends a prompt typed and answered in the person's pane, and
//! whose next turn the page interrupts.
//! (Named `cockpit_…` so the newest half of the matrix, which runs `suite::web::cockpit`, runs
//! it too.)

use std::time::Duration;

use serde_json::json;

use crate::suite::claude::adopt::{ByHand, adopt, fixture, wait_instance};
use crate::support::TestDaemon;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::mock_messages::Step;

/// Long enough for a Claude turn on a loaded machine.
const TURN: Duration = Duration::from_secs(60);

fn page(daemon: &TestDaemon) -> Browser {
    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}",
        daemon.port(),
        daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b
}

/// The session ids the daemon lists, with their state.
fn sessions(daemon: &TestDaemon) -> Vec<(String, String)> {
    daemon.get("/api/sessions").assert_ok()["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_string(),
                s["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_claude_started_by_hand_is_adopted_from_all_agents_sent_a_prompt_and_interrupted_from_the_page()
{
    let fx = fixture();
    let hand = ByHand::start(&fx);
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    let key = watched["key"].as_str().unwrap().to_string();
    let adopt_button = format!("#agents button[data-key=\"a:{key}\"]");
    let disown_button = format!("#agents button[data-key=\"d:{key}\"]");

    let b = page(&fx.daemon);
    b.click("#showAgents");
    b.wait_visible(&adopt_button, UI_TIMEOUT);

    // Another surface adopts it first: the page's Adopt, shown before it knew, is refused and
    // says why.
    b.exec(
        "window.__staleAdopt = document.querySelector(arguments[0]);",
        vec![json!(adopt_button)],
    );
    let (status, adopted) = adopt(&fx, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let first = adopted["session"]["id"].as_str().unwrap().to_string();
    b.exec("window.__staleAdopt.click();", vec![]);
    let shown = b.wait_text("#errors", "already_driven", UI_TIMEOUT);
    assert!(
        shown.contains("adopt claude-code in hand") && shown.contains(&first),
        "{shown}"
    );
    assert_eq!(
        sessions(&fx.daemon)
            .iter()
            .filter(|(_, state)| state == "live")
            .count(),
        1,
        "the refusal started nothing"
    );
    let problems = b.problems();
    assert!(
        problems
            .iter()
            .all(|p| p.contains("/adopt") && p.contains("409")),
        "{problems:#?}"
    );

    // The adopted instance offers Disown: the session ends, Claude is watched only again.
    b.wait_visible(&disown_button, UI_TIMEOUT);
    b.click(&disown_button);
    fx.wait_event(&first, "session.closed", |e| e["type"] == "session.closed");
    b.wait_visible(&adopt_button, UI_TIMEOUT);
    assert!(!b.exists(&disown_button));

    // Adopt from the page: the new session opens in the cockpit.
    b.click(&adopt_button);
    let second = fx
        .daemon
        .wait_for("the session adopted from the page", TURN, |daemon| {
            sessions(daemon)
                .into_iter()
                .find(|(id, state)| *id != first && state == "live")
                .map(|(id, _)| id)
        });
    let view = fx.view(&second);
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["paneId"], hand.pane.as_str(), "{view:#}");
    b.wait_visible("#sessionView", UI_TIMEOUT);
    b.wait_for("the page to open the adopted session", UI_TIMEOUT, || {
        let stored = b.exec(
            "return sessionStorage.getItem('cohost.session') || '';",
            vec![],
        );
        stored
            .as_str()
            .is_some_and(|s| s.contains(&second))
            .then_some(())
    });

    b.wait_text("#sessionView", "adopted", UI_TIMEOUT);

    // A prompt from the page is typed into the person's pane and answered there.
    fx.mock
        .push(Step::text("Hello from the mock, to the page."));
    b.type_into("#prompt", "Hello from the page");
    b.click("#sendNow");
    b.wait_text("#entries", "Hello from the mock, to the page.", TURN);
    hand.wait_screen(&fx, "the reply in the pane", |s| {
        s.contains("Hello from the page") && s.contains("Hello from the mock, to the page.")
    });
    let started = fx.wait_event(&second, "the page's turn", |e| e["type"] == "turn.started");
    assert_eq!(started["data"]["source"], "api", "{started}");

    // Interrupt from the cockpit: one Escape in the pane ends the running turn.
    fx.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    b.type_into("#prompt", "Write a long story");
    b.click("#sendNow");
    hand.wait_screen(&fx, "the streamed text", |s| s.contains("Once upon a time"));
    let long = fx.wait_event(&second, "the long turn", |e| {
        e["type"] == "turn.started" && e["data"]["turnId"] != started["data"]["turnId"]
    });
    b.wait_for("the page to see the running turn", UI_TIMEOUT, || {
        b.is_enabled("#interrupt").then_some(())
    });
    b.click("#interrupt");
    let ended = fx.wait_event(&second, "the long turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == long["data"]["turnId"]
    });
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");
    b.wait_text("#entries", "Turn interrupted", TURN);
    let problems = b.problems();
    assert!(
        problems
            .iter()
            .all(|p| p.contains("/adopt") && p.contains("409")),
        "{problems:#?}"
    );
}
