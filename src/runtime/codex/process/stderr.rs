//! The bounded tail of a child's stderr ([`StderrTail`]): the last lines, stripped of ANSI
//! escapes and capped in length, for error messages about a backend that failed.

use super::*;
use crate::runtime::common::styled;

// ---------------------------------------------------------------------------------------------
// stderr tail

/// The last lines a child wrote to stderr (ANSI colours stripped), shared between the task
/// draining the pipe and whoever needs them for an error message. Cheap to clone.
#[derive(Clone)]
pub struct StderrTail {
    inner: Arc<TailInner>,
}

struct TailInner {
    max_lines: usize,
    lines: Mutex<VecDeque<String>>,
    /// Bumped on every pushed line; `finished` once the pipe reached EOF. Lets waiters sleep
    /// until something changes.
    progress: watch::Sender<TailProgress>,
}

#[derive(Clone, Copy, Debug, Default)]
struct TailProgress {
    n_lines: u64,
    finished: bool,
}

impl fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrTail")
            .field("lines", &self.lines())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl StderrTail {
    /// An empty tail keeping at most `max_lines` lines.
    pub fn new(max_lines: usize) -> Self {
        StderrTail {
            inner: Arc::new(TailInner {
                max_lines: max_lines.max(1),
                lines: Mutex::new(VecDeque::new()),
                progress: watch::Sender::new(TailProgress::default()),
            }),
        }
    }

    /// Starts a task that drains `reader` line by line into a new tail, logging each line at
    /// debug level under `label` (e.g. `codex[1234]`).
    pub fn drain<R>(reader: R, label: String) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = StderrTail::new(STDERR_TAIL_LINES);
        let writer = tail.clone();
        tokio::spawn(async move {
            let mut lines = LineReader::new(reader, STDERR_LINE_MAX_BYTES);
            loop {
                match lines.next_line().await {
                    Ok(Some(LineEvent::Line(line))) => {
                        // codex colours its tracing output.
                        let line = styled::strip(&String::from_utf8_lossy(line));
                        tracing::debug!(target: "cohost::runtime::codex::stderr", child = %label, "{line}");
                        writer.push_line(&line);
                    }
                    Ok(Some(LineEvent::TooLong { n_bytes })) => {
                        writer.push_line(&format!("[{n_bytes}-byte stderr line omitted]"));
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::debug!(child = %label, %err, "reading child stderr failed");
                        break;
                    }
                }
            }
            writer.finish();
        });
        tail
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.inner
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a line, dropping the oldest one when full.
    pub fn push_line(&self, line: &str) {
        {
            let mut lines = self.lock();
            if lines.len() == self.inner.max_lines {
                lines.pop_front();
            }
            lines.push_back(line.to_owned());
        }
        self.inner
            .progress
            .send_modify(|progress| progress.n_lines += 1);
    }

    /// Marks the stream as ended (the drain task does this at EOF).
    pub fn finish(&self) {
        self.inner
            .progress
            .send_modify(|progress| progress.finished = true);
    }

    /// Whether the stream has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.progress.borrow().finished
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// The kept lines joined with newlines (empty when there are none).
    pub fn render(&self) -> String {
        self.lines().join("\n")
    }

    /// Waits until the stream has ended, for at most `timeout`; returns whether it has.
    pub async fn wait_finished(&self, timeout: Duration) -> bool {
        let mut progress = self.inner.progress.subscribe();
        matches!(
            tokio::time::timeout(timeout, progress.wait_for(|progress| progress.finished)).await,
            Ok(Ok(_))
        )
    }

    /// The first kept line for which `find` returns something, waiting for new lines until
    /// `deadline`. `None` when the deadline passes or the stream ends without a match.
    pub(super) async fn wait_for_line<T>(
        &self,
        deadline: Instant,
        mut find: impl FnMut(&str) -> Option<T>,
    ) -> Option<T> {
        let mut progress = self.inner.progress.subscribe();
        loop {
            let finished = progress.borrow_and_update().finished;
            if let Some(found) = self.lock().iter().find_map(|line| find(line)) {
                return Some(found);
            }
            if finished {
                return None;
            }
            match tokio::time::timeout_at(deadline, progress.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}
