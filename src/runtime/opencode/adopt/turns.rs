//! The pure reading of an adopted OpenCode session's messages (as the database gives them, in
//! the shape `GET /session/:id/message` answers): its turns after the adoption's checkpoint as
//! session events ([`read`]), the one running held back, and every prompt of the session (what
//! its screen may show).

use crate::protocol::{EventKind, Item};
use crate::runtime::opencode::normalize;
use crate::runtime::opencode::wire::{MessageInfo, MessageWithParts};

/// A tool part's error once its permission was rejected without a message (Escape, or `Reject`
/// in the dialog): OpenCode calls the model no more and the turn ends, its last step completed
/// with `finish: "tool-calls"` (observed on 1.18.33). A reject with a message reads otherwise
/// (`… tool call with the following feedback: …`) and the turn goes on.
pub(super) const REJECTED: &str = "The user rejected permission to use this specific tool call.";

/// Whether an assistant message ends its turn: an error (an abort too), or completed with
/// another finish than `tool-calls` (which only ends a step), or a step completed with a tool
/// whose permission was rejected without a message ([`REJECTED`]: no step follows).
fn ends_turn(message: &MessageWithParts) -> bool {
    let info: &MessageInfo = &message.info;
    let rejected = || {
        message.parts.iter().any(|p| {
            p.kind == "tool"
                && p.state
                    .as_ref()
                    .is_some_and(|s| s.status == "error" && s.error.as_deref() == Some(REJECTED))
        })
    };
    info.error.is_some()
        || (info.time.completed.is_some()
            && (info.finish.as_deref() != Some("tool-calls") || rejected()))
}

/// The session's events as read now: the turns after `after`, the one running held back.
#[derive(Debug, Default, PartialEq)]
pub struct Read {
    pub events: Vec<EventKind>,
    /// The turn running now (its end not in `events`).
    pub running: Option<String>,
    pub tool_running: bool,
    /// The text of every user message of the session, oldest first (the turns before `after`
    /// too): what the screen may show of the session.
    pub prompts: Vec<String>,
}

fn turn_of(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::TurnStarted(t) => Some(&t.turn_id),
        EventKind::TurnCompleted(t) => Some(&t.turn_id),
        EventKind::ItemCompleted(i) | EventKind::ItemStarted(i) => Some(&i.turn_id),
        _ => None,
    }
}

/// A session's messages (oldest first) as session events, through `normalize::history`, for
/// the turns after `after` (OpenCode's message ids ascend). A turn still running — a prompt
/// after the last assistant message that ended a turn — is held back: its start, prompt and
/// completed steps are read, not the steps still streaming (their text would be stored
/// unfinished) nor the end `history` gives it (it would be stored as interrupted). A running
/// turn whose prompt has no text part yet is left out whole (its source is told by its text).
pub fn read(messages: &[MessageWithParts], after: Option<&str>) -> Read {
    Read {
        prompts: prompts(messages),
        ..read_turns(messages, after)
    }
}

/// The text parts of each user message (synthetic ones left out), joined.
fn prompts(messages: &[MessageWithParts]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.info.role == "user")
        .map(|m| {
            m.parts
                .iter()
                .filter(|p| p.kind == "text" && p.synthetic != Some(true))
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|text| !text.trim().is_empty())
        .collect()
}

fn read_turns(messages: &[MessageWithParts], after: Option<&str>) -> Read {
    let boundary = messages
        .iter()
        .rposition(|m| m.info.role == "assistant" && ends_turn(m))
        .map_or(0, |at| at + 1);
    let tail = &messages[boundary..];
    let open = tail.iter().any(|m| m.info.role == "user");
    let later = |kind: &EventKind| turn_of(kind).is_some_and(|t| after.is_none_or(|a| t > a));
    if !open {
        let events = normalize::history(messages)
            .into_iter()
            .filter(|k| later(k))
            .collect();
        return Read {
            events,
            ..Read::default()
        };
    }
    let tool_running = tail
        .iter()
        .filter(|m| m.info.role == "assistant")
        .flat_map(|m| &m.parts)
        .any(|p| {
            p.kind == "tool"
                && p.state
                    .as_ref()
                    .is_some_and(|s| s.status == "running" || s.status == "pending")
        });
    let kept: Vec<MessageWithParts> = messages[..boundary]
        .iter()
        .chain(
            tail.iter()
                .filter(|m| m.info.role == "user" || m.info.time.completed.is_some()),
        )
        .cloned()
        .collect();
    let mut events = normalize::history(&kept);
    let running = match events.last() {
        Some(EventKind::TurnCompleted(end)) => Some(end.turn_id.clone()),
        _ => None,
    };
    if running.is_some() {
        events.pop();
    }
    let running = running.filter(|t| after.is_none_or(|a| t.as_str() > a));
    if let Some(turn) = &running {
        let prompted = events.iter().any(|k| {
            matches!(k, EventKind::ItemCompleted(i)
                if i.turn_id == *turn && matches!(i.item, Item::UserMessage { .. }))
        });
        if !prompted {
            events.retain(|k| turn_of(k) != Some(turn.as_str()));
            return Read {
                events: events.into_iter().filter(|k| later(k)).collect(),
                ..Read::default()
            };
        }
    }
    Read {
        events: events.into_iter().filter(|k| later(k)).collect(),
        running,
        tool_running,
        prompts: Vec::new(),
    }
}

/// The turn before which an adoption starts: the last one finished (a running one is the
/// session's).
pub(super) fn adopted_after(read: &Read) -> Option<String> {
    let turns: Vec<&str> = read
        .events
        .iter()
        .filter_map(|k| match k {
            EventKind::TurnStarted(t) => Some(t.turn_id.as_str()),
            _ => None,
        })
        .collect();
    let last = if read.running.is_some() {
        turns.len().checked_sub(2)
    } else {
        turns.len().checked_sub(1)
    };
    last.map(|at| turns[at].to_string())
}
