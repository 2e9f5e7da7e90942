//! A scripted mock of the Anthropic Messages API on 127.0.0.1, for driving the real `claude` TUI
//! against it (see docs/peers.md, "Starting it"). Tests enqueue [`Step`]s; each main-conversation
//! `POST /v1/messages` consumes the first queued step whose conditions match and is answered with
//! the SSE stream Claude Code 2.1.197 expects (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`), or with one JSON message when the request says
//! `"stream": false`. An empty queue answers "ok".
//!
//! Side requests never consume steps: the once-per-session title request (no tools, a
//! `json_schema` output format asking for `title`), `/compact` requests, subagent requests
//! (`cc_is_subagent=true` in the billing header), and any other request without tools. Each gets a
//! canned answer, replaceable with [`MockMessages::set_side_reply`]. `POST
//! /v1/messages/count_tokens`, `GET /v1/models` and the CLI's `HEAD /` reachability check are
//! answered too; any other path gets a 404 and is logged ([`MockMessages::not_found`]).
//!
//! The server runs on its own background thread with its own tokio runtime, so it works from
//! plain `#[test]` functions; dropping the [`MockMessages`] stops it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::mock_server::{
    self, Finish, Gone, OnDrop, Server, Sse, chunks, header_map, sse_response,
};

/// The title a side title-generation request is answered with (as `{"title": MOCK_TITLE}`).
pub const MOCK_TITLE: &str = "Mock title";
/// The text a `/compact` request is answered with (the shape Claude Code expects).
pub const MOCK_COMPACT_SUMMARY: &str = "<analysis>Mock analysis.</analysis>\n<summary>Mock summary of the conversation so far.</summary>";
/// The text a subagent request is answered with.
pub const MOCK_SUBAGENT_REPLY: &str = "Mock subagent report.";
/// The text of the reply used when the step queue is empty (and for unrecognised side requests).
pub const DEFAULT_REPLY: &str = "ok";
/// The model named in replies when the request names none.
pub const MOCK_MODEL: &str = "claude-opus-4-8";

/// The marker the `/compact` prompt starts with.
const COMPACT_MARKER: &str = "CRITICAL: Respond with TEXT ONLY";
/// The billing-header field that marks a subagent's request.
const SUBAGENT_MARKER: &str = "cc_is_subagent=true";
/// How many characters of tool input JSON go into one `input_json_delta`.
const JSON_CHUNK: usize = 24;

/// Token usage reported in `message_start` / `message_delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input: 100,
            output: 10,
        }
    }
}

/// One content block of a scripted assistant message.
#[derive(Debug, Clone)]
enum Block {
    Text(String),
    ToolUse {
        name: String,
        input: Value,
    },
    /// `count` text deltas `"<i>:<ns> "`, each stamped as it is written (see [`Step::stamped`]).
    Stamped {
        count: usize,
    },
}

#[derive(Debug, Clone)]
enum Reply {
    /// Stream the blocks, then `message_delta` + `message_stop` (unless `hang_after`).
    Message(Vec<Block>),
    /// `message_start`, then nothing until the client disconnects.
    Hang,
    /// A plain HTTP error answer with an Anthropic error body.
    HttpStatus { status: u16, message: String },
}

/// When a queued step may answer a request.
#[derive(Debug, Clone)]
enum Condition {
    UserContains(String),
    HasToolResult,
}

impl Condition {
    fn matches(&self, body: &Value) -> bool {
        match self {
            Condition::UserContains(needle) => last_user_text(body).contains(needle.as_str()),
            Condition::HasToolResult => !last_user_tool_results(body).is_empty(),
        }
    }
}

/// One scripted model reply. Build with a constructor, refine with the chained modifiers.
#[derive(Debug, Clone)]
pub struct Step {
    reply: Reply,
    delay: Duration,
    usage: Usage,
    conditions: Vec<Condition>,
    hang_after: bool,
}

impl Step {
    fn with(reply: Reply) -> Step {
        Step {
            reply,
            delay: Duration::ZERO,
            usage: Usage::default(),
            conditions: Vec::new(),
            hang_after: false,
        }
    }

    /// An assistant text block, streamed as one `text_delta` per word; `stop_reason: end_turn`.
    pub fn text(text: impl Into<String>) -> Step {
        Step::with(Reply::Message(vec![Block::Text(text.into())]))
    }

    /// An assistant text block of `count` deltas for latency measurements: delta `i` is
    /// `"<i>:<ns> "`, where `<ns>` is CLOCK_REALTIME in nanoseconds ([`now_ns`]) taken just
    /// before the delta's SSE frame is handed to the connection. Pause between deltas with
    /// [`Step::delay`]. A non-streamed answer stamps every part with the time of the answer.
    pub fn stamped(count: usize) -> Step {
        Step::with(Reply::Message(vec![Block::Stamped { count }]))
    }

    /// A `tool_use` block calling `name` with `input` (streamed as `input_json_delta` chunks);
    /// `stop_reason: tool_use`. Claude Code runs the tool (after a permission dialog if the tool
    /// needs one) and sends the `tool_result` in a new request, which consumes the next step.
    pub fn tool_use(name: impl Into<String>, input: Value) -> Step {
        Step::with(Reply::Message(vec![Block::ToolUse {
            name: name.into(),
            input,
        }]))
    }

    /// `message_start`, then the stream stays open until the client disconnects (for interrupt
    /// tests). With `"stream": false` the answer is held back until the client gives up.
    pub fn hang() -> Step {
        Step::with(Reply::Hang)
    }

    /// A plain HTTP error: `{"type":"error","error":{"type":…,"message":message}}` with the
    /// error type the real API uses for `status`. Claude Code retries 429/5xx/529 on its own
    /// (each retry is a new main request, consuming the next step), and ends the turn on 400.
    pub fn http_status(status: u16, message: impl Into<String>) -> Step {
        Step::with(Reply::HttpStatus {
            status,
            message: message.into(),
        })
    }

    /// Adds a text block after this step's blocks.
    pub fn then_text(mut self, text: impl Into<String>) -> Step {
        self.push_block(Block::Text(text.into()));
        self
    }

    /// Adds a `tool_use` block after this step's blocks (parallel tool calls).
    pub fn then_tool_use(mut self, name: impl Into<String>, input: Value) -> Step {
        self.push_block(Block::ToolUse {
            name: name.into(),
            input,
        });
        self
    }

    fn push_block(&mut self, block: Block) {
        match &mut self.reply {
            Reply::Message(blocks) => blocks.push(block),
            other => *other = Reply::Message(vec![block]),
        }
    }

    /// Sleeps this long before every delta but the first (and between content blocks).
    pub fn delay(mut self, delay: Duration) -> Step {
        self.delay = delay;
        self
    }

    /// The `usage` reported: `input_tokens` in `message_start`, `output_tokens` at the end.
    pub fn usage(mut self, input: u64, output: u64) -> Step {
        self.usage = Usage { input, output };
        self
    }

    /// Only answers a request whose last user message's text (system reminders left out)
    /// contains `needle`. Steps are scanned in queue order; the first whose conditions all hold
    /// is consumed.
    pub fn when_user_contains(mut self, needle: impl Into<String>) -> Step {
        self.conditions.push(Condition::UserContains(needle.into()));
        self
    }

    /// Only answers a request whose last user message carries a `tool_result` block.
    pub fn when_tool_result(mut self) -> Step {
        self.conditions.push(Condition::HasToolResult);
        self
    }

    /// Streams the blocks' deltas but never finishes: no `content_block_stop` for the last block,
    /// no `message_delta`, no `message_stop`; the stream stays open until the client disconnects
    /// (a partial answer to interrupt). The TUI draws streamed text one complete line at a time,
    /// so end the text with `\n` to see it on screen before the hang.
    pub fn then_hang(mut self) -> Step {
        self.hang_after = true;
        self
    }

    fn matches(&self, body: &Value) -> bool {
        self.conditions.iter().all(|c| c.matches(body))
    }
}

/// What a `POST /v1/messages` was taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RequestKind {
    /// A main-conversation request (consumes a step, or gets the default reply).
    Main,
    /// Session title generation: no tools, `output_config.format` a json_schema with `title`.
    Title,
    /// `/compact`: the last user message holds "CRITICAL: Respond with TEXT ONLY…".
    Compaction,
    /// A subagent's request (`cc_is_subagent=true` in the billing header).
    Subagent,
    /// Any other request without tools.
    Side,
}

/// One `POST /v1/messages` the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    /// 0-based position among all `/v1/messages` requests.
    pub seq: usize,
    pub kind: RequestKind,
    /// The request target, query included (`/v1/messages?beta=true`).
    pub uri: String,
    pub body: Value,
    /// Lower-cased header names → values.
    pub headers: BTreeMap<String, String>,
    /// Index (in push order) of the step that answered it, for main requests.
    pub step: Option<usize>,
    /// A main request that found no matching step and got the default reply.
    pub defaulted: bool,
    /// The client hung up before the mock finished the answer.
    pub disconnected: bool,
    pub at: Instant,
}

impl Received {
    /// The text of the last `role:"user"` message, system reminders left out.
    pub fn last_user_text(&self) -> String {
        last_user_text(&self.body)
    }

    /// The `tool_result` blocks of the last `role:"user"` message.
    pub fn tool_results(&self) -> Vec<Value> {
        last_user_tool_results(&self.body)
    }

    /// The `tool_result` block answering `tool_use_id`, searched in every message.
    pub fn tool_result(&self, tool_use_id: &str) -> Option<Value> {
        messages(&self.body)
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == tool_use_id)
            .cloned()
    }

    /// Whether the request asked for an SSE stream.
    pub fn is_stream(&self) -> bool {
        self.body["stream"].as_bool().unwrap_or(false)
    }

    /// How many tools the request offered.
    pub fn tool_count(&self) -> usize {
        self.body["tools"].as_array().map_or(0, Vec::len)
    }

    /// The `x-claude-code-session-id` header.
    pub fn session_id(&self) -> Option<&str> {
        self.headers
            .get("x-claude-code-session-id")
            .map(String::as_str)
    }
}

/// The `messages` array of a request body.
pub fn messages(body: &Value) -> &[Value] {
    body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The last `role:"user"` message of a request body (the CLI may put `role:"system"` messages
/// after it).
fn last_user_message(body: &Value) -> Option<&Value> {
    messages(body).iter().rev().find(|m| m["role"] == "user")
}

/// The concatenated text of the last `role:"user"` message, without `<system-reminder>` blocks.
pub fn last_user_text(body: &Value) -> String {
    let Some(message) = last_user_message(body) else {
        return String::new();
    };
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .filter(|t| !t.trim_start().starts_with("<system-reminder>"))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The `tool_result` blocks of the last `role:"user"` message.
pub fn last_user_tool_results(body: &Value) -> Vec<Value> {
    last_user_message(body)
        .and_then(|m| m["content"].as_array())
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Every text of a `system` field (a string, or a list of text blocks).
fn system_texts(body: &Value) -> Vec<&str> {
    match &body["system"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => Vec::new(),
    }
}

fn classify(body: &Value, headers: &BTreeMap<String, String>) -> RequestKind {
    let subagent_header = headers
        .values()
        .any(|value| value.contains(SUBAGENT_MARKER));
    if subagent_header
        || system_texts(body)
            .iter()
            .any(|t| t.contains(SUBAGENT_MARKER))
    {
        return RequestKind::Subagent;
    }
    let compact = last_user_message(body).is_some_and(|m| match &m["content"] {
        Value::String(s) => s.contains(COMPACT_MARKER),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .any(|t| t.contains(COMPACT_MARKER)),
        _ => false,
    });
    if compact {
        return RequestKind::Compaction;
    }
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !has_tools {
        let format = &body["output_config"]["format"];
        let wants_title = format["type"] == "json_schema"
            && format["schema"]["properties"].get("title").is_some();
        return if wants_title {
            RequestKind::Title
        } else {
            RequestKind::Side
        };
    }
    RequestKind::Main
}

/// What the Messages mock keeps besides the shared log.
struct Extra {
    side_replies: BTreeMap<RequestKind, Step>,
    not_found: Vec<String>,
}

type Shared = mock_server::Shared<Step, Received, Extra>;
type Inner = mock_server::Log<Step, Received, Extra>;

/// Counts a disconnect and marks request `seq` as cut short.
fn note_disconnect(shared: &Shared, seq: usize) {
    shared.update(|inner| {
        inner.disconnects += 1;
        if let Some(received) = inner.received.get_mut(seq) {
            received.disconnected = true;
        }
    });
}

/// The mock server. Dropping it shuts the server down (open streams are cut).
pub struct MockMessages {
    shared: Arc<Shared>,
    server: Server,
}

impl MockMessages {
    /// Binds 127.0.0.1:0 and serves on a background runtime thread.
    pub fn start() -> MockMessages {
        let side_replies = BTreeMap::from([
            (
                RequestKind::Title,
                Step::text(json!({ "title": MOCK_TITLE }).to_string()),
            ),
            (RequestKind::Compaction, Step::text(MOCK_COMPACT_SUMMARY)),
            (RequestKind::Subagent, Step::text(MOCK_SUBAGENT_REPLY)),
            (RequestKind::Side, Step::text(DEFAULT_REPLY)),
        ]);
        let extra = Extra {
            side_replies,
            not_found: Vec::new(),
        };
        let shared = Shared::new("mock messages", Step::text(DEFAULT_REPLY), extra, describe);
        let app = Router::new()
            .route("/v1/messages", post(messages_handler))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models))
            .route("/v1/models/{id}", get(model))
            .route("/", get(root).head(root))
            .fallback(other)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let server = Server::start("mock messages", app);
        MockMessages { shared, server }
    }

    /// `http://127.0.0.1:PORT` — the `ANTHROPIC_BASE_URL` for claude (no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Enqueues a scripted reply for a main-conversation request.
    pub fn push(&self, step: Step) -> &Self {
        self.shared.push(step);
        self
    }

    /// Replaces the reply used when no queued step matches (default: text "ok").
    pub fn set_default(&self, step: Step) {
        self.shared.set_default(step);
    }

    /// Replaces the canned answer for a side request kind (`Main` replaces the default reply).
    pub fn set_side_reply(&self, kind: RequestKind, step: Step) {
        let mut inner = self.shared.lock();
        if kind == RequestKind::Main {
            inner.default_step = step;
        } else {
            inner.extra.side_replies.insert(kind, step);
        }
    }

    /// How many pushed steps have not been consumed yet.
    pub fn pending_steps(&self) -> usize {
        self.shared.pending_steps()
    }

    /// Bodies of every `POST /v1/messages` received, side requests included, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.body).collect()
    }

    /// Every `POST /v1/messages` received, with its classification and the step that answered it.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received_where(|_| true)
    }

    /// Only the main-conversation requests.
    pub fn main_requests(&self) -> Vec<Received> {
        self.requests_of(RequestKind::Main)
    }

    /// Only the requests of one kind.
    pub fn requests_of(&self, kind: RequestKind) -> Vec<Received> {
        self.shared.received_where(|r| r.kind == kind)
    }

    /// How many main requests found no step and got the default reply.
    pub fn defaulted(&self) -> usize {
        self.shared.count_received(|r| r.defaulted)
    }

    /// How many answers were cut because the client hung up before the mock finished.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects()
    }

    /// `METHOD uri` of every request that was not `POST /v1/messages` (answered or not).
    pub fn other_requests(&self) -> Vec<String> {
        self.shared.other_requests()
    }

    /// `METHOD uri` of every request answered 404 (paths the mock does not know).
    pub fn not_found(&self) -> Vec<String> {
        self.shared.lock().extra.not_found.clone()
    }

    /// Waits until at least `n` main-conversation requests arrived; returns them all.
    /// Panics (listing what did arrive) after `timeout`.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Received> {
        self.wait_for_requests_of(RequestKind::Main, n, timeout)
    }

    /// Waits until at least `n` requests of `kind` arrived; returns them all.
    pub fn wait_for_requests_of(
        &self,
        kind: RequestKind,
        n: usize,
        timeout: Duration,
    ) -> Vec<Received> {
        self.shared.wait_for_received(
            &format!("{n} {kind:?} /v1/messages requests"),
            n,
            timeout,
            |r| r.kind == kind,
        )
    }

    /// Waits until at least `n` answers were cut by the client (an interrupt drops the stream).
    pub fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> usize {
        self.shared.wait_for_disconnects(n, timeout)
    }

    /// A one-line-per-request summary, for failure messages.
    pub fn summary(&self) -> String {
        self.shared.describe()
    }
}

fn describe(inner: &Inner) -> String {
    let seen: Vec<String> = inner
        .received
        .iter()
        .map(|r| {
            let mut text = r.last_user_text();
            if text.len() > 120 {
                let mut cut = 120;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            format!(
                "#{} {:?} step={:?} defaulted={} disconnected={} tool_results={} last_user={text:?}",
                r.seq,
                r.kind,
                r.step,
                r.defaulted,
                r.disconnected,
                r.tool_results().len(),
            )
        })
        .collect();
    format!(
        "received {}: {seen:#?}; disconnects {}; pending steps {}; other requests {:?}",
        inner.received.len(),
        inner.disconnects,
        inner.queue.len(),
        inner.other_requests
    )
}

fn note_other(shared: &Shared, method: &Method, uri: &Uri) {
    shared.note_other(format!("{method} {uri}"));
}

fn model_entry(id: &str) -> Value {
    json!({
        "type": "model",
        "id": id,
        "display_name": "Mock Opus",
        "created_at": "2025-01-01T00:00:00Z",
    })
}

async fn models(State(shared): State<Arc<Shared>>, uri: Uri) -> impl IntoResponse {
    note_other(&shared, &Method::GET, &uri);
    axum::Json(json!({
        "data": [model_entry(MOCK_MODEL)],
        "has_more": false,
        "first_id": MOCK_MODEL,
        "last_id": MOCK_MODEL,
    }))
}

async fn model(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    uri: Uri,
) -> impl IntoResponse {
    note_other(&shared, &Method::GET, &uri);
    axum::Json(model_entry(&id))
}

/// A rough token count: a quarter of the body's size.
async fn count_tokens(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    note_other(&shared, &Method::POST, &uri);
    let tokens = (body.len() as u64 / 4).max(1);
    axum::Json(json!({ "input_tokens": tokens })).into_response()
}

/// `HEAD /`: the CLI checks that the base URL answers before its first request.
async fn root(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> StatusCode {
    note_other(&shared, &method, &uri);
    StatusCode::OK
}

async fn other(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> impl IntoResponse {
    let line = format!("{method} {uri}");
    shared.update(|inner| {
        inner.other_requests.push(line.clone());
        inner.extra.not_found.push(line);
    });
    error_response(StatusCode::NOT_FOUND, "not mocked")
}

/// The Anthropic error type the real API uses for an HTTP status.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn error_response(status: StatusCode, message: &str) -> Response {
    let body = json!({
        "type": "error",
        "error": { "type": error_type(status.as_u16()), "message": message },
    });
    (status, axum::Json(body)).into_response()
}

async fn messages_handler(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(body) = shared.json_body(&uri.to_string(), &body) else {
        return error_response(StatusCode::BAD_REQUEST, "mock messages: body is not JSON");
    };
    let headers = header_map(&headers);
    let kind = classify(&body, &headers);
    let model = body["model"].as_str().unwrap_or(MOCK_MODEL).to_owned();
    let stream = body["stream"].as_bool().unwrap_or(false);
    let (seq, step) = shared.update(|inner| {
        let (step_index, defaulted, step) = match kind {
            RequestKind::Main => inner.take_step(|s| s.matches(&body)),
            side => {
                let step = inner
                    .extra
                    .side_replies
                    .get(&side)
                    .cloned()
                    .unwrap_or_else(|| Step::text(DEFAULT_REPLY));
                (None, false, step)
            }
        };
        let seq = inner.received.len();
        inner.received.push(Received {
            seq,
            kind,
            uri: uri.to_string(),
            body,
            headers,
            step: step_index,
            defaulted,
            disconnected: false,
            at: Instant::now(),
        });
        (seq, step)
    });
    let answer = Answer {
        shared,
        seq,
        model,
        request_id: String::new(),
    };
    answer.respond(step, stream).await
}

/// Everything needed to answer one request.
struct Answer {
    shared: Arc<Shared>,
    seq: usize,
    model: String,
    request_id: String,
}

impl Answer {
    /// Notes this request's disconnect.
    fn on_gone(&self) -> impl FnOnce() + Send + 'static {
        let (shared, seq) = (self.shared.clone(), self.seq);
        move || note_disconnect(&shared, seq)
    }

    async fn respond(mut self, step: Step, stream: bool) -> Response {
        self.request_id = format!("req_mock_{:04}", self.shared.next_id());
        if let Reply::HttpStatus { status, message } = &step.reply {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = error_response(status, message);
            if let Ok(value) = self.request_id.parse() {
                response.headers_mut().insert("request-id", value);
            }
            return response;
        }
        let request_id = self.request_id.clone();
        let mut response = if stream {
            self.stream(step)
        } else {
            self.json(step).await
        };
        if let Ok(value) = request_id.parse() {
            response.headers_mut().insert("request-id", value);
        }
        response
    }

    /// A non-streamed answer: the whole message as one JSON body.
    async fn json(self, step: Step) -> Response {
        let blocks = match &step.reply {
            Reply::Message(blocks) if !step.hang_after => blocks.clone(),
            _ => {
                // Hold the answer back until the client gives up (hyper drops this future).
                let _gone = OnDrop::new(self.on_gone());
                std::future::pending::<()>().await;
                unreachable!("pending never resolves");
            }
        };
        if !step.delay.is_zero() {
            tokio::time::sleep(step.delay).await;
        }
        let content: Vec<Value> = blocks.iter().map(|b| self.final_block(b)).collect();
        let body = json!({
            "id": format!("msg_mock_{:04}", self.shared.next_id()),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason(&blocks),
            "stop_sequence": null,
            "usage": {
                "input_tokens": step.usage.input,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": step.usage.output,
            },
        });
        axum::Json(body).into_response()
    }

    fn final_block(&self, block: &Block) -> Value {
        match block {
            Block::Text(text) => json!({ "type": "text", "text": text }),
            Block::Stamped { count } => {
                let now = now_ns();
                let text: String = (0..*count).map(|i| format!("{i}:{now} ")).collect();
                json!({ "type": "text", "text": text })
            }
            Block::ToolUse { name, input } => json!({
                "type": "tool_use",
                "id": format!("toolu_mock_{:04}", self.shared.next_id()),
                "name": name,
                "input": input,
            }),
        }
    }

    fn stream(self, step: Step) -> Response {
        sse_response(step.delay, self.on_gone(), move |sse| async move {
            self.run(&step, &sse).await
        })
    }

    /// Streams the step's events.
    async fn run(&self, step: &Step, sse: &Sse) -> Result<Finish, Gone> {
        let message_id = format!("msg_mock_{:04}", self.shared.next_id());
        sse.send(json!({
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": step.usage.input,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        }))
        .await?;
        let blocks = match &step.reply {
            Reply::Message(blocks) => blocks,
            Reply::Hang => return Ok(Finish::Hang),
            Reply::HttpStatus { .. } => unreachable!("answered before streaming"),
        };
        sse.send(json!({ "type": "ping" })).await?;
        for (index, block) in blocks.iter().enumerate() {
            if index > 0 {
                sse.pause().await;
            }
            let last = index + 1 == blocks.len();
            self.stream_block(sse, index, block).await?;
            if step.hang_after && last {
                return Ok(Finish::Hang);
            }
            sse.send(json!({ "type": "content_block_stop", "index": index }))
                .await?;
        }
        sse.send(json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason(blocks), "stop_sequence": null },
            "usage": { "output_tokens": step.usage.output },
        }))
        .await?;
        sse.send(json!({ "type": "message_stop" })).await?;
        Ok(Finish::Done)
    }

    async fn stream_block(&self, sse: &Sse, index: usize, block: &Block) -> Result<(), Gone> {
        if let Block::Stamped { count } = block {
            let start = json!({ "type": "text", "text": "" });
            sse.send(
                json!({ "type": "content_block_start", "index": index, "content_block": start }),
            )
            .await?;
            for i in 0..*count {
                if i > 0 {
                    sse.pause().await;
                }
                let delta = json!({ "type": "text_delta", "text": format!("{i}:{} ", now_ns()) });
                sse.send(json!({ "type": "content_block_delta", "index": index, "delta": delta }))
                    .await?;
            }
            return Ok(());
        }
        let (start, deltas) = match block {
            Block::Text(text) => (
                json!({ "type": "text", "text": "" }),
                chunks(text)
                    .into_iter()
                    .map(|t| json!({ "type": "text_delta", "text": t }))
                    .collect::<Vec<_>>(),
            ),
            Block::Stamped { .. } => unreachable!("streamed above"),
            Block::ToolUse { name, input } => {
                let id = format!("toolu_mock_{:04}", self.shared.next_id());
                let json_text = input.to_string();
                let chars: Vec<char> = json_text.chars().collect();
                let deltas = chars
                    .chunks(JSON_CHUNK)
                    .map(|c| {
                        json!({ "type": "input_json_delta", "partial_json": c.iter().collect::<String>() })
                    })
                    .collect();
                (
                    json!({ "type": "tool_use", "id": id, "name": name, "input": {} }),
                    deltas,
                )
            }
        };
        sse.send(json!({ "type": "content_block_start", "index": index, "content_block": start }))
            .await?;
        for (i, delta) in deltas.into_iter().enumerate() {
            if i > 0 {
                sse.pause().await;
            }
            sse.send(json!({ "type": "content_block_delta", "index": index, "delta": delta }))
                .await?;
        }
        Ok(())
    }
}

/// CLOCK_REALTIME in nanoseconds, the clock of [`Step::stamped`]'s deltas.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn stop_reason(blocks: &[Block]) -> &'static str {
    if blocks.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
        "tool_use"
    } else {
        "end_turn"
    }
}
