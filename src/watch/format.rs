//! The contract between the watcher engine and one agent's on-disk format.
//!
//! A [`Format`] says where an agent keeps its files (from the environment, honouring the agent's
//! own overrides), which files under those roots are its records, and how to decode them. A
//! [`Decoder`] is fed complete lines (the engine buffers partial ones) or whole-file snapshots and
//! emits [`Observation`]s: what the agent's own records say about one thread. Decoders are pure —
//! no I/O, no clock — so they are tested on recorded files, and their state is saved with the
//! byte offset in the engine's checkpoint so a daemon restart resumes without re-reading.
//!
//! Status comes from the agent's markers (turn start, tool call, approval, turn end) and from
//! liveness (a pid the engine can check), never from silence alone.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::AgentStatus;

/// The agents cohost watches, named as in the opensessions contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WatchedAgent {
    ClaudeCode,
    Codex,
    Opencode,
    Pi,
    Droid,
    Amp,
}

impl WatchedAgent {
    pub const ALL: [WatchedAgent; 6] = [
        WatchedAgent::ClaudeCode,
        WatchedAgent::Codex,
        WatchedAgent::Opencode,
        WatchedAgent::Pi,
        WatchedAgent::Droid,
        WatchedAgent::Amp,
    ];

    /// The agent's name in `agent.updated` and in `source` (`watcher:<name>`).
    /// The agent named `name` (as in [`WatchedAgent::as_str`]).
    pub fn parse(name: &str) -> Option<WatchedAgent> {
        WatchedAgent::ALL
            .into_iter()
            .find(|agent| agent.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WatchedAgent::ClaudeCode => "claude-code",
            WatchedAgent::Codex => "codex",
            WatchedAgent::Opencode => "opencode",
            WatchedAgent::Pi => "pi",
            WatchedAgent::Droid => "droid",
            WatchedAgent::Amp => "amp",
        }
    }
}

/// The environment a format resolves its roots from: injected, so tests and the daemon agree.
#[derive(Debug, Clone, Default)]
pub struct WatchEnv {
    /// `$HOME`.
    pub home: PathBuf,
    /// The variables formats may read (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_DATA_HOME`,
    /// `OPENCODE_DB`, `PI_CODING_AGENT_DIR`, …), as the daemon saw them at start.
    pub vars: std::collections::BTreeMap<String, String>,
}

impl WatchEnv {
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }
}

/// How the engine follows one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Append-only lines (JSONL), tailed by byte offset; complete lines go to [`Decoder::line`].
    Lines,
    /// A small file rewritten whole (Claude's `sessions/<pid>.json`, Codex's
    /// `session_index.jsonl`): read whole on change, given to [`Decoder::snapshot`]; its removal
    /// goes to [`Decoder::removed`].
    Snapshot,
    /// An SQLite database in WAL mode (OpenCode): the engine watches the database and its
    /// `-wal` file and calls [`TableFollower::poll`] when either changes; the follower reads
    /// read-only from its own rowid cursor.
    Database,
}

/// One agent's on-disk format.
pub trait Format: Send + Sync {
    fn agent(&self) -> WatchedAgent;
    /// The directories to watch (recursively), resolved from `env`. A root that does not exist
    /// yet is still returned: the engine watches for it to appear.
    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf>;
    /// Single files to follow outside the roots (Codex's `session_index.jsonl` beside much
    /// else in `$CODEX_HOME`): the engine watches their directory without recursing and looks
    /// only at these names. A file that does not exist yet is still returned.
    fn files(&self, _env: &WatchEnv) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The process names (`/proc/<pid>/comm`) of the agent, for finding its process when no
    /// record names the pid: the engine looks for one holding the record file open and climbs
    /// its parents while they carry one of these names (Codex's rollout is held by its
    /// `app-server` child; the TUI above it is the agent). Empty: only pids from records.
    fn process_names(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether `path` (under one of the roots, or one of [`Format::files`]) is one of the
    /// agent's record files, and how to follow it.
    fn classify(&self, path: &Path) -> Option<FileKind>;
    /// A fresh decoder for one file (or the one restored from a checkpoint, see
    /// [`Decoder::save`]).
    fn decoder(&self, path: &Path, saved: Option<serde_json::Value>) -> Box<dyn Decoder>;
    /// The follower for a [`FileKind::Database`] file (the only format that does its own reads).
    fn follower(
        &self,
        _path: &Path,
        _saved: Option<serde_json::Value>,
    ) -> Option<Box<dyn TableFollower>> {
        None
    }
}

/// Follows a database from a cursor (OpenCode's append-only `event` table by rowid).
pub trait TableFollower: Send {
    /// Reads what was appended since the last call, read-only, and reports it with where each
    /// record was read.
    fn poll(&mut self, out: &mut Vec<(Locator, Observation)>) -> anyhow::Result<()>;
    /// The cursor to keep in the checkpoint.
    fn save(&self) -> serde_json::Value;
}

/// Where in a file (or table) a record was read: the evidence `explain` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Locator {
    /// A line starting at this byte offset.
    Offset { offset: u64 },
    /// A row of a table (OpenCode's `event` journal).
    Row { table: String, rowid: i64 },
    /// A whole-file snapshot.
    Snapshot,
}

/// What one record says about one thread. Fields left `None` keep what was known before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// The agent's own id for the thread (session id, rollout thread id, …).
    pub thread_id: String,
    /// The status this record implies, if it implies one.
    pub status: Option<AgentStatus>,
    /// The working directory, from the records (never from an encoded folder name).
    pub cwd: Option<PathBuf>,
    /// The agent's own title (`ai-title`, `session_index`, `session.title`, …).
    pub title: Option<String>,
    /// The last prompt a person typed (never injected context, meta or tool-result records).
    pub last_user_prompt: Option<String>,
    /// The agent process, when a record names it (liveness and placement in tmux).
    pub pid: Option<u32>,
    /// The thread has ended for good (its session file was removed, the process exited).
    pub ended: bool,
    /// The status stands until the same file says otherwise: records from other files of the
    /// thread do not override it. Claude's session file sets it for `waiting` (an approval the
    /// agent itself reports; its transcript still writes the pending `tool_use` after it).
    #[serde(default)]
    pub holds: bool,
    /// The rule that fired, for `explain` (e.g. `codex: event_msg/task_complete → done`).
    pub rule: String,
    /// The record's own timestamp (ms), when it has one.
    pub record_ts: Option<u64>,
}

/// Decodes one file's records. Pure: no I/O, no clock.
pub trait Decoder: Send {
    /// One complete line (without its newline).
    fn line(&mut self, line: &[u8], at: &Locator, out: &mut Vec<Observation>);
    /// The whole content of a [`FileKind::Snapshot`] file.
    fn snapshot(&mut self, _bytes: &[u8], _out: &mut Vec<Observation>) {}
    /// The file was removed.
    fn removed(&mut self, _out: &mut Vec<Observation>) {}
    /// The state to keep beside the byte offset in the checkpoint, so a restart resumes here.
    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
