//! The Matrix bridge (`cohost-matrix`) against a real Synapse and a real hosted codex session
//! (the kit's mock model): a prompt from the room streams back edited in place, an approval is
//! answered from the room (and a second answer is too late), a question answered by an option's
//! number, `/interrupt`, `/takeover`, `/release`, `/plan`, a bad command answers its usage,
//! a stranger is ignored, and restarts of the bridge and of Synapse post nothing twice.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;
use crate::support::synapse::{MatrixUser, Synapse, as_seen};
use crate::support::{temp_dir, wait_until};

const BRIDGE: &str = env!("CARGO_BIN_EXE_cohost-matrix");
/// How long the bridge may take to show something in a room: a hang detector, as long as the
/// other hosted suites' turn deadline.
const WAIT: Duration = Duration::from_secs(90);

struct Rig {
    fx: CodexFixture,
    synapse: Synapse,
    alice: MatrixUser,
    mallory: MatrixUser,
    control: String,
    log: PathBuf,
    bridge: Option<Child>,
    ready: Option<Receiver<String>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn start() -> Rig {
        let fx = CodexFixture::start();
        let synapse = Synapse::start();
        synapse.register("cohostbot", "bot-password");
        let alice = synapse.user("alice");
        let mallory = synapse.user("mallory");
        let bot = "@cohostbot:localhost";
        let control = alice.create_room("cohost control", &[bot, &mallory.user_id]);
        assert_eq!(mallory.join(&control).0, 200);
        let dir = temp_dir("cohost-matrix-");
        let secret = dir.path().join("bot-password");
        std::fs::write(&secret, "bot-password\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Where cohost itself reads its config file: the daemon must take the bridge's table.
        let config_dir = fx.daemon.config_dir().join("cohost");
        std::fs::create_dir_all(&config_dir).unwrap();
        let config = config_dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                r#"[bridge.matrix]
homeserver = "{hs}"
user = "{bot}"
password_file = "{secret}"
allowed_users = ["{alice}"]
control_room = "{control}"
cwd = "{cwd}"
edit_interval_ms = 300
state_file = "{state}"

[bridge.matrix.profiles.careful]
runtime = "codex"
approval_policy = "untrusted"
sandbox = "workspace-write"
"#,
                hs = synapse.base_url(),
                secret = secret.display(),
                alice = alice.user_id,
                cwd = fx.work().display(),
                state = dir.path().join("state.json").display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let log = dir.path().join("bridge.log");
        let mut rig = Rig {
            fx,
            synapse,
            alice,
            mallory,
            control,
            log,
            bridge: None,
            ready: None,
            _dir: dir,
        };
        rig.start_bridge();
        rig
    }

    fn start_bridge(&mut self) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(BRIDGE)
            .env("XDG_CONFIG_HOME", self.fx.daemon.config_dir())
            .env_remove("COHOST_CONFIG")
            .arg("--home")
            .arg(self.fx.daemon.home())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        match rx.recv_timeout(WAIT) {
            Ok(line) if line == "cohost-matrix ready" => {}
            other => panic!(
                "the bridge did not get ready ({other:?}):\n{}",
                self.bridge_log()
            ),
        }
        self.bridge = Some(child);
        self.ready = Some(rx);
    }

    /// SIGKILL: the bridge gets no chance to save anything more.
    fn kill_bridge(&mut self) {
        if let Some(mut child) = self.bridge.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn bridge_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn seen(&self, room: &str) -> Vec<(String, String, String, String)> {
        as_seen(&self.alice.messages(room))
    }

    /// The bot's answer to the event `to` (a reply to it), once it is there.
    #[track_caller]
    fn reply_to(&self, room: &str, to: &str) -> String {
        let log = || self.bridge_log();
        let mut found = None;
        let deadline = std::time::Instant::now() + WAIT;
        while found.is_none() {
            found = self
                .alice
                .messages(room)
                .into_iter()
                .find(|e| e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == to);
            if found.is_none() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no answer to {to} in {room}; the room: {:#?}\nbridge log:\n{}",
                    self.seen(room),
                    log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        found.unwrap()["content"]["body"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Says `text` in `room` and answers the bot's reply.
    #[track_caller]
    fn command(&self, room: &str, text: &str) -> String {
        let id = self.alice.send_text(room, text);
        self.reply_to(room, &id)
    }

    /// `/start TARGET` in the control room; joins the session's room and answers (session,
    /// room).
    #[track_caller]
    fn start_session(&self, target: &str) -> (String, String) {
        let answer = self.command(&self.control, &format!("/start {target}"));
        assert!(answer.starts_with("started "), "{answer}");
        let session = answer["started ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        let room = answer
            .split("its room is ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap()
            .to_string();
        wait_until("alice's invite to the session room", WAIT, || {
            self.alice.invites().contains(&room).then_some(())
        });
        assert_eq!(self.alice.join(&room).0, 200);
        (session, room)
    }

    /// Waits until the room shows a bot message whose (latest) body satisfies `pred`.
    #[track_caller]
    fn wait_bot(&self, room: &str, what: &str, pred: impl Fn(&str) -> bool) -> (String, String) {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let seen = self.seen(room);
            if let Some(row) = seen
                .iter()
                .find(|r| r.0 == "@cohostbot:localhost" && pred(&r.2))
            {
                return (row.1.clone(), row.3.clone());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}; the room: {seen:#?}\nbridge log:\n{}",
                self.bridge_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The bot's messages in the room (edits applied), each body with how often it is there.
    fn bot_bodies(&self, room: &str) -> Vec<String> {
        self.seen(room)
            .into_iter()
            .filter(|r| r.0 == "@cohostbot:localhost")
            .map(|r| r.2)
            .collect()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill_bridge();
    }
}

fn edits_of(events: &[Value], target: &str) -> usize {
    events
        .iter()
        .filter(|e| {
            e["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && e["content"]["m.relates_to"]["event_id"] == target
        })
        .count()
}

fn ends(bodies: &[String]) -> usize {
    bodies
        .iter()
        .filter(|b| *b == "— turn ended: completed")
        .count()
}

fn assert_each_once(bodies: &[String]) {
    for body in bodies {
        let n = bodies.iter().filter(|b| *b == body).count();
        assert_eq!(n, 1, "posted {n} times: {body:?}\nall: {bodies:#?}");
    }
}

#[test]
fn a_prompt_from_the_room_streams_back_and_bad_commands_and_strangers_change_nothing() {
    let rig = Rig::start();

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
    let rig = Rig::start();
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
    let mut rig = Rig::start();
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
    let rig = Rig::start();
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
