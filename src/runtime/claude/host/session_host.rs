//! The claude host behind the runtime seam: [`SessionHost`] for [`ClaudeHost`], which is its
//! API. The work is done in the concern files (`launch.rs`, `prompt.rs`, …) by methods private
//! to the host; the small operations (restore, fork, close, shutdown) are written out here.

use std::path::PathBuf;

use super::{ClaudeHost, CreateClaude, lock};
use crate::protocol::{
    EventKind, Field, HostedSessionView, PolicyChoice, PolicyField, Runtime, RuntimeChoices,
    SessionClosed, message,
};
use crate::runtime::{
    AdoptRequest, AfterRestart, CreateSession, Forked, HostError, InjectOutcome, SessionHost,
};

#[async_trait::async_trait]
impl SessionHost for ClaudeHost {
    async fn log_found(&self) {
        let doctor = ClaudeHost::doctor(self).await;
        match &doctor.version {
            Some(version) => match doctor.warnings.first() {
                Some(warning) => tracing::warn!(%version, "{warning}"),
                None => {
                    tracing::info!(%version, tested = %crate::peers::CLAUDE.range(), permission_mode = doctor.permission_mode, "claude found")
                }
            },
            None => {
                tracing::info!(issues = ?doctor.issues, "claude is not usable; claude sessions are unavailable")
            }
        }
    }

    fn runtime(&self) -> Runtime {
        Runtime::Claude
    }

    fn start_choices(&self) -> RuntimeChoices {
        let policy = self.permission_policy();
        let labels = [
            ("default", "ask before acting (default)"),
            ("acceptEdits", "accept file edits"),
            ("plan", "plan first"),
            ("auto", "auto: Claude decides what needs asking"),
            ("bypassPermissions", "bypass permissions: never ask"),
        ];
        RuntimeChoices {
            runtime: Runtime::Claude,
            policy_field: PolicyField::PermissionMode,
            policies: labels
                .into_iter()
                .map(|(mode, label)| PolicyChoice {
                    allowed: policy.allows(mode),
                    ..PolicyChoice::new(mode, label)
                })
                .collect(),
        }
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        let codex_only = [
            (Field::ApprovalPolicy, request.approval_policy.is_some()),
            (Field::Sandbox, request.sandbox.is_some()),
            (Field::Budget, request.budget.is_some()),
        ];
        if let Some(&(field, _)) = codex_only.iter().find(|(_, given)| *given) {
            return Err(HostError::field(
                field,
                message![field, " applies to codex sessions only"],
            ));
        }
        if request.terminal {
            return Err(HostError::field(
                Field::Terminal,
                message![
                    Field::Terminal,
                    " applies to codex (claude sessions always have one) sessions only"
                ],
            ));
        }
        if let Some(mode) = &request.permission_mode
            && let Some(refusal) = self.permission_policy().refusal(mode)
        {
            return Err(HostError::field(Field::PermissionMode, refusal));
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
                profile: request.profile,
            },
        )
        .await
    }

    /// Re-attaches to every open claude session after a daemon restart: the panes kept running
    /// under tmux, and the tails resume from their checkpoints.
    async fn restore(&self) {
        let sessions: Vec<String> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Claude && !s.is_closed())
                .map(|s| s.id.clone())
                .collect()
        });
        for session_id in sessions {
            let dir = self
                .inner
                .config
                .cohost_home
                .join("claude")
                .join(&session_id);
            self.inner.start_following(&session_id, dir, true);
        }
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

    /// Stops the session: the runner and the TUI go, the pane closes, `session.closed` is logged.
    /// An adopted Claude runs in a person's own pane, which cohost never kills: closing its
    /// session gives it back (`disown`).
    async fn close(&self, session_id: &str) -> Result<(), HostError> {
        let live = self.live_session(session_id)?;
        if live.adopted.is_some() {
            return ClaudeHost::disown(self, session_id).await.map(|_| ());
        }
        if let Some(pane) = self
            .inner
            .core
            .read(|state| state.sessions.get(session_id).and_then(|s| s.pane.clone()))
            && self.tmux().pane_pid(&pane.pane_id).await == Some(pane.runner_pid)
        {
            let _ = self.tmux().kill_pane(&pane.pane_id).await;
        }
        live.cancel.cancel();
        lock(&self.inner.live).remove(session_id);
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionClosed(SessionClosed {
                    reason: "closed through the API".into(),
                }),
            )
            .await?;
        Ok(())
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
        &super::MODES
    }

    async fn set_mode(
        &self,
        session: &str,
        mode: &str,
    ) -> Result<crate::runtime::Capability, HostError> {
        ClaudeHost::set_mode(self, session, mode).await
    }

    /// Forks the conversation into a new session (`--resume <id> --fork-session`).
    async fn fork(
        &self,
        session_id: &str,
        after_turn: Option<String>,
    ) -> Result<Forked, HostError> {
        if after_turn.is_some() {
            return Err(HostError::field(
                Field::AfterTurnId,
                message![
                    "claude forks the whole conversation; ",
                    Field::AfterTurnId,
                    " is codex only"
                ],
            ));
        }
        let record = self
            .inner
            .core
            .read(|state| state.sessions.get(session_id).cloned())
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))?;
        let claude_session = record
            .thread_id
            .clone()
            .ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        let view = ClaudeHost::create(
            self,
            CreateClaude {
                cwd: PathBuf::from(&record.created.cwd),
                model: record.created.model.clone(),
                permission_mode: record
                    .created
                    .claude_permission_mode()
                    .map(|mode| mode.to_string()),
                tmux_session: record.pane.as_ref().map(|p| p.tmux_session.clone()),
                idempotency_key: None,
                fork_of: Some((claude_session, session_id.to_string())),
                profile: record.created.profile.as_deref().map(|profile| {
                    crate::runtime::common::profile_secrets::restore(
                        &self.inner.config.cohost_home,
                        session_id,
                        profile,
                    )
                }),
            },
        )
        .await?;
        Ok(Ok(view))
    }

    async fn relaunch(&self, session: &str) -> Result<(), HostError> {
        if self.live_session(session)?.adopted.is_some() {
            return Err(HostError::Unsupported(
                "an adopted claude runs in a person's own pane: cohost does not relaunch it".into(),
            ));
        }
        ClaudeHost::relaunch(self, session).await
    }

    fn adopts(&self) -> Option<&'static str> {
        Some(super::adopt::AGENT)
    }

    async fn adopt(&self, request: AdoptRequest) -> Result<HostedSessionView, HostError> {
        ClaudeHost::adopt(self, request).await
    }

    async fn disown(&self, session: &str) -> Result<HostedSessionView, HostError> {
        ClaudeHost::disown(self, session).await
    }

    async fn rehome(&self, session: &str) -> Result<HostedSessionView, HostError> {
        ClaudeHost::rehome(self, session).await
    }

    fn after_restart(&self) -> AfterRestart {
        // The TUI runs in tmux and outlives the daemon: a turn it started still ends.
        AfterRestart::Continues
    }

    async fn doctor(&self) -> crate::runtime::RuntimeDoctor {
        crate::runtime::RuntimeDoctor::of(&ClaudeHost::doctor(self).await)
    }

    async fn shutdown(&self) {
        self.inner.cancel.cancel();
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
