//! Approvals: a codex server request that asks for a decision is held (by approval id) from its
//! arrival until the first answer — a person's (`resolve_approval`) or codex's own
//! `serverRequest/resolved`; a request nothing here relays is refused so codex never waits.
//!
//! **Invariant:** an approval is answered at most once: the first answer removes it.

use std::sync::Arc;

use super::super::normalize;
use super::super::rpc::RequestId;
use super::{Backend, CodexHost, Inner, lock, wire};
use crate::core::CoreError;
use crate::protocol::{ApprovalResolved, EventKind};
use crate::runtime::HostError;

impl CodexHost {
    /// Answers a pending approval. The first answer wins; later ones get a clear error.
    pub(in crate::runtime::codex) async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        if !normalize::DECISIONS.contains(&decision) {
            return Err(HostError::Invalid(format!(
                "decision must be one of {}, got `{decision}`",
                normalize::DECISIONS.join(", ")
            )));
        }
        self.inner.live_session(session_id)?;
        let pending = {
            let mut approvals = lock(&self.inner.approvals);
            match approvals.get(approval_id) {
                Some(pending) if pending.session_id == session_id => approvals.remove(approval_id),
                _ => None,
            }
        };
        let Some(pending) = pending else {
            let known = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.approvals.get(approval_id))
                    .map(|a| a.resolved.is_some())
            });
            return Err(match known {
                Some(true) => HostError::ApprovalResolved(approval_id.to_string()),
                _ => HostError::UnknownApproval(approval_id.to_string()),
            });
        };
        pending
            .backend
            .rpc
            .respond(
                pending.request_id.clone(),
                wire::CommandExecutionRequestApprovalResponse {
                    decision: decision.into(),
                },
            )
            .await?;
        let resolved = ApprovalResolved {
            approval_id: approval_id.into(),
            decision: Some(decision.into()),
            by: by.into(),
        };
        match self
            .inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::ApprovalResolved(resolved),
            )
            .await
        {
            Ok(_) | Err(CoreError::Duplicate) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

impl Inner {
    /// codex says server request `request_id` was answered (by any client) or made moot (an
    /// interrupt): an approval or input request of ours still waiting on it is resolved by the
    /// runtime.
    pub(super) async fn request_resolved(
        self: &Arc<Self>,
        backend: &Arc<Backend>,
        session_id: &str,
        request_id: &RequestId,
    ) {
        let approval = {
            let mut approvals = lock(&self.approvals);
            let found = approvals
                .iter()
                .find(|(_, p)| Arc::ptr_eq(&p.backend, backend) && &p.request_id == request_id)
                .map(|(id, _)| id.clone());
            if let Some(id) = &found {
                approvals.remove(id);
            }
            found
        };
        self.input_withdrawn(backend, session_id, request_id).await;
        if let Some(approval_id) = approval {
            self.store(
                session_id,
                EventKind::ApprovalResolved(ApprovalResolved {
                    approval_id: approval_id.into(),
                    decision: None,
                    by: "runtime".into(),
                }),
            )
            .await;
        }
    }

    /// Refuses a server request nothing here can answer, so codex does not wait forever.
    pub(super) async fn refuse(&self, backend: &Backend, id: RequestId, method: &str) {
        tracing::info!(
            method,
            "refusing a codex server request cohost does not relay"
        );
        let _ = backend
            .rpc
            .respond_error(id, -32601, &format!("cohost does not handle {method}"))
            .await;
    }
}
