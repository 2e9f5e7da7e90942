//! The tasks that panicked while the daemon went on: the daemon-long ones (`daemon.rs`'s
//! `Essential`) and the sessions' followers (`runtime::common::caught`). Their work stopped until
//! the daemon restarts, so `/api/health` (`failedTasks`, `ok: false`) and `cohost doctor` (an
//! issue each) say so. One list, shared by whoever records and whoever shows it.

use std::sync::{Arc, Mutex};

/// At most this many are kept, the first ones: the later are usually the same cause again.
pub const MAX_FAILED_TASKS: usize = 8;

/// The shared list, cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct TaskFailures(Arc<Mutex<Vec<String>>>);

impl TaskFailures {
    /// Records that `task` panicked with `message`.
    pub fn record(&self, task: &str, message: &str) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() < MAX_FAILED_TASKS {
            list.push(line(task, message));
        }
    }

    /// Each `<task> panicked: <message>`, in the order they failed.
    pub fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How a failed task is shown.
pub fn line(task: &str, message: &str) -> String {
    format!("{task} panicked: {message}")
}
