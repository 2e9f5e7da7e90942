//! REST handlers for the tracker, the metadata routes and health.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::core::now_ms;
use crate::protocol::{
    Accepted, AgentEventParams, AgentUpdate, EventKind, Focus, Health, LogParams, MetaLog,
    MetaProgress, MetaStatus, SessionParams, SessionView, SetProgressParams, SetStatusParams,
    StateView,
};

pub async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        ok: true,
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        seq: state.core.store.head(),
    })
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such route")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

pub async fn agent_event(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<AgentEventParams>,
) -> Result<Json<Accepted>, ApiError> {
    params.validate()?;
    let session = state
        .sessions
        .resolve(
            params.tmux_session.as_deref(),
            params.project_dir.as_deref(),
        )
        .await
        .map_err(|error| ApiError::not_found("session_not_found", error.message))?;
    let update = AgentUpdate {
        agent: params.agent,
        status: params.status,
        ts: params.ts.unwrap_or_else(now_ms),
        thread_id: params.thread_id,
        thread_name: params.thread_name,
        last_user_prompt: params.last_user_prompt,
        pane_id: params.pane_id,
        liveness: params.liveness,
    };
    record(&state, session, EventKind::AgentUpdated(update)).await
}

async fn live_session(state: &AppState, session: &str) -> Result<(), ApiError> {
    if state.sessions.contains(session).await {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "session_not_found",
            format!("no live tmux session is named `{session}`"),
        ))
    }
}

async fn record(
    state: &AppState,
    session: String,
    kind: EventKind,
) -> Result<Json<Accepted>, ApiError> {
    let seq = state.core.append(Some(session.clone()), kind).await?;
    Ok(Json(Accepted {
        ok: true,
        seq,
        session,
    }))
}

pub async fn set_status(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SetStatusParams>,
) -> Result<Json<Accepted>, ApiError> {
    params.validate()?;
    live_session(&state, &params.session).await?;
    let kind = EventKind::MetaStatus(MetaStatus {
        text: params.text,
        tone: params.tone,
    });
    record(&state, params.session, kind).await
}

pub async fn set_progress(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SetProgressParams>,
) -> Result<Json<Accepted>, ApiError> {
    params.validate()?;
    live_session(&state, &params.session).await?;
    let kind = EventKind::MetaProgress(if params.clear {
        MetaProgress {
            clear: true,
            current: None,
            total: None,
            percent: None,
            label: None,
        }
    } else {
        MetaProgress {
            clear: false,
            current: params.current,
            total: params.total,
            percent: params.percent,
            label: params.label,
        }
    });
    record(&state, params.session, kind).await
}

async fn append_log(
    state: AppState,
    params: LogParams,
    notify: bool,
) -> Result<Json<Accepted>, ApiError> {
    params.validate()?;
    live_session(&state, &params.session).await?;
    let kind = EventKind::MetaLog(MetaLog {
        message: params.message,
        tone: params.tone,
        source: params.source,
        notify,
    });
    record(&state, params.session, kind).await
}

pub async fn log(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<LogParams>,
) -> Result<Json<Accepted>, ApiError> {
    append_log(state, params, false).await
}

pub async fn notify(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<LogParams>,
) -> Result<Json<Accepted>, ApiError> {
    append_log(state, params, true).await
}

pub async fn clear_log(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<SessionParams>,
) -> Result<Json<Accepted>, ApiError> {
    params.validate()?;
    live_session(&state, &params.session).await?;
    record(
        &state,
        params.session,
        EventKind::MetaLogCleared(Default::default()),
    )
    .await
}

#[derive(Deserialize)]
pub struct FocusParams {
    session: String,
    /// `api` (default) or `tmux` (the client-session-changed hook).
    #[serde(default)]
    source: Option<String>,
}

pub async fn focus(
    State(state): State<AppState>,
    ApiJson(params): ApiJson<FocusParams>,
) -> Result<Json<Accepted>, ApiError> {
    SessionParams {
        session: params.session.clone(),
    }
    .validate()?;
    let source = params.source.unwrap_or_else(|| "api".into());
    if source != "api" && source != "tmux" {
        return Err(ApiError::field(
            "invalid_field",
            "source",
            format!("source must be `api` or `tmux`, got `{source}`"),
        ));
    }
    live_session(&state, &params.session).await?;
    record(
        &state,
        params.session,
        EventKind::SessionFocused(Focus { source }),
    )
    .await
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefreshAnswer {
    tmux_running: bool,
    sessions: usize,
}

/// Called by the tmux hooks when sessions are created, closed or renamed.
pub async fn tmux_refresh(State(state): State<AppState>) -> Json<RefreshAnswer> {
    let list = state.sessions.refresh().await;
    Json(RefreshAnswer {
        tmux_running: list.running,
        sessions: list.sessions.len(),
    })
}

pub async fn state(State(state): State<AppState>) -> Json<StateView> {
    let list = state.sessions.get();
    let core_state = state.core.state.read().unwrap_or_else(|e| e.into_inner());
    let tracker = &core_state.tracker;
    let sessions = list
        .sessions
        .iter()
        .map(|session| {
            let summary = tracker.session_view(&session.name);
            SessionView {
                name: session.name.clone(),
                id: session.id.clone(),
                dir: session.dir.clone(),
                windows: session.windows,
                attached: session.attached,
                status: summary.status,
                unseen: summary.unseen,
                agents: summary.agents,
                metadata: summary.metadata,
            }
        })
        .collect();
    Json(StateView {
        seq: state.core.store.head(),
        focused_session: tracker.focused().map(str::to_string),
        tmux_running: list.running,
        sessions,
    })
}
