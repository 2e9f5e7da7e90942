//! An adopted codex TUI's rollout as session events: the lines codex 0.169+ writes
//! (`event_msg/task_started`, `item_completed`, `task_complete`, `turn_aborted`; see
//! ../shared/reference/watchers-observed.md), read as the `formats::codex` types, become
//! `turn.started`, `item.completed` and `turn.completed` under codex's own turn and item ids, so
//! reading a line twice (after a daemon restart) gives the same events, which the core refuses
//! as duplicates. A command the agent ran (`CommandExecution`) is a `command` item with its
//! output, as a hosted codex session's `commandExecution` is, under the same id (the model's
//! `call_id`); a patch it applied (`FileChange`) a `fileChange` item with its files.
//!
//! Pure: it takes lines and gives events.

use std::collections::VecDeque;

use crate::formats::codex::{
    ContentItem, EventMsg, PatchChange, RolloutItem, RolloutLine, TurnItem,
};
use crate::protocol::{
    EventKind, FileChange, FileChangeKind, Item, ItemEvent, TurnCompleted, TurnSource, TurnStarted,
    TurnStatus,
};

/// Follows one rollout.
#[derive(Debug, Default)]
pub struct RolloutEvents {
    /// The turn running now, by codex's turn id.
    turn: Option<String>,
    /// Prompts cohost pasted whose turn has not started yet (their turns are `api`).
    pasted: VecDeque<String>,
}

fn texts(content: &[ContentItem]) -> String {
    content
        .iter()
        .filter_map(|part| part.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An argv as one shell line, as the app-server shows a `commandExecution`'s `command`
/// (`/bin/bash -lc 'echo hi'`): a word with anything but `[A-Za-z0-9_@%+=:,./-]` is
/// single-quoted, a `'` in it written `'"'"'`.
fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\"'\"'"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A rollout item as a session item; `None` for the kinds not mirrored (web searches, …) and
/// an item without an id.
fn item(item: &TurnItem) -> Option<Item> {
    let id = item.id.clone().filter(|id| !id.is_empty())?;
    Some(match item.kind.as_deref()? {
        "UserMessage" => Item::UserMessage {
            id,
            text: texts(&item.content),
        },
        "AgentMessage" => Item::AgentMessage {
            id,
            text: texts(&item.content),
            interrupted: false,
        },
        "Reasoning" => Item::Reasoning {
            id,
            summary: item.summary_text.clone(),
        },
        "CommandExecution" => Item::Command {
            id,
            command: shell_line(&item.command),
            cwd: item.cwd_path(),
            // The app-server's names for codex's snake_case statuses.
            status: match item.status.as_deref() {
                Some("in_progress") => "inProgress".to_string(),
                Some(status) => status.to_string(),
                None => "completed".to_string(),
            },
            exit_code: item.exit_code,
            output: item.aggregated_output.clone(),
            duration_ms: item.duration.as_ref().and_then(|d| d.as_millis()),
        },
        "FileChange" => Item::FileChange {
            id,
            changes: item
                .patch_changes()
                .iter()
                .map(|(path, change)| file_change(path, change))
                .collect(),
            status: match item.status.as_deref() {
                Some("in_progress") => "inProgress".to_string(),
                Some(status) => status.to_string(),
                None => "completed".to_string(),
            },
        },
        _ => return None,
    })
}

/// One file of a rollout's `FileChange`, as a hosted codex session's `fileChange` shows it: an
/// added or deleted file's content, an updated one's unified diff (a move named in front).
fn file_change(path: &str, change: &PatchChange) -> FileChange {
    let kind = match change.kind.as_deref() {
        Some("add") => FileChangeKind::Add,
        Some("delete") => FileChangeKind::Delete,
        Some("update") => FileChangeKind::Update,
        Some(other) => FileChangeKind::from(other.to_string()),
        None => FileChangeKind::Update,
    };
    let diff = match (&change.unified_diff, &change.move_path) {
        (Some(diff), Some(to)) => Some(format!("moved to {to}\n{diff}")),
        (Some(diff), None) => Some(diff.clone()),
        (None, _) => change.content.clone(),
    };
    FileChange {
        path: path.to_string(),
        kind,
        diff,
    }
}

impl RolloutEvents {
    /// A prompt cohost pasted: the next turn that starts is the API's.
    pub fn pasted(&mut self, text: &str) {
        self.pasted.push_back(text.to_string());
    }

    /// The turn running now, if one is.
    pub fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// The events one rollout line gives.
    pub fn line(&mut self, line: &[u8]) -> Vec<EventKind> {
        let Some(RolloutLine {
            item: RolloutItem::EventMsg(event),
            ..
        }) = RolloutLine::from_slice(line)
        else {
            return Vec::new();
        };
        // A line without its turn's id is of the turn running now.
        let turn_of = |id: &Option<String>| id.clone().or_else(|| self.turn.clone());
        match event {
            EventMsg::TaskStarted(started) => {
                let Some(turn_id) = turn_of(&started.turn_id) else {
                    return Vec::new();
                };
                let source = if self.pasted.pop_front().is_some() {
                    TurnSource::Api
                } else {
                    TurnSource::Terminal
                };
                self.turn = Some(turn_id.clone());
                vec![EventKind::TurnStarted(TurnStarted { turn_id, source })]
            }
            EventMsg::ItemCompleted(completed) => {
                let Some(turn_id) = turn_of(&completed.turn_id) else {
                    return Vec::new();
                };
                completed
                    .item
                    .as_ref()
                    .and_then(item)
                    .map(|item| EventKind::ItemCompleted(ItemEvent { turn_id, item }))
                    .into_iter()
                    .collect()
            }
            EventMsg::TaskComplete(complete) => {
                let Some(turn_id) = turn_of(&complete.turn_id) else {
                    return Vec::new();
                };
                let error = complete.error_message();
                vec![self.end(TurnCompleted {
                    turn_id,
                    status: if error.is_some() {
                        TurnStatus::Failed
                    } else {
                        TurnStatus::Completed
                    },
                    error,
                    duration_ms: complete.duration_ms,
                    lost: false,
                })]
            }
            EventMsg::TurnAborted(aborted) => {
                let Some(turn_id) = turn_of(&aborted.turn_id) else {
                    return Vec::new();
                };
                vec![self.end(TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: aborted.duration_ms,
                    lost: false,
                })]
            }
            EventMsg::UserMessage(_) | EventMsg::Other(_) => Vec::new(),
        }
    }

    fn end(&mut self, done: TurnCompleted) -> EventKind {
        if self.turn.as_deref() == Some(done.turn_id.as_str()) {
            self.turn = None;
        }
        EventKind::TurnCompleted(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &mut RolloutEvents, name: &str) -> Vec<EventKind> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/codex")
            .join(name);
        let bytes = std::fs::read(&path).unwrap();
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .flat_map(|line| events.line(line))
            .collect()
    }

    #[test]
    fn turns_prompts_and_endings_under_codexs_ids() {
        let mut events = RolloutEvents::default();
        events.pasted("Run echo hi please");
        let out = run(&mut events, "rollout.jsonl");
        let started: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                EventKind::TurnStarted(t) => Some((t.turn_id.as_str(), t.source)),
                _ => None,
            })
            .collect();
        assert_eq!(started[0], ("t1", TurnSource::Api));
        assert!(started[1..].iter().all(|(_, s)| *s == TurnSource::Terminal));
        let ended: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                EventKind::TurnCompleted(t) => Some((t.turn_id.as_str(), t.status)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ended,
            vec![
                ("t1", TurnStatus::Completed),
                ("t2", TurnStatus::Completed),
                ("t3", TurnStatus::Interrupted),
                ("t4", TurnStatus::Failed),
            ]
        );
        assert!(out.iter().any(|e| matches!(e,
            EventKind::ItemCompleted(ItemEvent { turn_id, item: Item::UserMessage { id, text } })
                if turn_id == "t1" && id == "u1" && text == "Run echo hi please")));
        assert_eq!(events.turn(), None);
        // The same lines again give the same events (the core refuses the repeats).
        let again = run(&mut RolloutEvents::default(), "rollout.jsonl");
        assert_eq!(again.len(), out.len());
    }

    #[test]
    fn a_command_the_agent_ran_is_a_command_item_with_its_output() {
        let out =
            RolloutEvents::default().line(crate::formats::codex::tests::COMMAND_0_171.as_bytes());
        let [EventKind::ItemCompleted(ItemEvent { turn_id, item })] = &out[..] else {
            panic!("{out:?}")
        };
        assert_eq!(turn_id, "01a23e22-7cce-7602-befc-f2fab0a6683f");
        assert_eq!(
            *item,
            Item::Command {
                id: "call_mock_6".into(),
                command: "/bin/bash -lc 'touch made_by_codex.txt && echo made it'".into(),
                cwd: Some("/tmp/cohost-adopt-codex-run2Gu/ws".into()),
                status: "completed".into(),
                exit_code: Some(0),
                output: Some("made it\n".into()),
                duration_ms: Some(0),
            }
        );
        assert_eq!(
            shell_line(&["echo".into(), "it's".into(), String::new(), "a/b.c".into()]),
            r#"echo 'it'"'"'s' '' a/b.c"#
        );
    }

    #[test]
    fn a_patch_the_agent_applied_is_a_file_change_item_with_its_files() {
        // codex 0.171.0's line for an `apply_patch` accepted at its approval prompt.
        let line = br#"{"timestamp":"2026-12-04T12:13:23.501Z","ordinal":11,"type":"event_msg","payload":{"type":"item_completed","thread_id":"th","turn_id":"tu","item":{"type":"FileChange","id":"call_mock_2","changes":{"/var/tmp/cohost-patch-24081/patched.txt":{"type":"add","content":"hello from the patch\n"},"/w/b.rs":{"type":"update","unified_diff":"@@ -1 +1 @@\n-a\n+b\n","move_path":"/w/c.rs"},"/w/odd":7},"status":"completed","stdout":"Success.","stderr":""},"started_at_ms":1796386402861,"completed_at_ms":1796386403501}}"#;
        let out = RolloutEvents::default().line(line);
        let [EventKind::ItemCompleted(ItemEvent { turn_id, item })] = out.as_slice() else {
            panic!("{out:?}");
        };
        assert_eq!(turn_id, "tu");
        let Item::FileChange {
            id,
            changes,
            status,
        } = item
        else {
            panic!("{item:?}");
        };
        assert_eq!((id.as_str(), status.as_str()), ("call_mock_2", "completed"));
        let by_path: Vec<(&str, &str, Option<&str>)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind.as_str(), c.diff.as_deref()))
            .collect();
        assert_eq!(
            by_path,
            [
                (
                    "/var/tmp/cohost-patch-24081/patched.txt",
                    "add",
                    Some("hello from the patch\n")
                ),
                (
                    "/w/b.rs",
                    "update",
                    Some("moved to /w/c.rs\n@@ -1 +1 @@\n-a\n+b\n")
                ),
                ("/w/odd", "update", None),
            ]
        );
    }

    #[test]
    fn an_agent_message_as_codex_writes_it() {
        let line = br#"{"timestamp":"2026-11-29T13:08:38.647Z","ordinal":11,"type":"event_msg","payload":{"type":"item_completed","thread_id":"th","turn_id":"tu","item":{"type":"AgentMessage","id":"msg_1","content":[{"type":"Text","text":"Hello from the mock model!"}]}}}"#;
        let out = RolloutEvents::default().line(line);
        assert!(
            matches!(&out[..], [EventKind::ItemCompleted(ItemEvent { item: Item::AgentMessage { id, text, .. }, .. })]
            if id == "msg_1" && text == "Hello from the mock model!")
        );
    }
}
