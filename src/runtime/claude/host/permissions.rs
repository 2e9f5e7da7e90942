//! The permission relay of `ClaudeHost`: `cohost-hook`'s `PermissionRequest` waits here for a
//! decision from any surface (or gives Claude back its own prompt after [`PERMISSION_TIMEOUT`]),
//! and `resolve_approval` hands the first decision to the waiting hook.
//!
//! Questions and plans, which reach cohost through the same hook, are `asks.rs`'s.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{ClaudeHost, lock};
use crate::core::now_ms;
use crate::formats::claude::HookLine;
use crate::protocol::{ApprovalResolved, EventKind};
use crate::runtime::HostError;
use crate::runtime::claude::normalize::{self, Normalizer, Output};

/// How long a permission request waits for a decision before Claude shows its own prompt.
pub const PERMISSION_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a decision waits for the permission hook of a stored request to connect.
pub(super) const HOOK_CONNECT_GRACE: Duration = Duration::from_secs(10);

impl ClaudeHost {
    /// The permission hook's request: waits for a decision from any surface.
    pub(super) async fn permission_request(
        &self,
        session_id: &str,
        request_id: &str,
        payload: Value,
    ) -> Result<Value, HostError> {
        let live = self.live_session(session_id)?;
        // A question or a plan waits for an answer, not a permission decision.
        if let Some(answer) = self
            .input_permission(session_id, request_id, &payload)
            .await
        {
            return answer;
        }
        // The hook line may not have been tailed yet: store the request now (deduplicated).
        let line = HookLine::permission_request(now_ms(), request_id, &payload);
        let claude_session = line.payload.common.session_id.clone().unwrap_or_default();
        let approval_id = normalize::approval_id(&claude_session, request_id);
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.permissions).insert(approval_id.clone(), (session_id.to_string(), tx));
        let mut normalizer = Normalizer::resume(Some(claude_session.clone()), None, None);
        for output in normalizer.hook_line(&line, now_ms()) {
            if let Output::Store(kind @ EventKind::ApprovalRequested(_)) = output {
                self.inner.store(session_id, kind).await;
            }
        }
        let _ = &live;
        let decision = tokio::select! {
            decision = rx => decision.ok(),
            _ = tokio::time::sleep(PERMISSION_TIMEOUT) => None,
            _ = self.inner.cancel.cancelled() => None,
        };
        lock(&self.inner.permissions).remove(&approval_id);
        Ok(match decision.as_deref() {
            Some("accept") | Some("acceptForSession") => json!({ "behavior": "allow" }),
            Some("decline") => {
                json!({ "behavior": "deny", "message": "Denied through cohost.", "interrupt": false })
            }
            Some("cancel") => {
                json!({ "behavior": "deny", "message": "Cancelled through cohost.", "interrupt": true })
            }
            _ => {
                self.inner
                    .store(
                        session_id,
                        EventKind::ApprovalResolved(ApprovalResolved {
                            approval_id: approval_id.into(),
                            decision: None,
                            by: "runtime".into(),
                        }),
                    )
                    .await;
                json!({ "behavior": "ask" })
            }
        })
    }

    pub(super) async fn resolve_approval(
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
        self.live_session(session_id)?;
        // The hook writes its hooks.jsonl line before it connects: a decision can arrive for an
        // approval that is stored but whose hook is not waiting yet. Give it a moment.
        let deadline = tokio::time::Instant::now() + HOOK_CONNECT_GRACE;
        let pending = loop {
            let taken = {
                let mut permissions = lock(&self.inner.permissions);
                match permissions.get(approval_id) {
                    Some((owner, _)) if owner == session_id => permissions.remove(approval_id),
                    _ => None,
                }
            };
            if taken.is_some() {
                break taken;
            }
            let known = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.approvals.get(approval_id))
                    .map(|a| a.resolved.is_some())
            });
            match known {
                Some(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(_) => return Err(HostError::ApprovalResolved(approval_id.to_string())),
                None => return Err(HostError::UnknownApproval(approval_id.to_string())),
            }
        };
        let Some((_, tx)) = pending else {
            return Err(HostError::ApprovalResolved(approval_id.to_string()));
        };
        if tx.send(decision.to_string()).is_err() {
            return Err(HostError::ApprovalResolved(approval_id.to_string()));
        }
        self.inner
            .store(
                session_id,
                EventKind::ApprovalResolved(ApprovalResolved {
                    approval_id: approval_id.into(),
                    decision: Some(decision.into()),
                    by: by.into(),
                }),
            )
            .await;
        Ok(())
    }
}
