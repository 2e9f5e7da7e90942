//! The checkpoint: `$COHOST_HOME/watch/checkpoint.json`.

use super::*;

/// The checkpoint file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Checkpoint {
    pub(super) version: u32,
    pub(super) files: Vec<FileCheckpoint>,
    pub(super) threads: Vec<Thread>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileCheckpoint {
    pub(super) path: PathBuf,
    pub(super) agent: WatchedAgent,
    pub(super) inode: u64,
    /// After the last complete line.
    pub(super) offset: u64,
    #[serde(default)]
    pub(super) decoder: serde_json::Value,
}

pub(super) const CHECKPOINT_FILE: &str = "checkpoint.json";
pub(super) const CHECKPOINT_VERSION: u32 = 1;
/// The largest checkpoint read back (10,000 files and their threads fit in a few MB).
pub(super) const MAX_CHECKPOINT_BYTES: u64 = 256 * 1024 * 1024;

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
        let checkpoint: Checkpoint = match serde_json::from_slice(&bytes) {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "the watchers' checkpoint does not parse; starting over (tails only)");
                return;
            }
        };
        if checkpoint.version != CHECKPOINT_VERSION {
            return;
        }
        let agents: HashSet<WatchedAgent> = self.formats.iter().map(|f| f.agent()).collect();
        for file in checkpoint.files {
            if agents.contains(&file.agent) {
                self.saved_files.insert(file.path.clone(), file);
            }
        }
        // What the tracker holds now is what was emitted: the log, not the checkpoint, is the
        // truth about that (a crash may fall between an append and the next save).
        let tracker_view: HashMap<String, Emitted> = self.core.read(|state| {
            checkpoint
                .threads
                .iter()
                .filter_map(|thread| {
                    let agent = thread.agent?;
                    let key =
                        crate::protocol::instance_key(agent.as_str(), Some(&thread.thread_id));
                    let (session, update, _) = state.tracker.find(&key)?;
                    if update.source.as_deref() != Some(&source_of(agent)) {
                        return None;
                    }
                    Some((
                        key,
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
        for mut thread in checkpoint.threads {
            let Some(agent) = thread.agent.filter(|agent| agents.contains(agent)) else {
                continue;
            };
            let key = crate::protocol::instance_key(agent.as_str(), Some(&thread.thread_id));
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
                let decoder = match (&file.decoder, &file.follower) {
                    (Some(decoder), _) => decoder.save(),
                    (None, Some(follower)) => follower.save(),
                    // Registered at its size and never read: nothing to resume.
                    (None, None) => return None,
                };
                let offset = file.offset.saturating_sub(file.partial.len() as u64);
                Some(FileCheckpoint {
                    path: path.clone(),
                    agent: self.formats[file.format].agent(),
                    inode: file.inode,
                    offset: if file.skipping { file.offset } else { offset },
                    decoder,
                })
            })
            .collect();
        let checkpoint = Checkpoint {
            version: CHECKPOINT_VERSION,
            files,
            threads: self.threads.values().cloned().collect(),
        };
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
