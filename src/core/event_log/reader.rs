//! Reading the log from other threads: pages after a cursor, and a session's events by their
//! seqs, from the segment files the writer shares.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::sync::{Arc, RwLock};

use super::{LogLine, ReadError, Segment, log_line};

/// Reads the log from another thread; clones share the segment list with the writer.
#[derive(Clone)]
pub struct LogReader {
    pub(super) segments: Arc<RwLock<Vec<Segment>>>,
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

    /// The complete lines of `seqs` (ascending), in order, read in one pass from the segment
    /// holding the first; a seq with no readable line (retention, damage) is left out.
    /// Blocking: call it from `spawn_blocking`.
    pub fn read_seqs(&self, seqs: &[u64]) -> Result<Vec<LogLine>, ReadError> {
        match self.read_seqs_once(seqs) {
            Err(ReadError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                self.read_seqs_once(seqs)
            }
            other => other,
        }
    }

    fn read_seqs_once(&self, seqs: &[u64]) -> Result<Vec<LogLine>, ReadError> {
        let Some(&first) = seqs.first() else {
            return Ok(Vec::new());
        };
        let segments = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let start = segments
            .iter()
            .rposition(|segment| segment.first_seq <= first)
            .unwrap_or(0);
        let mut out = Vec::with_capacity(seqs.len());
        let mut wanted = seqs.iter().copied().peekable();
        for (index, segment) in segments.iter().enumerate().skip(start) {
            // Skip a segment that holds none of the seqs still wanted.
            let next_first = segments.get(index + 1).map(|next| next.first_seq);
            while wanted.next_if(|seq| *seq < segment.first_seq).is_some() {}
            match wanted.peek() {
                None => break,
                Some(seq) if next_first.is_some_and(|next| *seq >= next) => continue,
                Some(_) => {}
            }
            let go_on = walk(segment, &mut out, |seq, _| {
                // Seqs passed without a line of theirs are gone.
                while wanted.next_if(|wanted| *wanted < seq).is_some() {}
                match (wanted.next_if_eq(&seq), wanted.peek()) {
                    (Some(_), None) => Step::TakeLast,
                    (Some(_), Some(_)) => Step::Take,
                    (None, None) => Step::Stop,
                    (None, Some(_)) => Step::Skip,
                }
            })?;
            if !go_on {
                break;
            }
        }
        Ok(out)
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
            let go_on = walk(segment, &mut out, |seq, taken| {
                if seq <= after {
                    Step::Skip
                } else if until.is_some_and(|until| seq >= until) || taken >= limit {
                    Step::Stop
                } else {
                    Step::Take
                }
            })?;
            if !go_on {
                break;
            }
        }
        Ok(out)
    }
}

/// What a read does with one line of a segment, by its seq.
enum Step {
    Skip,
    Take,
    /// Take it, and read no further.
    TakeLast,
    Stop,
}

/// Reads the complete lines of `segment` in order, asks `decide(seq, lines taken so far)` about
/// each, and decodes the ones taken into `out`. Lines a deferred repair left in the segment and
/// lines with no readable seq are passed over; a line without its newline is still being
/// written and ends the segment. Returns whether the read goes on to the next segment.
fn walk(
    segment: &Segment,
    out: &mut Vec<LogLine>,
    mut decide: impl FnMut(u64, usize) -> Step,
) -> Result<bool, ReadError> {
    let io_error = |source| ReadError::Io {
        path: segment.path.clone(),
        source,
    };
    // Up to where the segment's lines ended when the list was read: past them, the active
    // segment's file holds lines being written and the zeros written ahead of them.
    let mut reader = BufReader::new(io::Read::take(
        File::open(&segment.path).map_err(io_error)?,
        segment.bytes,
    ));
    let mut line = Vec::new();
    let mut offset = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io_error)?;
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(true);
        }
        let at = offset;
        offset += n as u64;
        if segment.skip.binary_search(&at).is_ok() {
            // Quarantined at start-up; the segment could not be rewritten without it.
            continue;
        }
        let bytes = &line[..n - 1];
        let Some(seq) = log_line::claimed_seq(bytes) else {
            continue;
        };
        let last = match decide(seq, out.len()) {
            Step::Skip => continue,
            Step::Stop => return Ok(false),
            Step::Take => false,
            Step::TakeLast => true,
        };
        match log_line::decode(bytes) {
            Ok(parsed) => out.push(parsed),
            // Start-up quarantined every bad line; this one was damaged since. It is skipped
            // (a gap to readers), never served.
            Err(fault) => tracing::warn!(
                path = %segment.path.display(),
                offset = at,
                reason = fault.as_str(),
                "skipped a damaged event log line"
            ),
        }
        if last {
            return Ok(false);
        }
    }
}
