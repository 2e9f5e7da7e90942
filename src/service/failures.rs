//! The daemon's tasks that panicked (`crate::failures`: the daemon-long ones, the sessions'
//! followers), then the watchers' engine if it did, as `/api/health` and `cohost doctor` show
//! them. The daemon itself goes on: such a task keeps no state the others share, and a panic
//! that an input caused (a hub's message, a task in the log) would come back at every restart.

use crate::failures::line;
pub use crate::failures::{MAX_FAILED_TASKS, TaskFailures};

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
