//! The rollout, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl`: one line per
//! item or event, `{"timestamp","ordinal","type","payload"}`, appended only when the item is
//! whole. The line kinds cohost reads are typed by `type`, their payloads by `payload.type`;
//! every other kind (`world_state`, `thread_settings_applied`, `token_usage_record`, `token_count`,
//! …) is `Other` with its name.

use serde::Deserialize;
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, object};

/// One rollout line.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutLine {
    /// RFC 3339 with milliseconds (`2026-12-01T09:08:38.420Z`).
    pub timestamp: Option<String>,
    pub item: RolloutItem,
}

/// A rollout line's `type` with its `payload`.
#[derive(Debug, Clone, PartialEq)]
pub enum RolloutItem {
    /// The first line: the thread's id and working directory.
    SessionMeta(SessionMeta),
    /// Each turn's settings, its working directory among them.
    TurnContext(TurnContext),
    EventMsg(EventMsg),
    ResponseItem(ResponseItem),
    /// Any other `type` (empty when the line has none), read no further.
    Other(String),
}

/// What every line and payload has: its `type`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Head {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    timestamp: Option<String>,
}

impl RolloutLine {
    /// Reads one line; `None` only when it is not JSON. Never fails on content: a line or
    /// payload that is not an object reads with its fields absent (and as `Other("")` where its
    /// `type` would tell what it is).
    pub fn from_slice(line: &[u8]) -> Option<RolloutLine> {
        let value = serde_json::from_slice::<Value>(line).ok()?;
        Some(RolloutLine::from_value(&value))
    }

    pub fn from_value(line: &Value) -> RolloutLine {
        let head: Head = object(line);
        let payload = line.get("payload").unwrap_or(&Value::Null);
        let payload_kind = || object::<Head>(payload).kind.unwrap_or_default();
        let item = match head.kind.as_deref().unwrap_or_default() {
            "session_meta" => RolloutItem::SessionMeta(object(payload)),
            "turn_context" => RolloutItem::TurnContext(object(payload)),
            "event_msg" => RolloutItem::EventMsg(match payload_kind().as_str() {
                "task_started" => EventMsg::TaskStarted(object(payload)),
                "task_complete" => EventMsg::TaskComplete(object(payload)),
                "turn_aborted" => EventMsg::TurnAborted(object(payload)),
                "item_completed" => EventMsg::ItemCompleted(Box::new(object(payload))),
                "user_message" => EventMsg::UserMessage(object(payload)),
                other => EventMsg::Other(other.to_string()),
            }),
            "response_item" => RolloutItem::ResponseItem(match payload_kind().as_str() {
                "message" => ResponseItem::Message(object(payload)),
                "function_call" => ResponseItem::FunctionCall(object(payload)),
                "custom_tool_call" => ResponseItem::CustomToolCall(object(payload)),
                "local_shell_call" => ResponseItem::LocalShellCall(object(payload)),
                "function_call_output" => ResponseItem::FunctionCallOutput(object(payload)),
                "custom_tool_call_output" => ResponseItem::CustomToolCallOutput(object(payload)),
                "local_shell_call_output" => ResponseItem::LocalShellCallOutput(object(payload)),
                other => ResponseItem::Other(other.to_string()),
            }),
            other => RolloutItem::Other(other.to_string()),
        };
        RolloutLine {
            timestamp: head.timestamp,
            item,
        }
    }
}

/// `session_meta`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionMeta {
    /// The thread id.
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
}

/// `turn_context`'s payload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TurnContext {
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
}

/// An `event_msg` line's payload, by its `type`. 0.169 writes no `user_message` (prompts are
/// `item_completed` with a `UserMessage` item); older versions do.
#[derive(Debug, Clone, PartialEq)]
pub enum EventMsg {
    TaskStarted(TaskStartedEvent),
    TaskComplete(TaskCompleteEvent),
    TurnAborted(TurnAbortedEvent),
    /// Boxed: a command's item is far larger than the other payloads.
    ItemCompleted(Box<ItemCompletedEvent>),
    UserMessage(UserMessageEvent),
    /// Any other payload `type` (`token_count`, `agent_message`, …), read no further.
    Other(String),
}

/// `task_started`: the turn that starts, by codex's turn id.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TaskStartedEvent {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
}

/// `task_complete`: a failed turn carries `error` (`{"message","codex_error_info"}`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TaskCompleteEvent {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    /// Kept as written: `Some(Value::Null)` is an `error` that is `null`.
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

impl TaskCompleteEvent {
    /// Whether the line carries an `error` that is not `null`.
    pub fn has_error(&self) -> bool {
        self.error.as_ref().is_some_and(|error| !error.is_null())
    }

    /// The `error`'s `message`, or the whole `error` as JSON when it has none; `None` without
    /// an error.
    pub fn error_message(&self) -> Option<String> {
        let error = self.error.as_ref().filter(|error| !error.is_null())?;
        Some(
            error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string),
        )
    }
}

/// `turn_aborted`: `reason` is `interrupted`, …
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TurnAbortedEvent {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// `item_completed`: a turn item (`UserMessage`, `AgentMessage`, `CommandExecution`,
/// `Reasoning`, …) as it completed, in the turn `turn_id`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ItemCompletedEvent {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item: Option<TurnItem>,
}

/// A turn item: its `type` and `id`, and the fields of the kinds cohost reads — a
/// `UserMessage`'s or `AgentMessage`'s `content` (`[{type:"text"|"Text", text}]`), a
/// `Reasoning`'s `summary_text`, a `CommandExecution`'s command and what it gave, a
/// `FileChange`'s files. Codex 0.169 and 0.171 write a command or a patch only once it ran
/// (accepted, or needing no approval); a declined one has no item, only its
/// `function_call_output` (`aborted by user`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TurnItem {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    /// The item's id; a `CommandExecution`'s is the model's `call_id` (`call_…`), as the
    /// app-server's `commandExecution` item's.
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<ContentItem>,
    /// `Reasoning`: the summary's paragraphs.
    #[serde(deserialize_with = "lenient::vec")]
    pub summary_text: Vec<String>,
    /// `CommandExecution`: the argv it ran (`["/bin/bash", "-lc", "echo hi"]`).
    #[serde(deserialize_with = "lenient::vec")]
    pub command: Vec<String>,
    /// `CommandExecution`: where it ran, as a `file://` URL (see [`TurnItem::cwd_path`]).
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    /// `CommandExecution`: `completed`, `failed`, `declined`, … (snake_case).
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
    /// `CommandExecution`: its stdout and stderr as they interleaved.
    #[serde(deserialize_with = "lenient::opt")]
    pub aggregated_output: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub exit_code: Option<i64>,
    /// `CommandExecution`: how long it ran, `{"secs", "nanos"}`.
    #[serde(deserialize_with = "lenient::opt")]
    pub duration: Option<ItemDuration>,
    /// `FileChange`: the patch's files, by path (`{"/abs/path": {"type":"add","content":…}}`);
    /// written once the patch was applied.
    #[serde(deserialize_with = "lenient::opt")]
    pub changes: Option<Value>,
}

/// One file of a `FileChange` item: `{"type":"add"|"delete", "content"}` or
/// `{"type":"update", "unified_diff", "move_path"}` (codex's own `FileChange`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PatchChange {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub unified_diff: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub move_path: Option<String>,
}

impl TurnItem {
    /// A `FileChange`'s files, by path in codex's order; an entry that is not an object reads
    /// as a change of no known kind.
    pub fn patch_changes(&self) -> Vec<(String, PatchChange)> {
        match &self.changes {
            Some(Value::Object(files)) => files
                .iter()
                .map(|(path, change)| (path.clone(), object::<PatchChange>(change)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The `cwd` as a path: codex writes a `file://` URL (percent-encoded); a plain path reads
    /// as written, another scheme or a bad escape as absent.
    pub fn cwd_path(&self) -> Option<String> {
        let cwd = self.cwd.as_deref()?;
        let Some(encoded) = cwd.strip_prefix("file://") else {
            return cwd.starts_with('/').then(|| cwd.to_string());
        };
        let bytes = encoded.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out)
            .ok()
            .filter(|path| path.starts_with('/'))
    }
}

/// A Rust `Duration` as serde writes it: `{"secs": 0, "nanos": 21570}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ItemDuration {
    #[serde(deserialize_with = "lenient::opt")]
    pub secs: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub nanos: Option<u64>,
}

impl ItemDuration {
    /// In whole milliseconds; `None` when `secs` is absent.
    pub fn as_millis(&self) -> Option<u64> {
        let secs = self.secs?;
        Some(
            secs.saturating_mul(1000)
                .saturating_add(self.nanos.unwrap_or(0) / 1_000_000),
        )
    }
}

/// `user_message` (before 0.169): the prompt as text.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UserMessageEvent {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
}

/// A `response_item` line's payload, by its `type`: what was sent to or came from the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseItem {
    Message(MessageItem),
    FunctionCall(ToolCallItem),
    CustomToolCall(ToolCallItem),
    LocalShellCall(ToolCallItem),
    FunctionCallOutput(ToolCallOutputItem),
    CustomToolCallOutput(ToolCallOutputItem),
    LocalShellCallOutput(ToolCallOutputItem),
    /// Any other payload `type` (`reasoning`, …), read no further.
    Other(String),
}

impl ResponseItem {
    /// The payload's `type` as written.
    pub fn kind(&self) -> &str {
        match self {
            ResponseItem::Message(_) => "message",
            ResponseItem::FunctionCall(_) => "function_call",
            ResponseItem::CustomToolCall(_) => "custom_tool_call",
            ResponseItem::LocalShellCall(_) => "local_shell_call",
            ResponseItem::FunctionCallOutput(_) => "function_call_output",
            ResponseItem::CustomToolCallOutput(_) => "custom_tool_call_output",
            ResponseItem::LocalShellCallOutput(_) => "local_shell_call_output",
            ResponseItem::Other(kind) => kind,
        }
    }
}

/// A `message`: `role` is `user`, `developer` or `assistant`; codex injects context (the
/// environment, AGENTS.md, an abort notice) as `user` messages too.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub role: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<ContentItem>,
}

/// One part of a message's or item's `content` (`input_text`, `output_text`, `text`, …); only
/// its text is read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ContentItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
}

/// A tool call (`function_call`, `custom_tool_call`, `local_shell_call`); its output carries
/// the same `call_id`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolCallItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
    /// The item's own id (`fc_…`).
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
}

/// A tool call's output (`*_output`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolCallOutputItem {
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
}

lenient_object!(TurnItem, ContentItem, ItemDuration);
