//! The MCP tools' arguments: closed objects (unknown fields are refused), with the string
//! values a field may take as enums, so each tool's input schema lists them.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::protocol::{
    AgentStatus, ApprovalDecision, ApprovalPolicy, Field, Liveness, PermissionMode, Sandbox,
};

/// A request field as MCP names it: the tool argument that carries it (`snake_case`; `prompt`
/// for HTTP's `text`, `wait_seconds` for its `wait`). Errors from the service name fields
/// through this, so an MCP caller never reads HTTP's `camelCase` names. Fields no tool takes
/// (they reach the service over HTTP only) get their `snake_case` name.
pub fn arg_name(field: Field) -> &'static str {
    match field {
        Field::Runtime => "runtime",
        Field::Cwd => "cwd",
        Field::Model => "model",
        Field::ApprovalPolicy => "approval_policy",
        Field::Sandbox => "sandbox",
        Field::PermissionMode => "permission_mode",
        Field::TmuxSession => "tmux_session",
        Field::IdempotencyKey => "idempotency_key",
        Field::Profile => "profile",
        Field::Text => "prompt",
        Field::Offset => "offset",
        Field::MaxBytes => "max_bytes",
        Field::Decision => "decision",
        Field::Mode => "mode",
        Field::Answers => "answers",
        Field::Feedback => "feedback",
        Field::Content => "content",
        Field::RequestId => "request_id",
        Field::Objective => "objective",
        Field::Status => "status",
        Field::TokenBudget => "token_budget",
        Field::After => "after",
        Field::Limit => "limit",
        Field::Wait => "wait_seconds",
        Field::Agent => "agent",
        Field::ProjectDir => "project_dir",
        Field::ThreadId => "thread_id",
        Field::ThreadName => "thread_name",
        Field::LastUserPrompt => "last_user_prompt",
        Field::PaneId => "pane_id",
        // No tool takes these.
        Field::Budget => "budget",
        Field::Terminal => "terminal",
        Field::Images => "images",
        Field::By => "by",
        Field::AfterTurnId => "after_turn_id",
        Field::Session => "session",
        Field::Source => "source",
        Field::Label => "label",
        Field::Percent => "percent",
        Field::LogMessage => "message",
    }
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// A hosted session id (see `list_sessions`).
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdoptArgs {
    /// The tmux session the instance shows in (see `tracker_state`).
    pub tmux_session: String,
    /// The instance's key (`claude-code:<session id>`, see `tracker_state`).
    pub key: String,
}

/// The string values an MCP argument may take, as an enum so the schema lists them.
macro_rules! arg_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant,)*
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }
    };
}

arg_enum!(
    /// codex only: when codex asks before acting.
    ApprovalPolicyArg { Untrusted = "untrusted", OnRequest = "on-request", Never = "never" }
);
arg_enum!(
    /// codex only: what commands may touch.
    SandboxArg {
        ReadOnly = "read-only",
        WorkspaceWrite = "workspace-write",
        DangerFullAccess = "danger-full-access",
    }
);
arg_enum!(
    /// claude: a permission mode (`auto` and `bypassPermissions` only where the daemon's
    /// owner allows them); codex: `plan` or `default` as a collaboration mode.
    ModeArg {
        Default = "default",
        AcceptEdits = "acceptEdits",
        Plan = "plan",
        Auto = "auto",
        BypassPermissions = "bypassPermissions",
    }
);
arg_enum!(
    /// An approval's answer.
    DecisionArg {
        Accept = "accept",
        AcceptForSession = "acceptForSession",
        Decline = "decline",
        Cancel = "cancel",
    }
);
arg_enum!(
    /// An input request's answer: `approve`/`reject` a plan; `accept`, `decline` or `cancel`
    /// an elicitation; `accept`, `acceptForSession` or `decline` permissions; `decline` an
    /// opencode question (dismissing it).
    AnswerDecisionArg {
        Approve = "approve",
        Reject = "reject",
        Accept = "accept",
        AcceptForSession = "acceptForSession",
        Decline = "decline",
        Cancel = "cancel",
    }
);

/// Each argument enum as the protocol value of the same string (the protocol's enums are open,
/// so every argument value is one of theirs).
macro_rules! into_protocol {
    ($($arg:ident => $protocol:ident),* $(,)?) => {
        $(
            impl From<$arg> for $protocol {
                fn from(arg: $arg) -> Self {
                    $protocol::from(arg.as_str())
                }
            }
        )*
    };
}

into_protocol!(
    ApprovalPolicyArg => ApprovalPolicy,
    SandboxArg => Sandbox,
    ModeArg => PermissionMode,
    DecisionArg => ApprovalDecision,
);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// Every runtime the protocol names (the registry says which are installed); required
    /// unless `profile` names one.
    #[serde(default)]
    pub runtime: Option<crate::protocol::Runtime>,
    /// An absolute directory under one of the allowed project roots; required unless `profile`
    /// sets one.
    #[serde(default)]
    pub cwd: Option<String>,
    /// A profile of the daemon's config file: its values are this start's defaults, the
    /// arguments given here override them.
    #[serde(default)]
    pub profile: Option<String>,
    /// A first prompt to send once the session is live.
    #[serde(default)]
    pub prompt: Option<String>,
    /// A retried start with the same key (1 to 256 bytes) returns the first session.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// codex, opencode and pi (default `on-request`).
    #[serde(default)]
    pub approval_policy: Option<ApprovalPolicyArg>,
    /// codex only (default `workspace-write`).
    #[serde(default)]
    pub sandbox: Option<SandboxArg>,
    /// claude only (default `default`).
    #[serde(default)]
    pub permission_mode: Option<ModeArg>,
    /// At a hub: the machine to start the session on (default this one); it checks `cwd`
    /// against its own project roots, and the session's id is qualified (`<machine>/<id>`).
    #[serde(default)]
    pub machine: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    pub session_id: String,
    /// The prompt (at most 64 KiB). It is queued as a task and delivered when the session is
    /// idle and not under human control. (`text`, its name before, is still read, until the
    /// next release.)
    #[serde(alias = "text")]
    pub prompt: String,
    /// A retried send with the same key (1 to 256 bytes) returns the first task.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// A task id (from `send` or `start_session`).
    pub task_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitTaskArgs {
    pub task_id: String,
    /// Wait at most this many seconds (0 to 60, default 60) for the task to finish.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultArgs {
    pub task_id: String,
    /// Byte offset into the result (default 0); continue with the answer's `nextOffset`.
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many bytes, 1 to 16384 (default 16384).
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    pub task_id: String,
    /// Interrupt a running task only while the lease is still managed at this generation
    /// (default: the generation when the cancel arrives).
    #[serde(default)]
    pub lease_generation: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    pub task_id: String,
    /// The task revision you last saw; the change applies only if it is still current.
    pub revision: u64,
    /// The new prompt. (`text`, its name before, is still read, until the next release.)
    #[serde(alias = "text")]
    pub prompt: String,
    /// A retried change with the same key (1 to 256 bytes) is recognised, not applied twice.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// Only this hosted session's events (default: every event).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Return events with a seq greater than this cursor (default 0, the oldest retained).
    #[serde(default)]
    pub after: Option<u64>,
    /// At most this many events, 1 to 1000 (default 100).
    #[serde(default)]
    pub limit: Option<u64>,
    /// When there is nothing after `after`, wait up to this many seconds (0 to 60) for an event.
    #[serde(default)]
    pub wait_seconds: Option<f64>,
    /// The session's last this many events (1 to 1000; needs `session_id`, not `after`): a
    /// window read backwards, with `hasOlder` and `olderBefore`.
    #[serde(default)]
    pub last: Option<u64>,
    /// The `limit` events of the session before this seq (needs `session_id`, not `after`):
    /// the previous window, `before` = the last answer's `olderBefore`.
    #[serde(default)]
    pub before: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveArgs {
    pub session_id: String,
    pub approval_id: String,
    pub decision: DecisionArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerArgs {
    pub session_id: String,
    /// The request id (see `list_requests`).
    pub request_id: String,
    /// A question: an answer per question id, a label (or free text where `isOther`) or a list.
    #[serde(default)]
    pub answers: Option<std::collections::BTreeMap<String, Value>>,
    #[serde(default)]
    pub decision: Option<AnswerDecisionArg>,
    /// A rejected plan: what the agent should change.
    #[serde(default)]
    pub feedback: Option<String>,
    /// An approved plan: the mode to continue in.
    #[serde(default)]
    pub mode: Option<ModeArg>,
    /// An accepted elicitation: the form's content.
    #[serde(default)]
    pub content: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelArgs {
    pub session_id: String,
    /// `provider/model`, one of `list_models`.
    pub model: String,
    /// Pi: `off`, `minimal`, `low`, `medium`, `high`, `xhigh`.
    #[serde(default)]
    pub thinking_level: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModeArgs {
    pub session_id: String,
    pub mode: ModeArg,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalSetArgs {
    pub session_id: String,
    #[serde(default)]
    pub objective: Option<String>,
    /// `active`, `paused`, `budgetLimited` or `complete`.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub token_budget: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StatusArg {
    Idle,
    Running,
    ToolRunning,
    Done,
    Error,
    Waiting,
    Interrupted,
    Stale,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LivenessArg {
    Alive,
    Exited,
    Unknown,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentEventArgs {
    /// The agent's name, e.g. `codex`, `claude-code`.
    pub agent: String,
    pub status: StatusArg,
    /// The tmux session the agent runs in; or give `project_dir`.
    #[serde(default)]
    pub tmux_session: Option<String>,
    /// An absolute directory, resolved to the tmux session whose directory holds it.
    #[serde(default)]
    pub project_dir: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub thread_name: Option<String>,
    #[serde(default)]
    pub last_user_prompt: Option<String>,
    #[serde(default)]
    pub pane_id: Option<String>,
    #[serde(default)]
    pub liveness: Option<LivenessArg>,
    /// The reporter's timestamp in ms (default: now).
    #[serde(default)]
    pub ts: Option<u64>,
}

impl StatusArg {
    pub(super) fn into_status(self) -> AgentStatus {
        match self {
            StatusArg::Idle => AgentStatus::Idle,
            StatusArg::Running => AgentStatus::Running,
            StatusArg::ToolRunning => AgentStatus::ToolRunning,
            StatusArg::Done => AgentStatus::Done,
            StatusArg::Error => AgentStatus::Error,
            StatusArg::Waiting => AgentStatus::Waiting,
            StatusArg::Interrupted => AgentStatus::Interrupted,
            StatusArg::Stale => AgentStatus::Stale,
        }
    }
}

impl LivenessArg {
    pub(super) fn into_liveness(self) -> Liveness {
        match self {
            LivenessArg::Alive => Liveness::Alive,
            LivenessArg::Exited => Liveness::Exited,
            LivenessArg::Unknown => Liveness::Unknown,
        }
    }
}
