//! codex wire → cohost events: pure functions from app-server notifications, server requests and
//! thread snapshots to [`EventKind`]s.
//!
//! Only this module (with the rest of `codex/`) knows codex's JSON shapes. Ids are derived from
//! codex's own turn and item ids, so the same item seen live and again in a backfill after a
//! resume gets the same cohost id and is stored once.

use serde_json::Value;

use crate::protocol::{
    ApprovalRequested, ErrorEvent, EventKind, FileChange, GoalUpdated, Item, ItemDelta, ItemEvent,
    TokenCounts, TurnCompleted, TurnStatus, Usage,
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

/// The thread a notification is about, if it names one.
pub fn thread_id(params: &Value) -> Option<&str> {
    params.get("threadId").and_then(Value::as_str)
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
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
    RequestResolved { request_id: Value },
    /// The goal was cleared.
    GoalCleared,
}

/// Normalizes one notification. Returns nothing for notifications cohost does not record.
pub fn notification(method: &str, params: &Value) -> Vec<Normalized> {
    let turn_of = |params: &Value| str_field(params, "turnId").unwrap_or_default();
    match method {
        "turn/started" => params
            .get("turn")
            .and_then(|turn| str_field(turn, "id"))
            .map(|turn_id| vec![Normalized::TurnStarted { turn_id }])
            .unwrap_or_default(),
        "turn/completed" => params
            .get("turn")
            .and_then(turn_completed)
            .map(|done| vec![Normalized::Store(EventKind::TurnCompleted(done))])
            .unwrap_or_default(),
        "item/started" => {
            let turn_id = turn_of(params);
            match params
                .get("item")
                .and_then(|item| self::item(&turn_id, item))
            {
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
        "item/completed" => {
            let turn_id = turn_of(params);
            params
                .get("item")
                .and_then(|item| self::item(&turn_id, item))
                .map(|item| {
                    vec![Normalized::Store(EventKind::ItemCompleted(ItemEvent {
                        turn_id,
                        item,
                    }))]
                })
                .unwrap_or_default()
        }
        "item/agentMessage/delta" => delta(params, "agentMessage"),
        "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
            delta(params, "reasoning")
        }
        "item/commandExecution/outputDelta" => delta(params, "commandOutput"),
        "thread/tokenUsage/updated" => params
            .get("tokenUsage")
            .map(|usage| {
                vec![Normalized::Store(EventKind::Usage(Usage {
                    id: None,
                    turn_id: turn_of(params),
                    total: counts(usage.get("total")),
                    last: counts(usage.get("last")),
                    context_window: usage.get("modelContextWindow").and_then(Value::as_u64),
                }))]
            })
            .unwrap_or_default(),
        "error" => {
            let error = params.get("error").cloned().unwrap_or(Value::Null);
            vec![Normalized::Store(EventKind::Error(ErrorEvent {
                id: None,
                turn_id: str_field(params, "turnId"),
                message: str_field(&error, "message")
                    .unwrap_or_else(|| "codex reported an error".into()),
                code: str_field(&error, "codexErrorInfo"),
            }))]
        }
        "thread/goal/updated" => params
            .get("goal")
            .filter(|goal| !goal.is_null())
            .map(|goal| {
                vec![Normalized::Store(EventKind::GoalUpdated(GoalUpdated {
                    goal: goal.clone(),
                }))]
            })
            .unwrap_or_default(),
        "thread/goal/cleared" => vec![Normalized::GoalCleared],
        "serverRequest/resolved" => params
            .get("requestId")
            .map(|id| {
                vec![Normalized::RequestResolved {
                    request_id: id.clone(),
                }]
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn delta(params: &Value, kind: &str) -> Vec<Normalized> {
    let turn_id = str_field(params, "turnId").unwrap_or_default();
    let (Some(codex_item), Some(delta)) = (str_field(params, "itemId"), str_field(params, "delta"))
    else {
        return Vec::new();
    };
    vec![Normalized::Live(EventKind::ItemDelta(ItemDelta {
        item_id: item_id(&turn_id, &codex_item),
        turn_id,
        kind: kind.to_string(),
        delta,
    }))]
}

fn counts(value: Option<&Value>) -> TokenCounts {
    let get = |key: &str| {
        value
            .and_then(|v| v.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    TokenCounts {
        input: get("inputTokens"),
        cached_input: get("cachedInputTokens"),
        output: get("outputTokens"),
        reasoning_output: get("reasoningOutputTokens"),
        total: get("totalTokens"),
    }
}

/// `turn/completed`'s turn → `turn.completed`, or `None` while it is still in progress.
pub fn turn_completed(turn: &Value) -> Option<TurnCompleted> {
    let status = match turn.get("status").and_then(Value::as_str)? {
        "completed" => TurnStatus::Completed,
        "interrupted" => TurnStatus::Interrupted,
        "failed" => TurnStatus::Failed,
        _ => return None,
    };
    Some(TurnCompleted {
        turn_id: str_field(turn, "id")?,
        status,
        error: turn
            .get("error")
            .and_then(|error| error.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string),
        duration_ms: turn.get("durationMs").and_then(Value::as_u64),
        lost: false,
    })
}

fn text_of_content(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

/// One codex `ThreadItem` → our [`Item`].
pub fn item(turn_id: &str, item: &Value) -> Option<Item> {
    let codex_id = str_field(item, "id")?;
    let id = item_id(turn_id, &codex_id);
    let kind = item.get("type").and_then(Value::as_str)?;
    Some(match kind {
        "userMessage" => Item::UserMessage {
            id,
            text: text_of_content(item.get("content")),
        },
        "agentMessage" => Item::AgentMessage {
            id,
            text: str_field(item, "text").unwrap_or_default(),
        },
        "reasoning" => Item::Reasoning {
            id,
            summary: item
                .get("summary")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        },
        "commandExecution" => Item::Command {
            id,
            command: str_field(item, "command").unwrap_or_default(),
            cwd: str_field(item, "cwd"),
            status: str_field(item, "status").unwrap_or_else(|| "inProgress".into()),
            exit_code: item.get("exitCode").and_then(Value::as_i64),
            output: str_field(item, "aggregatedOutput"),
            duration_ms: item.get("durationMs").and_then(Value::as_u64),
        },
        "fileChange" => Item::FileChange {
            id,
            changes: item
                .get("changes")
                .and_then(Value::as_array)
                .map(|changes| {
                    changes
                        .iter()
                        .map(|change| FileChange {
                            path: str_field(change, "path").unwrap_or_default(),
                            kind: change
                                .get("kind")
                                .and_then(|kind| kind.get("type").or(Some(kind)))
                                .and_then(Value::as_str)
                                .unwrap_or("update")
                                .to_string(),
                            diff: str_field(change, "diff"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            status: str_field(item, "status").unwrap_or_else(|| "inProgress".into()),
        },
        "mcpToolCall" | "dynamicToolCall" | "webSearch" | "imageView" | "collabAgentToolCall" => {
            Item::Tool {
                id,
                name: str_field(item, "tool")
                    .or_else(|| str_field(item, "query").map(|_| "web_search".to_string()))
                    .unwrap_or_else(|| kind.to_string()),
                input: item.get("arguments").cloned(),
                output: item
                    .get("result")
                    .map(|r| r.to_string())
                    .or_else(|| str_field(item, "error")),
                status: str_field(item, "status").unwrap_or_else(|| "completed".into()),
            }
        }
        other => Item::Other {
            id,
            kind: other.to_string(),
        },
    })
}

/// A server→client request that asks for a decision → `approval.requested`, or `None` for
/// requests cohost does not relay (they are refused so codex never waits on them).
pub fn approval_request(method: &str, params: &Value) -> Option<ApprovalRequested> {
    let kind = match method {
        "item/commandExecution/requestApproval" | "execCommandApproval" => "command",
        "item/fileChange/requestApproval" | "applyPatchApproval" => "fileChange",
        "item/permissions/requestApproval" => "permissions",
        _ => return None,
    };
    let turn_id = str_field(params, "turnId").unwrap_or_default();
    let codex_item = str_field(params, "itemId")
        .or_else(|| str_field(params, "callId"))
        .unwrap_or_default();
    Some(ApprovalRequested {
        approval_id: approval_id(&turn_id, &codex_item, kind),
        kind: kind.to_string(),
        item_id: (!codex_item.is_empty()).then(|| item_id(&turn_id, &codex_item)),
        turn_id,
        command: str_field(params, "command"),
        cwd: str_field(params, "cwd"),
        reason: str_field(params, "reason"),
        decisions: DECISIONS.iter().map(|d| d.to_string()).collect(),
    })
}

/// The decisions cohost relays to codex.
pub const DECISIONS: [&str; 4] = ["accept", "acceptForSession", "decline", "cancel"];

/// A snapshot of one turn (from `thread/resume` or `thread/fork`) → the events that describe it,
/// in order: turn started, each item completed, turn completed (when it ended).
pub fn backfill_turn(turn: &Value) -> Vec<EventKind> {
    let Some(turn_id) = str_field(turn, "id") else {
        return Vec::new();
    };
    let mut events = vec![EventKind::TurnStarted(crate::protocol::TurnStarted {
        turn_id: turn_id.clone(),
        source: crate::protocol::TurnSource::Other,
    })];
    if let Some(items) = turn.get("items").and_then(Value::as_array) {
        for raw in items {
            if let Some(item) = item(&turn_id, raw) {
                events.push(EventKind::ItemCompleted(ItemEvent {
                    turn_id: turn_id.clone(),
                    item,
                }));
            }
        }
    }
    if let Some(done) = turn_completed(turn) {
        events.push(EventKind::TurnCompleted(done));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Literal shapes from shared/reference/codex-app-server-observed.md §6, §6.1, §7.1, §12.

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
                    text: "Hello from the mock model!".into()
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
                request_id: json!(0)
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
