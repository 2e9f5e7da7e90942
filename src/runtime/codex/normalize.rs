//! codex wire → cohost events: pure functions from app-server notifications, server requests and
//! thread snapshots to [`EventKind`]s.
//!
//! Only this module (with the rest of `codex/`) knows codex's JSON shapes. Ids are derived from
//! codex's own turn and item ids, so the same item seen live and again in a backfill after a
//! resume gets the same cohost id and is stored once.

use serde::Deserialize;
use serde_json::Value;

use super::wire::{
    self, AgentMessageDeltaNotification, CommandExecutionOutputDeltaNotification,
    ErrorNotification, ItemCompletedNotification, ItemStartedNotification,
    ReasoningSummaryTextDeltaNotification, ReasoningTextDeltaNotification, RequestId,
    ServerNotification, ServerRequest, ThreadItem, ThreadScoped,
    ThreadTokenUsageUpdatedNotification, TokenUsageBreakdown, UserInput,
};
use crate::protocol::{
    ApprovalDecision, ApprovalRequested, ErrorEvent, EventKind, FileChange, GoalUpdated, InputKind,
    InputRequested, Item, ItemDelta, ItemEvent, PlanStep, Question, QuestionOption, TokenCounts,
    TurnCompleted, TurnPlan, TurnStatus, Usage,
};

/// The cohost item id of codex item `item_id` in turn `turn_id`.
pub fn item_id(turn_id: &str, item_id: &str) -> String {
    format!("{turn_id}:{item_id}")
}

/// The cohost approval id of a server request about `item_id` in `turn_id`. Deterministic, so a
/// request replayed after a resume (with a new JSON-RPC id) maps to the same approval.
pub fn approval_id(turn_id: &str, item_id: &str, kind: &str) -> String {
    format!("ap:{turn_id}:{item_id}:{kind}")
}

/// The thread a notification or server request is about, if it names one (`threadId`).
pub fn thread_id(params: &Value) -> Option<&str> {
    ThreadScoped::of(params)
}

/// What a notification means for a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Normalized {
    /// Store this event.
    Store(EventKind),
    /// Broadcast this live-only event.
    Live(EventKind),
    /// A turn began; the forwarder decides its source.
    TurnStarted { turn_id: String },
    /// A server request was resolved (answered by someone, or made moot).
    RequestResolved { request_id: RequestId },
    /// The goal was cleared.
    GoalCleared,
}

/// Normalizes one notification. Returns nothing for notifications cohost does not record.
pub fn notification(method: &str, params: &Value) -> Vec<Normalized> {
    normalized(ServerNotification::parse(method, params))
}

/// Normalizes one notification already read into its wire type (see [`notification`]).
pub fn normalized(notification: ServerNotification) -> Vec<Normalized> {
    match notification {
        ServerNotification::TurnStarted(started) => started
            .turn
            .and_then(|turn| turn.id)
            .map(|turn_id| vec![Normalized::TurnStarted { turn_id }])
            .unwrap_or_default(),
        ServerNotification::TurnCompleted(completed) => completed
            .turn
            .as_ref()
            .and_then(completed_turn)
            .map(|done| vec![Normalized::Store(EventKind::TurnCompleted(done))])
            .unwrap_or_default(),
        ServerNotification::ItemStarted(ItemStartedNotification { item, turn_id, .. }) => {
            let turn_id = turn_id.unwrap_or_default();
            match item.as_ref().and_then(|item| thread_item(&turn_id, item)) {
                // Messages and reasoning are stored once, complete; their text streams as deltas.
                Some(
                    item @ (Item::Command { .. } | Item::FileChange { .. } | Item::Tool { .. }),
                ) => {
                    vec![Normalized::Store(EventKind::ItemStarted(ItemEvent {
                        turn_id,
                        item,
                    }))]
                }
                _ => Vec::new(),
            }
        }
        ServerNotification::ItemCompleted(ItemCompletedNotification { item, turn_id, .. }) => {
            let turn_id = turn_id.unwrap_or_default();
            item.as_ref()
                .and_then(|item| thread_item(&turn_id, item))
                .map(|item| {
                    vec![Normalized::Store(EventKind::ItemCompleted(ItemEvent {
                        turn_id,
                        item,
                    }))]
                })
                .unwrap_or_default()
        }
        ServerNotification::AgentMessageDelta(AgentMessageDeltaNotification {
            turn_id,
            item_id,
            delta: text,
            ..
        }) => delta(turn_id, item_id, text, "agentMessage"),
        ServerNotification::ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaNotification {
            turn_id,
            item_id,
            delta: text,
            ..
        })
        | ServerNotification::ReasoningTextDelta(ReasoningTextDeltaNotification {
            turn_id,
            item_id,
            delta: text,
            ..
        }) => delta(turn_id, item_id, text, "reasoning"),
        ServerNotification::CommandExecutionOutputDelta(
            CommandExecutionOutputDeltaNotification {
                turn_id,
                item_id,
                delta: text,
                ..
            },
        ) => delta(turn_id, item_id, text, "commandOutput"),
        ServerNotification::PlanDelta(AgentMessageDeltaNotification {
            turn_id,
            item_id,
            delta: text,
            ..
        }) => delta(turn_id, item_id, text, "plan"),
        ServerNotification::TurnPlanUpdated(updated) => {
            vec![Normalized::Store(EventKind::TurnPlanUpdated(TurnPlan {
                turn_id: updated.turn_id.unwrap_or_default(),
                explanation: updated.explanation.filter(|e| !e.is_empty()),
                plan: updated
                    .plan
                    .into_iter()
                    .map(|step| PlanStep {
                        step: step.step.unwrap_or_default(),
                        status: step.status.unwrap_or_else(|| "pending".into()),
                    })
                    .collect(),
            }))]
        }
        ServerNotification::ThreadTokenUsageUpdated(ThreadTokenUsageUpdatedNotification {
            turn_id,
            token_usage,
            ..
        }) => token_usage
            .map(|usage| {
                vec![Normalized::Store(EventKind::Usage(Usage {
                    id: None,
                    turn_id: turn_id.unwrap_or_default(),
                    total: counts(usage.total.as_ref()),
                    last: counts(usage.last.as_ref()),
                    context_window: usage.model_context_window,
                }))]
            })
            .unwrap_or_default(),
        ServerNotification::Error(ErrorNotification { error, turn_id, .. }) => {
            let error = error.unwrap_or_default();
            vec![Normalized::Store(EventKind::Error(ErrorEvent {
                id: None,
                turn_id,
                message: error
                    .message
                    .unwrap_or_else(|| "codex reported an error".into()),
                // Only a plain-string `codexErrorInfo` is a code; the object forms
                // (`{"httpConnectionFailed": …}`) carry none.
                code: error
                    .codex_error_info
                    .as_ref()
                    .and_then(|info| info.code())
                    .map(str::to_string),
            }))]
        }
        ServerNotification::ThreadGoalUpdated(updated) => updated
            .goal
            .filter(|goal| !goal.is_null())
            .map(|goal| {
                vec![Normalized::Store(EventKind::GoalUpdated(GoalUpdated {
                    goal,
                }))]
            })
            .unwrap_or_default(),
        ServerNotification::ThreadGoalCleared(_) => vec![Normalized::GoalCleared],
        ServerNotification::ServerRequestResolved(resolved) => resolved
            .request_id
            .map(|request_id| vec![Normalized::RequestResolved { request_id }])
            .unwrap_or_default(),
        ServerNotification::Other { .. } => Vec::new(),
    }
}

fn delta(
    turn_id: Option<String>,
    codex_item: Option<String>,
    delta: Option<String>,
    kind: &str,
) -> Vec<Normalized> {
    let turn_id = turn_id.unwrap_or_default();
    let (Some(codex_item), Some(delta)) = (codex_item, delta) else {
        return Vec::new();
    };
    vec![Normalized::Live(EventKind::ItemDelta(ItemDelta {
        item_id: item_id(&turn_id, &codex_item),
        turn_id,
        kind: kind.into(),
        delta,
        offset: None,
        snapshot: false,
    }))]
}

fn counts(breakdown: Option<&TokenUsageBreakdown>) -> TokenCounts {
    let get =
        |field: fn(&TokenUsageBreakdown) -> Option<u64>| breakdown.and_then(field).unwrap_or(0);
    TokenCounts {
        input: get(|b| b.input_tokens),
        cached_input: get(|b| b.cached_input_tokens),
        output: get(|b| b.output_tokens),
        reasoning_output: get(|b| b.reasoning_output_tokens),
        total: get(|b| b.total_tokens),
    }
}

/// A `turn/completed` turn (as JSON) → `turn.completed`, or `None` while it is still in
/// progress. See [`completed_turn`].
pub fn turn_completed(turn: &Value) -> Option<TurnCompleted> {
    completed_turn(&wire::Turn::deserialize(turn).ok()?)
}

/// A turn that ended (`completed`, `interrupted`, `failed`) → `turn.completed`; `None` for a turn
/// in progress, of an unknown status, or without an id.
pub fn completed_turn(turn: &wire::Turn) -> Option<TurnCompleted> {
    let status = match turn.status.as_ref()? {
        wire::TurnStatus::Completed => TurnStatus::Completed,
        wire::TurnStatus::Interrupted => TurnStatus::Interrupted,
        wire::TurnStatus::Failed => TurnStatus::Failed,
        wire::TurnStatus::InProgress | wire::TurnStatus::Other(_) => return None,
    };
    Some(TurnCompleted {
        turn_id: turn.id.clone()?,
        status,
        error: turn.error.as_ref().and_then(|error| error.message.clone()),
        duration_ms: turn.duration_ms,
        lost: false,
    })
}

/// One codex `ThreadItem` (as JSON) → our [`Item`]. See [`thread_item`].
pub fn item(turn_id: &str, item: &Value) -> Option<Item> {
    thread_item(turn_id, &ThreadItem::deserialize(item).ok()?)
}

/// One codex [`ThreadItem`] → our [`Item`]; `None` for an item without an id.
pub fn thread_item(turn_id: &str, item: &ThreadItem) -> Option<Item> {
    let id = self::item_id(turn_id, item.id()?);
    Some(match item {
        ThreadItem::UserMessage(message) => Item::UserMessage {
            id,
            text: message
                .content
                .iter()
                .filter_map(|input| match input {
                    UserInput::Text { text, .. } => Some(text.as_str()),
                    UserInput::Image { .. } | UserInput::Other { .. } => None,
                })
                .collect::<Vec<_>>()
                .join(""),
        },
        ThreadItem::AgentMessage(message) => Item::AgentMessage {
            id,
            text: message.text.clone().unwrap_or_default(),
            interrupted: false,
        },
        ThreadItem::Reasoning(reasoning) => Item::Reasoning {
            id,
            summary: reasoning.summary.clone(),
        },
        ThreadItem::CommandExecution(command) => Item::Command {
            id,
            command: command.command.clone().unwrap_or_default(),
            cwd: command.cwd.clone(),
            status: status_or(command.status.as_ref().map(|s| s.as_str()), "inProgress"),
            exit_code: command.exit_code,
            output: command.aggregated_output.clone(),
            duration_ms: command.duration_ms,
        },
        ThreadItem::FileChange(patch) => Item::FileChange {
            id,
            changes: patch
                .changes
                .iter()
                .map(|change| FileChange {
                    path: change.path.clone().unwrap_or_default(),
                    kind: change
                        .kind
                        .as_ref()
                        .and_then(|kind| kind.kind.as_ref())
                        .map_or("update", |kind| kind.as_str())
                        .into(),
                    diff: change.diff.clone(),
                })
                .collect(),
            status: status_or(patch.status.as_ref().map(|s| s.as_str()), "inProgress"),
        },
        // Tools: `result` (any JSON, `null` included) is the output, as JSON text.
        ThreadItem::McpToolCall(call) => Item::Tool {
            id,
            name: tool_name(call.tool.as_deref(), item.kind()),
            input: call.arguments.clone(),
            output: call.result.as_ref().map(Value::to_string),
            status: status_or(call.status.as_ref().map(|s| s.as_str()), "completed"),
        },
        ThreadItem::DynamicToolCall(call) => Item::Tool {
            id,
            name: tool_name(call.tool.as_deref(), item.kind()),
            input: call.arguments.clone(),
            output: None,
            status: status_or(call.status.as_ref().map(|s| s.as_str()), "completed"),
        },
        ThreadItem::CollabAgentToolCall(call) => Item::Tool {
            id,
            name: tool_name(call.tool.as_deref(), item.kind()),
            input: None,
            output: None,
            status: status_or(call.status.as_ref().map(|s| s.as_str()), "completed"),
        },
        ThreadItem::WebSearch(search) => Item::Tool {
            id,
            name: if search.query.is_some() {
                "web_search".to_string()
            } else {
                item.kind().to_string()
            },
            input: None,
            output: None,
            status: "completed".to_string(),
        },
        ThreadItem::Plan(plan) => Item::Plan {
            id,
            text: plan.text.clone().unwrap_or_default(),
        },
        ThreadItem::ImageView(_) => Item::Tool {
            id,
            name: item.kind().to_string(),
            input: None,
            output: None,
            status: "completed".to_string(),
        },
        ThreadItem::Other { kind, .. } => Item::Other {
            id,
            kind: kind.clone(),
        },
    })
}

fn status_or(status: Option<&str>, default: &str) -> String {
    status.unwrap_or(default).to_string()
}

fn tool_name(tool: Option<&str>, kind: &str) -> String {
    tool.unwrap_or(kind).to_string()
}

/// A server→client request that asks for a decision → `approval.requested`, or `None` for
/// requests cohost does not relay (they are refused so codex never waits on them).
pub fn approval_request(method: &str, params: &Value) -> Option<ApprovalRequested> {
    // (kind, turn, codex item, command, cwd, reason)
    let (kind, turn_id, codex_item, command, cwd, reason) =
        match ServerRequest::parse(method, params) {
            ServerRequest::CommandExecutionRequestApproval(request) => (
                "command",
                request.turn_id,
                request.item_id,
                request.command,
                request.cwd,
                request.reason,
            ),
            ServerRequest::FileChangeRequestApproval(request) => (
                "fileChange",
                request.turn_id,
                request.item_id,
                None,
                None,
                request.reason,
            ),
            // Legacy v1: no turn, the item is the call; the argv command is not relayed.
            ServerRequest::ExecCommandApproval(request) => (
                "command",
                None,
                request.call_id,
                None,
                request.cwd,
                request.reason,
            ),
            ServerRequest::ApplyPatchApproval(request) => (
                "fileChange",
                None,
                request.call_id,
                None,
                None,
                request.reason,
            ),
            _ => return None,
        };
    let turn_id = turn_id.unwrap_or_default();
    let codex_item = codex_item.unwrap_or_default();
    Some(ApprovalRequested {
        approval_id: approval_id(&turn_id, &codex_item, kind).into(),
        kind: kind.into(),
        item_id: (!codex_item.is_empty()).then(|| item_id(&turn_id, &codex_item)),
        turn_id,
        command,
        cwd,
        reason,
        decisions: DECISIONS.map(ApprovalDecision::from).to_vec(),
    })
}

/// The cohost id of an input request: `in:<turn>:<codex item or rpc id>:<kind>`. Deterministic
/// for questions and permissions (codex's call id), so a request replayed after a resume maps
/// to the same id.
pub fn input_request_id(turn_id: &str, key: &str, kind: InputKind) -> String {
    format!("in:{turn_id}:{key}:{}", kind.as_str())
}

/// A server→client request that waits for a person (a question, an elicitation, a permissions
/// grant) → `input.requested`, or `None` for requests that are not. `rpc_id` names a request
/// that has no item of its own (an elicitation).
pub fn input_request(method: &str, params: &Value, rpc_id: &str) -> Option<InputRequested> {
    let blank = |kind: InputKind, turn_id: Option<String>, key: &str| InputRequested {
        request_id: input_request_id(
            turn_id.as_deref().or(thread_id(params)).unwrap_or_default(),
            key,
            kind,
        ),
        kind,
        turn_id,
        item_id: None,
        questions: Vec::new(),
        plan: None,
        message: None,
        server: None,
        schema: None,
        url: None,
        permissions: None,
        decisions: kind.decisions().iter().map(|d| d.to_string()).collect(),
    };
    match ServerRequest::parse(method, params) {
        ServerRequest::ToolRequestUserInput(request) => {
            let call = request
                .item_id
                .clone()
                .unwrap_or_else(|| rpc_id.to_string());
            let mut out = blank(InputKind::Question, request.turn_id.clone(), &call);
            out.item_id = request.turn_id.as_deref().map(|turn| item_id(turn, &call));
            out.questions = request
                .questions
                .into_iter()
                .enumerate()
                .map(|(n, q)| Question {
                    id: q.id.unwrap_or_else(|| format!("q{n}")),
                    header: q.header,
                    question: q.question.unwrap_or_default(),
                    options: q
                        .options
                        .into_iter()
                        .map(|o| QuestionOption {
                            label: o.label.unwrap_or_default(),
                            description: o.description,
                        })
                        .collect(),
                    is_other: q.is_other.unwrap_or(false),
                    is_secret: q.is_secret.unwrap_or(false),
                    multi_select: false,
                })
                .collect();
            Some(out)
        }
        ServerRequest::McpServerElicitationRequest(request) => {
            let key = request
                .elicitation_id
                .clone()
                .unwrap_or_else(|| format!("rpc{rpc_id}"));
            let mut out = blank(InputKind::Elicitation, request.turn_id.clone(), &key);
            out.message = request.message;
            out.server = request.server_name;
            out.schema = request.requested_schema;
            out.url = request.url;
            Some(out)
        }
        ServerRequest::PermissionsRequestApproval(request) => {
            let call = request
                .item_id
                .clone()
                .unwrap_or_else(|| rpc_id.to_string());
            let mut out = blank(InputKind::Permissions, request.turn_id.clone(), &call);
            out.item_id = request.turn_id.as_deref().map(|turn| item_id(turn, &call));
            out.message = request.reason;
            out.permissions = request.permissions;
            Some(out)
        }
        _ => None,
    }
}

/// A plan item completed in plan mode → the `plan` request cohost offers for it: approving it
/// switches the session to a mode and asks the agent to implement it; rejecting it sends the
/// feedback. It belongs to no turn (the turn that planned has ended); the next turn makes it moot.
pub fn plan_request(turn_id: &str, plan_item: &str, text: &str) -> InputRequested {
    InputRequested {
        request_id: input_request_id(turn_id, "plan", InputKind::Plan),
        kind: InputKind::Plan,
        turn_id: None,
        item_id: Some(plan_item.to_string()),
        questions: Vec::new(),
        plan: Some(text.to_string()),
        message: None,
        server: None,
        schema: None,
        url: None,
        permissions: None,
        decisions: InputKind::Plan
            .decisions()
            .iter()
            .map(|d| d.to_string())
            .collect(),
    }
}

/// The decisions cohost relays to codex.
pub const DECISIONS: [&str; 4] = ["accept", "acceptForSession", "decline", "cancel"];

/// A snapshot of one turn (as JSON) → its events. See [`backfill`].
pub fn backfill_turn(turn: &Value) -> Vec<EventKind> {
    wire::Turn::deserialize(turn)
        .map(|turn| backfill(&turn))
        .unwrap_or_default()
}

/// A snapshot of one turn (from `thread/resume` or `thread/fork`) → the events that describe it,
/// in order: turn started, each item completed, turn completed (when it ended).
pub fn backfill(turn: &wire::Turn) -> Vec<EventKind> {
    let Some(turn_id) = turn.id.clone() else {
        return Vec::new();
    };
    let mut events = vec![EventKind::TurnStarted(crate::protocol::TurnStarted {
        turn_id: turn_id.clone(),
        source: crate::protocol::TurnSource::Other,
    })];
    for raw in &turn.items {
        if let Some(item) = thread_item(&turn_id, raw) {
            events.push(EventKind::ItemCompleted(ItemEvent {
                turn_id: turn_id.clone(),
                item,
            }));
        }
    }
    if let Some(done) = completed_turn(turn) {
        events.push(EventKind::TurnCompleted(done));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Literal shapes as codex 0.169 writes them (turns, tool items, approvals, goals; docs/peers.md).

    #[test]
    fn plan_deltas_stream_and_plan_updates_are_stored() {
        let delta = json!({"threadId":"th","turnId":"tu","itemId":"tu-plan","delta":"1. Write"});
        let out = notification("item/plan/delta", &delta);
        assert!(
            matches!(&out[..], [Normalized::Live(EventKind::ItemDelta(d))] if d.kind == "plan" && d.item_id == "tu:tu-plan" && d.delta == "1. Write"),
            "{out:?}"
        );
        let updated = json!({"threadId":"th","turnId":"tu","explanation":null,"plan":[{"step":"Write","status":"completed"},{"step":"Say hi","status":"inProgress"},"junk"]});
        assert_eq!(
            notification("turn/plan/updated", &updated),
            vec![Normalized::Store(EventKind::TurnPlanUpdated(TurnPlan {
                turn_id: "tu".into(),
                explanation: None,
                plan: vec![
                    PlanStep {
                        step: "Write".into(),
                        status: "completed".into()
                    },
                    PlanStep {
                        step: "Say hi".into(),
                        status: "inProgress".into()
                    },
                ],
            }))]
        );
    }

    #[test]
    fn agent_message_completed_and_delta() {
        let completed = json!({"item":{"type":"agentMessage","moderation":null,"id":"msg_edb77357f05a","text":"Hello from the mock model!","phase":null},"threadId":"th","turnId":"tu","completedAtMs":1});
        let out = notification("item/completed", &completed);
        assert_eq!(
            out,
            vec![Normalized::Store(EventKind::ItemCompleted(ItemEvent {
                turn_id: "tu".into(),
                item: Item::AgentMessage {
                    id: "tu:msg_edb77357f05a".into(),
                    text: "Hello from the mock model!".into(),
                    interrupted: false,
                }
            }))]
        );
        let delta =
            json!({"threadId":"th","turnId":"tu","itemId":"msg_edb77357f05a","delta":"Hello "});
        let out = notification("item/agentMessage/delta", &delta);
        assert!(
            matches!(&out[0], Normalized::Live(EventKind::ItemDelta(d)) if d.delta == "Hello " && d.item_id == "tu:msg_edb77357f05a")
        );
        // Message starts are not stored: the completion carries the text.
        let started = json!({"item":{"type":"agentMessage","id":"m","text":""},"threadId":"th","turnId":"tu"});
        assert!(notification("item/started", &started).is_empty());
    }

    #[test]
    fn user_message_text_joins_content() {
        let completed = json!({"item":{"type":"userMessage","id":"u1","clientId":null,"content":[{"type":"text","text":"Say hello","text_elements":[]}]},"threadId":"th","turnId":"tu"});
        let out = notification("item/completed", &completed);
        assert!(
            matches!(&out[0], Normalized::Store(EventKind::ItemCompleted(ItemEvent { item: Item::UserMessage { text, .. }, .. })) if text == "Say hello")
        );
    }

    #[test]
    fn command_execution_started_and_completed() {
        let item = json!({"type":"commandExecution","id":"call_2","command":"/bin/bash -lc 'echo hi'","cwd":"/w","status":"completed","aggregatedOutput":"hi\n","exitCode":0,"durationMs":3});
        let started = notification(
            "item/started",
            &json!({"item": item, "turnId": "tu", "threadId": "th"}),
        );
        assert_eq!(started.len(), 1);
        let done = notification(
            "item/completed",
            &json!({"item": item, "turnId": "tu", "threadId": "th"}),
        );
        match &done[0] {
            Normalized::Store(EventKind::ItemCompleted(ItemEvent {
                item:
                    Item::Command {
                        exit_code,
                        output,
                        status,
                        ..
                    },
                ..
            })) => {
                assert_eq!(*exit_code, Some(0));
                assert_eq!(output.as_deref(), Some("hi\n"));
                assert_eq!(status, "completed");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn turn_completed_statuses() {
        let turn = json!({"id":"tu","status":"interrupted","error":null,"durationMs":325});
        assert_eq!(
            turn_completed(&turn).unwrap().status,
            TurnStatus::Interrupted
        );
        let turn = json!({"id":"tu","status":"failed","error":{"message":"boom","codexErrorInfo":"other"}});
        assert_eq!(
            turn_completed(&turn).unwrap().error.as_deref(),
            Some("boom")
        );
        assert!(turn_completed(&json!({"id":"tu","status":"inProgress"})).is_none());
    }

    #[test]
    fn command_approval_request() {
        let params = json!({"kind":"command","threadId":"th","turnId":"tu","itemId":"call_4","command":"/bin/bash -lc 'touch approved.txt'","cwd":"/w","availableDecisions":["accept","cancel"]});
        let approval = approval_request("item/commandExecution/requestApproval", &params).unwrap();
        assert_eq!(approval.approval_id, "ap:tu:call_4:command");
        assert_eq!(approval.item_id.as_deref(), Some("tu:call_4"));
        assert_eq!(
            approval.command.as_deref(),
            Some("/bin/bash -lc 'touch approved.txt'")
        );
        assert!(approval_request("account/chatgptAuthTokens/refresh", &params).is_none());
    }

    #[test]
    fn usage_goal_and_resolved() {
        let usage = json!({"threadId":"th","turnId":"tu","tokenUsage":{"total":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"outputTokens":34,"reasoningOutputTokens":0},"last":{"totalTokens":1234,"inputTokens":1200,"cachedInputTokens":1000,"outputTokens":34,"reasoningOutputTokens":0},"modelContextWindow":258400}});
        match &notification("thread/tokenUsage/updated", &usage)[0] {
            Normalized::Store(EventKind::Usage(u)) => {
                assert_eq!(u.total.total, 1234);
                assert_eq!(u.context_window, Some(258400));
            }
            other => panic!("{other:?}"),
        }
        let goal =
            json!({"threadId":"th","turnId":null,"goal":{"objective":"x","status":"paused"}});
        assert!(matches!(
            &notification("thread/goal/updated", &goal)[0],
            Normalized::Store(EventKind::GoalUpdated(_))
        ));
        assert_eq!(
            notification(
                "serverRequest/resolved",
                &json!({"threadId":"th","requestId":0})
            ),
            vec![Normalized::RequestResolved {
                request_id: RequestId::Int(0)
            }]
        );
    }

    #[test]
    fn backfill_turn_yields_start_items_and_completion() {
        let turn = json!({"id":"tu","status":"completed","items":[
            {"type":"userMessage","id":"u1","content":[{"type":"text","text":"hi"}]},
            {"type":"agentMessage","id":"m1","text":"hello"}
        ]});
        let events = backfill_turn(&turn);
        let types: Vec<_> = events.iter().map(|e| e.type_name()).collect();
        assert_eq!(
            types,
            [
                "turn.started",
                "item.completed",
                "item.completed",
                "turn.completed"
            ]
        );
    }
}
