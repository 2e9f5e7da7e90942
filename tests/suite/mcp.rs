//! The MCP surface, driven by the official Python MCP SDK (`tests/mcp/client.py`) over stdio
//! (`cohost mcp`) and over streamable HTTP (`/mcp` with the bearer token).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;
use crate::support::*;

const PYTHON_ENV: &str = "COHOST_TEST_PYTHON";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

const TOOLS: [&str; 29] = [
    "adopt",
    "answer_request",
    "cancel_task",
    "disown",
    "edit_task",
    "events",
    "fork",
    "get_session",
    "goal_clear",
    "goal_get",
    "goal_set",
    "interrupt",
    "list_approvals",
    "list_models",
    "list_requests",
    "list_sessions",
    "post_agent_event",
    "queue",
    "rehome",
    "resolve_approval",
    "send",
    "set_mode",
    "set_model",
    "start_session",
    "supersede_task",
    "task_result",
    "task_status",
    "tracker_state",
    "wait_task",
];

fn python() -> PathBuf {
    let value = std::env::var_os(PYTHON_ENV)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{PYTHON_ENV} is not set: these tests drive cohost with the official Python MCP \
                 SDK. Run ./scripts/test (it installs `mcp` into a cached venv and exports \
                 {PYTHON_ENV}), or ./scripts/test --setup-only and export what it prints"
            )
        });
    let path = PathBuf::from(value);
    assert!(
        path.is_file(),
        "{PYTHON_ENV}={} is not a file; run ./scripts/test --setup-only",
        path.display()
    );
    path
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

pub(super) enum Transport {
    Stdio,
    Http,
}

/// What the Python client printed: the tool list and every call's answer, in order.
pub(super) struct Run {
    pub(super) tools: Vec<Value>,
    pub(super) answers: Vec<Value>,
}

impl Run {
    /// The answers of plan step `index` (several for an `until_type` step).
    fn step(&self, index: usize) -> Vec<&Value> {
        self.answers
            .iter()
            .filter(|a| a["index"] == index)
            .collect()
    }

    pub(super) fn one(&self, index: usize) -> &Value {
        let answers = self.step(index);
        assert_eq!(answers.len(), 1, "step {index}: {answers:?}");
        answers[0]
    }
}

/// Runs the Python client with `plan` against `daemon`; `on_call(tool)` runs when the client
/// says it is calling a tool.
pub(super) fn run_client(
    daemon: &TestDaemon,
    transport: Transport,
    plan: &Value,
    on_call: impl FnMut(&str),
) -> Run {
    run_client_with(daemon, transport, plan, on_call, |label, _| {
        panic!("no pause expected, the plan paused at {label}")
    })
}

/// [`run_client`] for plans with `{"pause": LABEL}` steps: `on_pause(label, saved values)` runs
/// while the client waits, and the client goes on when it returns.
fn run_client_with(
    daemon: &TestDaemon,
    transport: Transport,
    plan: &Value,
    mut on_call: impl FnMut(&str),
    mut on_pause: impl FnMut(&str, &Value),
) -> Run {
    let mut command = Command::new(python());
    command.arg(client_script());
    match transport {
        Transport::Stdio => {
            command
                .arg("stdio")
                .arg(BIN)
                .arg("mcp")
                .env("COHOST_HOME", daemon.home())
                .env_remove("COHOST_LISTEN");
        }
        Transport::Http => {
            command
                .arg("http")
                .arg(daemon.url("/mcp"))
                .arg(daemon.token());
        }
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python().display()));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{plan}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr_thread = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + CLIENT_TIMEOUT;
    let mut lines = Vec::new();
    let mut done = false;
    while !done {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("client printed non-JSON ({e}): {line}"));
                if let Some(tool) = value["calling"].as_str() {
                    on_call(tool);
                }
                if let Some(label) = value["paused"].as_str() {
                    on_pause(label, &value["vars"]);
                    let _ = stdin.write_all(b"go\n");
                    let _ = stdin.flush();
                }
                done = value["done"] == true;
                lines.push(value);
            }
            Err(_) => break,
        }
    }
    drop(stdin);
    if !done {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let stderr = stderr_thread.join().unwrap_or_default();
    assert!(
        done && status.success(),
        "the MCP client did not finish ({status}); stdout: {lines:#?}\nstderr: {stderr}\ndaemon: {}",
        daemon.stderr_tail(40)
    );
    let tools = lines
        .iter()
        .find_map(|l| l["tools"].as_array().cloned())
        .expect("the client printed its tool list");
    let answers = lines
        .into_iter()
        .filter(|l| l.get("elapsed").is_some())
        .collect();
    Run { tools, answers }
}

#[track_caller]
pub(super) fn ok(answer: &Value) -> &Value {
    assert_eq!(answer["isError"], false, "{answer:#}");
    let structured = &answer["structured"];
    assert!(structured.is_object(), "{answer:#}");
    // The text block carries the same JSON.
    let text: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, structured);
    structured
}

fn check_tools(run: &Run) {
    let mut names: Vec<&str> = run
        .tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, TOOLS);
    for tool in &run.tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{tool:#}");
        assert_eq!(
            schema["additionalProperties"], false,
            "every input schema is closed: {tool:#}"
        );
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
        // Every tool declares the shape of its answers (the SDK checks each answer against it).
        let output = &tool["outputSchema"];
        assert_eq!(output["type"], "object", "{tool:#}");
        assert!(output["properties"]["truncated"].is_object(), "{tool:#}");
    }
    // The allowed values of a string argument are in its schema.
    let schema = |name: &str| {
        run.tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["inputSchema"].to_string())
            .unwrap_or_default()
    };
    for (tool, values) in [
        (
            "start_session",
            &[
                "\"codex\"",
                "\"claude\"",
                "\"on-request\"",
                "\"workspace-write\"",
                "\"acceptEdits\"",
            ][..],
        ),
        (
            "resolve_approval",
            &["\"acceptForSession\"", "\"cancel\""][..],
        ),
        ("answer_request", &["\"approve\"", "\"reject\""][..]),
        ("set_mode", &["\"plan\"", "\"default\""][..]),
    ] {
        for value in values {
            assert!(
                schema(tool).contains(value),
                "{tool} lists {value}: {}",
                schema(tool)
            );
        }
    }
}

const FAKE_KEY: &str = "sk-ant-api03-FAKEfakeFAKEfake0123456789";

/// The shared plan: tracker state, an agent event with a planted key, and error shapes.
fn tracker_plan(session: &str, agent: &str) -> Value {
    json!([
        { "tool": "tracker_state" },
        { "tool": "post_agent_event", "arguments": {
            "agent": agent, "status": "running", "tmux_session": session,
            "thread_id": "t-1",
            "last_user_prompt": format!("deploy with {FAKE_KEY} and Bearer abcdefghijklmnop please"),
        }},
        { "tool": "tracker_state", "arguments": {} },
        { "tool": "list_sessions" },
        { "tool": "get_session", "arguments": { "session_id": "no-such-session" } },
        { "tool": "list_sessions", "arguments": { "bogus": 1 } },
        { "tool": "post_agent_event", "arguments": {
            "agent": agent, "status": "running", "tmux_session": "no-such-tmux-session" } },
        { "tool": "events", "arguments": { "after": 0, "limit": 1000 } },
    ])
}

fn check_tracker_run(run: &Run, daemon: &TestDaemon, session: &str, agent: &str) {
    check_tools(run);
    let before = ok(run.one(0));
    assert!(
        before["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == session)
    );

    let posted = ok(run.one(1));
    assert_eq!(posted["ok"], true);
    assert_eq!(posted["session"], session);
    let seq = posted["seq"].as_u64().unwrap();
    // The daemon stored the report (the raw prompt stays in the log; only answers are redacted).
    let logged = daemon.events_after(seq - 1);
    assert_eq!(logged[0]["type"], "agent.updated");
    assert_eq!(logged[0]["data"]["agent"], agent);

    let after = ok(run.one(2));
    let text = after.to_string();
    assert!(!text.contains("FAKEfake"), "the key is redacted: {text}");
    assert!(
        !text.contains("abcdefghijklmnop"),
        "the bearer is redacted: {text}"
    );
    let tracked = after["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == session)
        .unwrap();
    let instance = tracked["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == agent)
        .unwrap_or_else(|| panic!("agent {agent} in {tracked:#}"));
    assert_eq!(instance["status"], "running", "{instance:#}");
    assert!(
        instance.to_string().contains("sk-[REDACTED]"),
        "{instance:#}"
    );

    let sessions = ok(run.one(3));
    assert_eq!(sessions["sessions"], json!([]));
    assert_eq!(sessions["truncated"], false);

    let missing = run.one(4);
    assert_eq!(missing["isError"], true, "{missing:#}");
    assert_eq!(missing["structured"]["error"]["kind"], "operational");
    assert_eq!(missing["structured"]["error"]["code"], "session_not_found");

    // Arguments outside the closed schema are refused before the tool runs.
    let bogus = run.one(5);
    let refused = bogus["isError"] == true || bogus.get("rpcError").is_some();
    assert!(refused, "{bogus:#}");
    assert!(bogus.to_string().contains("bogus"), "{bogus:#}");

    let unknown_tmux = run.one(6);
    assert_eq!(unknown_tmux["isError"], true, "{unknown_tmux:#}");
    assert_eq!(unknown_tmux["structured"]["error"]["kind"], "operational");

    let events = ok(run.one(7));
    let text = events.to_string();
    assert!(text.contains("sk-[REDACTED]"), "{text}");
    assert!(!text.contains("FAKEfake"), "{text}");
    let ours = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["seq"] == seq)
        .unwrap_or_else(|| panic!("event {seq} in {events:#}"));
    assert_eq!(ours["type"], "agent.updated");
}

#[test]
fn mcp_over_http_lists_closed_tools_and_round_trips_the_tracker() {
    let (tmux, _) = tmux_with_sessions(&["alpha"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let run = run_client(
        &daemon,
        Transport::Http,
        &tracker_plan("alpha", "codex"),
        |_| {},
    );
    check_tracker_run(&run, &daemon, "alpha", "codex");
}

#[test]
fn mcp_over_stdio_lists_closed_tools_and_round_trips_the_tracker() {
    let (tmux, _) = tmux_with_sessions(&["beta"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let run = run_client(
        &daemon,
        Transport::Stdio,
        &tracker_plan("beta", "claude-code"),
        |_| {},
    );
    check_tracker_run(&run, &daemon, "beta", "claude-code");
}

#[test]
fn mcp_events_wait_returns_an_event_posted_during_the_wait() {
    let (tmux, _) = tmux_with_sessions(&["gamma"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let head = daemon.head();
    let plan = json!([
        { "tool": "events", "arguments": { "after": head, "wait_seconds": 30 } },
    ]);
    let mut posted = None;
    let run = run_client(&daemon, Transport::Stdio, &plan, |tool| {
        if tool == "events" {
            std::thread::sleep(Duration::from_millis(1500));
            posted = Some(daemon.report(&report("gamma", "codex", "waiting")));
        }
    });
    let posted = posted.expect("the event was posted");
    let answer = run.one(0);
    let page = ok(answer);
    let events = page["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["seq"] == posted && e["type"] == "agent.updated"),
        "{page:#}"
    );
    assert_eq!(page["next"], events.last().unwrap()["seq"]);
    let elapsed = answer["elapsed"].as_f64().unwrap();
    assert!(
        (1.0..25.0).contains(&elapsed),
        "the call waited for the event, not for the timeout: {elapsed}s"
    );
}

/// A reader of one session gets that session's events, however many of other sessions lie
/// before them: here 50,000 (more than the ring holds, so the first page comes from disk), and
/// a waiting read answers at once with events that already exist.
#[test]
fn mcp_events_of_one_session_skip_50000_events_of_other_sessions() {
    let (tmux, _) = tmux_with_sessions(&["other"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.stop();
    let encode = |lines: &[String]| {
        let mut bytes = Vec::new();
        for line in lines {
            cohost::core::log_line::encode(line, &mut bytes);
        }
        bytes
    };
    let others = crate::support::web::others(daemon.home(), 50_000, &["other", "work"]);
    others.append(&encode(&others.lines));
    let long = crate::support::web::long_session(daemon.home(), 3, "cs_0000000000050000");
    long.append(&encode(&long.lines));
    daemon.start_again();
    let seqs: Vec<u64> = long
        .lines
        .iter()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let id = &long.session;

    let plan = json!([
        { "tool": "events", "arguments": { "session_id": id, "after": 0, "limit": 5 } },
        { "tool": "events", "arguments": { "session_id": id, "after": 0, "limit": 5, "wait_seconds": 60 } },
        { "tool": "events", "arguments": { "session_id": id, "after": seqs[4], "limit": 100 } },
        { "tool": "events", "arguments": { "session_id": id, "last": 4 } },
        { "tool": "events", "arguments": { "session_id": id, "before": seqs[13], "limit": 20 } },
        { "tool": "events", "arguments": { "session_id": id, "last": 4, "after": 0 } },
    ]);
    let run = run_client(&daemon, Transport::Http, &plan, |_| {});
    for index in [0, 1] {
        let answer = run.one(index);
        let page = ok(answer);
        let got: Vec<u64> = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(got, seqs[..5], "{page:#}");
        assert_eq!(page["events"][0]["type"], "session.created", "{page:#}");
        assert_eq!(page["next"], seqs[4], "{page:#}");
        let elapsed = answer["elapsed"].as_f64().unwrap();
        assert!(
            elapsed < 30.0,
            "the read answered with events that exist, not after its wait: {elapsed}s"
        );
    }
    let rest = ok(run.one(2));
    let got: Vec<u64> = rest["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(got, seqs[5..], "{rest:#}");
    // The page ends short of the limit: the session has nothing else up to the head.
    assert_eq!(rest["next"], rest["head"], "{rest:#}");

    // A window read backwards from the session's end, then the one before it.
    let window_seqs = |page: &Value| -> Vec<u64> {
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let last = ok(run.one(3));
    assert_eq!(window_seqs(last), seqs[seqs.len() - 4..], "{last:#}");
    assert_eq!(last["hasOlder"], true, "{last:#}");
    assert_eq!(last["olderBefore"], seqs[seqs.len() - 4], "{last:#}");
    assert_eq!(last["next"], last["head"], "{last:#}");
    let older = ok(run.one(4));
    assert_eq!(window_seqs(older), seqs[..13], "{older:#}");
    assert_eq!(older["hasOlder"], false, "{older:#}");
    assert_eq!(older["next"], seqs[13] - 1, "{older:#}");
    let error = refused(run.one(5));
    assert_eq!(error["code"], "invalid_field", "{error:#}");
    assert!(
        error["message"].as_str().unwrap().contains("`after`"),
        "{error:#}"
    );

    // HTTP reads the same index.
    let page = daemon
        .get(&format!("/api/sessions/{id}/events?after=0&limit=5"))
        .assert_ok();
    assert_eq!(page["events"][4]["seq"], seqs[4], "{page}");
}

#[test]
fn mcp_without_the_token_is_401() {
    let daemon = TestDaemon::start_with(None, &[]);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": { "name": "test", "version": "0" } }
    })
    .to_string();
    let json_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let anonymous = daemon.request("POST", "/mcp", &json_headers, Some(&initialize));
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    // A bearer challenge and a JSON-RPC error: what MCP clients show instead of starting OAuth.
    let challenge = anonymous.www_authenticate.clone().unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer realm=\"cohost\""),
        "{challenge}"
    );
    assert!(challenge.contains("cohost token"), "{challenge}");
    let body: Value = serde_json::from_str(&anonymous.body).unwrap();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );
    let wrong = [
        json_headers[0],
        json_headers[1],
        ("Authorization", "Bearer nope"),
    ];
    let wrong = daemon.request("POST", "/mcp", &wrong, Some(&initialize));
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    let challenge = wrong.www_authenticate.clone().unwrap_or_default();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    // OAuth discovery finds no metadata, and is told what to send instead; no token needed.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ] {
        let meta = daemon.request("GET", path, &[], None);
        assert_eq!(meta.status, 404, "{path}: {}", meta.body);
        let body: Value = serde_json::from_str(&meta.body).unwrap();
        assert_eq!(body["error"]["code"], "no_oauth", "{path}: {body}");
    }
    // The Python SDK's client reports cohost's message for a wrong token.
    let mut command = Command::new(python());
    command
        .arg(client_script())
        .arg("http")
        .arg(daemon.url("/mcp"))
        .arg("not-the-token");
    let output = run_with_input(&mut command, Some("[]\n"), CLIENT_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let refused: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|line| line.get("initializeError").cloned())
        .unwrap_or_else(|| panic!("no initializeError: {output:?}"));
    assert_eq!(
        refused["message"], "cohost: the bearer token is wrong (see `cohost token`)",
        "{refused}"
    );
    let bearer = format!("Bearer {}", daemon.token());
    let good = [
        json_headers[0],
        json_headers[1],
        ("Authorization", bearer.as_str()),
    ];
    let good = daemon.request("POST", "/mcp", &good, Some(&initialize));
    assert_eq!(good.status, 200, "{}", good.body);
    assert!(good.body.contains("\"serverInfo\""), "{}", good.body);
}

#[test]
fn mcp_stdio_without_a_daemon_answers_with_an_error() {
    // Nothing listens at the address: the bridge must answer, not hang.
    let mut daemon = TestDaemon::start_with(None, &[]);
    daemon.stop();
    let output = run_with_input(
        Command::new(BIN)
            .args(["--listen", "127.0.0.1:1", "mcp"])
            .env("COHOST_HOME", daemon.home())
            .env_remove("COHOST_LISTEN"),
        Some("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{}}\n"),
        CLI_TIMEOUT,
    );
    assert!(output.status.success(), "{output:?}");
    let line = String::from_utf8_lossy(&output.stdout).into_owned();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not running"),
        "{answer}"
    );
}

#[test]
fn mcp_send_then_events_runs_a_codex_turn_to_completion() {
    let fx = CodexFixture::start();
    fx.mock.push(Step::reasoning(
        "Thinking it over.",
        "Hello from the mock model!",
    ));
    let id = fx.create(json!({ "approvalPolicy": "never", "sandbox": "workspace-write" }));
    let plan = json!([
        { "tool": "get_session", "arguments": { "session_id": id } },
        { "tool": "send", "arguments": { "session_id": id, "text": "Say hello", "idempotency_key": "k1" } },
        { "tool": "events", "arguments": { "session_id": id, "after": 0, "wait_seconds": 10 },
          "until_type": "turn.completed", "max_calls": 30 },
        { "tool": "list_approvals", "arguments": { "session_id": id } },
        { "tool": "goal_get", "arguments": { "session_id": id } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    let session = ok(run.one(0));
    assert_eq!(session["session"]["id"], id.as_str());
    let sent = ok(run.one(1));
    assert_eq!(sent["replayed"], false, "{sent:#}");
    assert_eq!(sent["task"]["sessionId"], id.as_str(), "{sent:#}");
    let pages = run.step(2);
    let events: Vec<&Value> = pages
        .iter()
        .flat_map(|page| ok(page)["events"].as_array().unwrap().iter())
        .collect();
    assert!(
        events.iter().all(|e| e["session"] == id.as_str()),
        "only the session's events"
    );
    assert!(
        events.iter().any(|e| e["type"] == "turn.completed"),
        "{events:#?}"
    );
    assert!(
        events
            .to_vec()
            .windows(2)
            .all(|w| w[0]["seq"].as_u64() < w[1]["seq"].as_u64()),
        "in order, no duplicates"
    );
    let approvals = ok(run.one(3));
    assert_eq!(approvals["approvals"], json!([]));
    let goal = run.one(4);
    assert!(goal["structured"].is_object(), "{goal:#}");
}

/// A codex session started over MCP with an approval policy asks before it runs a command;
/// the approval is answered over MCP, and `wait_task` returns when the task has finished.
#[test]
fn mcp_start_session_with_an_approval_policy_asks_before_a_command_and_wait_task_waits() {
    let root_dir = temp_dir("cohost-mcp-root-");
    let root = root_dir.path().canonicalize().unwrap();
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let fx = CodexFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    fx.mock.push(Step::exec("touch approved.txt"));
    fx.mock.push(Step::text("Created it."));
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "approval_policy": "untrusted", "sandbox": "workspace-write" },
          "save": { "session": "/session/id" } },
        { "tool": "send", "arguments": { "session_id": "$session", "prompt": "Create approved.txt" },
          "save": { "task": "/task/taskId" } },
        { "tool": "events", "arguments": { "session_id": "$session", "after": 0, "wait_seconds": 10 },
          "until_type": "approval.requested", "max_calls": 30 },
        { "pause": "asked" },
        { "tool": "list_approvals", "arguments": { "session_id": "$session" },
          "save": { "approval": "/approvals/0/request/approvalId" } },
        { "tool": "resolve_approval", "arguments": { "session_id": "$session",
          "approval_id": "$approval", "decision": "accept" } },
        { "tool": "wait_task", "arguments": { "task_id": "$task", "timeout_seconds": 60 } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "approval_policy": "sometimes" } },
    ]);
    let mut asked = false;
    let run = run_client_with(
        &fx.daemon,
        Transport::Http,
        &plan,
        |_| {},
        |label, vars| {
            assert_eq!(label, "asked");
            let session = vars["session"].as_str().unwrap();
            let view = fx.view(session);
            assert_eq!(view["approvalPolicy"], "untrusted", "{view:#}");
            assert_eq!(view["pendingApprovals"], 1, "{view:#}");
            assert!(
                !project.join("approved.txt").exists(),
                "nothing runs before the answer"
            );
            asked = true;
        },
    );
    assert!(asked);
    let started = ok(run.one(0));
    assert_eq!(
        started["session"]["approvalPolicy"], "untrusted",
        "{started:#}"
    );
    assert_eq!(
        started["session"]["sandbox"], "workspace-write",
        "{started:#}"
    );
    let resolved = ok(run.one(5));
    assert_eq!(resolved["decision"], "accept", "{resolved:#}");
    let waited = ok(run.one(6));
    assert_eq!(waited["finished"], true, "{waited:#}");
    assert_eq!(waited["task"]["state"], "completed", "{waited:#}");
    assert_eq!(waited["task"]["resultExcerpt"], "Created it.", "{waited:#}");
    assert!(project.join("approved.txt").exists());
    // A value the schema does not list is refused before the tool runs.
    let bogus = run.one(7);
    let refused = bogus["isError"] == true || bogus.get("rpcError").is_some();
    assert!(refused, "{bogus:#}");
    assert!(bogus.to_string().contains("sometimes"), "{bogus:#}");
}

#[track_caller]
fn refused(answer: &Value) -> &Value {
    assert_eq!(answer["isError"], true, "{answer:#}");
    &answer["structured"]["error"]
}

#[test]
fn mcp_starts_sessions_only_under_the_allowed_roots() {
    // No root allowed: every start is refused, as a permission error.
    let closed = CodexFixture::start();
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": closed.work } },
    ]);
    let run = run_client(&closed.daemon, Transport::Http, &plan, |_| {});
    let error = refused(run.one(0));
    assert_eq!(error["kind"], "permission", "{error:#}");
    assert_eq!(error["code"], "permission_denied", "{error:#}");
    drop(closed);

    // One root allowed: a start inside it runs, one outside it (the fixture's own work
    // directory, a sibling) is refused, `..` cannot climb out, bad input is an operational
    // error, and a retried start with the same key returns the same session.
    let root_dir = temp_dir("cohost-mcp-root-");
    let root = root_dir.path().canonicalize().unwrap();
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let fx = CodexFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    fx.mock.push(Step::text("Started over MCP."));
    let outside = fx.work.canonicalize().unwrap();
    assert!(!outside.starts_with(&root));
    // `root/proj/../../<work>` names the work directory, a sibling of the root.
    let escape = format!(
        "{}/../../{}",
        project.display(),
        outside.file_name().unwrap().to_str().unwrap()
    );
    assert_eq!(PathBuf::from(&escape).canonicalize().unwrap(), outside);
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": outside } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": escape } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": "relative/dir" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "prompt": "Hello over MCP", "idempotency_key": "mcp-1" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "prompt": "Hello over MCP", "idempotency_key": "mcp-1" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "permission_mode": "plan" } },
        { "tool": "start_session", "arguments": { "runtime": "claude", "cwd": project,
          "permission_mode": "auto" } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    for (step, needle) in [
        (5, "claude sessions only"),
        (6, "--allow-permission-mode auto"),
    ] {
        let refusal = refused(run.one(step));
        assert_eq!(refusal["kind"], "operational", "{refusal:#}");
        assert!(
            refusal.to_string().contains(needle),
            "step {step}: {refusal:#}"
        );
    }
    assert_eq!(refused(run.one(0))["kind"], "permission");
    assert_eq!(
        refused(run.one(1))["kind"],
        "permission",
        "`..` does not escape the root"
    );
    assert_eq!(refused(run.one(2))["kind"], "operational");
    let first = ok(run.one(3));
    let id = first["session"]["id"].as_str().unwrap().to_string();
    let task = first["task"]["taskId"].as_str().unwrap().to_string();
    let again = ok(run.one(4));
    assert_eq!(
        again["session"]["id"],
        id.as_str(),
        "the retry returns the first session"
    );
    assert_eq!(
        again["task"]["taskId"],
        task.as_str(),
        "the retry returns the first task: {again:#}"
    );
    fx.wait_turns_completed(&id, 1);
    let mains = fx.mock.main_requests();
    assert_eq!(mains.len(), 1, "the prompt was sent once");
}

// ---------------------------------------------------------------------------------------------
// Tasks and leases over MCP.

/// The answer of the last call of step `index` (a polling step calls several times).
#[track_caller]
fn last(run: &Run, index: usize) -> &Value {
    run.step(index)
        .last()
        .copied()
        .unwrap_or_else(|| panic!("no answer for step {index}"))
}

/// A long reply (about 40 KB, more than two result chunks) with a fake key planted in it.
fn long_reply() -> String {
    let mut text = String::from("Report start. ");
    let mut n = 0;
    while text.len() < 40_000 {
        text.push_str(&format!("Line {n}: all systems nominal, ünïcödé ok. "));
        if n == 300 {
            text.push_str(&format!("The deploy key is {FAKE_KEY} (do not share). "));
        }
        n += 1;
    }
    text.push_str("Report end.");
    text
}

/// The chunks of steps `from..to` (task_result answers), checked and joined.
fn joined_chunks(run: &Run, steps: std::ops::Range<usize>) -> (String, Value) {
    let mut text = String::new();
    let mut offset = 0;
    let mut last_chunk = Value::Null;
    for index in steps {
        let chunk = ok(run.one(index)).clone();
        assert_eq!(chunk["available"], true, "{chunk:#}");
        assert_eq!(
            chunk["offset"], offset,
            "chunks follow each other: {chunk:#}"
        );
        let piece = chunk["text"].as_str().unwrap();
        assert!(piece.len() <= 16 * 1024, "a chunk is at most 16 KiB");
        text.push_str(piece);
        offset = chunk["nextOffset"].as_u64().unwrap();
        assert_eq!(offset as usize, text.len());
        last_chunk = chunk;
    }
    (text, last_chunk)
}

#[test]
fn mcp_stdio_codex_task_runs_to_completion_with_a_chunked_redacted_result() {
    let root_dir = temp_dir("cohost-mcp-root-");
    let root = root_dir.path().canonicalize().unwrap();
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let fx = CodexFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    let reply = long_reply();
    fx.mock
        .push(Step::text(reply.clone()).when_user_contains("Write the long report"));
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "idempotency_key": "start-1" }, "save": { "session": "/session/id" } },
        { "tool": "send", "arguments": { "session_id": "$session",
          "text": "Write the long report", "idempotency_key": "send-1" },
          "save": { "task": "/task/taskId" } },
        { "tool": "send", "arguments": { "session_id": "$session",
          "text": "Write the long report", "idempotency_key": "send-1" } },
        { "tool": "events", "arguments": { "session_id": "$session", "after": 0, "wait_seconds": 10 },
          "until_type": "turn.completed", "max_calls": 60 },
        { "tool": "task_status", "arguments": { "task_id": "$task" },
          "until": { "/task/phase": ["finished"] } },
        { "tool": "task_result", "arguments": { "task_id": "$task" }, "save": { "o1": "/nextOffset" } },
        { "tool": "task_result", "arguments": { "task_id": "$task", "offset": "$o1" },
          "save": { "o2": "/nextOffset" } },
        { "tool": "task_result", "arguments": { "task_id": "$task", "offset": "$o2" } },
        { "tool": "queue", "arguments": { "session_id": "$session" } },
        { "tool": "task_result", "arguments": { "task_id": "$task", "max_bytes": 100000 } },
        { "tool": "task_status", "arguments": { "task_id": "task_nope" } },
    ]);
    let run = run_client(&fx.daemon, Transport::Stdio, &plan, |_| {});
    check_tools(&run);
    let id = ok(run.one(0))["session"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let sent = ok(run.one(1));
    assert_eq!(sent["replayed"], false, "{sent:#}");
    assert_eq!(sent["task"]["state"], "waiting", "{sent:#}");
    let task = sent["task"]["taskId"].as_str().unwrap().to_string();
    let again = ok(run.one(2));
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(
        again["task"]["taskId"],
        task.as_str(),
        "the retry is the same task"
    );

    // The event pages carry the task's own events, in order.
    let events: Vec<Value> = run
        .step(3)
        .iter()
        .flat_map(|page| ok(page)["events"].as_array().unwrap().clone())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["data"]["taskId"] == task.as_str())
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["task.queued", "task.delivered", "task.accepted"],
        "the turn's end finishes the task without another task event: {kinds:?}"
    );
    assert!(events.iter().any(|e| e["type"] == "turn.completed"));

    let status = ok(last(&run, 4));
    let view = &status["task"];
    assert_eq!(view["state"], "completed", "{status:#}");
    assert_eq!(view["phase"], "finished");
    assert_eq!(view["acceptedAs"], "turn");
    assert!(view["turnId"].is_string());
    let expected = reply.replace(FAKE_KEY, "sk-[REDACTED]");
    assert_eq!(view["resultBytes"], expected.len(), "{status:#}");
    assert_eq!(view["resultExcerptTruncated"], true);
    let excerpt = view["resultExcerpt"].as_str().unwrap();
    assert!(excerpt.len() <= 4096 && expected.starts_with(excerpt));

    // Three chunks make up the whole reply, with the key redacted.
    let (text, last_chunk) = joined_chunks(&run, 5..8);
    assert_eq!(last_chunk["eof"], true, "{last_chunk:#}");
    assert_eq!(last_chunk["totalBytes"], expected.len());
    assert!(!text.contains("FAKEfake"), "the planted key is redacted");
    assert!(text.contains("The deploy key is sk-[REDACTED] (do not share)."));
    assert_eq!(text, expected);

    let queue = ok(run.one(8));
    assert_eq!(queue["lease"]["holder"], "managed", "{queue:#}");
    assert_eq!(queue["pendingTotal"], 0);
    assert_eq!(queue["recent"][0]["taskId"], task.as_str());

    assert_eq!(refused(run.one(9))["kind"], "operational");
    assert_eq!(refused(run.one(10))["code"], "task_not_found");
    assert_eq!(
        fx.mock.main_requests().len(),
        1,
        "the retried send was not delivered twice"
    );
    drop(id);
}

#[test]
fn mcp_http_cancels_waiting_and_running_tasks_under_each_lease() {
    let fx = CodexFixture::start();
    fx.mock.set_default(Step::text("Default reply."));
    fx.mock
        .push(Step::hang().when_user_contains("Task A hangs"));
    fx.mock
        .push(Step::hang().when_user_contains("Task C hangs"));
    let id = fx.create(json!({ "approvalPolicy": "never", "sandbox": "workspace-write" }));
    let plan = json!([
        // 0-4: under the managed lease, a waiting task and a running one.
        { "tool": "send", "arguments": { "session_id": id, "text": "Task A hangs" },
          "save": { "a": "/task/taskId" } },
        { "tool": "task_status", "arguments": { "task_id": "$a" },
          "until": { "/task/phase": ["accepted"] } },
        { "tool": "send", "arguments": { "session_id": id, "text": "Task B waits" },
          "save": { "b": "/task/taskId" } },
        { "tool": "cancel_task", "arguments": { "task_id": "$b" } },
        { "tool": "cancel_task", "arguments": { "task_id": "$a" } },
        // 5: A's turn ends interrupted.
        { "tool": "task_status", "arguments": { "task_id": "$a" },
          "until": { "/task/phase": ["finished"] } },
        // 6-7: another running task, then a human takes over.
        { "tool": "send", "arguments": { "session_id": id, "text": "Task C hangs" },
          "save": { "c": "/task/taskId" } },
        { "tool": "task_status", "arguments": { "task_id": "$c" },
          "until": { "/task/phase": ["accepted"] } },
        { "pause": "takeover" },
        // 9-12: under the human lease.
        { "tool": "queue", "arguments": { "session_id": id } },
        { "tool": "cancel_task", "arguments": { "task_id": "$c" } },
        { "tool": "send", "arguments": { "session_id": id, "text": "Task D waits for the human" },
          "save": { "d": "/task/taskId" } },
        { "tool": "cancel_task", "arguments": { "task_id": "$d" } },
        { "tool": "interrupt", "arguments": { "session_id": id } },
        { "pause": "human interrupts" },
        { "tool": "task_status", "arguments": { "task_id": "$c" },
          "until": { "/task/phase": ["finished"] } },
        { "tool": "cancel_task", "arguments": { "task_id": "$c" } },
    ]);
    let run = run_client_with(
        &fx.daemon,
        Transport::Http,
        &plan,
        |_| {},
        |label, _| match label {
            "takeover" => {
                let out = fx.daemon.cli_ok(&["takeover", &id]);
                assert!(out.contains("human now holds"), "{out}");
            }
            "human interrupts" => {
                let answer = fx
                    .daemon
                    .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
                    .assert_ok();
                assert_eq!(answer["interrupted"], true, "{answer}");
            }
            other => panic!("unexpected pause {other}"),
        },
    );
    // Waiting under the managed lease: cancelled at once, never delivered.
    let b = ok(run.one(3));
    assert_eq!(b["outcome"], "cancelled_before_delivery", "{b:#}");
    assert_eq!(b["task"]["state"], "cancelled");
    assert_eq!(b["task"]["phase"], "finished");
    // Running under the managed lease: the interrupt is sent, and the turn ends aborted.
    // The answer's outcome is the outcome so far (CancelResult): codex may have ended the turn
    // interrupted before the interrupt call returned, and then it already says so.
    let a = ok(run.one(4));
    assert!(
        a["outcome"] == "abort_sent" || a["outcome"] == "aborted",
        "{a:#}"
    );
    let a = ok(last(&run, 5));
    assert_eq!(a["task"]["state"], "cancelled", "{a:#}");
    assert_eq!(a["task"]["cancelOutcome"], "aborted", "{a:#}");
    assert!(a["task"].get("humanIntervened").is_none(), "{a:#}");

    let queue = ok(run.one(9));
    assert_eq!(queue["lease"]["holder"], "human", "{queue:#}");
    assert_eq!(queue["lease"]["generation"], 1, "{queue:#}");
    assert_eq!(
        queue["running"][0]["taskId"],
        ok(run.one(6))["task"]["taskId"]
    );
    // Running under the human lease: the abort is withheld, the turn belongs to the human.
    let c = ok(run.one(10));
    assert_eq!(c["outcome"], "abort_withheld", "{c:#}");
    assert_eq!(c["task"]["abortWithheld"], "human_control", "{c:#}");
    assert_eq!(c["task"]["state"], "running", "{c:#}");
    // Waiting under the human lease: it waits for the human, and cancelling it is immediate.
    let d = ok(run.one(11));
    assert_eq!(d["task"]["waitingReason"], "human_control", "{d:#}");
    let d = ok(run.one(12));
    assert_eq!(d["outcome"], "cancelled_before_delivery", "{d:#}");
    // MCP does not interrupt a human's session.
    let refused_interrupt = refused(run.one(13));
    assert_eq!(
        refused_interrupt["kind"], "permission",
        "{refused_interrupt:#}"
    );
    assert_eq!(refused_interrupt["code"], "human_control");
    // The human's interrupt ends C; the withheld outcome stays, marked as the human's doing.
    let c = ok(last(&run, 15));
    assert_eq!(c["task"]["state"], "cancelled", "{c:#}");
    assert_eq!(c["task"]["cancelOutcome"], "abort_withheld", "{c:#}");
    assert_eq!(c["task"]["humanIntervened"], true, "{c:#}");
    let again = ok(run.one(16));
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(again["outcome"], "abort_withheld");
    // B and D never reached the model.
    let texts: Vec<String> = fx
        .mock
        .main_requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect();
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("Task B") || t.contains("Task D")),
        "{texts:?}"
    );
}

#[test]
fn mcp_http_a_turn_typed_in_the_codex_tui_takes_control_and_release_delivers_the_queue() {
    use crate::suite::codex::codrive::{session_with_tui, type_prompt, wait_screen};
    let fx = CodexFixture::start();
    fx.mock
        .push(Step::text("Reply to the human.").when_user_contains("Hello from the human"));
    fx.mock.push(
        Step::text("Reply to the queued task.").when_user_contains("Queued while the human drives"),
    );
    let (id, pane) = session_with_tui(&fx, json!({ "approvalPolicy": "never" }), "TUI is up.");
    // The human types a turn: the session is theirs.
    type_prompt(&fx, &pane, "Hello from the human");
    wait_screen(&fx, &pane, "Reply to the human.");
    fx.wait_event(&id, "the lease moving to the human", |e| {
        e["type"] == "lease.changed" && e["data"]["holder"] == "human"
    });
    fx.wait_turns_completed(&id, 2);

    let plan = json!([
        { "tool": "queue", "arguments": { "session_id": id } },
        { "tool": "send", "arguments": { "session_id": id,
          "text": "Queued while the human drives", "idempotency_key": "q1" },
          "save": { "task": "/task/taskId" } },
        { "tool": "events", "arguments": { "session_id": id, "after": fx.daemon.head(), "wait_seconds": 2 } },
        { "tool": "task_status", "arguments": { "task_id": "$task" } },
        { "pause": "release" },
        { "tool": "events", "arguments": { "session_id": id, "after": fx.daemon.head(), "wait_seconds": 10 },
          "until_type": "turn.completed", "max_calls": 30 },
        { "tool": "task_status", "arguments": { "task_id": "$task" },
          "until": { "/task/phase": ["finished"] } },
        { "tool": "task_result", "arguments": { "task_id": "$task" } },
        { "tool": "send", "arguments": { "session_id": id,
          "text": "Queued while the human drives", "idempotency_key": "q1" } },
        { "tool": "get_session", "arguments": { "session_id": id } },
    ]);
    let run = run_client_with(
        &fx.daemon,
        Transport::Http,
        &plan,
        |_| {},
        |label, _| {
            assert_eq!(label, "release");
            // The daemon still holds the task for the human, and delivered nothing.
            let queue = fx
                .daemon
                .get(&format!("/api/sessions/{id}/queue"))
                .assert_ok();
            assert_eq!(queue["pendingTotal"], 1, "{queue:#}");
            assert_eq!(
                queue["pending"][0]["waitingReason"], "human_control",
                "{queue:#}"
            );
            assert_eq!(fx.mock.main_requests().len(), 2, "nothing was delivered");
            let out = fx.daemon.cli_ok(&["release", &id]);
            assert!(out.contains("is managed (generation 2)"), "{out}");
        },
    );
    let queue = ok(run.one(0));
    assert_eq!(queue["lease"]["holder"], "human", "{queue:#}");
    assert_eq!(queue["lease"]["reason"], "terminal_input", "{queue:#}");
    let sent = ok(run.one(1));
    assert_eq!(sent["task"]["state"], "waiting", "{sent:#}");
    assert_eq!(sent["task"]["waitingReason"], "human_control", "{sent:#}");
    let status = ok(run.one(3));
    assert_eq!(status["task"]["state"], "waiting", "{status:#}");
    assert_eq!(status["task"]["phase"], "queued", "{status:#}");
    assert_eq!(
        status["task"]["waitingReason"], "human_control",
        "{status:#}"
    );

    let done = ok(last(&run, 6));
    assert_eq!(done["task"]["state"], "completed", "{done:#}");
    assert_eq!(done["task"]["leaseGenerationAtDelivery"], 2, "{done:#}");
    let result = ok(run.one(7));
    assert_eq!(result["text"], "Reply to the queued task.", "{result:#}");
    assert_eq!(result["eof"], true);
    let again = ok(run.one(8));
    assert_eq!(again["replayed"], true);
    assert_eq!(again["task"]["taskId"], done["task"]["taskId"]);
    let session = ok(run.one(9));
    assert_eq!(
        session["session"]["lease"]["holder"], "managed",
        "{session:#}"
    );
    assert_eq!(session["session"]["lease"]["generation"], 2, "{session:#}");
    assert_eq!(session["session"]["waitingTasks"], 0, "{session:#}");
    // The human sees the delivered turn in the TUI.
    wait_screen(&fx, &pane, "Reply to the queued task.");
}

#[test]
fn mcp_stdio_claude_task_completes_then_a_human_typing_takes_control_until_release() {
    use crate::suite::claude::lifecycle::type_in_pane;
    use crate::support::claude_host::ClaudeFixture;
    use crate::support::mock_messages::Step as Reply;
    let fx = ClaudeFixture::start_with_args(&["--mcp-allowed-root", fx_root()]);
    fn fx_root() -> &'static str {
        // Claude's fixture seeds its work directory; the allowed root is its parent.
        "/"
    }
    fx.mock
        .push(Reply::text("Claude finished the task.").when_user_contains("First task for Claude"));
    fx.mock
        .push(Reply::text("Claude answers the human.").when_user_contains("Typed by the human"));
    fx.mock.push(
        Reply::text("Claude ran the queued task.").when_user_contains("Second task for Claude"),
    );
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "claude", "cwd": fx.work,
          "prompt": "First task for Claude", "idempotency_key": "claude-start" },
          "save": { "session": "/session/id", "first": "/task/taskId" } },
        { "tool": "events", "arguments": { "session_id": "$session", "after": 0, "wait_seconds": 10 },
          "until_type": "turn.completed", "max_calls": 30 },
        { "tool": "task_status", "arguments": { "task_id": "$first" },
          "until": { "/task/phase": ["finished"] } },
        { "tool": "task_result", "arguments": { "task_id": "$first" } },
        { "pause": "human types" },
        { "tool": "send", "arguments": { "session_id": "$session", "text": "Second task for Claude" },
          "save": { "second": "/task/taskId" } },
        { "tool": "task_status", "arguments": { "task_id": "$second" } },
        { "pause": "release" },
        { "tool": "task_status", "arguments": { "task_id": "$second" },
          "until": { "/task/phase": ["finished"] } },
        { "tool": "task_result", "arguments": { "task_id": "$second" } },
        { "tool": "start_session", "arguments": { "runtime": "claude", "cwd": fx.work,
          "prompt": "First task for Claude", "idempotency_key": "claude-start" } },
    ]);
    let run = run_client_with(
        &fx.daemon,
        Transport::Stdio,
        &plan,
        |_| {},
        |label, vars| {
            let id = vars["session"].as_str().unwrap();
            match label {
                "human types" => {
                    let pane = fx.pane(id);
                    type_in_pane(&fx, &pane, "Typed by the human");
                    fx.wait_event(id, "the lease moving to the human", |e| {
                        e["type"] == "lease.changed" && e["data"]["holder"] == "human"
                    });
                    fx.wait_turns_completed(id, 2);
                }
                "release" => {
                    // The daemon holds the queued task for the human.
                    let queued = fx
                        .daemon
                        .get(&format!("/api/sessions/{id}/queue"))
                        .assert_ok();
                    assert_eq!(queued["pendingTotal"], 1, "{queued:#}");
                    assert_eq!(
                        queued["pending"][0]["waitingReason"], "human_control",
                        "{queued:#}"
                    );
                    let out = fx.daemon.cli_ok(&["release", id]);
                    assert!(out.contains("is managed"), "{out}");
                }
                other => panic!("unexpected pause {other}"),
            }
        },
    );
    let started = ok(run.one(0));
    assert_eq!(started["session"]["runtime"], "claude", "{started:#}");
    let first = ok(last(&run, 2));
    assert_eq!(first["task"]["state"], "completed", "{first:#}");
    assert_eq!(ok(run.one(3))["text"], "Claude finished the task.");

    let second = ok(run.one(6));
    assert_eq!(second["task"]["state"], "waiting", "{second:#}");
    assert_eq!(
        second["task"]["waitingReason"], "human_control",
        "{second:#}"
    );
    let second = ok(last(&run, 8));
    assert_eq!(second["task"]["state"], "completed", "{second:#}");
    assert_eq!(ok(run.one(9))["text"], "Claude ran the queued task.");
    // A retried start returns the same session and the same first task.
    let again = ok(run.one(10));
    assert_eq!(again["session"]["id"], started["session"]["id"]);
    assert_eq!(again["task"]["taskId"], started["task"]["taskId"]);
}

#[test]
fn mcp_http_answer_request_and_set_mode_wait_for_a_managed_lease() {
    let fx = CodexFixture::start();
    let question = json!([{
        "id": "color",
        "header": "Color",
        "question": "Which color?",
        "options": [
            { "label": "Red", "description": "warm" },
            { "label": "Blue", "description": "cold" }
        ]
    }]);
    fx.mock.push(Step::function_call(
        "request_user_input",
        json!({ "questions": question }),
    ));
    fx.mock.push(Step::text("Blue it is."));
    let id = fx.create(json!({}));
    let plan = json!([
        { "pause": "takeover" },
        // 1-2: under the human lease, both are refused and change nothing.
        { "tool": "set_mode", "arguments": { "session_id": id, "mode": "plan" } },
        { "tool": "answer_request", "arguments": { "session_id": id,
          "request_id": "in:made:up:question", "answers": { "color": "Blue" } } },
        { "pause": "release" },
        // 4-7: managed again, both are allowed.
        { "tool": "set_mode", "arguments": { "session_id": id, "mode": "plan" } },
        { "tool": "send", "arguments": { "session_id": id, "text": "Pick a color with me" } },
        { "tool": "list_requests", "arguments": { "session_id": id },
          "until": { "/requests/0/pending": [true] },
          "save": { "request": "/requests/0/request/requestId" } },
        { "tool": "answer_request", "arguments": { "session_id": id,
          "request_id": "$request", "answers": { "color": "Blue" } } },
    ]);
    let run = run_client_with(
        &fx.daemon,
        Transport::Http,
        &plan,
        |_| {},
        |label, _| match label {
            "takeover" => {
                let out = fx.daemon.cli_ok(&["takeover", &id]);
                assert!(out.contains("human now holds"), "{out}");
            }
            "release" => {
                fx.daemon.cli_ok(&["release", &id]);
            }
            other => panic!("unexpected pause {other}"),
        },
    );
    for index in [1, 2] {
        let refusal = refused(run.one(index));
        assert_eq!(refusal["kind"], "permission", "{refusal:#}");
        assert_eq!(refusal["code"], "human_control", "{refusal:#}");
    }
    let mode = ok(run.one(4));
    assert_eq!(mode["ok"], true, "{mode:#}");
    let answered = ok(run.one(7));
    assert_eq!(answered["ok"], true, "{answered:#}");
    fx.wait_turns_completed(&id, 1);
    let outputs: Vec<Value> = fx
        .mock
        .received()
        .iter()
        .flat_map(|r| crate::support::mock_responses::input_items(&r.body).to_vec())
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o["output"].to_string().contains("Blue")),
        "the model got the answer: {outputs:#?}"
    );
    // The one mode change is the managed one (the refused one stored nothing).
    let modes: Vec<Value> = fx
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "session.mode")
        .collect();
    assert_eq!(modes.len(), 1, "{modes:#?}");
}

/// An MCP `initialize` request, one line.
pub const INITIALIZE: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"pipe\",\"version\":\"1\"}}}\n";

/// `echo '{…}' | cohost mcp`: stdin closes right after the request, and the answer still comes
/// (the bridge finishes every request it read before it exits).
#[test]
fn a_piped_one_shot_request_gets_its_answer() {
    let daemon = TestDaemon::start_with(None, &[]);
    let output = run_with_input(
        &mut daemon.cli_command(&["mcp"]),
        Some(INITIALIZE),
        CLI_TIMEOUT,
    );
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout: {stdout:?} stderr: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
}

/// Every tool declares an `outputSchema`, and the SDK checks each successful answer's
/// `structuredContent` against it (`call_tool` fails on one that does not conform): a codex
/// session started, prompted and read through most tools, and an `events` page cut to fit
/// (with its `note`), all conform.
#[test]
fn mcp_http_answers_conform_to_each_tools_output_schema() {
    let root_dir = temp_dir("cohost-mcp-root-");
    let root = root_dir.path().canonicalize().unwrap();
    let project = root.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let fx = CodexFixture::start_with_args(&["--mcp-allowed-root", root.to_str().unwrap()]);
    fx.mock.push(Step::text("Hello over MCP."));
    fx.mock.push(Step::text("Again."));
    // Enough large events that one page of them must be cut to fit the answer bound.
    for n in 0..24 {
        let mut body = report("work", "codex", "running");
        body["lastUserPrompt"] = json!(format!("{n} {}", "p".repeat(8_000)));
        fx.daemon.report(&body);
    }
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "prompt": "Say hello", "idempotency_key": "conform-1" },
          "save": { "session": "/session/id", "task": "/task/taskId" } },
        { "tool": "wait_task", "arguments": { "task_id": "$task", "timeout_seconds": 60 } },
        { "tool": "task_status", "arguments": { "task_id": "$task" } },
        { "tool": "task_result", "arguments": { "task_id": "$task" } },
        { "tool": "list_sessions", "arguments": {} },
        { "tool": "get_session", "arguments": { "session_id": "$session" } },
        { "tool": "queue", "arguments": { "session_id": "$session" } },
        { "tool": "events", "arguments": { "session_id": "$session", "after": 0, "limit": 1000 } },
        { "tool": "events", "arguments": { "after": 0, "limit": 1000 } },
        { "tool": "tracker_state", "arguments": {} },
        { "tool": "post_agent_event", "arguments": { "agent": "codex", "status": "idle",
          "tmux_session": "work" } },
        { "tool": "list_approvals", "arguments": { "session_id": "$session" } },
        { "tool": "list_requests", "arguments": { "session_id": "$session" } },
        { "tool": "goal_get", "arguments": { "session_id": "$session" } },
        { "tool": "interrupt", "arguments": { "session_id": "$session" } },
        { "tool": "cancel_task", "arguments": { "task_id": "$task" } },
        { "tool": "send", "arguments": { "session_id": "$session", "prompt": "Again" },
          "save": { "again": "/task/taskId" } },
        { "tool": "wait_task", "arguments": { "task_id": "$again", "timeout_seconds": 60 } },
        { "tool": "set_mode", "arguments": { "session_id": "$session", "mode": "default" } },
        { "tool": "fork", "arguments": { "session_id": "$session" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": project,
          "idempotency_key": "conform-1" } },
    ]);
    let run = run_client(&fx.daemon, Transport::Http, &plan, |_| {});
    check_tools(&run);
    // Each step answered (none was refused); the SDK validated every one of them.
    for index in 0..plan.as_array().unwrap().len() {
        let answer = run.one(index);
        assert!(answer.get("rpcError").is_none(), "step {index}: {answer:#}");
        ok(answer);
    }
    assert_eq!(ok(run.one(1))["finished"], true);
    assert_eq!(ok(run.one(3))["text"], "Hello over MCP.");
    let cut = ok(run.one(8));
    assert_eq!(cut["truncated"], true, "{cut:#}");
    assert!(cut["note"].as_str().is_some(), "{cut:#}");
    assert_eq!(ok(run.one(14))["interrupted"], false);
    assert_eq!(ok(run.one(15))["replayed"], true);
    let forked = ok(run.one(19));
    assert_eq!(forked["ok"], true, "{forked:#}");
    assert!(forked["session"]["id"].is_string(), "{forked:#}");
    // A retried start without a prompt answers the session and no task.
    let again = ok(run.one(20));
    assert_eq!(again["session"]["id"], ok(run.one(0))["session"]["id"]);
    assert!(again.get("task").is_none(), "{again:#}");
}

/// Errors raised below the surfaces name fields as MCP callers send them: the tool's
/// `snake_case` argument (and `prompt`, not HTTP's `text`), never HTTP's `camelCase` name —
/// which HTTP keeps for the same refusal.
#[test]
fn mcp_errors_name_the_callers_arguments_not_the_http_fields() {
    let (tmux, dirs) = tmux_with_sessions(&["work"]);
    let root = std::path::Path::new(&dirs[0]).canonicalize().unwrap();
    let daemon = TestDaemon::start(&tmux, &["--mcp-allowed-root", root.to_str().unwrap()]);
    let cwd = root.to_str().unwrap();
    let plan = json!([
        { "tool": "start_session", "arguments": { "runtime": "claude", "cwd": cwd,
          "approval_policy": "never" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": cwd,
          "permission_mode": "plan" } },
        { "tool": "start_session", "arguments": { "runtime": "codex", "cwd": cwd,
          "idempotency_key": "" } },
        { "tool": "post_agent_event", "arguments": { "agent": "codex", "status": "idle" } },
        { "tool": "post_agent_event", "arguments": { "agent": "codex", "status": "idle",
          "project_dir": "relative/dir" } },
        { "tool": "post_agent_event", "arguments": { "agent": "codex", "status": "idle",
          "tmux_session": "nope" } },
        { "tool": "goal_set", "arguments": { "session_id": "cs_nope" } },
        { "tool": "send", "arguments": { "session_id": "cs_nope", "prompt": "  " } },
        { "tool": "send", "arguments": { "session_id": "cs_nope", "prompt": "hi",
          "idempotency_key": "" } },
        { "tool": "events", "arguments": { "after": 1_000_000_000u64 } },
    ]);
    let expected = [
        (
            "invalid_field",
            "`approval_policy` applies to codex sessions only",
        ),
        (
            "invalid_field",
            "`permission_mode` applies to claude sessions only",
        ),
        ("invalid_field", "`idempotency_key` must be 1 to 256 bytes"),
        (
            "invalid_field",
            "one of tmux_session or project_dir is required",
        ),
        ("invalid_field", "project_dir must be an absolute path"),
        (
            "session_not_found",
            "no tmux session matches tmux_session `nope`",
        ),
        (
            "invalid_request",
            "give at least one of objective, status, token_budget",
        ),
        ("invalid_request", "`prompt` must not be empty"),
        (
            "invalid_request",
            "`idempotency_key` must be 1 to 256 bytes",
        ),
        ("invalid_field", "is ahead of the newest event"),
    ];
    let http_names = [
        "approvalPolicy",
        "permissionMode",
        "idempotencyKey",
        "tmuxSession",
        "projectDir",
        "tokenBudget",
        "`text`",
        "`wait`",
    ];
    let run = run_client(&daemon, Transport::Http, &plan, |_| {});
    for (index, (code, text)) in expected.iter().enumerate() {
        let error = refused(run.one(index));
        let message = error["message"].as_str().unwrap();
        assert_eq!(error["code"], *code, "step {index}: {error:#}");
        assert!(message.contains(text), "step {index}: {message}");
        assert!(
            !http_names.iter().any(|name| message.contains(name)),
            "step {index} names an HTTP field: {message}"
        );
    }
    // A refusal of one field names it after the message, as the argument.
    let first = refused(run.one(0))["message"].as_str().unwrap().to_string();
    assert!(first.ends_with("(field `approval_policy`)"), "{first}");

    // HTTP keeps its own names for the same refusals.
    let resp = daemon.post(
        "/api/sessions",
        &json!({ "runtime": "claude", "cwd": cwd, "approvalPolicy": "never" }),
    );
    assert_eq!(resp.status, 400, "{}", resp.body);
    let error = &resp.json()["error"];
    assert_eq!(error["field"], "approvalPolicy", "{error:#}");
    assert_eq!(
        error["message"], "`approvalPolicy` applies to codex sessions only",
        "{error:#}"
    );
    let resp = daemon.post(
        "/api/agent-event",
        &json!({ "agent": "codex", "status": "idle" }),
    );
    assert_eq!(resp.status, 400, "{}", resp.body);
    assert_eq!(
        resp.json()["error"]["message"],
        "one of tmuxSession or projectDir is required"
    );
}
