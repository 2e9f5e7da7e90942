//! The claude host behind the runtime seam: [`SessionHost`] for [`ClaudeHost`].

use super::host::{ClaudeHost, CreateClaude};
use crate::protocol::{HostedSessionView, Runtime};
use crate::runtime::{AfterRestart, CreateSession, Forked, HostError, InjectOutcome, SessionHost};

#[async_trait::async_trait]
impl SessionHost for ClaudeHost {
    fn runtime(&self) -> Runtime {
        Runtime::Claude
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        let codex_only = [
            ("approvalPolicy", request.approval_policy.is_some()),
            ("sandbox", request.sandbox.is_some()),
            ("budget", request.budget.is_some()),
        ];
        if let Some((field, _)) = codex_only.iter().find(|(_, given)| *given) {
            return Err(HostError::field(
                field,
                format!("`{field}` applies to codex sessions only"),
            ));
        }
        if request.terminal {
            return Err(HostError::field(
                "terminal",
                "`terminal` applies to codex (claude sessions always have one) sessions only",
            ));
        }
        if let Some(mode) = &request.permission_mode
            && let Some(refusal) = self.permission_policy().refusal(mode)
        {
            return Err(HostError::field("permissionMode", refusal));
        }
        Ok(())
    }

    async fn create(&self, request: CreateSession) -> Result<HostedSessionView, HostError> {
        ClaudeHost::create(
            self,
            CreateClaude {
                cwd: request.cwd,
                model: request.model,
                permission_mode: request.permission_mode,
                tmux_session: request.tmux_session,
                idempotency_key: request.idempotency_key,
                fork_of: None,
            },
        )
        .await
    }

    fn restore(&self) {
        ClaudeHost::restore(self)
    }

    async fn inject(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        ClaudeHost::inject(self, session, text, key).await
    }

    async fn interrupt(&self, session: &str, turn: Option<&str>) -> Result<bool, HostError> {
        ClaudeHost::interrupt(self, session, turn).await
    }

    async fn resolve_approval(
        &self,
        session: &str,
        approval: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        ClaudeHost::resolve_approval(self, session, approval, decision, by).await
    }

    async fn close(&self, session: &str) -> Result<(), HostError> {
        ClaudeHost::close(self, session).await
    }

    async fn answer_request(
        &self,
        session: &str,
        request: &crate::protocol::InputRequested,
        answer: crate::protocol::InputAnswer,
    ) -> Result<Option<String>, HostError> {
        ClaudeHost::answer_request(self, session, request, answer).await
    }

    fn modes(&self) -> &'static [&'static str] {
        &super::host::MODES
    }

    async fn set_mode(
        &self,
        session: &str,
        mode: &str,
    ) -> Result<crate::runtime::Capability, HostError> {
        ClaudeHost::set_mode(self, session, mode).await
    }

    async fn fork(&self, session: &str, after_turn: Option<String>) -> Result<Forked, HostError> {
        if after_turn.is_some() {
            return Err(HostError::field(
                "afterTurnId",
                "claude forks the whole conversation; `afterTurnId` is codex only",
            ));
        }
        Ok(Ok(ClaudeHost::fork(self, session).await?))
    }

    async fn relaunch(&self, session: &str) -> Result<(), HostError> {
        ClaudeHost::relaunch(self, session).await
    }

    fn after_restart(&self) -> AfterRestart {
        // The TUI runs in tmux and outlives the daemon: a turn it started still ends.
        AfterRestart::Continues
    }

    async fn doctor(&self) -> serde_json::Value {
        serde_json::json!(ClaudeHost::doctor(self).await)
    }

    async fn shutdown(&self) {
        ClaudeHost::shutdown(self)
    }

    async fn permission_request(
        &self,
        session: &str,
        request_id: &str,
        payload: serde_json::Value,
    ) -> Result<serde_json::Value, HostError> {
        ClaudeHost::permission_request(self, session, request_id, payload).await
    }

    fn watches_human_input(&self) -> bool {
        true
    }

    async fn human_input(&self, session: &str) -> Result<Option<String>, HostError> {
        ClaudeHost::draft(self, session).await
    }

    async fn clear_input(&self, session: &str, text: &str) -> Result<bool, HostError> {
        ClaudeHost::clear_draft(self, session, text).await
    }
}
