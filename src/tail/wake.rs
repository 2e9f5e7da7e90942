//! The follower's wake-ups: an inotify watch (through `notify`) on the tailed file's parent
//! directory, so a file created, renamed or replaced later is seen. The follower's slow poll
//! re-arms it and covers what it misses.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How the tailer learns that the file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// An inotify watch on the parent directory, plus the poll as a safety net.
    Notify,
    /// The poll alone (what happens anyway when no watcher can be created).
    PollOnly,
}

/// The inotify watch on the tailed file's directory. It is (re)armed from the poll tick: the
/// directory may not exist yet, or may be replaced, which silently ends an inotify watch.
pub(super) struct DirWatch {
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
    pub(super) fn new(path: &Path, mode: WatchMode, wake: Arc<tokio::sync::Notify>) -> Self {
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
    pub(super) async fn ensure(&mut self) {
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

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
