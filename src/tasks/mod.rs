//! The task queue and control leases: every queued prompt becomes a task that one dispatcher
//! delivers to its session when the session is managed, live and idle.
//!
//! **Boundary.** This module decides; the core stores. Each operation reads the task registry
//! ([`crate::core::tasks`]), decides under the session's lock, and appends `task.*` /
//! `lease.changed` events — which are the only record, so everything survives a restart and a
//! replay gives the same tasks. Delivery goes through the hosts' `inject`, keyed `task:<id>`,
//! so a delivery is never sent twice.
//!
//! **Invariants.**
//! - At most one task per session is in flight (delivered or running); the rest wait in order.
//! - Nothing is delivered while a human holds the lease. Human input (a terminal turn, a draft
//!   in Claude's box, `cohost takeover`) moves the lease to the human; only a human releases.
//! - A running task is interrupted on cancel only while the lease is still managed at the
//!   generation the cancel was requested under; `task.abort` is logged before the interrupt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::core::tasks::TaskRecord;
use crate::core::{CoreError, CoreHandle, State};
use crate::protocol::{
    CancelOutcome, CancelResult, EditResult, Event, EventKind, Field, Lease, LeaseHolder, Message,
    QueueView, ResultChunk, Runtime, SendResult, SessionState, TaskAbort, TaskAccepted,
    TaskCancelRequested, TaskDelivered, TaskEdited, TaskFinished, TaskPhase, TaskQueued,
    TaskReturned, TaskState, TaskView, TurnSource, WaitingReason, message,
};
use crate::runtime::{AfterRestart, HostError, Hosts, InjectOutcome, InjectState, SessionHost};

/// The longest prompt a task may carry.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Waiting tasks one session may hold.
pub const MAX_WAITING: usize = 100;
/// In-place edits of one task; supersede it to keep changing it.
pub const MAX_EDITS: usize = 32;
/// The most one result read returns, and its default.
pub const MAX_RESULT_CHUNK: usize = 16 * 1024;
/// The result excerpt in task views.
pub const MAX_EXCERPT: usize = 4 * 1024;
/// The prompt preview in task views.
pub const MAX_PROMPT_PREVIEW: usize = 512;
/// Pending tasks in one queue view, and recent finished ones.
pub const MAX_QUEUE_PENDING: usize = 50;
pub const MAX_QUEUE_RECENT: usize = 10;
/// How often sessions with waiting tasks are looked at even without an event (a `not_ready`
/// session becoming ready says nothing).
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Why a task operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The request is wrong; the message names fields as values (each surface names them its
    /// own way).
    #[error("{0}")]
    Invalid(Message),
    #[error("no task `{0}`")]
    UnknownTask(String),
    #[error("no session `{0}`")]
    UnknownSession(String),
    #[error("session `{0}` is closed")]
    Closed(String),
    /// A compare-and-swap on the revision failed.
    #[error("task `{task}` is at revision {current}, not {expected}")]
    Conflict {
        task: String,
        expected: u64,
        current: u64,
    },
    /// The operation needs a waiting task.
    #[error("task `{task}` is {}, no longer waiting", state.as_str())]
    NotWaiting { task: String, state: TaskState },
    #[error("session `{0}` already has {MAX_WAITING} waiting tasks")]
    QueueFull(String),
    #[error("task `{0}` was edited {MAX_EDITS} times; supersede it instead")]
    EditLimit(String),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Who asks: the surfaces a prompt or a lease change can come from.
pub use crate::protocol::TaskSource as Source;

#[derive(Clone)]
pub struct TaskManager {
    inner: Arc<Inner>,
}

struct Inner {
    core: CoreHandle,
    hosts: Hosts,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The text last seen in each watched session's input by `watch_drafts`.
    drafts: Mutex<HashMap<String, String>>,
}

fn check_prompt(text: &str) -> Result<(), TaskError> {
    if text.trim().is_empty() {
        return Err(TaskError::Invalid(message![
            Field::Text,
            " must not be empty"
        ]));
    }
    if text.len() > MAX_PROMPT_BYTES {
        return Err(TaskError::Invalid(message![
            Field::Text,
            format!(" is {} bytes; the most is {MAX_PROMPT_BYTES}", text.len())
        ]));
    }
    Ok(())
}

fn check_key(key: &Option<String>) -> Result<(), TaskError> {
    if let Some(key) = key
        && (key.is_empty() || key.len() > 256)
    {
        return Err(TaskError::Invalid(message![
            Field::IdempotencyKey,
            " must be 1 to 256 bytes"
        ]));
    }
    Ok(())
}

/// The checks a prompt queued as a task passes (its text, its idempotency key), for a hub that
/// keeps a task for another machine before that machine sees it.
pub fn check_send(text: &str, key: &Option<String>) -> Result<(), TaskError> {
    check_prompt(text)?;
    check_key(key)
}

fn new_task_id() -> String {
    let mut bytes = [0u8; 12];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("task_{hex}")
}

/// A compare-and-swap's precondition: the task still waits, at the revision the caller saw.
fn waiting_at(record: &TaskRecord, revision: u64) -> Result<(), TaskError> {
    if record.state != TaskState::Waiting {
        return Err(TaskError::NotWaiting {
            task: record.id.clone(),
            state: record.state,
        });
    }
    if record.revision != revision {
        return Err(TaskError::Conflict {
            task: record.id.clone(),
            expected: revision,
            current: record.revision,
        });
    }
    Ok(())
}

impl TaskManager {
    pub fn new(core: CoreHandle, hosts: Hosts) -> Self {
        TaskManager {
            inner: Arc::new(Inner {
                core,
                hosts,
                locks: Mutex::new(HashMap::new()),
                drafts: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn core(&self) -> &CoreHandle {
        &self.inner.core
    }

    fn lock_of(&self, session: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.inner.locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(session.to_string()).or_default())
    }

    async fn append(&self, session: &str, kind: EventKind) -> Result<u64, TaskError> {
        Ok(self.core().append(Some(session.to_string()), kind).await?)
    }

    fn task_view(&self, id: &str) -> Result<TaskView, TaskError> {
        self.core()
            .read(|state| state.tasks.get(id).map(|t| view(state, t)))
            .ok_or_else(|| TaskError::UnknownTask(id.to_string()))
    }

    /// The host of an open session.
    fn host(&self, session: &str) -> Result<Arc<dyn SessionHost>, TaskError> {
        let found = self.core().read(|state| {
            state
                .sessions
                .get(session)
                .map(|s| (s.created.runtime, s.is_closed()))
        });
        match found {
            None => Err(TaskError::UnknownSession(session.to_string())),
            Some((_, true)) => Err(TaskError::Closed(session.to_string())),
            Some((runtime, false)) => self.host_of(runtime).ok_or_else(|| {
                TaskError::Invalid(Message::from(format!("no host for {runtime} sessions")))
            }),
        }
    }

    fn host_of(&self, runtime: Runtime) -> Option<Arc<dyn SessionHost>> {
        self.inner.hosts.get(runtime).cloned()
    }

    /// Queues a prompt. A retry with the same key returns the first task, whatever became of it.
    pub async fn send(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
        source: Source,
    ) -> Result<SendResult, TaskError> {
        check_prompt(text)?;
        check_key(&key)?;
        let lock = self.lock_of(session);
        let _guard = lock.lock().await;
        if let Some(key) = &key
            && let Some(task) = self.core().read(|state| {
                state
                    .tasks
                    .by_key(session, key)
                    .map(|task| view(state, task))
            })
        {
            return Ok(SendResult {
                task,
                replayed: true,
            });
        }
        self.host(session)?;
        let waiting = self.core().read(|state| {
            state
                .tasks
                .open(session)
                .filter(|t| t.state == TaskState::Waiting)
                .count()
        });
        if waiting >= MAX_WAITING {
            return Err(TaskError::QueueFull(session.to_string()));
        }
        let task_id = new_task_id();
        self.append(
            session,
            EventKind::TaskQueued(TaskQueued {
                task_id: task_id.clone(),
                prompt: text.to_string(),
                source,
                idempotency_key: key,
                order: None,
                supersedes: None,
            }),
        )
        .await?;
        Ok(SendResult {
            task: self.task_view(&task_id)?,
            replayed: false,
        })
    }

    /// Records a prompt that was injected directly (`POST /api/sessions/{id}/messages`: start,
    /// or steer the running turn, now) as a task that is already accepted, so it is tracked and
    /// its result kept like any other. Returns the task id; a repeated key returns the first.
    pub async fn record_direct(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
        outcome: &InjectOutcome,
    ) -> Result<String, TaskError> {
        let lock = self.lock_of(session);
        let _guard = lock.lock().await;
        let mut key = key;
        if let Some(held) = &key
            && let Some(task) = self
                .core()
                .read(|s| s.tasks.by_key(session, held).map(|t| t.id.clone()))
        {
            if outcome.duplicate {
                return Ok(task);
            }
            // The key belongs to a queued task, yet this prompt was sent: it is a task of its
            // own, and the key keeps naming the queued one.
            key = None;
        }
        let task_id = new_task_id();
        let generation = self.core().read(|s| s.tasks.lease(session).generation);
        // Under the session's lock: the dispatcher never sees this task waiting.
        self.append(
            session,
            EventKind::TaskQueued(TaskQueued {
                task_id: task_id.clone(),
                prompt: text.to_string(),
                source: Source::Api,
                idempotency_key: key,
                order: None,
                supersedes: None,
            }),
        )
        .await?;
        self.append(
            session,
            EventKind::TaskDelivered(TaskDelivered {
                task_id: task_id.clone(),
                lease_generation: generation,
            }),
        )
        .await?;
        self.accept(session, &task_id, &outcome.turn_id, outcome.outcome)
            .await?;
        Ok(task_id)
    }

    pub fn status(&self, task: &str) -> Result<TaskView, TaskError> {
        self.task_view(task)
    }

    pub fn queue(&self, session: &str) -> Result<QueueView, TaskError> {
        self.core()
            .read(|state| {
                state.sessions.get(session)?;
                let open: Vec<&TaskRecord> = state.tasks.open(session).collect();
                let pending: Vec<&TaskRecord> = open
                    .iter()
                    .copied()
                    .filter(|t| t.state == TaskState::Waiting)
                    .collect();
                Some(QueueView {
                    session_id: session.to_string(),
                    lease: state.tasks.lease(session),
                    running: open
                        .iter()
                        .filter(|t| t.state == TaskState::Running)
                        .map(|t| view(state, t))
                        .collect(),
                    pending_total: pending.len(),
                    pending_truncated: pending.len() > MAX_QUEUE_PENDING,
                    pending: pending
                        .iter()
                        .take(MAX_QUEUE_PENDING)
                        .map(|t| view(state, t))
                        .collect(),
                    recent: state
                        .tasks
                        .recent(session)
                        .take(MAX_QUEUE_RECENT)
                        .map(|t| view(state, t))
                        .collect(),
                    machine_link: None,
                })
            })
            .ok_or_else(|| TaskError::UnknownSession(session.to_string()))
    }

    /// Up to `max` bytes of the task's final text (redacted) from byte `offset`. Offsets that
    /// fall inside a character move back to its start.
    pub fn result(&self, task: &str, offset: usize, max: usize) -> Result<ResultChunk, TaskError> {
        if max == 0 || max > MAX_RESULT_CHUNK {
            return Err(TaskError::Invalid(message![
                Field::MaxBytes,
                format!(" must be between 1 and {MAX_RESULT_CHUNK}")
            ]));
        }
        let (state, text) = self
            .core()
            .read(|s| s.tasks.get(task).map(|t| (t.state, t.result.clone())))
            .ok_or_else(|| TaskError::UnknownTask(task.to_string()))?;
        let Some(text) = text.filter(|_| state.is_finished()) else {
            return Ok(ResultChunk {
                task_id: task.to_string(),
                state,
                available: false,
                offset,
                next_offset: offset,
                total_bytes: 0,
                eof: state.is_finished(),
                text: String::new(),
            });
        };
        let text = redacted(&text);
        if offset > text.len() {
            return Err(TaskError::Invalid(message![
                Field::Offset,
                format!(
                    " {offset} is past the end of the result ({} bytes)",
                    text.len()
                )
            ]));
        }
        let mut start = offset;
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut chunk = cut(&text[start..], max);
        if chunk.is_empty() && start < text.len() {
            // `max` is smaller than the next character: return that one character.
            let width = text[start..].chars().next().map_or(0, char::len_utf8);
            chunk = &text[start..start + width];
        }
        let next = start + chunk.len();
        Ok(ResultChunk {
            task_id: task.to_string(),
            state,
            available: true,
            offset: start,
            next_offset: next,
            total_bytes: text.len(),
            eof: next >= text.len(),
            text: chunk.to_string(),
        })
    }

    /// The task, read again under its session's lock (held until the guard drops).
    async fn locked(
        &self,
        task: &str,
    ) -> Result<(tokio::sync::OwnedMutexGuard<()>, TaskRecord), TaskError> {
        let session = self.record(task)?.session;
        let guard = self.lock_of(&session).lock_owned().await;
        Ok((guard, self.record(task)?))
    }

    fn record(&self, task: &str) -> Result<TaskRecord, TaskError> {
        self.core()
            .read(|s| s.tasks.get(task).cloned())
            .ok_or_else(|| TaskError::UnknownTask(task.to_string()))
    }

    /// Replaces a waiting task's prompt in place, if its revision is still `revision`.
    pub async fn edit(
        &self,
        task: &str,
        revision: u64,
        text: &str,
        key: Option<String>,
    ) -> Result<EditResult, TaskError> {
        check_prompt(text)?;
        check_key(&key)?;
        let (_guard, record) = self.locked(task).await?;
        let session = record.session.clone();
        if let Some(key) = &key
            && record.edit_keys.contains(key)
        {
            return Ok(EditResult {
                task: self.task_view(task)?,
                superseded: None,
                replayed: true,
            });
        }
        waiting_at(&record, revision)?;
        if record.edits >= MAX_EDITS {
            return Err(TaskError::EditLimit(task.to_string()));
        }
        self.append(
            &session,
            EventKind::TaskEdited(TaskEdited {
                task_id: task.to_string(),
                prompt: text.to_string(),
                revision: revision + 1,
                edit_key: key,
            }),
        )
        .await?;
        Ok(EditResult {
            task: self.task_view(task)?,
            superseded: None,
            replayed: false,
        })
    }

    /// Cancels a waiting task and queues a replacement in its place, if its revision is still
    /// `revision`. A retry with the same key returns the same replacement.
    pub async fn supersede(
        &self,
        task: &str,
        revision: u64,
        text: &str,
        key: Option<String>,
    ) -> Result<EditResult, TaskError> {
        check_prompt(text)?;
        check_key(&key)?;
        let (_guard, record) = self.locked(task).await?;
        let session = record.session.clone();
        if let Some(key) = &key
            && let Some(existing) = self.core().read(|s| s.tasks.by_key(&session, key).cloned())
        {
            if existing.supersedes.as_deref() == Some(task) {
                return Ok(EditResult {
                    task: self.task_view(&existing.id)?,
                    superseded: Some(self.task_view(task)?),
                    replayed: true,
                });
            }
            return Err(TaskError::Invalid(Message::from(format!(
                "idempotency key already used by task `{}`",
                existing.id
            ))));
        }
        waiting_at(&record, revision)?;
        let replacement = new_task_id();
        // The old task ends before the new one exists: a crash between leaves one waiting task
        // at most, never two.
        self.append(
            &session,
            EventKind::TaskFinished(TaskFinished {
                task_id: task.to_string(),
                state: TaskState::Cancelled,
                cancel_outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                error: None,
                superseded_by: Some(replacement.clone()),
            }),
        )
        .await?;
        self.append(
            &session,
            EventKind::TaskQueued(TaskQueued {
                task_id: replacement.clone(),
                prompt: text.to_string(),
                source: record.source,
                idempotency_key: key,
                order: Some(record.order),
                supersedes: Some(task.to_string()),
            }),
        )
        .await?;
        Ok(EditResult {
            task: self.task_view(&replacement)?,
            superseded: Some(self.task_view(task)?),
            replayed: false,
        })
    }

    /// Cancels a task. Waiting: it never runs. Running: its turn is interrupted only while the
    /// lease is managed at `lease_generation` (default: the current one).
    pub async fn cancel(
        &self,
        task: &str,
        lease_generation: Option<u64>,
    ) -> Result<CancelResult, TaskError> {
        let (_guard, record) = self.locked(task).await?;
        let session = record.session.clone();
        if record.is_finished() || record.cancel_requested {
            let task = self.task_view(task)?;
            // Finished without a cancel: an `unknown` task's end is not known either.
            let outcome = task.cancel_outcome.or(match task.state {
                TaskState::Cancelled => None,
                TaskState::Unknown => Some(CancelOutcome::OutcomeUnknown),
                _ => Some(CancelOutcome::FinishedBeforeAbort),
            });
            return Ok(CancelResult {
                task,
                outcome,
                replayed: true,
            });
        }
        if record.state == TaskState::Waiting {
            self.append(
                &session,
                EventKind::TaskFinished(TaskFinished {
                    task_id: task.to_string(),
                    state: TaskState::Cancelled,
                    cancel_outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                    error: None,
                    superseded_by: None,
                }),
            )
            .await?;
            return Ok(CancelResult {
                task: self.task_view(task)?,
                outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                replayed: false,
            });
        }
        let lease = self.core().read(|s| s.tasks.lease(&session));
        let generation = lease_generation.unwrap_or(lease.generation);
        self.append(
            &session,
            EventKind::TaskCancelRequested(TaskCancelRequested {
                task_id: task.to_string(),
                lease_generation: generation,
            }),
        )
        .await?;
        if record.phase == TaskPhase::Accepted {
            self.abort_locked(&session, task).await?;
        }
        // Delivered but not accepted yet: the delivery aborts it when the agent takes it.
        let task = self.task_view(task)?;
        Ok(CancelResult {
            outcome: task.cancel_outcome,
            task,
            replayed: false,
        })
    }

    /// With the session's lock held: sends the interrupt for a cancel-requested, accepted task,
    /// or withholds it, and logs which.
    async fn abort_locked(&self, session: &str, task: &str) -> Result<(), TaskError> {
        let record = self.record(task)?;
        if record.is_finished() || record.cancel_outcome.is_some() {
            return Ok(());
        }
        // A prompt the agent queued behind another turn has no turn of its own yet: an
        // interrupt now would stop the turn it waits behind (and Claude would then run it at
        // once). The abort waits for its turn to start (`on_event`).
        if record.accepted_as.as_deref() == Some("queued") && record.turn_id.is_none() {
            return Ok(());
        }
        let lease = self.core().read(|s| s.tasks.lease(session));
        let withheld = if lease.holder == LeaseHolder::Human {
            Some("human_control")
        } else if Some(lease.generation) != record.cancel_lease_generation {
            Some("lease_changed")
        } else {
            None
        };
        let outcome = if withheld.is_some() {
            CancelOutcome::AbortWithheld
        } else {
            CancelOutcome::AbortSent
        };
        self.append(
            session,
            EventKind::TaskAbort(TaskAbort {
                task_id: task.to_string(),
                outcome,
                reason: withheld.map(str::to_string),
            }),
        )
        .await?;
        if withheld.is_none() {
            // Bound to the task's turn: if it ended meanwhile, nothing is sent to the next.
            let interrupted = self
                .host(session)?
                .interrupt(session, record.turn_id.as_deref())
                .await;
            if let Err(error) = interrupted {
                tracing::warn!(%session, %task, %error, "interrupt for a cancelled task failed");
            }
        }
        Ok(())
    }

    pub fn lease(&self, session: &str) -> Result<Lease, TaskError> {
        self.core()
            .read(|s| s.sessions.get(session).map(|_| s.tasks.lease(session)))
            .ok_or_else(|| TaskError::UnknownSession(session.to_string()))
    }

    /// Gives the session to a human; queued work waits until a human releases it.
    pub async fn takeover(
        &self,
        session: &str,
        by: Option<String>,
        reason: &str,
    ) -> Result<Lease, TaskError> {
        let lock = self.lock_of(session);
        let _guard = lock.lock().await;
        self.set_lease(session, LeaseHolder::Human, by, reason)
            .await
    }

    async fn set_lease(
        &self,
        session: &str,
        holder: LeaseHolder,
        by: Option<String>,
        reason: &str,
    ) -> Result<Lease, TaskError> {
        let current = self.lease(session)?;
        if current.holder == holder {
            return Ok(current);
        }
        self.append(
            session,
            EventKind::LeaseChanged(Lease {
                holder,
                generation: current.generation + 1,
                since: 0,
                reason: Some(reason.to_string()),
                by,
            }),
        )
        .await?;
        self.lease(session)
    }

    /// A human hands the session back to the queue; with `drop_queued`, waiting tasks are
    /// cancelled first. Not offered over MCP.
    pub async fn release(
        &self,
        session: &str,
        by: Option<String>,
        drop_queued: bool,
    ) -> Result<(Lease, Vec<String>), TaskError> {
        let lock = self.lock_of(session);
        let _guard = lock.lock().await;
        self.lease(session)?;
        let mut dropped = Vec::new();
        if drop_queued {
            let waiting: Vec<String> = self.core().read(|s| {
                s.tasks
                    .open(session)
                    .filter(|t| t.state == TaskState::Waiting)
                    .map(|t| t.id.clone())
                    .collect()
            });
            for task in waiting {
                self.append(
                    session,
                    EventKind::TaskFinished(TaskFinished {
                        task_id: task.clone(),
                        state: TaskState::Cancelled,
                        cancel_outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                        error: Some("dropped when control was released".into()),
                        superseded_by: None,
                    }),
                )
                .await?;
                dropped.push(task);
            }
        }
        let lease = self
            .set_lease(session, LeaseHolder::Managed, by, "release")
            .await?;
        Ok((lease, dropped))
    }

    async fn accept(
        &self,
        session: &str,
        task: &str,
        turn_id: &str,
        outcome: InjectState,
    ) -> Result<(), TaskError> {
        let accepted_as = match outcome {
            InjectState::Started => "turn",
            InjectState::Steered => "steer",
            InjectState::Queued => "queued",
        };
        self.append(
            session,
            EventKind::TaskAccepted(TaskAccepted {
                task_id: task.to_string(),
                turn_id: turn_id.to_string(),
                accepted_as: accepted_as.to_string(),
            }),
        )
        .await?;
        Ok(())
    }
}

mod dispatch;
mod view;

pub use view::view;
use view::{cut, redacted};
