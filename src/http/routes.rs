//! REST handlers for the tracker, the metadata routes and health.

use crate::protocol::FocusParams;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::protocol::codes;
use crate::protocol::{
    Accepted, AgentEventParams, Health, LogParams, SessionParams, SetProgressParams,
    SetStatusParams, StateView,
};
use crate::service::RefreshAnswer;

pub async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(state.service.health(state.local_addr))
}

pub async fn not_found() -> ApiError {
    ApiError::not_found(codes::NOT_FOUND, "no such route")
}

/// `/.well-known/…` (OAuth discovery: protected-resource or authorization-server metadata):
/// cohost has none, and says what it takes instead, so a client that looks for OAuth after a
/// 401 can show how to authenticate.
pub async fn well_known() -> ApiError {
    ApiError::not_found(
        codes::NO_OAUTH,
        "cohost does not use OAuth: send `Authorization: Bearer <token>`, the token `cohost token` prints",
    )
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        codes::METHOD_NOT_ALLOWED,
        "this route does not take that method",
    )
}

pub async fn agent_event(
    State(state): State<AppState>,
    shown: Option<axum::Extension<super::guard::TokenShown>>,
    ApiJson(params): ApiJson<AgentEventParams>,
) -> Result<Json<Accepted>, ApiError> {
    let tokenless = shown.is_none();
    Ok(Json(state.service.agent_event(params, tokenless).await?))
}

pub async fn set_status(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SetStatusParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(state.service.set_status(params).await?))
}

pub async fn set_progress(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SetProgressParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(state.service.set_progress(params).await?))
}

pub async fn log(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<LogParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(state.service.log(params, false).await?))
}

pub async fn notify(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<LogParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(state.service.log(params, true).await?))
}

pub async fn clear_log(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SessionParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(state.service.clear_log(params).await?))
}

pub async fn focus(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<FocusParams>,
) -> Result<Json<Accepted>, ApiError> {
    Ok(Json(
        state.service.focus(params.session, params.source).await?,
    ))
}

/// Called by the tmux hooks when sessions are created, closed or renamed.
pub async fn tmux_refresh(State(state): State<AppState>) -> Json<RefreshAnswer> {
    Json(state.service.tmux_refresh().await)
}

pub async fn state(State(state): State<AppState>) -> Json<StateView> {
    Json(state.service.world_state())
}
