//! The event model: one [`Event`] per line in the log and per SSE message.

use serde::{Deserialize, Serialize};

use super::request::{
    InputRequested, InputResolved, Notification, SessionAttention, SessionMode, SessionModel,
};
use super::session::{
    ApprovalRequested, ApprovalResolved, ErrorEvent, GoalUpdated, ItemDelta, ItemEvent,
    MessageSent, PermissionModeSeen, SessionAdopted, SessionBound, SessionClosed, SessionCreated,
    SessionPane, SessionRehomed, SessionStatus, TurnCompleted, TurnPlan, TurnStarted, Usage,
};
use super::task::{
    Lease, TaskAbort, TaskAccepted, TaskCancelRequested, TaskDelivered, TaskEdited, TaskFinished,
    TaskQueued, TaskReturned,
};

/// One durable event.
///
/// `seq` is global and strictly increasing; `session_seq` counts the events of one session
/// (for tracker events, the tmux session name) and is absent for daemon-wide events.
/// The serialized form always starts with `{"seq":` — the log reader relies on it to find
/// a line's seq without parsing the whole line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub seq: u64,
    /// Milliseconds since the Unix epoch, taken by the daemon when the event was sequenced.
    pub ts: u64,
    /// Whose event it is; one field, two kinds of name: for the tracker's events
    /// (`agent.*`, `session.focused`, `meta.*`) a tmux session's name (`TmuxSessionName`),
    /// for a hosted session's events (`session.*` but `session.focused`, `turn.*`, `item.*`,
    /// `approval.*`, `input.*`, `task.*`, `lease.changed`, …) cohost's session id
    /// (`SessionId`); a `notification` has the session of the event it was derived from;
    /// absent for daemon-wide events. Kept a plain string so the log and the wire stay as they
    /// are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_seq: Option<u64>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened. Serialized adjacently: `"type": "agent.updated", "data": {..}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", content = "data")]
pub enum EventKind {
    /// The daemon started; `pid` and `version` identify the process.
    #[serde(rename = "daemon.started")]
    DaemonStarted(DaemonInfo),
    /// The daemon shut down cleanly; absent after a crash.
    #[serde(rename = "daemon.stopped")]
    DaemonStopped(DaemonInfo),
    /// An agent reported its status (HTTP `POST /api/agent-event`, the CLI, or a watcher).
    #[serde(rename = "agent.updated")]
    AgentUpdated(AgentUpdate),
    /// A running or waiting instance went quiet for longer than the stale threshold.
    #[serde(rename = "agent.stale")]
    AgentStale(InstanceRef),
    /// A finished, seen instance was removed after the prune delay.
    #[serde(rename = "agent.pruned")]
    AgentPruned(InstanceRef),
    /// A tmux session was focused by a client: its finished instances are now seen.
    #[serde(rename = "session.focused")]
    SessionFocused(Focus),
    /// `POST /set-status`: the session's status text (or `null` text to clear it).
    #[serde(rename = "meta.status")]
    MetaStatus(MetaStatus),
    /// `POST /set-progress`.
    #[serde(rename = "meta.progress")]
    MetaProgress(MetaProgress),
    /// `POST /log` and `POST /notify` (`notify: true`).
    #[serde(rename = "meta.log")]
    MetaLog(MetaLog),
    /// `POST /clear-log`.
    #[serde(rename = "meta.log_cleared")]
    MetaLogCleared(Empty),
    #[serde(rename = "session.created")]
    SessionCreated(SessionCreated),
    #[serde(rename = "session.bound")]
    SessionBound(SessionBound),
    #[serde(rename = "session.status")]
    SessionStatus(SessionStatus),
    #[serde(rename = "session.closed")]
    SessionClosed(SessionClosed),
    #[serde(rename = "session.permission_mode")]
    PermissionModeSeen(PermissionModeSeen),
    #[serde(rename = "session.pane")]
    SessionPane(SessionPane),
    /// The session drives an agent a person started by hand (see `SessionAdopted`).
    #[serde(rename = "session.adopted")]
    SessionAdopted(SessionAdopted),
    /// An adopted codex or claude moved under cohost's own host (see `SessionRehomed`).
    #[serde(rename = "session.rehomed")]
    SessionRehomed(SessionRehomed),
    #[serde(rename = "turn.started")]
    TurnStarted(TurnStarted),
    #[serde(rename = "turn.completed")]
    TurnCompleted(TurnCompleted),
    /// The turn's step list, as the agent last set it (codex `update_plan`).
    #[serde(rename = "turn.plan_updated")]
    TurnPlanUpdated(TurnPlan),
    #[serde(rename = "item.started")]
    ItemStarted(ItemEvent),
    #[serde(rename = "item.completed")]
    ItemCompleted(ItemEvent),
    /// Live only: broadcast to subscribers that are caught up, never stored, no seq.
    #[serde(rename = "item.delta")]
    ItemDelta(ItemDelta),
    #[serde(rename = "approval.requested")]
    ApprovalRequested(ApprovalRequested),
    #[serde(rename = "approval.resolved")]
    ApprovalResolved(ApprovalResolved),
    /// The agent waits for a person: a question, a plan, an elicitation, a permissions grant.
    #[serde(rename = "input.requested")]
    InputRequested(Box<InputRequested>),
    /// An input request was answered, or made moot.
    #[serde(rename = "input.resolved")]
    InputResolved(InputResolved),
    /// The collaboration mode the session's next turn runs in.
    #[serde(rename = "session.mode")]
    SessionMode(SessionMode),
    /// The model the session's next turns run on, switched after it was created.
    #[serde(rename = "session.model")]
    SessionModel(SessionModel),
    /// The agent said it waits for a person (Claude's `Notification` hook).
    #[serde(rename = "session.attention")]
    SessionAttention(SessionAttention),
    /// Something a person should look at (`turn-ended`, `input-needed`, `error`), derived by
    /// the core from the event that caused it.
    #[serde(rename = "notification")]
    Notification(Notification),
    #[serde(rename = "usage")]
    Usage(Usage),
    #[serde(rename = "error")]
    Error(ErrorEvent),
    #[serde(rename = "goal.updated")]
    GoalUpdated(GoalUpdated),
    #[serde(rename = "goal.cleared")]
    GoalCleared(Empty),
    #[serde(rename = "message.sent")]
    MessageSent(MessageSent),
    #[serde(rename = "task.queued")]
    TaskQueued(TaskQueued),
    #[serde(rename = "task.edited")]
    TaskEdited(TaskEdited),
    #[serde(rename = "task.delivered")]
    TaskDelivered(TaskDelivered),
    #[serde(rename = "task.returned")]
    TaskReturned(TaskReturned),
    #[serde(rename = "task.accepted")]
    TaskAccepted(TaskAccepted),
    #[serde(rename = "task.finished")]
    TaskFinished(TaskFinished),
    #[serde(rename = "task.cancel_requested")]
    TaskCancelRequested(TaskCancelRequested),
    #[serde(rename = "task.abort")]
    TaskAbort(TaskAbort),
    #[serde(rename = "lease.changed")]
    LeaseChanged(Lease),
    /// Start-up found the event log (or the snapshot) damaged: what is missing, what was
    /// quarantined. Written right after `daemon.started`.
    #[serde(rename = "log.damaged")]
    LogDamaged(LogDamage),
}

impl EventKind {
    /// The `type` string this kind serializes as.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::DaemonStarted(_) => "daemon.started",
            EventKind::DaemonStopped(_) => "daemon.stopped",
            EventKind::AgentUpdated(_) => "agent.updated",
            EventKind::AgentStale(_) => "agent.stale",
            EventKind::AgentPruned(_) => "agent.pruned",
            EventKind::SessionFocused(_) => "session.focused",
            EventKind::MetaStatus(_) => "meta.status",
            EventKind::MetaProgress(_) => "meta.progress",
            EventKind::MetaLog(_) => "meta.log",
            EventKind::MetaLogCleared(_) => "meta.log_cleared",
            EventKind::SessionCreated(_) => "session.created",
            EventKind::SessionBound(_) => "session.bound",
            EventKind::SessionStatus(_) => "session.status",
            EventKind::SessionClosed(_) => "session.closed",
            EventKind::SessionPane(_) => "session.pane",
            EventKind::SessionAdopted(_) => "session.adopted",
            EventKind::SessionRehomed(_) => "session.rehomed",
            EventKind::PermissionModeSeen(_) => "session.permission_mode",
            EventKind::TurnStarted(_) => "turn.started",
            EventKind::TurnCompleted(_) => "turn.completed",
            EventKind::TurnPlanUpdated(_) => "turn.plan_updated",
            EventKind::ItemStarted(_) => "item.started",
            EventKind::ItemCompleted(_) => "item.completed",
            EventKind::ItemDelta(_) => "item.delta",
            EventKind::ApprovalRequested(_) => "approval.requested",
            EventKind::ApprovalResolved(_) => "approval.resolved",
            EventKind::InputRequested(_) => "input.requested",
            EventKind::InputResolved(_) => "input.resolved",
            EventKind::SessionMode(_) => "session.mode",
            EventKind::SessionModel(_) => "session.model",
            EventKind::SessionAttention(_) => "session.attention",
            EventKind::Notification(_) => "notification",
            EventKind::Usage(_) => "usage",
            EventKind::Error(_) => "error",
            EventKind::GoalUpdated(_) => "goal.updated",
            EventKind::GoalCleared(_) => "goal.cleared",
            EventKind::MessageSent(_) => "message.sent",
            EventKind::TaskQueued(_) => "task.queued",
            EventKind::TaskEdited(_) => "task.edited",
            EventKind::TaskDelivered(_) => "task.delivered",
            EventKind::TaskReturned(_) => "task.returned",
            EventKind::TaskAccepted(_) => "task.accepted",
            EventKind::TaskFinished(_) => "task.finished",
            EventKind::TaskCancelRequested(_) => "task.cancel_requested",
            EventKind::TaskAbort(_) => "task.abort",
            EventKind::LeaseChanged(_) => "lease.changed",
            EventKind::LogDamaged(_) => "log.damaged",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Empty {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    pub pid: u32,
    pub version: String,
}

/// An inclusive range of seqs with no stored event: what a reader skipped over (the `gaps` of a
/// page, an SSE `gap` message) or what start-up found missing from the log (`log.damaged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SeqRange {
    pub from: u64,
    pub to: u64,
}

/// `log.damaged`: what start-up found wrong with the event log, and what it did about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogDamage {
    /// The seq the snapshot was taken at (0: none, or not usable).
    pub snapshot_seq: u64,
    /// The seqs of the first and last event the log holds now (0 when it holds none).
    pub log_first_seq: u64,
    pub log_last_seq: u64,
    /// Seqs once written and no longer in the log, in order: the first 100 ranges (every
    /// range is also a `gap` record in `quarantineFile`).
    pub missing: Vec<MissingRange>,
    /// How many seqs are missing, in all ranges.
    pub missing_count: u64,
    /// How many ranges are missing (`missing` lists the first 100).
    #[serde(default)]
    pub missing_ranges: u64,
    /// Lines moved out of the log into `quarantineFile` (the first 100; all are counted).
    pub quarantined: Vec<QuarantinedLine>,
    pub quarantined_count: u64,
    pub quarantine_file: String,
    /// Other findings, in words: an unreadable snapshot, a log with no segment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Seqs `from..=to` missing from the log. `inSnapshot`: the state still reflects them (the
/// snapshot covers them); otherwise the state was rebuilt without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MissingRange {
    pub from: u64,
    pub to: u64,
    pub in_snapshot: bool,
}

/// One line taken out of a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuarantinedLine {
    /// The segment's file name and where the line started in it (as found).
    pub segment: String,
    pub offset: u64,
    /// 1-based line number in the segment (as found).
    pub line: u64,
    pub bytes: u64,
    /// `checksum_mismatch`, `unreadable`, `seq_not_increasing`, `seq_ahead_of_next_line`,
    /// `seq_outside_segment`, `seq_too_large`, `truncated` or `stray_byte`.
    pub reason: String,
    /// The seq the line claims, when readable (it may be the damaged part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// Agent status, with opensessions' spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AgentStatus {
    Idle,
    Running,
    ToolRunning,
    Done,
    Error,
    Waiting,
    Interrupted,
    Stale,
}

impl AgentStatus {
    pub const ALL: [AgentStatus; 8] = [
        AgentStatus::Idle,
        AgentStatus::Running,
        AgentStatus::ToolRunning,
        AgentStatus::Done,
        AgentStatus::Error,
        AgentStatus::Waiting,
        AgentStatus::Interrupted,
        AgentStatus::Stale,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Idle => "idle",
            AgentStatus::Running => "running",
            AgentStatus::ToolRunning => "tool-running",
            AgentStatus::Done => "done",
            AgentStatus::Error => "error",
            AgentStatus::Waiting => "waiting",
            AgentStatus::Interrupted => "interrupted",
            AgentStatus::Stale => "stale",
        }
    }

    /// `done`, `error` and `interrupted` end a turn; they are the statuses that set unseen.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            AgentStatus::Done | AgentStatus::Error | AgentStatus::Interrupted
        )
    }

    /// Statuses that age to `stale` when no update arrives.
    pub fn can_go_stale(self) -> bool {
        matches!(
            self,
            AgentStatus::Running | AgentStatus::ToolRunning | AgentStatus::Waiting
        )
    }

    /// Ordering used to derive one session-level status from several instances:
    /// the status that most needs a human wins.
    pub fn priority(self) -> u8 {
        match self {
            AgentStatus::Waiting => 7,
            AgentStatus::Error => 6,
            AgentStatus::ToolRunning => 5,
            AgentStatus::Running => 4,
            AgentStatus::Interrupted => 3,
            AgentStatus::Done => 2,
            AgentStatus::Stale => 1,
            AgentStatus::Idle => 0,
        }
    }
}

impl std::fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AgentStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown status `{s}`, expected one of: {}",
                    AgentStatus::ALL.map(AgentStatus::as_str).join(", ")
                )
            })
    }
}

/// Whether the process behind an instance is known to be alive.
/// `alive` instances never age to `stale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    Alive,
    Exited,
    Unknown,
}

/// A resolved agent report, as stored in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentUpdate {
    pub agent: String,
    pub status: AgentStatus,
    /// The reporter's own timestamp (ms), or the daemon's when it sent none.
    pub ts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// Who reported it: `hosted` (a session cohost runs), `watcher:<agent>` (a passive
    /// watcher); absent for reports over the API (`POST /api/agent-event`, `cohost event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Reported over the API without the bearer token (the opensessions hook routes): such
    /// instances are bounded per agent and per session, and make room before any other.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tokenless: bool,
}

impl AgentUpdate {
    /// [`AgentUpdate::source`] as the state view shows it: `api` when absent.
    pub fn source_name(&self) -> &str {
        self.source.as_deref().unwrap_or(SOURCE_API)
    }
}

/// The `source` of reports made over the API.
pub const SOURCE_API: &str = "api";
/// The `source` of hosted sessions' reports.
pub const SOURCE_HOSTED: &str = "hosted";

impl AgentUpdate {
    /// The instance key: `agent:threadId`, or `agent` alone.
    pub fn key(&self) -> String {
        instance_key(&self.agent, self.thread_id.as_deref())
    }
}

pub fn instance_key(agent: &str, thread_id: Option<&str>) -> String {
    match thread_id {
        Some(thread_id) => format!("{agent}:{thread_id}"),
        None => agent.to_string(),
    }
}

/// Names one instance of one session (the session is the event's `session`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRef {
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Focus {
    /// Where the focus came from: `tmux` (the client-session-changed hook) or `api`.
    pub source: String,
}

/// The tone opensessions uses for metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    Neutral,
    Info,
    Success,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetaStatus {
    /// `None` clears the status.
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetaProgress {
    /// `true` clears the progress; the other fields are then absent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetaLog {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Set when the entry came from `POST /notify` rather than `POST /log`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notify: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_serializes_seq_first_and_round_trips() {
        let event = Event {
            seq: 42,
            ts: 1_700_000_000_000,
            session: Some("work".into()),
            session_seq: Some(3),
            kind: EventKind::AgentStale(InstanceRef {
                key: "codex:t1".into(),
            }),
        };
        let json = serde_json::to_string(&event).unwrap();
        assert!(json.starts_with("{\"seq\":42,"), "{json}");
        assert_eq!(
            json,
            r#"{"seq":42,"ts":1700000000000,"session":"work","sessionSeq":3,"type":"agent.stale","data":{"key":"codex:t1"}}"#
        );
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn type_name_matches_serialized_tag() {
        let kinds = [
            EventKind::MetaLogCleared(Empty {}),
            EventKind::SessionFocused(Focus {
                source: "api".into(),
            }),
            EventKind::DaemonStarted(DaemonInfo {
                pid: 1,
                version: "x".into(),
            }),
            EventKind::PermissionModeSeen(crate::PermissionModeSeen {
                mode: "auto".into(),
                allowed: false,
            }),
        ];
        for kind in kinds {
            let value = serde_json::to_value(&kind).unwrap();
            assert_eq!(value["type"], kind.type_name());
        }
    }

    #[test]
    fn status_parses_every_spelling() {
        for status in AgentStatus::ALL {
            assert_eq!(status.as_str().parse::<AgentStatus>().unwrap(), status);
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        assert!("finished".parse::<AgentStatus>().is_err());
    }
}
