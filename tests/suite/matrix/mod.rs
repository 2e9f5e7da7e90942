//! The Matrix bridge (`cohost-matrix`) against a real Synapse and real hosted sessions on the
//! kit's mock models: the rig every test starts from (a homeserver with the bot, a person and a
//! stranger, a control room, the bridge configured in cohost's config file and running), for a
//! codex ([`codex`]) or a Claude ([`claude`]) daemon, and `/start` of cohost's agent profiles
//! ([`profiles`]).

mod claude;
mod codex;
mod profiles;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::TestDaemon;
use crate::support::claude_host::ClaudeFixture;
use crate::support::codex_host::CodexFixture;
use crate::support::synapse::{MatrixUser, Synapse, as_seen};
use crate::support::temp_dir;

const BRIDGE: &str = env!("CARGO_BIN_EXE_cohost-matrix");
/// How long the bridge may take to show something in a room: a hang detector, as long as the
/// other hosted suites' turn deadline.
const WAIT: Duration = Duration::from_secs(90);
const BOT: &str = "@cohostbot:localhost";

/// The daemon fixture a rig bridges: codex's or Claude's, each with its mock model.
trait Host {
    fn start() -> Self;
    fn daemon(&self) -> &TestDaemon;
    fn daemon_mut(&mut self) -> &mut TestDaemon;
    /// Where the bridge's `/start RUNTIME` runs the agent.
    fn work_dir(&self) -> &Path;
}

impl Host for CodexFixture {
    fn start() -> Self {
        CodexFixture::start()
    }
    fn daemon(&self) -> &TestDaemon {
        &self.daemon
    }
    fn daemon_mut(&mut self) -> &mut TestDaemon {
        &mut self.daemon
    }
    fn work_dir(&self) -> &Path {
        self.work()
    }
}

impl Host for ClaudeFixture {
    fn start() -> Self {
        ClaudeFixture::start()
    }
    fn daemon(&self) -> &TestDaemon {
        &self.daemon
    }
    fn daemon_mut(&mut self) -> &mut TestDaemon {
        &mut self.daemon
    }
    fn work_dir(&self) -> &Path {
        &self.work
    }
}

struct Rig<H: Host> {
    fx: H,
    synapse: Synapse,
    alice: MatrixUser,
    mallory: MatrixUser,
    control: String,
    log: PathBuf,
    bridge: Option<Child>,
    ready: Option<Receiver<String>>,
    _dir: tempfile::TempDir,
}

impl<H: Host> Rig<H> {
    fn start() -> Rig<H> {
        Rig::start_with("")
    }

    /// [`Rig::start`] with `daemon_toml` (agent profiles, …) added to cohost's config file;
    /// when there is some, the daemon is restarted to read it (it reads the file when it
    /// starts) before the bridge starts.
    fn start_with(daemon_toml: &str) -> Rig<H> {
        Rig::start_over(false, daemon_toml)
    }

    /// [`Rig::start`] with the bridge on Synapse's TLS listener, trusting its test CA
    /// (`ca_file`); the people stay on the plain listener.
    fn start_tls() -> Rig<H> {
        Rig::start_over(true, "")
    }

    fn start_over(tls: bool, daemon_toml: &str) -> Rig<H> {
        let mut fx = H::start();
        let synapse = if tls {
            Synapse::start_tls()
        } else {
            Synapse::start()
        };
        let homeserver = if tls {
            format!(
                "homeserver = \"{}\"\nca_file = \"{}\"",
                synapse.tls_url(),
                synapse.ca_file().display()
            )
        } else {
            format!("homeserver = \"{}\"", synapse.base_url())
        };
        synapse.register("cohostbot", "bot-password");
        let alice = synapse.user("alice");
        let mallory = synapse.user("mallory");
        let control = alice.create_room("cohost control", &[BOT, &mallory.user_id]);
        assert_eq!(mallory.join(&control).0, 200);
        let dir = temp_dir("cohost-matrix-");
        let secret = dir.path().join("bot-password");
        std::fs::write(&secret, "bot-password\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Where cohost itself reads its config file: the daemon must take the bridge's table.
        let config_dir = fx.daemon().config_dir().join("cohost");
        std::fs::create_dir_all(&config_dir).unwrap();
        let config = config_dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                r#"[bridge.matrix]
{homeserver}
user = "{BOT}"
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

{daemon_toml}"#,
                secret = secret.display(),
                alice = alice.user_id,
                cwd = fx.work_dir().display(),
                state = dir.path().join("state.json").display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        if !daemon_toml.is_empty() {
            fx.daemon_mut().restart();
        }
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
            .env("XDG_CONFIG_HOME", self.fx.daemon().config_dir())
            .env_remove("COHOST_CONFIG")
            .arg("--home")
            .arg(self.fx.daemon().home())
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

    /// cohost's config file, which holds the bridge's table.
    fn config_file(&self) -> PathBuf {
        self.fx
            .daemon()
            .config_dir()
            .join("cohost")
            .join("config.toml")
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
        let deadline = Instant::now() + WAIT;
        while found.is_none() {
            found = self
                .alice
                .messages(room)
                .into_iter()
                .find(|e| e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == to);
            if found.is_none() {
                assert!(
                    Instant::now() < deadline,
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
        let deadline = Instant::now() + WAIT;
        loop {
            let invites = self.alice.invites();
            if invites.contains(&room) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no invite to {room} (alice's invites: {invites:?}); bridge log:\n{}",
                self.bridge_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(self.alice.join(&room).0, 200);
        (session, room)
    }

    /// Waits until the room shows a bot message whose (latest) body satisfies `pred`.
    #[track_caller]
    fn wait_bot(&self, room: &str, what: &str, pred: impl Fn(&str) -> bool) -> (String, String) {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen = self.seen(room);
            if let Some(row) = seen.iter().find(|r| r.0 == BOT && pred(&r.2)) {
                return (row.1.clone(), row.3.clone());
            }
            assert!(
                Instant::now() < deadline,
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
            .filter(|r| r.0 == BOT)
            .map(|r| r.2)
            .collect()
    }
}

impl<H: Host> Drop for Rig<H> {
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

/// The content people see for the message `target`: its latest edit's `m.new_content`, else
/// its own.
fn latest_content(events: &[Value], target: &str) -> Value {
    let edit = events.iter().rev().find(|e| {
        e["content"]["m.relates_to"]["rel_type"] == "m.replace"
            && e["content"]["m.relates_to"]["event_id"] == target
    });
    match edit {
        Some(edit) => edit["content"]["m.new_content"].clone(),
        None => events
            .iter()
            .find(|e| e["event_id"] == target)
            .map(|e| e["content"].clone())
            .unwrap_or(Value::Null),
    }
}
