//! codex `app-server` JSON-RPC payloads as serde types, under codex's own schema names (the
//! `generate-ts` / `generate-json-schema` output of codex-cli 0.169 and 0.171).
//!
//! Only what cohost sends or reads is here: the requests it makes (with their responses), the
//! notifications and server requests it reads, and the answers it gives. Framing (ids,
//! `method`/`params`, errors) is [`super::rpc`]'s.
//!
//! **Permissive by design.** A newer codex must never break parsing, so:
//! - unknown fields are ignored (0.171 added `environmentId` to items and MCP requests, and
//!   turned `AgentMessageDisplay` into a union tagged by `mode`: neither is read here);
//! - every field cohost reads is optional and read through [`crate::runtime::lenient`]: a missing
//!   field or one of another type reads as `None`/empty instead of failing the message;
//! - enums codex treats as open (`ThreadItem`'s `type`, statuses, `CodexErrorInfo`, decisions)
//!   keep an `Other` arm that carries the value as sent.
//!
//! Requests cohost builds serialize only the fields it sets (`None` fields are left out).

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::runtime::lenient::{self, lenient_object, lenient_via_value, open_enum};

/// A JSON-RPC id as codex sends it: an integer or a string, echoed verbatim (`RequestId`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(id) => write!(f, "{id}"),
            RequestId::Str(id) => write!(f, "{id:?}"),
        }
    }
}

/// A request cohost sends: its method and the type codex answers with. Responses are read
/// permissively too: one that does not parse at all reads as `Default` (every field `None`), and
/// the caller reports the field it missed, as it did when it read `Value`s.
pub trait ClientRequest: Serialize {
    const METHOD: &'static str;
    type Response: DeserializeOwned + Default;
}

/// Reads a response permissively (see [`ClientRequest`]).
pub fn response<R: ClientRequest>(result: Value) -> R::Response {
    match R::Response::deserialize(result) {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(method = R::METHOD, %error, "unreadable codex response; reading it as empty");
            R::Response::default()
        }
    }
}

/// Reads a notification's or server request's params: `T::default()` when they are not an
/// object (codex omitted them, or sent something else).
fn params<T: DeserializeOwned + Default>(params: &Value) -> T {
    if params.is_object() {
        T::deserialize(params).unwrap_or_default()
    } else {
        T::default()
    }
}

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
// Turns.

/// One input element (`UserInput`). cohost sends text and images (`{"type":"image","url"}`,
/// a `data:` URL, which codex hands the model as an `input_image`); the other kinds codex
/// accepts (`localImage`, `audio`, `localAudio`, `skill`, `mention`) are read as `Other`.
#[derive(Debug, Clone, PartialEq)]
pub enum UserInput {
    Text {
        text: String,
        /// UI spans within `text` (`TextElement`s); cohost sends none.
        text_elements: Vec<Value>,
    },
    Image {
        url: String,
    },
    Other {
        kind: String,
    },
}

impl UserInput {
    /// A plain text input, as cohost sends prompts.
    pub fn text(text: &str) -> Self {
        UserInput::Text {
            text: text.to_string(),
            text_elements: Vec::new(),
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct TextUserInput {
    #[serde(deserialize_with = "lenient::opt")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    text_elements: Vec<Value>,
}

impl Serialize for UserInput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            UserInput::Text {
                text,
                text_elements,
            } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                map.serialize_entry("text_elements", text_elements)?;
                map.end()
            }
            UserInput::Image { url } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "image")?;
                map.serialize_entry("url", url)?;
                map.end()
            }
            UserInput::Other { kind } => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("type", kind)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for UserInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let kind = Tag::of::<D::Error>(&value)?.kind;
        Ok(match kind.as_str() {
            "text" => {
                let input = TextUserInput::deserialize(value).map_err(de::Error::custom)?;
                UserInput::Text {
                    text: input.text.unwrap_or_default(),
                    text_elements: input.text_elements,
                }
            }
            "image" => match value.get("url").and_then(Value::as_str) {
                Some(url) => UserInput::Image {
                    url: url.to_string(),
                },
                None => UserInput::Other { kind },
            },
            _ => UserInput::Other { kind },
        })
    }
}

/// `turn/start` params. A `turn/start` while a turn runs joins that turn (same id in the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    /// EXPERIMENTAL in codex: the collaboration mode this turn (and the thread's next turns)
    /// run in. Absent: the thread keeps its mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collaboration_mode: Option<CollaborationMode>,
}

/// `CollaborationMode`: `{mode, settings}`; `settings.model` is required, and a `null`
/// `developer_instructions` means the mode's built-in instructions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollaborationMode {
    /// `ModeKind`: `plan` or `default`.
    pub mode: String,
    pub settings: CollaborationModeSettings,
}

/// `Settings` of a collaboration mode (snake_case on the wire, as codex writes it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollaborationModeSettings {
    pub model: String,
    pub reasoning_effort: Option<String>,
    pub developer_instructions: Option<String>,
}

/// `collaborationMode/list` params (EXPERIMENTAL): none.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollaborationModeListParams {}

impl ClientRequest for CollaborationModeListParams {
    const METHOD: &'static str = "collaborationMode/list";
    /// `{"data": [CollaborationModeMask]}` (`{name, mode, model, reasoning_effort}`), returned
    /// to the caller as it is.
    type Response = Value;
}

impl ClientRequest for TurnStartParams {
    const METHOD: &'static str = "turn/start";
    type Response = TurnStartResponse;
}

/// `turn/start` result: the turn (`inProgress`), before its `turn/started`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnStartResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn: Option<Turn>,
}

/// `turn/steer` params: adds input to the running turn, which must be `expectedTurnId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    pub expected_turn_id: String,
}

impl ClientRequest for TurnSteerParams {
    const METHOD: &'static str = "turn/steer";
    type Response = TurnSteerResponse;
}

/// `turn/steer` result: `{"turnId"}`, the turn the input joined.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnSteerResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
}

/// `turn/interrupt` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

impl ClientRequest for TurnInterruptParams {
    const METHOD: &'static str = "turn/interrupt";
    /// `{}`.
    type Response = Value;
}

open_enum! {
    /// `TurnStatus`.
    pub enum TurnStatus {
        Completed = "completed",
        Interrupted = "interrupted",
        Failed = "failed",
        InProgress = "inProgress",
    }
}

/// A turn (`Turn`): in `turn/started`, `turn/completed`, the `turn/start` answer and a thread's
/// history. `turn/completed`'s `items` is a summary (the final agent message only).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Turn {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub items: Vec<ThreadItem>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<TurnStatus>,
    /// Set for a failed turn.
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<TurnError>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// Why a turn failed (`TurnError`), also the `error` of an `error` notification.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnError {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub codex_error_info: Option<CodexErrorInfo>,
    #[serde(deserialize_with = "lenient::opt")]
    pub additional_details: Option<String>,
}

open_enum! {
    /// The string members of `CodexErrorInfo` (0.171 added `bioPolicy`).
    pub enum CodexErrorCode {
        ContextWindowExceeded = "contextWindowExceeded",
        SessionBudgetExceeded = "sessionBudgetExceeded",
        UsageLimitExceeded = "usageLimitExceeded",
        RateLimitExceeded = "rateLimitExceeded",
        FlexUnavailable = "flexUnavailable",
        ServerOverloaded = "serverOverloaded",
        ModelNotFound = "modelNotFound",
        PolicyCapacityUnavailable = "policyCapacityUnavailable",
        InferenceHookDenied = "inferenceHookDenied",
        CyberPolicy = "cyberPolicy",
        BioPolicy = "bioPolicy",
        MisalignmentPolicyViolation = "misalignmentPolicyViolation",
        TooManyDenials = "tooManyDenials",
        InternalServerError = "internalServerError",
        Unauthorized = "unauthorized",
        BadRequest = "badRequest",
        ThreadRollbackFailed = "threadRollbackFailed",
        SandboxError = "sandboxError",
        /// codex's own catch-all code, `"other"`.
        OtherCode = "other",
    }
}

/// `CodexErrorInfo`: an open set of codes, some of them objects carrying details
/// (`{"httpConnectionFailed": {"httpStatusCode": 502}}`, `{"activeTurnNotSteerable": {…}}`, …).
#[derive(Debug, Clone, PartialEq)]
pub enum CodexErrorInfo {
    Code(CodexErrorCode),
    /// An object-valued member: its single key and that key's value.
    Detailed {
        kind: String,
        details: Value,
    },
}

impl CodexErrorInfo {
    /// The code when it is a plain string (the object forms have none).
    pub fn code(&self) -> Option<&str> {
        match self {
            CodexErrorInfo::Code(code) => Some(code.as_str()),
            CodexErrorInfo::Detailed { .. } => None,
        }
    }
}

impl<'de> Deserialize<'de> for CodexErrorInfo {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(code) => Ok(CodexErrorInfo::Code(CodexErrorCode::from(code.as_str()))),
            Value::Object(object) => {
                let mut entries = object.into_iter();
                match (entries.next(), entries.next()) {
                    (Some((kind, details)), None) => Ok(CodexErrorInfo::Detailed { kind, details }),
                    _ => Err(de::Error::custom(
                        "a CodexErrorInfo object has exactly one key",
                    )),
                }
            }
            other => Err(de::Error::custom(format!(
                "a CodexErrorInfo is a string or an object, not {other}"
            ))),
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Items.

/// `{"type", "id"}`: what every tagged element carries.
#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, deserialize_with = "lenient::opt")]
    id: Option<String>,
}

impl Tag {
    /// The tag of an object; anything else is not a tagged element.
    fn of<E: de::Error>(value: &Value) -> Result<Tag, E> {
        if !value.is_object() {
            return Err(E::custom("a tagged element is an object"));
        }
        Tag::deserialize(value).map_err(E::custom)
    }
}

/// A thread item (`ThreadItem`), tagged by `type`. The variants cohost turns into events are
/// typed; every other kind (`plan`, `hookPrompt`, `contextCompaction`, `sleep`,
/// `imageGeneration`, `subAgentActivity`, review-mode markers, kinds a newer codex adds) is
/// `Other` with its `type` and `id`. An element without a string `type` does not parse.
#[derive(Debug, Clone, PartialEq)]
pub enum ThreadItem {
    UserMessage(UserMessageThreadItem),
    AgentMessage(AgentMessageThreadItem),
    Reasoning(ReasoningThreadItem),
    CommandExecution(CommandExecutionThreadItem),
    FileChange(FileChangeThreadItem),
    McpToolCall(McpToolCallThreadItem),
    DynamicToolCall(DynamicToolCallThreadItem),
    CollabAgentToolCall(CollabAgentToolCallThreadItem),
    WebSearch(WebSearchThreadItem),
    ImageView(ImageViewThreadItem),
    Plan(PlanThreadItem),
    Other { kind: String, id: Option<String> },
}

impl ThreadItem {
    /// The item's `type`, as sent.
    pub fn kind(&self) -> &str {
        match self {
            ThreadItem::UserMessage(_) => "userMessage",
            ThreadItem::AgentMessage(_) => "agentMessage",
            ThreadItem::Reasoning(_) => "reasoning",
            ThreadItem::CommandExecution(_) => "commandExecution",
            ThreadItem::FileChange(_) => "fileChange",
            ThreadItem::McpToolCall(_) => "mcpToolCall",
            ThreadItem::DynamicToolCall(_) => "dynamicToolCall",
            ThreadItem::CollabAgentToolCall(_) => "collabAgentToolCall",
            ThreadItem::WebSearch(_) => "webSearch",
            ThreadItem::ImageView(_) => "imageView",
            ThreadItem::Plan(_) => "plan",
            ThreadItem::Other { kind, .. } => kind,
        }
    }

    /// The item's `id` (codex's: a model item id, a call id or a UUID).
    pub fn id(&self) -> Option<&str> {
        match self {
            ThreadItem::UserMessage(item) => item.id.as_deref(),
            ThreadItem::AgentMessage(item) => item.id.as_deref(),
            ThreadItem::Reasoning(item) => item.id.as_deref(),
            ThreadItem::CommandExecution(item) => item.id.as_deref(),
            ThreadItem::FileChange(item) => item.id.as_deref(),
            ThreadItem::McpToolCall(item) => item.id.as_deref(),
            ThreadItem::DynamicToolCall(item) => item.id.as_deref(),
            ThreadItem::CollabAgentToolCall(item) => item.id.as_deref(),
            ThreadItem::WebSearch(item) => item.id.as_deref(),
            ThreadItem::ImageView(item) => item.id.as_deref(),
            ThreadItem::Plan(item) => item.id.as_deref(),
            ThreadItem::Other { id, .. } => id.as_deref(),
        }
    }
}

impl<'de> Deserialize<'de> for ThreadItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn variant<T: DeserializeOwned, E: de::Error>(value: Value) -> Result<T, E> {
            T::deserialize(value).map_err(E::custom)
        }
        let value = Value::deserialize(deserializer)?;
        let Tag { kind, id } = Tag::of::<D::Error>(&value)?;
        Ok(match kind.as_str() {
            "userMessage" => ThreadItem::UserMessage(variant(value)?),
            "agentMessage" => ThreadItem::AgentMessage(variant(value)?),
            "reasoning" => ThreadItem::Reasoning(variant(value)?),
            "commandExecution" => ThreadItem::CommandExecution(variant(value)?),
            "fileChange" => ThreadItem::FileChange(variant(value)?),
            "mcpToolCall" => ThreadItem::McpToolCall(variant(value)?),
            "dynamicToolCall" => ThreadItem::DynamicToolCall(variant(value)?),
            "collabAgentToolCall" => ThreadItem::CollabAgentToolCall(variant(value)?),
            "webSearch" => ThreadItem::WebSearch(variant(value)?),
            "imageView" => ThreadItem::ImageView(variant(value)?),
            "plan" => ThreadItem::Plan(variant(value)?),
            _ => ThreadItem::Other { kind, id },
        })
    }
}

/// `{"type":"userMessage"}`: a prompt (or a steer) as codex recorded it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserMessageThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<UserInput>,
}

/// `{"type":"agentMessage"}`. Its `moderation` (`AgentMessageModeration`, whose `display`
/// became a `mode`-tagged union in 0.171) is not read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentMessageThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
}

/// `{"type":"plan"}` (plan mode): the `<proposed_plan>` block of the agent's message, id
/// `<turnId>-plan`, streamed by `item/plan/delta`; the `agentMessage` keeps the text around it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlanThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
}

/// `{"type":"reasoning"}`: summary parts (and raw `content`, not read).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReasoningThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub summary: Vec<String>,
}

open_enum! {
    /// `CommandExecutionStatus`.
    pub enum CommandExecutionStatus {
        InProgress = "inProgress",
        Completed = "completed",
        Failed = "failed",
        Declined = "declined",
    }
}

/// `{"type":"commandExecution"}`: a shell command (`/bin/bash -lc '…'`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommandExecutionThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<CommandExecutionStatus>,
    #[serde(deserialize_with = "lenient::opt")]
    pub aggregated_output: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub exit_code: Option<i64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

open_enum! {
    /// `PatchApplyStatus`.
    pub enum PatchApplyStatus {
        InProgress = "inProgress",
        Completed = "completed",
        Failed = "failed",
        Declined = "declined",
    }
}

/// `{"type":"fileChange"}`: a patch.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileChangeThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub changes: Vec<FileUpdateChange>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<PatchApplyStatus>,
}

/// One file of a patch (`FileUpdateChange`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileUpdateChange {
    #[serde(deserialize_with = "lenient::opt")]
    pub path: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub kind: Option<PatchChangeKind>,
    #[serde(deserialize_with = "lenient::opt")]
    pub diff: Option<String>,
}

open_enum! {
    /// `PatchChangeKind`'s `type`.
    pub enum PatchChangeType {
        Add = "add",
        Delete = "delete",
        Update = "update",
    }
}

/// `PatchChangeKind`: `{"type":"add"}`, `{"type":"delete"}`, `{"type":"update","move_path"}`.
/// A bare string kind is read too. `kind` is `None` for an object without a string `type`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PatchChangeKind {
    pub kind: Option<PatchChangeType>,
    pub move_path: Option<String>,
}

impl<'de> Deserialize<'de> for PatchChangeKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Tagged {
            #[serde(rename = "type", deserialize_with = "lenient::opt")]
            kind: Option<PatchChangeType>,
            #[serde(deserialize_with = "lenient::opt")]
            move_path: Option<String>,
        }
        Ok(match Value::deserialize(deserializer)? {
            Value::String(kind) => PatchChangeKind {
                kind: Some(PatchChangeType::from(kind.as_str())),
                move_path: None,
            },
            value @ Value::Object(_) => {
                let tagged = Tagged::deserialize(value).map_err(de::Error::custom)?;
                PatchChangeKind {
                    kind: tagged.kind,
                    move_path: tagged.move_path,
                }
            }
            other => {
                return Err(de::Error::custom(format!(
                    "a PatchChangeKind is an object or a string, not {other}"
                )));
            }
        })
    }
}

open_enum! {
    /// `McpToolCallStatus`.
    pub enum McpToolCallStatus {
        InProgress = "inProgress",
        Completed = "completed",
        Failed = "failed",
    }
}

/// `{"type":"mcpToolCall"}`. 0.171 added `environmentId` (the server's registration scope).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpToolCallThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub server: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub environment_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<McpToolCallStatus>,
    /// The call's arguments, as sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub arguments: Option<Value>,
    /// `McpToolCallResult`, as sent (`Some(Value::Null)` while none).
    #[serde(deserialize_with = "lenient::opt")]
    pub result: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<McpToolCallError>,
}

/// `McpToolCallError`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct McpToolCallError {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
}

open_enum! {
    /// `DynamicToolCallStatus`.
    pub enum DynamicToolCallStatus {
        InProgress = "inProgress",
        Completed = "completed",
        Failed = "failed",
    }
}

/// `{"type":"dynamicToolCall"}`: a tool a client registered.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DynamicToolCallThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub arguments: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<DynamicToolCallStatus>,
}

open_enum! {
    /// `CollabAgentToolCallStatus`.
    pub enum CollabAgentToolCallStatus {
        InProgress = "inProgress",
        Completed = "completed",
        Failed = "failed",
        Interrupted = "interrupted",
    }
}

/// `{"type":"collabAgentToolCall"}`: a multi-agent tool (`tool` is a `CollabAgentTool`:
/// `spawnAgent`, `sendInput`, `wait`, …).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CollabAgentToolCallThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<CollabAgentToolCallStatus>,
}

/// `{"type":"webSearch"}` (`WebSearchItem`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WebSearchThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub query: Option<String>,
}

/// `{"type":"imageView"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageViewThreadItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub path: Option<String>,
}

// ----------------------------------------------------------------------------------------------
// Notifications (server → client, no id).

/// The notifications cohost reads, by method; every other method is `Other`.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerNotification {
    /// `turn/started`
    TurnStarted(TurnStartedNotification),
    /// `turn/completed`
    TurnCompleted(TurnCompletedNotification),
    /// `item/started`
    ItemStarted(ItemStartedNotification),
    /// `item/completed`
    ItemCompleted(ItemCompletedNotification),
    /// `item/agentMessage/delta`
    AgentMessageDelta(AgentMessageDeltaNotification),
    /// `item/reasoning/summaryTextDelta`
    ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaNotification),
    /// `item/reasoning/textDelta`
    ReasoningTextDelta(ReasoningTextDeltaNotification),
    /// `item/commandExecution/outputDelta`
    CommandExecutionOutputDelta(CommandExecutionOutputDeltaNotification),
    /// `item/plan/delta` (plan mode: the proposed plan streaming)
    PlanDelta(AgentMessageDeltaNotification),
    /// `turn/plan/updated` (the `update_plan` tool)
    TurnPlanUpdated(TurnPlanUpdatedNotification),
    /// `thread/tokenUsage/updated`
    ThreadTokenUsageUpdated(ThreadTokenUsageUpdatedNotification),
    /// `error`
    Error(ErrorNotification),
    /// `thread/goal/updated`
    ThreadGoalUpdated(ThreadGoalUpdatedNotification),
    /// `thread/goal/cleared`
    ThreadGoalCleared(ThreadGoalClearedNotification),
    /// `serverRequest/resolved`
    ServerRequestResolved(ServerRequestResolvedNotification),
    /// A method cohost does not read (`thread/status/changed`, `warning`, …, and whatever a
    /// newer codex adds).
    Other { method: String },
}

impl ServerNotification {
    /// Reads `params` as the payload of `method`. Never fails: params that are not an object
    /// read as an empty payload, fields of the wrong type as absent.
    pub fn parse(method: &str, p: &Value) -> ServerNotification {
        match method {
            "turn/started" => ServerNotification::TurnStarted(params(p)),
            "turn/completed" => ServerNotification::TurnCompleted(params(p)),
            "item/started" => ServerNotification::ItemStarted(params(p)),
            "item/completed" => ServerNotification::ItemCompleted(params(p)),
            "item/agentMessage/delta" => ServerNotification::AgentMessageDelta(params(p)),
            "item/reasoning/summaryTextDelta" => {
                ServerNotification::ReasoningSummaryTextDelta(params(p))
            }
            "item/reasoning/textDelta" => ServerNotification::ReasoningTextDelta(params(p)),
            "item/commandExecution/outputDelta" => {
                ServerNotification::CommandExecutionOutputDelta(params(p))
            }
            "item/plan/delta" => ServerNotification::PlanDelta(params(p)),
            "turn/plan/updated" => ServerNotification::TurnPlanUpdated(params(p)),
            "thread/tokenUsage/updated" => ServerNotification::ThreadTokenUsageUpdated(params(p)),
            "error" => ServerNotification::Error(params(p)),
            "thread/goal/updated" => ServerNotification::ThreadGoalUpdated(params(p)),
            "thread/goal/cleared" => ServerNotification::ThreadGoalCleared(params(p)),
            "serverRequest/resolved" => ServerNotification::ServerRequestResolved(params(p)),
            other => ServerNotification::Other {
                method: other.to_string(),
            },
        }
    }

    /// The thread the notification is about (`threadId`); `None` for a method cohost does not
    /// read.
    pub fn thread_id(&self) -> Option<&str> {
        let thread_id = match self {
            ServerNotification::TurnStarted(n) => &n.thread_id,
            ServerNotification::TurnCompleted(n) => &n.thread_id,
            ServerNotification::ItemStarted(n) => &n.thread_id,
            ServerNotification::ItemCompleted(n) => &n.thread_id,
            ServerNotification::AgentMessageDelta(n) | ServerNotification::PlanDelta(n) => {
                &n.thread_id
            }
            ServerNotification::ReasoningSummaryTextDelta(n) => &n.thread_id,
            ServerNotification::ReasoningTextDelta(n) => &n.thread_id,
            ServerNotification::CommandExecutionOutputDelta(n) => &n.thread_id,
            ServerNotification::TurnPlanUpdated(n) => &n.thread_id,
            ServerNotification::ThreadTokenUsageUpdated(n) => &n.thread_id,
            ServerNotification::Error(n) => &n.thread_id,
            ServerNotification::ThreadGoalUpdated(n) => &n.thread_id,
            ServerNotification::ThreadGoalCleared(n) => &n.thread_id,
            ServerNotification::ServerRequestResolved(n) => &n.thread_id,
            ServerNotification::Other { .. } => return None,
        };
        thread_id.as_deref()
    }
}

/// `{"threadId"}`: how a notification or server request names its thread.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadScoped<'a> {
    #[serde(borrow, deserialize_with = "borrowed_str")]
    pub thread_id: Option<&'a str>,
}

impl<'a> ThreadScoped<'a> {
    /// The thread `params` name, borrowed from them.
    pub fn of(params: &'a Value) -> Option<&'a str> {
        if !params.is_object() {
            return None;
        }
        ThreadScoped::deserialize(params)
            .ok()
            .and_then(|scoped| scoped.thread_id)
    }
}

/// A borrowed string, or `None` for any other value.
fn borrowed_str<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de str>, D::Error> {
    struct Visitor;
    impl<'de> de::Visitor<'de> for Visitor {
        type Value = Option<&'de str>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
            Ok(Some(value))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                .is_some()
            {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(Visitor)
}

/// `turn/started` (`TurnStartedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnStartedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn: Option<Turn>,
}

/// `turn/completed` (`TurnCompletedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnCompletedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn: Option<Turn>,
}

/// `item/started` (`ItemStartedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ItemStartedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub item: Option<ThreadItem>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub started_at_ms: Option<u64>,
}

/// `item/completed` (`ItemCompletedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ItemCompletedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub item: Option<ThreadItem>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub completed_at_ms: Option<u64>,
}

/// `item/agentMessage/delta` (`AgentMessageDeltaNotification`): one streamed chunk.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentMessageDeltaNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub delta: Option<String>,
}

/// `turn/plan/updated` (`TurnPlanUpdatedNotification`): the turn's step list, whole, each time
/// the model calls `update_plan`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnPlanUpdatedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub explanation: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub plan: Vec<TurnPlanStep>,
}

/// `TurnPlanStep`: `{step, status}` (`pending`, `inProgress`, `completed`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnPlanStep {
    #[serde(deserialize_with = "lenient::opt")]
    pub step: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
}

/// `item/reasoning/summaryTextDelta` (`ReasoningSummaryTextDeltaNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReasoningSummaryTextDeltaNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub delta: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub summary_index: Option<u64>,
}

/// `item/reasoning/textDelta` (`ReasoningTextDeltaNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReasoningTextDeltaNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub delta: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub content_index: Option<u64>,
}

/// `item/commandExecution/outputDelta` (`CommandExecutionOutputDeltaNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommandExecutionOutputDeltaNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub delta: Option<String>,
}

/// `thread/tokenUsage/updated` (`ThreadTokenUsageUpdatedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadTokenUsageUpdatedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    /// `Some` whenever the field is present (a `null` or malformed one reads as all zeros).
    #[serde(deserialize_with = "lenient::present")]
    pub token_usage: Option<ThreadTokenUsage>,
}

/// `ThreadTokenUsage`: cumulative `total`, the last response's `last`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadTokenUsage {
    #[serde(deserialize_with = "lenient::opt")]
    pub total: Option<TokenUsageBreakdown>,
    #[serde(deserialize_with = "lenient::opt")]
    pub last: Option<TokenUsageBreakdown>,
    #[serde(deserialize_with = "lenient::opt")]
    pub model_context_window: Option<u64>,
}

/// `TokenUsageBreakdown`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TokenUsageBreakdown {
    #[serde(deserialize_with = "lenient::opt")]
    pub total_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cached_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cache_write_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reasoning_output_tokens: Option<u64>,
}

/// `error` (`ErrorNotification`): a turn-level failure (the turn then completes `failed`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ErrorNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<TurnError>,
    #[serde(deserialize_with = "lenient::opt")]
    pub will_retry: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
}

/// `thread/goal/updated` (`ThreadGoalUpdatedNotification`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadGoalUpdatedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    /// `null` for a change a client made, else the turn whose accounting changed the goal.
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    /// The `ThreadGoal` (`threadId`, `objective`, `status`, `tokenBudget`, `tokensUsed`, …),
    /// kept as sent: cohost stores it verbatim in `goal.updated`.
    #[serde(deserialize_with = "lenient::opt")]
    pub goal: Option<Value>,
}

/// `thread/goal/cleared` (`ThreadGoalClearedNotification`); `thread/resume` always sends one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadGoalClearedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
}

/// `serverRequest/resolved` (`ServerRequestResolvedNotification`): a server request was
/// answered (by any client) or made moot (an interrupt).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerRequestResolvedNotification {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub request_id: Option<RequestId>,
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

// ----------------------------------------------------------------------------------------------
// Server requests (server → client, with an id) and cohost's answers.

/// The server requests cohost relays (as approvals or input requests), by method; every other
/// one (dynamic tools, token refresh, attestation, …) is `Other` and refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequest {
    /// `item/commandExecution/requestApproval`
    CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams),
    /// `item/fileChange/requestApproval`
    FileChangeRequestApproval(FileChangeRequestApprovalParams),
    /// `item/permissions/requestApproval`
    PermissionsRequestApproval(PermissionsRequestApprovalParams),
    /// `execCommandApproval` (legacy v1)
    ExecCommandApproval(ExecCommandApprovalParams),
    /// `applyPatchApproval` (legacy v1)
    ApplyPatchApproval(ApplyPatchApprovalParams),
    /// `item/tool/requestUserInput` (the `request_user_input` tool, plan mode)
    ToolRequestUserInput(ToolRequestUserInputParams),
    /// `mcpServer/elicitation/request`
    McpServerElicitationRequest(McpServerElicitationRequestParams),
    Other {
        method: String,
    },
}

impl ServerRequest {
    /// Reads `params` as the payload of `method`; never fails (see [`ServerNotification::parse`]).
    pub fn parse(method: &str, p: &Value) -> ServerRequest {
        match method {
            "item/commandExecution/requestApproval" => {
                ServerRequest::CommandExecutionRequestApproval(params(p))
            }
            "item/fileChange/requestApproval" => {
                ServerRequest::FileChangeRequestApproval(params(p))
            }
            "item/permissions/requestApproval" => {
                ServerRequest::PermissionsRequestApproval(params(p))
            }
            "execCommandApproval" => ServerRequest::ExecCommandApproval(params(p)),
            "applyPatchApproval" => ServerRequest::ApplyPatchApproval(params(p)),
            "item/tool/requestUserInput" => ServerRequest::ToolRequestUserInput(params(p)),
            "mcpServer/elicitation/request" => {
                ServerRequest::McpServerElicitationRequest(params(p))
            }
            other => ServerRequest::Other {
                method: other.to_string(),
            },
        }
    }
}

/// `item/commandExecution/requestApproval` params. 0.169 already sends `environmentId`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommandExecutionRequestApprovalParams {
    /// `CommandExecutionApprovalKind`: `command`, `humanCommand` or `writeStdin`.
    #[serde(deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub approval_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub environment_id: Option<String>,
    /// The model's justification, when it asked to escalate.
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    /// `CommandExecutionApprovalDecision`s codex offers (strings or amendment objects). It
    /// does not list everything codex accepts (`decline`, `acceptForSession` work too).
    #[serde(deserialize_with = "lenient::vec")]
    pub available_decisions: Vec<Value>,
}

/// `item/fileChange/requestApproval` params.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileChangeRequestApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub grant_root: Option<String>,
}

/// `item/permissions/requestApproval` params (the `request_permissions` tool).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionsRequestApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub environment_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    /// `RequestPermissionProfile` (`network`, `fileSystem`).
    #[serde(deserialize_with = "lenient::opt")]
    pub permissions: Option<Value>,
}

/// `item/tool/requestUserInput` params (`ToolRequestUserInputParams`, EXPERIMENTAL).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    /// The tool call id (`call_…`).
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub questions: Vec<ToolRequestUserInputQuestion>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_blocking: Option<bool>,
}

/// `ToolRequestUserInputQuestion`. codex sets `isOther: true` itself (the client adds a
/// free-form choice).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputQuestion {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub header: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub question: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_other: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_secret: Option<bool>,
    #[serde(deserialize_with = "lenient::vec")]
    pub options: Vec<ToolRequestUserInputOption>,
}

/// `ToolRequestUserInputOption`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputOption {
    #[serde(deserialize_with = "lenient::opt")]
    pub label: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub description: Option<String>,
}

/// The answer to `item/tool/requestUserInput` (`ToolRequestUserInputResponse`):
/// `{"answers": {"<question id>": {"answers": ["…"]}}}`; codex hands it to the model as the
/// tool's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRequestUserInputResponse {
    pub answers: std::collections::BTreeMap<String, ToolRequestUserInputAnswer>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRequestUserInputAnswer {
    pub answers: Vec<String>,
}

/// `mcpServer/elicitation/request` params (`McpServerElicitationRequestParams`): an MCP
/// server's elicitation, `mode` `form` (with `requestedSchema`) or `url`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpServerElicitationRequestParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    /// Nullable: codex correlates a turn when it can.
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub server_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub mode: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub requested_schema: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub url: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub elicitation_id: Option<String>,
}

/// The answer to `mcpServer/elicitation/request` (`McpServerElicitationRequestResponse`):
/// `action` `accept` (with `content`), `decline` or `cancel`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerElicitationRequestResponse {
    pub action: String,
    pub content: Option<Value>,
    #[serde(rename = "_meta")]
    pub meta: Option<Value>,
}

/// The answer to `item/permissions/requestApproval` (`PermissionsRequestApprovalResponse`):
/// the permissions granted (a `GrantedPermissionProfile`; `{}` grants nothing) and for how
/// long (`turn` or `session`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionsRequestApprovalResponse {
    pub permissions: Value,
    pub scope: String,
}

/// `execCommandApproval` params (legacy v1: no `threadId`, the thread is `conversationId`; the
/// command is an argv).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecCommandApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub conversation_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub approval_id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub command: Vec<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
}

/// `applyPatchApproval` params (legacy v1).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApplyPatchApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub conversation_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub grant_root: Option<String>,
}

open_enum! {
    /// The string members of `CommandExecutionApprovalDecision` (all of
    /// `FileChangeApprovalDecision`). The amendment objects (`acceptWithExecpolicyAmendment`,
    /// `applyNetworkPolicyAmendment`) are not sent by cohost.
    pub enum CommandExecutionApprovalDecision {
        Accept = "accept",
        AcceptForSession = "acceptForSession",
        Decline = "decline",
        Cancel = "cancel",
    }
}

/// The answer to `item/commandExecution/requestApproval` (`CommandExecutionRequestApprovalResponse`):
/// `{"decision"}`. `FileChangeRequestApprovalResponse` has the same shape and decisions.
///
/// `item/permissions/requestApproval` is not an approval to cohost but an input request of kind
/// `permissions`, answered with [`PermissionsRequestApprovalResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandExecutionRequestApprovalResponse {
    pub decision: CommandExecutionApprovalDecision,
}

lenient_object!(
    TurnPlanStep,
    ToolRequestUserInputQuestion,
    ToolRequestUserInputOption,
    Thread,
    Turn,
    TurnError,
    TokenUsageBreakdown,
    ThreadTokenUsage,
    FileUpdateChange,
    McpToolCallError,
);
lenient_via_value!(
    ThreadItem,
    UserInput,
    PatchChangeKind,
    CodexErrorInfo,
    RequestId
);

#[cfg(test)]
mod tests {
    //! Literal wire lines as codex-cli 0.169.0 writes them (the section numbers below are those
    //! of the wire notes docs/peers.md summarises) and, for 0.171.0, the release notes (their literal
    //! `initialize` result, and items built field by field from its `generate-ts` deltas: C3
    //! `environmentId`, C4 `AgentMessageDisplay`, C5 `bioPolicy`).

    use super::*;
    use serde_json::json;

    fn params_of(line: &str) -> (String, Value) {
        let message: Value = serde_json::from_str(line).unwrap();
        (
            message["method"].as_str().unwrap().to_string(),
            message["params"].clone(),
        )
    }

    fn notification(line: &str) -> ServerNotification {
        let (method, params) = params_of(line);
        ServerNotification::parse(&method, &params)
    }

    #[test]
    fn initialize_request_and_both_releases_answers() {
        // §4: what the client sends (cohost sends no `requestAttestation`).
        let params = InitializeParams {
            client_info: ClientInfo {
                name: "codex-probe".into(),
                title: Some("Codex probe".into()),
                version: "0.1.0".into(),
            },
            capabilities: Some(InitializeCapabilities {
                experimental_api: true,
                request_attestation: Some(false),
                ..InitializeCapabilities::default()
            }),
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            json!({"clientInfo":{"name":"codex-probe","title":"Codex probe","version":"0.1.0"},"capabilities":{"experimentalApi":true,"requestAttestation":false}})
        );
        for (line, version) in [
            (
                r#"{"id":1,"result":{"userAgent":"probe/0.169.0 (Debian 12.0.0; x86_64) xterm (probe; 0.1)","codexHome":"$PROBE/wire/h169","platformFamily":"unix","platformOs":"linux"}}"#,
                "0.169.0",
            ),
            (
                r#"{"id":1,"result":{"userAgent":"probe/0.171.0 (Debian 12.0.0; x86_64) xterm (probe; 0.1)","codexHome":"$PROBE/wire/h171","platformFamily":"unix","platformOs":"linux"}}"#,
                "0.171.0",
            ),
        ] {
            let result = serde_json::from_str::<Value>(line).unwrap()["result"].clone();
            let answer = response::<InitializeParams>(result);
            assert!(answer.user_agent.unwrap().contains(version));
            assert_eq!(answer.platform_os.as_deref(), Some("linux"));
        }
    }

    #[test]
    fn thread_start_request_and_answer() {
        // §5.
        let params = ThreadStartParams {
            cwd: Some("$PROBE/work".into()),
            model: None,
            approval_policy: Some(AskForApproval::Never),
            sandbox: Some("workspace-write".into()),
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            json!({"cwd":"$PROBE/work","approvalPolicy":"never","sandbox":"workspace-write"})
        );
        let result = json!({"thread":{"id":"01a2276b-fc47-74d2-8490-62f8454ea7c9","environments":[{"environmentId":"local","cwd":"$PROBE/work","runtimeWorkspaceRoots":["$PROBE/work"]}],"extra":null,"sessionId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"mock","model":"mock-model","reasoningEffort":null,"createdAt":1795957718,"updatedAt":1795957718,"recencyAt":1795957718,"status":{"type":"idle"},"path":"$PROBE/home_probe/sessions/2026/11/29/rollout-2026-11-29T13-08-38-01a2276b-fc47-74d2-8490-62f8454ea7c9.jsonl","cwd":"$PROBE/work","cliVersion":"0.169.0","originator":"codex-probe","source":"vscode","canAcceptDirectInput":true,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":null,"daybreakEnabled":null,"turns":[]},"model":"mock-model","modelProvider":"mock","serviceTier":null,"disabledPluginIds":[],"cwd":"$PROBE/work","runtimeWorkspaceRoots":["$PROBE/work"],"instructionSources":[],"approvalPolicy":"never","approvalsReviewer":"user","sandbox":{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false},"activePermissionProfile":null,"reasoningEffort":null,"multiAgentMode":"explicitRequestOnly"});
        let thread = response::<ThreadStartParams>(result).thread.unwrap();
        assert_eq!(
            thread.id.as_deref(),
            Some("01a2276b-fc47-74d2-8490-62f8454ea7c9")
        );
        assert!(thread.turns.is_empty());
    }

    #[test]
    fn turn_start_steer_and_interrupt() {
        // §6, §8, §9.
        let start = TurnStartParams {
            collaboration_mode: None,
            thread_id: "01a2276b-fc47-74d2-8490-62f8454ea7c9".into(),
            input: vec![UserInput::text("Say hello")],
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","input":[{"type":"text","text":"Say hello","text_elements":[]}]})
        );
        let answer = response::<TurnStartParams>(
            json!({"turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":null,"completedAt":null,"durationMs":null}}),
        );
        let turn = answer.turn.unwrap();
        assert_eq!(turn.status, Some(TurnStatus::InProgress));
        assert_eq!(turn.error, None);
        assert_eq!(turn.duration_ms, None);

        let steer = TurnSteerParams {
            thread_id: "01a2276c-3aec-7701-8036-044891b86e10".into(),
            input: vec![UserInput::text("Actually, keep it short.")],
            expected_turn_id: "01a2276c-3b0c-7d93-960f-a7f556ec75d8".into(),
        };
        assert_eq!(
            serde_json::to_value(&steer).unwrap(),
            json!({"threadId":"01a2276c-3aec-7701-8036-044891b86e10","input":[{"type":"text","text":"Actually, keep it short.","text_elements":[]}],"expectedTurnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"})
        );
        let steered =
            response::<TurnSteerParams>(json!({"turnId":"01a2276c-3b0c-7d93-960f-a7f556ec75d8"}));
        assert_eq!(
            steered.turn_id.as_deref(),
            Some("01a2276c-3b0c-7d93-960f-a7f556ec75d8")
        );

        let interrupt = TurnInterruptParams {
            thread_id: "01a2276c-5359-7161-b89e-00c5286c76fd".into(),
            turn_id: "01a2276c-5370-7892-bd51-f236f1d05db4".into(),
        };
        assert_eq!(
            serde_json::to_value(&interrupt).unwrap(),
            json!({"threadId":"01a2276c-5359-7161-b89e-00c5286c76fd","turnId":"01a2276c-5370-7892-bd51-f236f1d05db4"})
        );
    }

    #[test]
    fn a_whole_turn_of_notifications() {
        // §6, every notification kind of one turn, literally.
        let ServerNotification::TurnStarted(started) = notification(
            r#"{"method":"turn/started","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":1795957718,"completedAt":null,"durationMs":null}},"emittedAtMs":1795957718137}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            started.turn.unwrap().id.as_deref(),
            Some("01a2276b-fc56-70f0-a40b-38adadde74a3")
        );

        let ServerNotification::ItemCompleted(user) = notification(
            r#"{"method":"item/completed","params":{"item":{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":1795957718151},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718151},"emittedAtMs":1795957718153}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            user.item,
            Some(ThreadItem::UserMessage(UserMessageThreadItem {
                id: Some("01a2276b-fc86-7740-a55e-f2b63515f5e7".into()),
                content: vec![UserInput::text("Say hello")],
            }))
        );

        let ServerNotification::ItemCompleted(reasoning) = notification(
            r#"{"method":"item/completed","params":{"item":{"type":"reasoning","id":"rs_2dd21b680a72","summary":["Thinking about the greeting."],"content":[],"startedAtMs":1795957718192,"completedAtMs":1795957718394},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718394},"emittedAtMs":1795957718398}"#,
        ) else {
            panic!()
        };
        assert!(
            matches!(reasoning.item, Some(ThreadItem::Reasoning(r)) if r.summary == ["Thinking about the greeting."])
        );

        let ServerNotification::ReasoningSummaryTextDelta(delta) = notification(
            r#"{"method":"item/reasoning/summaryTextDelta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"rs_2dd21b680a72","delta":"Thinking ","summaryIndex":0},"emittedAtMs":1795957718193}"#,
        ) else {
            panic!()
        };
        assert_eq!(delta.delta.as_deref(), Some("Thinking "));
        assert_eq!(delta.summary_index, Some(0));

        let ServerNotification::AgentMessageDelta(delta) = notification(
            r#"{"method":"item/agentMessage/delta","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","itemId":"msg_edb77357f05a","delta":"Hello "},"emittedAtMs":1795957718400}"#,
        ) else {
            panic!()
        };
        assert_eq!(delta.item_id.as_deref(), Some("msg_edb77357f05a"));

        let ServerNotification::ItemCompleted(message) = notification(
            r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647},"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","contentTokenCount":null,"completedAtMs":1795957718647},"emittedAtMs":1795957718649}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            message.turn_id.as_deref(),
            Some("01a2276b-fc56-70f0-a40b-38adadde74a3")
        );
        assert!(
            matches!(message.item, Some(ThreadItem::AgentMessage(m)) if m.text.as_deref() == Some("Hello from the mock model!"))
        );

        let ServerNotification::ThreadTokenUsageUpdated(usage) = notification(
            r#"{"method":"thread/tokenUsage/updated","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","tokenUsage":{"total":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"last":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"cacheWriteInputTokens":0,"outputTokens":34,"reasoningOutputTokens":0},"modelContextWindow":258400}},"emittedAtMs":1795957718655}"#,
        ) else {
            panic!()
        };
        let usage = usage.token_usage.unwrap();
        assert_eq!(usage.model_context_window, Some(258400));
        assert_eq!(usage.total.unwrap().cached_input_tokens, Some(1000));

        let ServerNotification::TurnCompleted(completed) = notification(
            r#"{"method":"turn/completed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turn":{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795957718,"completedAt":1795957718,"durationMs":553}},"emittedAtMs":1795957718663}"#,
        ) else {
            panic!()
        };
        let turn = completed.turn.unwrap();
        assert_eq!(turn.status, Some(TurnStatus::Completed));
        assert_eq!(turn.duration_ms, Some(553));
        assert_eq!(turn.items.len(), 1);

        // Notifications cohost does not read are `Other`, whatever their params.
        assert_eq!(
            notification(
                r#"{"method":"thread/status/changed","params":{"threadId":"01a2276b-fc47-74d2-8490-62f8454ea7c9","status":{"type":"idle"}},"emittedAtMs":1795957718663}"#
            ),
            ServerNotification::Other {
                method: "thread/status/changed".into()
            }
        );
    }

    #[test]
    fn command_and_file_change_items() {
        // §6.1 and §7.3.
        let ServerNotification::ItemCompleted(done) = notification(
            r#"{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_2_0ea7db88","pluginId":null,"scriptPath":null,"command":"/bin/bash -lc 'echo hi'","cwd":"$PROBE/work","processId":"52895","source":"unifiedExecStartup","status":"completed","commandActions":[{"type":"unknown","command":"echo hi"}],"aggregatedOutput":"pyenv: cannot rehash: $HOME/.pyenv/shims isn't writable\nhi\n","exitCode":0,"durationMs":0,"startedAtMs":1795957720106,"completedAtMs":1795957720108},"threadId":"01a2276c-0314-7c23-9d88-f6b93044f24e","turnId":"01a2276c-032e-7ed0-adda-9c729a9781c6","contentTokenCount":null,"completedAtMs":1795957720108},"emittedAtMs":1795957720110}"#,
        ) else {
            panic!()
        };
        let Some(ThreadItem::CommandExecution(command)) = done.item else {
            panic!()
        };
        assert_eq!(command.status, Some(CommandExecutionStatus::Completed));
        assert_eq!(command.exit_code, Some(0));
        assert_eq!(command.command.as_deref(), Some("/bin/bash -lc 'echo hi'"));

        let ServerNotification::ItemStarted(started) = notification(
            r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"call_10_44e031fc","changes":[{"path":"$PROBE/work/patched.txt","kind":{"type":"add"},"diff":"hello from patch\n"}],"status":"inProgress","startedAtMs":1795957726012,"completedAtMs":null},"threadId":"01a2276c-1ac4-7c71-9116-7c5c7c8f7a06","turnId":"01a2276c-1adb-70e3-8180-b0529ef141d7","startedAtMs":1795957726012},"emittedAtMs":1795957726013}"#,
        ) else {
            panic!()
        };
        let Some(ThreadItem::FileChange(patch)) = started.item else {
            panic!()
        };
        assert_eq!(patch.status, Some(PatchApplyStatus::InProgress));
        assert_eq!(
            patch.changes[0].kind,
            Some(PatchChangeKind {
                kind: Some(PatchChangeType::Add),
                move_path: None
            })
        );
    }

    #[test]
    fn approval_requests_and_the_answer() {
        // §7.1: `availableDecisions` mixes strings and amendment objects.
        let (method, params) = params_of(
            r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","threadId":"01a2276c-0934-74d3-82f8-8f4b59a055cb","turnId":"01a2276c-0957-7223-a020-d4df7b389d7e","itemId":"call_4_9f701721","startedAtMs":1795957721535,"environmentId":"local","command":"/bin/bash -lc 'touch approved.txt'","cwd":"$PROBE/work","commandActions":[{"type":"unknown","command":"touch approved.txt"}],"proposedExecpolicyAmendment":["touch","approved.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","approved.txt"]}},"cancel"]}}"#,
        );
        let ServerRequest::CommandExecutionRequestApproval(request) =
            ServerRequest::parse(&method, &params)
        else {
            panic!()
        };
        assert_eq!(request.item_id.as_deref(), Some("call_4_9f701721"));
        assert_eq!(request.environment_id.as_deref(), Some("local"));
        assert_eq!(request.available_decisions.len(), 3);
        assert_eq!(
            ThreadScoped::of(&params),
            Some("01a2276c-0934-74d3-82f8-8f4b59a055cb")
        );

        // §7.3.
        let (method, params) = params_of(
            r#"{"method":"item/fileChange/requestApproval","id":0,"params":{"threadId":"01a2276c-1ac4-7c71-9116-7c5c7c8f7a06","turnId":"01a2276c-1adb-70e3-8180-b0529ef141d7","itemId":"call_10_44e031fc","startedAtMs":1795957726014,"reason":null,"grantRoot":null}}"#,
        );
        let ServerRequest::FileChangeRequestApproval(request) =
            ServerRequest::parse(&method, &params)
        else {
            panic!()
        };
        assert_eq!(request.reason, None);
        assert_eq!(request.item_id.as_deref(), Some("call_10_44e031fc"));

        // §7.4: a question, relayed as an input request, answered with `answers`.
        let (method, params) = params_of(
            r#"{"method":"item/tool/requestUserInput","id":0,"params":{"threadId":"01a2276c-20f0-7411-91c7-7d5ac1cf6cdc","turnId":"01a2276c-2108-76c2-ae9f-e10e01185d69","itemId":"call_12_0d3ad089","questions":[{"id":"confirm_path","header":"Confirm","question":"Proceed with the plan?","isOther":true,"isSecret":false,"options":[{"label":"Yes (Recommended)","description":"Continue the current plan."},{"label":"No","description":"Stop and revisit the approach."}]}],"isBlocking":false,"autoResolutionMs":null}}"#,
        );
        let ServerRequest::ToolRequestUserInput(request) = ServerRequest::parse(&method, &params)
        else {
            panic!()
        };
        assert_eq!(request.item_id.as_deref(), Some("call_12_0d3ad089"));
        assert_eq!(request.questions.len(), 1);
        assert_eq!(request.questions[0].is_other, Some(true));
        assert_eq!(
            request.questions[0].options[0].label.as_deref(),
            Some("Yes (Recommended)")
        );
        let answer = ToolRequestUserInputResponse {
            answers: [(
                "confirm_path".to_string(),
                ToolRequestUserInputAnswer {
                    answers: vec!["Yes (Recommended)".into()],
                },
            )]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            serde_json::json!({"answers":{"confirm_path":{"answers":["Yes (Recommended)"]}}})
        );

        let answer = CommandExecutionRequestApprovalResponse {
            decision: "accept".into(),
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"decision":"accept"}"#
        );

        // §7.5: the request is made moot by an interrupt.
        let ServerNotification::ServerRequestResolved(resolved) = notification(
            r#"{"method":"serverRequest/resolved","params":{"threadId":"01a2276c-31c0-7b91-b7f1-da8c28da2fdf","requestId":0},"emittedAtMs":1795957731896}"#,
        ) else {
            panic!()
        };
        assert_eq!(resolved.request_id, Some(RequestId::Int(0)));
    }

    #[test]
    fn turn_failures_and_error_infos() {
        // §14.
        let ServerNotification::Error(error) = notification(
            r#"{"method":"error","params":{"error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"willRetry":false,"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d"},"emittedAtMs":1795957768863}"#,
        ) else {
            panic!()
        };
        let error = error.error.unwrap();
        assert_eq!(
            error.codex_error_info,
            Some(CodexErrorInfo::Code(CodexErrorCode::InternalServerError))
        );
        let ServerNotification::TurnCompleted(failed) = notification(
            r#"{"method":"turn/completed","params":{"threadId":"01a2276c-c20e-7312-b06f-bfe646e494c9","turn":{"id":"01a2276c-c22a-7780-b174-dbbe00fbb40d","rootTurnId":"01a2276c-c22a-7780-b174-dbbe00fbb40d","items":[],"itemsView":"notLoaded","status":"failed","error":{"message":"We’re currently experiencing high demand, which may cause temporary errors.","codexErrorInfo":"internalServerError","additionalDetails":null,"misalignment":null},"startedAt":1795957768,"completedAt":1795957768,"durationMs":114}},"emittedAtMs":1795957768872}"#,
        ) else {
            panic!()
        };
        assert_eq!(failed.turn.unwrap().status, Some(TurnStatus::Failed));

        // 0.171 (C5): `bioPolicy`; the object members; codes a newer codex adds.
        let info = |value: Value| serde_json::from_value::<CodexErrorInfo>(value).unwrap();
        assert_eq!(info(json!("bioPolicy")).code(), Some("bioPolicy"));
        assert_eq!(info(json!("somethingNew")).code(), Some("somethingNew"));
        assert_eq!(info(json!("other")).code(), Some("other"));
        let detailed = info(json!({"httpConnectionFailed": {"httpStatusCode": 502}}));
        assert_eq!(detailed.code(), None);
        assert!(
            matches!(&detailed, CodexErrorInfo::Detailed { kind, details } if kind == "httpConnectionFailed" && details["httpStatusCode"] == 502)
        );
    }

    #[test]
    fn newer_codex_items_parse() {
        // 0.171 (C3): `mcpToolCall` gains `environmentId`.
        let mcp: ThreadItem = serde_json::from_value(json!({"type":"mcpToolCall","id":"call_1","server":"docs","environmentId":null,"tool":"search","status":"completed","arguments":{"q":"x"},"appContext":null,"mcpAppUi":null,"pluginId":null,"readOnlyHint":true,"result":{"content":[]},"error":null,"durationMs":12})).unwrap();
        let ThreadItem::McpToolCall(call) = &mcp else {
            panic!()
        };
        assert_eq!(call.environment_id, None);
        assert_eq!(call.status, Some(McpToolCallStatus::Completed));
        assert_eq!(call.result, Some(json!({"content":[]})));

        // 0.171 (C4): `moderation.display` is a union tagged by `mode`; 0.169 had flat fields.
        for moderation in [
            json!({"moderated":true,"display":{"mode":"hide","version":1,"replacement":{"kind":"wellbeingPromptHelpline"}}}),
            json!({"moderated":true,"display":{"mode":"show","version":1,"trustedContacts":"check"}}),
            json!({"moderated":true,"display":{"mode":"block","version":1,"reason":{"kind":"cyber"}}}),
            json!({"moderated":true,"display":{"action":"show","blockType":null,"cyberTrustedAccess":null,"checkTrustedContacts":null}}),
        ] {
            let item: ThreadItem = serde_json::from_value(
                json!({"type":"agentMessage","moderation":moderation,"id":"msg_1","text":"Hi","phase":null,"memoryCitation":null,"delivery":null,"questions":null}),
            )
            .unwrap();
            assert!(
                matches!(&item, ThreadItem::AgentMessage(m) if m.text.as_deref() == Some("Hi"))
            );
        }

        // Item kinds cohost does not type, or that a newer codex adds.
        let sleep: ThreadItem =
            serde_json::from_value(json!({"type":"sleep","id":"s1","durationMs":5})).unwrap();
        assert_eq!(
            sleep,
            ThreadItem::Other {
                kind: "sleep".into(),
                id: Some("s1".into())
            }
        );
        assert!(serde_json::from_value::<ThreadItem>(json!({"id":"x"})).is_err());
        assert!(serde_json::from_value::<ThreadItem>(json!(["userMessage"])).is_err());

        // C2: a notification 0.171 added.
        assert_eq!(
            ServerNotification::parse(
                "thread/search/partial",
                &json!({"requestId": 3, "data": []})
            ),
            ServerNotification::Other {
                method: "thread/search/partial".into()
            }
        );
    }

    #[test]
    fn goals_and_a_resumed_history() {
        // §12.
        let set = ThreadGoalSetParams {
            thread_id: "01a2276c-7845-7dd2-995a-b6920d40c4aa".into(),
            origin: Some(ThreadGoalMutationOrigin::User),
            objective: Some("Make hello.txt say hi".into()),
            status: Some("paused".into()),
            token_budget: Some(5000),
        };
        assert_eq!(
            serde_json::to_value(&set).unwrap(),
            json!({"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","objective":"Make hello.txt say hi","status":"paused","tokenBudget":5000,"origin":"user"})
        );
        let ServerNotification::ThreadGoalUpdated(updated) = notification(
            r#"{"method":"thread/goal/updated","params":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","turnId":null,"goal":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa","objective":"Make hello.txt say hi","status":"paused","tokenBudget":5000,"tokensUsed":0,"timeUsedSeconds":0,"createdAt":1795957750,"updatedAt":1795957750}},"emittedAtMs":1795957750034}"#,
        ) else {
            panic!()
        };
        assert_eq!(updated.turn_id, None);
        assert_eq!(updated.goal.unwrap()["status"], "paused");
        assert!(matches!(
            notification(
                r#"{"method":"thread/goal/cleared","params":{"threadId":"01a2276c-7845-7dd2-995a-b6920d40c4aa"},"emittedAtMs":1795957765076}"#
            ),
            ServerNotification::ThreadGoalCleared(_)
        ));

        // §13: a turn of a thread's history (as `thread/resume` carries them).
        let resumed = response::<ThreadResumeParams>(
            serde_json::from_str(
                r#"{"thread":{"id":"01a2276b-fc47-74d2-8490-62f8454ea7c9","turns":[{"id":"01a2276b-fc56-70f0-a40b-38adadde74a3","rootTurnId":"01a2276b-fc56-70f0-a40b-38adadde74a3","items":[{"type":"userMessage","id":"01a2276b-fc86-7740-a55e-f2b63515f5e7","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}],"startedAtMs":1795957718151,"completedAtMs":1795957718151},{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795957718399,"completedAtMs":1795957718647}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795957718,"completedAt":1795957718,"durationMs":553}]},"model":"mock-model"}"#,
            )
            .unwrap(),
        );
        let thread = resumed.thread.unwrap();
        assert_eq!(thread.turns.len(), 1);
        assert_eq!(thread.turns[0].items.len(), 2);

        // A response that does not parse reads as empty rather than failing.
        assert_eq!(
            response::<TurnSteerParams>(json!("unexpected")),
            TurnSteerResponse::default()
        );
    }
}
