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

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::Watcher;
use serde::{Deserialize, Serialize};

use super::format::{
    Decoder, FileKind, Format, Locator, Observation, ProcessFacts, TableFollower, ThreadFacts,
    WatchEnv, WatchedAgent,
};
use super::procs;
use crate::core::{CoreHandle, now_ms};
use crate::protocol::{
    AgentStatus, AgentUpdate, EventKind, EvidenceView, ExplainView, InstanceRef, Liveness,
    UNPLACED_SESSION, WatchRootView, WatchStats, WatchedView, bounds,
};
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
    Stop,
}

/// Room for bursts of file events (a `git checkout` in a watched tree, many agents at once)
/// without dropping to the overflow re-check.
const CHANNEL_CAPACITY: usize = 4096;
/// Evidence entries kept per thread.
const EVIDENCE_KEPT: usize = 16;
/// The largest snapshot file read (Claude's session files are < 1 KiB).
const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;
/// A line longer than this is skipped to its newline: far beyond any record observed.
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// One `read` asks for this much.
const READ_CHUNK: usize = 64 * 1024;
/// How long after a thread's last record the slow timer keeps looking for its process.
const PROCESS_SEARCH_MS: u64 = 60_000;

/// How many equally fitting processes one thread's search weighs at most.
const MAX_FITTING: usize = 8;
/// How long after a database change the settle read comes (see `Engine::db_settle`).
const DB_SETTLE: Duration = Duration::from_millis(500);
/// The tmux pane list is re-read at most this often when a placement misses.
const PANES_MAX_AGE: Duration = Duration::from_secs(1);

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
        let thread = std::thread::Builder::new()
            .name("cohost-watch".into())
            .spawn(move || engine.run(rx))?;
        Ok(WatchHandle {
            inner: Some(Arc::new(Inner {
                shared,
                tx,
                thread: Mutex::new(Some(thread)),
            })),
        })
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
        }
    }
}

/// One followed file.
struct FileState {
    format: usize,
    kind: FileKind,
    inode: u64,
    /// Bytes read so far (including `partial`).
    offset: u64,
    /// The bytes after the last newline read.
    partial: Vec<u8>,
    /// Skipping an overlong line up to its newline.
    skipping: bool,
    /// `None` until the file is first read (files registered at their size at start-up).
    decoder: Option<Box<dyn Decoder>>,
    follower: Option<Box<dyn TableFollower>>,
    /// The follower's last error, logged once until a read succeeds or the error changes (a
    /// database being created fails on every WAL write until its schema exists).
    follower_error: Option<String>,
    /// The last snapshot's bytes' hash (an unchanged rewrite says nothing).
    snapshot_hash: Option<u64>,
}

/// One thread, as the engine knows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Thread {
    agent: Option<WatchedAgent>,
    thread_id: String,
    status: Option<AgentStatus>,
    /// The file whose status holds (see [`Observation::holds`]).
    held_by: Option<PathBuf>,
    /// The last status other files implied while the hold stood: the status once the holder
    /// lifts it without saying one (Claude's session file going `idle` after its transcript
    /// wrote the turn's end, as read in one catch-up).
    shadow: Option<AgentStatus>,
    title: Option<String>,
    prompt: Option<String>,
    cwd: Option<PathBuf>,
    /// From the records.
    pid: Option<u32>,
    /// Found in `/proc` by its format ([`Format::pick_process`]).
    found_pid: Option<u32>,
    start_time: Option<u64>,
    /// The records say it ended (session file removed).
    ended: bool,
    /// Until when (ms) the slow timer looks for the process of a thread in a turn whose process
    /// is unknown: a minute after its last record. A transcript left mid-turn by a crash is
    /// not searched for forever.
    search_until: Option<u64>,
    /// Its process and that process's parents, read when its pid became known: the pane it
    /// runs in is found through them even after it exited (a headless run that ends before
    /// the engine places it).
    #[serde(skip)]
    ancestry: Vec<u32>,
    /// Several processes fit it equally and none could be told apart yet (see
    /// `find_processes`): it is looked for even after its turn ended.
    #[serde(skip)]
    contested: bool,
    /// When a tool call opened (ms), while the records say tool-running.
    tool_since: Option<u64>,
    /// `waiting` comes from the process tree (an open tool call with no tool process under the
    /// agent, see [`Format::tools_run_as_children`]), not from a record.
    derived_wait: bool,
    /// Its process is gone.
    gone: bool,
    record_ts: Option<u64>,
    files: BTreeSet<PathBuf>,
    evidence: VecDeque<EvidenceView>,
    /// What was last appended for it (`None`: nothing in the tracker).
    emitted: Option<Emitted>,
    #[serde(skip)]
    placement: Placement,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Emitted {
    session: String,
    status: AgentStatus,
    title: Option<String>,
    prompt: Option<String>,
    pane_id: Option<String>,
    liveness: Option<Liveness>,
}

#[derive(Debug, Clone, Default, PartialEq)]
enum Placement {
    #[default]
    Unplaced,
    Pane {
        session: String,
        pane_id: String,
    },
    Cwd {
        session: String,
    },
    Suppressed {
        by: String,
    },
}

impl Thread {
    fn agent_pid(&self) -> Option<u32> {
        self.pid.or(self.found_pid)
    }

    fn liveness(&self) -> Option<Liveness> {
        if self.ended || self.gone {
            Some(Liveness::Exited)
        } else if self.agent_pid().is_some() {
            Some(Liveness::Alive)
        } else {
            Some(Liveness::Unknown)
        }
    }

    /// Whether the slow timer looks for its process: it has none yet, and it is in a turn or
    /// contested, within [`PROCESS_SEARCH_MS`] of its last record. A thread placed by its cwd
    /// meanwhile is placed in its pane once its process is found.
    fn searching(&self) -> bool {
        self.agent_pid().is_none()
            && !self.ended
            && !self.gone
            && (self.in_turn() || self.contested)
            && self.search_until.is_some_and(|until| until > now_ms())
    }

    fn in_turn(&self) -> bool {
        self.status
            .is_some_and(|s| !s.is_terminal() && s != AgentStatus::Idle)
            && !self.ended
            && !self.gone
    }

    fn push_evidence(&mut self, evidence: EvidenceView) {
        self.evidence.push_back(evidence);
        while self.evidence.len() > EVIDENCE_KEPT {
            self.evidence.pop_front();
        }
    }
}

/// Which threads [`Engine::find_processes`] looks for.
#[derive(Clone, Copy)]
enum Scope<'a> {
    All,
    /// The threads the slow timer looks for ([`Thread::searching`]).
    Searching,
    One(&'a str),
}

/// The checkpoint file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    version: u32,
    files: Vec<FileCheckpoint>,
    threads: Vec<Thread>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileCheckpoint {
    path: PathBuf,
    agent: WatchedAgent,
    inode: u64,
    /// After the last complete line.
    offset: u64,
    #[serde(default)]
    decoder: serde_json::Value,
}

const CHECKPOINT_FILE: &str = "checkpoint.json";
const CHECKPOINT_VERSION: u32 = 1;
/// The largest checkpoint read back (10,000 files and their threads fit in a few MB).
const MAX_CHECKPOINT_BYTES: u64 = 256 * 1024 * 1024;

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
            let mut stop = false;
            let mut handle = |message: Msg, paths: &mut BTreeSet<PathBuf>| match message {
                Msg::Fs(Ok(event)) => paths.extend(event.paths),
                Msg::Fs(Err(error)) => tracing::warn!(%error, "file watcher error"),
                Msg::Exited(pid) => exited.push(pid),
                Msg::Stop => stop = true,
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
            for path in paths {
                self.check_path(&path);
            }
            for pid in exited {
                self.process_exited(pid);
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

    /// Arms the liveness timer when a thread in a turn has no process yet, or one without an
    /// exit watch.
    fn arm_liveness(&mut self) {
        let needed = self.threads.values().any(|thread| {
            self.watches_tools(thread)
                || match thread.agent_pid() {
                    None => {
                        thread.searching()
                            && self
                                .format_of_agent(thread.agent)
                                .is_some_and(|f| !self.formats[f].process_names().is_empty())
                    }
                    Some(pid) => thread.in_turn() && !self.exit_watched.contains(&pid),
                }
        });
        if !needed {
            self.next_liveness = None;
        } else if self.next_liveness.is_none() {
            self.next_liveness = Some(Instant::now() + self.limits.liveness_interval);
        }
    }

    /// Whether `thread` has a tool call open (or a derived wait) whose process the slow timer
    /// looks for.
    fn watches_tools(&self, thread: &Thread) -> bool {
        (thread.status == Some(AgentStatus::ToolRunning) || thread.derived_wait)
            && thread.agent_pid().is_some()
            && !thread.gone
            && !thread.ended
            && self
                .format_of_agent(thread.agent)
                .is_some_and(|f| self.formats[f].tools_run_as_children())
    }

    /// An open tool call with no tool process under the agent is an approval waiting; one
    /// whose process appeared is running again.
    fn check_tool_processes(&mut self) {
        /// A call younger than this may not have started its process yet.
        const TOOL_START_GRACE_MS: u64 = 2000;
        let now = now_ms();
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| {
                self.watches_tools(t)
                    && (t.derived_wait
                        || t.tool_since
                            .is_some_and(|since| now.saturating_sub(since) >= TOOL_START_GRACE_MS))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return;
        }
        let tree = procs::children();
        self.shared.proc_scans.fetch_add(1, Ordering::Relaxed);
        for key in keys {
            let Some(thread) = self.threads.get(&key) else {
                continue;
            };
            let Some(pid) = thread.agent_pid() else {
                continue;
            };
            let Some(format) = self.format_of_agent(thread.agent) else {
                continue;
            };
            let names = self.formats[format].process_names();
            let tools: Vec<u32> = procs::descendants(pid, &tree)
                .into_iter()
                .filter(|child| procs::comm(*child).is_none_or(|c| !names.contains(&c.as_str())))
                .collect();
            let agent = self.formats[format].agent().as_str();
            let change = match (thread.derived_wait, tools.is_empty()) {
                (false, true) => Some((
                    AgentStatus::Waiting,
                    true,
                    format!(
                        "{agent}: a tool call is open and no tool process runs under process {pid} → waiting (an approval)"
                    ),
                )),
                (true, false) => Some((
                    AgentStatus::ToolRunning,
                    false,
                    format!(
                        "{agent}: tool process {} runs under process {pid} → tool-running",
                        tools[0]
                    ),
                )),
                _ => None,
            };
            let Some((status, derived, rule)) = change else {
                continue;
            };
            if let Some(thread) = self.threads.get_mut(&key) {
                thread.status = Some(status);
                thread.derived_wait = derived;
                thread.push_evidence(EvidenceView {
                    file: format!("/proc/{pid}"),
                    locator: None,
                    rule,
                    status: Some(status),
                    at: now_ms(),
                    record_ts: None,
                });
            }
            self.mark_dirty();
            self.emit(&key);
        }
    }

    fn format_of_agent(&self, agent: Option<WatchedAgent>) -> Option<usize> {
        let agent = agent?;
        self.formats.iter().position(|f| f.agent() == agent)
    }

    // ------------------------------------------------------------------ discovery

    fn catch_up(&mut self) {
        let mut roots = Vec::new();
        for (index, format) in self.formats.iter().enumerate() {
            for root in format.roots(&self.env) {
                roots.push((root, index, true));
            }
            for file in format.files(&self.env) {
                roots.push((file, index, false));
            }
        }
        {
            let mut view = self.view();
            view.agents = self
                .formats
                .iter()
                .map(|f| f.agent().as_str().to_string())
                .collect();
        }
        for (path, index, recursive) in roots {
            if recursive {
                if path.is_dir() {
                    self.add_tree(&path, index);
                } else {
                    self.add_pending(path, index, true);
                }
            } else {
                self.single.insert(path.clone(), index);
                match path.parent() {
                    Some(parent) if parent.is_dir() => {
                        let parent = parent.to_path_buf();
                        self.watch_plain(&parent);
                        if path.is_file() {
                            self.register(&path, index);
                        }
                    }
                    _ => {
                        self.add_pending(path, index, false);
                    }
                }
            }
        }
        // A root created while we looked.
        self.activate_pending();
        // Threads found during the catch-up: emit each once, if its process lives or the
        // tracker had it.
        self.find_processes(Scope::All);
        self.catching_up = false;
        let keys: Vec<String> = self.threads.keys().cloned().collect();
        for key in keys {
            let keep = self.threads.get(&key).is_some_and(|thread| {
                thread.emitted.is_some()
                    || (thread.agent_pid().is_some() && !thread.gone)
                    || written_lately(thread)
            });
            if keep {
                self.emit(&key);
            }
        }
        self.saved_files.clear();
        self.mark_dirty();
    }

    /// Watches `dir` and every directory below it, and registers their record files.
    fn add_tree(&mut self, dir: &Path, format: usize) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            self.dir_owner.insert(dir.clone(), format);
            self.watch_dir(&dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if file_type.is_dir() {
                    if !self.dir_owner.contains_key(&path) {
                        stack.push(path);
                    }
                } else if file_type.is_file() && !self.files.contains_key(&path) {
                    self.register(&path, format);
                }
            }
        }
    }

    /// Waits for `path` from its deepest existing ancestor; returns that ancestor.
    fn add_pending(&mut self, path: PathBuf, format: usize, recursive: bool) -> Option<PathBuf> {
        let ancestor = deepest_existing(&path);
        if let Some(dir) = &ancestor {
            self.watch_plain(dir);
        }
        if !self.pending.iter().any(|(p, _, _)| *p == path) {
            self.pending.push((path, format, recursive));
        }
        ancestor
    }

    /// Re-checks the roots that did not exist: activates those that appeared, and moves the
    /// watch down to the deepest existing ancestor of the others. A level created between our
    /// look and our watch would send no event, so it looks again until nothing moved.
    fn activate_pending(&mut self) {
        for _ in 0..16 {
            let pending = std::mem::take(&mut self.pending);
            let mut moved = false;
            for (path, format, recursive) in pending {
                if recursive && path.is_dir() {
                    tracing::info!(root = %path.display(), "a watched root appeared");
                    self.add_tree(&path, format);
                } else if !recursive && path.parent().is_some_and(Path::is_dir) {
                    if let Some(parent) = path.parent() {
                        let parent = parent.to_path_buf();
                        self.watch_plain(&parent);
                    }
                    if path.is_file() {
                        self.register(&path, format);
                    }
                } else {
                    let watched = self.add_pending(path.clone(), format, recursive);
                    // Created between our look and our watch on its parent: no event will
                    // say so, so look again (the root itself, not only its ancestors).
                    let appeared = if recursive {
                        path.is_dir()
                    } else {
                        path.parent().is_some_and(Path::is_dir)
                    };
                    moved |= appeared || deepest_existing(&path) != watched;
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn watch_plain(&mut self, dir: &Path) {
        self.plain_dirs.insert(dir.to_path_buf());
        self.watch_dir(dir);
    }

    fn watch_dir(&mut self, dir: &Path) {
        if self.watched.contains(dir) {
            return;
        }
        let over_limit = self
            .limits
            .max_watches
            .is_some_and(|max| self.watched.len() >= max);
        let result = match (&mut self.watcher, over_limit) {
            (_, true) => Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch)),
            (Some(watcher), false) => watcher.watch(dir, notify::RecursiveMode::NonRecursive),
            (None, false) => Err(notify::Error::generic("no inotify watcher")),
        };
        match result {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                self.unwatched.remove(dir);
            }
            Err(error) => {
                if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) && !self.warned_limit {
                    self.warned_limit = true;
                    tracing::warn!(
                        dir = %dir.display(),
                        watched = self.watched.len(),
                        "the inotify watch limit is reached (fs.inotify.max_user_watches): directories past it are rescanned every {:?} instead",
                        self.limits.rescan_interval
                    );
                } else if !matches!(error.kind, notify::ErrorKind::MaxFilesWatch) {
                    tracing::warn!(dir = %dir.display(), %error, "cannot watch a directory; rescanning it slowly");
                }
                self.unwatched.insert(dir.to_path_buf());
                if self.next_rescan.is_none() {
                    self.next_rescan = Some(Instant::now() + self.limits.rescan_interval);
                }
            }
        }
    }

    /// The slow rescan, only of what could not be watched.
    fn rescan_unwatched(&mut self) {
        self.next_rescan = None;
        let dirs: Vec<PathBuf> = self.unwatched.iter().cloned().collect();
        for dir in dirs {
            self.unwatched.remove(&dir);
            self.watch_dir(&dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let format = self.dir_owner.get(&dir).copied();
            for entry in entries.flatten() {
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir {
                    if let Some(format) = format
                        && !self.dir_owner.contains_key(&path)
                    {
                        self.add_tree(&path, format);
                    }
                } else {
                    self.check_path(&path);
                }
            }
        }
        if self.watcher.is_none() {
            let files: Vec<PathBuf> = self.files.keys().cloned().collect();
            for path in files {
                self.check_path(&path);
            }
            self.activate_pending();
        }
    }

    /// The format and kind of a record file, or `None` for anything else.
    fn classify(&self, path: &Path) -> Option<(usize, FileKind)> {
        let format = match self.single.get(path) {
            Some(format) => *format,
            None => *self.dir_owner.get(path.parent()?)?,
        };
        if let Some(kind) = self.formats[format].classify(path) {
            return Some((format, kind));
        }
        None
    }

    /// A database's `-wal` stands for the database.
    fn database_of(&self, path: &Path) -> Option<PathBuf> {
        let name = path.file_name()?.to_str()?;
        let db = path.with_file_name(name.strip_suffix("-wal")?);
        matches!(self.classify(&db), Some((_, FileKind::Database))).then_some(db)
    }

    /// A new file: follow it from its checkpoint, or read it (bounded), or, at start-up when it
    /// is old, register it at its size.
    fn register(&mut self, path: &Path, format: usize) {
        let Some((format, kind)) = self.classify(path).filter(|(f, _)| *f == format) else {
            return;
        };
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let saved = self
            .saved_files
            .remove(path)
            .filter(|cp| cp.inode == meta.ino());
        let mut state = FileState {
            format,
            kind,
            inode: meta.ino(),
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            decoder: None,
            follower: None,
            follower_error: None,
            snapshot_hash: None,
        };
        match (kind, saved) {
            (FileKind::Lines, Some(saved)) if saved.offset <= meta.len() => {
                state.offset = saved.offset;
                state.decoder = Some(self.formats[format].decoder(path, Some(saved.decoder)));
                // A file that grew a lot while the daemon was down: read only its tail.
                let gap = meta.len() - saved.offset;
                if gap > self.limits.tail_bytes {
                    state.offset = meta.len() - self.limits.tail_bytes;
                    state.skipping = true;
                }
                self.files.insert(path.to_path_buf(), state);
                self.read_lines(path);
            }
            (FileKind::Lines, _) => {
                let recent = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_none_or(|age| age <= self.limits.recent);
                if self.catching_up && !recent {
                    state.offset = meta.len();
                    self.files.insert(path.to_path_buf(), state);
                } else {
                    self.files.insert(path.to_path_buf(), state);
                    self.first_read(path, meta.len());
                }
            }
            (FileKind::Snapshot, saved) => {
                state.decoder =
                    Some(self.formats[format].decoder(path, saved.map(|saved| saved.decoder)));
                self.files.insert(path.to_path_buf(), state);
                self.read_snapshot(path);
            }
            (FileKind::Database, saved) => {
                state.follower =
                    self.formats[format].follower(path, saved.map(|saved| saved.decoder));
                self.files.insert(path.to_path_buf(), state);
                self.poll_database(path);
            }
        }
        self.view().files_known = self.files.len() as u64;
    }

    /// The first read of a lines file: its first line (bounded) and its tail.
    fn first_read(&mut self, path: &Path, size: u64) {
        let format = match self.files.get(path) {
            Some(file) => file.format,
            None => return,
        };
        let decoder = self.formats[format].decoder(path, None);
        let head_bytes = self.limits.head_bytes;
        let tail_bytes = self.limits.tail_bytes;
        let Some(file) = self.files.get_mut(path) else {
            return;
        };
        file.decoder = Some(decoder);
        file.partial.clear();
        if size <= tail_bytes {
            file.offset = 0;
            file.skipping = false;
            self.read_lines(path);
            return;
        }
        // The head: the first line, if it is complete within `head_bytes`.
        if let Some(head) = self.read_range(path, 0, head_bytes.min(size))
            && let Some(end) = memchr::memchr(b'\n', &head)
        {
            let mut out = Vec::new();
            if let Some(file) = self.files.get_mut(path)
                && let Some(decoder) = file.decoder.as_mut()
            {
                decoder.line(&head[..end], &Locator::Offset { offset: 0 }, &mut out);
            }
            self.observe_all(
                path,
                out.into_iter().map(|o| (Locator::Offset { offset: 0 }, o)),
            );
        }
        if let Some(file) = self.files.get_mut(path) {
            file.offset = size - tail_bytes;
            // The tail starts mid-line: skip to the first newline.
            file.skipping = true;
        }
        self.read_lines(path);
    }

    fn read_range(&self, path: &Path, from: u64, to: u64) -> Option<Vec<u8>> {
        let mut file = File::open(path).ok()?;
        self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut buf = Vec::with_capacity(usize::try_from(to.saturating_sub(from)).ok()?);
        file.take(to.saturating_sub(from))
            .read_to_end(&mut buf)
            .ok()?;
        self.shared
            .bytes_read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Some(buf)
    }

    /// Something happened at `path`: a directory appeared, a record file changed, appeared or
    /// went away.
    fn check_path(&mut self, path: &Path) {
        let meta = std::fs::symlink_metadata(path).ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            if let Some(parent) = path.parent()
                && let Some(format) = self.dir_owner.get(parent).copied()
                && !self.dir_owner.contains_key(path)
            {
                self.add_tree(path, format);
            }
            if !self.pending.is_empty() {
                self.activate_pending();
            }
            return;
        }
        if meta.is_none() && self.dir_owner.contains_key(path) {
            // A watched directory went away (its watch with it).
            self.dir_owner.remove(path);
            self.watched.remove(path);
            self.unwatched.remove(path);
            return;
        }
        if !self.pending.is_empty()
            && self
                .pending
                .iter()
                .any(|(p, _, _)| p.starts_with(path) || p.parent() == Some(path))
        {
            self.activate_pending();
        }
        let path = self.database_of(path).unwrap_or_else(|| path.to_path_buf());
        let Some(meta) = meta.filter(|m| m.is_file()).or_else(|| {
            // The `-wal` changed: the database itself is what we look at.
            std::fs::metadata(&path).ok().filter(|m| m.is_file())
        }) else {
            self.file_removed(&path);
            return;
        };
        let Some(known) = self.files.get(&path) else {
            if let Some((format, _)) = self.classify(&path) {
                self.register(&path, format);
            }
            return;
        };
        if known.inode != meta.ino() && known.kind != FileKind::Database {
            // Replaced: the old file is gone, this is a new one.
            self.file_removed(&path);
            if let Some((format, _)) = self.classify(&path) {
                self.register(&path, format);
            }
            return;
        }
        match known.kind {
            FileKind::Lines => {
                if known.decoder.is_none() {
                    // Registered at its size at start-up and growing now: its first read.
                    let size = meta.len();
                    self.first_read(&path, size);
                } else if meta.len() < known.offset {
                    tracing::info!(path = %path.display(), "a followed file was truncated; reading it again");
                    let format = known.format;
                    let decoder = self.formats[format].decoder(&path, None);
                    if let Some(file) = self.files.get_mut(&path) {
                        file.offset = 0;
                        file.partial.clear();
                        file.skipping = false;
                        file.decoder = Some(decoder);
                    }
                    self.read_lines(&path);
                } else if meta.len() > known.offset {
                    self.read_lines(&path);
                }
            }
            FileKind::Snapshot => self.read_snapshot(&path),
            FileKind::Database => {
                self.poll_database(&path);
                self.db_settle = Some(Instant::now() + DB_SETTLE);
            }
        }
    }

    fn file_removed(&mut self, path: &Path) {
        let Some(mut file) = self.files.remove(path) else {
            return;
        };
        let mut out = Vec::new();
        if let Some(decoder) = file.decoder.as_mut() {
            decoder.removed(&mut out);
        }
        self.observe_all(path, out.into_iter().map(|o| (Locator::Snapshot, o)));
        for (key, thread) in self.threads.iter_mut() {
            if thread.files.remove(path) {
                self.view_changed.insert(key.clone());
            }
        }
        self.view().files_known = self.files.len() as u64;
        self.mark_dirty();
    }

    /// Reads a lines file from its offset to its end and decodes every complete line.
    fn read_lines(&mut self, path: &Path) {
        let Some(offset) = self.files.get(path).map(|f| f.offset) else {
            return;
        };
        let Ok(mut handle) = File::open(path) else {
            return;
        };
        self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
        if handle.seek(SeekFrom::Start(offset)).is_err() {
            return;
        }
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut position = offset;
        loop {
            let n = match handle.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.shared
                .bytes_read
                .fetch_add(n as u64, Ordering::Relaxed);
            let mut observations = Vec::new();
            {
                let Some(file) = self.files.get_mut(path) else {
                    return;
                };
                let Some(decoder) = file.decoder.as_mut() else {
                    return;
                };
                let mut start = 0;
                let data = &chunk[..n];
                while let Some(rel) = memchr::memchr(b'\n', &data[start..]) {
                    let end = start + rel;
                    let line_start = position + start as u64 - file.partial.len() as u64;
                    if file.skipping {
                        file.skipping = false;
                        file.partial.clear();
                    } else if file.partial.is_empty() {
                        let at = Locator::Offset { offset: line_start };
                        let mut out = Vec::new();
                        decoder.line(&data[start..end], &at, &mut out);
                        observations.extend(out.into_iter().map(|o| (at.clone(), o)));
                    } else {
                        file.partial.extend_from_slice(&data[start..end]);
                        let line = std::mem::take(&mut file.partial);
                        let at = Locator::Offset { offset: line_start };
                        let mut out = Vec::new();
                        decoder.line(&line, &at, &mut out);
                        observations.extend(out.into_iter().map(|o| (at.clone(), o)));
                    }
                    start = end + 1;
                }
                if !file.skipping {
                    file.partial.extend_from_slice(&data[start..]);
                    if file.partial.len() > MAX_LINE_BYTES {
                        tracing::warn!(path = %path.display(), "a line longer than {MAX_LINE_BYTES} bytes; skipping it");
                        file.partial.clear();
                        file.skipping = true;
                    }
                }
                position += n as u64;
                file.offset = position;
            }
            self.observe_all(path, observations.into_iter());
        }
        self.mark_dirty();
    }

    fn read_snapshot(&mut self, path: &Path) {
        let Some(bytes) = self.read_range(path, 0, MAX_SNAPSHOT_BYTES) else {
            return;
        };
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            hasher.finish()
        };
        let mut out = Vec::new();
        {
            let Some(file) = self.files.get_mut(path) else {
                return;
            };
            if file.snapshot_hash == Some(hash) {
                return;
            }
            file.snapshot_hash = Some(hash);
            file.offset = bytes.len() as u64;
            if let Some(decoder) = file.decoder.as_mut() {
                decoder.snapshot(&bytes, &mut out);
            }
        }
        self.observe_all(path, out.into_iter().map(|o| (Locator::Snapshot, o)));
        self.mark_dirty();
    }

    fn poll_database(&mut self, path: &Path) {
        let mut out = Vec::new();
        {
            let Some(file) = self.files.get_mut(path) else {
                return;
            };
            let Some(follower) = file.follower.as_mut() else {
                return;
            };
            self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
            match follower.poll(&mut out) {
                Ok(()) => file.follower_error = None,
                Err(error) => {
                    let error = format!("{error:#}");
                    if file.follower_error.as_deref() != Some(error.as_str()) {
                        tracing::warn!(path = %path.display(), error = %error, "reading a watched database failed (logged once until it reads again)");
                    }
                    file.follower_error = Some(error);
                }
            }
        }
        self.observe_all(path, out.into_iter());
        self.mark_dirty();
    }

    // ------------------------------------------------------------------ threads

    fn observe_all(
        &mut self,
        path: &Path,
        observations: impl Iterator<Item = (Locator, Observation)>,
    ) {
        // A thread whose process has exited is emitted once, after every record of this read:
        // a record of a turn read after the exit is history, and the read's last record says how
        // the turn ended (a headless run's prompt and answer, read in one go after it exited,
        // must not show `stale` in between).
        let outer = self.exited_emits.replace(BTreeSet::new());
        for (at, observation) in observations {
            self.observe(path, at, observation);
        }
        let deferred = std::mem::replace(&mut self.exited_emits, outer).unwrap_or_default();
        for key in deferred {
            self.emit(&key);
        }
    }

    fn observe(&mut self, path: &Path, at: Locator, obs: Observation) {
        if obs.thread_id.is_empty() {
            return;
        }
        let Some(format) = self
            .files
            .get(path)
            .map(|f| f.format)
            .or_else(|| self.classify(path).map(|(format, _)| format))
        else {
            return;
        };
        let agent = self.formats[format].agent();
        let key = crate::protocol::instance_key(agent.as_str(), Some(&obs.thread_id));
        if obs.ended {
            // The agent exited (its session file is gone): what it wrote before is judged first.
            self.read_before_exit(format);
        }
        let is_new = !self.threads.contains_key(&key);
        let thread = self.threads.entry(key.clone()).or_insert_with(|| Thread {
            agent: Some(agent),
            thread_id: obs.thread_id.clone(),
            ..Thread::default()
        });
        thread.files.insert(path.to_path_buf());
        thread.search_until = Some(now_ms() + PROCESS_SEARCH_MS);
        self.view_changed.insert(key.clone());
        let mut changed = false;
        let mut rule = obs.rule.clone();
        if thread.held_by.as_deref() == Some(path) {
            thread.held_by = None;
            if let (None, Some(shadow)) = (obs.status, thread.shadow.take()) {
                changed |= thread.status != Some(shadow);
                thread.status = Some(shadow);
                rule = format!(
                    "{rule} (the hold is lifted: {} from the other files)",
                    shadow.as_str()
                );
            }
        }
        if let Some(status) = obs.status {
            if let Some(holder) = &thread.held_by {
                rule = format!(
                    "{rule} (kept aside: {} holds {})",
                    holder.display(),
                    thread.status.map(|s| s.as_str()).unwrap_or("-")
                );
                thread.shadow = Some(status);
            } else {
                changed |= thread.status != Some(status);
                if status != AgentStatus::ToolRunning {
                    thread.tool_since = None;
                } else if thread.status != Some(AgentStatus::ToolRunning) || thread.derived_wait {
                    thread.tool_since = Some(now_ms());
                }
                thread.derived_wait = false;
                thread.status = Some(status);
                thread.held_by = obs.holds.then(|| path.to_path_buf());
                thread.shadow = None;
            }
        }
        if let Some(title) = obs.title {
            changed |= thread.title.as_ref() != Some(&title);
            thread.title = Some(title);
        }
        let mut new_prompt = false;
        if let Some(prompt) = obs.last_user_prompt {
            new_prompt = thread.prompt.as_ref() != Some(&prompt);
            changed |= new_prompt;
            thread.prompt = Some(prompt);
        }
        if let Some(cwd) = obs.cwd {
            thread.cwd = Some(cwd);
        }
        let mut new_pid = None;
        if let Some(pid) = obs.pid
            && thread.pid != Some(pid)
        {
            thread.pid = Some(pid);
            thread.start_time = procs::stat(pid).map(|s| s.start_time);
            thread.gone = thread.start_time.is_none();
            thread.ancestry = procs::ancestors(pid);
            thread.ended = false;
            new_pid = Some(pid);
            changed = true;
        }
        if obs.ended {
            changed |= !thread.ended;
            thread.ended = true;
        } else if obs.status.is_some() && thread.ended && obs.pid.is_some() {
            thread.ended = false;
        }
        if obs.record_ts.is_some() {
            thread.record_ts = obs.record_ts;
        }
        let locator = serde_json::to_value(&at).ok();
        thread.push_evidence(EvidenceView {
            file: path.display().to_string(),
            locator,
            rule,
            status: obs.status,
            at: now_ms(),
            record_ts: obs.record_ts,
        });
        if let Some(pid) = new_pid {
            self.watch_exit(pid);
        }
        // A thread that appears while we follow: find its process now (one /proc pass), so its
        // first update is already placed in its pane. A thread still without one looks again
        // when its prompt arrives: the prompt on a pane's screen can tell apart processes that
        // fit it equally (see `find_processes`).
        let unfound = self
            .threads
            .get(&key)
            .is_some_and(|t| t.agent_pid().is_none() && !t.ended);
        if (is_new || new_prompt && unfound) && !self.catching_up && obs.pid.is_none() {
            self.find_processes(Scope::One(&key));
        }
        if changed || !self.catching_up {
            self.mark_dirty();
        }
        if !self.catching_up {
            let exited = self.threads.get(&key).is_some_and(|t| t.ended || t.gone);
            match self.exited_emits.as_mut() {
                Some(deferred) if exited => {
                    deferred.insert(key);
                }
                _ => self.emit(&key),
            }
        }
    }

    /// An agent of `format` exited. What it wrote before is on disk, but the file events may
    /// still be on their way — and a file it wrote last (a headless run's transcript, with its
    /// answer) may not be known as its thread's yet. Every followed file of the format with
    /// bytes not yet read is read to its end first, so the exit is judged after the last record
    /// (its real final status, not `stale`), whichever of the two the engine saw first.
    fn read_before_exit(&mut self, format: usize) {
        if self.draining {
            return;
        }
        let unread: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(_, file)| file.format == format && file.kind == FileKind::Lines)
            .filter(|(path, file)| {
                std::fs::metadata(path).is_ok_and(|meta| meta.len() > file.offset)
            })
            .map(|(path, _)| path.clone())
            .collect();
        self.draining = true;
        for path in unread {
            self.check_path(&path);
        }
        self.draining = false;
    }

    /// Asks the kernel to tell us when `pid` exits (pidfd on the tokio reactor).
    fn watch_exit(&mut self, pid: u32) {
        if self.exit_watched.contains(&pid) {
            return;
        }
        let tx = self.tx.clone();
        let spawned = {
            let _guard = self.runtime.enter();
            match procs::exit_notice(pid) {
                Some(fd) => {
                    self.runtime.spawn(async move {
                        let _ = fd.readable().await;
                        // A full channel: the engine is busy; the send waits for room.
                        let _ =
                            tokio::task::spawn_blocking(move || tx.send(Msg::Exited(pid))).await;
                    });
                    true
                }
                None => false,
            }
        };
        if spawned {
            self.exit_watched.insert(pid);
        }
    }

    fn process_exited(&mut self, pid: u32) {
        self.exit_watched.remove(&pid);
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| t.agent_pid() == Some(pid) && !t.gone)
            .map(|(k, _)| k.clone())
            .collect();
        if let Some(format) = keys
            .first()
            .and_then(|key| self.threads.get(key))
            .and_then(|thread| self.format_of_agent(thread.agent))
        {
            self.read_before_exit(format);
        }
        for key in keys {
            if let Some(thread) = self.threads.get_mut(&key) {
                thread.gone = true;
                thread.push_evidence(EvidenceView {
                    file: format!("/proc/{pid}"),
                    locator: None,
                    rule: format!("process {pid} exited (pidfd) → ended"),
                    status: None,
                    at: now_ms(),
                    record_ts: None,
                });
            }
            self.mark_dirty();
            self.emit(&key);
        }
    }

    /// Finds the processes of threads without one (by who holds their files open): every thread
    /// (the catch-up), threads in a turn (the slow timer) or one new thread.
    fn find_processes(&mut self, scope: Scope<'_>) {
        // The threads to look for, by format.
        let mut wanted: HashMap<usize, Vec<String>> = HashMap::new();
        for (key, thread) in &self.threads {
            let in_scope = match scope {
                Scope::All => true,
                Scope::Searching => thread.searching(),
                Scope::One(one) => key == one,
            };
            if thread.agent_pid().is_some() || thread.ended || !in_scope {
                continue;
            }
            let Some(format) = self.format_of_agent(thread.agent) else {
                continue;
            };
            if !self.formats[format].process_names().is_empty() {
                wanted.entry(format).or_default().push(key.clone());
            }
        }
        for (format, keys) in wanted {
            let canonical = |file: &PathBuf| file.canonicalize().unwrap_or_else(|_| file.clone());
            let files: HashSet<PathBuf> = keys
                .iter()
                .filter_map(|key| self.threads.get(key))
                .flat_map(|thread| thread.files.iter())
                .filter(|file| !self.single.contains_key(*file))
                .map(canonical)
                .collect();
            let names = self.formats[format].process_names();
            let mut cost = procs::ScanCost::default();
            let candidates = procs::list_processes(names, &files, &mut cost);
            self.shared.proc_scans.fetch_add(1, Ordering::Relaxed);
            if candidates.is_empty() {
                continue;
            }
            let agent = self.formats[format].agent();
            // Processes other live threads of this agent already have.
            let mut claimed: HashSet<u32> = self
                .threads
                .values()
                .filter(|t| t.agent == Some(agent) && !t.gone && !t.ended)
                .filter_map(Thread::agent_pid)
                .collect();
            for key in keys {
                let Some(thread) = self.threads.get(&key) else {
                    continue;
                };
                let thread_files: Vec<PathBuf> = thread.files.iter().map(canonical).collect();
                let thread_id = thread.thread_id.clone();
                let cwd = thread.cwd.clone();
                let prompt = thread.prompt.clone();
                // Every process the format would take for the thread, best first: its pick,
                // then its pick with that one taken, and so on. A holder of the thread's own
                // file is certain and ends the list; the others fit only by their cwd.
                let holds = |p: &ProcessFacts| p.holds.iter().any(|h| thread_files.contains(h));
                let mut fitting: Vec<&ProcessFacts> = Vec::new();
                let mut taken = claimed.clone();
                while fitting.len() < MAX_FITTING {
                    let facts = ThreadFacts {
                        thread_id: &thread_id,
                        cwd: cwd.as_deref(),
                        files: &thread_files,
                        claimed: &taken,
                    };
                    let Some(pid) = self.formats[format].pick_process(&facts, &candidates) else {
                        break;
                    };
                    let Some(picked) = candidates.iter().find(|p| p.pid == pid) else {
                        break;
                    };
                    if !taken.insert(pid) {
                        break;
                    }
                    fitting.push(picked);
                    if holds(picked) {
                        break;
                    }
                }
                if fitting.is_empty() {
                    continue;
                }
                let certain = fitting.first().is_some_and(|p| holds(p));
                let (picked, how) = if certain || fitting.len() == 1 {
                    let Some(picked) = fitting.first().copied() else {
                        continue;
                    };
                    let how = if certain {
                        "holds the record file open"
                    } else if picked.cwd.is_some() && picked.cwd == cwd {
                        "runs in the thread's cwd"
                    } else {
                        "is the agent above the file's holder"
                    };
                    (picked, how)
                } else {
                    // Several processes fit equally (two TUIs in one directory, whose records
                    // name no pid and which keep no file of their own open — codex's TUIs share
                    // one app-server that writes every rollout). The one whose pane shows the
                    // thread's last prompt runs it; with none or several, the process stays
                    // unknown (the thread is placed by its cwd) and is looked for again when
                    // its prompt arrives and on the slow timer, never guessed.
                    let fitting: Vec<u32> = fitting.iter().map(|p| p.pid).collect();
                    let showing: Vec<u32> = match prompt.as_deref() {
                        Some(prompt) => fitting
                            .into_iter()
                            .filter(|pid| self.pane_shows(*pid, prompt))
                            .collect(),
                        None => Vec::new(),
                    };
                    let [shown] = showing.as_slice() else {
                        if let Some(thread) = self.threads.get_mut(&key) {
                            thread.contested = true;
                        }
                        continue;
                    };
                    let Some(picked) = candidates.iter().find(|p| p.pid == *shown) else {
                        continue;
                    };
                    (
                        picked,
                        "runs in the thread's cwd and its pane shows the thread's prompt",
                    )
                };
                let pid = picked.pid;
                claimed.insert(pid);
                if let Some(thread) = self.threads.get_mut(&key) {
                    thread.contested = false;
                    thread.found_pid = Some(pid);
                    thread.ancestry = procs::ancestors(pid);
                    thread.start_time = Some(picked.start_time);
                    thread.gone = false;
                    thread.push_evidence(EvidenceView {
                        file: format!("/proc/{pid}"),
                        locator: None,
                        rule: format!(
                            "{}: process {pid} ({}) {how} → alive",
                            agent.as_str(),
                            picked.comm
                        ),
                        status: None,
                        at: now_ms(),
                        record_ts: None,
                    });
                }
                self.watch_exit(pid);
                if !self.catching_up {
                    self.emit(&key);
                }
            }
        }
    }

    fn check_liveness(&mut self) {
        self.find_processes(Scope::Searching);
        self.check_tool_processes();
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| {
                t.in_turn()
                    && t.agent_pid()
                        .is_some_and(|pid| !self.exit_watched.contains(&pid))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(thread) = self.threads.get(&key) else {
                continue;
            };
            let Some(pid) = thread.agent_pid() else {
                continue;
            };
            if !procs::alive(pid, thread.start_time) {
                self.process_exited(pid);
            }
        }
    }

    // ------------------------------------------------------------------ placement and emission

    fn refresh_placements_if_tmux_changed(&mut self) {
        let list = self.tmux.get();
        let changed = self
            .tmux_seen
            .as_ref()
            .is_none_or(|seen| !Arc::ptr_eq(seen, &list));
        if !changed {
            return;
        }
        self.tmux_seen = Some(list);
        self.panes_at = None;
        if self.catching_up {
            return;
        }
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| t.emitted.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.emit(&key);
        }
    }

    /// Whether the pane `pid` runs in shows `text` (its first line, up to 60 characters, with
    /// white space folded: a TUI wraps and indents what it echoes).
    fn pane_shows(&mut self, pid: u32, text: &str) -> bool {
        let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let needle: String = fold(text.lines().next().unwrap_or_default())
            .chars()
            .take(60)
            .collect();
        if needle.is_empty() {
            return false;
        }
        let Some(pane) = self.pane_of(pid) else {
            return false;
        };
        let tmux = self.tmux.tmux().clone();
        let pane_id = pane.pane_id.clone();
        let screen = self
            .runtime
            .block_on(async move { tmux.capture(&pane_id).await })
            .unwrap_or_default();
        fold(&screen).contains(&needle)
    }

    fn pane_of(&mut self, pid: u32) -> Option<PaneInfo> {
        self.pane_of_chain(&procs::ancestors(pid))
    }

    /// The pane whose process is the first of `chain` (a process and its parents) to run one.
    fn pane_of_chain(&mut self, chain: &[u32]) -> Option<PaneInfo> {
        if chain.is_empty() {
            return None;
        }
        let find = |panes: &[PaneInfo]| {
            chain
                .iter()
                .find_map(|pid| panes.iter().find(|pane| pane.pid == *pid).cloned())
        };
        if let Some(pane) = find(&self.panes) {
            return Some(pane);
        }
        if self.panes_at.is_some_and(|at| at.elapsed() < PANES_MAX_AGE) {
            return None;
        }
        self.refresh_panes();
        find(&self.panes)
    }

    /// Lists the panes again, unless that was done less than [`PANES_MAX_AGE`] ago.
    fn refresh_panes(&mut self) {
        if self.panes_at.is_some_and(|at| at.elapsed() < PANES_MAX_AGE) {
            return;
        }
        let tmux = self.tmux.tmux().clone();
        self.panes = self
            .runtime
            .block_on(async move { tmux.list_panes().await })
            .unwrap_or_default();
        self.panes_at = Some(Instant::now());
    }

    fn place(&mut self, key: &str) -> Placement {
        let Some(thread) = self.threads.get(key) else {
            return Placement::Unplaced;
        };
        let pid = thread.agent_pid().filter(|_| !thread.gone && !thread.ended);
        let thread_id = thread.thread_id.clone();
        let cwd = thread.cwd.clone();
        // A live process's parents now; an exited one's as they were when its pid was learned
        // (the shell that started it, and its pane, usually outlive it).
        let ancestors = match pid {
            Some(pid) => procs::ancestors(pid),
            None => thread.ancestry.clone(),
        };
        let pane = self.pane_of_chain(&ancestors);
        // A session cohost hosts shows once: its own instance wins.
        let hosted = self.core.read(|state| {
            state.sessions.iter().find_map(|session| {
                if session.is_closed() {
                    return None;
                }
                let same_thread = session.thread_id.as_deref() == Some(thread_id.as_str());
                let same_pane = session.pane.as_ref().is_some_and(|p| {
                    pane.as_ref().is_some_and(|pane| pane.pane_id == p.pane_id)
                        || ancestors.contains(&p.runner_pid)
                });
                (same_thread || same_pane).then(|| session.id.clone())
            })
        });
        if let Some(by) = hosted {
            return Placement::Suppressed { by };
        }
        if let Some(pane) = pane {
            return Placement::Pane {
                session: pane.session,
                pane_id: pane.pane_id,
            };
        }
        if let Some(cwd) = cwd {
            let list = self.tmux.get();
            if let Ok(session) = crate::tmux::resolve(&list, None, Some(&cwd.to_string_lossy())) {
                return Placement::Cwd { session };
            }
        }
        Placement::Unplaced
    }

    /// Appends what changed about thread `key` (or removes it from the tracker).
    fn emit(&mut self, key: &str) {
        self.view_changed.insert(key.to_string());
        let placement = self.place(key);
        let Some(thread) = self.threads.get_mut(key) else {
            return;
        };
        thread.placement = placement.clone();
        let desired = desired(thread, &placement);
        let previous = thread.emitted.clone();
        if desired.as_ref().map(|(e, _)| e) == previous.as_ref() {
            return;
        }
        let mut appends = Vec::new();
        if let Some(previous) = &previous
            && desired
                .as_ref()
                .is_none_or(|(e, _)| e.session != previous.session)
        {
            appends.push((
                previous.session.clone(),
                EventKind::AgentPruned(InstanceRef {
                    key: key.to_string(),
                }),
            ));
        }
        if let Some((emitted, update)) = &desired {
            appends.push((
                emitted.session.clone(),
                EventKind::AgentUpdated(update.clone()),
            ));
        }
        thread.emitted = desired.map(|(e, _)| e);
        // The explain view follows before the tracker does: whoever sees this update and asks
        // why already finds the evidence behind it (the whole view is rebuilt at the pass end).
        let explained = watched_view(thread);
        self.view().instances.insert(key.to_string(), explained);
        let core = self.core.clone();
        let count = appends.len() as u64;
        let result = self.runtime.block_on(async move {
            for (session, kind) in appends {
                core.append(Some(session), kind).await?;
            }
            Ok::<(), crate::core::CoreError>(())
        });
        match result {
            Ok(()) => {
                self.shared.events.fetch_add(count, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(key, %error, "a watcher's update was not recorded");
                // Try again with the next change.
                if let Some(thread) = self.threads.get_mut(key) {
                    thread.emitted = previous;
                }
            }
        }
        self.mark_dirty();
    }

    // ------------------------------------------------------------------ checkpoint and view

    fn mark_dirty(&mut self) {
        if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
        }
    }

    fn load_checkpoint(&mut self) {
        let path = self.state_dir.join(CHECKPOINT_FILE);
        let bytes = match crate::core::private_file::read(&path, MAX_CHECKPOINT_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the watchers' checkpoint; starting over (tails only)");
                return;
            }
        };
        let checkpoint: Checkpoint = match serde_json::from_slice(&bytes) {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "the watchers' checkpoint does not parse; starting over (tails only)");
                return;
            }
        };
        if checkpoint.version != CHECKPOINT_VERSION {
            return;
        }
        let agents: HashSet<WatchedAgent> = self.formats.iter().map(|f| f.agent()).collect();
        for file in checkpoint.files {
            if agents.contains(&file.agent) {
                self.saved_files.insert(file.path.clone(), file);
            }
        }
        // What the tracker holds now is what was emitted: the log, not the checkpoint, is the
        // truth about that (a crash may fall between an append and the next save).
        let tracker_view: HashMap<String, Emitted> = self.core.read(|state| {
            checkpoint
                .threads
                .iter()
                .filter_map(|thread| {
                    let agent = thread.agent?;
                    let key =
                        crate::protocol::instance_key(agent.as_str(), Some(&thread.thread_id));
                    let (session, update, _) = state.tracker.find(&key)?;
                    if update.source.as_deref() != Some(&source_of(agent)) {
                        return None;
                    }
                    Some((
                        key,
                        Emitted {
                            session: session.to_string(),
                            status: update.status,
                            title: update.thread_name.clone(),
                            prompt: update.last_user_prompt.clone(),
                            pane_id: update.pane_id.clone(),
                            liveness: update.liveness,
                        },
                    ))
                })
                .collect()
        });
        for mut thread in checkpoint.threads {
            let Some(agent) = thread.agent.filter(|agent| agents.contains(agent)) else {
                continue;
            };
            let key = crate::protocol::instance_key(agent.as_str(), Some(&thread.thread_id));
            thread.emitted = tracker_view.get(&key).cloned();
            // The process may have ended while the daemon was down.
            if let Some(pid) = thread.agent_pid()
                && !thread.gone
            {
                if procs::alive(pid, thread.start_time) {
                    self.watch_exit(pid);
                } else {
                    thread.gone = true;
                    thread.push_evidence(EvidenceView {
                        file: format!("/proc/{pid}"),
                        locator: None,
                        rule: format!("process {pid} is gone (checked at start-up) → ended"),
                        status: None,
                        at: now_ms(),
                        record_ts: None,
                    });
                }
            }
            self.threads.insert(key, thread);
        }
    }

    fn save_checkpoint(&mut self) {
        self.dirty_since = None;
        let files = self
            .files
            .iter()
            .filter_map(|(path, file)| {
                let decoder = match (&file.decoder, &file.follower) {
                    (Some(decoder), _) => decoder.save(),
                    (None, Some(follower)) => follower.save(),
                    // Registered at its size and never read: nothing to resume.
                    (None, None) => return None,
                };
                let offset = file.offset.saturating_sub(file.partial.len() as u64);
                Some(FileCheckpoint {
                    path: path.clone(),
                    agent: self.formats[file.format].agent(),
                    inode: file.inode,
                    offset: if file.skipping { file.offset } else { offset },
                    decoder,
                })
            })
            .collect();
        let checkpoint = Checkpoint {
            version: CHECKPOINT_VERSION,
            files,
            threads: self.threads.values().cloned().collect(),
        };
        let result = std::fs::create_dir_all(&self.state_dir).and_then(|()| {
            let bytes = serde_json::to_vec(&checkpoint).map_err(std::io::Error::other)?;
            crate::core::private_file::write_atomic(
                &self.state_dir.join(CHECKPOINT_FILE),
                &bytes,
                0o600,
            )
        });
        if let Err(error) = result {
            tracing::warn!(%error, "cannot save the watchers' checkpoint");
        }
    }

    fn publish_view(&mut self) {
        let mut roots = Vec::new();
        for format in &self.formats {
            for path in format
                .roots(&self.env)
                .into_iter()
                .chain(format.files(&self.env))
            {
                roots.push(WatchRootView {
                    agent: format.agent().as_str().to_string(),
                    exists: path.exists(),
                    path: path.display().to_string(),
                });
            }
        }
        // Only the threads that changed are rebuilt: an event costs the same with 10 threads
        // as with 10,000.
        let changed = std::mem::take(&mut self.view_changed);
        let updates: Vec<(String, Option<WatchedView>)> = changed
            .into_iter()
            .map(|key| {
                let view = self.threads.get(&key).map(watched_view);
                (key, view)
            })
            .collect();
        let mut view = self.view();
        view.roots = roots;
        view.files_known = self.files.len() as u64;
        view.watched_dirs = self.watched.len() as u64;
        view.unwatched_dirs = self.unwatched.len() as u64;
        for (key, thread) in updates {
            match thread {
                Some(thread) => view.instances.insert(key, thread),
                None => view.instances.remove(&key),
            };
        }
    }
}

/// How recent a thread's last write must be for the catch-up to show it without a live
/// process: an agent whose process cohost cannot find (or a file written while the daemon
/// started) still shows; the history does not.
const CATCH_UP_RECENT: Duration = Duration::from_secs(10 * 60);

/// Whether one of the thread's files was modified in the last [`CATCH_UP_RECENT`].
fn written_lately(thread: &Thread) -> bool {
    thread.files.iter().any(|file| {
        std::fs::metadata(file)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age <= CATCH_UP_RECENT)
    })
}

/// The deepest existing directory above `path`.
fn deepest_existing(path: &Path) -> Option<PathBuf> {
    let mut ancestor = path.parent();
    while let Some(dir) = ancestor {
        if dir.is_dir() {
            return Some(dir.to_path_buf());
        }
        ancestor = dir.parent();
    }
    None
}

fn source_of(agent: WatchedAgent) -> String {
    format!("watcher:{}", agent.as_str())
}

/// What the tracker should hold for `thread` placed at `placement`: `None` removes it.
fn desired(thread: &Thread, placement: &Placement) -> Option<(Emitted, AgentUpdate)> {
    let agent = thread.agent?;
    // A live agent whose records imply no turn yet (a TUI just started) is idle.
    let mut status = match thread.status {
        Some(status) => status,
        None if thread.agent_pid().is_some() && !thread.gone && !thread.ended => AgentStatus::Idle,
        None => return None,
    };
    if let Placement::Suppressed { .. } = placement {
        return None;
    }
    if thread.ended || thread.gone {
        if status == AgentStatus::Idle {
            // It never ran a turn and it is gone: nothing to show.
            return None;
        }
        // A session file removed while its process still runs: the agent is exiting, and may
        // still be writing its last records (`claude -p` removes its session file before the
        // transcript's last lines are in: a race inside the peer). Its exit decides, after one
        // more read of its files (`process_exited`); until then the turn is what it was.
        let exiting = thread.ended && !thread.gone && thread.agent_pid().is_some();
        if !status.is_terminal() && !exiting {
            // The process is gone in the middle of a turn: that turn will not finish.
            status = AgentStatus::Stale;
        }
    }
    let (session, pane_id) = match placement {
        Placement::Pane { session, pane_id } => (session.clone(), Some(pane_id.clone())),
        Placement::Cwd { session } => (session.clone(), None),
        Placement::Unplaced | Placement::Suppressed { .. } => (UNPLACED_SESSION.to_string(), None),
    };
    let title = thread
        .title
        .as_deref()
        .map(|t| clip(t, bounds::THREAD_NAME));
    let prompt = thread
        .prompt
        .as_deref()
        .map(|p| clip(p, bounds::LAST_USER_PROMPT));
    let liveness = thread.liveness();
    let emitted = Emitted {
        session,
        status,
        title: title.clone(),
        prompt: prompt.clone(),
        pane_id: pane_id.clone(),
        liveness,
    };
    let update = AgentUpdate {
        agent: agent.as_str().to_string(),
        status,
        ts: thread.record_ts.unwrap_or_else(now_ms),
        thread_id: Some(clip(&thread.thread_id, bounds::THREAD_ID)),
        thread_name: title,
        last_user_prompt: prompt,
        pane_id,
        liveness,
        source: Some(source_of(agent)),
        tokenless: false,
    };
    Some((emitted, update))
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

fn watched_view(thread: &Thread) -> WatchedView {
    let liveness = match (thread.pid, thread.found_pid) {
        _ if thread.ended => "ended: its records say so".to_string(),
        (Some(pid), _) if thread.gone => format!("process {pid} (from its records) is gone"),
        (None, Some(pid)) if thread.gone => format!("process {pid} (holding its file) is gone"),
        (Some(pid), _) => format!("process {pid}, named by its records, is alive"),
        (None, Some(pid)) => format!("process {pid}, found holding its file, is alive"),
        (None, None) => "no process known: the tracker's stale timer applies".to_string(),
    };
    let (placement, placed_by) = match &thread.placement {
        Placement::Pane { session, pane_id } => (
            "pane".to_string(),
            Some(format!(
                "pane {pane_id} of session {session} holds its process"
            )),
        ),
        Placement::Cwd { session } => (
            "cwd".to_string(),
            Some(format!("session {session}'s directory matches its cwd")),
        ),
        Placement::Unplaced => ("unplaced".to_string(), None),
        Placement::Suppressed { by } => (
            "suppressed".to_string(),
            Some(format!("cohost hosts it as session {by}")),
        ),
    };
    WatchedView {
        agent: thread
            .agent
            .map(|a| a.as_str().to_string())
            .unwrap_or_default(),
        thread_id: thread.thread_id.clone(),
        status: thread.status,
        pid: thread.agent_pid(),
        liveness,
        cwd: thread.cwd.as_ref().map(|c| c.display().to_string()),
        placement,
        placed_by,
        files: thread
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect(),
        evidence: thread.evidence.iter().cloned().collect(),
    }
}

#[cfg(test)]
mod desired_tests {
    use super::*;

    fn exiting_thread(gone: bool) -> Thread {
        Thread {
            agent: Some(WatchedAgent::ClaudeCode),
            thread_id: "t1".into(),
            status: Some(AgentStatus::Running),
            pid: Some(4242),
            ended: true,
            gone,
            ..Thread::default()
        }
    }

    /// CI, Claude Code 2.1.197: a `claude -p` run removed its session file 31 ms before its
    /// transcript's `end_turn` line was read, and the instance went running → stale → done.
    #[test]
    fn a_turn_is_not_stale_while_the_process_whose_session_file_went_away_still_runs() {
        let placement = Placement::Cwd {
            session: "work".into(),
        };
        let (exiting, _) = desired(&exiting_thread(false), &placement).unwrap();
        assert_eq!(exiting.status, AgentStatus::Running);
        // Its exit (after the last read of its files) ends a turn that never finished.
        let (gone, _) = desired(&exiting_thread(true), &placement).unwrap();
        assert_eq!(gone.status, AgentStatus::Stale);
        // Without a known process there is nothing to wait for.
        let unknown = Thread {
            pid: None,
            ..exiting_thread(false)
        };
        assert_eq!(
            desired(&unknown, &placement).unwrap().0.status,
            AgentStatus::Stale
        );
    }
}
