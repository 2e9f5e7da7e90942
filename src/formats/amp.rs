//! What legacy Amp wrote that cohost reads, as serde types: a thread file
//! (`~/.local/share/amp/threads/T-<id>.json`, one JSON document per thread, rewritten whole on
//! every change): its version counter `v`, `id`, `title`, `messages` (role, content items,
//! `state`) and `env.initial.trees` (the project directories as `file://` URIs). The shapes are
//! those opensessions describes ("observed v2025-03"); current Amp keeps threads on its server
//! and writes none of these.
//!
//! Permissive as `formats::claude`: unknown fields are ignored, every field cohost reads is
//! optional and read through [`crate::formats::lenient`] (a field of another type reads as
//! absent). `messages` and `trees` keep their positions (an element that is not an object reads
//! as an empty one), since a reader takes the last message and the first tree.

use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, lenient_via_value, object};

/// An array's elements, each read as a `T` in its place (one that is not an object reads as a
/// default `T`); anything but an array reads as empty.
fn positional<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items.iter().map(object).collect(),
        _ => Vec::new(),
    })
}

/// A thread file, `T-<id>.json`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ThreadFile {
    /// Counts the file's rewrites.
    #[serde(deserialize_with = "lenient::opt")]
    pub v: Option<u64>,
    /// `T-<id>`, the file's stem.
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub title: Option<String>,
    #[serde(deserialize_with = "positional")]
    pub messages: Vec<Message>,
    #[serde(deserialize_with = "lenient::opt")]
    pub env: Option<ThreadEnv>,
}

impl ThreadFile {
    /// The file's contents; `None` unless they are JSON. A document that is not an object
    /// reads with every field absent.
    pub fn from_slice(bytes: &[u8]) -> Option<ThreadFile> {
        let value = serde_json::from_slice::<Value>(bytes).ok()?;
        Some(object(&value))
    }

    /// `env.initial.trees[0]`: the project directory the thread started in.
    pub fn first_tree(&self) -> Option<&Tree> {
        self.env.as_ref()?.initial.as_ref()?.trees.first()
    }
}

/// `env`: the environment the thread started in.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ThreadEnv {
    #[serde(deserialize_with = "lenient::opt")]
    pub initial: Option<InitialEnv>,
}

/// `env.initial`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct InitialEnv {
    #[serde(deserialize_with = "positional")]
    pub trees: Vec<Tree>,
}

/// A project directory: `{"displayName":"proj","uri":"file:///home/me/proj"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Tree {
    #[serde(deserialize_with = "lenient::opt")]
    pub uri: Option<String>,
}

impl Tree {
    /// The directory of a `file://` URI, percent-decoded (`file:///home/me/other%20proj` →
    /// `/home/me/other proj`).
    pub fn path(&self) -> Option<PathBuf> {
        file_uri_path(self.uri.as_deref()?)
    }
}

/// `file:///home/me/other%20proj` → `/home/me/other proj`.
fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let path = uri.strip_prefix("file://")?;
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).ok().map(PathBuf::from)
}

/// One message: `user` (a prompt or tool results) or `assistant` (with its `state`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Message {
    #[serde(deserialize_with = "lenient::opt")]
    pub role: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<MessageContent>,
    #[serde(deserialize_with = "lenient::opt")]
    pub state: Option<MessageState>,
}

impl Message {
    /// The content's items (none for a string content).
    pub fn items(&self) -> &[ContentItem] {
        match &self.content {
            Some(MessageContent::Items(items)) => items,
            _ => &[],
        }
    }
}

/// A message's `content`: a string, or items (`text`, `tool_use`, `tool_result`, …).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    /// The items that are objects, in order; anything else but a string reads as none.
    #[serde(deserialize_with = "lenient::vec")]
    Items(Vec<ContentItem>),
}

/// A content item: a `text` item's text; a `tool_result`'s run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ContentItem {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub run: Option<ToolRun>,
}

/// A `tool_result`'s `run`: `status` is `in-progress`, `done`, …
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolRun {
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<String>,
}

/// An assistant message's `state`: `type` is `streaming`, `cancelled` or `complete` (with a
/// `stopReason`: `end_turn`, `tool_use`, …).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageState {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_reason: Option<String>,
}

lenient_object!(ThreadEnv, InitialEnv, ContentItem, ToolRun, MessageState);
lenient_via_value!(MessageContent);

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic thread in `tests/fixtures/watchers/amp/T-tool.json` (no real Amp writes
    /// these any more; see its README).
    #[test]
    fn a_thread_file_reads_whole() {
        let bytes = include_bytes!("../../tests/fixtures/watchers/amp/T-tool.json");
        let thread = ThreadFile::from_slice(bytes).unwrap();
        assert_eq!(thread.v, Some(7));
        assert_eq!(
            thread.id.as_deref(),
            Some("T-7f3a9c1e-0000-4000-8000-000000000001")
        );
        assert_eq!(thread.title.as_deref(), Some("Fix the flaky test"));
        assert_eq!(
            thread.first_tree().and_then(Tree::path),
            Some(PathBuf::from("/home/me/proj"))
        );
        assert_eq!(thread.messages.len(), 3);
        let assistant = &thread.messages[1];
        assert_eq!(assistant.role.as_deref(), Some("assistant"));
        let state = assistant.state.as_ref().unwrap();
        assert_eq!(
            (state.kind.as_deref(), state.stop_reason.as_deref()),
            (Some("complete"), Some("tool_use"))
        );
        let result = &thread.messages[2].items()[0];
        assert_eq!(result.kind.as_deref(), Some("tool_result"));
        assert_eq!(
            result.run.as_ref().and_then(|run| run.status.as_deref()),
            Some("in-progress")
        );
    }

    #[test]
    fn odd_documents_keep_positions_and_read_with_fields_absent() {
        assert_eq!(ThreadFile::from_slice(b"{"), None);
        assert_eq!(ThreadFile::from_slice(b"5"), Some(ThreadFile::default()));
        let thread = ThreadFile::from_slice(
            br#"{"v":"7","messages":[{"role":"user","content":"hi"},3],
                "env":{"initial":{"trees":[null,{"uri":"file:///b"}]}}}"#,
        )
        .unwrap();
        assert_eq!(thread.v, None);
        assert_eq!(
            thread.messages.len(),
            2,
            "a message that is no object keeps its place"
        );
        assert_eq!(thread.messages[1], Message::default());
        assert_eq!(
            thread.messages[0].content,
            Some(MessageContent::Text("hi".into()))
        );
        assert_eq!(thread.first_tree(), Some(&Tree::default()));
        assert_eq!(
            Tree {
                uri: Some("file:///home/me/other%20proj".into())
            }
            .path(),
            Some(PathBuf::from("/home/me/other proj"))
        );
        assert_eq!(
            Tree {
                uri: Some("/no/scheme".into())
            }
            .path(),
            None
        );
    }
}
