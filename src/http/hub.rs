//! A hub's routes to other machines (`serve --hub`): `GET /api/sessions/{machine}/{id}/events`
//! (and the same with a qualified id, `laptop%2F<id>`), served from the hub's world with that
//! machine's own seqs as the cursor; and the commands (a prompt, an interrupt, an approval's or
//! a request's answer), sent to the owning machine, which executes them. Nothing here writes.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::extract::{ApiJson, ApiQuery};
use super::stream::{EventsQuery, parse_u64};
use super::{ApiError, AppState};
use crate::protocol::codes;
use crate::protocol::{DecisionBody, InputAnswer, MessageBody};

/// `POST /api/sessions/{machine}/{id}/messages`: this machine's own session when `machine` is
/// this machine, else a prompt sent to the machine that owns the session (NATS request/reply,
/// with its idempotency key), answered with that machine's answer.
pub async fn machine_message(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    ApiJson(body): ApiJson<MessageBody>,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return Ok(
            super::sessions::message(State(state), Path(id), ApiJson(body))
                .await?
                .into_response(),
        );
    }
    Ok(Json(state.service.remote_prompt(&machine, &id, body).await?).into_response())
}

/// `POST /api/sessions/{machine}/{id}/interrupt`: this machine's own session, or the owning
/// machine interrupts its session (NATS request/reply), answered with that machine's answer.
pub async fn machine_interrupt(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return Ok(super::sessions::interrupt(State(state), Path(id))
            .await?
            .into_response());
    }
    Ok(Json(state.service.remote_interrupt(&machine, &id).await?).into_response())
}

/// `POST /api/sessions/{machine}/{id}/approvals/{approval}`: answered on the machine that owns
/// the session; the first answer from anywhere wins, a later one is that machine's 409.
pub async fn machine_approval(
    State(state): State<AppState>,
    Path((machine, id, approval)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return Ok(super::sessions::resolve_approval(
            State(state),
            Path((id, approval)),
            ApiJson(body),
        )
        .await?
        .into_response());
    }
    Ok(Json(
        state
            .service
            .remote_approval(&machine, &id, &approval, body)
            .await?,
    )
    .into_response())
}

/// `POST /api/sessions/{machine}/{id}/requests/{request}`: a question, plan, form or
/// permissions request answered on the machine that owns the session.
pub async fn machine_answer(
    State(state): State<AppState>,
    Path((machine, id, request)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<InputAnswer>,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return Ok(
            super::requests::answer(State(state), Path((id, request)), ApiJson(body))
                .await?
                .into_response(),
        );
    }
    Ok(Json(
        state
            .service
            .remote_answer(&machine, &id, &request, body)
            .await?,
    )
    .into_response())
}

/// `GET /api/sessions/{machine}/{id}/events`: this machine's own session when `machine` is this
/// machine, else another machine's, from the hub.
pub async fn machine_session_events(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    query: ApiQuery<EventsQuery>,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return super::stream::session_events(State(state), Path(id), query).await;
    }
    remote_events(state, &machine, &id, query.0).await
}

/// Another machine's session's events after `after` (its seq), at most `limit`, waiting up to
/// `wait` seconds for one.
pub(super) async fn remote_events(
    state: AppState,
    machine: &str,
    session: &str,
    query: EventsQuery,
) -> Result<Response, ApiError> {
    for (name, given) in [("last", &query.last), ("before", &query.before)] {
        if given.is_some() {
            return Err(ApiError::field(
                codes::UNSUPPORTED,
                name,
                format!(
                    "`{name}` (reading backwards) is not built yet for another machine's session: read forward with `after`"
                ),
            ));
        }
    }
    let after = query
        .after
        .as_deref()
        .map(|v| parse_u64("after", v))
        .transpose()?
        .unwrap_or(0);
    let max = crate::service::MAX_LIMIT as u64;
    let limit = match query.limit.as_deref() {
        Some(v) => match parse_u64("limit", v)? {
            n if (1..=max).contains(&n) => n as usize,
            _ => {
                return Err(ApiError::field(
                    codes::INVALID_FIELD,
                    "limit",
                    format!("`limit` must be between 1 and {max}"),
                ));
            }
        },
        None => crate::service::DEFAULT_LIMIT,
    };
    let wait = match query.wait.as_deref() {
        Some(value) => match value.parse::<f64>() {
            Ok(secs) if (0.0..=crate::service::MAX_WAIT_SECS).contains(&secs) => {
                Some(Duration::from_secs_f64(secs))
            }
            _ => {
                return Err(ApiError::field(
                    codes::INVALID_FIELD,
                    "wait",
                    format!(
                        "`wait` must be a number of seconds from 0 to {}, got `{value}`",
                        crate::service::MAX_WAIT_SECS
                    ),
                ));
            }
        },
        None => None,
    };
    let page = state
        .service
        .remote_events(machine, session, after, limit, wait)
        .await?;
    let mut body =
        String::with_capacity(128 + page.events.iter().map(|e| e.len() + 1).sum::<usize>());
    body.push_str("{\"machine\":");
    body.push_str(&serde_json::to_string(&page.machine).unwrap_or_default());
    body.push_str(",\"session\":");
    body.push_str(&serde_json::to_string(&page.session).unwrap_or_default());
    body.push_str(",\"events\":[");
    for (i, event) in page.events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(event);
    }
    body.push_str(&format!(
        "],\"next\":{},\"head\":{},\"link\":{}}}",
        page.next,
        page.head,
        serde_json::to_string(&page.link).unwrap_or_default()
    ));
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}
