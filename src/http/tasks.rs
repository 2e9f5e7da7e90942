//! Task and lease routes: queue a prompt, read a task, its result and a session's queue, edit,
//! supersede and cancel tasks, and take over or release a session's control lease.

use crate::protocol::{CancelBody, EditBody, LeaseBody, SendBody};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::protocol::RemoteSurface::Http;
use crate::protocol::TaskSource as Source;
use crate::protocol::codes;
use crate::protocol::{CancelResult, EditResult, LeaseReply, QueueView, ResultChunk, TaskReply};
use crate::service::MAX_RESULT_CHUNK;

fn source_of(source: &Option<String>) -> Result<Source, ApiError> {
    match source.as_deref() {
        None | Some("api") => Ok(Source::Api),
        Some("cli") => Ok(Source::Cli),
        Some(other) => Err(ApiError::field(
            codes::INVALID_FIELD,
            "source",
            format!("`source` must be api or cli, got `{other}`"),
        )),
    }
}

/// `POST /api/sessions/{id}/tasks`: queue a prompt.
pub async fn send(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<SendBody>,
) -> Result<Response, ApiError> {
    let source = source_of(&body.source)?;
    // On a hub, `laptop/<id>` names another machine's session: the task goes to that
    // machine's queue, or waits at the hub while the machine is down.
    let sent = match state.service.remote_id(&id) {
        Some((machine, session)) => {
            state
                .service
                .queue_remote_task(machine, session, body)
                .await?
        }
        None => {
            state
                .service
                .queue_task(
                    state.service.local_id(&id),
                    &body.text,
                    body.idempotency_key,
                    source,
                )
                .await?
        }
    };
    let status = if sent.replayed {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(sent)).into_response())
}

/// `GET /api/sessions/{id}/queue` (on a hub, a qualified id's: its machine's queue and the
/// tasks waiting at the hub for it).
pub async fn queue(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<QueueView>, ApiError> {
    Ok(Json(state.service.world_queue(Http, &id).await?))
}

/// `GET /api/sessions/{id}/lease` (on a hub, a qualified id's, asked of its machine).
pub async fn lease(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<LeaseReply>, ApiError> {
    Ok(Json(state.service.world_lease(Http, &id).await?))
}

/// `POST /api/sessions/{id}/lease`: a human takes over or releases the session (on a hub, a
/// qualified id's on its machine).
pub async fn set_lease(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<LeaseBody>,
) -> Result<Response, ApiError> {
    crate::service::lease_check(&body)
        .map_err(|(field, message)| ApiError::field(codes::INVALID_FIELD, field, message))?;
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = crate::protocol::RemoteOp::Lease { lease: body };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id).to_string();
    Ok(Json(state.service.set_lease(&id, body).await?).into_response())
}

/// `GET /api/tasks/{id}` (on a hub, a hub task's, or another machine's task it can place).
pub async fn status(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskReply>, ApiError> {
    Ok(Json(TaskReply {
        task: state.service.world_task(Http, &id).await?,
    }))
}

/// Strings, parsed here so a bad number gets our JSON error naming the field.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultQuery {
    #[serde(default)]
    offset: Option<String>,
    #[serde(default)]
    max_bytes: Option<String>,
}

fn parse_usize(name: &str, value: Option<&str>, default: usize) -> Result<usize, ApiError> {
    match value {
        None => Ok(default),
        Some(value) => value.parse().map_err(|_| {
            ApiError::field(
                codes::INVALID_FIELD,
                name,
                format!("`{name}` must be a non-negative integer, got `{value}`"),
            )
        }),
    }
}

/// `GET /api/tasks/{id}/result?offset=&maxBytes=`.
pub async fn result(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<ResultQuery>,
) -> Result<Json<ResultChunk>, ApiError> {
    let offset = parse_usize("offset", query.offset.as_deref(), 0)?;
    let max = parse_usize("maxBytes", query.max_bytes.as_deref(), MAX_RESULT_CHUNK)?;
    let chunk = state
        .service
        .world_task_result(Http, &id, offset, max)
        .await?;
    Ok(Json(chunk))
}

/// `POST /api/tasks/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<CancelResult>, ApiError> {
    let body: CancelBody = super::sessions::optional_json(&headers, &body)?;
    Ok(Json(
        state
            .service
            .world_cancel_task(Http, &id, body.lease_generation)
            .await?,
    ))
}

/// `POST /api/tasks/{id}/edit`: replace a waiting task's prompt in place.
pub async fn edit(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<EditBody>,
) -> Result<Json<EditResult>, ApiError> {
    Ok(Json(state.service.world_edit_task(Http, &id, body).await?))
}

/// `POST /api/tasks/{id}/supersede`: cancel a waiting task and queue a replacement in its place.
pub async fn supersede(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<EditBody>,
) -> Result<Json<EditResult>, ApiError> {
    Ok(Json(
        state.service.world_supersede_task(Http, &id, body).await?,
    ))
}
