//! [`SessionHost`] for [`PiHost`]: create, restore, inject, interrupt, approvals, close,
//! models, doctor — the seam's methods over the host's own (`mod.rs`).

use std::sync::Arc;

use super::super::normalize::DECISIONS;
use super::super::wire::{ExtensionUiResponse, RpcCommand};
use super::{
    APPROVAL_POLICIES, DEFAULT_POLICY, GATED, Live, NO_TERMINAL, PiHost, PiHostDoctor, new_turn_id,
};
use crate::protocol::{PolicyChoice, PolicyField, RuntimeChoices};
use crate::protocol::{Runtime, SessionState};
use crate::runtime::common::{hosted, inject, lock};
use crate::runtime::{
    AdoptRequest, AfterRestart, Capability, CreateSession, Forked, HostError, InjectOutcome,
    InjectState, RuntimeDoctor, SessionHost, TerminalSpec,
};

#[async_trait::async_trait]
impl SessionHost for PiHost {
    fn runtime(&self) -> Runtime {
        Runtime::Pi
    }

    async fn log_found(&self) {
        let Ok(bin) = &self.inner.bin else {
            return;
        };
        match super::super::process::version(bin).await {
            Ok(version) => match crate::peers::PI.warning(&version) {
                Some(warning) => tracing::warn!(%version, "{warning}; pi sessions are refused"),
                None => {
                    tracing::info!(%version, tested = %crate::peers::PI.range(), "pi found")
                }
            },
            Err(error) => tracing::warn!(%error, "pi found, but its version is unknown"),
        }
    }

    fn start_choices(&self) -> RuntimeChoices {
        RuntimeChoices {
            runtime: Runtime::Pi,
            policy_field: PolicyField::ApprovalPolicy,
            policies: vec![
                PolicyChoice::new(
                    "on-request",
                    "ask before any tool but read, grep, find, ls (default)",
                ),
                PolicyChoice::new("untrusted", "ask before any tool but read, grep, find, ls"),
                PolicyChoice::new("never", "never ask"),
            ],
        }
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        GATED.check_create(request)
    }

    async fn create(
        &self,
        request: CreateSession,
    ) -> Result<crate::protocol::HostedSessionView, HostError> {
        self.create_session(request, None).await
    }

    async fn restore(&self) {
        let sessions: Vec<String> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Pi && !s.is_closed())
                // An adopted TUI is followed from its session file, never restarted here.
                .filter(|s| s.adopted.is_none())
                .map(|s| s.id.clone())
                .collect()
        });
        for session_id in sessions {
            let live = self.inner.live_for(&session_id);
            hosted::resuming_lost(&self.inner.core, &live.session_id).await;
            let host = self.clone();
            tokio::spawn(async move {
                // Pi went down with the daemon: what it ran was cut short.
                host.inner.end_cut_turn(&live.session_id).await;
                if let Err(error) = host.bind(&live).await {
                    tracing::warn!(session = %live.session_id, %error, "could not restore the pi session");
                    host.inner
                        .status(
                            &live.session_id,
                            SessionState::Lost,
                            Some(error.to_string()),
                        )
                        .await;
                }
            });
        }
        self.adoptions().restore();
    }

    async fn inject(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        if self.adoptions().is_adopted(session) {
            return self.adoptions().inject(session, text, key).await;
        }
        let live = self.inner.live_session(session)?;
        let _serialized = live.inject.lock().await;
        if let Some(earlier) = inject::previous(&self.inner.core, session, key.as_deref()) {
            return Ok(earlier);
        }
        hosted::check_not_lost(&self.inner.core, session)?;
        let process = self.inner.wait_bound(&live).await?;
        // A run under way (or one cohost just started, whose first event is still coming):
        // the prompt steers it. Otherwise it starts a run, under a turn id named now.
        let (running, turn_id) = {
            let mut forwarder = lock(&live.forwarder);
            match forwarder
                .current
                .clone()
                .or_else(|| forwarder.pending_api.back().cloned())
            {
                Some(running) => (true, running),
                None => {
                    let turn_id = new_turn_id();
                    forwarder.pending_api.push_back(turn_id.clone());
                    (false, turn_id)
                }
            }
        };
        if running {
            process
                .request(RpcCommand::Steer {
                    message: text.to_string(),
                })
                .await?;
            return Ok(inject::record(
                &self.inner.core,
                session,
                InjectState::Steered,
                &turn_id,
                key,
            )
            .await?);
        }
        if let Err(error) = process
            .request(RpcCommand::Prompt {
                message: text.to_string(),
            })
            .await
        {
            lock(&live.forwarder)
                .pending_api
                .retain(|pending| *pending != turn_id);
            return Err(error.into());
        }
        Ok(inject::record(
            &self.inner.core,
            session,
            InjectState::Started,
            &turn_id,
            key,
        )
        .await?)
    }

    async fn interrupt(&self, session: &str, turn: Option<&str>) -> Result<bool, HostError> {
        if self.adoptions().is_adopted(session) {
            return self.adoptions().interrupt(session, turn).await;
        }
        self.do_interrupt(session, turn).await
    }

    fn adopts(&self) -> Option<&'static str> {
        Some(super::super::adopt::AGENT)
    }

    async fn adopt(
        &self,
        request: AdoptRequest,
    ) -> Result<crate::protocol::HostedSessionView, HostError> {
        let id = self.adoptions().adopt(request).await?;
        super::super::adopt::view(&self.inner.core, &id)
    }

    async fn rehome(&self, session: &str) -> Result<crate::protocol::HostedSessionView, HostError> {
        Err(HostError::Unsupported(format!(
            "an adopted pi cannot be rehomed (session `{session}`): cohost hosts pi through `pi --mode rpc`, which runs no TUI in a pane; disown it to give it back"
        )))
    }

    async fn disown(&self, session: &str) -> Result<crate::protocol::HostedSessionView, HostError> {
        if !self.adoptions().is_adopted(session) {
            return Err(HostError::NotAdopted(session.to_string()));
        }
        self.adoptions().disown(session).await?;
        super::super::adopt::view(&self.inner.core, session)
    }

    async fn resolve_approval(
        &self,
        session: &str,
        approval: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        hosted::check_decision(decision, &DECISIONS)?;
        let live = self.inner.live_session(session)?;
        let decide = live.decide.lock().await;
        let pending = lock(&live.dialogs).pending.remove(approval);
        if !pending {
            return Err(hosted::not_pending(&self.inner.core, session, approval));
        }
        let Some(process) = live.process.borrow().clone() else {
            return Err(HostError::NotReady(session.to_string()));
        };
        let answer = match decision {
            "accept" => ExtensionUiResponse::confirmed(approval, true),
            "decline" => ExtensionUiResponse::confirmed(approval, false),
            _ => ExtensionUiResponse::cancelled(approval),
        };
        process.answer_dialog(&answer).await?;
        hosted::record_resolved(&self.inner.core, session, approval, decision, by).await?;
        if decision == "cancel" {
            // `cancel` blocks the call and stops the turn.
            self.interrupt_locked(&live, None).await?;
        }
        drop(decide);
        Ok(())
    }

    async fn close(&self, session: &str) -> Result<(), HostError> {
        if self.adoptions().is_adopted(session) {
            // Closing an adopted session gives the TUI back; nothing of it is stopped.
            return self.adoptions().disown(session).await;
        }
        let live = self.inner.live_session(session)?;
        let _ = self.do_interrupt(session, None).await;
        live.cancel.cancel();
        if let Some(process) = live.process.send_replace(None) {
            process.stop().await;
        }
        lock(&self.inner.live).remove(session);
        hosted::record_closed(&self.inner.core, session).await
    }

    async fn fork(&self, session: &str, after_turn: Option<String>) -> Result<Forked, HostError> {
        Ok(Ok(self.fork_session(session, after_turn).await?))
    }

    async fn terminal_spec(
        &self,
        _session: &str,
        _include_token: bool,
    ) -> Result<TerminalSpec, HostError> {
        Err(HostError::Unsupported(NO_TERMINAL.into()))
    }

    async fn open_terminal(
        &self,
        _session: &str,
        _tmux_session: Option<String>,
    ) -> Result<crate::protocol::HostedSessionView, HostError> {
        Err(HostError::Unsupported(NO_TERMINAL.into()))
    }

    async fn relaunch(&self, _session: &str) -> Result<(), HostError> {
        Err(HostError::Unsupported(NO_TERMINAL.into()))
    }

    fn after_restart(&self) -> AfterRestart {
        // Pi (and the run it had) went with the daemon.
        AfterRestart::Lost
    }

    /// The hosted part of `cohost doctor`'s `pi` section: the `pi` sessions run, the policies
    /// and why there is no co-driving. Found, release and range, and the Node that release
    /// needs, are the watcher's checks of the same section (`watch::doctor`), which the service
    /// merges in; nothing here is an issue (Pi is optional, and a release outside the range is
    /// refused when a session starts, saying why).
    async fn doctor(&self) -> RuntimeDoctor {
        RuntimeDoctor::of(&PiHostDoctor {
            hosted_path: self
                .inner
                .bin
                .as_ref()
                .ok()
                .map(|p| p.display().to_string()),
            approval_policies: APPROVAL_POLICIES.to_vec(),
            default_approval_policy: DEFAULT_POLICY,
            co_driving: NO_TERMINAL,
            issues: Vec::new(),
            warnings: Vec::new(),
        })
    }

    async fn shutdown(&self) {
        let lives: Vec<Arc<Live>> = lock(&self.inner.live).values().cloned().collect();
        for live in lives {
            live.cancel.cancel();
            if let Some(process) = live.process.send_replace(None) {
                process.stop().await;
            }
        }
    }

    async fn set_model(
        &self,
        session: &str,
        model: &str,
        thinking_level: Option<&str>,
    ) -> Result<Capability, HostError> {
        self.switch_model(session, model, thinking_level).await
    }

    async fn models(&self) -> Result<Capability, HostError> {
        if let Err(error) = &self.inner.bin {
            return Ok(Capability::fail("unsupported", error.clone()));
        }
        match self.list_models().await {
            Ok(models) => Ok(Capability::ok(models)),
            Err(error) => Ok(Capability::fail("error", error.to_string())),
        }
    }
}
