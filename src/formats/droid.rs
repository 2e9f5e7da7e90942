//! What Droid (Factory CLI) writes that cohost reads, as serde types: the lines of a session
//! file (`~/.factory/sessions/<cwd with / as ->/<sessionId>.jsonl`: a `session_start` line,
//! `message` lines, an `agent_turn_outcome` closing each turn) and the `owner.json` of its
//! transient lock directories (`<sessionId>.jsonl.events.lock/`, `.settings.json.lock/`). Field
//! names are Droid's (`tool_use_id`, `visibility`, `reason`). Shapes are those of Droid 0.225.2.
//!
//! Permissive as `formats::claude`: unknown line types, roles and fields are ignored, every field
//! cohost reads is optional and read through [`crate::formats::lenient`] (a field of another type
//! reads as absent). Only a line that is not JSON fails to read.

use serde::Deserialize;
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, object, open_enum};

/// One session-file line: when it was written (message lines only) and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionLine {
    /// RFC 3339 with milliseconds (`2026-12-01T09:06:40.150Z`).
    pub timestamp: Option<String>,
    pub record: SessionRecord,
}

/// A session-file line by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionRecord {
    /// The first line, written at process start: the session's id, title and cwd.
    SessionStart(SessionStart),
    Message(MessageRecord),
    /// Closes a turn.
    AgentTurnOutcome(AgentTurnOutcome),
    /// Any other `type` (empty when the line has none), read no further.
    Other(String),
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Head {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    timestamp: Option<String>,
}

impl SessionLine {
    /// Reads one line; `None` only when it is not JSON. A line that is not an object is
    /// `Other("")`; fields of another type read as absent.
    pub fn from_slice(line: &[u8]) -> Option<SessionLine> {
        let value = serde_json::from_slice::<Value>(line).ok()?;
        Some(SessionLine::from_value(&value))
    }

    pub fn from_value(line: &Value) -> SessionLine {
        let head: Head = object(line);
        let record = match head.kind.as_deref().unwrap_or_default() {
            "session_start" => SessionRecord::SessionStart(object(line)),
            "message" => SessionRecord::Message(object(line)),
            "agent_turn_outcome" => SessionRecord::AgentTurnOutcome(object(line)),
            other => SessionRecord::Other(other.to_string()),
        };
        SessionLine {
            timestamp: head.timestamp,
            record,
        }
    }
}

/// `session_start`: `{"type":"session_start","id","title","owner","version":2,"cwd",…}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionStart {
    /// The session id (equal to the file stem).
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// The first prompt, cut at about 200 characters.
    #[serde(deserialize_with = "lenient::opt")]
    pub title: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
}

/// A `message` line: its id (`context-…` for injected context) and the message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<DroidMessage>,
}

open_enum! {
    /// A message's `role`.
    pub enum Role {
        User = "user",
        Assistant = "assistant",
    }
}

/// A message: its role, content blocks (`text`, `tool_use`, `tool_result`) and, on notices
/// shown to the user only (`BYOK Error: …`), a `visibility`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DroidMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub role: Option<Role>,
    /// The elements of `content` that are objects (a string content reads as none).
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<ContentBlock>,
    /// Kept as written: `Some(Value::Null)` is a `visibility` that is `null`.
    #[serde(deserialize_with = "lenient::opt")]
    pub visibility: Option<Value>,
}

impl DroidMessage {
    /// Whether the message carries a `visibility` that is not `null`.
    pub fn has_visibility(&self) -> bool {
        self.visibility
            .as_ref()
            .is_some_and(|visibility| !visibility.is_null())
    }
}

/// One content block: `text` (its text), `tool_use` (its id), `tool_result` (the `tool_use_id`
/// it answers).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ContentBlock {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
}

/// `agent_turn_outcome`: `reason` is `completed`, `model_request_rejected`, …
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct AgentTurnOutcome {
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
}

/// A lock directory's `owner.json`: `{"token":…,"pid":…}`, the process writing the session.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct LockOwner {
    #[serde(deserialize_with = "lenient::opt")]
    pub pid: Option<u64>,
}

impl LockOwner {
    /// The file's contents; `None` unless they are JSON (an object or not).
    pub fn from_slice(bytes: &[u8]) -> Option<LockOwner> {
        let value = serde_json::from_slice::<Value>(bytes).ok()?;
        Some(object(&value))
    }
}

lenient_object!(DroidMessage, ContentBlock);

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of `droid exec --auto low` in docs/reference's watcher observations (Droid
    /// 0.225.2); the parts elided there with `…` outside a string are left out.
    #[test]
    fn recorded_lines_of_0_225_2() {
        let line = |text: &str| SessionLine::from_slice(text.as_bytes()).unwrap();
        let start = line(
            r#"{"type":"session_start","id":"c9f34e25-4d26-4856-a180-59e01f961fed","title":"Run echo hi please [[mock:{…","owner":"unknown","version":2,"cwd":"/home/me/proj","hostId":"02d83113-…","isSessionTitleManuallySet":false}"#,
        );
        assert_eq!(start.timestamp, None);
        assert_eq!(
            start.record,
            SessionRecord::SessionStart(SessionStart {
                id: Some("c9f34e25-4d26-4856-a180-59e01f961fed".into()),
                title: Some("Run echo hi please [[mock:{…".into()),
                cwd: Some("/home/me/proj".into()),
            })
        );
        let context = line(
            r#"{"type":"message","id":"context-2d36373e-…","timestamp":"2026-12-01T09:06:40.150Z","message":{"role":"user","content":[{"type":"text","text":"<system-reminder>\nThe tools listed below are available …"}]}}"#,
        );
        assert_eq!(
            context.timestamp.as_deref(),
            Some("2026-12-01T09:06:40.150Z")
        );
        let SessionRecord::Message(context) = context.record else {
            panic!()
        };
        assert_eq!(context.id.as_deref(), Some("context-2d36373e-…"));
        let SessionRecord::Message(call) = line(
            r#"{"type":"message","id":"84773ab8-…","parentId":"2d36373e-…","timestamp":"2026-12-01T09:06:40.356Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_mock_885d…","name":"Execute","input":{"command":"echo hi","riskLevel":"low","riskLevelReason":"prints"}}],"modelId":"custom:Mock-0","reasoningEffort":"none"}}"#,
        )
        .record
        else {
            panic!()
        };
        let call = call.message.unwrap();
        assert_eq!(call.role, Some(Role::Assistant));
        assert_eq!(call.content[0].kind.as_deref(), Some("tool_use"));
        assert_eq!(call.content[0].id.as_deref(), Some("toolu_mock_885d…"));
        assert!(!call.has_visibility());
        let SessionRecord::Message(result) = line(
            r#"{"type":"message","id":"375d741d-…","parentId":"84773ab8-…","timestamp":"2026-12-01T09:06:40.433Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_mock_885d…","is_error":false,"content":"hi\n\n\n[Process exited with code 0]"}]}}"#,
        )
        .record
        else {
            panic!()
        };
        assert_eq!(
            result.message.unwrap().content[0].tool_use_id.as_deref(),
            Some("toolu_mock_885d…")
        );
        assert_eq!(
            line(
                r#"{"type":"agent_turn_outcome","turnId":"2d36373e-071c-4893-87e2-9ec9a2763f2d","reason":"completed","resultKind":"text"}"#
            )
            .record,
            SessionRecord::AgentTurnOutcome(AgentTurnOutcome {
                reason: Some("completed".into())
            })
        );
        assert_eq!(
            LockOwner::from_slice(br#"{"token":"t","pid":20343}"#),
            Some(LockOwner { pid: Some(20343) })
        );
    }

    #[test]
    fn odd_lines_read_with_fields_absent() {
        assert_eq!(SessionLine::from_slice(b"{"), None);
        let odd = SessionLine::from_value(&serde_json::json!({
            "type": "message", "id": 7, "timestamp": 1,
            "message": {"role": "system", "content": "text", "visibility": null}
        }));
        assert_eq!(odd.timestamp, None);
        let SessionRecord::Message(MessageRecord {
            id: None,
            message: Some(message),
        }) = odd.record
        else {
            panic!("{odd:?}")
        };
        assert_eq!(message.role, Some(Role::Other("system".into())));
        assert!(message.content.is_empty() && !message.has_visibility());
        let notice = SessionLine::from_value(&serde_json::json!({
            "type": "message", "message": {"role": "user", "visibility": "user"}
        }));
        assert!(matches!(
            notice.record,
            SessionRecord::Message(MessageRecord { message: Some(m), .. }) if m.has_visibility()
        ));
        assert_eq!(
            LockOwner::from_slice(br#"{"pid":"x"}"#),
            Some(LockOwner::default())
        );
    }
}
