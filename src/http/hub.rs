//! A hub's routes to other machines (`serve --hub`): `GET /api/sessions/{machine}/{id}/events`
//! (forward, or a window backwards) and `…/events/stream` (SSE), and the same with a qualified
//! id (`laptop%2F<id>`), served from the hub's world with that machine's own seqs as the
//! cursor; and the commands (a prompt, an interrupt, an approval's or a request's answer, a
//! task, the goal, a fork, the model, the lease, a new session), sent to the owning machine,
//! which executes them through one path ([`remote`], a `RemoteOp` per route). Nothing here
//! writes.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use super::extract::{ApiJson, ApiQuery};
use super::stream::{EventsQuery, StreamQuery, parse_u64};
use super::{ApiError, AppState};
use crate::protocol::codes;
use crate::protocol::{
    CreateBody, DecisionBody, ForkBody, GoalBody, InputAnswer, LeaseBody, MessageBody, ModelBody,
    RemoteOp, RemoteSurface, SendBody,
};
use crate::service::{MAX_REMOTE_LIMIT, RemoteEvent, RemotePage};

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

/// `POST /api/sessions/{machine}/{id}/fork` or a qualified id's fork: the owning machine forks
/// it (`201` with the new session, its id qualified, as locally; a capability's refusal `200`).
pub(super) async fn remote_fork(
    state: &AppState,
    machine: &str,
    session: &str,
    fork: ForkBody,
) -> Result<Response, ApiError> {
    let answer = state
        .service
        .remote_fork(RemoteSurface::Http, machine, session, fork)
        .await?;
    let forked = answer.get("ok").and_then(serde_json::Value::as_bool) == Some(true);
    let status = if forked {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(answer)).into_response())
}

/// `POST /api/sessions` with `machine`: the machine starts the session (`201`, its id
/// qualified). The idempotency key travels, so a retry finds the first session.
pub(super) async fn remote_create(
    state: &AppState,
    machine: &str,
    create: CreateBody,
) -> Result<Response, ApiError> {
    let answer = state
        .service
        .remote_create(RemoteSurface::Http, machine, create)
        .await?;
    Ok((StatusCode::CREATED, Json(answer)).into_response())
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

/// `GET /api/sessions/{machine}/{id}/goal`.
pub async fn machine_goal_get(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::goal_get(State(state), Path(id)).await
}

/// `PUT /api/sessions/{machine}/{id}/goal`.
pub async fn machine_goal_put(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<GoalBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::goal_put(State(state), Path(id), body).await
}

/// `DELETE /api/sessions/{machine}/{id}/goal`.
pub async fn machine_goal_delete(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::goal_delete(State(state), Path(id)).await
}

/// `POST /api/sessions/{machine}/{id}/fork` (the body is optional).
pub async fn machine_fork(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::sessions::fork(State(state), Path(id), headers, body).await
}

/// `PUT /api/sessions/{machine}/{id}/model`.
pub async fn machine_model(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<ModelBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::requests::set_model(State(state), Path(id), body).await
}

/// `GET /api/sessions/{machine}/{id}/queue`: the machine's queue and the tasks waiting at the
/// hub for the session.
pub async fn machine_queue(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    Ok(super::tasks::queue(State(state), Path(id))
        .await?
        .into_response())
}

/// `GET /api/sessions/{machine}/{id}/lease`: the lease as the machine holds it now.
pub async fn machine_lease_get(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    Ok(super::tasks::lease(State(state), Path(id))
        .await?
        .into_response())
}

/// `PUT /api/sessions/{machine}/{id}/mode`: the mode of its next turns, set by its machine.
pub async fn machine_mode(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<crate::protocol::ModeBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::requests::set_mode(State(state), Path(id), body).await
}

/// `POST /api/sessions/{machine}/{id}/lease`: take over or release, decided on the machine.
pub async fn machine_lease(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    body: ApiJson<LeaseBody>,
) -> Result<Response, ApiError> {
    let id = qualified(&state, &machine, id)?;
    super::tasks::set_lease(State(state), Path(id), body).await
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
    if query.last.is_some() || query.before.is_some() {
        let (before, limit) =
            super::stream::window_bounds(&query, state.service.remote_head(machine))?;
        let page = state
            .service
            .remote_window(machine, session, before, limit)
            .await?;
        return Ok(page_body(&page, true));
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
    Ok(page_body(&page, false))
}

/// `{"machine","session","events":[…],"next","head","link"}` (and a backwards window's
/// `hasOlder`, `olderBefore`), the events as their machine published them.
fn page_body(page: &RemotePage, window: bool) -> Response {
    let mut body =
        String::with_capacity(160 + page.events.iter().map(|e| e.json.len() + 1).sum::<usize>());
    body.push_str("{\"machine\":");
    body.push_str(&serde_json::to_string(&page.machine).unwrap_or_default());
    body.push_str(",\"session\":");
    body.push_str(&serde_json::to_string(&page.session).unwrap_or_default());
    body.push_str(",\"events\":[");
    for (i, event) in page.events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&event.json);
    }
    body.push_str(&format!(
        "],\"next\":{},\"head\":{},\"link\":{}",
        page.next,
        page.head,
        serde_json::to_string(&page.link).unwrap_or_default()
    ));
    match page.older_before {
        Some(seq) => body.push_str(&format!(",\"hasOlder\":true,\"olderBefore\":{seq}")),
        None if window => body.push_str(",\"hasOlder\":false"),
        None => {}
    }
    body.push('}');
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// `GET /api/sessions/{machine}/{id}/events/stream`: this machine's own session's SSE, or
/// another machine's, from the hub.
pub async fn machine_session_events_stream(
    State(state): State<AppState>,
    Path((machine, id)): Path<(String, String)>,
    query: ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if machine == state.service.machine() {
        return super::stream::session_events_stream(State(state), Path(id), query, headers).await;
    }
    remote_stream(state, &machine, &id, query.0, headers).await
}

/// How long one wait of a remote stream lasts before it looks again (at a stop of the daemon, or
/// a closed connection).
const REMOTE_STREAM_WAIT: Duration = Duration::from_secs(15);

/// Another machine's session as SSE, with the cursor rules of the local streams: `id:` is that
/// machine's seq; `after` (or a reconnect's `Last-Event-ID`, which wins) resumes after it with no
/// gap and no duplicate; without either the stream starts at the present (the newest event the
/// hub holds of the machine). Its events come as the hub receives them; live-only events (deltas)
/// are not published, so none come.
pub(super) async fn remote_stream(
    state: AppState,
    machine: &str,
    session: &str,
    query: StreamQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let last_event_id = headers
        .get("last-event-id")
        .map(|value| value.to_str().unwrap_or("x").trim().to_string());
    let after = match (last_event_id, query.after) {
        (Some(id), _) => parse_u64("Last-Event-ID", &id)?,
        (None, Some(after)) => parse_u64("after", &after)?,
        (None, None) => state.service.remote_head(machine),
    };
    // An unknown machine or session answers with its status now, not as an empty stream.
    state
        .service
        .remote_events(machine, session, after, 1, None)
        .await?;
    struct Cursor {
        state: AppState,
        machine: String,
        session: String,
        after: u64,
        pending: VecDeque<RemoteEvent>,
    }
    let cursor = Cursor {
        state,
        machine: machine.to_string(),
        session: session.to_string(),
        after,
        pending: VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(cursor, |mut cursor| async move {
        loop {
            if let Some(event) = cursor.pending.pop_front() {
                cursor.after = event.seq;
                let sse = SseEvent::default()
                    .id(event.seq.to_string())
                    .data(&*event.json);
                return Some((Ok::<_, Infallible>(sse), cursor));
            }
            if cursor.state.shutdown.is_cancelled() {
                return None;
            }
            let page = cursor
                .state
                .service
                .remote_events(
                    &cursor.machine,
                    &cursor.session,
                    cursor.after,
                    MAX_REMOTE_LIMIT,
                    Some(REMOTE_STREAM_WAIT),
                )
                .await
                .ok()?;
            cursor.pending.extend(page.events);
        }
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
