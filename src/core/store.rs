//! The store readers use: recent events from the in-memory ring, older ones from disk, and the
//! gaps a damaged log left between them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::StoredEvent;
use super::event_log::{LogReader, ReadError};
use super::ring;
use super::streaming::Streaming;
use crate::protocol::SeqRange;

/// How often a read retries when the ring drops the events it was about to continue from.
const RING_RACE_RETRIES: usize = 3;

/// Recent events in memory and the rest on disk.
pub struct Store {
    pub(super) ring: RwLock<ring::Ring>,
    pub(super) reader: LogReader,
    pub(super) head: AtomicU64,
    pub(super) streaming: Mutex<Streaming>,
}

/// What a read from the store can answer.
#[derive(Debug)]
pub struct ReadPage {
    pub events: Vec<Arc<StoredEvent>>,
    pub head: u64,
    /// Seqs between `after` and the last returned event that have no stored event (lost to a
    /// damaged log): the read skipped them, and says so once.
    pub gaps: Vec<SeqRange>,
}

/// The seqs missing between `after` and each of `events` (in seq order).
pub fn gaps_between(after: u64, events: &[Arc<StoredEvent>]) -> Vec<SeqRange> {
    let mut gaps = Vec::new();
    let mut previous = after;
    for event in events {
        if event.seq > previous + 1 {
            gaps.push(SeqRange {
                from: previous + 1,
                to: event.seq - 1,
            });
        }
        previous = previous.max(event.seq);
    }
    gaps
}

impl Store {
    /// The agent messages streaming now.
    pub fn streaming(&self) -> std::sync::MutexGuard<'_, Streaming> {
        self.streaming.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest seq stored and published.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Up to `limit` events with `seq > after`, from the ring when it reaches back far enough,
    /// else from disk. Blocking when it goes to disk: call through [`Store::read_after_async`].
    ///
    /// Seqs are contiguous unless the log was damaged (lost lines, a quarantined line, a
    /// snapshot ahead of the log): the read then returns the next stored event whatever lies
    /// between, and lists what it skipped in [`ReadPage::gaps`], so no cursor stalls at a gap.
    pub fn read_after(&self, after: u64, limit: usize) -> Result<ReadPage, ReadError> {
        // Retention decides what is readable: an event deleted from disk is gone, even if the
        // ring still holds a copy (a restart would not have it).
        if let Some(oldest) = self.reader.oldest_seq()
            && after + 1 < oldest
        {
            return Err(ReadError::CursorExpired { after, oldest });
        }
        let head = self.head();
        if after >= head || limit == 0 {
            return Ok(ReadPage {
                events: Vec::new(),
                head,
                gaps: Vec::new(),
            });
        }
        let page = |events: Vec<Arc<StoredEvent>>| ReadPage {
            gaps: gaps_between(after, &events),
            events,
            head,
        };
        {
            let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
            if let Some(front) = ring.front()
                && front.seq <= after + 1
            {
                // The ring holds every stored event from its front on, in seq order.
                let events = ring.after(after, limit).cloned().collect();
                return Ok(page(events));
            }
        }
        // The ring may drop its oldest events while the disk is read; then the read starts over
        // (the disk holds what the ring dropped), so nothing between the two is skipped.
        for _ in 0..RING_RACE_RETRIES {
            let ring_front = self
                .ring
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .front()
                .map(|event| event.seq);
            let lines = self.reader.read_after(after, limit, ring_front)?;
            let mut events: Vec<Arc<StoredEvent>> = lines
                .into_iter()
                .map(|line| Arc::new(line.into()))
                .collect();
            if events.len() == limit {
                return Ok(page(events));
            }
            // Fewer than `limit` from disk: the disk holds nothing more before the ring's
            // front, so the ring continues from the first event after the last one read, even
            // when seqs are missing in between.
            let last = events.last().map(|event| event.seq).unwrap_or(after);
            let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
            if ring.front().map(|event| event.seq) != ring_front {
                continue;
            }
            events.extend(ring.after(last, limit - events.len()).cloned());
            return Ok(page(events));
        }
        // Still racing a ring that turns over faster than the disk is read: the caller reads
        // again from where this page ends.
        let lines = self.reader.read_after(after, limit, None)?;
        let events = lines
            .into_iter()
            .map(|line| Arc::new(line.into()))
            .collect();
        Ok(page(events))
    }

    pub async fn read_after_async(
        self: &Arc<Self>,
        after: u64,
        limit: usize,
    ) -> Result<ReadPage, ReadError> {
        let store = Arc::clone(self);
        match tokio::task::spawn_blocking(move || store.read_after(after, limit)).await {
            Ok(result) => result,
            Err(join) => Err(ReadError::Io {
                path: PathBuf::from("<reader task>"),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }

    pub(super) fn push(&self, events: &[Arc<StoredEvent>]) {
        let Some(last) = events.last() else { return };
        {
            let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
            for event in events {
                ring.push(Arc::clone(event));
            }
        }
        self.head.store(last.seq, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event_log::{EventLog, FsyncPolicy, LogConfig};

    fn line(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"ts\":0,\"type\":\"meta.log_cleared\",\"data\":{{}}}}\n")
    }

    fn stored(seq: u64) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            seq,
            session: None,
            session_seq: None,
            json: line(seq).trim_end().into(),
            ephemeral: false,
        })
    }

    /// A store whose disk holds `on_disk` and whose ring holds `in_ring` (also on disk).
    fn store(dir: &std::path::Path, on_disk: &[u64], in_ring: &[u64]) -> (EventLog, Store) {
        let (mut log, _) = EventLog::open(
            LogConfig {
                dir: dir.to_path_buf(),
                quarantine: dir.join("quarantine.jsonl"),
                segment_bytes: 1 << 20,
                retain_bytes: u64::MAX,
                fsync: FsyncPolicy::Never,
            },
            0,
        )
        .unwrap();
        for seq in on_disk {
            log.append(line(*seq).as_bytes()).unwrap();
        }
        let store = Store {
            ring: RwLock::new(in_ring.iter().map(|seq| stored(*seq)).collect()),
            reader: log.reader(),
            head: AtomicU64::new(*on_disk.last().unwrap()),
            streaming: Mutex::default(),
        };
        (log, store)
    }

    fn seqs(page: &ReadPage) -> Vec<u64> {
        page.events.iter().map(|event| event.seq).collect()
    }

    // See: issue 15, defect 1 — a cursor just before a gap got `[]` for ever.
    #[test]
    fn r15_a_read_skips_a_gap_between_the_disk_and_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, store) = store(dir.path(), &[1, 2, 3, 4, 5, 10, 11, 12], &[10, 11, 12]);
        let page = store.read_after(3, 100).unwrap();
        assert_eq!(seqs(&page), [4, 5, 10, 11, 12]);
        assert_eq!(page.gaps, [SeqRange { from: 6, to: 9 }]);
        let page = store.read_after(5, 100).unwrap();
        assert_eq!(seqs(&page), [10, 11, 12]);
        assert_eq!(page.gaps, [SeqRange { from: 6, to: 9 }]);
        let page = store.read_after(5, 1).unwrap();
        assert_eq!(seqs(&page), [10]);
        // Inside the gap: the next stored event, and only the rest of the gap is reported.
        let page = store.read_after(7, 2).unwrap();
        assert_eq!(seqs(&page), [10, 11]);
        assert_eq!(page.gaps, [SeqRange { from: 8, to: 9 }]);
        // Past the gap nothing is reported again.
        let page = store.read_after(10, 100).unwrap();
        assert_eq!(seqs(&page), [11, 12]);
        assert!(page.gaps.is_empty());
    }

    #[test]
    fn r15_a_read_skips_gaps_inside_the_ring_and_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, store) = store(dir.path(), &[1, 2, 6, 7, 9, 20, 21], &[7, 9, 20, 21]);
        let page = store.read_after(0, 100).unwrap();
        assert_eq!(seqs(&page), [1, 2, 6, 7, 9, 20, 21]);
        assert_eq!(
            page.gaps,
            [
                SeqRange { from: 3, to: 5 },
                SeqRange { from: 8, to: 8 },
                SeqRange { from: 10, to: 19 }
            ]
        );
        let page = store.read_after(7, 100).unwrap();
        assert_eq!(seqs(&page), [9, 20, 21]);
        let page = store.read_after(9, 1).unwrap();
        assert_eq!(seqs(&page), [20]);
        assert_eq!(page.gaps, [SeqRange { from: 10, to: 19 }]);
        // Every cursor up to the head reaches the head by following `next`.
        for start in 0..21 {
            let mut cursor = start;
            let mut steps = 0;
            while cursor < 21 {
                let page = store.read_after(cursor, 1).unwrap();
                cursor = page.events.last().map(|event| event.seq).unwrap();
                steps += 1;
                assert!(steps < 10, "cursor {start} does not reach the head");
            }
        }
    }
}
