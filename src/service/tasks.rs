//! The task queue and the control lease, as the surfaces reach them: each a call into the
//! [`TaskManager`](crate::tasks::TaskManager) below the service, with its error mapped once.

use super::{Service, ServiceError};
use crate::protocol::{
    CancelResult, EditResult, Lease, QueueView, ResultChunk, SendResult, TaskSource, TaskView,
};

/// The largest chunk of a task's result one read returns.
pub const MAX_RESULT_CHUNK: usize = crate::tasks::MAX_RESULT_CHUNK;

impl Service {
    /// Queues a prompt for the session as a task (a retry with the same key finds the first).
    pub async fn queue_task(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
        source: TaskSource,
    ) -> Result<SendResult, ServiceError> {
        Ok(self.tasks.send(session, text, key, source).await?)
    }

    pub fn task(&self, task: &str) -> Result<TaskView, ServiceError> {
        Ok(self.tasks.status(task)?)
    }

    /// The session's queue: its lease, the task in flight, the waiting ones, recent outcomes.
    pub fn queue(&self, session: &str) -> Result<QueueView, ServiceError> {
        Ok(self.tasks.queue(session)?)
    }

    /// A chunk of a finished task's final answer.
    pub fn task_result(
        &self,
        task: &str,
        offset: usize,
        max: usize,
    ) -> Result<ResultChunk, ServiceError> {
        Ok(self.tasks.result(task, offset, max)?)
    }

    pub async fn cancel_task(
        &self,
        task: &str,
        lease_generation: Option<u64>,
    ) -> Result<CancelResult, ServiceError> {
        Ok(self.tasks.cancel(task, lease_generation).await?)
    }

    /// Replaces a waiting task's prompt in place, if `revision` is still its revision.
    pub async fn edit_task(
        &self,
        task: &str,
        revision: u64,
        text: &str,
        key: Option<String>,
    ) -> Result<EditResult, ServiceError> {
        Ok(self.tasks.edit(task, revision, text, key).await?)
    }

    /// Cancels a waiting task and queues a replacement in its place.
    pub async fn supersede_task(
        &self,
        task: &str,
        revision: u64,
        text: &str,
        key: Option<String>,
    ) -> Result<EditResult, ServiceError> {
        Ok(self.tasks.supersede(task, revision, text, key).await?)
    }

    pub fn lease(&self, session: &str) -> Result<Lease, ServiceError> {
        Ok(self.tasks.lease(session)?)
    }

    /// A human takes the session's control lease.
    pub async fn takeover(&self, session: &str, by: Option<String>) -> Result<Lease, ServiceError> {
        Ok(self.tasks.takeover(session, by, "takeover").await?)
    }

    /// A human gives the lease back; with `drop_queued`, the waiting tasks are cancelled (their
    /// ids are returned).
    pub async fn release(
        &self,
        session: &str,
        by: Option<String>,
        drop_queued: bool,
    ) -> Result<(Lease, Vec<String>), ServiceError> {
        Ok(self.tasks.release(session, by, drop_queued).await?)
    }
}
