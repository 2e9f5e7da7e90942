//! The machine-wide Claude hook (`cohost hooks install`) as the service sees it: its reports
//! (`POST /api/claude/hook`) give the Claude watcher each watched session's status from the
//! hooks, and for a `PermissionRequest` the one lookup [`Service::claude_driver`] says whether a
//! cohost session drives that Claude — the hook relays the request only then. The answer never
//! waits: the report is queued for the watcher (or dropped when its queue is full), and the
//! lookup reads memory.

use super::{Service, ServiceError};
use crate::protocol::boundary::{HookAnswer, HookLine};
use crate::protocol::{Field, message};
use crate::watch::format::WatchedAgent;

/// The event whose report may be relayed.
const PERMISSION_REQUEST: &str = "PermissionRequest";
/// The longest event name or Claude session id taken.
const MAX_NAME: usize = 256;

/// How a cohost session hears the hooks of the Claude it drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookRoute {
    /// Through its own hook, the one cohost registered with `--settings` when it started that
    /// Claude (a hosted session): the machine-wide hook stays out of it.
    OwnHook,
    /// Through the machine-wide hook: a Claude cohost did not start (adopted).
    MachineHook,
}

/// The cohost session that drives a Claude session, and how its hooks reach cohost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeDriver {
    pub session_id: String,
    pub route: HookRoute,
}

impl Service {
    /// Which cohost session, if any, drives the Claude session `claude_session` (Claude's own
    /// `session_id`), from the sessions as logged: a hosted session bound to it has its own hook
    /// (`OwnHook`); an adopted one (`session.adopted`) gets its approvals through the
    /// machine-wide hook (`MachineHook`). The single place this is decided: the machine-wide
    /// hook's relay asks only this, and no second map of driven Claude sessions is kept.
    pub fn claude_driver(&self, claude_session: &str) -> Option<ClaudeDriver> {
        self.core.read(|state| {
            state
                .sessions
                .driving(claude_session)
                .map(|record| ClaudeDriver {
                    session_id: record.id.clone(),
                    route: match record.control() {
                        crate::protocol::Control::Adopted => HookRoute::MachineHook,
                        _ => HookRoute::OwnHook,
                    },
                })
        })
    }

    /// `POST /api/claude/hook`: one hook event of a Claude cohost does not host. Its status goes
    /// to the Claude watcher; a `PermissionRequest` is answered with the session to relay it to,
    /// if one drives this Claude through the machine-wide hook.
    pub fn claude_hook(&self, line: HookLine) -> Result<HookAnswer, ServiceError> {
        let valid_name = |name: &str| {
            !name.is_empty()
                && name.len() <= MAX_NAME
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        if !valid_name(&line.event) {
            return Err(ServiceError::invalid(
                "`event` must be a hook event name (letters, digits, `_`; at most 256 bytes)",
            ));
        }
        if let Some(id) = &line.request_id
            && (id.is_empty() || id.len() > 128)
        {
            return Err(ServiceError::field(
                Field::RequestId,
                message![Field::RequestId, " must be 1 to 128 bytes"],
            ));
        }
        let claude_session = line
            .payload
            .get("session_id")
            .and_then(serde_json::Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= MAX_NAME)
            .ok_or_else(|| {
                ServiceError::invalid(
                    "`payload.session_id` must be Claude's session id (at most 256 bytes)",
                )
            })?
            .to_string();
        let tracked =
            crate::watch::claude::hook_observation(&line.event, line.received_at, &line.payload)
                .is_some_and(|observation| {
                    self.watch.report(WatchedAgent::ClaudeCode, observation)
                });
        let relay_to = if line.event == PERMISSION_REQUEST {
            self.claude_driver(&claude_session)
                .filter(|driver| driver.route == HookRoute::MachineHook)
                .map(|driver| driver.session_id)
        } else {
            None
        };
        Ok(HookAnswer { tracked, relay_to })
    }
}
