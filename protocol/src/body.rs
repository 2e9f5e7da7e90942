//! The bodies of the hosted-session, task, lease, request and focus routes, as clients send
//! them: closed objects (an unknown field is refused, naming it), permissive where a field is
//! optional. The handlers in `http/` parse them and call the service; `docs/api.md` documents
//! each, and the schema drift test holds them to `docs/protocol.schema.json`.

use serde::{Deserialize, Serialize};

use super::{Budget, PromptImage};

/// `POST /api/sessions` (MCP `start_session` takes the same options).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    /// Required unless `profile` names a profile that sets it.
    #[serde(default)]
    pub runtime: String,
    /// Required unless `profile` names a profile that sets it.
    #[serde(default)]
    pub cwd: String,
    /// A profile of the daemon's config file (`[profiles.NAME]`): its values are the defaults
    /// of this request, whose own fields override them.
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<String>,
    #[serde(default)]
    pub sandbox: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub budget: Option<Budget>,
    /// claude only: `default` (the default), `acceptEdits`, `plan`; `auto` and
    /// `bypassPermissions` only where the daemon's owner allows them.
    #[serde(default)]
    pub permission_mode: Option<String>,
    /// The tmux session to open the pane in (default `cohost`): claude always, codex and
    /// opencode with `terminal: true`.
    #[serde(default)]
    pub tmux_session: Option<String>,
    /// codex, opencode: also open the runtime's own TUI on the session in a tmux pane
    /// (co-driving: `codex --remote … resume`, `opencode attach`).
    #[serde(default)]
    pub terminal: bool,
    /// At a hub (`serve --hub`): the machine to start the session on (default this one); the
    /// answer's session id is then qualified (`<machine>/<id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

/// `POST /api/sessions/{id}/messages`: a prompt sent now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageBody {
    pub text: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Images attached to the prompt (base64, bounded; see docs/api.md).
    #[serde(default)]
    pub images: Vec<PromptImage>,
}

/// `POST /api/sessions/{id}/approvals/{approvalId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub decision: String,
    /// Who answers, as `approval.resolved` will say (default `api`).
    #[serde(default)]
    pub by: Option<String>,
}

/// `PUT /api/sessions/{id}/goal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalBody {
    #[serde(default)]
    pub objective: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub token_budget: Option<u64>,
}

/// `POST /api/sessions/{id}/fork` (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkBody {
    #[serde(default)]
    pub after_turn_id: Option<String>,
}

/// `POST /api/sessions/{id}/command`: a chat-bot slash command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandBody {
    pub text: String,
}

/// `POST /api/sessions/{id}/terminal` (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenTerminalBody {
    #[serde(default)]
    pub tmux_session: Option<String>,
}

/// `POST /api/sessions/{id}/tasks`: a prompt queued as a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendBody {
    pub text: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// `api` (default) or `cli`.
    #[serde(default)]
    pub source: Option<String>,
}

/// `POST /api/sessions/{id}/lease`: a person takes over or releases the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseBody {
    /// `takeover` or `release`.
    pub action: String,
    #[serde(default)]
    pub drop_queued: bool,
    #[serde(default)]
    pub by: Option<String>,
}

/// `POST /api/tasks/{id}/cancel` (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelBody {
    /// Interrupt a running task only while the lease is managed at this generation.
    #[serde(default)]
    pub lease_generation: Option<u64>,
}

/// `POST /api/tasks/{id}/edit` and `…/supersede`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditBody {
    /// The revision the caller last saw: the edit applies only if it is still current.
    pub revision: u64,
    pub text: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `PUT /api/sessions/{id}/mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModeBody {
    pub mode: String,
}

/// `PUT /api/sessions/{id}/model`: the model (and, where the runtime has one, the thinking
/// level) of the session's next turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelBody {
    /// `provider/model`, one of `GET /api/models?runtime=…`.
    pub model: String,
    /// Pi: `off`, `minimal`, `low`, `medium`, `high`, `xhigh` (what the model supports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
}

/// `POST /api/focus`: the tmux session a person looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FocusParams {
    pub session: String,
    /// `api` (default) or `tmux` (the client-session-changed hook).
    #[serde(default)]
    pub source: Option<String>,
}
