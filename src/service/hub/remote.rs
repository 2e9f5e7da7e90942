//! What a hub lists and starts on another machine through its commands: a session's approvals
//! and input requests, asked of the machine that holds them (so an answered one is never
//! offered again from a stale copy), and the answers of a fork or a new session there with
//! their ids qualified as the hub names them — one place for HTTP and MCP alike.
//!
//! A machine whose link is down is refused at once, naming it and what its last view showed,
//! never answered with an empty list: the hub cannot tell what is pending there now.

use super::{HubWorld, qualify};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{
    ApprovalEntry, ApprovalList, CreateBody, ForkBody, MachineLinkState, RemoteOp, RemoteSurface,
    RequestEntry, RequestList,
};
use crate::service::{ErrorKind, Service, ServiceError};

impl Service {
    /// `GET /api/sessions/<machine>/<id>/approvals` at a hub (MCP `list_approvals`): the
    /// session's approvals, pending and resolved, as its machine holds them now, each with the
    /// qualified session id. A machine that is down is `machine_unreachable`, naming it.
    pub async fn remote_approvals(
        &self,
        surface: RemoteSurface,
        machine: &str,
        session: &str,
    ) -> Result<Vec<ApprovalEntry>, ServiceError> {
        self.reachable(machine, session, "approvals")?;
        let answer = self
            .remote_from(surface, machine, session, RemoteOp::Approvals {})
            .await?;
        let mut list: ApprovalList = parse_answer(machine, answer)?;
        for entry in &mut list.approvals {
            entry.session_id = Some(qualify(machine, session));
        }
        Ok(list.approvals)
    }

    /// `GET /api/sessions/<machine>/<id>/requests` at a hub (MCP `list_requests`), as
    /// [`Service::remote_approvals`].
    pub async fn remote_requests(
        &self,
        surface: RemoteSurface,
        machine: &str,
        session: &str,
    ) -> Result<Vec<RequestEntry>, ServiceError> {
        self.reachable(machine, session, "input requests")?;
        let answer = self
            .remote_from(surface, machine, session, RemoteOp::Requests {})
            .await?;
        let mut list: RequestList = parse_answer(machine, answer)?;
        for entry in &mut list.requests {
            entry.session_id = Some(qualify(machine, session));
        }
        Ok(list.requests)
    }

    /// A fork of another machine's session, by its machine: its answer (a `Capability`) with
    /// the new session's id qualified and its machine set.
    pub async fn remote_fork(
        &self,
        surface: RemoteSurface,
        machine: &str,
        session: &str,
        fork: ForkBody,
    ) -> Result<serde_json::Value, ServiceError> {
        let mut answer = self
            .remote_from(surface, machine, session, RemoteOp::Fork { fork })
            .await?;
        if let Some(view) = answer.pointer_mut("/data/session") {
            qualify_view(view, machine);
        }
        Ok(answer)
    }

    /// A new session on another machine: its answer (a `CreatedReply`) with the session's id
    /// qualified and its machine set. The idempotency key travels, so a retry finds the first.
    pub async fn remote_create(
        &self,
        surface: RemoteSurface,
        machine: &str,
        create: CreateBody,
    ) -> Result<serde_json::Value, ServiceError> {
        let mut answer = self
            .remote_from(surface, machine, "", RemoteOp::Create { create })
            .await?;
        if let Some(view) = answer.get_mut("session") {
            qualify_view(view, machine);
        }
        Ok(answer)
    }

    /// Refuses a list of a machine whose link is down, at once: what is pending there now is
    /// unknown here. The message names the machine, when it was last heard and what its last
    /// view counted in the session.
    pub(in crate::service) fn reachable(
        &self,
        machine: &str,
        session: &str,
        what: &str,
    ) -> Result<(), ServiceError> {
        let world = self.known_machine(machine)?;
        let Some(down) = down_since(world, machine, session) else {
            return Ok(());
        };
        Err(ServiceError::new(
            ErrorKind::Unavailable,
            codes::MACHINE_UNREACHABLE,
            format!(
                "the machine `{machine}` is down ({down}): its {what} cannot be listed or answered from here until it is back"
            ),
        ))
    }
}

/// Why `machine` is down (when it was last heard; what its last view counted in `session`), or
/// `None` while its link is up.
fn down_since(world: &HubWorld, machine: &str, session: &str) -> Option<String> {
    let now = now_ms();
    world.read(|machines| {
        let m = machines.get(machine)?;
        if m.link(now, world.down_after_ms) == MachineLinkState::Up {
            return None;
        }
        let heard = match m.heard_at {
            Some(at) => format!("last heard {} s ago", now.saturating_sub(at) / 1000),
            None => "never heard from".to_string(),
        };
        let counted = m
            .view
            .as_ref()
            .and_then(|v| v.sessions.iter().find(|s| s.id == session))
            .map(|s| {
                format!(
                    "; its last view showed {} pending approvals and {} pending requests in this session",
                    s.pending_approvals, s.pending_requests
                )
            })
            .unwrap_or_default();
        Some(format!("{heard}{counted}"))
    })
}

/// The owning machine's answer as the list it is (an older machine may answer otherwise).
fn parse_answer<T: serde::de::DeserializeOwned>(
    machine: &str,
    answer: serde_json::Value,
) -> Result<T, ServiceError> {
    serde_json::from_value(answer).map_err(|error| {
        ServiceError::new(
            ErrorKind::Upstream,
            codes::INTERNAL_ERROR,
            format!("the machine `{machine}` answered a list this hub cannot read: {error}"),
        )
    })
}

/// Another machine's session view as the hub names it: id qualified, its machine set.
fn qualify_view(view: &mut serde_json::Value, machine: &str) {
    if let Some(id) = view.get("id").and_then(serde_json::Value::as_str) {
        view["id"] = serde_json::Value::String(qualify(machine, id));
        view["machine"] = serde_json::Value::String(machine.to_string());
    }
}
