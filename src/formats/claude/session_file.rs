//! The TUI's session file, `~/.claude/sessions/<pid>.json`: its pid, session id, working
//! directory and status, rewritten whole on each status change and removed when the TUI exits.

use serde::{Deserialize, Serialize};

use crate::formats::lenient;

/// `~/.claude/sessions/<pid>.json`, which the TUI keeps while it runs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionFile {
    #[serde(deserialize_with = "lenient::opt")]
    pub pid: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub session_id: Option<String>,
    /// `idle`, `busy`, `waiting` or `shell`.
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
    /// What a `waiting` TUI waits for (`permission prompt`, …).
    #[serde(deserialize_with = "lenient::opt")]
    pub waiting_for: Option<String>,
    /// The TUI's working directory.
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    /// When the status last changed (ms since the epoch).
    #[serde(deserialize_with = "lenient::opt")]
    pub status_updated_at: Option<u64>,
    /// When the file was last written (ms since the epoch).
    #[serde(deserialize_with = "lenient::opt")]
    pub updated_at: Option<u64>,
}

impl SessionFile {
    /// The file's contents; `None` unless they are one JSON object.
    pub fn from_slice(bytes: &[u8]) -> Option<SessionFile> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let file = lenient::read_object(&mut deserializer).ok()??;
        deserializer.end().ok()?;
        Some(file)
    }
}
