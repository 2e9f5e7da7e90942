//! An adopted Pi switching sessions in its TUI (`/new`, `/resume`). Observed with Pi 1.6.0 in a
//! tmux pane: the process goes on and writes another session file in the same directory — a new
//! one from its first prompt (0.73.1: once that prompt's answer is complete), a resumed one from
//! its next entry — and nothing more to the adopted one; the screen says `✓ New session
//! started` or `Resumed session`. The adopted session follows it, as an adopted Claude follows
//! `/clear`.
//!
//! Pi names no pid in its files and holds none open, so another file written in the directory is
//! taken to be this Pi's only when its header names this Pi's directory and no other live `pi`
//! process runs there; otherwise it is not followed. Reads the directory, the files' headers and
//! `/proc`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::formats::pi::SessionEntry;
use crate::process;

/// The other session files in the directory of the one followed, with their sizes at the last
/// look.
pub struct Siblings {
    sizes: HashMap<PathBuf, u64>,
}

impl Siblings {
    /// The files beside `current` as they are now.
    pub fn new(current: &Path) -> Siblings {
        Siblings {
            sizes: session_files(current)
                .into_iter()
                .filter(|(path, _)| path != current)
                .collect(),
        }
    }

    /// The session file, other than `current`, written since the last look (the last written,
    /// when several were), with its size at the last look (0 for a new one): where its new
    /// entries start.
    pub fn written(&mut self, current: &Path) -> Option<(PathBuf, u64)> {
        let mut written: Option<(PathBuf, u64, std::time::SystemTime)> = None;
        let now = session_files(current);
        let mut seen = HashSet::new();
        for (path, size) in now {
            if path == current {
                continue;
            }
            seen.insert(path.clone());
            let before = self.sizes.insert(path.clone(), size).unwrap_or(0);
            if size > before {
                let modified = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                if written.as_ref().is_none_or(|(_, _, at)| modified >= *at) {
                    written = Some((path, before, modified));
                }
            }
        }
        self.sizes.retain(|path, _| seen.contains(path));
        written.map(|(path, from, _)| (path, from))
    }

    /// `left` is no longer followed: it is a sibling now, at its present size.
    pub fn leave(&mut self, left: &Path) {
        let size = std::fs::metadata(left).map_or(0, |m| m.len());
        self.sizes.insert(left.to_path_buf(), size);
    }

    /// `followed` is followed now: no longer a sibling.
    pub fn take(&mut self, followed: &Path) {
        self.sizes.remove(followed);
    }
}

/// The `.jsonl` files in `current`'s directory, with their sizes.
fn session_files(current: &Path) -> Vec<(PathBuf, u64)> {
    let Some(dir) = current.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(".jsonl") && !n.starts_with('.'))
        })
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            meta.is_file().then(|| (entry.path(), meta.len()))
        })
        .collect()
}

/// The session a Pi session file holds and the directory it names, from its header (the first
/// line): `(id, cwd)`.
pub fn header(path: &Path) -> Option<(String, String)> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(file)
        .read_until(b'\n', &mut line)
        .ok()
        .filter(|n| *n > 0)?;
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    match SessionEntry::from_slice(line)? {
        SessionEntry::Session(header) => Some((header.id?, header.cwd?)),
        _ => None,
    }
}

/// Whether a live `pi` process other than `pid` runs in `cwd`.
pub fn another_pi_in(cwd: &Path, pid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|other| *other != pid)
        .filter(|other| process::comm(*other).as_deref() == Some("pi"))
        .any(|other| std::fs::read_link(format!("/proc/{other}/cwd")).is_ok_and(|c| c == cwd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_or_grown_sibling_is_seen_once_from_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let current = dir.path().join("2026-12-04T12-01-52-384Z_a.jsonl");
        let old = dir.path().join("2026-12-01T09-00-00-000Z_old.jsonl");
        std::fs::write(&current, "{}\n").unwrap();
        std::fs::write(&old, "{}\n{}\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let mut siblings = Siblings::new(&current);
        assert_eq!(siblings.written(&current), None);
        // The followed file itself growing is no switch.
        std::fs::write(&current, "{}\n{}\n").unwrap();
        assert_eq!(siblings.written(&current), None);
        // `/new`: a file appears.
        let new = dir.path().join("2026-12-04T12-01-53-542Z_b.jsonl");
        std::fs::write(&new, "{}\n").unwrap();
        assert_eq!(siblings.written(&current), Some((new.clone(), 0)));
        assert_eq!(siblings.written(&current), None);
        // Followed now; the old one left.
        siblings.take(&new);
        siblings.leave(&current);
        std::fs::write(&new, "{}\n{}\n").unwrap();
        assert_eq!(siblings.written(&new), None);
        // `/resume` of an older one: it grows, read from where it was.
        std::fs::write(&old, "{}\n{}\n{}\n").unwrap();
        assert_eq!(siblings.written(&new), Some((old.clone(), 6)));
    }

    #[test]
    fn the_header_names_the_session_and_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        std::fs::write(
            &file,
            "{\"type\":\"session\",\"version\":3,\"id\":\"01a2\",\"timestamp\":\"2026-12-04T12:01:52.384Z\",\"cwd\":\"/w\"}\n{\"type\":\"model_change\"}\n",
        )
        .unwrap();
        assert_eq!(header(&file), Some(("01a2".into(), "/w".into())));
        std::fs::write(&file, "{\"type\":\"model_change\"}\n").unwrap();
        assert_eq!(header(&file), None);
    }
}
