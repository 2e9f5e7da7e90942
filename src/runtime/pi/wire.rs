//! Pi's RPC wire (`pi --mode rpc`, 0.73.1 and 1.6.0): the commands cohost sends and the lines
//! Pi writes, with Pi's own names (`type`, `toolCallId`, `assistantMessageEvent`, …). One JSON
//! object per line each way. A line Pi writes is a `response` (to a command; it repeats the
//! command's `id`, except 0.73.1's answer to an unknown command) or an event (no `id`).
//!
//! Reading never fails on content: a line that is JSON but not a known shape is
//! [`PiEvent::Other`] with its `type`; only a line that is not JSON is `None`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A command, as written on Pi's stdin (`{"id":…,"type":…,…}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcCommand {
    /// A new prompt (refused while a run streams unless `streamingBehavior` says what to do).
    Prompt {
        message: String,
    },
    /// A message for the running run, delivered after the current tool calls.
    Steer {
        message: String,
    },
    /// A message run after the running run's work, as its own turn of the same run.
    FollowUp {
        message: String,
    },
    /// Stops the run; answered once the run has ended.
    Abort,
    GetState,
    GetAvailableModels,
    #[serde(rename_all = "camelCase")]
    SetModel {
        provider: String,
        model_id: String,
    },
    /// The thinking level of the next model requests (clamped by Pi to what the model can).
    SetThinkingLevel {
        level: String,
    },
    GetForkMessages,
    #[serde(rename_all = "camelCase")]
    Fork {
        entry_id: String,
    },
}

impl RpcCommand {
    /// The `command` a response to this names.
    pub fn name(&self) -> &'static str {
        match self {
            RpcCommand::Prompt { .. } => "prompt",
            RpcCommand::Steer { .. } => "steer",
            RpcCommand::FollowUp { .. } => "follow_up",
            RpcCommand::Abort => "abort",
            RpcCommand::GetState => "get_state",
            RpcCommand::GetAvailableModels => "get_available_models",
            RpcCommand::SetModel { .. } => "set_model",
            RpcCommand::SetThinkingLevel { .. } => "set_thinking_level",
            RpcCommand::GetForkMessages => "get_fork_messages",
            RpcCommand::Fork { .. } => "fork",
        }
    }

    /// The line for this command under `id` (without the newline).
    pub fn line(&self, id: &str) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("id".into(), Value::String(id.to_string()));
        }
        value.to_string()
    }
}

/// The answer to an `extension_ui_request` dialog (no `response` answers it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtensionUiResponse {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The request's id.
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
}

impl ExtensionUiResponse {
    pub fn confirmed(id: &str, confirmed: bool) -> Self {
        ExtensionUiResponse {
            kind: "extension_ui_response",
            id: id.to_string(),
            confirmed: Some(confirmed),
            cancelled: None,
        }
    }

    /// Closes any dialog (a confirm reads it as "no").
    pub fn cancelled(id: &str) -> Self {
        ExtensionUiResponse {
            kind: "extension_ui_response",
            id: id.to_string(),
            confirmed: None,
            cancelled: Some(true),
        }
    }
}

/// `{"type":"response","id"?,"command","success","data"?,"error"?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct RpcResponse {
    pub id: Option<String>,
    pub command: String,
    pub success: bool,
    pub data: Option<Value>,
    pub error: Option<String>,
}

/// One line Pi wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Response(RpcResponse),
    Event(PiEvent),
}

impl Line {
    /// Reads one line; `None` when it is not a JSON object.
    pub fn parse(line: &str) -> Option<Line> {
        let value: Value = serde_json::from_str(line).ok()?;
        let kind = value.get("type")?.as_str()?.to_string();
        if kind == "response" {
            return Some(Line::Response(
                serde_json::from_value(value).unwrap_or_default(),
            ));
        }
        Some(Line::Event(
            serde_json::from_value::<PiEvent>(value).unwrap_or(PiEvent::Other { kind }),
        ))
    }
}

/// The events cohost reads, by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PiEvent {
    AgentStart,
    /// The run's end in 0.73.1 (no `willRetry`); in 1.6.0 `willRetry` is present and
    /// `agent_settled` follows.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        #[serde(default)]
        will_retry: Option<bool>,
    },
    /// 1.6.0: the run is over (after `agent_end`).
    AgentSettled {
        #[serde(default)]
        aborted: Option<bool>,
    },
    TurnStart,
    TurnEnd,
    MessageStart {
        message: PiMessage,
    },
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        assistant_message_event: AssistantMessageEvent,
    },
    MessageEnd {
        message: PiMessage,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        #[serde(default)]
        args: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        #[serde(default)]
        result: Option<ToolResult>,
        #[serde(default)]
        is_error: bool,
    },
    ExtensionUiRequest(ExtensionUiRequest),
    /// Any other event (`queue_update`, `tool_execution_update`, `session_info_changed`, …).
    #[serde(skip)]
    Other {
        kind: String,
    },
}

/// A message of an event: `user`, `assistant`, `toolResult`, `system` (1.6.0), ….
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PiMessage {
    pub role: String,
    /// A string, or blocks (`text`, `toolCall`, `thinking`, `image`).
    pub content: Value,
    /// `stop`, `toolUse`, `aborted`, `error`, `length` (`pending` / a placeholder on
    /// `message_start`: read it on `message_end` only).
    pub stop_reason: Option<String>,
    pub error_message: Option<String>,
    /// ms since the epoch.
    pub timestamp: Option<u64>,
}

impl PiMessage {
    /// The text of its `text` blocks (or the string content), joined.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
}

/// `message_update`'s `assistantMessageEvent`: `text_start`, `text_delta`, `text_end`,
/// `toolcall_*`, `thinking_*`, ….
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AssistantMessageEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub content_index: Option<u64>,
    pub delta: Option<String>,
    /// `text_end`'s whole text.
    pub content: Option<String>,
}

/// `tool_execution_end`'s `result`: `content` blocks and the tool's `details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolResult {
    pub content: Value,
    pub details: Option<Value>,
}

impl ToolResult {
    pub fn text(&self) -> String {
        PiMessage {
            content: self.content.clone(),
            ..PiMessage::default()
        }
        .text()
    }
}

/// `extension_ui_request`: a dialog (`confirm`, `select`, `input`, `editor`: answered with an
/// `extension_ui_response`) or a notice (`notify`, `setStatus`, `setWidget`, `setTitle`,
/// `set_editor_text`: no answer).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ExtensionUiRequest {
    pub id: String,
    pub method: String,
    pub title: Option<String>,
    pub message: Option<String>,
}

impl ExtensionUiRequest {
    /// Whether Pi waits for an answer to it.
    pub fn is_dialog(&self) -> bool {
        matches!(
            self.method.as_str(),
            "confirm" | "select" | "input" | "editor"
        )
    }
}

/// A model of `get_available_models` / `get_state` / `set_model`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Model {
    pub id: String,
    pub name: Option<String>,
    pub provider: String,
    pub reasoning: Option<bool>,
}

/// `get_available_models`'s data.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct AvailableModels {
    pub models: Vec<Model>,
}

/// The parts of `get_state`'s data cohost reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct State {
    pub model: Option<Model>,
    /// `off`, `minimal`, `low`, `medium`, `high`, `xhigh` (1.6.0 also `max`).
    pub thinking_level: Option<String>,
    pub is_streaming: bool,
    pub session_file: Option<String>,
    pub session_id: Option<String>,
}

/// `get_fork_messages`' data: the user entries a fork can start before.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ForkMessages {
    pub messages: Vec<ForkMessage>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ForkMessage {
    pub entry_id: String,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_written_with_pis_names_and_the_id() {
        let line = RpcCommand::SetModel {
            provider: "mock".into(),
            model_id: "mock-model-2".into(),
        }
        .line("c1");
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"id":"c1","type":"set_model","provider":"mock","modelId":"mock-model-2"})
        );
        let value: Value = serde_json::from_str(&RpcCommand::Abort.line("c2")).unwrap();
        assert_eq!(value, serde_json::json!({"id":"c2","type":"abort"}));
        let answer = serde_json::to_value(ExtensionUiResponse::cancelled("u1")).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"type":"extension_ui_response","id":"u1","cancelled":true})
        );
    }

    #[test]
    fn responses_with_and_without_an_id_are_read() {
        // 0.73.1's answer to an unknown command has no id; 1.6.0's has it.
        let old = Line::parse(r#"{"type":"response","command":"get_entries","success":false,"error":"Unknown command: get_entries"}"#).unwrap();
        let Line::Response(old) = old else { panic!() };
        assert_eq!(old.id, None);
        assert_eq!(old.command, "get_entries");
        assert!(!old.success);
        let new = Line::parse(r#"{"id":"r1-7","type":"response","command":"prompt","success":true,"data":{"disposition":"started"}}"#).unwrap();
        let Line::Response(new) = new else { panic!() };
        assert_eq!(new.id.as_deref(), Some("r1-7"));
        assert_eq!(new.data.unwrap()["disposition"], "started");
    }

    #[test]
    fn unknown_events_and_odd_shapes_read_as_other() {
        assert_eq!(
            Line::parse(r#"{"type":"queue_update","steering":["STEER: x"],"followUp":[]}"#),
            Some(Line::Event(PiEvent::Other {
                kind: "queue_update".into()
            }))
        );
        assert_eq!(
            Line::parse(r#"{"type":"message_start","message":7}"#),
            Some(Line::Event(PiEvent::Other {
                kind: "message_start".into()
            }))
        );
        assert_eq!(Line::parse("not json"), None);
    }
}
