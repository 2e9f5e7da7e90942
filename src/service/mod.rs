//! The service layer: every operation a surface offers — hosted sessions, events with the
//! blocking wait, the tracker, approvals, tasks — once, with one error type. HTTP and MCP are
//! thin siblings over it: they parse their own requests, call a [`Service`] method, and map a
//! [`ServiceError`] to their own answer in one place each (`http::error`, `mcp`). Nothing here
//! knows HTTP or MCP, and runtimes are reached only through the [`Hosts`] registry.

mod adopt;
mod claude_hooks;
mod events;
mod failures;
mod hub;
mod hub_tasks;
mod keys;
mod machine;
pub mod profiles;
mod profiles_api;
mod requests;
mod sessions;
mod tasks;
mod tracker;
mod watch;

pub use failures::{MAX_FAILED_TASKS, TaskFailures};

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// What the surfaces see of an event: its routing fields and its exact line.
pub use crate::core::StoredEvent;
pub use events::{DEFAULT_LIMIT, EventsRead, MAX_LIMIT, MAX_WAIT_SECS, Page, Window};

pub use claude_hooks::{ClaudeDriver, HookRoute};
pub use hub::{
    COMMAND_TIMEOUT, ColdEvents, CommandRequest, DEFAULT_HUB_MEMORY, HubWorld, MAX_REMOTE_LIMIT,
    RemoteEvent, RemotePage, RemoteView, qualify, task_source,
};
pub use hub_tasks::HUB_TASK_PREFIX;
pub use machine::FederationStatus;
pub use sessions::CreateRequest;
pub use tasks::{MAX_RESULT_CHUNK, lease_check};
pub use tracker::RefreshAnswer;

use crate::core::CoreError;
use crate::core::CoreHandle;
use crate::core::event_log::ReadError;
use crate::protocol::codes;
use crate::protocol::{Field, FieldError, Message, Runtime};
use crate::runtime::{AdoptRefusal, HostError, Hosts, SessionHost};
use crate::tasks::{TaskError, TaskManager};
use crate::tmux::SessionCache;

/// Everything the surfaces share. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    core: CoreHandle,
    tmux: Arc<SessionCache>,
    hosts: Hosts,
    tasks: TaskManager,
    /// Project roots under which MCP clients may start sessions (none: they may not).
    mcp_roots: Arc<Vec<PathBuf>>,
    /// Cancelled on shutdown so that waits end.
    shutdown: CancellationToken,
    /// The passive watchers (`explain`, counters); disabled with `--no-watchers`.
    watch: crate::watch::WatchHandle,
    /// The idempotency keys whose creates are in flight.
    create_keys: Arc<keys::KeyLocks>,
    /// This daemon's machine name and its publisher's status (`with_machine`).
    machine: machine::MachineInfo,
    /// The config file's agent profiles (`[profiles.NAME]`), replaced whole by a reload.
    profiles: profiles::Held,
    /// The daemon-long tasks that panicked (`failures`).
    task_failures: TaskFailures,
}

/// What a [`Service`] is made of: the daemon's parts, each shared with the tasks that run
/// beside the surfaces. The surfaces see none of them, only the service's methods.
pub struct ServiceParts {
    pub core: CoreHandle,
    pub tmux: Arc<SessionCache>,
    pub hosts: Hosts,
    pub tasks: TaskManager,
    /// Project roots under which MCP clients may start sessions (none: they may not).
    pub mcp_roots: Vec<PathBuf>,
    /// Cancelled on shutdown so that waits end.
    pub shutdown: CancellationToken,
    /// The passive watchers (`explain`, counters); disabled with `--no-watchers`.
    pub watch: crate::watch::WatchHandle,
    /// The config file's agent profiles, validated.
    pub profiles: profiles::Profiles,
    /// Reads and validates them again (`POST /api/profiles/reload`, SIGHUP); `None`: the
    /// daemon has no config file to read them from again.
    pub profiles_reload: Option<profiles::Reload>,
}

impl Service {
    pub fn new(parts: ServiceParts) -> Service {
        let task_failures = parts.hosts.task_failures();
        Service {
            core: parts.core,
            tmux: parts.tmux,
            hosts: parts.hosts,
            tasks: parts.tasks,
            mcp_roots: Arc::new(parts.mcp_roots),
            shutdown: parts.shutdown,
            watch: parts.watch,
            create_keys: Arc::default(),
            machine: machine::MachineInfo::default(),
            profiles: profiles::Held::new(parts.profiles, parts.profiles_reload),
            task_failures,
        }
    }

    /// Where the daemon records its tasks' panics, for health and doctor to show.
    pub fn task_failures(&self) -> TaskFailures {
        self.task_failures.clone()
    }

    /// Cancelled when the daemon shuts down (a surface ends its own waits with it).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// The class of a [`ServiceError`]: what kind of refusal it is, whatever the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is wrong (a field, a value, a combination).
    Invalid,
    /// What it names does not exist.
    NotFound,
    /// It clashes with the current state (resolved, closed, revision, someone typing).
    Conflict,
    /// The cursor fell out of retention.
    Gone,
    /// A bound was reached (queue, instances).
    TooMany,
    /// Not now: not ready, not installed, overloaded, shutting down.
    Unavailable,
    /// The agent's runtime failed us.
    Upstream,
    /// Storage failed.
    Internal,
    /// Not allowed for this caller (a root outside the allowed ones, a human's lease).
    Forbidden,
}

/// Why a service operation failed: its class, a stable code, a message for people, and the
/// request field it concerns when one does. The field, and every field the message names, is a
/// [`Field`] value, so each surface names them its own way (HTTP `idempotencyKey`, MCP
/// `idempotency_key`); `Display` uses the HTTP API's names.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceError {
    pub kind: ErrorKind,
    pub code: &'static str,
    pub message: Message,
    pub field: Option<Field>,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.message.fmt(f)
    }
}

impl std::error::Error for ServiceError {}

impl ServiceError {
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<Message>) -> Self {
        ServiceError {
            kind,
            code,
            message: message.into(),
            field: None,
        }
    }

    /// A wrong field (`invalid_field`).
    pub fn field(field: Field, message: impl Into<Message>) -> Self {
        ServiceError {
            field: Some(field),
            ..ServiceError::new(ErrorKind::Invalid, codes::INVALID_FIELD, message)
        }
    }

    pub fn invalid(message: impl Into<Message>) -> Self {
        ServiceError::new(ErrorKind::Invalid, codes::INVALID_REQUEST, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<Message>) -> Self {
        ServiceError::new(ErrorKind::NotFound, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<Message>) -> Self {
        ServiceError::new(ErrorKind::Conflict, code, message)
    }

    pub fn with_field(self, field: Field) -> Self {
        ServiceError {
            field: Some(field),
            ..self
        }
    }

    pub fn unknown_session(id: &str) -> Self {
        ServiceError::not_found(codes::SESSION_NOT_FOUND, format!("no session `{id}`"))
    }
}

impl From<FieldError> for ServiceError {
    fn from(error: FieldError) -> Self {
        ServiceError::field(error.field, error.message)
    }
}

impl From<CoreError> for ServiceError {
    fn from(error: CoreError) -> Self {
        match &error {
            CoreError::Overloaded => {
                ServiceError::new(ErrorKind::Unavailable, codes::OVERLOADED, error.to_string())
            }
            // The daemon stops on a failure too; a client retries against its restart.
            CoreError::ShuttingDown | CoreError::Failed => ServiceError::new(
                ErrorKind::Unavailable,
                codes::SHUTTING_DOWN,
                error.to_string(),
            ),
            CoreError::TooManyInstances { .. } | CoreError::TooManyTokenless { .. } => {
                ServiceError::new(
                    ErrorKind::TooMany,
                    codes::TOO_MANY_INSTANCES,
                    error.to_string(),
                )
            }
            CoreError::Duplicate => {
                ServiceError::new(ErrorKind::Conflict, codes::DUPLICATE, error.to_string())
            }
            // Only guarded appends (the watcher's) can be superseded; no surface makes one.
            CoreError::Superseded => {
                ServiceError::new(ErrorKind::Conflict, codes::CONFLICT, error.to_string())
            }
            CoreError::Storage(_) => {
                // The answer stays short; the log keeps the directory and the I/O error.
                tracing::error!(causes = %chain(&error), "event log write failed");
                ServiceError::new(
                    ErrorKind::Internal,
                    codes::STORAGE_ERROR,
                    "the event log could not be written; nothing was recorded",
                )
            }
        }
    }
}

impl From<ReadError> for ServiceError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::CursorExpired { .. } => {
                ServiceError::new(ErrorKind::Gone, codes::CURSOR_EXPIRED, error.to_string())
            }
            ReadError::Io { .. } => {
                tracing::error!(%error, "event log read failed");
                ServiceError::new(
                    ErrorKind::Internal,
                    codes::STORAGE_ERROR,
                    "the event log could not be read",
                )
            }
        }
    }
}

impl From<HostError> for ServiceError {
    fn from(error: HostError) -> Self {
        let message = error.to_string();
        match error {
            HostError::Invalid(_) => ServiceError::invalid(message),
            HostError::InvalidField { field, message } => ServiceError::field(field, message),
            HostError::Unsupported(_) => {
                ServiceError::new(ErrorKind::Invalid, codes::UNSUPPORTED, message)
            }
            HostError::UnknownSession(_) => {
                ServiceError::not_found(codes::SESSION_NOT_FOUND, message)
            }
            HostError::Closed(_) | HostError::ClosedBecause(_) => {
                ServiceError::conflict(codes::SESSION_CLOSED, message)
            }
            HostError::NotReady(_) | HostError::NotReadyBecause(_) => {
                ServiceError::new(ErrorKind::Unavailable, codes::NOT_READY, message)
            }
            HostError::HumanTyping(_) => ServiceError::conflict(codes::HUMAN_TYPING, message),
            HostError::Unavailable { runtime, .. } => {
                log_causes(&error);
                ServiceError::new(ErrorKind::Unavailable, runtime.unavailable_code(), message)
            }
            HostError::Failed { runtime, .. } => {
                log_causes(&error);
                ServiceError::new(ErrorKind::Upstream, runtime.error_code(), message)
            }
            HostError::UnknownApproval(_) => {
                ServiceError::not_found(codes::APPROVAL_NOT_FOUND, message)
            }
            HostError::ApprovalResolved(_) => {
                ServiceError::conflict(codes::APPROVAL_RESOLVED, message)
            }
            HostError::UnknownRequest(_) => {
                ServiceError::not_found(codes::REQUEST_NOT_FOUND, message)
            }
            HostError::RequestResolved(_) => {
                ServiceError::conflict(codes::REQUEST_RESOLVED, message)
            }
            HostError::CannotAdopt { refusal, .. } => ServiceError::conflict(
                match refusal {
                    AdoptRefusal::PaneGone => codes::PANE_GONE,
                    AdoptRefusal::AgentExited => codes::AGENT_EXITED,
                    AdoptRefusal::PaneChanged => codes::PANE_CHANGED,
                    AdoptRefusal::NotAdoptable => codes::NOT_ADOPTABLE,
                    AdoptRefusal::AlreadyDriven => codes::ALREADY_DRIVEN,
                },
                message,
            ),
            HostError::NotAdopted(_) => ServiceError::conflict(codes::NOT_ADOPTED, message),
            HostError::Busy(_) => ServiceError::conflict(codes::BUSY, message),
            HostError::ScreenMismatch(_) => ServiceError::conflict(codes::SCREEN_MISMATCH, message),
            HostError::Core(core) => ServiceError::from(core),
        }
    }
}

/// Logs the causes of a runtime's failure (when it kept any) where it becomes a
/// [`ServiceError`]: the answer carries the message, the log the whole chain, once.
fn log_causes(error: &HostError) {
    let (HostError::Failed {
        runtime,
        source: Some(_),
        ..
    }
    | HostError::Unavailable {
        runtime,
        source: Some(_),
        ..
    }) = error
    else {
        return;
    };
    tracing::warn!(%runtime, causes = %chain(error), "a runtime failed");
}

/// An error's causes, innermost last, joined by ": ". A cause the error before it already
/// ends with (a message that quotes its source) is not repeated.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut last = text.clone();
    let mut next = error.source();
    while let Some(cause) = next {
        let cause_text = cause.to_string();
        if !last.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        last = cause_text;
        next = cause.source();
    }
    text
}

impl From<TaskError> for ServiceError {
    fn from(error: TaskError) -> Self {
        let message = error.to_string();
        match error {
            TaskError::Invalid(message) => ServiceError::invalid(message),
            TaskError::UnknownTask(_) => ServiceError::not_found(codes::TASK_NOT_FOUND, message),
            TaskError::UnknownSession(_) => {
                ServiceError::not_found(codes::SESSION_NOT_FOUND, message)
            }
            TaskError::Closed(_) => ServiceError::conflict(codes::SESSION_CLOSED, message),
            TaskError::Conflict { .. } => ServiceError::conflict(codes::REVISION_CONFLICT, message),
            TaskError::NotWaiting { .. } => ServiceError::conflict(codes::NOT_WAITING, message),
            TaskError::QueueFull(_) => {
                ServiceError::new(ErrorKind::TooMany, codes::QUEUE_FULL, message)
            }
            TaskError::EditLimit(_) => ServiceError::conflict(codes::EDIT_LIMIT, message),
            TaskError::Core(core) => ServiceError::from(core),
        }
    }
}

impl Service {
    /// The runtime of a session, or `session_not_found`.
    pub fn runtime_of(&self, id: &str) -> Result<Runtime, ServiceError> {
        self.core
            .read(|s| s.sessions.get(id).map(|r| r.created.runtime))
            .ok_or_else(|| ServiceError::unknown_session(id))
    }

    /// The host of a session's runtime.
    pub fn host_of(&self, id: &str) -> Result<Arc<dyn SessionHost>, ServiceError> {
        let runtime = self.runtime_of(id)?;
        self.host(runtime)
    }

    /// The host of a runtime.
    pub fn host(&self, runtime: Runtime) -> Result<Arc<dyn SessionHost>, ServiceError> {
        self.hosts.get(runtime).cloned().ok_or_else(|| {
            ServiceError::new(
                ErrorKind::Unavailable,
                codes::UNSUPPORTED,
                format!("this daemon hosts no {runtime} sessions"),
            )
        })
    }
}

#[cfg(test)]
mod tests;
