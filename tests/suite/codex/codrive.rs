//! Co-driving: the real codex TUI attached to a thread cohost hosts, in a tmux pane.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::codex::host::{dump, of_type, words};
use crate::suite::codex::recovery::{backend_pids, kill_group};
use crate::support::codex_host::{CodexFixture, TURN_TIMEOUT, eventually};
use crate::support::mock_responses::Step;
use crate::support::panes;

/// Waits until the pane shows `needle`, failing with the screen.
#[track_caller]
pub fn wait_screen(fx: &CodexFixture, pane: &str, needle: &str) -> String {
    panes::wait_screen(&fx.daemon, &fx.tmux, pane, Duration::from_secs(30), needle)
}

/// Types like a human: the text, a pause (or the TUI takes it as a paste), then Enter.
pub fn type_prompt(fx: &CodexFixture, pane: &str, text: &str) {
    fx.tmux.run(&["send-keys", "-t", pane, "-l", text]);
    std::thread::sleep(Duration::from_millis(600));
    fx.tmux.run(&["send-keys", "-t", pane, "Enter"]);
}

#[test]
fn a_turn_typed_in_the_tui_appears_in_the_stream_and_an_api_turn_on_screen() {
    let fx = CodexFixture::start();
    fx.mock
        .push(Step::text("Reply to the first prompt.").when_user_contains("First from the API"));
    fx.mock
        .push(Step::text("Reply to the human.").when_user_contains("Hello from the TUI"));
    fx.mock
        .push(Step::text("Reply to the API.").when_user_contains("Hello from the API"));
    let id = fx.create(
        json!({ "terminal": true, "approvalPolicy": "never", "prompt": "First from the API" }),
    );
    fx.wait_turns_completed(&id, 1);
    let pane = fx.view(&id)["paneId"].as_str().unwrap().to_string();
    wait_screen(&fx, &pane, "Reply to the first prompt.");
    wait_screen(&fx, &pane, "Ask Codex to do anything");

    type_prompt(&fx, &pane, "Hello from the TUI");
    fx.wait_turns_completed(&id, 2);
    let starts: Vec<_> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "turn.started")
        .collect();
    assert_eq!(starts[0]["data"]["source"], "api", "{starts:?}");
    assert_eq!(starts[1]["data"]["source"], "terminal", "{starts:?}");
    fx.wait_event(&id, "the reply to the human", |e| {
        e["data"]["item"]["text"] == "Reply to the human."
    });

    let sent = fx.send(&id, "Hello from the API");
    assert_eq!(
        sent["outcome"],
        "started",
        "{sent} {:#?}",
        fx.events(&id)
            .iter()
            .map(|e| format!("{} {}", e["type"], e["data"]))
            .collect::<Vec<_>>()
    );
    fx.wait_turns_completed(&id, 3);
    wait_screen(&fx, &pane, "Reply to the API.");

    // The spec without a token redacts it; the pane got the real one through its environment.
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    assert_eq!(spec["env"]["COHOST_CODEX_WS_TOKEN"], "<redacted>");
    assert!(
        spec["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--remote")
    );
    let with_token = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
        .assert_ok();
    assert_ne!(with_token["env"]["COHOST_CODEX_WS_TOKEN"], "<redacted>");
    let token = with_token["env"]["COHOST_CODEX_WS_TOKEN"].as_str().unwrap();
    assert!(
        !with_token["args"].to_string().contains(token),
        "the token is never an argument"
    );
}

#[test]
fn the_tui_attaches_to_a_new_thread_before_any_turn() {
    let fx = CodexFixture::start();
    fx.mock.push(
        Step::text("Reply to the very first prompt.").when_user_contains("First words, typed"),
    );
    // No prompt: the thread has had no turn, yet the TUI resumes it right away (cohost names
    // the thread, which makes codex write its rollout without a model call).
    let id = fx.create(json!({ "terminal": true, "approvalPolicy": "never" }));
    let pane = pane_of(&fx, &id);
    let shown = wait_screen_until(&fx, &pane, "an attached, empty TUI", |s| {
        s.contains("Ask Codex to do anything")
            && !s.contains("Resuming session")
            && !s.contains("Reconnecting")
    });
    assert!(
        !shown.contains("no rollout found"),
        "the TUI attached: {shown}"
    );
    assert!(
        fx.mock.main_requests().is_empty(),
        "no model call was needed"
    );
    assert_eq!(fx.view(&id)["turns"], 0);

    // The human's first prompt is the thread's first turn, in the stream.
    type_prompt(&fx, &pane, "First words, typed");
    wait_screen(&fx, &pane, "Reply to the very first prompt.");
    let started = terminal_turn(&fx, &id, 1);
    assert_eq!(started["data"]["source"], "terminal", "{started}");
    fx.wait_turns_completed(&id, 1);
    assert_eq!(fx.mock.main_requests().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Co-driving acceptance: approvals, interrupts, a lost TUI, the socket's token, a lost backend,
// the tracker and the refusals.

/// The TUI's pane of a session.
fn pane_of(fx: &CodexFixture, id: &str) -> String {
    fx.view(id)["paneId"]
        .as_str()
        .unwrap_or_else(|| fx.daemon.fail(&format!("no pane: {}", fx.view(id))))
        .to_string()
}

/// Waits until the TUI has resumed the thread: `history` on screen with the composer, and no
/// "Resuming session…" (the placeholder shows before the resume is done).
#[track_caller]
fn wait_ready(fx: &CodexFixture, pane: &str, history: &str) -> String {
    wait_screen_until(
        fx,
        pane,
        &format!("a resumed TUI showing {history:?}"),
        |s| {
            s.contains(history)
                && s.contains("Ask Codex to do anything")
                && !s.contains("Resuming session")
                && !s.contains("Reconnecting")
        },
    )
}

#[track_caller]
fn wait_screen_until(
    fx: &CodexFixture,
    pane: &str,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> String {
    panes::wait_screen_until(&fx.daemon, &fx.tmux, pane, TURN_TIMEOUT, what, pred)
}

/// A session with `extra` settings whose first turn (`prompt` → `reply`, from the API) is done
/// and whose TUI has resumed it. Returns the session id and the pane.
pub fn session_with_tui(fx: &CodexFixture, extra: Value, reply: &str) -> (String, String) {
    let prompt = format!("First prompt for {reply}");
    fx.mock
        .push(Step::text(reply).when_user_contains(prompt.as_str()));
    let mut body = json!({ "terminal": true, "prompt": prompt });
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    let id = fx.create(body);
    fx.wait_turns_completed(&id, 1);
    let pane = pane_of(fx, &id);
    wait_ready(fx, &pane, reply);
    (id, pane)
}

/// The lines of the session's `runner.jsonl`.
fn journal(fx: &CodexFixture, id: &str) -> Vec<Value> {
    panes::runner_journal(&fx.daemon, "codex", id)
}

/// The pids of the runner's `started` lines, in order.
fn started_pids(fx: &CodexFixture, id: &str) -> Vec<u32> {
    panes::started_pids(&fx.daemon, "codex", id)
}

/// Waits until the runner has started the TUI more than `before` times; returns the new pid.
#[track_caller]
fn wait_new_start(fx: &CodexFixture, id: &str, before: usize) -> u32 {
    let mut pid = 0;
    eventually("the runner to start the TUI again", || {
        let pids = started_pids(fx, id);
        pid = *pids.last()?;
        (pids.len() > before).then_some(())
    });
    pid
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// The `turn.started` of a turn typed in the TUI, waiting for it.
fn terminal_turn(fx: &CodexFixture, id: &str, nth: usize) -> Value {
    eventually("a turn started from the terminal", || {
        (of_type(&fx.events(id), "turn.started")
            .iter()
            .filter(|e| e["data"]["source"] == "terminal")
            .count()
            >= nth)
            .then_some(())
    });
    of_type(&fx.events(id), "turn.started")
        .into_iter()
        .filter(|e| e["data"]["source"] == "terminal")
        .nth(nth - 1)
        .cloned()
        .unwrap()
}

fn decide(
    fx: &CodexFixture,
    id: &str,
    approval: &str,
    decision: &str,
) -> crate::support::http::Resp {
    fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": decision }),
    )
}

const APPROVAL_PROMPT: &str = "Would you like to run the following command?";

#[test]
fn a_command_the_tui_turn_asked_for_is_approved_from_the_api() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(
        &fx,
        json!({ "approvalPolicy": "untrusted", "sandbox": "workspace-write" }),
        "Ready for the approval.",
    );
    fx.mock.push(
        Step::exec("touch tui_approved.txt")
            .then_text("done")
            .when_user_contains("Make tui_approved.txt"),
    );
    type_prompt(&fx, &pane, "Make tui_approved.txt");
    let shown = wait_screen(&fx, &pane, APPROVAL_PROMPT);
    assert!(shown.contains("touch tui_approved.txt"), "{shown}");
    assert!(shown.contains("Yes, proceed (y)"), "{shown}");

    let started = terminal_turn(&fx, &id, 1);
    let requested = fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    assert_eq!(
        requested["data"]["turnId"], started["data"]["turnId"],
        "{requested}"
    );
    assert_eq!(requested["data"]["kind"], "command", "{requested}");
    assert!(
        requested["data"]["command"]
            .as_str()
            .unwrap_or("")
            .contains("touch tui_approved.txt"),
        "{requested}"
    );
    assert!(
        !fx.work.join("tui_approved.txt").exists(),
        "nothing runs before the answer"
    );
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();

    let answer = decide(&fx, &id, &approval, "accept").assert_ok();
    assert_eq!(answer["ok"], true, "{answer}");
    // The TUI learns the request was answered elsewhere and drops its prompt.
    wait_screen_until(&fx, &pane, "the approval prompt gone", |s| {
        !s.contains("Would you like to run")
    });
    fx.wait_turns_completed(&id, 2);
    assert!(fx.work.join("tui_approved.txt").exists(), "the command ran");
    let events = fx.events(&id);
    let resolved = of_type(&events, "approval.resolved");
    assert_eq!(resolved.len(), 1, "{}", dump(&events));
    assert_eq!(resolved[0]["data"]["approvalId"], approval.as_str());
    assert_eq!(resolved[0]["data"]["by"], "api", "{}", resolved[0]);
    assert_eq!(resolved[0]["data"]["decision"], "accept", "{}", resolved[0]);
    wait_screen(&fx, &pane, "Ask Codex to do anything");
}

#[test]
fn an_approval_answered_in_the_tui_is_resolved_for_the_api() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(
        &fx,
        json!({ "approvalPolicy": "untrusted", "sandbox": "workspace-write" }),
        "Ready for the human.",
    );
    // This time the API starts the turn; the human answers in the TUI.
    fx.mock
        .push(Step::exec("touch tui_said_yes.txt").when_user_contains("Make tui_said_yes.txt"));
    fx.mock
        .push(Step::text("Made it.").when_last_input("function_call_output"));
    let sent = fx.send(&id, "Make tui_said_yes.txt");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let requested = fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn.as_str()
    });
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = wait_screen(&fx, &pane, APPROVAL_PROMPT);
    assert!(shown.contains("touch tui_said_yes.txt"), "{shown}");

    // A key that reaches the TUI the moment it draws the prompt can be lost on a loaded
    // machine (seen with 0.171.0 under the parallel version matrix): like a person, press again
    // while the prompt is still up and nothing was answered.
    let is_resolved = |e: &Value| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == approval.as_str()
    };
    for _ in 0..3 {
        fx.tmux.run(&["send-keys", "-t", &pane, "y"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && !fx.events(&id).iter().any(is_resolved)
            && fx
                .tmux
                .run(&["capture-pane", "-p", "-t", &pane])
                .contains(APPROVAL_PROMPT)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        if fx.events(&id).iter().any(is_resolved)
            || !fx
                .tmux
                .run(&["capture-pane", "-p", "-t", &pane])
                .contains(APPROVAL_PROMPT)
        {
            break;
        }
    }
    let resolved = fx.wait_event(&id, "approval.resolved", is_resolved);
    assert_eq!(resolved["data"]["by"], "runtime", "{resolved}");
    fx.wait_turns_completed(&id, 2);
    assert!(
        fx.work.join("tui_said_yes.txt").exists(),
        "the TUI's yes ran the command"
    );
    wait_screen(&fx, &pane, "Made it.");

    // The API can no longer answer it.
    decide(&fx, &id, &approval, "decline").assert_error(409, "approval_resolved", None);
    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    assert_eq!(listed["approvals"][0]["pending"], false, "{listed}");
    assert_eq!(fx.view(&id)["pendingApprovals"], 0);
    let events = fx.events(&id);
    assert_eq!(
        of_type(&events, "approval.resolved").len(),
        1,
        "{}",
        dump(&events)
    );
}

#[test]
fn a_turn_typed_in_the_tui_is_interrupted_from_the_api() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(
        &fx,
        json!({ "approvalPolicy": "never" }),
        "Ready to be cut.",
    );
    fx.mock.push(
        Step::text(words(60))
            .delay(Duration::from_millis(50))
            .then_hang()
            .when_user_contains("Tell me a long story"),
    );
    type_prompt(&fx, &pane, "Tell me a long story");
    let started = terminal_turn(&fx, &id, 1);
    let turn = started["data"]["turnId"].as_str().unwrap().to_string();
    wait_screen(&fx, &pane, "word3");

    let answer = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(answer, json!({ "interrupted": true }));
    let done = fx.wait_event(&id, "the interrupted TUI turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    fx.mock.wait_for_disconnects(1, TURN_TIMEOUT);
    wait_screen(&fx, &pane, "Conversation interrupted");
    wait_screen(&fx, &pane, "Ask Codex to do anything");
    assert!(fx.view(&id)["activeTurnId"].is_null(), "{}", fx.view(&id));

    // The TUI carries on.
    fx.mock
        .push(Step::text("Shorter this time.").when_user_contains("A short one"));
    type_prompt(&fx, &pane, "A short one");
    fx.wait_turns_completed(&id, 3);
    wait_screen(&fx, &pane, "Shorter this time.");
}

#[test]
fn a_killed_tui_leaves_the_session_live_and_relaunches_on_the_same_thread() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(
        &fx,
        json!({ "approvalPolicy": "never" }),
        "Reply before the kill.",
    );
    let thread = fx.view(&id)["threadId"].clone();
    let pids = started_pids(&fx, &id);
    let tui = *pids.last().unwrap();
    assert!(alive(tui), "the TUI {tui} runs");

    signal(tui, "-KILL");
    eventually("the runner to see the TUI die", || {
        journal(&fx, &id)
            .iter()
            .any(|e| e["event"] == "exited" && e["pid"] == tui && e["signal"] == 9)
            .then_some(())
    });
    wait_screen(&fx, &pane, &format!("Relaunch with: cohost relaunch {id}"));

    // The session does not depend on its TUI.
    fx.mock
        .push(Step::text("Reply while it was down.").when_user_contains("While the TUI is down"));
    let sent = fx.send(&id, "While the TUI is down");
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 2);
    assert_eq!(fx.view(&id)["state"], "live");
    assert_eq!(
        started_pids(&fx, &id).len(),
        pids.len(),
        "nothing relaunched it yet"
    );

    // Blank the pane so what shows next is the new TUI's.
    fx.tmux.run(&["send-keys", "-R", "-t", &pane]);
    fx.tmux.run(&["clear-history", "-t", &pane]);
    let answer = fx
        .daemon
        .post(&format!("/api/sessions/{id}/relaunch"), &json!({}))
        .assert_ok();
    assert_eq!(answer["ok"], true, "{answer}");
    let relaunched = wait_new_start(&fx, &id, pids.len());
    assert_ne!(relaunched, tui);
    let shown = wait_ready(&fx, &pane, "Reply while it was down.");
    assert!(shown.contains("Reply before the kill."), "{shown}");
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    assert_eq!(
        spec["args"].as_array().unwrap().last().unwrap(),
        &thread,
        "{spec}"
    );

    fx.mock
        .push(Step::text("Reply after the relaunch.").when_user_contains("Back in the TUI"));
    type_prompt(&fx, &pane, "Back in the TUI");
    fx.wait_turns_completed(&id, 3);
    let started = terminal_turn(&fx, &id, 1);
    fx.wait_event(&id, "the reply to the relaunched TUI", |e| {
        e["type"] == "item.completed"
            && e["data"]["turnId"] == started["data"]["turnId"]
            && e["data"]["item"]["text"] == "Reply after the relaunch."
    });
    assert_eq!(
        fx.view(&id)["threadId"],
        thread,
        "the same thread throughout"
    );

    // A relaunch while the TUI runs stops it and starts it again.
    let before = started_pids(&fx, &id).len();
    fx.daemon
        .post(&format!("/api/sessions/{id}/relaunch"), &json!({}))
        .assert_ok();
    let again = wait_new_start(&fx, &id, before);
    assert_ne!(again, relaunched);
    assert!(!alive(relaunched), "the previous TUI {relaunched} stopped");
    wait_ready(&fx, &pane, "Reply after the relaunch.");
}

/// Sends a WebSocket upgrade to `url` (`ws://host:port`) and returns the answer's head and body.
fn ws_upgrade(url: &str, authorization: Option<&str>) -> String {
    let addr = url
        .strip_prefix("ws://")
        .unwrap_or_else(|| panic!("not a ws:// url: {url}"))
        .trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let auth = authorization
        .map(|value| format!("Authorization: {value}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{auth}\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
        let text = String::from_utf8_lossy(&answer);
        if let Some(end) = text.find("\r\n\r\n") {
            // A 101 keeps the socket open; a refusal has a short body.
            if text.starts_with("HTTP/1.1 101") {
                break;
            }
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            if answer.len() >= end + 4 + length {
                break;
            }
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn the_backend_socket_refuses_a_client_without_the_token() {
    let fx = CodexFixture::start();
    let (id, _pane) = session_with_tui(&fx, json!({ "approvalPolicy": "never" }), "Token check.");
    let spec = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal"))
        .assert_ok();
    let url = spec["args"][1].as_str().unwrap().to_string();
    assert!(
        url.starts_with("ws://127.0.0.1:"),
        "a loopback socket: {spec}"
    );

    let none = ws_upgrade(&url, None);
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert!(none.contains("missing websocket bearer token"), "{none}");
    let wrong = ws_upgrade(&url, Some("Bearer not-the-token"));
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(wrong.contains("invalid websocket bearer token"), "{wrong}");
    let with_token = fx
        .daemon
        .get(&format!("/api/sessions/{id}/terminal?includeToken=true"))
        .assert_ok();
    let token = with_token["env"]["COHOST_CODEX_WS_TOKEN"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(token.len() >= 16, "{with_token}");
    let bare = ws_upgrade(&url, Some(&token));
    assert!(
        bare.starts_with("HTTP/1.1 401"),
        "a bare token is not a bearer: {bare}"
    );
    let right = ws_upgrade(&url, Some(&format!("Bearer {token}")));
    assert!(right.starts_with("HTTP/1.1 101"), "{right}");

    // The token never shows in a command line: not the TUI's, not the pane's.
    let tui = *started_pids(&fx, &id).last().unwrap();
    let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{tui}/cmdline")).unwrap())
        .into_owned();
    assert!(cmdline.contains("--remote"), "{cmdline:?}");
    assert!(
        !cmdline.contains(&token),
        "the token is on the TUI's command line"
    );
    let launch = fx
        .daemon
        .home()
        .join("codex/sessions")
        .join(&id)
        .join("launch.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&launch).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "launch.json holds the token: {mode:o}");
}

#[test]
fn a_backend_restart_relaunches_the_tui_against_the_new_endpoint() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(
        &fx,
        json!({ "approvalPolicy": "never" }),
        "Reply before the crash.",
    );
    let thread = fx.view(&id)["threadId"].clone();
    let spec_url = |fx: &CodexFixture| {
        fx.daemon
            .get(&format!("/api/sessions/{id}/terminal"))
            .assert_ok()["args"][1]
            .as_str()
            .unwrap()
            .to_string()
    };
    let old_url = spec_url(&fx);
    let before = started_pids(&fx, &id);
    let backends = backend_pids(fx.daemon.pid());
    assert_eq!(backends.len(), 1, "{backends:?}");

    kill_group(backends[0]);
    let restarting = fx.wait_event(&id, "session.status restarting", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "restarting"
    });
    let after = restarting["seq"].as_u64().unwrap();
    fx.wait_event(&id, "session.bound after the restart", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64().unwrap() > after
    });
    let new_url = spec_url(&fx);
    assert_ne!(new_url, old_url, "a new backend, a new port");
    let tui = wait_new_start(&fx, &id, before.len());
    assert!(!alive(*before.last().unwrap()), "the old TUI is gone");
    let launch: Value = serde_json::from_slice(
        &std::fs::read(
            fx.daemon
                .home()
                .join("codex/sessions")
                .join(&id)
                .join("launch.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(launch["argv"][2], new_url.as_str(), "{launch}");
    let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{tui}/cmdline")).unwrap())
        .into_owned();
    assert!(
        cmdline.contains(&new_url),
        "the TUI {tui} runs against {new_url}: {cmdline:?}"
    );
    wait_ready(&fx, &pane, "Reply before the crash.");

    fx.mock
        .push(Step::text("Reply after the crash.").when_user_contains("Typed after the crash"));
    type_prompt(&fx, &pane, "Typed after the crash");
    fx.wait_turns_completed(&id, 2);
    let started = terminal_turn(&fx, &id, 1);
    fx.wait_event(&id, "the reply to the new TUI", |e| {
        e["type"] == "item.completed"
            && e["data"]["turnId"] == started["data"]["turnId"]
            && e["data"]["item"]["text"] == "Reply after the crash."
    });
    wait_screen(&fx, &pane, "Reply after the crash.");
    assert_eq!(fx.view(&id)["threadId"], thread);
}

#[test]
fn the_tracker_follows_a_co_driven_session_in_its_project_session() {
    let fx = CodexFixture::start();
    let (id, pane) = session_with_tui(&fx, json!({ "approvalPolicy": "never" }), "Tracked reply.");
    let thread = fx.view(&id)["threadId"].as_str().unwrap().to_string();
    let key = format!("codex:{thread}");
    let status = |fx: &CodexFixture| -> Option<String> {
        fx.daemon
            .instance("work", &key)
            .and_then(|i| i["status"].as_str().map(str::to_string))
    };
    eventually("the codex instance done in `work`", || {
        (status(&fx).as_deref() == Some("done")).then_some(())
    });
    let instance = fx.daemon.instance("work", &key).unwrap();
    assert_eq!(instance["agent"], "codex", "{instance}");
    assert_eq!(instance["threadId"], thread.as_str(), "{instance}");
    assert_eq!(instance["unseen"], true, "{instance}");
    // Not in the tmux session cohost opened for the TUI.
    let cohost = fx.daemon.session("cohost");
    assert!(
        cohost["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["agent"] != "codex"),
        "{cohost:#}"
    );

    // A turn typed in the TUI: running, then interrupted.
    fx.mock.push(
        Step::text(words(60))
            .delay(Duration::from_millis(50))
            .then_hang()
            .when_user_contains("Keep me running"),
    );
    type_prompt(&fx, &pane, "Keep me running");
    eventually("the instance running", || {
        (status(&fx).as_deref() == Some("running")).then_some(())
    });
    assert_eq!(fx.daemon.instance("work", &key).unwrap()["unseen"], false);
    fx.daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    eventually("the instance interrupted", || {
        (status(&fx).as_deref() == Some("interrupted")).then_some(())
    });

    // An API turn: done, and news until the `work` session is focused.
    fx.mock
        .push(Step::text("Done again.").when_user_contains("Finish up"));
    fx.send(&id, "Finish up");
    fx.wait_turns_completed(&id, 3);
    eventually("the instance done", || {
        (status(&fx).as_deref() == Some("done")).then_some(())
    });
    assert_eq!(fx.daemon.instance("work", &key).unwrap()["unseen"], true);
    assert_eq!(fx.daemon.session("work")["unseen"], true);
    let focused = fx
        .daemon
        .post("/api/focus", &json!({ "session": "work" }))
        .assert_ok();
    assert_eq!(focused["session"], "work", "{focused}");
    let instance = fx.daemon.instance("work", &key).unwrap();
    assert_eq!(instance["unseen"], false, "{instance}");
    // Seen, a hosted session waits for its next prompt, as its own view says (issue 23,
    // item 9): idle, not a finished agent to prune.
    assert_eq!(instance["status"], "idle", "{instance}");
    assert!(fx.view(&id)["activeTurnId"].is_null());
    assert_eq!(fx.daemon.session("work")["unseen"], false);
}

#[test]
fn co_driving_requests_that_make_no_sense_are_refused() {
    let fx = CodexFixture::start();
    let create = |body: Value| fx.daemon.post("/api/sessions", &body);
    create(json!({ "runtime": "claude", "cwd": fx.work, "terminal": true })).assert_error(
        400,
        "invalid_field",
        Some("terminal"),
    );
    create(json!({ "runtime": "codex", "cwd": fx.work, "tmuxSession": "work" })).assert_error(
        400,
        "invalid_field",
        Some("tmuxSession"),
    );
    create(json!({ "runtime": "codex", "cwd": fx.work, "tmuxSession": "work", "terminal": false }))
        .assert_error(400, "invalid_field", Some("tmuxSession"));

    // A session with a terminal cannot get a second one.
    let with = fx.create(json!({ "terminal": true, "approvalPolicy": "never" }));
    assert!(fx.view(&with)["paneId"].is_string(), "{}", fx.view(&with));
    let again = fx
        .daemon
        .post(&format!("/api/sessions/{with}/terminal"), &json!({}));
    again.assert_error(400, "invalid_request", None);

    // Relaunching needs a terminal.
    let without = fx.create(json!({ "approvalPolicy": "never" }));
    assert!(
        fx.view(&without)["paneId"].is_null(),
        "{}",
        fx.view(&without)
    );
    fx.daemon
        .post(&format!("/api/sessions/{without}/relaunch"), &json!({}))
        .assert_error(400, "invalid_request", None);
    fx.daemon
        .get(&format!(
            "/api/sessions/{without}/terminal?includeToken=maybe"
        ))
        .assert_error(400, "invalid_field", Some("includeToken"));
}
