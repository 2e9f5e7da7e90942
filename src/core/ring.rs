//! The in-memory ring of recent stored events, bounded by count and by bytes.
//!
//! Readers resume from it without touching the disk; what it drops stays in the log, where
//! [`super::Store::read_after`] finds it. The byte budget is what keeps memory bounded when
//! events are large: 65,536 events of 16 KiB prompts held about 1 GiB when only the count was
//! bounded.

use std::collections::VecDeque;
use std::sync::Arc;

use super::StoredEvent;

/// Events kept in memory for cursors and lagging subscribers; older ones are read from disk.
pub const RING_CAPACITY: usize = 65_536;
/// The bytes of event lines the ring keeps at most (the newest event is kept whatever its
/// size). Each event also costs its fixed fields and two allocations' headers (about 100
/// bytes), which the count bound covers.
pub const RING_BYTES: usize = 32 << 20;

/// Recent events in seq order, at most `capacity` of them and `budget` bytes of their lines.
#[derive(Debug)]
pub struct Ring {
    events: VecDeque<Arc<StoredEvent>>,
    bytes: usize,
    capacity: usize,
    budget: usize,
}

impl Default for Ring {
    fn default() -> Self {
        Ring::new(RING_CAPACITY, RING_BYTES)
    }
}

impl Ring {
    pub fn new(capacity: usize, budget: usize) -> Self {
        Ring {
            events: VecDeque::new(),
            bytes: 0,
            capacity: capacity.max(1),
            budget,
        }
    }

    /// Appends `event` (the newest), dropping the oldest events past either bound.
    pub fn push(&mut self, event: Arc<StoredEvent>) {
        self.bytes += event.json.len();
        self.events.push_back(event);
        while self.events.len() > self.capacity
            || (self.bytes > self.budget && self.events.len() > 1)
        {
            let Some(dropped) = self.events.pop_front() else {
                break;
            };
            self.bytes -= dropped.json.len();
        }
    }

    pub fn front(&self) -> Option<&Arc<StoredEvent>> {
        self.events.front()
    }

    /// The bytes of the lines held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// The events after seq `after`, at most `limit` of them.
    pub fn after(&self, after: u64, limit: usize) -> impl Iterator<Item = &Arc<StoredEvent>> {
        let start = self.events.partition_point(|event| event.seq <= after);
        self.events.range(start..).take(limit)
    }
}

impl FromIterator<Arc<StoredEvent>> for Ring {
    fn from_iter<I: IntoIterator<Item = Arc<StoredEvent>>>(events: I) -> Self {
        let mut ring = Ring::default();
        for event in events {
            ring.push(event);
        }
        ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, bytes: usize) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            seq,
            session: None,
            session_seq: None,
            json: "x".repeat(bytes).into(),
            ephemeral: false,
        })
    }

    fn seqs(ring: &Ring) -> Vec<u64> {
        ring.after(0, usize::MAX).map(|e| e.seq).collect()
    }

    #[test]
    fn the_count_bound_drops_the_oldest() {
        let mut ring = Ring::new(3, usize::MAX);
        for seq in 1..=5 {
            ring.push(event(seq, 10));
        }
        assert_eq!(seqs(&ring), [3, 4, 5]);
        assert_eq!(ring.bytes(), 30);
    }

    #[test]
    fn the_byte_budget_drops_the_oldest_until_the_lines_fit() {
        let mut ring = Ring::new(100, 100);
        for seq in 1..=4 {
            ring.push(event(seq, 30));
        }
        assert_eq!(seqs(&ring), [2, 3, 4], "90 bytes fit, 120 do not");
        ring.push(event(5, 70));
        assert_eq!(seqs(&ring), [4, 5]);
        assert_eq!(ring.bytes(), 100);
    }

    #[test]
    fn an_event_larger_than_the_budget_is_kept_alone() {
        let mut ring = Ring::new(100, 100);
        ring.push(event(1, 10));
        ring.push(event(2, 500));
        assert_eq!(seqs(&ring), [2]);
        ring.push(event(3, 10));
        assert_eq!(seqs(&ring), [3]);
        assert_eq!(ring.bytes(), 10);
    }

    #[test]
    fn after_starts_past_the_cursor_and_takes_the_limit() {
        let mut ring = Ring::new(100, usize::MAX);
        for seq in [2, 3, 5, 8] {
            ring.push(event(seq, 1));
        }
        let after =
            |cursor, limit| -> Vec<u64> { ring.after(cursor, limit).map(|e| e.seq).collect() };
        assert_eq!(after(0, 10), [2, 3, 5, 8]);
        assert_eq!(after(3, 10), [5, 8]);
        assert_eq!(after(4, 1), [5]);
        assert_eq!(after(8, 10), Vec::<u64>::new());
    }
}
