//! Adopting an OpenCode TUI a person started by hand (issue 25): the real `opencode` (the
//! pinned release, `COHOST_TEST_OPENCODE_BIN`) run from a shell in a pane of a private tmux
//! server with a private `HOME`, against the kit's Messages mock; the OpenCode watcher places
//! it in its pane, and `POST /api/state/{session}/agents/{key}/adopt` makes it a session:
//! prompts from HTTP pasted into its input box, confirmed by its database, their turns (a tool
//! call with its output) as session events, a person's draft never typed over, Escape twice to
//! interrupt, a daemon restart that loses and repeats nothing, `disown`, and the end when
//! OpenCode exits; its permission dialog relayed as an approval, answered by its own key only
//! while the screen is exactly the known dialog; and a pane whose OpenCode exited, which shows a
//! shell and is never adopted or typed into.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::suite::adopting::{
    HAND, adopt, answer, assert_no_repeats, child_named, disown_to_watched, events, pane_keys,
    pane_screen, prompt_approval, send, type_in_pane, wait_event, wait_pane, wait_turn_end,
};
use crate::suite::watch::common::{daemon_watching, wait_instance};
use crate::support::hosted::{MOCK_MODELS, write_opencode_config};
use crate::support::mock_messages::{MockMessages, Step};
use crate::support::tmux::TmuxServer;
use crate::support::{TestDaemon, temp_dir};

pub(super) const AGENT: &str = "opencode";

pub(super) struct Rig {
    pub(super) tmux: TmuxServer,
    pub(super) mock: MockMessages,
    pub(super) home: PathBuf,
    /// OpenCode's working directory.
    pub(super) work: PathBuf,
    pub(super) pane: String,
    /// The pane's own process: the shell OpenCode was started from.
    pub(super) shell: u32,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// A shell in tmux session `hand` runs `opencode` and stays once it exits
    /// (`opencode-exit=<status>`, then an interactive shell). Waits for OpenCode's input box.
    pub(super) fn start() -> Rig {
        Rig::start_with(&[])
    }

    /// [`Rig::start`] with more environment for OpenCode (`OPENCODE_PERMISSION`).
    fn start_with(extra: &[(&str, &str)]) -> Rig {
        let bin = super::opencode_bin();
        let mock = MockMessages::start();
        let dir = temp_dir("cohost-adopt-opencode-");
        let home = dir.path().join("home");
        let work = dir.path().join("ws");
        std::fs::create_dir_all(&work).expect("mkdir ws");
        let work = work.canonicalize().expect("canonical ws");
        write_opencode_config(&home, &mock, &MOCK_MODELS).expect("opencode's config");
        let tmux = TmuxServer::new();
        let mut env: Vec<(String, String)> = [
            ("HOME", home.to_string_lossy().into_owned()),
            ("TERM", "xterm-256color".into()),
            ("LANG", "C.UTF-8".into()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for name in [
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        ] {
            env.push((name.to_owned(), "1".to_owned()));
        }
        for (name, value) in extra {
            env.push(((*name).to_owned(), (*value).to_owned()));
        }
        let argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            r#""$@"; echo "opencode-exit=$?"; exec sh"#.into(),
            "sh".into(),
            bin.to_string_lossy().into_owned(),
        ];
        let (pane, shell) = tmux.launch(HAND, &work, &env, &argv);
        let rig = Rig {
            tmux,
            mock,
            home,
            work,
            pane,
            shell,
            _dir: dir,
        };
        rig.wait_screen("opencode's input box", |s| s.contains("Ask anything"));
        rig
    }

    pub(super) fn screen(&self) -> String {
        pane_screen(&self.tmux, &self.pane)
    }

    /// The screen with its attributes (`capture-pane -e`): which option a dialog selects.
    fn styled_screen(&self) -> String {
        self.tmux
            .run(&["capture-pane", "-p", "-e", "-t", &self.pane])
    }

    #[track_caller]
    pub(super) fn wait_screen(&self, what: &str, check: impl Fn(&str) -> bool) {
        wait_pane(&self.tmux, &self.pane, what, check);
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        pane_keys(&self.tmux, &self.pane, keys);
    }

    /// Types `text` as a person does and waits until the box shows it.
    pub(super) fn type_text(&self, text: &str) {
        type_in_pane(&self.tmux, &self.pane, text);
    }

    fn daemon(&self) -> TestDaemon {
        daemon_watching(&self.tmux, AGENT, &self.home, &[])
    }

    /// OpenCode's pid: the `opencode` process under the pane's shell.
    pub(super) fn opencode_pid(&self) -> Option<u32> {
        child_named(self.shell, "opencode")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(pid) = self.opencode_pid() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = self.tmux.command(&["kill-server"]);
    }
}

/// The items of a type in the session's events: `(turn, item)`.
pub(super) fn items(daemon: &TestDaemon, id: &str, kind: &str) -> Vec<(String, Value)> {
    events(daemon, id)
        .into_iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == kind)
        .map(|e| {
            (
                e["data"]["turnId"].as_str().unwrap_or_default().to_string(),
                e["data"]["item"].clone(),
            )
        })
        .collect()
}

/// An OpenCode started by hand, its first turn typed there, then adopted over HTTP.
pub(super) struct ByHand {
    /// The watched instance's key and OpenCode's session id.
    pub(super) key: String,
    pub(super) thread: String,
    /// The cohost session that drives it, and OpenCode's pid.
    pub(super) id: String,
    pub(super) pid: u32,
}

/// [`turn_by_hand`], then the instance adopted (`201`).
pub(super) fn adopted_by_hand(rig: &Rig, daemon: &TestDaemon) -> ByHand {
    let watched = turn_by_hand(rig, daemon);
    let key = watched["key"].as_str().unwrap().to_string();
    let thread = watched["threadId"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    ByHand {
        key,
        thread,
        id: adopted["session"]["id"].as_str().unwrap().to_string(),
        pid: adopted["session"]["adopted"]["pid"].as_u64().unwrap() as u32,
    }
}

/// A first turn typed by hand (OpenCode stores its session, which the watcher places); answers
/// the watched instance once that turn is done.
pub(super) fn turn_by_hand(rig: &Rig, daemon: &TestDaemon) -> Value {
    rig.mock.push(Step::text("Hand reply."));
    rig.type_text("Hello by hand");
    rig.keys(&["Enter"]);
    rig.wait_screen("the reply of the turn typed by hand", |s| {
        s.contains("Hand reply.")
    });
    wait_instance(daemon, AGENT, "the watched opencode, done", |i| {
        i["status"] == "done" && i["paneId"] == rig.pane.as_str()
    })
    .1
}

#[test]
fn an_opencode_started_by_hand_is_adopted_driven_interrupted_restarted_given_back_and_ends_with_its_exit()
 {
    let rig = Rig::start();
    let mut daemon = rig.daemon();
    let watched = turn_by_hand(&rig, &daemon);
    assert_eq!(watched["control"], "watched", "{watched:#}");
    assert_eq!(watched["adoptable"], true, "{watched:#}");
    let key = watched["key"].as_str().unwrap().to_string();
    let thread = watched["threadId"].as_str().unwrap().to_string();

    let (status, adopted) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let view = &adopted["session"];
    let id = view["id"].as_str().unwrap().to_string();
    assert_eq!(view["runtime"], "opencode", "{view:#}");
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["threadId"], thread.as_str(), "{view:#}");
    assert_eq!(view["paneId"], rig.pane.as_str(), "{view:#}");
    assert_eq!(view["adopted"]["panePid"], rig.shell, "{view:#}");
    let pid = view["adopted"]["pid"].as_u64().unwrap() as u32;
    assert_eq!(Some(pid), rig.opencode_pid(), "{view:#}");
    let (again, refused) = adopt(&daemon, &key);
    assert_eq!(again, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "already_driven", "{refused:#}");

    // A prompt from HTTP is pasted, submitted, confirmed and completes; its turn (a tool call
    // with its output) is session events.
    rig.mock
        .push(Step::tool_use(
            "bash",
            json!({"command": "echo hi", "description": "Print hi"}),
        ))
        .push(Step::text("Adopted reply.").when_tool_result());
    let (status, sent) = send(&daemon, &id, "Run echo hi from HTTP");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&daemon, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let all = events(&daemon, &id);
    let started = all
        .iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["turnId"] == turn.as_str())
        .expect("turn.started");
    assert_eq!(started["data"]["source"], "api", "{started}");
    let prompts = items(&daemon, &id, "userMessage");
    assert!(
        prompts
            .iter()
            .any(|(t, i)| *t == turn && i["text"] == "Run echo hi from HTTP"),
        "{prompts:?}"
    );
    let replies = items(&daemon, &id, "agentMessage");
    assert!(
        replies
            .iter()
            .any(|(t, i)| *t == turn && i["text"] == "Adopted reply."),
        "{replies:?}"
    );
    let commands = items(&daemon, &id, "command");
    assert!(
        commands.iter().any(|(t, i)| *t == turn
            && i["command"] == "echo hi"
            && i["output"] == "hi\n"
            && i["status"] == "completed"),
        "{commands:?}"
    );
    // No turn was stored interrupted on the way (the running turn is held back, not closed).
    assert!(
        !all.iter()
            .any(|e| e["type"] == "turn.completed" && e["data"]["status"] == "interrupted"),
        "{all:#?}"
    );
    // The turn typed by hand before the adoption is not the session's.
    assert!(
        !prompts.iter().any(|(_, i)| i["text"] == "Hello by hand"),
        "{prompts:?}"
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
    // The person clears the box (Ctrl-U clears the cursor's line).
    rig.keys(&["C-u"]);
    rig.wait_screen("the cleared box", |s| !s.contains("half typed by a person"));

    // Escape twice interrupts a running turn.
    rig.mock.push(Step::text("Once upon a time\n").then_hang());
    let (status, sent) = send(&daemon, &id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    rig.wait_screen("the streamed text", |s| s.contains("Once upon a time"));
    // While the turn runs nothing is typed: the prompt is refused, not queued.
    let (status, refused) = send(&daemon, &id, "sent while it runs");
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "not_ready", "{refused}");
    assert!(
        !rig.screen().contains("sent while it runs"),
        "{}",
        rig.screen()
    );
    let interrupted = daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    let ended = wait_turn_end(&daemon, &id, &long);
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");
    // With no turn running there is nothing to interrupt: no key is sent.
    let idle = daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(idle["interrupted"], false, "{idle}");

    // The daemon stops; a person runs a turn in the pane meanwhile. After the restart that turn
    // is the session's (nothing lost) and nothing is stored twice.
    let before = events(&daemon, &id).len();
    daemon.stop();
    rig.mock.push(Step::text("While cohost was away."));
    rig.type_text("Typed while cohost was away");
    rig.keys(&["Enter"]);
    rig.wait_screen("the reply while the daemon was away", |s| {
        s.contains("While cohost was away.")
    });
    daemon.start_again();
    let away = wait_event(&daemon, &id, "the turn typed while away", |e| {
        e["type"] == "item.completed"
            && e["data"]["item"]["type"] == "agentMessage"
            && e["data"]["item"]["text"] == "While cohost was away."
    });
    let away_turn = away["data"]["turnId"].as_str().unwrap().to_string();
    let away_end = wait_turn_end(&daemon, &id, &away_turn);
    assert_eq!(away_end["data"]["status"], "completed", "{away_end}");
    let started = events(&daemon, &id)
        .into_iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["turnId"] == away_turn.as_str())
        .expect("the away turn's start");
    assert_eq!(started["data"]["source"], "terminal", "{started}");
    let after = events(&daemon, &id);
    assert!(after.len() > before, "{after:#?}");
    assert_no_repeats(&after);
    let prompts = items(&daemon, &id, "userMessage");
    assert!(
        !prompts.iter().any(|(_, i)| i["text"] == "Hello by hand"),
        "{prompts:?}"
    );
    // It still drives OpenCode after the restart; a prompt of three lines, which OpenCode's
    // box shows as `[Pasted ~3 lines]`, is submitted whole.
    rig.mock.push(Step::text("After the restart."));
    let (status, sent) = send(&daemon, &id, "After the restart\nplease\nreply");
    assert_eq!(status, 200, "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    assert_eq!(
        wait_turn_end(&daemon, &id, &turn)["data"]["status"],
        "completed"
    );
    let prompts = items(&daemon, &id, "userMessage");
    assert!(
        prompts.iter().any(|(t, i)| *t == turn
            && i["text"].as_str().map(str::trim_end) == Some("After the restart\nplease\nreply")),
        "{prompts:?}"
    );

    // Given back: the session ends, OpenCode keeps running, watched again.
    disown_to_watched(&daemon, &id, AGENT, &key, pid);
    assert_no_repeats(&events(&daemon, &id));

    // Adopted again, then OpenCode exits (Ctrl-C on an empty box): the session ends, saying so.
    let (status, again) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{again:#}");
    let second = again["session"]["id"].as_str().unwrap().to_string();
    rig.keys(&["C-c"]);
    rig.wait_screen("the shell's prompt after opencode exited", |s| {
        crate::suite::adopting::shell_prompt_after(s, "opencode-exit=")
    });
    let closed = wait_event(&daemon, &second, "session.closed", |e| {
        e["type"] == "session.closed"
    });
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("agent exited")),
        "{closed}"
    );

    // The pane runs a shell now: a prompt to the ended session is refused, nothing typed.
    let screen = rig.screen();
    let (status, refused) = send(&daemon, &second, "into the shell");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(rig.screen(), screen, "nothing typed into the shell");
    assert_no_repeats(&events(&daemon, &second));
}

#[test]
fn adoption_is_refused_for_a_pane_whose_opencode_exited_and_shows_a_shell() {
    let rig = Rig::start();
    let daemon = rig.daemon();
    turn_by_hand(&rig, &daemon);
    rig.keys(&["C-c"]);
    rig.wait_screen("the shell's prompt after opencode exited", |s| {
        crate::suite::adopting::shell_prompt_after(s, "opencode-exit=")
    });
    let (_, exited) = wait_instance(&daemon, AGENT, "the exited instance", |i| {
        i["liveness"] == "exited" && i["paneId"] == rig.pane.as_str()
    });
    assert!(exited.get("adoptable").is_none(), "{exited:#}");
    let key = exited["key"].as_str().unwrap().to_string();
    let screen = rig.screen();
    let (status, refused) = adopt(&daemon, &key);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "agent_exited", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has exited") && message.contains(&rig.pane),
        "{message}"
    );
    assert_eq!(rig.screen(), screen, "nothing typed into the shell");
    let sessions = daemon.get("/api/sessions").assert_ok();
    assert_eq!(sessions["sessions"], json!([]), "{sessions:#}");
}

/// A person who starts a new session in the adopted TUI (`/new`: OpenCode shows an empty
/// session and writes nothing until its first prompt, observed on 1.18.33) takes the pane away
/// from the adopted conversation: a prompt from HTTP is refused `not_ready`, saying why, and
/// nothing is typed (the pane and the model's requests unchanged).
/// A person's `/new`, a turn there by hand, and `/sessions` back to the adopted one: while the
/// TUI shows the new session, or the `/sessions` dialog, a prompt from HTTP is refused and
/// nothing is typed; back on the adopted session it is typed there and completes.
#[test]
fn a_prompt_is_refused_while_the_adopted_tui_shows_another_session() {
    let rig = Rig::start();
    let daemon = rig.daemon();
    let ByHand { id, .. } = adopted_by_hand(&rig, &daemon);

    rig.type_text("/new");
    rig.keys(&["Enter"]);
    rig.wait_screen("a new session's empty box", |s| s.contains("Ask anything"));
    let requests = rig.mock.main_requests().len();
    let (status, refused) = send(&daemon, &id, "Not into the new one");
    assert_eq!(status, 503, "{refused:#}");
    assert_eq!(refused["error"]["code"], "not_ready", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("new session"), "{refused:#}");
    let screen = rig.screen();
    assert!(
        !screen.contains("Not into the new one") && screen.contains("Ask anything"),
        "nothing typed into the pane:\n{screen}"
    );
    assert_eq!(rig.mock.main_requests().len(), requests);

    // A turn by hand in the new session: the TUI shows a session with messages, not the
    // adopted one.
    rig.mock.push(Step::text("Reply in the other session."));
    rig.type_text("Prompt in the other session");
    rig.keys(&["Enter"]);
    rig.wait_screen("the other session's reply", |s| {
        s.contains("Reply in the other session.")
    });
    let requests = rig.mock.main_requests().len();
    let (status, refused) = send(&daemon, &id, "Not into the other one");
    assert_eq!(status, 503, "{refused:#}");
    assert_eq!(refused["error"]["code"], "not_ready", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another session"), "{refused:#}");
    assert!(!rig.screen().contains("Not into the other one"));
    assert_eq!(rig.mock.main_requests().len(), requests);

    // The `/sessions` dialog is open: nothing is typed into its search.
    rig.type_text("/sessions");
    rig.keys(&["Enter"]);
    rig.wait_screen("the sessions dialog", |s| s.contains("Sessions"));
    let (status, refused) = send(&daemon, &id, "Not into the dialog");
    assert_eq!(status, 503, "{refused:#}");
    assert_eq!(refused["error"]["code"], "not_ready", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("dialog (`Sessions`)"), "{refused:#}");
    assert!(!rig.screen().contains("Not into the dialog"));

    // Back to the adopted session (the list's second, the newest first): typed there.
    rig.keys(&["Down"]);
    rig.keys(&["Enter"]);
    rig.wait_screen("the adopted session again", |s| {
        s.contains("Hello by hand") && !s.contains("Sessions")
    });
    rig.mock.push(Step::text("Back in the adopted session."));
    let (status, sent) = send(&daemon, &id, "Into the adopted one");
    assert_eq!(status, 200, "{sent:#}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&daemon, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let replies = items(&daemon, &id, "agentMessage");
    assert!(
        replies
            .iter()
            .any(|(t, i)| *t == turn && i["text"] == "Back in the adopted session."),
        "{replies:?}"
    );
}

/// An option of OpenCode's permission dialog drawn selected (1.18.33: on the warning colour).
fn selected(option: &str) -> String {
    format!("\u{1b}[48;5;215m \u{1b}[38;5;232m{option}")
}

/// The commands of the session's `command` items: `(turn, command, status)`.
fn commands(daemon: &TestDaemon, id: &str) -> Vec<(String, String, String)> {
    items(daemon, id, "command")
        .into_iter()
        .map(|(turn, item)| {
            let text = |key: &str| item[key].as_str().unwrap_or_default().to_string();
            (turn, text("command"), text("status"))
        })
        .collect()
}

/// OpenCode's permission dialog (`OPENCODE_PERMISSION={"bash":"ask"}`) in an adopted TUI is an
/// approval read from its screen (issue 25: no hook, nothing in its database): the adopted
/// session shows `approval.requested` with the command and the instance `waiting`; an answer
/// over HTTP types the dialog's own key only while the screen is exactly the known dialog with
/// `Allow once` selected (another option selected refuses `screen_mismatch`, nothing typed);
/// `accept` runs the command, a second answer is 409; `decline` (a reject with a message, which
/// no key gives) is refused; `cancel` rejects it (Escape): not run, the turn ends; a dialog
/// answered in the pane resolves the approval `by: "pane"`.
#[test]
fn an_adopted_opencodes_permission_dialog_is_an_approval_answered_only_when_the_screen_matches() {
    let rig = Rig::start_with(&[("OPENCODE_PERMISSION", r#"{"bash":"ask"}"#)]);
    let daemon = rig.daemon();
    let ByHand { id, .. } = adopted_by_hand(&rig, &daemon);
    let bash = |command: &str| {
        Step::tool_use(
            "bash",
            json!({"command": command, "description": "Run a command"}),
        )
    };

    // The dialog on screen is a pending approval with its command; the instance waits.
    rig.mock
        .push(bash("touch made_by_opencode.txt && echo made it"))
        .push(Step::text("The command ran.").when_tool_result());
    let (turn, requested) = prompt_approval(&daemon, &id, "touch please");
    let data = &requested["data"];
    assert_eq!(data["kind"], "command", "{requested}");
    assert_eq!(
        data["command"], "touch made_by_opencode.txt && echo made it",
        "{requested}"
    );
    assert_eq!(
        data["reason"], "opencode asks for permission: # Shell command",
        "{requested}"
    );
    assert_eq!(
        data["decisions"],
        json!(["accept", "cancel"]),
        "{requested}"
    );
    let approval = data["approvalId"].as_str().unwrap().to_string();
    wait_instance(&daemon, AGENT, "the adopted opencode, waiting", |i| {
        i["status"] == "waiting" && i["paneId"] == rig.pane.as_str()
    });
    let listed = daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    assert!(listed.to_string().contains(&approval), "{listed}");

    // A person moved the selection to `Allow always`: not the known dialog; nothing typed.
    rig.keys(&["Right"]);
    wait_pane_styled(&rig, "`Allow always` selected", &selected("Allow always"));
    let (status, refused) = answer(&daemon, &id, &approval, "accept");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "screen_mismatch", "{refused}");
    let screen = rig.styled_screen();
    assert!(
        screen.contains(&selected("Allow always")) && screen.contains("Permission required"),
        "nothing typed:\n{screen}"
    );
    assert!(!rig.work.join("made_by_opencode.txt").exists());
    rig.keys(&["Left"]);
    wait_pane_styled(&rig, "`Allow once` selected", &selected("Allow once"));

    // Accept: the command runs and the turn goes on; a second answer is 409.
    let (status, accepted) = answer(&daemon, &id, &approval, "accept");
    assert_eq!(status, 200, "{accepted}");
    let done = wait_turn_end(&daemon, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert!(
        rig.work.join("made_by_opencode.txt").exists(),
        "the command ran"
    );
    let resolved = wait_event(&daemon, &id, "approval.resolved", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == approval.as_str()
    });
    assert_eq!(resolved["data"]["decision"], "accept", "{resolved}");
    let (status, again) = answer(&daemon, &id, &approval, "cancel");
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "approval_resolved", "{again}");
    let replies = items(&daemon, &id, "agentMessage");
    assert!(
        replies
            .iter()
            .any(|(t, i)| *t == turn && i["text"] == "The command ran."),
        "{replies:?}"
    );

    // `decline` is refused (no key gives a reject with a message); `cancel` rejects: the
    // command does not run and the turn ends.
    rig.mock.push(bash("touch declined.txt"));
    let (turn, requested) = prompt_approval(&daemon, &id, "second please");
    let second = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second, approval);
    let requests = rig.mock.main_requests().len();
    let (status, refused) = answer(&daemon, &id, &second, "decline");
    assert_eq!(status, 400, "{refused}");
    assert!(
        rig.screen().contains("Permission required"),
        "nothing typed"
    );
    let (status, cancelled) = answer(&daemon, &id, &second, "cancel");
    assert_eq!(status, 200, "{cancelled}");
    wait_turn_end(&daemon, &id, &turn);
    assert!(!rig.work.join("declined.txt").exists(), "not run");
    assert_eq!(
        rig.mock.main_requests().len(),
        requests,
        "no model call after"
    );
    let resolved = wait_event(&daemon, &id, "the cancelled approval", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == second.as_str()
    });
    assert_eq!(resolved["data"]["decision"], "cancel", "{resolved}");

    // Answered by the person in the pane (Enter on `Allow once`): resolved by the pane.
    rig.mock
        .push(bash("touch by_hand.txt"))
        .push(Step::text("Ran it by hand.").when_tool_result());
    let (turn, requested) = prompt_approval(&daemon, &id, "third please");
    let third = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    rig.keys(&["Enter"]);
    let resolved = wait_event(&daemon, &id, "the approval answered in the pane", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == third.as_str()
    });
    assert_eq!(resolved["data"]["by"], "pane", "{resolved}");
    assert_eq!(
        wait_turn_end(&daemon, &id, &turn)["data"]["status"],
        "completed"
    );
    assert!(rig.work.join("by_hand.txt").exists());
    let (status, late) = answer(&daemon, &id, &third, "accept");
    assert_eq!(status, 409, "{late}");
    assert_eq!(late["error"]["code"], "approval_resolved", "{late}");

    // Each command once: the two that ran completed, the cancelled one declined.
    let ran = commands(&daemon, &id);
    let statuses: Vec<(&str, &str)> = ran
        .iter()
        .map(|(_, command, status)| (command.as_str(), status.as_str()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("touch made_by_opencode.txt && echo made it", "completed"),
            ("touch declined.txt", "declined"),
            ("touch by_hand.txt", "completed"),
        ],
        "{ran:?}"
    );
    assert_no_repeats(&events(&daemon, &id));
}

/// Waits until the pane's screen with its attributes contains `needle`.
#[track_caller]
fn wait_pane_styled(rig: &Rig, what: &str, needle: &str) {
    let deadline = std::time::Instant::now() + crate::suite::adopting::WAIT;
    loop {
        let screen = rig.styled_screen();
        if screen.contains(needle) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pane never showed {what}:\n{}",
            rig.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
