//! What Claude Code writes that cohost reads, as serde types: the `hooks.jsonl` line
//! `cohost-hook` appends for each hook (with Claude's own hook payload inside), the transcript
//! records (`~/.claude/projects/<cwd>/<session>.jsonl`) and the TUI's session file
//! (`~/.claude/sessions/<pid>.json`). Field names are Claude's (`prompt_id`, `permission_mode`,
//! `tool_use_id`, `last_assistant_message` in hooks; `promptId`, `isAbortedMidStream`,
//! `stop_reason` in the transcript). Shapes are those of Claude Code 2.1.197 and 2.1.332.
//!
//! **Permissive by design.** Unknown record kinds, hook events and fields are ignored; every
//! field cohost reads is optional and read through [`crate::runtime::lenient`], so a field of
//! another type reads as absent, exactly as `value.get(key).and_then(Value::as_str)` did. Parsing
//! a record therefore never fails: a record that is not what its kind promises reads with the
//! fields it lacks empty, and the normalizer does with it what it did with the `Value`.
//!
//! Tool inputs and responses are Claude's per-tool JSON; they stay [`Value`]s (cohost stores
//! them as they are), with typed views of the few fields it reads ([`BashToolInput`],
//! [`ToolResponse`]).

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::runtime::lenient::{self, Lenient, lenient_object, lenient_via_value, open_enum};

// ----------------------------------------------------------------------------------------------
// Hook lines.

/// One `hooks.jsonl` line: `{"receivedAt", "event", "requestId"?, "payload"}`, written by
/// `cohost-hook <Event>` as [`crate::protocol::boundary::HookLine`] and read back here
/// permissively (a field missing or of another type reads as absent, and the payload is typed
/// by its event); `payload` is Claude's stdin JSON for the hook (or a truncation or error
/// marker, or a string when stdin was not JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookLine {
    /// When the hook ran (ms since the epoch, the hook's clock).
    pub received_at: Option<u64>,
    /// The event name from the hook's argv.
    pub event: Option<String>,
    /// `PermissionRequest` only: the id the hook relays the request under.
    pub request_id: Option<String>,
    pub payload: HookPayload,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct HookLineFields {
    #[serde(deserialize_with = "lenient::opt")]
    received_at: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    event: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    request_id: Option<String>,
}

impl HookLine {
    /// Reads one line's JSON. Never fails: what is missing or of another type reads as absent.
    pub fn from_value(line: &Value) -> HookLine {
        let fields = if line.is_object() {
            HookLineFields::deserialize(line).unwrap_or_default()
        } else {
            HookLineFields::default()
        };
        let payload = HookPayload::parse(
            fields.event.as_deref().unwrap_or(""),
            line.get("payload").unwrap_or(&Value::Null),
        );
        HookLine {
            received_at: fields.received_at,
            event: fields.event,
            request_id: fields.request_id,
            payload,
        }
    }

    /// The line cohost records for a `PermissionRequest` it receives through the permission
    /// relay before the hook's own line is tailed.
    pub fn permission_request(received_at: u64, request_id: &str, payload: &Value) -> HookLine {
        HookLine {
            received_at: Some(received_at),
            event: Some("PermissionRequest".into()),
            request_id: Some(request_id.to_string()),
            payload: HookPayload::parse("PermissionRequest", payload),
        }
    }

    /// A `SessionEnd` with `reason`, for a Claude that exited without running its hook.
    pub fn session_end(reason: &str) -> HookLine {
        HookLine {
            received_at: None,
            event: Some("SessionEnd".into()),
            request_id: None,
            payload: HookPayload {
                common: HookCommon {
                    hook_event_name: Some("SessionEnd".into()),
                    ..HookCommon::default()
                },
                event: HookEvent::SessionEnd(SessionEndHookInput {
                    reason: Some(reason.to_string()),
                }),
            },
        }
    }
}

impl<'de> Deserialize<'de> for HookLine {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(HookLine::from_value(&Value::deserialize(deserializer)?))
    }
}

/// A hook's payload: the fields every event may carry, and the event's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookPayload {
    pub common: HookCommon,
    pub event: HookEvent,
}

impl HookPayload {
    /// Reads `payload` as the event its `hook_event_name` names, else `event` (the hook's
    /// argv). A payload that is not an object reads as an empty one.
    pub fn parse(event: &str, payload: &Value) -> HookPayload {
        fn input<T: de::DeserializeOwned + Default>(payload: &Value) -> T {
            if payload.is_object() {
                T::deserialize(payload).unwrap_or_default()
            } else {
                T::default()
            }
        }
        let common: HookCommon = input(payload);
        let name = common.hook_event_name.as_deref().unwrap_or(event);
        let event = match name {
            "SessionStart" => HookEvent::SessionStart(input(payload)),
            "UserPromptSubmit" => HookEvent::UserPromptSubmit(input(payload)),
            "PreToolUse" => HookEvent::PreToolUse(input(payload)),
            "PostToolUse" => HookEvent::PostToolUse(input(payload)),
            "PostToolUseFailure" => HookEvent::PostToolUseFailure(input(payload)),
            "PermissionRequest" => HookEvent::PermissionRequest(input(payload)),
            "Stop" => HookEvent::Stop(input(payload)),
            "StopFailure" => HookEvent::StopFailure(input(payload)),
            "SessionEnd" => HookEvent::SessionEnd(input(payload)),
            "Notification" => HookEvent::Notification(input(payload)),
            other => HookEvent::Other(other.to_string()),
        };
        HookPayload { common, event }
    }
}

open_enum! {
    /// Claude's `permission_mode` (2.1.332 defaults to `auto`).
    pub enum PermissionMode {
        Default = "default",
        AcceptEdits = "acceptEdits",
        Plan = "plan",
        Auto = "auto",
        DontAsk = "dontAsk",
        BypassPermissions = "bypassPermissions",
    }
}

/// What every hook payload carries (`session_id`, `transcript_path`, `cwd`), what turn-scoped
/// events add (`prompt_id`), and what most add (`permission_mode`; not SessionStart,
/// Notification or SessionEnd).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HookCommon {
    #[serde(deserialize_with = "lenient::opt")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub transcript_path: Option<String>,
    /// Follows `cd` done by the Bash tool.
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub hook_event_name: Option<String>,
    /// The same for every event of one submitted prompt (the transcript's `promptId`).
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub permission_mode: Option<PermissionMode>,
}

/// The hook events cohost reads; every other one (`PostToolBatch`, `SubagentStart`,
/// `MessageDisplay`, …, and what a newer Claude adds) is `Other` with its name.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    SessionStart(SessionStartHookInput),
    UserPromptSubmit(UserPromptSubmitHookInput),
    PreToolUse(PreToolUseHookInput),
    PostToolUse(PostToolUseHookInput),
    PostToolUseFailure(PostToolUseFailureHookInput),
    PermissionRequest(PermissionRequestHookInput),
    Stop(StopHookInput),
    StopFailure(StopFailureHookInput),
    SessionEnd(SessionEndHookInput),
    Notification(NotificationHookInput),
    Other(String),
}

impl Default for HookEvent {
    fn default() -> Self {
        HookEvent::Other(String::new())
    }
}

/// `SessionStart`: `source` is `startup`, `resume`, `clear` or `compact`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionStartHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub source: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
}

/// `UserPromptSubmit`: a prompt reached Claude (2.1.332: also one it queued behind a turn).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UserPromptSubmitHookInput {
    /// As submitted; 2.1.332 wraps a long paste in `<pasted_content id="…">`.
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt: Option<String>,
}

/// `PreToolUse`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PreToolUseHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    /// The tool's input, as sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
}

/// `PostToolUse`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PostToolUseHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_response: Option<ToolResponse>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// `PostToolUseFailure`: the tool ran and failed (`error` is its message).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PostToolUseFailureHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_interrupt: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// `PermissionRequest`: Claude would show its permission dialog.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PermissionRequestHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    /// `addDirectories`, `setMode`, … (not read).
    #[serde(deserialize_with = "lenient::vec")]
    pub permission_suggestions: Vec<Value>,
}

/// `Stop`: the turn ended.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StopHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_hook_active: Option<bool>,
    /// The reply's text, as the transcript will write it.
    #[serde(deserialize_with = "lenient::opt")]
    pub last_assistant_message: Option<String>,
}

/// `StopFailure`: the turn ended on an API error (`error` is a code such as `unknown`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StopFailureHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<String>,
    /// `API Error: 400 …`.
    #[serde(deserialize_with = "lenient::opt")]
    pub last_assistant_message: Option<String>,
}

/// `SessionEnd`: `reason` is `clear`, `prompt_input_exit`, `other`, ….
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionEndHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
}

/// `Notification`: `permission_prompt` (6 s after an unanswered dialog), `idle_prompt` (60 s
/// after a turn). Not acted on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NotificationHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub notification_type: Option<String>,
}

/// The fields of a tool input cohost reads: the Bash tool's `{command, description}` (other
/// tools are read through the same view; they just lack the fields).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct BashToolInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub description: Option<String>,
}

impl BashToolInput {
    /// The view of a tool input; empty unless it is an object.
    pub fn of(input: Option<&Value>) -> BashToolInput {
        match input {
            Some(input @ Value::Object(_)) => BashToolInput::deserialize(input).unwrap_or_default(),
            _ => BashToolInput::default(),
        }
    }
}

/// A `PostToolUse` `tool_response`: text, the Bash tool's `{stdout, stderr, interrupted, …}`, or
/// any other tool's JSON (kept as sent, `null` included).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResponse {
    Text(String),
    /// An object with a string `stdout` or `stderr`.
    Bash {
        stdout: Option<String>,
        stderr: Option<String>,
    },
    Other(Value),
}

impl ToolResponse {
    /// The response as text: Bash's stdout, then its non-empty stderr on a line of its own; any
    /// other JSON as JSON text.
    pub fn text(&self) -> String {
        match self {
            ToolResponse::Text(text) => text.clone(),
            ToolResponse::Bash { stdout, stderr } => {
                let mut out = stdout.clone().unwrap_or_default();
                if let Some(err) = stderr.as_deref().filter(|e| !e.is_empty()) {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(err);
                }
                out
            }
            ToolResponse::Other(value) => value.to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for ToolResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Output {
            #[serde(deserialize_with = "lenient::opt")]
            stdout: Option<String>,
            #[serde(deserialize_with = "lenient::opt")]
            stderr: Option<String>,
        }
        Ok(match Value::deserialize(deserializer)? {
            Value::String(text) => ToolResponse::Text(text),
            value @ Value::Object(_) => {
                let output = Output::deserialize(&value).unwrap_or_default();
                if output.stdout.is_some() || output.stderr.is_some() {
                    ToolResponse::Bash {
                        stdout: output.stdout,
                        stderr: output.stderr,
                    }
                } else {
                    ToolResponse::Other(value)
                }
            }
            other => ToolResponse::Other(other),
        })
    }
}

// ----------------------------------------------------------------------------------------------
// Transcript records.

/// One transcript line. The kinds cohost reads are typed; every other one (`attachment`,
/// `mode`, `permission-mode`, `queue-operation`, `last-prompt`, `ai-title`,
/// `file-history-snapshot`, 2.1.332's `api-request*`, `atis-latch`, `tools-used`, `cost-state`,
/// …) is `Other` with its `type`, read no further. What every line may carry is in `head`.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptRecord {
    User(RecordHead, UserRecord),
    Assistant(RecordHead, AssistantRecord),
    System(RecordHead, SystemRecord),
    Other(RecordHead),
}

/// What cohost reads of every line: its `type`, its `uuid` (message lines; metadata lines have
/// none) and `isSidechain` (a subagent's lines).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RecordHead {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub uuid: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_sidechain: Option<bool>,
}

impl RecordHead {
    /// The head of one transcript line's text, read without building the rest; `None` for a
    /// line that is not one JSON object.
    pub fn of_line(line: &str) -> Option<RecordHead> {
        let mut deserializer = serde_json::Deserializer::from_str(line);
        let head = lenient::read_object(&mut deserializer).ok()??;
        deserializer.end().ok()?;
        Some(head)
    }
}

impl TranscriptRecord {
    /// Reads one line's JSON. Never fails: a line that is not an object is `Other` with an empty
    /// head, and fields of another type read as absent.
    pub fn from_value(line: &Value) -> TranscriptRecord {
        fn record<T: de::DeserializeOwned + Default>(line: &Value) -> T {
            T::deserialize(line).unwrap_or_default()
        }
        if !line.is_object() {
            return TranscriptRecord::Other(RecordHead::default());
        }
        let head: RecordHead = record(line);
        match head.kind.as_deref() {
            Some("user") => TranscriptRecord::User(head, record(line)),
            Some("assistant") => TranscriptRecord::Assistant(head, record(line)),
            Some("system") => TranscriptRecord::System(head, record(line)),
            _ => TranscriptRecord::Other(head),
        }
    }

    pub fn head(&self) -> &RecordHead {
        match self {
            TranscriptRecord::User(head, _)
            | TranscriptRecord::Assistant(head, _)
            | TranscriptRecord::System(head, _)
            | TranscriptRecord::Other(head) => head,
        }
    }
}

impl<'de> Deserialize<'de> for TranscriptRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(TranscriptRecord::from_value(&Value::deserialize(
            deserializer,
        )?))
    }
}

open_enum! {
    /// A user line's `promptSource`.
    pub enum PromptSource {
        /// Typed or pasted into the box.
        Typed = "typed",
        /// Queued behind a running turn, sent when it ended.
        Queued = "queued",
    }
}

/// A `user` line: a prompt (string content), tool results, an interrupt marker or a slash
/// command's expansion (block content).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserRecord {
    /// The hook's `prompt_id`.
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_source: Option<PromptSource>,
    /// Harness-made lines (caveats, command expansions).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_meta: Option<bool>,
    /// Present (as `true`) on the summary a compaction writes. Kept as sent: cohost tells a
    /// summary by the field's presence.
    #[serde(deserialize_with = "lenient::opt")]
    pub is_compact_summary: Option<Value>,
    /// The API message id an interrupt marker interrupted (2.1.332: equals the partial reply's
    /// `message.id`).
    #[serde(deserialize_with = "lenient::opt")]
    pub interrupted_message_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<UserMessage>,
}

impl UserRecord {
    pub fn content(&self) -> Option<&UserContent> {
        self.message.as_ref()?.content.as_ref()
    }

    pub fn is_compact_summary(&self) -> bool {
        self.is_compact_summary.is_some()
    }
}

/// A user line's `message`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UserMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<UserContent>,
}

/// A user message's `content`: a string (a prompt) or content blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<UserContentBlock>),
}

impl Lenient for UserContent {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        struct ContentVisitor;
        impl<'de> de::Visitor<'de> for ContentVisitor {
            type Value = Option<UserContent>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Some(UserContent::Text(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Some(UserContent::Text(text)))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let blocks: Vec<UserContentBlock> =
                    lenient::vec(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Some(UserContent::Blocks(blocks)))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let _: Option<Value> = Lenient::read(de::value::MapAccessDeserializer::new(map))?;
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
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

impl<'de> Deserialize<'de> for UserContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        UserContent::read(deserializer)?
            .ok_or_else(|| de::Error::custom("message content is a string or blocks"))
    }
}

/// Every field of every content block cohost reads, read in one pass; a block is then what its
/// `type` says.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawBlock {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    content: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    is_error: Option<bool>,
}

lenient_object!(RawBlock);

/// Reads an array element as a raw block: an element that is not an object is a block
/// without a type.
fn raw_block<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RawBlock, D::Error> {
    Ok(RawBlock::read(deserializer)?.unwrap_or_default())
}

/// A block of a user message. Every element of the array is one (so positions are kept):
/// what is not a block cohost reads is `Other` with its `type` (empty when it has none).
#[derive(Debug, Clone, PartialEq)]
pub enum UserContentBlock {
    /// `{"type":"tool_result","tool_use_id","content","is_error"}`.
    ToolResult(ToolResultBlock),
    /// `{"type":"text","text"}`: an interrupt marker, or part of a command's expansion.
    Text(TextBlock),
    Other(String),
}

impl From<RawBlock> for UserContentBlock {
    fn from(raw: RawBlock) -> Self {
        match raw.kind.as_deref().unwrap_or_default() {
            "tool_result" => UserContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: raw.tool_use_id,
                content: raw.content,
                is_error: raw.is_error,
            }),
            "text" => UserContentBlock::Text(TextBlock { text: raw.text }),
            _ => UserContentBlock::Other(raw.kind.unwrap_or_default()),
        }
    }
}

impl Lenient for UserContentBlock {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        raw_block(deserializer).map(|raw| Some(raw.into()))
    }
}

impl<'de> Deserialize<'de> for UserContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        raw_block(deserializer).map(Into::into)
    }
}

/// `{"type":"text","text"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TextBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
}

/// `{"type":"tool_result"}`: a tool's result as the model sees it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolResultBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    /// A string, or blocks; kept as sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_error: Option<bool>,
}

impl ToolResultBlock {
    /// The result as text: a string content as it is, any other as JSON text, none as empty.
    pub fn text(&self) -> String {
        match &self.content {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

/// An `assistant` line: one content block of one API message (a message's blocks share its
/// `message.id`), or a synthetic line (an interrupt's partial text, an API error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AssistantRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<AssistantMessage>,
    /// A synthetic line reporting an API error (`apiErrorStatus` is then its HTTP status).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_api_error_message: Option<bool>,
    /// The HTTP status of an API error, kept as sent (cohost records its JSON text).
    #[serde(deserialize_with = "lenient::opt")]
    pub api_error_status: Option<Value>,
    /// 2.1.332: the partial text of a reply an interrupt cut off (its `message.model` is the
    /// real model; 2.1.197 wrote such lines as model `<synthetic>`).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_aborted_mid_stream: Option<bool>,
}

/// An assistant line's `message` (an Anthropic API `Message`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct AssistantMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// `<synthetic>` for lines Claude Code made up (2.1.197 interrupts, API errors).
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
    /// Every element of the array, in place (see [`AssistantContentBlock`]).
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<AssistantContentBlock>,
    /// `end_turn`, `tool_use`, `stop_sequence`; `null` while streaming or when aborted.
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_reason: Option<String>,
    /// `Some` whenever present (a `null` or malformed one reads as all zeros).
    #[serde(deserialize_with = "lenient::present")]
    pub usage: Option<Usage>,
}

/// A block of an assistant message. Every element of the array is one (positions are part of
/// cohost's item ids): what is not a block cohost reads is `Other` with its `type` (`thinking`,
/// …; empty when it has none).
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantContentBlock {
    Text(TextBlock),
    ToolUse(ToolUseBlock),
    Other(String),
}

impl From<RawBlock> for AssistantContentBlock {
    fn from(raw: RawBlock) -> Self {
        match raw.kind.as_deref().unwrap_or_default() {
            "text" => AssistantContentBlock::Text(TextBlock { text: raw.text }),
            "tool_use" => AssistantContentBlock::ToolUse(ToolUseBlock {
                id: raw.id,
                name: raw.name,
                input: raw.input,
            }),
            _ => AssistantContentBlock::Other(raw.kind.unwrap_or_default()),
        }
    }
}

impl Lenient for AssistantContentBlock {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        raw_block(deserializer).map(|raw| Some(raw.into()))
    }
}

impl<'de> Deserialize<'de> for AssistantContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        raw_block(deserializer).map(Into::into)
    }
}

/// `{"type":"tool_use","id","name","input"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolUseBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub name: Option<String>,
    /// As sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub input: Option<Value>,
}

/// An API message's `usage` (token counts; the cache counts are input tokens too).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Usage {
    #[serde(deserialize_with = "lenient::opt")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub output_tokens: Option<u64>,
}

/// A `system` line. cohost reads `turn_duration` (a turn's normal or API-error end); other
/// subtypes (`stop_hook_summary`, `local_command`, `compact_boundary`) are passed over.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SystemRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub subtype: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

lenient_object!(UserMessage, AssistantMessage, Usage);
lenient_via_value!(ToolResponse);

// ----------------------------------------------------------------------------------------------
// The TUI's session file.

/// `~/.claude/sessions/<pid>.json`, which the TUI keeps while it runs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionFile {
    #[serde(deserialize_with = "lenient::opt")]
    pub pid: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub session_id: Option<String>,
    /// `idle`, `busy`, `waiting` or `shell`.
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
    /// What a `waiting` TUI waits for (`permission prompt`, …).
    #[serde(deserialize_with = "lenient::opt")]
    pub waiting_for: Option<String>,
}

impl SessionFile {
    /// The file's contents; `None` unless they are one JSON object.
    pub fn from_slice(bytes: &[u8]) -> Option<SessionFile> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let file = lenient::read_object(&mut deserializer).ok()??;
        deserializer.end().ok()?;
        Some(file)
    }
}

#[cfg(test)]
mod tests {
    //! Literal payloads and lines as Claude Code 2.1.197 and 2.1.332 write them (docs/peers.md
    //! summarises them; where the captures elide a part with `…` outside a string, the part is left
    //! out).

    use super::*;

    /// The line `cohost-hook` writes (the shared boundary type) reads back the same here.
    #[test]
    fn the_hooks_own_line_reads_back() {
        let written = crate::protocol::boundary::HookLine {
            received_at: 1795957500811,
            event: "PermissionRequest".into(),
            request_id: Some("9f0c".into()),
            payload: serde_json::json!({"session_id":"s1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls"}}),
        };
        let read = HookLine::from_value(&serde_json::to_value(&written).unwrap());
        assert_eq!(read.received_at, Some(written.received_at));
        assert_eq!(read.event.as_deref(), Some("PermissionRequest"));
        assert_eq!(read.request_id.as_deref(), Some("9f0c"));
        assert!(
            matches!(read.payload.event, HookEvent::PermissionRequest(_)),
            "{read:?}"
        );
    }
    use serde_json::json;

    fn hook(event: &str, payload: &str) -> HookLine {
        HookLine::from_value(&json!({
            "receivedAt": 1795957501000u64,
            "event": event,
            "payload": serde_json::from_str::<Value>(payload).unwrap(),
        }))
    }

    fn record(line: &str) -> TranscriptRecord {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn hook_payloads_of_2_1_197() {
        let start = hook(
            "SessionStart",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "hook_event_name": "SessionStart", "source": "startup", "model": "claude-opus-4-8[1m]"}"#,
        );
        assert_eq!(start.received_at, Some(1795957501000));
        assert_eq!(
            start.payload.common.session_id.as_deref(),
            Some("3c74e8a3-0d49-463f-801d-b8088269916a")
        );
        assert_eq!(start.payload.common.permission_mode, None);
        assert!(
            matches!(&start.payload.event, HookEvent::SessionStart(s) if s.source.as_deref() == Some("startup"))
        );

        let submit = hook(
            "UserPromptSubmit",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": "Say hello"}"#,
        );
        assert_eq!(
            submit.payload.common.prompt_id.as_deref(),
            Some("125e97e0-3976-4d40-8b1f-3b09b0e7b342")
        );
        assert_eq!(
            submit.payload.common.permission_mode,
            Some(PermissionMode::Default)
        );
        assert!(
            matches!(&submit.payload.event, HookEvent::UserPromptSubmit(u) if u.prompt.as_deref() == Some("Say hello"))
        );

        let pre = hook(
            "PreToolUse",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "Print hi"}, "tool_use_id": "toolu_mock_4e5418d5b9534157bf66"}"#,
        );
        let HookEvent::PreToolUse(pre) = &pre.payload.event else {
            panic!()
        };
        assert_eq!(pre.tool_name.as_deref(), Some("Bash"));
        assert_eq!(
            BashToolInput::of(pre.tool_input.as_ref())
                .command
                .as_deref(),
            Some("echo hi")
        );

        let post = hook(
            "PostToolUse",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "Print hi"}, "tool_response": {"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}, "tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "duration_ms": 86}"#,
        );
        let HookEvent::PostToolUse(post) = &post.payload.event else {
            panic!()
        };
        assert_eq!(post.duration_ms, Some(86));
        assert_eq!(
            post.tool_response
                .as_ref()
                .map(ToolResponse::text)
                .as_deref(),
            Some("hi")
        );

        let failure = hook(
            "PostToolUseFailure",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "de438983-b10e-4981-8659-e04f1f81fabc", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_input": {"command": "ls ./nonexistent_subdir", "description": "List missing"}, "tool_use_id": "toolu_mock_a781a51f869e451b802d", "error": "Exit code 2\nls: cannot access './nonexistent_subdir': No such file or directory", "is_interrupt": false, "duration_ms": 21}"#,
        );
        assert!(
            matches!(&failure.payload.event, HookEvent::PostToolUseFailure(f) if f.error.as_deref().unwrap().starts_with("Exit code 2") && f.is_interrupt == Some(false))
        );

        let permission = HookLine::from_value(
            &json!({"receivedAt": 1, "event": "PermissionRequest", "requestId": "r-7", "payload": serde_json::from_str::<Value>(r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "288b3cd3-9a66-4e46-9315-1eb88dcc67a0", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch made_by_claude.txt", "description": "Create file"}, "permission_suggestions": [{"type": "addDirectories", "directories": ["$PROBE/ws_s01_basic"], "destination": "session"}, {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}"#).unwrap()}),
        );
        assert_eq!(permission.request_id.as_deref(), Some("r-7"));
        let HookEvent::PermissionRequest(request) = &permission.payload.event else {
            panic!()
        };
        assert_eq!(request.permission_suggestions.len(), 2);
        assert_eq!(
            BashToolInput::of(request.tool_input.as_ref()),
            BashToolInput {
                command: Some("touch made_by_claude.txt".into()),
                description: Some("Create file".into())
            }
        );

        let stop = hook(
            "Stop",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "transcript_path": "$PROBE/results/s01_basic/home/.claude/projects/-probe-ws-s01-basic/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl", "cwd": "$PROBE/ws_s01_basic", "prompt_id": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Hello from the mock. word word word END.", "background_tasks": [], "session_crons": []}"#,
        );
        assert!(
            matches!(&stop.payload.event, HookEvent::Stop(s) if s.last_assistant_message.as_deref() == Some("Hello from the mock. word word word END.") && s.stop_hook_active == Some(false))
        );

        let failure = hook(
            "StopFailure",
            r#"{"session_id": "9cee02f2-1a30-458c-99f6-7f534849df22", "transcript_path": "$PROBE/results/s05_print_mode/home/.claude/projects/-probe-ws-s05-print-mode/9cee02f2-1a30-458c-99f6-7f534849df22.jsonl", "cwd": "$PROBE/ws_s05_print_mode", "prompt_id": "7a968e6b-9f18-4f61-9ce9-126d70943884", "effort": {"level": "high"}, "hook_event_name": "StopFailure", "error": "unknown", "last_assistant_message": "API Error: 400 mock says no"}"#,
        );
        assert!(
            matches!(&failure.payload.event, HookEvent::StopFailure(f) if f.error.as_deref() == Some("unknown"))
        );

        let end = hook(
            "SessionEnd",
            r#"{"session_id": "869115aa-8b3a-40d4-be5f-f9aed0966f43", "transcript_path": "$PROBE/results/s04_resume/home/.claude/projects/-probe-ws-s04-resume/869115aa-8b3a-40d4-be5f-f9aed0966f43.jsonl", "cwd": "$PROBE/ws_s04_resume", "prompt_id": "2d017a7c-28f5-4332-91cd-35d755bf2a4b", "hook_event_name": "SessionEnd", "reason": "clear"}"#,
        );
        assert!(
            matches!(&end.payload.event, HookEvent::SessionEnd(e) if e.reason.as_deref() == Some("clear"))
        );

        let idle = hook(
            "Notification",
            r#"{"session_id": "886e3646-cae2-4498-a73e-53f7bfa964f8", "transcript_path": "$PROBE/results/s06_more_hooks/home/.claude/projects/-probe-ws-s06-more-hooks/886e3646-cae2-4498-a73e-53f7bfa964f8.jsonl", "cwd": "$PROBE/ws_s06_more_hooks/sub", "prompt_id": "54e32f8a-1543-4f42-a4a1-bc384a769642", "hook_event_name": "Notification", "message": "Claude is waiting for your input", "notification_type": "idle_prompt"}"#,
        );
        assert!(
            matches!(&idle.payload.event, HookEvent::Notification(n) if n.notification_type.as_deref() == Some("idle_prompt"))
        );

        // An Agent tool's response is not Bash's shape: kept as JSON.
        let agent = hook(
            "PostToolUse",
            r#"{"session_id": "886e3646-cae2-4498-a73e-53f7bfa964f8", "prompt_id": "6c63ee13-965b-4593-9dee-ddc3a6a7f3a3", "hook_event_name": "PostToolUse", "tool_name": "Agent", "tool_input": {"description": "probe subagent", "subagent_type": "general-purpose"}, "tool_response": {"status": "completed", "agentId": "a0fe57af55ef54084", "content": [{"type": "text", "text": "Subagent report: all good."}], "totalDurationMs": 281}, "tool_use_id": "toolu_mock_86212010e74d4fe4ae1b", "duration_ms": 281}"#,
        );
        let HookEvent::PostToolUse(agent) = &agent.payload.event else {
            panic!()
        };
        assert!(matches!(agent.tool_response, Some(ToolResponse::Other(_))));

        // Events cohost does not read, and payloads that are not Claude's JSON.
        let batch = hook(
            "PostToolBatch",
            r#"{"session_id": "3c74e8a3-0d49-463f-801d-b8088269916a", "prompt_id": "00f4130d-955b-49f3-8941-a9d2228d21f8", "hook_event_name": "PostToolBatch", "tool_calls": [{"tool_name": "Bash", "tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "tool_response": "hi"}]}"#,
        );
        assert_eq!(
            batch.payload.event,
            HookEvent::Other("PostToolBatch".into())
        );
        let truncated = HookLine::from_value(
            &json!({"receivedAt": 1, "event": "PostToolUse", "payload": {"truncated": true, "bytes": 5_000_000, "limit": 4_194_304, "head": "{\"session_id\""}}),
        );
        assert!(
            matches!(&truncated.payload.event, HookEvent::PostToolUse(p) if p.tool_use_id.is_none())
        );
        let text =
            HookLine::from_value(&json!({"receivedAt": 1, "event": "Stop", "payload": "not json"}));
        assert_eq!(
            text.payload,
            HookPayload {
                common: HookCommon::default(),
                event: HookEvent::Stop(StopHookInput::default()),
            }
        );
    }

    #[test]
    fn lines_cohost_makes_read_like_their_json() {
        assert_eq!(
            HookLine::session_end("exited"),
            HookLine::from_value(
                &json!({"event": "SessionEnd", "payload": {"hook_event_name": "SessionEnd", "reason": "exited"}})
            )
        );
        let payload = json!({"session_id": "s1", "prompt_id": "p1", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch x"}});
        assert_eq!(
            HookLine::permission_request(7, "r1", &payload),
            HookLine::from_value(
                &json!({"receivedAt": 7, "event": "PermissionRequest", "requestId": "r1", "payload": payload})
            )
        );
    }

    #[test]
    fn hook_payloads_of_2_1_332() {
        // L1: auto mode is reported; new fields (`effort`, `background_tasks`) are ignored.
        let submit = hook(
            "UserPromptSubmit",
            r#"{"prompt_id":"f548fb5c-…","permission_mode":"auto","hook_event_name":"UserPromptSubmit","prompt":"TOUCH please"}"#,
        );
        assert_eq!(
            submit.payload.common.permission_mode,
            Some(PermissionMode::Auto)
        );
        let pre = hook(
            "PreToolUse",
            r#"{"prompt_id":"f548fb5c-…","permission_mode":"auto","effort":{"level":"medium"},"tool_name":"Bash","tool_input":{"command":"touch made.txt"},"tool_use_id":"toolu_af81…"}"#,
        );
        assert!(
            matches!(&pre.payload.event, HookEvent::PreToolUse(p) if p.tool_use_id.as_deref() == Some("toolu_af81…"))
        );
        let post = hook(
            "PostToolUse",
            r#"{"permission_mode":"auto","tool_response":{"stdout":"","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":true},"duration_ms":82}"#,
        );
        assert!(
            matches!(&post.payload.event, HookEvent::PostToolUse(p) if p.tool_response.as_ref().map(ToolResponse::text).as_deref() == Some(""))
        );
        let stop = hook(
            "Stop",
            r#"{"permission_mode":"auto","last_assistant_message":"Done after the tool.","background_tasks":[],"session_crons":[]}"#,
        );
        assert!(
            matches!(&stop.payload.event, HookEvent::Stop(s) if s.last_assistant_message.as_deref() == Some("Done after the tool."))
        );
        // A permission mode a newer Claude adds is kept as sent.
        let odd = hook("Stop", r#"{"permission_mode":"supervised"}"#);
        assert_eq!(
            odd.payload
                .common
                .permission_mode
                .as_ref()
                .map(PermissionMode::as_str),
            Some("supervised")
        );
        // L4: the wrapped paste arrives as the prompt (unwrapped by the normalizer).
        let paste = hook(
            "UserPromptSubmit",
            r#"{"prompt_id":"p","prompt":"\n\n<pasted_content id=\"0fb6\">\nFirst line of a multi-line prompt\n  indented second line\n</pasted_content id=\"0fb6\">\n"}"#,
        );
        assert!(
            matches!(&paste.payload.event, HookEvent::UserPromptSubmit(u) if u.prompt.as_deref().unwrap().contains("<pasted_content"))
        );
    }

    #[test]
    fn transcript_records_of_2_1_197() {
        let TranscriptRecord::User(head, prompt) = record(
            r#"{"parentUuid": null, "isSidechain": false, "promptId": "125e97e0-3976-4d40-8b1f-3b09b0e7b342", "type": "user", "message": {"role": "user", "content": "Say hello"}, "uuid": "3ef9e7c5-d2c0-4e43-a8dc-c78ad4ff242e", "timestamp": "2026-11-29T13:05:01.511Z", "permissionMode": "default", "origin": {"kind": "human"}, "promptSource": "typed", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s01_basic", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a", "version": "2.1.197", "gitBranch": "HEAD"}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            head.uuid.as_deref(),
            Some("3ef9e7c5-d2c0-4e43-a8dc-c78ad4ff242e")
        );
        assert_eq!(head.is_sidechain, Some(false));
        assert_eq!(prompt.prompt_source, Some(PromptSource::Typed));
        assert_eq!(
            prompt.content(),
            Some(&UserContent::Text("Say hello".into()))
        );

        let TranscriptRecord::Assistant(_, reply) = record(
            r#"{"parentUuid": "1ed51a13-8d15-47b5-a320-ca310e9d6e15", "isSidechain": false, "message": {"id": "msg_mock_0002_a7861594c19d", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [{"type": "text", "text": "Hello from the mock. word word END."}], "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 22245, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 63, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": "", "iterations": [], "speed": "standard"}, "stop_details": null}, "requestId": "req_mock_ab0c00fd50d549af", "type": "assistant", "uuid": "f4019d42-d4ee-42fb-a1bf-689db526c181", "timestamp": "2026-11-29T13:05:07.421Z", "userType": "external", "entrypoint": "cli", "cwd": "$PROBE/ws_s01_basic", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a", "version": "2.1.197", "gitBranch": "HEAD"}"#,
        ) else {
            panic!()
        };
        let message = reply.message.unwrap();
        assert_eq!(message.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(message.usage.unwrap().input_tokens, Some(22245));
        assert_eq!(
            message.content,
            [AssistantContentBlock::Text(TextBlock {
                text: Some("Hello from the mock. word word END.".into())
            })]
        );

        let TranscriptRecord::Assistant(_, tool) = record(
            r#"{"parentUuid": "8dc77705-9f25-41d6-9982-de14937246a6", "isSidechain": false, "message": {"id": "msg_mock_0005_e9c7840ea5aa", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [{"type": "tool_use", "id": "toolu_mock_4e5418d5b9534157bf66", "name": "Bash", "input": {"command": "echo hi", "description": "Print hi"}}], "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 22332, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 44}, "stop_details": null}, "requestId": "req_mock_26afdca765af44e5", "type": "assistant", "uuid": "f9165ba6-2cc7-431f-be18-6de23498f30f"}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            tool.message.unwrap().content,
            [AssistantContentBlock::ToolUse(ToolUseBlock {
                id: Some("toolu_mock_4e5418d5b9534157bf66".into()),
                name: Some("Bash".into()),
                input: Some(json!({"command": "echo hi", "description": "Print hi"})),
            })]
        );

        let TranscriptRecord::User(_, result) = record(
            r#"{"parentUuid": "f9165ba6-2cc7-431f-be18-6de23498f30f", "isSidechain": false, "promptId": "00f4130d-955b-49f3-8941-a9d2228d21f8", "type": "user", "message": {"role": "user", "content": [{"tool_use_id": "toolu_mock_4e5418d5b9534157bf66", "type": "tool_result", "content": "hi", "is_error": false}]}, "uuid": "93d4f33c-c488-4a5f-9348-30cb2a363243", "timestamp": "2026-11-29T13:05:08.566Z", "toolUseResult": {"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}, "sourceToolAssistantUUID": "f9165ba6-2cc7-431f-be18-6de23498f30f"}"#,
        ) else {
            panic!()
        };
        let Some(UserContent::Blocks(blocks)) = result.content() else {
            panic!()
        };
        let [UserContentBlock::ToolResult(result)] = blocks.as_slice() else {
            panic!("{blocks:?}")
        };
        assert_eq!(result.text(), "hi");
        assert_eq!(result.is_error, Some(false));

        let TranscriptRecord::System(_, end) = record(
            r#"{"parentUuid": "6736a104-bf2b-4803-91ce-26268903ab66", "isSidechain": false, "type": "system", "subtype": "turn_duration", "durationMs": 5859, "messageCount": 5, "timestamp": "2026-11-29T13:05:07.493Z", "uuid": "29814aa1-6f59-4efa-9ea5-53904b0b41a9", "isMeta": false}"#,
        ) else {
            panic!()
        };
        assert_eq!(end.subtype.as_deref(), Some("turn_duration"));
        assert_eq!(end.duration_ms, Some(5859));

        // Synthetic lines: an interrupt's partial text, an API error.
        let TranscriptRecord::Assistant(_, partial) = record(
            r#"{"parentUuid": "abdc31b6-2321-4034-9b5e-ed283de37915", "isSidechain": false, "type": "assistant", "uuid": "2885e6b1-1291-49dd-b83f-b2ac780c4f14", "timestamp": "2026-11-29T13:05:22.705Z", "message": {"id": "c036838e-6783-4be4-866a-a4188acef180", "container": null, "model": "<synthetic>", "role": "assistant", "stop_details": null, "stop_reason": "stop_sequence", "stop_sequence": "", "type": "message", "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": null, "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": null, "iterations": null, "speed": null}, "content": [{"type": "text", "text": "Streaming slowly: w00 w01 w02 w03 w04 w05 w06 w07 w08 w09 w1"}], "context_management": null}, "isApiErrorMessage": false}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            partial.message.unwrap().model.as_deref(),
            Some("<synthetic>")
        );
        assert_eq!(partial.is_api_error_message, Some(false));
        let TranscriptRecord::Assistant(_, error) = record(
            r#"{"parentUuid": "496b649c-b4c0-4e0a-95d7-2cdac30aae05", "isSidechain": false, "type": "assistant", "uuid": "0a4b39fd-ec6e-4e30-910e-0fcee68630cd", "timestamp": "2026-11-29T13:07:30.940Z", "message": {"id": "11250bd9-9642-4c1c-aad2-3235e8a864d8", "container": null, "model": "<synthetic>", "role": "assistant", "stop_details": null, "stop_reason": "stop_sequence", "stop_sequence": "", "type": "message", "usage": {"input_tokens": 0, "output_tokens": 0}, "content": [{"type": "text", "text": "API Error: 400 mock says no"}], "context_management": null}, "requestId": "req_mock_f1d79185e5844fdf", "error": "unknown", "isApiErrorMessage": true, "apiErrorStatus": 400, "userType": "external", "entrypoint": "sdk-cli"}"#,
        ) else {
            panic!()
        };
        assert_eq!(error.is_api_error_message, Some(true));
        assert_eq!(error.api_error_status, Some(json!(400)));

        let TranscriptRecord::User(_, marker) = record(
            r#"{"parentUuid": "2885e6b1-1291-49dd-b83f-b2ac780c4f14", "isSidechain": false, "promptId": "d8b68b95-921d-48e7-8c23-b38346f7bcde", "type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}, "uuid": "a3cabaae-33fb-4540-a45f-ce0cb1297a4e", "timestamp": "2026-11-29T13:05:22.708Z", "interruptedMessageId": "msg_mock_0003_9890340d89f0"}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            marker.interrupted_message_id.as_deref(),
            Some("msg_mock_0003_9890340d89f0")
        );

        // Meta and summary prompts are told apart by their flags.
        let TranscriptRecord::User(_, caveat) = record(
            r#"{"parentUuid": null, "isSidechain": false, "promptId": "2d017a7c-28f5-4332-91cd-35d755bf2a4b", "type": "user", "message": {"role": "user", "content": "<local-command-caveat>Caveat: …</local-command-caveat>"}, "isMeta": true, "uuid": "12b5ea11-186b-4a02-a9fb-0c9f1b59f473"}"#,
        ) else {
            panic!()
        };
        assert_eq!(caveat.is_meta, Some(true));
        let TranscriptRecord::User(_, summary) = record(
            r#"{"parentUuid": "f7e3cf42-ea27-4c13-96ae-31c07f33c3dc", "isSidechain": false, "promptId": "a6c86d36-2251-4c9a-b79a-52ddcba95ee9", "type": "user", "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context."}, "isVisibleInTranscriptOnly": true, "isCompactSummary": true, "uuid": "3ca561b4-0655-4baf-9f78-60976eae417e"}"#,
        ) else {
            panic!()
        };
        assert!(summary.is_compact_summary());

        // A subagent's line.
        let sidechain = record(
            r#"{"parentUuid": null, "isSidechain": true, "promptId": "6c63ee13-965b-4593-9dee-ddc3a6a7f3a3", "agentId": "a0fe57af55ef54084", "type": "user", "message": {"role": "user", "content": "Report status."}, "uuid": "ed101b93-ef0c-439d-8aa4-61b0fb712601"}"#,
        );
        assert_eq!(sidechain.head().is_sidechain, Some(true));

        // Kinds cohost does not read.
        for (line, kind) in [
            (
                r#"{"type": "mode", "mode": "normal", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
                "mode",
            ),
            (
                r#"{"type": "permission-mode", "permissionMode": "default", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
                "permission-mode",
            ),
            (
                r#"{"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-11-29T13:06:14.999Z", "sessionId": "95e1d598-2527-4ab5-a6dc-71e482c0617c", "content": "Queued prompt A"}"#,
                "queue-operation",
            ),
            (
                r#"{"type": "last-prompt", "lastPrompt": "List a missing dir", "leafUuid": "e9816098-413d-4606-ac9f-1f472fa7e6fc", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
                "last-prompt",
            ),
            (
                r#"{"type": "ai-title", "aiTitle": "Mock title", "sessionId": "3c74e8a3-0d49-463f-801d-b8088269916a"}"#,
                "ai-title",
            ),
            (
                r#"{"parentUuid": "7e9dd641-ea8b-4f3c-a0d7-734c474c5483", "isSidechain": false, "attachment": {"type": "queued_command", "prompt": "Injected during tool", "commandMode": "prompt", "origin": {"kind": "human"}, "timestamp": "2026-11-29T13:06:20.875Z"}, "type": "attachment", "uuid": "8645b7a7-d606-4890-abb7-2261e9fee55e"}"#,
                "attachment",
            ),
        ] {
            let record = record(line);
            assert!(matches!(record, TranscriptRecord::Other(_)), "{line}");
            assert_eq!(record.head().kind.as_deref(), Some(kind));
        }
    }

    #[test]
    fn transcript_records_of_2_1_332() {
        // L6: an aborted partial reply names the real model and has no stop reason.
        let TranscriptRecord::Assistant(head, partial) = record(
            r#"{"parentUuid":"6eda…","message":{"id":"msg_ae01365aeb57","type":"message","role":"assistant","model":"claude-mock","content":[{"type":"text","text":"word0 word1 … word15"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"apiBlockIndex":0,"requestRef":"b9a4…","requestedModel":"claude-opus-5-5","promptCacheRequested":"5m","type":"assistant","uuid":"e9f88735-…","timestamp":"2026-12-01T09:18:23.092Z","isAbortedMidStream":true,"effort":"medium","perTurnEffort":"medium","madeBy":"model"}"#,
        ) else {
            panic!()
        };
        assert_eq!(head.uuid.as_deref(), Some("e9f88735-…"));
        assert_eq!(partial.is_aborted_mid_stream, Some(true));
        let message = partial.message.unwrap();
        assert_eq!(message.model.as_deref(), Some("claude-mock"));
        assert_eq!(message.stop_reason, None);
        assert_eq!(message.id.as_deref(), Some("msg_ae01365aeb57"));
        let TranscriptRecord::User(_, marker) = record(
            r#"{"parentUuid":"e9f88735-…","promptId":"c66f5bd0-…","type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"rowSource":"harness","interruptedMessageId":"msg_ae01365aeb57"}"#,
        ) else {
            panic!()
        };
        assert_eq!(marker.interrupted_message_id, message.id);

        // L5: a queued prompt's own line.
        let TranscriptRecord::User(_, queued) = record(
            r#"{"type":"user","promptId":"94a7033d-…","promptSource":"queued","sentAtMs":1796116683151,"turnPosition":{"promptIndex":3,"turnIndex":3},"message":{"role":"user","content":"And then this"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(queued.prompt_source, Some(PromptSource::Queued));

        // L1/L8: tool results carry `permissionDecision`; new kinds are passed over.
        let TranscriptRecord::User(_, result) = record(
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_af81…","type":"tool_result","content":"(Bash completed with no output)","is_error":false}]},"sandboxed":false,"permissionDecision":{"decision":"accept","source":"config","reasonType":"mode"}}"#,
        ) else {
            panic!()
        };
        assert!(
            matches!(result.content(), Some(UserContent::Blocks(b)) if matches!(&b[0], UserContentBlock::ToolResult(r) if r.text() == "(Bash completed with no output)"))
        );
        for line in [
            r#"{"type":"permission-mode","permissionMode":"auto","sessionId":"24f3f4a0-…"}"#,
            r#"{"attachment":{"type":"auto_mode","autoModeConsentFlow":false,"finishExposedWork":false,"bashFirst":true,"bashFirstSteer":"relaxed","steerOnly":true,"bypass":false},"type":"attachment","rendered":[{"content":"<system-reminder>\nWhile auto mode is active:…"}],"renderedRole":"system"}"#,
            r#"{"type":"atis-latch","atis":""}"#,
            r#"{"type":"tools-used","tools":["Bash"]}"#,
            r#"{"type":"queue-operation","operation":"enqueue","content":"And then this"}"#,
        ] {
            assert!(matches!(record(line), TranscriptRecord::Other(_)), "{line}");
        }
    }

    #[test]
    fn what_does_not_fit_reads_as_absent() {
        // Wrong types, odd content, non-objects: nothing fails, positions of blocks are kept.
        let TranscriptRecord::Assistant(_, odd) = record(
            r#"{"type":"assistant","uuid":7,"message":{"model":5,"content":["x",{"type":"thinking","thinking":"…"},{"type":"text","text":"kept"}],"stop_reason":3,"usage":null}}"#,
        ) else {
            panic!()
        };
        let message = odd.message.unwrap();
        assert_eq!(message.model, None);
        assert_eq!(message.stop_reason, None);
        assert_eq!(message.usage, Some(Usage::default()));
        assert_eq!(message.content.len(), 3);
        assert_eq!(
            message.content[0],
            AssistantContentBlock::Other(String::new())
        );
        assert_eq!(
            message.content[1],
            AssistantContentBlock::Other("thinking".into())
        );
        for line in [
            json!(null),
            json!([1]),
            json!("x"),
            json!({"message": [1, 2]}),
        ] {
            let record = TranscriptRecord::from_value(&line);
            assert!(matches!(record, TranscriptRecord::Other(_)), "{line}");
        }
        let TranscriptRecord::User(_, user) =
            TranscriptRecord::from_value(&json!({"type":"user","message":{"content":{"a":1}}}))
        else {
            panic!()
        };
        assert_eq!(user.content(), None);
        assert_eq!(RecordHead::of_line(r#"["user","u1"]"#), None);
        assert_eq!(
            RecordHead::of_line(r#"{"type":"user","uuid":"u1","message":{"content":"x"}}"#)
                .and_then(|head| head.uuid),
            Some("u1".into())
        );
    }

    #[test]
    fn the_session_file() {
        // §6.
        let file = SessionFile::from_slice(r#"{"pid":20072,"sessionId":"3c74e8a3-…","cwd":"$PROBE/ws_s01_basic","startedAt":1795957500794,"procStart":"144789","version":"2.1.197","peerProtocol":1,"kind":"interactive","entrypoint":"cli","name":"ws-s01-basic-e9","nameSource":"derived","status":"waiting","updatedAt":1795957509799,"statusUpdatedAt":1795957509799,"waitingFor":"permission prompt"}"#.as_bytes()).unwrap();
        assert_eq!(file.pid, Some(20072));
        assert_eq!(file.status.as_deref(), Some("waiting"));
        assert_eq!(file.waiting_for.as_deref(), Some("permission prompt"));
        assert_eq!(SessionFile::from_slice(b"[\"idle\"]"), None);
        assert_eq!(
            SessionFile::from_slice(b"{\"status\":\"busy\"} trailing"),
            None
        );
    }
}
