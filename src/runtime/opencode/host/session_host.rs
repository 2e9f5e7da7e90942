//! [`SessionHost`] for [`OpencodeHost`]: create, restore, inject, interrupt, approvals,
//! questions, model, close, fork, co-driving (`terminal.rs`), doctor — the seam's methods over
//! the host's own (`mod.rs`, `asks.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use super::super::normalize::{self, DECISIONS, DECLINE_MESSAGE};
use super::super::wire::{MessageWithParts, PermissionReplyBody, PromptBody};
use super::{
    APPROVAL_POLICIES, DEFAULT_POLICY, GATED, Live, OpencodeDoctor, OpencodeHost, path_segment,
};
use crate::protocol::{
    EventKind, Field, ForkOrigin, HostedSessionView, InputAnswer, InputRequested, Runtime,
    SessionState, message,
};
use crate::protocol::{PolicyChoice, PolicyField, RuntimeChoices};
use crate::runtime::common::{hosted, inject, lock};
use crate::runtime::{
    AdoptRequest, AfterRestart, Capability, CreateSession, Forked, HostError, InjectOutcome,
    InjectState, RuntimeDoctor, SessionHost,
};

/// How long an inject waits for its prompt's user message to show on OpenCode's stream (it
/// shows within a tenth of a second: `hosting-opencode-pi-observed.md`).
const PLACEMENT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An id OpenCode accepts for a message cohost sends (`msg_` + 12 hex digits of the time in
/// ms × 4096 + a counter, + 14 base62 characters, like OpenCode's own ascending ids), so the
/// turn it opens is named before OpenCode answers, and its history sorts as OpenCode sorts it.
pub(super) fn message_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xfff;
    let value = (now.wrapping_mul(0x1000).wrapping_add(counter)) & 0xffff_ffff_ffff;
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut bytes = [0u8; 14];
    let _ = getrandom::fill(&mut bytes);
    let random: String = bytes
        .iter()
        .map(|b| BASE62[usize::from(*b) % BASE62.len()] as char)
        .collect();
    format!("msg_{value:012x}{random}")
}

#[async_trait::async_trait]
impl SessionHost for OpencodeHost {
    fn runtime(&self) -> Runtime {
        Runtime::Opencode
    }

    async fn log_found(&self) {
        if self.inner.bin.is_err() {
            return;
        }
        match self.version().await {
            Ok(version) => match crate::peers::OPENCODE.warning(&version) {
                Some(warning) => {
                    tracing::warn!(%version, "{warning}; opencode sessions are refused")
                }
                None => {
                    tracing::info!(%version, tested = %crate::peers::OPENCODE.range(), "opencode found")
                }
            },
            Err(error) => tracing::warn!(%error, "opencode found, but its version is unknown"),
        }
    }

    fn start_choices(&self) -> RuntimeChoices {
        RuntimeChoices {
            runtime: Runtime::Opencode,
            policy_field: PolicyField::ApprovalPolicy,
            policies: vec![
                PolicyChoice::new("on-request", "ask before tools that act (default)"),
                PolicyChoice::new("untrusted", "ask before tools that act"),
                PolicyChoice::new("never", "never ask"),
            ],
        }
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        GATED.check_create(request)
    }

    async fn create(&self, request: CreateSession) -> Result<HostedSessionView, HostError> {
        let (terminal, tmux_session) = (request.terminal, request.tmux_session.clone());
        let view = self.create_session(request, None).await?;
        if terminal {
            return self.open_pane(&view.id, tmux_session).await;
        }
        Ok(view)
    }

    async fn restore(&self) {
        let sessions: Vec<(String, Option<String>)> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Opencode && !s.is_closed())
                // An adopted TUI is followed from OpenCode's database, never restarted here.
                .filter(|s| s.adopted.is_none())
                .map(|s| (s.id.clone(), s.thread_id.clone()))
                .collect()
        });
        for (session_id, thread_id) in sessions {
            let live = self.inner.live_for(&session_id);
            hosted::resuming_lost(&self.inner.core, &live.session_id).await;
            let host = self.clone();
            tokio::spawn(async move {
                let result = match thread_id {
                    Some(thread_id) => host.bind(&live, Some(thread_id), None).await,
                    None => Err(HostError::failed(
                        Runtime::Opencode,
                        "the session was never bound to an opencode session",
                    )),
                };
                // The pane's TUI was attached to the server that went with the daemon: attach
                // it to the new one.
                if result.is_ok()
                    && host
                        .view(&live.session_id)
                        .is_ok_and(|v| v.pane_id.is_some())
                    && let Err(error) = host.relaunch_pane(&live.session_id).await
                {
                    tracing::warn!(session = %live.session_id, %error, "could not relaunch the opencode terminal");
                }
                if let Err(error) = result {
                    tracing::warn!(session = %live.session_id, %error, "could not restore the opencode session");
                    // The server that ran its turn went with the daemon, and none took it up.
                    let cut = "the daemon stopped during the turn";
                    hosted::end_cut_turn(
                        &host.inner.core,
                        &live.session_id,
                        Runtime::Opencode,
                        cut,
                    )
                    .await;
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
        let binding = self.inner.wait_bound(&live).await?;
        // Every prompt names the session's model (created with, or switched to: the one its
        // view shows). OpenCode's choice is sticky, but another client (an attached TUI) can
        // change it; cohost's prompts run on cohost's.
        let model = self.inner.current_model(session);
        let message_id = message_id();
        // A prompt while a turn runs: OpenCode queues it and folds it into the running loop's
        // next model call, and one `session.idle` ends both — it joins the running turn. So
        // does a prompt sent before the turn of an earlier one has started. Which of the two
        // it is shows with its user message (`Placement`): the answer waits for that.
        let mut placed = live.placed.subscribe();
        let mut bound = live.binding.subscribe();
        {
            let mut forwarder = lock(&live.forwarder);
            forwarder.pending_api.insert(message_id.clone());
            forwarder.placed.insert(message_id.clone(), None);
        }
        // The prompt's message will not show: its id is not waited on or counted any more.
        let forget = || {
            let mut forwarder = lock(&live.forwarder);
            forwarder.pending_api.remove(&message_id);
            forwarder.placed.remove(&message_id);
        };
        let path = format!(
            "/session/{}/prompt_async",
            path_segment(&binding.opencode_session)?
        );
        let sent = async {
            let mut body = serde_json::to_value(PromptBody::text(text, model))
                .map_err(|error| HostError::failed(Runtime::Opencode, error.to_string()))?;
            body["messageID"] = serde_json::Value::String(message_id.clone());
            binding.client().post(&path, &body).await?;
            Ok::<_, HostError>(())
        };
        if let Err(error) = sent.await {
            forget();
            return Err(error);
        }
        let deadline = tokio::time::Instant::now() + PLACEMENT_WAIT;
        let placement = loop {
            {
                let mut forwarder = lock(&live.forwarder);
                if let Some(Some(_)) = forwarder.placed.get(&message_id) {
                    break forwarder.placed.remove(&message_id).flatten();
                }
            }
            let gone = tokio::select! {
                changed = placed.changed() => changed.is_err().then_some("the session was closed"),
                _ = bound.wait_for(Option::is_none) => Some("the opencode server went away"),
                _ = live.cancel.cancelled() => Some("the session was closed"),
                _ = tokio::time::sleep_until(deadline) => {
                    forget();
                    break None;
                }
            };
            if let Some(gone) = gone {
                forget();
                // Its turn, if it started, was ended with the server (`went_away`).
                return Err(HostError::failed(
                    Runtime::Opencode,
                    format!("{gone} before the prompt showed in its session"),
                ));
            }
        };
        let running = lock(&live.forwarder).current.clone();
        let (state, turn_id) = match placement {
            Some(normalize::Placement::Opens) => (InjectState::Started, message_id),
            Some(normalize::Placement::Joins(turn_id)) => (InjectState::Steered, turn_id),
            None => {
                // OpenCode took the prompt and its message has not shown: the turn running
                // now, if any, is the best guess.
                tracing::warn!(
                    session,
                    message = %message_id,
                    "opencode accepted a prompt whose message did not show within {PLACEMENT_WAIT:?}"
                );
                match running {
                    Some(turn_id) => (InjectState::Steered, turn_id),
                    None => (InjectState::Started, message_id),
                }
            }
        };
        Ok(inject::record(&self.inner.core, session, state, &turn_id, key).await?)
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

    async fn adopt(&self, request: AdoptRequest) -> Result<HostedSessionView, HostError> {
        let id = self.adoptions().adopt(request).await?;
        super::super::adopt::view(&self.inner.core, &id)
    }

    async fn rehome(&self, session: &str) -> Result<HostedSessionView, HostError> {
        self.rehome_adopted(session).await
    }

    async fn disown(&self, session: &str) -> Result<HostedSessionView, HostError> {
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
        if self.adoptions().is_adopted(session) {
            return self
                .adoptions()
                .resolve_approval(session, approval, decision, by)
                .await;
        }
        hosted::check_decision(decision, &DECISIONS)?;
        let live = self.inner.live_session(session)?;
        let _decide = live.decide.lock().await;
        if !hosted::take_pending(&self.inner.approvals, approval, session) {
            return Err(hosted::not_pending(&self.inner.core, session, approval));
        }
        let Some(binding) = live.binding.borrow().clone() else {
            return Err(HostError::NotReady(session.to_string()));
        };
        let reply = match decision {
            "accept" => PermissionReplyBody {
                reply: "once",
                message: None,
            },
            "acceptForSession" => PermissionReplyBody {
                reply: "always",
                message: None,
            },
            "decline" => PermissionReplyBody {
                reply: "reject",
                message: Some(DECLINE_MESSAGE.to_string()),
            },
            _ => PermissionReplyBody {
                reply: "reject",
                message: None,
            },
        };
        let path = format!("/permission/{}/reply", path_segment(approval)?);
        match binding.client().post(&path, &reply).await {
            Ok(()) => {}
            // OpenCode no longer waits on it (answered in the attached TUI, or withdrawn).
            Err(error) if error.is_not_found() => {
                return Err(HostError::ApprovalResolved(approval.to_string()));
            }
            Err(error) => return Err(error.into()),
        }
        hosted::record_resolved(&self.inner.core, session, approval, decision, by).await
    }

    async fn close(&self, session: &str) -> Result<(), HostError> {
        if self.adoptions().is_adopted(session) {
            // Closing an adopted session gives the TUI back; nothing of it is stopped.
            return self.adoptions().disown(session).await;
        }
        let live = self.inner.live_session(session)?;
        let _ = self.do_interrupt(session, None).await;
        live.cancel.cancel();
        let binding = live.binding.send_replace(None);
        if let Some(binding) = binding {
            binding.server.stop().await;
        }
        lock(&self.inner.live).remove(session);
        lock(&self.inner.approvals).retain(|_, owner| owner != session);
        lock(&self.inner.questions).retain(|_, owner| owner != session);
        hosted::record_closed(&self.inner.core, session).await
    }

    async fn fork(&self, session: &str, after_turn: Option<String>) -> Result<Forked, HostError> {
        let live = self.inner.live_session(session)?;
        let binding = self.inner.wait_bound(&live).await?;
        let Some(created) = self.inner.settings(session) else {
            return Err(HostError::UnknownSession(session.to_string()));
        };
        // OpenCode forks up to (not including) a message: "after turn T" is up to the turn
        // that followed T. A turn's id is the user message that opened it.
        let message_id = match &after_turn {
            None => None,
            Some(turn) => {
                let path = format!(
                    "/session/{}/message",
                    path_segment(&binding.opencode_session)?
                );
                let history: Vec<MessageWithParts> = binding.client().get(&path).await?;
                let turns: Vec<String> = normalize::history(&history)
                    .into_iter()
                    .filter_map(|kind| match kind {
                        EventKind::TurnStarted(started) => Some(started.turn_id),
                        _ => None,
                    })
                    .collect();
                let Some(index) = turns.iter().position(|t| t == turn) else {
                    return Err(HostError::field(
                        Field::AfterTurnId,
                        message![format!("no turn `{turn}` in session `{session}`")],
                    ));
                };
                turns.get(index + 1).cloned()
            }
        };
        let request = CreateSession {
            cwd: PathBuf::from(&created.cwd),
            model: self
                .inner
                .current_model(session)
                .map(|m| format!("{}/{}", m.provider_id, m.model_id)),
            approval_policy: created
                .approval_policy
                .as_ref()
                .map(|p| p.as_str().to_string()),
            profile: created.profile.clone().map(|p| *p),
            ..CreateSession::default()
        };
        let origin = ForkOrigin {
            session_id: session.to_string(),
            after_turn_id: after_turn,
        };
        let view = self
            .create_session(
                request,
                Some((binding.opencode_session.clone(), origin, message_id)),
            )
            .await?;
        Ok(Ok(view))
    }

    /// `opencode attach` on the session's server: the TUI shows its history, its prompts run
    /// on the server (stored with `source: "other"`), and its permission answers settle
    /// cohost's approvals. The password is in the environment, never in argv.
    async fn terminal_spec(
        &self,
        session: &str,
        include_token: bool,
    ) -> Result<crate::runtime::TerminalSpec, HostError> {
        self.spec(session, include_token).await
    }

    /// A tmux pane running `opencode attach` on the session's server.
    async fn open_terminal(
        &self,
        session: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        self.open_pane(session, tmux_session).await
    }

    async fn relaunch(&self, session: &str) -> Result<(), HostError> {
        self.relaunch_pane(session).await
    }

    fn after_restart(&self) -> AfterRestart {
        // The server (and the turn it ran) went with the daemon.
        AfterRestart::Lost
    }

    async fn doctor(&self) -> RuntimeDoctor {
        let supported = crate::peers::OPENCODE;
        let mut issues = Vec::new();
        let mut warnings = Vec::new();
        let (found, path, version) = match &self.inner.bin {
            Ok(path) => {
                let version = match self.version().await {
                    Ok(version) => Some(version),
                    Err(error) => {
                        issues.push(error);
                        None
                    }
                };
                (true, Some(path.display().to_string()), version)
            }
            Err(error) => {
                warnings.push(format!("{error}; opencode sessions are unavailable"));
                (false, None, None)
            }
        };
        let version_place = version.as_deref().and_then(|v| supported.place(v));
        if let Some(version) = &version
            && version_place != Some(crate::peers::Place::Tested)
        {
            issues.push(format!(
                "opencode {version} is outside the releases cohost supports ({}); opencode sessions are refused",
                supported.range()
            ));
        }
        RuntimeDoctor::of(&OpencodeDoctor {
            found,
            path,
            version,
            supported,
            version_place,
            approval_policies: APPROVAL_POLICIES.to_vec(),
            default_approval_policy: DEFAULT_POLICY,
            issues,
            warnings,
        })
    }

    async fn shutdown(&self) {
        let lives: Vec<Arc<Live>> = lock(&self.inner.live).values().cloned().collect();
        for live in lives {
            live.cancel.cancel();
            if let Some(binding) = live.binding.send_replace(None) {
                binding.server.stop().await;
            }
        }
    }

    async fn answer_request(
        &self,
        session: &str,
        request: &InputRequested,
        answer: InputAnswer,
    ) -> Result<Option<String>, HostError> {
        self.answer_question(session, request, answer).await
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
