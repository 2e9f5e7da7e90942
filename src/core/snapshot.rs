//! The state snapshot: the tracker and seq counters as of one `seq`, so start-up replays only
//! the log written after it.
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) by the core thread
//! whenever a log segment is closed and on clean shutdown. A missing or unreadable snapshot is not
//! an error: the log is replayed from its oldest retained segment instead (and an unreadable one
//! is reported as damage). A snapshot that is a link, a FIFO or another user's file is refused.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::core::private_file::{self, PrivateFileError};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub schema: u32,
    /// Every event up to and including this seq is reflected below.
    pub seq: u64,
    pub session_seqs: HashMap<String, u64>,
    pub state: super::State,
}

const FILE: &str = "snapshot.json";
/// The largest snapshot read: far above any real state (tasks and logs are bounded).
const MAX_BYTES: u64 = 1 << 30;

/// What [`Snapshot::load`] found.
#[derive(Debug)]
pub enum Loaded {
    Missing,
    Found(Box<Snapshot>),
    /// A snapshot that cannot be used: the whole log is replayed instead. `damaged` is false
    /// when it is only from another schema version.
    Unusable {
        reason: String,
        damaged: bool,
    },
    /// A snapshot in a newer format than this build reads (`schema`): the daemon refuses to
    /// start rather than replay over it (see `format`).
    Newer {
        schema: u32,
    },
}

impl Snapshot {
    /// Reads `$COHOST_HOME/snapshot.json`. Anything but a usable snapshot means replaying the
    /// whole log; an unreadable one is also damage to report. A snapshot that is a link, not a
    /// regular file, or someone else's is refused ([`PrivateFileError`]): the daemon stops
    /// rather than read it or write through it.
    pub fn load(home: &Path) -> Result<Loaded, PrivateFileError> {
        let path = home.join(FILE);
        let bytes = match private_file::read(&path, MAX_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(Loaded::Missing),
            Err(PrivateFileError::Io { source, .. }) => {
                return Ok(Loaded::Unusable {
                    reason: format!("cannot read {}: {source}", path.display()),
                    damaged: true,
                });
            }
            Err(refused) => return Err(refused),
        };
        Ok(match serde_json::from_slice::<Snapshot>(&bytes) {
            Ok(snapshot) if snapshot.schema == crate::protocol::SCHEMA_VERSION => {
                Loaded::Found(Box::new(snapshot))
            }
            Ok(snapshot) if snapshot.schema > crate::protocol::SCHEMA_VERSION => Loaded::Newer {
                schema: snapshot.schema,
            },
            Ok(snapshot) => Loaded::Unusable {
                reason: format!("the snapshot has schema {}", snapshot.schema),
                damaged: false,
            },
            Err(error) => Loaded::Unusable {
                reason: format!("{} does not parse: {error}", path.display()),
                damaged: true,
            },
        })
    }

    /// Writes the snapshot atomically (no temporary file is left behind on failure).
    pub fn save(&self, home: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec(self)?;
        private_file::write_atomic(&home.join(FILE), &bytes, 0o600)
    }
}
