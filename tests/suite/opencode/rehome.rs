//! Rehoming an OpenCode TUI started by hand (issue 25): the real `opencode`, adopted (see
//! `adopt.rs`), with a turn by hand and one from HTTP, is moved under a server of cohost's with
//! `POST /api/sessions/{id}/rehome`: refused with nothing typed over a person's draft
//! (`human_typing`) and while a turn runs (`busy`); when idle the person's TUI quits by its own
//! key, and `opencode attach` under cohost's runner shows the same conversation in the same pane.
//! The session, the same id and OpenCode session, is hosted from then on: the next prompt from
//! HTTP runs on cohost's server under the session's policy (a command asks first, and runs once
//! accepted), and no turn is stored twice — also after a daemon restart. And the same from the
//! page, in a real Chromium.

use serde_json::json;

use super::adopt::{AGENT, ByHand, Rig, adopted_by_hand, items};
use crate::suite::adopting::{
    answer, assert_no_repeats, assert_prompts_once, assert_rehomed, events, prompt_approval,
    rehome, send, wait_live, wait_turn_end,
};
use crate::suite::watch::common::daemon_watching;
use crate::suite::web::cockpit_rehome::rehome_from_page;
use crate::support::TestDaemon;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::claude_env::is_running;
use crate::support::mock_messages::Step;

/// Long enough for an OpenCode turn, or a rehome (a server starts, the TUI quits), on a loaded
/// machine.
const TURN: std::time::Duration = std::time::Duration::from_secs(90);

/// A daemon watching OpenCode whose own OpenCode (the server a rehome starts) has the person's
/// home: their config (the mock provider) and their database.
fn daemon(rig: &Rig) -> TestDaemon {
    let config = rig.home.join(".config").to_string_lossy().into_owned();
    let bin = super::opencode_bin().to_string_lossy().into_owned();
    let mut env = vec![
        ("XDG_CONFIG_HOME", config.as_str()),
        ("COHOST_OPENCODE_BIN", bin.as_str()),
    ];
    for name in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    ] {
        env.push((name, "1"));
    }
    daemon_watching(&rig.tmux, AGENT, &rig.home, &env)
}

#[test]
fn an_adopted_opencode_is_rehomed_onto_a_server_of_cohosts_keeping_its_session() {
    let rig = Rig::start();
    let mut daemon = daemon(&rig);
    let ByHand {
        thread,
        id,
        pid: tui,
        ..
    } = adopted_by_hand(&rig, &daemon);

    // A prompt from HTTP completes in the adopted TUI.
    rig.mock.push(Step::text("Adopted reply."));
    let (status, sent) = send(&daemon, &id, "Hello from HTTP");
    assert_eq!(status, 200, "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&daemon, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    rig.wait_screen("the adopted reply", |s| s.contains("Adopted reply."));

    // Over a person's draft a rehome is refused and nothing is typed.
    rig.type_text("half typed by a person");
    let (status, refused) = rehome(&daemon, &id);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "human_typing", "{refused:#}");
    assert!(is_running(tui), "a refused rehome leaves the TUI running");
    assert!(rig.screen().contains("half typed by a person"));
    rig.keys(&["C-u"]);
    rig.wait_screen("the cleared box", |s| !s.contains("half typed by a person"));

    // Mid-turn a rehome is refused and nothing is typed: the turn goes on, the TUI runs.
    rig.mock.push(Step::text("Once upon a time\n").then_hang());
    let (status, sent) = send(&daemon, &id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    rig.wait_screen("the streamed text", |s| s.contains("Once upon a time"));
    let (status, refused) = rehome(&daemon, &id);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "busy", "{refused:#}");
    assert!(is_running(tui), "a refused rehome leaves the TUI running");
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["control"], "adopted", "{view:#}");
    daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    let ended = wait_turn_end(&daemon, &id, &long);
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");

    // Idle: rehomed. The same session and OpenCode session, hosted, in the same pane.
    let (status, rehomed) = rehome(&daemon, &id);
    assert_eq!(status, 200, "{rehomed:#}");
    assert_rehomed(
        &daemon, &id, &rehomed, &thread, &rig.tmux, &rig.pane, tui, rig.shell,
    );
    // `opencode attach` shows the conversation, which goes on.
    rig.wait_screen("the conversation in the attached TUI", |s| {
        s.contains("Hello from HTTP") && s.contains("Adopted reply.")
    });

    // The next prompt runs on cohost's server under the session's policy: its command asks,
    // and runs once accepted.
    rig.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "touch rehomed.txt", "description": "Make a file"}),
        ))
        .push(Step::text("Hosted reply after the rehome.").when_tool_result());
    let (next, requested) = prompt_approval(&daemon, &id, "After the rehome");
    assert!(
        !rig.work.join("rehomed.txt").exists(),
        "nothing ran before the answer"
    );
    let approval = requested["data"]["approvalId"].as_str().unwrap();
    assert!(approval.starts_with("per_"), "{requested}");
    let (status, accepted) = answer(&daemon, &id, approval, "accept");
    assert_eq!(status, 200, "{accepted}");
    let done = wait_turn_end(&daemon, &id, &next);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert!(rig.work.join("rehomed.txt").exists(), "the command ran");
    let asked: Vec<String> = rig
        .mock
        .main_requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect();
    assert!(
        asked.iter().any(|text| text.contains("After the rehome")),
        "the model was asked: {asked:?}"
    );
    rig.wait_screen("the hosted reply in the pane", |s| {
        s.contains("Hosted reply after the rehome.")
    });
    let now = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(now["threadId"], thread.as_str(), "{now:#}");

    // History once: the turn by hand backfilled, no turn or item stored twice.
    assert_no_repeats(&events(&daemon, &id));
    assert_prompts_once(
        &events(&daemon, &id),
        &["Hello by hand", "Hello from HTTP", "After the rehome"],
    );

    // After a daemon restart the session is bound again on a new server: the next prompt
    // completes in the same OpenCode session, and nothing is stored twice.
    daemon.restart();
    let bound = wait_live(&daemon, &id);
    assert_eq!(bound["threadId"], thread.as_str(), "{bound:#}");
    assert_eq!(bound["control"], "hosted", "{bound:#}");
    rig.mock.push(Step::text("Reply after the restart."));
    let (status, sent) = send(&daemon, &id, "After the restart");
    assert_eq!(status, 200, "{sent}");
    let after = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&daemon, &id, &after);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert_no_repeats(&events(&daemon, &id));
    assert_prompts_once(
        &events(&daemon, &id),
        &[
            "Hello by hand",
            "Hello from HTTP",
            "After the rehome",
            "After the restart",
        ],
    );
}

/// From the page, in a real Chromium: All agents' Rehome of the adopted OpenCode, pressed over a
/// person's draft, is refused and the page shows why (nothing typed); the session's own Rehome,
/// pressed when it is idle, moves it under a server of cohost's in the same pane, and the
/// cockpit's next prompt completes there.
#[test]
fn an_adopted_opencode_is_rehomed_from_the_page_and_its_next_prompt_from_the_cockpit_completes() {
    let rig = Rig::start();
    let daemon = daemon(&rig);
    let ByHand {
        key,
        thread,
        id,
        pid: tui,
    } = adopted_by_hand(&rig, &daemon);

    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}&session={id}",
        daemon.port(),
        daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b.wait_visible("#rehome", UI_TIMEOUT);
    b.wait_text("#sessionBadges", "adopted", UI_TIMEOUT);

    // A person's draft in the box: All agents' Rehome is refused, the page says why.
    rig.type_text("half typed by a person");
    let row_rehome = format!("#agents button[data-key=\"r:{key}\"]");
    b.click("#showAgents");
    b.wait_visible(&row_rehome, UI_TIMEOUT);
    b.click(&row_rehome);
    b.wait_text("#errors", "human_typing", TURN);
    assert!(rig.screen().contains("half typed by a person"));
    assert!(is_running(tui), "a refused rehome leaves the TUI running");
    rig.keys(&["C-u"]);
    rig.wait_screen("the cleared box", |s| !s.contains("half typed by a person"));

    // Idle: the session's Rehome; the page shows it hosted, the same session and thread.
    rehome_from_page(&b, TURN);
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert_eq!(view["threadId"], thread.as_str(), "{view:#}");
    assert_eq!(view["paneId"], rig.pane.as_str(), "{view:#}");
    assert!(!is_running(tui), "the person's TUI quit");
    rig.wait_screen("the conversation in the attached TUI", |s| {
        s.contains("Hello by hand") && s.contains("Hand reply.")
    });

    // The cockpit's next prompt goes to cohost's server and completes.
    rig.mock.push(Step::text("Hosted reply, to the page."));
    b.type_into("#prompt", "After the rehome, from the page");
    b.click("#sendNow");
    b.wait_text("#entries", "Hosted reply, to the page.", TURN);
    let turn = items(&daemon, &id, "userMessage")
        .into_iter()
        .find(|(_, item)| item["text"] == "After the rehome, from the page")
        .map(|(turn, _)| turn)
        .expect("the page's prompt stored");
    let done = wait_turn_end(&daemon, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
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
