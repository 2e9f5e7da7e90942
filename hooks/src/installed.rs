//! The machine-wide hook: `cohost-hook --home <cohost home> <Event>`, which `cohost hooks
//! install` writes into the person's own Claude settings, so it runs for every Claude on the
//! machine. It must never block or slow that Claude:
//! - in a Claude cohost hosts (`$COHOST_SESSION_DIR` set: that Claude runs cohost's own hook
//!   from its `--settings`), it exits at once, doing nothing;
//! - with no daemon (no socket in the home, or nobody listening on it), it exits at once;
//! - else it reports the event to the daemon (`POST /api/claude/hook`, the payload without its
//!   large fields) and waits at most [`REPORT_TIMEOUT`] for the answer, which comes at once:
//!   for a `PermissionRequest` the answer says whether a cohost session drives this Claude
//!   through this hook; only then is the request relayed (`/api/claude/permission`) and its
//!   decision printed. Otherwise it prints nothing, and Claude asks in its TUI as always.
//!
//! It never writes `hooks.jsonl` (there is no session directory), and nothing goes to stderr for
//! the ordinary "no daemon" case.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::boundary::{HookAnswer, HookLine};
use crate::{permission, record};

/// The whole report, connecting included: the daemon answers it without waiting for anything.
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer read.
const MAX_ANSWER: u64 = 64 * 1024;
/// The payload fields reported: what the status of a turn needs, never the prompt, tool inputs
/// or outputs (which can be megabytes).
const REPORTED: [&str; 11] = [
    "session_id",
    "transcript_path",
    "cwd",
    "hook_event_name",
    "prompt_id",
    "permission_mode",
    "tool_name",
    "tool_use_id",
    "notification_type",
    "source",
    "reason",
];
/// Longer strings are not reported (ids, paths and names are far shorter).
const MAX_FIELD: usize = 4096;

/// Runs the machine-wide hook for `event` (from argv), reporting to the daemon of `home`.
pub fn run(home: Option<&str>, event: Option<String>, warn: impl Fn(&str)) {
    if std::env::var_os("COHOST_SESSION_DIR").is_some_and(|dir| !dir.is_empty()) {
        // cohost hosts this Claude and its own hook reports everything: nothing twice.
        return;
    }
    let Some(home) = home.filter(|h| !h.is_empty()) else {
        warn("--home names no cohost home; the event is not reported");
        return;
    };
    let home = Path::new(home);
    let socket = home.join(crate::local_socket::SOCKET_FILE);
    if !socket.exists() {
        // No daemon: Claude goes on as if the hook were not there.
        return;
    }
    let payload = record::payload_of(record::read_stdin(std::io::stdin().lock()));
    let event = event
        .or_else(|| {
            payload
                .get("hook_event_name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    let token = match permission::read_token(&home.join("token")) {
        Ok(token) => token,
        Err(error) => {
            warn(&error);
            return;
        }
    };
    let is_permission = event == crate::PERMISSION_EVENT;
    let line = HookLine {
        received_at: record::now_ms(),
        event,
        request_id: is_permission.then(record::random_hex_id),
        payload: reported(&payload),
    };
    let answer = match report(&socket, &token, &line) {
        Ok(answer) => answer,
        Err(Failure::NotRunning) => return,
        Err(Failure::Other(error)) => {
            warn(&format!("the event was not reported: {error}"));
            return;
        }
    };
    let (Some(session_id), Some(request_id)) = (answer.relay_to, line.request_id.as_deref()) else {
        return;
    };
    // The daemon holds a relayed request as long as a hosted session's (300 s).
    let wait = Duration::from_secs_f64(permission::DEFAULT_TIMEOUT_SECS);
    let relayed = permission::ask(&permission::Relay {
        socket,
        token: &token,
        session_id,
        request_id,
        payload: &payload,
        wait,
    });
    match relayed {
        Ok(Some(decision)) => crate::print_line(&permission::hook_output(&decision)),
        Ok(None) => {}
        Err(error) => warn(&format!(
            "permission relay failed, Claude will ask in the TUI: {error}"
        )),
    }
}

/// The payload as reported: only [`REPORTED`] fields, each a short string.
pub fn reported(payload: &Value) -> Value {
    let Some(object) = payload.as_object() else {
        return Value::Object(Map::new());
    };
    let kept = REPORTED
        .iter()
        .filter_map(|&key| {
            let value = object.get(key)?;
            let short = value.as_str().is_some_and(|s| s.len() <= MAX_FIELD);
            short.then(|| (key.to_string(), value.clone()))
        })
        .collect();
    Value::Object(kept)
}

enum Failure {
    /// Nobody listens on the socket (a daemon that stopped left it).
    NotRunning,
    Other(String),
}

/// `POST /api/claude/hook`, bounded by [`REPORT_TIMEOUT`].
fn report(socket: &Path, token: &str, line: &HookLine) -> Result<HookAnswer, Failure> {
    let body = serde_json::to_vec(line).map_err(|e| Failure::Other(e.to_string()))?;
    let agent = crate::local_socket::agent(
        PathBuf::from(socket),
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(REPORT_TIMEOUT))
            .timeout_global(Some(REPORT_TIMEOUT)),
    );
    let endpoint = format!("{}/api/claude/hook", crate::local_socket::SOCKET_ORIGIN);
    let mut response = agent
        .post(&endpoint)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(&body[..])
        .map_err(|error| {
            if crate::local_socket::is_not_running(&error) {
                Failure::NotRunning
            } else {
                Failure::Other(format!("POST {endpoint}: {error}"))
            }
        })?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .map_err(|e| Failure::Other(format!("reading the answer to POST {endpoint}: {e}")))?;
    if !(200..300).contains(&status) {
        return Err(Failure::Other(format!(
            "POST {endpoint} answered {status}: {}",
            text.trim()
        )));
    }
    serde_json::from_str(&text)
        .map_err(|e| Failure::Other(format!("unreadable answer {text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_status_fields_are_reported() {
        let payload = json!({
            "session_id": "3c74e8a3-0d49-463f-801d-b8088269916a",
            "transcript_path": "/h/.claude/projects/-w/3c74.jsonl",
            "cwd": "/w",
            "hook_event_name": "PostToolUse",
            "prompt_id": "p1",
            "permission_mode": "default",
            "tool_name": "Bash",
            "tool_input": {"command": "cat big"},
            "tool_response": {"stdout": "x".repeat(100_000)},
            "tool_use_id": "toolu_1",
            "prompt": "secret prompt",
            "notification_type": "x".repeat(MAX_FIELD + 1),
        });
        assert_eq!(
            reported(&payload),
            json!({
                "session_id": "3c74e8a3-0d49-463f-801d-b8088269916a",
                "transcript_path": "/h/.claude/projects/-w/3c74.jsonl",
                "cwd": "/w",
                "hook_event_name": "PostToolUse",
                "prompt_id": "p1",
                "permission_mode": "default",
                "tool_name": "Bash",
                "tool_use_id": "toolu_1",
            })
        );
        assert_eq!(reported(&json!("not an object")), json!({}));
    }
}
