//! One daemon per home: the lock a running daemon holds, and the check `cohost log verify`
//! makes before it repairs anything.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, bail};

/// What a running daemon holds for its life: two daemons writing one log would corrupt it.
pub struct HomeLock {
    /// The lock that counts: on the home directory itself, which removing or replacing a file
    /// inside it cannot break (`rm $COHOST_HOME/lock` once let a second daemon in).
    _home: File,
    /// `lock`, locked too so that a daemon of an earlier release (which locks only this file)
    /// and this one still exclude each other; it holds the pid, for the refusal's text.
    _file: File,
}

/// Takes the home's lock before anything in it is written, or refuses with the running
/// daemon's pid.
pub fn lock_home(home: &Path) -> anyhow::Result<HomeLock> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(home)
        .with_context(|| format!("failed to open {} (it must be a directory)", home.display()))?;
    let refused = |home: &Path| {
        let holder = running_pid(home)
            .map(|pid| format!(" (pid {pid})"))
            .unwrap_or_default();
        anyhow::anyhow!(
            "another cohost daemon{holder} is already running with COHOST_HOME={}",
            home.display()
        )
    };
    match dir.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(refused(home)),
        Err(std::fs::TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("failed to lock {}", home.display()));
        }
    }
    let path = home.join("lock");
    // Like the token: never through a link, never blocked on a FIFO.
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .with_context(|| {
            format!(
                "failed to open {} (it must be a regular file)",
                path.display()
            )
        })?;
    if !file.metadata()?.file_type().is_file() {
        bail!("refusing {}: it is not a regular file", path.display());
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(refused(home)),
        Err(std::fs::TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("failed to lock {}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(HomeLock {
        _home: dir,
        _file: file,
    })
}

/// Whether a daemon holds `home` now (for `cohost log verify`, which must not repair under a
/// running daemon).
pub fn home_is_locked(home: &Path) -> bool {
    let locked = |file: std::io::Result<File>| {
        file.is_ok_and(|f| matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)))
    };
    locked(
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(home),
    ) || locked(File::open(home.join("lock")))
}

/// The pid the running daemon wrote into `lock` (or, if that file was removed, into
/// `daemon.json`).
fn running_pid(home: &Path) -> Option<u32> {
    crate::core::private_file::read(&home.join("lock"), 64)
        .ok()
        .flatten()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| text.trim().parse().ok())
        .or_else(|| {
            let bytes = crate::core::private_file::read(&home.join("daemon.json"), 64 * 1024)
                .ok()
                .flatten()?;
            let file: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            file["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok())
        })
}
