//! Agent messages streaming now: the byte offsets the core gives their deltas, and the snapshot
//! a stream that (re)connects mid-message starts with.

use std::collections::HashMap;
use std::sync::Arc;

use super::{StoredEvent, now_ms};
use crate::protocol::{DeltaKind, EventKind, ItemDelta};

/// Agent messages streaming now (deltas published, the item not yet stored), by item id: what
/// a stream that (re)connects mid-message sends first, so it does not start mid-word. Memory
/// only: a restart loses it, as it loses the backend's stream.
#[derive(Debug, Default)]
pub struct Streaming {
    items: HashMap<String, Partial>,
}

#[derive(Debug)]
struct Partial {
    session: Option<String>,
    turn_id: String,
    /// The text so far, up to [`MAX_PARTIAL_TEXT`] bytes.
    text: String,
    /// Bytes streamed so far (also those past the cap).
    len: u64,
    /// The stored event the last delta followed.
    seq: u64,
}

/// The most text kept of one streaming message, and the most messages tracked at once.
const MAX_PARTIAL_TEXT: usize = 256 * 1024;
const MAX_PARTIALS: usize = 256;

impl Streaming {
    /// Records a delta; returns its offset in the message.
    pub(super) fn delta(&mut self, session: Option<&String>, delta: &ItemDelta, seq: u64) -> u64 {
        if !self.items.contains_key(&delta.item_id) && self.items.len() >= MAX_PARTIALS {
            // A message that never completed nor ended its turn: forget the oldest.
            if let Some(oldest) = self
                .items
                .iter()
                .min_by_key(|(_, p)| p.seq)
                .map(|(id, _)| id.clone())
            {
                self.items.remove(&oldest);
            }
        }
        let partial = self
            .items
            .entry(delta.item_id.clone())
            .or_insert_with(|| Partial {
                session: session.cloned(),
                turn_id: delta.turn_id.clone(),
                text: String::new(),
                len: 0,
                seq,
            });
        let offset = partial.len;
        if partial.text.len() + delta.delta.len() <= MAX_PARTIAL_TEXT {
            partial.text.push_str(&delta.delta);
        }
        partial.len += delta.delta.len() as u64;
        partial.seq = seq;
        offset
    }

    /// A stored event ends what it completes: its item, or every message of its turn.
    pub(super) fn stored(&mut self, session: Option<&String>, kind: &EventKind) {
        match kind {
            EventKind::ItemCompleted(item) => {
                self.items.remove(item.id());
            }
            EventKind::TurnCompleted(done) => self
                .items
                .retain(|_, p| !(p.turn_id == done.turn_id && p.session.as_ref() == session)),
            _ => {}
        }
    }

    /// A live-only `item.delta` (snapshot) of each message streaming in `session` (all when
    /// `None`), in the order they started.
    pub fn snapshot(&self, session: Option<&str>) -> Vec<Arc<StoredEvent>> {
        let mut partials: Vec<(&String, &Partial)> = self
            .items
            .iter()
            .filter(|(_, p)| session.is_none() || p.session.as_deref() == session)
            .filter(|(_, p)| p.text.len() as u64 == p.len)
            .collect();
        partials.sort_by_key(|(_, p)| p.seq);
        partials
            .into_iter()
            .map(|(item_id, p)| {
                let kind = EventKind::ItemDelta(ItemDelta {
                    turn_id: p.turn_id.clone(),
                    item_id: item_id.clone(),
                    kind: DeltaKind::AgentMessage,
                    delta: p.text.clone(),
                    offset: Some(0),
                    snapshot: true,
                });
                Arc::new(StoredEvent {
                    seq: p.seq,
                    session: p.session.clone(),
                    session_seq: None,
                    json: ephemeral_line(now_ms(), p.session.as_ref(), &kind).into(),
                    ephemeral: true,
                })
            })
            .collect()
    }
}

/// The line of a live-only event: like a stored one, without `seq`.
pub(super) fn ephemeral_line(ts: u64, session: Option<&String>, kind: &EventKind) -> String {
    serde_json::json!({
        "ts": ts,
        "session": session,
        "type": kind.type_name(),
        "data": serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.get("data").cloned()),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(turn: &str, item: &str, text: &str) -> ItemDelta {
        ItemDelta {
            turn_id: turn.into(),
            item_id: item.into(),
            kind: "agentMessage".into(),
            delta: text.into(),
            offset: None,
            snapshot: false,
        }
    }

    /// Deltas get byte offsets; a snapshot holds each message's text so far, per session; a
    /// stored completion (of the item, or of its turn) ends it.
    #[test]
    fn streaming_messages_have_offsets_and_snapshots() {
        let s1 = Some("s1".to_string());
        let s2 = Some("s2".to_string());
        let mut streaming = Streaming::default();
        assert_eq!(
            streaming.delta(s1.as_ref(), &delta("t1", "m1", "h\u{e9}"), 3),
            0
        );
        assert_eq!(
            streaming.delta(s1.as_ref(), &delta("t1", "m1", "llo"), 4),
            3
        );
        assert_eq!(streaming.delta(s2.as_ref(), &delta("t9", "m9", "x"), 5), 0);
        let snap = streaming.snapshot(Some("s1"));
        assert_eq!(snap.len(), 1);
        let line: serde_json::Value = serde_json::from_str(&snap[0].json).unwrap();
        assert_eq!(line["type"], "item.delta");
        assert_eq!(line["data"]["delta"], "h\u{e9}llo");
        assert_eq!(line["data"]["offset"], 0);
        assert_eq!(line["data"]["snapshot"], true);
        assert!(line.get("seq").is_none(), "{line}");
        assert!(snap[0].ephemeral);
        assert_eq!(streaming.snapshot(None).len(), 2);
        let end = |turn: &str| {
            EventKind::TurnCompleted(crate::protocol::TurnCompleted {
                turn_id: turn.into(),
                status: crate::protocol::TurnStatus::Interrupted,
                error: None,
                duration_ms: None,
                lost: false,
            })
        };
        // Another session's turn of the same id ends nothing here.
        streaming.stored(s2.as_ref(), &end("t1"));
        assert_eq!(streaming.snapshot(Some("s1")).len(), 1);
        streaming.stored(s1.as_ref(), &end("t1"));
        assert!(streaming.snapshot(Some("s1")).is_empty());
        streaming.stored(
            s2.as_ref(),
            &EventKind::ItemCompleted(crate::protocol::ItemEvent {
                turn_id: "t9".into(),
                item: crate::protocol::Item::AgentMessage {
                    id: "m9".into(),
                    text: "x".into(),
                    interrupted: false,
                },
            }),
        );
        assert!(streaming.snapshot(None).is_empty());
        // Past the cap the text is not kept, and no snapshot claims the message whole.
        let big = "y".repeat(MAX_PARTIAL_TEXT);
        assert_eq!(streaming.delta(s1.as_ref(), &delta("t2", "m2", &big), 6), 0);
        let next = streaming.delta(s1.as_ref(), &delta("t2", "m2", "z"), 6);
        assert_eq!(next, MAX_PARTIAL_TEXT as u64);
        assert!(streaming.snapshot(Some("s1")).is_empty());
    }
}
