//! Reading the followed files: a new file registered (resumed from its checkpoint, read bounded,
//! or, at start-up when it is old, kept at its size), a lines file read from its offset to its
//! end through its [`LineBuffer`] (`tail::lines`), snapshots read whole (an unchanged rewrite says nothing),
//! databases polled through their format's follower, and the read of an agent's unread files
//! before its exit is judged. What an event on a known file means is [`FileState::change`]
//! (pure).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::Engine;
use super::read_plan::{self, FirstRead, first_line};
use crate::tail::LineBuffer;
use crate::tail::lines::MAX_LINE_BYTES;
use crate::watch::format::{Decoder, FileKind, Locator, TableFollower};

/// The largest snapshot file read (Claude's session files are < 1 KiB).
const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;
/// One `read` asks for this much.
const READ_CHUNK: usize = 64 * 1024;

/// One followed file.
pub(super) struct FileState {
    pub(super) format: usize,
    pub(super) kind: FileKind,
    pub(super) inode: u64,
    /// Where a lines file is read from, and its held-back partial line (a snapshot's offset
    /// is its size; a database's stays 0: its follower keeps its own cursor).
    pub(super) reader: LineBuffer,
    /// `None` until the file is first read (files registered at their size at start-up).
    pub(super) decoder: Option<Box<dyn Decoder>>,
    pub(super) follower: Option<Box<dyn TableFollower>>,
    /// The follower's last error, logged once until a read succeeds or the error changes (a
    /// database being created fails on every WAL write until its schema exists).
    pub(super) follower_error: Option<String>,
    /// The last snapshot's bytes' hash (an unchanged rewrite says nothing).
    pub(super) snapshot_hash: Option<u64>,
}

/// What an event on a known file means, from its inode and size now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileChange {
    /// Another file took its name: the old one is gone, this one is new.
    Replaced,
    /// A lines file registered at its size at start-up grows: its first read.
    FirstRead,
    /// Shorter than what was read: read it again from the start.
    Truncated,
    /// Read from the offset to the end.
    Grew,
    Unchanged,
    /// Read whole again (its hash says whether anything changed).
    Snapshot,
    /// Polled through its follower (the database or its `-wal` changed).
    Database,
}

impl FileState {
    pub(super) fn new(format: usize, kind: FileKind, inode: u64) -> FileState {
        FileState {
            format,
            kind,
            inode,
            reader: LineBuffer::at(0),
            decoder: None,
            follower: None,
            follower_error: None,
            snapshot_hash: None,
        }
    }

    /// What an event means for this file, now at `inode` and `size` bytes.
    pub(super) fn change(&self, inode: u64, size: u64) -> FileChange {
        if self.inode != inode && self.kind != FileKind::Database {
            return FileChange::Replaced;
        }
        match self.kind {
            FileKind::Lines if self.decoder.is_none() => FileChange::FirstRead,
            FileKind::Lines if size < self.reader.offset() => FileChange::Truncated,
            FileKind::Lines if size > self.reader.offset() => FileChange::Grew,
            FileKind::Lines => FileChange::Unchanged,
            FileKind::Snapshot => FileChange::Snapshot,
            FileKind::Database => FileChange::Database,
        }
    }
}

impl Engine {
    /// A new file: follow it from its checkpoint, or read it (bounded), or, at start-up when it
    /// is old, register it at its size.
    pub(super) fn register(&mut self, path: &Path, format: usize) {
        let Some((format, kind)) = self.classify(path).filter(|(f, _)| *f == format) else {
            return;
        };
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let saved = self
            .saved_files
            .remove(path)
            .filter(|cp| cp.position.inode == meta.ino());
        let mut state = FileState::new(format, kind, meta.ino());
        // A file that grew a lot while the daemon was down: read only its tail.
        let resumed = match (kind, &saved) {
            (FileKind::Lines, Some(saved)) => {
                read_plan::resume(saved.position.offset, meta.len(), self.limits.tail_bytes)
            }
            _ => None,
        };
        match (kind, saved, resumed) {
            (FileKind::Lines, Some(saved), Some(reader)) => {
                state.reader = reader;
                state.decoder = Some(self.formats[format].decoder(path, Some(saved.decoder)));
                self.files.insert(path.to_path_buf(), state);
                self.read_lines(path);
            }
            (FileKind::Lines, _, _) => {
                let recent = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_none_or(|age| age <= self.limits.recent);
                if self.catching_up && !recent {
                    state.reader = LineBuffer::at(meta.len());
                    self.files.insert(path.to_path_buf(), state);
                } else {
                    self.files.insert(path.to_path_buf(), state);
                    self.first_read(path, meta.len());
                }
            }
            (FileKind::Snapshot, saved, _) => {
                state.decoder =
                    Some(self.formats[format].decoder(path, saved.map(|saved| saved.decoder)));
                self.files.insert(path.to_path_buf(), state);
                self.read_snapshot(path);
            }
            (FileKind::Database, saved, _) => {
                state.follower =
                    self.formats[format].follower(path, saved.map(|saved| saved.decoder));
                self.files.insert(path.to_path_buf(), state);
                self.poll_database(path);
            }
        }
        self.view().files_known = self.files.len() as u64;
    }

    /// The first read of a lines file: its first line (bounded) and its tail.
    pub(super) fn first_read(&mut self, path: &Path, size: u64) {
        let format = match self.files.get(path) {
            Some(file) => file.format,
            None => return,
        };
        let decoder = self.formats[format].decoder(path, None);
        let Some(file) = self.files.get_mut(path) else {
            return;
        };
        file.decoder = Some(decoder);
        file.reader.drop_partial();
        let (head, tail_from) =
            match FirstRead::plan(size, self.limits.head_bytes, self.limits.tail_bytes) {
                FirstRead::Whole => {
                    file.reader = LineBuffer::at(0);
                    self.read_lines(path);
                    return;
                }
                FirstRead::HeadAndTail { head, tail_from } => (head, tail_from),
            };
        // The head: the first line, if it is complete within `head_bytes`.
        if let Some(head) = self.read_range(path, 0, head)
            && let Some(line) = first_line(&head)
        {
            let mut out = Vec::new();
            if let Some(file) = self.files.get_mut(path)
                && let Some(decoder) = file.decoder.as_mut()
            {
                decoder.line(line, &Locator::Offset { offset: 0 }, &mut out);
            }
            self.observe_all(
                path,
                out.into_iter().map(|o| (Locator::Offset { offset: 0 }, o)),
            );
        }
        if let Some(file) = self.files.get_mut(path) {
            // The tail starts mid-line: skip to the first newline.
            file.reader = LineBuffer::mid_line(tail_from);
        }
        self.read_lines(path);
    }

    pub(super) fn read_range(&self, path: &Path, from: u64, to: u64) -> Option<Vec<u8>> {
        let mut file = File::open(path).ok()?;
        self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut buf = Vec::with_capacity(usize::try_from(to.saturating_sub(from)).ok()?);
        file.take(to.saturating_sub(from))
            .read_to_end(&mut buf)
            .ok()?;
        self.shared
            .bytes_read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Some(buf)
    }

    /// Reads a lines file from its offset to its end and decodes every complete line.
    pub(super) fn read_lines(&mut self, path: &Path) {
        let Some(offset) = self.files.get(path).map(|f| f.reader.offset()) else {
            return;
        };
        let Ok(mut handle) = File::open(path) else {
            return;
        };
        self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
        if handle.seek(SeekFrom::Start(offset)).is_err() {
            return;
        }
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let n = match handle.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.shared
                .bytes_read
                .fetch_add(n as u64, Ordering::Relaxed);
            let mut observations = Vec::new();
            {
                let Some(file) = self.files.get_mut(path) else {
                    return;
                };
                let Some(decoder) = file.decoder.as_mut() else {
                    return;
                };
                let overlong = file.reader.feed_lines(&chunk[..n], |line_start, line| {
                    let at = Locator::Offset { offset: line_start };
                    let mut out = Vec::new();
                    decoder.line(line, &at, &mut out);
                    observations.extend(out.into_iter().map(|o| (at.clone(), o)));
                });
                if overlong {
                    tracing::warn!(path = %path.display(), "a line longer than {MAX_LINE_BYTES} bytes; skipping it");
                }
            }
            self.observe_all(path, observations.into_iter());
        }
        self.mark_dirty();
    }

    pub(super) fn read_snapshot(&mut self, path: &Path) {
        let Some(bytes) = self.read_range(path, 0, MAX_SNAPSHOT_BYTES) else {
            return;
        };
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            hasher.finish()
        };
        let mut out = Vec::new();
        {
            let Some(file) = self.files.get_mut(path) else {
                return;
            };
            if file.snapshot_hash == Some(hash) {
                return;
            }
            file.snapshot_hash = Some(hash);
            file.reader = LineBuffer::at(bytes.len() as u64);
            if let Some(decoder) = file.decoder.as_mut() {
                decoder.snapshot(&bytes, &mut out);
            }
        }
        self.observe_all(path, out.into_iter().map(|o| (Locator::Snapshot, o)));
        self.mark_dirty();
    }

    pub(super) fn poll_database(&mut self, path: &Path) {
        let mut out = Vec::new();
        {
            let Some(file) = self.files.get_mut(path) else {
                return;
            };
            let Some(follower) = file.follower.as_mut() else {
                return;
            };
            self.shared.file_reads.fetch_add(1, Ordering::Relaxed);
            match follower.poll(&mut out) {
                Ok(()) => file.follower_error = None,
                Err(error) => {
                    let error = format!("{error:#}");
                    if file.follower_error.as_deref() != Some(error.as_str()) {
                        tracing::warn!(path = %path.display(), error = %error, "reading a watched database failed (logged once until it reads again)");
                    }
                    file.follower_error = Some(error);
                }
            }
        }
        self.observe_all(path, out.into_iter());
        self.mark_dirty();
    }

    /// An agent of `format` exited. What it wrote before is on disk, but the file events may
    /// still be on their way — and a file it wrote last (a headless run's transcript, with its
    /// answer) may not be known as its thread's yet. Every followed file of the format with
    /// bytes not yet read is read to its end first, so the exit is judged after the last record
    /// (its real final status, not `stale`), whichever of the two the engine saw first.
    pub(super) fn read_before_exit(&mut self, format: usize) {
        if self.draining {
            return;
        }
        let unread: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|(_, file)| file.format == format && file.kind == FileKind::Lines)
            .filter(|(path, file)| {
                std::fs::metadata(path).is_ok_and(|meta| meta.len() > file.reader.offset())
            })
            .map(|(path, _)| path.clone())
            .collect();
        self.draining = true;
        for path in unread {
            self.check_path(&path);
        }
        self.draining = false;
    }
}
