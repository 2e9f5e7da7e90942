//! The answers of the hosted-session, approval, input-request, task and lease routes, and of
//! the MCP tools that share them: one struct per body, so HTTP and MCP cannot drift apart and
//! the schema drift test sees every field (`docs/api.md` documents each).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ApprovalRequested, ApprovalResolved, HostedSessionView, InjectState, InputRequested,
    InputResolved, Lease, TaskView,
};

/// `{"ok": true}`: done, nothing more to say (`DELETE /api/sessions/{id}`, `PUT …/mode`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Done {
    pub ok: bool,
}

impl Done {
    pub const OK: Done = Done { ok: true };
}

/// What an inject did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InjectOutcome {
    pub outcome: InjectState,
    /// The turn it started or joined (for `queued`: the turn it waits behind).
    pub turn_id: String,
    /// True when an idempotency key matched an earlier inject: nothing was sent again.
    pub duplicate: bool,
}

/// A capability answer: `{ok:true,data}` or `{ok:false,reason,message}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capability {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// `unsupported`, `no_active_thread` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Capability {
    pub fn ok(data: Value) -> Self {
        Capability {
            ok: true,
            data: Some(data),
            reason: None,
            message: None,
        }
    }

    pub fn fail(reason: &str, message: impl Into<String>) -> Self {
        Capability {
            ok: false,
            data: None,
            reason: Some(reason.to_string()),
            message: Some(message.into()),
        }
    }
}

/// `POST /api/sessions` (`201`): the session, and what became of its first prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedReply {
    pub session: HostedSessionView,
    /// The task that tracks the first prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject: Option<InjectOutcome>,
    /// The first prompt was not sent (the session exists anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject_error: Option<InjectError>,
}

/// Why a session's first prompt was not sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InjectError {
    /// The error code the prompt's send failed with.
    pub code: String,
    pub message: String,
}

/// `GET /api/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<HostedSessionView>,
}

/// MCP `list_sessions`: the sessions that fit in one answer, how many there are, and a note
/// when some were left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionPage {
    pub sessions: Vec<HostedSessionView>,
    pub total: usize,
}

/// One session (`POST /api/sessions/{id}/fork`, `…/terminal/open`, MCP `get_session`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionReply {
    pub session: HostedSessionView,
}

/// MCP `start_session`: the session, and the task that tracks its first prompt (absent when
/// none was given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionStarted {
    pub session: HostedSessionView,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskView>,
}

/// MCP `fork`: `{ok: true, session}` (the new session), or `{ok: false, reason, message}` as a
/// [`Capability`] says it when the runtime cannot fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkReply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<HostedSessionView>,
    /// `unsupported`, `no_active_thread` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `POST /api/sessions/{id}/messages`: what the inject did, and the task that records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptSent {
    #[serde(flatten)]
    pub outcome: InjectOutcome,
    pub task_id: String,
}

/// `POST /api/sessions/{id}/interrupt`: `false` when nothing was running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interrupted {
    pub interrupted: bool,
}

/// `POST /api/sessions/{id}/seen`: how many of the session's tracker instances a person had
/// not seen yet (each now `idle`, seen); `0` when there was nothing new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Seen {
    pub seen: usize,
}

/// One approval of a session, pending or resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalEntry {
    pub request: ApprovalRequested,
    pub requested_at: u64,
    pub resolved: Option<ApprovalResolved>,
    pub pending: bool,
    /// At a hub, another machine's session as the hub names it (`laptop/<id>`): the id its
    /// answer is posted to. Absent on a machine's own sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `GET /api/sessions/{id}/approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalEntry>,
}

/// `POST /api/sessions/{id}/approvals/{approvalId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    pub ok: bool,
    pub approval_id: super::ApprovalId,
    pub decision: super::ApprovalDecision,
}

/// One input request of a session, pending or resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestEntry {
    pub request: InputRequested,
    pub requested_at: u64,
    pub resolved: Option<InputResolved>,
    pub resolved_at: Option<u64>,
    pub pending: bool,
    /// At a hub, another machine's session as the hub names it (`laptop/<id>`): the id its
    /// answer is posted to. Absent on a machine's own sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `GET /api/sessions/{id}/requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RequestList {
    pub requests: Vec<RequestEntry>,
}

/// `POST /api/sessions/{id}/requests/{requestId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestAnswered {
    pub ok: bool,
    pub request_id: String,
}

/// `GET`/`POST /api/sessions/{id}/lease`; a release also names the tasks it dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeaseReply {
    pub lease: Lease,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Vec<String>>,
}

/// `GET /api/tasks/{id}` (MCP `task_status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskReply {
    pub task: TaskView,
}

/// MCP `wait_task`: the task, and whether it finished within the wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskWaited {
    pub task: TaskView,
    pub finished: bool,
}

/// How to start the codex TUI attached to a session's thread (`GET /api/sessions/{id}/terminal`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TerminalSpec {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: std::collections::BTreeMap<String, String>,
}

/// One runtime's section of `cohost doctor` (`GET /api/doctor`): what stops it from working
/// (`issues`), what may (`warnings`), and the facts it found (binary, release, tested range…),
/// which differ from runtime to runtime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeDoctor {
    #[serde(default)]
    pub issues: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub details: serde_json::Map<String, Value>,
}

impl RuntimeDoctor {
    /// A runtime's own doctor struct as a section: its `issues` and `warnings`, and every
    /// other field it serializes as a detail.
    pub fn of(report: &impl Serialize) -> RuntimeDoctor {
        serde_json::to_value(report)
            .and_then(serde_json::from_value)
            .unwrap_or_else(|error| RuntimeDoctor {
                issues: vec![format!("the doctor report could not be read: {error}")],
                ..RuntimeDoctor::default()
            })
    }
}

/// `cohost doctor` (`GET /api/doctor`): `ok` when no runtime found an issue, every runtime's
/// issues (prefixed with its name, but for the first one's) and warnings, the first runtime's
/// details at the top level (as before other runtimes were covered), and each other runtime's
/// section under its name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorReport {
    pub ok: bool,
    pub issues: Vec<String>,
    pub warnings: Vec<String>,
    #[serde(flatten)]
    pub sections: serde_json::Map<String, Value>,
}

/// `GET /api/runtimes`: the runtimes this daemon hosts, in a stable order, and how a session of
/// each is started — what the web page's New session form offers, as each runtime says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeList {
    pub runtimes: Vec<RuntimeChoices>,
}

/// How a session of one runtime is started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeChoices {
    pub runtime: super::Runtime,
    /// The create field that says when the agent asks before acting.
    pub policy_field: PolicyField,
    /// Its values, the one a session gets when none is given first. `""` means "send none":
    /// the runtime's own configured default.
    pub policies: Vec<PolicyChoice>,
}

/// The create field a runtime's policy goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PolicyField {
    /// codex, OpenCode, Pi: `untrusted`, `on-request`, `never`.
    ApprovalPolicy,
    /// Claude: `default`, `acceptEdits`, `plan`, …
    PermissionMode,
}

/// One value of a runtime's policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyChoice {
    pub value: String,
    /// What it means, in a few words.
    pub label: String,
    /// False for a value this daemon does not allow (a create with it is refused).
    pub allowed: bool,
}

impl PolicyChoice {
    /// An allowed value.
    pub fn new(value: &str, label: &str) -> Self {
        PolicyChoice {
            value: value.to_string(),
            label: label.to_string(),
            allowed: true,
        }
    }
}
