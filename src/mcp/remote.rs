//! MCP at a hub acting on another machine: a session's goal, its fork, and a new session
//! started there (with its first prompt) — each sent as MCP's command (`RemoteSurface::Mcp`:
//! the owning machine applies MCP's rules, its project roots and its lease) and answered in the
//! shape the local tool answers, ids qualified as the hub names them.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;

use super::args::{GoalSetArgs, StartArgs};
use super::tools::failed;
use super::{CohostMcp, answer};
use crate::protocol::codes;
use crate::protocol::{
    Capability, CreateBody, ForkBody, ForkReply, GoalBody, HostedSessionView, RemoteOp,
    RemoteSurface, SendBody, SessionStarted, TaskSource,
};
use crate::service::{ErrorKind, ServiceError};

type ToolResult = Result<CallToolResult, ErrorData>;

/// `goal_get`, `goal_set` (with `goal`) or `goal_clear` of another machine's session.
pub(super) async fn goal(
    mcp: &CohostMcp,
    machine: &str,
    session: &str,
    set: Option<GoalSetArgs>,
    clear: bool,
) -> ToolResult {
    let op = match (set, clear) {
        (Some(args), _) => RemoteOp::GoalSet {
            goal: GoalBody {
                objective: args.objective,
                status: args.status,
                token_budget: args.token_budget,
            },
        },
        (None, true) => RemoteOp::GoalClear {},
        (None, false) => RemoteOp::GoalGet {},
    };
    let answered = mcp
        .service
        .remote_from(RemoteSurface::Mcp, machine, session, op)
        .await;
    Ok(
        match answered.and_then(|value| parse::<Capability>(machine, value)) {
            Ok(capability) => answer(capability),
            Err(error) => failed(error),
        },
    )
}

/// `fork` of another machine's session: the local tool's `ForkReply`, the new session's id
/// qualified.
pub(super) async fn fork(mcp: &CohostMcp, machine: &str, session: &str) -> ToolResult {
    let answered = mcp
        .service
        .remote_fork(RemoteSurface::Mcp, machine, session, ForkBody::default())
        .await
        .and_then(|value| parse::<Capability>(machine, value));
    let capability = match answered {
        Ok(capability) => capability,
        Err(error) => return Ok(failed(error)),
    };
    let session = match capability.data.map(|mut data| data["session"].take()) {
        Some(view) if capability.ok => match parse::<HostedSessionView>(machine, view) {
            Ok(view) => Some(view),
            Err(error) => return Ok(failed(error)),
        },
        _ => None,
    };
    Ok(answer(ForkReply {
        ok: capability.ok,
        session,
        reason: capability.reason,
        message: capability.message,
    }))
}

/// `start_session` with `machine`: the machine starts it (under its own project roots, checked
/// there), then the first prompt, if any, is a hub task for it, keyed on the start's key.
pub(super) async fn start(mcp: &CohostMcp, machine: &str, args: StartArgs) -> ToolResult {
    let create = CreateBody {
        runtime: args
            .runtime
            .map(|r| r.as_str().to_string())
            .unwrap_or_default(),
        cwd: args.cwd.unwrap_or_default(),
        profile: args.profile,
        model: args.model,
        approval_policy: args.approval_policy.map(|p| p.as_str().to_string()),
        sandbox: args.sandbox.map(|s| s.as_str().to_string()),
        prompt: None,
        idempotency_key: args.idempotency_key.clone(),
        budget: None,
        permission_mode: args.permission_mode.map(|m| m.as_str().to_string()),
        tmux_session: None,
        terminal: false,
        machine: None,
    };
    let created = mcp
        .service
        .remote_create(RemoteSurface::Mcp, machine, create)
        .await
        .and_then(|mut value| parse::<HostedSessionView>(machine, value["session"].take()));
    let session = match created {
        Ok(session) => session,
        Err(error) => return Ok(failed(error)),
    };
    let mut started = SessionStarted {
        session,
        task: None,
    };
    if let Some(prompt) = args.prompt.filter(|p| !p.trim().is_empty()) {
        let own = started
            .session
            .id
            .strip_prefix(&format!("{machine}/"))
            .unwrap_or(&started.session.id)
            .to_string();
        let body = SendBody {
            text: prompt,
            // Keyed on the start's key, so a retried start does not queue the prompt twice.
            idempotency_key: args.idempotency_key.map(|k| format!("start:{k}")),
            source: Some(TaskSource::Mcp.as_str().to_string()),
        };
        match mcp.service.queue_remote_task(machine, &own, body).await {
            Ok(sent) => started.task = Some(sent.task),
            Err(error) => return Ok(failed(error)),
        }
    }
    Ok(answer(started))
}

/// The owning machine's answer as the type the local tool answers.
fn parse<T: serde::de::DeserializeOwned>(
    machine: &str,
    value: serde_json::Value,
) -> Result<T, ServiceError> {
    serde_json::from_value(value).map_err(|error| {
        ServiceError::new(
            ErrorKind::Upstream,
            codes::INTERNAL_ERROR,
            format!("the machine `{machine}` answered what this hub cannot read: {error}"),
        )
    })
}
