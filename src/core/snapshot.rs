//! The state snapshot: the tracker and seq counters as of one `seq`, so start-up replays only
//! the log written after it.
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) by the core thread
//! whenever a log segment is closed and on clean shutdown. A missing or unreadable snapshot is not
//! an error: the log is replayed from its oldest retained segment instead (and an unreadable one
//! is reported as damage).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

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
}

impl Snapshot {
    /// Reads `$COHOST_HOME/snapshot.json`. Anything but a usable snapshot means replaying the
    /// whole log; an unreadable one is also damage to report.
    pub fn load(home: &Path) -> Loaded {
        let path = home.join(FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Loaded::Missing,
            Err(error) => {
                return Loaded::Unusable {
                    reason: format!("cannot read {}: {error}", path.display()),
                    damaged: true,
                };
            }
        };
        match serde_json::from_slice::<Snapshot>(&bytes) {
            Ok(snapshot) if snapshot.schema == crate::protocol::SCHEMA_VERSION => {
                Loaded::Found(Box::new(snapshot))
            }
            Ok(snapshot) => Loaded::Unusable {
                reason: format!("the snapshot has schema {}", snapshot.schema),
                damaged: false,
            },
            Err(error) => Loaded::Unusable {
                reason: format!("{} does not parse: {error}", path.display()),
                damaged: true,
            },
        }
    }

    pub fn save(&self, home: &Path) -> io::Result<()> {
        let tmp = home.join(format!("{FILE}.tmp"));
        let mut file = File::create(&tmp)?;
        serde_json::to_writer(&mut file, self)?;
        file.flush()?;
        file.sync_all()?;
        fs::rename(&tmp, home.join(FILE))?;
        File::open(home)?.sync_all()
    }
}
