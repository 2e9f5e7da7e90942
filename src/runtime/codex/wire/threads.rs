//! The requests cohost makes about the connection and its threads, with their answers:
//! `initialize`, `thread/start|resume|fork|unsubscribe|name/set` (and the `Thread` they return),
//! `thread/goal/get|set|clear` and `model/list`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ClientRequest, Turn};
use crate::formats::lenient::{self, open_enum};

// ----------------------------------------------------------------------------------------------
// Handshake.

/// `initialize` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    /// `null` is allowed; cohost always sends `{"experimentalApi": true}`.
    pub capabilities: Option<InitializeCapabilities>,
}

impl ClientRequest for InitializeParams {
    const METHOD: &'static str = "initialize";
    type Response = InitializeResponse;
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    /// Sent as `null` when unset (the field is required, its value nullable).
    pub title: Option<String>,
    pub version: String,
}

/// What the client declares at `initialize`. Only `experimentalApi` is required by codex's
/// schema in practice; the other switches are left out unless set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    pub experimental_api: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_attestation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_human_approval: Option<bool>,
    /// Exact notification method names codex should not send to this connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_out_notification_methods: Option<Vec<String>>,
}

/// `initialize` result: `{"userAgent","codexHome","platformFamily","platformOs"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InitializeResponse {
    /// `<originator>/<codex version> (…) (<clientInfo.name>; <version>)`.
    #[serde(deserialize_with = "lenient::opt")]
    pub user_agent: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub codex_home: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub platform_family: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub platform_os: Option<String>,
}

// ----------------------------------------------------------------------------------------------
// Threads.

open_enum! {
    /// `approvalPolicy` (`AskForApproval`). Codex also accepts a `{"granular": {…}}` object,
    /// which cohost never sends; codex 0.169 and 0.171 refuse `on-failure`, and so does cohost.
    pub enum AskForApproval {
        Untrusted = "untrusted",
        OnRequest = "on-request",
        Never = "never",
    }
}

open_enum! {
    /// `sandbox` on `thread/start` (`SandboxMode`).
    pub enum SandboxMode {
        ReadOnly = "read-only",
        WorkspaceWrite = "workspace-write",
        DangerFullAccess = "danger-full-access",
    }
}

/// `thread/start` params (cohost sets `cwd` and, when the session has them, the model, the
/// approval policy and the sandbox).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<AskForApproval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// A profile's instructions, added as developer instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    /// Config overrides for this thread, by dotted key (`model_reasoning_effort`,
    /// `mcp_servers.NAME`), as `codex -c` takes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ClientRequest for ThreadStartParams {
    const METHOD: &'static str = "thread/start";
    type Response = ThreadStartResponse;
}

/// `thread/start` result; its `thread.turns` is empty.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadStartResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread: Option<Thread>,
    /// The model the thread runs (a collaboration mode's settings must name one).
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
}

/// `thread/resume` params. Without `excludeTurns` the answer carries the whole history, which
/// cohost backfills from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    /// The rollout to resume from, when it is not under the server's CODEX_HOME (a thread a
    /// person's own codex wrote, rehomed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A profile's instructions, added as developer instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    /// Config overrides for this thread, by dotted key (`model_reasoning_effort`,
    /// `mcp_servers.NAME`), as `codex -c` takes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ClientRequest for ThreadResumeParams {
    const METHOD: &'static str = "thread/resume";
    type Response = ThreadResumeResponse;
}

/// `thread/resume` result: the thread with its turns, and the effective settings (not read).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadResumeResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread: Option<Thread>,
    /// The model the thread runs (a collaboration mode's settings must name one).
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
}

/// `thread/fork` params: the new thread copies the history, through `lastTurnId` when set.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkParams {
    pub thread_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_turn_id: Option<String>,
    /// A profile's instructions, added as developer instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
    /// Config overrides for this thread, by dotted key (`model_reasoning_effort`,
    /// `mcp_servers.NAME`), as `codex -c` takes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ClientRequest for ThreadForkParams {
    const METHOD: &'static str = "thread/fork";
    type Response = ThreadForkResponse;
}

/// `thread/fork` result: the new thread, with the copied turns.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadForkResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread: Option<Thread>,
    /// The model the thread runs (a collaboration mode's settings must name one).
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
}

/// `thread/unsubscribe` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeParams {
    pub thread_id: String,
}

impl ClientRequest for ThreadUnsubscribeParams {
    const METHOD: &'static str = "thread/unsubscribe";
    /// `{"status":"unsubscribed"}`; not read.
    type Response = Value;
}

/// `thread/name/set` params. Naming a thread writes its rollout, which makes a thread that has
/// had no turn resumable by the co-driving TUI.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSetNameParams {
    pub thread_id: String,
    pub name: String,
}

impl ClientRequest for ThreadSetNameParams {
    const METHOD: &'static str = "thread/name/set";
    type Response = Value;
}

/// A thread (`Thread`), as `thread/start|resume|fork` return it. Only its id and turns are read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Thread {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// Filled by `thread/resume` and `thread/fork` (full history); empty elsewhere.
    #[serde(deserialize_with = "lenient::vec")]
    pub turns: Vec<Turn>,
}

// ----------------------------------------------------------------------------------------------
// Goals and models (answers are passed through as they are).

open_enum! {
    /// `ThreadGoalMutationOrigin`.
    pub enum ThreadGoalMutationOrigin {
        User = "user",
        Automatic = "automatic",
    }
}

/// `thread/goal/get` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalGetParams {
    pub thread_id: String,
}

impl ClientRequest for ThreadGoalGetParams {
    const METHOD: &'static str = "thread/goal/get";
    /// `{"goal": ThreadGoal | null}`, returned to the caller as it is.
    type Response = Value;
}

/// `thread/goal/set` params: creates the goal or patches the fields given.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalSetParams {
    pub thread_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<ThreadGoalMutationOrigin>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// A `ThreadGoalStatus` (`active` makes codex run turns on its own), passed as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
}

impl ClientRequest for ThreadGoalSetParams {
    const METHOD: &'static str = "thread/goal/set";
    /// `{"goal": ThreadGoal}`, returned to the caller as it is.
    type Response = Value;
}

/// `thread/goal/clear` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalClearParams {
    pub thread_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<ThreadGoalMutationOrigin>,
}

impl ClientRequest for ThreadGoalClearParams {
    const METHOD: &'static str = "thread/goal/clear";
    /// `{"cleared": bool}`, returned to the caller as it is.
    type Response = Value;
}

/// `model/list` params (all optional; cohost sends only the cursor of the next page).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelListParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_hidden: Option<bool>,
}

impl ClientRequest for ModelListParams {
    const METHOD: &'static str = "model/list";
    /// `{"data": [Model], "nextCursor"}`; the host reads every page into one list.
    type Response = Value;
}
