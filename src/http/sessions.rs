//! Hosted-session routes: create, list, inject, interrupt, approvals, goal, fork, models,
//! slash commands, doctor, and per-session event reads.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::claude::host::CreateClaude;
use crate::codex::host::{APPROVAL_POLICIES, CreateParams, SANDBOXES};
use crate::host::{Capability, HostError};
use crate::protocol::{Budget, HostedSessionView, Runtime};

impl From<HostError> for ApiError {
    fn from(error: HostError) -> Self {
        let message = error.to_string();
        match error {
            HostError::Invalid(_) => ApiError::bad_request("invalid_request", message),
            HostError::UnknownSession(_) => ApiError::not_found("session_not_found", message),
            HostError::Closed(_) => ApiError::new(StatusCode::CONFLICT, "session_closed", message),
            HostError::NotReady(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message)
            }
            HostError::CodexUnavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "codex_unavailable",
                message,
            ),
            HostError::Codex(_) => ApiError::new(StatusCode::BAD_GATEWAY, "codex_error", message),
            HostError::ClaudeUnavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "claude_unavailable",
                message,
            ),
            HostError::Claude(_) => ApiError::new(StatusCode::BAD_GATEWAY, "claude_error", message),
            HostError::HumanTyping(_) => {
                ApiError::new(StatusCode::CONFLICT, "human_typing", message)
            }
            HostError::UnknownApproval(_) => ApiError::not_found("approval_not_found", message),
            HostError::ApprovalResolved(_) => {
                ApiError::new(StatusCode::CONFLICT, "approval_resolved", message)
            }
            HostError::Core(core) => ApiError::from(core),
        }
    }
}

/// Inject errors use the outcome names: `not_live`, `not_ready`, `failed`.
fn inject_error(error: HostError) -> ApiError {
    let message = error.to_string();
    match error {
        HostError::UnknownSession(_) => ApiError::not_found("not_live", message),
        HostError::Closed(_) => ApiError::new(StatusCode::CONFLICT, "not_live", message),
        HostError::NotReady(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message)
        }
        HostError::Codex(_) | HostError::CodexUnavailable(_) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "failed", message)
        }
        other => ApiError::from(other),
    }
}

fn check_key(field: &'static str, key: &Option<String>) -> Result<(), ApiError> {
    match key {
        Some(key) if key.is_empty() || key.len() > 256 => Err(ApiError::field(
            "invalid_field",
            field,
            format!("`{field}` must be 1 to 256 bytes"),
        )),
        _ => Ok(()),
    }
}

fn check_choice(
    field: &'static str,
    value: &Option<String>,
    allowed: &[&str],
) -> Result<(), ApiError> {
    match value {
        Some(value) if !allowed.contains(&value.as_str()) => Err(ApiError::field(
            "invalid_field",
            field,
            format!(
                "`{field}` must be one of {}, got `{value}`",
                allowed.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    runtime: String,
    cwd: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    approval_policy: Option<String>,
    #[serde(default)]
    sandbox: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    budget: Option<Budget>,
    /// claude only: `default` (the default), `acceptEdits`, `plan`; `auto` and
    /// `bypassPermissions` only where the daemon's owner allows them.
    #[serde(default)]
    permission_mode: Option<String>,
    /// The tmux session to open the pane in (default `cohost`): claude always, codex with
    /// `terminal: true`.
    #[serde(default)]
    tmux_session: Option<String>,
    /// codex: also open the real codex TUI on the thread in a tmux pane (co-driving).
    #[serde(default)]
    terminal: bool,
}

/// An optional JSON body: none (empty) is the default, anything else must be JSON.
pub(super) fn optional_json<T: Default + serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    if body.is_empty() {
        Ok(T::default())
    } else if super::extract::is_json(headers) {
        super::extract::parse(body)
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON with `Content-Type: application/json`",
        ))
    }
}

/// The runtime of an existing session.
fn runtime_of(state: &AppState, id: &str) -> Result<Runtime, ApiError> {
    state
        .core
        .read(|s| s.sessions.get(id).map(|r| r.created.runtime))
        .ok_or_else(|| ApiError::not_found("session_not_found", format!("no session `{id}`")))
}

fn unsupported(what: &str, runtime: Runtime) -> Capability {
    Capability::fail(
        "unsupported",
        format!("{what} is not supported for {} sessions", runtime.as_str()),
    )
}

pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Response, ApiError> {
    let runtime = match body.runtime.as_str() {
        "codex" => Runtime::Codex,
        "claude" => Runtime::Claude,
        other => {
            return Err(ApiError::field(
                "invalid_field",
                "runtime",
                format!("runtime `{other}` is not supported (supported: codex, claude)"),
            ));
        }
    };
    let only = |field: &'static str, present: bool, runtime_name: &str| {
        if present {
            Err(ApiError::field(
                "invalid_field",
                field,
                format!("`{field}` applies to {runtime_name} sessions only"),
            ))
        } else {
            Ok(())
        }
    };
    match runtime {
        Runtime::Codex => {
            only("permissionMode", body.permission_mode.is_some(), "claude")?;
            if body.tmux_session.is_some() && !body.terminal {
                return Err(ApiError::field(
                    "invalid_field",
                    "tmuxSession",
                    "`tmuxSession` needs `terminal: true` for codex sessions",
                ));
            }
        }
        Runtime::Claude => {
            only("approvalPolicy", body.approval_policy.is_some(), "codex")?;
            only("sandbox", body.sandbox.is_some(), "codex")?;
            only("budget", body.budget.is_some(), "codex")?;
            only(
                "terminal",
                body.terminal,
                "codex (claude sessions always have one)",
            )?;
        }
    }
    if let Some(mode) = &body.permission_mode
        && let Some(refusal) = state.claude.permission_policy().refusal(mode)
    {
        return Err(ApiError::field("invalid_field", "permissionMode", refusal));
    }
    if let Some(name) = &body.tmux_session
        && (name.is_empty() || name.len() > 128 || name.contains([':', '.']))
    {
        return Err(ApiError::field(
            "invalid_field",
            "tmuxSession",
            "`tmuxSession` must be 1 to 128 bytes without `:` or `.`",
        ));
    }
    let cwd = std::path::PathBuf::from(&body.cwd);
    if !cwd.is_absolute() {
        return Err(ApiError::field(
            "invalid_field",
            "cwd",
            "`cwd` must be an absolute path",
        ));
    }
    if !cwd.is_dir() {
        return Err(ApiError::field(
            "invalid_field",
            "cwd",
            format!("`cwd` {} is not a directory", body.cwd),
        ));
    }
    check_choice("approvalPolicy", &body.approval_policy, &APPROVAL_POLICIES)?;
    check_choice("sandbox", &body.sandbox, &SANDBOXES)?;
    check_key("idempotencyKey", &body.idempotency_key)?;
    if let Some(model) = &body.model
        && (model.is_empty() || model.len() > 256)
    {
        return Err(ApiError::field(
            "invalid_field",
            "model",
            "`model` must be 1 to 256 bytes",
        ));
    }
    let view = match runtime {
        Runtime::Codex => {
            let view = state
                .codex
                .create(CreateParams {
                    cwd,
                    model: body.model,
                    approval_policy: body.approval_policy,
                    sandbox: body.sandbox,
                    budget: body.budget,
                    idempotency_key: body.idempotency_key.clone(),
                })
                .await?;
            if body.terminal && view.pane_id.is_none() {
                state
                    .codex
                    .open_terminal(&view.id, body.tmux_session)
                    .await?
            } else {
                view
            }
        }
        Runtime::Claude => {
            state
                .claude
                .create(CreateClaude {
                    cwd,
                    model: body.model,
                    permission_mode: body.permission_mode,
                    tmux_session: body.tmux_session,
                    idempotency_key: body.idempotency_key.clone(),
                    fork_of: None,
                })
                .await?
        }
    };
    let mut answer = json!({ "session": view });
    if let Some(prompt) = body.prompt.filter(|p| !p.trim().is_empty()) {
        // The prompt's idempotency derives from the creation key, so a retried create
        // does not send the prompt twice.
        let key = body.idempotency_key.map(|k| format!("create:{k}"));
        let injected = match runtime {
            Runtime::Codex => state.codex.inject(&view.id, &prompt, key.clone()).await,
            Runtime::Claude => state.claude.inject(&view.id, &prompt, key.clone()).await,
        };
        match injected {
            Ok(outcome) => {
                // Tracked as a task like every prompt.
                if let Ok(task) = state
                    .tasks
                    .record_direct(&view.id, &prompt, key, &outcome)
                    .await
                {
                    answer["taskId"] = json!(task);
                }
                answer["inject"] = json!(outcome)
            }
            Err(error) => {
                answer["injectError"] = json!({ "code": inject_error(error).code, "message": "the prompt was not sent" })
            }
        }
    }
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

pub async fn list(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "sessions": state.codex.list() }))
}

pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HostedSessionView>, ApiError> {
    Ok(Json(state.codex.view(&id)?))
}

pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match runtime_of(&state, &id)? {
        Runtime::Codex => state.codex.close(&id).await?,
        Runtime::Claude => state.claude.close(&id).await?,
    }
    Ok(Json(json!({ "ok": true })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageBody {
    text: String,
    #[serde(default)]
    idempotency_key: Option<String>,
}

pub async fn message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MessageBody>,
) -> Result<Json<Value>, ApiError> {
    check_key("idempotencyKey", &body.idempotency_key)?;
    if body.text.trim().is_empty() {
        return Err(ApiError::field(
            "invalid_field",
            "text",
            "`text` must not be empty",
        ));
    }
    // A key a queued task holds is that task's: a direct send must not reuse it.
    if let Some(key) = &body.idempotency_key {
        let held = state.core.read(|s| {
            let sent = s.sessions.get(&id).is_some_and(|r| r.sent(key).is_some());
            s.tasks
                .by_key(&id, key)
                .filter(|_| !sent)
                .map(|t| t.id.clone())
        });
        if let Some(task) = held {
            return Err(ApiError::field(
                "idempotency_key_in_use",
                "idempotencyKey",
                format!("`idempotencyKey` already names queued task `{task}`"),
            )
            .with_status(StatusCode::CONFLICT));
        }
    }
    let outcome = match runtime_of(&state, &id)
        .map_err(|_| ApiError::not_found("not_live", format!("no session `{id}`")))?
    {
        Runtime::Codex => {
            state
                .codex
                .inject(&id, &body.text, body.idempotency_key.clone())
                .await
        }
        Runtime::Claude => {
            state
                .claude
                .inject(&id, &body.text, body.idempotency_key.clone())
                .await
        }
    }
    .map_err(inject_error)?;
    // The prompt was taken: track it as a task (a repeat with the key finds the first one).
    let task_id = state
        .tasks
        .record_direct(&id, &body.text, body.idempotency_key, &outcome)
        .await?;
    let mut answer = json!(outcome);
    answer["taskId"] = json!(task_id);
    Ok(Json(answer))
}

pub async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let interrupted = match runtime_of(&state, &id)? {
        Runtime::Codex => state.codex.interrupt(&id).await?,
        Runtime::Claude => state.claude.interrupt(&id).await?,
    };
    Ok(Json(json!({ "interrupted": interrupted })))
}

pub async fn approvals(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let approvals = state.core.read(|s| {
        s.sessions.get(&id).map(|record| {
            record
                .approvals
                .values()
                .map(|a| {
                    json!({
                        "request": a.request,
                        "requestedAt": a.requested_at,
                        "resolved": a.resolved,
                        "pending": a.resolved.is_none(),
                    })
                })
                .collect::<Vec<_>>()
        })
    });
    match approvals {
        Some(approvals) => Ok(Json(json!({ "approvals": approvals }))),
        None => Err(ApiError::not_found(
            "session_not_found",
            format!("no session `{id}`"),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    decision: String,
}

pub async fn resolve_approval(
    State(state): State<AppState>,
    Path((id, approval_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<DecisionBody>,
) -> Result<Json<Value>, ApiError> {
    match runtime_of(&state, &id)? {
        Runtime::Codex => {
            state
                .codex
                .resolve_approval(&id, &approval_id, &body.decision)
                .await
        }
        Runtime::Claude => {
            state
                .claude
                .resolve_approval(&id, &approval_id, &body.decision)
                .await
        }
    }
    .map_err(|error| match error {
        HostError::Invalid(message) => ApiError::field("invalid_field", "decision", message),
        other => ApiError::from(other),
    })?;
    Ok(Json(
        json!({ "ok": true, "approvalId": approval_id, "decision": body.decision }),
    ))
}

pub async fn goal_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Capability>, ApiError> {
    match runtime_of(&state, &id)? {
        Runtime::Codex => Ok(Json(state.codex.goal_get(&id).await?)),
        runtime => Ok(Json(unsupported("goals", runtime))),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalBody {
    #[serde(default)]
    objective: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    token_budget: Option<u64>,
}

pub const GOAL_STATUSES: [&str; 4] = ["active", "paused", "budgetLimited", "complete"];

pub async fn goal_put(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<GoalBody>,
) -> Result<Json<Capability>, ApiError> {
    check_choice("status", &body.status, &GOAL_STATUSES)?;
    if body.objective.is_none() && body.status.is_none() && body.token_budget.is_none() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "give at least one of objective, status, tokenBudget",
        ));
    }
    match runtime_of(&state, &id)? {
        Runtime::Codex => Ok(Json(
            state
                .codex
                .goal_set(&id, body.objective, body.status, body.token_budget)
                .await?,
        )),
        runtime => Ok(Json(unsupported("goals", runtime))),
    }
}

pub async fn goal_delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Capability>, ApiError> {
    match runtime_of(&state, &id)? {
        Runtime::Codex => Ok(Json(state.codex.goal_clear(&id).await?)),
        runtime => Ok(Json(unsupported("goals", runtime))),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkBody {
    #[serde(default)]
    after_turn_id: Option<String>,
}

pub async fn fork(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    // The body is optional: `POST /fork` with none forks the whole thread.
    let body: ForkBody = optional_json(&headers, &body)?;
    if runtime_of(&state, &id)? == Runtime::Claude {
        if body.after_turn_id.is_some() {
            return Err(ApiError::field(
                "invalid_field",
                "afterTurnId",
                "claude forks the whole conversation; `afterTurnId` is codex only",
            ));
        }
        let view = state.claude.fork(&id).await?;
        return Ok((
            StatusCode::CREATED,
            Json(json!(Capability::ok(json!({ "session": view })))),
        )
            .into_response());
    }
    Ok(match state.codex.fork(&id, body.after_turn_id).await? {
        Ok(view) => (
            StatusCode::CREATED,
            Json(json!(Capability::ok(json!({ "session": view })))),
        )
            .into_response(),
        Err(capability) => Json(json!(capability)).into_response(),
    })
}

#[derive(Deserialize)]
pub struct ModelsQuery {
    runtime: Option<String>,
}

pub async fn models(
    State(state): State<AppState>,
    Query(query): Query<ModelsQuery>,
) -> Result<Json<Capability>, ApiError> {
    match query.runtime.as_deref() {
        None | Some("codex") => Ok(Json(state.codex.models().await?)),
        Some(other) => Ok(Json(Capability::fail(
            "unsupported",
            format!("listing models is not supported for runtime `{other}`"),
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandBody {
    text: String,
}

/// Chat-bot slash commands: `/goal [text|clear]`, `/fork`, `/models`, `/interrupt`.
pub async fn command(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CommandBody>,
) -> Result<Response, ApiError> {
    let text = body.text.trim();
    let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let rest = rest.trim();
    let runtime = runtime_of(&state, &id)?;
    let capability = match name {
        "/goal" | "/models" if runtime == Runtime::Claude => unsupported(name, runtime),
        "/fork" if runtime == Runtime::Claude => {
            Capability::ok(json!({ "session": state.claude.fork(&id).await? }))
        }
        "/interrupt" if runtime == Runtime::Claude => {
            Capability::ok(json!({ "interrupted": state.claude.interrupt(&id).await? }))
        }
        "/goal" if rest.is_empty() => state.codex.goal_get(&id).await?,
        "/goal" if rest == "clear" => state.codex.goal_clear(&id).await?,
        "/goal" => {
            state
                .codex
                .goal_set(&id, Some(rest.to_string()), None, None)
                .await?
        }
        "/fork" => match state.codex.fork(&id, None).await? {
            Ok(view) => Capability::ok(json!({ "session": view })),
            Err(capability) => capability,
        },
        "/models" => state.codex.models().await?,
        "/interrupt" => Capability::ok(json!({ "interrupted": state.codex.interrupt(&id).await? })),
        _ => {
            return Err(ApiError::field(
                "invalid_field",
                "text",
                format!(
                    "unknown command `{name}`; known: /goal [text|clear], /fork, /models, /interrupt"
                ),
            ));
        }
    };
    Ok(Json(capability).into_response())
}

/// `GET /api/doctor`: codex's checks at the top level (as before claude was covered), claude's
/// under `claude`; `ok` when neither found an issue, `warnings` from both.
pub async fn doctor(State(state): State<AppState>) -> Json<Value> {
    Json(doctor_report(&state.codex, &state.claude).await)
}

pub async fn doctor_report(
    codex: &crate::codex::host::CodexHost,
    claude: &crate::claude::host::ClaudeHost,
) -> Value {
    let (codex, claude) = tokio::join!(codex.doctor(), claude.doctor());
    let mut issues = codex.issues.clone();
    issues.extend(claude.issues.iter().map(|i| format!("claude: {i}")));
    let mut warnings = codex.warnings.clone();
    warnings.extend(claude.warnings.iter().cloned());
    let mut answer = json!(codex);
    answer["ok"] = json!(issues.is_empty());
    answer["issues"] = json!(issues);
    answer["warnings"] = json!(warnings);
    answer["claude"] = json!(claude);
    answer
}

/// `POST /api/sessions/{id}/relaunch`: start the session's TUI again on the same conversation.
pub async fn relaunch(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match runtime_of(&state, &id)? {
        Runtime::Claude => state.claude.relaunch(&id).await?,
        Runtime::Codex => state.codex.relaunch_terminal(&id).await?,
    }
    Ok(Json(json!({ "ok": true })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionBody {
    session_id: String,
    request_id: String,
    payload: Value,
}

/// `POST /api/claude/permission`: the `cohost-hook` of a `PermissionRequest` asks for a decision
/// and waits for it (up to the permission timeout; then it answers `ask`).
pub async fn claude_permission(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PermissionBody>,
) -> Result<Json<Value>, ApiError> {
    if body.request_id.is_empty() || body.request_id.len() > 128 {
        return Err(ApiError::field(
            "invalid_field",
            "requestId",
            "`requestId` must be 1 to 128 bytes",
        ));
    }
    let answer = state
        .claude
        .permission_request(&body.session_id, &body.request_id, body.payload)
        .await?;
    Ok(Json(answer))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalQuery {
    #[serde(default)]
    include_token: Option<String>,
}

/// `GET /api/sessions/{id}/terminal[?includeToken=true]`: how to attach the real codex TUI to
/// the session's thread. The token is redacted unless asked for.
pub async fn terminal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<TerminalQuery>,
) -> Result<Json<Value>, ApiError> {
    let include_token = match query.include_token.as_deref() {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return Err(ApiError::field(
                "invalid_field",
                "includeToken",
                format!("`includeToken` must be true or false, got `{other}`"),
            ));
        }
    };
    match runtime_of(&state, &id)? {
        Runtime::Codex => Ok(Json(json!(
            state.codex.terminal_spec(&id, include_token).await?
        ))),
        Runtime::Claude => Err(ApiError::bad_request(
            "unsupported",
            "claude sessions run their TUI in their own pane; see paneId",
        )),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenTerminalBody {
    #[serde(default)]
    tmux_session: Option<String>,
}

/// `POST /api/sessions/{id}/terminal`: open the codex TUI on an existing session's thread.
pub async fn open_terminal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let body: OpenTerminalBody = optional_json(&headers, &body)?;
    match runtime_of(&state, &id)? {
        Runtime::Codex => {
            let view = state.codex.open_terminal(&id, body.tmux_session).await?;
            Ok((StatusCode::CREATED, Json(json!({ "session": view }))).into_response())
        }
        Runtime::Claude => Err(ApiError::bad_request(
            "unsupported",
            "claude sessions already run in their own pane",
        )),
    }
}
