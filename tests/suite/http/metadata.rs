//! The opensessions-compatible metadata routes: /set-status, /set-progress, /log, /notify,
//! /clear-log, reflected in /api/state.

use crate::support::*;

fn meta(daemon: &TestDaemon, session: &str) -> Value {
    daemon.session(session)["metadata"].clone()
}

fn messages(daemon: &TestDaemon, session: &str) -> Vec<String> {
    meta(daemon, session)["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn metadata_routes_work_without_a_token_and_show_in_state() {
    let (tmux, _) = tmux_with_sessions(&["s1", "s2"]);
    let daemon = TestDaemon::start(&tmux, &["--max-logs", "3"]);
    assert_eq!(
        meta(&daemon, "s1"),
        json!({"status": null, "progress": null, "logs": []})
    );

    let answer = daemon
        .post_no_token(
            "/set-status",
            &json!({"session": "s1", "text": "Deploying", "tone": "warn"}),
        )
        .assert_ok();
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["session"], "s1");
    assert!(answer["seq"].as_u64().is_some());
    let status = &meta(&daemon, "s1")["status"];
    assert_eq!(status["text"], "Deploying");
    assert_eq!(status["tone"], "warn");
    assert!(status["ts"].as_u64().is_some());

    daemon
        .post_no_token(
            "/set-progress",
            &json!({"session": "s1", "current": 3, "total": 10, "label": "services"}),
        )
        .assert_ok();
    let progress = &meta(&daemon, "s1")["progress"];
    assert_eq!(
        (
            progress["current"].clone(),
            progress["total"].clone(),
            progress["label"].clone()
        ),
        (json!(3), json!(10), json!("services"))
    );
    daemon
        .post_no_token("/set-progress", &json!({"session": "s1", "percent": 42.5}))
        .assert_ok();
    let progress = &meta(&daemon, "s1")["progress"];
    assert_eq!(progress["percent"], 42.5);
    assert!(
        progress.get("current").is_none() && progress.get("label").is_none(),
        "a new progress replaces the old: {progress}"
    );

    for i in 0..5 {
        daemon.post_no_token("/log", &json!({"session": "s1", "message": format!("m{i}"), "tone": "info", "source": "ci"})).assert_ok();
    }
    assert_eq!(
        messages(&daemon, "s1"),
        ["m2", "m3", "m4"],
        "--max-logs 3 keeps the newest three"
    );
    let log = &meta(&daemon, "s1")["logs"][2];
    assert_eq!(log["tone"], "info");
    assert_eq!(log["source"], "ci");
    assert!(
        log.get("notify").is_none() || log["notify"] == false,
        "{log}"
    );

    daemon
        .post_no_token(
            "/notify",
            &json!({"session": "s1", "message": "ping", "tone": "success"}),
        )
        .assert_ok();
    assert_eq!(messages(&daemon, "s1"), ["m3", "m4", "ping"]);
    assert_eq!(meta(&daemon, "s1")["logs"][2]["notify"], true);

    // The other session is untouched; the token works on these routes too.
    assert_eq!(
        meta(&daemon, "s2"),
        json!({"status": null, "progress": null, "logs": []})
    );
    daemon
        .post("/log", &json!({"session": "s2", "message": "with token"}))
        .assert_ok();
    assert_eq!(messages(&daemon, "s2"), ["with token"]);

    daemon
        .post_no_token("/clear-log", &json!({"session": "s1"}))
        .assert_ok();
    assert_eq!(meta(&daemon, "s1")["logs"], json!([]));
    assert_eq!(
        meta(&daemon, "s1")["status"]["text"],
        "Deploying",
        "clear-log clears only logs"
    );
    daemon
        .post_no_token("/set-status", &json!({"session": "s1", "text": null}))
        .assert_ok();
    assert_eq!(meta(&daemon, "s1")["status"], Value::Null);
    daemon
        .post_no_token("/set-status", &json!({"session": "s1", "text": "again"}))
        .assert_ok();
    daemon
        .post_no_token("/set-status", &json!({"session": "s1"}))
        .assert_ok();
    assert_eq!(
        meta(&daemon, "s1")["status"],
        Value::Null,
        "an absent text clears too"
    );
    daemon
        .post_no_token("/set-progress", &json!({"session": "s1", "clear": true}))
        .assert_ok();
    assert_eq!(
        meta(&daemon, "s1"),
        json!({"status": null, "progress": null, "logs": []})
    );

    // Every call is one event of the matching type.
    let types: Vec<String> = daemon
        .events_after(1)
        .iter()
        .filter(|e| e["session"] == "s1")
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    let mut expected = vec!["meta.status", "meta.progress", "meta.progress"];
    expected.extend(["meta.log"; 6]);
    expected.extend([
        "meta.log_cleared",
        "meta.status",
        "meta.status",
        "meta.status",
        "meta.progress",
    ]);
    assert_eq!(types, expected);
    let notify = daemon
        .events_after(0)
        .into_iter()
        .find(|e| e["data"]["message"] == "ping")
        .unwrap();
    assert_eq!(notify["type"], "meta.log");
    assert_eq!(notify["data"]["notify"], true);
}

#[test]
fn logs_are_capped_at_100_per_session_by_default() {
    let (tmux, _) = tmux_with_sessions(&["s1", "s2"]);
    let daemon = TestDaemon::start(&tmux, &["--fsync", "never"]);
    for i in 0..105 {
        daemon
            .post_no_token(
                "/log",
                &json!({"session": "s1", "message": format!("m{i}")}),
            )
            .assert_ok();
    }
    daemon
        .post_no_token("/log", &json!({"session": "s2", "message": "only"}))
        .assert_ok();
    let logs = messages(&daemon, "s1");
    assert_eq!(logs.len(), 100);
    assert_eq!(logs.first().map(String::as_str), Some("m5"));
    assert_eq!(logs.last().map(String::as_str), Some("m104"));
    assert_eq!(messages(&daemon, "s2"), ["only"], "the cap is per session");
}

#[test]
fn metadata_and_agents_live_side_by_side() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon
        .post_no_token("/set-status", &json!({"session": "s1", "text": "busy"}))
        .assert_ok();
    daemon.report_status("s1", "claude", "done");
    let session = daemon.session("s1");
    assert_eq!(session["status"], "done");
    assert_eq!(session["metadata"]["status"]["text"], "busy");
    // The CLI table shows both.
    let table = daemon.cli_ok(&["state"]);
    assert!(
        table.contains("s1") && table.contains("claude") && table.contains("status: busy"),
        "{table}"
    );
}
