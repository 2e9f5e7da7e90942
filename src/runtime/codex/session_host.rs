//! The codex host's API: [`SessionHost`] for [`CodexHost`]. The methods it calls are the host's
//! own, visible only inside `codex/`, so the seam is the one way in (besides the daemon's
//! wiring: `CodexHost::new`, `reap_idle`, `codex_bin`).

use super::host::{APPROVAL_POLICIES, CodexHost, CreateParams, SANDBOXES};

/// How often idle per-budget backends are looked for.
const REAP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
use crate::protocol::{
    Bare, Field, HostedSessionView, PolicyChoice, PolicyField, Runtime, RuntimeChoices, message,
};
use crate::runtime::{
    AdoptRequest, AfterRestart, Capability, CreateSession, Forked, HostError, InjectOutcome,
    SessionHost,
};

fn check_choice(field: Field, value: &Option<String>, allowed: &[&str]) -> Result<(), HostError> {
    match value {
        Some(value) if !allowed.contains(&value.as_str()) => Err(HostError::field(
            field,
            message![
                field,
                format!(" must be one of {}, got `{value}`", allowed.join(", "))
            ],
        )),
        _ => Ok(()),
    }
}

#[async_trait::async_trait]
impl SessionHost for CodexHost {
    async fn background(&self, cancel: tokio_util::sync::CancellationToken) {
        let mut interval = tokio::time::interval(REAP_INTERVAL);
        interval.tick().await;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = interval.tick() => self.reap_idle().await,
            }
        }
        tracing::debug!("backend reaper exited: shutdown");
    }

    async fn log_found(&self) {
        // A missing codex was warned about by the host already.
        let Ok(bin) = self.codex_bin() else { return };
        let mut bin = bin.clone();
        let scratch = self.scratch_home();
        let _ = std::fs::create_dir_all(&scratch);
        match bin.detect_version(&scratch).await {
            Ok(version) => match crate::peers::CODEX.warning(&version) {
                Some(warning) => tracing::warn!(%version, "{warning}"),
                None => {
                    tracing::info!(%version, tested = %crate::peers::CODEX.range(), "codex found")
                }
            },
            Err(error) => tracing::warn!(%error, "codex found, but `codex --version` failed"),
        }
    }

    fn runtime(&self) -> Runtime {
        Runtime::Codex
    }

    fn start_choices(&self) -> RuntimeChoices {
        RuntimeChoices {
            runtime: Runtime::Codex,
            policy_field: PolicyField::ApprovalPolicy,
            policies: vec![
                PolicyChoice::new("", "codex's default (as configured)"),
                PolicyChoice::new("untrusted", "ask before untrusted commands"),
                PolicyChoice::new("on-request", "the model asks when it needs to"),
                PolicyChoice::new("never", "never ask"),
            ],
        }
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        if request.permission_mode.is_some() {
            return Err(HostError::field(
                Field::PermissionMode,
                message![Field::PermissionMode, " applies to claude sessions only"],
            ));
        }
        if request.tmux_session.is_some() && !request.terminal {
            return Err(HostError::field(
                Field::TmuxSession,
                message![
                    Field::TmuxSession,
                    " needs `",
                    Bare(Field::Terminal),
                    ": true` for codex sessions"
                ],
            ));
        }
        check_choice(
            Field::ApprovalPolicy,
            &request.approval_policy,
            &APPROVAL_POLICIES,
        )?;
        check_choice(Field::Sandbox, &request.sandbox, &SANDBOXES)
    }

    async fn create(&self, request: CreateSession) -> Result<HostedSessionView, HostError> {
        let view = CodexHost::create(
            self,
            CreateParams {
                cwd: request.cwd,
                model: request.model,
                approval_policy: request.approval_policy,
                sandbox: request.sandbox,
                budget: request.budget,
                idempotency_key: request.idempotency_key,
                profile: request.profile,
            },
        )
        .await?;
        if request.terminal && view.pane_id.is_none() {
            return CodexHost::open_terminal(self, &view.id, request.tmux_session).await;
        }
        Ok(view)
    }

    async fn restore(&self) {
        CodexHost::restore(self).await;
        self.adoptions().restore();
    }

    async fn inject(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if self.adoptions().is_adopted(session) {
            return self.adoptions().inject(session, text, key).await;
        }
        CodexHost::inject(self, session, text, key).await
    }

    async fn interrupt(&self, session: &str, turn: Option<&str>) -> Result<bool, HostError> {
        if self.adoptions().is_adopted(session) {
            return self.adoptions().interrupt(session).await;
        }
        CodexHost::interrupt(self, session, turn).await
    }

    fn adopts(&self) -> Option<&'static str> {
        Some(super::adopt::AGENT)
    }

    async fn adopt(&self, request: AdoptRequest) -> Result<HostedSessionView, HostError> {
        let id = self.adoptions().adopt(request).await?;
        super::adopt::view(self.core(), &id)
    }

    async fn disown(&self, session: &str) -> Result<HostedSessionView, HostError> {
        if !self.adoptions().is_adopted(session) {
            return Err(HostError::NotAdopted(session.to_string()));
        }
        self.adoptions().disown(session).await?;
        super::adopt::view(self.core(), session)
    }

    async fn rehome(&self, session: &str) -> Result<HostedSessionView, HostError> {
        CodexHost::rehome(self, session).await
    }

    async fn resolve_approval(
        &self,
        session: &str,
        approval: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        if self.adoptions().is_adopted(session) {
            return self
                .adoptions()
                .resolve_approval(session, approval, decision, by)
                .await;
        }
        CodexHost::resolve_approval(self, session, approval, decision, by).await
    }

    async fn close(&self, session: &str) -> Result<(), HostError> {
        if self.adoptions().is_adopted(session) {
            // Closing an adopted session gives the TUI back; nothing of it is stopped.
            return self.adoptions().disown(session).await;
        }
        CodexHost::close(self, session).await
    }

    async fn answer_request(
        &self,
        session: &str,
        request: &crate::protocol::InputRequested,
        answer: crate::protocol::InputAnswer,
    ) -> Result<Option<String>, HostError> {
        CodexHost::answer_request(self, session, request, answer).await
    }

    fn modes(&self) -> &'static [&'static str] {
        &super::host::MODES
    }

    async fn set_mode(&self, session: &str, mode: &str) -> Result<Capability, HostError> {
        CodexHost::set_mode(self, session, mode).await
    }

    async fn inject_images(
        &self,
        session: &str,
        text: &str,
        images: Vec<crate::protocol::PromptImage>,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        CodexHost::inject_images(self, session, text, images, key).await
    }

    async fn fork(&self, session: &str, after_turn: Option<String>) -> Result<Forked, HostError> {
        CodexHost::fork(self, session, after_turn).await
    }

    async fn relaunch(&self, session: &str) -> Result<(), HostError> {
        CodexHost::relaunch_terminal(self, session).await
    }

    fn after_restart(&self) -> AfterRestart {
        // The backend (and the turn it ran) went with the daemon.
        AfterRestart::Lost
    }

    async fn doctor(&self) -> crate::runtime::RuntimeDoctor {
        crate::runtime::RuntimeDoctor::of(&CodexHost::doctor(self).await)
    }

    async fn shutdown(&self) {
        CodexHost::shutdown(self).await
    }

    async fn goal_get(&self, session: &str) -> Result<Capability, HostError> {
        CodexHost::goal_get(self, session).await
    }

    async fn goal_set(
        &self,
        session: &str,
        objective: Option<String>,
        status: Option<String>,
        token_budget: Option<u64>,
    ) -> Result<Capability, HostError> {
        CodexHost::goal_set(self, session, objective, status, token_budget).await
    }

    async fn goal_clear(&self, session: &str) -> Result<Capability, HostError> {
        CodexHost::goal_clear(self, session).await
    }

    async fn models(&self) -> Result<Capability, HostError> {
        CodexHost::models(self).await
    }

    async fn terminal_spec(
        &self,
        session: &str,
        include_token: bool,
    ) -> Result<crate::runtime::TerminalSpec, HostError> {
        CodexHost::terminal_spec(self, session, include_token).await
    }

    async fn open_terminal(
        &self,
        session: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        CodexHost::open_terminal(self, session, tmux_session).await
    }
}
