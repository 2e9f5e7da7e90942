//! End-to-end tests of the built `cohost-hook` binary: each test runs it as Claude would (event
//! name in argv, JSON on stdin, a clean env) against a temp session dir and, for permission
//! requests, a tiny HTTP server on loopback. They must never depend on a running daemon or on
//! the caller's environment (proxies included), and every wait has a timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const HOOK: &str = env!("CARGO_BIN_EXE_cohost-hook");
const TOKEN: &str = "tok-3f9a0c1e-secret-bearer";

fn sample_payload() -> Value {
    json!({
        "session_id": "3c74e8a3-0d49-463f-801d-b8088269916a",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": "/tmp/ws",
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": "touch made_by_claude.txt", "description": "Create file"},
    })
}

/// Starts the hook with exactly `env` (nothing inherited) and feeds it `stdin` from a thread.
fn spawn_hook(event: Option<&str>, stdin: Vec<u8>, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(HOOK);
    if let Some(event) = event {
        cmd.arg(event);
    }
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    child
}

/// Waits for the hook with a deadline (it is killed and the test fails past it).
fn finish(mut child: Child, deadline: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("cohost-hook did not exit within {deadline:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn run_hook(event: Option<&str>, stdin: &[u8], env: &[(&str, String)]) -> Output {
    finish(
        spawn_hook(event, stdin.to_vec(), env),
        Duration::from_secs(20),
    )
}

fn session_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("COHOST_SESSION_DIR", dir.display().to_string()),
        ("COHOST_SESSION_ID", "cohost-session-1".to_string()),
    ]
}

fn lines(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("hooks.jsonl")).unwrap();
    assert!(text.ends_with('\n'), "every line ends with a newline");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_normal_event_appends_one_line_and_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let payload = json!({"session_id": "s1", "hook_event_name": "Stop", "last_assistant_message": "hi\n\"there\""});
    let before = now_ms();
    let out = run_hook(
        Some("Stop"),
        payload.to_string().as_bytes(),
        &session_env(dir.path()),
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["event"], "Stop");
    assert_eq!(line["payload"], payload);
    assert!(line.get("requestId").is_none());
    let at = line["receivedAt"].as_u64().unwrap();
    assert!(at >= before && at <= now_ms());
    assert_eq!(line.as_object().unwrap().len(), 3);

    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("hooks.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A second event appends, it does not overwrite.
    let out = run_hook(Some("SessionEnd"), b"{}", &session_env(dir.path()));
    assert!(out.status.success());
    assert_eq!(self::lines(dir.path()).len(), 2);
}

#[test]
fn fifty_concurrent_hooks_write_fifty_intact_lines() {
    let dir = tempfile::tempdir().unwrap();
    let env = session_env(dir.path());
    // Big lines (~200 KB) so any interleaving would show.
    let children: Vec<Child> = (0..50)
        .map(|i| {
            let payload = json!({"n": i, "filler": "x".repeat(200_000 + i)});
            spawn_hook(Some("PostToolUse"), payload.to_string().into_bytes(), &env)
        })
        .collect();
    for child in children {
        let out = finish(child, Duration::from_secs(60));
        assert!(out.status.success());
        assert!(out.stdout.is_empty());
    }
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 50);
    let mut seen: Vec<u64> = lines
        .iter()
        .map(|l| {
            let n = l["payload"]["n"].as_u64().unwrap();
            assert_eq!(
                l["payload"]["filler"].as_str().unwrap().len(),
                200_000 + n as usize
            );
            n
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
}

#[test]
fn non_json_stdin_is_kept_as_a_string() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_hook(
        Some("Notification"),
        b"not json {at all",
        &session_env(dir.path()),
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["payload"], "not json {at all");
    assert_eq!(lines[0]["event"], "Notification");
}

#[test]
fn an_oversized_payload_becomes_a_truncation_marker() {
    let dir = tempfile::tempdir().unwrap();
    let big = format!("{{\"blob\":\"{}\"}}", "y".repeat(5 * 1024 * 1024));
    let out = run_hook(
        Some("PostToolUse"),
        big.as_bytes(),
        &session_env(dir.path()),
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 1);
    let payload = &lines[0]["payload"];
    assert_eq!(payload["truncated"], true);
    assert_eq!(payload["bytes"].as_u64().unwrap(), big.len() as u64);
    assert_eq!(payload["limit"].as_u64().unwrap(), 4 * 1024 * 1024);
    assert!(
        payload["head"]
            .as_str()
            .unwrap()
            .starts_with("{\"blob\":\"yyy")
    );
}

#[test]
fn missing_env_or_an_unwritable_dir_exits_zero_silently() {
    let payload = sample_payload().to_string();
    for event in ["Stop", "PermissionRequest"] {
        let out = run_hook(Some(event), payload.as_bytes(), &[]);
        assert!(out.status.success(), "{event}: {:?}", out.status);
        assert!(out.stdout.is_empty(), "{event}: stdout {:?}", out.stdout);
        assert!(
            !out.stderr.is_empty(),
            "{event}: the problem is reported on stderr"
        );
    }
    let env = vec![(
        "COHOST_SESSION_DIR",
        "/nonexistent/cohost/session".to_string(),
    )];
    let out = run_hook(Some("Stop"), payload.as_bytes(), &env);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    // No argv event and empty stdin: still exit 0.
    let out = run_hook(None, b"", &[]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

// ---- PermissionRequest against a tiny local daemon ----

/// How the fake daemon answers.
#[derive(Clone, Copy)]
enum Reply {
    Json(u16, &'static str),
    /// Wait this long before answering `allow`.
    Slow(Duration),
}

struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_request(stream: &UnixStream) -> Received {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    Received {
        request_line: request_line.trim_end().to_string(),
        headers,
        body: serde_json::from_slice(&body).unwrap(),
    }
}

/// A one-request HTTP server on a Unix socket in `dir` (as the daemon's, `cohost.sock`). It
/// reports the request on `seen`, then waits for `go` before answering, so the test can look at
/// the waiting hook process.
fn fake_daemon(dir: &Path, reply: Reply) -> (PathBuf, mpsc::Receiver<Received>, mpsc::Sender<()>) {
    let socket = dir.join("cohost.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (seen_tx, seen_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let received = read_request(&stream);
        let _ = seen_tx.send(received);
        let _ = go_rx.recv_timeout(Duration::from_secs(20));
        let (status, body) = match reply {
            Reply::Json(status, body) => (status, body),
            Reply::Slow(delay) => {
                thread::sleep(delay);
                (200, r#"{"behavior":"allow"}"#)
            }
        };
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes());
    });
    (socket, seen_rx, go_tx)
}

struct PermissionRun {
    out: Output,
    received: Option<Received>,
    line: Value,
    elapsed: Duration,
}

fn permission_env(dir: &Path, socket: &Path, timeout_secs: &str) -> Vec<(&'static str, String)> {
    let token_file: PathBuf = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut env = session_env(dir);
    env.push(("COHOST_SOCKET", socket.display().to_string()));
    env.push(("COHOST_TOKEN_FILE", token_file.display().to_string()));
    env.push(("COHOST_PERMISSION_TIMEOUT_SECS", timeout_secs.to_string()));
    // Claude's env may carry a proxy; the hook must reach the daemon directly anyway.
    env.push(("HTTP_PROXY", "http://127.0.0.1:9".to_string()));
    env.push(("http_proxy", "http://127.0.0.1:9".to_string()));
    env.push(("ALL_PROXY", "http://127.0.0.1:9".to_string()));
    env
}

fn run_permission(reply: Reply, timeout_secs: &str) -> PermissionRun {
    let dir = tempfile::tempdir().unwrap();
    let (socket, seen, go) = fake_daemon(dir.path(), reply);
    let env = permission_env(dir.path(), &socket, timeout_secs);
    let start = Instant::now();
    let child = spawn_hook(
        Some("PermissionRequest"),
        sample_payload().to_string().into_bytes(),
        &env,
    );
    let pid = child.id();
    let received = seen.recv_timeout(Duration::from_secs(20)).ok();
    if received.is_some() {
        // The hook is waiting on the daemon right now: the token must not be in its argv/env.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        for bytes in [&cmdline, &environ] {
            assert!(
                !String::from_utf8_lossy(bytes).contains(TOKEN),
                "the token leaked into the hook's argv/env"
            );
        }
    }
    let _ = go.send(());
    let out = finish(child, Duration::from_secs(30));
    let elapsed = start.elapsed();
    let lines = lines(dir.path());
    assert_eq!(lines.len(), 1);
    PermissionRun {
        out,
        received,
        line: lines[0].clone(),
        elapsed,
    }
}

fn check_request(run: &PermissionRun) {
    let received = run.received.as_ref().unwrap();
    assert_eq!(
        received.request_line,
        "POST /api/claude/permission HTTP/1.1"
    );
    assert_eq!(
        received.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(received.header("content-type"), Some("application/json"));
    let request_id = run.line["requestId"].as_str().unwrap();
    assert_eq!(request_id.len(), 32);
    assert!(request_id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        received.body,
        json!({"sessionId": "cohost-session-1", "requestId": request_id, "payload": sample_payload()})
    );
    assert_eq!(run.line["event"], "PermissionRequest");
    assert_eq!(run.line["payload"], sample_payload());
}

fn stdout(run: &PermissionRun) -> String {
    assert!(run.out.status.success(), "status {:?}", run.out.status);
    String::from_utf8(run.out.stdout.clone()).unwrap()
}

#[test]
fn permission_allow() {
    let run = run_permission(Reply::Json(200, r#"{"behavior":"allow"}"#), "300");
    check_request(&run);
    assert_eq!(
        stdout(&run),
        "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\"}}}\n"
    );
}

#[test]
fn permission_deny_with_interrupt() {
    let run = run_permission(
        Reply::Json(
            200,
            r#"{"behavior":"deny","message":"not in this repo","interrupt":true}"#,
        ),
        "300",
    );
    check_request(&run);
    assert_eq!(
        stdout(&run),
        "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"not in this repo\",\"interrupt\":true}}}\n"
    );
}

#[test]
fn permission_deny_without_interrupt() {
    let run = run_permission(
        Reply::Json(200, r#"{"behavior":"deny","message":"no"}"#),
        "300",
    );
    check_request(&run);
    assert_eq!(
        stdout(&run),
        "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"no\",\"interrupt\":false}}}\n"
    );
}

#[test]
fn permission_ask_prints_nothing() {
    let run = run_permission(Reply::Json(200, r#"{"behavior":"ask"}"#), "300");
    check_request(&run);
    assert_eq!(stdout(&run), "");
}

#[test]
fn permission_server_error_prints_nothing() {
    let run = run_permission(Reply::Json(500, r#"{"error":"boom"}"#), "300");
    check_request(&run);
    assert_eq!(stdout(&run), "");
    assert!(String::from_utf8_lossy(&run.out.stderr).contains("500"));
}

#[test]
fn permission_slower_than_the_timeout_prints_nothing() {
    // Daemon wait 0 s + the hook's 5 s margin; the server answers only after 12 s.
    let run = run_permission(Reply::Slow(Duration::from_secs(12)), "0");
    check_request(&run);
    assert_eq!(stdout(&run), "");
    assert!(
        run.elapsed >= Duration::from_secs(4) && run.elapsed < Duration::from_secs(10),
        "gave up after {:?}",
        run.elapsed
    );
}

#[test]
fn permission_connection_refused_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A socket file nobody listens on (a daemon that was killed leaves one).
    let socket = dir.path().join("cohost.sock");
    drop(UnixListener::bind(&socket).unwrap());
    let env = permission_env(dir.path(), &socket, "300");
    let start = Instant::now();
    let out = run_hook(
        Some("PermissionRequest"),
        sample_payload().to_string().as_bytes(),
        &env,
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(lines(dir.path()).len(), 1);
}

#[test]
fn the_settings_template_is_json_once_filled_in() {
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hooks/settings.template.json"
    ))
    .unwrap();
    assert!(template.contains("__COHOST_HOOK__"));
    let filled = template.replace("__COHOST_HOOK__", HOOK);
    let settings: Value = serde_json::from_str(&filled).unwrap();
    let hooks = settings["hooks"].as_object().unwrap();
    let tool_events = [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
    ];
    let mut expected = vec![
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PostToolBatch",
        "Notification",
        "Stop",
        "StopFailure",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "CwdChanged",
    ];
    expected.extend(tool_events);
    expected.sort_unstable();
    let mut names: Vec<&str> = hooks.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, expected);
    assert!(!hooks.contains_key("MessageDisplay"));
    for (event, entries) in hooks {
        let entries = entries.as_array().unwrap();
        assert_eq!(entries.len(), 1, "{event}");
        let matcher = entries[0]["matcher"].as_str().unwrap();
        let want = if tool_events.contains(&event.as_str()) {
            "*"
        } else {
            ""
        };
        assert_eq!(matcher, want, "{event}");
        let hook = &entries[0]["hooks"][0];
        assert_eq!(hook["type"], "command");
        assert_eq!(hook["command"], format!("{HOOK} {event}"));
        let timeout = hook["timeout"].as_u64().unwrap();
        if event == "PermissionRequest" {
            assert!(timeout >= 600);
        } else {
            assert!(timeout >= 10);
        }
    }
}

// ---------------------------------------------------------------- the machine-wide hook

/// A cohost home for the machine-wide hook: its token, and (when `listen`) a fake daemon on
/// its socket answering each request in turn with the next of `replies` (`None`: never
/// answer). Every request is reported on the channel.
struct FakeHome {
    dir: tempfile::TempDir,
    seen: mpsc::Receiver<Received>,
}

fn fake_home(replies: Vec<Option<&'static str>>) -> FakeHome {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    let listener = UnixListener::bind(dir.path().join("cohost.sock")).unwrap();
    let (seen_tx, seen) = mpsc::channel();
    thread::spawn(move || {
        for reply in replies {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let received = read_request(&stream);
            let _ = seen_tx.send(received);
            let Some(body) = reply else {
                // Hold the connection open without answering.
                thread::sleep(Duration::from_secs(30));
                return;
            };
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    FakeHome { dir, seen }
}

fn machine_hook(
    home: &Path,
    event: &str,
    stdin: &[u8],
    env: &[(&str, String)],
) -> (Output, Duration) {
    let start = Instant::now();
    let mut cmd = Command::new(HOOK);
    cmd.args(["--home", home.to_str().unwrap(), event])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    let out = finish(child, Duration::from_secs(20));
    (out, start.elapsed())
}

/// What Claude 2.1.197 sends a `PermissionRequest` hook, with a large tool input.
fn permission_payload() -> Value {
    let mut payload = sample_payload();
    payload["permission_mode"] = json!("default");
    payload["tool_input"]["content"] = json!("x".repeat(200_000));
    payload
}

#[test]
fn machine_hook_in_a_hosted_claude_does_nothing() {
    let home = fake_home(vec![Some(r#"{"tracked":true}"#)]);
    let session = tempfile::tempdir().unwrap();
    let (out, elapsed) = machine_hook(
        home.dir.path(),
        "PermissionRequest",
        permission_payload().to_string().as_bytes(),
        &[("COHOST_SESSION_DIR", session.path().display().to_string())],
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert!(
        home.seen.recv_timeout(Duration::from_millis(300)).is_err(),
        "it reported"
    );
    assert!(!session.path().join("hooks.jsonl").exists());
}

#[test]
fn machine_hook_without_a_daemon_exits_at_once_and_silently() {
    // No socket at all, then a socket file nobody listens on (a killed daemon leaves one).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), TOKEN).unwrap();
    for _ in 0..2 {
        let (out, elapsed) = machine_hook(
            dir.path(),
            "PermissionRequest",
            permission_payload().to_string().as_bytes(),
            &[],
        );
        assert!(out.status.success());
        assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
        if !dir.path().join("cohost.sock").exists() {
            drop(UnixListener::bind(dir.path().join("cohost.sock")).unwrap());
        }
    }
}

#[test]
fn machine_hook_reports_the_status_fields_and_prints_nothing_when_not_driven() {
    let home = fake_home(vec![Some(r#"{"tracked":true}"#)]);
    let before = now_ms();
    let (out, _) = machine_hook(
        home.dir.path(),
        "PermissionRequest",
        permission_payload().to_string().as_bytes(),
        &[("HTTP_PROXY", "http://127.0.0.1:9".into())],
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let received = home.seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(received.request_line, "POST /api/claude/hook HTTP/1.1");
    assert_eq!(
        received.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let body = &received.body;
    assert_eq!(body["event"], "PermissionRequest");
    let at = body["receivedAt"].as_u64().unwrap();
    assert!(at >= before && at <= now_ms());
    assert_eq!(body["requestId"].as_str().unwrap().len(), 32);
    // The status fields only: no tool input.
    assert_eq!(
        body["payload"],
        json!({
            "session_id": "3c74e8a3-0d49-463f-801d-b8088269916a",
            "transcript_path": "/tmp/x.jsonl",
            "cwd": "/tmp/ws",
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "permission_mode": "default",
        })
    );
    assert!(
        home.seen.recv_timeout(Duration::from_millis(300)).is_err(),
        "relayed though the daemon did not say so"
    );
}

#[test]
fn machine_hook_relays_a_permission_request_the_daemon_claims() {
    let home = fake_home(vec![
        Some(r#"{"tracked":true,"relayTo":"cs_adopted"}"#),
        Some(r#"{"behavior":"allow"}"#),
    ]);
    let payload = permission_payload();
    let (out, _) = machine_hook(
        home.dir.path(),
        "PermissionRequest",
        payload.to_string().as_bytes(),
        &[],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\"}}}\n"
    );
    let report = home.seen.recv_timeout(Duration::from_secs(5)).unwrap();
    let relay = home.seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(relay.request_line, "POST /api/claude/permission HTTP/1.1");
    assert_eq!(
        relay.body,
        json!({"sessionId": "cs_adopted", "requestId": report.body["requestId"], "payload": payload})
    );
}

#[test]
fn machine_hook_gives_up_on_a_daemon_that_does_not_answer() {
    let home = fake_home(vec![None]);
    let (out, elapsed) = machine_hook(
        home.dir.path(),
        "PreToolUse",
        br#"{"session_id":"s","hook_event_name":"PreToolUse"}"#,
        &[],
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(6),
        "{elapsed:?}"
    );
    assert!(home.seen.recv_timeout(Duration::from_secs(1)).is_ok());
}
