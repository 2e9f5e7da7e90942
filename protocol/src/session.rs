//! Payloads of the hosted-session events: one normalized vocabulary for every runtime, so a
//! client renders a codex turn and a claude turn the same way.

use serde::{Deserialize, Serialize};

use super::ids::ApprovalId;
use super::vocabulary::{
    ApprovalDecision, ApprovalKind, ApprovalPolicy, DeltaKind, FileChangeKind, PermissionMode,
    ResolvedBy, Sandbox,
};

/// Which agent runtime a hosted session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Codex,
    Claude,
    Opencode,
    Pi,
}

impl Runtime {
    /// Every runtime, in a stable order.
    pub const ALL: [Runtime; 4] = [
        Runtime::Codex,
        Runtime::Claude,
        Runtime::Opencode,
        Runtime::Pi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Codex => "codex",
            Runtime::Claude => "claude",
            Runtime::Opencode => "opencode",
            Runtime::Pi => "pi",
        }
    }

    /// The error code of a runtime that is not installed or did not start.
    pub fn unavailable_code(self) -> &'static str {
        match self {
            Runtime::Codex => crate::codes::CODEX_UNAVAILABLE,
            Runtime::Claude => crate::codes::CLAUDE_UNAVAILABLE,
            Runtime::Opencode => crate::codes::OPENCODE_UNAVAILABLE,
            Runtime::Pi => crate::codes::PI_UNAVAILABLE,
        }
    }

    /// The error code of a runtime that failed us.
    pub fn error_code(self) -> &'static str {
        match self {
            Runtime::Codex => crate::codes::CODEX_ERROR,
            Runtime::Claude => crate::codes::CLAUDE_ERROR,
            Runtime::Opencode => crate::codes::OPENCODE_ERROR,
            Runtime::Pi => crate::codes::PI_ERROR,
        }
    }

    /// Whether a session's settings carry an approval policy (codex's, or the one an opencode
    /// session's permission rules or a pi session's gate come from; claude sessions created before `permissionMode`
    /// existed kept their mode there).
    pub fn has_approval_policy(self) -> bool {
        matches!(self, Runtime::Codex | Runtime::Opencode | Runtime::Pi)
    }

    /// The runtime named `name` (`codex`, `claude`, `opencode`, `pi`).
    pub fn parse(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `session.created`: a hosted session exists. Its settings travel with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCreated {
    pub runtime: Runtime,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// codex: the thread's approval policy; opencode: the policy its permission rules
    /// come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// claude: the permission mode the TUI was launched in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// Retry budget of the backend that serves it; `None` = the base backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Set when the session was forked from another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// The idempotency key the creating request carried, so a retry finds this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The profile the session started from, with the effective values it added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Box<super::SessionProfile>>,
}

impl SessionCreated {
    /// A session of `runtime` in `cwd` with every other setting left unset (the runtime's
    /// own): an adopted agent's, whose settings are its own.
    pub fn plain(runtime: Runtime, cwd: String) -> SessionCreated {
        SessionCreated {
            runtime,
            cwd,
            model: None,
            approval_policy: None,
            permission_mode: None,
            sandbox: None,
            budget: None,
            forked_from: None,
            idempotency_key: None,
            profile: None,
        }
    }

    /// The permission mode a claude session was launched in. Sessions created before the field
    /// existed kept it in `approvalPolicy` (and were launched without one when it was unset).
    pub fn claude_permission_mode(&self) -> Option<PermissionMode> {
        if self.runtime != Runtime::Claude {
            return None;
        }
        self.permission_mode.clone().or_else(|| {
            self.approval_policy
                .as_ref()
                .map(|policy| PermissionMode::from(policy.as_str()))
        })
    }
}

/// The execution budget of a backend: retry settings passed to the model provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub request_max_retries: u32,
    pub stream_max_retries: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_turn_id: Option<String>,
}

/// `session.bound`: the session is tied to a runtime thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionBound {
    pub thread_id: String,
    /// The backend serving the thread (for codex: its key).
    pub backend: String,
}

/// `session.pane`: the tmux pane a session's terminal runs in, and the process cohost started
/// there. cohost only ever types into a pane whose id and process match this record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionPane {
    pub pane_id: String,
    pub tmux_session: String,
    pub runner_pid: u32,
}

/// `session.adopted`: the session drives an agent a person started by hand (not through
/// cohost), in the pane it runs in; logged right after the session's `session.created`, with
/// what cohost checked before it adopted it. cohost types into that pane only while the pane
/// still has this process (`panePid`) and the agent (`pid`, started at `pidStart`) still runs
/// under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAdopted {
    /// The tracker instance that was adopted (`claude-code:<Claude session id>`).
    pub key: String,
    /// The agent's own session id (Claude's), as its session file named it.
    pub agent_session_id: String,
    pub tmux_session: String,
    pub pane_id: String,
    /// The pane's own process when it was adopted: the shell the person started the agent from
    /// (or the agent itself, when the pane runs it directly).
    pub pane_pid: u32,
    /// The agent's process.
    pub pid: u32,
    /// The agent process's start time (clock ticks since boot): with `pid`, its identity, so a
    /// reused pid is never taken for it.
    pub pid_start: u64,
    /// The agent's status file that named the session id and directory
    /// (`~/.claude/sessions/<pid>.json`).
    pub session_file: String,
    /// The transcript cohost follows for the session's turns and messages.
    pub transcript: String,
}

/// `session.rehomed`: an adopted agent was moved under cohost in its pane. codex: the person's TUI
/// quit in its pane, its thread resumed on cohost's own app-server from its rollout (`rollout`,
/// which codex goes on writing), and a `codex --remote` TUI attached to it in the same pane.
/// claude: the person's Claude ended, and `claude --resume` under cohost's runner and hooks goes
/// on with the same conversation (`rollout`: its transcript) in the same pane. opencode: the
/// person's TUI quit, its session bound to an `opencode serve` of cohost's on the same database
/// (`rollout`), and `opencode attach` shows it in the same pane. From here on the
/// session is hosted (its `session.adopted` no longer applies); the thread id is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRehomed {
    /// The thread (claude: Claude's session id), the same before and after.
    pub thread_id: String,
    /// The rollout the thread is resumed from (also after a daemon restart); claude: the
    /// transcript the conversation goes on in.
    pub rollout: String,
}

/// How cohost came to drive a session, or how it knows of an agent instance.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// cohost started the agent (its pane, its hooks): a hosted session.
    #[default]
    Hosted,
    /// A person started the agent by hand and cohost adopted it (`session.adopted`).
    Adopted,
    /// An instance a passive watcher follows from the agent's own files; nothing drives it.
    Watched,
}

impl Control {
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Hosted => "hosted",
            Control::Adopted => "adopted",
            Control::Watched => "watched",
        }
    }
}

/// `session.permission_mode`: the permission mode a claude session's own records report (its
/// hooks and transcript), logged when it changes — Claude may run in another mode than it was
/// launched in (a human cycles modes with shift+tab). `allowed: false` means the daemon does not
/// allow that mode: cohost's hook then asks before every tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionModeSeen {
    pub mode: PermissionMode,
    pub allowed: bool,
}

/// `session.closed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionClosed {
    pub reason: String,
}

/// Where a hosted session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionState {
    /// Created; its runtime is not bound yet.
    Starting,
    /// Its runtime answers.
    Live,
    /// Its runtime is being brought back: a codex backend that died being replaced, or a
    /// session left `lost` resumed after a restart of cohost.
    Restarting,
    /// Its runtime went away and could not be brought back.
    Lost,
    /// Its TUI exited (claude); a relaunch brings it back.
    Exited,
    /// Closed through the API.
    Closed,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Starting => "starting",
            SessionState::Live => "live",
            SessionState::Restarting => "restarting",
            SessionState::Lost => "lost",
            SessionState::Exited => "exited",
            SessionState::Closed => "closed",
        }
    }
}

/// `session.status`: whether the session's runtime is reachable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    /// `live`, `restarting`, `lost` (codex) or `exited` (claude).
    pub state: SessionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Who started a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TurnSource {
    /// An inject through cohost (HTTP, CLI, MCP).
    Api,
    /// Codex working toward an active goal.
    Goal,
    /// A human in a co-driving terminal.
    Terminal,
    /// Another client, or unknown (for example a backfill after a restart).
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStarted {
    pub turn_id: String,
    pub source: TurnSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompleted {
    pub turn_id: String,
    pub status: TurnStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The process running the turn went away: how the turn ended is not known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
}

/// `turn.plan_updated`: the turn's step list as the agent last set it (codex's `update_plan`
/// tool, `turn/plan/updated`), whole each time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnPlan {
    pub turn_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    pub plan: Vec<PlanStep>,
}

/// One step of a [`TurnPlan`]: `status` is `pending`, `inProgress` or `completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    pub step: String,
    pub status: String,
}

/// `item.started` / `item.completed`: one unit of a turn.
/// `item.id` is deterministic (derived from the runtime's own turn and item ids), so a backfill
/// after a resume converges with the live stream instead of duplicating it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemEvent {
    pub turn_id: String,
    pub item: Item,
}

impl ItemEvent {
    pub fn id(&self) -> &str {
        self.item.id()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Item {
    UserMessage {
        id: String,
        text: String,
    },
    AgentMessage {
        id: String,
        text: String,
        /// The turn ended (interrupted or failed) while this message streamed: `text` is what
        /// had streamed, kept so a reader that reloads sees what a live reader saw.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    Reasoning {
        id: String,
        summary: Vec<String>,
    },
    Command {
        id: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// `inProgress`, `completed`, `failed`, `declined`.
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    FileChange {
        id: String,
        changes: Vec<FileChange>,
        status: String,
    },
    /// A tool call that is not a shell command (MCP, web search, claude tools…).
    Tool {
        id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        status: String,
    },
    /// A proposed plan (codex plan mode's `<proposed_plan>` block, Claude's `ExitPlanMode`).
    Plan {
        id: String,
        text: String,
    },
    /// Anything else the runtime reports, kept by kind.
    Other {
        id: String,
        kind: String,
    },
}

impl Item {
    pub fn id(&self) -> &str {
        match self {
            Item::UserMessage { id, .. }
            | Item::AgentMessage { id, .. }
            | Item::Reasoning { id, .. }
            | Item::Command { id, .. }
            | Item::FileChange { id, .. }
            | Item::Tool { id, .. }
            | Item::Plan { id, .. }
            | Item::Other { id, .. } => id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    pub path: String,
    /// `add`, `delete`, `update`.
    pub kind: FileChangeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// `item.delta` (live only, never stored): a piece of streamed text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemDelta {
    pub turn_id: String,
    pub item_id: String,
    /// `agentMessage`, `reasoning`, `commandOutput` or `plan`.
    pub kind: DeltaKind,
    pub delta: String,
    /// Of an `agentMessage` delta: where it starts in the message's text, in UTF-8 bytes
    /// (set by the core). A reader that already has that many bytes or more skips what it has,
    /// so the snapshot a stream sends on (re)connect and the deltas after it never double up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A stream's catch-up: the whole text streamed so far (from `offset` 0), sent once when a
    /// stream reaches the present, for each agent message still streaming.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot: bool,
}

/// `approval.requested`: the runtime asks a human before acting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequested {
    /// Unique within the daemon and deterministic (derived from the turn and item).
    pub approval_id: ApprovalId,
    /// `command`, `fileChange` or `tool` (older logs may hold other values: they read as
    /// written).
    pub kind: ApprovalKind,
    pub turn_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The decisions cohost relays: `accept`, `acceptForSession`, `decline`, `cancel`.
    pub decisions: Vec<ApprovalDecision>,
}

/// `approval.resolved`: answered, by cohost or by another client (a TUI), or made moot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolved {
    pub approval_id: ApprovalId,
    /// The decision cohost sent, when it was cohost that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// `api` when answered through cohost (or the name the answering surface gave), `runtime`
    /// when the runtime reported it resolved (another client answered, or the turn ended).
    pub by: ResolvedBy,
}

/// `usage`: token usage after a model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub turn_id: String,
    /// Set when the runtime's record has an id of its own (a Claude transcript line): a
    /// replay of the same record is then recognised and not stored twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub total: TokenCounts,
    pub last: TokenCounts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
    pub reasoning_output: u64,
    pub total: u64,
}

/// `error`: the runtime reported a failure (a model error, a lost backend).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Set when the error comes from a record with an identity (a transcript line, a byte
    /// offset of a tailed file): a replay of it is recognised and not stored twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// `goal.updated`: the thread goal as the runtime reports it (codex's shape, kept whole).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoalUpdated {
    pub goal: serde_json::Value,
}

/// How an inject reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InjectState {
    /// A new turn started with it.
    Started,
    /// It joined the running turn (codex `turn/steer`).
    Steered,
    /// The agent queued it behind the running turn; it runs as a turn of its own later.
    Queued,
}

/// `message.sent`: the outcome of an inject, recorded so an idempotent retry returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageSent {
    pub outcome: InjectState,
    pub turn_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}
