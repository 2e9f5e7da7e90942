//! `SESSION_DIR/runner.jsonl`: the runner's lifecycle events, one JSON line each, appended
//! with a single `write` on an `O_APPEND` file (0600 when created) so the daemon's tail never
//! sees half a line. It owns the line format; it must never panic or stop the runner when the
//! file cannot be written (the problem goes to the pane's stderr instead).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// One line of `runner.jsonl`. Every line has `event`, `runnerPid`, `at` (ms since the epoch)
/// and `launch` (1 for the first launch attempt, +1 per relaunch).
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event<'a> {
    Started {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        pid: u32,
        at: u64,
        launch: u32,
    },
    Exited {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        pid: u32,
        code: Option<i32>,
        signal: Option<i32>,
        at: u64,
        launch: u32,
    },
    Stopped {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        signal: i32,
        at: u64,
        launch: u32,
    },
    /// This launch attempt did not start a child; the runner waits for SIGUSR1/SIGTERM.
    Error {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        message: &'a str,
        at: u64,
        launch: u32,
    },
    /// Something went wrong but the launch goes ahead (e.g. the `.claude.json` seed).
    Warning {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        message: &'a str,
        at: u64,
        launch: u32,
    },
}

pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: PathBuf) -> Self {
        Journal { path }
    }

    pub fn append(&self, event: &Event<'_>) {
        if let Err(error) = self.try_append(event) {
            let _ = writeln!(
                std::io::stderr(),
                "cohost-runner: cannot append to {}: {error}",
                self.path.display()
            );
        }
    }

    fn try_append(&self, event: &Event<'_>) -> std::io::Result<()> {
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
