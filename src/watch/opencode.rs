//! OpenCode: one SQLite database in WAL mode (`$XDG_DATA_HOME/opencode/opencode.db`, or
//! `OPENCODE_DB`), with `session`/`message`/`part` rows and an append-only `event` journal whose
//! rows carry the whole `info` (session, message) or `part` object of each change. The follower
//! reads only the journal, read-only, from its own rowid cursor, when the engine sees the
//! database or its `-wal` file change — never on a timer. See docs/peers.md, "OpenCode".
//!
//! Status, per session, from the journal's `message.updated.1` and `message.part.updated.1` rows:
//! a new user message → running; the newest assistant message's `error.name`
//! `MessageAbortedError` → interrupted, any other error → error, `finish` `stop` (or `unknown`,
//! `length`) with `time.completed` → done, `finish:"tool-calls"` → running (the next step
//! follows); a `tool` part `pending`/`running` → tool-running until it is `completed`/`error`.
//! OpenCode writes nothing while it waits for a permission answer, so an open approval shows as
//! tool-running (it never turns stale by silence). Title from `session.title` (its
//! `New session - …` placeholder left out), cwd from `session.directory`, the prompt from the
//! user message's text `part` (synthetic and ignored parts left out). Child sessions
//! (subagents, `parentID`) are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{
    Decoder, FileKind, Format, Locator, Observation, TableFollower, WatchEnv, WatchedAgent,
};
use crate::formats::opencode::{
    EVENT_TABLE, Event, EventPayload, EventRow, MessageInfo, PartUpdate, Role, SessionInfo,
};
use crate::protocol::AgentStatus;

/// Rows read per query: bounds the memory of one poll, not how many are read.
const BATCH_ROWS: i64 = 500;
/// On a first start (no checkpoint), how far back in the journal to begin: the tail of recent
/// activity, not the whole history (each row is one change of one session, ≈ 1 KB).
const CATCH_UP_ROWS: i64 = 5_000;
/// Sessions remembered in the checkpoint; the least recently active are forgotten beyond this.
const MAX_SESSIONS: usize = 256;
/// User message ids remembered per session, to tell their text parts from the assistant's.
const MAX_USER_MESSAGES: usize = 4;
/// How long a read waits for OpenCode's write lock before giving up (the next change retries).
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// OpenCode's watcher format.
#[derive(Debug, Default)]
pub struct OpenCode {
    /// The `OPENCODE_DB` file name seen by [`Format::roots`], so [`Format::classify`] knows it.
    custom_db: std::sync::Mutex<Option<std::ffi::OsString>>,
}

impl Format for OpenCode {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::Opencode
    }

    /// The directory of `OPENCODE_DB` when set, else `$XDG_DATA_HOME/opencode` (default
    /// `~/.local/share/opencode`).
    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        if let Some(db) = env.var("OPENCODE_DB").map(PathBuf::from) {
            if let Ok(mut custom) = self.custom_db.lock() {
                *custom = db.file_name().map(ToOwned::to_owned);
            }
            if let Some(dir) = db.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                return vec![dir.to_path_buf()];
            }
            return vec![PathBuf::from(".")];
        }
        let data = env
            .var("XDG_DATA_HOME")
            .map_or_else(|| env.home.join(".local/share"), PathBuf::from);
        vec![data.join("opencode")]
    }

    /// OpenCode holds its database open for its whole life: the engine finds the process by
    /// that (one database serves every OpenCode of the user, so with several running the
    /// holder it finds stands for all of them).
    fn process_names(&self) -> &'static [&'static str] {
        &["opencode"]
    }

    /// The database itself (`opencode.db`, a channel's `opencode-<channel>.db`, or the
    /// `OPENCODE_DB` file); its `-wal`/`-shm` sidecars are the engine's to watch.
    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?;
        let custom = self.custom_db.lock().ok().and_then(|custom| custom.clone());
        if custom.as_deref() == Some(name) {
            return Some(FileKind::Database);
        }
        let name = name.to_str()?;
        (name.starts_with("opencode") && name.ends_with(".db")).then_some(FileKind::Database)
    }

    /// The journal decoder over JSON lines of `event` rows (`{"rowid","aggregate_id","type",
    /// "data"}`), the shape of the recorded fixtures; the engine uses [`Format::follower`].
    fn decoder(&self, _path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        let journal = saved
            .and_then(|value| serde_json::from_value::<Journal>(value).ok())
            .unwrap_or_default();
        Box::new(journal)
    }

    fn follower(&self, path: &Path, saved: Option<Value>) -> Option<Box<dyn TableFollower>> {
        let saved = saved.and_then(|value| serde_json::from_value::<Saved>(value).ok());
        Some(Box::new(OpenCodeFollower {
            path: path.to_path_buf(),
            connection: None,
            cursor: saved.as_ref().map(|saved| saved.cursor),
            journal: saved.map(|saved| saved.journal).unwrap_or_default(),
        }))
    }
}

/// The checkpoint of a follower: its cursor and what the journal said so far.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    cursor: i64,
    journal: Journal,
}

/// Reads `event` rows appended since its cursor, read-only.
pub struct OpenCodeFollower {
    path: PathBuf,
    connection: Option<Connection>,
    /// The last rowid read; `None` before the first poll of a fresh start.
    cursor: Option<i64>,
    journal: Journal,
}

impl OpenCodeFollower {
    /// Read-only. A read-only open fails when the `-wal`/`-shm` sidecars are missing (OpenCode
    /// not running, its last close removed them): then the database is opened read-write without
    /// create and with `query_only`, so it is still never written.
    fn open(path: &Path) -> anyhow::Result<Connection> {
        let read_only = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let opened = Connection::open_with_flags(path, read_only).and_then(|connection| {
            connection.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
            Ok(connection)
        });
        let connection = match opened {
            Ok(connection) => connection,
            Err(read_only_error) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let connection = Connection::open_with_flags(path, flags).with_context(|| {
                    format!(
                        "opening {} (read-only failed too: {read_only_error})",
                        path.display()
                    )
                })?;
                connection.pragma_update(None, "query_only", true)?;
                connection
            }
        };
        connection.busy_timeout(BUSY_TIMEOUT)?;
        Ok(connection)
    }

    fn read(&mut self, out: &mut Vec<(Locator, Observation)>) -> Result<(), rusqlite::Error> {
        let Some(connection) = self.connection.as_ref() else {
            return Ok(());
        };
        let max: i64 = connection.query_row(
            &format!("SELECT coalesce(max(rowid), 0) FROM {EVENT_TABLE}"),
            [],
            |row| row.get(0),
        )?;
        let mut cursor = match self.cursor {
            Some(cursor) if cursor <= max => cursor,
            // A fresh start begins at the tail; a journal shorter than the cursor is a new
            // database (deleted and recreated): start it over.
            Some(_) => {
                self.journal = Journal::default();
                0
            }
            None => (max - CATCH_UP_ROWS).max(0),
        };
        let mut statement = connection.prepare(&format!(
            "SELECT rowid, aggregate_id, type, data FROM {EVENT_TABLE} \
             WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"
        ))?;
        loop {
            let mut rows = statement.query((cursor, BATCH_ROWS))?;
            let mut n_rows = 0;
            let mut observations = Vec::new();
            while let Some(row) = rows.next()? {
                n_rows += 1;
                let rowid: i64 = row.get(0)?;
                let aggregate_id: String = row.get(1)?;
                let kind: String = row.get(2)?;
                let data = match row.get_ref(3)? {
                    ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes,
                    _ => &[],
                };
                self.journal
                    .row(rowid, &aggregate_id, &kind, data, &mut observations);
                let at = Locator::Row {
                    table: EVENT_TABLE.to_string(),
                    rowid,
                };
                out.extend(observations.drain(..).map(|o| (at.clone(), o)));
                cursor = rowid;
            }
            self.cursor = Some(cursor);
            if n_rows < BATCH_ROWS {
                return Ok(());
            }
        }
    }
}

/// Whether the database file's header says WAL mode (bytes 18 and 19 are 2; read with a plain
/// read, which takes no SQLite lock). OpenCode creates its database in rollback-journal mode and
/// migrates it before switching to WAL; a reader's shared lock in that phase made OpenCode's
/// first start fail with "database is locked" (seen in CI: `opencode serve` exited while the
/// watcher read a database whose `event` table did not exist yet). In WAL mode readers never
/// block OpenCode's writes.
fn in_wal_mode(path: &Path) -> bool {
    use std::io::Read as _;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut header))
        .is_ok_and(|()| header[18] == 2 && header[19] == 2)
}

impl TableFollower for OpenCodeFollower {
    fn poll(&mut self, out: &mut Vec<(Locator, Observation)>) -> anyhow::Result<()> {
        if !in_wal_mode(&self.path) {
            // Not read at all (not even opened) until OpenCode has put it in WAL mode.
            self.connection = None;
            return Ok(());
        }
        if self.connection.is_none() {
            self.connection = Some(Self::open(&self.path)?);
        }
        let result = self.read(out);
        if result.is_err() {
            // Reopen on the next change (the file may have been replaced).
            self.connection = None;
        }
        result.with_context(|| format!("reading the event journal of {}", self.path.display()))
    }

    fn save(&self) -> Value {
        let saved = Saved {
            cursor: self.cursor.unwrap_or(0),
            journal: self.journal.clone(),
        };
        serde_json::to_value(saved).unwrap_or(Value::Null)
    }
}

/// What the journal has said about each session (kept in the checkpoint). Pure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    sessions: BTreeMap<String, SessionState>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionState {
    /// A subagent's session (`parentID`): skipped.
    child: bool,
    title: Option<String>,
    cwd: Option<String>,
    /// `time.created` of the newest user message: a later one opens a turn.
    user_created: u64,
    /// The newest user message ids (their text parts are prompts).
    user_messages: Vec<String>,
    /// The newest assistant message: its id and `time.created`.
    assistant_id: Option<String>,
    assistant_created: u64,
    /// Tool parts of the newest assistant message that are pending or running.
    open_tools: BTreeSet<String>,
    /// The last status reported, so a repeated row reports nothing new.
    status: Option<AgentStatus>,
    /// The rowid of the session's last row (to forget the least recently active).
    last_row: i64,
}

impl Journal {
    /// One `event` row.
    pub fn row(
        &mut self,
        rowid: i64,
        aggregate_id: &str,
        kind: &str,
        data: &[u8],
        out: &mut Vec<Observation>,
    ) {
        let Some(event) = Event::parse(kind, data) else {
            return;
        };
        let session_id = event.session_id.unwrap_or_else(|| aggregate_id.to_string());
        if session_id.is_empty() {
            return;
        }
        if !self.sessions.contains_key(&session_id) && self.sessions.len() >= MAX_SESSIONS {
            self.forget_oldest();
        }
        let state = self.sessions.entry(session_id.clone()).or_default();
        state.last_row = rowid;
        let base = Observation {
            thread_id: session_id,
            ..Observation::default()
        };
        let observation = match &event.payload {
            EventPayload::Session(info) => session_row(state, info, base),
            EventPayload::SessionDeleted => Some(Observation {
                ended: true,
                rule: format!("opencode: {kind} → ended"),
                ..base
            }),
            _ if state.child => None,
            EventPayload::Message(info) => message_row(state, info, kind, base),
            EventPayload::Part(update) => part_row(state, update, kind, base),
            EventPayload::Other(_) => None,
        };
        out.extend(observation);
    }

    fn forget_oldest(&mut self) {
        let oldest = self
            .sessions
            .iter()
            .min_by_key(|(_, state)| state.last_row)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            self.sessions.remove(&id);
        }
    }
}

fn session_row(
    state: &mut SessionState,
    info: &SessionInfo,
    base: Observation,
) -> Option<Observation> {
    if info.parent_id.as_deref().is_some_and(|p| !p.is_empty()) {
        state.child = true;
    }
    if state.child {
        return None;
    }
    let title = info
        .title
        .clone()
        .filter(|t| !t.trim().is_empty() && !t.starts_with("New session - "));
    let cwd = info.directory.clone();
    let archived = info.is_archived();
    let new_title = title.filter(|t| state.title.as_ref() != Some(t));
    let new_cwd = cwd.filter(|c| state.cwd.as_ref() != Some(c));
    if new_title.is_none() && new_cwd.is_none() && !archived {
        return None;
    }
    state.title = new_title.clone().or(state.title.take());
    state.cwd = new_cwd.clone().or(state.cwd.take());
    Some(Observation {
        title: new_title,
        cwd: new_cwd.map(PathBuf::from),
        ended: archived,
        record_ts: info.updated(),
        rule: if archived {
            "opencode: session time.archived → ended".to_string()
        } else {
            "opencode: session title/directory".to_string()
        },
        ..base
    })
}

fn message_row(
    state: &mut SessionState,
    info: &MessageInfo,
    kind: &str,
    base: Observation,
) -> Option<Observation> {
    let id = info.id.clone()?;
    let created = info.created().unwrap_or(0);
    let (status, rule) = match info.role.as_ref()? {
        Role::User => {
            // OpenCode re-writes a user message (its diff summary) after the turn: only a newer
            // one opens a turn.
            if created <= state.user_created {
                return None;
            }
            state.user_created = created;
            state.user_messages.push(id);
            if state.user_messages.len() > MAX_USER_MESSAGES {
                state.user_messages.remove(0);
            }
            state.open_tools.clear();
            (AgentStatus::Running, "user message → running".to_string())
        }
        Role::Assistant => {
            if created < state.assistant_created {
                return None;
            }
            if state.assistant_id.as_deref() != Some(id.as_str()) {
                state.assistant_id = Some(id);
                state.assistant_created = created;
                state.open_tools.clear();
            }
            assistant_status(state, info)
        }
        Role::Other(_) => return None,
    };
    report(
        state,
        status,
        format!("opencode: {kind} {rule}"),
        info.completed().or(info.created()),
        base,
    )
}

fn assistant_status(state: &SessionState, info: &MessageInfo) -> (AgentStatus, String) {
    if let Some(error) = &info.error {
        let name = error.name.as_deref().unwrap_or("error");
        return if name == "MessageAbortedError" {
            (
                AgentStatus::Interrupted,
                "assistant error MessageAbortedError → interrupted".into(),
            )
        } else {
            (
                AgentStatus::Error,
                format!("assistant error {name} → error"),
            )
        };
    }
    let completed = info.is_completed();
    match info.finish.as_deref() {
        Some(finish @ ("stop" | "unknown" | "length")) if completed => (
            AgentStatus::Done,
            format!("assistant finish {finish} + time.completed → done"),
        ),
        Some("error") => (AgentStatus::Error, "assistant finish error → error".into()),
        Some("tool-calls") => (
            AgentStatus::Running,
            "assistant finish tool-calls (next step follows) → running".into(),
        ),
        _ if !state.open_tools.is_empty() => (
            AgentStatus::ToolRunning,
            "assistant open, a tool part pending/running → tool-running".into(),
        ),
        _ => (AgentStatus::Running, "assistant open → running".into()),
    }
}

fn part_row(
    state: &mut SessionState,
    update: &PartUpdate,
    kind: &str,
    base: Observation,
) -> Option<Observation> {
    let part = update.part.as_ref()?;
    let part_id = part.id.clone()?;
    let message_id = part.message_id.as_deref().unwrap_or_default();
    let record_ts = update.time;
    match part.kind.as_deref()? {
        "text" if state.user_messages.iter().any(|m| m == message_id) => {
            let synthetic = part.synthetic.unwrap_or(false) || part.ignored.unwrap_or(false);
            let text = part.text.as_deref().unwrap_or_default().trim();
            if synthetic || text.is_empty() {
                return None;
            }
            Some(Observation {
                last_user_prompt: Some(text.to_string()),
                rule: format!("opencode: {kind} user text part → prompt"),
                record_ts,
                ..base
            })
        }
        "tool" if state.assistant_id.as_deref() == Some(message_id) => {
            let tool_status = part
                .state
                .as_ref()
                .and_then(|state| state.status.as_deref())
                .unwrap_or_default();
            let (status, rule) = if matches!(tool_status, "pending" | "running") {
                state.open_tools.insert(part_id);
                (
                    AgentStatus::ToolRunning,
                    format!("tool part {tool_status} → tool-running"),
                )
            } else {
                state.open_tools.remove(&part_id);
                if !state.open_tools.is_empty() {
                    return None;
                }
                (
                    AgentStatus::Running,
                    format!("tool part {tool_status} → running"),
                )
            };
            report(
                state,
                status,
                format!("opencode: {kind} {rule}"),
                record_ts,
                base,
            )
        }
        _ => None,
    }
}

/// An observation of `status`, unless it is the status last reported.
fn report(
    state: &mut SessionState,
    status: AgentStatus,
    rule: String,
    record_ts: Option<u64>,
    base: Observation,
) -> Option<Observation> {
    if state.status == Some(status) {
        return None;
    }
    state.status = Some(status);
    Some(Observation {
        status: Some(status),
        rule,
        record_ts,
        ..base
    })
}

impl Decoder for Journal {
    /// One `event` row as a JSON line: `{"rowid","aggregate_id","type","data"}` (`data` the
    /// column's text).
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Some(row) = EventRow::from_slice(line) else {
            return;
        };
        let (Some(rowid), Some(kind), Some(data)) = (row.rowid, row.kind, row.data) else {
            return;
        };
        let aggregate_id = row.aggregate_id.unwrap_or_default();
        self.row(rowid, &aggregate_id, &kind, data.as_bytes(), out);
    }

    fn save(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: &str = include_str!("../../tests/fixtures/watchers/opencode/events.jsonl");
    const SCHEMA: &str = include_str!("../../tests/fixtures/watchers/opencode/schema.sql");
    /// The TUI session of the fixture: a tool turn with an approval, an interrupted turn
    /// (Esc Esc), a failed turn (HTTP 400). The first session is an `opencode run`.
    const TUI: &str = "ses_dce1005b4ffepNKh4mZStyubc1";
    const RUN: &str = "ses_dce104bc8ffeLJKDgHI3zXGpag";

    use AgentStatus::*;

    fn statuses(observations: &[Observation], thread: &str) -> Vec<AgentStatus> {
        observations
            .iter()
            .filter(|o| o.thread_id == thread)
            .filter_map(|o| o.status)
            .collect()
    }

    fn decode_fixture() -> Vec<Observation> {
        let mut journal = OpenCode::default().decoder(Path::new("x"), None);
        let mut out = Vec::new();
        for line in EVENTS.lines() {
            journal.line(line.as_bytes(), &Locator::Snapshot, &mut out);
        }
        out
    }

    #[test]
    fn recorded_journal_gives_each_turn_its_status() {
        let out = decode_fixture();
        assert_eq!(statuses(&out, RUN), [Running, Done]);
        assert_eq!(
            statuses(&out, TUI),
            [
                Running,     // "Run echo hi please"
                ToolRunning, // bash pending → running, waiting for the permission answer
                Running,     // completed after the approval
                Done,        // step 2 finish stop
                Running,     // "Tell me a long story"
                Interrupted, // MessageAbortedError (Esc Esc)
                Running,     // "This one fails"
                Error,       // APIError 400
            ]
        );
        let prompts: Vec<_> = out
            .iter()
            .filter(|o| o.thread_id == TUI)
            .filter_map(|o| o.last_user_prompt.as_deref())
            .collect();
        assert_eq!(
            prompts,
            [
                "Run echo hi please",
                "Tell me a long story",
                "This one fails"
            ]
        );
        let titles: Vec<_> = out
            .iter()
            .filter(|o| o.thread_id == TUI)
            .filter_map(|o| o.title.as_deref())
            .collect();
        assert_eq!(
            titles,
            ["ok"],
            "the placeholder title is left out; the mock's title is kept"
        );
        let cwd = out.iter().find_map(|o| o.cwd.clone()).unwrap();
        assert_eq!(cwd, Path::new("/home/me/proj"));
        let error = out.iter().rfind(|o| o.status == Some(Error)).unwrap();
        assert_eq!(
            error.rule,
            "opencode: message.updated.1 assistant error APIError → error"
        );
    }

    #[test]
    fn child_sessions_are_skipped() {
        let mut journal = Journal::default();
        let mut out = Vec::new();
        let info = r#"{"sessionID":"ses_c","info":{"id":"ses_c","parentID":"ses_p","title":"sub","directory":"/d"}}"#;
        journal.row(1, "ses_c", "session.created.1", info.as_bytes(), &mut out);
        let message =
            r#"{"sessionID":"ses_c","info":{"id":"msg_1","role":"user","time":{"created":5}}}"#;
        journal.row(
            2,
            "ses_c",
            "message.updated.1",
            message.as_bytes(),
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
    }

    /// Builds a database with OpenCode's schema (WAL, as OpenCode keeps it) and the first `n`
    /// rows of the recorded journal; returns the writer connection.
    fn database(path: &Path, rows: std::ops::Range<usize>) -> Connection {
        let writer = Connection::open(path).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer.execute_batch(SCHEMA).unwrap();
        append(&writer, rows);
        writer
    }

    fn append(writer: &Connection, rows: std::ops::Range<usize>) {
        for line in EVENTS.lines().skip(rows.start).take(rows.len()) {
            let row: Value = serde_json::from_str(line).unwrap();
            writer
                .execute(
                    "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?1, ?2) \
                     ON CONFLICT (aggregate_id) DO UPDATE SET seq = excluded.seq",
                    (
                        row["aggregate_id"].as_str().unwrap(),
                        row["seq"].as_i64().unwrap(),
                    ),
                )
                .unwrap();
            writer
                .execute(
                    "INSERT INTO event (rowid, id, aggregate_id, seq, type, data) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    (
                        row["rowid"].as_i64().unwrap(),
                        row["id"].as_str().unwrap(),
                        row["aggregate_id"].as_str().unwrap(),
                        row["seq"].as_i64().unwrap(),
                        row["type"].as_str().unwrap(),
                        row["data"].as_str().unwrap(),
                    ),
                )
                .unwrap();
        }
    }

    fn poll(follower: &mut dyn TableFollower) -> Vec<(Locator, Observation)> {
        let mut out = Vec::new();
        follower.poll(&mut out).unwrap();
        out
    }

    #[test]
    fn follower_reads_appended_rows_from_its_cursor_and_resumes_from_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let writer = database(&db, 0..30);
        let format = OpenCode::default();
        assert_eq!(format.classify(&db), Some(FileKind::Database));
        let mut follower = format.follower(&db, None).unwrap();
        let first = poll(follower.as_mut());
        assert!(!first.is_empty());
        assert!(matches!(first[0].0, Locator::Row { ref table, rowid: 1 } if table == "event"));
        // Nothing appended: nothing read.
        assert!(poll(follower.as_mut()).is_empty());
        append(&writer, 30..45);
        let second = poll(follower.as_mut());
        let rowids: Vec<i64> = second
            .iter()
            .map(|(at, _)| match at {
                Locator::Row { rowid, .. } => *rowid,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(rowids.iter().all(|r| (31..=45).contains(r)), "{rowids:?}");
        // A restart: a new follower from the checkpoint reads only what came after.
        let saved = follower.save();
        drop(follower);
        append(&writer, 45..61);
        let mut restarted = format.follower(&db, Some(saved)).unwrap();
        let third = poll(restarted.as_mut());
        let statuses: Vec<_> = third.iter().filter_map(|(_, o)| o.status).collect();
        // The tool turn's done came before the restart; after it: the interrupted and the
        // failed turns (the restored state knows the user message of row 45 was new).
        assert_eq!(statuses, [Interrupted, Running, Error], "{third:?}");
        // No row was read twice: the rows behind the observations only go forward.
        let rowids: Vec<i64> = first
            .iter()
            .chain(&second)
            .chain(&third)
            .map(|(at, _)| match at {
                Locator::Row { rowid, .. } => *rowid,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(rowids.windows(2).all(|w| w[0] < w[1]), "{rowids:?}");
    }

    #[test]
    fn follower_opens_a_database_whose_sidecars_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let writer = database(&db, 0..16);
        // Closing the last connection checkpoints and removes -wal and -shm.
        drop(writer);
        assert!(!dir.path().join("opencode.db-wal").exists());
        let mut follower = OpenCode::default().follower(&db, None).unwrap();
        let out = poll(follower.as_mut());
        let statuses: Vec<_> = out.iter().filter_map(|(_, o)| o.status).collect();
        assert_eq!(statuses, [Running, Done]);
    }

    #[test]
    fn a_missing_journal_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let writer = Connection::open(&db).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer
            .execute_batch("CREATE TABLE session (id text)")
            .unwrap();
        let mut follower = OpenCode::default().follower(&db, None).unwrap();
        let error = follower.poll(&mut Vec::new()).unwrap_err();
        let text = format!("{error:#}");
        assert!(
            text.contains("event journal") && text.contains("opencode.db"),
            "{text}"
        );
    }

    /// OpenCode creates and migrates its database in rollback-journal mode before switching
    /// to WAL: the follower must not read (and lock) it then, or OpenCode's first start fails
    /// with "database is locked".
    #[test]
    fn a_database_not_yet_in_wal_mode_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let writer = Connection::open(&db).unwrap();
        writer.execute_batch(SCHEMA).unwrap();
        append(&writer, 0..16);
        let mut follower = OpenCode::default().follower(&db, None).unwrap();
        assert!(poll(follower.as_mut()).is_empty());
        // Nothing holds the file: a writer may take it exclusively at once.
        writer.execute_batch("BEGIN EXCLUSIVE; COMMIT;").unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        let out = poll(follower.as_mut());
        let statuses: Vec<_> = out.iter().filter_map(|(_, o)| o.status).collect();
        assert_eq!(statuses, [Running, Done]);
    }

    #[test]
    fn roots_follow_opencode_db_and_xdg_data_home() {
        let format = OpenCode::default();
        let mut env = WatchEnv {
            home: PathBuf::from("/h"),
            ..WatchEnv::default()
        };
        assert_eq!(
            format.roots(&env),
            [PathBuf::from("/h/.local/share/opencode")]
        );
        env.vars.insert("XDG_DATA_HOME".into(), "/xdg".into());
        assert_eq!(format.roots(&env), [PathBuf::from("/xdg/opencode")]);
        env.vars
            .insert("OPENCODE_DB".into(), "/data/my.sqlite".into());
        assert_eq!(format.roots(&env), [PathBuf::from("/data")]);
        assert_eq!(
            format.classify(Path::new("/data/my.sqlite")),
            Some(FileKind::Database)
        );
        assert_eq!(format.classify(Path::new("/data/opencode.db-wal")), None);
        assert_eq!(
            format.classify(Path::new("/x/opencode-beta.db")),
            Some(FileKind::Database)
        );
    }
}
