//! One line of the event log: its format, its checksum, and the scan that sorts the bytes of a
//! segment into lines to keep and lines to quarantine.
//!
//! A line is an event's JSON with a CRC-32 of that JSON spliced in as its last field:
//! `{"seq":7,"ts":…,"type":"…","data":{…},"crc":"1c291ca3"}`. It still starts with `{"seq":`,
//! so a reader finds a line's seq without parsing it, and readers strip the field again: the
//! JSON served to clients is exactly the JSON that was checksummed. Lines written before
//! checksums existed have no `crc` field; they are read as they are ("legacy" lines), with no
//! way to tell a changed byte inside them.
//!
//! This module is the only one that knows the line format ([`encode`] for the writer, [`decode`]
//! for every reader). It is pure: `event_log` reads, rewrites and quarantines the files.

use std::ops::Range;

use serde::Deserialize;

use super::event_log::LogLine;

/// The largest seq a line may carry: the largest integer a JSON client (a JavaScript double)
/// reads exactly. A line claiming more is damage, and it cannot push the counter past it.
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// `,"crc":"` + 8 hex digits + `"}`: what [`encode`] puts in place of the final `}`.
const CRC_SUFFIX_LEN: usize = 18;
const CRC_KEY: &[u8] = b",\"crc\":\"";
/// What every line starts with; also where a line merged with its neighbour is split again.
const LINE_START: &[u8] = b"{\"seq\":";

/// Appends the stored form of `json` (one serialized event, `{…}`) and its newline to `out`.
pub fn encode(json: &str, out: &mut Vec<u8>) {
    let crc = crc32fast::hash(json.as_bytes());
    let body = json.strip_suffix('}').unwrap_or(json);
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(format!(",\"crc\":\"{crc:08x}\"}}\n").as_bytes());
}

/// Why a line is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFault {
    /// Not UTF-8, not JSON, or no numeric `seq`.
    Unreadable,
    /// The line has a checksum and its bytes do not match it.
    ChecksumMismatch,
    /// The seq is not above the previous kept line's.
    SeqNotIncreasing,
    /// The seq jumps ahead while the next line follows the previous one: this line's seq is
    /// the damaged one (a changed digit), not a gap.
    SeqAheadOfNext,
    /// The seq is at or past the first seq of the next segment.
    SeqOutsideSegment,
    /// The seq is above [`MAX_SEQ`].
    SeqTooLarge,
    /// The last line of a closed segment has no newline: the segment was cut.
    Truncated,
    /// The byte where a damaged newline was, between two lines that are both kept.
    StrayByte,
    /// A line without a checksum after one with a checksum: only lines older than checksums
    /// may lack one, so this one lost its checksum (and, perhaps, more).
    MissingChecksum,
}

impl LineFault {
    /// The `reason` written to the quarantine file and the `log.damaged` event.
    pub fn as_str(self) -> &'static str {
        match self {
            LineFault::Unreadable => "unreadable",
            LineFault::ChecksumMismatch => "checksum_mismatch",
            LineFault::SeqNotIncreasing => "seq_not_increasing",
            LineFault::SeqAheadOfNext => "seq_ahead_of_next_line",
            LineFault::SeqOutsideSegment => "seq_outside_segment",
            LineFault::SeqTooLarge => "seq_too_large",
            LineFault::Truncated => "truncated",
            LineFault::StrayByte => "stray_byte",
            LineFault::MissingChecksum => "missing_checksum",
        }
    }

    /// Whether the line may have held the event of a seq that is now missing (its own seq is
    /// unknown or untrusted), as opposed to a line whose seq was already used.
    pub fn may_hide_a_seq(self) -> bool {
        matches!(
            self,
            LineFault::Unreadable
                | LineFault::ChecksumMismatch
                | LineFault::SeqTooLarge
                | LineFault::Truncated
                | LineFault::MissingChecksum
        )
    }
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

/// The seq a line claims, read from its `{"seq":N,` prefix without parsing the rest.
pub fn claimed_seq(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(LINE_START)?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// The session a line names, read from its `{"seq":N,"ts":N,"session":"…"` prefix without
/// parsing the rest (the order [`Event`](crate::protocol::Event) serializes its fields in).
/// `None` for a daemon-wide event or a line of another shape.
pub fn claimed_session(line: &[u8]) -> Option<String> {
    let rest = line.strip_prefix(LINE_START)?;
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_digit())?..];
    let rest = rest.strip_prefix(b",\"ts\":")?;
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_digit())?..];
    let rest = rest.strip_prefix(b",\"session\":")?;
    serde_json::Deserializer::from_slice(rest)
        .into_iter::<String>()
        .next()?
        .ok()
}

/// Reads one line (without its newline): checks its checksum when it has one, and returns the
/// event's JSON as clients get it, with its routing fields.
pub fn decode(line: &[u8]) -> Result<LogLine, LineFault> {
    let json = match checksummed_body(line) {
        Some((body, expected)) => {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(body);
            hasher.update(b"}");
            if hasher.finalize() != expected {
                return Err(LineFault::ChecksumMismatch);
            }
            let mut json = std::str::from_utf8(body)
                .map_err(|_| LineFault::Unreadable)?
                .to_string();
            json.push('}');
            json
        }
        // An event's JSON ends with its `data` object: `}}`. A line ending in `"}` had a
        // checksum field, damaged beyond reading.
        None if line.ends_with(b"\"}") => return Err(LineFault::ChecksumMismatch),
        None => std::str::from_utf8(line)
            .map_err(|_| LineFault::Unreadable)?
            .to_string(),
    };
    if !json.as_bytes().starts_with(LINE_START) {
        return Err(LineFault::Unreadable);
    }
    let head: LineHead = serde_json::from_str(&json).map_err(|_| LineFault::Unreadable)?;
    Ok(LogLine {
        seq: head.seq,
        session: head.session,
        session_seq: head.session_seq,
        json,
    })
}

/// Checks one line (without its newline) as [`decode`] does and returns its seq, without
/// building the event's JSON: a line whose checksum holds is what the writer serialized, so
/// only a legacy line is parsed.
pub fn check(line: &[u8]) -> Result<u64, LineFault> {
    match checksummed_body(line) {
        Some((body, expected)) => {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(body);
            hasher.update(b"}");
            if hasher.finalize() != expected {
                return Err(LineFault::ChecksumMismatch);
            }
            claimed_seq(body).ok_or(LineFault::Unreadable)
        }
        None if line.ends_with(b"\"}") => Err(LineFault::ChecksumMismatch),
        None if !line.starts_with(LINE_START) || std::str::from_utf8(line).is_err() => {
            Err(LineFault::Unreadable)
        }
        None => serde_json::from_slice::<LineHead>(line)
            .map(|head| head.seq)
            .map_err(|_| LineFault::Unreadable),
    }
}

/// `(the line without its crc suffix, the crc)` when the line ends with a well-formed suffix.
fn checksummed_body(line: &[u8]) -> Option<(&[u8], u32)> {
    let split = line.len().checked_sub(CRC_SUFFIX_LEN)?;
    let (body, suffix) = line.split_at(split);
    let hex = suffix.strip_prefix(CRC_KEY)?.strip_suffix(b"\"}")?;
    if !hex
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let crc = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
    Some((body, crc))
}

/// A line kept by [`scan_segment`]: its bytes in the segment (without the newline) and its
/// seq; [`decode`] them for the event.
#[derive(Debug)]
pub struct KeptLine {
    pub range: Range<usize>,
    pub seq: u64,
}

/// Bytes of a segment that are not kept: a whole line or what is left of one.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// The bytes in the segment (without the newline).
    pub range: Range<usize>,
    /// 1-based number of the line in the segment as it was found.
    pub line_number: usize,
    pub fault: LineFault,
    /// The seq its prefix claims, if any (it may be the damaged part).
    pub claimed_seq: Option<u64>,
}

/// What [`scan_segment`] found.
#[derive(Debug, Default)]
pub struct SegmentScan {
    /// The lines to keep, in order; their seqs increase strictly, also across segments.
    pub kept: Vec<KeptLine>,
    /// Everything else, in order of position.
    pub bad: Vec<BadLine>,
    /// A last line without its newline, left out of `kept` and `bad`: in the last segment it is
    /// a write a crash interrupted (never acknowledged); the caller decides.
    pub torn: Option<Range<usize>>,
    /// The last kept line had no newline (a complete line whose newline was lost): the
    /// segment must be rewritten to end with one.
    pub unterminated: bool,
}

/// What a scan carries from one segment to the next.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanState {
    /// The seq of the last kept line (0: none yet).
    pub previous: u64,
    /// A line with a checksum was kept: every later line must have one too.
    pub checksummed: bool,
}

/// A line that checked out, waiting for its seq to be checked against its neighbours.
struct Candidate {
    range: Range<usize>,
    line_number: usize,
    seq: u64,
    /// It carries a checksum (that held).
    checksummed: bool,
}

/// Sorts `bytes` (one segment) into kept and bad lines. `limit` is the first seq of the next
/// segment (every seq of this one is below it), `None` for the last segment.
///
/// A line is kept when it decodes ([`decode`]) and its seq is above the previous kept one,
/// below `limit` and at most [`MAX_SEQ`]. When a seq jumps ahead, the next line decides: if it
/// follows the previous kept line, the jump is a damaged seq and this line is bad; otherwise
/// the seqs in between are missing (a gap). A line that does not decode but contains
/// `{"seq":` further on (two lines merged by a damaged newline) is split there, and every piece
/// that decodes is kept. So one damaged line never costs the valid lines after it.
pub fn scan_segment(bytes: &[u8], limit: Option<u64>, state: &mut ScanState) -> SegmentScan {
    let mut scan = SegmentScan::default();
    let mut candidates = Vec::new();
    let mut start = 0;
    let mut line_number = 0;
    while start < bytes.len() {
        let Some(length) = memchr::memchr(b'\n', &bytes[start..]) else {
            // A complete line whose newline was lost or damaged is kept (its checksum proves
            // it whole); anything else is torn.
            let tail = start..bytes.len();
            let end = [tail.end, tail.end - 1]
                .into_iter()
                .filter(|&end| end > start)
                .find_map(|end| check(&bytes[start..end]).ok().map(|seq| (end, seq)));
            match end {
                Some((end, seq)) => {
                    candidates.push(Candidate {
                        checksummed: checksummed_body(&bytes[start..end]).is_some(),
                        range: start..end,
                        line_number: line_number + 1,
                        seq,
                    });
                    scan.unterminated = true;
                    if end < tail.end {
                        scan.bad.push(bad_piece(
                            bytes,
                            end..tail.end,
                            line_number + 1,
                            LineFault::StrayByte,
                        ));
                    }
                }
                None => scan.torn = Some(tail),
            }
            break;
        };
        line_number += 1;
        let range = start..start + length;
        start += length + 1;
        match check(&bytes[range.clone()]) {
            Ok(seq) => candidates.push(Candidate {
                checksummed: checksummed_body(&bytes[range.clone()]).is_some(),
                range,
                line_number,
                seq,
            }),
            Err(fault) => {
                split_merged(bytes, range, line_number, fault, &mut candidates, &mut scan)
            }
        }
    }
    let mut candidates = candidates.into_iter().peekable();
    while let Some(candidate) = candidates.next() {
        let seq = candidate.seq;
        let previous = state.previous;
        let fault = if !candidate.checksummed && state.checksummed {
            Some(LineFault::MissingChecksum)
        } else if seq > MAX_SEQ {
            Some(LineFault::SeqTooLarge)
        } else if limit.is_some_and(|limit| seq >= limit) {
            Some(LineFault::SeqOutsideSegment)
        } else if seq <= previous {
            Some(LineFault::SeqNotIncreasing)
        } else if seq > previous + 1
            && candidates
                .peek()
                .is_some_and(|next| next.seq > previous && next.seq < seq)
        {
            Some(LineFault::SeqAheadOfNext)
        } else {
            None
        };
        match fault {
            Some(fault) => scan.bad.push(BadLine {
                claimed_seq: Some(seq),
                range: candidate.range,
                line_number: candidate.line_number,
                fault,
            }),
            None => {
                state.previous = seq;
                state.checksummed |= candidate.checksummed;
                scan.kept.push(KeptLine {
                    range: candidate.range,
                    seq,
                });
            }
        }
    }
    scan.bad.sort_by_key(|bad| bad.range.start);
    scan
}

/// A line that did not decode: if it holds more than one `{"seq":`, it may be lines merged by a
/// damaged newline. Each piece that decodes (as it is, or without its last byte, which then was
/// the newline) becomes a candidate; the rest is bad.
fn split_merged(
    bytes: &[u8],
    range: Range<usize>,
    line_number: usize,
    fault: LineFault,
    candidates: &mut Vec<Candidate>,
    scan: &mut SegmentScan,
) {
    let line = &bytes[range.clone()];
    let mut starts: Vec<usize> = memchr::memmem::find_iter(line, LINE_START)
        .filter(|&at| at > 0)
        .map(|at| range.start + at)
        .collect();
    if starts.is_empty() {
        scan.bad.push(BadLine {
            claimed_seq: claimed_seq(line),
            range,
            line_number,
            fault,
        });
        return;
    }
    starts.insert(0, range.start);
    starts.push(range.end);
    let mut bad_from = None;
    for piece in starts.windows(2) {
        let (from, to) = (piece[0], piece[1]);
        let whole = check(&bytes[from..to]).map(|seq| (seq, to));
        let checked = whole.or_else(|fault| {
            if to > from + 1 && to < range.end {
                check(&bytes[from..to - 1]).map(|seq| (seq, to - 1))
            } else {
                Err(fault)
            }
        });
        match checked {
            Ok((seq, end)) => {
                if let Some(bad_start) = bad_from.take() {
                    scan.bad
                        .push(bad_piece(bytes, bad_start..from, line_number, fault));
                }
                candidates.push(Candidate {
                    checksummed: checksummed_body(&bytes[from..end]).is_some(),
                    range: from..end,
                    line_number,
                    seq,
                });
                if end < to {
                    // The stray byte where the newline was.
                    scan.bad
                        .push(bad_piece(bytes, end..to, line_number, LineFault::StrayByte));
                }
            }
            Err(_) => {
                bad_from.get_or_insert(from);
            }
        }
    }
    if let Some(bad_start) = bad_from {
        scan.bad
            .push(bad_piece(bytes, bad_start..range.end, line_number, fault));
    }
}

fn bad_piece(bytes: &[u8], range: Range<usize>, line_number: usize, fault: LineFault) -> BadLine {
    BadLine {
        claimed_seq: claimed_seq(&bytes[range.clone()]),
        range,
        line_number,
        fault,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_is_read_from_the_prefix() {
        let check = |line: &str, expect: Option<&str>| {
            assert_eq!(
                claimed_session(line.as_bytes()).as_deref(),
                expect,
                "{line}"
            );
        };
        check(&event(7), Some("s"));
        check(
            r#"{"seq":1,"ts":2,"session":"a \"b\" \u00e9","type":"x","data":{}}"#,
            Some("a \"b\" é"),
        );
        check(
            r#"{"seq":1,"ts":2,"type":"daemon.started","data":{}}"#,
            None,
        );
        check(r#"{"seq":1,"ts":2,"session":"cut"#, None);
        check(r#"{"ts":2,"session":"s","seq":1}"#, None);
        let mut encoded = Vec::new();
        encode(&event(9), &mut encoded);
        check(std::str::from_utf8(&encoded).unwrap(), Some("s"));
    }

    fn event(seq: u64) -> String {
        format!(
            "{{\"seq\":{seq},\"ts\":5,\"session\":\"s\",\"sessionSeq\":{seq},\"type\":\"meta.log\",\"data\":{{\"message\":\"m{seq}\"}}}}"
        )
    }

    fn encoded(seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
        let mut out = Vec::new();
        for seq in seqs {
            encode(&event(seq), &mut out);
        }
        out
    }

    fn kept(scan: &SegmentScan) -> Vec<u64> {
        scan.kept.iter().map(|kept| kept.seq).collect()
    }

    #[test]
    fn encode_keeps_the_prefix_and_decode_returns_the_json() {
        let mut out = Vec::new();
        encode(&event(7), &mut out);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.starts_with("{\"seq\":7,"), "{text}");
        assert!(text.ends_with("\"}\n"), "{text}");
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        assert!(value["crc"].as_str().unwrap().len() == 8, "{value}");
        let line = decode(&out[..out.len() - 1]).unwrap();
        assert_eq!(line.json, event(7));
        assert_eq!(line.seq, 7);
        assert_eq!(line.session.as_deref(), Some("s"));
        assert_eq!(line.session_seq, Some(7));
        assert_eq!(claimed_seq(&out), Some(7));
    }

    #[test]
    fn legacy_lines_without_a_checksum_are_read_as_they_are() {
        let line = decode(event(3).as_bytes()).unwrap();
        assert_eq!(line.json, event(3));
        assert_eq!(line.seq, 3);
    }

    // See: issue 21, item 8 — "a line without its checksum is accepted inside a checksummed
    // log (remove the suffix and change a byte: `log verify` passes)".
    #[test]
    fn a_line_without_a_checksum_after_checksummed_ones_is_damage() {
        // Legacy lines first, then checksummed ones: a log written before and after the
        // upgrade. All kept.
        let mut bytes = Vec::new();
        for seq in 1..=2 {
            bytes.extend_from_slice(event(seq).as_bytes());
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&encoded(3..=4));
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 3, 4]);
        assert!(scan.bad.is_empty(), "{:?}", scan.bad);

        // A checksummed line whose suffix was removed and a byte changed reads like a legacy
        // line: after checksummed lines it is refused (as is one in a later segment).
        let mut bytes = encoded(1..=2);
        bytes.extend_from_slice(event(3).replace("m3", "M3").as_bytes());
        bytes.push(b'\n');
        bytes.extend_from_slice(&encoded(4..=4));
        let mut state = ScanState::default();
        let scan = scan_segment(&bytes, Some(5), &mut state);
        assert_eq!(kept(&scan), [1, 2, 4]);
        assert_eq!(scan.bad.len(), 1);
        assert_eq!(scan.bad[0].fault, LineFault::MissingChecksum);
        assert_eq!(scan.bad[0].claimed_seq, Some(3));
        let next = format!("{}\n", event(5));
        let scan = scan_segment(next.as_bytes(), None, &mut state);
        assert!(scan.kept.is_empty());
        assert_eq!(scan.bad[0].fault, LineFault::MissingChecksum);
    }

    #[test]
    fn every_single_byte_change_of_a_checksummed_line_is_detected() {
        let mut out = Vec::new();
        encode(&event(12), &mut out);
        let line = &out[..out.len() - 1];
        for at in 0..line.len() {
            for mask in 1..=255u8 {
                let mut damaged = line.to_vec();
                damaged[at] ^= mask;
                assert!(
                    decode(&damaged).is_err(),
                    "byte {at} ^ {mask:#x} went unnoticed: {:?}",
                    String::from_utf8_lossy(&damaged)
                );
            }
        }
    }

    #[test]
    fn a_damaged_line_is_bad_and_its_neighbours_are_kept() {
        let mut bytes = encoded(1..=5);
        let third = bytes.len() / 5 * 2 + 30;
        bytes[third] ^= 0x20;
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 4, 5]);
        assert_eq!(scan.bad.len(), 1);
        assert_eq!(scan.bad[0].fault, LineFault::ChecksumMismatch);
        assert_eq!(scan.bad[0].line_number, 3);
    }

    // See: issue 15, defect 2 — one changed digit in a seq dropped the next 9 valid events.
    #[test]
    fn r15_a_changed_digit_in_a_legacy_seq_costs_only_that_line() {
        let mut text = String::new();
        for seq in 1..=20 {
            let seq_text = if seq == 11 { 91 } else { seq };
            text.push_str(&event(seq_text));
            text.push('\n');
        }
        let scan = scan_segment(text.as_bytes(), None, &mut ScanState::default());
        let expected: Vec<u64> = (1..=20).filter(|seq| *seq != 11).collect();
        assert_eq!(kept(&scan), expected);
        assert_eq!(scan.bad.len(), 1);
        assert_eq!(scan.bad[0].fault, LineFault::SeqAheadOfNext);
        assert_eq!(scan.bad[0].claimed_seq, Some(91));
        // A digit that makes the seq smaller.
        let text = text.replace("{\"seq\":91,", "{\"seq\":1,");
        let scan = scan_segment(text.as_bytes(), None, &mut ScanState::default());
        assert_eq!(kept(&scan), expected);
        assert_eq!(scan.bad[0].fault, LineFault::SeqNotIncreasing);
    }

    #[test]
    fn a_far_ahead_seq_with_nothing_after_it_is_a_gap() {
        let mut bytes = encoded(1..=3);
        encode(&event(1_000_000), &mut bytes);
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 3, 1_000_000]);
        // In a closed segment it cannot be past the next segment's first seq.
        let scan = scan_segment(&bytes, Some(4), &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 3]);
        assert_eq!(scan.bad[0].fault, LineFault::SeqOutsideSegment);
        // Nor past what a client can read.
        let mut bytes = encoded(1..=1);
        encode(&event(MAX_SEQ + 1), &mut bytes);
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1]);
        assert_eq!(scan.bad[0].fault, LineFault::SeqTooLarge);
    }

    #[test]
    fn lines_merged_by_a_damaged_newline_are_split_again() {
        let mut bytes = encoded(1..=3);
        let first_newline = bytes.iter().position(|b| *b == b'\n').unwrap();
        bytes[first_newline] = b'x';
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 3]);
        assert_eq!(scan.bad.len(), 1, "{:?}", scan.bad);
        assert_eq!(scan.bad[0].range, first_newline..first_newline + 1);
        // A newline lost in legacy lines.
        let text = format!("{}{}\n{}\n", event(1), event(2), event(3));
        let scan = scan_segment(text.as_bytes(), None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2, 3]);
        assert!(scan.bad.is_empty());
    }

    #[test]
    fn a_complete_last_line_without_its_newline_is_kept() {
        let mut bytes = encoded(1..=2);
        bytes.pop();
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2]);
        assert!(scan.unterminated && scan.torn.is_none() && scan.bad.is_empty());
        // Its newline damaged into another byte.
        bytes.push(b'*');
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2]);
        assert_eq!(scan.bad.len(), 1);
        assert_eq!(scan.bad[0].range, bytes.len() - 1..bytes.len());
    }

    #[test]
    fn a_last_line_without_newline_is_torn() {
        let mut bytes = encoded(1..=2);
        let full = bytes.len();
        bytes.extend_from_slice(b"{\"seq\":3,\"ts\"");
        let scan = scan_segment(&bytes, None, &mut ScanState::default());
        assert_eq!(kept(&scan), [1, 2]);
        assert_eq!(scan.torn, Some(full..bytes.len()));
    }

    #[test]
    fn the_order_carries_across_segments() {
        let mut state = ScanState::default();
        let scan = scan_segment(&encoded(1..=3), Some(4), &mut state);
        assert_eq!(kept(&scan), [1, 2, 3]);
        let scan = scan_segment(&encoded([2, 4, 5]), None, &mut state);
        assert_eq!(kept(&scan), [4, 5]);
        assert_eq!(scan.bad[0].fault, LineFault::SeqNotIncreasing);
    }
}
