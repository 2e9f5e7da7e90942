//! Tasks queued at a hub for another machine's session (`POST /api/sessions/<machine>/<id>/tasks`
//! at a hub): the hub's outbox.
//!
//! The owning machine stays the single writer of its sessions: a task is delivered into that
//! machine's own queue (the `task` op), which owns it from then on — it decides when it runs,
//! records it in its log, and answers for it (the hub's reads and cancels of a delivered task
//! are forwarded to it). Until it is delivered, the task waits here, at the hub, in
//! `$COHOST_HOME/hub/tasks.json` (replaced atomically on every change, so a restarted hub keeps
//! it), shown as `waiting` for `machine_unreachable` with the machine named, and may be
//! cancelled here; the delivery loop hands it over once the machine's link is up again.
//!
//! Exactly once: every delivery carries the same idempotency key (the caller's, else one made
//! from the hub task's id), so a delivery sent again — after a timeout, or after a hub that
//! died before it wrote `delivered` — finds the first task in the machine's queue. Delivery and
//! cancellation hold one lock, so a task cancelled here is never delivered.
//!
//! Nothing here writes to this machine's log (the hub is a reader of other machines).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::hub::task_source;
use super::{ErrorKind, Service, ServiceError};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{
    CancelOutcome, CancelResult, MachineLinkState, RemoteOp, SendBody, SendResult, TaskPhase,
    TaskReply, TaskSource, TaskState, TaskView, WaitingReason,
};

/// The prefix of a hub task's id (a machine's own tasks are `task_…`).
pub const HUB_TASK_PREFIX: &str = "hubtask_";
/// How often the delivery loop looks for a machine that came back.
const DELIVERY_TICK: Duration = Duration::from_secs(1);
/// The most tasks the outbox holds waiting (all machines together).
const MAX_WAITING: usize = 1000;
/// Finished or delivered tasks kept for reading back, the oldest dropped first.
const MAX_KEPT: usize = 1000;
/// The largest outbox file read back.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Where a hub task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stage {
    /// At the hub, for the machine's return.
    Waiting,
    /// In the machine's queue (`machine_task`), which owns it.
    Delivered,
    /// Cancelled at the hub before delivery: never delivered.
    Cancelled,
    /// The machine refused it when it was delivered (`error`).
    Refused,
}

/// One task of the outbox, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HubTask {
    id: String,
    machine: String,
    /// The session's id on its machine (unqualified).
    session: String,
    text: String,
    source: TaskSource,
    /// The caller's key (a retry at the hub finds this task by it).
    #[serde(default)]
    caller_key: Option<String>,
    /// The key every delivery carries.
    key: String,
    stage: Stage,
    #[serde(default)]
    machine_task: Option<String>,
    /// The machine's last view of it (read back when the machine is unreachable).
    #[serde(default)]
    seen: Option<TaskView>,
    #[serde(default)]
    error: Option<String>,
    created_at: u64,
    #[serde(default)]
    delivered_at: Option<u64>,
    #[serde(default)]
    finished_at: Option<u64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct OutboxFile {
    tasks: Vec<HubTask>,
}

/// The hub's outbox: its tasks in the order queued, and the file that keeps them.
pub struct HubTasks {
    path: PathBuf,
    tasks: tokio::sync::Mutex<Vec<HubTask>>,
    wake: tokio::sync::Notify,
}

impl HubTasks {
    /// Reads `$home/hub/tasks.json` back (none: an empty outbox).
    pub fn open(home: &Path) -> anyhow::Result<HubTasks> {
        let dir = home.join("hub");
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", dir.display()))?;
        let path = dir.join("tasks.json");
        let tasks = match crate::core::private_file::read(&path, MAX_FILE_BYTES)
            .map_err(|e| anyhow::anyhow!("failed to read {}: {e}", path.display()))?
        {
            None => Vec::new(),
            Some(bytes) => {
                serde_json::from_slice::<OutboxFile>(&bytes)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "the hub's task outbox {} is not readable: {e}",
                            path.display()
                        )
                    })?
                    .tasks
            }
        };
        Ok(HubTasks {
            path,
            tasks: tokio::sync::Mutex::new(tasks),
            wake: tokio::sync::Notify::new(),
        })
    }

    fn save(&self, tasks: &mut Vec<HubTask>) -> Result<(), ServiceError> {
        // Keep every waiting task and the newest others.
        let kept = tasks.iter().filter(|t| t.stage != Stage::Waiting).count();
        if kept > MAX_KEPT {
            let mut drop = kept - MAX_KEPT;
            tasks.retain(|t| {
                if drop > 0 && t.stage != Stage::Waiting {
                    drop -= 1;
                    false
                } else {
                    true
                }
            });
        }
        let file = OutboxFile {
            tasks: tasks.clone(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| {
            ServiceError::new(ErrorKind::Internal, codes::INTERNAL_ERROR, e.to_string())
        })?;
        crate::core::private_file::write_atomic(&self.path, &bytes, 0o600).map_err(|e| {
            ServiceError::new(
                ErrorKind::Internal,
                codes::INTERNAL_ERROR,
                format!("failed to write the hub's task outbox: {e}"),
            )
        })
    }
}

/// Where the hub's task `task` is in the outbox, else `unknown_task`.
fn index_of(tasks: &[HubTask], task: &str) -> Result<usize, ServiceError> {
    tasks
        .iter()
        .position(|t| t.id == task)
        .ok_or_else(|| unknown_task(task))
}

fn unknown_task(task: &str) -> ServiceError {
    ServiceError::not_found(codes::TASK_NOT_FOUND, format!("no task `{task}`"))
}

fn new_id() -> String {
    let mut bytes = [0u8; 12];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{HUB_TASK_PREFIX}{hex}")
}

/// Whether a refusal at delivery may pass (the machine's queue is full, the session is not
/// ready): the task keeps waiting.
fn passing(error: &ServiceError) -> bool {
    matches!(error.kind, ErrorKind::Unavailable | ErrorKind::TooMany)
}

fn preview(text: &str) -> String {
    let max = crate::tasks::MAX_PROMPT_PREVIEW;
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    crate::redact::redact(&text[..end]).into_owned()
}

impl HubTask {
    /// The task as the hub shows it: the machine's view once delivered (ids the hub's), else
    /// the hub's own.
    fn view(&self, position: Option<usize>) -> TaskView {
        let qualified = super::hub::qualify(&self.machine, &self.session);
        if let Some(seen) = &self.seen {
            let mut view = seen.clone();
            view.task_id = self.id.clone();
            view.session_id = qualified;
            view.machine = Some(self.machine.clone());
            view.machine_task_id = self.machine_task.clone();
            view.created_at = self.created_at;
            return view;
        }
        let (state, phase) = match self.stage {
            Stage::Waiting => (TaskState::Waiting, TaskPhase::Queued),
            Stage::Delivered => (TaskState::Unknown, TaskPhase::Delivered),
            Stage::Cancelled => (TaskState::Cancelled, TaskPhase::Finished),
            Stage::Refused => (TaskState::Failed, TaskPhase::Finished),
        };
        TaskView {
            task_id: self.id.clone(),
            session_id: qualified,
            machine: Some(self.machine.clone()),
            machine_task_id: self.machine_task.clone(),
            state,
            phase,
            revision: 0,
            position: if self.stage == Stage::Waiting {
                position
            } else {
                None
            },
            waiting_reason: (self.stage == Stage::Waiting)
                .then_some(WaitingReason::MachineUnreachable),
            source: self.source,
            prompt_preview: preview(&self.text),
            prompt_bytes: self.text.len(),
            turn_id: None,
            accepted_as: None,
            lease_generation_at_delivery: None,
            cancel_requested: false,
            cancel_outcome: (self.stage == Stage::Cancelled)
                .then_some(CancelOutcome::CancelledBeforeDelivery),
            abort_withheld: None,
            supersedes: None,
            superseded_by: None,
            human_intervened: false,
            error: self.error.clone(),
            created_at: self.created_at,
            delivered_at: self.delivered_at,
            accepted_at: None,
            finished_at: self.finished_at,
            result_bytes: None,
            result_excerpt: None,
            result_excerpt_truncated: false,
        }
    }
}

/// A waiting task's place among its session's waiting tasks at the hub.
fn position(tasks: &[HubTask], index: usize) -> usize {
    let task = &tasks[index];
    tasks[..index]
        .iter()
        .filter(|t| {
            t.stage == Stage::Waiting && t.machine == task.machine && t.session == task.session
        })
        .count()
}

impl Service {
    fn hub_tasks(&self) -> Result<&HubTasks, ServiceError> {
        self.machine
            .hub
            .as_ref()
            .and_then(|world| world.tasks())
            .ok_or_else(|| unknown_task("(this daemon is no hub)"))
    }

    /// Whether `task` names a task queued at this hub.
    pub fn is_hub_task(&self, task: &str) -> bool {
        task.starts_with(HUB_TASK_PREFIX) && self.hub_tasks().is_ok()
    }

    /// `POST /api/sessions/<machine>/<id>/tasks` at a hub: the task is kept at the hub, then
    /// delivered into the machine's queue at once when its link is up, else when it returns.
    /// A retry with the same idempotency key finds the first (`replayed`). A refusal by the
    /// machine at once (no such session, a bad prompt) keeps nothing.
    pub async fn queue_remote_task(
        &self,
        machine: &str,
        session: &str,
        body: SendBody,
    ) -> Result<SendResult, ServiceError> {
        let world = self.known_machine(machine)?;
        let source = task_source(body.source.as_deref())?;
        crate::tasks::check_send(&body.text, &body.idempotency_key).map_err(ServiceError::from)?;
        let outbox = self.hub_tasks()?;
        let mut tasks = outbox.tasks.lock().await;
        if let Some(key) = &body.idempotency_key
            && let Some(index) = tasks.iter().position(|t| {
                t.machine == machine && t.session == session && t.caller_key.as_deref() == Some(key)
            })
        {
            let index = self.refresh(&mut tasks, index).await;
            return Ok(SendResult {
                task: tasks[index].view(Some(position(&tasks, index))),
                replayed: true,
            });
        }
        if tasks.iter().filter(|t| t.stage == Stage::Waiting).count() >= MAX_WAITING {
            return Err(ServiceError::new(
                ErrorKind::TooMany,
                codes::QUEUE_FULL,
                format!("the hub holds {MAX_WAITING} tasks waiting for their machines already"),
            ));
        }
        let id = new_id();
        tasks.push(HubTask {
            key: body
                .idempotency_key
                .clone()
                .unwrap_or_else(|| format!("hub:{}:{id}", self.machine())),
            id,
            machine: machine.to_string(),
            session: session.to_string(),
            text: body.text,
            source,
            caller_key: body.idempotency_key,
            stage: Stage::Waiting,
            machine_task: None,
            seen: None,
            error: None,
            created_at: now_ms(),
            delivered_at: None,
            finished_at: None,
        });
        outbox.save(&mut tasks)?;
        let index = tasks.len() - 1;
        let up = world
            .links()
            .iter()
            .any(|l| l.machine == machine && l.link == MachineLinkState::Up);
        if up {
            match self.deliver(&mut tasks[index]).await {
                Err(error) if !passing(&error) && error.code != codes::MACHINE_UNREACHABLE => {
                    // Refused at once: nothing is kept.
                    tasks.remove(index);
                    outbox.save(&mut tasks)?;
                    return Err(error);
                }
                _ => outbox.save(&mut tasks)?,
            }
        } else {
            tracing::info!(%machine, %session, "hub: a task waits for its machine");
        }
        outbox.wake.notify_one();
        Ok(SendResult {
            task: tasks[index].view(Some(position(&tasks, index))),
            replayed: false,
        })
    }

    /// Hands one waiting task to its machine; on success it is `delivered` (the machine's
    /// queue owns it). A refusal that does not pass makes it `refused`.
    async fn deliver(&self, task: &mut HubTask) -> Result<(), ServiceError> {
        let op = RemoteOp::Task {
            task: SendBody {
                text: task.text.clone(),
                idempotency_key: Some(task.key.clone()),
                source: Some(task.source.as_str().to_string()),
            },
        };
        match self.remote(&task.machine, &task.session, op).await {
            Ok(answer) => {
                let sent: SendResult = serde_json::from_value(answer).map_err(|e| {
                    ServiceError::new(
                        ErrorKind::Upstream,
                        codes::INTERNAL_ERROR,
                        format!(
                            "the machine `{}` answered a task unreadably: {e}",
                            task.machine
                        ),
                    )
                })?;
                tracing::info!(machine = %task.machine, task = %task.id, machine_task = %sent.task.task_id, replayed = sent.replayed, "hub: a task delivered to its machine");
                task.stage = Stage::Delivered;
                task.machine_task = Some(sent.task.task_id.clone());
                task.delivered_at = Some(now_ms());
                task.seen = Some(sent.task);
                task.error = None;
                Ok(())
            }
            Err(error) => {
                if error.code == codes::MACHINE_UNREACHABLE || passing(&error) {
                    task.error = Some(error.to_string());
                } else {
                    tracing::warn!(machine = %task.machine, task = %task.id, %error, "hub: the machine refused a task");
                    task.stage = Stage::Refused;
                    task.error = Some(error.to_string());
                    task.finished_at = Some(now_ms());
                }
                Err(error)
            }
        }
    }

    /// A delivered task's view read again from its machine (kept as it was when the machine
    /// does not answer). Returns `index`.
    async fn refresh(&self, tasks: &mut [HubTask], index: usize) -> usize {
        let task = &tasks[index];
        let (Stage::Delivered, Some(machine_task)) = (task.stage, task.machine_task.clone()) else {
            return index;
        };
        if task.seen.as_ref().is_some_and(|v| v.state.is_finished()) {
            return index;
        }
        let op = RemoteOp::TaskStatus { task: machine_task };
        if let Ok(answer) = self.remote(&task.machine, &task.session, op).await
            && let Ok(reply) = serde_json::from_value::<TaskReply>(answer)
        {
            tasks[index].seen = Some(reply.task);
        }
        index
    }

    /// `GET /api/tasks/<hubtask_…>` at a hub: the task, from the machine once delivered.
    pub async fn hub_task(&self, task: &str) -> Result<TaskView, ServiceError> {
        let outbox = self.hub_tasks()?;
        let mut tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        let index = self.refresh(&mut tasks, index).await;
        Ok(tasks[index].view(Some(position(&tasks, index))))
    }

    /// `POST /api/tasks/<hubtask_…>/cancel` at a hub: a task still waiting here is cancelled
    /// here and never delivered; a delivered one is cancelled by its machine, which owns it.
    pub async fn cancel_hub_task(&self, task: &str) -> Result<CancelResult, ServiceError> {
        let outbox = self.hub_tasks()?;
        let mut tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        match tasks[index].stage {
            Stage::Waiting => {
                tasks[index].stage = Stage::Cancelled;
                tasks[index].finished_at = Some(now_ms());
                outbox.save(&mut tasks)?;
                tracing::info!(%task, "hub: a waiting task cancelled at the hub");
                Ok(CancelResult {
                    task: tasks[index].view(None),
                    outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                    replayed: false,
                })
            }
            Stage::Cancelled | Stage::Refused => Ok(CancelResult {
                task: tasks[index].view(None),
                outcome: tasks[index].view(None).cancel_outcome,
                replayed: true,
            }),
            Stage::Delivered => {
                let t = &tasks[index];
                let op = RemoteOp::TaskCancel {
                    task: t.machine_task.clone().unwrap_or_default(),
                };
                let answer = self.remote(&t.machine, &t.session, op).await?;
                let result: CancelResult = serde_json::from_value(answer).map_err(|e| {
                    ServiceError::new(ErrorKind::Upstream, codes::INTERNAL_ERROR, e.to_string())
                })?;
                tasks[index].seen = Some(result.task);
                Ok(CancelResult {
                    task: tasks[index].view(None),
                    outcome: result.outcome,
                    replayed: result.replayed,
                })
            }
        }
    }

    /// The hub's delivery loop (`serve --hub`): every second (and whenever a task is queued),
    /// each waiting task whose machine's link is up is delivered, in the order queued; a
    /// machine that does not take one keeps the rest of its tasks waiting until the next look.
    pub async fn deliver_hub_tasks(self, cancel: CancellationToken) {
        let Ok(outbox) = self.hub_tasks() else { return };
        let Some(world) = self.hub_world() else {
            return;
        };
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(DELIVERY_TICK) => {}
                _ = outbox.wake.notified() => {}
            }
            let up: Vec<String> = world
                .links()
                .into_iter()
                .filter(|l| l.link == MachineLinkState::Up)
                .map(|l| l.machine)
                .collect();
            let mut tasks = outbox.tasks.lock().await;
            let mut unreachable: Vec<String> = Vec::new();
            let mut changed = false;
            for index in 0..tasks.len() {
                let task = &tasks[index];
                if task.stage != Stage::Waiting
                    || !up.contains(&task.machine)
                    || unreachable.contains(&task.machine)
                {
                    continue;
                }
                let machine = task.machine.clone();
                match self.deliver(&mut tasks[index]).await {
                    Ok(()) => changed = true,
                    Err(error) if error.code == codes::MACHINE_UNREACHABLE || passing(&error) => {
                        unreachable.push(machine)
                    }
                    Err(_) => changed = true,
                }
            }
            if changed && let Err(error) = outbox.save(&mut tasks) {
                tracing::error!(%error, "hub: the task outbox could not be saved");
            }
        }
    }
}
