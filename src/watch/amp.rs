//! Amp, legacy local threads: `~/.local/share/amp/threads/T-<id>.json`, one JSON document per
//! thread, rewritten whole (atomically) on every change, so it is read as a snapshot. Current Amp
//! keeps its threads on its server and writes no such files; for it, cohost ships a plugin that
//! reports through `POST /api/agent-event` (`integrations/amp/`). See docs/peers.md, "Amp".
//!
//! Status from the last message: a user message with a `tool_result` whose `run.status` is
//! `in-progress` → tool-running, any other user message → running; an assistant message with no
//! `state` or `state.type:"streaming"` → running, `cancelled` → interrupted, `complete` with
//! `stopReason` `end_turn` → done, `tool_use` → running, any other → error. Thread id from `id`,
//! title from `title`, cwd from `env.initial.trees[0].uri`, the prompt from the last user
//! message's text.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{Decoder, FileKind, Format, Locator, Observation, WatchEnv, WatchedAgent};
use crate::formats::amp::{Message, MessageContent, ThreadFile, Tree};
use crate::protocol::AgentStatus;

/// Amp's (legacy) watcher format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Amp;

impl Format for Amp {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::Amp
    }

    /// `$XDG_DATA_HOME/amp/threads` (default `~/.local/share/amp/threads`).
    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        let data = env
            .var("XDG_DATA_HOME")
            .map_or_else(|| env.home.join(".local/share"), PathBuf::from);
        vec![data.join("amp/threads")]
    }

    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        (name.starts_with("T-") && name.ends_with(".json")).then_some(FileKind::Snapshot)
    }

    fn decoder(&self, path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        let restored = saved.and_then(|value| serde_json::from_value::<AmpDecoder>(value).ok());
        Box::new(restored.unwrap_or_else(|| {
            AmpDecoder {
                thread_id: path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string(),
                version: None,
            }
        }))
    }
}

/// One thread file (kept in the checkpoint: the version last read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmpDecoder {
    thread_id: String,
    /// The document's `v` last decoded: a rewrite with the same `v` says nothing new.
    version: Option<u64>,
}

impl Decoder for AmpDecoder {
    fn line(&mut self, _line: &[u8], _at: &Locator, _out: &mut Vec<Observation>) {}

    fn snapshot(&mut self, bytes: &[u8], out: &mut Vec<Observation>) {
        let Some(thread) = ThreadFile::from_slice(bytes) else {
            return;
        };
        let version = thread.v;
        if version.is_some() && version == self.version {
            return;
        }
        self.version = version;
        if let Some(id) = thread.id.as_deref().filter(|id| !id.is_empty()) {
            self.thread_id = id.to_string();
        }
        let messages = &thread.messages;
        let (status, rule) = messages
            .last()
            .map_or((None, "no messages"), last_message_status);
        let prompt = messages
            .iter()
            .rev()
            .filter(|m| m.role.as_deref() == Some("user"))
            .find_map(|m| first_text(m.content.as_ref()));
        let cwd = thread.first_tree().and_then(Tree::path);
        out.push(Observation {
            thread_id: self.thread_id.clone(),
            status,
            cwd,
            title: thread.title.filter(|t| !t.trim().is_empty()),
            last_user_prompt: prompt,
            rule: format!("amp: thread v{} {rule}", version.unwrap_or(0)),
            ..Observation::default()
        });
    }

    fn removed(&mut self, out: &mut Vec<Observation>) {
        out.push(Observation {
            thread_id: self.thread_id.clone(),
            ended: true,
            rule: "amp: thread file removed → ended".into(),
            ..Observation::default()
        });
    }

    fn save(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn last_message_status(message: &Message) -> (Option<AgentStatus>, &'static str) {
    match message.role.as_deref() {
        Some("user") => {
            let in_progress = message.items().iter().any(|item| {
                item.kind.as_deref() == Some("tool_result")
                    && item.run.as_ref().and_then(|run| run.status.as_deref())
                        == Some("in-progress")
            });
            if in_progress {
                (
                    Some(AgentStatus::ToolRunning),
                    "last message user tool_result in-progress → tool-running",
                )
            } else {
                (Some(AgentStatus::Running), "last message user → running")
            }
        }
        Some("assistant") => {
            let state = message.state.as_ref();
            match state.and_then(|state| state.kind.as_deref()) {
                None | Some("streaming") => (
                    Some(AgentStatus::Running),
                    "last message assistant streaming → running",
                ),
                Some("cancelled") => (
                    Some(AgentStatus::Interrupted),
                    "last message assistant cancelled → interrupted",
                ),
                Some("complete") => match state.and_then(|state| state.stop_reason.as_deref()) {
                    Some("end_turn") => (
                        Some(AgentStatus::Done),
                        "last message assistant complete end_turn → done",
                    ),
                    Some("tool_use") => (
                        Some(AgentStatus::Running),
                        "last message assistant complete tool_use → running",
                    ),
                    _ => (
                        Some(AgentStatus::Error),
                        "last message assistant complete, other stopReason → error",
                    ),
                },
                Some(_) => (None, "last message assistant, unknown state"),
            }
        }
        _ => (None, "last message of unknown role"),
    }
}

fn first_text(content: Option<&MessageContent>) -> Option<String> {
    match content? {
        MessageContent::Text(text) => Some(text.trim().to_string()),
        MessageContent::Items(items) => items
            .iter()
            .filter(|item| item.kind.as_deref() == Some("text"))
            .find_map(|item| item.text.as_deref())
            .map(|text| text.trim().to_string()),
    }
    .filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(name: &str) -> Observation {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/amp")
            .join(name);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(Amp.classify(&path), Some(FileKind::Snapshot));
        let mut decoder = Amp.decoder(&path, None);
        let mut out = Vec::new();
        decoder.snapshot(&bytes, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        // The same version again says nothing new.
        decoder.snapshot(&bytes, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        out.remove(0)
    }

    #[test]
    fn a_tool_in_progress_is_tool_running() {
        let o = decode("T-tool.json");
        assert_eq!(o.thread_id, "T-7f3a9c1e-0000-4000-8000-000000000001");
        assert_eq!(o.status, Some(AgentStatus::ToolRunning));
        assert_eq!(o.title.as_deref(), Some("Fix the flaky test"));
        assert_eq!(o.cwd.as_deref(), Some(Path::new("/home/me/proj")));
        assert_eq!(
            o.last_user_prompt.as_deref(),
            Some("Fix the flaky test in tail.rs"),
            "the tool_result message is no prompt"
        );
    }

    #[test]
    fn end_turn_is_done_and_cancelled_is_interrupted() {
        let done = decode("T-done.json");
        assert_eq!(done.status, Some(AgentStatus::Done));
        assert_eq!(done.cwd.as_deref(), Some(Path::new("/home/me/other proj")));
        assert!(done.rule.starts_with("amp: thread v12 "), "{}", done.rule);
        let cancelled = decode("T-cancelled.json");
        assert_eq!(cancelled.status, Some(AgentStatus::Interrupted));
        assert_eq!(cancelled.cwd, None);
    }

    #[test]
    fn a_removed_thread_ends_and_other_stop_reasons_are_errors() {
        let mut decoder = Amp.decoder(Path::new("/t/T-x.json"), None);
        let mut out = Vec::new();
        decoder.snapshot(
            br#"{"v":1,"messages":[{"role":"assistant","state":{"type":"complete","stopReason":"max_tokens"}}]}"#,
            &mut out,
        );
        decoder.removed(&mut out);
        assert_eq!(out[0].thread_id, "T-x");
        assert_eq!(out[0].status, Some(AgentStatus::Error));
        assert!(out[1].ended);
        assert_eq!(Amp.classify(Path::new("/t/session.json")), None);
    }
}
