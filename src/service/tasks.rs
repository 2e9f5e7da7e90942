//! The task queue and the control lease, as the surfaces reach them: each a call into the
//! [`TaskManager`](crate::tasks::TaskManager) below the service, with its error mapped once.

use super::{ErrorKind, Service, ServiceError};
use crate::protocol::codes;
use crate::protocol::{
    CancelResult, EditResult, Lease, LeaseBody, LeaseReply, QueueView, ResultChunk, SendResult,
    TaskSource, TaskView,
};

/// A lease body's refusal before anything is done: the field it names and why (the HTTP route
/// and a hub's `lease` command refuse alike).
pub fn lease_check(body: &LeaseBody) -> Result<(), (&'static str, String)> {
    if let Some(by) = &body.by
        && by.len() > 256
    {
        return Err(("by", "`by` must be at most 256 bytes".to_string()));
    }
    match body.action.as_str() {
        "takeover" if body.drop_queued => {
            Err(("dropQueued", "`dropQueued` goes with `release`".to_string()))
        }
        "takeover" | "release" => Ok(()),
        other => Err((
            "action",
            format!("`action` must be takeover or release, got `{other}`"),
        )),
    }
}

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

    /// `POST /api/sessions/{id}/lease`: a human takes over or releases the session, as the
    /// body says (refused by [`lease_check`] first).
    pub async fn set_lease(
        &self,
        session: &str,
        body: LeaseBody,
    ) -> Result<LeaseReply, ServiceError> {
        lease_check(&body).map_err(|(_, message)| {
            ServiceError::new(ErrorKind::Invalid, codes::INVALID_FIELD, message)
        })?;
        if body.action == "takeover" {
            let lease = self.takeover(session, body.by).await?;
            return Ok(LeaseReply {
                lease,
                dropped: None,
            });
        }
        let (lease, dropped) = self.release(session, body.by, body.drop_queued).await?;
        Ok(LeaseReply {
            lease,
            dropped: Some(dropped),
        })
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
