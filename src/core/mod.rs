//! The core: the single writer that orders, stores and publishes every event.
//!
//! All producers send [`CoreInput`]s into one bounded channel. One dedicated thread drains it in
//! batches (an append that finds the core idle is handled by its own caller instead, as a batch
//! of one: `inputs.rs`; the core is a lock, so there is still one writer) and, for each batch:
//! assigns the global `seq` and per-session `session_seq` (the only place either is assigned),
//! appends the serialized lines to the [`event_log`] in one write (synced per the fsync
//! policy), applies them to the [`tracker`], pushes them into the in-memory ring, broadcasts
//! them, and only then acknowledges them. A subscriber can therefore always find a broadcast
//! event in the ring or the log.
//!
//! Readers never talk to the core: they read the tracker through a shared lock and events
//! through [`Store`], which serves recent events from the ring and older ones from disk.
//!
//! `inputs.rs` is who runs the core, `writer.rs` the core itself, `store.rs` and `streaming.rs`
//! what readers read, `damage.rs` what a damaged log reports; this file holds the handle and
//! the types they share.

mod damage;
pub mod event_log;
#[cfg(test)]
mod fault_tests;
pub mod format;
#[cfg(test)]
mod guard_tests;
pub mod home_lock;
mod inputs;
#[cfg(test)]
mod lead_tests;
pub mod log_line;
pub mod notify;
#[cfg(test)]
mod panic_tests;
pub mod private_file;
mod ring;
pub mod sessions;
mod snapshot;
mod store;
mod streaming;
pub mod tasks;
pub mod tracker;
mod writer;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::protocol::{Event, EventKind};
pub use damage::{Verification, damage_report, verify};
use event_log::{LogConfig, LogLine};
pub use ring::{RING_BYTES, RING_CAPACITY};
use sessions::Sessions;
pub use snapshot::Snapshot;
pub use store::{ReadPage, SessionPage, SessionWindow, Store, gaps_between};
pub use streaming::Streaming;
use tracker::{Tracker, TrackerConfig};
pub use writer::{StartInfo, daemon_info, start};

/// Inputs queued for the core thread. Bounded so that a flood of reports turns into a visible
/// `overloaded` error instead of unbounded memory; 8192 is ~100 ms of the target ingest rate.
pub const INPUT_CAPACITY: usize = 8192;
/// Live events buffered per subscriber before it lags and falls back to the store.
pub const BROADCAST_CAPACITY: usize = 4096;

/// How often the tracker is asked for due aging (stale, prune) events.
pub const TICK_INTERVAL: Duration = Duration::from_secs(1);

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A core in `home` (its log in `log/`, 1 MiB segments, default tracker), for tests in and out
/// of the core.
#[cfg(test)]
pub(crate) fn started_for_tests(
    home: &std::path::Path,
    fsync: event_log::FsyncPolicy,
) -> (CoreHandle, std::thread::JoinHandle<()>) {
    let (core, thread, _) = start(CoreConfig {
        home: home.to_path_buf(),
        log: LogConfig {
            dir: home.join("log"),
            quarantine: home.join("quarantine.jsonl"),
            segment_bytes: 1 << 20,
            retain_bytes: 1 << 24,
            fsync,
        },
        tracker: tracker::TrackerConfig::default(),
    })
    .unwrap();
    (core, thread)
}

/// A caught panic's message (what `panic!` was given), for the log and the daemon's exit error.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
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
        view.name = self.sessions.name_of(id).unwrap_or_default();
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
    /// A batch panicked: the core takes no more events and the daemon stops with an error
    /// (its log says why). An event refused this way may have been written before the panic.
    #[error(
        "the daemon's event writer failed and cohost is stopping (its log says why); this event may or may not have been recorded"
    )]
    Failed,
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
    /// Writing the log failed; nothing of the batch was applied. Every caller of the batch gets
    /// the same cause (hence the `Arc`); the service logs its chain and answers `storage_error`.
    #[error("the event log could not be written: {0}")]
    Storage(#[source] Arc<StorageError>),
    /// The event repeats a turn, item or approval already stored; it was not logged again.
    #[error("the event was already recorded")]
    Duplicate,
    /// The append's [`Guard`] did not hold when the core admitted it; nothing was logged.
    #[error("the event no longer applies: a cohost session reports that instance now")]
    Superseded,
}

/// Why a batch could not be appended to the event log: where, and the I/O error.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", dir.display())]
pub struct StorageError {
    /// The log's directory (the active segment is its newest file).
    pub dir: PathBuf,
    #[source]
    pub source: std::io::Error,
}

pub enum CoreInput {
    /// Sequence, store, apply and publish one event.
    Append {
        session: Option<String>,
        kind: EventKind,
        /// A condition checked when the event is admitted, against the state as the batch
        /// leaves it; when it fails the event is refused (`CoreError::Superseded`).
        guard: Guard,
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

/// A condition the core checks at the moment it admits an append, so that a decision a
/// producer took on what it read earlier cannot undo what another producer logged in between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Guard {
    /// Always admitted.
    #[default]
    None,
    /// An `agent.pruned` admitted only while the instance it names is not reported by a hosted
    /// (or adopted) session: a watcher removing its own instance never removes the one a
    /// session reported under the same key a moment before (an adoption's hand-over).
    NotHosted,
}

/// The cheap, clonable handle every surface uses.
#[derive(Clone)]
pub struct CoreHandle {
    tx: mpsc::Sender<CoreInput>,
    shared: Arc<inputs::Shared>,
    pub store: Arc<Store>,
    pub state: Arc<RwLock<State>>,
    bus: broadcast::Sender<Arc<StoredEvent>>,
}

impl CoreHandle {
    /// Reads the state under its lock. Keep the closure short: the core waits for it.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Broadcasts a live-only event. Dropped (not queued) when the core is overloaded: deltas
    /// are a convenience, the completed item carries the whole text.
    pub fn publish(&self, session: Option<String>, kind: EventKind) {
        let _ = self
            .shared
            .send(&self.tx, CoreInput::Publish { session, kind });
    }

    /// Queues an event and waits until it is durable and published. Returns its seq.
    pub async fn append(&self, session: Option<String>, kind: EventKind) -> Result<u64, CoreError> {
        self.append_guarded(session, kind, Guard::None).await
    }

    /// [`append`](Self::append), admitted only if `guard` holds when the core takes it.
    pub async fn append_guarded(
        &self,
        session: Option<String>,
        kind: EventKind,
        guard: Guard,
    ) -> Result<u64, CoreError> {
        let (reply, rx) = oneshot::channel();
        self.shared
            .append(&self.tx, (session, kind, guard), reply)?;
        // Every reply is sent, refusals and shutdown's included, except those of a batch that
        // panicked: dropped as it unwound, before the failure is marked.
        rx.await.map_err(|_| CoreError::Failed)?
    }

    /// Resolves once a batch panicked and the core took no more events (`inputs`).
    pub fn failed(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.shared.failed().cancelled_owned()
    }

    /// Why the core failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure().map(str::to_string)
    }

    /// How many appends their callers handled themselves (`inputs`).
    #[cfg(test)]
    pub(crate) fn led(&self) -> usize {
        self.shared.led.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Plants a panic in the next batch, right after its write (`panic_tests`).
    #[cfg(test)]
    pub(crate) fn plant_panic(&self) {
        self.shared.plant_panic();
    }

    /// Live events from now on. Pair with [`Store::read_after`] to resume from a cursor.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.bus.subscribe()
    }

    pub(crate) fn tick(&self) {
        // A full queue already has work; the next tick will catch up.
        let _ = self.shared.send(&self.tx, CoreInput::Tick);
    }

    /// Asks the core thread to write `daemon.stopped`, sync and snapshot, and waits for it.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(CoreInput::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}
