//! The command line: `event`, `state`, `events`, `token`, `focus`, errors, and `serve` options.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::support::*;

fn stderr_of(output: &std::process::Output) -> String {
    strip_ansi(&String::from_utf8_lossy(&output.stderr))
}

#[test]
fn cli_event_state_events_and_token() {
    let (tmux, dirs) = tmux_with_sessions(&["s1", "s2"]);
    let daemon = TestDaemon::start(&tmux, &[]);

    assert_eq!(daemon.cli_ok(&["token"]).trim(), daemon.token());

    let out = daemon.cli_ok(&[
        "event",
        "claude",
        "running",
        "--session",
        "s1",
        "--thread-id",
        "t1",
        "--prompt",
        "fix it",
        "--liveness",
        "alive",
    ]);
    let answer: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["session"], "s1");
    let first = answer["seq"].as_u64().unwrap();
    let t1 = daemon.instance("s1", "claude:t1").unwrap();
    assert_eq!(t1["status"], "running");
    assert_eq!(t1["lastUserPrompt"], "fix it");
    assert_eq!(t1["liveness"], "alive");

    // A relative --project-dir is resolved against the caller's directory.
    let sub = make_dir(&std::path::Path::new(&dirs[1]).join("src"));
    let output = run_with_timeout(
        daemon
            .cli_command(&[
                "event",
                "codex",
                "done",
                "--project-dir",
                "src",
                "--ts",
                "777",
            ])
            .current_dir(&dirs[1]),
        Duration::from_secs(15),
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["session"], "s2", "{sub} resolves to s2");
    assert_eq!(daemon.instance("s2", "codex").unwrap()["ts"], 777);

    // state --json is the raw /api/state.
    let json: Value = serde_json::from_str(&daemon.cli_ok(&["state", "--json"])).unwrap();
    let mut api = daemon.state();
    let mut cli = json.clone();
    api.as_object_mut().unwrap().remove("seq");
    cli.as_object_mut().unwrap().remove("seq");
    assert_eq!(cli, api);
    assert_eq!(json["tmuxRunning"], true);

    // state renders a table.
    let table = daemon.cli_ok(&["state"]);
    for needle in [
        "SESSION",
        "s1",
        "s2",
        "claude:t1",
        "running",
        "codex",
        "done*",
        "fix it",
    ] {
        assert!(table.contains(needle), "`{needle}` missing from:\n{table}");
    }

    // events prints every event as one JSON object per line.
    let out = daemon.cli_ok(&["events"]);
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_contiguous(&seqs(&events), 1, daemon.head());
    assert_eq!(events, daemon.events_after(0));
    let out = daemon.cli_ok(&["events", "--after", &first.to_string()]);
    let later: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seqs(&later).first(), Some(&(first + 1)));

    // focus marks seen.
    assert_eq!(daemon.instance("s2", "codex").unwrap()["unseen"], true);
    daemon.cli_ok(&["focus", "s2"]);
    assert_eq!(daemon.instance("s2", "codex").unwrap()["unseen"], false);
    assert_eq!(daemon.state()["focusedSession"], "s2");

    // Errors: a bad status is refused by the parser, an unknown session by the daemon.
    let head = daemon.head();
    let output = daemon.cli(&["event", "claude", "sleeping", "--session", "s1"]);
    assert!(!output.status.success());
    assert!(
        stderr_of(&output).contains("sleeping"),
        "{}",
        stderr_of(&output)
    );
    let output = daemon.cli(&["event", "claude", "running", "--session", "ghost"]);
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("404") && stderr.contains("session_not_found") && stderr.contains("ghost"),
        "{stderr}"
    );
    let output = daemon.cli(&["event", "claude", "running"]);
    assert!(
        !output.status.success(),
        "a session or project dir is required"
    );
    assert_eq!(daemon.head(), head, "failed CLI calls store nothing");
}

#[test]
fn cli_events_follow_streams_new_events() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let head = daemon.head();
    let mut child = daemon
        .cli_command(&["events", "--follow", "--after", &head.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut expected = Vec::new();
    for i in 0..3 {
        expected.push(daemon.report_status("s1", &format!("a{i}"), "running"));
    }
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                daemon.fail(&format!("`cohost events --follow` printed only {got:?}"))
            });
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        got.push(event["seq"].as_u64().unwrap());
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got, expected);
}

#[test]
fn cli_against_a_stopped_daemon_fails_with_one_line_naming_cohost_serve() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let port = daemon.port();
    daemon.stop();
    assert!(!daemon.home().join("daemon.json").exists());

    let check = |output: std::process::Output, what: &str| {
        assert!(!output.status.success(), "{what}: exited successfully");
        assert!(
            output.stdout.is_empty(),
            "{what}: printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
        let stderr = stderr_of(&output);
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{what}: want exactly one line, got {stderr:?}"
        );
        assert!(stderr.contains("cohost serve"), "{what}: {stderr:?}");
        assert!(stderr.contains("not running"), "{what}: {stderr:?}");
    };
    // Where the daemon was listening.
    let listen = format!("127.0.0.1:{port}");
    check(
        daemon.cli(&["--listen", &listen, "state"]),
        "state --listen",
    );
    check(
        daemon.cli(&["--listen", &listen, "state", "--json"]),
        "state --json --listen",
    );
    check(
        daemon.cli(&["--listen", &listen, "events"]),
        "events --listen",
    );
    check(
        daemon.cli(&[
            "--listen",
            &listen,
            "event",
            "a",
            "running",
            "--session",
            "s1",
        ]),
        "event --listen",
    );

    // After kill -9 the stale daemon.json still points at the dead address.
    daemon.start_again();
    daemon.kill9();
    assert!(daemon.home().join("daemon.json").exists());
    check(daemon.cli(&["state"]), "state after kill -9");
}

#[test]
fn serve_refuses_a_non_loopback_address_without_allow_remote() {
    let home = temp_dir("cohost-remote-");
    let tmux = TmuxServer::new();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let mut command = std::process::Command::new(BIN);
        command
            .args(["serve", "--listen", listen, "--tmux-socket"])
            .arg(tmux.socket())
            .env_remove("COHOST_LISTEN")
            .env("COHOST_HOME", home.path().join("h"));
        let output = run_with_timeout(&mut command, Duration::from_secs(10));
        assert!(!output.status.success(), "{listen}: serve started");
        assert!(
            output.stdout.is_empty(),
            "{listen}: {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
        let stderr = stderr_of(&output);
        assert!(
            stderr.contains("--allow-remote") && stderr.contains("non-loopback"),
            "{listen}: {stderr}"
        );
    }
    // Nonsense addresses and options are refused too.
    for args in [
        vec!["serve", "--listen", "localhost:99999"],
        vec!["serve", "--listen", "127.0.0.1:0", "--segment-mb", "0"],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--segment-mb",
            "4",
            "--retain-mb",
            "2",
        ],
        vec!["serve", "--listen", "127.0.0.1:0", "--stale-after", "0"],
        vec!["serve", "--listen", "127.0.0.1:0", "--fsync", "sometimes"],
    ] {
        let mut command = std::process::Command::new(BIN);
        command
            .args(&args)
            .env_remove("COHOST_LISTEN")
            .env("COHOST_HOME", home.path().join("h"));
        let output = run_with_timeout(&mut command, Duration::from_secs(10));
        assert!(!output.status.success(), "{args:?}: serve started");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn allow_remote_listens_on_all_addresses_and_keeps_the_token() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let home = temp_dir("cohost-remote-");
    let mut command = std::process::Command::new(BIN);
    command
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--allow-remote",
            "--tmux-socket",
        ])
        .arg(tmux.socket())
        .env_remove("COHOST_LISTEN")
        .env("COHOST_HOME", home.path().join("h"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(15)).unwrap_or_default();
    let port: Option<u16> = line
        .trim()
        .strip_prefix("cohost listening on 0.0.0.0:")
        .and_then(|p| p.parse().ok());
    let result = std::panic::catch_unwind(|| {
        let port = port.unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let token = std::fs::read_to_string(home.path().join("h/token"))
            .unwrap()
            .trim()
            .to_string();
        // Any Host is accepted; the token is then the only guard.
        let resp = http::raw_request(
            port,
            &format!(
                "GET /api/state HTTP/1.1\nHost: cohost.example\nAuthorization: Bearer {token}"
            ),
            b"",
        );
        assert_eq!(resp.status, 200, "{}", resp.body);
        let resp = http::raw_request(port, "GET /api/state HTTP/1.1\nHost: cohost.example", b"");
        resp.assert_error(401, "unauthorized", None);
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
