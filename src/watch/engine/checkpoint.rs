//! The watchers' checkpoint, `$COHOST_HOME/watch/checkpoint.json`: every file read so far (its
//! inode, the offset after its last complete line, its decoder's or follower's state) and every
//! thread's state and evidence. Saved 2 s after a change and at stop; loaded once at start-up.
//!
//! What a checkpoint holds and how it is read back ([`Checkpoint::parse`], [`Checkpoint::restore`])
//! is pure; the engine reads and writes the file, and compares the threads with the tracker (the
//! event log, not the checkpoint, says what was emitted).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::reading::FileState;
use super::thread::{Emitted, Thread};
use super::{Engine, emit::source_of};
use crate::core::now_ms;
use crate::protocol::EvidenceView;
use crate::watch::format::WatchedAgent;
use crate::watch::procs;

/// The checkpoint file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Checkpoint {
    pub(super) version: u32,
    pub(super) files: Vec<FileCheckpoint>,
    pub(super) threads: Vec<Thread>,
}

/// One file's entry: `{"path","inode","offset"}` (the tails' one position type, flattened, so
/// the entry reads as it always did), its agent and its decoder's or follower's state.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileCheckpoint {
    /// The file (by path and inode) and the offset after its last complete line.
    #[serde(flatten)]
    pub(super) position: crate::tail::Checkpoint,
    pub(super) agent: WatchedAgent,
    #[serde(default)]
    pub(super) decoder: serde_json::Value,
}

const CHECKPOINT_FILE: &str = "checkpoint.json";
/// The checkpoint's format: the one checkpoint format counted in `format.json`, which the
/// tails' own checkpoints carry too. A checkpoint of another version is set aside: the watchers
/// start over (tails only), as on a first start.
const CHECKPOINT_VERSION: u32 = crate::core::format::CHECKPOINT_FORMAT;
/// The largest checkpoint read back (10,000 files and their threads fit in a few MB).
const MAX_CHECKPOINT_BYTES: u64 = 256 * 1024 * 1024;

/// What a checkpoint gives back for the agents being watched.
#[derive(Debug, Default)]
pub(super) struct Restored {
    /// File checkpoints by path, waiting for their file to be registered.
    pub(super) files: HashMap<PathBuf, FileCheckpoint>,
    /// Threads by key (`agent:threadId`), as saved.
    pub(super) threads: Vec<(String, Thread)>,
}

impl Checkpoint {
    /// Parses a checkpoint file: `Ok(None)` for another version than this release writes.
    pub(super) fn parse(bytes: &[u8]) -> serde_json::Result<Option<Checkpoint>> {
        let checkpoint: Checkpoint = serde_json::from_slice(bytes)?;
        Ok((checkpoint.version == CHECKPOINT_VERSION).then_some(checkpoint))
    }

    pub(super) fn new(files: Vec<FileCheckpoint>, threads: Vec<Thread>) -> Checkpoint {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            files,
            threads,
        }
    }

    /// What it holds of `agents` (an agent no longer watched is dropped).
    pub(super) fn restore(self, agents: &HashSet<WatchedAgent>) -> Restored {
        let files = self
            .files
            .into_iter()
            .filter(|file| agents.contains(&file.agent))
            .map(|file| (file.position.path.clone(), file))
            .collect();
        let threads = self
            .threads
            .into_iter()
            .filter_map(|thread| {
                let agent = thread.agent.filter(|agent| agents.contains(agent))?;
                let key = crate::protocol::instance_key(agent.as_str(), Some(&thread.thread_id));
                Some((key, thread))
            })
            .collect();
        Restored { files, threads }
    }
}

impl FileCheckpoint {
    /// What `file` resumes from, or `None` for a file registered at its size and never read
    /// (nothing to resume).
    pub(super) fn of(path: &Path, agent: WatchedAgent, file: &FileState) -> Option<FileCheckpoint> {
        let decoder = match (&file.decoder, &file.follower) {
            (Some(decoder), _) => decoder.save(),
            (None, Some(follower)) => follower.save(),
            (None, None) => return None,
        };
        Some(FileCheckpoint {
            position: crate::tail::Checkpoint {
                path: path.to_path_buf(),
                inode: file.inode,
                offset: file.reader.resume_offset(),
            },
            agent,
            decoder,
        })
    }
}

impl Engine {
    pub(super) fn load_checkpoint(&mut self) {
        let path = self.state_dir.join(CHECKPOINT_FILE);
        let bytes = match crate::core::private_file::read(&path, MAX_CHECKPOINT_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the watchers' checkpoint; starting over (tails only)");
                return;
            }
        };
        let checkpoint = match Checkpoint::parse(&bytes) {
            Ok(Some(checkpoint)) => checkpoint,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "the watchers' checkpoint does not parse; starting over (tails only)");
                return;
            }
        };
        let agents: HashSet<WatchedAgent> = self.formats.iter().map(|f| f.agent()).collect();
        let restored = checkpoint.restore(&agents);
        self.saved_files.extend(restored.files);
        // What the tracker holds now is what was emitted: the log, not the checkpoint, is the
        // truth about that (a crash may fall between an append and the next save).
        let tracker_view: HashMap<String, Emitted> = self.core.read(|state| {
            restored
                .threads
                .iter()
                .filter_map(|(key, thread)| {
                    let agent = thread.agent?;
                    let (session, update, _) = state.tracker.find(key)?;
                    if update.source.as_deref() != Some(&source_of(agent)) {
                        return None;
                    }
                    Some((
                        key.clone(),
                        Emitted {
                            session: session.to_string(),
                            status: update.status,
                            title: update.thread_name.clone(),
                            prompt: update.last_user_prompt.clone(),
                            pane_id: update.pane_id.clone(),
                            liveness: update.liveness,
                        },
                    ))
                })
                .collect()
        });
        for (key, mut thread) in restored.threads {
            thread.emitted = tracker_view.get(&key).cloned();
            // The process may have ended while the daemon was down.
            if let Some(pid) = thread.agent_pid()
                && !thread.gone
            {
                if procs::alive(pid, thread.start_time) {
                    self.watch_exit(pid);
                } else {
                    thread.gone = true;
                    thread.push_evidence(EvidenceView {
                        file: format!("/proc/{pid}"),
                        locator: None,
                        rule: format!("process {pid} is gone (checked at start-up) → ended"),
                        status: None,
                        at: now_ms(),
                        record_ts: None,
                    });
                }
            }
            self.threads.insert(key, thread);
        }
    }

    pub(super) fn save_checkpoint(&mut self) {
        self.dirty_since = None;
        let files = self
            .files
            .iter()
            .filter_map(|(path, file)| {
                FileCheckpoint::of(path, self.formats[file.format].agent(), file)
            })
            .collect();
        let checkpoint = Checkpoint::new(files, self.threads.values().cloned().collect());
        let result = std::fs::create_dir_all(&self.state_dir).and_then(|()| {
            let bytes = serde_json::to_vec(&checkpoint).map_err(std::io::Error::other)?;
            crate::core::private_file::write_atomic(
                &self.state_dir.join(CHECKPOINT_FILE),
                &bytes,
                0o600,
            )
        });
        if let Err(error) = result {
            tracing::warn!(%error, "cannot save the watchers' checkpoint");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::codex::Codex;
    use crate::watch::format::{FileKind, Format, Locator};

    const THREAD: &str = "01a230dc-f6f8-7663-b1a5-db280f67d13e";

    fn rollout_path() -> PathBuf {
        PathBuf::from(format!(
            "/home/me/.codex/sessions/2026/12/01/rollout-2026-12-01T09-08-38-{THREAD}.jsonl"
        ))
    }

    /// A Codex rollout (tests/fixtures) read up to the middle of its last line, as the engine
    /// leaves a file it reads while the agent writes.
    fn followed_rollout() -> (FileState, Thread) {
        let path = rollout_path();
        let bytes = include_bytes!("../../../tests/fixtures/watchers/codex/rollout.jsonl");
        let mut file = FileState::new(0, FileKind::Lines, 4242);
        let mut decoder = Codex.decoder(&path, None);
        let mut thread = Thread {
            agent: Some(WatchedAgent::Codex),
            thread_id: THREAD.to_string(),
            ..Thread::default()
        };
        thread.files.insert(path.clone());
        let read = bytes.len() - 10;
        file.reader.feed_lines(&bytes[..read], |offset, line| {
            let at = Locator::Offset { offset };
            let mut out = Vec::new();
            decoder.line(line, &at, &mut out);
            for observation in out {
                if let Some(status) = observation.status {
                    thread.status = Some(status);
                }
                if let Some(cwd) = observation.cwd {
                    thread.cwd = Some(cwd);
                }
                thread.push_evidence(EvidenceView {
                    file: path.display().to_string(),
                    locator: serde_json::to_value(&at).ok(),
                    rule: observation.rule,
                    status: observation.status,
                    at: 1_700_000_000_000,
                    record_ts: observation.record_ts,
                });
            }
        });
        file.decoder = Some(decoder);
        (file, thread)
    }

    #[test]
    fn a_saved_checkpoint_loads_the_same_offsets_decoders_and_threads() {
        let (file, thread) = followed_rollout();
        let path = rollout_path();
        let saved = FileCheckpoint::of(&path, WatchedAgent::Codex, &file).unwrap();
        // The held-back partial line is read again after a restart.
        let last_newline = include_str!("../../../tests/fixtures/watchers/codex/rollout.jsonl")
            .trim_end_matches('\n')
            .rfind('\n')
            .unwrap() as u64
            + 1;
        assert_eq!(saved.position.offset, last_newline);
        assert_eq!(saved.position.inode, 4242);
        let decoder_state = saved.decoder.clone();
        assert_ne!(decoder_state, serde_json::Value::Null);

        let bytes =
            serde_json::to_vec(&Checkpoint::new(vec![saved], vec![thread.clone()])).unwrap();
        let loaded = Checkpoint::parse(&bytes)
            .unwrap()
            .expect("this release's version");
        let restored = loaded.restore(&HashSet::from([WatchedAgent::Codex]));
        let file = &restored.files[&path];
        assert_eq!(
            (file.position.offset, file.position.inode),
            (last_newline, 4242)
        );
        assert_eq!(file.decoder, decoder_state);
        assert_eq!(restored.threads.len(), 1);
        let (key, loaded_thread) = &restored.threads[0];
        assert_eq!(key, &format!("codex:{THREAD}"));
        assert_eq!(
            serde_json::to_value(loaded_thread).unwrap(),
            serde_json::to_value(&thread).unwrap()
        );
        // The restored decoder holds what the saved one held.
        let decoder = Codex.decoder(&path, Some(file.decoder.clone()));
        assert_eq!(decoder.save(), decoder_state);
    }

    #[test]
    fn a_checkpoint_keeps_only_the_watched_agents() {
        let (file, thread) = followed_rollout();
        let saved = FileCheckpoint::of(&rollout_path(), WatchedAgent::Codex, &file).unwrap();
        let bytes = serde_json::to_vec(&Checkpoint::new(vec![saved], vec![thread])).unwrap();
        let restored = Checkpoint::parse(&bytes)
            .unwrap()
            .unwrap()
            .restore(&HashSet::from([WatchedAgent::ClaudeCode]));
        assert!(restored.files.is_empty());
        assert!(restored.threads.is_empty());
    }

    #[test]
    fn a_file_never_read_has_nothing_to_resume() {
        // Registered at its size at start-up (old), never grown since.
        let file = FileState::new(0, FileKind::Lines, 7);
        assert!(FileCheckpoint::of(&rollout_path(), WatchedAgent::Codex, &file).is_none());
    }

    /// Another version (a newer release's, or an older one) is set aside: the watchers start
    /// over; what does not parse is an error the engine logs; fields this release does not know
    /// are ignored.
    #[test]
    fn other_versions_and_damage_are_handled_as_before() {
        let check = |text: &str, expect: Result<Option<usize>, ()>| {
            let got = Checkpoint::parse(text.as_bytes())
                .map(|c| c.map(|c| c.files.len() + c.threads.len()))
                .map_err(|_| ());
            assert_eq!(got, expect, "{text}");
        };
        check(r#"{"version":1,"files":[],"threads":[]}"#, Ok(Some(0)));
        check(r#"{"version":2,"files":[],"threads":[]}"#, Ok(None));
        check(r#"{"version":0,"files":[],"threads":[]}"#, Ok(None));
        check(
            r#"{"version":1,"files":[{"path":"/a","agent":"codex","inode":1,"offset":5}],"threads":[],"more":1}"#,
            Ok(Some(1)),
        );
        check(r#"{"version":1,"files":[],"threads":[]"#, Err(()));
        check("", Err(()));
        check(r#"{"version":1}"#, Err(()));
    }

    /// A file's entry reads and writes as before the tails shared one position type: the same
    /// keys, and an entry an earlier release wrote resumes at its inode and offset.
    #[test]
    fn a_file_entry_keeps_its_json() {
        let check = |text: &str, expect_decoder: serde_json::Value| {
            let entry: FileCheckpoint = serde_json::from_str(text).unwrap();
            assert_eq!(
                entry.position,
                crate::tail::Checkpoint {
                    path: "/a.jsonl".into(),
                    inode: 7,
                    offset: 99,
                },
                "{text}"
            );
            assert_eq!(entry.agent, WatchedAgent::Codex);
            assert_eq!(entry.decoder, expect_decoder);
            let mut expect: serde_json::Value = serde_json::from_str(text).unwrap();
            expect["decoder"] = expect_decoder;
            assert_eq!(serde_json::to_value(&entry).unwrap(), expect, "{text}");
        };
        check(
            r#"{"path":"/a.jsonl","agent":"codex","inode":7,"offset":99,"decoder":{"turn":"t1"}}"#,
            serde_json::json!({"turn": "t1"}),
        );
        check(
            r#"{"path":"/a.jsonl","agent":"codex","inode":7,"offset":99}"#,
            serde_json::Value::Null,
        );
    }
}
