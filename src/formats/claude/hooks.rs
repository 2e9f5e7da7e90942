//! Claude's hook lines: the `hooks.jsonl` line `cohost-hook` appends, the payload of each hook
//! event cohost reads (typed by its `hook_event_name`), and the typed views of tool inputs and
//! responses.

use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;

use crate::formats::lenient::{self, lenient_via_value, open_enum};

/// One `hooks.jsonl` line: `{"receivedAt", "event", "requestId"?, "payload"}`, written by
/// `cohost-hook <Event>` as [`crate::protocol::boundary::HookLine`] and read back here
/// permissively (a field missing or of another type reads as absent, and the payload is typed
/// by its event); `payload` is Claude's stdin JSON for the hook (or a truncation or error
/// marker, or a string when stdin was not JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookLine {
    /// When the hook ran (ms since the epoch, the hook's clock).
    pub received_at: Option<u64>,
    /// The event name from the hook's argv.
    pub event: Option<String>,
    /// `PermissionRequest` only: the id the hook relays the request under.
    pub request_id: Option<String>,
    pub payload: HookPayload,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct HookLineFields {
    #[serde(deserialize_with = "lenient::opt")]
    received_at: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    event: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    request_id: Option<String>,
}

impl HookLine {
    /// Reads one line's JSON. Never fails: what is missing or of another type reads as absent.
    pub fn from_value(line: &Value) -> HookLine {
        let fields = if line.is_object() {
            HookLineFields::deserialize(line).unwrap_or_default()
        } else {
            HookLineFields::default()
        };
        let payload = HookPayload::parse(
            fields.event.as_deref().unwrap_or(""),
            line.get("payload").unwrap_or(&Value::Null),
        );
        HookLine {
            received_at: fields.received_at,
            event: fields.event,
            request_id: fields.request_id,
            payload,
        }
    }

    /// The line cohost records for a `PermissionRequest` it receives through the permission
    /// relay before the hook's own line is tailed.
    pub fn permission_request(received_at: u64, request_id: &str, payload: &Value) -> HookLine {
        HookLine {
            received_at: Some(received_at),
            event: Some("PermissionRequest".into()),
            request_id: Some(request_id.to_string()),
            payload: HookPayload::parse("PermissionRequest", payload),
        }
    }

    /// A `SessionEnd` with `reason`, for a Claude that exited without running its hook.
    pub fn session_end(reason: &str) -> HookLine {
        HookLine {
            received_at: None,
            event: Some("SessionEnd".into()),
            request_id: None,
            payload: HookPayload {
                common: HookCommon {
                    hook_event_name: Some("SessionEnd".into()),
                    ..HookCommon::default()
                },
                event: HookEvent::SessionEnd(SessionEndHookInput {
                    reason: Some(reason.to_string()),
                }),
            },
        }
    }
}

impl<'de> Deserialize<'de> for HookLine {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(HookLine::from_value(&Value::deserialize(deserializer)?))
    }
}

/// A hook's payload: the fields every event may carry, and the event's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookPayload {
    pub common: HookCommon,
    pub event: HookEvent,
}

impl HookPayload {
    /// Reads `payload` as the event its `hook_event_name` names, else `event` (the hook's
    /// argv). A payload that is not an object reads as an empty one.
    pub fn parse(event: &str, payload: &Value) -> HookPayload {
        fn input<T: de::DeserializeOwned + Default>(payload: &Value) -> T {
            if payload.is_object() {
                T::deserialize(payload).unwrap_or_default()
            } else {
                T::default()
            }
        }
        let common: HookCommon = input(payload);
        let name = common.hook_event_name.as_deref().unwrap_or(event);
        let event = match name {
            "SessionStart" => HookEvent::SessionStart(input(payload)),
            "UserPromptSubmit" => HookEvent::UserPromptSubmit(input(payload)),
            "PreToolUse" => HookEvent::PreToolUse(input(payload)),
            "PostToolUse" => HookEvent::PostToolUse(input(payload)),
            "PostToolUseFailure" => HookEvent::PostToolUseFailure(input(payload)),
            "PermissionRequest" => HookEvent::PermissionRequest(input(payload)),
            "Stop" => HookEvent::Stop(input(payload)),
            "StopFailure" => HookEvent::StopFailure(input(payload)),
            "SessionEnd" => HookEvent::SessionEnd(input(payload)),
            "Notification" => HookEvent::Notification(input(payload)),
            other => HookEvent::Other(other.to_string()),
        };
        HookPayload { common, event }
    }
}

open_enum! {
    /// Claude's `permission_mode` (2.1.332 defaults to `auto`).
    pub enum PermissionMode {
        Default = "default",
        AcceptEdits = "acceptEdits",
        Plan = "plan",
        Auto = "auto",
        DontAsk = "dontAsk",
        BypassPermissions = "bypassPermissions",
    }
}

/// What every hook payload carries (`session_id`, `transcript_path`, `cwd`), what turn-scoped
/// events add (`prompt_id`), and what most add (`permission_mode`; not SessionStart,
/// Notification or SessionEnd).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HookCommon {
    #[serde(deserialize_with = "lenient::opt")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub transcript_path: Option<String>,
    /// Follows `cd` done by the Bash tool.
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub hook_event_name: Option<String>,
    /// The same for every event of one submitted prompt (the transcript's `promptId`).
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub permission_mode: Option<PermissionMode>,
}

/// The hook events cohost reads; every other one (`PostToolBatch`, `SubagentStart`,
/// `MessageDisplay`, …, and what a newer Claude adds) is `Other` with its name.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    SessionStart(SessionStartHookInput),
    UserPromptSubmit(UserPromptSubmitHookInput),
    PreToolUse(PreToolUseHookInput),
    PostToolUse(PostToolUseHookInput),
    PostToolUseFailure(PostToolUseFailureHookInput),
    PermissionRequest(PermissionRequestHookInput),
    Stop(StopHookInput),
    StopFailure(StopFailureHookInput),
    SessionEnd(SessionEndHookInput),
    Notification(NotificationHookInput),
    Other(String),
}

impl Default for HookEvent {
    fn default() -> Self {
        HookEvent::Other(String::new())
    }
}

/// `SessionStart`: `source` is `startup`, `resume`, `clear` or `compact`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionStartHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub source: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
}

/// `UserPromptSubmit`: a prompt reached Claude (2.1.332: also one it queued behind a turn).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UserPromptSubmitHookInput {
    /// As submitted; 2.1.332 wraps a long paste in `<pasted_content id="…">`.
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt: Option<String>,
}

/// `PreToolUse`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PreToolUseHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    /// The tool's input, as sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
}

/// `PostToolUse`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PostToolUseHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_response: Option<ToolResponse>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// `PostToolUseFailure`: the tool ran and failed (`error` is its message).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PostToolUseFailureHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_interrupt: Option<bool>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

/// `PermissionRequest`: Claude would show its permission dialog.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PermissionRequestHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_input: Option<Value>,
    /// `addDirectories`, `setMode`, … (not read).
    #[serde(deserialize_with = "lenient::vec")]
    pub permission_suggestions: Vec<Value>,
}

/// `Stop`: the turn ended.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StopHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_hook_active: Option<bool>,
    /// The reply's text, as the transcript will write it.
    #[serde(deserialize_with = "lenient::opt")]
    pub last_assistant_message: Option<String>,
}

/// `StopFailure`: the turn ended on an API error (`error` is a code such as `unknown`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StopFailureHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub error: Option<String>,
    /// `API Error: 400 …`.
    #[serde(deserialize_with = "lenient::opt")]
    pub last_assistant_message: Option<String>,
}

/// `SessionEnd`: `reason` is `clear`, `prompt_input_exit`, `other`, ….
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionEndHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub reason: Option<String>,
}

/// `Notification`: `permission_prompt` (6 s after an unanswered dialog), `idle_prompt` (60 s
/// after a turn). Not acted on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NotificationHookInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub notification_type: Option<String>,
}

/// The fields of a tool input cohost reads: the Bash tool's `{command, description}` (other
/// tools are read through the same view; they just lack the fields).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct BashToolInput {
    #[serde(deserialize_with = "lenient::opt")]
    pub command: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub description: Option<String>,
}

impl BashToolInput {
    /// The view of a tool input; empty unless it is an object.
    pub fn of(input: Option<&Value>) -> BashToolInput {
        match input {
            Some(input @ Value::Object(_)) => BashToolInput::deserialize(input).unwrap_or_default(),
            _ => BashToolInput::default(),
        }
    }
}

/// A `PostToolUse` `tool_response`: text, the Bash tool's `{stdout, stderr, interrupted, …}`, or
/// any other tool's JSON (kept as sent, `null` included).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResponse {
    Text(String),
    /// An object with a string `stdout` or `stderr`.
    Bash {
        stdout: Option<String>,
        stderr: Option<String>,
    },
    Other(Value),
}

impl ToolResponse {
    /// The response as text: Bash's stdout, then its non-empty stderr on a line of its own; any
    /// other JSON as JSON text.
    pub fn text(&self) -> String {
        match self {
            ToolResponse::Text(text) => text.clone(),
            ToolResponse::Bash { stdout, stderr } => {
                let mut out = stdout.clone().unwrap_or_default();
                if let Some(err) = stderr.as_deref().filter(|e| !e.is_empty()) {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(err);
                }
                out
            }
            ToolResponse::Other(value) => value.to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for ToolResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Output {
            #[serde(deserialize_with = "lenient::opt")]
            stdout: Option<String>,
            #[serde(deserialize_with = "lenient::opt")]
            stderr: Option<String>,
        }
        Ok(match Value::deserialize(deserializer)? {
            Value::String(text) => ToolResponse::Text(text),
            value @ Value::Object(_) => {
                let output = Output::deserialize(&value).unwrap_or_default();
                if output.stdout.is_some() || output.stderr.is_some() {
                    ToolResponse::Bash {
                        stdout: output.stdout,
                        stderr: output.stderr,
                    }
                } else {
                    ToolResponse::Other(value)
                }
            }
            other => ToolResponse::Other(other),
        })
    }
}

lenient_via_value!(ToolResponse);
