//! Hosted-session routes: create, list, inject, interrupt, approvals, goal, fork, models,
//! slash commands, terminals, relaunch, disown (an adopted agent given back), rehome (an adopted codex or claude moved under cohost), the permission
//! hook's long-poll, and doctor — each a thin call into the service.

use crate::protocol::{
    CommandBody, CreateBody, DecisionBody, ForkBody, GoalBody, MessageBody, OpenTerminalBody,
};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::protocol::Capability;
use crate::protocol::boundary::{HookAnswer, HookLine, PermissionAsk};
use crate::protocol::codes;
use crate::protocol::{
    ApprovalDecided, ApprovalList, DoctorReport, Done, HostedSessionView, Interrupted, PromptSent,
    RuntimeList, Seen, SessionList, SessionReply, TerminalSpec,
};
use crate::protocol::{RemoteOp, RemoteSurface};
use crate::service::CreateRequest;

/// An optional JSON body: none (empty) is the default, anything else must be JSON.
pub(super) fn optional_json<T: Default + serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    if body.is_empty() {
        Ok(T::default())
    } else if super::extract::is_json(headers) {
        super::extract::parse(body)
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            codes::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON with `Content-Type: application/json`",
        ))
    }
}

pub async fn create(
    State(state): State<AppState>,
    ApiJson(mut body): ApiJson<CreateBody>,
) -> Result<Response, ApiError> {
    // At a hub, `machine` names the machine to start it on (this one by default).
    if let Some(machine) = body.machine.take()
        && machine != state.service.machine()
    {
        return super::hub::remote_create(&state, &machine, body).await;
    }
    let created = state.service.create(CreateRequest::from(body)).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

pub async fn list(State(state): State<AppState>) -> Json<SessionList> {
    Json(SessionList {
        sessions: state.service.world_sessions(),
    })
}

pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HostedSessionView>, ApiError> {
    Ok(Json(state.service.session(&id)?))
}

pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Done>, ApiError> {
    state.service.close(&id).await?;
    Ok(Json(Done::OK))
}

pub async fn message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MessageBody>,
) -> Result<Response, ApiError> {
    // On a hub, `laptop/<id>` (`laptop%2F<id>`) names another machine's session.
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::Prompt { message: body };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id).to_string();
    let sent: PromptSent = state
        .service
        .send_prompt(&id, &body.text, body.images, body.idempotency_key)
        .await?;
    Ok(Json(sent).into_response())
}

pub async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        return super::hub::remote(&state, machine, session, RemoteOp::Interrupt {}).await;
    }
    let interrupted = state.service.interrupt(state.service.local_id(&id)).await?;
    Ok(Json(Interrupted { interrupted }).into_response())
}

pub async fn seen(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Seen>, ApiError> {
    let seen = state.service.seen(&id).await?;
    Ok(Json(Seen { seen }))
}

pub async fn approvals(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ApprovalList>, ApiError> {
    // On a hub, another machine's session: its machine's list, as it holds it now.
    let approvals = match state.service.remote_id(&id) {
        Some((machine, session)) => {
            state
                .service
                .remote_approvals(RemoteSurface::Http, machine, session)
                .await?
        }
        None => state.service.approvals(state.service.local_id(&id))?,
    };
    Ok(Json(ApprovalList { approvals }))
}

pub async fn resolve_approval(
    State(state): State<AppState>,
    Path((id, approval_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::Approval {
            approval: approval_id,
            decision: body,
        };
        return super::hub::remote(&state, machine, session, op).await;
    }
    state
        .service
        .resolve_approval(
            state.service.local_id(&id),
            &approval_id,
            &body.decision,
            body.by.as_deref(),
        )
        .await?;
    Ok(Json(ApprovalDecided {
        ok: true,
        approval_id: approval_id.into(),
        decision: body.decision.into(),
    })
    .into_response())
}

pub async fn goal_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        return super::hub::remote(&state, machine, session, RemoteOp::GoalGet {}).await;
    }
    let id = state.service.local_id(&id);
    Ok(Json(state.service.goal_get(id).await?).into_response())
}

pub async fn goal_put(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<GoalBody>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::GoalSet { goal: body };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id);
    let goal = state
        .service
        .goal_set(id, body.objective, body.status, body.token_budget)
        .await?;
    Ok(Json(goal).into_response())
}

pub async fn goal_delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        return super::hub::remote(&state, machine, session, RemoteOp::GoalClear {}).await;
    }
    let id = state.service.local_id(&id);
    Ok(Json(state.service.goal_clear(id).await?).into_response())
}

pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    // The body is optional: `POST /fork` with none forks the whole thread.
    let body: ForkBody = optional_json(&headers, &body)?;
    if let Some((machine, session)) = state.service.remote_id(&id) {
        return super::hub::remote_fork(&state, machine, session, body).await;
    }
    let id = state.service.local_id(&id);
    Ok(match state.service.fork(id, body.after_turn_id).await? {
        Ok(view) => (
            StatusCode::CREATED,
            Json(Capability::ok(json!(SessionReply { session: view }))),
        )
            .into_response(),
        Err(capability) => Json(capability).into_response(),
    })
}

#[derive(Deserialize)]
pub struct ModelsQuery {
    runtime: Option<String>,
    /// At a hub: the machine whose models (default this one).
    machine: Option<String>,
}

pub async fn models(
    State(state): State<AppState>,
    Query(query): Query<ModelsQuery>,
) -> Result<Response, ApiError> {
    if let Some(machine) = query.machine.as_deref()
        && machine != state.service.machine()
    {
        let op = RemoteOp::Models {
            runtime: query.runtime,
        };
        return super::hub::remote(&state, machine, "", op).await;
    }
    Ok(Json(state.service.models(query.runtime.as_deref()).await?).into_response())
}

/// Chat-bot slash commands: `/goal [text|clear]`, `/fork`, `/models`, `/interrupt`.
pub async fn command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CommandBody>,
) -> Result<Json<Capability>, ApiError> {
    Ok(Json(state.service.command(&id, &body.text).await?))
}

/// `GET /api/runtimes`.
pub async fn runtimes(State(state): State<AppState>) -> Json<RuntimeList> {
    Json(state.service.runtimes())
}

/// `GET /api/profiles`: the config file's agent profiles with their effective values.
pub async fn profiles(State(state): State<AppState>) -> Json<crate::protocol::ProfileList> {
    Json(state.service.profiles())
}

/// `POST /api/profiles/reload`: the config file's profiles read and validated again; on an
/// error the old ones stay.
pub async fn reload_profiles(
    State(state): State<AppState>,
) -> Result<Json<crate::protocol::ProfileList>, ApiError> {
    Ok(Json(state.service.reload_profiles()?))
}

/// `GET /api/doctor`.
pub async fn doctor(State(state): State<AppState>) -> Json<DoctorReport> {
    Json(state.service.doctor().await)
}

/// `POST /api/sessions/{id}/relaunch`: start the session's TUI again on the same conversation.
/// `POST /api/sessions/{id}/disown`: an adopted agent is given back (the session ends; the
/// agent keeps running, watched only).
pub async fn disown(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionReply>, ApiError> {
    let session = state.service.disown(&id).await?;
    Ok(Json(SessionReply { session }))
}

/// `POST /api/sessions/{id}/rehome`: an adopted codex or claude moves under cohost's own host in
/// its pane (the session goes on, hosted).
pub async fn rehome(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionReply>, ApiError> {
    let session = state.service.rehome(&id).await?;
    Ok(Json(SessionReply { session }))
}

pub async fn relaunch(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Done>, ApiError> {
    state.service.relaunch(&id).await?;
    Ok(Json(Done::OK))
}

/// `POST /api/claude/permission`: the `cohost-hook` of a `PermissionRequest` asks for a decision
/// and waits for it (up to the permission timeout; then it answers `ask`).
pub async fn claude_permission(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PermissionAsk>,
) -> Result<Json<Value>, ApiError> {
    let answer = state
        .service
        .permission_request(&body.session_id, &body.request_id, body.payload)
        .await?;
    Ok(Json(answer))
}

/// `POST /api/claude/hook`: the machine-wide hook (`cohost hooks install`) reports one event of
/// a Claude cohost does not host; answered at once.
pub async fn claude_hook(
    State(state): State<AppState>,
    ApiJson(line): ApiJson<HookLine>,
) -> Result<Json<HookAnswer>, ApiError> {
    Ok(Json(state.service.claude_hook(line)?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalQuery {
    #[serde(default)]
    include_token: Option<String>,
}

/// `GET /api/sessions/{id}/terminal[?includeToken=true]`: how to attach the real codex TUI to
/// the session's thread. The token is redacted unless asked for.
pub async fn terminal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<TerminalQuery>,
) -> Result<Json<TerminalSpec>, ApiError> {
    let include_token = match query.include_token.as_deref() {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return Err(ApiError::field(
                codes::INVALID_FIELD,
                "includeToken",
                format!("`includeToken` must be true or false, got `{other}`"),
            ));
        }
    };
    Ok(Json(state.service.terminal_spec(&id, include_token).await?))
}

/// `POST /api/sessions/{id}/terminal`: open the runtime's TUI (codex, opencode) on an existing
/// session, in a tmux pane.
pub async fn open_terminal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let body: OpenTerminalBody = optional_json(&headers, &body)?;
    let view = state.service.open_terminal(&id, body.tmux_session).await?;
    Ok((StatusCode::CREATED, Json(SessionReply { session: view })).into_response())
}
