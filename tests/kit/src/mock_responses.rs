//! A scripted mock of the OpenAI Responses API on 127.0.0.1, for driving the real `codex` against
//! it. Tests enqueue [`Step`]s; each main-conversation `POST /v1/responses` consumes the first
//! queued step whose condition matches and is answered with the SSE stream codex 0.169.0 expects
//! (see docs/peers.md, "Offline"). Hidden calls (thread-title generation and
//! auto-compaction) are answered without consuming steps, and an empty queue answers "ok".
//!
//! The server runs on its own background thread with its own tokio runtime, so it works from
//! plain `#[test]` functions; dropping the [`MockResponses`] stops it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::mock_server::{self, Finish, Gone, Server, Sse, chunks, header_map, sse_response};

/// The text a hidden title-generation request is answered with.
pub const MOCK_TITLE: &str = "Mock title";
/// The text a hidden auto-compaction request is answered with.
pub const MOCK_COMPACTION_SUMMARY: &str =
    "Mock compaction summary: the conversation so far was about testing.";
/// The text of the reply used when the step queue is empty.
pub const DEFAULT_REPLY: &str = "ok";

/// Token usage reported in `response.completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input: 100,
            cached: 0,
            output: 10,
        }
    }
}

/// One output item of a streamed response.
#[derive(Debug, Clone)]
enum Output {
    Reasoning(String),
    Message(String),
    FunctionCall {
        name: String,
        arguments: String,
        /// The tool's namespace (codex offers MCP tools as `namespace` tools: `mcp__<server>`).
        namespace: Option<String>,
    },
}

#[derive(Debug, Clone)]
enum Reply {
    /// Stream the outputs, then `response.completed` (or hold the stream open if `hang_after`).
    Stream(Vec<Output>),
    /// `response.created`, then nothing until the client disconnects.
    Hang,
    /// A plain HTTP error answer.
    HttpStatus(u16),
    /// `response.created`, the outputs, then `response.failed` with this error code and message.
    Failed { code: String, message: String },
    /// `response.created`, the outputs, then end the body without `response.completed`.
    Truncated,
}

/// When a queued step may answer a request.
#[derive(Debug, Clone)]
enum Condition {
    UserContains(String),
    LastInputType(String),
}

impl Condition {
    fn matches(&self, body: &Value) -> bool {
        match self {
            Condition::UserContains(needle) => last_user_text(body).contains(needle.as_str()),
            Condition::LastInputType(kind) => {
                last_input_type(body).as_deref() == Some(kind.as_str())
            }
        }
    }
}

/// One scripted model reply. Build with a constructor, refine with the chained modifiers.
#[derive(Debug, Clone)]
pub struct Step {
    reply: Reply,
    extra: Vec<Output>,
    delay: Duration,
    usage: Usage,
    conditions: Vec<Condition>,
    hang_after: bool,
}

impl Step {
    fn with(reply: Reply) -> Step {
        Step {
            reply,
            extra: Vec::new(),
            delay: Duration::ZERO,
            usage: Usage::default(),
            conditions: Vec::new(),
            hang_after: false,
        }
    }

    /// An assistant message, streamed as one `response.output_text.delta` per word.
    pub fn text(text: impl Into<String>) -> Step {
        Step::with(Reply::Stream(vec![Output::Message(text.into())]))
    }

    /// A reasoning item whose summary is `summary` (streamed word by word), then a message `text`.
    pub fn reasoning(summary: impl Into<String>, text: impl Into<String>) -> Step {
        Step::with(Reply::Stream(vec![
            Output::Reasoning(summary.into()),
            Output::Message(text.into()),
        ]))
    }

    /// A `function_call` to `exec_command` with arguments `{"cmd": cmd}`. Codex runs it as a
    /// `commandExecution` item and sends the `function_call_output` in a new request, which
    /// consumes the next step.
    pub fn exec(cmd: impl Into<String>) -> Step {
        Step::exec_with(json!({ "cmd": cmd.into() }))
    }

    /// A `function_call` to `exec_command` with arbitrary arguments (for example
    /// `{"cmd": …, "sandbox_permissions": "require_escalated", "justification": …}`).
    pub fn exec_with(arguments: Value) -> Step {
        Step::function_call("exec_command", arguments)
    }

    /// A `function_call` to any tool codex offers (`exec_command`, `update_goal`, …).
    pub fn function_call(name: impl Into<String>, arguments: Value) -> Step {
        Step::with(Reply::Stream(vec![Output::FunctionCall {
            name: name.into(),
            arguments: arguments.to_string(),
            namespace: None,
        }]))
    }

    /// A `function_call` to a tool inside a `namespace` tool (codex offers the tools of MCP
    /// server `x` in namespace `mcp__x`).
    pub fn namespaced_call(
        namespace: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Step {
        Step::with(Reply::Stream(vec![Output::FunctionCall {
            name: name.into(),
            arguments: arguments.to_string(),
            namespace: Some(namespace.into()),
        }]))
    }

    /// `response.created`, then the stream stays open until the client disconnects (for
    /// interrupt tests). Codex's own idle timeout is five minutes.
    pub fn hang() -> Step {
        Step::with(Reply::Hang)
    }

    /// A plain HTTP error with a JSON error body (500 → codex reports `internalServerError`).
    pub fn http_status(status: u16) -> Step {
        Step::with(Reply::HttpStatus(status))
    }

    /// A stream ending in `response.failed` with `error.code` (`context_length_exceeded`,
    /// `insufficient_quota`, or anything else for a generic failure).
    pub fn failed(code: impl Into<String>, message: impl Into<String>) -> Step {
        Step::with(Reply::Failed {
            code: code.into(),
            message: message.into(),
        })
    }

    /// A message streamed in full whose body then ends without `response.completed`.
    pub fn truncated(text: impl Into<String>) -> Step {
        Step::with(Reply::Truncated).then_text(text)
    }

    /// Adds an assistant message after this step's outputs (before `response.completed`).
    pub fn then_text(mut self, text: impl Into<String>) -> Step {
        self.push_output(Output::Message(text.into()));
        self
    }

    /// Adds an `exec_command` function call after this step's outputs.
    pub fn then_exec(mut self, cmd: impl Into<String>) -> Step {
        let arguments = json!({ "cmd": cmd.into() }).to_string();
        self.push_output(Output::FunctionCall {
            name: "exec_command".into(),
            arguments,
            namespace: None,
        });
        self
    }

    fn push_output(&mut self, output: Output) {
        match &mut self.reply {
            Reply::Stream(outputs) => outputs.push(output),
            _ => self.extra.push(output),
        }
    }

    /// Sleeps this long before every delta but the first (and between output items).
    pub fn delay(mut self, delay: Duration) -> Step {
        self.delay = delay;
        self
    }

    /// The `usage` reported in `response.completed` (`total_tokens` = input + output).
    pub fn usage(mut self, input: u64, cached: u64, output: u64) -> Step {
        self.usage = Usage {
            input,
            cached,
            output,
        };
        self
    }

    /// Only answers a request whose last user message contains `needle`. Steps are scanned in
    /// queue order; the first whose conditions all hold is consumed.
    pub fn when_user_contains(mut self, needle: impl Into<String>) -> Step {
        self.conditions.push(Condition::UserContains(needle.into()));
        self
    }

    /// Only answers a request whose last `input` item has this `type` (e.g.
    /// `function_call_output`, or `message`).
    pub fn when_last_input(mut self, kind: impl Into<String>) -> Step {
        self.conditions.push(Condition::LastInputType(kind.into()));
        self
    }

    /// Streams the outputs' deltas but never finishes: no `*.done`, no `response.completed`;
    /// the stream stays open until the client disconnects (a partial answer to interrupt/steer).
    pub fn then_hang(mut self) -> Step {
        self.hang_after = true;
        self
    }

    fn matches(&self, body: &Value) -> bool {
        self.conditions.iter().all(|c| c.matches(body))
    }
}

/// What a `POST /v1/responses` was taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A main-conversation request (consumes a step, or gets the default reply).
    Main,
    /// Hidden thread-title generation (json_schema output asking for a `title`).
    Title,
    /// Hidden auto-compaction (last user message holds the CONTEXT CHECKPOINT COMPACTION prompt).
    Compaction,
}

/// One `POST /v1/responses` the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    /// 0-based position among all `/v1/responses` requests.
    pub seq: usize,
    pub kind: RequestKind,
    pub body: Value,
    /// Lower-cased header names → values.
    pub headers: BTreeMap<String, String>,
    /// Index (in push order) of the step that answered it, for main requests.
    pub step: Option<usize>,
    /// A main request that found no matching step and got the default reply.
    pub defaulted: bool,
    pub at: Instant,
}

impl Received {
    /// The text of the last `role:"user"` message in `input`.
    pub fn last_user_text(&self) -> String {
        last_user_text(&self.body)
    }

    /// The `type` of the last `input` item.
    pub fn last_input_type(&self) -> Option<String> {
        last_input_type(&self.body)
    }

    /// The `output` of the `function_call_output` input item for `call_id`, if any.
    pub fn function_call_output(&self, call_id: &str) -> Option<String> {
        input_items(&self.body)
            .iter()
            .rev()
            .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    }
}

/// The `input` array of a Responses request body.
pub fn input_items(body: &Value) -> &[Value] {
    body["input"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The concatenated text of the last `role:"user"` message in a request body.
pub fn last_user_text(body: &Value) -> String {
    input_items(body)
        .iter()
        .rev()
        .find(|i| i["type"] == "message" && i["role"] == "user")
        .map(message_text)
        .unwrap_or_default()
}

fn last_input_type(body: &Value) -> Option<String> {
    input_items(body)
        .last()
        .and_then(|i| i["type"].as_str())
        .map(str::to_owned)
}

fn message_text(item: &Value) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn classify(body: &Value) -> RequestKind {
    if last_user_text(body).contains("CONTEXT CHECKPOINT COMPACTION") {
        return RequestKind::Compaction;
    }
    let format = &body["text"]["format"];
    if format["type"] == "json_schema" {
        let schema = &format["schema"];
        let wants_title = schema["properties"].get("title").is_some()
            || format["name"]
                .as_str()
                .is_some_and(|n| n.to_ascii_lowercase().contains("title"));
        let only_title = schema["properties"]
            .as_object()
            .is_some_and(|p| p.len() == 1);
        let asks_title = last_user_text(body).contains("task title");
        if wants_title && (only_title || asks_title) {
            return RequestKind::Title;
        }
    }
    RequestKind::Main
}

type Shared = mock_server::Shared<Step, Received>;
type Inner = mock_server::Log<Step, Received>;

/// The mock server. Dropping it shuts the server down (open streams are cut).
pub struct MockResponses {
    shared: Arc<Shared>,
    server: Server,
}

impl MockResponses {
    /// Binds 127.0.0.1:0 and serves on a background runtime thread.
    pub fn start() -> MockResponses {
        let shared = Shared::new("mock responses", Step::text(DEFAULT_REPLY), (), describe);
        let app = Router::new()
            .route("/v1/responses", post(responses))
            .route("/v1/models", get(models))
            .fallback(other)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let server = Server::start("mock responses", app);
        MockResponses { shared, server }
    }

    /// `http://127.0.0.1:PORT/v1` — the provider `base_url` for codex.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Enqueues a scripted reply for a main-conversation request.
    pub fn push(&self, step: Step) -> &Self {
        self.shared.push(step);
        self
    }

    /// Replaces the reply used when no queued step matches (default: text "ok", default usage).
    pub fn set_default(&self, step: Step) {
        self.shared.set_default(step);
    }

    /// How many pushed steps have not been consumed yet.
    pub fn pending_steps(&self) -> usize {
        self.shared.pending_steps()
    }

    /// Bodies of every `POST /v1/responses` received, hidden calls included, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.body).collect()
    }

    /// Every `POST /v1/responses` received, with its classification and the step that answered it.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received_where(|_| true)
    }

    /// Only the main-conversation requests.
    pub fn main_requests(&self) -> Vec<Received> {
        self.shared.received_where(|r| r.kind == RequestKind::Main)
    }

    /// How many main requests found no step and got the default reply.
    pub fn defaulted(&self) -> usize {
        self.shared.count_received(|r| r.defaulted)
    }

    /// How many response streams ended because the client hung up before the mock finished.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects()
    }

    /// What the mock received and what it still holds, in words (for a test's failure message).
    pub fn describe(&self) -> String {
        self.shared.describe()
    }

    /// `METHOD path` of every request that was not `POST /v1/responses` or `GET /v1/models`.
    pub fn other_requests(&self) -> Vec<String> {
        self.shared.other_requests()
    }

    /// Waits until at least `n` main-conversation requests arrived; returns them all.
    /// Panics (listing what did arrive) after `timeout`.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Received> {
        self.shared.wait_for_received(
            &format!("{n} main /v1/responses requests"),
            n,
            timeout,
            |r| r.kind == RequestKind::Main,
        )
    }

    /// Waits until at least `n` streams were cut by the client (steer/interrupt drop the stream).
    pub fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> usize {
        self.shared.wait_for_disconnects(n, timeout)
    }
}

/// What a timed-out wait reports.
fn describe(inner: &Inner) -> String {
    let seen: Vec<String> = inner
        .received
        .iter()
        .map(|r| {
            format!(
                "#{} {:?} step={:?} last_user={:?}",
                r.seq,
                r.kind,
                r.step,
                r.last_user_text()
            )
        })
        .collect();
    format!(
        "received {}: {seen:#?}; disconnects {}; other requests {:?}",
        inner.received.len(),
        inner.disconnects,
        inner.other_requests
    )
}

async fn models() -> impl IntoResponse {
    axum::Json(json!({ "object": "list", "data": [], "models": [] }))
}

async fn other(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> impl IntoResponse {
    shared.note_other(format!("{method} {uri}"));
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "error": { "message": "not mocked", "type": "not_found" } })),
    )
}

async fn responses(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(body) = shared.json_body("/v1/responses", &body) else {
        return (StatusCode::BAD_REQUEST, "mock responses: body is not JSON").into_response();
    };
    let headers = header_map(&headers);
    let kind = classify(&body);
    let step = shared.update(|inner| {
        let (step_index, defaulted, step) = match kind {
            RequestKind::Title => (
                None,
                false,
                Step::text(json!({ "title": MOCK_TITLE }).to_string()),
            ),
            RequestKind::Compaction => (None, false, Step::text(MOCK_COMPACTION_SUMMARY)),
            RequestKind::Main => inner.take_step(|s| s.matches(&body)),
        };
        let seq = inner.received.len();
        inner.received.push(Received {
            seq,
            kind,
            body,
            headers,
            step: step_index,
            defaulted,
            at: Instant::now(),
        });
        step
    });
    respond(shared, step)
}

fn respond(shared: Arc<Shared>, step: Step) -> Response {
    if let Reply::HttpStatus(status) = step.reply {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({
            "error": {
                "message": format!("mock responses: scripted HTTP {}", status.as_u16()),
                "type": "server_error",
                "code": null,
            }
        });
        return (status, axum::Json(body)).into_response();
    }
    let on_gone = {
        let shared = shared.clone();
        move || shared.update(|inner| inner.disconnects += 1)
    };
    sse_response(step.delay, on_gone, move |sse| async move {
        run_step(&shared, &step, &sse).await
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Streams the step; `Finish::Hang` means "now hang until the client disconnects".
async fn run_step(shared: &Shared, step: &Step, sse: &Sse) -> Result<Finish, Gone> {
    let response_id = format!("resp_mock_{}", shared.next_id());
    let created_at = now_secs();
    let response = |status: &str, output: &[Value]| {
        json!({
            "id": response_id,
            "object": "response",
            "created_at": created_at,
            "status": status,
            "model": "mock-model",
            "output": output,
        })
    };
    sse.send(json!({ "type": "response.created", "sequence_number": 0, "response": response("in_progress", &[]) }))
        .await?;

    let outputs: Vec<Output> = match &step.reply {
        Reply::Hang => return Ok(Finish::Hang),
        Reply::HttpStatus(_) => return Ok(Finish::Done),
        Reply::Stream(outputs) => outputs.clone(),
        Reply::Failed { .. } | Reply::Truncated => step.extra.clone(),
    };

    let mut done_items = Vec::new();
    for (index, output) in outputs.iter().enumerate() {
        if index > 0 {
            sse.pause().await;
        }
        let hang_here = step.hang_after && index + 1 == outputs.len();
        match stream_output(shared, sse, index, output, hang_here).await? {
            Some(item) => done_items.push(item),
            None => return Ok(Finish::Hang),
        }
    }

    match &step.reply {
        Reply::Failed { code, message } => {
            let mut failed = response("failed", &done_items);
            failed["error"] = json!({ "code": code, "message": message });
            sse.send(json!({ "type": "response.failed", "response": failed }))
                .await?;
        }
        Reply::Truncated => {}
        _ => {
            let Usage {
                input,
                cached,
                output,
            } = step.usage;
            let mut completed = response("completed", &done_items);
            completed["usage"] = json!({
                "input_tokens": input,
                "input_tokens_details": { "cached_tokens": cached },
                "output_tokens": output,
                "output_tokens_details": { "reasoning_tokens": 0 },
                "total_tokens": input + output,
            });
            sse.send(json!({ "type": "response.completed", "response": completed }))
                .await?;
        }
    }
    Ok(Finish::Done)
}

/// Streams one output item; returns its final form, or `None` when the step hangs mid-item.
async fn stream_output(
    shared: &Shared,
    sse: &Sse,
    output_index: usize,
    output: &Output,
    hang_after: bool,
) -> Result<Option<Value>, Gone> {
    match output {
        Output::Message(text) => {
            let id = format!("msg_mock_{}", shared.next_id());
            let added = json!({ "type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": [] });
            sse.send(json!({ "type": "response.output_item.added", "output_index": output_index, "item": added }))
                .await?;
            sse.send(json!({
                "type": "response.content_part.added",
                "item_id": id,
                "output_index": output_index,
                "content_index": 0,
                "part": { "type": "output_text", "text": "", "annotations": [] },
            }))
            .await?;
            for (i, delta) in chunks(text).into_iter().enumerate() {
                if i > 0 {
                    sse.pause().await;
                }
                sse.send(json!({
                    "type": "response.output_text.delta",
                    "item_id": id,
                    "output_index": output_index,
                    "content_index": 0,
                    "delta": delta,
                }))
                .await?;
            }
            if hang_after {
                return Ok(None);
            }
            sse.send(json!({
                "type": "response.output_text.done",
                "item_id": id,
                "output_index": output_index,
                "content_index": 0,
                "text": text,
            }))
            .await?;
            let done = json!({
                "type": "message",
                "id": id,
                "role": "assistant",
                "status": "completed",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }],
            });
            sse.send(json!({ "type": "response.output_item.done", "output_index": output_index, "item": done }))
                .await?;
            Ok(Some(done))
        }
        Output::Reasoning(summary) => {
            let id = format!("rs_mock_{}", shared.next_id());
            let added = json!({ "type": "reasoning", "id": id, "summary": [] });
            sse.send(json!({ "type": "response.output_item.added", "output_index": output_index, "item": added }))
                .await?;
            sse.send(json!({
                "type": "response.reasoning_summary_part.added",
                "item_id": id,
                "output_index": output_index,
                "summary_index": 0,
                "part": { "type": "summary_text", "text": "" },
            }))
            .await?;
            for (i, delta) in chunks(summary).into_iter().enumerate() {
                if i > 0 {
                    sse.pause().await;
                }
                sse.send(json!({
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": id,
                    "output_index": output_index,
                    "summary_index": 0,
                    "delta": delta,
                }))
                .await?;
            }
            if hang_after {
                return Ok(None);
            }
            sse.send(json!({
                "type": "response.reasoning_summary_text.done",
                "item_id": id,
                "output_index": output_index,
                "summary_index": 0,
                "text": summary,
            }))
            .await?;
            sse.send(json!({
                "type": "response.reasoning_summary_part.done",
                "item_id": id,
                "output_index": output_index,
                "summary_index": 0,
                "part": { "type": "summary_text", "text": summary },
            }))
            .await?;
            let done = json!({
                "type": "reasoning",
                "id": id,
                "summary": [{ "type": "summary_text", "text": summary }],
            });
            sse.send(json!({ "type": "response.output_item.done", "output_index": output_index, "item": done }))
                .await?;
            Ok(Some(done))
        }
        Output::FunctionCall {
            name,
            arguments,
            namespace,
        } => {
            let n = shared.next_id();
            let id = format!("fc_mock_{n}");
            let call_id = format!("call_mock_{n}");
            let mut added = json!({
                "type": "function_call",
                "id": id,
                "call_id": call_id,
                "name": name,
                "arguments": "",
                "status": "in_progress",
            });
            if let Some(namespace) = &namespace {
                added["namespace"] = json!(namespace);
            }
            sse.send(json!({ "type": "response.output_item.added", "output_index": output_index, "item": added }))
                .await?;
            sse.send(json!({
                "type": "response.function_call_arguments.delta",
                "item_id": id,
                "output_index": output_index,
                "delta": arguments,
            }))
            .await?;
            if hang_after {
                return Ok(None);
            }
            sse.send(json!({
                "type": "response.function_call_arguments.done",
                "item_id": id,
                "output_index": output_index,
                "arguments": arguments,
            }))
            .await?;
            let mut done = json!({
                "type": "function_call",
                "id": id,
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "status": "completed",
            });
            if let Some(namespace) = &namespace {
                done["namespace"] = json!(namespace);
            }
            sse.send(json!({ "type": "response.output_item.done", "output_index": output_index, "item": done }))
                .await?;
            Ok(Some(done))
        }
    }
}
