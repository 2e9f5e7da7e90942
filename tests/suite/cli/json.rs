//! Every CLI read command's `--json` prints what the HTTP API answers, unchanged (the task and
//! queue commands, which need a hosted session, are checked in `suite::tasks`).

use crate::support::*;

#[test]
fn cli_read_commands_print_the_http_answers_as_json() {
    let (tmux, _) = tmux_with_sessions(&["work", "play"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("work", "claude-code", "running");
    daemon.report_status("play", "codex", "done");
    let cli_json = |args: &[&str]| -> Value {
        let out = daemon.cli_ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("cohost {args:?}: {e}: {out}"))
    };

    assert_eq!(
        cli_json(&["state", "--json"]),
        daemon.get("/api/state").assert_ok()
    );
    assert_eq!(
        cli_json(&["sessions", "--json"]),
        daemon.get("/api/sessions").assert_ok()
    );
    assert_eq!(
        cli_json(&["explain", "work", "claude-code", "--json"]),
        daemon
            .get("/api/state/work/agents/claude-code/explain")
            .assert_ok()
    );
    // `doctor` exits 1 when it finds issues (no codex here), and still prints the answer.
    let doctor = daemon.get("/api/doctor").json();
    let out = daemon.cli(&["doctor", "--json"]);
    let cli_doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli_doctor, doctor);

    // `events --json`: one event per line, exactly the events of GET /api/events.
    let out = daemon.cli_ok(&["events", "--json"]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let page = daemon.get("/api/events?after=0").assert_ok();
    assert_eq!(&lines, page["events"].as_array().unwrap());
    assert!(lines.len() >= 3, "{lines:?}");
}
