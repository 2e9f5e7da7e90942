//! The line buffer of one followed lines file, and the plan of its bounded first read: bytes
//! read at an offset go in, complete lines come out with the offset they start at, and the bytes
//! after the last newline wait for the rest of their line.
//!
//! Pure: no I/O, no clock. The engine's reading (`reading.rs`) opens, seeks and reads, and hands
//! each chunk here; the checkpoint keeps [`LineReader::resume_offset`].

/// A line longer than this is skipped to its newline: far beyond any record observed.
pub(super) const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Where a lines file is read from, and what of its last line is held back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LineReader {
    /// Bytes read so far (including `partial`).
    pub(super) offset: u64,
    /// The bytes after the last newline read.
    partial: Vec<u8>,
    /// Skipping a line up to its newline: the tail of a bounded read starts mid-line, and an
    /// overlong line is dropped.
    skipping: bool,
}

impl LineReader {
    /// Reads from `offset`, the start of a line.
    pub(super) fn at(offset: u64) -> LineReader {
        LineReader {
            offset,
            ..LineReader::default()
        }
    }

    /// Reads from `offset`, somewhere in a line: the bytes up to the next newline are skipped.
    pub(super) fn mid_line(offset: u64) -> LineReader {
        LineReader {
            offset,
            partial: Vec::new(),
            skipping: true,
        }
    }

    /// Forgets the held-back partial line (the file is read again from elsewhere).
    pub(super) fn drop_partial(&mut self) {
        self.partial.clear();
    }

    /// Resumes a file of `size` bytes from its checkpoint's `saved` offset; `None` when the file
    /// is shorter than that (not the file the checkpoint knew). A file that grew by more than
    /// `tail_bytes` while the daemon was down is read from its tail only.
    pub(super) fn resume(saved: u64, size: u64, tail_bytes: u64) -> Option<LineReader> {
        if saved > size {
            return None;
        }
        if size - saved > tail_bytes {
            return Some(LineReader::mid_line(size - tail_bytes));
        }
        Some(LineReader::at(saved))
    }

    /// The offset a restart resumes from: after the last complete line (a held-back partial
    /// line is read again), or where the skipping stands.
    pub(super) fn resume_offset(&self) -> u64 {
        if self.skipping {
            self.offset
        } else {
            self.offset.saturating_sub(self.partial.len() as u64)
        }
    }

    /// Takes `data`, the bytes read at [`LineReader::offset`], and calls `line` with every line
    /// it completes (without its newline) and the offset that line starts at. Returns whether a
    /// line longer than [`MAX_LINE_BYTES`] was dropped.
    pub(super) fn feed(&mut self, data: &[u8], line: impl FnMut(u64, &[u8])) -> bool {
        self.feed_bounded(data, MAX_LINE_BYTES, line)
    }

    fn feed_bounded(
        &mut self,
        data: &[u8],
        max_line: usize,
        mut line: impl FnMut(u64, &[u8]),
    ) -> bool {
        let mut start = 0;
        while let Some(rel) = memchr::memchr(b'\n', &data[start..]) {
            let end = start + rel;
            let line_start = self.offset + start as u64 - self.partial.len() as u64;
            if self.skipping {
                self.skipping = false;
                self.partial.clear();
            } else if self.partial.is_empty() {
                line(line_start, &data[start..end]);
            } else {
                self.partial.extend_from_slice(&data[start..end]);
                let whole = std::mem::take(&mut self.partial);
                line(line_start, &whole);
            }
            start = end + 1;
        }
        let mut overlong = false;
        if !self.skipping {
            self.partial.extend_from_slice(&data[start..]);
            if self.partial.len() > max_line {
                self.partial.clear();
                self.skipping = true;
                overlong = true;
            }
        }
        self.offset += data.len() as u64;
        overlong
    }
}

/// How the first read of a lines file of `size` bytes goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FirstRead {
    /// Small enough: read it all, from the start.
    Whole,
    /// Its first line, if it ends within the first `head` bytes (Codex's `session_meta`,
    /// Claude's `ai-title`), then its tail from `tail_from`, which starts mid-line.
    HeadAndTail { head: u64, tail_from: u64 },
}

impl FirstRead {
    pub(super) fn plan(size: u64, head_bytes: u64, tail_bytes: u64) -> FirstRead {
        if size <= tail_bytes {
            FirstRead::Whole
        } else {
            FirstRead::HeadAndTail {
                head: head_bytes.min(size),
                tail_from: size - tail_bytes,
            }
        }
    }
}

/// The first line of `head` (the first bytes of a file), if it is complete there.
pub(super) fn first_line(head: &[u8]) -> Option<&[u8]> {
    memchr::memchr(b'\n', head).map(|end| &head[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines `reader` yields from `chunks` read one after the other, as (offset, text).
    fn lines(reader: &mut LineReader, chunks: &[&[u8]]) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        for chunk in chunks {
            reader.feed(chunk, |at, line| {
                out.push((at, String::from_utf8_lossy(line).into_owned()))
            });
        }
        out
    }

    fn check(chunks: &[&[u8]], expect: &[(u64, &str)], expect_offset: u64, expect_resume: u64) {
        let mut reader = LineReader::at(0);
        let got = lines(&mut reader, chunks);
        let expect: Vec<(u64, String)> = expect.iter().map(|(o, l)| (*o, l.to_string())).collect();
        assert_eq!(got, expect, "chunks {chunks:?}");
        assert_eq!(reader.offset, expect_offset, "offset after {chunks:?}");
        assert_eq!(
            reader.resume_offset(),
            expect_resume,
            "resume after {chunks:?}"
        );
    }

    /// Claude Code transcript lines (tests/fixtures/watchers/claude-code), as inotify delivers
    /// them: a write can end anywhere, a line in several writes.
    #[test]
    fn partial_lines_wait_for_their_newline() {
        let user = br#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        let mut two = user.to_vec();
        two.push(b'\n');
        let n = two.len() as u64;
        two.extend_from_slice(user);
        two.push(b'\n');
        let (a, b) = user.split_at(20);
        check(&[], &[], 0, 0);
        // Nothing but a partial line: nothing out, the restart reads it again.
        check(&[a], &[], 20, 0);
        // Its rest arrives: one line, at offset 0.
        check(
            &[a, b, b"\n"],
            &[(0, std::str::from_utf8(user).unwrap())],
            n,
            n,
        );
        // Two lines in one read, then a third begun.
        check(
            &[&two, b"{\"ty"],
            &[
                (0, std::str::from_utf8(user).unwrap()),
                (n, std::str::from_utf8(user).unwrap()),
            ],
            2 * n + 4,
            2 * n,
        );
        // A newline alone in its read completes the held line.
        check(&[b"ab", b"cd", b"\n", b"\n"], &[(0, "abcd"), (5, "")], 6, 6);
    }

    #[test]
    fn offsets_add_up_over_several_reads() {
        let mut reader = LineReader::at(100);
        assert_eq!(
            lines(&mut reader, &[b"one\ntw"]),
            [(100, "one".to_string())]
        );
        assert_eq!(
            lines(&mut reader, &[b"o\nthree"]),
            [(104, "two".to_string())]
        );
        assert_eq!(reader.offset, 113);
        assert_eq!(reader.resume_offset(), 108);
        assert_eq!(lines(&mut reader, &[b"\n"]), [(108, "three".to_string())]);
        assert_eq!(reader.resume_offset(), 114);
    }

    #[test]
    fn a_read_starting_mid_line_skips_to_the_next_line() {
        let mut reader = LineReader::mid_line(10);
        assert_eq!(reader.resume_offset(), 10);
        assert_eq!(lines(&mut reader, &[b"ail of a line"]), []);
        // Still skipping: a restart resumes where the skipping stands.
        assert_eq!(reader.resume_offset(), 23);
        assert_eq!(
            lines(&mut reader, &[b"\nnext\n"]),
            [(24, "next".to_string())]
        );
    }

    #[test]
    fn an_overlong_line_is_dropped_to_its_newline() {
        let mut reader = LineReader::at(0);
        let mut out = Vec::new();
        let mut feed = |reader: &mut LineReader, data: &[u8]| {
            reader.feed_bounded(data, 8, |at, line| {
                out.push((at, String::from_utf8_lossy(line).into_owned()))
            })
        };
        assert!(!feed(&mut reader, b"ok\n1234"));
        assert!(feed(&mut reader, b"56789"));
        assert!(!feed(&mut reader, b"more\nnext\n"));
        assert_eq!(out, [(0, "ok".to_string()), (17, "next".to_string())]);
        assert_eq!(reader.offset, 22);
    }

    #[test]
    fn a_checkpoint_resumes_at_its_offset_or_the_tail() {
        // (saved offset, size now, tail bytes) → reader
        let check = |saved, size, tail, expect: Option<LineReader>| {
            assert_eq!(
                LineReader::resume(saved, size, tail),
                expect,
                "resume({saved}, {size}, {tail})"
            );
        };
        check(50, 80, 100, Some(LineReader::at(50)));
        check(80, 80, 100, Some(LineReader::at(80)));
        // Grew by more than the tail while the daemon was down: the tail only.
        check(50, 500, 100, Some(LineReader::mid_line(400)));
        // Shorter than the checkpoint says: not the same file's contents.
        check(90, 80, 100, None);
    }

    #[test]
    fn the_first_read_plan_bounds_the_head_and_the_tail() {
        let check = |size, expect| assert_eq!(FirstRead::plan(size, 64, 256), expect, "{size}");
        check(0, FirstRead::Whole);
        check(256, FirstRead::Whole);
        check(
            257,
            FirstRead::HeadAndTail {
                head: 64,
                tail_from: 1,
            },
        );
        check(
            10_000,
            FirstRead::HeadAndTail {
                head: 64,
                tail_from: 9744,
            },
        );
    }

    /// A Codex rollout: its `session_meta` first line names the thread, the tail holds the
    /// current turn; the middle is never read.
    #[test]
    fn the_bounded_first_read_keeps_the_first_line_and_the_tail() {
        let rollout = include_str!("../../../tests/fixtures/watchers/codex/rollout.jsonl");
        let first = rollout.lines().next().unwrap();
        let mut file = rollout.as_bytes().to_vec();
        // A long middle, as a day-old session has.
        for n in 0..200 {
            file.extend_from_slice(format!("{{\"middle\":{n}}}\n").as_bytes());
        }
        let last = r#"{"type":"event_msg","payload":{"type":"task_complete"}}"#;
        file.extend_from_slice(last.as_bytes());
        file.push(b'\n');
        let head_bytes = first.len() as u64 + 1;
        let tail_bytes = 64;
        let FirstRead::HeadAndTail { head, tail_from } =
            FirstRead::plan(file.len() as u64, head_bytes, tail_bytes)
        else {
            panic!("a large file is read bounded");
        };
        let mut got = Vec::new();
        if let Some(line) = first_line(&file[..head as usize]) {
            got.push((0, String::from_utf8_lossy(line).into_owned()));
        }
        let mut reader = LineReader::mid_line(tail_from);
        got.extend(lines(&mut reader, &[&file[tail_from as usize..]]));
        let last_at = (file.len() - last.len() - 1) as u64;
        assert_eq!(
            got,
            [(0, first.to_string()), (last_at, last.to_string())],
            "the first line and the tail's complete lines, nothing between"
        );
        assert_eq!(reader.offset, file.len() as u64);
        // A first line longer than the head is not taken (no partial record is decoded).
        assert_eq!(first_line(&file[..head as usize - 1]), None);
    }
}
