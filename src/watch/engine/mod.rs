//! The watcher engine, shared by every agent's [`Format`]: discovery, incremental reads,
//! checkpoints, liveness, placement in tmux, hosted-session dedup, emission through the core,
//! and the evidence `explain` shows.
//!
//! One thread (`cohost-watch`) owns all of it and sleeps on one channel. Wake-ups come from:
//! - inotify (`notify`), one non-recursive watch per directory under each format's roots (new
//!   directories get theirs when they appear; a root that does not exist yet is waited for
//!   from its nearest existing ancestor), and on the directories of [`Format::files`];
//! - a pidfd per agent process (the kernel says when it exits; no polling);
//! - timers, armed only while they have work: the checkpoint save (2 s after a change), the
//!   liveness check (5 s, only for threads in a turn whose process is not known yet or has no
//!   pidfd), the rescan of directories the inotify limit left unwatched (30 s).
//!
//! Nothing reads a file while nothing changes.
//!
//! Reads: each [`FileKind::Lines`] file is read from its byte offset to its end; the bytes
//! after the last newline wait for the rest of their line. The first read of a file is bounded
//! (see [`WatchLimits`]): its first line (up to `head_bytes`: Codex's `session_meta`, Claude's
//! `ai-title`) and its last `tail_bytes`; at start-up only files modified in the last
//! `recent` are read that way, older ones are registered at their size and read from there if
//! they ever grow. [`FileKind::Snapshot`] files are read whole (bounded) on change; their
//! removal is news. [`FileKind::Database`] files are polled through their format's follower
//! when the database or its `-wal` changes.
//!
//! Checkpoints (`$COHOST_HOME/watch/checkpoint.json`): every file read so far, with its inode,
//! the offset after its last complete line and its decoder's state, plus every thread's state
//! and evidence. A restart resumes each file there and compares with the tracker's state (which
//! the event log rebuilt), so nothing is lost and nothing is emitted twice.
//!
//! Emission: an observation changes a thread's state; the thread becomes one `agent.updated`
//! (key `agent:threadId`, `source: watcher:<agent>`) in the tmux session the engine places it
//! in, only when its status, title, prompt, pane, liveness or session changed (a move appends
//! `agent.pruned` in the old session first). During the start-up catch-up observations fold
//! silently and each thread is emitted once at the end, and only if its process lives, the
//! tracker already had it, or one of its files was written in the last ten minutes.
//!
//! This file holds the [`WatchHandle`] the service uses, the engine's state and its run loop;
//! each concern has its file: `files` (watches, pending roots, rescan, catch-up), `reading`
//! (registration, reads, snapshots, databases) over `lines` (the line buffer and the first-read
//! plan), `checkpoint`, `thread` (a thread's state and how an observation changes it),
//! `processes` (which process runs a thread), `liveness` (exits, `/proc` checks, tool child
//! processes), `placement` (pane, cwd session, hosted dedup) and `emit` (what the tracker is
//! given, and the explain view). The decisions are pure functions over plain data, unit-tested
//! on recorded inputs; the engine gathers the facts (files, `/proc`, tmux) and acts.

mod checkpoint;
mod emit;
mod files;
mod liveness;
#[cfg(test)]
mod panic_tests;
mod placement;
mod processes;
mod read_plan;
mod reading;
mod thread;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use checkpoint::FileCheckpoint;
use reading::FileState;
use thread::Thread;

use super::format::{FileKind, Format, Observation, WatchEnv, WatchedAgent};
use crate::core::CoreHandle;
use crate::protocol::{AgentUpdate, ExplainView, WatchRootView, WatchStats, WatchedView};
use crate::tmux::{PaneInfo, SessionCache, SessionList};

/// The bounds and intervals of the engine. The defaults are what `serve` uses.
#[derive(Debug, Clone)]
pub struct WatchLimits {
    /// The first read of a file takes at most its first line, up to this many bytes: 64 KiB
    /// holds Codex's `session_meta` (≈20 kB of instructions) and Claude's `ai-title`.
    pub head_bytes: u64,
    /// … and at most its last this many bytes: 256 KiB holds the current turn of any transcript
    /// observed (a turn's lines are a few kB each; tool results are the large ones).
    pub tail_bytes: u64,
    /// At start-up, files not modified for this long are not read, only registered at their
    /// size (a day: an agent left at an approval overnight still writes its session file).
    pub recent: Duration,
    /// How often threads in a turn whose process is unknown (or has no pidfd) are checked.
    pub liveness_interval: Duration,
    /// How often directories the inotify limit left unwatched are re-listed.
    pub rescan_interval: Duration,
    /// How long after a change the checkpoint is saved.
    pub checkpoint_delay: Duration,
    /// Pretend the inotify limit is this many watches (tests of the degraded mode).
    pub max_watches: Option<usize>,
}

impl Default for WatchLimits {
    fn default() -> Self {
        WatchLimits {
            head_bytes: 64 * 1024,
            tail_bytes: 256 * 1024,
            recent: Duration::from_secs(24 * 3600),
            liveness_interval: Duration::from_secs(5),
            rescan_interval: Duration::from_secs(30),
            checkpoint_delay: Duration::from_secs(2),
            max_watches: None,
        }
    }
}

/// What `serve` starts the watchers with.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub agents: Vec<WatchedAgent>,
    pub env: WatchEnv,
    /// `$COHOST_HOME/watch`: the checkpoint.
    pub state_dir: PathBuf,
    pub limits: WatchLimits,
}

/// Messages into the engine thread. The channel is bounded; a file event that does not fit
/// sets [`Shared::overflow`] and the engine re-checks every known file once (nothing is lost,
/// the files are on disk).
enum Msg {
    Fs(notify::Result<notify::Event>),
    Exited(u32),
    /// What an agent reported of itself (Claude's hooks, through the service).
    Report(WatchedAgent, Box<Observation>),
    /// Place thread `key` again and emit it as if it had never been shown (a session started
    /// or stopped driving it: see [`WatchHandle::replace`]).
    Replace(String),
    Stop,
    /// A test's panic, planted in the engine thread (`panic_tests`).
    #[cfg(test)]
    Panic,
}

/// Room for bursts of file events (a `git checkout` in a watched tree, many agents at once)
/// without dropping to the overflow re-check.
const CHANNEL_CAPACITY: usize = 4096;
/// How long after a database change the settle read comes (see `Engine::db_settle`).
const DB_SETTLE: Duration = Duration::from_millis(500);

/// Counters and the explain view, shared with the service.
#[derive(Default)]
struct Shared {
    wakeups: AtomicU64,
    timer_wakeups: AtomicU64,
    bytes_read: AtomicU64,
    file_reads: AtomicU64,
    proc_scans: AtomicU64,
    events: AtomicU64,
    overflow: AtomicBool,
    view: Mutex<SharedView>,
    /// The engine thread's panic, once it panicked: the watchers stopped (`WatchHandle::failure`).
    failure: std::sync::OnceLock<String>,
}

#[derive(Default)]
struct SharedView {
    agents: Vec<String>,
    roots: Vec<WatchRootView>,
    files_known: u64,
    watched_dirs: u64,
    unwatched_dirs: u64,
    catch_up_ms: u64,
    caught_up: bool,
    instances: HashMap<String, WatchedView>,
}

/// The service's handle on the watchers: the explain data, the counters, and stop.
#[derive(Clone, Default)]
pub struct WatchHandle {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    /// The agents watched.
    agents: Vec<WatchedAgent>,
    shared: Arc<Shared>,
    tx: SyncSender<Msg>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl WatchHandle {
    /// No watcher runs (`--no-watchers`).
    pub fn disabled() -> Self {
        WatchHandle { inner: None }
    }

    /// Starts the engine thread: it catches up (tails only) and then follows. Returns at once.
    pub fn start(
        config: WatchConfig,
        core: CoreHandle,
        tmux: Arc<SessionCache>,
    ) -> anyhow::Result<WatchHandle> {
        if config.agents.is_empty() {
            return Ok(WatchHandle::disabled());
        }
        let formats: Vec<Box<dyn Format>> = config
            .agents
            .iter()
            .filter_map(|agent| super::format_for(*agent))
            .collect();
        let agents = formats.iter().map(|f| f.agent()).collect();
        let shared = Arc::new(Shared::default());
        let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL_CAPACITY);
        let watcher = {
            let tx = tx.clone();
            let shared = Arc::clone(&shared);
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Opens and closes (ours included) are not changes.
                if let Ok(event) = &event
                    && matches!(event.kind, notify::EventKind::Access(_))
                {
                    return;
                }
                if let Err(TrySendError::Full(_)) = tx.try_send(Msg::Fs(event)) {
                    shared.overflow.store(true, Ordering::Release);
                }
            })
        };
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(error) => {
                tracing::warn!(%error, "no inotify watcher: the watchers rescan their roots every {:?} instead", config.limits.rescan_interval);
                None
            }
        };
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("the watchers need a tokio runtime"))?;
        let mut engine = Engine::new(config, formats, core, tmux, runtime, watcher, tx.clone());
        engine.shared = Arc::clone(&shared);
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("cohost-watch".into())
                .spawn(move || {
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        engine.run(rx)
                    }));
                    if let Err(payload) = ran {
                        let message = crate::core::panic_message(payload.as_ref());
                        tracing::error!(panic = %message, "the watchers' engine panicked; the watchers stopped until cohost restarts");
                        let _ = shared.failure.set(message);
                    }
                })?
        };
        Ok(WatchHandle {
            inner: Some(Arc::new(Inner {
                agents,
                shared,
                tx,
                thread: Mutex::new(Some(thread)),
            })),
        })
    }

    /// The engine thread's panic message, if it panicked (the watchers stopped), for
    /// `/api/health` and `cohost doctor` beside the daemon's tasks.
    pub fn failure(&self) -> Option<String> {
        self.inner.as_ref()?.shared.failure.get().cloned()
    }

    /// Plants a panic in the engine thread (`panic_tests`).
    #[cfg(test)]
    fn plant_panic(&self) {
        let inner = self.inner.as_ref().expect("the watchers run");
        inner.tx.send(Msg::Panic).unwrap();
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Saves the checkpoint and stops the thread.
    pub async fn stop(&self) {
        let Some(inner) = &self.inner else { return };
        let _ = inner.tx.send(Msg::Stop);
        let thread = inner
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Gives the engine what `agent` reported of one of its threads itself (a Claude hook's
    /// status: see [`crate::watch::claude::hook_observation`]): the thread's status from now
    /// on, over any record its files wrote before. `false` when no watcher of `agent` runs, or
    /// the engine's queue is full (the report is then dropped: the files still say it later).
    pub fn report(&self, agent: WatchedAgent, observation: Observation) -> bool {
        let Some(inner) = &self.inner else {
            return false;
        };
        inner.agents.contains(&agent)
            && inner
                .tx
                .try_send(Msg::Report(agent, Box::new(observation)))
                .is_ok()
    }

    /// A cohost session started driving thread `key` (an adoption), or stopped (given back):
    /// the engine places it again and emits what it shows now, as if it had never emitted it —
    /// nothing while a session drives it, the watched instance again once none does. Returns at
    /// once; the engine does it on its thread.
    pub fn replace(&self, key: &str) {
        if let Some(inner) = &self.inner
            && let Err(error) = inner.tx.try_send(Msg::Replace(key.to_string()))
        {
            tracing::warn!(key, %error, "the watcher was not told to place an instance again");
        }
    }

    /// What the watcher knows of thread `key` (`agent:threadId`), if it follows it.
    pub fn watched(&self, key: &str) -> Option<WatchedView> {
        let inner = self.inner.as_ref()?;
        let view = inner.shared.view.lock().unwrap_or_else(|e| e.into_inner());
        view.instances.get(key).cloned()
    }

    /// The counters (all zero when no watcher runs).
    pub fn stats(&self) -> WatchStats {
        let Some(inner) = &self.inner else {
            return WatchStats::default();
        };
        let shared = &inner.shared;
        let view = shared.view.lock().unwrap_or_else(|e| e.into_inner());
        WatchStats {
            agents: view.agents.clone(),
            roots: view.roots.clone(),
            files_known: view.files_known,
            wakeups: shared.wakeups.load(Ordering::Relaxed),
            timer_wakeups: shared.timer_wakeups.load(Ordering::Relaxed),
            bytes_read: shared.bytes_read.load(Ordering::Relaxed),
            file_reads: shared.file_reads.load(Ordering::Relaxed),
            proc_scans: shared.proc_scans.load(Ordering::Relaxed),
            watched_dirs: view.watched_dirs,
            unwatched_dirs: view.unwatched_dirs,
            events: shared.events.load(Ordering::Relaxed),
            instances: view.instances.len() as u64,
            catch_up_ms: view.catch_up_ms,
            caught_up: view.caught_up,
        }
    }

    /// Builds `explain` for an instance of the tracker (`update`), adding what the watcher
    /// knows of the same key.
    pub fn explain(
        &self,
        session: &str,
        key: &str,
        update: &AgentUpdate,
        updated_at: u64,
    ) -> ExplainView {
        ExplainView {
            session: session.to_string(),
            key: key.to_string(),
            agent: update.agent.clone(),
            source: update.source_name().to_string(),
            status: update.status,
            liveness: update.liveness,
            updated_at,
            watcher: self.watched(key),
            control: None,
            session_id: None,
            adopted: None,
        }
    }
}

struct Engine {
    formats: Vec<Box<dyn Format>>,
    env: WatchEnv,
    limits: WatchLimits,
    state_dir: PathBuf,
    core: CoreHandle,
    tmux: Arc<SessionCache>,
    runtime: tokio::runtime::Handle,
    watcher: Option<notify::RecommendedWatcher>,
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    /// Directories under a root, with their format (watched or not).
    dir_owner: HashMap<PathBuf, usize>,
    watched: HashSet<PathBuf>,
    unwatched: BTreeSet<PathBuf>,
    /// Roots (and single files' directories) that do not exist yet, with their format and
    /// whether they are a recursive root.
    pending: Vec<(PathBuf, usize, bool)>,
    /// Single files to follow, with their format.
    single: HashMap<PathBuf, usize>,
    /// Directories watched only for single files or pending roots (not recursive areas).
    plain_dirs: HashSet<PathBuf>,
    files: HashMap<PathBuf, FileState>,
    threads: HashMap<String, Thread>,
    /// File checkpoints not yet matched to a file.
    saved_files: HashMap<PathBuf, FileCheckpoint>,
    /// Pids with an exit watch (pidfd).
    exit_watched: HashSet<u32>,
    panes: Vec<PaneInfo>,
    panes_at: Option<Instant>,
    tmux_seen: Option<Arc<SessionList>>,
    catching_up: bool,
    /// An exit is being judged: the agent's unread files are being read first
    /// ([`Engine::read_before_exit`]), whose own exits do not start another pass.
    draining: bool,
    /// While one read's records are observed: the exited threads to emit after the last one.
    exited_emits: Option<BTreeSet<String>>,
    /// Threads whose explain view is to be rebuilt.
    view_changed: HashSet<String>,
    dirty_since: Option<Instant>,
    /// One more read of every followed database shortly after one changed: a commit that
    /// lands while a read is under way (its WAL write already reported) would otherwise wait for
    /// the agent's next write, which may never come (a failed turn is its last). Armed only by a
    /// change, so an idle machine never wakes for it.
    db_settle: Option<Instant>,
    next_liveness: Option<Instant>,
    next_rescan: Option<Instant>,
    warned_limit: bool,
}

impl Engine {
    fn new(
        config: WatchConfig,
        formats: Vec<Box<dyn Format>>,
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        runtime: tokio::runtime::Handle,
        watcher: Option<notify::RecommendedWatcher>,
        tx: SyncSender<Msg>,
    ) -> Engine {
        Engine {
            formats,
            env: config.env,
            limits: config.limits,
            state_dir: config.state_dir,
            core,
            tmux,
            runtime,
            watcher,
            tx,
            shared: Arc::new(Shared::default()),
            dir_owner: HashMap::new(),
            watched: HashSet::new(),
            unwatched: BTreeSet::new(),
            pending: Vec::new(),
            single: HashMap::new(),
            plain_dirs: HashSet::new(),
            files: HashMap::new(),
            threads: HashMap::new(),
            saved_files: HashMap::new(),
            exit_watched: HashSet::new(),
            panes: Vec::new(),
            panes_at: None,
            tmux_seen: None,
            catching_up: true,
            draining: false,
            exited_emits: None,
            view_changed: HashSet::new(),
            dirty_since: None,
            db_settle: None,
            next_liveness: None,
            next_rescan: None,
            warned_limit: false,
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        let started = Instant::now();
        self.load_checkpoint();
        self.catch_up();
        self.view_changed.extend(self.threads.keys().cloned());
        let catch_up_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            files = self.files.len(),
            threads = self.threads.len(),
            catch_up_ms,
            "watchers caught up"
        );
        {
            let mut view = self.view();
            view.catch_up_ms = catch_up_ms;
            view.caught_up = true;
        }
        self.publish_view();
        loop {
            let deadline = self.next_deadline();
            let message = match deadline {
                Some(deadline) => {
                    let wait = deadline.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Ok(message) => Some(message),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(message) => Some(message),
                    Err(_) => break,
                },
            };
            self.shared.wakeups.fetch_add(1, Ordering::Relaxed);
            let mut paths = BTreeSet::new();
            let mut exited = Vec::new();
            let mut reports = Vec::new();
            let mut replaced = Vec::new();
            let mut stop = false;
            let mut handle = |message: Msg, paths: &mut BTreeSet<PathBuf>| match message {
                Msg::Fs(Ok(event)) => paths.extend(event.paths),
                Msg::Fs(Err(error)) => tracing::warn!(%error, "file watcher error"),
                Msg::Exited(pid) => exited.push(pid),
                Msg::Report(agent, observation) => reports.push((agent, observation)),
                Msg::Replace(key) => replaced.push(key),
                Msg::Stop => stop = true,
                #[cfg(test)]
                Msg::Panic => panic!("a test's planted panic"),
            };
            match message {
                Some(message) => handle(message, &mut paths),
                None => {
                    self.shared.timer_wakeups.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Take whatever else is queued: one pass handles a burst.
            while let Ok(message) = rx.try_recv() {
                handle(message, &mut paths);
            }
            if self.shared.overflow.swap(false, Ordering::AcqRel) {
                tracing::warn!("file events overflowed; re-checking every followed file");
                paths.extend(self.files.keys().cloned());
                paths.extend(self.dir_owner.keys().cloned());
            }
            self.refresh_placements_if_tmux_changed();
            // The reports first: the files read in the same pass were written no earlier.
            for (agent, observation) in reports {
                self.report(agent, *observation);
            }
            for path in paths {
                self.check_path(&path);
            }
            for pid in exited {
                self.process_exited(pid);
            }
            for key in replaced {
                if let Some(thread) = self.threads.get_mut(&key) {
                    thread.emitted = None;
                    self.emit(&key);
                }
            }
            self.timers();
            self.publish_view();
            if stop {
                break;
            }
        }
        self.save_checkpoint();
        tracing::debug!("watch engine stopped");
    }

    fn view(&self) -> std::sync::MutexGuard<'_, SharedView> {
        self.shared.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_deadline(&self) -> Option<Instant> {
        [
            self.dirty_since.map(|at| at + self.limits.checkpoint_delay),
            self.db_settle,
            self.next_liveness,
            self.next_rescan,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn timers(&mut self) {
        let now = Instant::now();
        if self
            .dirty_since
            .is_some_and(|at| now >= at + self.limits.checkpoint_delay)
        {
            self.save_checkpoint();
        }
        if self.next_rescan.is_some_and(|at| now >= at) {
            self.rescan_unwatched();
        }
        if self.db_settle.is_some_and(|at| now >= at) {
            self.db_settle = None;
            let databases: Vec<PathBuf> = self
                .files
                .iter()
                .filter(|(_, file)| file.kind == FileKind::Database)
                .map(|(path, _)| path.clone())
                .collect();
            for path in databases {
                self.poll_database(&path);
            }
        }
        if self.next_liveness.is_some_and(|at| now >= at) {
            self.next_liveness = None;
            self.check_liveness();
        }
        self.arm_liveness();
        let rescan_needed = !self.unwatched.is_empty() || self.watcher.is_none();
        if !rescan_needed {
            self.next_rescan = None;
        } else if self.next_rescan.is_none() {
            self.next_rescan = Some(now + self.limits.rescan_interval);
        }
    }

    fn format_of_agent(&self, agent: Option<WatchedAgent>) -> Option<usize> {
        let agent = agent?;
        self.formats.iter().position(|f| f.agent() == agent)
    }

    fn mark_dirty(&mut self) {
        if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
        }
    }
}
