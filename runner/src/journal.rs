//! `SESSION_DIR/runner.jsonl`: the runner's lifecycle events, one JSON line each, appended
//! with a single `write` on an `O_APPEND` file (0600 when created) so the daemon's tail never
//! sees half a line. It owns the line format; it must never panic or stop the runner when the
//! file cannot be written (the problem goes to the pane's stderr instead).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// One line of `runner.jsonl` (the type is shared with the daemon).
pub use crate::boundary::RunnerEvent as Event;

pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: PathBuf) -> Self {
        Journal { path }
    }

    pub fn append(&self, event: &Event) {
        if let Err(error) = self.try_append(event) {
            let _ = writeln!(
                std::io::stderr(),
                "cohost-runner: cannot append to {}: {error}",
                self.path.display()
            );
        }
    }

    fn try_append(&self, event: &Event) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)?;
        let written = file.write(&line)?;
        if written < line.len() {
            file.write_all(&line[written..])?;
        }
        Ok(())
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
