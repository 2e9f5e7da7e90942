//! What the passive watchers show: the evidence behind one instance
//! (`GET /api/state/{session}/agents/{key}/explain`, `cohost explain`) and the watchers'
//! counters (`GET /api/watch`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{AgentStatus, Liveness};

/// The tmux session name under which agents without a tmux session are kept in the tracker
/// (tmux turns `:` in a session name into `_`, so no real session can have this name). The
/// state view lists them as `unplaced`.
pub const UNPLACED_SESSION: &str = ":unplaced";

/// `GET /api/state/{session}/agents/{key}/explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExplainView {
    /// The tmux session (or `:unplaced`).
    pub session: String,
    pub key: String,
    pub agent: String,
    /// `api`, `hosted` or `watcher:<agent>`.
    pub source: String,
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// When the tracker last took an update for it (ms).
    pub updated_at: u64,
    /// What the watcher knows, when a watcher follows this thread (also when a hosted
    /// session's instance suppressed the watcher's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher: Option<WatchedView>,
    /// How cohost knows the instance: `watched`, `adopted` or `hosted` (absent for one reported
    /// over the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<super::Control>,
    /// The cohost session that drives it (adopted or hosted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// An adopted instance: what cohost checked when it adopted it (its pane, its process, the
    /// agent's session file and transcript).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted: Option<super::SessionAdopted>,
}

/// One thread as a watcher follows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchedView {
    pub agent: String,
    pub thread_id: String,
    /// The status the records imply (before liveness: an exited agent's running turn shows as
    /// `stale` in the tracker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AgentStatus>,
    /// The agent's process: from its records, or found holding its record file open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How the process was found and whether it lives.
    pub liveness: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// How the instance was placed: `pane`, `cwd`, `unplaced`, or `suppressed` (cohost hosts
    /// it: the hosted session's instance is the one shown).
    pub placement: String,
    /// The pane or session the placement found, or the hosted session that suppressed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_by: Option<String>,
    /// The files (or databases) its records came from.
    pub files: Vec<String>,
    /// The last records that changed something, oldest first (at most 16).
    pub evidence: Vec<EvidenceView>,
}

/// One record that changed what the watcher knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceView {
    /// The file (or database) read.
    pub file: String,
    /// Where in it: `{"kind":"offset","offset":N}`, `{"kind":"row","table":…,"rowid":N}` or
    /// `{"kind":"snapshot"}`; absent for what the engine itself saw (a process exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locator: Option<Value>,
    /// The rule that fired.
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AgentStatus>,
    /// When the daemon read it (ms).
    pub at: u64,
    /// The record's own timestamp (ms), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_ts: Option<u64>,
}

/// `GET /api/watch`: the watchers' configuration and counters (the bench reads them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchStats {
    /// The agents watched (`--watchers`).
    pub agents: Vec<String>,
    /// Every root and single file watched, and whether it exists yet.
    pub roots: Vec<WatchRootView>,
    /// Record files known (followed or registered at their size).
    pub files_known: u64,
    /// Times the engine woke up: file events, process exits and timers.
    pub wakeups: u64,
    /// Of those, timer wakeups (liveness checks, rescans, checkpoint saves).
    pub timer_wakeups: u64,
    /// Bytes read from record files since start.
    pub bytes_read: u64,
    /// Record files opened for reading since start.
    pub file_reads: u64,
    /// `/proc` scans for processes holding a record file.
    pub proc_scans: u64,
    /// Directories under inotify watch.
    pub watched_dirs: u64,
    /// Directories that could not be watched (the inotify limit): rescanned slowly.
    pub unwatched_dirs: u64,
    /// `agent.updated` / `agent.pruned` events the watchers appended.
    pub events: u64,
    /// Threads followed.
    pub instances: u64,
    /// How long the start-up catch-up took (ms).
    pub catch_up_ms: u64,
    /// Whether the start-up catch-up is done.
    pub caught_up: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchRootView {
    pub agent: String,
    pub path: String,
    pub exists: bool,
}
