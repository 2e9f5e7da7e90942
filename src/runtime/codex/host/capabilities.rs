//! The optional capabilities of a codex session: goals (`thread/goal/*`), the model list
//! (`model/list`, every page) and fork (`thread/fork` into a new session).

use serde_json::Value;

use super::super::rpc::RpcError;
use super::{CodexHost, lock, wire};
use crate::protocol::{EventKind, ForkOrigin, HostedSessionView, Runtime, SessionCreated};
use crate::runtime::common::new_session_id;
use crate::runtime::{Capability, HostError};

/// Pages of `model/list` read at most for one answer (a page holds dozens of models).
const MODEL_PAGES: usize = 20;

impl CodexHost {
    /// Runs a thread-scoped request (built for the session's thread) and wraps the answer as a
    /// capability result.
    async fn thread_call<R: wire::ClientRequest<Response = Value>>(
        &self,
        session_id: &str,
        params: impl FnOnce(String) -> R,
    ) -> Result<Capability, HostError> {
        let method = R::METHOD;
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(Capability::fail(
                "no_active_thread",
                "the session has no live thread yet",
            ));
        };
        let params = params(binding.thread_id.clone());
        match binding.backend.rpc.call(&params).await {
            Ok(answer) => Ok(Capability::ok(answer)),
            Err(RpcError::Server { message, .. }) if message.contains("unknown variant") => {
                Ok(Capability::fail(
                    "unsupported",
                    format!("this codex does not support {method}"),
                ))
            }
            Err(RpcError::Server { message, .. }) => Ok(Capability::fail("error", message)),
            Err(error) => Ok(Capability::fail("error", error.to_string())),
        }
    }

    pub(in crate::runtime::codex) async fn goal_get(
        &self,
        session_id: &str,
    ) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalGetParams {
            thread_id,
        })
        .await
    }

    /// Sets or patches the goal. `status: "active"` makes codex start turns on its own; they
    /// appear in the stream with source `goal`.
    pub(in crate::runtime::codex) async fn goal_set(
        &self,
        session_id: &str,
        objective: Option<String>,
        status: Option<String>,
        token_budget: Option<u64>,
    ) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalSetParams {
            thread_id,
            origin: Some(wire::ThreadGoalMutationOrigin::User),
            objective,
            status,
            token_budget,
        })
        .await
    }

    pub(in crate::runtime::codex) async fn goal_clear(
        &self,
        session_id: &str,
    ) -> Result<Capability, HostError> {
        self.thread_call(session_id, |thread_id| wire::ThreadGoalClearParams {
            thread_id,
            origin: Some(wire::ThreadGoalMutationOrigin::User),
        })
        .await
    }

    /// Lists models from the base backend.
    pub(in crate::runtime::codex) async fn models(&self) -> Result<Capability, HostError> {
        if let Err(error) = &self.inner.codex {
            return Ok(Capability::fail("unsupported", error.clone()));
        }
        let backend = self.inner.backend(None).await?;
        // Every page of `model/list` (`{"data": [Model], "nextCursor"}`), as one list.
        let mut models = Vec::new();
        let mut cursor = None;
        for _ in 0..MODEL_PAGES {
            let params = wire::ModelListParams {
                cursor: cursor.take(),
                ..wire::ModelListParams::default()
            };
            let page = match backend.rpc.call(&params).await {
                Ok(page) => page,
                Err(error) => return Ok(Capability::fail("error", error.to_string())),
            };
            if let Some(list) = page.get("data").and_then(serde_json::Value::as_array) {
                models.extend(list.iter().cloned());
            }
            cursor = page
                .get("nextCursor")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(Capability::ok(serde_json::Value::Array(models)))
    }

    /// Forks the session's thread (optionally cut after `after_turn_id`) into a new session.
    pub(in crate::runtime::codex) async fn fork(
        &self,
        session_id: &str,
        after_turn_id: Option<String>,
    ) -> Result<Result<HostedSessionView, Capability>, HostError> {
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(Err(Capability::fail(
                "no_active_thread",
                "the session has no live thread yet",
            )));
        };
        // The fork keeps the parent's profile: its values as the parent started with them.
        let profile = self
            .inner
            .settings(session_id)
            .and_then(|settings| settings.profile);
        let (developer_instructions, config) = super::profile_params(profile.as_deref());
        let params = wire::ThreadForkParams {
            thread_id: binding.thread_id.clone(),
            last_turn_id: after_turn_id.clone(),
            developer_instructions,
            config,
        };
        let answer = match binding.backend.rpc.call(&params).await {
            Ok(answer) => answer,
            Err(RpcError::Server { message, .. }) if message.contains("no rollout found") => {
                return Ok(Err(Capability::fail(
                    "no_active_thread",
                    "the session has no finished turn to fork yet",
                )));
            }
            Err(RpcError::Server { message, .. }) => {
                return Ok(Err(Capability::fail("error", message)));
            }
            Err(error) => return Err(error.into()),
        };
        let Some((thread_id, thread)) = answer
            .thread
            .and_then(|thread| Some((thread.id.clone()?, thread)))
        else {
            return Err(HostError::failed(
                Runtime::Codex,
                "thread/fork answered without a thread id",
            ));
        };
        let parent = self.view(session_id)?;
        let new_id = new_session_id();
        let profile = self.inner.record_profile(&new_id, profile.as_deref())?;
        let created = SessionCreated {
            runtime: Runtime::Codex,
            cwd: parent.cwd.clone(),
            model: parent.model.clone(),
            approval_policy: parent.approval_policy.clone(),
            permission_mode: None,
            sandbox: parent.sandbox.clone(),
            budget: self.inner.core.read(|s| {
                s.sessions
                    .get(session_id)
                    .and_then(|r| r.created.budget.clone())
            }),
            forked_from: Some(ForkOrigin {
                session_id: session_id.to_string(),
                after_turn_id,
            }),
            idempotency_key: None,
            profile,
        };
        self.inner
            .core
            .append(Some(new_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let new_live = self.inner.live_for(&new_id);
        *lock(&new_live.model) = answer.model.clone();
        self.inner
            .attach(&new_live, &thread_id, &binding.backend, Some(&thread), None)
            .await?;
        Ok(Ok(self.view(&new_id)?))
    }
}
