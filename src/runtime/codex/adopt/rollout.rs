//! An adopted codex TUI's rollout as session events: the lines codex 0.169+ writes
//! (`event_msg/task_started`, `item_completed`, `task_complete`, `turn_aborted`; see
//! ../shared/reference/watchers-observed.md) become `turn.started`, `item.completed` and
//! `turn.completed` under codex's own turn and item ids, so reading a line twice (after a daemon
//! restart) gives the same events, which the core refuses as duplicates.
//!
//! Pure: it takes lines and gives events.

use std::collections::VecDeque;

use serde_json::Value;

use crate::protocol::{
    EventKind, Item, ItemEvent, TurnCompleted, TurnSource, TurnStarted, TurnStatus,
};

/// Follows one rollout.
#[derive(Debug, Default)]
pub struct RolloutEvents {
    /// The turn running now, by codex's turn id.
    turn: Option<String>,
    /// Prompts cohost pasted whose turn has not started yet (their turns are `api`).
    pasted: VecDeque<String>,
}

fn texts(content: Option<&Value>) -> String {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

impl RolloutEvents {
    /// A prompt cohost pasted: the next turn that starts is the API's.
    pub fn pasted(&mut self, text: &str) {
        self.pasted.push_back(text.to_string());
    }

    /// The turn running now, if one is.
    pub fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// The events one rollout line gives.
    pub fn line(&mut self, line: &[u8]) -> Vec<EventKind> {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            return Vec::new();
        };
        if value.get("type").and_then(Value::as_str) != Some("event_msg") {
            return Vec::new();
        }
        let Some(payload) = value.get("payload") else {
            return Vec::new();
        };
        let turn_id = payload
            .get("turn_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.turn.clone());
        let Some(turn_id) = turn_id else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match payload.get("type").and_then(Value::as_str) {
            Some("task_started") => {
                let source = if self.pasted.pop_front().is_some() {
                    TurnSource::Api
                } else {
                    TurnSource::Terminal
                };
                self.turn = Some(turn_id.clone());
                out.push(EventKind::TurnStarted(TurnStarted { turn_id, source }));
            }
            Some("item_completed") => {
                let Some(item) = payload.get("item") else {
                    return out;
                };
                let id = item
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if id.is_empty() {
                    return out;
                }
                let item = match item.get("type").and_then(Value::as_str) {
                    Some("UserMessage") => Item::UserMessage {
                        id,
                        text: texts(item.get("content")),
                    },
                    Some("AgentMessage") => Item::AgentMessage {
                        id,
                        text: texts(item.get("content")),
                        interrupted: false,
                    },
                    Some("Reasoning") => Item::Reasoning {
                        id,
                        summary: item
                            .get("summary_text")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|s| s.as_str().map(str::to_string))
                            .collect(),
                    },
                    _ => return out,
                };
                out.push(EventKind::ItemCompleted(ItemEvent { turn_id, item }));
            }
            Some("task_complete") => {
                let error = payload.get("error").filter(|e| !e.is_null()).map(|e| {
                    e.get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), str::to_string)
                });
                out.push(self.end(TurnCompleted {
                    turn_id,
                    status: if error.is_some() {
                        TurnStatus::Failed
                    } else {
                        TurnStatus::Completed
                    },
                    error,
                    duration_ms: payload.get("duration_ms").and_then(Value::as_u64),
                    lost: false,
                }));
            }
            Some("turn_aborted") => {
                out.push(self.end(TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: payload.get("duration_ms").and_then(Value::as_u64),
                    lost: false,
                }));
            }
            _ => {}
        }
        out
    }

    fn end(&mut self, done: TurnCompleted) -> EventKind {
        if self.turn.as_deref() == Some(done.turn_id.as_str()) {
            self.turn = None;
        }
        EventKind::TurnCompleted(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &mut RolloutEvents, name: &str) -> Vec<EventKind> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/codex")
            .join(name);
        let bytes = std::fs::read(&path).unwrap();
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .flat_map(|line| events.line(line))
            .collect()
    }

    #[test]
    fn turns_prompts_and_endings_under_codexs_ids() {
        let mut events = RolloutEvents::default();
        events.pasted("Run echo hi please");
        let out = run(&mut events, "rollout.jsonl");
        let started: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                EventKind::TurnStarted(t) => Some((t.turn_id.as_str(), t.source)),
                _ => None,
            })
            .collect();
        assert_eq!(started[0], ("t1", TurnSource::Api));
        assert!(started[1..].iter().all(|(_, s)| *s == TurnSource::Terminal));
        let ended: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                EventKind::TurnCompleted(t) => Some((t.turn_id.as_str(), t.status)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ended,
            vec![
                ("t1", TurnStatus::Completed),
                ("t2", TurnStatus::Completed),
                ("t3", TurnStatus::Interrupted),
                ("t4", TurnStatus::Failed),
            ]
        );
        assert!(out.iter().any(|e| matches!(e,
            EventKind::ItemCompleted(ItemEvent { turn_id, item: Item::UserMessage { id, text } })
                if turn_id == "t1" && id == "u1" && text == "Run echo hi please")));
        assert_eq!(events.turn(), None);
        // The same lines again give the same events (the core refuses the repeats).
        let again = run(&mut RolloutEvents::default(), "rollout.jsonl");
        assert_eq!(again.len(), out.len());
    }

    #[test]
    fn an_agent_message_as_codex_writes_it() {
        let line = br#"{"timestamp":"2026-11-29T13:08:38.647Z","ordinal":11,"type":"event_msg","payload":{"type":"item_completed","thread_id":"th","turn_id":"tu","item":{"type":"AgentMessage","id":"msg_1","content":[{"type":"Text","text":"Hello from the mock model!"}]}}}"#;
        let out = RolloutEvents::default().line(line);
        assert!(
            matches!(&out[..], [EventKind::ItemCompleted(ItemEvent { item: Item::AgentMessage { id, text, .. }, .. })]
            if id == "msg_1" && text == "Hello from the mock model!")
        );
    }
}
