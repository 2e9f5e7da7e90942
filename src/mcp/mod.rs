//! The MCP surface (official Rust SDK `rmcp`): one [`CohostMcp`] server whose tools read the
//! tracker and the log and drive hosted sessions through the service.
//!
//! It is reached two ways: streamable HTTP at `/mcp` on the daemon (behind the same guard as
//! every route, so the bearer token is required), served stateless with JSON answers, and
//! `cohost mcp` (`commands/mcp_bridge.rs`), a stdio process — a client of the daemon — that
//! forwards each JSON-RPC line to `/mcp`.
//!
//! **Answers.** Every tool answers with both `structuredContent` (a JSON object) and a text
//! block carrying the same JSON. Every answer is redacted ([`redact`]) and bounded to
//! [`MAX_ANSWER_BYTES`] encoded; a cut answer says `truncated: true` and how to read the rest.
//! Every tool declares an `outputSchema`, generated ([`output`]) from the protocol type it
//! answers with, and every successful answer conforms to it (MCP's rule): redaction and
//! bounding only change strings and drop list items.
//!
//! **Errors.** Arguments that do not match a tool's (closed) schema are refused by rmcp before
//! the tool runs (rmcp 3.11 reports them as an error result with a text message). Every other
//! failure is a tool result with `isError: true` and
//! `structuredContent.error = {kind, code, message}`, where `kind` is `permission` for an
//! action refused by policy (e.g. `human_typing`) and `operational` for everything else (an
//! unknown session, a session not ready, a backend failure, an invalid value). A field a
//! failure names is named as the tool's argument ([`args::arg_name`]), never as HTTP names it.

mod args;
mod remote;
mod tools;
mod window;

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, tool_handler};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::protocol::codes;
use crate::service::{Service, ServiceError};

/// The most bytes one tool answer may take encoded (the whole `CallToolResult`), leaving room
/// under 60,000 for the JSON-RPC envelope.
pub const MAX_ANSWER_BYTES: usize = 58_000;
/// Strings longer than this are cut first when an answer is too large.
const STRING_CAPS: [usize; 4] = [16_384, 4_096, 1_024, 256];

/// Error codes that mean "refused by policy" rather than "could not be done".
/// Failures of these codes are `kind: "permission"`; the rest `operational`.
const PERMISSION_CODES: [&str; 4] = [
    codes::HUMAN_TYPING,
    codes::HUMAN_CONTROL,
    codes::FORBIDDEN,
    codes::PERMISSION_DENIED,
];

/// The MCP server: one per HTTP request (stateless) or per `/mcp` session; cheap to clone.
#[derive(Clone)]
pub struct CohostMcp {
    service: Service,
}

impl CohostMcp {
    pub fn new(service: Service) -> Self {
        CohostMcp { service }
    }
}

#[tool_handler(
    name = "cohost",
    instructions = "cohost hosts codex and claude sessions and tracks agents in tmux. Read with list_sessions, get_session, tracker_state and events (cursor `after`, optional blocking `wait_seconds`); act with send (queues a task), interrupt, resolve_approval, goal_*, fork. Follow a task with task_status, queue and task_result (chunks by offset); cancel_task, edit_task and supersede_task change it. While a human holds a session's control lease, queued tasks wait (waitingReason human_control) and only the human releases it. Failed calls have isError with structuredContent.error.kind `permission` or `operational`."
)]
impl ServerHandler for CohostMcp {}

/// The streamable-HTTP service mounted at `/mcp`. Stateless with JSON answers: each POST is
/// one JSON-RPC message and its answer. Host and Origin are checked by the daemon's guard.
pub fn http_service(
    service: Service,
    max_body_bytes: usize,
) -> StreamableHttpService<CohostMcp, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_cancellation_token(service.shutdown_token().child_token())
        .with_max_request_body_bytes(max_body_bytes)
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(CohostMcp::new(service.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// A failed tool call, as `isError` content.
pub fn failure(code: &str, message: &str) -> CallToolResult {
    let kind = if PERMISSION_CODES.contains(&code) {
        "permission"
    } else {
        "operational"
    };
    let mut error = json!({ "error": { "kind": kind, "code": code, "message": message } });
    crate::redact::redact_value(&mut error);
    CallToolResult::structured_error(error)
}

impl From<ServiceError> for CallToolResult {
    /// The one mapping of a service error to a tool failure: every field, in the message and
    /// after it, is named as the tool's argument ([`args::arg_name`]), never as HTTP names it.
    fn from(error: ServiceError) -> Self {
        let mut message = error.message.render(args::arg_name);
        if let Some(field) = error.field {
            message.push_str(&format!(" (field `{}`)", args::arg_name(field)));
        }
        failure(error.code, &message)
    }
}

fn encoded_len(value: &Value) -> usize {
    // `structuredContent` plus the same JSON as an escaped text block, plus the wrapper.
    let text = value.to_string();
    let escaped = serde_json::to_string(&text).map(|s| s.len()).unwrap_or(0);
    text.len() + escaped + 200
}

/// Cuts every string longer than `cap` bytes (at a char boundary); returns how many were cut.
fn clip_strings(value: &mut Value, cap: usize) -> usize {
    match value {
        Value::String(text) if text.len() > cap => {
            let mut end = cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let cut = text.len() - end;
            text.truncate(end);
            text.push_str(&format!("…[{cut} bytes cut]"));
            1
        }
        Value::Array(items) => items.iter_mut().map(|v| clip_strings(v, cap)).sum(),
        Value::Object(map) => map.values_mut().map(|v| clip_strings(v, cap)).sum(),
        _ => 0,
    }
}

/// A bounded answer: how many of the list's items were kept, and whether anything was cut.
pub struct Bounded {
    pub value: Value,
    pub kept: usize,
    pub truncated: bool,
}

/// Redacts `value` and fits it under [`MAX_ANSWER_BYTES`]: first by cutting long strings,
/// then (when `list` names an array field) by dropping items from the end of that array.
/// Sets `truncated: true` on the object when anything was cut. Only strings are shortened and
/// list items dropped, so a bounded answer keeps the shape its tool declares; one that cannot
/// fit that way is an `answer_too_large` failure.
pub fn bound(mut value: Value, list: Option<&str>) -> Result<Bounded, CallToolResult> {
    crate::redact::redact_value(&mut value);
    let total = list
        .and_then(|key| value.get(key))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut fallback = None;
    for cap in STRING_CAPS {
        let mut candidate = value.clone();
        let clipped = clip_strings(&mut candidate, cap);
        if encoded_len(&candidate) <= MAX_ANSWER_BYTES {
            return Ok(finish(candidate, total, total, clipped > 0));
        }
        if let Some(key) = list {
            let items = candidate
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            // The largest prefix that fits, by bisection (keeping at least none).
            let with = |n: usize| {
                let mut v = candidate.clone();
                v[key] = Value::Array(items[..n].to_vec());
                v
            };
            let (mut lo, mut hi) = (0, items.len());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if encoded_len(&with(mid)) <= MAX_ANSWER_BYTES {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            let fitted = with(lo);
            if lo > 0 && encoded_len(&fitted) <= MAX_ANSWER_BYTES {
                return Ok(finish(fitted, lo, total, true));
            }
            if fallback.is_none() && encoded_len(&fitted) <= MAX_ANSWER_BYTES {
                fallback = Some(fitted);
            }
        }
    }
    match fallback {
        Some(empty) => Ok(finish(empty, 0, total, true)),
        // A shorter stand-in would not have the tool's declared shape: a failure need not.
        None => Err(failure(
            codes::ANSWER_TOO_LARGE,
            "the answer was too large to return even when cut",
        )),
    }
}

fn finish(mut value: Value, kept: usize, total: usize, cut: bool) -> Bounded {
    let truncated = cut || kept < total;
    if let Value::Object(map) = &mut value {
        map.insert("truncated".into(), Value::Bool(truncated));
    }
    Bounded {
        value,
        kept,
        truncated,
    }
}

/// A successful answer: redacted, bounded, as structured plus text content.
pub fn answer(value: impl Serialize) -> CallToolResult {
    match bound(to_value(value), None) {
        Ok(bounded) => CallToolResult::structured(bounded.value),
        Err(failure) => failure,
    }
}

/// A successful answer whose `list` field may lose items to fit; `note(kept, total)` says what
/// was left out and how to read it.
pub fn answer_list(
    value: impl Serialize,
    list: &str,
    note: impl FnOnce(usize, usize) -> String,
) -> CallToolResult {
    let value = to_value(value);
    let total = value
        .get(list)
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    match bound(value, Some(list)) {
        Ok(Bounded {
            mut value, kept, ..
        }) => {
            if kept < total {
                value["note"] = Value::String(note(kept, total));
            }
            CallToolResult::structured(value)
        }
        Err(failure) => failure,
    }
}

fn to_value(value: impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// What every successful answer adds to its tool's answer type `T`: `truncated`, and a `note`
/// when some of its list was left out. Only its schema is used: the tools' `outputSchema`.
#[derive(Serialize, JsonSchema)]
struct Answer<T> {
    #[serde(flatten)]
    body: T,
    /// True when strings were cut or list items left out to fit the answer bound.
    truncated: bool,
    /// What was left out, and how to read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// A tool's `outputSchema`: the JSON Schema of what its answer type `T` serializes to, with
/// `truncated` and `note` (every successful `structuredContent` conforms to it).
pub fn output<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_output::<Answer<T>>()
}

/// [`output`] for an answer that carries logged events: their schema is what the daemon reads
/// back from its log (the deserialize form), since a line an earlier release wrote may lack a
/// field added since with a default.
pub fn logged_output<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = rmcp::handler::server::tool::schema_for_type::<Answer<T>>()
        .as_ref()
        .clone();
    schema.remove("title");
    schema.remove("description");
    Arc::new(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_answers_pass_whole() {
        let bounded = bound(json!({ "items": [1, 2, 3] }), Some("items")).unwrap();
        assert_eq!(bounded.kept, 3);
        assert!(!bounded.truncated);
        assert_eq!(bounded.value["truncated"], false);
    }

    #[test]
    fn long_lists_are_cut_under_the_limit() {
        let items: Vec<Value> = (0..5000)
            .map(|i| json!({ "n": i, "text": "x".repeat(100) }))
            .collect();
        let bounded = bound(json!({ "items": items }), Some("items")).unwrap();
        assert!(bounded.truncated);
        assert!(bounded.kept > 10 && bounded.kept < 5000, "{}", bounded.kept);
        let encoded = serde_json::to_string(&CallToolResult::structured(bounded.value)).unwrap();
        assert!(encoded.len() < 60_000, "{}", encoded.len());
    }

    #[test]
    fn long_strings_are_cut_and_secrets_redacted() {
        let text = format!("sk-abcdefghijklmnopqrstuvwxyz {}", "é".repeat(50_000));
        let bounded = bound(json!({ "text": text }), None).unwrap();
        assert!(bounded.truncated);
        let out = bounded.value["text"].as_str().unwrap();
        assert!(out.starts_with("sk-[REDACTED] "));
        assert!(out.ends_with("bytes cut]"));
        let encoded = serde_json::to_string(&CallToolResult::structured(bounded.value)).unwrap();
        assert!(encoded.len() < 60_000, "{}", encoded.len());
    }

    /// MCP requires an object schema at the top; every tool declares one, with the answer's
    /// own fields and the `truncated` every answer carries.
    #[test]
    fn every_tool_declares_an_object_output_schema() {
        let tools = CohostMcp::tool_router().list_all();
        assert_eq!(tools.len(), 29);
        for tool in tools {
            let schema = tool
                .output_schema
                .unwrap_or_else(|| panic!("{} declares no outputSchema", tool.name));
            assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
            let properties = schema.get("properties").and_then(Value::as_object);
            let names: Vec<&String> = properties.map(|p| p.keys().collect()).unwrap_or_default();
            assert!(names.len() > 2, "{}: {names:?}", tool.name);
            assert!(names.iter().any(|n| *n == "truncated"), "{}", tool.name);
            let required = schema.get("required").and_then(Value::as_array);
            assert!(
                required.is_some_and(|r| r.contains(&json!("truncated"))),
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn an_answer_too_large_to_cut_is_a_failure_not_a_stand_in() {
        // 400 fields of 256 bytes (the shortest cut) and no list to drop from.
        let fields: serde_json::Map<String, Value> = (0..400)
            .map(|i| (format!("f{i}"), json!("x".repeat(300))))
            .collect();
        let Err(failed) = bound(Value::Object(fields), None) else {
            panic!("the answer fit");
        };
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            failed.structured_content.unwrap()["error"]["code"],
            "answer_too_large"
        );
    }

    /// Each field a tool takes is named in errors as that tool's argument: every name
    /// [`args::arg_name`] gives is an argument of some tool, but for the fields only HTTP takes.
    #[test]
    fn errors_name_fields_as_tool_arguments() {
        use crate::protocol::Field;
        let arguments: std::collections::BTreeSet<String> = CohostMcp::tool_router()
            .list_all()
            .iter()
            .filter_map(|tool| tool.input_schema.get("properties")?.as_object().cloned())
            .flat_map(|properties| properties.keys().cloned().collect::<Vec<_>>())
            .collect();
        let http_only = [
            Field::Budget,
            Field::Terminal,
            Field::Images,
            Field::By,
            Field::AfterTurnId,
            Field::Session,
            Field::Source,
            Field::Label,
            Field::Percent,
            Field::LogMessage,
        ];
        for field in Field::ALL {
            let name = args::arg_name(field);
            assert_eq!(
                arguments.contains(name),
                !http_only.contains(&field),
                "{field:?} as `{name}`; arguments: {arguments:?}"
            );
        }
        let error = ServiceError::field(
            Field::IdempotencyKey,
            crate::protocol::message![
                Field::IdempotencyKey,
                " already names a task; ",
                Field::Text,
                " was not sent"
            ],
        );
        let failed = CallToolResult::from(error.clone());
        assert_eq!(
            failed.structured_content.unwrap()["error"]["message"],
            "`idempotency_key` already names a task; `prompt` was not sent (field `idempotency_key`)"
        );
        assert_eq!(
            error.to_string(),
            "`idempotencyKey` already names a task; `text` was not sent"
        );
    }

    #[test]
    fn failures_say_their_kind() {
        let refused = failure("human_typing", "a human is typing");
        assert_eq!(refused.is_error, Some(true));
        assert_eq!(
            refused.structured_content.unwrap()["error"]["kind"],
            "permission"
        );
        let missing = failure("session_not_found", "no session `x`");
        assert_eq!(
            missing.structured_content.unwrap()["error"]["kind"],
            "operational"
        );
    }
}
