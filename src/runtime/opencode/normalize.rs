//! The forwarder's state machine, one per live session: what each `/event` event about the
//! session means, as a list of [`Effect`]s (events to store or publish, status reports,
//! permission requests to hold). Pure: no I/O, no clock, no lock; unit-tested on the literal
//! events of OpenCode 1.18.33 (`normalize_tests.rs`).
//!
//! How OpenCode's stream maps onto cohost's vocabulary:
//! - A turn is one busy period of the session: it starts at `session.status` `busy` and ends at
//!   `session.idle` (or `session.status` `idle`). An assistant message's `finish: "stop"` is not
//!   the end: prompts queued meanwhile are folded into the next model call of the same loop.
//!   The turn's id is the id of the user message (`msg_…`) that opened it, so a backfill from
//!   OpenCode's history converges with what was forwarded live.
//! - A user message's text part is a `userMessage` item (of the running turn, or of the turn its
//!   `busy` opens). Where one of cohost's prompts went is known as soon as its part shows
//!   ([`Placement`]): into the running turn, into the turn of a message still waiting for its
//!   `busy` (OpenCode runs both in one loop), or into a turn of its own. An assistant text part is an `agentMessage` item (id `prt_…`), streamed by
//!   `message.part.delta` and completed when the part has `time.end` or its message completes.
//! - A tool part is a `command` item (`bash`) or a `tool` item (any other tool): started when it
//!   runs, completed when it is `completed` or `error` (`declined` when a person rejected it).
//! - `permission.asked` is an approval (id `per_…`) cohost holds until it is answered;
//!   `permission.replied` (by any client, the attached TUI included) settles it.
//! - `question.asked` (the `question` tool) is an input request of kind `question` (id
//!   `que_…`) cohost holds until it is answered (`POST /question/:id/reply`) or declined
//!   (`…/reject`); `question.replied` / `question.rejected` (by any client, the attached TUI
//!   included) resolve it. OpenCode's questions are positional: a question's id in cohost is
//!   its text (made unique within the request).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::wire::{Event, MessageInfo, MessageWithParts, Part, PermissionRequest, QuestionRequest};
use crate::protocol::{
    AgentStatus, ApprovalRequested, ErrorEvent, EventKind, InputKind, InputRequested, Item,
    ItemDelta, ItemEvent, Question, QuestionOption, TurnCompleted, TurnSource, TurnStarted,
    TurnStatus,
};

/// The most text of a streaming agent message kept to store if its turn ends first.
const MAX_STREAMED_TEXT: usize = 256 * 1024;

/// The decisions cohost relays for an OpenCode permission, and what each becomes.
pub const DECISIONS: [&str; 4] = ["accept", "acceptForSession", "decline", "cancel"];

/// What `decline` tells the model (OpenCode calls it again with this as the tool's result);
/// `cancel` rejects without a message, which ends the turn.
pub const DECLINE_MESSAGE: &str =
    "The user declined this tool call through cohost. Do not retry it; continue without it.";

/// What an OpenCode question takes besides `answers`: `decline` dismisses it (OpenCode's
/// `reject`: the tool fails with "The user dismissed this question" and the turn ends).
pub const QUESTION_DECISIONS: [&str; 1] = ["decline"];

/// One thing the host does for an event, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Append this event (a duplicate is success).
    Store(EventKind),
    /// Broadcast this live-only event.
    Publish(EventKind),
    /// Mirror the session's status into the tracker.
    Report(AgentStatus),
    /// Keep permission request `approval_id` pending until it is answered.
    HoldApproval { approval_id: String },
    /// OpenCode says the permission request was answered (by any client): what of ours still
    /// waits on it is resolved by the runtime.
    ApprovalSettled { approval_id: String },
    /// Store this question (`input.requested`) and keep it pending until it is answered.
    AskQuestion(Box<InputRequested>),
    /// OpenCode says the question was answered (`answers`, in its order) or dismissed (`None`),
    /// by any client: what of ours still waits on it is resolved by the runtime.
    QuestionSettled {
        request_id: String,
        answers: Option<Vec<Vec<String>>>,
    },
}

/// Where a prompt's user message went, known when OpenCode shows it: into the turn it opens
/// (its id is the message's), or into a turn started or about to start before it (OpenCode
/// folds a prompt queued while its loop runs into that loop's next model call).
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    Opens,
    Joins(String),
}

/// The per-session tracking (see the module doc).
#[derive(Debug, Default)]
pub struct Forwarder {
    /// The turn running now: the user message that opened it.
    pub current: Option<String>,
    /// The message ids of prompts cohost sent whose turn has not started yet (a turn one of
    /// them opens is an API turn).
    pub pending_api: HashSet<String>,
    /// The prompts an inject waits to see placed, by message id: where each went once its user
    /// message showed. The inject adds its id before it sends and takes it out when it answers.
    pub placed: HashMap<String, Option<Placement>>,
    /// An interrupt was asked for the running turn.
    pub interrupt_requested: bool,
    /// A co-driving pane is open on the session: a turn cohost did not send is the person's
    /// in it (`terminal`), not another client's (`other`).
    pub has_terminal: bool,
    /// Roles of the messages seen, by message id.
    roles: HashMap<String, String>,
    /// User text parts seen while no turn ran: their turn is the next `busy`.
    waiting_user: Vec<(String, String, String)>,
    /// The running turn was aborted (`MessageAbortedError`).
    aborted: bool,
    /// The running turn's error, if any.
    error: Option<String>,
    /// Items started and not completed, by item id: closed when their turn ends.
    open_items: HashMap<String, (String, Item)>,
    /// Agent text parts of the running turn, by part id: their message and the text so far.
    texts: HashMap<String, (String, String)>,
    /// Tool parts by the model's call id, for an approval's `itemId`.
    calls: HashMap<String, String>,
}

fn item_event(turn_id: &str, item: Item) -> ItemEvent {
    ItemEvent {
        turn_id: turn_id.to_string(),
        item,
    }
}

/// The item of a tool part in its current state (`None` while it is still `pending`).
pub fn tool_item(part: &Part) -> Option<Item> {
    let state = part.state.as_ref()?;
    let status = match state.status.as_str() {
        "pending" => return None,
        "running" => "inProgress",
        "completed" => "completed",
        "error" => {
            let error = state.error.as_deref().unwrap_or_default();
            if error.contains("rejected permission") || error.contains("dismissed this question") {
                "declined"
            } else if error.contains("aborted") {
                "interrupted"
            } else {
                "failed"
            }
        }
        _ => "inProgress",
    }
    .to_string();
    let output = state.output.clone().or_else(|| state.error.clone());
    let tool = part.tool.clone().unwrap_or_default();
    if tool == "bash" {
        let input = state.input.as_ref();
        let command = input
            .and_then(|i| i.get("command"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let exit_code = state
            .metadata
            .as_ref()
            .and_then(|m| m.get("exit"))
            .and_then(Value::as_i64);
        let duration_ms = state
            .time
            .as_ref()
            .and_then(|t| Some(t.end?.saturating_sub(t.start?)));
        return Some(Item::Command {
            id: part.id.clone(),
            command,
            cwd: input
                .and_then(|i| i.get("workdir"))
                .and_then(Value::as_str)
                .map(str::to_string),
            status,
            exit_code,
            output,
            duration_ms,
        });
    }
    Some(Item::Tool {
        id: part.id.clone(),
        name: tool,
        input: state.input.clone(),
        output,
        status,
    })
}

/// The approval a permission request asks for, in the running turn `turn_id`.
pub fn approval(
    request: &PermissionRequest,
    turn_id: &str,
    item_id: Option<String>,
) -> ApprovalRequested {
    let kind = match request.permission.as_str() {
        "bash" => "command",
        "edit" | "write" | "patch" => "fileChange",
        _ => "tool",
    };
    let command = request
        .metadata
        .as_ref()
        .and_then(|m| m.get("command"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| (!request.patterns.is_empty()).then(|| request.patterns.join(" ")));
    ApprovalRequested {
        approval_id: request.id.clone().into(),
        kind: kind.into(),
        turn_id: turn_id.to_string(),
        item_id,
        command,
        cwd: None,
        reason: Some(format!(
            "opencode asks for permission `{}`{}",
            request.permission,
            if request.patterns.is_empty() {
                String::new()
            } else {
                format!(": {}", request.patterns.join(", "))
            }
        )),
        decisions: DECISIONS.iter().map(|d| (*d).into()).collect(),
    }
}

/// The input request a `question.asked` is, in the running turn `turn_id` (ids: see the
/// module doc).
pub fn question_request(
    request: &QuestionRequest,
    turn_id: Option<String>,
    item_id: Option<String>,
) -> InputRequested {
    let mut ids: Vec<String> = Vec::new();
    let questions = request
        .questions
        .iter()
        .map(|q| {
            let mut id = q.question.clone();
            let mut n = 1;
            while ids.contains(&id) {
                n += 1;
                id = format!("{} ({n})", q.question);
            }
            ids.push(id.clone());
            Question {
                id,
                header: Some(q.header.clone()).filter(|h| !h.is_empty()),
                question: q.question.clone(),
                options: q
                    .options
                    .iter()
                    .map(|o| QuestionOption {
                        label: o.label.clone(),
                        description: o.description.clone().filter(|d| !d.is_empty()),
                    })
                    .collect(),
                is_other: q.custom.unwrap_or(true),
                is_secret: false,
                multi_select: q.multiple.unwrap_or(false),
            }
        })
        .collect();
    InputRequested {
        request_id: request.id.clone(),
        kind: InputKind::Question,
        turn_id,
        item_id,
        questions,
        plan: None,
        message: None,
        server: None,
        schema: None,
        url: None,
        permissions: None,
        decisions: QUESTION_DECISIONS
            .iter()
            .map(|d| (*d).to_string())
            .collect(),
    }
}

impl Forwarder {
    /// One event about the session → its effects.
    pub fn apply(&mut self, event: Event) -> Vec<Effect> {
        let mut out = Vec::new();
        match event {
            Event::SessionStatus { status, .. } if status == "busy" => self.busy(&mut out),
            Event::SessionStatus { status, .. } if status == "idle" => self.idle(&mut out),
            Event::SessionIdle { .. } => self.idle(&mut out),
            Event::SessionError { error, .. } => {
                let error = error.unwrap_or_default();
                if error.is_abort() {
                    self.aborted = true;
                } else {
                    let message = error.message();
                    self.error = Some(message.clone());
                    out.push(Effect::Store(EventKind::Error(ErrorEvent {
                        turn_id: self.current.clone(),
                        id: None,
                        message,
                        code: error.name.clone(),
                    })));
                }
            }
            Event::MessageUpdated { info } => self.message(info, &mut out),
            Event::MessagePartUpdated { part } => self.part(part, &mut out),
            Event::MessagePartDelta {
                part_id,
                field,
                delta,
                ..
            } => {
                let Some(turn_id) = self.current.clone() else {
                    return out;
                };
                if field != "text" {
                    return out;
                }
                if let Some((_, text)) = self.texts.get_mut(&part_id) {
                    if text.len() + delta.len() <= MAX_STREAMED_TEXT {
                        text.push_str(&delta);
                    }
                    out.push(Effect::Publish(EventKind::ItemDelta(ItemDelta {
                        turn_id,
                        item_id: part_id,
                        kind: "agentMessage".into(),
                        delta,
                        offset: None,
                        snapshot: false,
                    })));
                }
            }
            Event::PermissionAsked(request) => {
                let turn_id = self.current.clone().unwrap_or_default();
                let item_id = request
                    .tool
                    .as_ref()
                    .and_then(|tool| self.calls.get(&tool.call_id).cloned());
                out.push(Effect::HoldApproval {
                    approval_id: request.id.clone(),
                });
                out.push(Effect::Store(EventKind::ApprovalRequested(approval(
                    &request, &turn_id, item_id,
                ))));
                out.push(Effect::Report(AgentStatus::Waiting));
            }
            Event::PermissionReplied { request_id, .. } => {
                out.push(Effect::ApprovalSettled {
                    approval_id: request_id,
                });
            }
            Event::QuestionAsked(question) => {
                let item_id = question
                    .tool
                    .as_ref()
                    .and_then(|tool| self.calls.get(&tool.call_id).cloned());
                out.push(Effect::AskQuestion(Box::new(question_request(
                    &question,
                    self.current.clone(),
                    item_id,
                ))));
                out.push(Effect::Report(AgentStatus::Waiting));
            }
            Event::QuestionReplied {
                request_id,
                answers,
                ..
            } => out.push(Effect::QuestionSettled {
                request_id,
                answers: Some(answers),
            }),
            Event::QuestionRejected { request_id, .. } => out.push(Effect::QuestionSettled {
                request_id,
                answers: None,
            }),
            Event::SessionStatus { .. } | Event::ServerConnected | Event::Other { .. } => {}
        }
        out
    }

    fn busy(&mut self, out: &mut Vec<Effect>) {
        if self.current.is_some() {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting_user);
        let Some(turn_id) = waiting.first().map(|(message_id, _, _)| message_id.clone()) else {
            // A busy period with no prompt seen (a retry, or a prompt typed before we
            // subscribed): its turn is named when its user message shows.
            return;
        };
        self.start(turn_id, waiting, out);
    }

    fn start(
        &mut self,
        turn_id: String,
        user_texts: Vec<(String, String, String)>,
        out: &mut Vec<Effect>,
    ) {
        self.current = Some(turn_id.clone());
        self.aborted = false;
        self.error = None;
        let ours = self.pending_api.remove(&turn_id);
        for (message_id, _, _) in &user_texts {
            self.pending_api.remove(message_id);
        }
        let source = if ours {
            TurnSource::Api
        } else if self.has_terminal {
            TurnSource::Terminal
        } else {
            TurnSource::Other
        };
        out.push(Effect::Store(EventKind::TurnStarted(TurnStarted {
            turn_id: turn_id.clone(),
            source,
        })));
        out.push(Effect::Report(AgentStatus::Running));
        for (_, part_id, text) in user_texts {
            out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                &turn_id,
                Item::UserMessage { id: part_id, text },
            ))));
        }
    }

    fn idle(&mut self, out: &mut Vec<Effect>) {
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
        self.calls.clear();
        let completed = done.status == TurnStatus::Completed;
        let end_status = match done.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        };
        let mut effects = Vec::new();
        let mut open: Vec<(String, (String, Item))> = self.open_items.drain().collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, (turn_id, mut item)) in open {
            match &mut item {
                Item::AgentMessage {
                    text, interrupted, ..
                } => {
                    if let Some((_, streamed)) = self.texts.get(&id)
                        && streamed.len() > text.len()
                    {
                        *text = streamed.clone();
                    }
                    *interrupted = !completed;
                }
                Item::Command { status, .. } | Item::Tool { status, .. } => {
                    *status = end_status.to_string();
                }
                _ => {}
            }
            effects.push(Effect::Store(EventKind::ItemCompleted(item_event(
                &turn_id, item,
            ))));
        }
        self.texts.clear();
        effects.push(Effect::Store(EventKind::TurnCompleted(done)));
        effects
    }

    fn message(&mut self, info: MessageInfo, out: &mut Vec<Effect>) {
        self.roles.insert(info.id.clone(), info.role.clone());
        if info.role != "assistant" {
            return;
        }
        if let Some(error) = &info.error
            && error.is_abort()
        {
            self.aborted = true;
        }
        // A step's message completed: its text parts are final.
        if info.time.completed.is_some() {
            let done: Vec<String> = self
                .texts
                .iter()
                .filter(|(_, (message_id, _))| *message_id == info.id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in done {
                self.complete_text(&id, None, out);
            }
        }
    }

    /// Records where a prompt an inject waits on went, the first time its user message shows.
    fn place(&mut self, message_id: &str, placement: Placement) {
        if let Some(slot @ None) = self.placed.get_mut(message_id) {
            *slot = Some(placement);
        }
    }

    fn complete_text(&mut self, part_id: &str, text: Option<String>, out: &mut Vec<Effect>) {
        let Some((turn_id, _)) = self.open_items.remove(part_id) else {
            return;
        };
        let streamed = self.texts.remove(part_id).map(|(_, text)| text);
        let text = text
            .filter(|t| !t.is_empty())
            .or(streamed)
            .unwrap_or_default();
        out.push(Effect::Store(EventKind::ItemCompleted(item_event(
            &turn_id,
            Item::AgentMessage {
                id: part_id.to_string(),
                text,
                interrupted: false,
            },
        ))));
    }

    fn part(&mut self, part: Part, out: &mut Vec<Effect>) {
        let role = self.roles.get(&part.message_id).cloned();
        if part.kind == "text" && role.as_deref() == Some("user") {
            if part.synthetic == Some(true) {
                return;
            }
            let text = part.text.clone().unwrap_or_default();
            match self.current.clone() {
                // A prompt sent while the turn runs: OpenCode folds it into the turn.
                Some(turn_id) => {
                    self.place(&part.message_id, Placement::Joins(turn_id.clone()));
                    self.pending_api.remove(&part.message_id);
                    out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                        &turn_id,
                        Item::UserMessage { id: part.id, text },
                    ))))
                }
                None => {
                    // The next `busy` starts the turn of the first message waiting; the others
                    // are folded into it.
                    let placement = match self.waiting_user.first() {
                        Some((first, _, _)) if *first != part.message_id => {
                            Placement::Joins(first.clone())
                        }
                        _ => Placement::Opens,
                    };
                    self.place(&part.message_id, placement);
                    if !self.waiting_user.iter().any(|(_, id, _)| *id == part.id) {
                        self.waiting_user.push((part.message_id, part.id, text));
                    }
                }
            }
            return;
        }
        let Some(turn_id) = self.current.clone() else {
            // Outside a turn (an aborted turn's late parts): the turn's end stored them.
            return;
        };
        match part.kind.as_str() {
            "text" => {
                if part.synthetic == Some(true) {
                    return;
                }
                let text = part.text.clone().unwrap_or_default();
                if !self.open_items.contains_key(&part.id) {
                    if self.texts.contains_key(&part.id) {
                        return; // already completed in this turn
                    }
                    let item = Item::AgentMessage {
                        id: part.id.clone(),
                        text: String::new(),
                        interrupted: false,
                    };
                    self.open_items
                        .insert(part.id.clone(), (turn_id.clone(), item.clone()));
                    self.texts
                        .insert(part.id.clone(), (part.message_id.clone(), String::new()));
                    out.push(Effect::Store(EventKind::ItemStarted(item_event(
                        &turn_id, item,
                    ))));
                }
                if let Some((_, streamed)) = self.texts.get_mut(&part.id)
                    && text.len() >= streamed.len()
                {
                    *streamed = text.clone();
                }
                if part.time.as_ref().and_then(|t| t.end).is_some() {
                    self.complete_text(&part.id, Some(text), out);
                }
            }
            "tool" => {
                if let Some(call_id) = &part.call_id {
                    self.calls.insert(call_id.clone(), part.id.clone());
                }
                let Some(item) = tool_item(&part) else {
                    return;
                };
                let finished = matches!(
                    part.state.as_ref().map(|s| s.status.as_str()),
                    Some("completed" | "error")
                );
                if !self.open_items.contains_key(&part.id) {
                    if !finished {
                        self.open_items
                            .insert(part.id.clone(), (turn_id.clone(), item.clone()));
                    }
                    out.push(Effect::Store(EventKind::ItemStarted(item_event(
                        &turn_id,
                        item.clone(),
                    ))));
                    out.push(Effect::Report(AgentStatus::ToolRunning));
                }
                if finished {
                    self.open_items.remove(&part.id);
                    out.push(Effect::Store(EventKind::ItemCompleted(item_event(
                        &turn_id, item,
                    ))));
                    out.push(Effect::Report(AgentStatus::Running));
                }
            }
            _ => {}
        }
    }
}

/// The session's history (`GET /session/:id/message`, oldest first) as the events a live
/// stream would have stored, for a backfill after a restart: one turn per user message that
/// opened a busy period (a user message right after another, with no reply between, was folded
/// into the same turn), its items, and its end. A last turn whose reply never completed (the
/// server died mid-stream) ends `interrupted`. The core drops what is already stored.
pub fn history(messages: &[MessageWithParts]) -> Vec<EventKind> {
    let mut out = Vec::new();
    let mut turn: Option<String> = None;
    let mut last_assistant: Option<&MessageInfo> = None;
    let close =
        |turn: &mut Option<String>, last: Option<&MessageInfo>, out: &mut Vec<EventKind>| {
            let Some(turn_id) = turn.take() else { return };
            let status = match last {
                Some(info) if info.error.as_ref().is_some_and(|e| e.is_abort()) => {
                    TurnStatus::Interrupted
                }
                Some(info) if info.error.is_some() => TurnStatus::Failed,
                Some(info) if info.time.completed.is_some() => TurnStatus::Completed,
                _ => TurnStatus::Interrupted,
            };
            out.push(EventKind::TurnCompleted(TurnCompleted {
                turn_id,
                status,
                error: last
                    .and_then(|info| info.error.as_ref())
                    .filter(|e| !e.is_abort())
                    .map(|e| e.message()),
                duration_ms: None,
                lost: false,
            }));
        };
    let mut previous_was_user = false;
    for message in messages {
        if message.info.role == "user" {
            // A prompt sent while the loop ran (created before the reply it followed had
            // completed) was folded into that turn; any other opens a turn.
            let created = message.info.time.created.unwrap_or(0);
            let folded = turn.is_some()
                && (previous_was_user
                    || last_assistant
                        .and_then(|info| info.time.completed)
                        .is_some_and(|completed| created < completed));
            previous_was_user = true;
            if !folded {
                close(&mut turn, last_assistant, &mut out);
                last_assistant = None;
                turn = Some(message.info.id.clone());
                out.push(EventKind::TurnStarted(TurnStarted {
                    turn_id: message.info.id.clone(),
                    source: TurnSource::Other,
                }));
            }
            let Some(turn_id) = turn.clone() else {
                continue;
            };
            for part in &message.parts {
                if part.kind == "text" && part.synthetic != Some(true) {
                    out.push(EventKind::ItemCompleted(item_event(
                        &turn_id,
                        Item::UserMessage {
                            id: part.id.clone(),
                            text: part.text.clone().unwrap_or_default(),
                        },
                    )));
                }
            }
            continue;
        }
        previous_was_user = false;
        let Some(turn_id) = turn.clone() else {
            continue;
        };
        last_assistant = Some(&message.info);
        let interrupted = message.info.time.completed.is_none()
            || message.info.error.as_ref().is_some_and(|e| e.is_abort());
        for part in &message.parts {
            match part.kind.as_str() {
                "text" if part.synthetic != Some(true) => {
                    out.push(EventKind::ItemCompleted(item_event(
                        &turn_id,
                        Item::AgentMessage {
                            id: part.id.clone(),
                            text: part.text.clone().unwrap_or_default(),
                            interrupted,
                        },
                    )));
                }
                "tool" => {
                    if let Some(item) = tool_item(part) {
                        out.push(EventKind::ItemCompleted(item_event(&turn_id, item)));
                    }
                }
                _ => {}
            }
        }
    }
    close(&mut turn, last_assistant, &mut out);
    out
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
