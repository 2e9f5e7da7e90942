//! The one checkpoint of a tailed file: where to resume it, `{path, inode, offset}`, and its
//! file (`{"format":1,"path":…,"inode":…,"offset":…}`, written atomically). The follower hands
//! one with every item; the Claude host saves it with [`save_checkpoint`]; the watch engine's
//! checkpoint embeds one per followed file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where to resume a tail: the file (by path and inode) and the byte offset right after the
/// last line the consumer has handled. Persist it with [`save_checkpoint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub path: PathBuf,
    pub inode: u64,
    pub offset: u64,
}

/// Errors of [`save_checkpoint`] and [`load_checkpoint`]. Callers log them; a checkpoint that
/// cannot be loaded means the tail starts over from the beginning of the file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint file exists but cannot be read.
    #[error("cannot read checkpoint {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint file holds no valid checkpoint (hand-edited, or from another version).
    #[error("checkpoint {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The checkpoint was written by a newer cohost in a format this one cannot read (the home's
    /// `format.json` normally refuses such a home first). The tail does not resume from it.
    #[error("checkpoint {path} has format {found}; this cohost reads formats up to {supported}")]
    Newer {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The checkpoint could not be encoded (its path is not UTF-8).
    #[error("cannot encode checkpoint for {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// Writing, syncing or renaming the checkpoint (or its temporary file) failed.
    #[error("cannot write checkpoint {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `checkpoint` to `file` atomically: a temporary file beside it is written and synced,
/// then renamed over `file`, and the directory is synced, so a crash leaves the old or the new
/// checkpoint, never half of one. One writer per checkpoint file.
pub async fn save_checkpoint(file: &Path, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
    let stored = StoredCheckpoint {
        format: crate::core::format::CHECKPOINT_FORMAT,
        checkpoint: checkpoint.clone(),
    };
    let bytes = serde_json::to_vec(&stored).map_err(|source| CheckpointError::Encode {
        path: checkpoint.path.clone(),
        source,
    })?;
    // Never through a link planted at the temporary path, and no temporary file left behind.
    let target = file.to_path_buf();
    tokio::task::spawn_blocking(move || {
        crate::core::private_file::write_atomic(&target, &bytes, 0o600)
    })
    .await
    .unwrap_or_else(|join| Err(std::io::Error::other(join)))
    .map_err(|source| CheckpointError::Write {
        path: file.to_path_buf(),
        source,
    })
}

/// A checkpoint as stored: `{"format":1,"path":…,"inode":…,"offset":…}`. Checkpoints written
/// before formats were numbered have no `format`: they are format 1.
#[derive(Serialize, Deserialize)]
struct StoredCheckpoint {
    #[serde(default = "first_format")]
    format: u32,
    #[serde(flatten)]
    checkpoint: Checkpoint,
}

fn first_format() -> u32 {
    1
}

/// The largest checkpoint file read (one holds a path and two numbers).
const MAX_CHECKPOINT_BYTES: u64 = 64 * 1024;

/// Reads a checkpoint written by [`save_checkpoint`]; `Ok(None)` when `file` does not exist.
/// A link, a FIFO or another user's file is refused (at once: a FIFO is not waited on).
pub async fn load_checkpoint(file: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let target = file.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        crate::core::private_file::read(&target, MAX_CHECKPOINT_BYTES)
    })
    .await
    .unwrap_or_else(|join| {
        Err(crate::core::private_file::PrivateFileError::Io {
            path: file.to_path_buf(),
            source: std::io::Error::other(join),
        })
    });
    let bytes = match read {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(error) => {
            tracing::warn!(%error, "ignoring a tail checkpoint");
            return Err(CheckpointError::Read {
                path: file.to_path_buf(),
                source: error.into(),
            });
        }
    };
    let stored: StoredCheckpoint =
        serde_json::from_slice(&bytes).map_err(|source| CheckpointError::Parse {
            path: file.to_path_buf(),
            source,
        })?;
    if stored.format > crate::core::format::CHECKPOINT_FORMAT {
        return Err(CheckpointError::Newer {
            path: file.to_path_buf(),
            found: stored.format,
            supported: crate::core::format::CHECKPOINT_FORMAT,
        });
    }
    Ok(Some(stored.checkpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn checkpoint_round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cp.json");
        assert!(load_checkpoint(&file).await.unwrap().is_none());
        let checkpoint = Checkpoint {
            path: dir.path().join("t.jsonl"),
            inode: 42,
            offset: 1234,
        };
        save_checkpoint(&file, &checkpoint).await.unwrap();
        assert_eq!(
            load_checkpoint(&file).await.unwrap(),
            Some(checkpoint.clone())
        );
        let moved = Checkpoint {
            offset: 2000,
            ..checkpoint
        };
        save_checkpoint(&file, &moved).await.unwrap();
        assert_eq!(load_checkpoint(&file).await.unwrap(), Some(moved));
        assert!(!dir.path().join("cp.json.tmp").exists());

        std::fs::write(&file, b"{\"path\":").unwrap();
        let err = load_checkpoint(&file).await.unwrap_err();
        assert!(matches!(err, CheckpointError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("cp.json"), "{err}");
    }

    #[tokio::test]
    async fn checkpoints_carry_their_format_and_older_ones_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cp.json");
        let checkpoint = Checkpoint {
            path: "/t.jsonl".into(),
            inode: 7,
            offset: 99,
        };
        save_checkpoint(&file, &checkpoint).await.unwrap();
        let stored: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(stored["format"], crate::core::format::CHECKPOINT_FORMAT);
        // Written before formats were numbered: no `format`.
        std::fs::write(&file, br#"{"path":"/t.jsonl","inode":7,"offset":99}"#).unwrap();
        assert_eq!(load_checkpoint(&file).await.unwrap(), Some(checkpoint));
        // From a newer cohost: refused, not misread.
        let newer = crate::core::format::CHECKPOINT_FORMAT + 1;
        std::fs::write(
            &file,
            format!(r#"{{"format":{newer},"path":"/t.jsonl","inode":7,"offset":99,"more":1}}"#),
        )
        .unwrap();
        let err = load_checkpoint(&file).await.unwrap_err();
        assert!(matches!(err, CheckpointError::Newer { .. }), "{err}");
    }
}
