//! Approvals: a codex server request that asks for a decision is held (by approval id) from its
//! arrival until the first answer — a person's (`resolve_approval`) or codex's own
//! `serverRequest/resolved`; a request nothing here relays is refused so codex never waits.
//!
//! **Invariant:** an approval is answered at most once: the first answer removes it.

use std::sync::Arc;

use super::super::normalize;
use super::super::rpc::RequestId;
use super::{Backend, CodexHost, Inner, lock, wire};
use crate::runtime::HostError;
use crate::runtime::common::hosted;

impl CodexHost {
    /// Answers a pending approval. The first answer wins; later ones get a clear error.
    pub(in crate::runtime::codex) async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        hosted::check_decision(decision, &normalize::DECISIONS)?;
        self.inner.live_session(session_id)?;
        let pending = {
            let mut approvals = lock(&self.inner.approvals);
            match approvals.get(approval_id) {
                Some(pending) if pending.session_id == session_id => approvals.remove(approval_id),
                _ => None,
            }
        };
        let Some(pending) = pending else {
            return Err(hosted::not_pending(
                &self.inner.core,
                session_id,
                approval_id,
            ));
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
        hosted::record_resolved(&self.inner.core, session_id, approval_id, decision, by).await
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
            self.store(session_id, hosted::resolved_by_runtime(approval_id, None))
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
