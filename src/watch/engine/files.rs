//! Discovery: one non-recursive inotify watch per directory under each format's roots (new
//! directories get theirs when they appear), the directories of single files, roots that do not
//! exist yet (waited for from their deepest existing ancestor), the slow rescan of directories the
//! inotify limit left unwatched, the start-up catch-up, and what an event on a path means
//! ([`Engine::check_path`]: a directory appeared or went away, a record file appeared, changed or
//! was removed).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use notify::Watcher;

use super::liveness::Scope;
use super::reading::FileChange;
use super::thread::Thread;
use super::{DB_SETTLE, Engine};
use crate::tail::LineBuffer;
use crate::watch::format::{FileKind, Locator};

impl Engine {
    // ------------------------------------------------------------------ discovery

    pub(super) fn catch_up(&mut self) {
        let mut roots = Vec::new();
        for (index, format) in self.formats.iter().enumerate() {
            for root in format.roots(&self.env) {
                roots.push((root, index, true));
            }
            for file in format.files(&self.env) {
                roots.push((file, index, false));
            }
        }
        {
            let mut view = self.view();
            view.agents = self
                .formats
                .iter()
                .map(|f| f.agent().as_str().to_string())
                .collect();
        }
        for (path, index, recursive) in roots {
            if recursive {
                if path.is_dir() {
                    self.add_tree(&path, index);
                } else {
                    self.add_pending(path, index, true);
                }
            } else {
                self.single.insert(path.clone(), index);
                match path.parent() {
                    Some(parent) if parent.is_dir() => {
                        let parent = parent.to_path_buf();
                        self.watch_plain(&parent);
                        if path.is_file() {
                            self.register(&path, index);
                        }
                    }
                    _ => {
                        self.add_pending(path, index, false);
                    }
                }
            }
        }
        // A root created while we looked.
        self.activate_pending();
        // Threads found during the catch-up: emit each once, if its process lives or the
        // tracker had it.
        self.find_processes(Scope::All);
        self.catching_up = false;
        let keys: Vec<String> = self.threads.keys().cloned().collect();
        for key in keys {
            let keep = self.threads.get(&key).is_some_and(|thread| {
                thread.emitted.is_some()
                    || (thread.agent_pid().is_some() && !thread.gone)
                    || written_lately(thread)
            });
            if keep {
                self.emit(&key);
            }
        }
        self.saved_files.clear();
        self.mark_dirty();
    }

    /// Watches `dir` and every directory below it, and registers their record files.
    pub(super) fn add_tree(&mut self, dir: &Path, format: usize) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            self.dir_owner.insert(dir.clone(), format);
            self.watch_dir(&dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if file_type.is_dir() {
                    if !self.dir_owner.contains_key(&path) {
                        stack.push(path);
                    }
                } else if file_type.is_file() && !self.files.contains_key(&path) {
                    self.register(&path, format);
                }
            }
        }
    }

    /// Waits for `path` from its deepest existing ancestor; returns that ancestor.
    pub(super) fn add_pending(
        &mut self,
        path: PathBuf,
        format: usize,
        recursive: bool,
    ) -> Option<PathBuf> {
        let ancestor = deepest_existing(&path);
        if let Some(dir) = &ancestor {
            self.watch_plain(dir);
        }
        if !self.pending.iter().any(|(p, _, _)| *p == path) {
            self.pending.push((path, format, recursive));
        }
        ancestor
    }

    /// Re-checks the roots that did not exist: activates those that appeared, and moves the
    /// watch down to the deepest existing ancestor of the others. A level created between our
    /// look and our watch would send no event, so it looks again until nothing moved.
    pub(super) fn activate_pending(&mut self) {
        for _ in 0..16 {
            let pending = std::mem::take(&mut self.pending);
            let mut moved = false;
            for (path, format, recursive) in pending {
                if recursive && path.is_dir() {
                    tracing::info!(root = %path.display(), "a watched root appeared");
                    self.add_tree(&path, format);
                } else if !recursive && path.parent().is_some_and(Path::is_dir) {
                    if let Some(parent) = path.parent() {
                        let parent = parent.to_path_buf();
                        self.watch_plain(&parent);
                    }
                    if path.is_file() {
                        self.register(&path, format);
                    }
                } else {
                    let watched = self.add_pending(path.clone(), format, recursive);
                    // Created between our look and our watch on its parent: no event will
                    // say so, so look again (the root itself, not only its ancestors).
                    let appeared = if recursive {
                        path.is_dir()
                    } else {
                        path.parent().is_some_and(Path::is_dir)
                    };
                    moved |= appeared || deepest_existing(&path) != watched;
                }
            }
            if !moved {
                break;
            }
        }
    }

    pub(super) fn watch_plain(&mut self, dir: &Path) {
        self.plain_dirs.insert(dir.to_path_buf());
        self.watch_dir(dir);
    }

    pub(super) fn watch_dir(&mut self, dir: &Path) {
        if self.watched.contains(dir) {
            return;
        }
        let over_limit = self
            .limits
            .max_watches
            .is_some_and(|max| self.watched.len() >= max);
        let result = match (&mut self.watcher, over_limit) {
            (_, true) => Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch)),
            (Some(watcher), false) => watcher.watch(dir, notify::RecursiveMode::NonRecursive),
            (None, false) => Err(notify::Error::generic("no inotify watcher")),
        };
        match result {
            Ok(()) => {
                self.watched.insert(dir.to_path_buf());
                self.unwatched.remove(dir);
            }
            Err(error) => {
                if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) && !self.warned_limit {
                    self.warned_limit = true;
                    tracing::warn!(
                        dir = %dir.display(),
                        watched = self.watched.len(),
                        "the inotify watch limit is reached (fs.inotify.max_user_watches): directories past it are rescanned every {:?} instead",
                        self.limits.rescan_interval
                    );
                } else if !matches!(error.kind, notify::ErrorKind::MaxFilesWatch) {
                    tracing::warn!(dir = %dir.display(), %error, "cannot watch a directory; rescanning it slowly");
                }
                self.unwatched.insert(dir.to_path_buf());
                if self.next_rescan.is_none() {
                    self.next_rescan = Some(Instant::now() + self.limits.rescan_interval);
                }
            }
        }
    }

    /// The slow rescan, only of what could not be watched.
    pub(super) fn rescan_unwatched(&mut self) {
        self.next_rescan = None;
        let dirs: Vec<PathBuf> = self.unwatched.iter().cloned().collect();
        for dir in dirs {
            self.unwatched.remove(&dir);
            self.watch_dir(&dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let format = self.dir_owner.get(&dir).copied();
            for entry in entries.flatten() {
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir {
                    if let Some(format) = format
                        && !self.dir_owner.contains_key(&path)
                    {
                        self.add_tree(&path, format);
                    }
                } else {
                    self.check_path(&path);
                }
            }
        }
        if self.watcher.is_none() {
            let files: Vec<PathBuf> = self.files.keys().cloned().collect();
            for path in files {
                self.check_path(&path);
            }
            self.activate_pending();
        }
    }

    /// The format and kind of a record file, or `None` for anything else.
    pub(super) fn classify(&self, path: &Path) -> Option<(usize, FileKind)> {
        let format = match self.single.get(path) {
            Some(format) => *format,
            None => *self.dir_owner.get(path.parent()?)?,
        };
        if let Some(kind) = self.formats[format].classify(path) {
            return Some((format, kind));
        }
        None
    }

    /// A database's `-wal` stands for the database.
    pub(super) fn database_of(&self, path: &Path) -> Option<PathBuf> {
        let name = path.file_name()?.to_str()?;
        let db = path.with_file_name(name.strip_suffix("-wal")?);
        matches!(self.classify(&db), Some((_, FileKind::Database))).then_some(db)
    }

    /// Something happened at `path`: a directory appeared, a record file changed, appeared or
    /// went away.
    pub(super) fn check_path(&mut self, path: &Path) {
        let meta = std::fs::symlink_metadata(path).ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            if let Some(parent) = path.parent()
                && let Some(format) = self.dir_owner.get(parent).copied()
                && !self.dir_owner.contains_key(path)
            {
                self.add_tree(path, format);
            }
            if !self.pending.is_empty() {
                self.activate_pending();
            }
            return;
        }
        if meta.is_none() && self.dir_owner.contains_key(path) {
            // A watched directory went away (its watch with it).
            self.dir_owner.remove(path);
            self.watched.remove(path);
            self.unwatched.remove(path);
            return;
        }
        if !self.pending.is_empty()
            && self
                .pending
                .iter()
                .any(|(p, _, _)| p.starts_with(path) || p.parent() == Some(path))
        {
            self.activate_pending();
        }
        let path = self.database_of(path).unwrap_or_else(|| path.to_path_buf());
        let Some(meta) = meta.filter(|m| m.is_file()).or_else(|| {
            // The `-wal` changed: the database itself is what we look at.
            std::fs::metadata(&path).ok().filter(|m| m.is_file())
        }) else {
            self.file_removed(&path);
            return;
        };
        let Some(known) = self.files.get(&path) else {
            if let Some((format, _)) = self.classify(&path) {
                self.register(&path, format);
            }
            return;
        };
        let format = known.format;
        match known.change(meta.ino(), meta.len()) {
            FileChange::Replaced => {
                // Replaced: the old file is gone, this is a new one.
                self.file_removed(&path);
                if let Some((format, _)) = self.classify(&path) {
                    self.register(&path, format);
                }
            }
            // Registered at its size at start-up and growing now: its first read.
            FileChange::FirstRead => self.first_read(&path, meta.len()),
            FileChange::Truncated => {
                tracing::info!(path = %path.display(), "a followed file was truncated; reading it again");
                let decoder = self.formats[format].decoder(&path, None);
                if let Some(file) = self.files.get_mut(&path) {
                    file.reader = LineBuffer::at(0);
                    file.decoder = Some(decoder);
                }
                self.read_lines(&path);
            }
            FileChange::Grew => self.read_lines(&path),
            FileChange::Unchanged => {}
            FileChange::Snapshot => self.read_snapshot(&path),
            FileChange::Database => {
                self.poll_database(&path);
                self.db_settle = Some(Instant::now() + DB_SETTLE);
            }
        }
    }

    pub(super) fn file_removed(&mut self, path: &Path) {
        let Some(mut file) = self.files.remove(path) else {
            return;
        };
        let mut out = Vec::new();
        if let Some(decoder) = file.decoder.as_mut() {
            decoder.removed(&mut out);
        }
        self.observe_all(path, out.into_iter().map(|o| (Locator::Snapshot, o)));
        for (key, thread) in self.threads.iter_mut() {
            if thread.files.remove(path) {
                self.view_changed.insert(key.clone());
            }
        }
        self.view().files_known = self.files.len() as u64;
        self.mark_dirty();
    }
}

/// How recent a thread's last write must be for the catch-up to show it without a live
/// process: an agent whose process cohost cannot find (or a file written while the daemon
/// started) still shows; the history does not.
pub(super) const CATCH_UP_RECENT: Duration = Duration::from_secs(10 * 60);

/// Whether one of the thread's files was modified in the last [`CATCH_UP_RECENT`].
pub(super) fn written_lately(thread: &Thread) -> bool {
    thread.files.iter().any(|file| {
        std::fs::metadata(file)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age <= CATCH_UP_RECENT)
    })
}

/// The deepest existing directory above `path`.
pub(super) fn deepest_existing(path: &Path) -> Option<PathBuf> {
    let mut ancestor = path.parent();
    while let Some(dir) = ancestor {
        if dir.is_dir() {
            return Some(dir.to_path_buf());
        }
        ancestor = dir.parent();
    }
    None
}
