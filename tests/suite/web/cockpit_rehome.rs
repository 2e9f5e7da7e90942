//! Rehoming from the page (issue 25), in a real Chromium against the real daemon and a real
//! codex TUI started by hand in a pane and adopted: All agents' Rehome, pressed while a person's
//! text is in the composer, is refused and the page shows the daemon's reason (nothing typed);
//! the session's own Rehome, pressed when it is idle, moves it under cohost's app-server in the
//! same pane — the same session and thread, hosted — and the cockpit's next prompt completes
//! there. (Named `cockpit_…` so the newest half of the matrix, which runs `suite::web::cockpit`,
//! runs it too.)

use std::time::Duration;

use crate::suite::codex::adopt::{AGENT, Rig, adopt, turn_by_hand, wait_event};
use crate::suite::watch::common::wait_instance;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::claude_env::is_running;
use crate::support::mock_responses::Step;

/// Long enough for a codex turn, or a rehome (the TUI quits, the thread resumes), on a loaded
/// machine.
const TURN: Duration = Duration::from_secs(60);

#[test]
fn an_adopted_codex_is_rehomed_from_the_page_and_its_next_prompt_from_the_cockpit_completes() {
    let rig = Rig::start();
    let daemon = rig.daemon();
    let watched = turn_by_hand(&rig, &daemon);
    let key = watched["key"].as_str().unwrap().to_string();
    let thread = watched["threadId"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();
    let tui = adopted["session"]["adopted"]["pid"].as_u64().unwrap() as u32;

    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}&session={id}",
        daemon.port(),
        daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b.wait_visible("#rehome", UI_TIMEOUT);
    b.wait_visible("#disown", UI_TIMEOUT);
    b.wait_text("#sessionBadges", "adopted", UI_TIMEOUT);

    // A person's draft in the composer: All agents' Rehome is refused, the page says why, and
    // nothing is typed; the TUI keeps running, adopted.
    rig.type_text("half typed by a person");
    let row_rehome = format!("#agents button[data-key=\"r:{key}\"]");
    b.click("#showAgents");
    b.wait_visible(&row_rehome, UI_TIMEOUT);
    b.click(&row_rehome);
    let shown = b.wait_text("#errors", "human_typing", TURN);
    assert!(shown.contains("rehome codex in hand"), "{shown}");
    let screen = rig.screen();
    assert!(
        screen.contains("half typed by a person") && !screen.contains("/quit"),
        "nothing typed:\n{screen}"
    );
    assert!(is_running(tui), "a refused rehome leaves the TUI running");
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["control"], "adopted", "{view:#}");
    rig.keys(&["C-c"]);
    rig.wait_screen("the cleared composer", |s| {
        !s.contains("half typed by a person")
    });

    // Idle: the session's Rehome moves it under cohost's app-server, the same session and
    // thread, now hosted.
    rehome_from_page(&b, TURN);
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert_eq!(view["threadId"], thread.as_str(), "{view:#}");
    assert_eq!(view["paneId"], rig.pane.as_str(), "{view:#}");
    assert!(!is_running(tui), "the person's TUI quit");
    let (group, hosted) = wait_instance(&daemon, AGENT, "the rehomed instance, hosted", |i| {
        i["sessionId"] == id.as_str() && i["control"] == "hosted"
    });
    let explained = daemon
        .get(&format!(
            "/api/state/{group}/agents/{}/explain",
            hosted["key"].as_str().unwrap().replace(':', "%3A")
        ))
        .assert_ok();
    assert_eq!(explained["control"], "hosted", "{explained:#}");
    assert_eq!(explained["sessionId"], id.as_str(), "{explained:#}");
    assert!(explained.get("adopted").is_none(), "{explained:#}");
    rig.wait_screen("the resumed conversation in the pane", |s| {
        s.contains("Hello by hand") && s.contains("Hand reply.")
    });

    // The cockpit's next prompt goes through cohost's app-server and completes.
    rig.mock.push(Step::text("Hosted reply, to the page."));
    b.type_into("#prompt", "After the rehome, from the page");
    b.click("#sendNow");
    b.wait_text("#entries", "Hosted reply, to the page.", TURN);
    let prompt = wait_event(&daemon, &id, "the page's prompt", |e| {
        e["type"] == "item.completed"
            && e["data"]["item"]["type"] == "userMessage"
            && e["data"]["item"]["text"] == "After the rehome, from the page"
    });
    let done = wait_event(&daemon, &id, "the page's turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == prompt["data"]["turnId"]
    });
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    let last = rig.mock.main_requests().last().unwrap().last_user_text();
    assert!(last.contains("After the rehome, from the page"), "{last}");
    rig.wait_screen("the hosted reply in the pane", |s| {
        s.contains("Hosted reply, to the page.")
    });
    let problems = b.problems();
    assert!(
        problems
            .iter()
            .all(|p| p.contains("/rehome") && p.contains("409")),
        "{problems:#?}"
    );
}

/// The session's own Rehome pressed (on the Hosted list): waits, `timeout` at most, until the
/// page says `Rehomed` and shows the session hosted — no Rehome or Disown, no `adopted` badge.
pub(crate) fn rehome_from_page(b: &Browser, timeout: Duration) {
    b.click("#showHosted");
    b.click("#rehome");
    b.wait_text("#composeStatus", "Rehomed", timeout);
    b.wait_for("the page to show the session hosted", UI_TIMEOUT, || {
        let hidden = b.exec(
            "return document.getElementById('rehome').hidden && document.getElementById('disown').hidden;",
            vec![],
        );
        (hidden == true && !b.text("#sessionBadges").contains("adopted")).then_some(())
    });
}
