//! The forwarder's state machine, one per live Pi session: what each RPC event means, as a
//! list of [`Effect`]s (events to store or publish, the status to report to the tracker,
//! dialogs to hold or dismiss). Pure: no I/O, no clock, no lock; unit-tested on the literal
//! lines of Pi 0.73.1 and 1.6.0 (`normalize_tests.rs`).
//!
//! How Pi's events map onto cohost's vocabulary:
//! - A cohost turn is one Pi *run*: from the prompt's user message to `agent_end` (0.73.1, no
//!   `willRetry`) or `agent_settled` (1.6.0, after `agent_end {willRetry:false}`). Pi's own
//!   `turn_start`/`turn_end` mark model calls inside it. Steered messages are user messages
//!   inside the run: items of the same turn. The turn's id is the one cohost named when it sent
//!   the prompt (`pending_api`), else `turn-<the user message's timestamp>`.
//! - An assistant `text` block is an `agentMessage` item, streamed by `text_delta` and completed
//!   by `text_end` (or by its message's end); `message_end`'s `stopReason` says whether the run
//!   was aborted or failed (`message_start`'s is a placeholder).
//! - A tool call is a `command` item (`bash`) or a `tool` item, from `tool_execution_start`
//!   to `tool_execution_end` (`declined` when cohost's gate blocked it).
//! - cohost's gate extension asks through `extension_ui_request` `confirm` titled
//!   [`GATE_TITLE`], its message the tool call as JSON: an approval, held until answered. Any
//!   other dialog is dismissed (so no run waits on it) and said in an `error` event.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use super::wire::{AssistantMessageEvent, ExtensionUiRequest, PiEvent, PiMessage, ToolResult};
use crate::protocol::{
    AgentStatus, ApprovalRequested, ErrorEvent, EventKind, Item, ItemDelta, ItemEvent,
    TurnCompleted, TurnSource, TurnStarted, TurnStatus,
};

/// The most text of a streaming agent message kept to store if its turn ends first.
const MAX_STREAMED_TEXT: usize = 256 * 1024;

/// The title of the gate extension's dialogs (`gate.ts`).
pub const GATE_TITLE: &str = "cohost approval";

/// What the gate tells the model when a call is declined (`gate.ts` says the same).
pub const DECLINE_REASON: &str =
    "The user declined this tool call through cohost. Do not retry it; continue without it.";

/// The decisions cohost relays for a Pi approval: `accept` runs the tool, `decline` blocks it
/// (the model is told and goes on), `cancel` blocks it and interrupts the turn.
pub const DECISIONS: [&str; 3] = ["accept", "decline", "cancel"];

/// One thing the host does for an event, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Append this event (a duplicate is success).
    Store(EventKind),
    /// Broadcast this live-only event.
    Publish(EventKind),
    /// Mirror the session's status into the tracker.
    Report(AgentStatus),
    /// Keep gate dialog `approval_id` open until it is answered (or the turn is interrupted).
    HoldApproval { approval_id: String },
    /// Answer this dialog `cancelled` at once.
    DismissDialog { request_id: String },
}

/// The tool call the gate asks about (its dialog's message).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GateAsk {
    tool_name: String,
    tool_call_id: Option<String>,
    input: Option<Value>,
}

/// The per-session tracking (see the module doc).
#[derive(Debug, Default)]
pub struct Forwarder {
    /// The turn running now.
    pub current: Option<String>,
    /// Turn ids cohost named for prompts it sent whose run has not started yet, in order.
    pub pending_api: VecDeque<String>,
    /// An interrupt was asked for the running turn.
    pub interrupt_requested: bool,
    /// The run was aborted (an assistant message ended `aborted`).
    aborted: bool,
    /// The run's error (an assistant message ended `error`).
    error: Option<String>,
    /// The assistant message streaming now: its timestamp (names its text items).
    assistant: Option<u64>,
    /// Agent text items of the running turn not completed yet: their text so far.
    texts: BTreeMap<String, String>,
    /// Tool items started and not ended, by `toolCallId`.
    tools: BTreeMap<String, Item>,
    /// Counts messages without a timestamp, to name them.
    unnamed: u64,
}

fn item_event(turn_id: &str, item: Item) -> ItemEvent {
    ItemEvent {
        turn_id: turn_id.to_string(),
        item,
    }
}

/// The item of a tool call in progress.
pub fn tool_started(tool_call_id: &str, tool_name: &str, args: Option<Value>) -> Item {
    if tool_name == "bash" {
        let command = args
            .as_ref()
            .and_then(|a| a.get("command"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Item::Command {
            id: tool_call_id.to_string(),
            command,
            cwd: None,
            status: "inProgress".into(),
            exit_code: None,
            output: None,
            duration_ms: None,
        }
    } else {
        Item::Tool {
            id: tool_call_id.to_string(),
            name: tool_name.to_string(),
            input: args,
            output: None,
            status: "inProgress".into(),
        }
    }
}

/// The exit code in bash's error text (`Command exited with code 3`).
fn exit_code_in(text: &str) -> Option<i64> {
    let (_, rest) = text.rsplit_once("Command exited with code ")?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '-')
        .next()?
        .parse()
        .ok()
}

/// The approval the gate's dialog asks for, in turn `turn_id`.
pub fn approval(request: &ExtensionUiRequest, turn_id: &str) -> ApprovalRequested {
    let ask: GateAsk = request
        .message
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let input = ask.input.as_ref();
    let field = |name: &str| {
        input
            .and_then(|i| i.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (kind, command) = match ask.tool_name.as_str() {
        "bash" => ("command", field("command")),
        "edit" | "write" => ("fileChange", field("path")),
        _ => ("tool", None),
    };
    ApprovalRequested {
        approval_id: request.id.clone().into(),
        kind: kind.into(),
        turn_id: turn_id.to_string(),
        item_id: ask.tool_call_id,
        command,
        cwd: None,
        reason: Some(format!(
            "pi asks before running its `{}` tool",
            ask.tool_name
        )),
        decisions: DECISIONS.iter().map(|d| (*d).into()).collect(),
    }
}

impl Forwarder {
    /// One event → its effects.
    pub fn apply(&mut self, event: PiEvent) -> Vec<Effect> {
        let mut out = Vec::new();
        match event {
            PiEvent::MessageStart { message } => match message.role.as_str() {
                "user" => self.user(&message, &mut out),
                "assistant" => {
                    self.ensure_turn(None, &mut out);
                    let stamp = message.timestamp.unwrap_or_else(|| {
                        self.unnamed += 1;
                        self.unnamed
                    });
                    self.assistant = Some(stamp);
                }
                _ => {}
            },
            PiEvent::MessageUpdate {
                assistant_message_event,
            } => self.update(assistant_message_event, &mut out),
            PiEvent::MessageEnd { message } if message.role == "assistant" => {
                match message.stop_reason.as_deref() {
                    Some("aborted") => self.aborted = true,
                    Some("error") => {
                        let text = message
                            .error_message
                            .clone()
                            .unwrap_or_else(|| "the model call failed".into());
                        out.push(Effect::Store(EventKind::Error(ErrorEvent {
                            turn_id: self.current.clone(),
                            id: None,
                            message: text.clone(),
                            code: None,
                        })));
                        self.error = Some(text);
                    }
                    _ => {}
                }
                self.finish_texts(&message, &mut out);
                self.assistant = None;
            }
            PiEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                let turn_id = self.ensure_turn(None, &mut out);
                let item = tool_started(&tool_call_id, &tool_name, args);
                self.tools.insert(tool_call_id, item.clone());
                out.push(Effect::Store(EventKind::ItemStarted(item_event(
                    &turn_id, item,
                ))));
                out.push(Effect::Report(AgentStatus::ToolRunning));
            }
            PiEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                let Some(turn_id) = self.current.clone() else {
                    return out;
                };
                let item = self
                    .tools
                    .remove(&tool_call_id)
                    .unwrap_or_else(|| tool_started(&tool_call_id, &tool_name, None));
                out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                    &turn_id,
                    self.tool_ended(item, result.unwrap_or_default(), is_error),
                ))));
                out.push(Effect::Report(AgentStatus::Running));
            }
            PiEvent::ExtensionUiRequest(request) => {
                if request.method == "confirm" && request.title.as_deref() == Some(GATE_TITLE) {
                    let turn_id = self.current.clone().unwrap_or_default();
                    out.push(Effect::HoldApproval {
                        approval_id: request.id.clone(),
                    });
                    out.push(Effect::Store(EventKind::ApprovalRequested(approval(
                        &request, &turn_id,
                    ))));
                    out.push(Effect::Report(AgentStatus::Waiting));
                } else if request.is_dialog() {
                    out.push(Effect::DismissDialog {
                        request_id: request.id.clone(),
                    });
                    out.push(Effect::Store(EventKind::Error(ErrorEvent {
                        turn_id: self.current.clone(),
                        id: Some(request.id),
                        message: format!(
                            "a pi extension opened a `{}` dialog{}; cohost relays only its own approvals, so it was dismissed",
                            request.method,
                            request
                                .title
                                .map(|t| format!(" ({t})"))
                                .unwrap_or_default()
                        ),
                        code: Some("dialog_dismissed".into()),
                    })));
                }
            }
            // 0.73.1 ends the run here; 1.6.0 says `willRetry` and ends it at `agent_settled`.
            PiEvent::AgentEnd { will_retry: None } => self.end(&mut out),
            PiEvent::AgentSettled { .. } => self.end(&mut out),
            PiEvent::AgentEnd { .. }
            | PiEvent::MessageEnd { .. }
            | PiEvent::AgentStart
            | PiEvent::TurnStart
            | PiEvent::TurnEnd
            | PiEvent::Other { .. } => {}
        }
        out
    }

    /// The running turn, started now (named `name`, or as the next prompt cohost sent) if none
    /// runs.
    fn ensure_turn(&mut self, stamp: Option<u64>, out: &mut Vec<Effect>) -> String {
        if let Some(turn_id) = &self.current {
            return turn_id.clone();
        }
        let (turn_id, source) = match self.pending_api.pop_front() {
            Some(turn_id) => (turn_id, TurnSource::Api),
            None => {
                let stamp = stamp.unwrap_or_else(|| {
                    self.unnamed += 1;
                    self.unnamed
                });
                (format!("turn-{stamp}"), TurnSource::Other)
            }
        };
        self.current = Some(turn_id.clone());
        self.aborted = false;
        self.error = None;
        out.push(Effect::Store(EventKind::TurnStarted(TurnStarted {
            turn_id: turn_id.clone(),
            source,
        })));
        out.push(Effect::Report(AgentStatus::Running));
        turn_id
    }

    fn user(&mut self, message: &PiMessage, out: &mut Vec<Effect>) {
        let turn_id = self.ensure_turn(message.timestamp, out);
        let id = match message.timestamp {
            Some(stamp) => format!("user-{stamp}"),
            None => {
                self.unnamed += 1;
                format!("user-n{}", self.unnamed)
            }
        };
        out.push(Effect::Store(EventKind::ItemCompleted(item_event(
            &turn_id,
            Item::UserMessage {
                id,
                text: message.text(),
            },
        ))));
    }

    fn text_id(&self, index: Option<u64>) -> String {
        format!(
            "msg-{}-{}",
            self.assistant.unwrap_or_default(),
            index.unwrap_or_default()
        )
    }

    fn update(&mut self, event: AssistantMessageEvent, out: &mut Vec<Effect>) {
        let Some(turn_id) = self.current.clone() else {
            return;
        };
        let id = self.text_id(event.content_index);
        match event.kind.as_str() {
            "text_start" => self.open_text(&turn_id, &id, out),
            "text_delta" => {
                self.open_text(&turn_id, &id, out);
                let delta = event.delta.unwrap_or_default();
                if let Some(text) = self.texts.get_mut(&id)
                    && text.len() + delta.len() <= MAX_STREAMED_TEXT
                {
                    text.push_str(&delta);
                }
                out.push(Effect::Publish(EventKind::ItemDelta(ItemDelta {
                    turn_id,
                    item_id: id,
                    kind: "agentMessage".into(),
                    delta,
                    offset: None,
                    snapshot: false,
                })));
            }
            "text_end" => {
                self.open_text(&turn_id, &id, out);
                let streamed = self.texts.remove(&id).unwrap_or_default();
                let text = event.content.filter(|c| !c.is_empty()).unwrap_or(streamed);
                out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                    &turn_id,
                    Item::AgentMessage {
                        id,
                        text,
                        interrupted: false,
                    },
                ))));
            }
            _ => {}
        }
    }

    fn open_text(&mut self, turn_id: &str, id: &str, out: &mut Vec<Effect>) {
        if self.texts.contains_key(id) {
            return;
        }
        self.texts.insert(id.to_string(), String::new());
        out.push(Effect::Store(EventKind::ItemStarted(item_event(
            turn_id,
            Item::AgentMessage {
                id: id.to_string(),
                text: String::new(),
                interrupted: false,
            },
        ))));
    }

    /// The assistant message ended: its texts still open are complete with what it holds
    /// (interrupted when it was aborted or failed).
    fn finish_texts(&mut self, message: &PiMessage, out: &mut Vec<Effect>) {
        let Some(turn_id) = self.current.clone() else {
            return;
        };
        let prefix = format!("msg-{}-", self.assistant.unwrap_or_default());
        let open: Vec<String> = self
            .texts
            .keys()
            .filter(|id| id.starts_with(&prefix))
            .cloned()
            .collect();
        let blocks: Vec<Value> = message.content.as_array().cloned().unwrap_or_default();
        let interrupted = matches!(message.stop_reason.as_deref(), Some("aborted" | "error"));
        for id in open {
            let streamed = self.texts.remove(&id).unwrap_or_default();
            let index: usize = id[prefix.len()..].parse().unwrap_or(usize::MAX);
            let text = blocks
                .get(index)
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .and_then(|b| b.get("text"))
                .and_then(Value::as_str)
                .filter(|t| t.len() >= streamed.len())
                .map(str::to_string)
                .unwrap_or(streamed);
            out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                &turn_id,
                Item::AgentMessage {
                    id,
                    text,
                    interrupted,
                },
            ))));
        }
    }

    fn tool_ended(&self, item: Item, result: ToolResult, is_error: bool) -> Item {
        tool_ended(
            item,
            result,
            is_error,
            self.interrupt_requested || self.aborted,
        )
    }
}

/// A tool call's item once its result came (`interrupted`: its run was being stopped).
fn tool_ended(item: Item, result: ToolResult, is_error: bool, interrupted: bool) -> Item {
    tool_done(item, result.text(), is_error, interrupted)
}

/// A tool call's item once its result's text (`output`) came.
pub fn tool_done(item: Item, output: String, is_error: bool, interrupted: bool) -> Item {
    let status = if is_error && output.contains(DECLINE_REASON) {
        "declined"
    } else if is_error && interrupted {
        "interrupted"
    } else if is_error {
        "failed"
    } else {
        "completed"
    }
    .to_string();
    match item {
        Item::Command { id, command, .. } => Item::Command {
            id,
            command,
            cwd: None,
            exit_code: if is_error {
                exit_code_in(&output)
            } else {
                Some(0)
            },
            status,
            output: Some(output),
            duration_ms: None,
        },
        Item::Tool {
            id, name, input, ..
        } => Item::Tool {
            id,
            name,
            input,
            output: Some(output),
            status,
        },
        other => other,
    }
}

impl Forwarder {
    fn end(&mut self, out: &mut Vec<Effect>) {
        let Some(turn_id) = self.current.clone() else {
            return;
        };
        let (status, error) = if self.aborted || self.interrupt_requested {
            (TurnStatus::Interrupted, None)
        } else if let Some(error) = self.error.take() {
            (TurnStatus::Failed, Some(error))
        } else {
            (TurnStatus::Completed, None)
        };
        let report = match status {
            TurnStatus::Completed => AgentStatus::Done,
            TurnStatus::Interrupted => AgentStatus::Interrupted,
            TurnStatus::Failed => AgentStatus::Error,
        };
        out.extend(self.end_turn(TurnCompleted {
            turn_id,
            status,
            error,
            duration_ms: None,
            lost: false,
        }));
        out.push(Effect::Report(report));
    }

    /// The turn ended (`done`): closes what it left open, then stores its end. A text still
    /// streaming is stored with what it had (marked `interrupted` unless the turn completed);
    /// a tool still running gets the turn's end status.
    pub fn end_turn(&mut self, done: TurnCompleted) -> Vec<Effect> {
        self.current = None;
        self.interrupt_requested = false;
        self.aborted = false;
        self.error = None;
        self.assistant = None;
        let completed = done.status == TurnStatus::Completed;
        let end_status = match done.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        };
        let mut effects = Vec::new();
        for (id, text) in std::mem::take(&mut self.texts) {
            effects.push(Effect::Store(EventKind::ItemCompleted(item_event(
                &done.turn_id,
                Item::AgentMessage {
                    id,
                    text,
                    interrupted: !completed,
                },
            ))));
        }
        for (_, mut item) in std::mem::take(&mut self.tools) {
            if let Item::Command { status, .. } | Item::Tool { status, .. } = &mut item {
                *status = end_status.to_string();
            }
            effects.push(Effect::Store(EventKind::ItemCompleted(item_event(
                &done.turn_id,
                item,
            ))));
        }
        effects.push(Effect::Store(EventKind::TurnCompleted(done)));
        effects
    }
}

/// A `message` entry of Pi's session file (`{"type":"message","id",…,"message":{…}}`), the
/// fields a backfill reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileMessage {
    pub role: String,
    pub content: Value,
    pub timestamp: Option<u64>,
    pub stop_reason: Option<String>,
    /// `toolResult`: the call it answers.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub is_error: bool,
}

/// The messages of a Pi session file, in order; other entries (`session`, `model_change`, …)
/// and unreadable lines are skipped.
pub fn file_messages(text: &str) -> Vec<FileMessage> {
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        message: Option<Value>,
    }
    text.lines()
        .filter_map(|line| serde_json::from_str::<Entry>(line).ok())
        .filter(|entry| entry.kind == "message")
        .filter_map(|entry| serde_json::from_value(entry.message?).ok())
        .collect()
}

/// The id cohost gives the item of a user message with this timestamp (as [`Forwarder`] does).
pub fn user_item_id(timestamp: u64) -> String {
    format!("user-{timestamp}")
}

/// The run a daemon restart cut short, as Pi's session file holds it → the items of turn
/// `turn_id` it describes, in order. The run starts at the last user message whose item
/// `stored` says was stored (a steer of the run counts: what follows it is the same run); the
/// items are named as [`Forwarder`] names them live, so what was stored already is a duplicate
/// the core drops. Texts of a message that ended `aborted` or `error` are `interrupted`; a tool
/// call is completed by its `toolResult`.
pub fn backfill(
    messages: &[FileMessage],
    turn_id: &str,
    stored: impl Fn(&str) -> bool,
) -> Vec<EventKind> {
    let Some(start) = messages.iter().rposition(|m| {
        m.role == "user"
            && m.timestamp
                .is_some_and(|stamp| stored(&user_item_id(stamp)))
    }) else {
        return Vec::new();
    };
    let mut calls: BTreeMap<String, (String, Option<Value>)> = BTreeMap::new();
    let mut out = Vec::new();
    for message in &messages[start..] {
        match message.role.as_str() {
            "user" => {
                let Some(stamp) = message.timestamp else {
                    continue;
                };
                let text = PiMessage {
                    content: message.content.clone(),
                    ..PiMessage::default()
                }
                .text();
                out.push(EventKind::ItemCompleted(item_event(
                    turn_id,
                    Item::UserMessage {
                        id: user_item_id(stamp),
                        text,
                    },
                )));
            }
            "assistant" => {
                let stamp = message.timestamp.unwrap_or_default();
                let interrupted =
                    matches!(message.stop_reason.as_deref(), Some("aborted" | "error"));
                let blocks = message.content.as_array().cloned().unwrap_or_default();
                for (index, block) in blocks.iter().enumerate() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => out.push(EventKind::ItemCompleted(item_event(
                            turn_id,
                            Item::AgentMessage {
                                id: format!("msg-{stamp}-{index}"),
                                text: block
                                    .get("text")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default()
                                    .to_string(),
                                interrupted,
                            },
                        ))),
                        Some("toolCall") => {
                            if let Some(id) = block.get("id").and_then(Value::as_str) {
                                let name = block
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                calls.insert(
                                    id.to_string(),
                                    (name.to_string(), block.get("arguments").cloned()),
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
            "toolResult" => {
                let Some(call_id) = &message.tool_call_id else {
                    continue;
                };
                let (name, args) = calls
                    .remove(call_id)
                    .unwrap_or_else(|| (message.tool_name.clone().unwrap_or_default(), None));
                let item = tool_started(call_id, &name, args);
                let result = ToolResult {
                    content: message.content.clone(),
                    details: None,
                };
                out.push(EventKind::ItemCompleted(item_event(
                    turn_id,
                    tool_ended(item, result, message.is_error, false),
                )));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
