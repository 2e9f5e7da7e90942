//! The HTTP surface: REST routes, long-poll and SSE event streams, and the request guard.
//!
//! **Boundary.** A thin layer over the [`Service`]: handlers parse and check what is HTTP's own
//! (paths, queries, JSON bodies, status codes), call one service method, and answer; a
//! [`ServiceError`](crate::service::ServiceError) becomes an [`ApiError`] in one place
//! (`error.rs`). The guard ([`guard`]) runs before any handler: loopback `Host`, same-origin
//! `Origin`, bearer token (with the opensessions-compatible exception), in that order. Other
//! services (the MCP endpoint) are mounted by the caller of [`router`], behind the same guard.

mod error;
mod extract;
mod guard;
mod hub;
mod requests;
mod routes;
pub mod server;
mod sessions;
mod stream;
mod tasks;
mod watch;
mod web;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use tokio_util::sync::CancellationToken;

use crate::service::Service;
pub use error::ApiError;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// `POST /api/sessions/{id}/messages` bodies may carry images: up to
/// `request_bounds::IMAGES` of `request_bounds::IMAGE_BASE64` characters, plus the prompt.
pub const MAX_PROMPT_BODY_BYTES: usize = crate::protocol::request_bounds::IMAGES
    * crate::protocol::request_bounds::IMAGE_BASE64
    + 2 * MAX_BODY_BYTES;

/// What every handler and the guard read: one `Arc`, so the copies a request makes (each
/// extractor and middleware takes its own) cost one reference count, not one per part of the
/// service (a measured tenth of the ingest path's CPU when they were copied part by part).
#[derive(Clone)]
pub struct AppState(std::sync::Arc<AppStateParts>);

impl AppState {
    pub fn new(parts: AppStateParts) -> AppState {
        AppState(std::sync::Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateParts;

    fn deref(&self) -> &AppStateParts {
        &self.0
    }
}

/// The parts of an [`AppState`].
pub struct AppStateParts {
    pub service: Service,
    pub token: Arc<str>,
    /// The address actually bound, used to recognise our own `Origin`.
    pub local_addr: SocketAddr,
    /// When set, any `Host` is accepted (the bearer token is then the only guard).
    pub allow_remote: bool,
    /// Cancelled on shutdown so that open streams end and graceful shutdown can finish.
    pub shutdown: CancellationToken,
    /// How long a request body may take to arrive (the guard reads it).
    pub body_timeout: std::time::Duration,
}

/// Parses `bytes` as the body of one of the JSON routes (chosen by `route`, modulo their
/// number) the way the route does, with the body's own checks where it has them. For the fuzz
/// targets (`fuzz/`): every input must give `Ok` or an [`ApiError`], never a panic.
#[doc(hidden)]
pub fn parse_request_body(route: u8, bytes: &[u8]) -> Result<(), ApiError> {
    use crate::protocol::{
        AgentEventParams, LogParams, SessionParams, SetProgressParams, SetStatusParams,
    };
    use extract::parse;
    match route % 16 {
        0 => parse::<AgentEventParams>(bytes)?.validate()?,
        1 => parse::<SetStatusParams>(bytes)?.validate()?,
        2 => parse::<SetProgressParams>(bytes)?.validate()?,
        3 => parse::<LogParams>(bytes)?.validate()?,
        4 => parse::<SessionParams>(bytes)?.validate()?,
        5 => drop(parse::<crate::protocol::FocusParams>(bytes)?),
        6 => drop(parse::<crate::protocol::CreateBody>(bytes)?),
        7 => drop(parse::<crate::protocol::MessageBody>(bytes)?),
        8 => drop(parse::<crate::protocol::DecisionBody>(bytes)?),
        9 => drop(parse::<crate::protocol::GoalBody>(bytes)?),
        10 => drop(parse::<crate::protocol::ForkBody>(bytes)?),
        11 => drop(parse::<crate::protocol::CommandBody>(bytes)?),
        12 => drop(parse::<crate::protocol::boundary::PermissionAsk>(bytes)?),
        13 => drop(parse::<crate::protocol::SendBody>(bytes)?),
        14 => drop(parse::<crate::protocol::LeaseBody>(bytes)?),
        _ => drop(parse::<crate::protocol::EditBody>(bytes)?),
    }
    Ok(())
}

/// Every route, and `mounted` (other services at their own paths, e.g. `/mcp`), behind the
/// guard and the JSON error layer.
pub fn router(state: AppState, mounted: Router<AppState>) -> Router {
    Router::new()
        .route("/", get(web::index))
        .route("/api/health", get(routes::health))
        .route("/api/state", get(routes::state))
        .route(
            "/api/state/{session}/agents/{key}/explain",
            get(watch::explain),
        )
        .route(
            "/api/state/{session}/agents/{key}/adopt",
            post(watch::adopt),
        )
        .route("/api/watch", get(watch::stats))
        .route("/api/agent-event", post(routes::agent_event))
        .route("/api/focus", post(routes::focus))
        .route("/api/tmux/refresh", post(routes::tmux_refresh))
        .route("/api/events", get(stream::events))
        .route("/api/events/stream", get(stream::events_stream))
        .route("/api/sessions", post(sessions::create).get(sessions::list))
        .route("/api/profiles", get(sessions::profiles))
        .route("/api/profiles/reload", post(sessions::reload_profiles))
        .route(
            "/api/sessions/{id}",
            get(sessions::get).delete(sessions::delete),
        )
        .route(
            "/api/sessions/{id}/messages",
            post(sessions::message).layer(DefaultBodyLimit::max(MAX_PROMPT_BODY_BYTES)),
        )
        .route("/api/sessions/{id}/interrupt", post(sessions::interrupt))
        .route("/api/sessions/{id}/seen", post(sessions::seen))
        .route("/api/sessions/{id}/tasks", post(tasks::send))
        .route("/api/sessions/{id}/queue", get(tasks::queue))
        .route(
            "/api/sessions/{id}/lease",
            get(tasks::lease).post(tasks::set_lease),
        )
        .route("/api/tasks/{id}", get(tasks::status))
        .route("/api/tasks/{id}/result", get(tasks::result))
        .route("/api/tasks/{id}/cancel", post(tasks::cancel))
        .route("/api/tasks/{id}/edit", post(tasks::edit))
        .route("/api/tasks/{id}/supersede", post(tasks::supersede))
        .route("/api/sessions/{id}/events", get(stream::session_events))
        .route(
            "/api/sessions/{machine}/{id}/events",
            get(hub::machine_session_events),
        )
        .route(
            "/api/sessions/{machine}/{id}/messages",
            post(hub::machine_message),
        )
        .route(
            "/api/sessions/{machine}/{id}/interrupt",
            post(hub::machine_interrupt),
        )
        .route(
            "/api/sessions/{machine}/{id}/tasks",
            post(hub::machine_task),
        )
        .route(
            "/api/sessions/{machine}/{id}/approvals/{approval_id}",
            post(hub::machine_approval),
        )
        .route(
            "/api/sessions/{machine}/{id}/requests/{request_id}",
            post(hub::machine_answer),
        )
        .route(
            "/api/sessions/{machine}/{id}/goal",
            get(hub::machine_goal_get)
                .put(hub::machine_goal_put)
                .delete(hub::machine_goal_delete),
        )
        .route("/api/sessions/{machine}/{id}/fork", post(hub::machine_fork))
        .route(
            "/api/sessions/{machine}/{id}/model",
            put(hub::machine_model),
        )
        .route(
            "/api/sessions/{machine}/{id}/lease",
            get(hub::machine_lease_get).post(hub::machine_lease),
        )
        .route(
            "/api/sessions/{machine}/{id}/queue",
            get(hub::machine_queue),
        )
        .route("/api/sessions/{machine}/{id}/mode", put(hub::machine_mode))
        .route(
            "/api/sessions/{id}/events/stream",
            get(stream::session_events_stream),
        )
        .route(
            "/api/sessions/{machine}/{id}/events/stream",
            get(hub::machine_session_events_stream),
        )
        .route("/api/sessions/{id}/approvals", get(sessions::approvals))
        .route("/api/sessions/{id}/requests", get(requests::list))
        .route(
            "/api/sessions/{id}/requests/{request_id}",
            post(requests::answer),
        )
        .route("/api/sessions/{id}/mode", put(requests::set_mode))
        .route("/api/sessions/{id}/model", put(requests::set_model))
        .route(
            "/api/sessions/{id}/approvals/{approval_id}",
            post(sessions::resolve_approval),
        )
        .route(
            "/api/sessions/{id}/goal",
            get(sessions::goal_get)
                .put(sessions::goal_put)
                .delete(sessions::goal_delete),
        )
        .route("/api/sessions/{id}/fork", post(sessions::fork))
        .route("/api/sessions/{id}/command", post(sessions::command))
        .route("/api/sessions/{id}/relaunch", post(sessions::relaunch))
        .route("/api/sessions/{id}/disown", post(sessions::disown))
        .route("/api/sessions/{id}/rehome", post(sessions::rehome))
        .route(
            "/api/sessions/{id}/terminal",
            get(sessions::terminal).post(sessions::open_terminal),
        )
        .route("/api/claude/permission", post(sessions::claude_permission))
        .route("/api/claude/hook", post(sessions::claude_hook))
        .route("/api/models", get(sessions::models))
        .route("/api/doctor", get(sessions::doctor))
        .route("/api/runtimes", get(sessions::runtimes))
        .route("/.well-known/{*rest}", get(routes::well_known))
        .merge(mounted)
        .route("/set-status", post(routes::set_status))
        .route("/set-progress", post(routes::set_progress))
        .route("/log", post(routes::log))
        .route("/notify", post(routes::notify))
        .route("/clear-log", post(routes::clear_log))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::guard,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(error::json_errors))
        .with_state(state)
}

#[cfg(test)]
mod router_tests;
