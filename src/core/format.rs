//! The formats of what the daemon keeps in `$COHOST_HOME`, and the home's format manifest,
//! `format.json`: which format of the event log, the snapshot and the tail checkpoints the home
//! holds, and which cohost wrote it.
//!
//! The policy (docs/ARCHITECTURE.md, "Persistence and replay"): a newer cohost reads every
//! format an older one ever wrote (each format's reader stays; a home without `format.json` is
//! one written before formats were numbered, read as it always was), and rewrites the manifest
//! once it has started. An older cohost meeting a home written in a newer format refuses to
//! start, naming both versions, before it changes anything: [`check_home`] runs before the home
//! is even locked.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The event log's line format. 1: JSON events, one per line (still read: "legacy" lines);
/// 2: each line carries its CRC-32 (`log_line`).
pub const LOG_FORMAT: u32 = 2;
/// The snapshot's format: its `schema` field (`protocol::SCHEMA_VERSION`).
pub const SNAPSHOT_FORMAT: u32 = crate::protocol::SCHEMA_VERSION;
/// The one checkpoint format: the tail checkpoints' `format` field (`tail::save_checkpoint`, the
/// claude runtime's) and the watchers' `checkpoint.json` `version`, whose file entries embed the
/// same position. 1: `{path, inode, offset}`; a tail checkpoint without a `format` field is a 1.
pub const CHECKPOINT_FORMAT: u32 = 1;

/// The manifest's file name in `$COHOST_HOME`.
pub const FILE: &str = "format.json";

/// `$COHOST_HOME/format.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub log: u32,
    pub snapshot: u32,
    pub checkpoint: u32,
    /// The cohost release that last wrote the home (`CARGO_PKG_VERSION`).
    pub written_by: String,
}

impl Manifest {
    /// This build's formats.
    pub fn current() -> Manifest {
        Manifest {
            log: LOG_FORMAT,
            snapshot: SNAPSHOT_FORMAT,
            checkpoint: CHECKPOINT_FORMAT,
            written_by: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Why a home cannot be used by this build.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The home was written by a newer cohost in a format this one cannot read. Nothing was
    /// changed; the user runs the newer cohost (or points `COHOST_HOME` elsewhere).
    #[error(
        "{home} was written by cohost {written_by} ({what} format {found}); this cohost {ours} reads {what} formats up to {supported}: {advice} with this home, or choose another COHOST_HOME (nothing was changed)"
    )]
    Newer {
        home: String,
        written_by: String,
        /// Which cohost to run instead: `written_by` or newer when that is a later release
        /// than this one; otherwise (a development build, or a manifest edited by hand) only a
        /// release that reads the format will do.
        advice: String,
        ours: &'static str,
        what: &'static str,
        found: u32,
        supported: u32,
    },
    /// `format.json` exists but cannot be read or parsed: refusing is safer than guessing.
    #[error("cannot read {path}: {reason} (nothing was changed)")]
    Unreadable { path: String, reason: String },
}

/// Whether release `a` is later than `b` (dotted numbers; a pre-release or build suffix after
/// `-` or `+` is ignored; anything unparsable is not later).
fn is_later_release(a: &str, b: &str) -> bool {
    let parse = |v: &str| -> Option<Vec<u64>> {
        v.split(['-', '+'])
            .next()?
            .split('.')
            .map(|part| part.parse().ok())
            .collect()
    };
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// Reads the home's manifest: `Ok(None)` when there is none (a new home, or one written before
/// formats were numbered).
pub fn read_manifest(home: &Path) -> Result<Option<Manifest>, FormatError> {
    let path = home.join(FILE);
    let unreadable = |reason: String| FormatError::Unreadable {
        path: path.display().to_string(),
        reason,
    };
    let bytes = match super::private_file::read(&path, 1 << 16) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(error) => return Err(unreadable(error.to_string())),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| unreadable(error.to_string()))
}

/// Refuses a home written in a format newer than this build reads. Reads only.
pub fn check_home(home: &Path) -> Result<Option<Manifest>, FormatError> {
    let Some(manifest) = read_manifest(home)? else {
        return Ok(None);
    };
    for (what, found, supported) in [
        ("event log", manifest.log, LOG_FORMAT),
        ("snapshot", manifest.snapshot, SNAPSHOT_FORMAT),
        ("checkpoint", manifest.checkpoint, CHECKPOINT_FORMAT),
    ] {
        if found > supported {
            let ours = env!("CARGO_PKG_VERSION");
            let advice = if is_later_release(&manifest.written_by, ours) {
                format!("run cohost {} or newer", manifest.written_by)
            } else {
                format!("run a cohost release that reads {what} format {found}")
            };
            return Err(FormatError::Newer {
                home: home.display().to_string(),
                written_by: manifest.written_by.clone(),
                advice,
                ours: env!("CARGO_PKG_VERSION"),
                what,
                found,
                supported,
            });
        }
    }
    Ok(Some(manifest))
}

/// Records this build's formats in the home (once it has read it): atomically, and only when
/// they differ from what the manifest says.
pub fn write_manifest(home: &Path, found: Option<&Manifest>) -> std::io::Result<()> {
    let current = Manifest::current();
    if found == Some(&current) {
        return Ok(());
    }
    let mut bytes = serde_json::to_vec_pretty(&current)?;
    bytes.push(b'\n');
    super::private_file::write_atomic(&home.join(FILE), &bytes, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_format_is_refused_naming_both_versions_and_an_older_one_is_read() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_home(dir.path()).unwrap().is_none());
        write_manifest(dir.path(), None).unwrap();
        assert_eq!(check_home(dir.path()).unwrap(), Some(Manifest::current()));
        let older = Manifest {
            log: 1,
            written_by: "0.0.1".into(),
            ..Manifest::current()
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&older).unwrap()).unwrap();
        assert_eq!(check_home(dir.path()).unwrap(), Some(older));
        let newer = Manifest {
            checkpoint: CHECKPOINT_FORMAT + 1,
            written_by: "9.0.0".into(),
            ..Manifest::current()
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&newer).unwrap()).unwrap();
        let error = check_home(dir.path()).unwrap_err().to_string();
        assert!(error.contains("cohost 9.0.0"), "{error}");
        assert!(error.contains(env!("CARGO_PKG_VERSION")), "{error}");
        assert!(
            error.contains(&format!("checkpoint format {}", CHECKPOINT_FORMAT + 1)),
            "{error}"
        );
        // Written by this very release (a development build, a manifest edited by hand):
        // "run cohost X or newer" would name the release that refuses it.
        let same = Manifest {
            checkpoint: CHECKPOINT_FORMAT + 1,
            ..Manifest::current()
        };
        std::fs::write(dir.path().join(FILE), serde_json::to_vec(&same).unwrap()).unwrap();
        let error = check_home(dir.path()).unwrap_err().to_string();
        assert!(!error.contains("or newer"), "{error}");
        assert!(
            error.contains(&format!(
                "run a cohost release that reads checkpoint format {}",
                CHECKPOINT_FORMAT + 1
            )),
            "{error}"
        );
        assert!(is_later_release("0.10.0", "0.9.1") && !is_later_release("0.1.0", "0.1.0"));
        assert!(!is_later_release("garbage", "0.1.0") && is_later_release("1.0.0-rc1", "0.9.0"));
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(matches!(
            check_home(dir.path()),
            Err(FormatError::Unreadable { .. })
        ));
    }
}
