//! The server→client requests cohost relays (`ServerRequest`: approvals, questions,
//! elicitations, permissions; every other one is `Other` and refused) and the answers it gives.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::params;
use crate::formats::lenient::{self, open_enum};

// ----------------------------------------------------------------------------------------------
// Server requests (server → client, with an id) and cohost's answers.

/// The server requests cohost relays (as approvals or input requests), by method; every other
/// one (dynamic tools, token refresh, attestation, …) is `Other` and refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequest {
    /// `item/commandExecution/requestApproval`
    CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams),
    /// `item/fileChange/requestApproval`
    FileChangeRequestApproval(FileChangeRequestApprovalParams),
    /// `item/permissions/requestApproval`
    PermissionsRequestApproval(PermissionsRequestApprovalParams),
    /// `execCommandApproval` (legacy v1)
    ExecCommandApproval(ExecCommandApprovalParams),
    /// `applyPatchApproval` (legacy v1)
    ApplyPatchApproval(ApplyPatchApprovalParams),
    /// `item/tool/requestUserInput` (the `request_user_input` tool, plan mode)
    ToolRequestUserInput(ToolRequestUserInputParams),
    /// `mcpServer/elicitation/request`
    McpServerElicitationRequest(McpServerElicitationRequestParams),
    Other {
        method: String,
    },
}

impl ServerRequest {
    /// Reads `params` as the payload of `method`; never fails (see [`ServerNotification::parse`]).
    pub fn parse(method: &str, p: &Value) -> ServerRequest {
        match method {
            "item/commandExecution/requestApproval" => {
                ServerRequest::CommandExecutionRequestApproval(params(p))
            }
            "item/fileChange/requestApproval" => {
                ServerRequest::FileChangeRequestApproval(params(p))
            }
            "item/permissions/requestApproval" => {
                ServerRequest::PermissionsRequestApproval(params(p))
            }
            "execCommandApproval" => ServerRequest::ExecCommandApproval(params(p)),
            "applyPatchApproval" => ServerRequest::ApplyPatchApproval(params(p)),
            "item/tool/requestUserInput" => ServerRequest::ToolRequestUserInput(params(p)),
            "mcpServer/elicitation/request" => {
                ServerRequest::McpServerElicitationRequest(params(p))
            }
            other => ServerRequest::Other {
                method: other.to_string(),
            },
        }
    }
}

/// `item/commandExecution/requestApproval` params. 0.169 already sends `environmentId`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CommandExecutionRequestApprovalParams {
    /// `CommandExecutionApprovalKind`: `command`, `humanCommand` or `writeStdin`.
    #[serde(deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub approval_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub environment_id: Option<String>,
    /// The model's justification, when it asked to escalate.
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    /// `CommandExecutionApprovalDecision`s codex offers (strings or amendment objects). It
    /// does not list everything codex accepts (`decline`, `acceptForSession` work too).
    #[serde(deserialize_with = "lenient::vec")]
    pub available_decisions: Vec<Value>,
}

/// `item/fileChange/requestApproval` params.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileChangeRequestApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub grant_root: Option<String>,
}

/// `item/permissions/requestApproval` params (the `request_permissions` tool).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionsRequestApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub environment_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    /// `RequestPermissionProfile` (`network`, `fileSystem`).
    #[serde(deserialize_with = "lenient::opt")]
    pub permissions: Option<Value>,
}

/// `item/tool/requestUserInput` params (`ToolRequestUserInputParams`, EXPERIMENTAL).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    /// The tool call id (`call_…`).
    #[serde(deserialize_with = "lenient::opt")]
    pub item_id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub questions: Vec<ToolRequestUserInputQuestion>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_blocking: Option<bool>,
}

/// `ToolRequestUserInputQuestion`. codex sets `isOther: true` itself (the client adds a
/// free-form choice).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputQuestion {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub header: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub question: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_other: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_secret: Option<bool>,
    #[serde(deserialize_with = "lenient::vec")]
    pub options: Vec<ToolRequestUserInputOption>,
}

/// `ToolRequestUserInputOption`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolRequestUserInputOption {
    #[serde(deserialize_with = "lenient::opt")]
    pub label: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub description: Option<String>,
}

/// The answer to `item/tool/requestUserInput` (`ToolRequestUserInputResponse`):
/// `{"answers": {"<question id>": {"answers": ["…"]}}}`; codex hands it to the model as the
/// tool's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRequestUserInputResponse {
    pub answers: std::collections::BTreeMap<String, ToolRequestUserInputAnswer>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRequestUserInputAnswer {
    pub answers: Vec<String>,
}

/// `mcpServer/elicitation/request` params (`McpServerElicitationRequestParams`): an MCP
/// server's elicitation, `mode` `form` (with `requestedSchema`) or `url`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpServerElicitationRequestParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub thread_id: Option<String>,
    /// Nullable: codex correlates a turn when it can.
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub server_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub mode: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub requested_schema: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub url: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub elicitation_id: Option<String>,
}

/// The answer to `mcpServer/elicitation/request` (`McpServerElicitationRequestResponse`):
/// `action` `accept` (with `content`), `decline` or `cancel`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerElicitationRequestResponse {
    pub action: String,
    pub content: Option<Value>,
    #[serde(rename = "_meta")]
    pub meta: Option<Value>,
}

/// The answer to `item/permissions/requestApproval` (`PermissionsRequestApprovalResponse`):
/// the permissions granted (a `GrantedPermissionProfile`; `{}` grants nothing) and for how
/// long (`turn` or `session`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionsRequestApprovalResponse {
    pub permissions: Value,
    pub scope: String,
}

/// `execCommandApproval` params (legacy v1: no `threadId`, the thread is `conversationId`; the
/// command is an argv).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecCommandApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub conversation_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub approval_id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub command: Vec<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
}

/// `applyPatchApproval` params (legacy v1).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApplyPatchApprovalParams {
    #[serde(deserialize_with = "lenient::opt")]
    pub conversation_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub call_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub grant_root: Option<String>,
}

open_enum! {
    /// The string members of `CommandExecutionApprovalDecision` (all of
    /// `FileChangeApprovalDecision`). The amendment objects (`acceptWithExecpolicyAmendment`,
    /// `applyNetworkPolicyAmendment`) are not sent by cohost.
    pub enum CommandExecutionApprovalDecision {
        Accept = "accept",
        AcceptForSession = "acceptForSession",
        Decline = "decline",
        Cancel = "cancel",
    }
}

/// The answer to `item/commandExecution/requestApproval` (`CommandExecutionRequestApprovalResponse`):
/// `{"decision"}`. `FileChangeRequestApprovalResponse` has the same shape and decisions.
///
/// `item/permissions/requestApproval` is not an approval to cohost but an input request of kind
/// `permissions`, answered with [`PermissionsRequestApprovalResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandExecutionRequestApprovalResponse {
    pub decision: CommandExecutionApprovalDecision,
}
