//! The daemon's own files in its state directory (the token, the snapshot, tail checkpoints):
//! opened without following symbolic links and without blocking, accepted only as regular files
//! owned by the daemon's user, and replaced atomically.
//!
//! Another local user (or a careless tool) can put a symlink, a FIFO or a file of theirs where
//! one of these files is expected. Following the link would read or chmod someone else's file;
//! opening a FIFO would block start-up for ever. [`read`] refuses all of these with a one-line
//! [`PrivateFileError`]; callers decide whether that stops the daemon (token, snapshot) or only
//! one task (a checkpoint).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a private file was refused or could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// The path is a symbolic link (it is never followed).
    #[error(
        "refusing {path}: it is a symbolic link (cohost never follows links in its state directory)"
    )]
    Symlink { path: PathBuf },
    /// The path is a FIFO, a socket, a device or a directory.
    #[error("refusing {path}: it is a {kind}, not a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    /// The file belongs to another user.
    #[error("refusing {path}: it is owned by uid {owner}, not by this user (uid {uid})")]
    WrongOwner { path: PathBuf, owner: u32, uid: u32 },
    /// The file is larger than its reader accepts.
    #[error("refusing {path}: it is larger than {max} bytes")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl From<PrivateFileError> for io::Error {
    fn from(error: PrivateFileError) -> Self {
        match error {
            PrivateFileError::Io { source, .. } => source,
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

/// The effective uid of this process.
pub fn current_uid() -> u32 {
    #[allow(unsafe_code)]
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    unsafe {
        libc::geteuid()
    }
}

fn kind_of(file_type: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Opens an existing private file for reading (and, with `write`, writing): `O_NOFOLLOW`,
/// `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer, and is then refused),
/// then checks it is a regular file owned by this user. `Ok(None)` when it does not exist.
pub fn open(path: &Path, write: bool) -> Result<Option<File>, PrivateFileError> {
    let io_error = |source| PrivateFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(PrivateFileError::Symlink {
                path: path.to_path_buf(),
            });
        }
        // Opening a FIFO for writing with O_NONBLOCK and no reader fails with ENXIO; a
        // directory opened for writing fails with EISDIR: report what the path is.
        Err(error) => {
            return Err(match fs::symlink_metadata(path) {
                Ok(metadata) if !metadata.file_type().is_file() => PrivateFileError::NotRegular {
                    path: path.to_path_buf(),
                    kind: kind_of(metadata.file_type()),
                },
                _ => io_error(error),
            });
        }
    };
    let metadata = file.metadata().map_err(io_error)?;
    if !metadata.file_type().is_file() {
        return Err(PrivateFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(metadata.file_type()),
        });
    }
    let uid = current_uid();
    if metadata.uid() != uid {
        return Err(PrivateFileError::WrongOwner {
            path: path.to_path_buf(),
            owner: metadata.uid(),
            uid,
        });
    }
    Ok(Some(file))
}

/// Reads a whole private file of at most `max` bytes; `Ok(None)` when it does not exist.
pub fn read(path: &Path, max: u64) -> Result<Option<Vec<u8>>, PrivateFileError> {
    let Some(file) = open(path, false)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| PrivateFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(PrivateFileError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    Ok(Some(bytes))
}

/// Replaces `path` with `bytes` atomically: `<path>.tmp` is created fresh (an old one, or a
/// link in its place, is removed first, never followed) with `mode`, written and synced, then
/// renamed over `path`, and the directory is synced. On any failure the temporary file is
/// removed, so a full disk never leaves an empty or partial one behind.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(error) = result {
        let _ = fs::remove_file(&tmp);
        return Err(error);
    }
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn reads_a_regular_file_and_reports_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert!(read(&path, 10).unwrap().is_none());
        fs::write(&path, b"hello").unwrap();
        assert_eq!(read(&path, 10).unwrap().unwrap(), b"hello");
        assert!(matches!(
            read(&path, 4),
            Err(PrivateFileError::TooLarge { .. })
        ));
    }

    #[test]
    fn refuses_a_symlink_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"secret").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = read(&link, 100).unwrap_err();
        assert!(matches!(error, PrivateFileError::Symlink { .. }), "{error}");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        // A dangling link too.
        fs::remove_file(&target).unwrap();
        assert!(matches!(
            read(&link, 100),
            Err(PrivateFileError::Symlink { .. })
        ));
    }

    #[test]
    fn refuses_a_fifo_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        let error = read(&fifo, 100).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(error.to_string().contains("FIFO"), "{error}");
        let error = open(&fifo, true).unwrap_err();
        assert!(error.to_string().contains("FIFO"), "{error}");
        let error = read(dir.path(), 100).unwrap_err();
        assert!(error.to_string().contains("directory"), "{error}");
    }

    #[test]
    fn refuses_a_file_of_another_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = if current_uid() == 0 {
            // As root: give a file away.
            let path = dir.path().join("theirs");
            fs::write(&path, b"x").unwrap();
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
            path
        } else {
            // Otherwise: a regular file root owns.
            PathBuf::from("/etc/passwd")
        };
        let error = read(&path, 1 << 20).unwrap_err();
        assert!(
            matches!(error, PrivateFileError::WrongOwner { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("owned by uid"), "{error}");
    }

    #[test]
    fn an_atomic_write_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert!(!dir.path().join("state.json.tmp").exists());
        // A link planted where the temporary file goes is removed, not written through.
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("state.json.tmp")).unwrap();
        write_atomic(&path, b"three", 0o600).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert_eq!(fs::read(&path).unwrap(), b"three");
        // A failed rename (the target is a directory) leaves nothing behind.
        let blocked = dir.path().join("blocked");
        fs::create_dir(blocked.join("")).unwrap();
        fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(write_atomic(&blocked, b"data", 0o600).is_err());
        assert!(!dir.path().join("blocked.tmp").exists());
    }
}
