//! How a lines file is read when it is first met or resumed: the bounded first read (its first
//! line and its tail, never the middle of a day-old session) and the resumption from a
//! checkpoint (its offset, or the tail of a file that grew a lot while the daemon was down).
//!
//! Pure: no I/O, no clock. The engine's reading (`reading.rs`) opens, seeks and reads, and hands
//! each chunk to the file's [`LineBuffer`] (`tail::lines`, the crate's one line buffer).

use crate::tail::LineBuffer;

/// Resumes a file of `size` bytes from its checkpoint's `saved` offset; `None` when the file is
/// shorter than that (not the file the checkpoint knew). A file that grew by more than
/// `tail_bytes` while the daemon was down is read from its tail only.
pub(super) fn resume(saved: u64, size: u64, tail_bytes: u64) -> Option<LineBuffer> {
    if saved > size {
        return None;
    }
    if size - saved > tail_bytes {
        return Some(LineBuffer::mid_line(size - tail_bytes));
    }
    Some(LineBuffer::at(saved))
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

    #[test]
    fn a_checkpoint_resumes_at_its_offset_or_the_tail() {
        // (saved offset, size now, tail bytes) → buffer
        let check = |saved, size, tail, expect: Option<LineBuffer>| {
            assert_eq!(
                resume(saved, size, tail),
                expect,
                "resume({saved}, {size}, {tail})"
            );
        };
        check(50, 80, 100, Some(LineBuffer::at(50)));
        check(80, 80, 100, Some(LineBuffer::at(80)));
        // Grew by more than the tail while the daemon was down: the tail only.
        check(50, 500, 100, Some(LineBuffer::mid_line(400)));
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
        let mut buffer = LineBuffer::mid_line(tail_from);
        buffer.feed_lines(&file[tail_from as usize..], |at, line| {
            got.push((at, String::from_utf8_lossy(line).into_owned()))
        });
        let last_at = (file.len() - last.len() - 1) as u64;
        assert_eq!(
            got,
            [(0, first.to_string()), (last_at, last.to_string())],
            "the first line and the tail's complete lines, nothing between"
        );
        assert_eq!(buffer.offset(), file.len() as u64);
        // A first line longer than the head is not taken (no partial record is decoded).
        assert_eq!(first_line(&file[..head as usize - 1]), None);
    }
}
