//! The store readers use: recent events from the in-memory ring, older ones from disk, and the
//! gaps a damaged log left between them.

use std::collections::HashMap;
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
    ring: RwLock<ring::Ring>,
    pub(super) reader: LogReader,
    head: AtomicU64,
    streaming: Mutex<Streaming>,
    sessions: RwLock<SessionIndex>,
    /// Seqs start-up found with no stored event (a damaged log), in order.
    lost: Vec<SeqRange>,
}

/// The seqs of each session's stored events, in order: a reader of one session goes straight
/// to its events, however many of other sessions lie between (8 bytes an event in memory;
/// retention trims it with the log).
#[derive(Debug, Default)]
pub(super) struct SessionIndex {
    seqs: HashMap<String, Vec<u64>>,
}

impl SessionIndex {
    pub(super) fn new(seqs: HashMap<String, Vec<u64>>) -> Self {
        SessionIndex { seqs }
    }

    fn push(&mut self, session: &str, seq: u64) {
        match self.seqs.get_mut(session) {
            Some(seqs) => seqs.push(seq),
            None => {
                self.seqs.insert(session.to_string(), vec![seq]);
            }
        }
    }

    /// Up to `limit` seqs of `session` after `after`.
    fn after(&self, session: &str, after: u64, limit: usize) -> &[u64] {
        let Some(seqs) = self.seqs.get(session) else {
            return &[];
        };
        let start = seqs.partition_point(|seq| *seq <= after);
        &seqs[start..(start + limit).min(seqs.len())]
    }

    /// Up to `limit` seqs of `session` before `before` (the last ones), and whether the
    /// session has older seqs than those: a binary search, then a slice.
    fn before(&self, session: &str, before: u64, limit: usize) -> (&[u64], bool) {
        let Some(seqs) = self.seqs.get(session) else {
            return (&[], false);
        };
        let end = seqs.partition_point(|seq| *seq < before);
        let start = end.saturating_sub(limit);
        (&seqs[start..end], start > 0)
    }

    /// Forgets seqs below `oldest` (deleted by retention), and sessions left with none.
    fn trim(&mut self, oldest: u64) {
        self.seqs.retain(|_, seqs| {
            let cut = seqs.partition_point(|seq| *seq < oldest);
            seqs.drain(..cut);
            !seqs.is_empty()
        });
    }
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

/// A page of one session's events.
#[derive(Debug)]
pub struct SessionPage {
    pub events: Vec<Arc<StoredEvent>>,
    /// The cursor to read on from: the last event's seq when the page is full, else the head.
    pub next: u64,
    pub head: u64,
    pub gaps: Vec<SeqRange>,
}

/// A window of one session's events read backwards: the last ones before a seq.
#[derive(Debug)]
pub struct SessionWindow {
    pub events: Vec<Arc<StoredEvent>>,
    /// The last seq the window covers (the head for the session's last events): a forward
    /// read or stream goes on after it.
    pub next: u64,
    pub head: u64,
    /// Seqs the window covers with no stored event: from its first event (from seq 1 when
    /// the session has nothing older) to `next`, so consecutive windows report each once.
    pub gaps: Vec<SeqRange>,
    /// The first event's seq when the session has older events: the next window's `before`.
    pub older_before: Option<u64>,
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
    pub(super) fn new(
        ring: ring::Ring,
        reader: LogReader,
        head: u64,
        sessions: SessionIndex,
        lost: Vec<SeqRange>,
    ) -> Self {
        Store {
            ring: RwLock::new(ring),
            reader,
            head: AtomicU64::new(head),
            streaming: Mutex::default(),
            sessions: RwLock::new(sessions),
            lost,
        }
    }

    /// Up to `limit` events of `session` with `seq > after`, found through the session index:
    /// from the ring when it still holds them, else from disk in one pass. `gaps` are the seqs
    /// between `after` and the page's end that start-up found lost (they may have been this
    /// session's). Blocking when it goes to disk: call through [`Store::read_session_async`].
    pub fn read_session(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<SessionPage, ReadError> {
        if let Some(oldest) = self.reader.oldest_seq()
            && after + 1 < oldest
        {
            return Err(ReadError::CursorExpired { after, oldest });
        }
        // The head first: every seq up to it is already in the index (`push` indexes an event
        // before it moves the head).
        let head = self.head();
        let seqs: Vec<u64> = self
            .sessions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .after(session, after, limit)
            .iter()
            .copied()
            .filter(|seq| *seq <= head)
            .collect();
        let events = self.fetch(&seqs)?;
        // A full page ends at its last event; a short one has every event of the session up
        // to the head.
        let next = if seqs.len() == limit {
            seqs.last().copied().unwrap_or(after)
        } else {
            head.max(after)
        };
        let gaps = self
            .lost
            .iter()
            .filter(|range| range.to > after && range.from <= next)
            .map(|range| SeqRange {
                from: range.from.max(after + 1),
                to: range.to.min(next),
            })
            .collect();
        Ok(SessionPage {
            events,
            next,
            head,
            gaps,
        })
    }

    /// The events of `seqs` (ascending, from the index): from the ring when it still holds
    /// them (a binary search each), else from disk in one pass from the segment holding the
    /// first one. A seq with no readable line is left out.
    fn fetch(&self, seqs: &[u64]) -> Result<Vec<Arc<StoredEvent>>, ReadError> {
        let mut events = Vec::with_capacity(seqs.len());
        let mut on_disk = Vec::new();
        {
            let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
            for &seq in seqs {
                match ring
                    .after(seq - 1, 1)
                    .next()
                    .filter(|event| event.seq == seq)
                {
                    Some(event) => events.push(Arc::clone(event)),
                    None => on_disk.push(seq),
                }
            }
        }
        if !on_disk.is_empty() {
            let lines = self.reader.read_seqs(&on_disk)?;
            events.extend(lines.into_iter().map(|line| Arc::new(line.into())));
            events.sort_by_key(|event| event.seq);
        }
        Ok(events)
    }

    /// The last `limit` events of `session` before seq `before` (`None`: the session's last
    /// events), found through the session index: a binary search in the session's seqs, then
    /// `limit` events from the ring or one pass on disk, whatever the session's length.
    /// Blocking when it goes to disk: call through [`Store::read_window_async`].
    pub fn read_window(
        &self,
        session: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionWindow, ReadError> {
        // The head first: every seq up to it is already in the index.
        let head = self.head();
        let end = before.map_or(head, |before| before.saturating_sub(1).min(head));
        let (seqs, has_older) = {
            let index = self.sessions.read().unwrap_or_else(|e| e.into_inner());
            let (seqs, has_older) = index.before(session, end + 1, limit);
            (seqs.to_vec(), has_older)
        };
        let events = self.fetch(&seqs)?;
        let older_before = has_older.then(|| seqs.first().copied()).flatten();
        let from = older_before.unwrap_or(1);
        let gaps = self
            .lost
            .iter()
            .filter(|range| range.to >= from && range.from <= end)
            .map(|range| SeqRange {
                from: range.from.max(from),
                to: range.to.min(end),
            })
            .collect();
        Ok(SessionWindow {
            events,
            next: end,
            head,
            gaps,
            older_before,
        })
    }

    pub async fn read_window_async(
        self: &Arc<Self>,
        session: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<SessionWindow, ReadError> {
        let store = Arc::clone(self);
        let session = session.to_string();
        match tokio::task::spawn_blocking(move || store.read_window(&session, before, limit)).await
        {
            Ok(result) => result,
            Err(join) => Err(ReadError::Io {
                path: PathBuf::from("<reader task>"),
                source: std::io::Error::other(join),
            }),
        }
    }

    pub async fn read_session_async(
        self: &Arc<Self>,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<SessionPage, ReadError> {
        let store = Arc::clone(self);
        let session = session.to_string();
        match tokio::task::spawn_blocking(move || store.read_session(&session, after, limit)).await
        {
            Ok(result) => result,
            Err(join) => Err(ReadError::Io {
                path: PathBuf::from("<reader task>"),
                source: std::io::Error::other(join),
            }),
        }
    }

    /// Forgets index entries of events retention deleted.
    pub(super) fn trim_index(&self) {
        if let Some(oldest) = self.reader.oldest_seq() {
            self.sessions
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .trim(oldest);
        }
    }

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
                source: std::io::Error::other(join),
            }),
        }
    }

    pub(super) fn push(&self, events: &[Arc<StoredEvent>]) {
        let Some(last) = events.last() else { return };
        {
            let mut index = self.sessions.write().unwrap_or_else(|e| e.into_inner());
            for event in events {
                if let Some(session) = &event.session {
                    index.push(session, event.seq);
                }
            }
        }
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
        let store = Store::new(
            in_ring.iter().map(|seq| stored(*seq)).collect(),
            log.reader(),
            *on_disk.last().unwrap(),
            SessionIndex::default(),
            Vec::new(),
        );
        (log, store)
    }

    fn config(dir: &std::path::Path) -> LogConfig {
        LogConfig {
            dir: dir.to_path_buf(),
            quarantine: dir.join("quarantine.jsonl"),
            segment_bytes: 256 * 1024,
            retain_bytes: u64::MAX,
            fsync: FsyncPolicy::Never,
        }
    }

    fn in_session(seq: u64, session: &str) -> Arc<StoredEvent> {
        let json = format!(
            "{{\"seq\":{seq},\"ts\":0,\"session\":\"{session}\",\"type\":\"meta.log_cleared\",\"data\":{{}}}}"
        );
        Arc::new(StoredEvent {
            seq,
            session: Some(session.to_string()),
            session_seq: None,
            json: json.into(),
            ephemeral: false,
        })
    }

    /// A log of `n` events, all of session `b` but `of_a`, reopened so the index is the one
    /// start-up builds; the ring holds the last `in_ring`.
    fn sessions_store(dir: &std::path::Path, n: u64, of_a: &[u64], in_ring: u64) -> Store {
        let session = |seq: u64| if of_a.contains(&seq) { "a" } else { "b" };
        {
            let (mut log, _) = EventLog::open(config(dir), 0).unwrap();
            let mut buf = Vec::new();
            for seq in 1..=n {
                crate::core::log_line::encode(&in_session(seq, session(seq)).json, &mut buf);
                log.append(&buf).unwrap();
                buf.clear();
                if log.wants_roll() {
                    log.roll(seq + 1).unwrap();
                }
            }
        }
        let (log, mut recovery) = EventLog::open(config(dir), n).unwrap();
        assert!(recovery.segments > 1, "the events span several segments");
        Store::new(
            (n - in_ring + 1..=n)
                .map(|seq| in_session(seq, session(seq)))
                .collect(),
            log.reader(),
            n,
            SessionIndex::new(std::mem::take(&mut recovery.by_session)),
            vec![SeqRange { from: 6, to: 7 }],
        )
    }

    fn session_seqs(page: &SessionPage) -> Vec<u64> {
        page.events.iter().map(|event| event.seq).collect()
    }

    /// A reader of one session gets its next events however many of other sessions lie
    /// between, from disk and from the ring, and a short page moves the cursor to the head.
    #[test]
    fn a_session_read_goes_straight_to_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let store = sessions_store(dir.path(), 20_000, &[3, 12_000, 19_998], 5);
        let page = store.read_session("a", 0, 2).unwrap();
        assert_eq!(session_seqs(&page), [3, 12_000]);
        assert_eq!(page.next, 12_000);
        assert_eq!(page.gaps, [SeqRange { from: 6, to: 7 }]);
        assert!(
            page.events
                .iter()
                .all(|e| e.session.as_deref() == Some("a"))
        );
        let page = store.read_session("a", 12_000, 2).unwrap();
        assert_eq!(session_seqs(&page), [19_998]);
        assert_eq!((page.next, page.head), (20_000, 20_000));
        assert!(page.gaps.is_empty());
        let page = store.read_session("a", 20_000, 2).unwrap();
        assert!(page.events.is_empty());
        assert_eq!(page.next, 20_000);
        let page = store.read_session("nobody", 0, 10).unwrap();
        assert!(page.events.is_empty());
        assert_eq!(page.next, 20_000);
        // From inside the lost range, only its rest is reported.
        let page = store.read_session("a", 6, 1).unwrap();
        assert_eq!(page.gaps, [SeqRange { from: 7, to: 7 }]);
        // A new event is indexed as it is stored.
        store.push(&[in_session(20_001, "a")]);
        let page = store.read_session("a", 20_000, 10).unwrap();
        assert_eq!(session_seqs(&page), [20_001]);
        // Events on disk only, one pass over several segments.
        let page = store.read_session("b", 11_990, 20).unwrap();
        assert_eq!(
            session_seqs(&page),
            (11_991..=12_011)
                .filter(|seq| *seq != 12_000)
                .collect::<Vec<_>>()
        );
    }

    /// A window of a session's last events, and the windows before it, read backwards
    /// through the index: each event once, in order, each lost range reported once.
    #[test]
    fn a_session_window_reads_its_last_events_and_pages_back() {
        let dir = tempfile::tempdir().unwrap();
        let of_a: Vec<u64> = (1..=20_000).filter(|seq| seq % 100 == 5).collect();
        let store = sessions_store(dir.path(), 20_000, &of_a, 150);
        let window = store.read_window("a", None, 3).unwrap();
        assert_eq!(session_seqs_of(&window.events), [19_705, 19_805, 19_905]);
        assert_eq!((window.next, window.head), (20_000, 20_000));
        assert_eq!(window.older_before, Some(19_705));
        assert!(window.gaps.is_empty());
        // Paging back reaches the first event, every event once, in order.
        let mut seen = window.events.iter().map(|e| e.seq).collect::<Vec<_>>();
        let mut gaps = Vec::new();
        let mut before = window.older_before;
        while let Some(cursor) = before {
            let window = store.read_window("a", Some(cursor), 7).unwrap();
            assert_eq!(window.next, cursor - 1);
            assert!(window.events.iter().all(|e| e.seq < cursor));
            let mut older: Vec<u64> = window.events.iter().map(|e| e.seq).collect();
            older.append(&mut seen);
            seen = older;
            gaps.extend(window.gaps);
            before = window.older_before;
        }
        assert_eq!(seen, of_a);
        assert_eq!(gaps, [SeqRange { from: 6, to: 7 }]);
        // Before the first event, and for a session with none: empty, nothing older.
        let window = store.read_window("a", Some(5), 10).unwrap();
        assert!(window.events.is_empty());
        assert_eq!((window.next, window.older_before), (4, None));
        let window = store.read_window("nobody", None, 10).unwrap();
        assert!(window.events.is_empty());
        assert_eq!((window.next, window.older_before), (20_000, None));
        // A cursor past the head reads up to the head; a new event is in the next window.
        store.push(&[in_session(20_001, "a")]);
        let window = store.read_window("a", Some(30_000), 1).unwrap();
        assert_eq!(session_seqs_of(&window.events), [20_001]);
        assert_eq!(window.next, 20_001);
    }

    fn session_seqs_of(events: &[Arc<StoredEvent>]) -> Vec<u64> {
        events.iter().map(|event| event.seq).collect()
    }

    #[test]
    fn the_index_forgets_what_retention_deleted() {
        let mut index = SessionIndex::default();
        for seq in 1..=10 {
            index.push(if seq % 2 == 0 { "a" } else { "b" }, seq);
        }
        index.push("c", 3);
        index.trim(5);
        assert_eq!(index.after("a", 0, 10), [6, 8, 10]);
        assert_eq!(index.after("b", 0, 2), [5, 7]);
        assert_eq!(index.after("c", 0, 10), [] as [u64; 0]);
        assert!(!index.seqs.contains_key("c"));
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
