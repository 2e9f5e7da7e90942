//! What OpenCode writes that cohost reads, as serde types: the rows of the append-only `event`
//! journal of its SQLite database (`opencode.db`; columns `rowid`, `aggregate_id` = the session
//! id, `type` = `<name>.<version>`, `data` = JSON text) and the JSON objects in their `data`
//! column: the whole session `info` (`session.created.1`, `session.updated.1`), message `info`
//! (`message.updated.1`) or `part` (`message.part.updated.1`) of each change. Field names are
//! OpenCode's (`sessionID`, `parentID`, `messageID`, `finish`). Shapes are those of OpenCode
//! 1.18.33.
//!
//! Permissive as `formats::claude`: unknown event types and fields are ignored, every field
//! cohost reads is optional and read through [`crate::formats::lenient`] (a field of another type
//! reads as absent). Only a `data` that is not JSON fails to read.

use serde::Deserialize;
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, object, open_enum};

/// The journal table: `event(id, aggregate_id, seq, type, data)`, read by `rowid`.
pub const EVENT_TABLE: &str = "event";

/// An `event` row as a JSON line (`{"rowid","aggregate_id","type","data"}`, `data` the column's
/// text): the shape of the recorded fixtures.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EventRow {
    #[serde(deserialize_with = "lenient::opt")]
    pub rowid: Option<i64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub aggregate_id: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub data: Option<String>,
}

impl EventRow {
    /// Reads one line; `None` only when it is not JSON.
    pub fn from_slice(line: &[u8]) -> Option<EventRow> {
        let value = serde_json::from_slice::<Value>(line).ok()?;
        Some(object(&value))
    }
}

/// An event type without its version suffix: `session.created.1` → `session.created`.
pub fn event_name(kind: &str) -> &str {
    kind.rsplit_once('.')
        .filter(|(_, v)| v.chars().all(|c| c.is_ascii_digit()))
        .map_or(kind, |(name, _)| name)
}

/// One event's `data`, typed by its event name.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `sessionID` (the row's `aggregate_id` stands in without it).
    pub session_id: Option<String>,
    pub payload: EventPayload,
}

/// What an event carries, by its name.
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    /// `session.created` or `session.updated`: the whole session `info`.
    Session(SessionInfo),
    /// `session.deleted`.
    SessionDeleted,
    /// `message.updated`: the whole message `info`.
    Message(MessageInfo),
    /// `message.part.updated`: the whole `part` and when it changed.
    Part(PartUpdate),
    /// Any other event name, read no further.
    Other(String),
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct EventHead {
    #[serde(rename = "sessionID", deserialize_with = "lenient::opt")]
    session_id: Option<String>,
}

impl Event {
    /// Reads the `data` of an event of type `kind`; `None` only when it is not JSON. A `data`
    /// that is not an object reads with its fields absent.
    pub fn parse(kind: &str, data: &[u8]) -> Option<Event> {
        let data = serde_json::from_slice::<Value>(data).ok()?;
        let info = || data.get("info").unwrap_or(&Value::Null);
        let payload = match event_name(kind) {
            "session.created" | "session.updated" => EventPayload::Session(object(info())),
            "session.deleted" => EventPayload::SessionDeleted,
            "message.updated" => EventPayload::Message(object(info())),
            "message.part.updated" => EventPayload::Part(object(&data)),
            other => EventPayload::Other(other.to_string()),
        };
        Some(Event {
            session_id: object::<EventHead>(&data).session_id,
            payload,
        })
    }
}

/// A session's `info`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionInfo {
    /// A subagent's session names its parent.
    #[serde(rename = "parentID", deserialize_with = "lenient::opt")]
    pub parent_id: Option<String>,
    /// Starts as `New session - <ISO>`, then the generated title.
    #[serde(deserialize_with = "lenient::opt")]
    pub title: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub directory: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub time: Option<SessionTime>,
}

/// A session's `time` (ms since the epoch).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionTime {
    #[serde(deserialize_with = "lenient::opt")]
    pub updated: Option<u64>,
    /// Kept as written: `Some(Value::Null)` is an `archived` that is `null`.
    #[serde(deserialize_with = "lenient::opt")]
    pub archived: Option<Value>,
}

impl SessionInfo {
    /// Whether `time.archived` is present and not `null`.
    pub fn is_archived(&self) -> bool {
        self.time
            .as_ref()
            .and_then(|time| time.archived.as_ref())
            .is_some_and(|archived| !archived.is_null())
    }

    pub fn updated(&self) -> Option<u64> {
        self.time.as_ref()?.updated
    }
}

open_enum! {
    /// A message's `role`.
    pub enum Role {
        User = "user",
        Assistant = "assistant",
    }
}

/// A message's `info`: a user message, or one step of an assistant reply (`finish`
/// `tool-calls` means another step follows).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageInfo {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub role: Option<Role>,
    #[serde(deserialize_with = "lenient::opt")]
    pub time: Option<MessageTime>,
    /// `stop`, `unknown`, `length`, `tool-calls`, `error`, …
    #[serde(deserialize_with = "lenient::opt")]
    pub finish: Option<String>,
    /// `{"name":"MessageAbortedError","data":{…}}`, …; only an object reads as one.
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<MessageError>,
}

/// A message's `time` (ms since the epoch).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageTime {
    #[serde(deserialize_with = "lenient::opt")]
    pub created: Option<u64>,
    /// Kept as written: `Some(Value::Null)` is a `completed` that is `null`.
    #[serde(deserialize_with = "lenient::opt")]
    pub completed: Option<Value>,
}

impl MessageInfo {
    pub fn created(&self) -> Option<u64> {
        self.time.as_ref()?.created
    }

    /// `time.completed` when it is a number.
    pub fn completed(&self) -> Option<u64> {
        self.time.as_ref()?.completed.as_ref()?.as_u64()
    }

    /// Whether `time.completed` is present and not `null`.
    pub fn is_completed(&self) -> bool {
        self.time
            .as_ref()
            .and_then(|time| time.completed.as_ref())
            .is_some_and(|completed| !completed.is_null())
    }
}

/// An assistant message's `error`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageError {
    #[serde(deserialize_with = "lenient::opt")]
    pub name: Option<String>,
}

/// `message.part.updated`'s data besides `sessionID`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PartUpdate {
    #[serde(deserialize_with = "lenient::opt")]
    pub part: Option<Part>,
    /// When the part changed (ms since the epoch).
    #[serde(deserialize_with = "lenient::opt")]
    pub time: Option<u64>,
}

/// A message part: `text` (a prompt's or reply's text), `tool` (a tool call and its state),
/// `step-start`, `step-finish`, …
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Part {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(rename = "messageID", deserialize_with = "lenient::opt")]
    pub message_id: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
    /// Text OpenCode added itself.
    #[serde(deserialize_with = "lenient::opt")]
    pub synthetic: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub ignored: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub state: Option<ToolState>,
}

/// A tool part's `state`: `status` is `pending`, `running`, `completed` or `error`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolState {
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
}

lenient_object!(SessionTime, MessageTime, MessageError, Part, ToolState);

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: &str = include_str!("../../tests/fixtures/watchers/opencode/events.jsonl");

    /// The recorded row with `rowid` `n`, its `data` typed.
    fn event(n: i64) -> (EventRow, Event) {
        let row = EVENTS
            .lines()
            .filter_map(|line| EventRow::from_slice(line.as_bytes()))
            .find(|row| row.rowid == Some(n))
            .unwrap();
        let event = Event::parse(
            row.kind.as_deref().unwrap(),
            row.data.as_deref().unwrap().as_bytes(),
        )
        .unwrap();
        (row, event)
    }

    #[test]
    fn recorded_rows_of_1_18_33() {
        let (row, created) = event(1);
        assert_eq!(row.kind.as_deref(), Some("session.created.1"));
        assert_eq!(
            row.aggregate_id.as_deref(),
            Some("ses_dce104bc8ffeLJKDgHI3zXGpag")
        );
        assert_eq!(
            created.session_id.as_deref(),
            Some("ses_dce104bc8ffeLJKDgHI3zXGpag")
        );
        let EventPayload::Session(session) = &created.payload else {
            panic!("{created:?}")
        };
        assert_eq!(
            session.title.as_deref(),
            Some("New session - 2026-12-01T14:08:42.551Z")
        );
        assert_eq!(session.directory.as_deref(), Some("/home/me/proj"));
        assert_eq!(session.updated(), Some(1796134122551));
        assert!(session.parent_id.is_none() && !session.is_archived());

        let (_, pending) = event(26);
        let EventPayload::Part(update) = &pending.payload else {
            panic!("{pending:?}")
        };
        assert_eq!(update.time, Some(1796134143553));
        let part = update.part.as_ref().unwrap();
        assert_eq!(part.kind.as_deref(), Some("tool"));
        assert_eq!(
            part.message_id.as_deref(),
            Some("msg_231effacb001fhgb6FQROCxf8F")
        );
        assert_eq!(
            part.state.as_ref().and_then(|s| s.status.as_deref()),
            Some("pending")
        );

        let (_, aborted) = event(54);
        let EventPayload::Message(message) = &aborted.payload else {
            panic!("{aborted:?}")
        };
        assert_eq!(message.role, Some(Role::Assistant));
        assert_eq!(
            message.error.as_ref().and_then(|e| e.name.as_deref()),
            Some("MessageAbortedError")
        );
        assert_eq!(message.created(), Some(1796134151993));
        assert_eq!(message.completed(), Some(1796134155367));
        assert!(message.is_completed());
    }

    #[test]
    fn odd_rows_read_with_fields_absent() {
        assert_eq!(event_name("session.created.1"), "session.created");
        assert_eq!(event_name("session.created"), "session.created");
        assert_eq!(Event::parse("message.updated.1", b"{"), None);
        let odd = Event::parse(
            "message.updated.1",
            br#"{"sessionID":5,"info":{"role":"system","error":"x","time":{"completed":null}}}"#,
        )
        .unwrap();
        assert_eq!(odd.session_id, None);
        let EventPayload::Message(message) = odd.payload else {
            panic!()
        };
        assert_eq!(message.role, Some(Role::Other("system".into())));
        assert_eq!(message.error, None, "an error that is no object is none");
        assert!(!message.is_completed());
        assert_eq!(
            Event::parse("session.deleted.1", b"[]").unwrap(),
            Event {
                session_id: None,
                payload: EventPayload::SessionDeleted
            }
        );
        assert_eq!(
            Event::parse("todo.updated.1", b"{}").unwrap().payload,
            EventPayload::Other("todo.updated".into())
        );
        assert_eq!(EventRow::from_slice(b"[1]"), Some(EventRow::default()));
    }
}
