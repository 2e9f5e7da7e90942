//! Input-request routes: list a session's requests, answer one (first answer wins), set the
//! session's collaboration mode or its model — each a thin call into the service.

use crate::protocol::{ModeBody, ModelBody};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::protocol::{InputAnswer, RequestAnswered, RequestList};
use crate::protocol::{RemoteOp, RemoteSurface};

pub async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RequestList>, ApiError> {
    // On a hub, another machine's session: its machine's list, as it holds it now.
    let requests = match state.service.remote_id(&id) {
        Some((machine, session)) => {
            state
                .service
                .remote_requests(RemoteSurface::Http, machine, session)
                .await?
        }
        None => state.service.requests(state.service.local_id(&id))?,
    };
    Ok(Json(RequestList { requests }))
}

pub async fn answer(
    State(state): State<AppState>,
    Path((id, request_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<InputAnswer>,
) -> Result<Response, ApiError> {
    // On a hub, `laptop/<id>` (`laptop%2F<id>`) names another machine's session.
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::Answer {
            request: request_id,
            answer: body,
        };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id);
    state.service.answer_request(id, &request_id, body).await?;
    Ok(Json(RequestAnswered {
        ok: true,
        request_id,
    })
    .into_response())
}

/// `PUT /api/sessions/{id}/mode` (on a hub, a qualified id's, set by its machine).
pub async fn set_mode(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ModeBody>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::Mode { mode: body };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id);
    Ok(Json(state.service.set_mode(id, &body.mode).await?).into_response())
}

pub async fn set_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ModelBody>,
) -> Result<Response, ApiError> {
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let op = RemoteOp::Model { model: body };
        return super::hub::remote(&state, machine, session, op).await;
    }
    let id = state.service.local_id(&id);
    let set = state
        .service
        .set_model(id, &body.model, body.thinking_level.as_deref())
        .await?;
    Ok(Json(set).into_response())
}
