//! The append-only, segmented JSONL event log under `$COHOST_HOME/log/`.
//!
//! Each segment is named after the first `seq` it holds (`00000000000000000001.jsonl`) and each
//! line is one serialized [`Event`](crate::protocol::Event), newline-terminated.
//! [`EventLog`] is the single writer; it is owned by the core thread and never shared.
//! [`LogReader`] is a cheap clone that reads closed and active segments for cursors that have
//! fallen out of the in-memory ring.
//!
//! Durability: with [`FsyncPolicy::Always`] every batch is `fdatasync`ed before any of its events
//! is acknowledged or broadcast, so an acknowledged event survives a power loss. With
//! [`FsyncPolicy::Never`] the kernel decides; a process crash loses nothing, a power loss can lose
//! the last few seconds of acknowledged events. A crash mid-write leaves a torn last line, which
//! [`EventLog::open`] truncates with a warning; every complete line before it is kept.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Deserialize;

/// How hard the writer pushes each batch to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncPolicy {
    /// `fdatasync` after every batch, before acknowledging it.
    Always,
    /// Leave flushing to the kernel.
    Never,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub dir: PathBuf,
    /// A segment is closed and a new one started once it reaches this size.
    pub segment_bytes: u64,
    /// Closed segments are deleted, oldest first, while the log is larger than this.
    /// The active segment is never deleted.
    pub retain_bytes: u64,
    pub fsync: FsyncPolicy,
}

/// One complete line read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub seq: u64,
    pub session: Option<String>,
    pub session_seq: Option<u64>,
    pub json: String,
}

/// What [`EventLog::open`] found on disk.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Complete lines with `seq` greater than the `after` passed to `open`, in order.
    pub lines: Vec<LogLine>,
    /// The highest seq in the log (0 when empty).
    pub last_seq: u64,
    /// Bytes cut from a torn last line.
    pub truncated_bytes: u64,
    /// Complete lines that did not parse or went backwards, with their segment and offset.
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone)]
struct Segment {
    first_seq: u64,
    path: PathBuf,
    bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The cursor points before the oldest retained event: retention deleted what follows it.
    #[error("cursor {after} is older than the oldest retained event {oldest}")]
    CursorExpired { after: u64, oldest: u64 },
    #[error("reading the event log at {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The only writer of the log.
pub struct EventLog {
    config: LogConfig,
    active: File,
    segments: Arc<RwLock<Vec<Segment>>>,
}

/// Reads the log from another thread; clones share the segment list with the writer.
#[derive(Clone)]
pub struct LogReader {
    segments: Arc<RwLock<Vec<Segment>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LineHead {
    seq: u64,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    session_seq: Option<u64>,
}

fn parse_line(line: &str) -> Option<LogLine> {
    let head: LineHead = serde_json::from_str(line).ok()?;
    Some(LogLine {
        seq: head.seq,
        session: head.session,
        session_seq: head.session_seq,
        json: line.to_string(),
    })
}

/// The seq of a line without parsing it all; lines always start with `{"seq":N,`.
fn line_seq(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.jsonl"))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn list_segments(dir: &Path) -> io::Result<Vec<Segment>> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let Ok(first_seq) = stem.parse::<u64>() else {
            continue;
        };
        segments.push(Segment {
            first_seq,
            path: entry.path(),
            bytes: entry.metadata()?.len(),
        });
    }
    segments.sort_by_key(|segment| segment.first_seq);
    Ok(segments)
}

impl EventLog {
    /// Opens (or creates) the log, truncates a torn last line, and returns every complete line
    /// with `seq > after`.
    pub fn open(config: LogConfig, after: u64) -> io::Result<(EventLog, Recovery)> {
        fs::create_dir_all(&config.dir)?;
        let mut segments = list_segments(&config.dir)?;
        let mut recovery = Recovery::default();

        if let Some(last) = segments.last_mut() {
            recovery.truncated_bytes = truncate_torn_tail(&last.path)?;
            if recovery.truncated_bytes > 0 {
                tracing::warn!(
                    path = %last.path.display(),
                    bytes = recovery.truncated_bytes,
                    "truncated a torn last line in the event log (a crash interrupted a write)"
                );
            }
            last.bytes = fs::metadata(&last.path)?.len();
        }

        // Only segments that can hold seqs after `after` are read: the one containing `after + 1`
        // and every later one.
        let start = segments
            .iter()
            .rposition(|segment| segment.first_seq <= after + 1)
            .unwrap_or(0);
        let mut previous = 0;
        for segment in &segments[start..] {
            let file = File::open(&segment.path)?;
            let mut reader = BufReader::new(file);
            let mut offset = 0u64;
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader.read_line(&mut line)?;
                if n == 0 {
                    break;
                }
                let text = line.trim_end_matches('\n');
                match parse_line(text) {
                    Some(parsed) if parsed.seq > previous => {
                        previous = parsed.seq;
                        if parsed.seq > after {
                            recovery.lines.push(parsed);
                        }
                    }
                    Some(parsed) => recovery.skipped.push(format!(
                        "{}:{offset}: seq {} does not follow {previous}",
                        segment.path.display(),
                        parsed.seq
                    )),
                    None => recovery
                        .skipped
                        .push(format!("{}:{offset}: not an event", segment.path.display())),
                }
                offset += n as u64;
            }
        }
        for skipped in &recovery.skipped {
            tracing::warn!("skipped an unreadable event log line at {skipped}");
        }
        recovery.last_seq = previous.max(
            // Segments before `start` were not read; their seqs are all below `after + 1`.
            if start > 0 { after } else { 0 },
        );

        let active = match segments.last() {
            Some(last) => OpenOptions::new().append(true).open(&last.path)?,
            None => {
                let first_seq = recovery.last_seq.max(after) + 1;
                let path = segment_path(&config.dir, first_seq);
                let file = OpenOptions::new().create(true).append(true).open(&path)?;
                sync_dir(&config.dir)?;
                segments.push(Segment {
                    first_seq,
                    path,
                    bytes: 0,
                });
                file
            }
        };
        Ok((
            EventLog {
                config,
                active,
                segments: Arc::new(RwLock::new(segments)),
            },
            recovery,
        ))
    }

    pub fn reader(&self) -> LogReader {
        LogReader {
            segments: Arc::clone(&self.segments),
        }
    }

    /// Appends complete lines (each ending in `\n`) in one write, then syncs per the policy.
    /// On failure the segment is cut back to its previous length so no partial batch remains.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let before = self.active.metadata()?.len();
        let result = self
            .active
            .write_all(bytes)
            .and_then(|()| match self.config.fsync {
                FsyncPolicy::Always => self.active.sync_data(),
                FsyncPolicy::Never => Ok(()),
            });
        if let Err(error) = result {
            let _ = self.active.set_len(before);
            return Err(error);
        }
        let mut segments = self.segments.write().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = segments.last_mut() {
            last.bytes = before + bytes.len() as u64;
        }
        Ok(())
    }

    /// Whether the active segment has reached its size limit.
    pub fn wants_roll(&self) -> bool {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .is_some_and(|last| last.bytes >= self.config.segment_bytes)
    }

    /// Closes the active segment and starts a new one whose first event will be `next_seq`.
    pub fn roll(&mut self, next_seq: u64) -> io::Result<()> {
        self.active.sync_all()?;
        let path = segment_path(&self.config.dir, next_seq);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        sync_dir(&self.config.dir)?;
        self.active = file;
        self.segments
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Segment {
                first_seq: next_seq,
                path,
                bytes: 0,
            });
        Ok(())
    }

    /// Deletes the oldest closed segments while the log is over `retain_bytes`, but only
    /// segments whose every event is at or below `covered_seq` (already in a snapshot).
    /// Returns the number of segments deleted.
    pub fn apply_retention(&mut self, covered_seq: u64) -> io::Result<usize> {
        let mut deleted = 0;
        loop {
            let victim = {
                let segments = self.segments.read().unwrap_or_else(|e| e.into_inner());
                let total: u64 = segments.iter().map(|segment| segment.bytes).sum();
                if segments.len() < 2 || total <= self.config.retain_bytes {
                    break;
                }
                // The oldest segment ends right before the next one starts.
                if segments[1].first_seq.saturating_sub(1) > covered_seq {
                    break;
                }
                segments[0].path.clone()
            };
            // Readers see the shorter list before the file disappears.
            self.segments
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(0);
            match fs::remove_file(&victim) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
            tracing::info!(path = %victim.display(), "retention deleted an event log segment");
            deleted += 1;
        }
        Ok(deleted)
    }

    /// Flushes the active segment to disk whatever the policy (used on shutdown).
    pub fn sync(&mut self) -> io::Result<()> {
        self.active.sync_all()
    }

    /// Total bytes of all segments.
    pub fn total_bytes(&self) -> u64 {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|segment| segment.bytes)
            .sum()
    }
}

/// Cuts everything after the last newline. Returns the number of bytes removed.
fn truncate_torn_tail(path: &Path) -> io::Result<u64> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    // Scan backwards in blocks for the last '\n'.
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut buf = vec![0u8; BLOCK as usize];
    loop {
        let start = end.saturating_sub(BLOCK);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        io::Read::read_exact(&mut file, &mut buf[..n])?;
        if let Some(pos) = buf[..n].iter().rposition(|&b| b == b'\n') {
            let keep = start + pos as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
                file.sync_all()?;
            }
            return Ok(len - keep);
        }
        if start == 0 {
            file.set_len(0)?;
            file.sync_all()?;
            return Ok(len);
        }
        end = start;
    }
}

impl LogReader {
    /// The seq of the oldest event still on disk, if any segment exists.
    pub fn oldest_seq(&self) -> Option<u64> {
        self.segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .first()
            .map(|segment| segment.first_seq)
    }

    /// Up to `limit` complete lines with `seq > after`, in order, stopping before `until`
    /// (exclusive) when given. Blocking: call it from `spawn_blocking`.
    pub fn read_after(
        &self,
        after: u64,
        limit: usize,
        until: Option<u64>,
    ) -> Result<Vec<LogLine>, ReadError> {
        // A segment deleted by retention between listing and opening is retried once with the
        // fresh list, which then reports the cursor as expired.
        match self.read_after_once(after, limit, until) {
            Err(ReadError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.read_after_once(after, limit, until)
            }
            other => other,
        }
    }

    fn read_after_once(
        &self,
        after: u64,
        limit: usize,
        until: Option<u64>,
    ) -> Result<Vec<LogLine>, ReadError> {
        let segments = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(first) = segments.first() else {
            return Ok(Vec::new());
        };
        if after + 1 < first.first_seq {
            return Err(ReadError::CursorExpired {
                after,
                oldest: first.first_seq,
            });
        }
        let start = segments
            .iter()
            .rposition(|segment| segment.first_seq <= after + 1)
            .unwrap_or(0);
        let mut out = Vec::new();
        for segment in &segments[start..] {
            let file = File::open(&segment.path).map_err(|source| ReadError::Io {
                path: segment.path.clone(),
                source,
            })?;
            let mut reader = BufReader::new(file);
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader
                    .read_line(&mut line)
                    .map_err(|source| ReadError::Io {
                        path: segment.path.clone(),
                        source,
                    })?;
                // A line without its newline is still being written.
                if n == 0 || !line.ends_with('\n') {
                    break;
                }
                let text = line.trim_end_matches('\n');
                let Some(seq) = line_seq(text) else { continue };
                if seq <= after {
                    continue;
                }
                if until.is_some_and(|until| seq >= until) || out.len() >= limit {
                    return Ok(out);
                }
                if let Some(parsed) = parse_line(text) {
                    out.push(parsed);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, segment_bytes: u64, retain_bytes: u64) -> LogConfig {
        LogConfig {
            dir: dir.to_path_buf(),
            segment_bytes,
            retain_bytes,
            fsync: FsyncPolicy::Always,
        }
    }

    fn line(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"ts\":0,\"type\":\"meta.log_cleared\",\"data\":{{}}}}\n")
    }

    fn write_seqs(log: &mut EventLog, seqs: std::ops::RangeInclusive<u64>) {
        for seq in seqs {
            log.append(line(seq).as_bytes()).unwrap();
            if log.wants_roll() {
                log.roll(seq + 1).unwrap();
            }
        }
    }

    #[test]
    fn reopen_returns_lines_after_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert_eq!(recovery.last_seq, 0);
        write_seqs(&mut log, 1..=5);
        drop(log);
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 3).unwrap();
        let seqs: Vec<_> = recovery.lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, [4, 5]);
        assert_eq!(recovery.last_seq, 5);
    }

    #[test]
    fn torn_last_line_is_truncated_and_earlier_lines_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=3);
        log.append(b"{\"seq\":4,\"ts\":0,\"ty").unwrap_err_or_ok();
        drop(log);
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert_eq!(recovery.truncated_bytes, 19);
        assert_eq!(recovery.last_seq, 3);
        assert_eq!(recovery.lines.len(), 3);
    }

    trait Ignore {
        fn unwrap_err_or_ok(self);
    }
    impl Ignore for io::Result<()> {
        fn unwrap_err_or_ok(self) {}
    }

    #[test]
    fn segments_roll_and_reader_spans_them() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) =
            EventLog::open(config(dir.path(), line(1).len() as u64 * 3, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=10);
        assert_eq!(list_segments(dir.path()).unwrap().len(), 4);
        let reader = log.reader();
        let seqs: Vec<_> = reader
            .read_after(2, 100, None)
            .unwrap()
            .iter()
            .map(|l| l.seq)
            .collect();
        assert_eq!(seqs, (3..=10).collect::<Vec<_>>());
        let seqs: Vec<_> = reader
            .read_after(2, 3, None)
            .unwrap()
            .iter()
            .map(|l| l.seq)
            .collect();
        assert_eq!(seqs, [3, 4, 5]);
        let seqs: Vec<_> = reader
            .read_after(0, 100, Some(4))
            .unwrap()
            .iter()
            .map(|l| l.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
    }

    #[test]
    fn retention_deletes_only_covered_segments_and_expires_old_cursors() {
        let dir = tempfile::tempdir().unwrap();
        let per_line = line(1).len() as u64;
        let (mut log, _) =
            EventLog::open(config(dir.path(), per_line * 3, per_line * 4), 0).unwrap();
        write_seqs(&mut log, 1..=9);
        // Segments: 1-3, 4-6, 7-9, 10-(empty).
        assert_eq!(log.apply_retention(3).unwrap(), 1);
        assert_eq!(log.apply_retention(9).unwrap(), 1);
        let reader = log.reader();
        assert_eq!(reader.oldest_seq(), Some(7));
        assert!(matches!(
            reader.read_after(2, 10, None),
            Err(ReadError::CursorExpired { oldest: 7, .. })
        ));
        assert_eq!(reader.read_after(6, 10, None).unwrap().len(), 3);
        // A reopened log continues after the retained tail.
        drop(log);
        let (_, recovery) =
            EventLog::open(config(dir.path(), per_line * 3, per_line * 4), 9).unwrap();
        assert_eq!(recovery.last_seq, 9);
        assert!(recovery.lines.is_empty());
    }

    #[test]
    fn garbage_lines_are_skipped_with_their_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=1);
        log.append(b"not json\n").unwrap();
        write_seqs(&mut log, 2..=2);
        drop(log);
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert_eq!(recovery.lines.len(), 2);
        assert_eq!(recovery.skipped.len(), 1);
        assert!(recovery.skipped[0].contains(&format!(":{}:", line(1).len())));
    }

    #[test]
    fn line_seq_reads_the_prefix() {
        assert_eq!(line_seq("{\"seq\":123,\"ts\":1}"), Some(123));
        assert_eq!(line_seq("{\"ts\":1}"), None);
    }
}
