//! The watchers' routes: `GET /api/state/{session}/agents/{key}/explain`, `GET /api/watch`, and
//! `POST /api/state/{session}/agents/{key}/adopt` (a session drives the watched agent from now on).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::{ApiError, AppState};
use crate::protocol::{ExplainView, SessionReply, WatchStats};

pub async fn explain(
    State(state): State<AppState>,
    Path((session, key)): Path<(String, String)>,
) -> Result<Json<ExplainView>, ApiError> {
    Ok(Json(state.service.explain(&session, &key)?))
}

pub async fn stats(State(state): State<AppState>) -> Json<WatchStats> {
    Json(state.service.watch_stats())
}

/// `201` with the session that drives the instance now; refusals are `409` with their code
/// (`pane_gone`, `agent_exited`, `pane_changed`, `already_driven`, `not_adoptable`).
pub async fn adopt(
    State(state): State<AppState>,
    Path((session, key)): Path<(String, String)>,
) -> Result<(StatusCode, Json<SessionReply>), ApiError> {
    let session = state.service.adopt(&session, &key).await?;
    Ok((StatusCode::CREATED, Json(SessionReply { session })))
}
