//! Every task id and queue asked at a hub, routed to where it lives: a hub task (the outbox),
//! this machine's own queue, or another machine's own task the hub can place (one it delivered,
//! or one whose `task.queued` it holds in memory) — the one path of HTTP's task routes and
//! MCP's task tools. Another machine's answers come back with their sessions qualified.

use std::time::Duration;

use super::{DELIVERY_TICK, Stage, parse, placed, qualify_task};
use crate::protocol::codes;
use crate::protocol::{
    CancelResult, EditBody, EditResult, LeaseReply, MachineLinkState, QueueView, RemoteOp,
    RemoteSurface, ResultChunk, TaskPhase, TaskReply, TaskView,
};
use crate::service::{Service, ServiceError};

/// Where a task id asked at a hub lives.
enum TaskHome {
    /// A hub task (`hubtask_…`).
    Hub,
    /// This machine's own queue.
    Local,
    /// Another machine's own task: its machine and session.
    Machine(String, String),
}

impl Service {
    /// Where `task` lives, asked at this daemon: a hub task, this machine's own, or another
    /// machine's own task that the hub can place — one it delivered, or one whose
    /// `task.queued` is among the events it holds in memory. Else `task_not_found`, saying the
    /// hub cannot tell.
    async fn task_home(&self, task: &str) -> Result<TaskHome, ServiceError> {
        if self.is_hub_task(task) {
            return Ok(TaskHome::Hub);
        }
        let Some(world) = self.hub_world() else {
            return Ok(TaskHome::Local);
        };
        match self.task(task) {
            Err(error) if error.code == codes::TASK_NOT_FOUND => {}
            _ => return Ok(TaskHome::Local),
        }
        if let Ok(outbox) = self.hub_tasks() {
            let tasks = outbox.tasks.lock().await;
            if let Some(held) = tasks
                .iter()
                .find(|t| t.machine_task.as_deref() == Some(task))
            {
                return Ok(TaskHome::Machine(
                    held.machine.clone(),
                    held.session.clone(),
                ));
            }
        }
        if let Some((machine, session)) = world.task_owner(task) {
            return Ok(TaskHome::Machine(machine, session));
        }
        Err(ServiceError::not_found(
            codes::TASK_NOT_FOUND,
            format!(
                "no task `{task}`: not this machine's, not one queued at this hub, and none of the events the hub holds in memory queued it, so the hub cannot tell which machine holds it (ask that machine)"
            ),
        ))
    }

    /// `GET /api/tasks/{id}` (MCP `task_status`), wherever the task lives (see
    /// [`Service::task_home`]); another machine's task as that machine answers, its session
    /// qualified.
    pub async fn world_task(
        &self,
        surface: RemoteSurface,
        task: &str,
    ) -> Result<TaskView, ServiceError> {
        match self.task_home(task).await? {
            TaskHome::Hub => self.hub_task(task).await,
            TaskHome::Local => self.task(task),
            TaskHome::Machine(machine, session) => {
                let op = RemoteOp::TaskStatus {
                    task: task.to_string(),
                };
                let answer = self.remote_from(surface, &machine, &session, op).await?;
                let mut view = parse::<TaskReply>(&machine, answer)?.task;
                qualify_task(&mut view, &machine);
                Ok(view)
            }
        }
    }

    /// MCP `wait_task`, wherever the task lives: a local task waits on the broadcast; a hub
    /// task or another machine's is read again whenever the hub hears from a machine (at
    /// least every second) until it finished or `wait` ran out.
    pub async fn world_wait_task(
        &self,
        surface: RemoteSurface,
        task: &str,
        wait: Duration,
    ) -> Result<TaskView, ServiceError> {
        let Some(world) = self.hub_world() else {
            return self.wait_task(task, wait).await;
        };
        if let TaskHome::Local = self.task_home(task).await? {
            return self.wait_task(task, wait).await;
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let mut changes = world.changes();
            let view = self.world_task(surface, task).await?;
            let now = tokio::time::Instant::now();
            if view.phase == TaskPhase::Finished || view.state.is_finished() || now >= deadline {
                return Ok(view);
            }
            tokio::select! {
                _ = tokio::time::sleep(DELIVERY_TICK.min(deadline - now)) => {}
                _ = self.shutdown.cancelled() => return Ok(view),
                _ = changes.changed() => {}
            }
        }
    }

    /// `GET /api/tasks/{id}/result` (MCP `task_result`), wherever the task lives.
    pub async fn world_task_result(
        &self,
        surface: RemoteSurface,
        task: &str,
        offset: usize,
        max: usize,
    ) -> Result<ResultChunk, ServiceError> {
        match self.task_home(task).await? {
            TaskHome::Hub => self.hub_task_result(surface, task, offset, max).await,
            TaskHome::Local => self.task_result(task, offset, max),
            TaskHome::Machine(machine, session) => {
                let op = RemoteOp::TaskResult {
                    task: task.to_string(),
                    offset,
                    max_bytes: max,
                };
                let answer = self.remote_from(surface, &machine, &session, op).await?;
                parse(&machine, answer)
            }
        }
    }

    /// `POST /api/tasks/{id}/cancel` (MCP `cancel_task`), wherever the task lives (another
    /// machine cancels its own at its current lease generation).
    pub async fn world_cancel_task(
        &self,
        surface: RemoteSurface,
        task: &str,
        lease_generation: Option<u64>,
    ) -> Result<CancelResult, ServiceError> {
        match self.task_home(task).await? {
            TaskHome::Hub => self.cancel_hub_task(task).await,
            TaskHome::Local => self.cancel_task(task, lease_generation).await,
            TaskHome::Machine(machine, session) => {
                let op = RemoteOp::TaskCancel {
                    task: task.to_string(),
                };
                let answer = self.remote_from(surface, &machine, &session, op).await?;
                let mut result: CancelResult = parse(&machine, answer)?;
                qualify_task(&mut result.task, &machine);
                Ok(result)
            }
        }
    }

    /// `POST /api/tasks/{id}/edit` (MCP `edit_task`), wherever the task lives.
    pub async fn world_edit_task(
        &self,
        surface: RemoteSurface,
        task: &str,
        edit: EditBody,
    ) -> Result<EditResult, ServiceError> {
        self.world_revise(surface, task, edit, false).await
    }

    /// `POST /api/tasks/{id}/supersede` (MCP `supersede_task`), wherever the task lives.
    pub async fn world_supersede_task(
        &self,
        surface: RemoteSurface,
        task: &str,
        edit: EditBody,
    ) -> Result<EditResult, ServiceError> {
        self.world_revise(surface, task, edit, true).await
    }

    async fn world_revise(
        &self,
        surface: RemoteSurface,
        task: &str,
        edit: EditBody,
        supersede: bool,
    ) -> Result<EditResult, ServiceError> {
        match self.task_home(task).await? {
            TaskHome::Hub => self.revise_hub_task(surface, task, edit, supersede).await,
            TaskHome::Local if supersede => {
                self.supersede_task(task, edit.revision, &edit.text, edit.idempotency_key)
                    .await
            }
            TaskHome::Local => {
                self.edit_task(task, edit.revision, &edit.text, edit.idempotency_key)
                    .await
            }
            TaskHome::Machine(machine, session) => {
                let task = task.to_string();
                let op = if supersede {
                    RemoteOp::TaskSupersede { task, edit }
                } else {
                    RemoteOp::TaskEdit { task, edit }
                };
                let answer = self.remote_from(surface, &machine, &session, op).await?;
                let mut result: EditResult = parse(&machine, answer)?;
                qualify_task(&mut result.task, &machine);
                if let Some(old) = &mut result.superseded {
                    qualify_task(old, &machine);
                }
                Ok(result)
            }
        }
    }

    /// `GET /api/sessions/{id}/queue` (MCP `queue`); at a hub, another machine's session: its
    /// machine's queue (tasks the hub delivered named by their hub ids) followed by the tasks
    /// waiting at the hub for it; while the machine is down or does not answer, its last known
    /// lease and the hub's waiting tasks, `machineLink` `down`.
    pub async fn world_queue(
        &self,
        surface: RemoteSurface,
        id: &str,
    ) -> Result<QueueView, ServiceError> {
        let Some((machine, session)) = self.remote_id(id) else {
            return self.queue(self.local_id(id));
        };
        let world = self.known_machine(machine)?;
        let asked = if self.machine_up(machine) {
            Some(
                self.remote_from(surface, machine, session, RemoteOp::Queue {})
                    .await,
            )
        } else {
            None
        };
        let mut queue = match asked {
            Some(Ok(answer)) => {
                let mut queue: QueueView = parse(machine, answer)?;
                queue.machine_link = Some(MachineLinkState::Up);
                queue
            }
            Some(Err(error)) if error.code != codes::MACHINE_UNREACHABLE => return Err(error),
            _ => QueueView {
                session_id: String::new(),
                lease: world.last_lease(machine, session)?,
                running: Vec::new(),
                pending: Vec::new(),
                pending_total: 0,
                pending_truncated: false,
                recent: Vec::new(),
                machine_link: Some(MachineLinkState::Down),
            },
        };
        queue.session_id = crate::service::hub::qualify(machine, session);
        let outbox = self.hub_tasks()?;
        let tasks = outbox.tasks.lock().await;
        for view in queue
            .running
            .iter_mut()
            .chain(queue.pending.iter_mut())
            .chain(queue.recent.iter_mut())
        {
            qualify_task(view, machine);
            if let Some(held) = tasks.iter().find(|t| {
                t.machine == machine && t.machine_task.as_deref() == Some(view.task_id.as_str())
            }) {
                view.machine_task_id = Some(std::mem::replace(&mut view.task_id, held.id.clone()));
            }
        }
        let waiting: Vec<TaskView> = (0..tasks.len())
            .filter(|&i| {
                let t = &tasks[i];
                t.stage == Stage::Waiting && t.machine == machine && t.session == session
            })
            .map(|i| placed(&tasks, i))
            .collect();
        queue.pending_total += waiting.len();
        queue.pending.extend(waiting);
        Ok(queue)
    }

    /// `GET /api/sessions/{id}/lease`; at a hub, another machine's session's lease as its
    /// machine holds it now (a machine that is down: `machine_unreachable`, naming it).
    pub async fn world_lease(
        &self,
        surface: RemoteSurface,
        id: &str,
    ) -> Result<LeaseReply, ServiceError> {
        let Some((machine, session)) = self.remote_id(id) else {
            return Ok(LeaseReply {
                lease: self.lease(self.local_id(id))?,
                dropped: None,
            });
        };
        self.reachable(machine, session, "control lease")?;
        let answer = self
            .remote_from(surface, machine, session, RemoteOp::LeaseGet {})
            .await?;
        parse(machine, answer)
    }
}
