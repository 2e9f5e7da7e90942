//! What the adoption tests of every agent share (`suite::codex::adopt`, `suite::pi::adopt`, …):
//! the agent started by hand in tmux session [`HAND`], a session's stored events and a wait on
//! one of them, a prompt sent, an approval asked and answered, an adoption asked, no turn or
//! item stored twice, a rehome and what it leaves, and a session given back to the watcher.

use std::time::Duration;

use serde_json::{Value, json};

use crate::suite::watch::common::wait_instance;
use crate::support::TestDaemon;
use crate::support::claude_env::is_running;
use crate::support::tmux::TmuxServer;

/// The tmux session the agents are started in by hand.
pub(crate) const HAND: &str = "hand";
/// How long a state the daemon reports may take (a TUI on 2 loaded cores).
pub(crate) const WAIT: Duration = Duration::from_secs(90);

pub(crate) fn events(daemon: &TestDaemon, id: &str) -> Vec<Value> {
    daemon.session_events(id)
}

#[track_caller]
pub(crate) fn wait_event(
    daemon: &TestDaemon,
    id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    daemon.wait_for(what, WAIT, |daemon| {
        events(daemon, id).into_iter().find(|e| check(e))
    })
}

#[track_caller]
pub(crate) fn wait_turn_end(daemon: &TestDaemon, id: &str, turn: &str) -> Value {
    wait_event(daemon, id, &format!("the end of turn {turn}"), |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn
    })
}

/// A prompt sent over HTTP: the status and the answer.
pub(crate) fn send(daemon: &TestDaemon, id: &str, text: &str) -> (u16, Value) {
    let resp = daemon.post(
        &format!("/api/sessions/{id}/messages"),
        &json!({ "text": text }),
    );
    (resp.status, resp.json())
}

/// Answers approval `approval` of session `id` over HTTP: the status and the body.
pub(crate) fn answer(
    daemon: &TestDaemon,
    id: &str,
    approval: &str,
    decision: &str,
) -> (u16, Value) {
    let resp = daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": decision }),
    );
    (resp.status, resp.json())
}

/// Sends `prompt` and waits for the approval its turn asks; answers the turn id and the
/// `approval.requested` event.
pub(crate) fn prompt_approval(daemon: &TestDaemon, id: &str, prompt: &str) -> (String, Value) {
    let (status, sent) = send(daemon, id, prompt);
    assert_eq!(status, 200, "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let requested = wait_event(daemon, id, "approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn.as_str()
    });
    (turn, requested)
}

/// `POST /api/sessions/{id}/rehome`: the status and the body.
pub(crate) fn rehome(daemon: &TestDaemon, id: &str) -> (u16, Value) {
    let resp = daemon.post(&format!("/api/sessions/{id}/rehome"), &json!({}));
    (resp.status, resp.json())
}

/// What every rehome leaves, checked on its answer `rehomed` and the session's events: the same
/// session and thread, hosted, in the same pane; the person's agent (`agent_pid`) gone;
/// `session.pane` naming a runner other than `before` (the pane's process till then) and the
/// pane's process that runner; `session.rehomed` with the thread.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub(crate) fn assert_rehomed(
    daemon: &TestDaemon,
    id: &str,
    rehomed: &Value,
    thread: &str,
    tmux: &TmuxServer,
    pane: &str,
    agent_pid: u32,
    before: u32,
) {
    let view = &rehomed["session"];
    assert_eq!(view["id"], id, "{view:#}");
    assert_eq!(view["control"], "hosted", "{view:#}");
    assert_eq!(view["threadId"], thread, "{view:#}");
    assert_eq!(view["paneId"], pane, "{view:#}");
    assert!(!is_running(agent_pid), "the person's agent quit");
    let recorded = wait_event(daemon, id, "the runner's pane", |e| {
        e["type"] == "session.pane" && e["data"]["runnerPid"] != before
    });
    assert_eq!(recorded["data"]["paneId"], pane, "{recorded}");
    let now: u64 = tmux
        .run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
        .trim()
        .parse()
        .expect("pane pid");
    assert_eq!(
        Some(now),
        recorded["data"]["runnerPid"].as_u64(),
        "the pane runs cohost's runner"
    );
    let event = wait_event(daemon, id, "session.rehomed", |e| {
        e["type"] == "session.rehomed"
    });
    assert_eq!(event["data"]["threadId"], thread, "{event}");
}

/// The instance `key` in [`HAND`] adopted over HTTP: the status and the answer.
pub(crate) fn adopt(daemon: &TestDaemon, key: &str) -> (u16, Value) {
    let resp = daemon.post(&format!("/api/state/{HAND}/agents/{key}/adopt"), &json!({}));
    (resp.status, resp.json())
}

/// No turn and no item is stored twice (a restart re-reads what the agent wrote).
#[track_caller]
pub(crate) fn assert_no_repeats(events: &[Value]) {
    let mut seen = std::collections::HashSet::new();
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        let id = match kind.as_str() {
            "turn.started" | "turn.completed" => event["data"]["turnId"].clone(),
            "item.completed" | "item.started" => event["data"]["item"]["id"].clone(),
            _ => continue,
        };
        assert!(seen.insert(format!("{kind} {id}")), "{kind} {id} twice");
    }
}

/// Each of `expected` is the text of exactly one stored user message among `events`.
#[track_caller]
pub(crate) fn assert_prompts_once(events: &[Value], expected: &[&str]) {
    let prompts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "userMessage")
        .filter_map(|e| e["data"]["item"]["text"].as_str())
        .collect();
    for prompt in expected {
        assert_eq!(
            prompts.iter().filter(|p| *p == prompt).count(),
            1,
            "{prompt}: {prompts:?}"
        );
    }
}

/// Waits until session `id` is `live` again (bound after a daemon restart); answers its view.
#[track_caller]
pub(crate) fn wait_live(daemon: &TestDaemon, id: &str) -> Value {
    daemon.wait_for("the session bound again", WAIT, |daemon| {
        let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
        (view["state"] == "live").then_some(view)
    })
}

/// Gives adopted session `id` back and checks what follows: the session closed as disowned,
/// the agent (`pid`) still running, a prompt refused (409), and the instance `key` of `agent`
/// shown by its watcher again.
#[track_caller]
pub(crate) fn disown_to_watched(daemon: &TestDaemon, id: &str, agent: &str, key: &str, pid: u32) {
    let disowned = daemon
        .post(&format!("/api/sessions/{id}/disown"), &json!({}))
        .assert_ok();
    assert_eq!(disowned["session"]["state"], "closed", "{disowned:#}");
    let closed = wait_event(daemon, id, "session.closed", |e| {
        e["type"] == "session.closed"
    });
    assert!(
        closed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("disowned")),
        "{closed}"
    );
    assert!(is_running(pid), "{agent} keeps running after disown");
    let (status, refused) = send(daemon, id, "after the end");
    assert_eq!(status, 409, "{refused}");
    let source = format!("watcher:{agent}");
    let (_, watched) = wait_instance(daemon, agent, &format!("the watched {agent} again"), |i| {
        i["source"] == source.as_str() && i["control"] == "watched"
    });
    assert_eq!(watched["key"], key, "{watched:#}");
}

/// What a person's pane shows now (plain text).
pub(crate) fn pane_screen(tmux: &TmuxServer, pane: &str) -> String {
    tmux.run(&["capture-pane", "-p", "-t", pane])
}

/// Waits until the pane shows what `check` looks for; fails with the last screen.
#[track_caller]
pub(crate) fn wait_pane(tmux: &TmuxServer, pane: &str, what: &str, check: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let screen = pane_screen(tmux, pane);
        if check(&screen) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pane never showed {what}:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keys sent to the pane as a person's (`send-keys` arguments: `-l` for literal text).
pub(crate) fn pane_keys(tmux: &TmuxServer, pane: &str, keys: &[&str]) {
    let mut args = vec!["send-keys", "-t", pane];
    args.extend_from_slice(keys);
    tmux.run(&args);
}

/// Types `text` as a person does and waits until the pane shows it.
pub(crate) fn type_in_pane(tmux: &TmuxServer, pane: &str, text: &str) {
    pane_keys(tmux, pane, &["-l", text]);
    wait_pane(tmux, pane, &format!("the typed `{text}`"), |s| {
        s.contains(text)
    });
}

/// The pid of the child of `shell` whose process name is `comm` (the agent started from it).
pub(crate) fn child_named(shell: u32, comm: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
}

/// The shell's prompt is on screen below `<agent>-exit=<status>` (the by-hand panes run
/// `"$@"; echo "<agent>-exit=$?"; exec sh`): the screen of a pane whose agent exited has
/// stopped changing, so a later screen equal to it means nothing was typed.
pub(crate) fn shell_prompt_after(screen: &str, exit_marker: &str) -> bool {
    let mut lines = screen
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .rev();
    matches!(lines.next(), Some("#" | "$"))
        && lines.next().is_some_and(|l| l.starts_with(exit_marker))
}
