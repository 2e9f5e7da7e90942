//! The watchers' routes: `GET /api/state/{session}/agents/{key}/explain` and `GET /api/watch`.

use axum::Json;
use axum::extract::{Path, State};

use super::{ApiError, AppState};
use crate::protocol::{ExplainView, WatchStats};

pub async fn explain(
    State(state): State<AppState>,
    Path((session, key)): Path<(String, String)>,
) -> Result<Json<ExplainView>, ApiError> {
    Ok(Json(state.service.explain(&session, &key)?))
}

pub async fn stats(State(state): State<AppState>) -> Json<WatchStats> {
    Json(state.service.watch_stats())
}
