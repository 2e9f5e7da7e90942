//! An adopted Pi TUI's session file as session events: the `message` entries Pi 0.73.1 and
//! 1.6.0 append whole (read as the `formats::pi` types; see
//! ../shared/reference/watchers-observed.md §4) become `turn.started`, `item.started`,
//! `item.completed` and `turn.completed`, named by Pi's own entry ids, so reading an entry twice
//! (after a daemon restart) gives the same events, which the core refuses as duplicates.
//!
//! A turn starts at a `user` message while none runs (its id is the turn's); a `user` message
//! while one runs (a steer typed into the running TUI) is an item of that turn. It ends at an
//! assistant message whose `stopReason` is final: `stop`/`length` completed, `error` failed,
//! `aborted` interrupted (Escape); `toolUse` goes on. An assistant text is an `agentMessage`
//! (`<entry id>-<block index>`), a tool call an item under Pi's `toolCall` id, started with the
//! assistant message that asks for it and completed by its `toolResult` — a `command` for
//! `bash`, as a hosted Pi session's, else a `tool`.
//!
//! Pure: it takes lines and gives events.

use std::collections::{BTreeMap, VecDeque};

use crate::formats::pi::{AgentMessage, MessageContent, Role, SessionEntry, StopReason};
use crate::protocol::{
    EventKind, Item, ItemEvent, TurnCompleted, TurnSource, TurnStarted, TurnStatus,
};
use crate::runtime::common::hosted::interrupted;
use crate::runtime::pi::normalize::{tool_done, tool_started};

/// Follows one session file.
#[derive(Debug, Default)]
pub struct SessionEvents {
    /// The turn running now (the id of the `user` entry that opened it).
    turn: Option<String>,
    /// The tool calls asked for and not answered yet: their items, in progress.
    calls: BTreeMap<String, Item>,
    /// Prompts cohost pasted whose turn has not started yet (their turns are `api`).
    pasted: VecDeque<String>,
    /// Pasted prompts Pi wrote as the `user` entry opening a turn, with that turn's id, until
    /// the inject that pasted them takes them.
    confirmed: Vec<(String, String)>,
}

/// Whitespace squeezed out: Pi keeps a pasted prompt's text, but a comparison should not hang
/// on a trailing newline.
pub fn squeezed(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

fn text_of(message: &AgentMessage) -> String {
    message
        .content
        .as_ref()
        .map(MessageContent::text)
        .unwrap_or_default()
}

impl SessionEvents {
    /// A prompt cohost pasted: the next turn that starts with this text is the API's.
    pub fn pasted(&mut self, text: &str) {
        self.pasted.push_back(squeezed(text));
    }

    /// A paste that never became a prompt (refused, never shown): forgotten.
    pub fn unpasted(&mut self, text: &str) {
        let text = squeezed(text);
        if let Some(at) = self.pasted.iter().position(|p| *p == text) {
            self.pasted.remove(at);
        }
    }

    /// The turn a pasted prompt (`text`) opened, once Pi wrote it; taken once.
    pub fn confirmed(&mut self, text: &str) -> Option<String> {
        let text = squeezed(text);
        let at = self.confirmed.iter().position(|(t, _)| *t == text)?;
        Some(self.confirmed.remove(at).1)
    }

    /// The turn running now, if one is.
    pub fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// Whether a tool call is running now.
    pub fn tool_running(&self) -> bool {
        !self.calls.is_empty()
    }

    /// The events one session-file line gives.
    pub fn line(&mut self, line: &[u8]) -> Vec<EventKind> {
        let Some(SessionEntry::Message(entry)) = SessionEntry::from_slice(line) else {
            return Vec::new();
        };
        let (Some(id), Some(message)) = (entry.id, entry.message) else {
            return Vec::new();
        };
        match &message.role {
            Some(Role::User) => self.user(id, &message),
            Some(Role::Assistant) => self.assistant(&id, &message),
            Some(Role::ToolResult) => self.tool_result(&message),
            _ => Vec::new(),
        }
    }

    fn user(&mut self, id: String, message: &AgentMessage) -> Vec<EventKind> {
        let text = text_of(message);
        let mut out = Vec::new();
        let turn_id = match &self.turn {
            Some(turn) => turn.clone(),
            None => {
                let wanted = squeezed(&text);
                let source = match self.pasted.iter().position(|p| *p == wanted) {
                    Some(at) => {
                        self.pasted.remove(at);
                        self.confirmed.push((wanted, id.clone()));
                        TurnSource::Api
                    }
                    None => TurnSource::Terminal,
                };
                self.turn = Some(id.clone());
                out.push(EventKind::TurnStarted(TurnStarted {
                    turn_id: id.clone(),
                    source,
                }));
                id.clone()
            }
        };
        out.push(EventKind::ItemCompleted(ItemEvent {
            turn_id,
            item: Item::UserMessage { id, text },
        }));
        out
    }

    fn assistant(&mut self, id: &str, message: &AgentMessage) -> Vec<EventKind> {
        let Some(turn_id) = self.turn.clone() else {
            // A reply whose prompt came before the adoption's start: nothing opens for it.
            return Vec::new();
        };
        let stop = message.stop_reason.clone();
        let cut = matches!(stop, Some(StopReason::Aborted | StopReason::Error));
        let mut out = Vec::new();
        if let Some(MessageContent::Blocks(blocks)) = &message.content {
            for (index, block) in blocks.iter().enumerate() {
                match block.kind.as_deref() {
                    Some("text") => {
                        let text = block.text.clone().unwrap_or_default();
                        if text.is_empty() {
                            continue;
                        }
                        out.push(EventKind::ItemCompleted(ItemEvent {
                            turn_id: turn_id.clone(),
                            item: Item::AgentMessage {
                                id: format!("{id}-{index}"),
                                text,
                                interrupted: cut,
                            },
                        }));
                    }
                    Some("toolCall") => {
                        let Some(call) = block.id.clone() else {
                            continue;
                        };
                        let item = tool_started(
                            &call,
                            block.name.as_deref().unwrap_or_default(),
                            block.arguments.clone(),
                        );
                        self.calls.insert(call, item.clone());
                        out.push(EventKind::ItemStarted(ItemEvent {
                            turn_id: turn_id.clone(),
                            item,
                        }));
                    }
                    _ => {}
                }
            }
        }
        let status = match stop {
            Some(StopReason::ToolUse) => return out,
            Some(StopReason::Stop | StopReason::Length) => TurnStatus::Completed,
            Some(StopReason::Error) => TurnStatus::Failed,
            Some(StopReason::Aborted) => TurnStatus::Interrupted,
            // A stop reason cohost does not know (or none): the turn is not taken as ended.
            _ => return out,
        };
        out.extend(
            self.end(TurnCompleted {
                turn_id,
                status,
                error: message
                    .error_message
                    .clone()
                    .filter(|_| status == TurnStatus::Failed),
                duration_ms: None,
                lost: false,
            }),
        );
        out
    }

    fn tool_result(&mut self, message: &AgentMessage) -> Vec<EventKind> {
        let (Some(turn_id), Some(call)) = (self.turn.clone(), message.tool_call_id.as_deref())
        else {
            return Vec::new();
        };
        let item = self.calls.remove(call).unwrap_or_else(|| {
            tool_started(call, message.tool_name.as_deref().unwrap_or_default(), None)
        });
        let item = tool_done(
            item,
            text_of(message),
            message.is_error.unwrap_or(false),
            false,
        );
        vec![EventKind::ItemCompleted(ItemEvent { turn_id, item })]
    }

    /// The turn ends: its tool calls still open end `interrupted` first.
    fn end(&mut self, done: TurnCompleted) -> Vec<EventKind> {
        let mut out: Vec<EventKind> = std::mem::take(&mut self.calls)
            .into_values()
            .map(|item| {
                EventKind::ItemCompleted(ItemEvent {
                    turn_id: done.turn_id.clone(),
                    item: interrupted(item),
                })
            })
            .collect();
        self.turn = None;
        out.push(EventKind::TurnCompleted(done));
        out
    }
}

/// Where to follow a session file from at adoption: its end, or the start of the line that
/// opened a turn still running (so the running turn is followed from its prompt); and whether
/// one runs. Also where a restart resumes: the checkpoint is kept at the open turn's start, so
/// a restart reads the turn again (the core drops what it stored already) and knows its calls.
pub fn start_offset(bytes: &[u8]) -> (u64, bool) {
    let mut events = SessionEvents::default();
    let mut offset = 0u64;
    let mut open_at = None;
    let mut complete = 0u64;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let start = offset;
        offset += line.len() as u64;
        if !line.ends_with(b"\n") {
            break;
        }
        complete = offset;
        for event in events.line(line) {
            match event {
                EventKind::TurnStarted(_) => open_at = Some(start),
                EventKind::TurnCompleted(_) => open_at = None,
                _ => {}
            }
        }
    }
    (open_at.unwrap_or(complete), open_at.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &mut SessionEvents, name: &str) -> Vec<EventKind> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/pi")
            .join(name);
        let bytes = std::fs::read(&path).unwrap();
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .flat_map(|line| events.line(line))
            .collect()
    }

    fn ends(out: &[EventKind]) -> Vec<(String, TurnStatus)> {
        out.iter()
            .filter_map(|e| match e {
                EventKind::TurnCompleted(t) => Some((t.turn_id.clone(), t.status)),
                _ => None,
            })
            .collect()
    }

    /// Both releases' recorded sessions: a tool turn, an aborted one, a failed one, under Pi's
    /// entry ids; the same lines again give the same events.
    #[test]
    fn turns_items_and_endings_of_both_releases_under_pis_ids() {
        for (name, first, tool_result, long, failed) in [
            (
                "session.jsonl",
                "82bd39b9",
                "toolu_mock_0017",
                "12f3ab13",
                "f0701e80",
            ),
            (
                "session-1.6.0.jsonl",
                "6a69bf46",
                "toolu_mock_0003",
                "a951ecd0",
                "7326e2ca",
            ),
        ] {
            let mut events = SessionEvents::default();
            events.pasted("Run echo hi please\n");
            let out = run(&mut events, name);
            assert_eq!(
                events.confirmed("Run echo hi please"),
                Some(first.to_string())
            );
            assert_eq!(events.confirmed("Run echo hi please"), None);
            assert_eq!(
                ends(&out),
                vec![
                    (first.to_string(), TurnStatus::Completed),
                    (long.to_string(), TurnStatus::Interrupted),
                    (failed.to_string(), TurnStatus::Failed),
                ],
                "{name}"
            );
            let sources: Vec<_> = out
                .iter()
                .filter_map(|e| match e {
                    EventKind::TurnStarted(t) => Some(t.source),
                    _ => None,
                })
                .collect();
            assert_eq!(
                sources,
                [TurnSource::Api, TurnSource::Terminal, TurnSource::Terminal],
                "{name}"
            );
            let command = out.iter().find_map(|e| match e {
                EventKind::ItemCompleted(ItemEvent {
                    item:
                        Item::Command {
                            id,
                            command,
                            status,
                            output,
                            exit_code,
                            ..
                        },
                    turn_id,
                }) => Some((
                    turn_id.clone(),
                    id.clone(),
                    command.clone(),
                    status.clone(),
                    output.clone(),
                    *exit_code,
                )),
                _ => None,
            });
            assert_eq!(
                command,
                Some((
                    first.to_string(),
                    tool_result.to_string(),
                    "echo hi".to_string(),
                    "completed".to_string(),
                    Some("hi\n".to_string()),
                    Some(0)
                )),
                "{name}"
            );
            assert!(
                out.iter().any(|e| matches!(e, EventKind::ItemStarted(ItemEvent { item: Item::Command { id, .. }, .. }) if id == tool_result)),
                "{name}"
            );
            assert!(
                out.iter().any(|e| matches!(e, EventKind::ItemCompleted(ItemEvent { item: Item::AgentMessage { text, interrupted: true, .. }, turn_id }) if turn_id == long && !text.is_empty())),
                "{name}: the aborted reply's partial text is interrupted"
            );
            assert!(
                out.iter().any(|e| matches!(e, EventKind::ItemCompleted(ItemEvent { item: Item::AgentMessage { text, interrupted: false, .. }, .. }) if text == "Done.")),
                "{name}"
            );
            let failure = out.iter().find_map(|e| match e {
                EventKind::TurnCompleted(t) if t.status == TurnStatus::Failed => t.error.clone(),
                _ => None,
            });
            assert!(
                failure.is_some_and(|e| e.contains("mock failure")),
                "{name}"
            );
            assert_eq!(events.turn(), None);
            assert!(!events.tool_running());
            let again = run(&mut SessionEvents::default(), name);
            assert_eq!(again.len(), out.len(), "{name}");
        }
    }

    #[test]
    fn a_running_turn_is_followed_from_its_prompt_and_a_steer_is_its_item() {
        let user = |id: &str, text: &str| {
            format!(
                "{{\"type\":\"message\",\"id\":\"{id}\",\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
            )
        };
        let done = "{\"type\":\"message\",\"id\":\"a1\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"stopReason\":\"stop\"}}\n";
        let call = "{\"type\":\"message\",\"id\":\"a2\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"read\",\"arguments\":{\"path\":\"x\"}}],\"stopReason\":\"toolUse\"}}\n";
        let header = "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n";
        let idle = format!("{header}{}{done}", user("u1", "hi"));
        assert_eq!(start_offset(idle.as_bytes()), (idle.len() as u64, false));
        let running = format!("{idle}{}{call}", user("u2", "go"));
        assert_eq!(start_offset(running.as_bytes()), (idle.len() as u64, true));
        let partial = format!("{idle}{{\"type\"");
        assert_eq!(start_offset(partial.as_bytes()), (idle.len() as u64, false));

        let mut events = SessionEvents::default();
        let out: Vec<EventKind> = running.as_bytes()[idle.len()..]
            .split(|b| *b == b'\n')
            .chain(std::iter::once(user("u3", "steer").trim_end().as_bytes()))
            .filter(|l| !l.is_empty())
            .flat_map(|l| events.line(l))
            .collect();
        assert_eq!(events.turn(), Some("u2"));
        assert!(events.tool_running());
        assert!(
            matches!(out.last(), Some(EventKind::ItemCompleted(ItemEvent { turn_id, item: Item::UserMessage { id, .. } })) if turn_id == "u2" && id == "u3")
        );
        // Escape while the tool ran: the call ends interrupted with the turn.
        let aborted = b"{\"type\":\"message\",\"id\":\"a3\",\"message\":{\"role\":\"assistant\",\"content\":[],\"stopReason\":\"aborted\",\"errorMessage\":\"Operation aborted\"}}";
        let out = events.line(aborted);
        assert!(
            matches!(&out[..], [
            EventKind::ItemCompleted(ItemEvent { item: Item::Tool { id, status, .. }, .. }),
            EventKind::TurnCompleted(TurnCompleted { turn_id, status: TurnStatus::Interrupted, error: None, .. }),
        ] if id == "c1" && status == "interrupted" && turn_id == "u2"),
            "{out:?}"
        );
    }
}
