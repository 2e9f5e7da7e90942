//! codex `app-server` JSON-RPC payloads as serde types, under codex's own schema names (the
//! `generate-ts` / `generate-json-schema` output of codex-cli 0.169 and 0.171).
//!
//! Only what cohost sends or reads is here: the requests it makes (with their responses), the
//! notifications and server requests it reads, and the answers it gives. Framing (ids,
//! `method`/`params`, errors) is [`super::rpc`]'s.
//!
//! **Permissive by design.** A newer codex must never break parsing, so:
//! - unknown fields are ignored (0.171 added `environmentId` to items and MCP requests, and
//!   turned `AgentMessageDisplay` into a union tagged by `mode`: neither is read here);
//! - every field cohost reads is optional and read through [`crate::formats::lenient`]: a missing
//!   field or one of another type reads as `None`/empty instead of failing the message;
//! - enums codex treats as open (`ThreadItem`'s `type`, statuses, `CodexErrorInfo`, decisions)
//!   keep an `Other` arm that carries the value as sent.
//!
//! Requests cohost builds serialize only the fields it sets (`None` fields are left out).
//!
//! By concern: [`threads`] (the connection, threads, goals, models), [`turns`] (input, turns,
//! their errors), [`items`] (thread items), [`notifications`] and [`server_requests`] (with
//! cohost's answers); this file holds what they share (ids, the request trait, permissive
//! reading). Every type is re-exported here, so `wire::X` names it wherever it lives.

use serde::de::{self, DeserializeOwned};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::formats::lenient::{self, lenient_object, lenient_via_value};

/// A JSON-RPC id as codex sends it: an integer or a string, echoed verbatim (`RequestId`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(id) => write!(f, "{id}"),
            RequestId::Str(id) => write!(f, "{id:?}"),
        }
    }
}

/// A request cohost sends: its method and the type codex answers with. Responses are read
/// permissively too: one that does not parse at all reads as `Default` (every field `None`), and
/// the caller reports the field it missed, as it did when it read `Value`s.
pub trait ClientRequest: Serialize {
    const METHOD: &'static str;
    type Response: DeserializeOwned + Default;
}

/// Reads a response permissively (see [`ClientRequest`]).
pub fn response<R: ClientRequest>(result: Value) -> R::Response {
    match R::Response::deserialize(result) {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(method = R::METHOD, %error, "unreadable codex response; reading it as empty");
            R::Response::default()
        }
    }
}

/// Reads a notification's or server request's params: `T::default()` when they are not an
/// object (codex omitted them, or sent something else).
fn params<T: DeserializeOwned + Default>(params: &Value) -> T {
    if params.is_object() {
        T::deserialize(params).unwrap_or_default()
    } else {
        T::default()
    }
}

mod items;
mod notifications;
mod server_requests;
mod threads;
mod turns;

pub use items::*;
pub use notifications::*;
pub use server_requests::*;
pub use threads::*;
pub use turns::*;

/// `{"type", "id"}`: what every tagged element carries.
#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, deserialize_with = "lenient::opt")]
    id: Option<String>,
}

impl Tag {
    /// The tag of an object; anything else is not a tagged element.
    fn of<E: de::Error>(value: &Value) -> Result<Tag, E> {
        if !value.is_object() {
            return Err(E::custom("a tagged element is an object"));
        }
        Tag::deserialize(value).map_err(E::custom)
    }
}

lenient_object!(
    TurnPlanStep,
    ToolRequestUserInputQuestion,
    ToolRequestUserInputOption,
    Thread,
    Turn,
    TurnError,
    TokenUsageBreakdown,
    ThreadTokenUsage,
    FileUpdateChange,
    McpToolCallError,
);
lenient_via_value!(
    ThreadItem,
    UserInput,
    PatchChangeKind,
    CodexErrorInfo,
    RequestId
);

#[cfg(test)]
mod tests;
