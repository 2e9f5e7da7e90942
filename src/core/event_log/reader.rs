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
        let (Some(&first), Some(&last)) = (seqs.first(), seqs.last()) else {
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
            let file = File::open(&segment.path).map_err(|source| ReadError::Io {
                path: segment.path.clone(),
                source,
            })?;
            let mut reader = BufReader::new(file);
            let mut line = Vec::new();
            let mut offset = 0u64;
            loop {
                line.clear();
                let n = reader
                    .read_until(b'\n', &mut line)
                    .map_err(|source| ReadError::Io {
                        path: segment.path.clone(),
                        source,
                    })?;
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                let at = offset;
                offset += n as u64;
                if segment.skip.binary_search(&at).is_ok() {
                    continue;
                }
                let bytes = &line[..n - 1];
                let Some(seq) = log_line::claimed_seq(bytes) else {
                    continue;
                };
                // Seqs passed without a line of theirs are gone.
                while wanted.next_if(|wanted| *wanted < seq).is_some() {}
                if wanted.next_if_eq(&seq).is_none() {
                    if wanted.peek().is_none() || seq >= last {
                        return Ok(out);
                    }
                    continue;
                }
                match log_line::decode(bytes) {
                    Ok(parsed) => out.push(parsed),
                    Err(fault) => tracing::warn!(
                        path = %segment.path.display(),
                        offset = at,
                        reason = fault.as_str(),
                        "skipped a damaged event log line"
                    ),
                }
                if wanted.peek().is_none() {
                    return Ok(out);
                }
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
            let file = File::open(&segment.path).map_err(|source| ReadError::Io {
                path: segment.path.clone(),
                source,
            })?;
            let mut reader = BufReader::new(file);
            let mut line = Vec::new();
            let mut offset = 0u64;
            loop {
                line.clear();
                let n = reader
                    .read_until(b'\n', &mut line)
                    .map_err(|source| ReadError::Io {
                        path: segment.path.clone(),
                        source,
                    })?;
                // A line without its newline is still being written.
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
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
                if seq <= after {
                    continue;
                }
                if until.is_some_and(|until| seq >= until) || out.len() >= limit {
                    return Ok(out);
                }
                match log_line::decode(bytes) {
                    Ok(parsed) => out.push(parsed),
                    // Start-up quarantined every bad line; this one was damaged since. It is
                    // skipped (a gap to readers), never served.
                    Err(fault) => tracing::warn!(
                        path = %segment.path.display(),
                        offset = at,
                        reason = fault.as_str(),
                        "skipped a damaged event log line"
                    ),
                }
            }
        }
        Ok(out)
    }
}
