//! What the runtimes share: session ids, the checks of an agent adopted in its pane ([`adopted`]), finding the helper programs, the pane a runtime's TUI
//! runs in ([`pane`]: `launch.json`, `runner.jsonl`, the verified pane), the idempotent-inject
//! bookkeeping ([`inject`]), the mirror of a hosted session into the tracker ([`mirror`]), the
//! children a runtime starts and supervises ([`child`]: process groups, parent-death signal,
//! output tail), the live sessions and the appends of the hosts that keep one per session
//! ([`hosted`]), and the create options of the runtimes that gate tools by approval policy
//! ([`gated`]); a profile's secrets kept out of the event log ([`profile_secrets`]), and the attributes of a
//! pane capture the adopted TUIs' screen readers go by ([`styled`]); a session's follower run with
//! its panic caught, the session marked `lost` with the message ([`caught`]).
//! Runtimes import this; it imports no runtime.

pub mod adopted;
pub mod caught;
pub mod child;
pub mod gated;
pub mod hosted;
pub mod inject;
pub mod mirror;
pub mod pane;
pub mod profile_secrets;
pub mod styled;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The tmux session cohost opens panes in, unless a request names one.
pub const DEFAULT_TMUX_SESSION: &str = "cohost";

/// A mutex guard that survives a panicked holder (the data stays usable).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new hosted-session id: `cs_` and 16 random hex digits.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("cs_{hex}")
}

/// Finds a helper binary (`cohost-runner`, `cohost-hook`): `env_override` if set, else beside the
/// daemon's own executable (where `cargo install --path .` puts all three; or one level up, where
/// integration tests run from), else PATH. The error names the program, where it was looked
/// for, and how to install it.
pub fn sibling_binary(name: &str, env_override: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(env_override).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!(
                "{name} was not found: {env_override}={} is not a file",
                path.display()
            ));
        }
        return Ok(path);
    }
    let own_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    if let Some(dir) = &own_dir {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
        // Integration tests run from target/debug/deps.
        if let Some(parent) = dir.parent() {
            let candidate = parent.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    which(name).ok_or_else(|| {
        let beside = own_dir
            .map(|dir| format!("beside cohost (in {})", dir.display()))
            .unwrap_or_else(|| "beside cohost".to_string());
        format!(
            "{name} is missing: it is neither {beside} nor on PATH; install cohost, cohost-runner and cohost-hook together (`cargo install --path .` in cohost's source), or set {env_override}"
        )
    })
}

/// The first `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Writes a file only the daemon's user may read, atomically.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::core::private_file::write_atomic(path, bytes, 0o600)
}

/// Creates `dir` (and its parents) and makes it private to the daemon's user.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Sends a signal with `kill(1)` semantics through a child `kill` process, so the daemon needs
/// no unsafe code.
pub fn send_signal(pid: u32, signal: i32) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}
