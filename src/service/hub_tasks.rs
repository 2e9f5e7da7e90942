//! Tasks queued at a hub for another machine's session (`POST /api/sessions/<machine>/<id>/tasks`
//! at a hub): the hub's outbox.
//!
//! The owning machine stays the single writer of its sessions: a task is delivered into that
//! machine's own queue (the `task` op), which owns it from then on — it decides when it runs,
//! records it in its log, and answers for it (the hub's reads and cancels of a delivered task
//! are forwarded to it). Until it is delivered, the task waits here, at the hub, in
//! `$COHOST_HOME/hub/tasks.json` (replaced atomically on every change, so a restarted hub keeps
//! it), shown as `waiting` for `machine_unreachable` with the machine named, and may be
//! cancelled, edited or superseded here (the revision and idempotency rules of the machine's
//! own queue); the delivery loop hands it over once the machine's link is up again.
//!
//! Exactly once: every delivery carries the same idempotency key (the caller's, else one made
//! from the hub task's id), so a delivery sent again — after a timeout, or after a hub that
//! died before it wrote `delivered` — finds the first task in the machine's queue. A delivery
//! marks its task `delivering` under the outbox's lock and is sent without it (so one slow
//! machine holds up no other reader); a cancel or an edit of that task waits for it to settle,
//! so a task cancelled here is never delivered. A delivery that got no answer may have reached
//! the machine (`in_doubt`): until a later delivery settles it, the task is neither edited nor
//! cancelled here (its text may already be queued there), and the refusal names the machine.
//!
//! Nothing here writes to this machine's log (the hub is a reader of other machines).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

mod revise;
mod route;

use super::hub::task_source;
use super::{ErrorKind, Service, ServiceError};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{
    CancelOutcome, CancelResult, EditBody, EditResult, MachineLinkState, RemoteOp, RemoteSurface,
    ResultChunk, SendBody, SendResult, TaskPhase, TaskReply, TaskSource, TaskState, TaskView,
    WaitingReason,
};
use revise::{edit_waiting, supersede_waiting};

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
    /// Bumped by each edit at the hub (the machine's queue counts its own once delivered).
    #[serde(default)]
    revision: u64,
    #[serde(default)]
    edits: usize,
    /// The idempotency keys of the edits made at the hub (a retry finds its edit).
    #[serde(default)]
    edit_keys: Vec<String>,
    /// The hub task this one replaced (a supersede at the hub).
    #[serde(default)]
    supersedes: Option<String>,
    /// The hub task that replaced this one.
    #[serde(default)]
    superseded_by: Option<String>,
    /// A delivery was sent and not answered: the machine may hold it already.
    #[serde(default)]
    in_doubt: bool,
    /// A delivery is on its way now (never stored: a restarted hub sends it again, with the
    /// same key).
    #[serde(skip)]
    delivering: bool,
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
    /// Told when a delivery settles (a cancel or an edit of that task waits for it).
    settled: tokio::sync::Notify,
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
            settled: tokio::sync::Notify::new(),
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

/// The refusal of an edit or a cancel of a task whose delivery got no answer.
fn in_doubt(task: &HubTask, what: &str) -> ServiceError {
    ServiceError::new(
        ErrorKind::Unavailable,
        codes::MACHINE_UNREACHABLE,
        format!(
            "the task `{}` was sent to the machine `{}`, which did not answer: it may be queued there already, so it cannot be {what} here until `{}` answers a delivery again",
            task.id, task.machine, task.machine
        ),
    )
}

/// An answer of the owning machine as the type its HTTP API answers.
fn parse<T: serde::de::DeserializeOwned>(
    machine: &str,
    answer: serde_json::Value,
) -> Result<T, ServiceError> {
    serde_json::from_value(answer).map_err(|e| {
        ServiceError::new(
            ErrorKind::Upstream,
            codes::INTERNAL_ERROR,
            format!("the machine `{machine}` answered what this hub cannot read: {e}"),
        )
    })
}

/// A machine's task view as the hub names it: its session qualified, its machine set.
pub(super) fn qualify_task(view: &mut TaskView, machine: &str) {
    if !view.session_id.starts_with(&format!("{machine}/")) {
        view.session_id = super::hub::qualify(machine, &view.session_id);
    }
    view.machine = Some(machine.to_string());
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
            if self.supersedes.is_some() {
                view.supersedes = self.supersedes.clone();
            }
            if self.superseded_by.is_some() {
                view.superseded_by = self.superseded_by.clone();
            }
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
            revision: self.revision,
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
            supersedes: self.supersedes.clone(),
            superseded_by: self.superseded_by.clone(),
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

impl HubTasks {
    /// The outbox locked once no delivery of `task` is on its way, and the task's index (else
    /// `task_not_found`). A delivery is bounded by the command timeout.
    async fn settled(
        &self,
        task: &str,
    ) -> Result<(tokio::sync::MutexGuard<'_, Vec<HubTask>>, usize), ServiceError> {
        loop {
            // Armed before the check, so a delivery settling in between still wakes this.
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let tasks = self.tasks.lock().await;
            let index = index_of(&tasks, task)?;
            if !tasks[index].delivering {
                return Ok((tasks, index));
            }
            drop(tasks);
            notified.await;
        }
    }

    /// Saves after a delivery settled and tells whoever waits for it.
    fn settle_saved(
        &self,
        mut tasks: tokio::sync::MutexGuard<'_, Vec<HubTask>>,
    ) -> Result<(), ServiceError> {
        let saved = self.save(&mut tasks);
        drop(tasks);
        self.settled.notify_waiters();
        saved
    }
}

/// Whether a delivery that failed `machine_unreachable` may still have reached the machine:
/// unless the hub never sent it, or nothing took it.
fn maybe_sent(error: &ServiceError) -> bool {
    let message = error.to_string();
    !(message.contains("nothing takes its commands")
        || message.contains("not connected to NATS yet")
        || message.contains("NATS link stopped"))
}

/// Records what a delivery came to: `delivered` (the machine's queue owns it from now on),
/// still waiting (the machine did not take it now), or `refused`; answers the delivery's error.
fn settle(task: &mut HubTask, sent: Result<SendResult, ServiceError>) -> Option<ServiceError> {
    task.delivering = false;
    match sent {
        Ok(sent) => {
            tracing::info!(machine = %task.machine, task = %task.id, machine_task = %sent.task.task_id, replayed = sent.replayed, "hub: a task delivered to its machine");
            task.stage = Stage::Delivered;
            task.machine_task = Some(sent.task.task_id.clone());
            task.delivered_at = Some(now_ms());
            task.seen = Some(sent.task);
            task.error = None;
            task.in_doubt = false;
            None
        }
        Err(error) => {
            if error.code == codes::MACHINE_UNREACHABLE {
                task.in_doubt |= maybe_sent(&error);
                task.error = Some(error.to_string());
            } else if passing(&error) {
                // The machine answered: it does not hold the task (a delivery sent again with
                // the same key would have found it).
                task.in_doubt = false;
                task.error = Some(error.to_string());
            } else {
                tracing::warn!(machine = %task.machine, task = %task.id, %error, "hub: the machine refused a task");
                task.in_doubt = false;
                task.stage = Stage::Refused;
                task.error = Some(error.to_string());
                task.finished_at = Some(now_ms());
            }
            Some(error)
        }
    }
}

/// The view of `tasks[index]` with its place among its session's waiting tasks.
fn placed(tasks: &[HubTask], index: usize) -> TaskView {
    tasks[index].view(Some(position(tasks, index)))
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

    /// Whether `machine`'s link is up at this hub.
    fn machine_up(&self, machine: &str) -> bool {
        self.hub_world().is_some_and(|world| {
            world
                .links()
                .iter()
                .any(|l| l.machine == machine && l.link == MachineLinkState::Up)
        })
    }

    /// `POST /api/sessions/<machine>/<id>/tasks` at a hub: the task is kept at the hub, then
    /// delivered into the machine's queue at once when its link is up and no earlier task of
    /// the machine waits here, else by the delivery loop. A retry with the same idempotency key
    /// finds the first (`replayed`). A refusal by the machine at once (no such session, a bad
    /// prompt) keeps nothing.
    pub async fn queue_remote_task(
        &self,
        machine: &str,
        session: &str,
        body: SendBody,
    ) -> Result<SendResult, ServiceError> {
        self.known_machine(machine)?;
        let source = task_source(body.source.as_deref())?;
        crate::tasks::check_send(&body.text, &body.idempotency_key).map_err(ServiceError::from)?;
        let outbox = self.hub_tasks()?;
        let mut tasks = outbox.tasks.lock().await;
        if let Some(key) = &body.idempotency_key
            && let Some(index) = tasks.iter().position(|t| {
                t.machine == machine && t.session == session && t.caller_key.as_deref() == Some(key)
            })
        {
            let id = tasks[index].id.clone();
            drop(tasks);
            return Ok(SendResult {
                task: self.hub_task(&id).await?,
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
        // Tasks for one machine are delivered in the order queued: behind another one waiting
        // here, this one is the delivery loop's.
        let behind = tasks
            .iter()
            .any(|t| t.stage == Stage::Waiting && t.machine == machine);
        tasks.push(HubTask {
            key: body
                .idempotency_key
                .clone()
                .unwrap_or_else(|| format!("hub:{}:{id}", self.machine())),
            id: id.clone(),
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
            revision: 0,
            edits: 0,
            edit_keys: Vec::new(),
            supersedes: None,
            superseded_by: None,
            in_doubt: false,
            delivering: false,
        });
        outbox.save(&mut tasks)?;
        if !self.machine_up(machine) || behind {
            if !behind {
                tracing::info!(%machine, %session, "hub: a task waits for its machine");
            }
            let index = tasks.len() - 1;
            let view = placed(&tasks, index);
            drop(tasks);
            outbox.wake.notify_one();
            return Ok(SendResult {
                task: view,
                replayed: false,
            });
        }
        let index = tasks.len() - 1;
        tasks[index].delivering = true;
        let sending = tasks[index].clone();
        drop(tasks);
        let sent = self.send_task(&sending).await;
        let mut tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, &id)?;
        if let Some(error) = settle(&mut tasks[index], sent)
            && !passing(&error)
            && error.code != codes::MACHINE_UNREACHABLE
        {
            // Refused at once: nothing is kept.
            tasks.remove(index);
            outbox.settle_saved(tasks)?;
            return Err(error);
        }
        let view = placed(&tasks, index);
        outbox.settle_saved(tasks)?;
        outbox.wake.notify_one();
        Ok(SendResult {
            task: view,
            replayed: false,
        })
    }

    /// Sends one hub task into its machine's queue (the `task` op, with its key).
    async fn send_task(&self, task: &HubTask) -> Result<SendResult, ServiceError> {
        let op = RemoteOp::Task {
            task: SendBody {
                text: task.text.clone(),
                idempotency_key: Some(task.key.clone()),
                source: Some(task.source.as_str().to_string()),
            },
        };
        let answer = self.remote(&task.machine, &task.session, op).await?;
        parse(&task.machine, answer)
    }

    /// `GET /api/tasks/<hubtask_…>` at a hub: the task, read again from its machine once
    /// delivered (as last seen while the machine is down or does not answer).
    pub async fn hub_task(&self, task: &str) -> Result<TaskView, ServiceError> {
        let outbox = self.hub_tasks()?;
        let tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        let held = &tasks[index];
        let ask = match (held.stage, &held.machine_task) {
            (Stage::Delivered, Some(machine_task))
                if !held.seen.as_ref().is_some_and(|v| v.state.is_finished())
                    && self.machine_up(&held.machine) =>
            {
                (
                    held.machine.clone(),
                    held.session.clone(),
                    machine_task.clone(),
                )
            }
            _ => return Ok(placed(&tasks, index)),
        };
        drop(tasks);
        let (machine, session, machine_task) = ask;
        let op = RemoteOp::TaskStatus { task: machine_task };
        let seen = match self.remote(&machine, &session, op).await {
            Ok(answer) => parse::<TaskReply>(&machine, answer).ok().map(|r| r.task),
            Err(_) => None,
        };
        let mut tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        if let Some(seen) = seen {
            tasks[index].seen = Some(seen);
        }
        Ok(placed(&tasks, index))
    }

    /// `POST /api/tasks/<hubtask_…>/cancel` at a hub: a task still waiting here is cancelled
    /// here and never delivered; a delivered one is cancelled by its machine, which owns it.
    pub async fn cancel_hub_task(&self, task: &str) -> Result<CancelResult, ServiceError> {
        let outbox = self.hub_tasks()?;
        let (mut tasks, index) = outbox.settled(task).await?;
        match tasks[index].stage {
            Stage::Waiting if tasks[index].in_doubt => Err(in_doubt(&tasks[index], "cancelled")),
            Stage::Waiting => {
                tasks[index].stage = Stage::Cancelled;
                tasks[index].finished_at = Some(now_ms());
                // Read before `save`, which may drop the oldest finished tasks.
                let view = tasks[index].view(None);
                outbox.save(&mut tasks)?;
                tracing::info!(%task, "hub: a waiting task cancelled at the hub");
                Ok(CancelResult {
                    task: view,
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
                let held = &tasks[index];
                let (machine, session) = (held.machine.clone(), held.session.clone());
                let op = RemoteOp::TaskCancel {
                    task: held.machine_task.clone().unwrap_or_default(),
                };
                drop(tasks);
                let answer = self.remote(&machine, &session, op).await?;
                let result: CancelResult = parse(&machine, answer)?;
                let mut tasks = outbox.tasks.lock().await;
                let index = index_of(&tasks, task)?;
                tasks[index].seen = Some(result.task);
                Ok(CancelResult {
                    task: tasks[index].view(None),
                    outcome: result.outcome,
                    replayed: result.replayed,
                })
            }
        }
    }

    /// `POST /api/tasks/<hubtask_…>/edit` (or `supersede`) at a hub: a task still waiting
    /// here is revised here under the outbox's lock, with the rules of the machine's own queue;
    /// a delivered one is revised by its machine, which owns it (a replacement it queues is
    /// kept here as a delivered hub task, so the hub names it like the task it replaced).
    async fn revise_hub_task(
        &self,
        surface: RemoteSurface,
        task: &str,
        edit: EditBody,
        supersede: bool,
    ) -> Result<EditResult, ServiceError> {
        crate::tasks::check_send(&edit.text, &edit.idempotency_key).map_err(ServiceError::from)?;
        let outbox = self.hub_tasks()?;
        let (mut tasks, index) = outbox.settled(task).await?;
        if tasks[index].stage != Stage::Delivered {
            let revised = if supersede {
                supersede_waiting(&mut tasks, index, edit, self.machine())?
            } else {
                edit_waiting(&mut tasks, index, edit)?
            };
            if !revised.replayed {
                outbox.save(&mut tasks)?;
            }
            return Ok(revised);
        }
        let held = &tasks[index];
        let (machine, session, source) = (held.machine.clone(), held.session.clone(), held.source);
        let machine_task = held.machine_task.clone().unwrap_or_default();
        drop(tasks);
        let key = edit.idempotency_key.clone();
        let op = if supersede {
            RemoteOp::TaskSupersede {
                task: machine_task,
                edit,
            }
        } else {
            RemoteOp::TaskEdit {
                task: machine_task,
                edit,
            }
        };
        let answer = self.remote_from(surface, &machine, &session, op).await?;
        let mut result: EditResult = parse(&machine, answer)?;
        let mut tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        if !supersede {
            tasks[index].seen = Some(result.task);
            result.task = tasks[index].view(None);
            return Ok(result);
        }
        if let Some(old) = result.superseded.take() {
            tasks[index].seen = Some(old);
        }
        let replacement = result.task.task_id.clone();
        let kept = tasks
            .iter()
            .position(|t| t.machine == machine && t.machine_task.as_deref() == Some(&replacement));
        let kept = match kept {
            Some(kept) => kept,
            None => {
                let id = new_id();
                tasks.push(HubTask {
                    key: key
                        .clone()
                        .unwrap_or_else(|| format!("hub:{}:{id}", self.machine())),
                    id,
                    machine: machine.clone(),
                    session,
                    text: String::new(),
                    source,
                    caller_key: key,
                    stage: Stage::Delivered,
                    machine_task: Some(replacement),
                    seen: None,
                    error: None,
                    created_at: now_ms(),
                    delivered_at: Some(now_ms()),
                    finished_at: None,
                    revision: 0,
                    edits: 0,
                    edit_keys: Vec::new(),
                    supersedes: Some(task.to_string()),
                    superseded_by: None,
                    in_doubt: false,
                    delivering: false,
                });
                tasks.len() - 1
            }
        };
        tasks[kept].seen = Some(result.task);
        tasks[index].superseded_by = Some(tasks[kept].id.clone());
        // Read before `save`, which may drop the oldest finished tasks.
        let revised = EditResult {
            task: tasks[kept].view(None),
            superseded: Some(tasks[index].view(None)),
            replayed: result.replayed,
        };
        outbox.save(&mut tasks)?;
        Ok(revised)
    }

    /// `GET /api/tasks/<hubtask_…>/result` at a hub: the delivered task's result, read from
    /// its machine; a task still waiting here has not run (`machine_unreachable`, naming the
    /// machine); a cancelled or refused one never ran and has none.
    async fn hub_task_result(
        &self,
        surface: RemoteSurface,
        task: &str,
        offset: usize,
        max: usize,
    ) -> Result<ResultChunk, ServiceError> {
        let outbox = self.hub_tasks()?;
        let tasks = outbox.tasks.lock().await;
        let index = index_of(&tasks, task)?;
        let held = &tasks[index];
        match (held.stage, &held.machine_task) {
            (Stage::Delivered, Some(machine_task)) => {
                let (machine, session) = (held.machine.clone(), held.session.clone());
                let op = RemoteOp::TaskResult {
                    task: machine_task.clone(),
                    offset,
                    max_bytes: max,
                };
                drop(tasks);
                let answer = self.remote_from(surface, &machine, &session, op).await?;
                let mut chunk: ResultChunk = parse(&machine, answer)?;
                chunk.task_id = task.to_string();
                Ok(chunk)
            }
            (Stage::Waiting, _) => Err(ServiceError::new(
                ErrorKind::Unavailable,
                codes::MACHINE_UNREACHABLE,
                format!(
                    "the task `{task}` has not run: it waits at the hub for the machine `{}`, which has not taken it yet{}",
                    held.machine,
                    held.error
                        .as_ref()
                        .map(|e| format!(" (the last delivery: {e})"))
                        .unwrap_or_default()
                ),
            )),
            _ => {
                let view = held.view(None);
                Ok(ResultChunk {
                    task_id: task.to_string(),
                    state: view.state,
                    available: false,
                    offset,
                    next_offset: offset,
                    total_bytes: 0,
                    eof: true,
                    text: String::new(),
                })
            }
        }
    }

    /// The hub's delivery loop (`serve --hub`): every second (and whenever a task is queued),
    /// each machine whose link is up is handed its waiting tasks in the order queued, the
    /// machines side by side; a machine that does not take one keeps the rest of its tasks
    /// waiting until the next look. A delivery is sent without the outbox's lock.
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
            let rounds = up.iter().map(|machine| self.deliver_to(outbox, machine));
            futures_util::future::join_all(rounds).await;
        }
    }

    /// Hands `machine` its waiting tasks one by one, in the order queued, until it does not
    /// take one (or another delivery to it is on its way).
    async fn deliver_to(&self, outbox: &HubTasks, machine: &str) {
        loop {
            let mut tasks = outbox.tasks.lock().await;
            let Some(index) = tasks
                .iter()
                .position(|t| t.stage == Stage::Waiting && t.machine == machine)
            else {
                return;
            };
            if tasks[index].delivering {
                return;
            }
            tasks[index].delivering = true;
            let sending = tasks[index].clone();
            drop(tasks);
            let sent = self.send_task(&sending).await;
            let mut tasks = outbox.tasks.lock().await;
            let Ok(index) = index_of(&tasks, &sending.id) else {
                return;
            };
            let error = settle(&mut tasks[index], sent);
            if let Err(error) = outbox.settle_saved(tasks) {
                tracing::error!(%error, "hub: the task outbox could not be saved");
            }
            if error.is_some_and(|e| e.code == codes::MACHINE_UNREACHABLE || passing(&e)) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
