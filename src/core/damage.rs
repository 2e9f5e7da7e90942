//! What is missing or damaged in a home's log: the report start-up logs (and stores as
//! `log.damaged`) and `cohost log verify` prints.

use std::path::PathBuf;

use super::event_log::{self, Recovery};
use super::snapshot::{self, Snapshot};
use super::{format, home_lock};
use crate::protocol::{LogDamage, MissingRange, QuarantinedLine, SeqRange};

/// The most quarantined lines a `log.damaged` event lists (all are counted).
const MAX_LISTED_QUARANTINED: usize = 100;
/// The most missing ranges a `log.damaged` event lists (all are counted, and the rest are
/// `gap` records in the quarantine file): 10,000 scattered damaged lines made a 500 KB event
/// every reader received.
const MAX_LISTED_MISSING: usize = 100;

/// Compares what the log holds (`recovery`) with the snapshot taken at `snapshot_seq`, and says
/// what is missing or was quarantined; `None` when nothing is. `notes` are findings in words
/// (an unusable snapshot).
pub fn damage_report(
    recovery: &Recovery,
    snapshot_seq: u64,
    quarantine_file: &std::path::Path,
    notes: Vec<String>,
) -> Option<LogDamage> {
    let mut ranges: Vec<SeqRange> = Vec::new();
    // Before the oldest segment: retention deletes only what a snapshot covers, so seqs there
    // that the snapshot does not cover are lost to both.
    if let Some(oldest) = recovery.oldest_segment
        && oldest > snapshot_seq + 1
    {
        ranges.push(SeqRange {
            from: snapshot_seq + 1,
            to: oldest - 1,
        });
    }
    ranges.extend(recovery.missing.iter().copied());
    // After the log's end: events the snapshot has seen but the log lost.
    if recovery.segments > 0 && snapshot_seq > recovery.head {
        ranges.push(SeqRange {
            from: recovery.head + 1,
            to: snapshot_seq,
        });
    }
    let mut missing = Vec::new();
    for range in ranges {
        // Split at the snapshot: the state reflects what it covers.
        if range.from <= snapshot_seq && range.to > snapshot_seq {
            missing.push(MissingRange {
                from: range.from,
                to: snapshot_seq,
                in_snapshot: true,
            });
            missing.push(MissingRange {
                from: snapshot_seq + 1,
                to: range.to,
                in_snapshot: false,
            });
        } else {
            missing.push(MissingRange {
                from: range.from,
                to: range.to,
                in_snapshot: range.to <= snapshot_seq,
            });
        }
    }
    let mut notes = notes;
    // Lines an earlier start quarantined but could not take out of their segment were
    // reported then; they are not news.
    let fresh: Vec<_> = recovery.quarantined.iter().filter(|q| !q.already).collect();
    for deferred in &recovery.deferred {
        if fresh.iter().any(|q| q.segment == deferred.segment) {
            notes.push(format!(
                "segment {} could not be rewritten without its {} damaged line(s) ({}): they are in the quarantine file and stay in the segment, skipped by readers, until a start can rewrite it",
                deferred.segment,
                deferred.offsets.len(),
                deferred.error
            ));
        }
    }
    if recovery.segments == 0 && snapshot_seq > 0 {
        notes.push(format!(
            "the log has no segment while the snapshot is at seq {snapshot_seq}: every event up to it is gone from the log"
        ));
    }
    if missing.is_empty() && fresh.is_empty() && notes.is_empty() {
        return None;
    }
    Some(LogDamage {
        snapshot_seq,
        log_first_seq: recovery.first_seq,
        log_last_seq: recovery.last_seq,
        missing_count: missing.iter().map(|range| range.to - range.from + 1).sum(),
        missing_ranges: missing.len() as u64,
        missing,
        quarantined: fresh
            .iter()
            .take(MAX_LISTED_QUARANTINED)
            .map(|line| QuarantinedLine {
                segment: line.segment.clone(),
                offset: line.offset,
                line: line.line_number as u64,
                bytes: line.bytes,
                reason: line.fault.as_str().to_string(),
                seq: line.claimed_seq,
            })
            .collect(),
        quarantined_count: fresh.len() as u64,
        quarantine_file: quarantine_file.display().to_string(),
        notes,
    })
}

/// What `cohost log verify` found in a home.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub home: PathBuf,
    /// A daemon holds the home's lock: its last line may be a write in progress.
    pub daemon_running: bool,
    /// The snapshot's seq (0: none or unusable).
    pub snapshot_seq: u64,
    pub segments: usize,
    pub events: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// A last line without its newline: a write a crash interrupted (or one in progress).
    pub torn_bytes: u64,
    /// Seqs missing that a `log.damaged` event already reported.
    pub known_missing: Vec<SeqRange>,
    pub damage: Option<LogDamage>,
}

/// Checks the log and snapshot of `home` without changing them (the start-up scan, read-only).
pub fn verify(home: &std::path::Path) -> anyhow::Result<Verification> {
    use anyhow::Context as _;
    let mut notes = Vec::new();
    format::check_home(home)?;
    let snapshot_seq = match Snapshot::load(home)? {
        snapshot::Loaded::Newer { schema } => anyhow::bail!(
            "the snapshot has format {schema}, written by a newer cohost; this cohost {} reads up to {}",
            env!("CARGO_PKG_VERSION"),
            format::SNAPSHOT_FORMAT
        ),
        snapshot::Loaded::Found(snapshot) => snapshot.seq,
        snapshot::Loaded::Missing => 0,
        snapshot::Loaded::Unusable { reason, damaged } => {
            if damaged {
                notes.push(format!(
                    "{reason}; the next start rebuilds the state from the log alone"
                ));
            }
            0
        }
    };
    let dir = home.join("log");
    let recovery = event_log::scan(&dir, &home.join("quarantine.jsonl"))
        .with_context(|| format!("failed to read the event log in {}", dir.display()))?;
    let daemon_running = home_lock::home_is_locked(home);
    let damage = damage_report(
        &recovery,
        snapshot_seq,
        &home.join("quarantine.jsonl"),
        notes,
    );
    Ok(Verification {
        home: home.to_path_buf(),
        daemon_running,
        snapshot_seq,
        segments: recovery.segments,
        events: recovery.n_lines,
        first_seq: recovery.first_seq,
        last_seq: recovery.last_seq,
        torn_bytes: recovery.truncated_bytes,
        known_missing: recovery.known_missing,
        damage,
    })
}

impl Verification {
    /// The report for a person.
    pub fn render(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "home: {}", self.home.display())?;
        if self.daemon_running {
            writeln!(
                out,
                "a daemon is running on this home: its last line may be in progress"
            )?;
        }
        match self.snapshot_seq {
            0 => writeln!(out, "snapshot: none")?,
            seq => writeln!(out, "snapshot: at seq {seq}")?,
        }
        writeln!(
            out,
            "log: {} segment(s), {} event(s), seq {}..={}",
            self.segments, self.events, self.first_seq, self.last_seq
        )?;
        if self.torn_bytes > 0 {
            writeln!(
                out,
                "torn last line: {} bytes (a write that did not complete; cut at the next start)",
                self.torn_bytes
            )?;
        }
        for range in &self.known_missing {
            writeln!(
                out,
                "known gap: {}..={} (already reported by a log.damaged event)",
                range.from, range.to
            )?;
        }
        let Some(damage) = &self.damage else {
            return writeln!(out, "ok: no damage found");
        };
        writeln!(
            out,
            "DAMAGED: {} event(s) missing, {} line(s) to quarantine",
            damage.missing_count, damage.quarantined_count
        )?;
        for range in &damage.missing {
            writeln!(
                out,
                "  missing {}..={}{}",
                range.from,
                range.to,
                if range.in_snapshot {
                    " (the snapshot still reflects them)"
                } else {
                    " (not in the snapshot either)"
                }
            )?;
        }
        for line in &damage.quarantined {
            let seq = line
                .seq
                .map(|seq| format!(", seq {seq}"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}: line {} at byte {} ({} bytes{seq}): {}",
                line.segment, line.line, line.offset, line.bytes, line.reason
            )?;
        }
        for note in &damage.notes {
            writeln!(out, "  {note}")?;
        }
        Ok(())
    }
}

/// Splits a damage report into the `log.damaged` event (the first [`MAX_LISTED_MISSING`]
/// ranges) and the ranges it counts but does not list, which go to the quarantine file.
pub(super) fn for_event(damage: &LogDamage) -> (LogDamage, Vec<SeqRange>) {
    let mut event = damage.clone();
    let unlisted = event
        .missing
        .split_off(MAX_LISTED_MISSING.min(event.missing.len()))
        .into_iter()
        .map(|range| SeqRange {
            from: range.from,
            to: range.to,
        })
        .collect();
    (event, unlisted)
}

/// Logs a damage report as one line: the totals, the first few missing ranges (every range is
/// in the `log.damaged` event or the quarantine file), the quarantined lines in words
/// (`quarantined`, from the scan) and the notes. One warning per line or range buried the
/// output when thousands of scattered lines were damaged; three kinds of warning were still
/// three lines.
pub(super) fn log_damage(damage: &LogDamage, quarantined: Option<&str>) {
    const LISTED: usize = 5;
    let mut parts = Vec::new();
    if !damage.missing.is_empty() {
        let in_snapshot = damage.missing.iter().filter(|r| r.in_snapshot).count();
        let mut listed: Vec<String> = damage
            .missing
            .iter()
            .take(LISTED)
            .map(|r| format!("{}..={}", r.from, r.to))
            .collect();
        if damage.missing.len() > LISTED {
            listed.push(format!("and {} more", damage.missing.len() - LISTED));
        }
        parts.push(format!(
            "missing seqs {} ({in_snapshot} of {} range(s) still reflected by the snapshot, the others missing from the state too)",
            listed.join(", "),
            damage.missing.len(),
        ));
    }
    parts.extend(quarantined.map(str::to_string));
    parts.extend(damage.notes.iter().cloned());
    tracing::error!(
        missing = damage.missing_count,
        ranges = damage.missing.len(),
        quarantined = damage.quarantined_count,
        snapshot = damage.snapshot_seq,
        log_first = damage.log_first_seq,
        log_last = damage.log_last_seq,
        quarantine_file = %damage.quarantine_file,
        "the event log is damaged: {} event(s) missing, {} line(s) quarantined (see the log.damaged event): {}",
        damage.missing_count,
        damage.quarantined_count,
        parts.join("; "),
    );
}
