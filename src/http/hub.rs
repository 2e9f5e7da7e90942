//! A hub's routes to other machines (`serve --hub`): `GET /api/sessions/{machine}/{id}/events`
//! (and the same with a qualified id, `laptop%2F<id>`), served from the hub's world with that
//! machine's own seqs as the cursor; and the commands (a prompt, an interrupt, an approval's or
//! a request's answer, a task), sent to the owning machine, which executes them through one
//! path ([`remote`], a `RemoteOp` per route). Nothing here writes.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::extract::{ApiJson, ApiQuery};
use super::stream::{EventsQuery, parse_u64};
use super::{ApiError, AppState};
use crate::protocol::codes;
use crate::protocol::{DecisionBody, InputAnswer, MessageBody, RemoteOp, SendBody};

/// A command for another machine's session, run by the machine that owns it (NATS
/// request/reply): every session route that acts calls this with its `RemoteOp` when its id is
/// another machine's (`laptop/<id>`), and answers with that machine's answer.
pub(super) async fn remote(
    state: &AppState,
    machine: &str,
    session: &str,
    op: RemoteOp,
) -> Result<Response, ApiError> {
    Ok(Json(state.service.remote(machine, session, op).await?).into_response())
}

/// The routes with the machine as a segment (`/api/sessions/{machine}/{id}/…`) are the local
/// routes with the qualified id: this machine's own session, or a known machine's (else
/// `machine_not_found`, never a local session's 404).
fn qualified(state: &AppState, machine: &str, id: String) -> Result<String, ApiError> {
    if machine == state.service.machine() {
        return Ok(id);
    }
    state.service.known_machine(machine)?;
    Ok(format!("{machine}/{id}"))
}

/// `POST /api/sessions/{machine}/{id}/messages`: a prompt, run where the session is (with its
/// idempotency key).
pub async fn machine_message(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<MessageBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::message(State(state), Path(id), body).await
}

/// `POST /api/sessions/{machine}/{id}/interrupt`.
pub async fn machine_interrupt(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::interrupt(State(state), Path(id)).await
}

/// `POST /api/sessions/{machine}/{id}/approvals/{approval}`: the first answer from anywhere
/// wins, a later one is the owning machine's 409.
pub async fn machine_approval(
    State(state): State<AppState>,
    Path((machine, id, approval)): Path<(String, String, String)>,
    body: ApiJson<DecisionBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::resolve_approval(State(state), Path((id, approval)), body).await
}

/// `POST /api/sessions/{machine}/{id}/requests/{request}`: a question, plan, form or
/// permissions request answered on the machine that owns the session.
pub async fn machine_answer(
    State(state): State<AppState>,
    Path((machine, id, request)): Path<(String, String, String)>,
    body: ApiJson<InputAnswer>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::requests::answer(State(state), Path((id, request)), body).await
}

/// `POST /api/sessions/{machine}/{id}/tasks`: a task for the session, delivered into its
/// machine's queue now, or kept at the hub until the machine is back.
pub async fn machine_task(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<SendBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::tasks::send(State(state), Path(id), body).await
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
