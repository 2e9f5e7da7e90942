//! The core: the single writer that orders, stores and publishes every event.
//!
//! All producers send [`CoreInput`]s into one bounded channel. One dedicated thread drains it in
//! batches and, for each batch: assigns the global `seq` and per-session `session_seq` (the only
//! place either is assigned), appends the serialized lines to the [`event_log`] in one write
//! (synced per the fsync policy), applies them to the [`tracker`], pushes them into the in-memory
//! ring, broadcasts them, and only then acknowledges them. A subscriber can therefore always find
//! a broadcast event in the ring or the log.
//!
//! Readers never talk to the thread: they read the tracker through a shared lock and events
//! through [`Store`], which serves recent events from the ring and older ones from disk.

pub mod event_log;
#[cfg(test)]
mod fault_tests;
pub mod format;
pub mod home_lock;
pub mod log_line;
pub mod notify;
pub mod private_file;
mod ring;
pub mod sessions;
mod snapshot;
pub mod tasks;
pub mod tracker;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::protocol::{
    DaemonInfo, Event, EventKind, InstanceRef, ItemDelta, LogDamage, MissingRange, QuarantinedLine,
    SCHEMA_VERSION, SeqRange,
};
use event_log::{EventLog, LogConfig, LogLine, LogReader, ReadError, Recovery};
use sessions::Sessions;
pub use snapshot::Snapshot;
use tracker::{Tracker, TrackerConfig};

/// Inputs queued for the core thread. Bounded so that a flood of reports turns into a visible
/// `overloaded` error instead of unbounded memory; 8192 is ~100 ms of the target ingest rate.
pub const INPUT_CAPACITY: usize = 8192;
pub use ring::{RING_BYTES, RING_CAPACITY};
/// Live events buffered per subscriber before it lags and falls back to the store.
pub const BROADCAST_CAPACITY: usize = 4096;
/// How often a read retries when the ring drops the events it was about to continue from.
const RING_RACE_RETRIES: usize = 3;
/// The most inputs handled in one batch (one write, one fsync).
const MAX_BATCH: usize = 1024;

/// How often the tracker is asked for due aging (stale, prune) events.
pub const TICK_INTERVAL: Duration = Duration::from_secs(1);

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Everything rebuilt from the log: the tmux tracker and the hosted sessions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub tracker: Tracker,
    pub sessions: Sessions,
    #[serde(default)]
    pub tasks: tasks::Tasks,
}

impl State {
    /// A hosted session as clients see it, with its control lease and waiting tasks.
    pub fn session_view(&self, id: &str) -> Option<crate::protocol::HostedSessionView> {
        let mut view = self.sessions.get(id)?.view();
        view.lease = self.tasks.lease(id);
        view.waiting_tasks = self
            .tasks
            .open(id)
            .filter(|t| t.state == crate::protocol::TaskState::Waiting)
            .count();
        Some(view)
    }

    fn apply(&mut self, event: &Event) {
        self.tracker.apply(event);
        self.sessions.apply(event);
        self.tasks.apply(event);
    }
}

/// One event as readers and subscribers get it: its routing fields and its exact line.
///
/// A live-only event (`ephemeral`, e.g. `item.delta`) is never stored; its `seq` is the seq of
/// the stored event it follows, and its line has no `seq` field.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub session: Option<String>,
    pub session_seq: Option<u64>,
    pub json: Arc<str>,
    pub ephemeral: bool,
}

impl From<LogLine> for StoredEvent {
    fn from(line: LogLine) -> Self {
        StoredEvent {
            seq: line.seq,
            session: line.session,
            session_seq: line.session_seq,
            json: line.json.into(),
            ephemeral: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The input queue is full; the caller should retry shortly.
    #[error("the daemon is overloaded, retry shortly")]
    Overloaded,
    /// The daemon is stopping and takes no new events.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The session holds the most instances allowed (the cap) and none has finished.
    #[error(
        "session `{session}` is at its cap of {max} agent instances and none of them has finished or was reported without the token (those make room); the reports with the token hold every place"
    )]
    TooManyInstances { session: String, max: usize },
    /// Every token-less instance a report could replace was reported in the same batch.
    #[error(
        "session `{session}` keeps at most {max} instances reported without the token ({scope}), and each of them was reported just now; report with the token (see `cohost token`) to be kept apart from token-less reporters"
    )]
    TooManyTokenless {
        session: String,
        scope: String,
        max: usize,
    },
    /// Writing the log failed; nothing of the batch was applied.
    #[error("the event log could not be written: {0}")]
    Storage(String),
    /// The event repeats a turn, item or approval already stored; it was not logged again.
    #[error("the event was already recorded")]
    Duplicate,
}

pub enum CoreInput {
    /// Sequence, store, apply and publish one event.
    Append {
        session: Option<String>,
        kind: EventKind,
        reply: oneshot::Sender<Result<u64, CoreError>>,
    },
    /// Broadcast a live-only event (not stored, no seq) in order with the stored ones.
    Publish {
        session: Option<String>,
        kind: EventKind,
    },
    /// Ask the tracker for due aging events and log them.
    Tick,
    /// Write `daemon.stopped`, sync the log, snapshot, and stop the thread.
    Shutdown { reply: oneshot::Sender<()> },
}

#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub home: PathBuf,
    pub log: LogConfig,
    pub tracker: TrackerConfig,
}

/// Recent events in memory and the rest on disk.
pub struct Store {
    ring: RwLock<ring::Ring>,
    reader: LogReader,
    head: AtomicU64,
    streaming: Mutex<Streaming>,
}

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
    fn delta(&mut self, session: Option<&String>, delta: &ItemDelta, seq: u64) -> u64 {
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
    fn stored(&mut self, session: Option<&String>, kind: &EventKind) {
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
                    kind: "agentMessage".to_string(),
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
fn ephemeral_line(ts: u64, session: Option<&String>, kind: &EventKind) -> String {
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

    fn push(&self, events: &[Arc<StoredEvent>]) {
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

/// The cheap, clonable handle every surface uses.
#[derive(Clone)]
pub struct CoreHandle {
    tx: mpsc::Sender<CoreInput>,
    pub store: Arc<Store>,
    pub state: Arc<RwLock<State>>,
    bus: broadcast::Sender<Arc<StoredEvent>>,
}

impl CoreHandle {
    /// Reads the state under its lock. Keep the closure short: the core thread waits for it.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Broadcasts a live-only event. Dropped (not queued) when the core is overloaded: deltas
    /// are a convenience, the completed item carries the whole text.
    pub fn publish(&self, session: Option<String>, kind: EventKind) {
        let _ = self.tx.try_send(CoreInput::Publish { session, kind });
    }

    /// Queues an event and waits until it is durable and published. Returns its seq.
    pub async fn append(&self, session: Option<String>, kind: EventKind) -> Result<u64, CoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .try_send(CoreInput::Append {
                session,
                kind,
                reply,
            })
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => CoreError::Overloaded,
                mpsc::error::TrySendError::Closed(_) => CoreError::ShuttingDown,
            })?;
        rx.await.map_err(|_| CoreError::ShuttingDown)?
    }

    /// Live events from now on. Pair with [`Store::read_after`] to resume from a cursor.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.bus.subscribe()
    }

    pub(crate) fn tick(&self) {
        // A full queue already has work; the next tick will catch up.
        let _ = self.tx.try_send(CoreInput::Tick);
    }

    /// Asks the core thread to write `daemon.stopped`, sync and snapshot, and waits for it.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(CoreInput::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// What start-up found, for logging and tests.
#[derive(Debug, Clone)]
pub struct StartInfo {
    pub head: u64,
    pub snapshot_seq: u64,
    pub replayed: usize,
    pub truncated_bytes: u64,
    /// What was wrong with the log, also written as the `log.damaged` event.
    pub damage: Option<LogDamage>,
}

/// The most quarantined lines a `log.damaged` event lists (all are counted).
const MAX_LISTED_QUARANTINED: usize = 100;

/// Compares what the log holds (`recovery`) with the snapshot taken at `snapshot_seq`, and says
/// what is missing or was quarantined; `None` when nothing is. `notes` are findings in words
/// (an unusable snapshot).
pub fn damage_report(
    recovery: &Recovery,
    snapshot_seq: u64,
    quarantine_file: &std::path::Path,
    notes: Vec<String>,
) -> Option<LogDamage> {
    let mut ranges: Vec<SeqRange> = Vec::new();
    // Before the oldest segment: retention deletes only what a snapshot covers, so seqs there
    // that the snapshot does not cover are lost to both.
    if let Some(oldest) = recovery.oldest_segment
        && oldest > snapshot_seq + 1
    {
        ranges.push(SeqRange {
            from: snapshot_seq + 1,
            to: oldest - 1,
        });
    }
    ranges.extend(recovery.missing.iter().copied());
    // After the log's end: events the snapshot has seen but the log lost.
    if recovery.segments > 0 && snapshot_seq > recovery.head {
        ranges.push(SeqRange {
            from: recovery.head + 1,
            to: snapshot_seq,
        });
    }
    let mut missing = Vec::new();
    for range in ranges {
        // Split at the snapshot: the state reflects what it covers.
        if range.from <= snapshot_seq && range.to > snapshot_seq {
            missing.push(MissingRange {
                from: range.from,
                to: snapshot_seq,
                in_snapshot: true,
            });
            missing.push(MissingRange {
                from: snapshot_seq + 1,
                to: range.to,
                in_snapshot: false,
            });
        } else {
            missing.push(MissingRange {
                from: range.from,
                to: range.to,
                in_snapshot: range.to <= snapshot_seq,
            });
        }
    }
    let mut notes = notes;
    // Lines an earlier start quarantined but could not take out of their segment were
    // reported then; they are not news.
    let fresh: Vec<_> = recovery.quarantined.iter().filter(|q| !q.already).collect();
    for deferred in &recovery.deferred {
        if fresh.iter().any(|q| q.segment == deferred.segment) {
            notes.push(format!(
                "segment {} could not be rewritten without its {} damaged line(s) ({}): they are in the quarantine file and stay in the segment, skipped by readers, until a start can rewrite it",
                deferred.segment,
                deferred.offsets.len(),
                deferred.error
            ));
        }
    }
    if recovery.segments == 0 && snapshot_seq > 0 {
        notes.push(format!(
            "the log has no segment while the snapshot is at seq {snapshot_seq}: every event up to it is gone from the log"
        ));
    }
    if missing.is_empty() && fresh.is_empty() && notes.is_empty() {
        return None;
    }
    Some(LogDamage {
        snapshot_seq,
        log_first_seq: recovery.first_seq,
        log_last_seq: recovery.last_seq,
        missing_count: missing.iter().map(|range| range.to - range.from + 1).sum(),
        missing,
        quarantined: fresh
            .iter()
            .take(MAX_LISTED_QUARANTINED)
            .map(|line| QuarantinedLine {
                segment: line.segment.clone(),
                offset: line.offset,
                line: line.line_number as u64,
                bytes: line.bytes,
                reason: line.fault.as_str().to_string(),
                seq: line.claimed_seq,
            })
            .collect(),
        quarantined_count: fresh.len() as u64,
        quarantine_file: quarantine_file.display().to_string(),
        notes,
    })
}

/// What `cohost log verify` found in a home.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub home: PathBuf,
    /// A daemon holds the home's lock: its last line may be a write in progress.
    pub daemon_running: bool,
    /// The snapshot's seq (0: none or unusable).
    pub snapshot_seq: u64,
    pub segments: usize,
    pub events: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// A last line without its newline: a write a crash interrupted (or one in progress).
    pub torn_bytes: u64,
    /// Seqs missing that a `log.damaged` event already reported.
    pub known_missing: Vec<SeqRange>,
    pub damage: Option<LogDamage>,
}

/// Checks the log and snapshot of `home` without changing them (the start-up scan, read-only).
pub fn verify(home: &std::path::Path) -> anyhow::Result<Verification> {
    use anyhow::Context as _;
    let mut notes = Vec::new();
    format::check_home(home)?;
    let snapshot_seq = match Snapshot::load(home)? {
        snapshot::Loaded::Newer { schema } => anyhow::bail!(
            "the snapshot has format {schema}, written by a newer cohost; this cohost {} reads up to {}",
            env!("CARGO_PKG_VERSION"),
            format::SNAPSHOT_FORMAT
        ),
        snapshot::Loaded::Found(snapshot) => snapshot.seq,
        snapshot::Loaded::Missing => 0,
        snapshot::Loaded::Unusable { reason, damaged } => {
            if damaged {
                notes.push(format!(
                    "{reason}; the next start rebuilds the state from the log alone"
                ));
            }
            0
        }
    };
    let dir = home.join("log");
    let recovery = event_log::scan(&dir)
        .with_context(|| format!("failed to read the event log in {}", dir.display()))?;
    let daemon_running = home_lock::home_is_locked(home);
    let damage = damage_report(
        &recovery,
        snapshot_seq,
        &home.join("quarantine.jsonl"),
        notes,
    );
    Ok(Verification {
        home: home.to_path_buf(),
        daemon_running,
        snapshot_seq,
        segments: recovery.segments,
        events: recovery.n_lines,
        first_seq: recovery.first_seq,
        last_seq: recovery.last_seq,
        torn_bytes: recovery.truncated_bytes,
        known_missing: recovery.known_missing,
        damage,
    })
}

impl Verification {
    /// The report for a person.
    pub fn render(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "home: {}", self.home.display())?;
        if self.daemon_running {
            writeln!(
                out,
                "a daemon is running on this home: its last line may be in progress"
            )?;
        }
        match self.snapshot_seq {
            0 => writeln!(out, "snapshot: none")?,
            seq => writeln!(out, "snapshot: at seq {seq}")?,
        }
        writeln!(
            out,
            "log: {} segment(s), {} event(s), seq {}..={}",
            self.segments, self.events, self.first_seq, self.last_seq
        )?;
        if self.torn_bytes > 0 {
            writeln!(
                out,
                "torn last line: {} bytes (a write that did not complete; cut at the next start)",
                self.torn_bytes
            )?;
        }
        for range in &self.known_missing {
            writeln!(
                out,
                "known gap: {}..={} (already reported by a log.damaged event)",
                range.from, range.to
            )?;
        }
        let Some(damage) = &self.damage else {
            return writeln!(out, "ok: no damage found");
        };
        writeln!(
            out,
            "DAMAGED: {} event(s) missing, {} line(s) to quarantine",
            damage.missing_count, damage.quarantined_count
        )?;
        for range in &damage.missing {
            writeln!(
                out,
                "  missing {}..={}{}",
                range.from,
                range.to,
                if range.in_snapshot {
                    " (the snapshot still reflects them)"
                } else {
                    " (not in the snapshot either)"
                }
            )?;
        }
        for line in &damage.quarantined {
            let seq = line
                .seq
                .map(|seq| format!(", seq {seq}"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}: line {} at byte {} ({} bytes{seq}): {}",
                line.segment, line.line, line.offset, line.bytes, line.reason
            )?;
        }
        for note in &damage.notes {
            writeln!(out, "  {note}")?;
        }
        Ok(())
    }
}

/// Logs a damage report: one error line with the totals, one warning per missing range.
fn log_damage(damage: &LogDamage) {
    tracing::error!(
        missing = damage.missing_count,
        quarantined = damage.quarantined_count,
        snapshot = damage.snapshot_seq,
        log_first = damage.log_first_seq,
        log_last = damage.log_last_seq,
        quarantine_file = %damage.quarantine_file,
        "the event log is damaged: {} event(s) missing, {} line(s) quarantined (see the log.damaged event)",
        damage.missing_count,
        damage.quarantined_count,
    );
    for range in &damage.missing {
        tracing::warn!(
            from = range.from,
            to = range.to,
            in_snapshot = range.in_snapshot,
            "events {}..={} are missing from the event log{}",
            range.from,
            range.to,
            if range.in_snapshot {
                " (the snapshot still reflects them)"
            } else {
                " and from the state"
            }
        );
    }
    for note in &damage.notes {
        tracing::warn!("{note}");
    }
}

struct Core {
    config: CoreConfig,
    log: EventLog,
    store: Arc<Store>,
    state: Arc<RwLock<State>>,
    bus: broadcast::Sender<Arc<StoredEvent>>,
    seq: u64,
    session_seqs: HashMap<String, u64>,
}

/// Opens the log, rebuilds state from the snapshot and the log after it, writes
/// `daemon.started`, and starts the core thread.
pub fn start(
    config: CoreConfig,
) -> anyhow::Result<(CoreHandle, std::thread::JoinHandle<()>, StartInfo)> {
    use anyhow::Context as _;
    let mut notes = Vec::new();
    let snapshot = match Snapshot::load(&config.home)? {
        snapshot::Loaded::Found(snapshot) => *snapshot,
        snapshot::Loaded::Missing => Snapshot::default(),
        snapshot::Loaded::Newer { schema } => anyhow::bail!(
            "{} has format {schema}, written by a newer cohost; this cohost {} reads snapshot formats up to {}",
            config.home.join("snapshot.json").display(),
            env!("CARGO_PKG_VERSION"),
            format::SNAPSHOT_FORMAT
        ),
        snapshot::Loaded::Unusable { reason, damaged } => {
            tracing::warn!("{reason}; replaying the whole log");
            if damaged {
                notes.push(format!(
                    "{reason}; the state was rebuilt from the log alone"
                ));
            }
            Snapshot::default()
        }
    };
    let snapshot_seq = snapshot.seq;
    let (log, mut recovery) =
        EventLog::open(config.log.clone(), snapshot_seq).with_context(|| {
            format!(
                "failed to open the event log in {}",
                config.log.dir.display()
            )
        })?;

    let mut state = snapshot.state;
    state.tracker.set_config(config.tracker);
    let mut session_seqs = snapshot.session_seqs;
    let mut ring = ring::Ring::default();
    let replayed = recovery.lines.len();
    for line in std::mem::take(&mut recovery.lines) {
        match serde_json::from_str::<Event>(&line.json) {
            Ok(event) => state.apply(&event),
            // Kinds from a newer version are kept in the log and the ring but not applied.
            Err(error) => {
                tracing::warn!(seq = line.seq, %error, "an event in the log has an unknown shape")
            }
        }
        if let (Some(session), Some(session_seq)) = (&line.session, line.session_seq) {
            session_seqs.insert(session.clone(), session_seq);
        }
        ring.push(Arc::new(StoredEvent::from(line)));
    }
    let damage = damage_report(&recovery, snapshot_seq, &config.log.quarantine, notes);
    if let Some(damage) = &damage {
        log_damage(damage);
    }
    // Above every seq the log or the snapshot may have used: a seq a client has seen is
    // never given to another event.
    let seq = recovery.head.max(snapshot_seq);
    let store = Arc::new(Store {
        ring: RwLock::new(ring),
        reader: log.reader(),
        head: AtomicU64::new(seq),
        streaming: Mutex::default(),
    });
    let (tx, rx) = mpsc::channel(INPUT_CAPACITY);
    let (bus, _) = broadcast::channel(BROADCAST_CAPACITY);
    let state = Arc::new(RwLock::new(state));
    let info = StartInfo {
        head: seq,
        snapshot_seq,
        replayed,
        truncated_bytes: recovery.truncated_bytes,
        damage: damage.clone(),
    };
    let mut core = Core {
        config,
        log,
        store: Arc::clone(&store),
        state: Arc::clone(&state),
        bus: bus.clone(),
        seq,
        session_seqs,
    };
    let mut first = vec![Entry::stored(
        None,
        EventKind::DaemonStarted(daemon_info()),
        None,
    )];
    if let Some(damage) = damage {
        first.push(Entry::stored(None, EventKind::LogDamaged(damage), None));
    }
    let started = core.write_batch(first);
    if let Err(error) = started {
        anyhow::bail!("failed to write to the event log: {error}");
    }
    let thread = std::thread::Builder::new()
        .name("cohost-core".into())
        .spawn(move || core.run(rx))
        .context("failed to start the core thread")?;
    Ok((
        CoreHandle {
            tx,
            store,
            state,
            bus,
        },
        thread,
        info,
    ))
}

pub fn daemon_info() -> DaemonInfo {
    DaemonInfo {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

type Reply = oneshot::Sender<Result<u64, CoreError>>;

/// One entry of a batch: an event to store (with its caller's reply) or a live-only one.
struct Entry {
    session: Option<String>,
    kind: EventKind,
    reply: Option<Reply>,
    ephemeral: bool,
}

impl Entry {
    fn stored(session: Option<String>, kind: EventKind, reply: Option<Reply>) -> Self {
        Entry {
            session,
            kind,
            reply,
            ephemeral: false,
        }
    }
}

/// One session's instances as a batch leaves them (see `handle_batch`).
#[derive(Default)]
struct BatchInstances {
    keys: HashSet<String>,
    reported: HashSet<String>,
    tokenless_added: Vec<(String, String)>,
}

impl Core {
    fn run(mut self, mut rx: mpsc::Receiver<CoreInput>) {
        let mut shutdown_reply = None;
        'outer: while let Some(first) = rx.blocking_recv() {
            let mut batch = Vec::new();
            let mut tick = false;
            let mut next = Some(first);
            while let Some(input) = next {
                match input {
                    CoreInput::Append {
                        session,
                        kind,
                        reply,
                    } => batch.push(Entry::stored(session, kind, Some(reply))),
                    CoreInput::Publish { session, kind } => batch.push(Entry {
                        session,
                        kind,
                        reply: None,
                        ephemeral: true,
                    }),
                    CoreInput::Tick => tick = true,
                    CoreInput::Shutdown { reply } => {
                        shutdown_reply = Some(reply);
                        break;
                    }
                }
                next = if batch.len() < MAX_BATCH {
                    rx.try_recv().ok()
                } else {
                    None
                };
            }
            if tick {
                let due = self
                    .state
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .tracker
                    .due(now_ms());
                batch.extend(
                    due.into_iter()
                        .map(|(session, kind)| Entry::stored(Some(session), kind, None)),
                );
            }
            if !batch.is_empty() {
                self.handle_batch(batch);
            }
            if shutdown_reply.is_some() {
                break 'outer;
            }
        }
        // Inputs that raced the shutdown are refused rather than dropped silently.
        rx.close();
        while let Ok(input) = rx.try_recv() {
            if let CoreInput::Append { reply, .. } = input {
                let _ = reply.send(Err(CoreError::ShuttingDown));
            }
        }
        if let Err(error) = self.write_batch(vec![Entry::stored(
            None,
            EventKind::DaemonStopped(daemon_info()),
            None,
        )]) {
            tracing::error!(%error, "failed to write daemon.stopped");
        }
        if let Err(error) = self.log.sync() {
            tracing::error!(%error, "failed to sync the event log on shutdown");
        }
        self.save_snapshot();
        tracing::debug!("core thread exited: shutdown");
        if let Some(reply) = shutdown_reply {
            let _ = reply.send(());
        }
    }

    /// Refuses, before anything is written, events that repeat a stored turn, item or approval
    /// (a backfill, a replay), and reports for new instances beyond the per-session cap unless
    /// a finished instance can make room: it is pruned first (`agent.pruned`, logged right
    /// before the report), seen ones before unseen ones, the least recently updated first.
    fn handle_batch(&mut self, batch: Vec<Entry>) {
        let mut accepted = Vec::with_capacity(batch.len());
        {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            let max_instances = state.tracker.config().max_instances;
            // Keys admitted earlier in this same batch are duplicates too.
            let mut batch_keys = std::collections::HashSet::new();
            // Each session's instance keys as this batch leaves them, the keys it reported, and
            // the token-less ones it added (`(key, agent)`).
            let mut instances: HashMap<String, BatchInstances> = HashMap::new();
            for entry in batch {
                let refusal = match (&entry.session, &entry.kind) {
                    (Some(session), EventKind::AgentUpdated(update)) => {
                        let seen =
                            instances
                                .entry(session.clone())
                                .or_insert_with(|| BatchInstances {
                                    keys: state.tracker.instance_keys(session),
                                    ..BatchInstances::default()
                                });
                        let key = update.key();
                        let mut refusal = None;
                        if !seen.keys.contains(&key) {
                            let mut victims = Vec::new();
                            {
                                let skip =
                                    |k: &str| !seen.keys.contains(k) || seen.reported.contains(k);
                                if update.tokenless {
                                    // Bounded per source (the agent name), then per session.
                                    let present: Vec<(String, String)> = state
                                        .tracker
                                        .tokenless(session)
                                        .into_iter()
                                        .filter(|(k, _)| seen.keys.contains(k))
                                        .chain(seen.tokenless_added.iter().cloned())
                                        .collect();
                                    let same_agent =
                                        present.iter().filter(|(_, a)| *a == update.agent).count();
                                    let bound = if same_agent >= tracker::MAX_TOKENLESS_PER_AGENT {
                                        Some((
                                            Some(update.agent.as_str()),
                                            format!(
                                                "{} per agent; this one is `{}`",
                                                tracker::MAX_TOKENLESS_PER_AGENT,
                                                update.agent
                                            ),
                                            tracker::MAX_TOKENLESS_PER_AGENT,
                                        ))
                                    } else if present.len() >= tracker::MAX_TOKENLESS_PER_SESSION {
                                        Some((
                                            None,
                                            "in all".to_string(),
                                            tracker::MAX_TOKENLESS_PER_SESSION,
                                        ))
                                    } else {
                                        None
                                    };
                                    if let Some((agent, scope, max)) = bound {
                                        match state.tracker.tokenless_victim(session, agent, skip) {
                                            Some(victim) => victims.push(victim),
                                            None => {
                                                refusal = Some(CoreError::TooManyTokenless {
                                                    session: session.clone(),
                                                    scope,
                                                    max,
                                                });
                                            }
                                        }
                                    }
                                }
                                let left = seen.keys.len() - victims.len();
                                if refusal.is_none() && left >= max_instances {
                                    let skip_also =
                                        |k: &str| skip(k) || victims.iter().any(|v| v == k);
                                    match state
                                        .tracker
                                        .eviction_candidate(session, skip_also)
                                        .or_else(|| {
                                            state.tracker.tokenless_victim(session, None, skip_also)
                                        }) {
                                        Some(victim) => victims.push(victim),
                                        None => {
                                            refusal = Some(CoreError::TooManyInstances {
                                                session: session.clone(),
                                                max: max_instances,
                                            });
                                        }
                                    }
                                }
                            }
                            if refusal.is_none() {
                                for victim in victims {
                                    seen.keys.remove(&victim);
                                    accepted.push(Entry::stored(
                                        Some(session.clone()),
                                        EventKind::AgentPruned(InstanceRef { key: victim }),
                                        None,
                                    ));
                                }
                                if update.tokenless {
                                    seen.tokenless_added
                                        .push((key.clone(), update.agent.clone()));
                                }
                            }
                        }
                        if refusal.is_none() {
                            seen.keys.insert(key.clone());
                            seen.reported.insert(key);
                        }
                        refusal
                    }
                    (Some(session), kind)
                        if !entry.ephemeral
                            && (state.sessions.is_duplicate(session, kind)
                                || sessions::dedupe_key(kind).is_some_and(|key| {
                                    !batch_keys.insert(format!("{session}\0{key}"))
                                })) =>
                    {
                        Some(CoreError::Duplicate)
                    }
                    _ => None,
                };
                match refusal {
                    Some(error) => {
                        if let Some(reply) = entry.reply {
                            let _ = reply.send(Err(error));
                        }
                    }
                    None => accepted.push(entry),
                }
            }
        }
        if accepted.is_empty() {
            return;
        }
        if let Err(error) = self.write_batch(accepted) {
            tracing::error!(%error, "failed to append to the event log");
        }
    }

    /// Sequences, writes, applies, publishes and acknowledges a batch. On a write error every
    /// reply gets the error and the counters are rolled back, so seqs stay contiguous.
    fn write_batch(&mut self, batch: Vec<Entry>) -> Result<(), String> {
        let now = now_ms();
        let saved_seq = self.seq;
        let mut saved_session_seqs: Vec<(String, Option<u64>)> = Vec::new();
        let mut buf = Vec::with_capacity(batch.len() * 256);
        // (event, its line, whether it is stored) in batch order.
        let mut events = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        let mut batch: std::collections::VecDeque<Entry> = batch.into();
        let mut notified = notify::BatchSeen::default();
        while let Some(entry) = batch.pop_front() {
            if entry.ephemeral {
                let mut kind = entry.kind;
                if let EventKind::ItemDelta(delta) = &mut kind
                    && delta.kind == "agentMessage"
                {
                    delta.snapshot = false;
                    delta.offset = Some(self.store.streaming().delta(
                        entry.session.as_ref(),
                        delta,
                        self.seq,
                    ));
                }
                let line = ephemeral_line(now, entry.session.as_ref(), &kind);
                let event = Event {
                    seq: self.seq,
                    ts: now,
                    session: entry.session,
                    session_seq: None,
                    kind,
                };
                events.push((event, line, false));
                continue;
            }
            self.seq += 1;
            let session_seq = entry.session.as_ref().map(|session| {
                let counter = self.session_seqs.entry(session.clone()).or_insert(0);
                saved_session_seqs.push((session.clone(), Some(*counter).filter(|n| *n > 0)));
                *counter += 1;
                *counter
            });
            let event = Event {
                seq: self.seq,
                ts: now,
                session: entry.session,
                session_seq,
                kind: entry.kind,
            };
            // The notification this event calls for is stored right after it, in this batch.
            let derived = {
                let state = self.state.read().unwrap_or_else(|e| e.into_inner());
                notify::derive(
                    &state,
                    &mut notified,
                    event.seq,
                    event.session.as_deref(),
                    &event.kind,
                )
            };
            if let Some(notification) = derived {
                batch.push_front(Entry::stored(
                    event.session.clone(),
                    EventKind::Notification(notification),
                    None,
                ));
            }
            // Serializing our own types into a Vec cannot fail.
            let json = serde_json::to_string(&event).unwrap_or_default();
            log_line::encode(&json, &mut buf);
            events.push((event, json, true));
            replies.push(entry.reply);
        }
        if !buf.is_empty()
            && let Err(error) = self.log.append(&buf)
        {
            self.seq = saved_seq;
            for (session, previous) in saved_session_seqs.into_iter().rev() {
                match previous {
                    Some(n) => {
                        self.session_seqs.insert(session, n);
                    }
                    None => {
                        self.session_seqs.remove(&session);
                    }
                }
            }
            let message = error.to_string();
            for reply in replies.into_iter().flatten() {
                let _ = reply.send(Err(CoreError::Storage(message.clone())));
            }
            return Err(message);
        }
        let published: Vec<Arc<StoredEvent>> = {
            let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
            events
                .into_iter()
                .map(|(event, json, stored)| {
                    if stored {
                        state.apply(&event);
                        self.store
                            .streaming()
                            .stored(event.session.as_ref(), &event.kind);
                    }
                    Arc::new(StoredEvent {
                        seq: event.seq,
                        session: event.session,
                        session_seq: event.session_seq,
                        json: json.into(),
                        ephemeral: !stored,
                    })
                })
                .collect()
        };
        let stored: Vec<Arc<StoredEvent>> = published
            .iter()
            .filter(|event| !event.ephemeral)
            .cloned()
            .collect();
        // Each stored event becomes readable right before it is broadcast, in batch order: a
        // subscriber that finds a stored event in the store has then already been sent every
        // live-only event published before it.
        for event in &published {
            if !event.ephemeral {
                self.store.push(std::slice::from_ref(event));
            }
            // No subscriber is not an error.
            let _ = self.bus.send(Arc::clone(event));
        }
        for (reply, event) in replies.into_iter().zip(&stored) {
            if let Some(reply) = reply {
                let _ = reply.send(Ok(event.seq));
            }
        }
        if self.log.wants_roll() {
            self.roll();
        }
        Ok(())
    }

    fn roll(&mut self) {
        if let Err(error) = self.log.roll(self.seq + 1) {
            tracing::error!(%error, "failed to start a new log segment");
            return;
        }
        if self.save_snapshot()
            && let Err(error) = self.log.apply_retention(self.seq)
        {
            tracing::error!(%error, "failed to apply log retention");
        }
    }

    fn save_snapshot(&self) -> bool {
        let snapshot = Snapshot {
            schema: SCHEMA_VERSION,
            seq: self.seq,
            session_seqs: self.session_seqs.clone(),
            state: self.state.read().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        match snapshot.save(&self.config.home) {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(%error, "failed to write the state snapshot");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use event_log::FsyncPolicy;

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
