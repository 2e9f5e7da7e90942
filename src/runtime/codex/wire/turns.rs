//! Turns: the input cohost sends (`UserInput`, text and images), `turn/start|steer|interrupt`
//! with the collaboration mode, and the `Turn` codex reports (status, error, `CodexErrorInfo`).

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ClientRequest, Tag, ThreadItem};
use crate::formats::lenient::{self, open_enum};

// ----------------------------------------------------------------------------------------------
// Turns.

/// One input element (`UserInput`). cohost sends text and images (`{"type":"image","url"}`,
/// a `data:` URL, which codex hands the model as an `input_image`); the other kinds codex
/// accepts (`localImage`, `audio`, `localAudio`, `skill`, `mention`) are read as `Other`.
#[derive(Debug, Clone, PartialEq)]
pub enum UserInput {
    Text {
        text: String,
        /// UI spans within `text` (`TextElement`s); cohost sends none.
        text_elements: Vec<Value>,
    },
    Image {
        url: String,
    },
    Other {
        kind: String,
    },
}

impl UserInput {
    /// A plain text input, as cohost sends prompts.
    pub fn text(text: &str) -> Self {
        UserInput::Text {
            text: text.to_string(),
            text_elements: Vec::new(),
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct TextUserInput {
    #[serde(deserialize_with = "lenient::opt")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    text_elements: Vec<Value>,
}

impl Serialize for UserInput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            UserInput::Text {
                text,
                text_elements,
            } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                map.serialize_entry("text_elements", text_elements)?;
                map.end()
            }
            UserInput::Image { url } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "image")?;
                map.serialize_entry("url", url)?;
                map.end()
            }
            UserInput::Other { kind } => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("type", kind)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for UserInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let kind = Tag::of::<D::Error>(&value)?.kind;
        Ok(match kind.as_str() {
            "text" => {
                let input = TextUserInput::deserialize(value).map_err(de::Error::custom)?;
                UserInput::Text {
                    text: input.text.unwrap_or_default(),
                    text_elements: input.text_elements,
                }
            }
            "image" => match value.get("url").and_then(Value::as_str) {
                Some(url) => UserInput::Image {
                    url: url.to_string(),
                },
                None => UserInput::Other { kind },
            },
            _ => UserInput::Other { kind },
        })
    }
}

/// `turn/start` params. A `turn/start` while a turn runs joins that turn (same id in the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    /// EXPERIMENTAL in codex: the collaboration mode this turn (and the thread's next turns)
    /// run in. Absent: the thread keeps its mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collaboration_mode: Option<CollaborationMode>,
}

/// `CollaborationMode`: `{mode, settings}`; `settings.model` is required, and a `null`
/// `developer_instructions` means the mode's built-in instructions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollaborationMode {
    /// `ModeKind`: `plan` or `default`.
    pub mode: String,
    pub settings: CollaborationModeSettings,
}

/// `Settings` of a collaboration mode (snake_case on the wire, as codex writes it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollaborationModeSettings {
    pub model: String,
    pub reasoning_effort: Option<String>,
    pub developer_instructions: Option<String>,
}

/// `collaborationMode/list` params (EXPERIMENTAL): none.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollaborationModeListParams {}

impl ClientRequest for CollaborationModeListParams {
    const METHOD: &'static str = "collaborationMode/list";
    /// `{"data": [CollaborationModeMask]}` (`{name, mode, model, reasoning_effort}`), returned
    /// to the caller as it is.
    type Response = Value;
}

impl ClientRequest for TurnStartParams {
    const METHOD: &'static str = "turn/start";
    type Response = TurnStartResponse;
}

/// `turn/start` result: the turn (`inProgress`), before its `turn/started`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnStartResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn: Option<Turn>,
}

/// `turn/steer` params: adds input to the running turn, which must be `expectedTurnId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    pub expected_turn_id: String,
}

impl ClientRequest for TurnSteerParams {
    const METHOD: &'static str = "turn/steer";
    type Response = TurnSteerResponse;
}

/// `turn/steer` result: `{"turnId"}`, the turn the input joined.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnSteerResponse {
    #[serde(deserialize_with = "lenient::opt")]
    pub turn_id: Option<String>,
}

/// `turn/interrupt` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

impl ClientRequest for TurnInterruptParams {
    const METHOD: &'static str = "turn/interrupt";
    /// `{}`.
    type Response = Value;
}

open_enum! {
    /// `TurnStatus`.
    pub enum TurnStatus {
        Completed = "completed",
        Interrupted = "interrupted",
        Failed = "failed",
        InProgress = "inProgress",
    }
}

/// A turn (`Turn`): in `turn/started`, `turn/completed`, the `turn/start` answer and a thread's
/// history. `turn/completed`'s `items` is a summary (the final agent message only).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Turn {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::vec")]
    pub items: Vec<ThreadItem>,
    #[serde(deserialize_with = "lenient::opt")]
    pub status: Option<TurnStatus>,
    /// Set for a failed turn.
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<TurnError>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// Why a turn failed (`TurnError`), also the `error` of an `error` notification.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnError {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub codex_error_info: Option<CodexErrorInfo>,
    #[serde(deserialize_with = "lenient::opt")]
    pub additional_details: Option<String>,
}

open_enum! {
    /// The string members of `CodexErrorInfo` (0.171 added `bioPolicy`).
    pub enum CodexErrorCode {
        ContextWindowExceeded = "contextWindowExceeded",
        SessionBudgetExceeded = "sessionBudgetExceeded",
        UsageLimitExceeded = "usageLimitExceeded",
        RateLimitExceeded = "rateLimitExceeded",
        FlexUnavailable = "flexUnavailable",
        ServerOverloaded = "serverOverloaded",
        ModelNotFound = "modelNotFound",
        PolicyCapacityUnavailable = "policyCapacityUnavailable",
        InferenceHookDenied = "inferenceHookDenied",
        CyberPolicy = "cyberPolicy",
        BioPolicy = "bioPolicy",
        MisalignmentPolicyViolation = "misalignmentPolicyViolation",
        TooManyDenials = "tooManyDenials",
        InternalServerError = "internalServerError",
        Unauthorized = "unauthorized",
        BadRequest = "badRequest",
        ThreadRollbackFailed = "threadRollbackFailed",
        SandboxError = "sandboxError",
        /// codex's own catch-all code, `"other"`.
        OtherCode = "other",
    }
}

/// `CodexErrorInfo`: an open set of codes, some of them objects carrying details
/// (`{"httpConnectionFailed": {"httpStatusCode": 502}}`, `{"activeTurnNotSteerable": {…}}`, …).
#[derive(Debug, Clone, PartialEq)]
pub enum CodexErrorInfo {
    Code(CodexErrorCode),
    /// An object-valued member: its single key and that key's value.
    Detailed {
        kind: String,
        details: Value,
    },
}

impl CodexErrorInfo {
    /// The code when it is a plain string (the object forms have none).
    pub fn code(&self) -> Option<&str> {
        match self {
            CodexErrorInfo::Code(code) => Some(code.as_str()),
            CodexErrorInfo::Detailed { .. } => None,
        }
    }
}

impl<'de> Deserialize<'de> for CodexErrorInfo {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(code) => Ok(CodexErrorInfo::Code(CodexErrorCode::from(code.as_str()))),
            Value::Object(object) => {
                let mut entries = object.into_iter();
                match (entries.next(), entries.next()) {
                    (Some((kind, details)), None) => Ok(CodexErrorInfo::Detailed { kind, details }),
                    _ => Err(de::Error::custom(
                        "a CodexErrorInfo object has exactly one key",
                    )),
                }
            }
            other => Err(de::Error::custom(format!(
                "a CodexErrorInfo is a string or an object, not {other}"
            ))),
        }
    }
}
