//! The part of `opencode serve`'s HTTP API cohost uses (1.18.33), typed with upstream names:
//! the `/event` stream's events ([`Event`]), the session, message and part shapes they carry,
//! and the bodies cohost sends (`POST /session`, `prompt_async`, a permission or question
//! reply).
//!
//! Reading never fails on content: an event whose `properties` do not fit its type reads as
//! [`Event::Other`] with its type kept (the stream goes on), and every field is optional.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `GET /global/health`: `{"healthy":true,"version":"1.18.33"}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Health {
    pub healthy: bool,
    pub version: Option<String>,
}

/// A session (`POST /session`, `GET /session/:id`, `fork`'s answer).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Session {
    pub id: String,
    pub directory: Option<String>,
    pub title: Option<String>,
    pub version: Option<String>,
    /// The session's own ruleset, echoed when it was given.
    pub permission: Option<Vec<PermissionRule>>,
}

/// One rule of a `PermissionRuleset`: the last rule matching a request's permission and
/// pattern decides (`allow`, `ask`, `deny`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    pub permission: String,
    pub pattern: String,
    pub action: String,
}

impl PermissionRule {
    pub fn new(permission: &str, action: &str) -> Self {
        PermissionRule {
            permission: permission.to_string(),
            pattern: "*".to_string(),
            action: action.to_string(),
        }
    }
}

/// `POST /session` (and `PATCH /session/:id` for `permission`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionCreateBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub permission: Vec<PermissionRule>,
}

/// `model` of a prompt: sticky in the session once given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRef {
    #[serde(rename = "providerID")]
    pub provider_id: String,
    #[serde(rename = "modelID")]
    pub model_id: String,
}

impl ModelRef {
    /// `provider/model` (the form OpenCode's config and CLI use).
    pub fn parse(text: &str) -> Option<ModelRef> {
        let (provider, model) = text.split_once('/')?;
        (!provider.is_empty() && !model.is_empty()).then(|| ModelRef {
            provider_id: provider.to_string(),
            model_id: model.to_string(),
        })
    }
}

/// One input part of a prompt.
#[derive(Debug, Clone, Serialize)]
pub struct TextPartInput {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: String,
}

/// `POST /session/:id/prompt_async` (204 at once; the turn streams on `/event`).
#[derive(Debug, Clone, Serialize)]
pub struct PromptBody {
    pub parts: Vec<TextPartInput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
}

impl PromptBody {
    pub fn text(text: &str, model: Option<ModelRef>) -> Self {
        PromptBody {
            parts: vec![TextPartInput {
                kind: "text",
                text: text.to_string(),
            }],
            model,
        }
    }
}

/// `POST /permission/:requestID/reply`.
#[derive(Debug, Clone, Serialize)]
pub struct PermissionReplyBody {
    /// `once`, `always` or `reject`.
    pub reply: &'static str,
    /// With `reject`: the feedback the model gets as the tool's result (and it is called again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `POST /session/:id/fork`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ForkBody {
    #[serde(rename = "messageID", skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// `GET /config/providers`: the configured providers and their models (each provider's
/// `options`, which hold its API key in clear, are not read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ConfigProviders {
    pub providers: Vec<Provider>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Provider {
    pub id: String,
    pub name: Option<String>,
    pub models: std::collections::BTreeMap<String, ProviderModel>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProviderModel {
    pub id: Option<String>,
    pub name: Option<String>,
}

/// `GET /config`: only the configured default model (`provider/model`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    pub model: Option<String>,
}

/// A message's `info`: a user prompt, or one step of an assistant reply.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageInfo {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub time: MessageTime,
    /// `stop`, `tool-calls`, `length`, … (a step's end, not the turn's).
    pub finish: Option<String>,
    pub error: Option<NamedError>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageTime {
    pub created: Option<u64>,
    pub completed: Option<u64>,
}

/// `{"name":"MessageAbortedError","data":{"message":"Aborted"}}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NamedError {
    pub name: Option<String>,
    pub data: Option<Value>,
}

impl NamedError {
    pub fn message(&self) -> String {
        self.data
            .as_ref()
            .and_then(|data| data.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| "unknown error".to_string())
    }

    pub fn is_abort(&self) -> bool {
        self.name.as_deref() == Some("MessageAbortedError")
    }
}

/// A message part: `text`, `tool`, `step-start`, `step-finish`, `reasoning`, …
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Part {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub synthetic: Option<bool>,
    /// A tool part: the model's tool-call id (`toolu_…`), the tool, its state.
    #[serde(rename = "callID")]
    pub call_id: Option<String>,
    pub tool: Option<String>,
    pub state: Option<ToolState>,
    pub time: Option<PartTime>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PartTime {
    pub start: Option<u64>,
    pub end: Option<u64>,
}

/// A tool part's `state`: `status` is `pending`, `running`, `completed` or `error`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolState {
    pub status: String,
    pub input: Option<Value>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub title: Option<String>,
    pub metadata: Option<Value>,
    pub time: Option<PartTime>,
}

/// `GET /session/:id/message`'s elements.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MessageWithParts {
    pub info: MessageInfo,
    pub parts: Vec<Part>,
}

/// `permission.asked`'s properties (and `GET /permission`'s elements).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PermissionRequest {
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// `bash`, `edit`, `webfetch`, …
    pub permission: String,
    pub patterns: Vec<String>,
    pub metadata: Option<Value>,
    pub always: Vec<String>,
    pub tool: Option<PermissionTool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PermissionTool {
    #[serde(rename = "messageID")]
    pub message_id: String,
    #[serde(rename = "callID")]
    pub call_id: String,
}

/// `question.asked`'s properties (and `GET /question`'s elements): the question tool waits
/// for a person (`POST /question/:id/reply` or `…/reject`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct QuestionRequest {
    /// `que_…`.
    pub id: String,
    #[serde(rename = "sessionID")]
    pub session_id: String,
    pub questions: Vec<QuestionInfo>,
    /// The tool call asking (absent when a plugin asks).
    pub tool: Option<PermissionTool>,
}

/// One question of a [`QuestionRequest`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct QuestionInfo {
    pub question: String,
    /// A very short label (at most 30 characters).
    pub header: String,
    pub options: Vec<QuestionOption>,
    /// More than one option may be chosen.
    pub multiple: Option<bool>,
    /// A typed answer is accepted (OpenCode's default: yes).
    pub custom: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct QuestionOption {
    pub label: String,
    pub description: Option<String>,
}

/// `POST /question/:requestID/reply`: per question, in order, the labels chosen (or typed);
/// an empty list reads "Unanswered" to the model.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionReplyBody {
    pub answers: Vec<Vec<String>>,
}

/// One event of `GET /event`, by its `type`; the ones cohost does not read are `Other`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    ServerConnected,
    /// `session.status`: `busy`, `idle`, `retry`.
    SessionStatus {
        session_id: String,
        status: String,
    },
    SessionIdle {
        session_id: String,
    },
    SessionError {
        session_id: Option<String>,
        error: Option<NamedError>,
    },
    MessageUpdated {
        info: MessageInfo,
    },
    MessagePartUpdated {
        part: Part,
    },
    /// `message.part.delta`: `{sessionID,messageID,partID,field:"text",delta}`.
    MessagePartDelta {
        session_id: String,
        message_id: String,
        part_id: String,
        field: String,
        delta: String,
    },
    PermissionAsked(PermissionRequest),
    /// `permission.replied`: `{sessionID,requestID,reply}` (by any client).
    PermissionReplied {
        session_id: String,
        request_id: String,
        reply: String,
    },
    QuestionAsked(QuestionRequest),
    /// `question.replied`: `{sessionID,requestID,answers}` (by any client).
    QuestionReplied {
        session_id: String,
        request_id: String,
        answers: Vec<Vec<String>>,
    },
    /// `question.rejected`: `{sessionID,requestID}` (dismissed, by any client).
    QuestionRejected {
        session_id: String,
        request_id: String,
    },
    Other {
        kind: String,
    },
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    properties: Value,
}

fn field(properties: &Value, name: &str) -> String {
    properties
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl Event {
    /// The session the event concerns, when it names one.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Event::SessionStatus { session_id, .. }
            | Event::SessionIdle { session_id }
            | Event::MessagePartDelta { session_id, .. }
            | Event::PermissionReplied { session_id, .. }
            | Event::QuestionReplied { session_id, .. }
            | Event::QuestionRejected { session_id, .. } => Some(session_id),
            Event::SessionError { session_id, .. } => session_id.as_deref(),
            Event::MessageUpdated { info } => Some(&info.session_id),
            Event::MessagePartUpdated { part } => Some(&part.session_id),
            Event::PermissionAsked(request) => Some(&request.session_id),
            Event::QuestionAsked(request) => Some(&request.session_id),
            Event::ServerConnected | Event::Other { .. } => None,
        }
    }

    /// One `data:` payload of the stream; `None` when it is not a JSON object with a `type`.
    pub fn parse(data: &str) -> Option<Event> {
        let envelope: Envelope = serde_json::from_str(data).ok()?;
        let p = envelope.properties;
        let typed = |kind: &str| -> Option<Event> {
            Some(match kind {
                "server.connected" => Event::ServerConnected,
                "session.status" => Event::SessionStatus {
                    session_id: field(&p, "sessionID"),
                    status: p
                        .get("status")
                        .and_then(|s| s.get("type"))
                        .and_then(Value::as_str)?
                        .to_string(),
                },
                "session.idle" => Event::SessionIdle {
                    session_id: field(&p, "sessionID"),
                },
                "session.error" => Event::SessionError {
                    session_id: p
                        .get("sessionID")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    error: p
                        .get("error")
                        .and_then(|e| serde_json::from_value(e.clone()).ok()),
                },
                "message.updated" => Event::MessageUpdated {
                    info: serde_json::from_value(p.get("info")?.clone()).ok()?,
                },
                "message.part.updated" => Event::MessagePartUpdated {
                    part: serde_json::from_value(p.get("part")?.clone()).ok()?,
                },
                "message.part.delta" => Event::MessagePartDelta {
                    session_id: field(&p, "sessionID"),
                    message_id: field(&p, "messageID"),
                    part_id: field(&p, "partID"),
                    field: field(&p, "field"),
                    delta: field(&p, "delta"),
                },
                "permission.asked" => {
                    Event::PermissionAsked(serde_json::from_value(p.clone()).ok()?)
                }
                "permission.replied" => Event::PermissionReplied {
                    session_id: field(&p, "sessionID"),
                    request_id: field(&p, "requestID"),
                    reply: field(&p, "reply"),
                },
                "question.asked" => Event::QuestionAsked(serde_json::from_value(p.clone()).ok()?),
                "question.replied" => Event::QuestionReplied {
                    session_id: field(&p, "sessionID"),
                    request_id: field(&p, "requestID"),
                    answers: p
                        .get("answers")
                        .and_then(|a| serde_json::from_value(a.clone()).ok())
                        .unwrap_or_default(),
                },
                "question.rejected" => Event::QuestionRejected {
                    session_id: field(&p, "sessionID"),
                    request_id: field(&p, "requestID"),
                },
                _ => return None,
            })
        };
        Some(typed(&envelope.kind).unwrap_or(Event::Other {
            kind: envelope.kind,
        }))
    }
}
