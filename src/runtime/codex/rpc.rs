//! The JSON-RPC peer for `codex app-server`: framing, request/response matching and the
//! server→client request channel, for stdio (one JSON object per line) and WebSocket (one
//! object per text frame).
//!
//! Codex's dialect differs from JSON-RPC 2.0: it never sends `"jsonrpc"` (we neither send nor
//! require it), every request carries `params` (`{}` when empty), and the server sends its own
//! requests (approvals, user input) with small integer ids counting from 0 that overlap with
//! ours. Messages are therefore routed by shape: `method` present → notification (no `id`) or
//! server request (with `id`); `result`/`error` present → response to one of our requests.
//! This module knows the envelope only; it never interprets a method or its params — that is
//! the job of the codex host in [`super`]. One reader task owns the inbound half, one writer task
//! owns the outbound half (so concurrent callers never interleave bytes), and [`RpcClient`] is a
//! cheap handle onto both.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::process::StderrTail;
pub use super::wire::RequestId;
use super::wire::{ClientInfo, ClientRequest, InitializeCapabilities, InitializeParams};

/// How many notifications and server requests may wait for the consumer of the
/// [`Incoming`] receiver. A turn streams one `item/agentMessage/delta` per model token, so a
/// burst of a few hundred messages is normal; 1024 absorbs that without making a stalled
/// consumer invisible. When the queue is full the reader stops reading (backpressure reaches
/// codex through the pipe or socket) — nothing is dropped. Responses to our own requests are
/// delivered by the same reader, so the consumer must drain [`Incoming`] independently of
/// awaiting its requests.
pub const INCOMING_CHANNEL_CAPACITY: usize = 1024;

/// How many outbound messages may queue for the writer task. Callers wait (asynchronously) when
/// it is full; 256 is far more than the host ever has in flight per backend.
pub const OUTGOING_CHANNEL_CAPACITY: usize = 256;

/// The longest line (stdio) or frame (WebSocket) accepted from codex. The biggest messages are
/// fully hydrated `thread/resume` responses; the host pages history instead, so 16 MiB is a
/// generous bound that still keeps one runaway line from eating memory. An over-long stdio line
/// is skipped; an over-long WebSocket frame ends the connection (tungstenite cannot skip one).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The timeout [`RpcClient::request`] applies.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long, when the connection ends, the reader waits for the child's stderr to reach EOF so
/// that the close reason carries its last words (a panic message, a config error).
const STDERR_SETTLE: Duration = Duration::from_millis(500);

/// Read buffer of the stdio line reader.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// A line buffer grown past this by one huge message is released instead of kept.
const LINE_BUFFER_KEEP_BYTES: usize = 1024 * 1024;

/// A message codex sent on its own initiative.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// `{"method","params"}`; `params` is `null` when codex omitted it. The top-level
    /// `emittedAtMs` codex adds to notifications is not kept.
    Notification { method: String, params: Value },
    /// `{"id","method","params"}` — an approval or a question; answer it with
    /// [`RpcClient::respond`] or [`RpcClient::respond_error`] using exactly this `id`.
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Returned by [`RpcClient::request_timeout`] when no response arrived in time. The
    /// connection stays usable; a late response is logged and dropped.
    #[error("codex request `{method}` got no response within {after:?}")]
    Timeout { method: String, after: Duration },
    /// The connection ended (EOF, read or write error, child exit) before or while the call was
    /// in flight. `reason` says why and carries codex's last stderr lines when known. Callers
    /// treat the backend as dead.
    #[error("codex connection closed: {reason}")]
    Closed { reason: String },
    /// Codex answered the request with a JSON-RPC error (mostly `-32600`, see the wire notes).
    #[error("codex rejected `{method}` with error {code}: {message}")]
    Server {
        method: String,
        code: i64,
        message: String,
    },
    /// [`RpcClient::connect_ws`] could not open a TCP connection to `url`.
    #[error("cannot reach codex websocket at {url}: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// [`RpcClient::connect_ws`] reached the server but the upgrade failed — e.g. `HTTP 401
    /// missing websocket bearer token` when the capability token is absent or wrong.
    #[error("websocket handshake with codex at {url} failed: {message}")]
    Handshake { url: String, message: String },
    /// Something we could not frame or that codex framed wrongly (an invalid URL, a response
    /// whose `error` is not `{code,message}`).
    #[error("codex protocol error: {0}")]
    Protocol(String),
}

/// What the reader hands to the caller waiting for a response.
enum Reply {
    Result(Value),
    Error { code: i64, message: String },
    Malformed(String),
}

/// What callers hand to the writer task.
enum Outgoing {
    Line(String),
    /// Flush, then close the write half (stdin EOF / WebSocket close frame).
    Close,
}

#[derive(Default)]
struct State {
    /// Our in-flight requests by id. Our ids are integers we allocate, so a response with any
    /// other id cannot be ours.
    pending: HashMap<i64, oneshot::Sender<Reply>>,
    /// Set once, when the connection ends; no request is registered after that.
    closed: Option<String>,
}

struct Shared {
    /// Where this connection goes, for logs (`stdio`, `codex[1234]`, a ws:// URL).
    peer: String,
    state: Mutex<State>,
    next_id: AtomicI64,
    closed_tx: watch::Sender<Option<String>>,
    stderr_tail: OnceLock<StderrTail>,
}

impl Shared {
    fn new(peer: String, stderr_tail: Option<StderrTail>) -> Arc<Self> {
        let tail = OnceLock::new();
        if let Some(stderr_tail) = stderr_tail {
            let _ = tail.set(stderr_tail);
        }
        Arc::new(Shared {
            peer,
            state: Mutex::new(State::default()),
            next_id: AtomicI64::new(1),
            closed_tx: watch::Sender::new(None),
            stderr_tail: tail,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close_reason(&self) -> String {
        self.lock()
            .closed
            .clone()
            .unwrap_or_else(|| "the connection is shutting down".to_owned())
    }

    /// Marks the connection closed (first reason wins) and fails every pending request:
    /// dropping their senders wakes the callers, which then read `closed`.
    fn close(&self, reason: String) {
        let pending = {
            let mut state = self.lock();
            if state.closed.is_some() {
                return;
            }
            state.closed = Some(reason.clone());
            std::mem::take(&mut state.pending)
        };
        tracing::debug!(peer = %self.peer, n_pending = pending.len(), %reason, "codex connection closed");
        drop(pending);
        self.closed_tx.send_replace(Some(reason));
    }

    /// Appends the child's last stderr lines to `reason`, after giving the stderr drain a moment
    /// to catch up with a child that is exiting.
    async fn with_stderr(&self, reason: String) -> String {
        let Some(tail) = self.stderr_tail.get() else {
            return reason;
        };
        tail.wait_finished(STDERR_SETTLE).await;
        let rendered = tail.render();
        if rendered.is_empty() {
            reason
        } else {
            format!("{reason}; codex stderr (last lines):\n{rendered}")
        }
    }
}

/// Removes a request's pending entry when its caller stops waiting (timeout or cancellation),
/// so abandoned requests do not accumulate.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: i64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.id);
    }
}

/// A cheap, clonable handle onto one JSON-RPC connection to codex. The connection's tasks run
/// until it ends; when every handle is dropped the write half is closed, which makes a stdio
/// `app-server` exit.
#[derive(Clone)]
pub struct RpcClient {
    shared: Arc<Shared>,
    outgoing: mpsc::Sender<Outgoing>,
}

impl fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RpcClient")
            .field("peer", &self.shared.peer)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl RpcClient {
    /// Speaks JSON lines over a child's stdin/stdout (or any byte pipe, e.g.
    /// `tokio::io::duplex` in tests). `stderr_tail`, when given, is quoted in close reasons.
    /// Must be called inside a tokio runtime: it spawns the reader and writer tasks.
    pub fn from_stdio<W, R>(
        stdin: W,
        stdout: R,
        stderr_tail: Option<StderrTail>,
    ) -> (RpcClient, mpsc::Receiver<Incoming>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
        R: AsyncRead + Unpin + Send + 'static,
    {
        Self::from_stdio_labeled(stdin, stdout, stderr_tail, "stdio".to_owned())
    }

    /// [`RpcClient::from_stdio`] with a peer label for logs.
    pub(crate) fn from_stdio_labeled<W, R>(
        stdin: W,
        stdout: R,
        stderr_tail: Option<StderrTail>,
        peer: String,
    ) -> (RpcClient, mpsc::Receiver<Incoming>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
        R: AsyncRead + Unpin + Send + 'static,
    {
        let shared = Shared::new(peer, stderr_tail);
        let (outgoing_tx, outgoing_rx) = mpsc::channel(OUTGOING_CHANNEL_CAPACITY);
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_CHANNEL_CAPACITY);
        tokio::spawn(write_lines(stdin, outgoing_rx, shared.clone()));
        tokio::spawn(read_lines(stdout, incoming_tx, shared.clone()));
        let client = RpcClient {
            shared,
            outgoing: outgoing_tx,
        };
        (client, incoming_rx)
    }

    /// Opens a WebSocket connection to a `codex app-server --listen ws://…` (plain `ws://` only;
    /// no TLS is compiled in). `bearer_token` is sent as `Authorization: Bearer <token>` on the
    /// upgrade, which is what `--ws-auth capability-token` requires.
    pub async fn connect_ws(
        url: &str,
        bearer_token: Option<&str>,
    ) -> Result<(RpcClient, mpsc::Receiver<Incoming>), RpcError> {
        let mut request = url
            .into_client_request()
            .map_err(|err| RpcError::Protocol(format!("invalid websocket url {url:?}: {err}")))?;
        if let Some(token) = bearer_token {
            let mut value = tungstenite::http::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| {
                    RpcError::Protocol(
                        "the websocket bearer token is not a valid header value".to_owned(),
                    )
                })?;
            value.set_sensitive(true);
            request
                .headers_mut()
                .insert(tungstenite::http::header::AUTHORIZATION, value);
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE_BYTES))
            .max_frame_size(Some(MAX_MESSAGE_BYTES));
        let (stream, _response) =
            tokio_tungstenite::connect_async_with_config(request, Some(config), true)
                .await
                .map_err(|err| handshake_error(url, err))?;
        let (sink, stream) = stream.split();

        let shared = Shared::new(url.to_owned(), None);
        let (outgoing_tx, outgoing_rx) = mpsc::channel(OUTGOING_CHANNEL_CAPACITY);
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_CHANNEL_CAPACITY);
        tokio::spawn(write_frames(sink, outgoing_rx, shared.clone()));
        tokio::spawn(read_frames(stream, incoming_tx, shared.clone()));
        let client = RpcClient {
            shared,
            outgoing: outgoing_tx,
        };
        Ok((client, incoming_rx))
    }

    /// Quotes `tail` in close reasons from now on (used when the client was created before the
    /// process handle, as for WebSocket backends). A tail set earlier is kept.
    pub(crate) fn attach_stderr_tail(&self, tail: StderrTail) {
        let _ = self.shared.stderr_tail.set(tail);
    }

    /// Sends a request and waits for its response, for at most [`DEFAULT_REQUEST_TIMEOUT`].
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request_timeout(method, params, DEFAULT_REQUEST_TIMEOUT)
            .await
    }

    /// Sends a typed request (see [`ClientRequest`]) and reads its answer permissively: an answer
    /// that does not parse reads as the response's `Default`.
    pub async fn call<R: ClientRequest>(&self, params: &R) -> Result<R::Response, RpcError> {
        let params = serde_json::to_value(params).map_err(|err| {
            RpcError::Protocol(format!("cannot encode `{}` params: {err}", R::METHOD))
        })?;
        let result = self.request(R::METHOD, params).await?;
        Ok(super::wire::response::<R>(result))
    }

    /// Sends `{"id","method","params"}` (`null` params are sent as `{}`, which codex requires)
    /// and waits up to `timeout` for the matching response.
    pub async fn request_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, reply_rx) = oneshot::channel();
        {
            let mut state = self.shared.lock();
            if let Some(reason) = &state.closed {
                return Err(RpcError::Closed {
                    reason: reason.clone(),
                });
            }
            state.pending.insert(id, reply_tx);
        }
        let _guard = PendingGuard {
            shared: &self.shared,
            id,
        };
        let params = if params.is_null() { json!({}) } else { params };
        let line = encode(&json!({ "id": id, "method": method, "params": params }))?;

        let exchange = async {
            self.send(Outgoing::Line(line)).await?;
            reply_rx.await.map_err(|_| RpcError::Closed {
                reason: self.shared.close_reason(),
            })
        };
        let reply = match tokio::time::timeout(timeout, exchange).await {
            Ok(reply) => reply?,
            Err(_) => {
                tracing::warn!(peer = %self.shared.peer, id, method, ?timeout, "codex request timed out");
                return Err(RpcError::Timeout {
                    method: method.to_owned(),
                    after: timeout,
                });
            }
        };
        match reply {
            Reply::Result(result) => Ok(result),
            Reply::Error { code, message } => Err(RpcError::Server {
                method: method.to_owned(),
                code,
                message,
            }),
            Reply::Malformed(detail) => Err(RpcError::Protocol(format!(
                "response to `{method}` (id {id}): {detail}"
            ))),
        }
    }

    /// Sends a notification: `{"method"}` or `{"method","params"}`.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), RpcError> {
        let message = match params {
            Some(params) => json!({ "method": method, "params": params }),
            None => json!({ "method": method }),
        };
        self.send_checked(encode(&message)?).await
    }

    /// Answers a server request with `{"id","result"}`.
    pub async fn respond(&self, id: RequestId, result: impl Serialize) -> Result<(), RpcError> {
        let result = serde_json::to_value(result)
            .map_err(|err| RpcError::Protocol(format!("cannot encode a response: {err}")))?;
        self.send_checked(encode(&json!({ "id": id, "result": result }))?)
            .await
    }

    /// Answers a server request with `{"id","error":{"code","message"}}`.
    pub async fn respond_error(
        &self,
        id: RequestId,
        code: i64,
        message: &str,
    ) -> Result<(), RpcError> {
        let error = json!({ "id": id, "error": { "code": code, "message": message } });
        self.send_checked(encode(&error)?).await
    }

    /// The handshake: `initialize` with `clientInfo` and `capabilities.experimentalApi = true`,
    /// then the (optional, but polite) `initialized` notification. Returns `initialize`'s result
    /// (`userAgent`, `codexHome`, `platformFamily`, `platformOs`). The first client to initialize
    /// a server process fixes its originator (user agent prefix) for good.
    pub async fn initialize(&self, client_name: &str, version: &str) -> Result<Value, RpcError> {
        let params = InitializeParams {
            client_info: ClientInfo {
                name: client_name.to_owned(),
                title: None,
                version: version.to_owned(),
            },
            capabilities: Some(InitializeCapabilities {
                experimental_api: true,
                ..InitializeCapabilities::default()
            }),
        };
        let params = serde_json::to_value(&params)
            .map_err(|err| RpcError::Protocol(format!("cannot encode `initialize`: {err}")))?;
        let result = self.request(InitializeParams::METHOD, params).await?;
        self.notify("initialized", None).await?;
        Ok(result)
    }

    /// Flushes what is queued, then closes the write half: stdin EOF for a stdio child (which
    /// makes `app-server` exit), a close frame for a WebSocket. The read half keeps delivering
    /// until the peer closes its side.
    pub async fn close(&self) {
        let _ = self.outgoing.send(Outgoing::Close).await;
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }

    /// Resolves with the reason once the connection has ended (EOF, read or write error, child
    /// exit), including codex's last stderr lines when they are known.
    pub async fn closed(&self) -> String {
        let mut closed_rx = self.shared.closed_tx.subscribe();
        match closed_rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            // Unreachable while `self` holds the sender; answer sensibly anyway.
            Err(_) => self.shared.close_reason(),
        }
    }

    async fn send(&self, message: Outgoing) -> Result<(), RpcError> {
        self.outgoing
            .send(message)
            .await
            .map_err(|_| RpcError::Closed {
                reason: self.shared.close_reason(),
            })
    }

    /// Sends a line unless the connection is already known to be closed.
    async fn send_checked(&self, line: String) -> Result<(), RpcError> {
        if let Some(reason) = self.shared.lock().closed.clone() {
            return Err(RpcError::Closed { reason });
        }
        self.send(Outgoing::Line(line)).await
    }
}

fn encode(message: &Value) -> Result<String, RpcError> {
    serde_json::to_string(message)
        .map_err(|err| RpcError::Protocol(format!("cannot encode message: {err}")))
}

fn handshake_error(url: &str, err: tungstenite::Error) -> RpcError {
    match err {
        tungstenite::Error::Io(source) => RpcError::Io {
            url: url.to_owned(),
            source,
        },
        tungstenite::Error::Http(response) => {
            let body = response
                .body()
                .as_deref()
                .map(|body| String::from_utf8_lossy(body).trim().to_owned())
                .unwrap_or_default();
            RpcError::Handshake {
                url: url.to_owned(),
                message: format!("HTTP {}: {body}", response.status()),
            }
        }
        other => RpcError::Handshake {
            url: url.to_owned(),
            message: other.to_string(),
        },
    }
}

/// Routes one inbound message: responses complete pending requests, everything with a `method`
/// goes to the consumer (waiting for room — backpressure). Malformed input is logged and
/// skipped; it never ends the connection.
async fn dispatch(bytes: &[u8], shared: &Shared, incoming_tx: &mpsc::Sender<Incoming>) {
    let text = String::from_utf8_lossy(bytes);
    if text.trim().is_empty() {
        return;
    }
    let mut object = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => object,
        Ok(_) => {
            tracing::warn!(peer = %shared.peer, message = %preview(&text), "skipping codex message that is not a JSON object");
            return;
        }
        Err(err) => {
            tracing::warn!(peer = %shared.peer, %err, message = %preview(&text), "skipping malformed codex message");
            return;
        }
    };
    let incoming = match object.remove("method") {
        Some(Value::String(method)) => {
            let params = object.remove("params").unwrap_or(Value::Null);
            match object.remove("id") {
                None => Incoming::Notification { method, params },
                Some(id) => match serde_json::from_value::<RequestId>(id) {
                    Ok(id) => Incoming::Request { id, method, params },
                    Err(_) => {
                        tracing::warn!(peer = %shared.peer, %method, message = %preview(&text), "skipping codex request with an invalid id");
                        return;
                    }
                },
            }
        }
        Some(_) => {
            tracing::warn!(peer = %shared.peer, message = %preview(&text), "skipping codex message whose method is not a string");
            return;
        }
        None => {
            complete(object, shared, &text);
            return;
        }
    };
    if incoming_tx.send(incoming).await.is_err() {
        tracing::debug!(peer = %shared.peer, message = %preview(&text), "incoming receiver dropped; discarding codex message");
    }
}

/// Delivers a response to the request waiting for it.
fn complete(mut object: Map<String, Value>, shared: &Shared, text: &str) {
    let Some(id) = object.get("id").and_then(Value::as_i64) else {
        tracing::warn!(peer = %shared.peer, message = %preview(text), "skipping codex message with neither a method nor one of our ids");
        return;
    };
    let reply = if let Some(error) = object.remove("error") {
        let code = error.get("code").and_then(Value::as_i64);
        let message = error.get("message").and_then(Value::as_str);
        match (code, message) {
            (Some(code), Some(message)) => Reply::Error {
                code,
                message: message.to_owned(),
            },
            _ => Reply::Malformed(format!("error object without code/message: {error}")),
        }
    } else if let Some(result) = object.remove("result") {
        Reply::Result(result)
    } else {
        tracing::warn!(peer = %shared.peer, id, message = %preview(text), "skipping codex message with neither a method, a result nor an error");
        return;
    };
    let waiter = shared.lock().pending.remove(&id);
    match waiter {
        Some(waiter) => {
            if waiter.send(reply).is_err() {
                tracing::debug!(peer = %shared.peer, id, "codex response arrived after its caller gave up");
            }
        }
        None => {
            tracing::debug!(peer = %shared.peer, id, "codex response for no pending request (timed out or unknown)")
        }
    }
}

/// The first 300 characters of a message, for logs.
fn preview(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(MAX_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// One line from a [`LineReader`].
pub(crate) enum LineEvent<'a> {
    /// A line without its `\n` (and without a trailing `\r`).
    Line(&'a [u8]),
    /// A line longer than the reader's limit; its bytes were discarded.
    TooLong { n_bytes: usize },
}

/// Splits a byte stream into `\n`-terminated lines without ever buffering more than `max_bytes`
/// of one line: tokio's `read_until` would grow without bound on a stream with no newline.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    max_bytes: usize,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max_bytes: usize) -> Self {
        LineReader {
            reader: BufReader::with_capacity(READ_BUFFER_BYTES, reader),
            max_bytes,
            line: Vec::new(),
        }
    }

    /// The next line, or `None` at EOF. A final line without a newline is still returned.
    pub(crate) async fn next_line(&mut self) -> std::io::Result<Option<LineEvent<'_>>> {
        let LineReader {
            reader,
            max_bytes,
            line,
        } = self;
        if line.capacity() > LINE_BUFFER_KEEP_BYTES {
            *line = Vec::new();
        }
        line.clear();
        let mut n_bytes = 0usize;
        let mut too_long = false;
        loop {
            let (consumed, complete) = {
                let available = reader.fill_buf().await?;
                if available.is_empty() {
                    if n_bytes == 0 {
                        return Ok(None);
                    }
                    break;
                }
                let (chunk, consumed, complete) =
                    match available.iter().position(|byte| *byte == b'\n') {
                        Some(end) => (&available[..end], end + 1, true),
                        None => (available, available.len(), false),
                    };
                n_bytes += chunk.len();
                if !too_long {
                    if line.len() + chunk.len() > *max_bytes {
                        too_long = true;
                        line.clear();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                // Count the newline so that an empty line is not mistaken for EOF.
                n_bytes += usize::from(complete);
                (consumed, complete)
            };
            reader.consume(consumed);
            if complete {
                break;
            }
        }
        if too_long {
            return Ok(Some(LineEvent::TooLong { n_bytes }));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(LineEvent::Line(line)))
    }
}

async fn read_lines<R>(stdout: R, incoming_tx: mpsc::Sender<Incoming>, shared: Arc<Shared>)
where
    R: AsyncRead + Unpin,
{
    let mut lines = LineReader::new(stdout, MAX_MESSAGE_BYTES);
    let reason = loop {
        match lines.next_line().await {
            Ok(Some(LineEvent::Line(line))) => dispatch(line, &shared, &incoming_tx).await,
            Ok(Some(LineEvent::TooLong { n_bytes })) => {
                tracing::warn!(peer = %shared.peer, n_bytes, limit = MAX_MESSAGE_BYTES, "skipping over-long codex line");
            }
            Ok(None) => break "codex closed its output (EOF)".to_owned(),
            Err(err) => break format!("reading codex output failed: {err}"),
        }
    };
    let reason = shared.with_stderr(reason).await;
    shared.close(reason);
}

async fn write_lines<W>(
    mut stdin: W,
    mut outgoing_rx: mpsc::Receiver<Outgoing>,
    shared: Arc<Shared>,
) where
    W: AsyncWrite + Unpin,
{
    while let Some(message) = outgoing_rx.recv().await {
        match message {
            Outgoing::Line(mut line) => {
                line.push('\n');
                let written = async {
                    stdin.write_all(line.as_bytes()).await?;
                    stdin.flush().await
                };
                if let Err(err) = written.await {
                    let reason = shared
                        .with_stderr(format!("writing to codex failed: {err}"))
                        .await;
                    shared.close(reason);
                    return;
                }
            }
            Outgoing::Close => {
                if let Err(err) = stdin.shutdown().await {
                    tracing::debug!(peer = %shared.peer, %err, "closing codex stdin failed");
                }
                return;
            }
        }
    }
    // Every handle is gone: dropping `stdin` here closes it, and a stdio app-server exits.
}

async fn read_frames<S>(mut stream: S, incoming_tx: mpsc::Sender<Incoming>, shared: Arc<Shared>)
where
    S: futures_util::Stream<Item = Result<tungstenite::Message, tungstenite::Error>> + Unpin,
{
    let reason = loop {
        match stream.next().await {
            Some(Ok(tungstenite::Message::Text(text))) => {
                dispatch(text.as_bytes(), &shared, &incoming_tx).await;
            }
            Some(Ok(tungstenite::Message::Binary(bytes))) => {
                tracing::debug!(peer = %shared.peer, n_bytes = bytes.len(), "codex sent a binary frame; parsing it as JSON");
                dispatch(&bytes, &shared, &incoming_tx).await;
            }
            Some(Ok(tungstenite::Message::Close(frame))) => {
                break match frame {
                    Some(frame) => format!(
                        "codex closed the websocket ({}: {})",
                        frame.code, frame.reason
                    ),
                    None => "codex closed the websocket".to_owned(),
                };
            }
            Some(Ok(_)) => {} // ping/pong: tungstenite answers pings itself
            Some(Err(err)) => break format!("reading the codex websocket failed: {err}"),
            None => break "the codex websocket ended".to_owned(),
        }
    };
    let reason = shared.with_stderr(reason).await;
    shared.close(reason);
}

async fn write_frames<S>(
    mut sink: S,
    mut outgoing_rx: mpsc::Receiver<Outgoing>,
    shared: Arc<Shared>,
) where
    S: futures_util::Sink<tungstenite::Message, Error = tungstenite::Error> + Unpin,
{
    while let Some(message) = outgoing_rx.recv().await {
        match message {
            Outgoing::Line(line) => {
                if let Err(err) = sink.send(tungstenite::Message::text(line)).await {
                    let reason = shared
                        .with_stderr(format!("writing to the codex websocket failed: {err}"))
                        .await;
                    shared.close(reason);
                    return;
                }
            }
            Outgoing::Close => break,
        }
    }
    // Explicit close or every handle gone: say goodbye properly.
    if let Err(err) = sink.close().await {
        tracing::debug!(peer = %shared.peer, %err, "closing the codex websocket failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    const WAIT: Duration = Duration::from_secs(5);

    /// The fake codex end of a duplex pair: reads what we send, writes what codex would.
    struct FakeCodex {
        from_client: Lines<BufReader<DuplexStream>>,
        to_client: DuplexStream,
    }

    impl FakeCodex {
        async fn recv(&mut self) -> Value {
            let line = tokio::time::timeout(WAIT, self.from_client.next_line())
                .await
                .expect("timed out waiting for the client")
                .unwrap()
                .expect("client closed");
            serde_json::from_str(&line).unwrap()
        }

        async fn recv_raw(&mut self) -> String {
            tokio::time::timeout(WAIT, self.from_client.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap()
        }

        async fn send(&mut self, line: &str) {
            self.to_client.write_all(line.as_bytes()).await.unwrap();
            self.to_client.write_all(b"\n").await.unwrap();
        }
    }

    fn pair() -> (RpcClient, mpsc::Receiver<Incoming>, FakeCodex) {
        pair_with_tail(None)
    }

    fn pair_with_tail(
        tail: Option<StderrTail>,
    ) -> (RpcClient, mpsc::Receiver<Incoming>, FakeCodex) {
        let (client_stdin, codex_stdin) = tokio::io::duplex(64 * 1024);
        let (codex_stdout, client_stdout) = tokio::io::duplex(64 * 1024);
        let (client, incoming) = RpcClient::from_stdio(client_stdin, client_stdout, tail);
        let fake = FakeCodex {
            from_client: BufReader::new(codex_stdin).lines(),
            to_client: codex_stdout,
        };
        (client, incoming, fake)
    }

    async fn next_incoming(incoming: &mut mpsc::Receiver<Incoming>) -> Option<Incoming> {
        tokio::time::timeout(WAIT, incoming.recv())
            .await
            .expect("timed out waiting for an incoming message")
    }

    #[tokio::test]
    async fn responses_are_matched_by_id_even_out_of_order() {
        let (client, _incoming, mut codex) = pair();
        let first = tokio::spawn({
            let client = client.clone();
            async move { client.request("model/list", json!({})).await }
        });
        let first_request = codex.recv().await;
        let second = tokio::spawn({
            let client = client.clone();
            async move { client.request("account/read", json!({"x": 1})).await }
        });
        let second_request = codex.recv().await;
        assert_eq!(first_request["method"], "model/list");
        assert_eq!(second_request["method"], "account/read");
        assert_eq!(second_request["params"], json!({"x": 1}));
        assert_ne!(first_request["id"], second_request["id"]);

        codex
            .send(&json!({"id": second_request["id"], "result": {"which": "second"}}).to_string())
            .await;
        codex
            .send(&json!({"id": first_request["id"], "result": {"which": "first"}}).to_string())
            .await;
        assert_eq!(first.await.unwrap().unwrap(), json!({"which": "first"}));
        assert_eq!(second.await.unwrap().unwrap(), json!({"which": "second"}));
    }

    #[tokio::test]
    async fn server_request_is_surfaced_and_answered_with_its_own_id() {
        let (client, mut incoming, mut codex) = pair();
        // Codex's request ids count from 0 and overlap with ours: id 1 here is codex's.
        codex
            .send(r#"{"method":"item/commandExecution/requestApproval","id":1,"params":{"command":"touch a"}}"#)
            .await;
        let Some(Incoming::Request { id, method, params }) = next_incoming(&mut incoming).await
        else {
            panic!("expected a server request");
        };
        assert_eq!(id, RequestId::Int(1));
        assert_eq!(method, "item/commandExecution/requestApproval");
        assert_eq!(params["command"], "touch a");

        // A request of ours with the same numeric id is still matched correctly.
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.request("thread/start", json!({})).await }
        });
        let ours = codex.recv().await;
        assert_eq!(ours["id"], 1);

        client
            .respond(id, json!({"decision": "accept"}))
            .await
            .unwrap();
        let answer = codex.recv().await;
        assert_eq!(answer, json!({"id": 1, "result": {"decision": "accept"}}));

        client
            .respond_error(RequestId::Str("q-7".into()), -32601, "unsupported")
            .await
            .unwrap();
        let answer = codex.recv().await;
        assert_eq!(
            answer,
            json!({"id": "q-7", "error": {"code": -32601, "message": "unsupported"}})
        );

        codex.send(r#"{"id":1,"result":{"thread":{}}}"#).await;
        assert_eq!(pending.await.unwrap().unwrap(), json!({"thread": {}}));
    }

    #[tokio::test]
    async fn notifications_are_forwarded_in_order() {
        let (_client, mut incoming, mut codex) = pair();
        for n in 0..50 {
            codex
                .send(&format!(
                    r#"{{"method":"item/agentMessage/delta","params":{{"n":{n}}},"emittedAtMs":1}}"#
                ))
                .await;
        }
        codex.send(r#"{"method":"initialized"}"#).await;
        for n in 0..50 {
            let Some(Incoming::Notification { method, params }) =
                next_incoming(&mut incoming).await
            else {
                panic!("expected a notification");
            };
            assert_eq!(method, "item/agentMessage/delta");
            assert_eq!(params, json!({"n": n}));
        }
        assert_eq!(
            next_incoming(&mut incoming).await,
            Some(Incoming::Notification {
                method: "initialized".into(),
                params: Value::Null
            })
        );
    }

    #[tokio::test]
    async fn error_response_becomes_server_error() {
        let (client, _incoming, mut codex) = pair();
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.request("foo/bar", json!({})).await }
        });
        let request = codex.recv().await;
        codex
            .send(&json!({"error": {"code": -32600, "message": "Invalid request: unknown variant `foo/bar`"}, "id": request["id"]}).to_string())
            .await;
        match pending.await.unwrap() {
            Err(RpcError::Server {
                method,
                code,
                message,
            }) => {
                assert_eq!(method, "foo/bar");
                assert_eq!(code, -32600);
                assert!(message.contains("unknown variant"), "{message}");
            }
            other => panic!("expected a server error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn request_times_out_and_late_response_is_ignored() {
        let (client, mut incoming, mut codex) = pair();
        let started = tokio::time::Instant::now();
        let result = client
            .request_timeout("model/list", json!({}), Duration::from_millis(100))
            .await;
        assert!(
            matches!(&result, Err(RpcError::Timeout { method, after }) if method == "model/list" && *after == Duration::from_millis(100)),
            "{result:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(100));
        let request = codex.recv().await;
        assert!(client.shared.lock().pending.is_empty());

        // The late answer is dropped and the connection stays usable.
        codex
            .send(&json!({"id": request["id"], "result": {}}).to_string())
            .await;
        codex.send(r#"{"method":"ping"}"#).await;
        assert!(matches!(
            next_incoming(&mut incoming).await,
            Some(Incoming::Notification { method, .. }) if method == "ping"
        ));
        assert!(!client.is_closed());
    }

    #[tokio::test]
    async fn closed_connection_fails_pending_requests_with_the_stderr_tail() {
        let tail = StderrTail::new(8);
        tail.push_line("thread 'main' panicked at app-server/src/lib.rs:1:1");
        tail.finish();
        let (client, mut incoming, mut codex) = pair_with_tail(Some(tail));
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.request("thread/start", json!({})).await }
        });
        codex.recv().await;
        drop(codex); // EOF on both pipes

        let result = tokio::time::timeout(WAIT, pending).await.unwrap().unwrap();
        let Err(RpcError::Closed { reason }) = result else {
            panic!("expected Closed, got {result:?}");
        };
        assert!(reason.contains("EOF"), "{reason}");
        assert!(reason.contains("panicked"), "{reason}");
        assert!(client.is_closed());
        assert_eq!(
            tokio::time::timeout(WAIT, client.closed()).await.unwrap(),
            reason
        );
        assert_eq!(next_incoming(&mut incoming).await, None);
        // New requests fail at once.
        assert!(matches!(
            client.request("model/list", json!({})).await,
            Err(RpcError::Closed { .. })
        ));
        assert!(matches!(
            client.notify("initialized", None).await,
            Err(RpcError::Closed { .. })
        ));
    }

    #[tokio::test]
    async fn malformed_lines_are_skipped() {
        let (client, mut incoming, mut codex) = pair();
        codex.send("this is not json").await;
        codex.send("[1,2,3]").await;
        codex.send("").await;
        codex
            .send(r#"{"id":null,"method":"x/y","params":{}}"#)
            .await;
        codex.send(r#"{"id":999,"result":{}}"#).await;
        codex.send(r#"{"something":"else"}"#).await;
        codex
            .send(r#"{"method":"ok/after","params":{"a":1}}"#)
            .await;
        assert_eq!(
            next_incoming(&mut incoming).await,
            Some(Incoming::Notification {
                method: "ok/after".into(),
                params: json!({"a": 1})
            })
        );
        assert!(!client.is_closed());
    }

    #[tokio::test]
    async fn over_long_line_is_skipped() {
        let (client_stdin, _codex_stdin) = tokio::io::duplex(1024);
        let (mut codex_stdout, client_stdout) = tokio::io::duplex(1024 * 1024);
        let (client, mut incoming) = RpcClient::from_stdio(client_stdin, client_stdout, None);
        let huge = format!(
            "{{\"method\":\"big\",\"params\":\"{}\"}}\n",
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        let writer = tokio::spawn(async move {
            codex_stdout.write_all(huge.as_bytes()).await.unwrap();
            codex_stdout
                .write_all(b"{\"method\":\"small\"}\n")
                .await
                .unwrap();
            codex_stdout
        });
        assert!(matches!(
            next_incoming(&mut incoming).await,
            Some(Incoming::Notification { method, .. }) if method == "small"
        ));
        let _codex_stdout = writer.await.unwrap();
        assert!(!client.is_closed());
    }

    #[tokio::test]
    async fn what_we_send_has_no_jsonrpc_field_and_always_params() {
        let (client, _incoming, mut codex) = pair();
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.initialize("cohost", "0.1.0").await }
        });
        let raw = codex.recv_raw().await;
        assert!(!raw.contains("jsonrpc"), "{raw}");
        let request: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(request["method"], "initialize");
        assert_eq!(request["params"]["clientInfo"]["name"], "cohost");
        assert_eq!(request["params"]["clientInfo"]["version"], "0.1.0");
        assert_eq!(request["params"]["capabilities"]["experimentalApi"], true);
        codex
            .send(
                &json!({"id": request["id"], "result": {"userAgent": "cohost/0.169.0"}})
                    .to_string(),
            )
            .await;
        let initialized = codex.recv_raw().await;
        assert_eq!(initialized, r#"{"method":"initialized"}"#);
        assert_eq!(
            pending.await.unwrap().unwrap()["userAgent"],
            "cohost/0.169.0"
        );

        // Null params go out as {}.
        let pending = tokio::spawn({
            let client = client.clone();
            async move { client.request("model/list", Value::Null).await }
        });
        let raw = codex.recv_raw().await;
        assert!(!raw.contains("jsonrpc"), "{raw}");
        let request: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(request["params"], json!({}));
        codex
            .send(&json!({"id": request["id"], "result": {"data": []}}).to_string())
            .await;
        pending.await.unwrap().unwrap();

        client
            .notify("x/y", Some(json!({"k": true})))
            .await
            .unwrap();
        let raw = codex.recv_raw().await;
        assert!(!raw.contains("jsonrpc"), "{raw}");
        assert_eq!(
            serde_json::from_str::<Value>(&raw).unwrap(),
            json!({"method": "x/y", "params": {"k": true}})
        );
    }

    #[tokio::test]
    async fn concurrent_writers_never_interleave() {
        let (client, _incoming, mut codex) = pair();
        let mut tasks = Vec::new();
        for n in 0..64 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let blob = "y".repeat(4096 + n);
                client
                    .notify("blob", Some(json!({ "n": n, "blob": blob })))
                    .await
                    .unwrap();
            }));
        }
        let mut seen = Vec::new();
        for _ in 0..64 {
            let message = codex.recv().await;
            let n = message["params"]["n"].as_u64().unwrap() as usize;
            assert_eq!(message["params"]["blob"].as_str().unwrap().len(), 4096 + n);
            seen.push(n);
        }
        for task in tasks {
            task.await.unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..64).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn slow_consumer_blocks_the_reader_without_dropping() {
        let (client, mut incoming, mut codex) = pair();
        let total = INCOMING_CHANNEL_CAPACITY + 200;
        let writer = tokio::spawn(async move {
            for n in 0..total {
                codex
                    .send(&format!(r#"{{"method":"n","params":{n}}}"#))
                    .await;
            }
            codex
        });
        // Let the reader fill the channel, then drain it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        for n in 0..total {
            let Some(Incoming::Notification { params, .. }) = next_incoming(&mut incoming).await
            else {
                panic!("expected notification {n}");
            };
            assert_eq!(params, json!(n));
        }
        let _codex = writer.await.unwrap();
        assert!(!client.is_closed());
    }

    #[tokio::test]
    async fn dropping_every_handle_closes_stdin() {
        let (client, _incoming, mut codex) = pair();
        drop(client);
        let line = tokio::time::timeout(WAIT, codex.from_client.next_line())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line, None);
    }

    #[tokio::test]
    async fn close_flushes_then_closes_stdin() {
        let (client, _incoming, mut codex) = pair();
        client.notify("last", None).await.unwrap();
        client.close().await;
        assert_eq!(codex.recv().await, json!({"method": "last"}));
        let line = tokio::time::timeout(WAIT, codex.from_client.next_line())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line, None);
    }

    #[test]
    fn request_id_serializes_untagged_and_displays() {
        assert_eq!(serde_json::to_string(&RequestId::Int(0)).unwrap(), "0");
        assert_eq!(
            serde_json::to_string(&RequestId::Str("a".into())).unwrap(),
            "\"a\""
        );
        assert_eq!(
            serde_json::from_str::<RequestId>("-3").unwrap(),
            RequestId::Int(-3)
        );
        assert!(serde_json::from_str::<RequestId>("1.5").is_err());
        assert!(serde_json::from_str::<RequestId>("null").is_err());
        assert_eq!(RequestId::Int(7).to_string(), "7");
        assert_eq!(RequestId::Str("init-1".into()).to_string(), "\"init-1\"");
    }

    #[tokio::test]
    async fn line_reader_handles_crlf_empty_and_unterminated_lines() {
        let data: &[u8] = b"a\r\n\nlast";
        let mut reader = LineReader::new(data, 16);
        let mut got = Vec::new();
        while let Some(event) = reader.next_line().await.unwrap() {
            match event {
                LineEvent::Line(line) => got.push(String::from_utf8(line.to_vec()).unwrap()),
                LineEvent::TooLong { n_bytes } => got.push(format!("too long {n_bytes}")),
            }
        }
        assert_eq!(got, vec!["a", "", "last"]);

        let data: &[u8] = b"0123456789abcdefXYZ\nok\n";
        let mut reader = LineReader::new(data, 16);
        assert!(matches!(
            reader.next_line().await.unwrap(),
            Some(LineEvent::TooLong { n_bytes: 20 })
        ));
        assert!(matches!(
            reader.next_line().await.unwrap(),
            Some(LineEvent::Line(b"ok"))
        ));
        assert!(reader.next_line().await.unwrap().is_none());
    }
}
