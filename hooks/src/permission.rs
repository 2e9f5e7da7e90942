//! The permission relay: POST a `PermissionRequest` to the daemon
//! (`/api/claude/permission` over the socket `$COHOST_SOCKET`, bearer token read from
//! `$COHOST_TOKEN_FILE`), wait for
//! its decision up to a little longer than `$COHOST_PERMISSION_TIMEOUT_SECS`, and render it as
//! Claude's hook output. It must never invent a decision: "ask", a timeout, a refused
//! connection, a non-2xx status or an unreadable answer all mean "no decision" so Claude shows
//! its own dialog. The token is read from a file and never placed in env or argv.

use std::time::Duration;

use serde::Serialize;

use crate::boundary::{PermissionAnswer, PermissionAsk};
use serde_json::Value;

/// The daemon's wait when `COHOST_PERMISSION_TIMEOUT_SECS` is not set.
pub const DEFAULT_TIMEOUT_SECS: f64 = 300.0;
/// How much longer than the daemon's own wait the hook waits for its answer.
pub const TIMEOUT_MARGIN: Duration = Duration::from_secs(5);
/// Connecting to a daemon on loopback is instant or it is not running.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from the daemon.
const MAX_ANSWER: u64 = 1024 * 1024;
/// The message Claude shows the model when the daemon denies without one.
const DEFAULT_DENY_MESSAGE: &str = "Denied through cohost";

/// A decision to hand back to Claude.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum Decision {
    Allow {
        #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
        updated_input: Option<Value>,
        #[serde(rename = "updatedPermissions", skip_serializing_if = "Option::is_none")]
        updated_permissions: Option<Value>,
    },
    Deny {
        message: String,
        interrupt: bool,
    },
}

#[derive(Serialize)]
struct HookOutput<'a> {
    #[serde(rename = "hookSpecificOutput")]
    hook_specific_output: Specific<'a>,
}

#[derive(Serialize)]
struct Specific<'a> {
    #[serde(rename = "hookEventName")]
    hook_event_name: &'static str,
    decision: &'a Decision,
}

/// Claude's stdout for a decision:
/// `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{…}}}`.
pub fn hook_output(decision: &Decision) -> String {
    let output = HookOutput {
        hook_specific_output: Specific {
            hook_event_name: "PermissionRequest",
            decision,
        },
    };
    // Serializing these plain structs cannot fail; fall back to "no decision" if it ever did.
    serde_json::to_string(&output).unwrap_or_default()
}

fn env(name: &str) -> Result<String, String> {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Ok(value),
        _ => Err(format!("{name} is not set")),
    }
}

/// The daemon's wait from `COHOST_PERMISSION_TIMEOUT_SECS` (seconds, fractions allowed).
fn daemon_wait() -> Duration {
    let secs = std::env::var("COHOST_PERMISSION_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    Duration::from_secs_f64(secs)
}

/// Asks the daemon of a hosted session (everything from the environment cohost gave Claude).
/// `Ok(None)` is its "ask"; `Err` is any failure (also "no decision").
pub fn ask_daemon(request_id: &str, payload: &Value) -> Result<Option<Decision>, String> {
    let socket = env("COHOST_SOCKET")?;
    let session_id = env("COHOST_SESSION_ID")?;
    let token_file = env("COHOST_TOKEN_FILE")?;
    let token = read_token(std::path::Path::new(&token_file))?;
    ask(&Relay {
        socket: socket.into(),
        token: &token,
        session_id,
        request_id,
        payload,
        wait: daemon_wait(),
    })
}

/// The daemon's bearer token from `path`, trimmed.
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    let token = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let token = token.trim();
    if token.is_empty() {
        return Err(format!("the token file {} is empty", path.display()));
    }
    Ok(token.to_string())
}

/// One relayed `PermissionRequest`: where to, under which cohost session, for how long.
pub struct Relay<'a> {
    pub socket: std::path::PathBuf,
    pub token: &'a str,
    pub session_id: String,
    pub request_id: &'a str,
    pub payload: &'a Value,
    /// How long the daemon holds the request (the hook waits [`TIMEOUT_MARGIN`] more).
    pub wait: Duration,
}

/// Relays the request and waits for the daemon's decision. `Ok(None)` is its "ask".
pub fn ask(relay: &Relay<'_>) -> Result<Option<Decision>, String> {
    let body = serde_json::to_vec(&PermissionAsk {
        session_id: relay.session_id.clone(),
        request_id: relay.request_id.to_string(),
        payload: relay.payload.clone(),
    })
    .map_err(|e| format!("cannot encode the request: {e}"))?;

    // Over the daemon's socket, checked to be served by this user; never through a proxy
    // (Claude's env often carries HTTP(S)_PROXY). See `local_socket`.
    let agent = crate::local_socket::agent(
        relay.socket.clone(),
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(relay.wait + TIMEOUT_MARGIN)),
    );
    let endpoint = format!(
        "{}/api/claude/permission",
        crate::local_socket::SOCKET_ORIGIN
    );
    let token = relay.token;
    let mut response = agent
        .post(&endpoint)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(&body[..])
        .map_err(|e| format!("POST {endpoint}: {e}"))?;

    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .map_err(|e| format!("reading the answer to POST {endpoint}: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "POST {endpoint} answered {status}: {}",
            text.trim()
        ));
    }
    decision_of(&text)
}

/// The decision in the daemon's answer body.
fn decision_of(text: &str) -> Result<Option<Decision>, String> {
    let answer: PermissionAnswer =
        serde_json::from_str(text).map_err(|e| format!("unreadable answer {text:?}: {e}"))?;
    Ok(match answer {
        PermissionAnswer::Allow {
            updated_input,
            updated_permissions,
        } => Some(Decision::Allow {
            updated_input,
            updated_permissions,
        }),
        PermissionAnswer::Deny { message, interrupt } => Some(Decision::Deny {
            message: message
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| DEFAULT_DENY_MESSAGE.to_string()),
            interrupt: interrupt.unwrap_or(false),
        }),
        PermissionAnswer::Ask => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_exact() {
        assert_eq!(
            hook_output(&Decision::Allow {
                updated_input: None,
                updated_permissions: None
            }),
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
        );
        assert_eq!(
            hook_output(&Decision::Deny {
                message: "no".into(),
                interrupt: true
            }),
            r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"no","interrupt":true}}}"#
        );
    }

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(
            decision_of(r#"{"behavior":"allow"}"#),
            Ok(Some(Decision::Allow {
                updated_input: None,
                updated_permissions: None
            }))
        );
        assert_eq!(decision_of(r#"{"behavior":"ask"}"#), Ok(None));
        assert_eq!(
            decision_of(r#"{"behavior":"deny"}"#),
            Ok(Some(Decision::Deny {
                message: DEFAULT_DENY_MESSAGE.into(),
                interrupt: false
            }))
        );
        assert!(decision_of(r#"{"behavior":"maybe"}"#).is_err());
        assert!(decision_of("not json").is_err());
    }
}
