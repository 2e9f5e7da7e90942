//! The state snapshot: the tracker and seq counters as of one `seq`, so start-up replays only
//! the log written after it.
//!
//! Written atomically (temporary file, fsync, rename, fsync of the directory) by the core thread
//! whenever a log segment is closed and on clean shutdown. A missing or unreadable snapshot is not
//! an error: the log is replayed from its oldest retained segment instead.

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

impl Snapshot {
    pub fn load(home: &Path) -> Option<Snapshot> {
        let path = home.join(FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the snapshot; replaying the whole log");
                return None;
            }
        };
        match serde_json::from_slice::<Snapshot>(&bytes) {
            Ok(snapshot) if snapshot.schema == crate::protocol::SCHEMA_VERSION => Some(snapshot),
            Ok(snapshot) => {
                tracing::warn!(
                    schema = snapshot.schema,
                    "snapshot has another schema; replaying the whole log"
                );
                None
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "snapshot does not parse; replaying the whole log");
                None
            }
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
