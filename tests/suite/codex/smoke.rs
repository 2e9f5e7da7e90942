//! Smoke tests for the test infrastructure itself: the real `codex app-server` (stdio JSON-RPC),
//! driven directly without cohost, against the scripted [`MockResponses`] server. They prove the
//! mock's SSE is what codex 0.169.0 accepts for text, exec (with an approval) and reasoning.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::codex_home::{codex_bin, codex_env, write_codex_home};
use crate::support::mock_responses::{MOCK_TITLE, MockResponses, RequestKind, Step};
use crate::support::pinned_version;
use crate::support::{make_dir, temp_dir};

/// How long any single wait on codex may take.
const WAIT: Duration = Duration::from_secs(30);

/// A `codex app-server` child speaking line-delimited JSON-RPC over stdio.
struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    /// Every message received so far, in order (for failure messages).
    seen: Vec<Value>,
    /// Messages read while waiting for something else, not yet handed out.
    backlog: Vec<Value>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl AppServer {
    fn spawn(codex_home: &Path, cwd: &Path) -> AppServer {
        let mut command = Command::new(codex_bin());
        command.arg("app-server").current_dir(cwd);
        codex_env(&mut command, codex_home);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| json!({ "unparsable": line, "error": e.to_string() }));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                let mut sink = sink.lock().unwrap();
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        AppServer {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            backlog: Vec::new(),
            stderr,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn context(&self) -> String {
        let tail: Vec<String> = self.seen.iter().rev().take(40).rev().map(summary).collect();
        format!(
            "last messages from codex:\n  {}\nstderr:\n{}",
            tail.join("\n  "),
            self.stderr.lock().unwrap()
        )
    }

    /// The next message from codex (backlog first), or a panic after `timeout`.
    fn next(&mut self, timeout: Duration) -> Value {
        if !self.backlog.is_empty() {
            return self.backlog.remove(0);
        }
        match self.lines.recv_timeout(timeout) {
            Ok(message) => {
                self.seen.push(message.clone());
                message
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "no message from codex within {timeout:?}\n{}",
                    self.context()
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.try_wait();
                panic!("codex closed stdout (exit: {status:?})\n{}", self.context())
            }
        }
    }

    /// Sends a request and waits for its response; other messages go to the backlog.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "id": id, "method": method, "params": params }));
        let deadline = Instant::now() + WAIT;
        let mut held = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.lines.recv_timeout(left) {
                Ok(m) => m,
                Err(e) => panic!(
                    "no response to {method} (id {id}): {e:?}\n{}",
                    self.context()
                ),
            };
            self.seen.push(message.clone());
            if message.get("method").is_none() && message["id"] == id {
                self.backlog.extend(held);
                if let Some(error) = message.get("error") {
                    panic!("{method} failed: {error}\n{}", self.context());
                }
                return message["result"].clone();
            }
            held.push(message);
        }
    }

    fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({ "id": id, "result": result }));
    }

    fn initialize(&mut self) -> Value {
        self.request(
            "initialize",
            json!({
                "clientInfo": { "name": "cohost-test", "title": "cohost test", "version": "0.1.0" },
                "capabilities": { "experimentalApi": true },
            }),
        )
    }

    fn start_thread(&mut self, cwd: &Path, approval_policy: &str) -> String {
        let result = self.request(
            "thread/start",
            json!({ "cwd": cwd, "approvalPolicy": approval_policy, "sandbox": "workspace-write" }),
        );
        result["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no thread id in {result}"))
            .to_owned()
    }

    fn start_turn(&mut self, thread_id: &str, text: &str) -> String {
        let result = self.request(
            "turn/start",
            json!({
                "threadId": thread_id,
                "input": [{ "type": "text", "text": text, "text_elements": [] }],
            }),
        );
        result["turn"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no turn id in {result}"))
            .to_owned()
    }

    /// Collects every message up to and including `turn/completed` for `turn_id`, answering
    /// server requests with `answer` (which returns the result to send).
    fn collect_turn(&mut self, turn_id: &str, answer: impl FnMut(&Value) -> Value) -> Vec<Value> {
        self.collect_until(&format!("turn/completed of {turn_id}"), answer, |m| {
            m["method"] == "turn/completed" && m["params"]["turn"]["id"] == turn_id
        })
    }

    /// Collects every message up to and including the first one satisfying `stop`, answering
    /// server requests with `answer`.
    fn collect_until(
        &mut self,
        what: &str,
        mut answer: impl FnMut(&Value) -> Value,
        stop: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!("no {what} within {WAIT:?}\n{}", self.context());
            }
            let message = self.next(left);
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = answer(&message);
                let id = message["id"].clone();
                self.respond(&id, result);
            }
            let done = stop(&message);
            out.push(message);
            if done {
                return out;
            }
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `method` plus the item type / status where there is one, for readable sequences.
fn summary(message: &Value) -> String {
    let method = message["method"].as_str().unwrap_or("<response>");
    let params = &message["params"];
    let mut out = method.to_owned();
    if let Some(kind) = params["item"]["type"].as_str() {
        out.push_str(&format!(" ({kind})"));
    }
    if let Some(status) = params["turn"]["status"].as_str() {
        out.push_str(&format!(" [{status}]"));
    }
    if message.get("id").is_some() && message.get("method").is_some() {
        out.push_str(&format!(" id={}", message["id"]));
    }
    out
}

/// Index of the first message satisfying `pred`, or a panic listing the sequence.
fn position(messages: &[Value], what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    messages.iter().position(pred).unwrap_or_else(|| {
        let seq: Vec<String> = messages.iter().map(summary).collect();
        panic!("no {what} in the turn:\n  {}", seq.join("\n  "))
    })
}

fn is_item(message: &Value, method: &str, kind: &str) -> bool {
    message["method"] == method && message["params"]["item"]["type"] == kind
}

fn deltas(messages: &[Value], method: &str) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == method)
        .map(|m| m["params"]["delta"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A fresh mock, CODEX_HOME and work directory, and an initialized app-server.
struct Fixture {
    mock: MockResponses,
    server: AppServer,
    work: String,
    _root: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let root = temp_dir("cohost-codex-");
    let mock = MockResponses::start();
    let work = make_dir(&root.path().join("work"));
    let home = root.path().join("codex-home");
    write_codex_home(&home, &mock.base_url(), Path::new(&work));
    let started = Instant::now();
    let mut server = AppServer::spawn(&home, Path::new(&work));
    let init = server.initialize();
    eprintln!("codex app-server initialized in {:?}", started.elapsed());
    assert!(
        init["userAgent"]
            .as_str()
            .is_some_and(|ua| ua.contains(&pinned_version(&cohost::peers::CODEX))),
        "unexpected initialize result {init}"
    );
    Fixture {
        mock,
        server,
        work,
        _root: root,
    }
}

#[test]
fn codex_smoke_text_turn_streams_the_scripted_answer() {
    let mut f = fixture();
    let answer = "Hello from the mock model, in several chunks.";
    f.mock.push(
        Step::text(answer)
            .delay(Duration::from_millis(20))
            .usage(1200, 1000, 34),
    );

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let started = Instant::now();
    let turn_id = f.server.start_turn(&thread_id, "Say hello");
    let turn = f
        .server
        .collect_turn(&turn_id, |m| panic!("unexpected server request {m}"));
    eprintln!("text turn took {:?}", started.elapsed());

    let turn_started = position(&turn, "turn/started", |m| m["method"] == "turn/started");
    let user = position(&turn, "item/completed (userMessage)", |m| {
        is_item(m, "item/completed", "userMessage")
    });
    let first_delta = position(&turn, "item/agentMessage/delta", |m| {
        m["method"] == "item/agentMessage/delta"
    });
    let agent = position(&turn, "item/completed (agentMessage)", |m| {
        is_item(m, "item/completed", "agentMessage")
    });
    let usage = position(&turn, "thread/tokenUsage/updated", |m| {
        m["method"] == "thread/tokenUsage/updated"
    });
    let completed = turn.len() - 1;
    assert!(
        turn_started < user && user < first_delta && first_delta < agent && agent < completed,
        "wrong order: {:#?}",
        turn.iter().map(summary).collect::<Vec<_>>()
    );
    assert!(usage < completed);

    let chunks = deltas(&turn, "item/agentMessage/delta");
    assert!(chunks.len() > 1, "expected several deltas, got {chunks:?}");
    assert_eq!(chunks.concat(), answer);
    assert_eq!(turn[agent]["params"]["item"]["text"], answer);
    assert_eq!(
        turn[user]["params"]["item"]["content"][0]["text"],
        "Say hello"
    );
    let done = &turn[completed]["params"]["turn"];
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["items"][0]["text"], answer);
    let last = &turn[usage]["params"]["tokenUsage"]["last"];
    assert_eq!(last["inputTokens"], 1200);
    assert_eq!(last["cachedInputTokens"], 1000);
    assert_eq!(last["outputTokens"], 34);

    let requests = f.mock.wait_for_requests(1, WAIT);
    assert_eq!(requests.len(), 1, "one model request for one text turn");
    let request = &requests[0];
    assert_eq!(request.step, Some(0));
    assert_eq!(request.last_user_text(), "Say hello");
    assert_eq!(request.body["model"], "mock-model");
    assert_eq!(request.body["stream"], true);
    assert_eq!(
        request.headers.get("authorization").map(String::as_str),
        Some("Bearer dummy")
    );
    assert_eq!(f.mock.pending_steps(), 0);
    assert_eq!(f.mock.defaulted(), 0);
    assert!(
        f.mock.other_requests().is_empty(),
        "unexpected requests: {:?}",
        f.mock.other_requests()
    );
}

#[test]
fn codex_smoke_exec_step_asks_for_approval_then_runs() {
    let mut f = fixture();
    f.mock.push(Step::exec("touch approved.txt"));
    f.mock
        .push(Step::text("Created the file.").when_last_input("function_call_output"));

    let thread_id = f.server.start_thread(Path::new(&f.work), "untrusted");
    let started = Instant::now();
    let turn_id = f.server.start_turn(&thread_id, "Create approved.txt");
    let mut approvals = Vec::new();
    let turn = f.server.collect_turn(&turn_id, |request| {
        assert_eq!(
            request["method"], "item/commandExecution/requestApproval",
            "unexpected server request {request}"
        );
        approvals.push(request.clone());
        json!({ "decision": "accept" })
    });
    eprintln!("exec turn with approval took {:?}", started.elapsed());

    assert_eq!(approvals.len(), 1, "one approval request");
    let approval = &approvals[0];
    assert!(
        approval["params"]["command"]
            .as_str()
            .unwrap()
            .contains("touch approved.txt"),
        "{approval}"
    );
    let call_id = approval["params"]["itemId"].as_str().unwrap().to_owned();

    let exec_started = position(&turn, "item/started (commandExecution)", |m| {
        is_item(m, "item/started", "commandExecution")
    });
    let asked = position(&turn, "requestApproval", |m| {
        m["method"] == "item/commandExecution/requestApproval"
    });
    let resolved = position(&turn, "serverRequest/resolved", |m| {
        m["method"] == "serverRequest/resolved" && m["params"]["requestId"] == approval["id"]
    });
    let exec_done = position(&turn, "item/completed (commandExecution)", |m| {
        is_item(m, "item/completed", "commandExecution")
    });
    let agent = position(&turn, "item/completed (agentMessage)", |m| {
        is_item(m, "item/completed", "agentMessage")
    });
    assert!(
        exec_started < asked && asked < resolved && resolved < exec_done && exec_done < agent,
        "wrong order: {:#?}",
        turn.iter().map(summary).collect::<Vec<_>>()
    );
    let item = &turn[exec_done]["params"]["item"];
    assert_eq!(item["id"], call_id.as_str());
    assert_eq!(item["status"], "completed", "{item}");
    assert_eq!(item["exitCode"], 0, "{item}");
    assert_eq!(turn[agent]["params"]["item"]["text"], "Created the file.");
    assert_eq!(
        turn.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
    assert!(
        Path::new(&f.work).join("approved.txt").is_file(),
        "the approved command ran in the work dir"
    );

    let requests = f.mock.wait_for_requests(2, WAIT);
    assert_eq!(
        requests.len(),
        2,
        "the tool output goes back in a second request"
    );
    assert_eq!(requests[1].step, Some(1));
    let output = requests[1]
        .function_call_output(&call_id)
        .expect("function_call_output for the call");
    assert!(
        output.contains("Process exited with code 0"),
        "tool output: {output}"
    );
    assert_eq!(f.mock.defaulted(), 0);
}

#[test]
fn codex_smoke_reasoning_step_streams_summary_before_answer() {
    let mut f = fixture();
    let summary_text = "Thinking about the greeting.";
    f.mock.push(Step::reasoning(summary_text, "Hi there!"));

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let turn_id = f.server.start_turn(&thread_id, "Greet me");
    let turn = f
        .server
        .collect_turn(&turn_id, |m| panic!("unexpected server request {m}"));

    let r_started = position(&turn, "item/started (reasoning)", |m| {
        is_item(m, "item/started", "reasoning")
    });
    let r_delta = position(&turn, "summaryTextDelta", |m| {
        m["method"] == "item/reasoning/summaryTextDelta"
    });
    let r_done = position(&turn, "item/completed (reasoning)", |m| {
        is_item(m, "item/completed", "reasoning")
    });
    let a_started = position(&turn, "item/started (agentMessage)", |m| {
        is_item(m, "item/started", "agentMessage")
    });
    let a_done = position(&turn, "item/completed (agentMessage)", |m| {
        is_item(m, "item/completed", "agentMessage")
    });
    assert!(
        r_started < r_delta && r_delta < r_done && r_done < a_started && a_started < a_done,
        "wrong order: {:#?}",
        turn.iter().map(summary).collect::<Vec<_>>()
    );
    assert_eq!(
        deltas(&turn, "item/reasoning/summaryTextDelta").concat(),
        summary_text
    );
    assert_eq!(
        turn[r_done]["params"]["item"]["summary"],
        json!([summary_text])
    );
    assert_eq!(turn[a_done]["params"]["item"]["text"], "Hi there!");
    assert_eq!(
        turn.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
}

fn no_requests(request: &Value) -> Value {
    panic!("unexpected server request {request}")
}

#[test]
fn codex_smoke_interrupt_cuts_a_hanging_stream() {
    let mut f = fixture();
    f.mock
        .push(Step::text("A partial answer that never finishes").then_hang());
    f.mock
        .push(Step::text("Resumed.").when_user_contains("Continue please"));

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let turn_id = f.server.start_turn(&thread_id, "Start something long");
    f.server
        .collect_until("an agentMessage delta", no_requests, |m| {
            m["method"] == "item/agentMessage/delta"
        });
    let started = Instant::now();
    f.server.request(
        "turn/interrupt",
        json!({ "threadId": thread_id, "turnId": turn_id }),
    );
    let turn = f.server.collect_turn(&turn_id, no_requests);
    eprintln!("interrupt -> turn/completed took {:?}", started.elapsed());
    let done = &turn.last().unwrap()["params"]["turn"];
    assert_eq!(done["status"], "interrupted", "{done}");
    assert!(
        !turn
            .iter()
            .any(|m| is_item(m, "item/completed", "agentMessage")),
        "the partial answer never completes"
    );
    f.mock.wait_for_disconnects(1, WAIT);
    eprintln!(
        "mock saw the disconnect {:?} after the interrupt",
        started.elapsed()
    );

    let turn_id = f.server.start_turn(&thread_id, "Continue please");
    let turn = f.server.collect_turn(&turn_id, no_requests);
    assert_eq!(
        turn.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
    let requests = f.mock.wait_for_requests(2, WAIT);
    assert_eq!(requests[1].step, Some(1));
    let aborted = requests[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["role"] == "user" && i.to_string().contains("<turn_aborted>"));
    assert!(
        aborted,
        "the next request carries the <turn_aborted> marker"
    );
}

#[test]
fn codex_smoke_steer_restarts_the_model_request() {
    let mut f = fixture();
    let long = "This is a long answer that streams slowly, word by word, so that a steer can land mid-stream.";
    // Never ends by itself: the steer lands mid-stream however slow the machine.
    f.mock.push(
        Step::text(long)
            .delay(Duration::from_millis(150))
            .then_hang(),
    );
    f.mock
        .push(Step::text("Short now.").when_user_contains("keep it short"));

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let turn_id = f.server.start_turn(&thread_id, "Write a long answer");
    f.server
        .collect_until("an agentMessage delta", no_requests, |m| {
            m["method"] == "item/agentMessage/delta"
        });
    let steered = f.server.request(
        "turn/steer",
        json!({
            "threadId": thread_id,
            "expectedTurnId": turn_id,
            "input": [{ "type": "text", "text": "Actually, keep it short.", "text_elements": [] }],
        }),
    );
    assert_eq!(steered["turnId"], turn_id.as_str());
    let turn = f.server.collect_turn(&turn_id, no_requests);
    let agents: Vec<&Value> = turn
        .iter()
        .filter(|m| is_item(m, "item/completed", "agentMessage"))
        .collect();
    assert_eq!(agents.len(), 1, "only the post-steer answer completes");
    assert_eq!(agents[0]["params"]["item"]["text"], "Short now.");
    assert_eq!(
        turn.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
    f.mock.wait_for_disconnects(1, WAIT);
    let requests = f.mock.wait_for_requests(2, WAIT);
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].step, Some(1));
    assert_eq!(f.mock.defaulted(), 0);
}

#[test]
fn codex_smoke_model_errors_fail_the_turn_and_compaction_is_answered() {
    let mut f = fixture();
    f.mock.push(Step::http_status(500));
    f.mock
        .push(Step::failed("context_length_exceeded", "too long"));
    f.mock
        .push(Step::text("After compaction.").when_user_contains("third"));

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let turn_id = f.server.start_turn(&thread_id, "first");
    let turn = f.server.collect_turn(&turn_id, no_requests);
    let done = &turn.last().unwrap()["params"]["turn"];
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(
        done["error"]["codexErrorInfo"], "internalServerError",
        "{done}"
    );

    let turn_id = f.server.start_turn(&thread_id, "second");
    let turn = f.server.collect_turn(&turn_id, no_requests);
    let done = &turn.last().unwrap()["params"]["turn"];
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(
        done["error"]["codexErrorInfo"], "contextWindowExceeded",
        "{done}"
    );

    let turn_id = f.server.start_turn(&thread_id, "third");
    let turn = f.server.collect_turn(&turn_id, no_requests);
    assert_eq!(
        turn.last().unwrap()["params"]["turn"]["status"],
        "completed"
    );
    let compaction = position(&turn, "item/completed (contextCompaction)", |m| {
        is_item(m, "item/completed", "contextCompaction")
    });
    let agent = position(&turn, "item/completed (agentMessage)", |m| {
        is_item(m, "item/completed", "agentMessage")
    });
    assert!(compaction < agent);
    assert_eq!(turn[agent]["params"]["item"]["text"], "After compaction.");
    let kinds: Vec<_> = f.mock.received().iter().map(|r| (r.kind, r.step)).collect();
    assert_eq!(
        kinds,
        [
            (RequestKind::Main, Some(0)),
            (RequestKind::Main, Some(1)),
            (RequestKind::Compaction, None),
            (RequestKind::Main, Some(2)),
        ],
        "the compaction call is answered without consuming a step"
    );

    f.mock.push(Step::truncated("Cut short."));
    let turn_id = f.server.start_turn(&thread_id, "fourth");
    let turn = f.server.collect_turn(&turn_id, no_requests);
    let done = &turn.last().unwrap()["params"]["turn"];
    assert_eq!(done["status"], "failed", "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stream closed before response.completed"),
        "{done}"
    );
}

#[test]
fn codex_smoke_title_request_is_answered_without_a_step() {
    let mut f = fixture();
    f.mock.push(Step::text("Scripted answer."));

    // What the TUI does for thread titles: a turn with an outputSchema asking for `title`.
    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let result = f.server.request(
        "turn/start",
        json!({
            "threadId": thread_id,
            "input": [{ "type": "text", "text": "Generate a concise, single-line task title", "text_elements": [] }],
            "outputSchema": {
                "type": "object",
                "properties": { "title": { "type": "string", "minLength": 1, "maxLength": 36 } },
                "required": ["title"],
                "additionalProperties": false,
            },
        }),
    );
    let turn_id = result["turn"]["id"].as_str().unwrap().to_owned();
    let turn = f.server.collect_turn(&turn_id, no_requests);
    let agent = position(&turn, "item/completed (agentMessage)", |m| {
        is_item(m, "item/completed", "agentMessage")
    });
    let text = turn[agent]["params"]["item"]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({ "title": MOCK_TITLE })
    );
    let received = f.mock.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].kind, RequestKind::Title);
    assert_eq!(
        received[0].body["text"]["format"]["type"], "json_schema",
        "{}",
        received[0].body["text"]
    );
    assert_eq!(
        f.mock.pending_steps(),
        1,
        "the scripted step is still queued"
    );
}

#[test]
fn codex_smoke_active_goal_loops_on_default_replies_until_the_budget() {
    let mut f = fixture();
    f.mock
        .set_default(Step::text("Still working.").usage(500, 0, 100));

    let thread_id = f.server.start_thread(Path::new(&f.work), "never");
    let started = Instant::now();
    f.server.request(
        "thread/goal/set",
        json!({
            "threadId": thread_id,
            "objective": "Keep going",
            "status": "active",
            "tokenBudget": 1000,
            "origin": "user",
        }),
    );
    let seen = f
        .server
        .collect_until("a budgetLimited goal", no_requests, |m| {
            m["method"] == "thread/goal/updated" && m["params"]["goal"]["status"] == "budgetLimited"
        });
    // The turn that crossed the budget still completes, after the goal update.
    let rest = f
        .server
        .collect_until("the last goal turn's turn/completed", no_requests, |m| {
            m["method"] == "turn/completed"
        });
    eprintln!("goal reached its budget after {:?}", started.elapsed());
    let goal = &seen.last().unwrap()["params"]["goal"];
    assert_eq!(
        goal["tokensUsed"], 1200,
        "600 tokens per automatic turn: {goal}"
    );
    let all: Vec<&Value> = seen.iter().chain(rest.iter()).collect();
    let turns = all
        .iter()
        .filter(|m| m["method"] == "turn/completed")
        .count();
    assert_eq!(turns, 2, "two automatic turns exhaust a budget of 1000");
    assert!(
        !all.iter()
            .any(|m| is_item(m, "item/started", "userMessage")),
        "automatic goal turns have no userMessage item"
    );
    let requests = f.mock.received();
    assert_eq!(requests.len(), 2);
    assert!(
        requests.iter().all(|r| r.defaulted),
        "the default step answered every goal turn"
    );
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("<codex_internal_context source="),
        "goal context in the input"
    );
}
