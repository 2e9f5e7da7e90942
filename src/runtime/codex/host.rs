//! The codex host: backends, live sessions, the forwarder, inject/steer/interrupt, approvals,
//! goals, fork and models.
//!
//! cohost is the single writer of each live thread: it creates the thread on a backend it
//! spawned, and one dispatch task per backend is the only producer of the thread's events — every
//! notification of every turn (started by cohost, by a goal, or by another client) is normalized
//! and appended to the core in the order codex sent it. Injects are serialized per session, so two
//! injects can never open two turns. A backend that exits is restarted and its threads resumed;
//! the backfill that follows is deduplicated by the core, so nothing is forwarded twice.
//!
//! **Boundary:** the service reaches it through the `SessionHost` seam (the registry in
//! `runtime/mod.rs`); nothing outside `codex/` sees codex's JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::normalize::{self, Normalized};
use super::process::{AppServerProcess, CodexBin, Listen};
use super::rpc::{Incoming, RequestId, RpcClient, RpcError};
use super::wire;
use crate::core::{CoreError, CoreHandle};
use crate::protocol::{
    AgentStatus, ApprovalResolved, Budget, Empty, EventKind, ForkOrigin, HostedSessionView, Item,
    ItemEvent, Runtime, SessionBound, SessionClosed, SessionCreated, SessionState, SessionStatus,
    TurnCompleted, TurnSource, TurnStarted, TurnStatus,
};
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::common::pane;
use crate::runtime::common::{
    DEFAULT_TMUX_SESSION, inject, lock, new_session_id, private_dir, send_signal, sibling_binary,
};
use crate::runtime::{Capability, HostError, InjectOutcome, InjectState};
use crate::tmux::SessionCache;

/// How long an inject waits for a session's thread to be bound before answering `not_ready`.
pub const PARK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a per-budget backend may sit idle (no thread with a turn in flight) before it is
/// stopped. The base backend is kept for the daemon's life.
pub const BACKEND_IDLE_TTL: Duration = Duration::from_secs(600);
/// Grace period for a backend to exit on shutdown before its process group is killed.
const BACKEND_STOP_GRACE: Duration = Duration::from_secs(3);
/// Restart attempts for a backend that keeps dying, and the pause between them.
const RESTART_ATTEMPTS: u32 = 5;
const RESTART_BACKOFF: Duration = Duration::from_millis(500);
/// `thread/resume` attempts while a thread has no rollout yet.
const RESUME_ATTEMPTS: u32 = 20;
const RESUME_BACKOFF: Duration = Duration::from_millis(250);
/// `turn/interrupt` attempts while codex has not begun a turn it already answered for.
const INTERRUPT_ATTEMPTS: u32 = 40;
const INTERRUPT_BACKOFF: Duration = Duration::from_millis(25);

const BASE_KEY: &str = "codex";
/// The most text of a streaming agent message kept to store if its turn ends first.
const MAX_STREAMED_TEXT: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct HostConfig {
    /// `$COHOST_HOME`; backend homes live under `codex/<key>/home`.
    pub cohost_home: PathBuf,
    /// The user's own CODEX_HOME, copied (never modified) into each backend home.
    pub user_codex_home: Option<PathBuf>,
    pub backend_idle_ttl: Duration,
    pub park_timeout: Duration,
}

impl From<RpcError> for HostError {
    fn from(error: RpcError) -> Self {
        HostError::failed_by(Runtime::Codex, error.to_string(), error)
    }
}

/// The environment variable that carries the WebSocket token to the co-driving TUI.
pub const WS_TOKEN_ENV: &str = "COHOST_CODEX_WS_TOKEN";

/// How to start the codex TUI attached to a session's thread (`GET /api/sessions/{id}/terminal`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalSpec {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default)]
pub struct CreateParams {
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub sandbox: Option<String>,
    pub budget: Option<Budget>,
    pub idempotency_key: Option<String>,
}

/// The approval policies codex takes (0.169 and 0.171 refuse `on-failure` at `thread/start`, so
/// it is refused here with a clear error rather than leaving a session that cannot start).
pub const APPROVAL_POLICIES: [&str; 3] = ["untrusted", "on-request", "never"];
pub const SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

/// Pages of `model/list` read at most for one answer (a page holds dozens of models).
const MODEL_PAGES: usize = 20;

#[derive(Clone)]
pub struct CodexHost {
    inner: Arc<Inner>,
}

struct Inner {
    core: CoreHandle,
    tmux: Arc<SessionCache>,
    config: HostConfig,
    codex: Result<CodexBin, String>,
    backends: tokio::sync::Mutex<HashMap<String, Arc<Backend>>>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    approvals: Mutex<HashMap<String, PendingRequest>>,
    /// Input requests codex waits on (questions, elicitations, permissions), by request id.
    inputs: Mutex<HashMap<String, asks::PendingInput>>,
    /// Serializes session creation so two requests with one idempotency key create one session.
    create_lock: tokio::sync::Mutex<()>,
    cancel: CancellationToken,
}

struct Backend {
    key: String,
    budget: Option<Budget>,
    /// The backend's CODEX_HOME, shared with the TUIs that co-drive its threads.
    home: PathBuf,
    /// `ws://127.0.0.1:PORT` when the backend listens on a WebSocket (co-driving possible).
    ws_url: Option<String>,
    /// The capability token file (mode 0600) the WebSocket requires.
    token_file: Option<PathBuf>,
    rpc: RpcClient,
    process: tokio::sync::Mutex<Option<AppServerProcess>>,
    /// Thread id → session id, for routing notifications.
    threads: Mutex<HashMap<String, String>>,
    last_used: Mutex<Instant>,
}

#[derive(Clone)]
struct Binding {
    thread_id: String,
    backend: Arc<Backend>,
}

#[derive(Default)]
struct TurnTracking {
    /// The turn codex is running, from `turn/start` answers and `turn/started` notifications.
    current: Option<String>,
    /// `turn/start` calls sent by cohost whose `turn/started` has not arrived yet.
    pending_api: usize,
    /// Items started but not completed, by cohost item id: closed when their turn ends.
    open_items: HashMap<String, (String, Item)>,
    /// Agent messages streaming (deltas seen, not completed), by cohost item id: their turn and
    /// the text so far. A turn that ends before the message completes stores that text, so a
    /// reader that reloads sees what a live reader saw.
    streaming: HashMap<String, (String, String)>,
}

struct Live {
    session_id: String,
    /// A terminal pane waits for the thread's first turn before the TUI can resume it.
    terminal_pending: std::sync::atomic::AtomicBool,
    binding: watch::Sender<Option<Binding>>,
    inject: tokio::sync::Mutex<()>,
    turn: Mutex<TurnTracking>,
    /// The model the thread runs, from codex's thread answers (a collaboration mode names it).
    model: Mutex<Option<String>>,
}

struct PendingRequest {
    session_id: String,
    backend: Arc<Backend>,
    request_id: RequestId,
}

fn backend_key(budget: Option<&Budget>) -> String {
    match budget {
        None => BASE_KEY.to_string(),
        Some(budget) => format!(
            "{BASE_KEY}-r{}-s{}",
            budget.request_max_retries, budget.stream_max_retries
        ),
    }
}

/// The running turn named in codex's "expected active turn id `X` but found `Y`".
fn running_turn_in(message: &str) -> Option<String> {
    let after = message.split("but found").nth(1)?;
    let id = after.trim().trim_matches('`').split('`').next()?.trim();
    (!id.is_empty()).then(|| id.to_string())
}

mod asks;
pub use asks::MODES;

fn text_input(text: &str) -> Vec<wire::UserInput> {
    vec![wire::UserInput::text(text)]
}

impl CodexHost {
    pub fn new(core: CoreHandle, tmux: Arc<SessionCache>, config: HostConfig) -> Self {
        let codex = super::process::find_codex().map_err(|e| e.to_string());
        if let Err(error) = &codex {
            tracing::warn!(%error, "codex not found; codex sessions are unavailable");
        }
        CodexHost {
            inner: Arc::new(Inner {
                core,
                tmux,
                config,
                codex,
                backends: tokio::sync::Mutex::new(HashMap::new()),
                live: Mutex::new(HashMap::new()),
                approvals: Mutex::new(HashMap::new()),
                inputs: Mutex::new(HashMap::new()),
                create_lock: tokio::sync::Mutex::new(()),
                cancel: CancellationToken::new(),
            }),
        }
    }

    pub fn codex_bin(&self) -> Result<&CodexBin, &str> {
        self.inner.codex.as_ref().map_err(String::as_str)
    }

    /// Re-attaches every session the log says is open: after a daemon restart, their threads are
    /// resumed on fresh backends and backfilled.
    pub fn restore(&self) {
        let sessions: Vec<(String, Option<String>)> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Codex && !s.is_closed())
                .map(|s| (s.id.clone(), s.thread_id.clone()))
                .collect()
        });
        for (session_id, thread_id) in sessions {
            let live = self.inner.live_for(&session_id);
            let host = self.clone();
            tokio::spawn(async move {
                let result = match thread_id {
                    Some(thread_id) => host.inner.rebind(&live, &thread_id, None).await,
                    None => host.inner.bind_new(&live).await,
                };
                if let Err(error) = result {
                    tracing::warn!(session = %live.session_id, %error, "could not restore the session");
                    host.inner
                        .status(
                            &live.session_id,
                            SessionState::Lost,
                            Some(error.to_string()),
                        )
                        .await;
                }
            });
        }
    }

    /// Creates a session: logs it, starts its thread on a backend, and binds them.
    pub async fn create(&self, params: CreateParams) -> Result<HostedSessionView, HostError> {
        if let Err(error) = &self.inner.codex {
            return Err(HostError::unavailable(Runtime::Codex, error.clone()));
        }
        let _guard = self.inner.create_lock.lock().await;
        if let Some(key) = &params.idempotency_key
            && let Some(view) = self.inner.core.read(|state| {
                state
                    .sessions
                    .by_creation_key(key)
                    .and_then(|s| state.session_view(&s.id))
            })
        {
            return Ok(view);
        }
        let session_id = new_session_id();
        let created = SessionCreated {
            runtime: Runtime::Codex,
            cwd: params.cwd.to_string_lossy().into_owned(),
            model: params.model,
            approval_policy: params.approval_policy,
            permission_mode: None,
            sandbox: params.sandbox,
            budget: params.budget,
            forked_from: None,
            idempotency_key: params.idempotency_key,
        };
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        drop(_guard);
        let live = self.inner.live_for(&session_id);
        if let Err(error) = self.inner.bind_new(&live).await {
            self.inner
                .status(&session_id, SessionState::Lost, Some(error.to_string()))
                .await;
            return Err(error);
        }
        self.view(&session_id)
    }

    pub fn view(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    pub fn list(&self) -> Vec<HostedSessionView> {
        self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter_map(|s| state.session_view(&s.id))
                .collect()
        })
    }

    /// Sends text to the session: `turn/start` when no turn is open, `turn/steer` when one is.
    pub async fn inject(
        &self,
        session_id: &str,
        text: &str,
        idempotency_key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        self.inject_input(session_id, text, text_input(text), idempotency_key)
            .await
    }

    /// [`CodexHost::inject`] with any input elements (text and images).
    pub(crate) async fn inject_input(
        &self,
        session_id: &str,
        text: &str,
        input: Vec<wire::UserInput>,
        idempotency_key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        let live = self.inner.live_session(session_id)?;
        let _serialized = live.inject.lock().await;
        if let Some(earlier) =
            inject::previous(&self.inner.core, session_id, idempotency_key.as_deref())
        {
            return Ok(earlier);
        }
        let binding = self.inner.wait_bound(&live).await?;
        let mut current = lock(&live.turn).current.clone();
        let mut outcome = None;
        // At most two steers: the second with the turn codex says is running, when our view
        // was behind (another client started a turn we had not processed yet).
        for _ in 0..2 {
            let Some(turn_id) = current.take() else { break };
            match binding
                .backend
                .rpc
                .call(&wire::TurnSteerParams {
                    thread_id: binding.thread_id.clone(),
                    input: input.clone(),
                    expected_turn_id: turn_id.clone(),
                })
                .await
            {
                Ok(answer) => {
                    let steered = answer.turn_id.unwrap_or_else(|| turn_id.clone());
                    outcome = Some((InjectState::Steered, steered));
                }
                // The turn ended while we decided: start a new one instead.
                Err(RpcError::Server { message, .. }) if message.contains("no active turn") => {
                    let mut turn = lock(&live.turn);
                    if turn.current.as_deref() == Some(turn_id.as_str()) {
                        turn.current = None;
                    }
                }
                Err(RpcError::Server { message, .. }) if message.contains("but found") => {
                    current = running_turn_in(&message);
                    if current.is_none() {
                        return Err(HostError::failed(Runtime::Codex, message));
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
        let (kind, turn_id) = match outcome {
            Some(outcome) => outcome,
            None => {
                // The turn known to run when we ask: codex answering with this one means the
                // text joined it. A different id is a new turn, even when its `turn/started`
                // was already forwarded (the notification and the answer race).
                let running_before = {
                    let mut turn = lock(&live.turn);
                    turn.pending_api += 1;
                    turn.current.clone()
                };
                let answer = binding
                    .backend
                    .rpc
                    .call(&wire::TurnStartParams {
                        thread_id: binding.thread_id.clone(),
                        input: input.clone(),
                        collaboration_mode: self.inner.collaboration_mode(&live),
                    })
                    .await;
                let answer = match answer {
                    Ok(answer) => answer,
                    Err(error) => {
                        let mut turn = lock(&live.turn);
                        turn.pending_api = turn.pending_api.saturating_sub(1);
                        return Err(error.into());
                    }
                };
                let turn_id = answer.turn.and_then(|turn| turn.id).ok_or_else(|| {
                    HostError::failed(Runtime::Codex, "turn/start answered without a turn id")
                })?;
                let mut turn = lock(&live.turn);
                if running_before.as_deref() == Some(turn_id.as_str()) {
                    // codex joined a turn that was already running: no turn/started will come.
                    turn.pending_api = turn.pending_api.saturating_sub(1);
                    (InjectState::Steered, turn_id)
                } else {
                    if turn.current.is_none() {
                        turn.current = Some(turn_id.clone());
                    }
                    (InjectState::Started, turn_id)
                }
            }
        };
        *lock(&binding.backend.last_used) = Instant::now();
        Ok(inject::record(
            &self.inner.core,
            session_id,
            kind,
            &turn_id,
            idempotency_key,
        )
        .await?)
    }

    /// Interrupts the running turn (with `turn`, only that one). `Ok(false)` when no turn (or
    /// another one) is running.
    pub async fn interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(false);
        };
        let Some(turn_id) = lock(&live.turn).current.clone() else {
            return Ok(false);
        };
        if turn.is_some_and(|wanted| wanted != turn_id) {
            return Ok(false);
        }
        // Right after `turn/start` answered, codex may not have begun the turn yet and says
        // "no active turn"; retry while the turn is still ours to end (its `turn/started` or
        // `turn/completed` is on the way).
        let mut attempt = 0;
        loop {
            attempt += 1;
            match binding
                .backend
                .rpc
                .call(&wire::TurnInterruptParams {
                    thread_id: binding.thread_id.clone(),
                    turn_id: turn_id.clone(),
                })
                .await
            {
                Ok(_) => return Ok(true),
                Err(RpcError::Server { message, .. }) if message.contains("no active turn") => {
                    let still_ours = lock(&live.turn).current.as_deref() == Some(turn_id.as_str());
                    if !still_ours || attempt >= INTERRUPT_ATTEMPTS {
                        return Ok(false);
                    }
                    tokio::time::sleep(INTERRUPT_BACKOFF).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Answers a pending approval. The first answer wins; later ones get a clear error.
    pub async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        if !normalize::DECISIONS.contains(&decision) {
            return Err(HostError::Invalid(format!(
                "decision must be one of {}, got `{decision}`",
                normalize::DECISIONS.join(", ")
            )));
        }
        self.inner.live_session(session_id)?;
        let pending = {
            let mut approvals = lock(&self.inner.approvals);
            match approvals.get(approval_id) {
                Some(pending) if pending.session_id == session_id => approvals.remove(approval_id),
                _ => None,
            }
        };
        let Some(pending) = pending else {
            let known = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.approvals.get(approval_id))
                    .map(|a| a.resolved.is_some())
            });
            return Err(match known {
                Some(true) => HostError::ApprovalResolved(approval_id.to_string()),
                _ => HostError::UnknownApproval(approval_id.to_string()),
            });
        };
        pending
            .backend
            .rpc
            .respond(
                pending.request_id.clone(),
                wire::CommandExecutionRequestApprovalResponse {
                    decision: decision.into(),
                },
            )
            .await?;
        let resolved = ApprovalResolved {
            approval_id: approval_id.to_string(),
            decision: Some(decision.to_string()),
            by: by.to_string(),
        };
        match self
            .inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::ApprovalResolved(resolved),
            )
            .await
        {
            Ok(_) | Err(CoreError::Duplicate) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Runs a thread-scoped request (built for the session's thread) and wraps the answer as a
    /// capability result.
    async fn thread_call<R: wire::ClientRequest<Response = Value>>(
        &self,
        session_id: &str,
        params: impl FnOnce(String) -> R,
    ) -> Result<Capability, HostError> {
        let method = R::METHOD;
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(Capability::fail(
                "no_active_thread",
                "the session has no live thread yet",
            ));
        };
        let params = params(binding.thread_id.clone());
        match binding.backend.rpc.call(&params).await {
            Ok(answer) => Ok(Capability::ok(answer)),
            Err(RpcError::Server { message, .. }) if message.contains("unknown variant") => {
                Ok(Capability::fail(
                    "unsupported",
                    format!("this codex does not support {method}"),
                ))
            }
            Err(RpcError::Server { message, .. }) => Ok(Capability::fail("error", message)),
            Err(error) => Ok(Capability::fail("error", error.to_string())),
        }
    }

    pub async fn goal_get(&self, session_id: &str) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalGetParams {
            thread_id,
        })
        .await
    }

    /// Sets or patches the goal. `status: "active"` makes codex start turns on its own; they
    /// appear in the stream with source `goal`.
    pub async fn goal_set(
        &self,
        session_id: &str,
        objective: Option<String>,
        status: Option<String>,
        token_budget: Option<u64>,
    ) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalSetParams {
            thread_id,
            origin: Some(wire::ThreadGoalMutationOrigin::User),
            objective,
            status,
            token_budget,
        })
        .await
    }

    pub async fn goal_clear(&self, session_id: &str) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalClearParams {
            thread_id,
            origin: Some(wire::ThreadGoalMutationOrigin::User),
        })
        .await
    }

    /// Lists models from the base backend.
    pub async fn models(&self) -> Result<Capability, HostError> {
        if let Err(error) = &self.inner.codex {
            return Ok(Capability::fail("unsupported", error.clone()));
        }
        let backend = self.inner.backend(None).await?;
        // Every page of `model/list` (`{"data": [Model], "nextCursor"}`), as one list.
        let mut models = Vec::new();
        let mut cursor = None;
        for _ in 0..MODEL_PAGES {
            let params = wire::ModelListParams {
                cursor: cursor.take(),
                ..wire::ModelListParams::default()
            };
            let page = match backend.rpc.call(&params).await {
                Ok(page) => page,
                Err(error) => return Ok(Capability::fail("error", error.to_string())),
            };
            if let Some(list) = page.get("data").and_then(serde_json::Value::as_array) {
                models.extend(list.iter().cloned());
            }
            cursor = page
                .get("nextCursor")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(Capability::ok(serde_json::Value::Array(models)))
    }

    /// Forks the session's thread (optionally cut after `after_turn_id`) into a new session.
    pub async fn fork(
        &self,
        session_id: &str,
        after_turn_id: Option<String>,
    ) -> Result<Result<HostedSessionView, Capability>, HostError> {
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(Err(Capability::fail(
                "no_active_thread",
                "the session has no live thread yet",
            )));
        };
        let params = wire::ThreadForkParams {
            thread_id: binding.thread_id.clone(),
            last_turn_id: after_turn_id.clone(),
        };
        let answer = match binding.backend.rpc.call(&params).await {
            Ok(answer) => answer,
            Err(RpcError::Server { message, .. }) if message.contains("no rollout found") => {
                return Ok(Err(Capability::fail(
                    "no_active_thread",
                    "the session has no finished turn to fork yet",
                )));
            }
            Err(RpcError::Server { message, .. }) => {
                return Ok(Err(Capability::fail("error", message)));
            }
            Err(error) => return Err(error.into()),
        };
        let Some((thread_id, thread)) = answer
            .thread
            .and_then(|thread| Some((thread.id.clone()?, thread)))
        else {
            return Err(HostError::failed(
                Runtime::Codex,
                "thread/fork answered without a thread id",
            ));
        };
        let parent = self.view(session_id)?;
        let new_id = new_session_id();
        let created = SessionCreated {
            runtime: Runtime::Codex,
            cwd: parent.cwd.clone(),
            model: parent.model.clone(),
            approval_policy: parent.approval_policy.clone(),
            permission_mode: None,
            sandbox: parent.sandbox.clone(),
            budget: self.inner.core.read(|s| {
                s.sessions
                    .get(session_id)
                    .and_then(|r| r.created.budget.clone())
            }),
            forked_from: Some(ForkOrigin {
                session_id: session_id.to_string(),
                after_turn_id,
            }),
            idempotency_key: None,
        };
        self.inner
            .core
            .append(Some(new_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let new_live = self.inner.live_for(&new_id);
        *lock(&new_live.model) = answer.model.clone();
        self.inner
            .attach(&new_live, &thread_id, &binding.backend, Some(&thread))
            .await?;
        Ok(Ok(self.view(&new_id)?))
    }

    /// Closes a session: interrupts its turn, unsubscribes from its thread, and logs the end.
    pub async fn close(&self, session_id: &str) -> Result<(), HostError> {
        let live = self.inner.live_session(session_id)?;
        let _ = self.interrupt(session_id, None).await;
        let binding = live.binding.borrow().clone();
        if let Some(binding) = binding {
            let _ = binding
                .backend
                .rpc
                .call(&wire::ThreadUnsubscribeParams {
                    thread_id: binding.thread_id.clone(),
                })
                .await;
            lock(&binding.backend.threads).remove(&binding.thread_id);
        }
        lock(&self.inner.live).remove(session_id);
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionClosed(SessionClosed {
                    reason: "closed through the API".into(),
                }),
            )
            .await?;
        Ok(())
    }

    /// The command that attaches the real codex TUI to the session's thread over the backend's
    /// WebSocket: `codex --remote ws://… --remote-auth-token-env VAR resume <thread>`, with the
    /// backend's CODEX_HOME. The token travels in the environment, never on the command line;
    /// it is replaced by `<redacted>` unless `include_token`.
    pub async fn terminal_spec(
        &self,
        session_id: &str,
        include_token: bool,
    ) -> Result<TerminalSpec, HostError> {
        let live = self.inner.live_session(session_id)?;
        let binding = self.inner.wait_bound(&live).await?;
        let bin = self
            .inner
            .codex
            .as_ref()
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.clone()))?;
        let (Some(ws_url), Some(token_file)) =
            (&binding.backend.ws_url, &binding.backend.token_file)
        else {
            return Err(HostError::Invalid(
                "this session's backend has no WebSocket (COHOST_CODEX_TRANSPORT=stdio); it cannot be co-driven".into(),
            ));
        };
        let token = if include_token {
            std::fs::read_to_string(token_file)
                .map_err(|e| {
                    HostError::failed(
                        Runtime::Codex,
                        format!("cannot read the websocket token: {e}"),
                    )
                })?
                .trim()
                .to_string()
        } else {
            "<redacted>".to_string()
        };
        let cwd = self.view(session_id)?.cwd;
        let mut env = std::collections::BTreeMap::new();
        env.insert(
            "CODEX_HOME".to_string(),
            binding.backend.home.to_string_lossy().into_owned(),
        );
        env.insert(WS_TOKEN_ENV.to_string(), token);
        if let Some(root) = &bin.package_root {
            env.insert(
                "CODEX_MANAGED_PACKAGE_ROOT".to_string(),
                root.to_string_lossy().into_owned(),
            );
            env.insert("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string());
        }
        Ok(TerminalSpec {
            command: bin.path.to_string_lossy().into_owned(),
            args: vec![
                "--remote".into(),
                ws_url.clone(),
                "--remote-auth-token-env".into(),
                WS_TOKEN_ENV.into(),
                "resume".into(),
                binding.thread_id.clone(),
            ],
            cwd,
            env,
        })
    }

    /// Makes a thread that has had no turn resumable by another client: `thread/name/set`
    /// writes its rollout (codex 0.169 writes none until the first turn otherwise). The name,
    /// `cohost <session>`, shows in the TUI's footer. False when codex refused.
    async fn persist_thread(&self, session_id: &str) -> bool {
        let Ok(live) = self.inner.live_session(session_id) else {
            return false;
        };
        let Ok(binding) = self.inner.wait_bound(&live).await else {
            return false;
        };
        let named = binding
            .backend
            .rpc
            .call(&wire::ThreadSetNameParams {
                thread_id: binding.thread_id.clone(),
                name: format!("cohost {session_id}"),
            })
            .await;
        match named {
            Ok(_) => true,
            Err(error) => {
                tracing::info!(session = %session_id, %error, "could not persist the thread before its first turn; the terminal waits for it");
                false
            }
        }
    }

    /// Opens a tmux pane running `cohost-runner`, which launches the TUI from the terminal spec
    /// and relaunches it on request. Records `session.pane`.
    pub async fn open_terminal(
        &self,
        session_id: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        let runner = sibling_binary("cohost-runner", "COHOST_RUNNER_BIN")
            .map_err(|e| HostError::unavailable(Runtime::Codex, e))?;
        if self.view(session_id)?.pane_id.is_some() {
            return Err(HostError::Invalid(format!(
                "session `{session_id}` already has a terminal"
            )));
        }
        // codex cannot resume a thread that has no rollout ("no rollout found"). Naming the
        // thread writes one without any model call, so the TUI can attach at once; should that
        // fail, the runner waits without a launch.json and the TUI starts when the first turn
        // ends.
        let ready = self.view(session_id)?.turns > 0 || self.persist_thread(session_id).await;
        let dir = if ready {
            self.write_terminal_launch(session_id).await?
        } else {
            let live = self.inner.live_session(session_id)?;
            live.terminal_pending
                .store(true, std::sync::atomic::Ordering::Release);
            self.terminal_dir(session_id)?
        };
        let tmux_session = tmux_session.unwrap_or_else(|| DEFAULT_TMUX_SESSION.to_string());
        let cwd = PathBuf::from(self.view(session_id)?.cwd);
        pane::open(
            &self.inner.core,
            &self.inner.tmux,
            session_id,
            &tmux_session,
            &cwd,
            &runner,
            &dir,
        )
        .await
        .map_err(|e| HostError::failed(Runtime::Codex, e))?;
        self.view(session_id)
    }

    /// Writes `launch.json` for the runner: the terminal spec with the real token (the file is
    /// 0600 in the session's private directory).
    async fn write_terminal_launch(&self, session_id: &str) -> Result<PathBuf, HostError> {
        let spec = self.terminal_spec(session_id, true).await?;
        let dir = self.terminal_dir(session_id)?;
        let mut argv = vec![spec.command.clone()];
        argv.extend(spec.args.iter().cloned());
        let launch = crate::protocol::boundary::Launch {
            argv,
            cwd: Some(PathBuf::from(&spec.cwd)),
            env: spec.env.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            seed_claude: None,
            session_id: Some(session_id.to_string()),
        };
        pane::write_launch(&dir, &launch).map_err(|e| {
            HostError::failed(Runtime::Codex, format!("could not write launch.json: {e}"))
        })?;
        Ok(dir)
    }

    /// The private directory of a session's terminal (launch.json, runner.jsonl).
    fn terminal_dir(&self, session_id: &str) -> Result<PathBuf, HostError> {
        let dir = self
            .inner
            .config
            .cohost_home
            .join("codex")
            .join("sessions")
            .join(session_id);
        private_dir(&dir).map_err(|e| {
            HostError::failed_by(
                Runtime::Codex,
                format!("cannot create {}: {e}", dir.display()),
                e,
            )
        })?;
        Ok(dir)
    }

    /// Relaunches the session's TUI (after it exited, or stopping it first), against the
    /// backend's current endpoint, on the same thread.
    pub async fn relaunch_terminal(&self, session_id: &str) -> Result<(), HostError> {
        let pane = self
            .inner
            .core
            .read(|state| state.sessions.get(session_id).and_then(|s| s.pane.clone()))
            .ok_or_else(|| HostError::Invalid(format!("session `{session_id}` has no terminal")))?;
        if self.inner.tmux.tmux().pane_pid(&pane.pane_id).await != Some(pane.runner_pid) {
            return Err(HostError::Closed(session_id.to_string()));
        }
        let dir = self.write_terminal_launch(session_id).await?;
        // Which TUI runs is read before the runner is woken: an idle runner launches at once on
        // SIGUSR1, and reading after it would find (and stop) the TUI just launched.
        let running = pane::running_child(&dir);
        // SIGUSR1: the runner launches again as soon as the TUI is not running.
        send_signal(pane.runner_pid, libc::SIGUSR1);
        if let Some(pid) = running {
            send_signal(pid, libc::SIGTERM);
        }
        Ok(())
    }

    /// Stops every backend (graceful, then the process group is killed).
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let backends: Vec<Arc<Backend>> = self
            .inner
            .backends
            .lock()
            .await
            .drain()
            .map(|(_, b)| b)
            .collect();
        for backend in backends {
            if let Some(process) = backend.process.lock().await.take() {
                process.shutdown(BACKEND_STOP_GRACE).await;
            }
        }
    }

    /// Stops per-budget backends idle for longer than the TTL with no turn in flight.
    pub async fn reap_idle(&self) {
        let ttl = self.inner.config.backend_idle_ttl;
        let mut backends = self.inner.backends.lock().await;
        let idle: Vec<String> = backends
            .values()
            .filter(|backend| backend.key != BASE_KEY)
            .filter(|backend| lock(&backend.last_used).elapsed() >= ttl)
            .filter(|backend| {
                let sessions: Vec<String> = lock(&backend.threads).values().cloned().collect();
                let live = lock(&self.inner.live);
                sessions
                    .iter()
                    .all(|s| live.get(s).is_none_or(|l| lock(&l.turn).current.is_none()))
            })
            .map(|backend| backend.key.clone())
            .collect();
        for key in idle {
            if let Some(backend) = backends.remove(&key) {
                tracing::info!(key, "reaping an idle codex backend");
                if let Some(process) = backend.process.lock().await.take() {
                    tokio::spawn(async move { process.shutdown(BACKEND_STOP_GRACE).await });
                }
            }
        }
    }
}

impl Inner {
    fn live_for(&self, session_id: &str) -> Arc<Live> {
        Arc::clone(
            lock(&self.live)
                .entry(session_id.to_string())
                .or_insert_with(|| {
                    Arc::new(Live {
                        session_id: session_id.to_string(),
                        terminal_pending: std::sync::atomic::AtomicBool::new(false),
                        binding: watch::channel(None).0,
                        inject: tokio::sync::Mutex::new(()),
                        model: Mutex::new(None),
                        // Items a previous run left open are closed when their turn ends.
                        turn: Mutex::new(TurnTracking {
                            open_items: self.core.read(|state| {
                                state
                                    .sessions
                                    .get(session_id)
                                    .map(|s| {
                                        s.open_items
                                            .iter()
                                            .map(|(id, item)| {
                                                (
                                                    id.clone(),
                                                    (item.turn_id.clone(), item.item.clone()),
                                                )
                                            })
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            }),
                            ..TurnTracking::default()
                        }),
                    })
                }),
        )
    }

    /// The live session, or why there is none.
    fn live_session(&self, session_id: &str) -> Result<Arc<Live>, HostError> {
        let record = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.is_closed(), s.created.runtime))
        });
        match record {
            None => Err(HostError::UnknownSession(session_id.to_string())),
            Some((true, _)) => Err(HostError::Closed(session_id.to_string())),
            Some((false, Runtime::Codex)) => Ok(self.live_for(session_id)),
            Some((false, _)) => Err(HostError::Invalid(format!(
                "session `{session_id}` is not a codex session"
            ))),
        }
    }

    async fn wait_bound(&self, live: &Live) -> Result<Binding, HostError> {
        let mut rx = live.binding.subscribe();
        let wait = rx.wait_for(|binding| binding.is_some());
        match tokio::time::timeout(self.config.park_timeout, wait).await {
            Ok(Ok(binding)) => binding
                .clone()
                .ok_or_else(|| HostError::NotReady(live.session_id.clone())),
            _ => Err(HostError::NotReady(live.session_id.clone())),
        }
    }

    async fn status(&self, session_id: &str, state: SessionState, message: Option<String>) {
        let _ = self
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionStatus(SessionStatus { state, message }),
            )
            .await;
    }

    fn settings(&self, session_id: &str) -> Option<SessionCreated> {
        self.core
            .read(|state| state.sessions.get(session_id).map(|s| s.created.clone()))
    }

    /// Starts a new thread for the session and binds it.
    async fn bind_new(self: &Arc<Self>, live: &Arc<Live>) -> Result<(), HostError> {
        let settings = self
            .settings(&live.session_id)
            .ok_or_else(|| HostError::UnknownSession(live.session_id.clone()))?;
        let backend = self.backend(settings.budget.as_ref()).await?;
        let params = wire::ThreadStartParams {
            cwd: Some(settings.cwd.clone()),
            model: settings.model.clone(),
            approval_policy: settings.approval_policy.as_deref().map(Into::into),
            sandbox: settings.sandbox.as_deref().map(Into::into),
        };
        let answer = backend.rpc.call(&params).await?;
        *lock(&live.model) = answer.model.clone();
        let thread_id = answer.thread.and_then(|thread| thread.id).ok_or_else(|| {
            HostError::failed(Runtime::Codex, "thread/start answered without a thread id")
        })?;
        self.attach(live, &thread_id, &backend, None).await
    }

    /// Routes `thread_id` on `backend` to the session, backfills `snapshot` (a Thread with
    /// turns, from resume or fork), logs the binding, and wakes parked injects.
    async fn attach(
        self: &Arc<Self>,
        live: &Arc<Live>,
        thread_id: &str,
        backend: &Arc<Backend>,
        snapshot: Option<&wire::Thread>,
    ) -> Result<(), HostError> {
        lock(&backend.threads).insert(thread_id.to_string(), live.session_id.clone());
        if let Some(turns) = snapshot.map(|thread| &thread.turns) {
            for turn in turns {
                for kind in normalize::backfill(turn) {
                    match kind {
                        // A turn that ended while nobody listened closes the items it left open.
                        EventKind::TurnCompleted(done) => self.end_turn(live, done).await,
                        kind => self.store(&live.session_id, kind).await,
                    }
                }
                if turn.status == Some(wire::TurnStatus::InProgress)
                    && let Some(turn_id) = &turn.id
                {
                    lock(&live.turn).current = Some(turn_id.clone());
                }
            }
        }
        self.core
            .append(
                Some(live.session_id.clone()),
                EventKind::SessionBound(SessionBound {
                    thread_id: thread_id.to_string(),
                    backend: backend.key.clone(),
                }),
            )
            .await?;
        live.binding.send_replace(Some(Binding {
            thread_id: thread_id.to_string(),
            backend: Arc::clone(backend),
        }));
        Ok(())
    }

    /// Resumes an existing thread on a (new) backend and backfills what the stream missed.
    /// A thread with no rollout yet is retried for a while; one that never had a turn is
    /// replaced by a new thread, since codex never persisted it.
    async fn rebind(
        self: &Arc<Self>,
        live: &Arc<Live>,
        thread_id: &str,
        backend: Option<Arc<Backend>>,
    ) -> Result<(), HostError> {
        let settings = self
            .settings(&live.session_id)
            .ok_or_else(|| HostError::UnknownSession(live.session_id.clone()))?;
        let backend = match backend {
            Some(backend) => backend,
            None => self.backend(settings.budget.as_ref()).await?,
        };
        let turns = self
            .core
            .read(|state| state.sessions.get(&live.session_id).map(|s| s.turns))
            .unwrap_or(0);
        let mut attempt = 0;
        let answer = loop {
            attempt += 1;
            match backend
                .rpc
                .call(&wire::ThreadResumeParams {
                    thread_id: thread_id.to_string(),
                })
                .await
            {
                Ok(answer) => break answer,
                Err(RpcError::Server { message, .. }) if message.contains("no rollout found") => {
                    if turns == 0 || attempt >= RESUME_ATTEMPTS {
                        tracing::info!(session = %live.session_id, "thread was never persisted; starting a new one");
                        return self.bind_new(live).await;
                    }
                    tokio::time::sleep(RESUME_BACKOFF).await;
                }
                Err(error) => return Err(error.into()),
            }
        };
        lock(&live.turn).current = None;
        *lock(&live.model) = answer.model.clone();
        self.attach(live, thread_id, &backend, answer.thread.as_ref())
            .await?;
        // A turn the old backend was running and that did not end in the backfill is over.
        let dangling = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .and_then(|s| s.active_turn.clone())
        });
        if let Some(turn_id) = dangling
            && lock(&live.turn).current.as_deref() != Some(turn_id.as_str())
        {
            self.end_turn(
                live,
                TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: Some("the codex backend exited during the turn".into()),
                    duration_ms: None,
                    lost: true,
                },
            )
            .await;
        }
        Ok(())
    }

    /// The backend for a budget, spawning it (with its prepared CODEX_HOME) when needed.
    async fn backend(self: &Arc<Self>, budget: Option<&Budget>) -> Result<Arc<Backend>, HostError> {
        let key = backend_key(budget);
        let mut backends = self.backends.lock().await;
        if let Some(backend) = backends.get(&key)
            && !backend.rpc.is_closed()
        {
            *lock(&backend.last_used) = Instant::now();
            return Ok(Arc::clone(backend));
        }
        let bin = self
            .codex
            .as_ref()
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.clone()))?;
        let home = self
            .config
            .cohost_home
            .join("codex")
            .join(&key)
            .join("home");
        super::home::prepare_home(&home, self.config.user_codex_home.as_deref())
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.to_string()))?;
        let mut env = Vec::new();
        if let Some(budget) = budget {
            env.push((
                "OPENAI_REQUEST_MAX_RETRIES".to_string(),
                budget.request_max_retries.to_string(),
            ));
            env.push((
                "OPENAI_STREAM_MAX_RETRIES".to_string(),
                budget.stream_max_retries.to_string(),
            ));
        }
        // Backends listen on a loopback WebSocket with a fresh capability token, so a human's
        // TUI can co-drive their threads; cohost connects over that same socket.
        // `COHOST_CODEX_TRANSPORT=stdio` keeps the plain stdio transport (no co-driving).
        let (listen, token_file) =
            if std::env::var("COHOST_CODEX_TRANSPORT").as_deref() == Ok("stdio") {
                (Listen::Stdio, None)
            } else {
                let token_file = home.parent().unwrap_or(&home).join("ws-token");
                super::process::write_ws_token(&token_file).map_err(|e| {
                    HostError::unavailable(
                        Runtime::Codex,
                        format!("cannot write the websocket token: {e}"),
                    )
                })?;
                (
                    Listen::WebSocket {
                        port: 0,
                        token_file: token_file.clone(),
                    },
                    Some(token_file),
                )
            };
        let (process, rpc, incoming) = AppServerProcess::spawn(bin, &home, listen, &[], &env)
            .await
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.to_string()))?;
        let ws_url = process.ws_url().map(str::to_string);
        rpc.initialize("cohost", env!("CARGO_PKG_VERSION"))
            .await
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.to_string()))?;
        tracing::info!(key, pid = ?process.pid(), "started a codex app-server backend");
        let backend = Arc::new(Backend {
            key: key.clone(),
            budget: budget.cloned(),
            home: home.clone(),
            ws_url,
            token_file,
            rpc,
            process: tokio::sync::Mutex::new(Some(process)),
            threads: Mutex::new(HashMap::new()),
            last_used: Mutex::new(Instant::now()),
        });
        backends.insert(key, Arc::clone(&backend));
        tokio::spawn(Arc::clone(self).dispatch_boxed(Arc::clone(&backend), incoming));
        Ok(backend)
    }

    /// [`Inner::dispatch`] as a boxed future: a restart inside it spawns a new backend, whose
    /// dispatch is this same future, and the explicit type breaks that cycle for the compiler.
    fn dispatch_boxed(
        self: Arc<Self>,
        backend: Arc<Backend>,
        incoming: tokio::sync::mpsc::Receiver<Incoming>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move { self.dispatch(backend, incoming).await })
    }

    /// The forwarder: the only producer of a backend's sessions' events.
    async fn dispatch(
        self: Arc<Self>,
        backend: Arc<Backend>,
        mut incoming: tokio::sync::mpsc::Receiver<Incoming>,
    ) {
        loop {
            let message = tokio::select! {
                _ = self.cancel.cancelled() => return,
                message = incoming.recv() => message,
            };
            let Some(message) = message else { break };
            match message {
                Incoming::Notification { method, params } => {
                    let Some(session_id) = normalize::thread_id(&params)
                        .and_then(|thread| lock(&backend.threads).get(thread).cloned())
                    else {
                        continue;
                    };
                    let live = self.live_for(&session_id);
                    for normalized in normalize::notification(&method, &params) {
                        self.forward(&live, &backend, normalized).await;
                    }
                }
                Incoming::Request { id, method, params } => {
                    self.server_request(&backend, id, &method, &params).await;
                }
            }
        }
        if self.cancel.is_cancelled() {
            return;
        }
        let reason = backend.rpc.closed().await;
        tracing::warn!(key = %backend.key, %reason, "codex backend exited; restarting it");
        self.restart(backend).await;
    }

    async fn forward(
        self: &Arc<Self>,
        live: &Arc<Live>,
        backend: &Arc<Backend>,
        normalized: Normalized,
    ) {
        let session_id = live.session_id.clone();
        match normalized {
            Normalized::TurnStarted { turn_id } => {
                let source = {
                    let mut turn = lock(&live.turn);
                    turn.current = Some(turn_id.clone());
                    if turn.pending_api > 0 {
                        turn.pending_api -= 1;
                        TurnSource::Api
                    } else if self.goal_active(&session_id) {
                        TurnSource::Goal
                    } else if self.core.read(|state| {
                        state
                            .sessions
                            .get(&session_id)
                            .is_some_and(|s| s.pane.is_some())
                    }) {
                        // Not cohost, not a goal: the human in the co-driving TUI.
                        TurnSource::Terminal
                    } else {
                        TurnSource::Other
                    }
                };
                *lock(&backend.last_used) = Instant::now();
                self.store(
                    &session_id,
                    EventKind::TurnStarted(TurnStarted { turn_id, source }),
                )
                .await;
                self.report(&session_id, AgentStatus::Running).await;
            }
            Normalized::Store(EventKind::TurnCompleted(done)) => {
                let status = match done.status {
                    TurnStatus::Completed => AgentStatus::Done,
                    TurnStatus::Interrupted => AgentStatus::Interrupted,
                    TurnStatus::Failed => AgentStatus::Error,
                };
                self.end_turn(live, done).await;
                self.report(&session_id, status).await;
                // The thread now has a rollout: a waiting terminal can resume it.
                if live
                    .terminal_pending
                    .swap(false, std::sync::atomic::Ordering::AcqRel)
                {
                    let host = CodexHost {
                        inner: Arc::clone(self),
                    };
                    let session = session_id.clone();
                    tokio::spawn(async move {
                        if let Err(error) = host.relaunch_terminal(&session).await {
                            tracing::warn!(session = %session, %error, "could not start the terminal");
                        }
                    });
                }
            }
            Normalized::Store(EventKind::ItemStarted(item)) => {
                lock(&live.turn).open_items.insert(
                    item.id().to_string(),
                    (item.turn_id.clone(), item.item.clone()),
                );
                self.store(&session_id, EventKind::ItemStarted(item)).await;
            }
            Normalized::Store(EventKind::ItemCompleted(item)) => {
                {
                    let mut turn = lock(&live.turn);
                    turn.open_items.remove(item.id());
                    turn.streaming.remove(item.id());
                }
                let plan = match &item.item {
                    Item::Plan { id, text } => {
                        Some(normalize::plan_request(&item.turn_id, id, text))
                    }
                    _ => None,
                };
                self.store(&session_id, EventKind::ItemCompleted(item))
                    .await;
                // A plan offered in plan mode waits for a person's decision.
                if let Some(plan) = plan {
                    self.store(&session_id, EventKind::InputRequested(Box::new(plan)))
                        .await;
                }
            }
            Normalized::Store(kind) => self.store(&session_id, kind).await,
            Normalized::Live(kind) => {
                if let EventKind::ItemDelta(delta) = &kind
                    && delta.kind == "agentMessage"
                {
                    let mut turn = lock(&live.turn);
                    let (_, text) = turn
                        .streaming
                        .entry(delta.item_id.clone())
                        .or_insert_with(|| (delta.turn_id.clone(), String::new()));
                    // Bounded like a stored event: past the cap the tail is not kept.
                    if text.len() + delta.delta.len() <= MAX_STREAMED_TEXT {
                        text.push_str(&delta.delta);
                    }
                }
                self.core.publish(Some(session_id), kind)
            }
            Normalized::RequestResolved { request_id } => {
                let approval = {
                    let mut approvals = lock(&self.approvals);
                    let found = approvals
                        .iter()
                        .find(|(_, p)| {
                            Arc::ptr_eq(&p.backend, backend) && p.request_id == request_id
                        })
                        .map(|(id, _)| id.clone());
                    if let Some(id) = &found {
                        approvals.remove(id);
                    }
                    found
                };
                self.input_withdrawn(backend, &session_id, &request_id)
                    .await;
                if let Some(approval_id) = approval {
                    self.store(
                        &session_id,
                        EventKind::ApprovalResolved(ApprovalResolved {
                            approval_id,
                            decision: None,
                            by: "runtime".into(),
                        }),
                    )
                    .await;
                }
            }
            Normalized::GoalCleared => {
                let had_goal = self.core.read(|state| {
                    state
                        .sessions
                        .get(&session_id)
                        .is_some_and(|s| s.goal.is_some())
                });
                if had_goal {
                    self.store(&session_id, EventKind::GoalCleared(Empty {}))
                        .await;
                }
            }
        }
    }

    /// Closes items left open by a turn (an interrupt drops them without `item/completed`),
    /// then stores the turn's end.
    /// Closes what the turn left open: items started and not completed get the turn's end
    /// status; an agent message that was still streaming when the turn was interrupted or failed
    /// is stored with the text it had, marked `interrupted`.
    async fn end_turn(self: &Arc<Self>, live: &Arc<Live>, done: TurnCompleted) {
        let dangling: Vec<(String, Item)> = {
            let mut turn = lock(&live.turn);
            if turn.current.as_deref() == Some(done.turn_id.as_str()) {
                turn.current = None;
            }
            let ids: Vec<String> = turn
                .open_items
                .iter()
                .filter(|(_, (turn_id, _))| *turn_id == done.turn_id)
                .map(|(id, _)| id.clone())
                .collect();
            let mut dangling: Vec<(String, Item)> = ids
                .into_iter()
                .filter_map(|id| turn.open_items.remove(&id))
                .collect();
            let streamed: Vec<String> = turn
                .streaming
                .iter()
                .filter(|(_, (turn_id, _))| *turn_id == done.turn_id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in streamed {
                // A turn that completed abandoned this stream (a steer restarts the model's
                // answer): codex keeps nothing of it, nor does cohost.
                if let Some((turn_id, text)) = turn.streaming.remove(&id)
                    && done.status != TurnStatus::Completed
                {
                    dangling.push((
                        turn_id,
                        Item::AgentMessage {
                            id,
                            text,
                            interrupted: true,
                        },
                    ));
                }
            }
            dangling
        };
        let end_status = match done.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        };
        for (turn_id, mut item) in dangling {
            match &mut item {
                Item::Command { status, .. }
                | Item::FileChange { status, .. }
                | Item::Tool { status, .. } => {
                    *status = end_status.to_string();
                }
                _ => {}
            }
            self.store(
                &live.session_id,
                EventKind::ItemCompleted(ItemEvent { turn_id, item }),
            )
            .await;
        }
        self.store(&live.session_id, EventKind::TurnCompleted(done))
            .await;
    }

    async fn server_request(
        self: &Arc<Self>,
        backend: &Arc<Backend>,
        id: RequestId,
        method: &str,
        params: &Value,
    ) {
        let session_id = normalize::thread_id(params)
            .and_then(|thread| lock(&backend.threads).get(thread).cloned());
        if let Some(session_id) = &session_id
            && let Some(request) = normalize::input_request(method, params, &id.to_string())
        {
            self.input_requested(backend, session_id, id, request).await;
            return;
        }
        let (Some(session_id), Some(approval)) =
            (session_id, normalize::approval_request(method, params))
        else {
            // Nothing here can answer it; refuse so codex does not wait forever.
            tracing::info!(
                method,
                "refusing a codex server request cohost does not relay"
            );
            let _ = backend
                .rpc
                .respond_error(id, -32601, &format!("cohost does not handle {method}"))
                .await;
            return;
        };
        lock(&self.approvals).insert(
            approval.approval_id.clone(),
            PendingRequest {
                session_id: session_id.clone(),
                backend: Arc::clone(backend),
                request_id: id,
            },
        );
        self.store(&session_id, EventKind::ApprovalRequested(approval))
            .await;
        self.report(&session_id, AgentStatus::Waiting).await;
    }

    /// Appends, treating a duplicate (already stored) as success.
    async fn store(&self, session_id: &str, kind: EventKind) {
        match self.core.append(Some(session_id.to_string()), kind).await {
            Ok(_) | Err(CoreError::Duplicate) => {}
            Err(error) => {
                tracing::error!(session = session_id, %error, "could not store a codex event")
            }
        }
    }

    fn goal_active(&self, session_id: &str) -> bool {
        self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .and_then(|s| s.goal.as_ref())
                .and_then(|goal| goal.get("status"))
                .and_then(Value::as_str)
                == Some("active")
        })
    }

    /// Mirrors the session's state into the tracker as agent `codex` in the tmux session whose
    /// directory matches the session's cwd, when there is one. A tmux session holding panes
    /// cohost opened (the `cohost` session of the TUIs, created in a session's cwd) matches
    /// that directory too: the project's own session is preferred, that one only as a fallback.
    async fn report(&self, session_id: &str, status: AgentStatus) {
        let Some((cwd, thread_id)) = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.created.cwd.clone(), s.thread_id.clone()))
        }) else {
            return;
        };
        let thread = thread_id.unwrap_or_else(|| session_id.to_string());
        mirror::report(
            &self.core,
            &self.tmux,
            Report {
                agent: "codex",
                thread_id: &thread,
                session_id,
                placement: Placement::Cwd(&cwd),
                status,
                liveness: crate::protocol::Liveness::Alive,
            },
        )
        .await;
    }

    /// Replaces a dead backend and resumes every thread it served.
    async fn restart(self: &Arc<Self>, dead: Arc<Backend>) {
        {
            let mut backends = self.backends.lock().await;
            if backends
                .get(&dead.key)
                .is_some_and(|b| Arc::ptr_eq(b, &dead))
            {
                backends.remove(&dead.key);
            }
        }
        lock(&self.approvals).retain(|_, pending| !Arc::ptr_eq(&pending.backend, &dead));
        let sessions: Vec<(String, String)> = lock(&dead.threads)
            .iter()
            .map(|(thread, session)| (session.clone(), thread.clone()))
            .collect();
        for (session_id, _) in &sessions {
            let live = self.live_for(session_id);
            live.binding.send_replace(None);
            self.status(
                session_id,
                SessionState::Restarting,
                Some("the codex backend exited".into()),
            )
            .await;
        }
        let mut attempt = 0;
        let backend = loop {
            attempt += 1;
            if self.cancel.is_cancelled() {
                return;
            }
            match self.backend(dead.budget.as_ref()).await {
                Ok(backend) => break backend,
                Err(error) if attempt < RESTART_ATTEMPTS => {
                    tracing::warn!(%error, attempt, "codex backend restart failed; retrying");
                    tokio::time::sleep(RESTART_BACKOFF * attempt).await;
                }
                Err(error) => {
                    for (session_id, _) in &sessions {
                        self.status(session_id, SessionState::Lost, Some(error.to_string()))
                            .await;
                    }
                    return;
                }
            }
        };
        for (session_id, thread_id) in sessions {
            let live = self.live_for(&session_id);
            if let Err(error) = self
                .rebind(&live, &thread_id, Some(Arc::clone(&backend)))
                .await
            {
                tracing::warn!(session = %session_id, %error, "could not resume the thread");
                self.status(&session_id, SessionState::Lost, Some(error.to_string()))
                    .await;
                continue;
            }
            // A co-driving TUI lost its server with the old backend: point it at the new one.
            let has_pane = self.core.read(|state| {
                state
                    .sessions
                    .get(&session_id)
                    .is_some_and(|s| s.pane.is_some())
            });
            if has_pane {
                let host = CodexHost {
                    inner: Arc::clone(self),
                };
                if let Err(error) = host.relaunch_terminal(&session_id).await {
                    tracing::warn!(session = %session_id, %error, "could not relaunch the terminal");
                }
            }
        }
    }
}

/// `cohost doctor` and `GET /api/doctor`: what cohost needs from codex, checked.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Doctor {
    pub ok: bool,
    pub codex_found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_in: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_mode: Option<String>,
    pub session_store_writable: bool,
    pub codex_sessions_readable: bool,
    /// The codex releases cohost is tested with.
    pub codex_supported: crate::peers::Supported,
    /// Where `codexVersion` lies: `older`, `tested` or `newer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version_place: Option<crate::peers::Place>,
    pub issues: Vec<String>,
    /// What works but deserves a look (a release outside the tested range).
    pub warnings: Vec<String>,
}

impl CodexHost {
    pub async fn doctor(&self) -> Doctor {
        let mut issues = Vec::new();
        let (codex_found, codex_path, codex_version) = match &self.inner.codex {
            Ok(bin) => {
                let mut bin = bin.clone();
                let scratch = self
                    .inner
                    .config
                    .cohost_home
                    .join("codex")
                    .join("doctor-home");
                let _ = std::fs::create_dir_all(&scratch);
                let version = match bin.detect_version(&scratch).await {
                    Ok(version) => Some(version),
                    Err(error) => {
                        issues.push(format!("`codex --version` failed: {error}"));
                        None
                    }
                };
                (true, Some(bin.path.display().to_string()), version)
            }
            Err(error) => {
                issues.push(error.clone());
                (false, None, None)
            }
        };
        let (mut logged_in, mut auth_mode) = (None, None);
        if let Ok(bin) = &self.inner.codex {
            let mut command = tokio::process::Command::new(&bin.path);
            command.args(["login", "status"]).kill_on_drop(true);
            if let Some(home) = &self.inner.config.user_codex_home {
                command.env("CODEX_HOME", home);
            }
            match tokio::time::timeout(Duration::from_secs(10), command.output()).await {
                Ok(Ok(output)) => {
                    let text = format!(
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    );
                    let lower = text.to_lowercase();
                    let yes = output.status.success()
                        && lower.contains("logged in")
                        && !lower.contains("not logged in");
                    logged_in = Some(yes);
                    if yes {
                        auth_mode = Some(if lower.contains("api key") {
                            "apiKey".to_string()
                        } else if lower.contains("chatgpt") {
                            "chatgpt".to_string()
                        } else {
                            text.trim().lines().next().unwrap_or("").to_string()
                        });
                    } else {
                        issues.push(format!(
                            "codex is not logged in (`codex login status`: {}); a custom model provider in config.toml still works",
                            text.trim().lines().next().unwrap_or("no output")
                        ));
                    }
                }
                Ok(Err(error)) => {
                    issues.push(format!("`codex login status` could not run: {error}"))
                }
                Err(_) => issues.push("`codex login status` timed out".into()),
            }
        }
        let store = self.inner.config.cohost_home.join("codex");
        let session_store_writable =
            std::fs::create_dir_all(&store).is_ok() && probe_writable(&store);
        if !session_store_writable {
            issues.push(format!(
                "the session store {} is not writable",
                store.display()
            ));
        }
        let sessions_dir = self
            .inner
            .config
            .user_codex_home
            .clone()
            .map(|home| home.join("sessions"));
        let codex_sessions_readable = match &sessions_dir {
            Some(dir) if dir.exists() => std::fs::read_dir(dir).is_ok(),
            // No sessions yet is fine: there is nothing to read.
            Some(_) => true,
            None => false,
        };
        if !codex_sessions_readable {
            issues.push(match &sessions_dir {
                Some(dir) => format!("codex sessions in {} are not readable", dir.display()),
                None => "no CODEX_HOME or HOME to find codex sessions in".into(),
            });
        }
        let codex_version_place = codex_version
            .as_deref()
            .and_then(|v| crate::peers::CODEX.place(v));
        let warnings = codex_version
            .as_deref()
            .and_then(|v| crate::peers::CODEX.warning(v))
            .into_iter()
            .collect();
        Doctor {
            ok: issues.is_empty(),
            codex_found,
            codex_path,
            codex_version,
            codex_supported: crate::peers::CODEX,
            codex_version_place,
            warnings,
            logged_in,
            auth_mode,
            session_store_writable,
            codex_sessions_readable,
            issues,
        }
    }
}

fn probe_writable(dir: &Path) -> bool {
    let probe = dir.join(".cohost-write-probe");
    let ok = std::fs::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

#[cfg(test)]
mod tests {
    #[test]
    fn running_turn_is_read_from_the_steer_error() {
        let message = "expected active turn id `bogus-turn` but found `01a2276c-3b0c`";
        assert_eq!(
            super::running_turn_in(message).as_deref(),
            Some("01a2276c-3b0c")
        );
        assert_eq!(super::running_turn_in("no active turn to steer"), None);
    }
}
