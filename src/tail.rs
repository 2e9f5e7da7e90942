//! A resumable tailer for one JSONL file that another process appends to (Claude's transcript,
//! our `hooks.jsonl`).
//!
//! It owns the read offset: it waits for the file to exist, reads from a [`Checkpoint`], keeps a
//! partial last line until its newline arrives, checks that every complete line is JSON, and
//! hands each line to its consumer over a bounded channel together with the checkpoint to
//! persist once the consumer has handled it. Restarting from that checkpoint resumes exactly:
//! no line is lost and none is delivered twice. It notices a replaced file (new inode →
//! [`TailItem::Rotated`]) and a truncated one ([`TailItem::Truncated`]).
//!
//! Wake-ups come from an inotify watch (through `notify`) on the file's parent directory, so a
//! file created, renamed or replaced later is seen; a slow poll is the safety net for missed
//! events, for a directory that does not exist yet, and for systems where no watcher can be
//! created. It never writes the file it tails and knows nothing about what the lines mean:
//! callers (the Claude host) parse them.

use std::ffi::OsString;
use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A good capacity for the channel handed to [`spawn_tail`]. The tailer waits when the channel
/// is full (the data stays on disk, so backpressure loses nothing), so the number only decides
/// how far reading may run ahead of the consumer: 256 lines hold several of Claude's 100 ms
/// flush batches, which are rarely more than a few dozen lines.
pub const TAIL_CHANNEL_CAPACITY: usize = 256;

/// How often the file is checked even when no watcher event arrived. Events normally trigger
/// reads within milliseconds; the poll only bounds the delay when an event was missed or no
/// watcher could be set up, so half a second is a fair price for one `stat` per tick.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The longest line delivered. Claude's transcript lines carry whole tool results and can be
/// large, but a line past 8 MiB is far beyond anything observed and is more likely garbage
/// than data; it is skipped to its newline and reported as [`TailItem::Malformed`], so a
/// runaway writer cannot make the daemon buffer without bound.
pub const DEFAULT_MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// How many bytes one `read` asks for.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// How many characters of a bad line [`TailItem::Malformed`] keeps, enough to recognise it in
/// a log without copying megabytes.
const EXCERPT_CHARS: usize = 200;

/// Where to resume a tail: the file (by path and inode) and the byte offset right after the
/// last line the consumer has handled. Persist it with [`save_checkpoint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub path: PathBuf,
    pub inode: u64,
    pub offset: u64,
}

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

/// How the tailer learns that the file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// An inotify watch on the parent directory, plus the poll as a safety net.
    Notify,
    /// The poll alone (what happens anyway when no watcher can be created).
    PollOnly,
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

/// Errors of [`save_checkpoint`] and [`load_checkpoint`]. Callers log them; a checkpoint that
/// cannot be loaded means the tail starts over from the beginning of the file.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint file exists but cannot be read.
    #[error("cannot read checkpoint {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint file holds no valid checkpoint (hand-edited, or from another version).
    #[error("checkpoint {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The checkpoint was written by a newer cohost in a format this one cannot read (the home's
    /// `format.json` normally refuses such a home first). The tail does not resume from it.
    #[error("checkpoint {path} has format {found}; this cohost reads formats up to {supported}")]
    Newer {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The checkpoint could not be encoded (its path is not UTF-8).
    #[error("cannot encode checkpoint for {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// Writing, syncing or renaming the checkpoint (or its temporary file) failed.
    #[error("cannot write checkpoint {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `checkpoint` to `file` atomically: a temporary file beside it is written and synced,
/// then renamed over `file`, and the directory is synced, so a crash leaves the old or the new
/// checkpoint, never half of one. One writer per checkpoint file.
pub async fn save_checkpoint(file: &Path, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
    let stored = StoredCheckpoint {
        format: crate::core::format::CHECKPOINT_FORMAT,
        checkpoint: checkpoint.clone(),
    };
    let bytes = serde_json::to_vec(&stored).map_err(|source| CheckpointError::Encode {
        path: checkpoint.path.clone(),
        source,
    })?;
    // Never through a link planted at the temporary path, and no temporary file left behind.
    let target = file.to_path_buf();
    tokio::task::spawn_blocking(move || {
        crate::core::private_file::write_atomic(&target, &bytes, 0o600)
    })
    .await
    .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())))
    .map_err(|source| CheckpointError::Write {
        path: file.to_path_buf(),
        source,
    })
}

/// A checkpoint as stored: `{"format":1,"path":…,"inode":…,"offset":…}`. Checkpoints written
/// before formats were numbered have no `format`: they are format 1.
#[derive(Serialize, Deserialize)]
struct StoredCheckpoint {
    #[serde(default = "first_format")]
    format: u32,
    #[serde(flatten)]
    checkpoint: Checkpoint,
}

fn first_format() -> u32 {
    1
}

/// The largest checkpoint file read (one holds a path and two numbers).
const MAX_CHECKPOINT_BYTES: u64 = 64 * 1024;

/// Reads a checkpoint written by [`save_checkpoint`]; `Ok(None)` when `file` does not exist.
/// A link, a FIFO or another user's file is refused (at once: a FIFO is not waited on).
pub async fn load_checkpoint(file: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let target = file.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        crate::core::private_file::read(&target, MAX_CHECKPOINT_BYTES)
    })
    .await
    .unwrap_or_else(|join| {
        Err(crate::core::private_file::PrivateFileError::Io {
            path: file.to_path_buf(),
            source: std::io::Error::other(join.to_string()),
        })
    });
    let bytes = match read {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(error) => {
            tracing::warn!(%error, "ignoring a tail checkpoint");
            return Err(CheckpointError::Read {
                path: file.to_path_buf(),
                source: error.into(),
            });
        }
    };
    let stored: StoredCheckpoint =
        serde_json::from_slice(&bytes).map_err(|source| CheckpointError::Parse {
            path: file.to_path_buf(),
            source,
        })?;
    if stored.format > crate::core::format::CHECKPOINT_FORMAT {
        return Err(CheckpointError::Newer {
            path: file.to_path_buf(),
            found: stored.format,
            supported: crate::core::format::CHECKPOINT_FORMAT,
        });
    }
    Ok(Some(stored.checkpoint))
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Why the tail loop ended.
#[derive(Debug)]
enum Stop {
    Cancelled,
    ConsumerGone,
}

/// The file currently being read and the line being assembled from it.
struct OpenFile {
    file: File,
    inode: u64,
    /// Bytes read from `file` so far: the end of the current, unfinished line.
    read_pos: u64,
    /// Where the current, unfinished line starts (right after the last complete line).
    line_start: u64,
    /// The bytes of the unfinished line, unless it is being skipped for its length.
    pending: Vec<u8>,
    /// Set while skipping a line longer than the limit: its excerpt, kept for the report.
    oversized: Option<String>,
}

impl OpenFile {
    fn new(file: File, inode: u64, offset: u64) -> Self {
        Self {
            file,
            inode,
            read_pos: offset,
            line_start: offset,
            pending: Vec::new(),
            oversized: None,
        }
    }

    /// Forgets the unfinished line after the file was rewound to offset 0.
    fn rewind(&mut self) {
        self.read_pos = 0;
        self.line_start = 0;
        self.pending.clear();
        self.oversized = None;
    }

    /// Appends bytes of the unfinished line, switching to skip mode past `max_line_bytes`.
    fn push_partial(&mut self, bytes: &[u8], max_line_bytes: usize) {
        if self.oversized.is_some() {
            return;
        }
        if self.pending.len() + bytes.len() > max_line_bytes {
            let mut head = std::mem::take(&mut self.pending);
            let room = (EXCERPT_CHARS * 4).saturating_sub(head.len());
            head.extend_from_slice(&bytes[..bytes.len().min(room)]);
            self.oversized = Some(excerpt(&String::from_utf8_lossy(&head)));
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }
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
        let offset = self.open.as_ref().map(|open| open.line_start);
        tracing::debug!(path = %self.path.display(), ?offset, reason = ?stop, "tail stopped");
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
                    if len < open.read_pos {
                        tracing::info!(
                            path = %self.path.display(),
                            size = len,
                            offset = open.read_pos,
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
        let (offset, announce) = match self.resume.take() {
            None => (0, None),
            Some(checkpoint) if checkpoint.inode != inode || checkpoint.path != self.path => {
                tracing::info!(
                    path = %self.path.display(),
                    old_inode = checkpoint.inode,
                    new_inode = inode,
                    "tailed file was replaced; reading the new one from the start"
                );
                (0, Some(TailItem::Rotated { new_inode: inode }))
            }
            Some(checkpoint) if len < checkpoint.offset => {
                tracing::info!(
                    path = %self.path.display(),
                    size = len,
                    offset = checkpoint.offset,
                    "tailed file is shorter than its checkpoint; reading it again from the start"
                );
                (0, Some(TailItem::Truncated))
            }
            Some(checkpoint) => (checkpoint.offset, None),
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
        self.open = Some(OpenFile::new(file, inode, offset));
        if let Some(item) = announce {
            self.deliver(item, inode, 0).await?;
        }
        Ok(())
    }

    /// Rewinds the open file to offset 0 after a truncation, dropping the unfinished line.
    async fn reopen_at_start(&mut self, inode: u64) {
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
        open.rewind();
    }

    /// Forgets the open file (replaced or removed). Its unterminated last line, if any, is
    /// reported as malformed: no newline will ever complete it.
    async fn close(&mut self) -> Result<(), Stop> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let end = open.read_pos;
        self.resume = Some(self.checkpoint(open.inode, end));
        if open.read_pos > open.line_start {
            let shown = match &open.oversized {
                Some(shown) => shown.clone(),
                None => excerpt(&String::from_utf8_lossy(&open.pending)),
            };
            let item = self.malformed(
                open.line_start,
                "unterminated last line of a file that was replaced or removed".to_owned(),
                shown,
            );
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
                        offset = open.read_pos,
                        error = %err,
                        "cannot read tailed file"
                    );
                    return Ok(());
                }
            };
            let inode = open.inode;
            let mut complete = Vec::new();
            let mut rest = &chunk[..n_read];
            while let Some(newline) = rest.iter().position(|&byte| byte == b'\n') {
                let (head, tail) = rest.split_at(newline);
                rest = &tail[1..];
                open.push_partial(head, self.options.max_line_bytes);
                open.read_pos += head.len() as u64 + 1;
                let start = open.line_start;
                let body = std::mem::take(&mut open.pending);
                let oversized = open.oversized.take();
                open.line_start = open.read_pos;
                complete.push((start, open.read_pos, body, oversized));
            }
            open.push_partial(rest, self.options.max_line_bytes);
            open.read_pos += rest.len() as u64;
            for (start, end, body, oversized) in complete {
                if let Some(item) = self.classify(start, end, body, oversized) {
                    self.deliver(item, inode, end).await?;
                }
            }
        }
    }

    /// Turns one complete line into the item to deliver; `None` for a blank line.
    fn classify(
        &self,
        start: u64,
        end: u64,
        mut body: Vec<u8>,
        oversized: Option<String>,
    ) -> Option<TailItem> {
        if let Some(shown) = oversized {
            let error = format!(
                "line of {} bytes is longer than the limit of {} bytes",
                end - start - 1,
                self.options.max_line_bytes
            );
            return Some(self.malformed(start, error, shown));
        }
        if body.last() == Some(&b'\r') {
            body.pop();
        }
        let line = match String::from_utf8(body) {
            Ok(line) => line,
            Err(err) => {
                let error = format!("not UTF-8: {}", err.utf8_error());
                let shown = excerpt(&String::from_utf8_lossy(err.as_bytes()));
                return Some(self.malformed(start, error, shown));
            }
        };
        if line.trim().is_empty() {
            return None;
        }
        match serde_json::from_str::<serde::de::IgnoredAny>(&line) {
            Ok(_) => Some(TailItem::Line {
                offset: start,
                line,
            }),
            Err(err) => Some(self.malformed(start, format!("not JSON: {err}"), excerpt(&line))),
        }
    }

    /// Logs a bad line with path and offset, and builds its item.
    fn malformed(&self, offset: u64, error: String, excerpt: String) -> TailItem {
        tracing::warn!(path = %self.path.display(), offset, %error, %excerpt, "malformed JSONL line");
        TailItem::Malformed {
            offset,
            error,
            excerpt,
        }
    }

    fn checkpoint(&self, inode: u64, offset: u64) -> Checkpoint {
        Checkpoint {
            path: self.path.clone(),
            inode,
            offset,
        }
    }

    /// Sends one item with its checkpoint, waiting while the channel is full.
    async fn deliver(&self, item: TailItem, inode: u64, offset: u64) -> Result<(), Stop> {
        let checkpoint = self.checkpoint(inode, offset);
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Stop::Cancelled),
            sent = self.tx.send((item, checkpoint)) => sent.map_err(|_| Stop::ConsumerGone),
        }
    }
}

/// The inotify watch on the tailed file's directory. It is (re)armed from the poll tick: the
/// directory may not exist yet, or may be replaced, which silently ends an inotify watch.
struct DirWatch {
    mode: WatchMode,
    dir: PathBuf,
    file_name: Option<OsString>,
    wake: Arc<tokio::sync::Notify>,
    /// The live watcher and the inode of the directory it watches.
    watcher: Option<(notify::RecommendedWatcher, u64)>,
    /// Whether a failure to watch was already logged (the poll retries every tick).
    warned: bool,
}

impl DirWatch {
    fn new(path: &Path, mode: WatchMode, wake: Arc<tokio::sync::Notify>) -> Self {
        Self {
            mode,
            dir: parent_dir(path),
            file_name: path.file_name().map(|name| name.to_os_string()),
            wake,
            watcher: None,
            warned: false,
        }
    }

    /// Makes sure the directory as it is now is watched.
    async fn ensure(&mut self) {
        if self.mode == WatchMode::PollOnly {
            return;
        }
        let dir_inode = match tokio::fs::metadata(&self.dir).await {
            Ok(meta) => meta.ino(),
            Err(_) => {
                // Not there (yet): the poll covers it until it exists.
                self.watcher = None;
                return;
            }
        };
        if self
            .watcher
            .as_ref()
            .is_some_and(|(_, watched)| *watched == dir_inode)
        {
            return;
        }
        self.watcher = None;
        match self.watch() {
            Ok(watcher) => {
                tracing::debug!(dir = %self.dir.display(), "watching directory of tailed file");
                self.watcher = Some((watcher, dir_inode));
                self.warned = false;
                // Anything that happened before the watch was armed is caught by this read.
                self.wake.notify_one();
            }
            Err(err) => {
                if !self.warned {
                    tracing::warn!(
                        dir = %self.dir.display(),
                        error = %err,
                        "cannot watch directory; polling instead"
                    );
                    self.warned = true;
                }
            }
        }
    }

    fn watch(&self) -> notify::Result<notify::RecommendedWatcher> {
        use notify::Watcher as _;
        let wake = self.wake.clone();
        let file_name = self.file_name.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let relevant = match &event {
                    Ok(event) => {
                        event.need_rescan()
                            || event.paths.is_empty()
                            || event
                                .paths
                                .iter()
                                .any(|path| path.file_name() == file_name.as_deref())
                    }
                    Err(_) => true,
                };
                if relevant {
                    // `Notify` keeps one permit, so a burst of events wakes the tailer once.
                    wake.notify_one();
                }
            })?;
        watcher.watch(&self.dir, notify::RecursiveMode::NonRecursive)?;
        Ok(watcher)
    }
}

/// The first [`EXCERPT_CHARS`] characters of `text`.
fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use tokio::time::timeout;

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

    #[tokio::test]
    async fn checkpoint_round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cp.json");
        assert!(load_checkpoint(&file).await.unwrap().is_none());
        let checkpoint = Checkpoint {
            path: dir.path().join("t.jsonl"),
            inode: 42,
            offset: 1234,
        };
        save_checkpoint(&file, &checkpoint).await.unwrap();
        assert_eq!(
            load_checkpoint(&file).await.unwrap(),
            Some(checkpoint.clone())
        );
        let moved = Checkpoint {
            offset: 2000,
            ..checkpoint
        };
        save_checkpoint(&file, &moved).await.unwrap();
        assert_eq!(load_checkpoint(&file).await.unwrap(), Some(moved));
        assert!(!dir.path().join("cp.json.tmp").exists());

        std::fs::write(&file, b"{\"path\":").unwrap();
        let err = load_checkpoint(&file).await.unwrap_err();
        assert!(matches!(err, CheckpointError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("cp.json"), "{err}");
    }

    #[tokio::test]
    async fn checkpoints_carry_their_format_and_older_ones_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cp.json");
        let checkpoint = Checkpoint {
            path: "/t.jsonl".into(),
            inode: 7,
            offset: 99,
        };
        save_checkpoint(&file, &checkpoint).await.unwrap();
        let stored: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(stored["format"], crate::core::format::CHECKPOINT_FORMAT);
        // Written before formats were numbered: no `format`.
        std::fs::write(&file, br#"{"path":"/t.jsonl","inode":7,"offset":99}"#).unwrap();
        assert_eq!(load_checkpoint(&file).await.unwrap(), Some(checkpoint));
        // From a newer cohost: refused, not misread.
        let newer = crate::core::format::CHECKPOINT_FORMAT + 1;
        std::fs::write(
            &file,
            format!(r#"{{"format":{newer},"path":"/t.jsonl","inode":7,"offset":99,"more":1}}"#),
        )
        .unwrap();
        let err = load_checkpoint(&file).await.unwrap_err();
        assert!(matches!(err, CheckpointError::Newer { .. }), "{err}");
    }
}
