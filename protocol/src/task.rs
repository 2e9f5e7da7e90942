//! Tasks and control leases: the payloads of `task.*` and `lease.changed` events and the views
//! the API, the CLI and MCP answer with.
//!
//! A task is one prompt sent through cohost's queue. Its state says what became of it, its phase
//! where it is in the hand-off to the agent (`queued` → `delivered` → `accepted` → `finished`).
//! The lease says who drives the session: `managed` (the queue delivers) or `human` (queued work
//! waits). Its generation increments on every change.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Accepted by cohost, not yet delivered to the agent.
    Waiting,
    /// Delivered; the turn that consumes it is in progress.
    Running,
    /// The turn ended normally.
    Completed,
    /// The turn or the delivery failed.
    Failed,
    /// Cancelled before delivery, superseded, or its turn was interrupted.
    Cancelled,
    /// Delivered, but the process that held it is gone: what happened is not known.
    Unknown,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "waiting",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
            TaskState::Unknown => "unknown",
        }
    }

    pub fn is_finished(self) -> bool {
        !matches!(self, TaskState::Waiting | TaskState::Running)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskPhase {
    /// In cohost's queue; the agent has not seen it.
    Queued,
    /// Being handed to the agent; not yet taken into a turn.
    Delivered,
    /// The agent took it into a turn (`turnId`).
    Accepted,
    /// Terminal; see the state.
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitingReason {
    /// A human holds the session's lease; only a human release lets queued work through.
    HumanControl,
    /// The agent is in a turn.
    Busy,
    /// Another task of the session goes first.
    QueuedBehindOtherTask,
    /// The session is starting, restarting or its agent is not accepting input yet.
    NotReady,
    /// A task queued at a hub for another machine's session: that machine is down or takes no
    /// commands now; the hub delivers it when it is back (`machine` names it).
    MachineUnreachable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// The task had not been delivered: it will never run.
    CancelledBeforeDelivery,
    /// The interrupt was sent; the turn has not ended yet.
    AbortSent,
    /// The turn ended interrupted.
    Aborted,
    /// The interrupt was not sent; see `abortWithheld` for why.
    AbortWithheld,
    /// The turn ended on its own before an interrupt took effect.
    FinishedBeforeAbort,
    /// The process holding the turn went away; nobody knows how it ended.
    OutcomeUnknown,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LeaseHolder {
    /// cohost's queue delivers tasks.
    #[default]
    Managed,
    /// A human drives; queued tasks wait until a human releases.
    Human,
}

impl LeaseHolder {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseHolder::Managed => "managed",
            LeaseHolder::Human => "human",
        }
    }
}

/// Who drives a session. Absent from the log until the first change: `managed`, generation 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub holder: LeaseHolder,
    pub generation: u64,
    /// Milliseconds since the epoch of the last change (0: never changed).
    #[serde(default)]
    pub since: u64,
    /// `takeover`, `release`, `terminal_input`, `human_typing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `task.queued`: a prompt entered a session's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueued {
    pub task_id: String,
    pub prompt: String,
    /// `api`, `mcp` or `cli`.
    pub source: TaskSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The queue position to take (a replacement keeps the one of the task it supersedes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// `task.edited`: a waiting task's prompt was replaced in place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskEdited {
    pub task_id: String,
    pub prompt: String,
    /// The revision after the edit.
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_key: Option<String>,
}

/// `task.delivered`: the queue handed the task to the agent under this lease generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskDelivered {
    pub task_id: String,
    pub lease_generation: u64,
}

/// `task.returned`: a delivery did not happen; the task is back in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskReturned {
    pub task_id: String,
    pub reason: WaitingReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `task.accepted`: the agent took the task into turn `turn_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskAccepted {
    pub task_id: String,
    pub turn_id: String,
    /// `turn` (a new turn), `steer` (joined a running turn) or `queued` (queued by the agent
    /// behind its running turn).
    pub accepted_as: String,
}

/// `task.finished`: an end decided by cohost (a turn's end finishes its task without one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskFinished {
    pub task_id: String,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_outcome: Option<CancelOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

/// `task.cancel_requested`: cancellation of a delivered task, under this lease generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskCancelRequested {
    pub task_id: String,
    pub lease_generation: u64,
}

/// `task.abort`: what cohost did about a requested cancellation of a running task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskAbort {
    pub task_id: String,
    /// `abort_sent` or `abort_withheld`.
    pub outcome: CancelOutcome,
    /// Why an abort was withheld: `human_control`, `lease_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A task as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    pub task_id: String,
    pub session_id: String,
    /// A task queued at a hub for another machine's session: that machine (`sessionId` is
    /// qualified, `<machine>/<id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Such a task once delivered: its id in that machine's queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_task_id: Option<String>,
    pub state: TaskState,
    pub phase: TaskPhase,
    pub revision: u64,
    /// 0-based place among the session's waiting tasks, while waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_reason: Option<WaitingReason>,
    pub source: TaskSource,
    /// The prompt, redacted and cut to 512 bytes.
    pub prompt_preview: String,
    pub prompt_bytes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_generation_at_delivery: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_outcome: Option<CancelOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_withheld: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The turn was interrupted by someone other than this task's cancel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub human_intervened: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Bytes of the (redacted) final assistant text; read it with the result call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_excerpt: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_excerpt_truncated: bool,
}

/// A session's queue: its lease, work in flight, waiting work in delivery order, recent ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueView {
    pub session_id: String,
    pub lease: Lease,
    pub running: Vec<TaskView>,
    pub pending: Vec<TaskView>,
    pub pending_total: usize,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending_truncated: bool,
    pub recent: Vec<TaskView>,
    /// At a hub, another machine's session: that machine's link. `down`: its lease is the last
    /// one the hub saw, nothing runs or is recent as far as the hub can tell, and `pending`
    /// holds only the tasks waiting at the hub for it (`waitingReason` `machine_unreachable`).
    /// Up: its machine's queue, followed by the tasks still waiting at the hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_link: Option<super::MachineLinkState>,
}

/// A slice of a task's final assistant text (redacted), addressed by byte offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultChunk {
    pub task_id: String,
    pub state: TaskState,
    /// False until the task has finished with a text.
    pub available: bool,
    pub offset: usize,
    pub next_offset: usize,
    pub total_bytes: usize,
    pub eof: bool,
    pub text: String,
}

/// What a send answers: the task, and whether an idempotency key matched an earlier send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    pub task: TaskView,
    pub replayed: bool,
}

/// A cancellation's answer: the task after it, and what was done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    pub task: TaskView,
    /// The outcome so far (`abort_sent` becomes `aborted` or `finished_before_abort` when the
    /// turn ends; read the task again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CancelOutcome>,
    /// True when the task was already cancelled or finished: nothing new was done.
    pub replayed: bool,
}

/// An edit's or supersede's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditResult {
    pub task: TaskView,
    /// For a supersede: the task it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<TaskView>,
    pub replayed: bool,
}

/// Who asks: the surface a prompt or a lease change came from (`task.queued`'s `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskSource {
    Api,
    Mcp,
    Cli,
}

impl TaskSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSource::Api => "api",
            TaskSource::Mcp => "mcp",
            TaskSource::Cli => "cli",
        }
    }
}
