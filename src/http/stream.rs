//! Event delivery: `GET /api/events` (page, optional long-poll) and `GET /api/events/stream` (SSE).
//!
//! Both resume from a cursor with no gap and no duplicate: they subscribe to the live broadcast
//! *before* reading the store, read the store until they reach its head, and then take live events
//! only while they arrive in order. A lagged subscriber, or any gap, goes back to the store.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::broadcast;

use super::extract::ApiQuery;
use super::{ApiError, AppState};
use crate::protocol::SeqRange;
use crate::protocol::codes;
use crate::service::StoredEvent;

/// Events read from the store per catch-up step of a stream.
const STREAM_PAGE: usize = 512;

#[derive(Deserialize)]
pub struct EventsQuery {
    pub(super) after: Option<String>,
    pub(super) limit: Option<String>,
    pub(super) wait: Option<String>,
    /// A session's last N events (session route only).
    pub(super) last: Option<String>,
    /// The events before this seq, `limit` of them (session route only).
    pub(super) before: Option<String>,
}

pub(super) fn parse_u64(name: &str, value: &str) -> Result<u64, ApiError> {
    value.parse().map_err(|_| {
        ApiError::field(
            codes::INVALID_FIELD,
            name,
            format!("`{name}` must be a non-negative integer, got `{value}`"),
        )
    })
}

pub async fn events(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Response, ApiError> {
    for (name, given) in [("last", &query.last), ("before", &query.before)] {
        if given.is_some() {
            return Err(ApiError::field(
                codes::INVALID_FIELD,
                name,
                format!(
                    "`{name}` reads one session's events backwards: use `GET /api/sessions/{{id}}/events?{name}=…`"
                ),
            ));
        }
    }
    events_for(state, query, None).await
}

/// `GET /api/sessions/{id}/events`: the same cursor (a global seq), only that session's events.
pub async fn session_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Response, ApiError> {
    // On a hub, `laptop/<id>` names another machine's session; `<this machine>/<id>` is local.
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let (machine, session) = (machine.to_string(), session.to_string());
        return super::hub::remote_events(state, &machine, &session, query).await;
    }
    let id = state.service.local_id(&id).to_string();
    state.service.known_session(&id)?;
    if query.last.is_some() || query.before.is_some() {
        return window_for(state, query, id).await;
    }
    events_for(state, query, Some(id)).await
}

/// `?last=N` or `?before=SEQ&limit=N`: a window of the session's events read backwards, with
/// `hasOlder` and `olderBefore` (the next window's `before`).
async fn window_for(state: AppState, query: EventsQuery, id: String) -> Result<Response, ApiError> {
    let (before, limit) = window_bounds(&query, state.service.head())?;
    let window = state.service.read_window(&id, before, limit).await?;
    let older = match window.older_before {
        Some(seq) => format!(",\"hasOlder\":true,\"olderBefore\":{seq}"),
        None => ",\"hasOlder\":false".to_string(),
    };
    Ok(page_response(
        &window.events,
        window.next,
        window.head,
        &window.gaps,
        &older,
    ))
}

/// A backwards window's `before` and size from `?last=N` or `?before=SEQ&limit=N` (`head`: the
/// newest seq of the log read, which `before` may pass by one).
pub(super) fn window_bounds(
    query: &EventsQuery,
    head: u64,
) -> Result<(Option<u64>, usize), ApiError> {
    let forward = |name: &str| {
        ApiError::field(
            codes::INVALID_FIELD,
            name,
            format!(
                "`{name}` reads forward; `last` and `before` read backwards: give one or the other"
            ),
        )
    };
    if query.after.is_some() {
        return Err(forward("after"));
    }
    if query.wait.is_some() {
        return Err(forward("wait"));
    }
    let max = crate::service::MAX_LIMIT as u64;
    let bounded = |name: &str, value: &str| -> Result<usize, ApiError> {
        match parse_u64(name, value)? {
            n if (1..=max).contains(&n) => Ok(n as usize),
            _ => Err(ApiError::field(
                codes::INVALID_FIELD,
                name,
                format!("`{name}` must be between 1 and {max}"),
            )),
        }
    };
    let (before, limit) = match (query.last.as_deref(), query.before.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                codes::INVALID_FIELD,
                "before",
                "`last` and `before` do not go together: `last=N` is the session's last N events, `before=SEQ&limit=N` the N before a seq",
            ));
        }
        (Some(last), None) => {
            if query.limit.is_some() {
                return Err(ApiError::field(
                    codes::INVALID_FIELD,
                    "limit",
                    "`last` is the window's size: `limit` goes with `before`",
                ));
            }
            (None, bounded("last", last)?)
        }
        (None, Some(before)) => {
            let before = parse_u64("before", before)?;
            if before == 0 || before > head + 1 {
                return Err(ApiError::field(
                    codes::INVALID_FIELD,
                    "before",
                    format!(
                        "`before` must be between 1 and {} (the newest event + 1)",
                        head + 1
                    ),
                ));
            }
            let limit = match query.limit.as_deref() {
                Some(limit) => bounded("limit", limit)?,
                None => crate::service::DEFAULT_LIMIT,
            };
            (Some(before), limit)
        }
        (None, None) => unreachable!("a window has `last` or `before`"),
    };
    Ok((before, limit))
}

async fn events_for(
    state: AppState,
    query: EventsQuery,
    session: Option<String>,
) -> Result<Response, ApiError> {
    let after = query
        .after
        .as_deref()
        .map(|v| parse_u64("after", v))
        .transpose()?
        .unwrap_or(0);
    let limit = query
        .limit
        .as_deref()
        .map(|v| parse_u64("limit", v))
        .transpose()?;
    let wait = match query.wait.as_deref() {
        Some(value) => Some(value.parse::<f64>().map_err(|_| {
            ApiError::field(
                codes::INVALID_FIELD,
                "wait",
                format!("`wait` must be a number of seconds, got `{value}`"),
            )
        })?),
        None => None,
    };
    let read = state.service.read_request(after, limit, wait, session)?;
    let page = state.service.events(read).await?;
    Ok(page_response(
        &page.events,
        page.next,
        page.head,
        &page.gaps,
        "",
    ))
}

/// Builds `{"events":[…],"next":N,"head":H}` (plus `"gaps":[…]` when the read skipped missing
/// seqs, and `more`: further fields, each with its leading comma) from the stored lines without
/// re-serializing them.
fn page_response(
    events: &[Arc<StoredEvent>],
    next: u64,
    head: u64,
    gaps: &[SeqRange],
    more: &str,
) -> Response {
    let mut body =
        String::with_capacity(64 + events.iter().map(|e| e.json.len() + 1).sum::<usize>());
    body.push_str("{\"events\":[");
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&event.json);
    }
    body.push_str(&format!("],\"next\":{next},\"head\":{head}"));
    if !gaps.is_empty() {
        body.push_str(",\"gaps\":");
        body.push_str(&serde_json::to_string(gaps).unwrap_or_else(|_| "[]".into()));
    }
    body.push_str(more);
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

#[derive(Deserialize)]
pub struct StreamQuery {
    pub(super) after: Option<String>,
}

pub async fn events_stream(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    stream_for(state, query, headers, None).await
}

/// `GET /api/sessions/{id}/events/stream`: SSE of one session, resumable like the global stream
/// (`id:` is the global seq).
pub async fn session_events_stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // On a hub, `laptop/<id>` names another machine's session (its seqs are the cursor).
    if let Some((machine, session)) = state.service.remote_id(&id) {
        let (machine, session) = (machine.to_string(), session.to_string());
        return super::hub::remote_stream(state, &machine, &session, query, headers).await;
    }
    let id = state.service.local_id(&id).to_string();
    state.service.known_session(&id)?;
    stream_for(state, query, headers, Some(id)).await
}

async fn stream_for(
    state: AppState,
    query: StreamQuery,
    headers: HeaderMap,
    session: Option<String>,
) -> Result<Response, ApiError> {
    // A reconnecting EventSource sends Last-Event-ID; it wins over the URL's original `after`.
    let last_event_id = headers
        .get("last-event-id")
        .map(|value| value.to_str().unwrap_or("x").trim().to_string());
    let after = match (last_event_id, query.after) {
        (Some(id), _) => parse_u64("Last-Event-ID", &id)?,
        (None, Some(after)) => parse_u64("after", &after)?,
        // Without a cursor the stream starts at the present.
        (None, None) => state.service.head(),
    };
    state.service.check_cursor(after)?;
    let live = state.service.subscribe();
    // Refuse an expired cursor up front, while a status code can still say so.
    state.service.read_events(after, 1, None).await?;
    let stream = event_stream(state, live, after, session);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

struct Cursor {
    state: AppState,
    live: broadcast::Receiver<Arc<StoredEvent>>,
    last: u64,
    pending: VecDeque<Arc<StoredEvent>>,
    done: bool,
    /// Only this session's events are sent; the cursor still advances over the others.
    session: Option<String>,
    /// Whether the snapshot of the messages streaming now was queued: once, the first time the
    /// stream reaches the present.
    caught_up: bool,
    /// Live-only events to send before anything else (that snapshot).
    first: VecDeque<Arc<StoredEvent>>,
}

impl Cursor {
    /// Queues the snapshot of the messages streaming now (once: the stream is then caught up);
    /// whether there was any.
    fn queue_snapshot(&mut self) -> bool {
        self.caught_up = true;
        self.first = self
            .state
            .service
            .streaming_snapshot(self.session.as_deref())
            .into();
        !self.first.is_empty()
    }

    fn wants(&self, event: &StoredEvent) -> bool {
        self.session.is_none() || event.session == self.session
    }

    /// Takes a live event if it is the next one for this cursor: a live-only event right after
    /// the stored event it follows, or the next stored event. Anything older was sent already;
    /// anything newer leaves a gap the store fills.
    fn accept(&mut self, event: &StoredEvent) -> Option<SseEvent> {
        if event.ephemeral {
            return (event.seq == self.last && self.wants(event))
                .then(|| ephemeral_sse_event(event));
        }
        if event.seq == self.last + 1 {
            self.last = event.seq;
            return self.wants(event).then(|| sse_event(event));
        }
        None
    }
}

/// Live-only events carry no `id:`, so a reconnect resumes from the last stored event.
fn ephemeral_sse_event(event: &StoredEvent) -> SseEvent {
    SseEvent::default().data(&*event.json)
}

/// `event: gap`: seqs with no stored event, skipped. Named, so `onmessage` handlers that
/// expect events only never see it; no `id:`, so a reconnect resumes from the last event.
fn gap_sse_event(gap: SeqRange) -> SseEvent {
    SseEvent::default()
        .event("gap")
        .data(serde_json::to_string(&gap).unwrap_or_default())
}

fn sse_event(event: &StoredEvent) -> SseEvent {
    SseEvent::default()
        .id(event.seq.to_string())
        .data(&*event.json)
}

fn event_stream(
    state: AppState,
    live: broadcast::Receiver<Arc<StoredEvent>>,
    after: u64,
    session: Option<String>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let cursor = Cursor {
        state,
        live,
        last: after,
        pending: VecDeque::new(),
        done: false,
        session,
        caught_up: false,
        first: VecDeque::new(),
    };
    futures_util::stream::unfold(cursor, |mut cursor| async move {
        if cursor.done {
            return None;
        }
        loop {
            if let Some(event) = cursor.first.pop_front() {
                return Some((Ok(ephemeral_sse_event(&event)), cursor));
            }
            if let Some(event) = cursor.pending.pop_front() {
                // Seqs missing from a damaged log are skipped, and said so once, before the
                // event that follows them.
                if event.seq > cursor.last + 1 {
                    let gap = SeqRange {
                        from: cursor.last + 1,
                        to: event.seq - 1,
                    };
                    cursor.last = event.seq - 1;
                    cursor.pending.push_front(event);
                    return Some((Ok(gap_sse_event(gap)), cursor));
                }
                cursor.last = event.seq;
                if !cursor.wants(&event) {
                    continue;
                }
                return Some((Ok(sse_event(&event)), cursor));
            }
            // Live events already queued come first: a live-only event (a delta) sits between
            // the stored events it follows and precedes, and reading the store first would
            // skip past it. The head is read before the channel is drained: every live-only
            // event published before a stored event up to that head is then in the channel.
            let head = cursor.state.service.head();
            match cursor.live.try_recv() {
                Ok(event) => {
                    if let Some(message) = cursor.accept(&event) {
                        if event.ephemeral && !cursor.caught_up {
                            // A live-only event that follows the cursor's position before the
                            // stream has sent the snapshot: the text streamed before it (before
                            // this stream subscribed, say) goes first, or the reader would get
                            // a delta past a gap. The snapshot already holds this delta (the
                            // core records a delta before it broadcasts it); sent after it, the
                            // delta is a duplicate the reader skips by its offset.
                            if cursor.queue_snapshot() {
                                cursor.first.push_back(event);
                                continue;
                            }
                        }
                        return Some((Ok(message), cursor));
                    }
                    continue;
                }
                Err(broadcast::error::TryRecvError::Empty)
                | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(broadcast::error::TryRecvError::Closed) => return None,
            }
            if head > cursor.last {
                match cursor
                    .state
                    .service
                    .read_events(cursor.last, STREAM_PAGE, None)
                    .await
                {
                    Ok(page) if !page.events.is_empty() => {
                        // Only up to the head read above; later ones come through the channel
                        // (or the next round) with their live-only events in order.
                        cursor
                            .pending
                            .extend(page.events.into_iter().filter(|e| e.seq <= head));
                        continue;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        // Retention overtook a slow reader: say so, then end the stream.
                        cursor.done = true;
                        let message = error.message.to_string();
                        let body = serde_json::json!({"error": {"code": codes::CURSOR_EXPIRED, "message": message}});
                        return Some((
                            Ok(SseEvent::default().event("error").data(body.to_string())),
                            cursor,
                        ));
                    }
                }
            }
            if !cursor.caught_up {
                // At the present for the first time: a message streaming now starts with its
                // text so far (deltas after it carry offsets, so nothing doubles up).
                if cursor.queue_snapshot() {
                    continue;
                }
            }
            let received = tokio::select! {
                _ = cursor.state.shutdown.cancelled() => return None,
                received = cursor.live.recv() => received,
            };
            match received {
                Ok(event) => {
                    if let Some(message) = cursor.accept(&event) {
                        return Some((Ok(message), cursor));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}
