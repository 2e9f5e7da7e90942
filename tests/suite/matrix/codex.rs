//! The Matrix bridge with a hosted codex session (the kit's mock model): a prompt from the room
//! streams back edited in place, an approval is answered from the room (and a second answer is
//! too late), a question answered by an option's number, `/interrupt`, `/takeover`,
//! `/release`, `/plan`, a bad command answers its usage, a stranger is ignored, restarts of
//! the bridge and of Synapse post nothing twice, and an https homeserver (Markdown rendered).

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;
use crate::support::{temp_dir, wait_until};

use super::{BRIDGE, Rig, WAIT, assert_each_once, edits_of, ends, latest_content};

#[test]
fn a_prompt_from_the_room_streams_back_and_bad_commands_and_strangers_change_nothing() {
    let rig = Rig::<CodexFixture>::start();

    // A stranger's /start is ignored: no answer, no session.
    let stranger = rig.mallory.send_text(&rig.control, "/start codex hello");
    let usage = rig.command(&rig.control, "/start");
    assert!(usage.starts_with("usage: /start"), "{usage}");
    let listed = rig.command(&rig.control, "/sessions");
    assert_eq!(listed, "no hosted sessions");
    assert!(
        !rig.alice.messages(&rig.control).iter().any(|e| {
            e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == stranger.as_str()
        }),
        "the stranger got an answer"
    );
    assert!(rig.bridge_log().contains("ignoring @mallory:localhost"));

    // cohost itself takes the config file with the bridge's table in it.
    let shown = rig.fx.daemon.cli_ok(&["config", "show"]);
    assert!(!shown.contains("bridge"), "{shown}");

    let (session, room) = rig.start_session("codex");
    rig.wait_bot(&room, "the session's intro", |b| {
        b.starts_with(&format!("Session {session}"))
    });

    // A prompt: the reply streams into one message, edited in place, then the turn's end.
    let reply = "one two three four five six seven eight nine ten eleven twelve";
    rig.fx
        .mock
        .push(Step::text(reply).delay(Duration::from_millis(150)));
    let prompt = rig.alice.send_text(&room, "Count to twelve");
    let sent = rig.reply_to(&room, &prompt);
    assert_eq!(sent, "sent: a turn started");
    let (_, message) = rig.wait_bot(&room, "the whole reply", |b| b == reply);
    rig.wait_bot(&room, "the turn's end", |b| b == "— turn ended: completed");
    let events = rig.alice.messages(&room);
    assert!(
        edits_of(&events, &message) >= 2,
        "the reply was not streamed by edits in place: {:#?}",
        rig.seen(&room)
    );
    assert!(
        rig.fx
            .mock
            .received()
            .iter()
            .any(|r| r.last_user_text() == "Count to twelve"),
        "the prompt did not reach the model"
    );

    // A bad command answers its usage and changes nothing.
    let head = rig.fx.daemon.head();
    let bad = rig.command(&room, "/approve x");
    assert!(bad.starts_with("usage: /approve"), "{bad}");
    let unknown = rig.command(&room, "/frobnicate");
    assert!(
        unknown.contains("unknown command `/frobnicate`"),
        "{unknown}"
    );
    assert_eq!(
        rig.fx.daemon.head(),
        head,
        "a bad command changed cohost's log"
    );
    let listed = rig.command(&rig.control, "/sessions");
    assert!(
        listed.contains(&session) && listed.contains(&room),
        "{listed}"
    );
    assert_each_once(&rig.bot_bodies(&room));
}

#[test]
fn an_approval_is_answered_from_the_room_once_and_a_late_answer_is_told() {
    let rig = Rig::<CodexFixture>::start();
    let (_session, room) = rig.start_session("careful");
    rig.fx.mock.push(Step::exec("touch approved.txt"));
    rig.fx.mock.push(Step::text("Created it."));
    rig.command(&room, "Create approved.txt");
    let (msgtype, _) = rig.wait_bot(&room, "the approval", |b| b.starts_with("❓ Approval #1"));
    assert_eq!(msgtype, "m.text", "a live approval notifies");
    let answer = rig.command(&room, "/approve 1");
    assert_eq!(answer, "#1: accept");
    rig.wait_bot(&room, "the approval marked answered", |b| {
        b.starts_with("❓ Approval #1") && b.ends_with("→ accept by @alice:localhost")
    });
    rig.wait_bot(&room, "the reply", |b| b == "Created it.");
    rig.wait_bot(&room, "the turn's end", |b| b == "— turn ended: completed");
    assert!(rig.fx.work().join("approved.txt").exists());
    rig.wait_bot(&room, "the command's line", |b| {
        b.starts_with("⚙ `") && b.contains("touch approved.txt") && b.contains("— completed")
    });
    let late = rig.command(&room, "/approve 1");
    assert_eq!(late, "too late: approval #1 was already answered");
    let none = rig.command(&room, "/decline 7");
    assert_eq!(none, "there is no #7 in this room");
    assert_each_once(&rig.bot_bodies(&room));
}

#[test]
fn restarts_of_the_bridge_and_of_synapse_post_nothing_twice_and_miss_nothing() {
    let mut rig = Rig::<CodexFixture>::start();
    let (session, room) = rig.start_session("codex");

    // Killed mid-stream: the reply is one message, finished after the restart.
    let first = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";
    rig.fx
        .mock
        .push(Step::text(first).delay(Duration::from_millis(250)));
    rig.command(&room, "First");
    rig.wait_bot(&room, "the reply streaming", |b| {
        b.starts_with("alpha") && b.ends_with('…')
    });
    rig.kill_bridge();
    rig.fx.wait_turns_completed(&session, 1);
    rig.start_bridge();
    let (msgtype, _) = rig.wait_bot(&room, "the first reply whole", |b| b == first);
    assert_eq!(msgtype, "m.notice");
    let (end_type, _) = rig.wait_bot(&room, "the first turn's end", |b| {
        b == "— turn ended: completed"
    });
    assert_eq!(end_type, "m.notice", "no notification on replay");

    // A turn while the bridge is down is posted after it, once.
    rig.kill_bridge();
    rig.fx.mock.push(Step::text("Second answer."));
    rig.fx.send(&session, "Second");
    rig.fx.wait_turns_completed(&session, 2);
    rig.start_bridge();
    rig.wait_bot(&room, "the second reply", |b| b == "Second answer.");

    // Synapse restarts: the bridge's sync and sends resume; a prompt still reaches the agent.
    rig.synapse.restart();
    rig.fx.mock.push(Step::text("Third answer."));
    rig.command(&room, "Third");
    rig.wait_bot(&room, "the third reply", |b| b == "Third answer.");
    wait_until("three turn ends", WAIT, || {
        (ends(&rig.bot_bodies(&room)) == 3).then_some(())
    });

    // A restart with nothing new posts nothing.
    let before = rig.alice.messages(&room).len();
    rig.kill_bridge();
    rig.start_bridge();
    let probe = rig.command(&rig.control, "/sessions");
    assert!(probe.contains(&session), "{probe}");
    assert_eq!(
        rig.alice.messages(&room).len(),
        before,
        "{:#?}",
        rig.seen(&room)
    );

    let bodies = rig.bot_bodies(&room);
    assert_each_once(
        &bodies
            .iter()
            // Turn ends and command answers say the same words each time, by design.
            .filter(|b| !b.starts_with("— turn ended") && !b.starts_with("sent: "))
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(ends(&bodies), 3, "{bodies:#?}");
}

#[test]
fn interrupt_takeover_release_plan_mode_and_a_question_from_the_room() {
    let rig = Rig::<CodexFixture>::start();
    let (session, room) = rig.start_session("codex");
    // The hang answers this prompt only, and the interrupt waits until codex asked the model:
    // codex sends its request some time after `turn.started`, and an interrupt before it left
    // an unconditioned hang queued for the next prompt (seen once under load).
    rig.fx
        .mock
        .push(Step::hang().when_user_contains("Wait for me"));
    let asked = rig.fx.mock.main_requests().len();
    assert_eq!(rig.command(&room, "Wait for me"), "sent: a turn started");
    rig.fx.wait_event(&session, "the turn's start", |e| {
        e["type"] == "turn.started"
    });
    rig.fx.mock.wait_for_requests(asked + 1, WAIT);
    assert_eq!(
        rig.command(&room, "/interrupt"),
        "interrupted the running turn"
    );
    rig.wait_bot(&room, "the interrupted turn's end", |b| {
        b == "— turn ended: interrupted"
    });
    assert_eq!(rig.command(&room, "/interrupt"), "no turn was running");

    let lease = |holder: &str| {
        let view = rig
            .fx
            .daemon
            .get(&format!("/api/sessions/{session}/lease"))
            .assert_ok();
        assert_eq!(view["lease"]["holder"], holder, "{view}");
        view
    };
    let took = rig.command(&room, "/takeover");
    assert!(took.contains("lease human"), "{took}");
    assert_eq!(lease("human")["lease"]["by"], "@alice:localhost");
    let released = rig.command(&room, "/release");
    assert!(released.contains("lease managed"), "{released}");
    lease("managed");

    let plan = rig.command(&room, "/plan on");
    assert!(plan.starts_with("ok: "), "{plan}");
    assert_eq!(rig.fx.view(&session)["mode"], "plan");
    let usage = rig.command(&room, "/plan maybe");
    assert_eq!(usage, "usage: /plan on|off");
    assert_eq!(rig.fx.view(&session)["mode"], "plan");

    // In plan mode codex may ask: the question is numbered, answered by an option's number.
    rig.fx.mock.push(Step::function_call(
        "request_user_input",
        serde_json::json!({"questions": [{
            "id": "color",
            "header": "Color",
            "question": "Which color?",
            "options": [
                {"label": "Red (Recommended)", "description": "warm"},
                {"label": "Blue", "description": "cold"}
            ]
        }]}),
    ));
    rig.fx.mock.push(Step::text("Blue it is."));
    rig.command(&room, "Pick a color with me");
    // cohost's side first, so a failure says whether codex asked or the bridge did not post.
    rig.fx.wait_event(&session, "the question", |e| {
        e["type"] == "input.requested" && e["data"]["kind"] == "question"
    });
    let (msgtype, _) = rig.wait_bot(&room, "the question", |b| {
        b.starts_with("❓ #1 — the agent asks (question)") && b.contains("2. Blue — cold")
    });
    assert_eq!(msgtype, "m.text", "a live question notifies");
    assert_eq!(rig.command(&room, "/answer 1 2"), "#1: answered Blue");
    rig.wait_bot(&room, "the question marked answered", |b| {
        b.starts_with("❓ #1") && b.ends_with("→ answered by @alice:localhost")
    });
    rig.wait_bot(&room, "the reply", |b| b == "Blue it is.");
    assert_eq!(
        rig.command(&room, "/answer 1 1"),
        "too late: #1 was already answered"
    );
    assert_eq!(
        rig.command(&room, "/approve 1"),
        "#1 is a question: answer it with /answer 1 …"
    );
}

#[test]
fn over_https_the_bridge_trusts_its_ca_file_renders_markdown_and_refuses_an_unknown_certificate() {
    let rig = Rig::<CodexFixture>::start_tls();
    let (session, room) = rig.start_session("codex");
    rig.wait_bot(&room, "the session's intro", |b| {
        b.starts_with(&format!("Session {session}"))
    });

    // The agent's Markdown is rendered as the HTML Matrix clients show; raw HTML stays text.
    let reply = "**Done**: see `main.rs`\n\n- one\n- two <b>not bold</b>";
    rig.fx.mock.push(Step::text(reply));
    let prompt = rig.alice.send_text(&room, "Format it");
    assert_eq!(rig.reply_to(&room, &prompt), "sent: a turn started");
    let (_, message) = rig.wait_bot(&room, "the Markdown reply", |b| b == reply);
    let content = latest_content(&rig.alice.messages(&room), &message);
    assert_eq!(content["format"], "org.matrix.custom.html", "{content:#}");
    let html = content["formatted_body"].as_str().unwrap_or("");
    for part in [
        "<strong>Done</strong>",
        "<code>main.rs</code>",
        "<li>one</li>",
        "&lt;b&gt;not bold&lt;/b&gt;",
    ] {
        assert!(html.contains(part), "no {part} in {html:?}");
    }
    let (_, end) = rig.wait_bot(&room, "the turn's end", |b| b == "— turn ended: completed");
    let end = latest_content(&rig.alice.messages(&room), &end);
    assert!(
        end.get("formatted_body").is_none(),
        "plain text got HTML: {end:#}"
    );

    // Trusting only Mozilla's roots (no ca_file), the bridge refuses the homeserver's
    // certificate at start, saying so, and exits.
    let config = std::fs::read_to_string(rig.config_file()).unwrap();
    let dir = temp_dir("cohost-matrix-untrusting-");
    let untrusting = dir.path().join("config.toml");
    let text: Vec<&str> = config
        .lines()
        .filter(|l| !l.starts_with("ca_file"))
        .collect();
    std::fs::write(&untrusting, text.join("\n")).unwrap();
    std::fs::set_permissions(&untrusting, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut child = Command::new(BRIDGE)
        .arg("--config")
        .arg(&untrusting)
        .arg("--home")
        .arg(rig.fx.daemon.home())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "the bridge that trusts no CA of this homeserver did not exit: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("ready"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("TLS with the homeserver failed") && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
}
