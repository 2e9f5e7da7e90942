//! Adopting a codex TUI a person started by hand (issue 25): the real codex TUI (the release
//! the version matrix names) run in a pane of a private tmux server with a private `HOME` and
//! `CODEX_HOME`, against the scripted [`MockResponses`]; the codex watcher places it in its
//! pane, and `POST /api/state/{session}/agents/{key}/adopt` makes it a session: a prompt from
//! HTTP typed into its composer and its turn as session events from the rollout, a person's
//! draft never typed over, Escape to interrupt, `disown`, and the end when its pane goes.

use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) use crate::suite::adopting::{HAND, WAIT, adopt, events, send, wait_event};
use crate::suite::adopting::{assert_no_repeats, disown_to_watched};
use crate::suite::watch::common::{daemon_watching, wait_instance};
use crate::support::claude_env::is_running;
use crate::support::codex_home::{MOCK_API_KEY, MOCK_API_KEY_ENV, codex_bin, write_codex_home};
use crate::support::mock_responses::{MockResponses, Step};
use crate::support::tmux::TmuxServer;
use crate::support::{TestDaemon, temp_dir};

pub(crate) const AGENT: &str = "codex";

pub(crate) struct Rig {
    pub(crate) tmux: TmuxServer,
    pub(crate) mock: MockResponses,
    home: PathBuf,
    codex_home: PathBuf,
    pub(crate) work: PathBuf,
    pub(crate) pane: String,
    pub(crate) pid: u32,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// A codex TUI started by hand in tmux session `hand`, ready for a prompt.
    pub(crate) fn start() -> Rig {
        let mock = MockResponses::start();
        let dir = temp_dir("cohost-adopt-codex-");
        let home = dir.path().join("home");
        let codex_home = home.join(".codex");
        let work = dir.path().join("ws");
        std::fs::create_dir_all(&work).expect("mkdir ws");
        let work = work.canonicalize().expect("canonical ws");
        write_codex_home(&codex_home, &mock.base_url(), &work);
        let tmux = TmuxServer::new();
        let env: Vec<(String, String)> = [
            ("HOME", home.to_string_lossy().into_owned()),
            ("CODEX_HOME", codex_home.to_string_lossy().into_owned()),
            (MOCK_API_KEY_ENV, MOCK_API_KEY.to_owned()),
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("TERM", "xterm-256color".to_owned()),
            ("LANG", "C.UTF-8".to_owned()),
            ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let argv = vec![codex_bin().to_string_lossy().into_owned()];
        let (pane, pid) = tmux.launch(HAND, &work, &env, &argv);
        let rig = Rig {
            tmux,
            mock,
            home,
            codex_home,
            work,
            pane,
            pid,
            _dir: dir,
        };
        rig.wait_screen("the codex prompt", |s| {
            s.contains("Ask Codex to do anything")
        });
        rig
    }

    pub(crate) fn screen(&self) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", &self.pane])
    }

    #[track_caller]
    pub(crate) fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the pane never showed {what}:\n{screen}"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.pane.as_str()];
        args.extend_from_slice(keys);
        self.tmux.run(&args);
    }

    /// Types `text` as a person does until the composer shows it. The TUI may drop keys while
    /// it starts, so it is typed again when it does not show — each time after Ctrl-U (codex's
    /// kill to the start of the line), so the composer ends holding `text` once whether the
    /// earlier keys were dropped or only slow to show (the pane keeps keys in order; typed
    /// again without it, a slow first try showed as `texttext`, seen under load).
    pub(crate) fn type_text(&self, text: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.keys(&["C-u"]);
            self.keys(&["-l", text]);
            let shown = Instant::now() + Duration::from_secs(3);
            while Instant::now() < shown {
                if self.screen().contains(text) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            assert!(Instant::now() < deadline, "never typed:\n{}", self.screen());
        }
    }

    /// Pastes `text` into the composer as a bracketed paste (as a person's terminal pastes it)
    /// until the composer shows it, again after Ctrl-U when it does not (see
    /// [`Rig::type_text`]). Enter after a paste submits it; Enter right after typed keys may not
    /// (codex takes a fast burst of keys for a paste and the Enter in it for a newline;
    /// codex-app-server-observed.md §16).
    pub(crate) fn paste_text(&self, text: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.keys(&["C-u"]);
            self.tmux.run(&["set-buffer", "-b", "by-hand", "--", text]);
            self.tmux.run(&[
                "paste-buffer",
                "-p",
                "-d",
                "-b",
                "by-hand",
                "-t",
                &self.pane,
            ]);
            let shown = Instant::now() + Duration::from_secs(3);
            while Instant::now() < shown {
                if self.screen().contains(text) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            assert!(
                Instant::now() < deadline,
                "never pasted:\n{}",
                self.screen()
            );
        }
    }

    pub(crate) fn daemon(&self) -> TestDaemon {
        let codex_home = self.codex_home.to_string_lossy().into_owned();
        daemon_watching(
            &self.tmux,
            AGENT,
            &self.home,
            // The key lets cohost's own app-server reach the mock too (a rehome).
            &[
                ("CODEX_HOME", &codex_home),
                (MOCK_API_KEY_ENV, MOCK_API_KEY),
            ],
        )
    }

    /// The app-server daemons codex leaves behind (`$CODEX_HOME/app-server-daemon`).
    fn kill_daemons(&self) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let needle = self.codex_home.to_string_lossy().into_owned();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if is_running(self.pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = self.tmux.command(&["kill-server"]);
        self.kill_daemons();
    }
}

/// A first turn put in by hand (pasted, then Enter) in the rig's TUI (it writes the rollout
/// the watcher places); answers the watched instance once that turn is done.
pub(crate) fn turn_by_hand(rig: &Rig, daemon: &TestDaemon) -> Value {
    rig.mock.push(Step::text("Hand reply."));
    rig.paste_text("Hello by hand");
    rig.keys(&["Enter"]);
    rig.wait_screen("the reply of the turn put in by hand", |s| {
        s.contains("Hand reply.")
    });
    wait_instance(daemon, AGENT, "the watched codex, done", |i| {
        i["status"] == "done" && i["paneId"] == rig.pane.as_str()
    })
    .1
}

#[test]
fn a_codex_tui_started_by_hand_is_adopted_driven_interrupted_given_back_and_ends_with_its_pane() {
    let rig = Rig::start();
    let daemon = rig.daemon();
    let watched = turn_by_hand(&rig, &daemon);
    assert_eq!(watched["control"], "watched", "{watched:#}");
    assert_eq!(watched["adoptable"], true, "{watched:#}");
    let key = watched["key"].as_str().unwrap().to_string();
    let thread = watched["threadId"].as_str().unwrap().to_string();

    let (status, adopted) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let view = &adopted["session"];
    let id = view["id"].as_str().unwrap().to_string();
    assert_eq!(view["runtime"], "codex", "{view:#}");
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["threadId"], thread.as_str(), "{view:#}");
    assert_eq!(view["paneId"], rig.pane.as_str(), "{view:#}");
    let tui = view["adopted"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(
        tui, rig.pid,
        "the TUI under the pane's process, not the pane's own"
    );
    let (again, refused) = adopt(&daemon, &key);
    assert_eq!(again, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "already_driven", "{refused:#}");

    // A prompt from HTTP is typed, submitted and completes; its turn is session events.
    rig.mock.push(Step::text("Adopted reply."));
    let (status, sent) = send(&daemon, &id, "Hello from HTTP");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_event(&daemon, &id, "the turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let all = events(&daemon, &id);
    let started = all
        .iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["turnId"] == turn.as_str())
        .expect("turn.started");
    assert_eq!(started["data"]["source"], "api");
    let texts: Vec<(String, String)> = all
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter_map(|e| {
            Some((
                e["data"]["item"]["type"].as_str()?.to_string(),
                e["data"]["item"]["text"].as_str()?.to_string(),
            ))
        })
        .collect();
    assert!(
        texts.contains(&("userMessage".into(), "Hello from HTTP".into()))
            && texts.contains(&("agentMessage".into(), "Adopted reply.".into())),
        "{texts:?}"
    );

    // A person's draft is never typed over.
    rig.type_text("half typed by a person");
    let requests = rig.mock.main_requests().len();
    let (status, refused) = send(&daemon, &id, "typed over a draft");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "human_typing", "{refused}");
    let screen = rig.screen();
    assert!(screen.contains("half typed by a person"), "{screen}");
    assert!(!screen.contains("typed over a draft"), "{screen}");
    assert_eq!(rig.mock.main_requests().len(), requests);
    // The person clears their composer (Ctrl-C clears a composer with text).
    rig.keys(&["C-c"]);
    rig.wait_screen("the cleared composer", |s| {
        !s.contains("half typed by a person")
    });

    // Escape interrupts a running turn.
    rig.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    let (status, sent) = send(&daemon, &id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    rig.wait_screen("the streamed text", |s| s.contains("Once upon a time"));
    let interrupted = daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(
        interrupted["interrupted"],
        true,
        "{interrupted}\n{}",
        rig.tmux
            .run(&["capture-pane", "-p", "-e", "-t", &rig.pane])
            .replace('\u{1b}', "^[")
    );
    let ended = wait_event(&daemon, &id, "the interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == long.as_str()
    });
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");

    // Given back: the session ends, the TUI keeps running, watched again; no turn or item
    // stored twice.
    disown_to_watched(&daemon, &id, AGENT, &key, tui);
    assert_no_repeats(&events(&daemon, &id));

    // Adopted again, then its pane closes: the session ends, saying so; nothing more adopts.
    let (status, again) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{again:#}");
    let second = again["session"]["id"].as_str().unwrap().to_string();
    rig.tmux.run(&["kill-pane", "-t", &rig.pane]);
    let closed = wait_event(&daemon, &second, "session.closed", |e| {
        e["type"] == "session.closed"
    });
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("pane gone") || r.starts_with("agent exited")),
        "{closed}"
    );
    let (status, refused) = adopt(&daemon, &key);
    assert!(
        (400..500).contains(&status),
        "a codex whose pane is gone is not adopted: {status} {refused:#}"
    );
    let _ = &rig.work;
}
