//! The notifications cohost reads (`ServerNotification`, by method; every other method is
//! `Other`), their payloads, and how a message names its thread (`ThreadScoped`).

use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;

use super::{RequestId, ThreadItem, Turn, TurnError, params};
use crate::formats::lenient;

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
