//! POST /api/agent-event, session resolution, statuses, unseen, focus, stale aging and pruning.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;

const STATUSES: [&str; 8] = [
    "idle",
    "running",
    "tool-running",
    "done",
    "error",
    "waiting",
    "interrupted",
    "stale",
];

fn is_terminal(status: &str) -> bool {
    matches!(status, "done" | "error" | "interrupted")
}

/// The session an accepted report landed in (from the answer), checked against the log.
#[track_caller]
fn resolved(daemon: &TestDaemon, body: Value) -> String {
    let resp = daemon.post("/api/agent-event", &body);
    let answer = resp.assert_ok();
    assert_eq!(answer["ok"], true, "{answer}");
    let seq = answer["seq"].as_u64().expect("seq");
    let session = answer["session"].as_str().expect("session").to_string();
    let logged = daemon.events_after(seq - 1);
    assert_eq!(logged[0]["seq"], seq);
    assert_eq!(
        logged[0]["session"],
        session.as_str(),
        "the logged event names the resolved session"
    );
    assert_eq!(logged[0]["type"], "agent.updated");
    session
}

#[test]
fn resolves_by_tmux_session_name() {
    let (tmux, _) = tmux_with_sessions(&["alpha", "beta"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    assert_eq!(
        resolved(&daemon, report("beta", "claude", "running")),
        "beta"
    );
    assert_eq!(
        resolved(&daemon, report("alpha", "claude", "running")),
        "alpha"
    );
    let instance = daemon.instance("beta", "claude").expect("claude in beta");
    assert_eq!(instance["status"], "running");
    assert_eq!(instance["agent"], "claude");
    // A name wins over a directory that points elsewhere.
    let body = json!({"agent": "x", "status": "idle", "tmuxSession": "alpha", "projectDir": daemon.scratch().to_string_lossy()});
    assert_eq!(resolved(&daemon, body), "alpha");
}

#[test]
fn resolves_by_exact_project_dir() {
    let tmux = TmuxServer::new();
    let base = make_dir(&tmux.dir().join("p/base"));
    let proj = make_dir(&tmux.dir().join("p/base/proj"));
    let other = make_dir(&tmux.dir().join("p/other"));
    tmux.new_session("root", Path::new(&base));
    tmux.new_session("proj", Path::new(&proj));
    tmux.new_session("other", Path::new(&other));
    assert_eq!(
        tmux.session_path("proj"),
        proj,
        "tmux keeps the directory we gave it"
    );
    let daemon = TestDaemon::start(&tmux, &[]);

    let by_dir = |dir: &str| json!({"agent": "codex", "status": "running", "projectDir": dir});
    assert_eq!(resolved(&daemon, by_dir(&proj)), "proj");
    assert_eq!(
        resolved(&daemon, by_dir(&base)),
        "root",
        "exact match beats the child session"
    );
    assert_eq!(resolved(&daemon, by_dir(&other)), "other");
    assert_eq!(
        resolved(&daemon, by_dir(&format!("{proj}/"))),
        "proj",
        "a trailing slash still matches"
    );
    // An unknown tmuxSession falls back to the directory.
    let body =
        json!({"agent": "codex", "status": "idle", "tmuxSession": "ghost", "projectDir": other});
    assert_eq!(resolved(&daemon, body), "other");
}

#[test]
fn resolves_by_parent_or_child_directory_longest_wins() {
    let tmux = TmuxServer::new();
    let top = make_dir(&tmux.dir().join("p"));
    let base = make_dir(&tmux.dir().join("p/base"));
    let proj = make_dir(&tmux.dir().join("p/base/proj"));
    let _deep = make_dir(&tmux.dir().join("p/base/proj/src/deep"));
    tmux.new_session("root", Path::new(&base));
    tmux.new_session("proj", Path::new(&proj));
    let daemon = TestDaemon::start(&tmux, &[]);

    let by_dir = |dir: String| json!({"agent": "codex", "status": "running", "projectDir": dir});
    // A child of both session dirs: the deepest (longest) session dir wins.
    assert_eq!(
        resolved(&daemon, by_dir(format!("{proj}/src/deep"))),
        "proj"
    );
    assert_eq!(resolved(&daemon, by_dir(format!("{proj}/src"))), "proj");
    // A child of base only (a sibling sharing a string prefix with `proj` is not inside it).
    assert_eq!(resolved(&daemon, by_dir(format!("{base}/projx"))), "root");
    assert_eq!(resolved(&daemon, by_dir(format!("{base}/docs/x"))), "root");
    // A parent of the session dirs matches too; the longest session dir wins.
    assert_eq!(resolved(&daemon, by_dir(top)), "proj");
}

#[test]
fn unresolvable_report_is_404_naming_what_was_tried_and_stores_nothing() {
    let (tmux, _) = tmux_with_sessions(&["alpha"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("alpha", "a", "done");
    let before = daemon.stored_fingerprint();

    let body = json!({"agent": "a", "status": "running", "tmuxSession": "nope", "projectDir": "/definitely/not/here"});
    let error = daemon
        .post("/api/agent-event", &body)
        .assert_error(404, "session_not_found", None);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("tmuxSession `nope`"), "{message}");
    assert!(
        message.contains("projectDir `/definitely/not/here`"),
        "{message}"
    );
    assert!(message.contains("1 live tmux session"), "{message}");

    let error = daemon
        .post("/api/agent-event", &report("ghost", "a", "running"))
        .assert_error(404, "session_not_found", None);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("tmuxSession `ghost`") && !message.contains("projectDir"),
        "{message}"
    );

    let body = json!({"agent": "a", "status": "running", "projectDir": "/definitely/not/here"});
    let error = daemon
        .post_no_token("/api/agent-event", &body)
        .assert_error(404, "session_not_found", None);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("projectDir `/definitely/not/here`"),
        "{error}"
    );

    assert_eq!(
        daemon.stored_fingerprint(),
        before,
        "a rejected report must not change anything"
    );
}

#[test]
fn without_a_tmux_server_reports_are_404_and_state_says_so() {
    let scratch = temp_dir("cohost-notmux-");
    let socket = scratch.path().join("absent.sock");
    let daemon = TestDaemon::start_with(Some(&socket), &[]);
    let state = daemon.state();
    assert_eq!(state["tmuxRunning"], false, "{state}");
    assert_eq!(state["sessions"], json!([]));
    let error = daemon
        .post("/api/agent-event", &report("s", "a", "running"))
        .assert_error(404, "session_not_found", None);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("no tmux server running"),
        "{error}"
    );
}

#[test]
fn a_session_created_after_start_resolves_at_once() {
    let (tmux, _) = tmux_with_sessions(&["first"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let dir = make_dir(&tmux.dir().join("p/late"));
    tmux.new_session("late", Path::new(&dir));
    // No waiting: a miss in the daemon's session cache re-reads tmux.
    assert_eq!(resolved(&daemon, report("late", "a", "running")), "late");
    let body = json!({"agent": "b", "status": "running", "projectDir": format!("{dir}/src")});
    assert_eq!(resolved(&daemon, body), "late");
}

#[test]
fn every_status_is_stored_and_only_finished_ones_are_unseen() {
    let (tmux, _) = tmux_with_sessions(&["work", "solo"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    for status in STATUSES {
        daemon.report_status("work", &format!("agent-{status}"), status);
    }
    let session = daemon.session("work");
    let agents = session["agents"].as_array().unwrap();
    assert_eq!(agents.len(), STATUSES.len(), "{session:#}");
    for status in STATUSES {
        let agent = daemon.instance("work", &format!("agent-{status}")).unwrap();
        assert_eq!(agent["status"], status, "{agent}");
        assert_eq!(
            agent["unseen"],
            is_terminal(status),
            "unseen for {status}: {agent}"
        );
    }
    // The session shows the status that most needs a human, and is unseen if any instance is.
    assert_eq!(session["status"], "waiting");
    assert_eq!(session["unseen"], true);

    // One instance per status in its own session: the session status is that status.
    for status in STATUSES {
        daemon.report_status("solo", "only", status);
        let solo = daemon.session("solo");
        assert_eq!(solo["status"], status, "{solo}");
        assert_eq!(solo["unseen"], is_terminal(status), "{solo}");
        assert_eq!(solo["agents"].as_array().unwrap().len(), 1);
    }
    // Every report is an agent.updated event carrying the status.
    let logged: Vec<String> = daemon
        .events_after(0)
        .iter()
        .filter(|e| e["type"] == "agent.updated" && e["session"] == "solo")
        .map(|e| e["data"]["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(logged, STATUSES);
}

#[test]
fn instances_are_keyed_by_agent_and_thread_and_keep_their_fields() {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    daemon.report(&json!({
        "agent": "codex", "status": "running", "tmuxSession": "work",
        "threadId": "t1", "threadName": "Fix the build", "lastUserPrompt": "please fix it",
        "paneId": "%3", "liveness": "exited", "ts": 1234, "someFutureField": {"ignored": true}
    }));
    daemon.report(
        &json!({"agent": "codex", "status": "waiting", "tmuxSession": "work", "threadId": "t2"}),
    );
    daemon.report(&json!({"agent": "claude", "status": "idle", "tmuxSession": "work"}));

    let t1 = daemon.instance("work", "codex:t1").expect("codex:t1");
    assert_eq!(t1["agent"], "codex");
    assert_eq!(t1["threadId"], "t1");
    assert_eq!(t1["threadName"], "Fix the build");
    assert_eq!(t1["lastUserPrompt"], "please fix it");
    assert_eq!(t1["paneId"], "%3");
    assert_eq!(t1["liveness"], "exited");
    assert_eq!(t1["ts"], 1234, "the reporter's ts is kept");
    assert!(
        t1["updatedAt"].as_u64().unwrap() >= before,
        "updatedAt is the daemon's receive time: {t1}"
    );
    assert_eq!(
        daemon.instance("work", "codex:t2").unwrap()["status"],
        "waiting"
    );
    assert_eq!(daemon.instance("work", "claude").unwrap()["status"], "idle");

    // A later report for the same thread replaces that instance only.
    daemon.report(
        &json!({"agent": "codex", "status": "done", "tmuxSession": "work", "threadId": "t1"}),
    );
    let session = daemon.session("work");
    assert_eq!(
        session["agents"].as_array().unwrap().len(),
        3,
        "{session:#}"
    );
    assert_eq!(
        daemon.instance("work", "codex:t1").unwrap()["status"],
        "done"
    );
    // Newest update first.
    assert_eq!(session["agents"][0]["key"], "codex:t1", "{session:#}");
}

#[test]
fn done_sets_unseen_and_a_later_running_clears_it() {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("work", "claude", "running");
    assert_eq!(daemon.instance("work", "claude").unwrap()["unseen"], false);
    daemon.report_status("work", "claude", "done");
    assert_eq!(daemon.instance("work", "claude").unwrap()["unseen"], true);
    assert_eq!(daemon.session("work")["unseen"], true);
    daemon.report_status("work", "claude", "running");
    assert_eq!(daemon.instance("work", "claude").unwrap()["unseen"], false);
    assert_eq!(daemon.session("work")["unseen"], false);
    for status in ["error", "interrupted"] {
        daemon.report_status("work", "claude", status);
        assert_eq!(
            daemon.instance("work", "claude").unwrap()["unseen"],
            true,
            "{status}"
        );
        daemon.report_status("work", "claude", "tool-running");
        assert_eq!(
            daemon.instance("work", "claude").unwrap()["unseen"],
            false,
            "after {status}"
        );
    }
}

#[test]
fn api_focus_marks_that_sessions_finished_instances_seen() {
    let (tmux, _) = tmux_with_sessions(&["work", "other"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("work", "a", "done");
    daemon.report_status("work", "b", "error");
    daemon.report_status("work", "c", "running");
    daemon.report_status("other", "a", "done");
    assert_eq!(daemon.state()["focusedSession"], Value::Null);

    let answer = daemon
        .post("/api/focus", &json!({"session": "work"}))
        .assert_ok();
    assert_eq!(answer["session"], "work");
    let state = daemon.state();
    assert_eq!(state["focusedSession"], "work");
    let work = daemon.session("work");
    assert_eq!(work["unseen"], false, "{work:#}");
    for key in ["a", "b", "c"] {
        assert_eq!(
            daemon.instance("work", key).unwrap()["unseen"],
            false,
            "{key}"
        );
    }
    assert_eq!(
        daemon.instance("work", "c").unwrap()["status"],
        "running",
        "focus changes no status"
    );
    assert_eq!(
        daemon.session("other")["unseen"],
        true,
        "another session is untouched"
    );

    let focused: Vec<Value> = daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["type"] == "session.focused")
        .collect();
    assert_eq!(focused.len(), 1);
    assert_eq!(focused[0]["session"], "work");
    assert_eq!(focused[0]["data"]["source"], "api");

    // A turn that finishes after the focus is news again.
    daemon.report_status("work", "a", "done");
    assert_eq!(daemon.instance("work", "a").unwrap()["unseen"], true);
    // The CLI does the same thing.
    daemon.cli_ok(&["focus", "work"]);
    assert_eq!(daemon.instance("work", "a").unwrap()["unseen"], false);
}

#[test]
fn busy_instances_go_stale_after_stale_after_unless_alive() {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let daemon = TestDaemon::start(&tmux, &["--stale-after", "1"]);
    let started = Instant::now();
    daemon.report_status("work", "run", "running");
    daemon.report_status("work", "tool", "tool-running");
    daemon.report_status("work", "wait", "waiting");
    daemon.report(
        &json!({"agent": "alive", "status": "running", "tmuxSession": "work", "liveness": "alive"}),
    );
    daemon.report_status("work", "idle", "idle");
    daemon.report_status("work", "done", "done");

    daemon.wait_for(
        "run, tool and wait to go stale",
        Duration::from_secs(6),
        |d| {
            let all = ["run", "tool", "wait"].iter().all(|k| {
                d.instance("work", k)
                    .is_some_and(|i| i["status"] == "stale")
            });
            all.then_some(())
        },
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "went stale too early: {:?}",
        started.elapsed()
    );
    assert_eq!(
        daemon.instance("work", "alive").unwrap()["status"],
        "running",
        "liveness alive never ages"
    );
    assert_eq!(daemon.instance("work", "idle").unwrap()["status"], "idle");
    assert_eq!(daemon.instance("work", "done").unwrap()["status"], "done");

    let stale_keys = |d: &TestDaemon| -> Vec<String> {
        let mut keys: Vec<String> = d
            .events_after(0)
            .iter()
            .filter(|e| e["type"] == "agent.stale")
            .map(|e| {
                assert_eq!(e["session"], "work", "{e}");
                e["data"]["key"].as_str().unwrap().to_string()
            })
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(stale_keys(&daemon), ["run", "tool", "wait"]);
    // Another tick proposes nothing new for instances already stale.
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(stale_keys(&daemon), ["run", "tool", "wait"]);
    // A fresh report revives a stale instance.
    daemon.report_status("work", "run", "running");
    assert_eq!(daemon.instance("work", "run").unwrap()["status"], "running");
}

#[test]
fn finished_seen_instances_are_pruned_and_unseen_ones_kept() {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let daemon = TestDaemon::start(&tmux, &["--prune-after", "1"]);
    daemon.report_status("work", "seen-done", "done");
    daemon.report_status("work", "seen-error", "error");
    daemon
        .post("/api/focus", &json!({"session": "work"}))
        .assert_ok();
    daemon.report_status("work", "unseen", "interrupted");
    daemon.report_status("work", "busy", "running");
    daemon.wait_for("seen instances to be pruned", Duration::from_secs(6), |d| {
        (d.instance("work", "seen-done").is_none() && d.instance("work", "seen-error").is_none())
            .then_some(())
    });
    assert!(
        daemon.instance("work", "unseen").is_some(),
        "an unseen instance is kept"
    );
    assert!(
        daemon.instance("work", "busy").is_some(),
        "a running instance is not pruned"
    );
    let mut pruned: Vec<String> = daemon
        .events_after(0)
        .iter()
        .filter(|e| e["type"] == "agent.pruned")
        .map(|e| e["data"]["key"].as_str().unwrap().to_string())
        .collect();
    pruned.sort();
    assert_eq!(pruned, ["seen-done", "seen-error"]);
}
