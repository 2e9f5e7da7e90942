//! Adopting a Claude a person started by hand (issue 25): the real Claude Code TUI, started from
//! a shell in a pane of the private tmux server — never through cohost — against the mock
//! Messages server, in the daemon's `HOME`; the claude-code watcher places it in its pane, and
//! `POST /api/state/{session}/agents/{key}/adopt` makes it a session every surface drives:
//! prompts typed and confirmed in its own pane (never over a person's draft), one Escape to
//! interrupt, its turns and messages as session events (from its transcript: no hook runs in a
//! Claude started by hand), tasks, a daemon restart, its exit, and `disown`.
//!
//! Each test owns its mock, tmux server, `HOME` and daemon (`ClaudeFixture`), so they run in
//! parallel.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::claude_env::is_running;
use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

pub(crate) const AGENT: &str = "claude-code";
pub(crate) const HAND: &str = "hand";
/// How long the TUI, the watcher and a turn get on a loaded 2-core machine.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A daemon with the claude-code watcher on, in the TUI's `HOME`.
pub(crate) fn fixture() -> ClaudeFixture {
    ClaudeFixture::start_with(&[], &[("COHOST_WATCHERS", AGENT)])
}

/// Claude started by hand: a shell in a new pane (tmux session `hand`) runs `claude`, and stays
/// once it exits (`claude-exit=<status>`, then an interactive shell). Waits for a ready box.
pub(crate) struct ByHand {
    pub(crate) pane: String,
    /// The pane's own process: the shell.
    pub(crate) shell: u32,
}

impl ByHand {
    pub(crate) fn start(fx: &ClaudeFixture) -> ByHand {
        ByHand::start_with(fx, &[])
    }

    /// Claude started with `extra` arguments after `--permission-mode default`.
    pub(crate) fn start_with(fx: &ClaudeFixture, extra: &[&str]) -> ByHand {
        let mut argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            r#""$@"; echo "claude-exit=$?"; exec sh"#.into(),
            "sh".into(),
            fx.env.claude_bin().to_string_lossy().into_owned(),
            "--permission-mode".into(),
            "default".into(),
        ];
        argv.extend(extra.iter().map(|arg| arg.to_string()));
        let (pane, shell) = fx.tmux.launch(HAND, &fx.work, &fx.env.env(), &argv);
        let hand = ByHand { pane, shell };
        hand.wait_ready(fx);
        hand
    }

    pub(crate) fn screen(&self, fx: &ClaudeFixture) -> String {
        fx.tmux.run(&["capture-pane", "-p", "-t", &self.pane])
    }

    #[track_caller]
    pub(crate) fn wait_screen(&self, fx: &ClaudeFixture, what: &str, check: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen(fx);
            if check(&screen) {
                return;
            }
            if Instant::now() >= deadline {
                fx.fail(&format!("the pane never showed {what}:\n{screen}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Claude's pid, from its session file (the one whose pid runs under the pane's shell).
    pub(crate) fn claude_pid(&self, fx: &ClaudeFixture) -> Option<u32> {
        fx.env
            .session_files()
            .into_iter()
            .filter_map(|(_, file)| file["pid"].as_u64())
            .filter_map(|pid| u32::try_from(pid).ok())
            .find(|pid| is_running(*pid))
    }

    fn status(&self, fx: &ClaudeFixture) -> Option<String> {
        fx.env.session_status()
    }

    /// The input box on screen and the session file idle, for half a second.
    pub(crate) fn wait_ready(&self, fx: &ClaudeFixture) {
        let deadline = Instant::now() + WAIT;
        let mut since: Option<Instant> = None;
        loop {
            let ready =
                self.screen(fx).contains("❯\u{a0}") && self.status(fx).as_deref() == Some("idle");
            if !ready {
                since = None;
            } else if since.get_or_insert_with(Instant::now).elapsed().as_millis() >= 500 {
                return;
            }
            if Instant::now() >= deadline {
                fx.fail(&format!(
                    "claude started by hand never showed a ready box:\n{}",
                    self.screen(fx)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn keys(&self, fx: &ClaudeFixture, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.pane.as_str()];
        args.extend_from_slice(keys);
        fx.tmux.run(&args);
    }

    /// Ctrl-C twice: Claude exits, the shell says so and shows its prompt.
    fn exit_claude(&self, fx: &ClaudeFixture) {
        self.keys(fx, &["C-c"]);
        std::thread::sleep(Duration::from_millis(300));
        self.keys(fx, &["C-c"]);
        self.wait_screen(fx, "the shell's prompt after claude exited", |s| {
            crate::suite::adopting::shell_prompt_after(s, "claude-exit=")
        });
    }
}

/// The claude-code instance in tmux session `hand` once `check` holds for it.
#[track_caller]
pub(crate) fn wait_instance(
    fx: &ClaudeFixture,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    fx.daemon.wait_for(what, WAIT, |daemon| {
        let state = daemon.state();
        state["sessions"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == HAND)?["agents"]
            .as_array()?
            .iter()
            .find(|i| i["agent"] == AGENT && check(i))
            .cloned()
    })
}

pub(crate) fn adopt(fx: &ClaudeFixture, key: &str) -> (u16, Value) {
    let resp = fx
        .daemon
        .post(&format!("/api/state/{HAND}/agents/{key}/adopt"), &json!({}));
    (resp.status, resp.json())
}

/// The session's `turn.completed` for `turn`, once stored.
#[track_caller]
pub(crate) fn wait_turn_end(fx: &ClaudeFixture, id: &str, turn: &str) -> Value {
    fx.wait_event(id, &format!("turn {turn} to end"), |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn
    })
}

/// Every stored event id a turn or item carries: none may repeat.
pub(crate) fn assert_no_repeats(events: &[Value]) {
    let mut seen = std::collections::HashSet::new();
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default();
        let id = match kind {
            "turn.started" | "turn.completed" => event["data"]["turnId"].clone(),
            "item.started" | "item.completed" => event["data"]["item"]["id"].clone(),
            _ => continue,
        };
        assert!(
            seen.insert(format!("{kind} {id}")),
            "{kind} {id} stored twice: {events:#?}"
        );
    }
}

#[test]
fn a_claude_started_by_hand_is_adopted_driven_given_back_and_ends_with_its_pane() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    let pid = hand.claude_pid(&fx).expect("claude's session file");
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    assert_eq!(watched["control"], "watched", "{watched:#}");
    let key = watched["key"].as_str().unwrap().to_string();
    let claude_session = watched["threadId"].as_str().unwrap().to_string();

    // Adopted: a session that says how it is controlled, and by what evidence.
    let (status, adopted) = adopt(&fx, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let view = &adopted["session"];
    let id = view["id"].as_str().unwrap().to_string();
    assert_eq!(view["runtime"], "claude", "{view:#}");
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["state"], "live", "{view:#}");
    assert_eq!(view["threadId"], claude_session.as_str(), "{view:#}");
    assert_eq!(view["paneId"], hand.pane.as_str(), "{view:#}");
    assert_eq!(view["adopted"]["pid"], pid, "{view:#}");
    assert_eq!(view["adopted"]["panePid"], hand.shell, "{view:#}");
    assert_eq!(view["adopted"]["key"], key.as_str(), "{view:#}");
    assert!(
        view["adopted"]["sessionFile"]
            .as_str()
            .is_some_and(|f| f.ends_with(&format!("sessions/{pid}.json"))),
        "{view:#}"
    );
    // A second adoption of the same instance is refused.
    let (again, refused) = adopt(&fx, &key);
    assert_eq!(again, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "already_driven", "{refused:#}");
    // The tracker shows one instance, the session's, and explain says why.
    let instance = wait_instance(&fx, "the adopted instance", |i| {
        i["source"] == "hosted" && i["control"] == "adopted"
    });
    assert_eq!(instance["sessionId"], id.as_str(), "{instance:#}");
    assert_eq!(instance["key"], key.as_str(), "{instance:#}");
    let explained = fx
        .daemon
        .get(&format!("/api/state/{HAND}/agents/{key}/explain"))
        .assert_ok();
    assert_eq!(explained["control"], "adopted", "{explained:#}");
    assert_eq!(explained["sessionId"], id.as_str(), "{explained:#}");
    assert_eq!(explained["adopted"]["pid"], pid, "{explained:#}");
    fx.daemon
        .wait_for("the watcher to give way", WAIT, |daemon| {
            let explained = daemon
                .get(&format!("/api/state/{HAND}/agents/{key}/explain"))
                .assert_ok();
            (explained["watcher"]["placement"] == "suppressed").then_some(())
        });

    // A prompt from HTTP is typed, confirmed and completes; the reply is a session event.
    fx.mock.push(Step::text("Adopted hello."));
    let (status, sent) = fx.send(&id, "Hello from HTTP");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let done = wait_turn_end(&fx, &id, &turn);
    assert_eq!(done["data"]["status"], "completed", "{done}");
    let events = fx.events(&id);
    let started = events
        .iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["turnId"] == turn.as_str())
        .unwrap_or_else(|| fx.fail(&format!("no turn.started: {events:#?}")));
    assert_eq!(started["data"]["source"], "api");
    let texts: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter_map(|e| {
            Some((
                e["data"]["item"]["type"].as_str()?,
                e["data"]["item"]["text"].as_str()?,
            ))
        })
        .collect();
    assert!(
        texts.contains(&("userMessage", "Hello from HTTP"))
            && texts.contains(&("agentMessage", "Adopted hello.")),
        "{texts:?}"
    );
    assert!(hand.screen(&fx).contains("Adopted hello."));

    // A person's draft is never typed over: a direct send is refused, the draft stays.
    hand.keys(&fx, &["-l", "half typed by a person"]);
    hand.wait_screen(&fx, "the person's draft", |s| {
        s.contains("half typed by a person")
    });
    let requests = fx.mock.main_requests().len();
    let (status, refused) = fx.send(&id, "typed over a draft");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "human_typing", "{refused}");
    let screen = hand.screen(&fx);
    assert!(screen.contains("half typed by a person"), "{screen}");
    assert!(!screen.contains("typed over a draft"), "{screen}");
    assert_eq!(fx.mock.main_requests().len(), requests);
    // The person clears their own box.
    hand.keys(&fx, &["Escape", "Escape"]);
    hand.wait_screen(&fx, "the cleared box", |s| {
        !s.contains("half typed by a person")
    });
    hand.wait_ready(&fx);

    // One Escape interrupts a running turn.
    fx.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    let (status, sent) = fx.send(&id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    hand.wait_screen(&fx, "the streamed text", |s| s.contains("Once upon a time"));
    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    let ended = wait_turn_end(&fx, &id, &long);
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");

    // Given back: the session ends, Claude keeps running, the watcher shows it again.
    let disowned = fx
        .daemon
        .post(&format!("/api/sessions/{id}/disown"), &json!({}))
        .assert_ok();
    assert_eq!(disowned["session"]["state"], "closed", "{disowned:#}");
    let closed = fx.wait_event(&id, "session.closed", |e| e["type"] == "session.closed");
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("disowned")),
        "{closed}"
    );
    let watched = wait_instance(&fx, "the watched instance again", |i| {
        i["source"] == "watcher:claude-code"
    });
    assert_eq!(watched["control"], "watched", "{watched:#}");
    assert!(watched.get("sessionId").is_none(), "{watched:#}");
    assert!(is_running(pid), "claude keeps running after disown");
    let (status, refused) = fx.send(&id, "after the end");
    assert_eq!(status, 409, "{refused}");
    assert!(!hand.screen(&fx).contains("after the end"));
    assert_no_repeats(&fx.events(&id));

    // Adopted again, then its pane closes: the session ends, saying so.
    let (status, again) = adopt(&fx, &key);
    assert_eq!(status, 201, "{again:#}");
    let second = again["session"]["id"].as_str().unwrap().to_string();
    assert_ne!(second, id);
    fx.tmux.run(&["kill-pane", "-t", &hand.pane]);
    let closed = fx.wait_event(&second, "session.closed", |e| e["type"] == "session.closed");
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("pane gone")),
        "{closed}"
    );
}

#[test]
fn an_adopted_claude_survives_a_daemon_restart_runs_tasks_follows_clear_and_ends_with_its_exit() {
    let mut fx = fixture();
    let hand = ByHand::start(&fx);
    let watched = wait_instance(&fx, "the watched claude", |i| {
        i["source"] == "watcher:claude-code"
    });
    // `cohost adopt SESSION AGENT` prints the session's id.
    let id = fx.daemon.cli_ok(&["adopt", HAND, AGENT]).trim().to_string();
    let view = fx.view(&id);
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["adopted"]["key"], watched["key"], "{view:#}");

    fx.mock.push(Step::text("Before the restart."));
    let (status, sent) = fx.send(&id, "Before the restart please");
    assert_eq!(status, 200, "{sent}");
    wait_turn_end(&fx, &id, sent["turnId"].as_str().unwrap());
    let before = fx.events(&id);

    // A restart restores the session: nothing is stored twice, and it still drives Claude.
    fx.daemon.restart();
    let view = fx.view(&id);
    assert_eq!(view["control"], "adopted", "{view:#}");
    assert_eq!(view["state"], "live", "{view:#}");
    fx.mock.push(Step::text("Done as a task."));
    let queued = fx.daemon.post(
        &format!("/api/sessions/{id}/tasks"),
        &json!({ "text": "A task after the restart" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);
    let task = queued.json()["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let finished = fx.daemon.wait_for("the task to finish", WAIT, |daemon| {
        let view = daemon.get(&format!("/api/tasks/{task}")).assert_ok()["task"].clone();
        (view["phase"] == "finished").then_some(view)
    });
    assert_eq!(finished["state"], "completed", "{finished:#}");
    let result = fx
        .daemon
        .get(&format!("/api/tasks/{task}/result"))
        .assert_ok();
    assert_eq!(result["text"], "Done as a task.", "{result:#}");
    let after = fx.events(&id);
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the events before the restart are kept as they were"
    );
    assert_no_repeats(&after);

    // `/clear` typed in the pane starts another Claude session: the adopted one follows it.
    let first = fx.view(&id)["threadId"].as_str().unwrap().to_string();
    hand.keys(&fx, &["-l", "/clear"]);
    hand.wait_screen(&fx, "the typed /clear", |s| s.contains("/clear"));
    hand.keys(&fx, &["Enter"]);
    let rebound = fx.wait_event(&id, "session.bound to the new session", |e| {
        e["type"] == "session.bound" && e["data"]["threadId"] != first.as_str()
    });
    hand.wait_ready(&fx);
    fx.mock.push(Step::text("After the clear."));
    let (status, sent) = fx.send(&id, "After the clear please");
    assert_eq!(status, 200, "{sent}");
    wait_turn_end(&fx, &id, sent["turnId"].as_str().unwrap());
    assert_eq!(
        fx.view(&id)["threadId"],
        rebound["data"]["threadId"],
        "the session follows the new Claude session"
    );

    // Claude exits in its pane: the session ends with a clear last word; nothing is typed.
    hand.exit_claude(&fx);
    let closed = fx.wait_event(&id, "session.closed", |e| e["type"] == "session.closed");
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("agent exited")),
        "{closed}"
    );
    let screen = hand.screen(&fx);
    let (status, refused) = fx.send(&id, "into the shell");
    assert_eq!(status, 409, "{refused}");
    assert_eq!(hand.screen(&fx), screen, "nothing typed into the shell");
    // The watcher shows the agent again, as it ended (its session before `/clear` too).
    for thread in [&rebound["data"]["threadId"], &json!(first)] {
        let watched = wait_instance(&fx, "the watched instance of the exited claude", |i| {
            i["threadId"] == *thread && i["liveness"] == "exited"
        });
        assert_eq!(watched["source"], "watcher:claude-code", "{watched:#}");
        assert_eq!(watched["control"], "watched", "{watched:#}");
    }
}

#[test]
fn adoption_is_refused_for_a_pane_whose_claude_exited_and_shows_a_shell() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    // A turn first: a watched agent that ran none leaves no instance once it exits.
    fx.mock.push(Step::text("Hello."));
    hand.keys(&fx, &["-l", "Say hello"]);
    hand.wait_screen(&fx, "the typed prompt", |s| s.contains("Say hello"));
    hand.keys(&fx, &["Enter"]);
    wait_instance(&fx, "the watched turn done", |i| i["status"] == "done");
    hand.exit_claude(&fx);
    let exited = wait_instance(&fx, "the exited instance", |i| {
        i["liveness"] == "exited" && i["paneId"] == hand.pane.as_str()
    });
    let key = exited["key"].as_str().unwrap().to_string();
    assert!(exited.get("adoptable").is_none(), "{exited:#}");
    let screen = hand.screen(&fx);
    let (status, refused) = adopt(&fx, &key);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "agent_exited", "{refused:#}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has exited") && message.contains(&hand.pane),
        "{message}"
    );
    // MCP `adopt` refuses it the same way.
    let plan = json!([
        { "tool": "adopt", "arguments": { "tmux_session": HAND, "key": key } },
    ]);
    let run = crate::suite::mcp::run_client(
        &fx.daemon,
        crate::suite::mcp::Transport::Http,
        &plan,
        |_| {},
    );
    let answer = run.one(0);
    assert_eq!(answer["isError"], true, "{answer:#}");
    assert_eq!(
        answer["structured"]["error"]["code"], "agent_exited",
        "{answer:#}"
    );
    assert_eq!(hand.screen(&fx), screen, "nothing typed into the pane");
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    assert_eq!(sessions["sessions"], json!([]), "{sessions:#}");
}

#[test]
fn a_claude_adopted_mid_turn_follows_that_turn_and_interrupts_it() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    fx.mock
        .push(Step::text("A story told to a person, and it goes on\n").then_hang());
    hand.keys(&fx, &["-l", "Tell me a story"]);
    hand.wait_screen(&fx, "the typed prompt", |s| s.contains("Tell me a story"));
    hand.keys(&fx, &["Enter"]);
    hand.wait_screen(&fx, "the streamed text", |s| s.contains("A story told"));
    let running = wait_instance(&fx, "the watched turn running", |i| {
        i["source"] == "watcher:claude-code" && i["status"] == "running"
    });
    let key = running["key"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&fx, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();
    // The running turn is followed from its prompt: a person's (`terminal`) turn.
    let started = fx.wait_event(&id, "the running turn", |e| e["type"] == "turn.started");
    assert_eq!(started["data"]["source"], "terminal", "{started}");
    let turn = started["data"]["turnId"].as_str().unwrap().to_string();
    fx.wait_event(&id, "its prompt", |e| {
        e["type"] == "item.completed" && e["data"]["item"]["text"] == "Tell me a story"
    });
    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    let ended = wait_turn_end(&fx, &id, &turn);
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");
    assert_no_repeats(&fx.events(&id));
}

/// A person's own Escape, in the pane of an adopted Claude, before the model's first token: no
/// hook runs in a Claude started by hand, and the transcript writes nothing more for such a
/// turn; the session file's `idle`, later than the prompt's line, ends it `interrupted` (even
/// when the `busy` was read before that line). (What becomes of the prompt Claude then puts
/// back in the box is the task queue's: a prompt of ours it clears, when it looks.)
#[test]
fn a_persons_escape_before_the_first_token_ends_the_adopted_turn() {
    let fx = fixture();
    let hand = ByHand::start(&fx);
    let watched = wait_instance(&fx, "the watched claude in its pane", |i| {
        i["source"] == "watcher:claude-code" && i["paneId"] == hand.pane.as_str()
    });
    let (status, adopted) = adopt(&fx, watched["key"].as_str().unwrap());
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();
    fx.mock
        .push(Step::hang().when_user_contains("Hang until a person stops it"));
    let (status, sent) = fx.send(&id, "Hang until a person stops it");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    fx.daemon.wait_for("the model to be asked", WAIT, |_| {
        (!fx.mock.main_requests().is_empty()).then_some(())
    });
    hand.keys(&fx, &["Escape"]);
    let ended = wait_turn_end(&fx, &id, &turn);
    assert_eq!(ended["data"]["status"], "interrupted", "{ended}");
    assert_no_repeats(&fx.events(&id));
}
