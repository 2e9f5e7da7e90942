//! Thread items (`ThreadItem`, tagged by `type`): messages, reasoning, commands, file changes,
//! tool calls, plans, and every other kind as `Other`.

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer};
use serde_json::Value;

use super::{Tag, UserInput};
use crate::formats::lenient::{self, open_enum};

// ----------------------------------------------------------------------------------------------
// Items.

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
