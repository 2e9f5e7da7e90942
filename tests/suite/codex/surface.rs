//! The codex host's edges: doctor (with and without codex), refused inputs on the session routes,
//! and the CLI commands for hosted sessions.

use serde_json::json;

use crate::suite::codex::host::{api, post_message};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;
use crate::support::{TestDaemon, TmuxServer, pinned_version, temp_dir};

#[test]
fn doctor_reports_a_missing_codex_and_sessions_are_refused() {
    let tmux = TmuxServer::new();
    let codex_home = temp_dir("cohost-codex-home-");
    let work = temp_dir("cohost-work-");
    let daemon = TestDaemon::start_with_env(
        Some(tmux.socket()),
        &[],
        &[
            ("COHOST_CODEX_BIN", "/nonexistent/codex"),
            ("CODEX_HOME", codex_home.path().to_str().unwrap()),
        ],
    );
    let doctor = daemon.get("/api/doctor").assert_ok();
    assert_eq!(doctor["ok"], false, "{doctor}");
    assert_eq!(doctor["codexFound"], false, "{doctor}");
    let issues = doctor["issues"].as_array().unwrap();
    assert!(
        issues
            .iter()
            .any(|i| i.as_str().unwrap().to_lowercase().contains("codex")),
        "an issue about codex: {doctor}"
    );

    daemon
        .post(
            "/api/sessions",
            &json!({ "runtime": "codex", "cwd": work.path() }),
        )
        .assert_error(503, "codex_unavailable", None);
    assert_eq!(
        daemon.get("/api/sessions").assert_ok()["sessions"],
        json!([]),
        "a refused create leaves no session behind"
    );
    let models = daemon.get("/api/models?runtime=codex").assert_ok();
    assert_eq!(models["ok"], false, "{models}");

    let output = daemon.cli(&["doctor"]);
    assert!(!output.status.success(), "`cohost doctor` must fail");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("codex found:    no"), "{stdout}");
    let output = daemon.cli(&["start", "codex", "--cwd", work.path().to_str().unwrap()]);
    assert!(
        !output.status.success(),
        "`cohost start` without codex must fail"
    );
}

#[test]
fn doctor_finds_the_installed_codex() {
    let fx = CodexFixture::start();
    let doctor = fx.daemon.get("/api/doctor").assert_ok();
    assert_eq!(doctor["codexFound"], true, "{doctor}");
    assert!(
        doctor["codexVersion"]
            .as_str()
            .is_some_and(|v| v.contains(&pinned_version(&cohost::peers::CODEX))),
        "{doctor}"
    );
    assert!(doctor["codexPath"].is_string(), "{doctor}");
    assert_eq!(doctor["sessionStoreWritable"], true, "{doctor}");
    assert_eq!(doctor["codexVersionPlace"], "tested", "{doctor}");
    assert_eq!(
        doctor["codexSupported"]["oldest"],
        cohost::peers::CODEX.oldest
    );
    assert_eq!(
        doctor["codexSupported"]["newest"],
        cohost::peers::CODEX.newest
    );
    assert!(
        !doctor["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().contains("codex not found")),
        "{doctor}"
    );
    assert!(
        !doctor["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("codex")),
        "a tested release draws no warning: {doctor}"
    );
    // The daemon said the same once at start.
    fx.daemon.wait_for(
        "the start-up peer line",
        std::time::Duration::from_secs(30),
        |d| d.stderr_text().contains("codex found").then_some(()),
    );
}

/// A release outside the tested range works, with a warning naming the range — in `doctor` and
/// once in the daemon's log at start; a missing claude is an issue of its own.
#[test]
fn doctor_warns_about_releases_outside_the_tested_range() {
    let tmux = TmuxServer::new();
    let bin = temp_dir("cohost-fake-peers-");
    let write_script = |name: &str, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = bin.path().join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let codex = write_script(
        "codex",
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'codex-cli 0.99.0'; exit 0; }\necho 'Logged in using an API key'\n",
    );
    let claude = write_script(
        "claude",
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo '9.0.0 (Claude Code)'; exit 0; }\nexit 1\n",
    );
    let codex_home = temp_dir("cohost-codex-home-");
    let daemon = TestDaemon::start_with_env(
        Some(tmux.socket()),
        &[],
        &[
            ("COHOST_CODEX_BIN", codex.to_str().unwrap()),
            ("COHOST_CLAUDE_BIN", claude.to_str().unwrap()),
            ("CODEX_HOME", codex_home.path().to_str().unwrap()),
        ],
    );
    let doctor = daemon.get("/api/doctor").assert_ok();
    assert_eq!(doctor["codexVersion"], "0.99.0", "{doctor}");
    assert_eq!(doctor["codexVersionPlace"], "older", "{doctor}");
    assert_eq!(doctor["claude"]["version"], "9.0.0", "{doctor}");
    assert_eq!(doctor["claude"]["versionPlace"], "newer", "{doctor}");
    assert_eq!(doctor["claude"]["hooksInstallable"], true, "{doctor}");
    assert_eq!(doctor["claude"]["permissionMode"], "default", "{doctor}");
    assert_eq!(
        doctor["claude"]["allowedPermissionModes"],
        json!(["default", "acceptEdits", "plan"]),
        "{doctor}"
    );
    let warnings: Vec<&str> = doctor["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let codex_range = cohost::peers::CODEX.range();
    let claude_range = cohost::peers::CLAUDE.range();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("codex 0.99.0") && w.contains(&codex_range)),
        "{doctor}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("claude 9.0.0") && w.contains(&claude_range)),
        "{doctor}"
    );
    assert!(
        !doctor["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().contains("version")),
        "outside the range is never an issue: {doctor}"
    );
    daemon.wait_for(
        "the start-up warnings",
        std::time::Duration::from_secs(30),
        |d| {
            let log = d.stderr_text();
            (log.contains(&format!(
                "codex 0.99.0 is older than the oldest release cohost is tested with ({})",
                cohost::peers::CODEX.oldest
            )) && log.contains("claude 9.0.0 is newer"))
            .then_some(())
        },
    );
    let output = daemon.cli(&["doctor"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("claude version: 9.0.0"), "{stdout}");
    assert!(
        stdout.contains("warning: claude 9.0.0 is newer"),
        "{stdout}"
    );
    assert!(stdout.contains("claude mode:    default"), "{stdout}");
    let output = daemon.cli(&["doctor", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["claude"]["version"], "9.0.0");

    // Without claude: an issue that says so, and what to do.
    let daemon = TestDaemon::start_with_env(
        Some(tmux.socket()),
        &[],
        &[
            ("COHOST_CODEX_BIN", codex.to_str().unwrap()),
            ("COHOST_CLAUDE_BIN", "/nonexistent/claude"),
            ("CODEX_HOME", codex_home.path().to_str().unwrap()),
        ],
    );
    let doctor = daemon.get("/api/doctor").assert_ok();
    assert_eq!(doctor["claude"]["found"], false, "{doctor}");
    assert_eq!(doctor["ok"], false, "{doctor}");
    assert!(
        doctor["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("claude: COHOST_CLAUDE_BIN")),
        "{doctor}"
    );
}

#[test]
fn the_session_routes_refuse_bad_input() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    let cwd = fx.work.to_str().unwrap().to_string();

    // Unknown sessions.
    let nope = "cs_0000000000000000";
    d.get(&format!("/api/sessions/{nope}"))
        .assert_error(404, "session_not_found", None);
    post_message(&fx, nope, json!({ "text": "hi" })).assert_error(404, "not_live", None);
    d.post(&format!("/api/sessions/{nope}/interrupt"), &json!({}))
        .assert_error(404, "session_not_found", None);
    d.get(&format!("/api/sessions/{nope}/events"))
        .assert_error(404, "session_not_found", None);
    d.get(&format!("/api/sessions/{nope}/approvals"))
        .assert_error(404, "session_not_found", None);
    d.post(
        &format!("/api/sessions/{nope}/approvals/ap:x:y:command"),
        &json!({ "decision": "accept" }),
    )
    .assert_error(404, "session_not_found", None);
    api(d, "GET", &format!("/api/sessions/{nope}/goal"), None).assert_error(
        404,
        "session_not_found",
        None,
    );
    d.post(&format!("/api/sessions/{nope}/fork"), &json!({}))
        .assert_error(404, "session_not_found", None);
    api(d, "DELETE", &format!("/api/sessions/{nope}"), None).assert_error(
        404,
        "session_not_found",
        None,
    );

    // Bad creates.
    let create = |body: serde_json::Value| d.post("/api/sessions", &body);
    create(json!({ "runtime": "codex", "cwd": "relative/dir" })).assert_error(
        400,
        "invalid_field",
        Some("cwd"),
    );
    create(json!({ "runtime": "codex", "cwd": fx.work.join("missing").to_str().unwrap() }))
        .assert_error(400, "invalid_field", Some("cwd"));
    create(json!({ "runtime": "codex" })).assert_error(400, "missing_field", Some("cwd"));
    create(json!({ "runtime": "gemini", "cwd": cwd })).assert_error(
        400,
        "invalid_field",
        Some("runtime"),
    );
    create(json!({ "runtime": "codex", "cwd": cwd, "approvalPolicy": "sometimes" })).assert_error(
        400,
        "invalid_field",
        Some("approvalPolicy"),
    );
    create(json!({ "runtime": "codex", "cwd": cwd, "sandbox": "none" })).assert_error(
        400,
        "invalid_field",
        Some("sandbox"),
    );
    let unknown = create(json!({ "runtime": "codex", "cwd": cwd, "color": "blue" }));
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(unknown.body.contains("color"), "{}", unknown.body);
    assert_eq!(
        d.get("/api/sessions").assert_ok()["sessions"],
        json!([]),
        "nothing was created"
    );

    // Bad sends to a live session.
    let id = fx.create(json!({}));
    post_message(&fx, &id, json!({ "text": "" })).assert_error(400, "invalid_field", Some("text"));
    post_message(&fx, &id, json!({ "text": "  \n " })).assert_error(
        400,
        "invalid_field",
        Some("text"),
    );
    post_message(&fx, &id, json!({})).assert_error(400, "missing_field", Some("text"));
    let unknown = post_message(&fx, &id, json!({ "text": "hi", "priority": 1 }));
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(unknown.body.contains("priority"), "{}", unknown.body);
    post_message(&fx, &id, json!({ "text": "hi", "idempotencyKey": "" })).assert_error(
        400,
        "invalid_field",
        Some("idempotencyKey"),
    );
    d.post(
        &format!("/api/sessions/{id}/command"),
        &json!({ "text": "/dance" }),
    )
    .assert_error(400, "invalid_field", Some("text"));
    d.get(&format!("/api/sessions/{id}/events?wait=abc"))
        .assert_error(400, "invalid_field", Some("wait"));
    assert!(
        fx.mock.main_requests().is_empty(),
        "nothing reached the model"
    );

    // A closed session is not live.
    let closed = api(d, "DELETE", &format!("/api/sessions/{id}"), None).assert_ok();
    assert_eq!(closed["ok"], true, "{closed}");
    assert_eq!(fx.view(&id)["state"], "closed");
    post_message(&fx, &id, json!({ "text": "hi" })).assert_error(409, "not_live", None);
    api(d, "DELETE", &format!("/api/sessions/{id}"), None).assert_error(
        409,
        "session_closed",
        None,
    );
}

#[test]
fn the_cli_drives_a_hosted_session() {
    let fx = CodexFixture::start();
    let d = &fx.daemon;
    let cwd = fx.work.to_str().unwrap();
    fx.mock
        .push(Step::text("Hello from the CLI test!").when_user_contains("Say hi"));
    fx.mock
        .push(Step::text("Second answer.").when_user_contains("once more"));

    let out = d.cli_ok(&[
        "start",
        "codex",
        "--cwd",
        cwd,
        "--approval-policy",
        "never",
        "Say hi",
    ]);
    let id = out.trim().to_string();
    assert!(
        id.starts_with("cs_") && !id.contains(char::is_whitespace),
        "{out:?}"
    );
    fx.wait_turns_completed(&id, 1);

    let sessions = d.cli_ok(&["sessions"]);
    let line = sessions
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not in `cohost sessions`: {sessions}"));
    assert!(
        line.contains("codex") && line.contains("live") && line.contains("idle"),
        "{line}"
    );
    assert!(
        line.contains("managed") && line.contains("0 waiting"),
        "{line}"
    );

    let sent = d.cli_ok(&["send", &id, "once more"]);
    assert!(sent.starts_with("started "), "{sent:?}");
    assert!(
        sent.contains("(task task_"),
        "the send is tracked as a task: {sent:?}"
    );
    fx.wait_turns_completed(&id, 2);

    let transcript = d.cli_ok(&["events", &id]);
    for needle in [
        "> Say hi",
        "Hello from the CLI test!",
        "> once more",
        "Second answer.",
        "completed",
    ] {
        assert!(
            transcript.contains(needle),
            "{needle:?} missing in:\n{transcript}"
        );
    }
    let hello = transcript.find("Hello from the CLI test!").unwrap();
    let second = transcript.find("Second answer.").unwrap();
    assert!(hello < second, "in order:\n{transcript}");

    let interrupted = d.cli_ok(&["interrupt", &id]);
    assert_eq!(interrupted.trim(), "no turn was running");

    // An unknown session is an error with a non-zero exit.
    let output = d.cli(&["send", "cs_0000000000000000", "hi"]);
    assert!(
        !output.status.success(),
        "sending to an unknown session must fail"
    );
}
