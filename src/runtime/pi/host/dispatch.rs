//! The dispatch task of one session: reads its Pi's events, runs each through the
//! [`Forwarder`](super::Forwarder) and performs the effects in order; when Pi's output ends,
//! the running turn ends `interrupted` (`lost`), its open dialogs are resolved by the runtime
//! and the session is `lost`. So too if the task panics (`common::caught`), after stopping Pi,
//! which no one would follow any more. The session's status goes to the tracker
//! ([`Inner::report`]).

use std::sync::Arc;

use tokio::sync::mpsc;

use super::super::normalize::Effect;
use super::super::process::PiProcess;
use super::super::wire::{ExtensionUiResponse, PiEvent};
use super::{Inner, Live};
use crate::protocol::{AgentStatus, EventKind, Liveness, SessionState, TurnCompleted, TurnStatus};
use crate::runtime::common::child::tail_suffix;
use crate::runtime::common::hosted::resolved_by_runtime;
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::common::{caught, lock};

pub(super) async fn dispatch(
    inner: Arc<Inner>,
    live: Arc<Live>,
    process: Arc<PiProcess>,
    events: mpsc::Receiver<PiEvent>,
) {
    let (turn_error, message) = match caught::caught(follow(&inner, &live, &process, events)).await
    {
        Ok(()) if live.cancel.is_cancelled() => return,
        Ok(()) => {
            tracing::warn!(session = %live.session_id, pid = process.pid, "pi went away");
            let tail = tail_suffix(&process.tail.render());
            let message = format!("pi (pid {}) went away{tail}", process.pid);
            ("pi went away", message)
        }
        Err(panic) => {
            tracing::error!(session = %live.session_id, pid = process.pid, %panic, "the pi dispatch panicked; stopping pi");
            process.stop().await;
            let sessions = [live.session_id.clone()];
            let message = caught::lost(&inner.failures, "pi dispatch", &sessions, &panic);
            ("cohost stopped following pi", message)
        }
    };
    let settle = async |message| went_away(&inner, &live, &process, turn_error, message).await;
    caught::settle_caught(&inner.core, &live.session_id, message, settle).await;
}

/// Performs the effects of Pi's events until its output ends or the session is closed.
async fn follow(
    inner: &Arc<Inner>,
    live: &Arc<Live>,
    process: &Arc<PiProcess>,
    mut events: mpsc::Receiver<PiEvent>,
) {
    loop {
        let event = tokio::select! {
            _ = live.cancel.cancelled() => return,
            event = events.recv() => event,
        };
        let Some(event) = event else { break };
        let effects = lock(&live.forwarder).apply(event);
        // A gate dialog cancelled at once (an interrupt is under way) is not stored as asked.
        let mut cancelled: Option<String> = None;
        for effect in effects {
            match effect {
                Effect::Store(EventKind::ApprovalRequested(asked))
                    if cancelled.as_deref() == Some(asked.approval_id.as_str()) => {}
                Effect::Store(kind) => inner.store(&live.session_id, kind).await,
                Effect::Publish(kind) => inner.core.publish(Some(live.session_id.clone()), kind),
                Effect::Report(status) => inner.report(&live.session_id, status).await,
                Effect::HoldApproval { approval_id } => {
                    let interrupting = {
                        let mut dialogs = lock(&live.dialogs);
                        if !dialogs.interrupting {
                            dialogs.pending.insert(approval_id.clone());
                        }
                        dialogs.interrupting
                    };
                    if interrupting {
                        answer_cancelled(process, &approval_id).await;
                        cancelled = Some(approval_id);
                    }
                }
                Effect::DismissDialog { request_id } => {
                    answer_cancelled(process, &request_id).await;
                }
            }
        }
    }
}

/// Pi went away (or is no longer followed): ends the running turn (`turn_error`), settles its
/// dialogs, and says the session is lost (`message`).
async fn went_away(
    inner: &Arc<Inner>,
    live: &Arc<Live>,
    process: &Arc<PiProcess>,
    turn_error: &str,
    message: String,
) {
    let running = {
        let forwarder = lock(&live.forwarder);
        forwarder
            .current
            .clone()
            .or_else(|| forwarder.pending_api.back().cloned())
    };
    if let Some(turn_id) = running {
        let effects = lock(&live.forwarder).end_turn(TurnCompleted {
            turn_id,
            status: TurnStatus::Interrupted,
            error: Some(turn_error.into()),
            duration_ms: None,
            lost: true,
        });
        for effect in effects {
            if let Effect::Store(kind) = effect {
                inner.store(&live.session_id, kind).await;
            }
        }
        inner
            .report(&live.session_id, AgentStatus::Interrupted)
            .await;
    }
    let _ = live.process.send_if_modified(|current| {
        if current.as_ref().is_some_and(|p| Arc::ptr_eq(p, process)) {
            *current = None;
            true
        } else {
            false
        }
    });
    let orphaned: Vec<String> = std::mem::take(&mut lock(&live.dialogs).pending)
        .into_iter()
        .collect();
    for approval_id in orphaned {
        inner
            .store(&live.session_id, resolved_by_runtime(approval_id, None))
            .await;
    }
    inner
        .status(&live.session_id, SessionState::Lost, Some(message))
        .await;
}

async fn answer_cancelled(process: &PiProcess, id: &str) {
    if let Err(error) = process
        .answer_dialog(&ExtensionUiResponse::cancelled(id))
        .await
    {
        tracing::warn!(%error, "could not cancel a pi dialog");
    }
}

impl Inner {
    /// Mirrors the session's status into the tracker as agent `pi`, keyed by Pi's session id,
    /// in the tmux session whose directory holds the session's cwd (Pi runs in no pane).
    async fn report(&self, session_id: &str, status: AgentStatus) {
        let Some((cwd, Some(thread))) = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.created.cwd.clone(), s.thread_id.clone()))
        }) else {
            return;
        };
        mirror::report(
            &self.core,
            &self.tmux,
            Report {
                agent: "pi",
                thread_id: &thread,
                session_id,
                placement: Placement::Cwd(&cwd),
                status,
                liveness: Liveness::Alive,
            },
        )
        .await;
    }
}
