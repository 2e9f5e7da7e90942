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
use crate::codex::host::{APPROVAL_POLICIES, Capability, CreateParams, HostError, SANDBOXES};
use crate::protocol::{Budget, HostedSessionView};

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
}

pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Response, ApiError> {
    if body.runtime != "codex" {
        return Err(ApiError::field(
            "invalid_field",
            "runtime",
            format!(
                "runtime `{}` is not supported (supported: codex)",
                body.runtime
            ),
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
    let mut answer = json!({ "session": view });
    if let Some(prompt) = body.prompt.filter(|p| !p.trim().is_empty()) {
        // The prompt's idempotency derives from the creation key, so a retried create
        // does not send the prompt twice.
        let key = body.idempotency_key.map(|k| format!("create:{k}"));
        match state.codex.inject(&view.id, &prompt, key).await {
            Ok(outcome) => answer["inject"] = json!(outcome),
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
    state.codex.close(&id).await?;
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
    let outcome = state
        .codex
        .inject(&id, &body.text, body.idempotency_key)
        .await
        .map_err(inject_error)?;
    Ok(Json(json!(outcome)))
}

pub async fn interrupt(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let interrupted = state.codex.interrupt(&id).await?;
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
    state
        .codex
        .resolve_approval(&id, &approval_id, &body.decision)
        .await
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
    Ok(Json(state.codex.goal_get(&id).await?))
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
    Ok(Json(
        state
            .codex
            .goal_set(&id, body.objective, body.status, body.token_budget)
            .await?,
    ))
}

pub async fn goal_delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Capability>, ApiError> {
    Ok(Json(state.codex.goal_clear(&id).await?))
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
    let body: ForkBody = if body.is_empty() {
        ForkBody::default()
    } else if super::extract::is_json(&headers) {
        super::extract::parse(&body)?
    } else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON with `Content-Type: application/json`",
        ));
    };
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
    let capability = match name {
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

pub async fn doctor(State(state): State<AppState>) -> Json<Value> {
    Json(json!(state.codex.doctor().await))
}
