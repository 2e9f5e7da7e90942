//! What the bridge remembers across restarts, in one JSON file written atomically and fsync'd:
//! its cursor into cohost's event log, the homeserver's sync token, the Matrix events it has
//! handled, each session's room and the numbered approvals and questions posted in it.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// How many handled Matrix event ids are kept (a replayed sync batch is far shorter).
const HANDLED_KEPT: usize = 1024;
/// How many posted approvals and questions are kept (to answer a late `/approve` "too late").
const ASKS_KEPT: usize = 2048;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The last cohost event seq the bridge has fully handled.
    pub cursor: Option<u64>,
    /// The homeserver's `next_batch` after the last sync batch fully handled.
    pub next_batch: Option<String>,
    /// Matrix event ids of commands already handled (newest last).
    #[serde(default)]
    pub handled: VecDeque<String>,
    /// Session id → its room id.
    #[serde(default)]
    pub rooms: BTreeMap<String, String>,
    /// Approval or request id → what was posted for it.
    #[serde(default)]
    pub asks: BTreeMap<String, Ask>,
    /// Session id → the last number given to an ask of the session.
    #[serde(default)]
    pub numbers: BTreeMap<String, u32>,
}

/// An approval or an input request posted in a session's room.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    pub session: String,
    pub number: u32,
    /// `approval` or `request`.
    pub kind: String,
    /// The request's kind (`question`, `plan`, …) or the approval's (`command`, …).
    pub detail: String,
    /// The posted message's event id (edited when it is answered).
    pub event_id: Option<String>,
    /// The text as posted (the edit keeps it and says who answered).
    pub text: String,
    /// For a question: its id and its option labels, in the order shown.
    #[serde(default)]
    pub question: Option<(String, Vec<String>)>,
    #[serde(default)]
    pub resolved: bool,
    /// Order of posting, to keep the newest when trimming.
    #[serde(default)]
    pub order: u64,
}

impl State {
    pub fn load(path: &Path) -> anyhow::Result<State> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("the bridge's state file {} is damaged", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes the state to a temporary file, fsyncs it, renames it over `path` and fsyncs the
    /// directory: after a crash the file is the old state or the new one.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp: PathBuf = dir.join(format!(
            ".{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("state")
        ));
        let text = serde_json::to_vec(self)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.write_all(&text)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path).with_context(|| format!("renaming over {}", path.display()))?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    }

    pub fn was_handled(&self, event_id: &str) -> bool {
        self.handled.iter().any(|e| e == event_id)
    }

    pub fn mark_handled(&mut self, event_id: &str) {
        self.handled.push_back(event_id.to_string());
        while self.handled.len() > HANDLED_KEPT {
            self.handled.pop_front();
        }
    }

    /// The session whose room this is.
    pub fn session_of_room(&self, room: &str) -> Option<String> {
        self.rooms
            .iter()
            .find(|(_, r)| r.as_str() == room)
            .map(|(s, _)| s.clone())
    }

    /// Records an ask (once: a replayed event keeps its number) and answers it.
    pub fn ask(&mut self, id: &str, session: &str, make: impl FnOnce(u32) -> Ask) -> Ask {
        if let Some(ask) = self.asks.get(id) {
            return ask.clone();
        }
        let number = self.numbers.entry(session.to_string()).or_insert(0);
        *number += 1;
        let mut ask = make(*number);
        ask.order = self.asks.values().map(|a| a.order).max().unwrap_or(0) + 1;
        self.asks.insert(id.to_string(), ask.clone());
        if self.asks.len() > ASKS_KEPT
            && let Some(oldest) = self
                .asks
                .iter()
                .min_by_key(|(_, a)| a.order)
                .map(|(k, _)| k.clone())
        {
            self.asks.remove(&oldest);
        }
        ask
    }

    /// The ask numbered `number` in `session`: its id and record.
    pub fn ask_by_number(&self, session: &str, number: u32) -> Option<(String, Ask)> {
        self.asks
            .iter()
            .find(|(_, a)| a.session == session && a.number == number)
            .map(|(id, a)| (id.clone(), a.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(session: &str, number: u32) -> Ask {
        Ask {
            session: session.into(),
            number,
            kind: "approval".into(),
            detail: "command".into(),
            event_id: None,
            text: String::new(),
            question: None,
            resolved: false,
            order: 0,
        }
    }

    #[test]
    fn asks_are_numbered_per_session_once_and_the_state_survives_a_save() {
        let mut state = State::default();
        assert_eq!(state.ask("ap:1", "s1", |n| ask("s1", n)).number, 1);
        assert_eq!(state.ask("ap:2", "s1", |n| ask("s1", n)).number, 2);
        assert_eq!(state.ask("ap:3", "s2", |n| ask("s2", n)).number, 1);
        assert_eq!(
            state.ask("ap:1", "s1", |n| ask("s1", n)).number,
            1,
            "a replay keeps it"
        );
        assert_eq!(state.ask_by_number("s1", 2).unwrap().0, "ap:2");
        state.mark_handled("$e1");
        state.cursor = Some(42);
        let dir = std::env::temp_dir().join(format!("cohost-matrix-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        state.save(&path).unwrap();
        let back = State::load(&path).unwrap();
        assert_eq!(back.cursor, Some(42));
        assert!(back.was_handled("$e1"));
        assert_eq!(back.ask_by_number("s2", 1).unwrap().0, "ap:3");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
