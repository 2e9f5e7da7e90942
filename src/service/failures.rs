//! The daemon-long tasks that panicked (`daemon.rs`'s `Essential`): their work stopped until the
//! daemon restarts, so `/api/health` (`failedTasks`, `ok: false`) and `cohost doctor` (an issue
//! each) say so. The daemon itself goes on: such a task keeps no state the others share, and a
//! panic that an input caused (a hub's message, a task in the log) would come back at every
//! restart.

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
fn line(task: &str, message: &str) -> String {
    format!("{task} panicked: {message}")
}

impl super::Service {
    /// The daemon's tasks that panicked, then the watchers' engine if it did: `/api/health`'s
    /// `failedTasks` and `cohost doctor`'s issues.
    pub(super) fn failed_tasks(&self) -> Vec<String> {
        let mut list = self.task_failures.list();
        list.extend(
            self.watch
                .failure()
                .map(|message| line("the watchers' engine", &message)),
        );
        list
    }
}
