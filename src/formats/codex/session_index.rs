//! `$CODEX_HOME/session_index.jsonl`: one line each time a thread is named (the TUI names a
//! thread after its first turn starts; `thread/name/set` renames it).

use serde::Deserialize;
use serde_json::Value;

use crate::formats::lenient;

/// One `session_index.jsonl` line:
/// `{"id":"01a230dc-…","thread_name":"Echo hi test","updated_at":"2026-12-01T09:08:39.027366275Z"}`.
/// A thread appears once per naming; the name may be empty.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionIndexEntry {
    /// The thread id.
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_name: Option<String>,
    /// RFC 3339 with nanoseconds.
    #[serde(deserialize_with = "lenient::opt")]
    pub updated_at: Option<String>,
}

impl SessionIndexEntry {
    /// Reads one line; `None` only when it is not JSON. A line that is not an object reads
    /// with every field absent.
    pub fn from_slice(line: &[u8]) -> Option<SessionIndexEntry> {
        let value = serde_json::from_slice::<Value>(line).ok()?;
        Some(if value.is_object() {
            SessionIndexEntry::deserialize(&value).unwrap_or_default()
        } else {
            SessionIndexEntry::default()
        })
    }
}
