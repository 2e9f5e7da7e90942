//! Hook lines for the [`Normalizer`]: `hooks.jsonl` as `cohost-hook` appends it — prompts,
//! tool calls, permission requests (approvals, questions, plans), turn ends, session changes.

use serde_json::Value;

use super::items::{
    DECISIONS, approval_id, input_request, prompt_item_id, tool_item, unwrap_pasted,
};
use super::{Normalizer, Output, PendingEnd, STOP_GRACE_MS};
use crate::formats::claude::{
    BashToolInput, HookEvent, HookLine, HookPayload, PostToolUseFailureHookInput,
    PostToolUseHookInput, ToolResponse,
};
use crate::protocol::{
    AgentStatus, ApprovalDecision, ApprovalRequested, ErrorEvent, EventKind, Item, ItemEvent,
    SessionAttention, TurnCompleted, TurnStatus,
};

impl Normalizer {
    /// One `hooks.jsonl` line: `{"receivedAt", "event", "payload", "requestId"?}`, as JSON.
    pub fn hook(&mut self, line: &Value, now: u64) -> Vec<Output> {
        // A hook reports this session: the hooks lead from here on.
        self.transcript_led = false;
        self.hook_line(&HookLine::from_value(line), now)
    }

    /// One `hooks.jsonl` line.
    pub fn hook_line(&mut self, line: &HookLine, now: u64) -> Vec<Output> {
        self.now = self.now.max(now);
        let mut out = Vec::new();
        let HookPayload { common, event } = &line.payload;
        let session_end = matches!(event, HookEvent::SessionEnd(_));
        // Claude's session id can change under us (/clear, --fork-session): re-read it always.
        if let Some(session) = &common.session_id
            && self.claude_session.as_deref() != Some(session.as_str())
            && !session_end
        {
            self.claude_session = Some(session.clone());
            out.push(Output::Bound {
                claude_session_id: session.clone(),
                transcript_path: common.transcript_path.clone(),
            });
        }
        if let Some(path) = &common.transcript_path
            && self.transcript.as_deref() != Some(path.as_str())
            && !session_end
        {
            self.transcript = Some(path.clone());
            out.push(Output::Transcript(path.clone()));
        }
        // UserPromptSubmit, PreToolUse, PermissionRequest and Stop carry the mode in force.
        if let Some(mode) = &common.permission_mode
            && self.permission_mode.as_deref() != Some(mode.as_str())
        {
            self.permission_mode = Some(mode.as_str().to_string());
            out.push(Output::PermissionMode(mode.as_str().to_string()));
        }
        let raw_prompt_id = common.prompt_id.clone();
        let prompt_id = raw_prompt_id.as_deref().map(|id| self.resolve(id));
        let turn_id = prompt_id
            .clone()
            .or_else(|| self.turn.clone())
            .unwrap_or_default();
        tracing::debug!(
            event = ?line.event,
            prompt_id = ?raw_prompt_id,
            current = ?self.turn,
            pending = ?self.pending_turns(),
            "claude: hook"
        );
        match event {
            HookEvent::SessionStart(_) => out.push(Output::Status(AgentStatus::Idle)),
            HookEvent::UserPromptSubmit(input) => {
                let text = unwrap_pasted(input.prompt.as_deref().unwrap_or_default()).into_owned();
                let trimmed = text.trim().to_string();
                if let (Some(raw), Some(mut turn_id)) = (&raw_prompt_id, prompt_id.clone()) {
                    // 2.1.197 sends a batch of queued prompts as one turn, yet may name a prompt
                    // id for one of them that no transcript line carries: the batch's line with
                    // the same text says which turn it is.
                    if let Some(batch) = self.batch_turn.clone()
                        && batch != turn_id
                        && self.open_turn() == Some(batch.as_str())
                        && self.turn_texts.contains(&trimmed)
                    {
                        self.alias(raw, &batch);
                        turn_id = batch;
                    }
                    // 2.1.332 fires the hook of a prompt typed while a turn runs at once, naming
                    // the running turn: Claude queued it, and it runs later as a turn of its own
                    // (opened by its transcript line, `promptSource: "queued"`).
                    if self.open_turn() == Some(turn_id.as_str())
                        && self.batch_turn.as_deref() != Some(turn_id.as_str())
                        && !self.turn_texts.is_empty()
                        && !self.turn_texts.contains(&trimmed)
                    {
                        out.push(Output::PromptQueued { text });
                        return out;
                    }
                    let turn_id = &turn_id;
                    self.begin_turn(turn_id, &text, line.received_at, &mut out);
                    if !self.turn_texts.contains(&trimmed) {
                        self.turn_texts.push(trimmed);
                    }
                    out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: Item::UserMessage {
                            id: prompt_item_id(turn_id, &text),
                            text: text.clone(),
                        },
                    })));
                    out.push(Output::PromptSubmitted {
                        turn_id: turn_id.clone(),
                        text,
                    });
                    out.push(Output::Status(AgentStatus::Running));
                }
            }
            HookEvent::PreToolUse(input) => {
                if let (Some(id), Some(name)) = (&input.tool_use_id, &input.tool_name) {
                    out.push(Output::Store(EventKind::ItemStarted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: tool_item(
                            &turn_id,
                            id,
                            name,
                            input.tool_input.as_ref(),
                            "inProgress",
                            None,
                        ),
                    })));
                    out.push(Output::Status(AgentStatus::ToolRunning));
                }
            }
            HookEvent::PostToolUse(PostToolUseHookInput {
                tool_name: Some(name),
                tool_input,
                tool_use_id: Some(id),
                duration_ms,
                ..
            })
            | HookEvent::PostToolUseFailure(PostToolUseFailureHookInput {
                tool_name: Some(name),
                tool_input,
                tool_use_id: Some(id),
                duration_ms,
                ..
            }) => {
                let (output, status) = match event {
                    HookEvent::PostToolUseFailure(failure) => (failure.error.clone(), "failed"),
                    HookEvent::PostToolUse(success) => (
                        success.tool_response.as_ref().map(ToolResponse::text),
                        "completed",
                    ),
                    _ => (None, "completed"),
                };
                let mut item = tool_item(&turn_id, id, name, tool_input.as_ref(), status, output);
                if let Item::Command {
                    duration_ms: item_duration,
                    ..
                } = &mut item
                {
                    *item_duration = *duration_ms;
                }
                out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                    turn_id: turn_id.clone(),
                    item,
                })));
                out.push(Output::Status(AgentStatus::Running));
            }
            HookEvent::PermissionRequest(request) => {
                let request_id = line.request_id.clone().unwrap_or_default();
                let session = self.claude_session.clone().unwrap_or_default();
                let tool = request.tool_name.clone().unwrap_or_default();
                let input = request.tool_input.as_ref();
                // Claude asks the person, not for a permission: an input request.
                if let Some(request) =
                    input_request(&session, &request_id, &tool, input, Some(turn_id.clone()))
                {
                    out.push(Output::Store(EventKind::InputRequested(Box::new(request))));
                    out.push(Output::Status(AgentStatus::Waiting));
                } else {
                    let BashToolInput {
                        command,
                        description,
                    } = BashToolInput::of(input);
                    out.push(Output::Store(EventKind::ApprovalRequested(
                        ApprovalRequested {
                            approval_id: approval_id(&session, &request_id).into(),
                            kind: if tool == "Bash" {
                                "command".into()
                            } else {
                                "tool".into()
                            },
                            turn_id: turn_id.clone(),
                            item_id: None,
                            command: command.or_else(|| {
                                (!tool.is_empty()).then(|| {
                                    format!(
                                        "{tool} {}",
                                        input.map(|i| i.to_string()).unwrap_or_default()
                                    )
                                })
                            }),
                            cwd: common.cwd.clone(),
                            reason: description,
                            decisions: DECISIONS.map(ApprovalDecision::from).to_vec(),
                        },
                    )));
                    out.push(Output::Status(AgentStatus::Waiting));
                }
            }
            HookEvent::Stop(_) | HookEvent::StopFailure(_) => {
                if let Some(turn_id) = prompt_id.or_else(|| self.turn.clone()) {
                    let (failure, stop) = match event {
                        HookEvent::StopFailure(failure) => (Some(failure), None),
                        HookEvent::Stop(stop) => (None, Some(stop)),
                        _ => (None, None),
                    };
                    let done = TurnCompleted {
                        turn_id,
                        status: if failure.is_some() {
                            TurnStatus::Failed
                        } else {
                            TurnStatus::Completed
                        },
                        error: failure.map(|failure| {
                            failure
                                .last_assistant_message
                                .clone()
                                .or_else(|| failure.error.clone())
                                .unwrap_or_else(|| "the turn failed".into())
                        }),
                        duration_ms: None,
                        lost: false,
                    };
                    if let Some(failure) = failure {
                        out.push(Output::Store(EventKind::Error(ErrorEvent {
                            turn_id: Some(done.turn_id.clone()),
                            id: Some(format!("turn-failed:{}", done.turn_id)),
                            message: done.error.clone().unwrap_or_default(),
                            code: failure.error.clone(),
                        })));
                    }
                    // A turn the transcript already ended (its end was read before this line:
                    // the two files are read apart) has nothing left to hold; a pending end
                    // for it would only stand in the way of the next turn's.
                    if !self.ended.contains(&done.turn_id) {
                        // Held until the transcript writes the turn's end (or the grace
                        // expires). Another turn's pending end stays: Claude may run the
                        // next (queued) turn to its `Stop` before its transcript is read.
                        let awaited_reply = stop
                            .and_then(|stop| stop.last_assistant_message.as_deref())
                            .map(|text| text.trim().to_string())
                            .filter(|text| !text.is_empty());
                        self.hold_end(
                            PendingEnd {
                                done,
                                deadline: now + STOP_GRACE_MS,
                                awaited_reply,
                                ended_before_reply: false,
                                by_idle: false,
                            },
                            &mut out,
                        );
                    }
                }
            }
            HookEvent::Notification(notification) => {
                let kind = notification.notification_type.clone().unwrap_or_default();
                // One per hook line: a line read again after a restart is stored once.
                let at = line.received_at.unwrap_or(now);
                let attention = Output::Store(EventKind::SessionAttention(SessionAttention {
                    id: format!(
                        "{}:{at}:{kind}",
                        self.claude_session.as_deref().unwrap_or_default()
                    ),
                    kind,
                    message: notification.message.clone(),
                    turn_id: Some(turn_id.clone()).filter(|t| !t.is_empty()),
                }));
                self.attention(&turn_id, attention, &mut out);
            }
            HookEvent::SessionEnd(end) => {
                if let Some(turn) = self.turn.clone() {
                    self.end_turn(
                        TurnCompleted {
                            turn_id: turn,
                            status: TurnStatus::Interrupted,
                            error: Some(format!(
                                "claude ended the session ({})",
                                end.reason.as_deref().unwrap_or_default()
                            )),
                            duration_ms: None,
                            lost: false,
                        },
                        &mut out,
                    );
                }
                out.push(Output::Status(AgentStatus::Idle));
            }
            _ => {}
        }
        out
    }
}
