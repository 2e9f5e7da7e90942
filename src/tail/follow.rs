//! A resumable follower of one JSONL file that another process appends to (Claude's
//! transcript, our `hooks.jsonl` and `runner.jsonl`): the per-file driver of the crate's one
//! [`LineBuffer`].
//!
//! It owns the read offset: it waits for the file to exist, reads from a [`Checkpoint`], keeps a
//! partial last line until its newline arrives, checks that every complete line is JSON, and
//! hands each line to its consumer over a bounded channel together with the checkpoint to
//! persist once the consumer has handled it. Restarting from that checkpoint resumes exactly:
//! no line is lost and none is delivered twice. It notices a replaced file (new inode →
//! [`TailItem::Rotated`]) and a truncated one ([`TailItem::Truncated`]).
//!
//! Wake-ups come from an inotify watch on the file's parent directory (`wake.rs`), so a file
//! created, renamed or replaced later is seen; a slow poll is the safety net for missed events,
//! for a directory that does not exist yet, and for systems where no watcher can be created. It
//! never writes the file it tails and knows nothing about what the lines mean: callers (the
//! Claude host) parse them. What a line or a resumption means ([`item_of`], [`start_of`]) is
//! pure.

use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::checkpoint::Checkpoint;
use super::lines::{LineBuffer, MAX_LINE_BYTES, Piece};
use super::wake::{DirWatch, WatchMode};

/// A good capacity for the channel handed to [`spawn_tail`]. The tailer waits when the channel
/// is full (the data stays on disk, so backpressure loses nothing), so the number only decides
/// how far reading may run ahead of the consumer: 256 lines hold several of Claude's 100 ms
/// flush batches, which are rarely more than a few dozen lines.
pub const TAIL_CHANNEL_CAPACITY: usize = 256;

/// How often the file is checked even when no watcher event arrived. Events normally trigger
/// reads within milliseconds; the poll only bounds the delay when an event was missed or no
/// watcher could be set up, so half a second is a fair price for one `stat` per tick.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The longest line delivered: the line buffer's [`MAX_LINE_BYTES`]. Claude's transcript lines
/// carry whole tool results and can be large, but a line past 8 MiB is far beyond anything
/// observed and is more likely garbage than data; it is skipped to its newline and reported as
/// [`TailItem::Malformed`], so a runaway writer cannot make the daemon buffer without bound.
pub const DEFAULT_MAX_LINE_BYTES: usize = MAX_LINE_BYTES;

/// How many bytes one `read` asks for.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// How many characters of a bad line [`TailItem::Malformed`] keeps, enough to recognise it in
/// a log without copying megabytes.
const EXCERPT_CHARS: usize = 200;

/// One thing the tailer observed, delivered in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailItem {
    /// A complete line (without its `\n`, or a trailing `\r`) that parses as JSON. `offset`
    /// is where the line starts; the accompanying checkpoint points right after it.
    Line { offset: u64, line: String },
    /// A complete line that is not JSON, not UTF-8, longer than the line limit, or left
    /// unterminated in a file that was replaced or removed. It has already been logged with
    /// path and offset; the tail goes on with the next line.
    Malformed {
        offset: u64,
        error: String,
        excerpt: String,
    },
    /// The path now names another file than the one being read (it was replaced, renamed, or
    /// the resume checkpoint named another inode). What follows is read from offset 0 of the
    /// new file.
    Rotated { new_inode: u64 },
    /// The file shrank below the read position (or below the resume checkpoint). What follows
    /// is read from offset 0.
    Truncated,
}

/// Tuning for [`spawn_tail_with`]; [`TailOptions::default`] is what [`spawn_tail`] uses.
#[derive(Debug, Clone)]
pub struct TailOptions {
    pub poll_interval: Duration,
    pub watch: WatchMode,
    pub max_line_bytes: usize,
}

impl Default for TailOptions {
    fn default() -> Self {
        Self {
            poll_interval: DEFAULT_POLL_INTERVAL,
            watch: WatchMode::Notify,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Tails `path` with the default options until `cancel` fires or the receiver is dropped.
///
/// Starts at `start` when its path and inode match the file found, else at offset 0 of it
/// (announced as [`TailItem::Rotated`]). Each item comes with the checkpoint to persist after
/// the consumer has handled it.
pub fn spawn_tail(
    path: PathBuf,
    start: Option<Checkpoint>,
    tx: mpsc::Sender<(TailItem, Checkpoint)>,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    spawn_tail_with(path, start, TailOptions::default(), tx, cancel)
}

/// [`spawn_tail`] with explicit [`TailOptions`].
pub fn spawn_tail_with(
    path: PathBuf,
    start: Option<Checkpoint>,
    options: TailOptions,
    tx: mpsc::Sender<(TailItem, Checkpoint)>,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let tailer = Tailer {
        path,
        options,
        tx,
        cancel,
        resume: start,
        open: None,
    };
    tokio::spawn(tailer.run())
}

/// What one complete line from the buffer becomes; `None` for a blank line (the next item's
/// checkpoint covers it). A `\r` before the newline is dropped; a line must be UTF-8 and JSON.
fn item_of(piece: Piece<'_>, max_line_bytes: usize) -> Option<TailItem> {
    let (start, mut body) = match piece {
        Piece::Overlong { start, end, head } => {
            return Some(TailItem::Malformed {
                offset: start,
                error: format!(
                    "line of {} bytes is longer than the limit of {max_line_bytes} bytes",
                    end - start - 1
                ),
                excerpt: excerpt(&String::from_utf8_lossy(head)),
            });
        }
        Piece::Line { start, bytes, .. } => (start, bytes),
    };
    if let Some(stripped) = body.strip_suffix(b"\r") {
        body = stripped;
    }
    let line = match std::str::from_utf8(body) {
        Ok(line) => line,
        Err(err) => {
            return Some(TailItem::Malformed {
                offset: start,
                error: format!("not UTF-8: {err}"),
                excerpt: excerpt(&String::from_utf8_lossy(body)),
            });
        }
    };
    if line.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(line) {
        Ok(_) => Some(TailItem::Line {
            offset: start,
            line: line.to_owned(),
        }),
        Err(err) => Some(TailItem::Malformed {
            offset: start,
            error: format!("not JSON: {err}"),
            excerpt: excerpt(line),
        }),
    }
}

/// Where reading a file found at the tailed path starts, against the checkpoint it resumes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// No file was seen before: offset 0, nothing to announce.
    Fresh,
    /// The checkpoint's file, at its offset.
    At(u64),
    /// Another file than the checkpoint's (inode or path): offset 0, announced as rotated.
    Replaced { old_inode: u64 },
    /// The checkpoint's file, shorter than its offset: offset 0, announced as truncated.
    Shorter { offset: u64 },
}

/// Where to start reading `path`, now the file `inode` of `len` bytes, from `resume`.
fn start_of(resume: Option<&Checkpoint>, path: &Path, inode: u64, len: u64) -> Start {
    match resume {
        None => Start::Fresh,
        Some(checkpoint) if checkpoint.inode != inode || checkpoint.path != path => {
            Start::Replaced {
                old_inode: checkpoint.inode,
            }
        }
        Some(checkpoint) if len < checkpoint.offset => Start::Shorter {
            offset: checkpoint.offset,
        },
        Some(checkpoint) => Start::At(checkpoint.offset),
    }
}

/// Why the tail loop ended.
#[derive(Debug)]
enum Stop {
    Cancelled,
    ConsumerGone,
}

/// The file currently being read and its line buffer.
struct OpenFile {
    file: File,
    inode: u64,
    /// Its offset is the bytes read from `file` so far.
    lines: LineBuffer,
}

struct Tailer {
    path: PathBuf,
    options: TailOptions,
    tx: mpsc::Sender<(TailItem, Checkpoint)>,
    cancel: CancellationToken,
    /// Where to continue when a file is next opened: the caller's checkpoint at first, then
    /// the position reached in a file that disappeared. `None` means "no file seen yet".
    resume: Option<Checkpoint>,
    open: Option<OpenFile>,
}

impl Tailer {
    async fn run(mut self) {
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut watch = DirWatch::new(&self.path, self.options.watch, wake.clone());
        let mut poll = tokio::time::interval(self.options.poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Arm the watch before the first read, so a change between the two is not missed.
        watch.ensure().await;
        let stop = loop {
            if let Err(stop) = self.catch_up().await {
                break stop;
            }
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => break Stop::Cancelled,
                () = wake.notified() => {}
                _ = poll.tick() => watch.ensure().await,
            }
        };
        let offset = self.open.as_ref().map(|open| open.lines.line_start());
        tracing::debug!(path = %self.path.display(), ?offset, reason = ?stop, "tail stopped");
    }

    /// A line buffer at `offset` with this tail's line limit.
    fn buffer_at(&self, offset: u64) -> LineBuffer {
        LineBuffer::at(offset).with_max_line(self.options.max_line_bytes)
    }

    /// Reads everything the file has now, after handling a replaced, removed or truncated file.
    async fn catch_up(&mut self) -> Result<(), Stop> {
        let current_inode = match tokio::fs::metadata(&self.path).await {
            Ok(meta) => Some((meta.ino(), meta.len())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                // Not a sign that the file went away: keep reading what is open, and look
                // again on the next wake-up.
                tracing::warn!(path = %self.path.display(), error = %err, "cannot stat tailed file");
                return self.read_available().await;
            }
        };
        if let Some(open) = &mut self.open {
            match current_inode {
                Some((inode, len)) if inode == open.inode => {
                    if len < open.lines.offset() {
                        tracing::info!(
                            path = %self.path.display(),
                            size = len,
                            offset = open.lines.offset(),
                            "tailed file was truncated; reading it again from the start"
                        );
                        let inode = open.inode;
                        self.reopen_at_start(inode).await;
                        self.deliver(TailItem::Truncated, inode, 0).await?;
                    }
                    return self.read_available().await;
                }
                _ => {
                    // Replaced or removed: whatever the old file still holds comes first.
                    self.read_available().await?;
                    self.close().await?;
                }
            }
        }
        if current_inode.is_some() {
            self.open_file().await?;
            self.read_available().await?;
        }
        Ok(())
    }

    /// Opens the file at `path` and positions it from `resume`, announcing a rotation or
    /// truncation against it.
    async fn open_file(&mut self) -> Result<(), Stop> {
        let file = match File::open(&self.path).await {
            Ok(file) => file,
            Err(err) => {
                if err.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.path.display(), error = %err, "cannot open tailed file");
                }
                return Ok(());
            }
        };
        // Take the identity from the handle, not the earlier `stat`: the path may have been
        // replaced in between.
        let meta = match file.metadata().await {
            Ok(meta) => meta,
            Err(err) => {
                tracing::warn!(path = %self.path.display(), error = %err, "cannot stat opened tailed file");
                return Ok(());
            }
        };
        let (inode, len) = (meta.ino(), meta.len());
        let start = start_of(self.resume.take().as_ref(), &self.path, inode, len);
        let (offset, announce) = match start {
            Start::Fresh => (0, None),
            Start::Replaced { old_inode } => {
                tracing::info!(
                    path = %self.path.display(),
                    old_inode,
                    new_inode = inode,
                    "tailed file was replaced; reading the new one from the start"
                );
                (0, Some(TailItem::Rotated { new_inode: inode }))
            }
            Start::Shorter { offset } => {
                tracing::info!(
                    path = %self.path.display(),
                    size = len,
                    offset,
                    "tailed file is shorter than its checkpoint; reading it again from the start"
                );
                (0, Some(TailItem::Truncated))
            }
            Start::At(offset) => (offset, None),
        };
        let mut file = file;
        if offset > 0
            && let Err(err) = file.seek(SeekFrom::Start(offset)).await
        {
            tracing::warn!(path = %self.path.display(), offset, error = %err, "cannot seek tailed file");
            self.resume = Some(self.checkpoint(inode, offset));
            return Ok(());
        }
        tracing::debug!(path = %self.path.display(), inode, offset, "tailing file");
        self.open = Some(OpenFile {
            file,
            inode,
            lines: self.buffer_at(offset),
        });
        if let Some(item) = announce {
            self.deliver(item, inode, 0).await?;
        }
        Ok(())
    }

    /// Rewinds the open file to offset 0 after a truncation, dropping the unfinished line.
    async fn reopen_at_start(&mut self, inode: u64) {
        let fresh = self.buffer_at(0);
        let Some(open) = &mut self.open else {
            return;
        };
        if let Err(err) = open.file.seek(SeekFrom::Start(0)).await {
            tracing::warn!(path = %self.path.display(), error = %err, "cannot rewind truncated file");
            // Opening the path again on the next wake-up starts it over from offset 0.
            self.open = None;
            self.resume = Some(self.checkpoint(inode, 0));
            return;
        }
        open.lines = fresh;
    }

    /// Forgets the open file (replaced or removed). Its unterminated last line, if any, is
    /// reported as malformed: no newline will ever complete it.
    async fn close(&mut self) -> Result<(), Stop> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let end = open.lines.offset();
        self.resume = Some(self.checkpoint(open.inode, end));
        if let Some((start, shown)) = open.lines.unterminated() {
            let item = TailItem::Malformed {
                offset: start,
                error: "unterminated last line of a file that was replaced or removed".to_owned(),
                excerpt: excerpt(&String::from_utf8_lossy(shown)),
            };
            self.deliver(item, open.inode, end).await?;
        }
        Ok(())
    }

    /// Reads the open file to its current end, delivering every complete line.
    async fn read_available(&mut self) -> Result<(), Stop> {
        let mut chunk = vec![0u8; READ_CHUNK_BYTES];
        loop {
            let Some(open) = &mut self.open else {
                return Ok(());
            };
            let n_read = match open.file.read(&mut chunk).await {
                Ok(0) => return Ok(()),
                Ok(n_read) => n_read,
                Err(err) => {
                    tracing::warn!(
                        path = %self.path.display(),
                        offset = open.lines.offset(),
                        error = %err,
                        "cannot read tailed file"
                    );
                    return Ok(());
                }
            };
            let inode = open.inode;
            let max_line_bytes = self.options.max_line_bytes;
            let mut complete = Vec::new();
            open.lines.feed(&chunk[..n_read], |piece| {
                let end = match piece {
                    Piece::Line { end, .. } | Piece::Overlong { end, .. } => end,
                };
                if let Some(item) = item_of(piece, max_line_bytes) {
                    complete.push((item, end));
                }
            });
            for (item, end) in complete {
                self.deliver(item, inode, end).await?;
            }
        }
    }

    fn checkpoint(&self, inode: u64, offset: u64) -> Checkpoint {
        Checkpoint {
            path: self.path.clone(),
            inode,
            offset,
        }
    }

    /// Sends one item with its checkpoint, waiting while the channel is full. A bad line is
    /// logged here first, with path and offset.
    async fn deliver(&self, item: TailItem, inode: u64, offset: u64) -> Result<(), Stop> {
        if let TailItem::Malformed {
            offset,
            error,
            excerpt,
        } = &item
        {
            tracing::warn!(path = %self.path.display(), offset, %error, %excerpt, "malformed JSONL line");
        }
        let checkpoint = self.checkpoint(inode, offset);
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Stop::Cancelled),
            sent = self.tx.send((item, checkpoint)) => sent.map_err(|_| Stop::ConsumerGone),
        }
    }
}

/// The first [`EXCERPT_CHARS`] characters of `text`.
fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::checkpoint::{load_checkpoint, save_checkpoint};
    use std::io::Write as _;
    use tokio::time::timeout;

    /// Recorded Claude Code transcript lines (tests/fixtures/watchers/claude-code), fed to the
    /// line buffer as the follower does, and what each complete line becomes.
    #[test]
    fn lines_become_items_as_the_follower_delivers_them() {
        let check = |bytes: &[u8], max_line: usize, expect: &[TailItem]| {
            let mut buffer = LineBuffer::at(0).with_max_line(max_line);
            let mut got = Vec::new();
            buffer.feed(bytes, |piece| got.extend(item_of(piece, max_line)));
            assert_eq!(got, expect, "{}", String::from_utf8_lossy(bytes));
        };
        let transcript = include_str!("../../tests/fixtures/watchers/claude-code/api-error.jsonl");
        let mut offset = 0;
        let lines: Vec<TailItem> = transcript
            .lines()
            .map(|line| {
                let item = TailItem::Line {
                    offset,
                    line: line.to_owned(),
                };
                offset += line.len() as u64 + 1;
                item
            })
            .collect();
        check(transcript.as_bytes(), MAX_LINE_BYTES, &lines);
        // A `\r\n` ending loses its `\r`; a blank line is no item.
        check(
            b"{\"a\":1}\r\n \n\n[2]\n",
            MAX_LINE_BYTES,
            &[
                TailItem::Line {
                    offset: 0,
                    line: "{\"a\":1}".into(),
                },
                TailItem::Line {
                    offset: 12,
                    line: "[2]".into(),
                },
            ],
        );
        let malformed = |offset, error: &str, excerpt: &str| TailItem::Malformed {
            offset,
            error: error.into(),
            excerpt: excerpt.into(),
        };
        check(
            b"not json\n",
            MAX_LINE_BYTES,
            &[malformed(
                0,
                "not JSON: expected ident at line 1 column 2",
                "not json",
            )],
        );
        check(
            b"\xff\xfe\n",
            MAX_LINE_BYTES,
            &[malformed(
                0,
                "not UTF-8: invalid utf-8 sequence of 1 bytes from index 0",
                "\u{fffd}\u{fffd}",
            )],
        );
        let first = transcript.lines().next().unwrap();
        check(
            format!("{first}\n").as_bytes(),
            64,
            &[malformed(
                0,
                &format!(
                    "line of {} bytes is longer than the limit of 64 bytes",
                    first.len()
                ),
                &first[..200],
            )],
        );
    }

    /// Where a follower starts in the file it finds, against the checkpoint it resumes from.
    #[test]
    fn a_resumption_starts_at_the_checkpoint_or_over() {
        let path = Path::new("/home/me/.claude/projects/-home-me-proj/s.jsonl");
        let saved = Checkpoint {
            path: path.to_path_buf(),
            inode: 42,
            offset: 100,
        };
        let check = |resume: Option<&Checkpoint>, found: &Path, inode, len, expect| {
            assert_eq!(
                start_of(resume, found, inode, len),
                expect,
                "{resume:?} {inode} {len}"
            );
        };
        check(None, path, 42, 500, Start::Fresh);
        check(Some(&saved), path, 42, 500, Start::At(100));
        check(Some(&saved), path, 42, 100, Start::At(100));
        check(Some(&saved), path, 42, 99, Start::Shorter { offset: 100 });
        check(
            Some(&saved),
            path,
            43,
            500,
            Start::Replaced { old_inode: 42 },
        );
        let elsewhere = Path::new("/home/me/.claude/projects/-home-me-proj/t.jsonl");
        check(
            Some(&saved),
            elsewhere,
            42,
            500,
            Start::Replaced { old_inode: 42 },
        );
    }

    /// How long any single expected item may take to arrive.
    const RECV_TIMEOUT: Duration = Duration::from_secs(10);

    /// How long to listen to be satisfied that nothing more arrives.
    const QUIET: Duration = Duration::from_millis(400);

    struct Tail {
        rx: mpsc::Receiver<(TailItem, Checkpoint)>,
        cancel: CancellationToken,
        handle: JoinHandle<()>,
    }

    impl Tail {
        fn start(path: &Path, start: Option<Checkpoint>, options: TailOptions) -> Self {
            let (tx, rx) = mpsc::channel(TAIL_CHANNEL_CAPACITY);
            let cancel = CancellationToken::new();
            let handle = spawn_tail_with(path.to_path_buf(), start, options, tx, cancel.clone());
            Self { rx, cancel, handle }
        }

        fn watched(path: &Path, start: Option<Checkpoint>) -> Self {
            Self::start(path, start, TailOptions::default())
        }

        async fn next(&mut self) -> (TailItem, Checkpoint) {
            timeout(RECV_TIMEOUT, self.rx.recv())
                .await
                .expect("no tail item in time")
                .expect("tail channel closed")
        }

        async fn next_line(&mut self) -> (String, Checkpoint) {
            match self.next().await {
                (TailItem::Line { line, .. }, checkpoint) => (line, checkpoint),
                (other, _) => panic!("expected a line, got {other:?}"),
            }
        }

        async fn assert_quiet(&mut self) {
            if let Ok(item) = timeout(QUIET, self.rx.recv()).await {
                panic!("expected nothing more, got {item:?}");
            }
        }

        async fn stop(self) {
            self.cancel.cancel();
            timeout(RECV_TIMEOUT, self.handle)
                .await
                .expect("tail did not stop after cancel")
                .expect("tail task panicked");
        }
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(bytes).unwrap();
        file.flush().unwrap();
    }

    fn inode(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().ino()
    }

    fn json_line(index: usize) -> String {
        format!("{{\"n\":{index},\"text\":\"line number {index} ✓\"}}\n")
    }

    /// A small deterministic generator (xorshift64), so chunk splits vary without a dependency.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }
    }

    #[tokio::test]
    async fn tail_delivers_whole_lines_in_order_from_random_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut tail = Tail::watched(&path, None);
        let text: String = (0..300).map(json_line).collect();
        let bytes = text.as_bytes();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut written = 0;
        while written < bytes.len() {
            let n_bytes = (1 + rng.below(90)).min(bytes.len() - written);
            append(&path, &bytes[written..written + n_bytes]);
            written += n_bytes;
            if rng.below(4) == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let mut end = 0;
        for index in 0..300 {
            let (item, checkpoint) = tail.next().await;
            let expected = json_line(index);
            assert_eq!(
                item,
                TailItem::Line {
                    offset: end,
                    line: expected.trim_end().to_owned()
                }
            );
            end += expected.len() as u64;
            assert_eq!(
                checkpoint,
                Checkpoint {
                    path: path.clone(),
                    inode: inode(&path),
                    offset: end
                }
            );
        }
        tail.assert_quiet().await;
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_holds_a_partial_line_until_its_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":");
        let mut tail = Tail::watched(&path, None);
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        tail.assert_quiet().await;
        append(&path, b"2}");
        tail.assert_quiet().await;
        append(&path, b"\r\n");
        let (line, checkpoint) = tail.next_line().await;
        assert_eq!(line, "{\"b\":2}");
        assert_eq!(checkpoint.offset, 17);
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_waits_for_a_file_created_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.jsonl");
        let mut tail = Tail::watched(&path, None);
        tail.assert_quiet().await;
        append(&path, b"{\"first\":true}\n");
        assert_eq!(tail.next_line().await.0, "{\"first\":true}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_waits_for_a_directory_created_later() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("projects").join("-work-x");
        let path = sub.join("s.jsonl");
        let mut tail = Tail::watched(&path, None);
        tail.assert_quiet().await;
        std::fs::create_dir_all(&sub).unwrap();
        append(&path, b"{\"first\":true}\n");
        assert_eq!(tail.next_line().await.0, "{\"first\":true}");
        // Once the directory exists, its watch is armed on the next poll tick; from then on
        // events, not the poll, deliver lines quickly.
        tokio::time::sleep(DEFAULT_POLL_INTERVAL * 2).await;
        append(&path, b"{\"second\":true}\n");
        assert_eq!(tail.next_line().await.0, "{\"second\":true}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_reports_malformed_lines_and_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(
            &path,
            b"{\"a\":1}\nnot json at all\n\n{\"b\":2}\n\xff\xfe\n[3]\n",
        );
        let mut tail = Tail::watched(&path, None);
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        match tail.next().await {
            (
                TailItem::Malformed {
                    offset,
                    error,
                    excerpt,
                },
                checkpoint,
            ) => {
                assert_eq!(offset, 8);
                assert!(error.starts_with("not JSON"), "{error}");
                assert_eq!(excerpt, "not json at all");
                assert_eq!(checkpoint.offset, 24);
            }
            other => panic!("expected malformed, got {other:?}"),
        }
        // The blank line is skipped; the next checkpoint covers it.
        let (line, checkpoint) = tail.next_line().await;
        assert_eq!(line, "{\"b\":2}");
        assert_eq!(checkpoint.offset, 33);
        match tail.next().await {
            (TailItem::Malformed { offset, error, .. }, _) => {
                assert_eq!(offset, 33);
                assert!(error.starts_with("not UTF-8"), "{error}");
            }
            other => panic!("expected malformed, got {other:?}"),
        }
        assert_eq!(tail.next_line().await.0, "[3]");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_skips_an_overlong_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let options = TailOptions {
            max_line_bytes: 64,
            ..TailOptions::default()
        };
        let mut tail = Tail::start(&path, None, options);
        let long = format!("{{\"big\":\"{}\"}}", "x".repeat(500));
        append(&path, &long.as_bytes()[..40]);
        tokio::time::sleep(Duration::from_millis(50)).await;
        append(&path, &long.as_bytes()[40..]);
        append(&path, b"\n{\"ok\":1}\n");
        match tail.next().await {
            (
                TailItem::Malformed {
                    offset,
                    error,
                    excerpt,
                },
                checkpoint,
            ) => {
                assert_eq!(offset, 0);
                assert!(error.contains("longer than the limit of 64"), "{error}");
                assert!(excerpt.starts_with("{\"big\":\"xxx"), "{excerpt}");
                assert_eq!(checkpoint.offset, long.len() as u64 + 1);
            }
            other => panic!("expected malformed, got {other:?}"),
        }
        assert_eq!(tail.next_line().await.0, "{\"ok\":1}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_resumes_from_saved_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let saved = dir.path().join("t.checkpoint");
        for index in 0..5 {
            append(&path, json_line(index).as_bytes());
        }
        let mut tail = Tail::watched(&path, None);
        for index in 0..3 {
            let (line, checkpoint) = tail.next_line().await;
            assert_eq!(line, json_line(index).trim_end());
            // The consumer persists after handling each line; it stops after line 2.
            save_checkpoint(&saved, &checkpoint).await.unwrap();
        }
        tail.stop().await;

        // More lines land while no tailer runs, one of them split.
        append(&path, json_line(5).as_bytes());
        append(&path, &json_line(6).as_bytes()[..5]);

        let resume = load_checkpoint(&saved).await.unwrap().unwrap();
        let mut tail = Tail::watched(&path, Some(resume));
        for index in 3..6 {
            assert_eq!(tail.next_line().await.0, json_line(index).trim_end());
        }
        tail.assert_quiet().await;
        append(&path, &json_line(6).as_bytes()[5..]);
        append(&path, json_line(7).as_bytes());
        for index in 6..8 {
            assert_eq!(tail.next_line().await.0, json_line(index).trim_end());
        }
        tail.assert_quiet().await;
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_starts_over_when_checkpoint_names_another_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"a\":1}\n");
        let stale = Checkpoint {
            path: path.clone(),
            inode: inode(&path) + 1,
            offset: 8,
        };
        let mut tail = Tail::watched(&path, Some(stale));
        let (item, checkpoint) = tail.next().await;
        assert_eq!(
            item,
            TailItem::Rotated {
                new_inode: inode(&path)
            }
        );
        assert_eq!(checkpoint.offset, 0);
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_starts_over_when_checkpoint_is_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"a\":1}\n");
        let past = Checkpoint {
            path: path.clone(),
            inode: inode(&path),
            offset: 100,
        };
        let mut tail = Tail::watched(&path, Some(past));
        assert_eq!(tail.next().await.0, TailItem::Truncated);
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_follows_a_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"old\":1}\n");
        let mut tail = Tail::watched(&path, None);
        assert_eq!(tail.next_line().await.0, "{\"old\":1}");

        // The old file gets one more line and a half, then is replaced by a rename.
        append(&path, b"{\"old\":2}\n{\"old\":");
        let fresh = dir.path().join("t.jsonl.new");
        append(&fresh, b"{\"new\":1}\n");
        let new_inode = inode(&fresh);
        std::fs::rename(&fresh, &path).unwrap();

        assert_eq!(tail.next_line().await.0, "{\"old\":2}");
        match tail.next().await {
            (TailItem::Malformed { offset, error, .. }, _) => {
                assert_eq!(offset, 20);
                assert!(error.contains("unterminated"), "{error}");
            }
            other => panic!("expected the unterminated line, got {other:?}"),
        }
        let (item, checkpoint) = tail.next().await;
        assert_eq!(item, TailItem::Rotated { new_inode });
        assert_eq!(
            checkpoint,
            Checkpoint {
                path: path.clone(),
                inode: new_inode,
                offset: 0
            }
        );
        let (line, checkpoint) = tail.next_line().await;
        assert_eq!(line, "{\"new\":1}");
        assert_eq!(checkpoint.inode, new_inode);
        assert_eq!(checkpoint.offset, 10);
        append(&path, b"{\"new\":2}\n");
        assert_eq!(tail.next_line().await.0, "{\"new\":2}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_follows_a_file_removed_and_created_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"old\":1}\n");
        let mut tail = Tail::watched(&path, None);
        assert_eq!(tail.next_line().await.0, "{\"old\":1}");
        let moved = dir.path().join("t.jsonl.1");
        std::fs::rename(&path, &moved).unwrap();
        tail.assert_quiet().await;
        append(&path, b"{\"new\":1}\n");
        let (item, _) = tail.next().await;
        assert_eq!(
            item,
            TailItem::Rotated {
                new_inode: inode(&path)
            }
        );
        assert_eq!(tail.next_line().await.0, "{\"new\":1}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_restarts_a_truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":2}\n");
        let mut tail = Tail::watched(&path, None);
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        assert_eq!(tail.next_line().await.0, "{\"b\":2}");
        let before = inode(&path);
        std::fs::write(&path, b"{\"c\":3}\n").unwrap();
        assert_eq!(inode(&path), before, "truncation keeps the inode");
        let (item, checkpoint) = tail.next().await;
        assert_eq!(item, TailItem::Truncated);
        assert_eq!(checkpoint.offset, 0);
        let (line, checkpoint) = tail.next_line().await;
        assert_eq!(line, "{\"c\":3}");
        assert_eq!(checkpoint.offset, 8);
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_polls_without_a_watcher() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let options = TailOptions {
            poll_interval: Duration::from_millis(50),
            watch: WatchMode::PollOnly,
            ..TailOptions::default()
        };
        let mut tail = Tail::start(&path, None, options);
        append(&path, b"{\"a\":1}\n");
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        append(&path, b"{\"b\":");
        tokio::time::sleep(Duration::from_millis(120)).await;
        append(&path, b"2}\n");
        assert_eq!(tail.next_line().await.0, "{\"b\":2}");
        let fresh = dir.path().join("t.jsonl.new");
        append(&fresh, b"{\"c\":3}\n");
        std::fs::rename(&fresh, &path).unwrap();
        assert!(matches!(tail.next().await.0, TailItem::Rotated { .. }));
        assert_eq!(tail.next_line().await.0, "{\"c\":3}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_wakes_on_events_not_the_poll() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let options = TailOptions {
            poll_interval: Duration::from_secs(3600),
            ..TailOptions::default()
        };
        let mut tail = Tail::start(&path, None, options);
        // The only poll tick is the immediate first one; everything below is event driven.
        tokio::time::sleep(Duration::from_millis(100)).await;
        append(&path, b"{\"a\":1}\n");
        assert_eq!(tail.next_line().await.0, "{\"a\":1}");
        append(&path, b"{\"b\":2}\n");
        assert_eq!(tail.next_line().await.0, "{\"b\":2}");
        tail.stop().await;
    }

    #[tokio::test]
    async fn tail_stops_when_cancelled_or_consumer_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        // Cancelled while waiting for a file that never comes.
        Tail::watched(&path, None).stop().await;

        // Cancelled while blocked on a full channel.
        for index in 0..10 {
            append(&path, json_line(index).as_bytes());
        }
        let (tx, rx) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let handle = spawn_tail(path.clone(), None, tx, cancel.clone());
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
        timeout(RECV_TIMEOUT, handle).await.unwrap().unwrap();
        drop(rx);

        // The receiver is dropped.
        let (tx, rx) = mpsc::channel(1);
        let handle = spawn_tail(path.clone(), None, tx, CancellationToken::new());
        drop(rx);
        timeout(RECV_TIMEOUT, handle).await.unwrap().unwrap();
    }
}
