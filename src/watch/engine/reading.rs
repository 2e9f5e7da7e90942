//! Reading the followed files: byte offsets, partial lines, bounded first reads, snapshots and databases.

use super::*;

/// The largest snapshot file read (Claude's session files are < 1 KiB).
pub(super) const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;
/// A line longer than this is skipped to its newline: far beyond any record observed.
pub(super) const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// One `read` asks for this much.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// One followed file.
pub(super) struct FileState {
    pub(super) format: usize,
    pub(super) kind: FileKind,
    pub(super) inode: u64,
    /// Bytes read so far (including `partial`).
    pub(super) offset: u64,
    /// The bytes after the last newline read.
    pub(super) partial: Vec<u8>,
    /// Skipping an overlong line up to its newline.
    pub(super) skipping: bool,
    /// `None` until the file is first read (files registered at their size at start-up).
    pub(super) decoder: Option<Box<dyn Decoder>>,
    pub(super) follower: Option<Box<dyn TableFollower>>,
    /// The follower's last error, logged once until a read succeeds or the error changes (a
    /// database being created fails on every WAL write until its schema exists).
    pub(super) follower_error: Option<String>,
    /// The last snapshot's bytes' hash (an unchanged rewrite says nothing).
    pub(super) snapshot_hash: Option<u64>,
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
            .filter(|cp| cp.inode == meta.ino());
        let mut state = FileState {
            format,
            kind,
            inode: meta.ino(),
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            decoder: None,
            follower: None,
            follower_error: None,
            snapshot_hash: None,
        };
        match (kind, saved) {
            (FileKind::Lines, Some(saved)) if saved.offset <= meta.len() => {
                state.offset = saved.offset;
                state.decoder = Some(self.formats[format].decoder(path, Some(saved.decoder)));
                // A file that grew a lot while the daemon was down: read only its tail.
                let gap = meta.len() - saved.offset;
                if gap > self.limits.tail_bytes {
                    state.offset = meta.len() - self.limits.tail_bytes;
                    state.skipping = true;
                }
                self.files.insert(path.to_path_buf(), state);
                self.read_lines(path);
            }
            (FileKind::Lines, _) => {
                let recent = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_none_or(|age| age <= self.limits.recent);
                if self.catching_up && !recent {
                    state.offset = meta.len();
                    self.files.insert(path.to_path_buf(), state);
                } else {
                    self.files.insert(path.to_path_buf(), state);
                    self.first_read(path, meta.len());
                }
            }
            (FileKind::Snapshot, saved) => {
                state.decoder =
                    Some(self.formats[format].decoder(path, saved.map(|saved| saved.decoder)));
                self.files.insert(path.to_path_buf(), state);
                self.read_snapshot(path);
            }
            (FileKind::Database, saved) => {
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
        let head_bytes = self.limits.head_bytes;
        let tail_bytes = self.limits.tail_bytes;
        let Some(file) = self.files.get_mut(path) else {
            return;
        };
        file.decoder = Some(decoder);
        file.partial.clear();
        if size <= tail_bytes {
            file.offset = 0;
            file.skipping = false;
            self.read_lines(path);
            return;
        }
        // The head: the first line, if it is complete within `head_bytes`.
        if let Some(head) = self.read_range(path, 0, head_bytes.min(size))
            && let Some(end) = memchr::memchr(b'\n', &head)
        {
            let mut out = Vec::new();
            if let Some(file) = self.files.get_mut(path)
                && let Some(decoder) = file.decoder.as_mut()
            {
                decoder.line(&head[..end], &Locator::Offset { offset: 0 }, &mut out);
            }
            self.observe_all(
                path,
                out.into_iter().map(|o| (Locator::Offset { offset: 0 }, o)),
            );
        }
        if let Some(file) = self.files.get_mut(path) {
            file.offset = size - tail_bytes;
            // The tail starts mid-line: skip to the first newline.
            file.skipping = true;
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
        let Some(offset) = self.files.get(path).map(|f| f.offset) else {
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
        let mut position = offset;
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
                let mut start = 0;
                let data = &chunk[..n];
                while let Some(rel) = memchr::memchr(b'\n', &data[start..]) {
                    let end = start + rel;
                    let line_start = position + start as u64 - file.partial.len() as u64;
                    if file.skipping {
                        file.skipping = false;
                        file.partial.clear();
                    } else if file.partial.is_empty() {
                        let at = Locator::Offset { offset: line_start };
                        let mut out = Vec::new();
                        decoder.line(&data[start..end], &at, &mut out);
                        observations.extend(out.into_iter().map(|o| (at.clone(), o)));
                    } else {
                        file.partial.extend_from_slice(&data[start..end]);
                        let line = std::mem::take(&mut file.partial);
                        let at = Locator::Offset { offset: line_start };
                        let mut out = Vec::new();
                        decoder.line(&line, &at, &mut out);
                        observations.extend(out.into_iter().map(|o| (at.clone(), o)));
                    }
                    start = end + 1;
                }
                if !file.skipping {
                    file.partial.extend_from_slice(&data[start..]);
                    if file.partial.len() > MAX_LINE_BYTES {
                        tracing::warn!(path = %path.display(), "a line longer than {MAX_LINE_BYTES} bytes; skipping it");
                        file.partial.clear();
                        file.skipping = true;
                    }
                }
                position += n as u64;
                file.offset = position;
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
            file.offset = bytes.len() as u64;
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
                std::fs::metadata(path).is_ok_and(|meta| meta.len() > file.offset)
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
