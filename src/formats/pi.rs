//! What Pi (`@mariozechner/pi-coding-agent`, since 1.0 `@earendil-works/pi-coding-agent`)
//! writes that cohost reads, as serde types: the
//! entries of a session file (`~/.pi/agent/sessions/--<cwd>--/<ISO-ts>_<sessionId>.jsonl`,
//! Pi's `docs/session-format.md` version 3: a `session` header, then `message`, `model_change`,
//! `session_info`, … entries, each appended whole) and the `sessionDir` of its
//! `settings.json`. Field names are Pi's (`stopReason`, `toolCallId`). Shapes are those of
//! Pi 0.73.1 and 1.6.0, which writes the same entries plus a `system` message before the first
//! prompt (and more fields on assistant and tool-result messages, which cohost does not read).
//!
//! Permissive as `formats::claude`: unknown entry types, roles and fields are ignored, every
//! field cohost reads is optional and read through [`crate::formats::lenient`] (a field of
//! another type reads as absent), roles and stop reasons are open enums. Only a line that is not
//! JSON fails to read.

use serde::Deserialize;
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, lenient_via_value, object, open_enum};

/// One session-file line, by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEntry {
    /// The first line: the session's id and working directory.
    Session(SessionHeader),
    Message(MessageEntry),
    /// `/name X`: the session's name.
    SessionInfo(SessionInfoEntry),
    /// Any other `type` (`model_change`, `thinking_level_change`, `compaction`, `label`, …;
    /// empty when the line has none), read no further.
    Other(String),
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct EntryType {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    kind: Option<String>,
}

impl SessionEntry {
    /// Reads one line; `None` only when it is not JSON. A line that is not an object is
    /// `Other("")`; fields of another type read as absent.
    pub fn from_slice(line: &[u8]) -> Option<SessionEntry> {
        let value = serde_json::from_slice::<Value>(line).ok()?;
        Some(SessionEntry::from_value(&value))
    }

    pub fn from_value(line: &Value) -> SessionEntry {
        match object::<EntryType>(line).kind.unwrap_or_default().as_str() {
            "session" => SessionEntry::Session(object(line)),
            "message" => SessionEntry::Message(object(line)),
            "session_info" => SessionEntry::SessionInfo(object(line)),
            other => SessionEntry::Other(other.to_string()),
        }
    }
}

/// The `session` header: `{"type":"session","version":3,"id","timestamp","cwd"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionHeader {
    /// The session id (also the file name's suffix after `_`).
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// RFC 3339 with milliseconds (`2026-12-01T09:04:09.227Z`).
    #[serde(deserialize_with = "lenient::opt")]
    pub timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
}

/// A `message` entry: its id, when it was written and the message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageEntry {
    /// The entry's id (8 hex digits, unique in its file, never rewritten: an adopted Pi's
    /// items are named by it).
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// RFC 3339 with milliseconds.
    #[serde(deserialize_with = "lenient::opt")]
    pub timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<AgentMessage>,
}

open_enum! {
    /// A message's `role`.
    pub enum Role {
        User = "user",
        Assistant = "assistant",
        /// A tool's answer to one `toolCall`.
        ToolResult = "toolResult",
        /// A `!` command the user typed.
        BashExecution = "bashExecution",
        Custom = "custom",
        BranchSummary = "branchSummary",
        CompactionSummary = "compactionSummary",
        /// Pi 1.x: the system prompt, once, before a session's first user message (`content`
        /// empty, the prompt in `sections`, the tools in `toolsAdded`).
        System = "system",
    }
}

open_enum! {
    /// An assistant message's `stopReason`.
    pub enum StopReason {
        Stop = "stop",
        /// Cut at the token limit.
        Length = "length",
        ToolUse = "toolUse",
        Error = "error",
        Aborted = "aborted",
    }
}

/// A message: `user` (the prompt), `assistant` (content blocks, `stopReason`), `toolResult`
/// (`toolCallId`), or one of the extended roles.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub role: Option<Role>,
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<MessageContent>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_call_id: Option<String>,
    /// `toolResult`: the tool's name (`bash`, `read`, …).
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    /// `toolResult`: the tool failed (or was declined, or aborted).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_error: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_reason: Option<StopReason>,
    /// An assistant message that ended `error` or `aborted`: why.
    #[serde(deserialize_with = "lenient::opt")]
    pub error_message: Option<String>,
    /// When the message was made (ms since the epoch); not on every assistant message.
    #[serde(deserialize_with = "lenient::opt")]
    pub timestamp: Option<u64>,
}

/// A message's `content`: a string, or blocks (`text`, `toolCall`, `thinking`, `image`, …).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    /// The elements that are objects, in order; anything else but a string reads as none.
    #[serde(deserialize_with = "lenient::vec")]
    Blocks(Vec<ContentBlock>),
}

/// One content block: a `text` block's text, a `toolCall` block's id, name and arguments.
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
    pub name: Option<String>,
    /// A `toolCall`'s arguments, as Pi wrote them (`{"command":"echo hi"}` for `bash`).
    pub arguments: Option<Value>,
}

impl MessageContent {
    /// The text of the message: a string as it is, else the `text` blocks' texts joined with
    /// newlines.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Blocks(blocks) => blocks
                .iter()
                .filter(|b| b.kind.as_deref() == Some("text"))
                .filter_map(|b| b.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// `session_info`: `{"type":"session_info","timestamp","name"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionInfoEntry {
    #[serde(deserialize_with = "lenient::opt")]
    pub timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub name: Option<String>,
}

/// `<agent dir>/settings.json`, of which cohost reads where sessions go.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    /// `~/x` allowed.
    #[serde(deserialize_with = "lenient::opt")]
    pub session_dir: Option<String>,
}

impl Settings {
    /// The file's contents; `None` unless they are JSON (an object or not).
    pub fn from_slice(bytes: &[u8]) -> Option<Settings> {
        let value = serde_json::from_slice::<Value>(bytes).ok()?;
        Some(object(&value))
    }
}

lenient_object!(AgentMessage, ContentBlock);
lenient_via_value!(MessageContent);

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of the session in docs/reference's watcher observations (Pi 0.73.1); the parts
    /// elided there with `…` outside a string are left out.
    #[test]
    fn recorded_lines_of_0_73_1() {
        let entry = |line: &str| SessionEntry::from_slice(line.as_bytes()).unwrap();
        assert_eq!(
            entry(
                r#"{"type":"session","version":3,"id":"01a230d8-e00a-7090-ab88-eb4087961300","timestamp":"2026-12-01T09:04:09.227Z","cwd":"/home/me/proj"}"#
            ),
            SessionEntry::Session(SessionHeader {
                id: Some("01a230d8-e00a-7090-ab88-eb4087961300".into()),
                timestamp: Some("2026-12-01T09:04:09.227Z".into()),
                cwd: Some("/home/me/proj".into()),
            })
        );
        assert_eq!(
            entry(
                r#"{"type":"model_change","id":"44fdb62f","parentId":null,"timestamp":"2026-12-01T09:04:09.237Z","provider":"mock","modelId":"mock-model"}"#
            ),
            SessionEntry::Other("model_change".into())
        );
        let SessionEntry::Message(user) = entry(
            r#"{"type":"message","id":"7d88591d","parentId":"30128fce","timestamp":"2026-12-01T09:04:16.061Z","message":{"role":"user","content":[{"type":"text","text":"Run echo hi please …"}],"timestamp":1796115856055}}"#,
        ) else {
            panic!()
        };
        assert_eq!(user.timestamp.as_deref(), Some("2026-12-01T09:04:16.061Z"));
        let message = user.message.unwrap();
        assert_eq!(message.role, Some(Role::User));
        assert_eq!(message.timestamp, Some(1796115856055));
        assert_eq!(
            message.content,
            Some(MessageContent::Blocks(vec![ContentBlock {
                kind: Some("text".into()),
                text: Some("Run echo hi please …".into()),
                ..ContentBlock::default()
            }]))
        );
        let SessionEntry::Message(call) = entry(
            r#"{"type":"message","id":"72770b19","parentId":"7d88591d","timestamp":"2026-12-01T09:04:16.185Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_mock_88ad…","name":"bash","arguments":{"command":"echo hi"}}],"api":"anthropic-messages","provider":"mock","model":"mock-model","usage":{},"stopReason":"toolUse"}}"#,
        ) else {
            panic!()
        };
        let call = call.message.unwrap();
        assert_eq!(call.stop_reason, Some(StopReason::ToolUse));
        let Some(MessageContent::Blocks(blocks)) = &call.content else {
            panic!("{call:?}")
        };
        assert_eq!(blocks[0].id.as_deref(), Some("toolu_mock_88ad…"));
        let SessionEntry::Message(result) = entry(
            r#"{"type":"message","id":"e89c4478","parentId":"72770b19","timestamp":"2026-12-01T09:04:16.228Z","message":{"role":"toolResult","toolCallId":"toolu_mock_88ad…","toolName":"bash","content":[{"type":"text","text":"hi\n"}],"isError":false,"timestamp":1796115856228}}"#,
        ) else {
            panic!()
        };
        let result = result.message.unwrap();
        assert_eq!(result.role, Some(Role::ToolResult));
        assert_eq!(result.tool_call_id.as_deref(), Some("toolu_mock_88ad…"));
        let SessionEntry::Message(aborted) = entry(
            r#"{"type":"message","id":"c12a25a5","parentId":"32b479ad","timestamp":"2026-12-01T09:04:31.473Z","message":{"role":"assistant","content":[{"type":"text","text":"Once upon a time there was a very long s"}],"stopReason":"aborted","timestamp":1796115866444,"errorMessage":"Operation aborted"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            aborted.message.unwrap().stop_reason,
            Some(StopReason::Aborted)
        );
        assert_eq!(
            entry(
                r#"{"type":"session_info","id":"ac336ae7","parentId":"fe2b13d8","timestamp":"2026-12-01T09:04:48.971Z","name":"My watcher test"}"#
            ),
            SessionEntry::SessionInfo(SessionInfoEntry {
                timestamp: Some("2026-12-01T09:04:48.971Z".into()),
                name: Some("My watcher test".into()),
            })
        );
    }

    /// Lines of a session recorded with Pi 1.6.0 (`tests/fixtures/watchers/pi/session-1.6.0.jsonl`,
    /// the watcher test's turns); the long strings of the `system` line are cut with `…`.
    #[test]
    fn recorded_lines_of_1_6_0() {
        let entry = |line: &str| SessionEntry::from_slice(line.as_bytes()).unwrap();
        assert_eq!(
            entry(
                r#"{"type":"session","version":3,"id":"01a238dc-b1e7-7333-bc85-630a481bd88e","timestamp":"2026-12-02T22:25:17.287Z","cwd":"/home/me/proj"}"#
            ),
            SessionEntry::Session(SessionHeader {
                id: Some("01a238dc-b1e7-7333-bc85-630a481bd88e".into()),
                timestamp: Some("2026-12-02T22:25:17.287Z".into()),
                cwd: Some("/home/me/proj".into()),
            })
        );
        let SessionEntry::Message(system) = entry(
            r#"{"type":"message","id":"603fa4a5","parentId":"9687f923","timestamp":"2026-12-02T22:25:18.172Z","message":{"role":"system","content":"","sections":{"preamble":"You are a coding assistant running inside pi, a coding agent harness. …","tools":"<tools>\n- read: Read file contents\n…</tools>","rules":"<rules>\n…</rules>","docs":"<docs>\n…</docs>","cwd":"<cwd>\n/home/me/proj\n</cwd>"},"timestamp":1796250318169,"toolsAdded":[{"name":"read","description":"Read the contents of a file. …","parameters":{"type":"object","required":["path"]}}]}}"#,
        ) else {
            panic!()
        };
        let system = system.message.unwrap();
        assert_eq!(system.role, Some(Role::System));
        assert_eq!(system.content, Some(MessageContent::Text(String::new())));
        let SessionEntry::Message(user) = entry(
            r#"{"type":"message","id":"6a69bf46","parentId":"603fa4a5","timestamp":"2026-12-02T22:25:18.174Z","message":{"role":"user","content":[{"type":"text","text":"Run echo hi please"}],"timestamp":1796250318168}}"#,
        ) else {
            panic!()
        };
        assert_eq!(user.message.unwrap().role, Some(Role::User));
        let SessionEntry::Message(call) = entry(
            r#"{"type":"message","id":"7c77cd7a","parentId":"6a69bf46","timestamp":"2026-12-02T22:25:18.302Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_mock_0003","name":"bash","arguments":{"command":"echo hi"}}],"api":"anthropic-messages","provider":"mock","model":"mock-model","usage":{"input":100,"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":110,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false},"cacheWrite1h":0},"stopReason":"toolUse","timestamp":1796250318200,"responseId":"msg_mock_0002","rawStopReason":"tool_use","durationMs":97,"thinkingLevel":"off"}}"#,
        ) else {
            panic!()
        };
        let call = call.message.unwrap();
        assert_eq!(call.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(call.timestamp, Some(1796250318200));
        let Some(MessageContent::Blocks(blocks)) = &call.content else {
            panic!("{call:?}")
        };
        assert_eq!(blocks[0].id.as_deref(), Some("toolu_mock_0003"));
        let SessionEntry::Message(result) = entry(
            r#"{"type":"message","id":"ddbb57ac","parentId":"7c77cd7a","timestamp":"2026-12-02T22:25:18.354Z","message":{"role":"toolResult","toolCallId":"toolu_mock_0003","toolName":"bash","content":[{"type":"text","text":"hi\n"}],"isError":false,"durationMs":37,"timestamp":1796250318354}}"#,
        ) else {
            panic!()
        };
        let result = result.message.unwrap();
        assert_eq!(result.role, Some(Role::ToolResult));
        assert_eq!(result.tool_call_id.as_deref(), Some("toolu_mock_0003"));
        for (line, reason) in [
            (
                r#"{"type":"message","id":"6a113fc6","parentId":"ddbb57ac","timestamp":"2026-12-02T22:25:18.394Z","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"api":"anthropic-messages","provider":"mock","model":"mock-model","usage":{"input":100,"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":110,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false},"cacheWrite1h":0},"stopReason":"stop","timestamp":1796250318363,"responseId":"msg_mock_0005","rawStopReason":"end_turn","durationMs":31,"thinkingLevel":"off"}}"#,
                StopReason::Stop,
            ),
            (
                r#"{"type":"message","id":"8c666d19","parentId":"a951ecd0","timestamp":"2026-12-02T22:25:20.938Z","message":{"role":"assistant","content":[{"type":"text","text":"Once upon a time\n"}],"api":"anthropic-messages","provider":"mock","model":"mock-model","usage":{"input":100,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":101,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false},"cacheWrite1h":0},"stopReason":"aborted","timestamp":1796250320888,"responseId":"msg_mock_0007","errorMessage":"Operation aborted","durationMs":50,"thinkingLevel":"off"}}"#,
                StopReason::Aborted,
            ),
            (
                r#"{"type":"message","id":"2ae5c95f","parentId":"7326e2ca","timestamp":"2026-12-02T22:25:21.328Z","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"mock","model":"mock-model","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","timestamp":1796250321316,"errorMessage":"400 {\"error\":{\"message\":\"mock failure\",\"type\":\"invalid_request_error\"},\"type\":\"error\"}","durationMs":11,"thinkingLevel":"off"}}"#,
                StopReason::Error,
            ),
        ] {
            let SessionEntry::Message(reply) = entry(line) else {
                panic!("{line}")
            };
            assert_eq!(reply.message.unwrap().stop_reason, Some(reason), "{line}");
        }
        assert_eq!(
            entry(
                r#"{"type":"session_info","id":"0a3fb60d","parentId":"2ae5c95f","timestamp":"2026-12-02T22:25:21.730Z","name":"My watcher test"}"#
            ),
            SessionEntry::SessionInfo(SessionInfoEntry {
                timestamp: Some("2026-12-02T22:25:21.730Z".into()),
                name: Some("My watcher test".into()),
            })
        );
    }

    #[test]
    fn odd_lines_read_with_fields_absent() {
        assert_eq!(SessionEntry::from_slice(b"not json"), None);
        assert_eq!(
            SessionEntry::from_slice(b"[1]"),
            Some(SessionEntry::Other(String::new()))
        );
        let odd = SessionEntry::from_value(&serde_json::json!({
            "type": "message",
            "message": {"role": "narrator", "content": "  told  ", "stopReason": 3, "timestamp": "x"}
        }));
        let SessionEntry::Message(MessageEntry {
            message: Some(message),
            ..
        }) = odd
        else {
            panic!("{odd:?}")
        };
        assert_eq!(message.role, Some(Role::Other("narrator".into())));
        assert_eq!(
            message.content,
            Some(MessageContent::Text("  told  ".into()))
        );
        assert_eq!((message.stop_reason, message.timestamp), (None, None));
        let odd = SessionEntry::from_value(&serde_json::json!({
            "type": "message", "message": {"content": ["x", {"type": "text", "text": 1}]}
        }));
        let SessionEntry::Message(MessageEntry {
            message: Some(message),
            ..
        }) = odd
        else {
            panic!("{odd:?}")
        };
        assert_eq!(
            message.content,
            Some(MessageContent::Blocks(vec![ContentBlock {
                kind: Some("text".into()),
                ..ContentBlock::default()
            }]))
        );
        assert_eq!(
            Settings::from_slice(br#"{"sessionDir":"~/elsewhere"}"#)
                .unwrap()
                .session_dir
                .as_deref(),
            Some("~/elsewhere")
        );
        assert_eq!(Settings::from_slice(b"[]"), Some(Settings::default()));
    }
}
