//! The crate's one line buffer: bytes read at an offset go in, complete lines come out with the
//! offsets they start and end at, the bytes after the last newline wait for the rest of their
//! line, and a line longer than the limit is skipped to its newline.
//!
//! Pure: no I/O, no clock. Its two drivers read the files and say what a line means: the
//! per-file follower (`follow.rs`: the Claude host's transcript, hooks and runner files) and the
//! watch engine's shared inotify loop (`watch/engine/reading.rs`).

/// The default longest line: far beyond any record observed (Claude's transcript lines carry
/// whole tool results, and are still well below it). A longer line is more likely garbage than
/// data, and skipping it keeps a runaway writer from making the daemon buffer without bound.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// How many bytes of an overlong line are kept to show it: 200 characters of at most 4 bytes.
const OVERLONG_HEAD_BYTES: usize = 800;

/// Where a lines file is read from, and what of its last line is held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineBuffer {
    /// Bytes read so far (including `partial`).
    offset: u64,
    /// Where the line being read starts (right after the last newline read).
    line_start: u64,
    /// The bytes after the last newline read, unless they are being skipped.
    partial: Vec<u8>,
    /// Set while the bytes up to the next newline are not a line to deliver.
    skip: Option<Skip>,
    /// The longest line delivered; a longer one is skipped.
    max_line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Skip {
    /// The read started somewhere in a line (the tail of a bounded read).
    MidLine,
    /// The line is longer than the limit: its first bytes, to show it.
    Overlong { head: Vec<u8> },
}

/// What the buffer hands its driver: one complete line, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A line of `bytes` (without its `\n`; a `\r` before it is kept) starting at `start`;
    /// `end` is right after its newline.
    Line {
        start: u64,
        end: u64,
        bytes: &'a [u8],
    },
    /// A line longer than the limit, skipped: its first bytes (up to 800) in `head`.
    Overlong {
        start: u64,
        end: u64,
        head: &'a [u8],
    },
}

impl LineBuffer {
    /// Reads from `offset`, the start of a line, with the default [`MAX_LINE_BYTES`].
    pub fn at(offset: u64) -> LineBuffer {
        LineBuffer {
            offset,
            line_start: offset,
            partial: Vec::new(),
            skip: None,
            max_line: MAX_LINE_BYTES,
        }
    }

    /// Reads from `offset`, somewhere in a line: the bytes up to the next newline are skipped.
    pub fn mid_line(offset: u64) -> LineBuffer {
        LineBuffer {
            skip: Some(Skip::MidLine),
            ..LineBuffer::at(offset)
        }
    }

    /// The same buffer with another line limit.
    pub fn with_max_line(self, max_line: usize) -> LineBuffer {
        LineBuffer { max_line, ..self }
    }

    /// Bytes read so far: where the next read starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Where the line being read starts (right after the last complete line).
    pub fn line_start(&self) -> u64 {
        self.line_start
    }

    /// The offset a restart resumes from: after the last complete line (a held-back partial
    /// line is read again), or where the skipping stands.
    pub fn resume_offset(&self) -> u64 {
        if self.skip.is_some() {
            self.offset
        } else {
            self.line_start
        }
    }

    /// Forgets the held-back partial line (the file is read again from elsewhere).
    pub fn drop_partial(&mut self) {
        self.partial.clear();
        self.line_start = self.offset;
    }

    /// The line left without its newline, if any: where it starts and its bytes (for an
    /// overlong one, its first bytes). A file that was replaced or removed will never end it.
    pub fn unterminated(&self) -> Option<(u64, &[u8])> {
        if self.offset <= self.line_start {
            return None;
        }
        match &self.skip {
            Some(Skip::Overlong { head }) => Some((self.line_start, head)),
            _ => Some((self.line_start, &self.partial)),
        }
    }

    /// Takes `data`, the bytes read at [`LineBuffer::offset`], and hands `piece` every line it
    /// completes. Returns whether it began skipping a line longer than the limit (reported
    /// again as [`Piece::Overlong`] once its newline comes).
    pub fn feed(&mut self, data: &[u8], mut piece: impl FnMut(Piece<'_>)) -> bool {
        let mut began_overlong = false;
        let mut rest = data;
        while let Some(newline) = memchr::memchr(b'\n', rest) {
            let (head, tail) = rest.split_at(newline);
            rest = &tail[1..];
            let start = self.line_start;
            let end = self.offset + head.len() as u64 + 1;
            let whole_here =
                self.skip.is_none() && self.partial.is_empty() && head.len() <= self.max_line;
            if !whole_here {
                began_overlong |= self.push(head);
            }
            self.offset = end;
            self.line_start = end;
            match self.skip.take() {
                Some(Skip::MidLine) => {}
                Some(Skip::Overlong { head }) => piece(Piece::Overlong {
                    start,
                    end,
                    head: &head,
                }),
                None if whole_here => piece(Piece::Line {
                    start,
                    end,
                    bytes: head,
                }),
                None => {
                    let whole = std::mem::take(&mut self.partial);
                    piece(Piece::Line {
                        start,
                        end,
                        bytes: &whole,
                    });
                }
            }
        }
        began_overlong |= self.push(rest);
        self.offset += rest.len() as u64;
        began_overlong
    }

    /// [`LineBuffer::feed`] for a driver that wants the lines only: `line` gets each one's start
    /// and bytes; a skipped overlong line is only the returned flag.
    pub fn feed_lines(&mut self, data: &[u8], mut line: impl FnMut(u64, &[u8])) -> bool {
        self.feed(data, |piece| {
            if let Piece::Line { start, bytes, .. } = piece {
                line(start, bytes);
            }
        })
    }

    /// Appends bytes of the unfinished line; past the limit, switches to skipping it (keeping
    /// its first bytes) and returns `true`.
    fn push(&mut self, bytes: &[u8]) -> bool {
        if self.skip.is_some() {
            return false;
        }
        if self.partial.len() + bytes.len() <= self.max_line {
            self.partial.extend_from_slice(bytes);
            return false;
        }
        let mut head = std::mem::take(&mut self.partial);
        head.truncate(OVERLONG_HEAD_BYTES);
        let room = OVERLONG_HEAD_BYTES - head.len();
        head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.skip = Some(Skip::Overlong { head });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One piece as the tests write it: `(start, end, text)`, an overlong line's text prefixed
    /// with `overlong:`.
    type Out = (u64, u64, String);

    fn pieces(buffer: &mut LineBuffer, chunks: &[&[u8]]) -> (Vec<Out>, usize) {
        let mut out = Vec::new();
        let mut began = 0;
        for chunk in chunks {
            let began_here = buffer.feed(chunk, |piece| {
                out.push(match piece {
                    Piece::Line { start, end, bytes } => {
                        (start, end, String::from_utf8_lossy(bytes).into_owned())
                    }
                    Piece::Overlong { start, end, head } => (
                        start,
                        end,
                        format!("overlong:{}", String::from_utf8_lossy(head)),
                    ),
                })
            });
            began += usize::from(began_here);
        }
        (out, began)
    }

    /// Feeds `chunks` to `buffer` one after the other and checks the pieces, then the offset
    /// and the resume offset it is left at.
    fn check(
        mut buffer: LineBuffer,
        chunks: &[&[u8]],
        expect: &[(u64, u64, &str)],
        expect_offset: u64,
        expect_resume: u64,
    ) {
        let (got, _) = pieces(&mut buffer, chunks);
        let expect: Vec<Out> = expect
            .iter()
            .map(|(start, end, text)| (*start, *end, text.to_string()))
            .collect();
        assert_eq!(got, expect, "chunks {chunks:?}");
        assert_eq!(buffer.offset(), expect_offset, "offset after {chunks:?}");
        assert_eq!(
            buffer.resume_offset(),
            expect_resume,
            "resume after {chunks:?}"
        );
    }

    /// Claude Code transcript lines (tests/fixtures/watchers/claude-code), as inotify delivers
    /// them: a write can end anywhere, a line in several writes.
    #[test]
    fn partial_lines_wait_for_their_newline() {
        let user = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        let mut two = format!("{user}\n").into_bytes();
        let n = two.len() as u64;
        two.extend_from_slice(format!("{user}\n").as_bytes());
        let (a, b) = user.as_bytes().split_at(20);
        let at0 = || LineBuffer::at(0);
        check(at0(), &[], &[], 0, 0);
        // Nothing but a partial line: nothing out, the restart reads it again.
        check(at0(), &[a], &[], 20, 0);
        // Its rest arrives: one line, at offset 0.
        check(at0(), &[a, b, b"\n"], &[(0, n, user)], n, n);
        // Two lines in one read, then a third begun.
        check(
            at0(),
            &[&two, b"{\"ty"],
            &[(0, n, user), (n, 2 * n, user)],
            2 * n + 4,
            2 * n,
        );
        // A newline alone in its read completes the held line; a blank line is a line.
        check(
            at0(),
            &[b"ab", b"cd", b"\n", b"\n"],
            &[(0, 5, "abcd"), (5, 6, "")],
            6,
            6,
        );
        // A `\r` before the newline is the line's (the follower drops it, decoders see it).
        check(at0(), &[b"{}\r\n"], &[(0, 4, "{}\r")], 4, 4);
    }

    #[test]
    fn offsets_add_up_over_several_reads() {
        check(
            LineBuffer::at(100),
            &[b"one\ntw", b"o\nthree"],
            &[(100, 104, "one"), (104, 108, "two")],
            113,
            108,
        );
        check(
            LineBuffer::at(100),
            &[b"one\ntw", b"o\nthree", b"\n"],
            &[(100, 104, "one"), (104, 108, "two"), (108, 114, "three")],
            114,
            114,
        );
    }

    #[test]
    fn a_read_starting_mid_line_skips_to_the_next_line() {
        check(LineBuffer::mid_line(10), &[], &[], 10, 10);
        // Still skipping: a restart resumes where the skipping stands.
        check(LineBuffer::mid_line(10), &[b"ail of a line"], &[], 23, 23);
        check(
            LineBuffer::mid_line(10),
            &[b"ail of a line", b"\nnext\n"],
            &[(24, 29, "next")],
            29,
            29,
        );
    }

    /// A line longer than the limit is skipped to its newline and reported there with its first
    /// bytes, whether it grew past the limit while held back or within the read that ends it.
    #[test]
    fn an_overlong_line_is_skipped_to_its_newline() {
        let small = || LineBuffer::at(0).with_max_line(8);
        check(
            small(),
            &[b"ok\n1234", b"56789", b"more\nnext\n"],
            &[
                (0, 3, "ok"),
                (3, 17, "overlong:123456789"),
                (17, 22, "next"),
            ],
            22,
            22,
        );
        // Past the limit while held back: skipping, the restart resumes where it stands.
        check(small(), &[b"ok\n1234", b"56789"], &[(0, 3, "ok")], 12, 12);
        // Exactly the limit is a line; one byte more is not, even within one read.
        check(
            small(),
            &[b"12345678\n123456789\nx\n"],
            &[
                (0, 9, "12345678"),
                (9, 19, "overlong:123456789"),
                (19, 21, "x"),
            ],
            21,
            21,
        );
        // The flag says when the skipping began (for a log line), once per overlong line.
        let mut buffer = small();
        let (_, began) = pieces(&mut buffer, &[b"1234", b"56789", b"0000", b"\nok\n"]);
        assert_eq!(began, 1);
        // Only the first 800 bytes of a huge line are kept.
        let huge = vec![b'x'; 3000];
        let (got, _) = pieces(&mut LineBuffer::at(0).with_max_line(100), &[&huge, b"\n"]);
        assert_eq!(got, [(0, 3001, format!("overlong:{}", "x".repeat(800)))]);
    }

    #[test]
    fn an_unterminated_line_is_what_is_held_back() {
        let check = |buffer: LineBuffer, chunks: &[&[u8]], expect: Option<(u64, &str)>| {
            let mut buffer = buffer;
            pieces(&mut buffer, chunks);
            let got = buffer
                .unterminated()
                .map(|(start, bytes)| (start, String::from_utf8_lossy(bytes).into_owned()));
            assert_eq!(got, expect.map(|(s, t)| (s, t.to_string())), "{chunks:?}");
        };
        check(LineBuffer::at(0), &[b"{\"a\":1}\n"], None);
        check(
            LineBuffer::at(0),
            &[b"{\"a\":1}\n{\"old\":"],
            Some((8, "{\"old\":")),
        );
        check(
            LineBuffer::at(0).with_max_line(4),
            &[b"{}\n", b"123456"],
            Some((3, "123456")),
        );
    }

    #[test]
    fn a_dropped_partial_line_is_read_again_from_where_reading_stands() {
        let mut buffer = LineBuffer::at(0);
        pieces(&mut buffer, &[b"one\ntw"]);
        buffer.drop_partial();
        assert_eq!((buffer.offset(), buffer.resume_offset()), (6, 6));
        assert_eq!(buffer.unterminated(), None);
    }
}
