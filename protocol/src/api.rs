//! Request and response bodies of the HTTP API (see `docs/api.md`).

use serde::{Deserialize, Serialize};

use super::event::{AgentStatus, Liveness, Tone};
use super::session::{ForkOrigin, Runtime, TurnStatus};
use super::{Bare, Field, Message};

/// Upper bounds on string fields, in bytes. Documented in `docs/api.md`.
pub mod bounds {
    pub const AGENT: usize = 128;
    pub const SESSION: usize = 256;
    pub const PROJECT_DIR: usize = 4096;
    pub const THREAD_ID: usize = 256;
    pub const THREAD_NAME: usize = 1024;
    pub const LAST_USER_PROMPT: usize = 16 * 1024;
    pub const PANE_ID: usize = 64;
    pub const STATUS_TEXT: usize = 1024;
    pub const LABEL: usize = 1024;
    pub const LOG_MESSAGE: usize = 4096;
    pub const LOG_SOURCE: usize = 128;
}

/// A field that failed validation after it parsed; the message names fields as values (see
/// [`Message`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: Field,
    pub message: Message,
}

impl FieldError {
    pub fn new(field: Field, message: impl Into<Message>) -> FieldError {
        FieldError {
            field,
            message: message.into(),
        }
    }
}

fn check_len(field: Field, value: Option<&str>, max: usize) -> Result<(), FieldError> {
    match value {
        Some(value) if value.len() > max => Err(FieldError::new(
            field,
            crate::message![
                Bare(field),
                format!(" is {} bytes, at most {max} allowed", value.len())
            ],
        )),
        _ => Ok(()),
    }
}

fn check_non_empty(field: Field, value: Option<&str>) -> Result<(), FieldError> {
    match value {
        Some(value) if value.trim().is_empty() => Err(FieldError::new(
            field,
            crate::message![Bare(field), " must not be empty"],
        )),
        _ => Ok(()),
    }
}

/// `POST /api/agent-event`, opensessions-compatible. Unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentEventParams {
    pub agent: String,
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
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
}

impl AgentEventParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        check_non_empty(Field::Agent, Some(&self.agent))?;
        check_len(Field::Agent, Some(&self.agent), bounds::AGENT)?;
        check_len(
            Field::TmuxSession,
            self.tmux_session.as_deref(),
            bounds::SESSION,
        )?;
        check_len(
            Field::ProjectDir,
            self.project_dir.as_deref(),
            bounds::PROJECT_DIR,
        )?;
        check_len(
            Field::ThreadId,
            self.thread_id.as_deref(),
            bounds::THREAD_ID,
        )?;
        check_len(
            Field::ThreadName,
            self.thread_name.as_deref(),
            bounds::THREAD_NAME,
        )?;
        check_len(
            Field::LastUserPrompt,
            self.last_user_prompt.as_deref(),
            bounds::LAST_USER_PROMPT,
        )?;
        check_len(Field::PaneId, self.pane_id.as_deref(), bounds::PANE_ID)?;
        if self.tmux_session.is_none() && self.project_dir.is_none() {
            return Err(FieldError::new(
                Field::TmuxSession,
                crate::message![
                    "one of ",
                    Bare(Field::TmuxSession),
                    " or ",
                    Bare(Field::ProjectDir),
                    " is required"
                ],
            ));
        }
        if let Some(dir) = &self.project_dir
            && !dir.starts_with('/')
        {
            return Err(FieldError::new(
                Field::ProjectDir,
                crate::message![
                    Bare(Field::ProjectDir),
                    format!(" must be an absolute path, got `{dir}`")
                ],
            ));
        }
        Ok(())
    }
}

/// `POST /set-status`: `text: null` (or absent) clears the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetStatusParams {
    pub session: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
}

impl SetStatusParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        check_session(&self.session)?;
        check_len(Field::Text, self.text.as_deref(), bounds::STATUS_TEXT)
    }
}

/// `POST /set-progress`: `clear: true` clears the progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetProgressParams {
    pub session: String,
    #[serde(default)]
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

impl SetProgressParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        check_session(&self.session)?;
        check_len(Field::Label, self.label.as_deref(), bounds::LABEL)?;
        if let Some(percent) = self.percent
            && !(0.0..=100.0).contains(&percent)
        {
            return Err(FieldError::new(
                Field::Percent,
                format!("percent must be between 0 and 100, got {percent}"),
            ));
        }
        Ok(())
    }
}

/// `POST /log` and `POST /notify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogParams {
    pub session: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl LogParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        check_session(&self.session)?;
        check_len(Field::LogMessage, Some(&self.message), bounds::LOG_MESSAGE)?;
        check_len(Field::Source, self.source.as_deref(), bounds::LOG_SOURCE)
    }
}

/// `POST /clear-log` and `POST /api/focus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session: String,
}

impl SessionParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        check_session(&self.session)
    }
}

fn check_session(session: &str) -> Result<(), FieldError> {
    check_non_empty(Field::Session, Some(session))?;
    check_len(Field::Session, Some(session), bounds::SESSION)
}

/// The answer to every accepted POST that records an event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub ok: bool,
    pub seq: u64,
    pub session: String,
}

/// One agent instance as `GET /api/state` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    pub key: String,
    pub agent: String,
    pub status: AgentStatus,
    pub unseen: bool,
    /// The reporter's timestamp of the last update (ms).
    pub ts: u64,
    /// When the daemon received the last update (ms); staleness and pruning count from here.
    pub updated_at: u64,
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
    /// Who reported the instance: `api`, `hosted`, `watcher:<agent>`.
    #[serde(default)]
    pub source: String,
    /// How cohost knows it: `watched` (a watcher follows its files; nothing drives it),
    /// `adopted` (a person started it by hand and a cohost session drives it now) or `hosted`
    /// (a cohost session started it); absent for an instance reported over the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<super::Control>,
    /// The cohost session that drives it (adopted or hosted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A watched instance `POST /api/state/{session}/agents/{key}/adopt` may take: an agent a
    /// runtime adopts, of a known session, in a tmux pane, not exited (the adoption still
    /// checks the pane and the process). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adoptable: bool,
    /// The machine the instance runs on: set by a hub (`serve --hub`) on every instance it
    /// lists; absent on a daemon that is no hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
    pub ts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub ts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogView {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tone: Option<Tone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notify: bool,
    pub ts: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataView {
    pub status: Option<StatusView>,
    pub progress: Option<ProgressView>,
    pub logs: Vec<LogView>,
}

/// One tmux session in `GET /api/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub name: String,
    /// tmux's session id (`$3`).
    pub id: String,
    pub dir: String,
    pub windows: u32,
    pub attached: bool,
    /// The most urgent status among the session's instances, or `None` without instances.
    pub status: Option<AgentStatus>,
    pub unseen: bool,
    pub agents: Vec<InstanceView>,
    pub metadata: MetadataView,
    /// The machine the tmux session is on: set by a hub (`serve --hub`) on every session it
    /// lists (another machine's sessions have `name` and `id` qualified: `laptop/work`,
    /// `laptop/$3`); absent on a daemon that is no hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Another machine's session on a hub: that machine's link, `up` or `down` (a `down`
    /// machine's sessions are its last known state, not its present one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_link: Option<MachineLinkState>,
}

/// `GET /api/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    /// The last event applied to this state.
    pub seq: u64,
    /// This daemon's machine name (`machine`, default the host name).
    #[serde(default)]
    pub machine: String,
    pub focused_session: Option<String>,
    /// Whether the tmux server on the configured socket answered.
    pub tmux_running: bool,
    pub sessions: Vec<SessionView>,
    /// Agents a watcher found that belong to no tmux session (no pane holds their process and
    /// no session's directory matches their working directory): listed, never dropped.
    #[serde(default)]
    pub unplaced: Vec<InstanceView>,
    /// A hub (`serve --hub`): every other machine it views, with its link. Absent on a daemon
    /// that is no hub.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<MachineLink>,
}

/// Whether a hub hears from a machine: `up`, or `down` when nothing came from it (neither its
/// heartbeat in the KV bucket nor an event) within the hub's bound (`hub-down-after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MachineLinkState {
    Up,
    Down,
}

/// One machine as a hub sees it (`GET /api/state` `machines`, `/api/health` `hub.machines`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineLink {
    pub machine: String,
    pub link: MachineLinkState,
    /// When the hub last heard from the machine (ms since the epoch, by the NATS server's
    /// clock): its last heartbeat or event; absent when never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heard: Option<u64>,
    /// The newest seq of the machine's log the hub holds (its events' own seqs).
    pub received_seq: u64,
    /// The newest seq the machine logged, as its last heartbeat said.
    pub head_seq: u64,
    /// `headSeq - receivedSeq`: the machine's events the hub does not hold yet.
    pub lag: u64,
    /// Events the stream delivered again that the hub already held (dropped, counted).
    #[serde(default)]
    pub duplicates_dropped: u64,
    /// The bytes of the machine's events the hub holds in memory (each counted by its JSON, its
    /// session id and 64 bytes of entry), within `--hub-memory-mb`.
    #[serde(default)]
    pub memory_bytes: u64,
    /// The newest seq that left the hub's memory (0: none): a read of events up to it is read
    /// from the hub's copy on disk.
    #[serde(default)]
    pub on_disk_through: u64,
    /// The last failure reading the machine's stream or view, while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A hub's health (`/api/health` `hub`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HubHealth {
    /// A machine not heard from for this long (ms) is `down`.
    pub down_after_ms: u64,
    pub machines: Vec<MachineLink>,
}

/// `GET /api/sessions/{machine}/{id}/events` on a hub: another machine's session's events, as
/// that machine logged them; the cursor (`after`, `next`, `head`) is that machine's seq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteEventsPage {
    pub machine: String,
    /// The session's id on its machine (unqualified).
    pub session: String,
    pub events: Vec<super::Event>,
    /// The cursor to pass as `after` next time: the last returned seq, or `after` when empty.
    pub next: u64,
    /// The newest seq of the machine the hub holds.
    pub head: u64,
    pub link: MachineLinkState,
    /// A backwards window (`last=N`, `before=SEQ`): whether the hub holds older events of the
    /// session; absent for a forward read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_older: Option<bool>,
    /// A backwards window's next `before`, while `hasOlder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_before: Option<u64>,
}

/// `GET /api/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsPage {
    pub events: Vec<super::Event>,
    /// The cursor to pass as `after` next time: the last returned seq, or `after` when empty.
    pub next: u64,
    /// The newest seq in the log when the page was read.
    pub head: u64,
    /// Seqs between `after` and `next` with no stored event (a damaged log), skipped by this
    /// read; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<super::SeqRange>,
}

/// `GET /api/sessions/{id}/events?last=N` and `?before=SEQ&limit=N`: a window of one
/// session's events read backwards, in seq order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsWindow {
    pub events: Vec<super::Event>,
    /// The last seq the window covers (the head for `last`, `before - 1` otherwise): follow the
    /// session on with `after` = `next`.
    pub next: u64,
    /// The newest seq in the log when the window was read.
    pub head: u64,
    /// Seqs the window covers with no stored event (a damaged log): from its first event (from
    /// seq 1 when nothing is older) to `next`, so paging back reports each once; absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<super::SeqRange>,
    /// Whether the session has events before this window.
    pub has_older: bool,
    /// The window's first seq when `hasOlder`: the `before` of the previous window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_before: Option<u64>,
}

/// Every error response: `{"error":{"code":"snake_case","message":"…"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
    /// The request field at fault, for `invalid_field` and `missing_field`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// `GET /api/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// False while a daemon task has failed (`failed_tasks`).
    pub ok: bool,
    pub version: String,
    pub pid: u32,
    pub seq: u64,
    /// The TCP address the daemon listens on (what `cohost web` opens: the CLI itself reaches
    /// the daemon over its socket).
    pub listen: String,
    /// This daemon's machine name (`machine`, default the host name): what qualifies its ids
    /// across machines (`laptop/<session>`).
    #[serde(default)]
    pub machine: String,
    /// Publishing into NATS JetStream (`serve --nats`); absent when the daemon does not publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub federation: Option<FederationHealth>,
    /// Viewing other machines (`serve --hub`); absent when the daemon is no hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubHealth>,
    /// The daemon-long tasks that panicked since it started (the task queue's dispatcher, the
    /// ticks, the hub, …), each `<task> panicked: <message>`, the first 8: their work stopped
    /// until the daemon restarts. Absent when none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_tasks: Vec<String>,
}

/// How the publisher into NATS JetStream is doing (`/api/health`, `cohost doctor`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FederationHealth {
    /// The NATS server, without credentials.
    pub url: String,
    /// The JetStream stream the events go to (`COHOST_<machine>`).
    pub stream: String,
    /// `connected` or `disconnected` (`connecting` for a moment at start); `refused` once the
    /// server refused a permission the publisher needs (see `refused`).
    pub link: String,
    /// The newest seq in the local log.
    pub last_logged_seq: u64,
    /// The newest seq the server acknowledged (and the publisher checkpointed).
    pub last_acked_seq: u64,
    /// `lastLoggedSeq - lastAckedSeq`: events not yet acknowledged by the server.
    pub backlog: u64,
    /// When the server last acknowledged a publish (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ack_at: Option<u64>,
    /// The last failure (a refused publish, a timeout, a lost link), while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<u64>,
    /// The permissions the NATS server refused this machine's connections (each its
    /// `Permissions Violation for …`, naming the subject; the first 8), until the daemon
    /// restarts: the refused connection stops (the publisher's: `link` is `refused`), and the
    /// log keeps every event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// One hosted session as `GET /api/sessions` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostedSessionView {
    pub id: String,
    /// The session's name in every list: the last component of `cwd`; a session whose
    /// directory ends like an earlier one's gets ` (2)`, ` (3)`… in creation order.
    #[serde(default)]
    pub name: String,
    pub runtime: Runtime,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<super::ApprovalPolicy>,
    /// claude: the permission mode in force — what Claude's own records last reported, else the
    /// mode it was launched in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<super::PermissionMode>,
    /// claude: whether the daemon allows that mode (`false`: cohost asks before every tool call);
    /// absent until Claude reported a mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode_allowed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::Sandbox>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// `starting`, `live`, `restarting`, `lost` or `closed`.
    pub state: super::SessionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_turn_id: Option<String>,
    pub turns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn_status: Option<TurnStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_agent_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<serde_json::Value>,
    pub pending_approvals: usize,
    /// Input requests (questions, plans, elicitations, permissions) waiting for a person.
    #[serde(default)]
    pub pending_requests: usize,
    /// The collaboration mode set for the session's next turns (`PUT …/mode`), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// The profile the session started from and the effective values it added (secrets
    /// redacted), with where each came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<super::SessionProfile>,
    /// The tmux pane of the session's terminal (claude sessions, co-driven codex and opencode
    /// sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_session: Option<String>,
    /// How cohost came to drive it: `hosted` (cohost started the agent) or `adopted` (a person
    /// started it by hand; `adopted` says what cohost checked).
    #[serde(default)]
    pub control: super::Control,
    /// An adopted session's evidence: the instance, pane and process it drives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted: Option<super::SessionAdopted>,
    /// Who drives the session: the task queue (`managed`) or a human.
    #[serde(default)]
    pub lease: super::task::Lease,
    /// Tasks waiting in the session's queue.
    #[serde(default)]
    pub waiting_tasks: usize,
    pub created_at: u64,
    pub updated_at: u64,
    /// The machine the session runs on: set by a hub (`serve --hub`) on every session it lists
    /// (another machine's have `id` qualified: `laptop/<id>`); absent on a daemon that is no hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Another machine's session on a hub: that machine's link (`down`: last known state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_link: Option<MachineLinkState>,
}

/// A command a hub sends to the machine that owns a session, by NATS request/reply on
/// `cohost.cmd.<machine>` (the machine answers only with `serve --nats-commands`). The owning
/// machine executes it as a client of its own service layer, exactly as its HTTP API would.
/// On the wire: `{"op": …, "session": …, "from": …, <the op's fields>}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteCommand {
    /// The session's id on its machine (unqualified); empty for an op of the machine itself
    /// (`create`, `models`).
    #[serde(default)]
    pub session: String,
    /// The hub that sent it.
    pub from: String,
    /// The surface of the hub the command came from: the owning machine applies that
    /// surface's rules (MCP refuses an interrupt or an answer while a human holds the lease).
    /// Absent (an older hub): `http`.
    #[serde(default)]
    pub surface: RemoteSurface,
    #[serde(flatten)]
    pub op: RemoteOp,
}

/// Which surface of a hub sent a [`RemoteCommand`].
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum RemoteSurface {
    /// The HTTP API (and the web page, the CLI): its routes' rules.
    #[default]
    Http,
    /// An MCP tool: refused while a human holds the session's control lease where MCP refuses
    /// locally (`interrupt`, answers, the model).
    Mcp,
}

/// What a [`RemoteCommand`] asks of the owning machine: one op per route of its HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", tag = "op")]
pub enum RemoteOp {
    /// `POST /api/sessions/{id}/messages` on the owning machine.
    #[serde(rename_all = "camelCase")]
    Prompt {
        /// The body `POST /api/sessions/{id}/messages` takes, its idempotency key included.
        message: super::MessageBody,
    },
    /// `POST /api/sessions/{id}/interrupt` on the owning machine.
    Interrupt {},
    /// `POST /api/sessions/{id}/approvals/{approval}` on the owning machine: the first answer
    /// from any surface of any machine wins; a later one gets the owning machine's 409.
    #[serde(rename_all = "camelCase")]
    Approval {
        /// The approval's id (`approval.requested`'s `approvalId`).
        approval: String,
        /// The body the route takes; `by` defaults to `hub:<from>`.
        decision: super::DecisionBody,
    },
    /// `POST /api/sessions/{id}/requests/{request}` on the owning machine (a question, a plan,
    /// a form, a permissions request), answered as there.
    #[serde(rename_all = "camelCase")]
    Answer {
        /// The request's id (`input.requested`'s `requestId`).
        request: String,
        /// The body the route takes; `by` defaults to `hub:<from>`.
        answer: super::InputAnswer,
    },
    /// `GET /api/sessions/{id}/approvals` on the owning machine: its session's approvals,
    /// pending and resolved, as it holds them now. Answered with its `ApprovalList`.
    Approvals {},
    /// `GET /api/sessions/{id}/requests` on the owning machine. Answered with its
    /// `RequestList`.
    Requests {},
    /// `POST /api/sessions/{id}/tasks` on the owning machine: the task joins that machine's
    /// queue (the hub always sends an idempotency key, so a delivery sent again finds the
    /// first). Answered with its `SendResult`.
    #[serde(rename_all = "camelCase")]
    Task { task: super::SendBody },
    /// `GET /api/tasks/{task}` on the owning machine (a task of `session`). Answered with its
    /// `TaskReply`.
    #[serde(rename_all = "camelCase")]
    TaskStatus { task: String },
    /// `POST /api/tasks/{task}/cancel` on the owning machine. Answered with its `CancelResult`.
    #[serde(rename_all = "camelCase")]
    TaskCancel { task: String },
    /// `GET /api/tasks/{task}/result` on the owning machine (a task of `session`). Answered
    /// with its `ResultChunk`.
    #[serde(rename_all = "camelCase")]
    TaskResult {
        task: String,
        #[serde(default)]
        offset: usize,
        max_bytes: usize,
    },
    /// `POST /api/tasks/{task}/edit` on the owning machine (a task of `session`), with its
    /// revision and idempotency rules. Answered with its `EditResult`.
    #[serde(rename_all = "camelCase")]
    TaskEdit { task: String, edit: super::EditBody },
    /// `POST /api/tasks/{task}/supersede` on the owning machine (a task of `session`).
    /// Answered with its `EditResult` (the replacement is that machine's task).
    #[serde(rename_all = "camelCase")]
    TaskSupersede { task: String, edit: super::EditBody },
    /// `GET /api/sessions/{id}/queue` on the owning machine. Answered with its `QueueView`.
    Queue {},
    /// `GET /api/sessions/{id}/lease` on the owning machine. Answered with its `LeaseReply`.
    LeaseGet {},
    /// `PUT /api/sessions/{id}/mode` on the owning machine (from MCP: refused while a human
    /// holds the lease, as MCP refuses there). Answered with its `Capability`.
    #[serde(rename_all = "camelCase")]
    Mode { mode: super::ModeBody },
    /// `GET /api/sessions/{id}/goal` on the owning machine. Answered with its `Capability`.
    GoalGet {},
    /// `PUT /api/sessions/{id}/goal` on the owning machine. Answered with its `Capability`.
    #[serde(rename_all = "camelCase")]
    GoalSet { goal: super::GoalBody },
    /// `DELETE /api/sessions/{id}/goal` on the owning machine. Answered with its `Capability`.
    GoalClear {},
    /// `POST /api/sessions/{id}/fork` on the owning machine: answered with its `Capability`
    /// (`ok` with the new session, unqualified; the hub qualifies it).
    #[serde(rename_all = "camelCase")]
    Fork { fork: super::ForkBody },
    /// `GET /api/models?runtime=` on the owning machine (no session). Answered with its
    /// `Capability`.
    #[serde(rename_all = "camelCase")]
    Models {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    },
    /// `PUT /api/sessions/{id}/model` on the owning machine. Answered with its `Capability`.
    #[serde(rename_all = "camelCase")]
    Model { model: super::ModelBody },
    /// `POST /api/sessions/{id}/lease` on the owning machine: a human takes over or releases
    /// the session there (`by` defaults to `hub:<from>`). Answered with its `LeaseReply`.
    #[serde(rename_all = "camelCase")]
    Lease { lease: super::LeaseBody },
    /// `POST /api/sessions` on the owning machine (no session; `create.machine` is not sent):
    /// the idempotency key travels, so a retry finds the first session. Answered with its
    /// `CreatedReply` (ids unqualified; the hub qualifies them).
    #[serde(rename_all = "camelCase")]
    Create { create: super::CreateBody },
}

/// The owning machine's answer to a [`RemoteCommand`]: `ok` (the answer its HTTP API gives) or
/// `error` (the refusal its HTTP API gives, with its class).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteReply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RemoteError>,
}

/// A refusal by the owning machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteError {
    /// The class (`invalid`, `not_found`, `conflict`, `gone`, `too_many`, `unavailable`,
    /// `upstream`, `internal`, `forbidden`): what status the hub answers.
    pub kind: String,
    pub code: String,
    pub message: String,
}
