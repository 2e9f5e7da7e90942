//! The append-only, segmented JSONL event log under `$COHOST_HOME/log/`.
//!
//! Each segment is named after the first `seq` it holds (`00000000000000000001.jsonl`) and each
//! line is one serialized [`Event`](crate::protocol::Event) with its checksum, newline-terminated
//! (the line format is [`log_line`](super::log_line)'s alone).
//! [`EventLog`] is the single writer; it is owned by the core thread and never shared.
//! [`LogReader`] is a cheap clone that reads closed and active segments for cursors that have
//! fallen out of the in-memory ring.
//!
//! Durability: with [`FsyncPolicy::Always`] every batch is `fdatasync`ed before any of its events
//! is acknowledged or broadcast, so an acknowledged event survives a power loss. With
//! [`FsyncPolicy::Never`] the kernel decides; a process crash loses nothing, a power loss can lose
//! the last few seconds of acknowledged events.
//!
//! Integrity: [`EventLog::open`] reads every segment ([`scan`]). A crash mid-write leaves a torn
//! last line, which is cut (its bytes kept in the quarantine file). A line that fails its
//! checksum, does not parse, or whose seq does not follow is moved to the quarantine file with
//! its segment, offset and line number, and the segment is rewritten without it; every valid
//! line around it is kept. What is missing (seqs between the lines kept) is reported in
//! [`Recovery`], never papered over: the next seq is above every seq the log may have used.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::log_line::{self, LineFault, ScanState};
use crate::protocol::{Event, EventKind, SeqRange};

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
    /// Where lines taken out of the log are kept (appended, one JSON record per line).
    pub quarantine: PathBuf,
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
    /// The event's JSON as clients get it (without the line's checksum).
    pub json: String,
}

/// A line (or what was left of one) moved to the quarantine file.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    /// The segment's file name.
    pub segment: String,
    /// Where its bytes started in the segment as it was found.
    pub offset: u64,
    /// 1-based line number in the segment as it was found.
    pub line_number: usize,
    pub bytes: u64,
    pub fault: LineFault,
    /// The seq its prefix claims, if readable (possibly the damaged part).
    pub claimed_seq: Option<u64>,
    /// The quarantine file held these bytes already: an earlier start moved them there but
    /// could not rewrite the segment (see [`Recovery::deferred`]). They are not added again.
    pub already: bool,
}

/// A segment whose damaged lines are in the quarantine file but still in the segment: its
/// rewrite failed (a full disk: it needs the segment's size in free space). Readers skip the
/// lines; the next start tries again.
#[derive(Debug, Clone)]
pub struct DeferredRepair {
    pub segment: String,
    /// Where each damaged line starts.
    pub offsets: Vec<u64>,
    pub error: String,
}

/// What [`EventLog::open`] (or [`scan`]) found on disk.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Kept lines with `seq` greater than the `after` passed to `open`, in order.
    pub lines: Vec<LogLine>,
    /// The number of segments.
    pub segments: usize,
    /// The first seq the oldest segment is named after (what retention kept), if any.
    pub oldest_segment: Option<u64>,
    /// The lowest and highest seq of a kept line (0 when none).
    pub first_seq: u64,
    pub last_seq: u64,
    /// The number of kept lines.
    pub n_lines: u64,
    /// The highest seq the log may have used: the last kept line, plus one per damaged line
    /// after it, and at least the seq before the last segment's name. New events start above.
    pub head: u64,
    /// Bytes cut from a torn last line (a write a crash interrupted, never acknowledged).
    pub truncated_bytes: u64,
    /// Lines that failed their checksum, did not parse, or whose seq did not follow; moved to
    /// the quarantine file by `open` (only listed by a read-only [`scan`]).
    pub quarantined: Vec<Quarantined>,
    /// Those lines in words (how many, why, where), for the one summary line start-up logs.
    pub quarantine_summary: Option<String>,
    /// Seqs, from the oldest segment's name up to `head`, with no kept line, that no
    /// `log.damaged` event in the log has reported yet.
    pub missing: Vec<SeqRange>,
    /// Seqs with no kept line that a `log.damaged` event in the log already reported.
    pub known_missing: Vec<SeqRange>,
    /// Segments `open` could not rewrite: their damaged lines stay, skipped by readers.
    pub deferred: Vec<DeferredRepair>,
    /// The seqs of each session's kept lines, in order: the per-session index readers use.
    pub by_session: HashMap<String, Vec<u64>>,
}

#[derive(Debug, Clone)]
struct Segment {
    first_seq: u64,
    path: PathBuf,
    bytes: u64,
    /// Where damaged lines a deferred repair left in it start: readers skip them.
    skip: Arc<[u64]>,
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
    /// Where the active segment's lines end; with fsync always its file runs on past them
    /// (zeros written ahead, see [`EventLog::preallocate`]).
    len: u64,
    /// The active segment's file size: its lines, then the zeros written ahead of them.
    allocated: u64,
    /// Tests: writing the zeros fails as on a nearly full disk.
    #[cfg(test)]
    no_room_ahead: bool,
    segments: Arc<RwLock<Vec<Segment>>>,
}

/// With fsync always, the active segment is extended by this many zero bytes at a time ahead of
/// its lines.
const PREALLOCATE: u64 = 1 << 20;
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Where a segment's content ends: before the zeros a writer wrote ahead of its lines (a line
/// never holds a NUL byte: JSON escapes control characters).
fn content_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|b| *b != 0)
        .map_or(0, |last| last + 1)
}

mod reader;
pub use reader::LogReader;

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
        // A link or a FIFO where a segment should be is neither followed nor waited on, nor
        // passed over: a log whose segments were skipped would look shorter than it is (its
        // only segment a link: empty, and the next start would reuse its seqs).
        let file_type = entry.file_type()?;
        if !file_type.is_file() {
            let kind = if file_type.is_symlink() {
                "a symbolic link"
            } else if file_type.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the event log segment {} is {kind}: a segment must be a regular file of the log directory (put the file itself there, or move the entry out of the directory); nothing was changed",
                    entry.path().display()
                ),
            ));
        }
        segments.push(Segment {
            first_seq,
            path: entry.path(),
            bytes: entry.metadata()?.len(),
            skip: Arc::from([]),
        });
    }
    segments.sort_by_key(|segment| segment.first_seq);
    Ok(segments)
}

impl EventLog {
    /// Opens (or creates) the log: reads every segment, cuts a torn last line, quarantines
    /// damaged lines (rewriting their segments), and returns every kept line with `seq > after`
    /// with what was found.
    pub fn open(config: LogConfig, after: u64) -> io::Result<(EventLog, Recovery)> {
        fs::create_dir_all(&config.dir)?;
        let mut segments = list_segments(&config.dir)?;
        let recovery = scan_segments(
            &segments,
            after,
            Some(&config.quarantine),
            &config.quarantine,
        )?;
        for deferred in &recovery.deferred {
            if let Some(segment) = segments
                .iter_mut()
                .find(|segment| segment_name(&segment.path) == deferred.segment)
            {
                segment.skip = deferred.offsets.clone().into();
            }
        }
        for segment in &mut segments {
            let metadata = fs::metadata(&segment.path)?;
            segment.bytes = metadata.len();
            // Private like every file of the home (an earlier release wrote 0644).
            if std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o077 != 0 {
                fs::set_permissions(
                    &segment.path,
                    std::os::unix::fs::PermissionsExt::from_mode(0o600),
                )?;
            }
        }
        let len = segments.last().map_or(0, |last| last.bytes);
        let active = match segments.last() {
            Some(last) => open_segment(&last.path, false)?,
            None => {
                let first_seq = recovery.head.max(after) + 1;
                let path = segment_path(&config.dir, first_seq);
                let file = open_segment(&path, true)?;
                sync_dir(&config.dir)?;
                segments.push(Segment {
                    first_seq,
                    path,
                    bytes: 0,
                    skip: Arc::from([]),
                });
                file
            }
        };
        Ok((
            EventLog {
                config,
                active,
                len,
                allocated: len,
                #[cfg(test)]
                no_room_ahead: false,
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
        use std::os::unix::fs::FileExt as _;
        let before = self.len;
        let end = before + bytes.len() as u64;
        if let Err(error) = self.preallocate(end) {
            // No room for the zeros (a nearly full disk): the batch is written without them,
            // growing the file; the next batch tries again.
            tracing::debug!(%error, "could not write zeros ahead of the event log's lines");
            let _ = self.active.set_len(before);
            self.allocated = before;
        }
        let result =
            self.active
                .write_all_at(bytes, before)
                .and_then(|()| match self.config.fsync {
                    FsyncPolicy::Always => self.active.sync_data(),
                    FsyncPolicy::Never => Ok(()),
                });
        if let Err(error) = result {
            let _ = self.active.set_len(before);
            self.allocated = before;
            return Err(error);
        }
        self.len = end;
        // Zeros are only ever written past the lines.
        self.allocated = self.allocated.max(end);
        let mut segments = self.segments.write().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = segments.last_mut() {
            last.bytes = end;
        }
        Ok(())
    }

    /// With fsync always, makes the active segment's file reach past `end` by writing zeros
    /// ahead of its lines, [`PREALLOCATE`] bytes at a time: an append then overwrites bytes the
    /// file already has, its size does not change, and its `fdatasync` writes the data alone
    /// (for a file that grew it writes the inode too, or commits ext4's journal where there is
    /// one: measured on this project's machine, whose ext4 runs without a journal, a 2 KB
    /// append + `fdatasync` 0.23–0.25 ms, the same write over zeros 0.14 ms).
    /// Zeros rather than `fallocate`: writing into a fallocated range converts its extents,
    /// which is metadata again (0.17–0.19 ms). A crash leaves the zeros after the last line;
    /// [`EventLog::open`] cuts them, readers stop at [`Segment::bytes`], and closing a segment
    /// ([`EventLog::roll`], [`EventLog::sync`]) cuts them first.
    fn preallocate(&mut self, end: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        if self.config.fsync != FsyncPolicy::Always || end <= self.allocated {
            return Ok(());
        }
        #[cfg(test)]
        if self.no_room_ahead {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        // Not past the size at which the segment is closed (and cut), unless a batch is.
        let target =
            (end.div_ceil(PREALLOCATE) * PREALLOCATE).min(end.max(self.config.segment_bytes));
        let mut at = self.allocated;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64);
            self.active.write_all_at(&ZEROS[..n as usize], at)?;
            at += n;
        }
        self.allocated = target;
        Ok(())
    }

    /// Cuts the zeros written ahead of the active segment's lines.
    fn cut_preallocation(&mut self) -> io::Result<()> {
        if self.allocated > self.len {
            self.active.set_len(self.len)?;
            self.allocated = self.len;
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
        self.cut_preallocation()?;
        self.active.sync_all()?;
        let path = segment_path(&self.config.dir, next_seq);
        let file = open_segment(&path, true)?;
        sync_dir(&self.config.dir)?;
        self.active = file;
        self.len = 0;
        self.allocated = 0;
        self.segments
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Segment {
                first_seq: next_seq,
                path,
                bytes: 0,
                skip: Arc::from([]),
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

    /// Flushes the active segment to disk whatever the policy, without the zeros written
    /// ahead of its lines (used on shutdown).
    pub fn sync(&mut self) -> io::Result<()> {
        self.cut_preallocation()?;
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

/// Reads the log in `dir` without changing anything: what [`EventLog::open`] would find and
/// repair (`cohost log verify`). No lines are returned.
pub fn scan(dir: &Path, quarantine: &Path) -> io::Result<Recovery> {
    let segments = match list_segments(dir) {
        Ok(segments) => segments,
        Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error),
    };
    scan_segments(&segments, u64::MAX, None, quarantine)
}

/// Scans every segment in order. With `repair` (the quarantine file), damaged lines and a torn
/// tail are moved there and their segments rewritten; without, nothing is written.
fn scan_segments(
    segments: &[Segment],
    after: u64,
    repair: Option<&Path>,
    quarantine: &Path,
) -> io::Result<Recovery> {
    let mut recovery = Recovery {
        segments: segments.len(),
        oldest_segment: segments.first().map(|segment| segment.first_seq),
        ..Recovery::default()
    };
    // The oldest segment's name is where the log claims to start.
    let mut state = ScanState {
        previous: recovery.oldest_segment.unwrap_or(1).saturating_sub(1),
        checksummed: false,
    };
    let mut previous_kept = state.previous;
    // Damaged lines after the last kept line: each may have held the next seq.
    let mut hidden_after_last = 0u64;
    // What earlier starts moved to the quarantine file: never moved there twice; and the gaps
    // they reported without listing them in their `log.damaged` event.
    let known = QuarantineIndex::load(quarantine)?;
    let mut acknowledged = known.gaps.clone();
    for (index, segment) in segments.iter().enumerate() {
        let mut bytes = fs::read(&segment.path)?;
        // The zeros a writer wrote ahead of its lines (it stopped without cutting them: a
        // crash) are not content, neither a torn line nor damage.
        let content = content_len(&bytes);
        if content < bytes.len() {
            bytes.truncate(content);
            if repair.is_some() {
                cut_segment(&segment.path, content as u64)?;
            }
        }
        let name = segment_name(&segment.path);
        let next = segments.get(index + 1).map(|next| next.first_seq);
        let mut found = log_line::scan_segment(&bytes, next, &mut state);
        let is_last = next.is_none();
        if let Some(torn) = found.torn.take() {
            if is_last {
                recovery.truncated_bytes = (torn.end - torn.start) as u64;
                if repair.is_some() {
                    tracing::warn!(
                        path = %segment.path.display(),
                        offset = torn.start,
                        bytes = recovery.truncated_bytes,
                        "truncated a torn last line in the event log (a crash interrupted a write)"
                    );
                }
            } else {
                // A closed segment was synced whole before the next one started: it was cut.
                found.bad.push(log_line::BadLine {
                    claimed_seq: log_line::claimed_seq(&bytes[torn.clone()]),
                    line_number: bytes[..torn.start].iter().filter(|b| **b == b'\n').count() + 1,
                    range: torn.clone(),
                    fault: LineFault::Truncated,
                });
            }
            if let Some(quarantine) = repair
                && !known.holds(&name, torn.start, &bytes[torn.clone()])
            {
                let fault = if is_last { "torn" } else { "truncated" };
                append_quarantine(quarantine, &name, &bytes, &[(torn.clone(), fault)])?;
            }
            if is_last && repair.is_some() {
                cut_segment(&segment.path, torn.start as u64)?;
            }
        }
        let last_kept_start = found.kept.last().map(|kept| kept.range.start);
        let hidden = found
            .bad
            .iter()
            .filter(|bad| bad.fault.may_hide_a_seq())
            .filter(|bad| last_kept_start.is_none_or(|start| bad.range.start > start))
            .count() as u64;
        hidden_after_last = if last_kept_start.is_some() {
            hidden
        } else {
            hidden_after_last + hidden
        };
        for bad in &found.bad {
            recovery.quarantined.push(Quarantined {
                segment: name.clone(),
                offset: bad.range.start as u64,
                line_number: bad.line_number,
                bytes: (bad.range.end - bad.range.start) as u64,
                fault: bad.fault,
                claimed_seq: bad.claimed_seq,
                already: repair.is_some()
                    && known.holds(&name, bad.range.start, &bytes[bad.range.clone()]),
            });
        }
        if let Some(quarantine) = repair {
            // A cut line of a closed segment went to the quarantine file above.
            let bad: Vec<_> = found
                .bad
                .iter()
                .filter(|bad| bad.fault != LineFault::Truncated)
                .filter(|bad| !known.holds(&name, bad.range.start, &bytes[bad.range.clone()]))
                .map(|bad| (bad.range.clone(), bad.fault.as_str()))
                .collect();
            if !bad.is_empty() {
                append_quarantine(quarantine, &name, &bytes, &bad)?;
            }
            if !found.bad.is_empty() || found.unterminated {
                let kept: Vec<_> = found.kept.iter().map(|kept| kept.range.clone()).collect();
                // The damaged bytes are safe in the quarantine file: a segment that cannot be
                // rewritten (it needs its size in free space) keeps them, skipped by readers,
                // and start-up goes on; the next start tries again.
                if let Err(error) = rewrite_segment(&segment.path, &bytes, &kept) {
                    tracing::warn!(
                        path = %segment.path.display(),
                        %error,
                        lines = found.bad.len(),
                        "could not rewrite an event log segment without its damaged lines; they stay in it, skipped by readers, and the next start tries again"
                    );
                    recovery.deferred.push(DeferredRepair {
                        segment: name.clone(),
                        offsets: found.bad.iter().map(|bad| bad.range.start as u64).collect(),
                        error: error.to_string(),
                    });
                }
            }
        }
        for kept in found.kept {
            let seq = kept.seq;
            let raw = &bytes[kept.range.clone()];
            if seq > previous_kept + 1 {
                recovery.missing.push(SeqRange {
                    from: previous_kept + 1,
                    to: seq - 1,
                });
            }
            previous_kept = seq;
            // A gap a previous start-up reported stays in the log; it is not news again.
            if memchr::memmem::find(raw, b"\"type\":\"log.damaged\"").is_some()
                && let Ok(line) = log_line::decode(raw)
                && let Ok(Event {
                    kind: EventKind::LogDamaged(damage),
                    ..
                }) = serde_json::from_str::<Event>(&line.json)
            {
                acknowledged.extend(damage.missing.iter().map(|range| SeqRange {
                    from: range.from,
                    to: range.to,
                }));
            }
            if recovery.n_lines == 0 {
                recovery.first_seq = seq;
            }
            recovery.n_lines += 1;
            recovery.last_seq = seq;
            if seq <= after
                && let Some(session) = log_line::claimed_session(raw)
            {
                recovery.by_session.entry(session).or_default().push(seq);
            }
            if seq > after {
                // It checked out moments ago; only its JSON is built here.
                match log_line::decode(raw) {
                    Ok(line) => {
                        if let Some(session) = &line.session {
                            recovery
                                .by_session
                                .entry(session.clone())
                                .or_default()
                                .push(seq);
                        }
                        recovery.lines.push(line)
                    }
                    Err(fault) => tracing::warn!(
                        seq,
                        reason = fault.as_str(),
                        "a checked line does not decode"
                    ),
                }
            }
        }
    }
    let named = segments
        .last()
        .map(|last| last.first_seq.saturating_sub(1))
        .unwrap_or(0);
    recovery.head = (previous_kept + hidden_after_last)
        .max(named)
        .max(previous_kept)
        .min(log_line::MAX_SEQ);
    if recovery.head > previous_kept {
        recovery.missing.push(SeqRange {
            from: previous_kept + 1,
            to: recovery.head,
        });
    }
    let (known, news) = split_known(std::mem::take(&mut recovery.missing), &acknowledged);
    recovery.missing = news;
    recovery.known_missing = known;
    recovery.quarantine_summary = summarize_quarantined(&recovery.quarantined, repair);
    Ok(recovery)
}

/// The damaged lines found at start-up, in words for the one summary line start-up logs: how
/// many, why, where, and the first few (each line is a record in the quarantine file, and at
/// debug level in this log). One warning per line buried the rest of the output when thousands
/// were damaged. `None` when there are none.
fn summarize_quarantined(lines: &[Quarantined], repair: Option<&Path>) -> Option<String> {
    const LISTED: usize = 5;
    if lines.is_empty() {
        return None;
    }
    let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
    let mut segments = std::collections::BTreeSet::<&str>::new();
    for line in lines {
        *reasons.entry(line.fault.as_str()).or_default() += 1;
        segments.insert(&line.segment);
        tracing::debug!(
            segment = %line.segment,
            offset = line.offset,
            line = line.line_number,
            bytes = line.bytes,
            seq = ?line.claimed_seq,
            reason = line.fault.as_str(),
            "a damaged event log line"
        );
    }
    let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let mut first: Vec<String> = lines
        .iter()
        .take(LISTED)
        .map(|l| format!("{}:{} ({})", l.segment, l.line_number, l.fault.as_str()))
        .collect();
    if lines.len() > LISTED {
        first.push(format!("and {} more", lines.len() - LISTED));
    }
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l.claimed_seq).collect();
    let already = lines.iter().filter(|l| l.already).count();
    Some(format!(
        "{} {} damaged line{} ({}; {} segment{}; claimed seqs {}; {}){} {}",
        if repair.is_some() {
            "quarantined"
        } else {
            "found"
        },
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        reasons.join(", "),
        segments.len(),
        if segments.len() == 1 { "" } else { "s" },
        match (seqs.iter().min(), seqs.iter().max()) {
            (Some(low), Some(high)) => format!("{low}..={high}"),
            _ => "none readable".to_string(),
        },
        first.join(", "),
        match already {
            0 => String::new(),
            n => format!(" ({n} already in the quarantine file from an earlier start)"),
        },
        match repair {
            Some(path) => format!("into {}", path.display()),
            None => "(read only: nothing written)".to_string(),
        },
    ))
}

/// Records `ranges` as `gap` records in the quarantine file (appended, fsync'd): the missing
/// ranges a `log.damaged` event counted but did not list. A later start reads them back as
/// reported, so a gap is news once. Written after the event is logged: a crash in between
/// reports those gaps again, never hides one.
pub fn record_gaps(quarantine: &Path, ranges: &[SeqRange]) -> io::Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    let at = super::now_ms();
    append_records(
        quarantine,
        ranges.iter().map(
            |range| serde_json::json!({"at": at, "gap": {"from": range.from, "to": range.to}}),
        ),
    )
}

/// Splits `ranges` into the seqs inside one of `known` and the rest, both in order.
fn split_known(ranges: Vec<SeqRange>, known: &[SeqRange]) -> (Vec<SeqRange>, Vec<SeqRange>) {
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    for range in ranges {
        let mut from = range.from;
        while from <= range.to {
            // The known range holding `from`, or the nearest one starting after it.
            let holding = known
                .iter()
                .filter(|k| k.from <= from && k.to >= from)
                .map(|k| k.to)
                .max();
            match holding {
                Some(to) => {
                    let to = to.min(range.to);
                    inside.push(SeqRange { from, to });
                    from = to + 1;
                }
                None => {
                    let next = known
                        .iter()
                        .filter(|k| k.from > from)
                        .map(|k| k.from)
                        .min()
                        .map_or(range.to, |start| (start - 1).min(range.to));
                    outside.push(SeqRange { from, to: next });
                    from = next + 1;
                }
            }
            if from == 0 {
                break;
            }
        }
    }
    (inside, outside)
}

fn segment_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The lines the quarantine file holds, by segment, offset and a hash of their bytes: a line
/// found again at the same place with the same bytes (a repair that could not finish) is the
/// same line, and is not quarantined twice. Its `gap` records are missing ranges an earlier
/// start reported (see [`record_gaps`]).
#[derive(Debug, Default)]
struct QuarantineIndex {
    lines: std::collections::HashSet<(String, u64, u64)>,
    gaps: Vec<SeqRange>,
}

impl QuarantineIndex {
    fn key(segment: &str, offset: usize, raw: &[u8]) -> (String, u64, u64) {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        raw.hash(&mut hasher);
        (segment.to_string(), offset as u64, hasher.finish())
    }

    /// Reads the quarantine file's records (none when it does not exist). A record it cannot
    /// read (an earlier release's, or damaged) only means its line may be written again.
    fn load(path: &Path) -> io::Result<QuarantineIndex> {
        use base64::Engine as _;
        let mut index = QuarantineIndex::default();
        let text = match fs::read(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(index),
            Err(error) => return Err(error),
        };
        for line in text.split(|b| *b == b'\n') {
            let Ok(record) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            if let (Some(from), Some(to)) =
                (record["gap"]["from"].as_u64(), record["gap"]["to"].as_u64())
            {
                if from <= to {
                    index.gaps.push(SeqRange { from, to });
                }
                continue;
            }
            let (Some(segment), Some(offset)) =
                (record["segment"].as_str(), record["offset"].as_u64())
            else {
                continue;
            };
            let raw = match (record["text"].as_str(), record["base64"].as_str()) {
                (Some(text), _) => text.as_bytes().to_vec(),
                (None, Some(encoded)) => {
                    match base64::engine::general_purpose::STANDARD.decode(encoded) {
                        Ok(raw) => raw,
                        Err(_) => continue,
                    }
                }
                (None, None) => continue,
            };
            index.insert(segment, offset as usize, &raw);
        }
        Ok(index)
    }

    fn holds(&self, segment: &str, offset: usize, raw: &[u8]) -> bool {
        self.lines.contains(&Self::key(segment, offset, raw))
    }

    fn insert(&mut self, segment: &str, offset: usize, raw: &[u8]) {
        self.lines.insert(Self::key(segment, offset, raw));
    }
}

/// Appends one record per range of `bytes` to the quarantine file and syncs it, before the
/// segment is changed: a crash in between leaves the bytes in both places, never in neither.
fn append_quarantine(
    quarantine: &Path,
    segment: &str,
    bytes: &[u8],
    ranges: &[(std::ops::Range<usize>, &str)],
) -> io::Result<()> {
    use base64::Engine as _;
    let lines = line_numbers(bytes, ranges.iter().map(|(range, _)| range.start));
    let records = ranges.iter().zip(lines).map(|((range, reason), line)| {
        let raw = &bytes[range.clone()];
        let mut record = serde_json::json!({
            "at": super::now_ms(),
            "segment": segment,
            "offset": range.start,
            "line": line,
            "bytes": raw.len(),
            "reason": reason,
        });
        if let Some(seq) = log_line::claimed_seq(raw) {
            record["seq"] = seq.into();
        }
        match std::str::from_utf8(raw) {
            Ok(text) => record["text"] = text.into(),
            Err(_) => {
                record["base64"] = base64::engine::general_purpose::STANDARD.encode(raw).into();
            }
        }
        record
    });
    append_records(quarantine, records)
}

/// Appends `records` to the quarantine file at `path` (the damaged lines and the gaps), one
/// JSON object a line, in one write, then syncs it; the file is opened as a segment is
/// ([`open_appending`]).
fn append_records(
    path: &Path,
    records: impl IntoIterator<Item = serde_json::Value>,
) -> io::Result<()> {
    let mut out = Vec::new();
    for record in records {
        out.extend_from_slice(record.to_string().as_bytes());
        out.push(b'\n');
    }
    let mut file = open_appending(path)?;
    file.write_all(&out)?;
    file.sync_data()
}

/// The 1-based line number of each offset in `bytes`, in the order given: one pass over the
/// bytes whatever the number of offsets (counting from the start for each was quadratic: 10,000
/// damaged lines in a 10 MB segment took minutes to quarantine).
fn line_numbers(bytes: &[u8], offsets: impl Iterator<Item = usize>) -> Vec<usize> {
    let offsets: Vec<usize> = offsets.collect();
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    order.sort_by_key(|&i| offsets[i]);
    let mut lines = vec![0; offsets.len()];
    let (mut at, mut newlines) = (0, 0);
    for i in order {
        let offset = offsets[i].min(bytes.len());
        newlines += memchr::memchr_iter(b'\n', &bytes[at..offset]).count();
        at = offset;
        lines[i] = newlines + 1;
    }
    lines
}

/// Opens a segment for writing at offsets (the writer tracks where its lines end, see
/// [`EventLog::preallocate`]), `create`-ing a new one: never through a link, and private (0600)
/// like every file of the home; an existing one readable by others (an earlier release wrote
/// 0644) is tightened through its descriptor.
fn open_segment(path: &Path, create: bool) -> io::Result<File> {
    open_private(path, create, false)
}

/// [`open_segment`], for appending (the quarantine file).
fn open_appending(path: &Path) -> io::Result<File> {
    open_private(path, true, true)
}

fn open_private(path: &Path, create: bool, append: bool) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = OpenOptions::new()
        .create(create)
        .write(true)
        .append(append)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Cuts a segment at `len` (a torn last line).
fn cut_segment(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

/// Replaces a segment with only its `kept` lines: written beside it, synced, renamed over it.
fn rewrite_segment(path: &Path, bytes: &[u8], kept: &[std::ops::Range<usize>]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut out = Vec::with_capacity(bytes.len());
    for range in kept {
        out.extend_from_slice(&bytes[range.clone()]);
        out.push(b'\n');
    }
    let tmp = path.with_extension("jsonl.rewrite");
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        file.write_all(&out)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, segment_bytes: u64, retain_bytes: u64) -> LogConfig {
        LogConfig {
            dir: dir.to_path_buf(),
            quarantine: dir.join("quarantine.jsonl"),
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

    /// A repair that cannot rewrite its segment (a full disk; here a directory where the
    /// rewrite's file goes) keeps the damaged lines in it, skipped by readers, quarantines them
    /// once however often the log is opened, and finishes at the first open that can write.
    #[test]
    fn a_repair_that_cannot_rewrite_defers_and_quarantines_each_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=1);
        log.append(b"not json\n").unwrap();
        // A line that checks out but repeats a seq: served, it would be a duplicate.
        log.append(line(1).as_bytes()).unwrap();
        write_seqs(&mut log, 2..=2);
        drop(log);
        let segment = list_segments(dir.path()).unwrap()[0].path.clone();
        let blocker = segment.with_extension("jsonl.rewrite");
        fs::create_dir(&blocker).unwrap();
        let records = || {
            fs::read_to_string(dir.path().join("quarantine.jsonl"))
                .unwrap()
                .lines()
                .count()
        };
        for open in 0..3 {
            let (log, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
            assert_eq!(recovery.quarantined.len(), 2, "open {open}");
            assert!(
                recovery.quarantined.iter().all(|q| q.already == (open > 0)),
                "open {open}: {:?}",
                recovery.quarantined
            );
            assert_eq!(recovery.deferred.len(), 1, "open {open}");
            assert_eq!(records(), 2, "open {open}: each line is quarantined once");
            let seqs: Vec<u64> = recovery.lines.iter().map(|l| l.seq).collect();
            assert_eq!(seqs, [1, 2], "open {open}");
            let read: Vec<u64> = log
                .reader()
                .read_after(0, 10, None)
                .unwrap()
                .iter()
                .map(|l| l.seq)
                .collect();
            assert_eq!(
                read,
                [1, 2],
                "open {open}: readers skip the lines left in place"
            );
        }
        fs::remove_dir(&blocker).unwrap();
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert!(recovery.deferred.is_empty());
        assert!(recovery.quarantined.iter().all(|q| q.already));
        assert_eq!(records(), 2);
        assert_eq!(
            fs::read_to_string(&segment).unwrap(),
            format!("{}{}", line(1), line(2))
        );
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert!(recovery.quarantined.is_empty(), "the repair is done");
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

    /// With fsync always the active segment's file runs ahead of its lines with zeros; readers
    /// stop at the lines, a crash's zeros are cut by the next open without a word (a batch torn
    /// over them is cut as a torn line), closing a segment cuts them first, and with fsync never
    /// nothing is written ahead.
    #[test]
    fn zeros_written_ahead_are_never_content() {
        use std::os::unix::fs::FileExt as _;
        let dir = tempfile::tempdir().unwrap();
        let open = || EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        let seqs = |log: &EventLog| -> Vec<u64> {
            let lines = log.reader().read_after(0, 100, None).unwrap();
            lines.iter().map(|l| l.seq).collect()
        };
        let (mut log, _) = open();
        write_seqs(&mut log, 1..=3);
        let segment = list_segments(dir.path()).unwrap()[0].path.clone();
        let content = format!("{}{}{}", line(1), line(2), line(3));
        let on_disk = fs::read(&segment).unwrap();
        assert_eq!(on_disk.len() as u64, PREALLOCATE);
        assert_eq!(&on_disk[..content.len()], content.as_bytes());
        assert!(on_disk[content.len()..].iter().all(|b| *b == 0));
        assert_eq!(seqs(&log), [1, 2, 3]);
        assert_eq!(log.total_bytes(), content.len() as u64);
        // A crash: the zeros stay, and are nothing a check (`cohost log verify`) or the next
        // open reports.
        drop(log);
        let checked = scan(dir.path(), &dir.path().join("quarantine.jsonl")).unwrap();
        assert_eq!(checked.truncated_bytes, 0);
        assert!(checked.quarantined.is_empty() && checked.missing.is_empty());
        assert_eq!((checked.n_lines, checked.head), (3, 3));
        assert_eq!(fs::read(&segment).unwrap().len() as u64, PREALLOCATE);
        let (mut log, recovery) = open();
        assert_eq!(recovery.truncated_bytes, 0);
        assert!(recovery.quarantined.is_empty() && recovery.missing.is_empty());
        assert_eq!(recovery.lines.len(), 3);
        assert_eq!(fs::read(&segment).unwrap(), content.as_bytes());
        write_seqs(&mut log, 4..=4);
        assert_eq!(seqs(&log), [1, 2, 3, 4]);
        drop(log);
        // A crash in the middle of a batch written over the zeros.
        let content = format!("{content}{}", line(4));
        let torn = b"{\"seq\":5,\"ts\":0,\"ty";
        let file = OpenOptions::new().write(true).open(&segment).unwrap();
        file.write_all_at(torn, content.len() as u64).unwrap();
        let (mut log, recovery) = open();
        assert_eq!(recovery.truncated_bytes, torn.len() as u64);
        assert_eq!(recovery.last_seq, 4);
        assert_eq!(fs::read(&segment).unwrap(), content.as_bytes());
        // The writer goes on where the lines end, and a stop cuts the zeros.
        write_seqs(&mut log, 5..=5);
        log.sync().unwrap();
        let content = format!("{content}{}", line(5));
        assert_eq!(fs::read(&segment).unwrap(), content.as_bytes());
        write_seqs(&mut log, 6..=6);
        assert_eq!(seqs(&log), [1, 2, 3, 4, 5, 6]);

        // A closed segment holds its lines alone.
        let dir = tempfile::tempdir().unwrap();
        let per_line = line(1).len() as u64;
        let (mut log, _) = EventLog::open(config(dir.path(), per_line * 2, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=5);
        let segments = list_segments(dir.path()).unwrap();
        assert_eq!(segments.len(), 3);
        for closed in &segments[..2] {
            assert_eq!(closed.bytes, per_line * 2, "{}", closed.path.display());
        }
        // Ahead of its lines up to the size that closes it.
        assert_eq!(segments[2].bytes, per_line * 2);
        assert_eq!(log.total_bytes(), per_line * 5);

        // No room for the zeros: the lines are written all the same, the file grows with them
        // (past where the zeros would have reached).
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = EventLog::open(config(dir.path(), 1 << 30, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=1);
        log.no_room_ahead = true;
        let n = PREALLOCATE / per_line + 2;
        write_seqs(&mut log, 2..=n);
        let segment = list_segments(dir.path()).unwrap()[0].path.clone();
        let content = (1..=n).map(line).collect::<String>();
        assert!(content.len() as u64 > PREALLOCATE);
        assert_eq!(fs::read(&segment).unwrap(), content.as_bytes());
        let read = log.reader().read_after(0, usize::MAX, None).unwrap();
        assert_eq!(read.len() as u64, n);
        // With room again, the zeros are written ahead of the lines once more.
        log.no_room_ahead = false;
        write_seqs(&mut log, n + 1..=n + 1);
        let content = format!("{content}{}", line(n + 1));
        let on_disk = fs::read(&segment).unwrap();
        assert_eq!(&on_disk[..content.len()], content.as_bytes());
        assert_eq!(on_disk.len() as u64, 2 * PREALLOCATE);
        assert!(on_disk[content.len()..].iter().all(|b| *b == 0));

        let dir = tempfile::tempdir().unwrap();
        let mut never = config(dir.path(), 1 << 20, u64::MAX);
        never.fsync = FsyncPolicy::Never;
        let (mut log, _) = EventLog::open(never, 0).unwrap();
        write_seqs(&mut log, 1..=2);
        assert_eq!(list_segments(dir.path()).unwrap()[0].bytes, per_line * 2);
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
    fn garbage_lines_are_quarantined_with_their_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        write_seqs(&mut log, 1..=1);
        log.append(b"not json\n").unwrap();
        write_seqs(&mut log, 2..=2);
        drop(log);
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert_eq!(recovery.lines.len(), 2);
        assert_eq!(recovery.quarantined.len(), 1);
        assert_eq!(recovery.quarantined[0].offset, line(1).len() as u64);
        assert_eq!(recovery.quarantined[0].line_number, 2);
        assert!(recovery.missing.is_empty());
        // Moved, not copied: the segment no longer has it, the quarantine file does.
        let segment =
            fs::read_to_string(list_segments(dir.path()).unwrap()[0].path.clone()).unwrap();
        assert_eq!(segment, format!("{}{}", line(1), line(2)));
        let quarantine = fs::read_to_string(dir.path().join("quarantine.jsonl")).unwrap();
        let record: serde_json::Value = serde_json::from_str(quarantine.trim()).unwrap();
        assert_eq!(record["text"], "not json");
        assert_eq!(record["reason"], "unreadable");
        assert_eq!(record["line"], 2);
        let (_, recovery) = EventLog::open(config(dir.path(), 1 << 20, u64::MAX), 0).unwrap();
        assert!(recovery.quarantined.is_empty(), "the repair is done once");
    }

    #[test]
    fn line_numbers_are_counted_in_one_pass_whatever_the_order_of_the_offsets() {
        let bytes = b"one\ntwo\nthree\n\nfive";
        let offsets = [8, 0, 4, 15, 14, 16, 99];
        assert_eq!(
            line_numbers(bytes, offsets.into_iter()),
            [3, 1, 2, 5, 4, 5, 5]
        );
        assert!(line_numbers(bytes, std::iter::empty()).is_empty());
    }
}
