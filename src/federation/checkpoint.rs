//! The publisher's files in the home, under `$COHOST_HOME/federation/`: `home-id`, this home's
//! identity (random, made once, part of every de-duplication id), and `published.json`, the last
//! seq the NATS server acknowledged (written atomically and synced: see
//! `core::private_file::write_atomic`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::core::private_file;

/// The checkpoint's format (`format` field).
const CHECKPOINT_FORMAT: u32 = 1;

/// The federation directory of a home.
pub fn dir(home: &Path) -> PathBuf {
    home.join("federation")
}

/// This home's identity: read, or made (16 hex digits) on first use.
pub fn home_id(home: &Path) -> anyhow::Result<String> {
    let dir = dir(home);
    std::fs::create_dir_all(&dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let path = dir.join("home-id");
    if let Some(bytes) = private_file::read(&path, 256)? {
        let id = String::from_utf8_lossy(&bytes).trim().to_string();
        if !id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(id);
        }
        anyhow::bail!(
            "{} does not hold a home identity (hex digits); remove it to have a new one made (a new identity publishes this home's events again)",
            path.display()
        );
    }
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    private_file::write_atomic(&path, format!("{id}\n").as_bytes(), 0o600)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(id)
}

/// What `published.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub format: u32,
    /// The stream the events went to.
    pub stream: String,
    /// The last seq the server acknowledged.
    pub seq: u64,
}

/// The last acknowledged seq for `stream` (0 when none was checkpointed, or for another stream).
pub fn load(home: &Path, stream: &str) -> anyhow::Result<u64> {
    let path = dir(home).join("published.json");
    let Some(bytes) = private_file::read(&path, 64 * 1024)? else {
        return Ok(0);
    };
    let published: Published = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a publish checkpoint", path.display()))?;
    if published.format > CHECKPOINT_FORMAT {
        anyhow::bail!(
            "{} is in checkpoint format {}; this cohost reads format {CHECKPOINT_FORMAT}",
            path.display(),
            published.format
        );
    }
    Ok(if published.stream == stream {
        published.seq
    } else {
        0
    })
}

/// Records `seq` as acknowledged, durably (written, synced, renamed, directory synced).
pub fn save(home: &Path, stream: &str, seq: u64) -> std::io::Result<()> {
    let published = Published {
        format: CHECKPOINT_FORMAT,
        stream: stream.to_string(),
        seq,
    };
    let bytes = serde_json::to_vec(&published).map_err(std::io::Error::other)?;
    private_file::write_atomic(&dir(home).join("published.json"), &bytes, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_and_the_checkpoint_survive_a_restart() {
        let home = tempfile::tempdir().unwrap();
        let id = home_id(home.path()).unwrap();
        assert_eq!(id.len(), 16);
        assert_eq!(home_id(home.path()).unwrap(), id);
        assert_eq!(load(home.path(), "COHOST_a").unwrap(), 0);
        save(home.path(), "COHOST_a", 41).unwrap();
        assert_eq!(load(home.path(), "COHOST_a").unwrap(), 41);
        assert_eq!(load(home.path(), "COHOST_b").unwrap(), 0);
    }
}
