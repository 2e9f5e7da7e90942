//! Recovery of hosted codex sessions: a killed app-server is restarted and its thread resumed
//! without duplicating anything, and a session's SSE stream resumes across daemon restarts
//! (graceful and SIGKILL) with no gap and no duplicate.

use std::process::Command;

use serde_json::{Value, json};

use crate::suite::codex::host::{
    assert_no_duplicate_turns_or_items, completed_items, dump, of_type, session_sse, words,
};
use crate::support::SseClient;
use crate::support::codex_host::{CodexFixture, eventually};
use crate::support::mock_responses::Step;

/// The codex app-server processes the daemon spawned (its children running `app-server`).
pub(crate) fn backend_pids(daemon_pid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{daemon_pid}/task")) else {
        return pids;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("app-server") && !pids.contains(&pid) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// SIGKILLs a backend's process group (the daemon spawns each backend as a group leader).
pub(crate) fn kill_group(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL -{pid} failed");
}

fn session_bounds(fx: &CodexFixture, id: &str) -> usize {
    of_type(&fx.events(id), "session.bound").len()
}

#[test]
fn a_killed_app_server_is_restarted_and_its_thread_resumed() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock
        .push(Step::text("reply before").when_user_contains("before the crash"));
    fx.send(&id, "before the crash");
    fx.wait_turns_completed(&id, 1);
    let thread = fx.view(&id)["threadId"].clone();
    let old = backend_pids(fx.daemon.pid());
    assert_eq!(old.len(), 1, "one backend: {old:?}");

    kill_group(old[0]);
    let restarting = fx.wait_event(&id, "session.status restarting", |e| {
        e["type"] == "session.status" && e["data"]["state"] == "restarting"
    });
    let after = restarting["seq"].as_u64().unwrap();
    fx.wait_event(&id, "session.bound after the restart", |e| {
        e["type"] == "session.bound" && e["seq"].as_u64().unwrap() > after
    });
    let view = fx.view(&id);
    assert_eq!(view["state"], "live", "{view}");
    assert_eq!(view["threadId"], thread, "the same thread, resumed: {view}");
    let new = backend_pids(fx.daemon.pid());
    assert_eq!(new.len(), 1, "{new:?}");
    assert_ne!(new, old, "a new app-server");

    fx.mock
        .push(Step::text("reply after").when_user_contains("after the crash"));
    let sent = fx.send(&id, "after the crash");
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 2);
    let request = fx.mock.main_requests().pop().unwrap();
    assert!(
        request.body["input"].to_string().contains("reply before"),
        "the resumed thread keeps its history"
    );

    // Killed mid-turn: the turn ends (interrupted), and the session carries on.
    fx.mock.push(
        Step::text(words(40))
            .delay(std::time::Duration::from_millis(50))
            .then_hang(),
    );
    let sent = fx.send(&id, "during the crash");
    let turn3 = sent["turnId"].as_str().unwrap().to_string();
    fx.wait_event(&id, "turn 3 started", |e| {
        e["type"] == "turn.started" && e["data"]["turnId"] == turn3.as_str()
    });
    fx.mock
        .wait_for_requests(3, crate::support::codex_host::TURN_TIMEOUT);
    let old = backend_pids(fx.daemon.pid());
    assert_eq!(old.len(), 1, "{old:?}");
    kill_group(old[0]);
    let done = fx.wait_event(&id, "turn 3 ended", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn3.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    eventually("the session live again", || {
        (session_bounds(&fx, &id) == 3 && fx.view(&id)["state"] == "live").then_some(())
    });
    assert!(fx.view(&id)["activeTurnId"].is_null());
    let sent = fx.send(&id, "after the second crash");
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 4);

    let events = fx.events(&id);
    assert_no_duplicate_turns_or_items(&events);
    assert_eq!(
        of_type(&events, "turn.started").len(),
        4,
        "{}",
        dump(&events)
    );
    let users: Vec<&str> = completed_items(&events, "userMessage")
        .iter()
        .map(|e| e["data"]["item"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        [
            "before the crash",
            "after the crash",
            "during the crash",
            "after the second crash"
        ],
        "{}",
        dump(&events)
    );
    let statuses: Vec<&str> = of_type(&events, "session.status")
        .iter()
        .map(|e| e["data"]["state"].as_str().unwrap())
        .collect();
    assert!(
        !statuses.contains(&"lost"),
        "never lost: {statuses:?}\n{}",
        dump(&events)
    );
    assert_eq!(fx.view(&id)["threadId"], thread);
}

/// What one SSE connection delivered.
#[derive(Default)]
struct Delivered {
    ids: Vec<u64>,
    deltas: usize,
}

impl Delivered {
    fn take(&mut self, event: crate::support::http::SseEvent) -> Option<Value> {
        let value = event.json();
        match event.id {
            Some(id) => {
                assert_eq!(value["seq"].as_u64(), Some(id), "id is the global seq");
                if let Some(&last) = self.ids.last() {
                    assert!(id > last, "ids must increase: {last} then {id}");
                }
                self.ids.push(id);
                Some(value)
            }
            None => {
                assert_eq!(
                    value["type"], "item.delta",
                    "only deltas go without id: {value}"
                );
                self.deltas += 1;
                None
            }
        }
    }

    /// Reads until a stored event matches `pred`.
    #[track_caller]
    fn read_until(&mut self, sse: &mut SseClient, what: &str, pred: impl Fn(&Value) -> bool) {
        loop {
            match sse.try_next() {
                Ok(Some(event)) => {
                    if let Some(value) = self.take(event)
                        && pred(&value)
                    {
                        return;
                    }
                }
                Ok(None) => panic!("the stream ended before {what}"),
                Err(e) => panic!("reading the stream before {what}: {e}"),
            }
        }
    }

    /// Reads what the server still sends until the stream ends (the daemon went away).
    fn drain(&mut self, sse: &mut SseClient) {
        while let Ok(Some(event)) = sse.try_next() {
            self.take(event);
        }
    }
}

fn turn_completed(turn: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["type"] == "turn.completed" && e["data"]["turnId"] == turn
}

#[test]
fn the_session_stream_resumes_across_daemon_restarts() {
    let mut fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));

    // Connection 1 from the start, through a streamed turn.
    let mut conn1 = Delivered::default();
    let mut sse = session_sse(&fx.daemon, &id, Some(0), None);
    fx.mock
        .push(Step::text(words(8)).delay(std::time::Duration::from_millis(30)));
    let turn1 = fx.send(&id, "first turn")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    conn1.read_until(&mut sse, "turn 1 completed", turn_completed(&turn1));
    assert!(conn1.deltas > 0, "deltas stream live, without ids");
    fx.wait_turns_completed(&id, 1);

    // A graceful restart ends the stream; the session is restored (its thread resumed).
    fx.daemon.restart();
    conn1.drain(&mut sse);
    drop(sse);
    eventually("the session restored", || {
        (session_bounds(&fx, &id) == 2).then_some(())
    });
    assert_eq!(fx.view(&id)["state"], "live");
    let last1 = *conn1.ids.last().unwrap();
    let mut conn2 = Delivered::default();
    let mut sse = session_sse(&fx.daemon, &id, None, Some(last1));
    fx.mock.push(Step::text("second reply"));
    let sent = fx.send(&id, "second turn");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn2 = sent["turnId"].as_str().unwrap().to_string();
    conn2.read_until(&mut sse, "turn 2 completed", turn_completed(&turn2));

    // SIGKILL in the middle of a turn.
    fx.mock.push(
        Step::text(words(40))
            .delay(std::time::Duration::from_millis(50))
            .then_hang(),
    );
    let turn3 = fx.send(&id, "third turn")["turnId"]
        .as_str()
        .unwrap()
        .to_string();
    conn2.read_until(&mut sse, "turn 3 started", |e| {
        e["type"] == "turn.started" && e["data"]["turnId"] == turn3.as_str()
    });
    fx.mock
        .wait_for_requests(3, crate::support::codex_host::TURN_TIMEOUT);
    fx.daemon.kill9();
    conn2.drain(&mut sse);
    drop(sse);
    fx.daemon.start_again();
    eventually("the session restored after SIGKILL", || {
        (session_bounds(&fx, &id) == 3).then_some(())
    });
    let last2 = *conn2.ids.last().unwrap();
    assert!(last2 > last1);
    let mut conn3 = Delivered::default();
    let mut sse = session_sse(&fx.daemon, &id, None, Some(last2));
    // The turn the dead daemon was running is over.
    conn3.read_until(&mut sse, "turn 3 ended", turn_completed(&turn3));
    let sent = fx.send(&id, "fourth turn");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn4 = sent["turnId"].as_str().unwrap().to_string();
    conn3.read_until(&mut sse, "turn 4 completed", turn_completed(&turn4));
    let last3 = *conn3.ids.last().unwrap();

    // Together the connections delivered every stored event of the session, once, in order.
    let all: Vec<u64> = [&conn1.ids, &conn2.ids, &conn3.ids]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing, no duplicate: {all:?}"
    );
    let events = fx.events(&id);
    let stored: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .filter(|&seq| seq <= last3)
        .collect();
    assert_eq!(
        all,
        stored,
        "no gap against GET …/events:\n{}",
        dump(&events)
    );
    let done = events.iter().find(|e| turn_completed(&turn3)(e)).unwrap();
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    assert_no_duplicate_turns_or_items(&events);
    assert_eq!(fx.view(&id)["state"], "live");
}

#[test]
fn a_session_without_turns_survives_a_daemon_restart() {
    let mut fx = CodexFixture::start();
    // Created, never used: codex never persisted its thread, so a restore starts a new one.
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    // And an idempotent create with a prompt, retried: one session, one prompt.
    let body = json!({
        "runtime": "codex",
        "cwd": fx.work,
        "prompt": "the only prompt",
        "idempotencyKey": "create-once",
    });
    let first = fx.daemon.post("/api/sessions", &body);
    assert_eq!(first.status, 201, "{}", first.body);
    let first = first.json();
    assert_eq!(first["inject"]["outcome"], "started", "{first}");
    let used = first["session"]["id"].as_str().unwrap().to_string();
    fx.wait_turns_completed(&used, 1);

    fx.daemon.restart();
    let retry = fx.daemon.post("/api/sessions", &body);
    assert_eq!(retry.status, 201, "{}", retry.body);
    let retry = retry.json();
    assert_eq!(retry["session"]["id"], used.as_str(), "{retry}");
    assert_eq!(retry["inject"]["duplicate"], true, "{retry}");
    assert_eq!(
        retry["inject"]["turnId"], first["inject"]["turnId"],
        "{retry}"
    );

    for session in [&id, &used] {
        eventually("the session restored", || {
            (session_bounds(&fx, session) == 2 && fx.view(session)["state"] == "live").then_some(())
        });
    }
    let sent = fx.send(&id, "first words after the restart");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let sent = fx.send(&used, "second prompt");
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 1);
    fx.wait_turns_completed(&used, 2);
    let prompts = fx
        .mock
        .main_requests()
        .iter()
        .filter(|r| r.last_user_text() == "the only prompt")
        .count();
    assert_eq!(
        prompts, 1,
        "the retried create did not send its prompt again"
    );
    assert_eq!(
        fx.daemon.get("/api/sessions").assert_ok()["sessions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    for session in [&id, &used] {
        assert_no_duplicate_turns_or_items(&fx.events(session));
    }
}

/// Starts a turn whose command waits for an approval; returns (turn id, approval id).
fn turn_waiting_for_approval(fx: &CodexFixture, id: &str) -> (String, String) {
    fx.mock.push(Step::exec("touch late.txt"));
    let sent = fx.send(id, "Create late.txt");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let requested = fx.wait_event(id, "approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn.as_str()
    });
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    (turn, approval)
}

/// After the runtime went away during an approval: the turn ended, the item that waited is
/// closed (every `item.started` has its `item.completed`), the approval cannot be answered, the
/// command never ran, and the session takes the next send.
#[track_caller]
fn assert_approval_turn_closed(fx: &CodexFixture, id: &str, turn: &str, approval: &str) {
    let done = fx.wait_event(id, "the turn that waited ended", turn_completed(turn));
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    eventually("the session live again", || {
        (fx.view(id)["state"] == "live").then_some(())
    });
    let events = fx.events(id);
    for started in of_type(&events, "item.started") {
        let item = &started["data"]["item"]["id"];
        let completed = events
            .iter()
            .find(|e| e["type"] == "item.completed" && &e["data"]["item"]["id"] == item);
        let Some(completed) = completed else {
            panic!(
                "item {item} was started but never completed:\n{}",
                dump(&events)
            );
        };
        assert_ne!(
            completed["data"]["item"]["status"],
            "completed",
            "{}",
            dump(&events)
        );
    }
    assert_eq!(fx.view(id)["pendingApprovals"], 0);
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "accept" }),
        )
        .assert_error(409, "approval_resolved", None);
    assert!(!fx.work.join("late.txt").exists(), "the command never ran");
    let sent = fx.send(id, "Carry on");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let next = sent["turnId"].as_str().unwrap().to_string();
    fx.wait_event(id, "the next turn", turn_completed(&next));
    assert_no_duplicate_turns_or_items(&fx.events(id));
}

#[test]
fn a_backend_killed_during_an_approval_closes_the_waiting_item() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    let (turn, approval) = turn_waiting_for_approval(&fx, &id);
    let pids = backend_pids(fx.daemon.pid());
    assert_eq!(pids.len(), 1, "{pids:?}");
    kill_group(pids[0]);
    assert_approval_turn_closed(&fx, &id, &turn, &approval);
}

#[test]
fn a_daemon_restarted_during_an_approval_closes_the_waiting_item() {
    let mut fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    let (turn, approval) = turn_waiting_for_approval(&fx, &id);
    fx.daemon.restart();
    assert_approval_turn_closed(&fx, &id, &turn, &approval);
}

/// A daemon whose codex is a link the test can remove (the native binary the pinned package
/// runs), with a session whose turn waits for an approval: the fixture, the link's directory
/// (kept while the fixture lives), the link, the session, the turn and the approval.
struct BehindALink {
    fx: CodexFixture,
    _dir: tempfile::TempDir,
    link: std::path::PathBuf,
    id: String,
    turn: String,
    approval: String,
}

fn codex_behind_a_link() -> BehindALink {
    let dir = tempfile::Builder::new()
        .prefix("cohost-codex-link-")
        .tempdir()
        .unwrap();
    let link = dir.path().join("codex");
    std::os::unix::fs::symlink(crate::support::codex_home::native_codex_bin(), &link).unwrap();
    let fx = CodexFixture::start_with_env(&[], "", &[("COHOST_CODEX_BIN", link.to_str().unwrap())]);
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    let (turn, approval) = turn_waiting_for_approval(&fx, &id);
    BehindALink {
        fx,
        _dir: dir,
        link,
        id,
        turn,
        approval,
    }
}

/// The turn that waited for the approval ended `interrupted` and lost with `error`, the
/// approval with it, the session `lost`, a prompt refused at once saying so, and the command
/// never ran.
#[track_caller]
fn assert_cut_and_lost(case: &BehindALink, error: &str) {
    let BehindALink {
        fx,
        id,
        turn,
        approval,
        ..
    } = case;
    let done = fx.wait_event(id, "the turn that waited ended", turn_completed(turn));
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    assert_eq!(done["data"]["lost"], true, "{done}");
    assert_eq!(done["data"]["error"], error, "{done}");
    eventually("the session lost", || {
        (fx.view(id)["state"] == "lost").then_some(())
    });
    let lost = fx.view(id);
    assert_eq!(lost["pendingApprovals"], 0, "{lost}");
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": "accept" }),
        )
        .assert_error(409, "approval_resolved", None);
    fx.daemon.assert_prompt_refused_as_lost(id, "");
    assert!(!fx.work.join("late.txt").exists(), "the command never ran");
}

/// A backend killed while it cannot be started again (the codex binary the daemon runs is
/// gone): the running turn ends `interrupted` and lost, its approval with it, and the session
/// is `lost` saying why, refusing prompts at once — not left with a turn open until a restart.
#[test]
fn a_backend_that_cannot_be_restarted_ends_its_turn_and_leaves_the_session_lost() {
    let case = codex_behind_a_link();
    std::fs::remove_file(&case.link).unwrap();
    let pids = backend_pids(case.fx.daemon.pid());
    assert_eq!(pids.len(), 1, "{pids:?}");
    kill_group(pids[0]);
    assert_cut_and_lost(&case, "the codex backend exited during the turn");
}

/// A daemon restarted while it cannot start codex any more: the turn its old backend ran ends
/// `interrupted` and lost, its approval with it, and the session is `lost`.
#[test]
fn a_daemon_restarted_without_codex_ends_the_cut_turn_and_leaves_the_session_lost() {
    let mut case = codex_behind_a_link();
    std::fs::remove_file(&case.link).unwrap();
    case.fx.daemon.restart();
    assert_cut_and_lost(&case, "the daemon stopped during the turn");
}
