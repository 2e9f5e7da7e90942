//! The codex host: `CodexHost`, its shared state (`Inner`: backends, live sessions, pending
//! approvals and input requests) and the session API — create, restore, view, list, close.
//!
//! cohost is the single writer of each live thread: it creates the thread on a backend it
//! spawned, and one dispatch task per backend is the only producer of the thread's events — every
//! notification of every turn (started by cohost, by a goal, or by another client) is normalized
//! and appended to the core in the order codex sent it. Injects are serialized per session, so two
//! injects can never open two turns. A backend that exits is restarted and its threads resumed;
//! the backfill that follows is deduplicated by the core, so nothing is forwarded twice.
//!
//! The rest, by concern: [`backend`] (spawn, restart, reap), [`binding`] (thread start, resume,
//! backfill), [`dispatch`] (the task per backend) with [`forwarder`] (the pure state machine it
//! drives), [`inject`] (inject, steer, interrupt), [`approvals`], [`asks`] (questions, plans,
//! modes), [`capabilities`] (goals, models, fork), [`terminal`] (co-driving), [`rehome`] (an adopted TUI moved under cohost) and [`doctor`].
//!
//! **Boundary:** the service reaches it through the `SessionHost` seam (the registry in
//! `runtime/mod.rs`); nothing outside `codex/` sees codex's JSON.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::process::{AppServerProcess, CodexBin};
use super::rpc::{RequestId, RpcClient, RpcError};
use super::wire;
use crate::core::CoreHandle;
use crate::protocol::{
    AgentStatus, Budget, EventKind, HostedSessionView, Runtime, SessionCreated, SessionState,
};
use crate::runtime::HostError;
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::common::new_session_id;
use crate::runtime::common::{hosted, lock, profile_secrets};
use crate::tmux::SessionCache;
use forwarder::Forwarder;

mod approvals;
mod asks;
mod backend;
mod binding;
mod capabilities;
mod dispatch;
mod doctor;
mod forwarder;
mod inject;
mod rehome;
mod terminal;

pub use asks::MODES;
pub use doctor::Doctor;
pub use terminal::WS_TOKEN_ENV;

/// How long an inject waits for a session's thread to be bound before answering `not_ready`.
pub const PARK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a per-budget backend may sit idle (no thread with a turn in flight) before it is
/// stopped. The base backend is kept for the daemon's life.
pub const BACKEND_IDLE_TTL: Duration = Duration::from_secs(600);
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// `$COHOST_HOME`; backend homes live under `codex/<key>/home`.
    pub cohost_home: PathBuf,
    /// The user's own CODEX_HOME, copied (never modified) into each backend home.
    pub user_codex_home: Option<PathBuf>,
    pub backend_idle_ttl: Duration,
    pub park_timeout: Duration,
    /// Where a backend's dispatch panic is recorded for health and doctor.
    pub failures: crate::failures::TaskFailures,
}

impl From<RpcError> for HostError {
    fn from(error: RpcError) -> Self {
        HostError::failed_by(Runtime::Codex, error.to_string(), error)
    }
}

#[derive(Debug, Clone, Default)]
pub struct CreateParams {
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub sandbox: Option<String>,
    pub budget: Option<Budget>,
    pub idempotency_key: Option<String>,
    pub profile: Option<crate::protocol::SessionProfile>,
}

/// What a session's profile adds to `thread/start` (and to `thread/resume` and `thread/fork`,
/// which start the thread again on a backend): its instructions as developer instructions, and
/// config overrides for its effort (`model_reasoning_effort`) and MCP servers
/// (`mcp_servers.NAME`: `command`, `args`, `env`, or `url`, `http_headers`).
pub fn profile_params(
    profile: Option<&crate::protocol::SessionProfile>,
) -> (
    Option<String>,
    Option<serde_json::Map<String, serde_json::Value>>,
) {
    use serde_json::{Value, json};
    let Some(profile) = profile else {
        return (None, None);
    };
    let mut config = serde_json::Map::new();
    if let Some(effort) = &profile.effort {
        config.insert("model_reasoning_effort".into(), Value::from(effort.clone()));
    }
    for (name, server) in &profile.mcp_servers {
        let mut table = serde_json::Map::new();
        if let Some(command) = &server.command {
            table.insert("command".into(), json!(command));
            if !server.args.is_empty() {
                table.insert("args".into(), json!(server.args));
            }
            if !server.env.is_empty() {
                table.insert("env".into(), json!(server.env));
            }
        }
        if let Some(url) = &server.url {
            table.insert("url".into(), json!(url));
            if !server.headers.is_empty() {
                table.insert("http_headers".into(), json!(server.headers));
            }
        }
        config.insert(format!("mcp_servers.{name}"), Value::Object(table));
    }
    (
        profile.instructions.clone(),
        (!config.is_empty()).then_some(config),
    )
}

/// The approval policies codex takes (0.169 and 0.171 refuse `on-failure` at `thread/start`, so
/// it is refused here with a clear error rather than leaving a session that cannot start).
pub const APPROVAL_POLICIES: [&str; 3] = ["untrusted", "on-request", "never"];
pub const SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

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
    cancel: CancellationToken,
    /// The codex TUIs started by hand that sessions drive in their panes.
    adoptions: Arc<super::adopt::Adoptions>,
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

struct Live {
    session_id: String,
    /// A terminal pane waits for the thread's first turn before the TUI can resume it.
    terminal_pending: std::sync::atomic::AtomicBool,
    binding: watch::Sender<Option<Binding>>,
    inject: tokio::sync::Mutex<()>,
    /// The forwarder's state: the turn codex runs, items and messages in flight.
    turn: Mutex<Forwarder>,
    /// The model the thread runs, from codex's thread answers (a collaboration mode names it).
    model: Mutex<Option<String>>,
}

struct PendingRequest {
    session_id: String,
    backend: Arc<Backend>,
    request_id: RequestId,
}

fn text_input(text: &str) -> Vec<wire::UserInput> {
    vec![wire::UserInput::text(text)]
}

impl CodexHost {
    pub fn new(core: CoreHandle, tmux: Arc<SessionCache>, config: HostConfig) -> Self {
        let codex = super::process::find_codex().map_err(|e| e.to_string());
        if let Err(error) = &codex {
            tracing::warn!(%error, "codex not found; codex sessions are unavailable");
        }
        let adoptions = Arc::new(super::adopt::Adoptions::new(
            core.clone(),
            tmux.clone(),
            &config.cohost_home,
            config.failures.clone(),
        ));
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
                cancel: CancellationToken::new(),
                adoptions,
            }),
        }
    }

    pub(in crate::runtime::codex) fn core(&self) -> &CoreHandle {
        &self.inner.core
    }

    /// The codex TUIs adopted in their panes.
    pub(in crate::runtime::codex) fn adoptions(&self) -> &Arc<super::adopt::Adoptions> {
        &self.inner.adoptions
    }

    pub fn codex_bin(&self) -> Result<&CodexBin, &str> {
        self.inner.codex.as_ref().map_err(String::as_str)
    }

    /// Where `codex --version` may write what it writes at start (not the user's home).
    pub(in crate::runtime::codex) fn scratch_home(&self) -> PathBuf {
        self.inner
            .config
            .cohost_home
            .join("codex")
            .join("doctor-home")
    }

    /// Re-attaches every session the log says is open: after a daemon restart, their threads are
    /// resumed on fresh backends and backfilled.
    pub(in crate::runtime::codex) async fn restore(&self) {
        let sessions: Vec<(String, Option<String>)> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Codex && !s.is_closed())
                // An adopted TUI is followed from its rollout, never resumed on a backend.
                .filter(|s| s.adopted.is_none())
                .map(|s| (s.id.clone(), s.thread_id.clone()))
                .collect()
        });
        for (session_id, thread_id) in sessions {
            let live = self.inner.live_for(&session_id);
            hosted::resuming_lost(&self.inner.core, &live.session_id).await;
            let host = self.clone();
            tokio::spawn(async move {
                let result = match thread_id {
                    Some(thread_id) => host.inner.rebind(&live, &thread_id, None).await,
                    None => host.inner.bind_new(&live).await,
                };
                if let Err(error) = result {
                    tracing::warn!(session = %live.session_id, %error, "could not restore the session");
                    // The backend that ran its turn went with the daemon, and none took it up.
                    let cut = "the daemon stopped during the turn";
                    hosted::end_cut_turn(&host.inner.core, &live.session_id, Runtime::Codex, cut)
                        .await;
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
    pub(in crate::runtime::codex) async fn create(
        &self,
        params: CreateParams,
    ) -> Result<HostedSessionView, HostError> {
        if let Err(error) = &self.inner.codex {
            return Err(HostError::unavailable(Runtime::Codex, error.clone()));
        }
        let session_id = new_session_id();
        let profile = self
            .inner
            .record_profile(&session_id, params.profile.as_ref())?;
        let created = SessionCreated {
            runtime: Runtime::Codex,
            cwd: params.cwd.to_string_lossy().into_owned(),
            model: params.model,
            approval_policy: params.approval_policy.map(Into::into),
            permission_mode: None,
            sandbox: params.sandbox.map(Into::into),
            budget: params.budget,
            forked_from: None,
            idempotency_key: params.idempotency_key,
            profile,
        };
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let live = self.inner.live_for(&session_id);
        if let Err(error) = self.inner.bind_new(&live).await {
            self.inner
                .status(&session_id, SessionState::Lost, Some(error.to_string()))
                .await;
            return Err(error);
        }
        self.view(&session_id)
    }

    pub(in crate::runtime::codex) fn view(
        &self,
        session_id: &str,
    ) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    /// Closes a session: interrupts its turn, unsubscribes from its thread, and logs the end.
    pub(in crate::runtime::codex) async fn close(&self, session_id: &str) -> Result<(), HostError> {
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
        hosted::record_closed(&self.inner.core, session_id).await
    }
}

impl Inner {
    fn live_for(&self, session_id: &str) -> Arc<Live> {
        hosted::live_entry(&self.live, session_id, || Live {
            session_id: session_id.to_string(),
            terminal_pending: std::sync::atomic::AtomicBool::new(false),
            binding: watch::channel(None).0,
            inject: tokio::sync::Mutex::new(()),
            model: Mutex::new(None),
            // Items a previous run left open are closed when their turn ends.
            turn: Mutex::new(Forwarder::with_open_items(self.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .map(|s| {
                        s.open_items
                            .iter()
                            .map(|(id, item)| {
                                (id.clone(), (item.turn_id.clone(), item.item.clone()))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            }))),
        })
    }

    /// The live session, or why there is none.
    fn live_session(&self, session_id: &str) -> Result<Arc<Live>, HostError> {
        hosted::check_open(&self.core, session_id, Runtime::Codex)?;
        Ok(self.live_for(session_id))
    }

    async fn wait_bound(&self, live: &Live) -> Result<Binding, HostError> {
        hosted::wait_bound(&live.binding, self.config.park_timeout, &live.session_id).await
    }

    async fn status(&self, session_id: &str, state: SessionState, message: Option<String>) {
        hosted::status(&self.core, session_id, state, message).await
    }

    /// The session's `session.created`, its profile with the secrets kept apart restored.
    fn settings(&self, session_id: &str) -> Option<SessionCreated> {
        let mut settings = hosted::settings(&self.core, session_id)?;
        if let Some(profile) = &settings.profile {
            settings.profile = Some(Box::new(profile_secrets::restore(
                &self.config.cohost_home,
                session_id,
                profile,
            )));
        }
        Some(settings)
    }

    /// What `session.created` records of `profile` for `session_id`: its secrets redacted, kept
    /// apart for a restart and a fork.
    fn record_profile(
        &self,
        session_id: &str,
        profile: Option<&crate::protocol::SessionProfile>,
    ) -> Result<Option<Box<crate::protocol::SessionProfile>>, HostError> {
        profile
            .map(|profile| {
                profile_secrets::record(&self.config.cohost_home, session_id, profile)
                    .map(Box::new)
                    .map_err(|error| {
                        HostError::failed(
                            Runtime::Codex,
                            format!("cannot keep the profile's secrets: {error}"),
                        )
                    })
            })
            .transpose()
    }

    /// Appends, treating a duplicate (already stored) as success.
    async fn store(&self, session_id: &str, kind: EventKind) {
        hosted::store(&self.core, session_id, kind, Runtime::Codex).await
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
}

/// `$CODEX_HOME`, else `~/.codex`: the user's codex home that backend homes are prepared from.
pub fn user_codex_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".codex"))
}
