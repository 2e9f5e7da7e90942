//! What codex asks a person, for `CodexHost`: `item/tool/requestUserInput` (questions),
//! `mcpServer/elicitation/request`, `item/permissions/requestApproval`, and plan mode (the
//! collaboration mode sent with each `turn/start`, the `plan` request offered for a plan item).
//!
//! A request codex waits on is kept here until it is answered (first answer wins: the answer
//! removes it) or codex withdraws it (`serverRequest/resolved`, an interrupt).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Backend, CodexHost, Inner, Live, RequestId, lock, wire};
use crate::core::CoreError;
use crate::protocol::{
    EventKind, Field, InputAnswer, InputKind, InputRequested, InputResolved, ResolvedBy,
    SessionMode,
};
use crate::runtime::{Capability, HostError};

/// The collaboration modes codex 0.169–0.171 list (`collaborationMode/list`).
pub const MODES: [&str; 2] = ["plan", "default"];

/// What cohost asks the agent after a plan is approved.
pub const IMPLEMENT_PROMPT: &str = "Implement the plan.";

/// A server request codex waits on for a person's answer.
pub(in crate::runtime::codex) struct PendingInput {
    session_id: String,
    backend: Arc<Backend>,
    rpc_id: RequestId,
}

impl Inner {
    /// The collaboration mode for the session's next `turn/start`: the one set with
    /// `PUT …/mode`, with the thread's model (codex requires one), or none when no mode was set.
    pub(super) fn collaboration_mode(&self, live: &Live) -> Option<wire::CollaborationMode> {
        let (mode, model) = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .map(|s| (s.mode.clone(), s.created.model.clone()))
        })?;
        let model = lock(&live.model).clone().or(model)?;
        Some(wire::CollaborationMode {
            mode: mode?,
            settings: wire::CollaborationModeSettings {
                model,
                reasoning_effort: None,
                developer_instructions: None,
            },
        })
    }

    /// Keeps a server request that waits for a person (stored as `input.requested` by the
    /// forwarder) until it is answered or withdrawn.
    pub(super) fn hold_input(
        &self,
        backend: &Arc<Backend>,
        session_id: &str,
        request_id: String,
        rpc_id: RequestId,
    ) {
        lock(&self.inputs).insert(
            request_id,
            PendingInput {
                session_id: session_id.to_string(),
                backend: Arc::clone(backend),
                rpc_id,
            },
        );
    }

    /// codex says request `rpc_id` is resolved (another client answered, or the turn was
    /// interrupted): if it was one of ours still pending, it is resolved by the runtime.
    pub(super) async fn input_withdrawn(
        self: &Arc<Self>,
        backend: &Arc<Backend>,
        session_id: &str,
        rpc_id: &RequestId,
    ) {
        let found = {
            let mut inputs = lock(&self.inputs);
            let found = inputs
                .iter()
                .find(|(_, p)| Arc::ptr_eq(&p.backend, backend) && &p.rpc_id == rpc_id)
                .map(|(id, _)| id.clone());
            if let Some(id) = &found {
                inputs.remove(id);
            }
            found
        };
        if let Some(request_id) = found {
            self.store(
                session_id,
                EventKind::InputResolved(InputResolved::moot(&request_id, ResolvedBy::Runtime)),
            )
            .await;
        }
    }

    async fn append(&self, session_id: &str, kind: EventKind) -> Result<(), HostError> {
        match self.core.append(Some(session_id.to_string()), kind).await {
            Ok(_) | Err(CoreError::Duplicate) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

impl CodexHost {
    /// Answers a request (see `SessionHost::answer_request`).
    pub(in crate::runtime::codex) async fn answer_request(
        &self,
        session_id: &str,
        request: &InputRequested,
        answer: InputAnswer,
    ) -> Result<Option<String>, HostError> {
        self.inner.live_session(session_id)?;
        let resolved = answer.record(
            request,
            answer
                .by
                .as_deref()
                .map_or(ResolvedBy::Api, ResolvedBy::from),
        );
        if request.kind == InputKind::Plan {
            // cohost's own request: nothing waits in codex; the answer continues as a prompt.
            let approve = answer.decision.as_deref() == Some("approve");
            let mode = approve.then(|| answer.mode.clone().unwrap_or_else(|| "default".into()));
            if let Some(mode) = &mode
                && !MODES.contains(&mode.as_str())
            {
                return Err(HostError::field(
                    Field::Mode,
                    format!("`{mode}` is not a codex mode: one of {MODES:?}"),
                ));
            }
            let mut resolved = resolved;
            resolved.mode = mode.clone();
            self.inner
                .append(session_id, EventKind::InputResolved(resolved))
                .await?;
            if let Some(mode) = mode {
                self.inner
                    .append(session_id, EventKind::SessionMode(SessionMode { mode }))
                    .await?;
                return Ok(Some(IMPLEMENT_PROMPT.to_string()));
            }
            return Ok(answer.feedback.filter(|f| !f.trim().is_empty()));
        }
        let pending = {
            let mut inputs = lock(&self.inner.inputs);
            match inputs.get(&request.request_id) {
                Some(pending) if pending.session_id == session_id => {
                    inputs.remove(&request.request_id)
                }
                _ => None,
            }
        };
        let Some(pending) = pending else {
            return Err(HostError::RequestResolved(request.request_id.clone()));
        };
        let rpc = &pending.backend.rpc;
        let sent = match request.kind {
            InputKind::Question => {
                let answers = answer
                    .answer_lists()
                    .into_iter()
                    .map(|(id, answers)| (id, wire::ToolRequestUserInputAnswer { answers }))
                    .collect();
                rpc.respond(
                    pending.rpc_id.clone(),
                    wire::ToolRequestUserInputResponse { answers },
                )
                .await
            }
            InputKind::Elicitation => {
                let action = answer.decision.clone().unwrap_or_else(|| "cancel".into());
                let content = (action == "accept")
                    .then(|| answer.content.clone().unwrap_or_else(|| json!({})));
                rpc.respond(
                    pending.rpc_id.clone(),
                    wire::McpServerElicitationRequestResponse {
                        action,
                        content,
                        meta: None,
                    },
                )
                .await
            }
            InputKind::Permissions => {
                let decision = answer.decision.as_deref().unwrap_or("decline");
                let permissions = match decision {
                    "decline" => json!({}),
                    _ => request.permissions.clone().unwrap_or_else(|| json!({})),
                };
                let scope = if decision == "acceptForSession" {
                    "session"
                } else {
                    "turn"
                };
                rpc.respond(
                    pending.rpc_id.clone(),
                    wire::PermissionsRequestApprovalResponse {
                        permissions: granted(permissions),
                        scope: scope.into(),
                    },
                )
                .await
            }
            InputKind::Plan => Ok(()),
        };
        sent?;
        self.inner
            .append(session_id, EventKind::InputResolved(resolved))
            .await?;
        Ok(None)
    }

    /// Sets the collaboration mode of the session's next turns (sent with each `turn/start`).
    pub(in crate::runtime::codex) async fn set_mode(
        &self,
        session_id: &str,
        mode: &str,
    ) -> Result<Capability, HostError> {
        self.inner.live_session(session_id)?;
        if !MODES.contains(&mode) {
            return Err(HostError::field(
                Field::Mode,
                format!("`{mode}` is not a codex mode: one of {MODES:?}"),
            ));
        }
        self.inner
            .append(
                session_id,
                EventKind::SessionMode(SessionMode { mode: mode.into() }),
            )
            .await?;
        let running = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .and_then(|s| s.active_turn.clone())
        });
        Ok(Capability::ok(json!({
            "mode": mode,
            "appliesTo": if running.is_some() { "the next turn" } else { "the next turn (none is running)" },
        })))
    }

    /// Sends a prompt with images, as codex `image` input items (`data:` URLs).
    pub(in crate::runtime::codex) async fn inject_images(
        &self,
        session_id: &str,
        text: &str,
        images: Vec<crate::protocol::PromptImage>,
        key: Option<String>,
    ) -> Result<crate::runtime::InjectOutcome, HostError> {
        let mut input = vec![wire::UserInput::text(text)];
        input.extend(images.iter().map(|image| wire::UserInput::Image {
            url: image.data_url(),
        }));
        self.inject_input(session_id, text, input, key).await
    }
}

/// A requested permission profile (`RequestPermissionProfile`) as the granted one
/// (`GrantedPermissionProfile`): the same `network` and `fileSystem` members.
fn granted(requested: Value) -> Value {
    match requested {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(key, value)| {
                    (key == "network" || key == "fileSystem") && !value.is_null()
                })
                .collect(),
        ),
        _ => json!({}),
    }
}
