//! The runtime seam: what every hosted runtime (codex, claude) shares with the surfaces and the
//! task queue — `HostError`, `InjectOutcome`, `Capability` — and the runtimes themselves, one
//! folder each, which import this module and `common`, never each other.

pub mod claude;
pub mod codex;
pub mod lenient;

use serde_json::Value;

use crate::core::CoreError;

/// Why a host operation failed; the HTTP layer maps each variant once.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{0}")]
    Invalid(String),
    #[error("no session `{0}`")]
    UnknownSession(String),
    #[error("session `{0}` is closed")]
    Closed(String),
    #[error("session `{0}` has no live thread yet; retry shortly")]
    NotReady(String),
    /// A human has a half-typed draft in the session's input box; cohost does not type into it.
    #[error("someone is typing in session `{0}`'s input box; not typing over their draft")]
    HumanTyping(String),
    #[error("codex is not available: {0}")]
    CodexUnavailable(String),
    #[error("claude is not available: {0}")]
    ClaudeUnavailable(String),
    #[error("claude failed: {0}")]
    Claude(String),
    #[error("codex failed: {0}")]
    Codex(String),
    #[error("no approval `{0}` in this session")]
    UnknownApproval(String),
    #[error("approval `{0}` was already resolved")]
    ApprovalResolved(String),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// What an inject did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectOutcome {
    /// `started` (a new turn) or `steered` (added to the running turn).
    pub outcome: String,
    pub turn_id: String,
    /// True when an idempotency key matched an earlier inject: nothing was sent again.
    pub duplicate: bool,
}

/// A capability answer: `{ok:true,data}` or `{ok:false,reason,message}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capability {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// `unsupported`, `no_active_thread` or `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Capability {
    pub fn ok(data: Value) -> Self {
        Capability {
            ok: true,
            data: Some(data),
            reason: None,
            message: None,
        }
    }

    pub fn fail(reason: &str, message: impl Into<String>) -> Self {
        Capability {
            ok: false,
            data: None,
            reason: Some(reason.to_string()),
            message: Some(message.into()),
        }
    }
}
