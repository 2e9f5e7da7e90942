//! The dispatch task of one session: reads its server's `/event` stream, runs each event of
//! the session through the [`Forwarder`](super::Forwarder) and performs the effects in order
//! (its status reported to the tracker among them);
//! when the stream ends, the running turn ends `interrupted` (`lost`) and the session `lost`.
//! So too if the task panics (`common::caught`), after stopping the server, which no one would
//! follow any more.

use std::sync::Arc;

use super::super::client::next_chunk;
use super::super::normalize::Effect;
use super::super::sse::SseDecoder;
use super::super::wire::Event;
use super::{Binding, Inner, Live};
use crate::protocol::{AgentStatus, SessionState, TurnCompleted, TurnStatus};
use crate::runtime::common::child::tail_suffix;
use crate::runtime::common::hosted::{resolved_by_runtime, take_all_pending};
use crate::runtime::common::{caught, lock};

/// The session's dispatch task: reads the server's stream until it ends or the session is
/// closed, and performs each event's effects in order.
pub(super) async fn dispatch(
    inner: Arc<Inner>,
    live: Arc<Live>,
    binding: Binding,
    body: hyper::body::Incoming,
    connected: tokio::sync::oneshot::Sender<()>,
) {
    let pid = binding.server.pid;
    let followed = follow(&inner, &live, &binding, body, connected);
    let (turn_error, message) = match caught::caught(followed).await {
        Ok(()) if live.cancel.is_cancelled() => return,
        Ok(()) => {
            tracing::warn!(session = %live.session_id, pid, "opencode serve went away");
            let tail = tail_suffix(&binding.server.tail.render());
            let message = format!("the opencode server (pid {pid}) went away{tail}");
            ("the opencode server went away", message)
        }
        Err(panic) => {
            tracing::error!(session = %live.session_id, pid, %panic, "the opencode dispatch panicked; stopping its server");
            binding.server.stop().await;
            let sessions = [live.session_id.clone()];
            let message = caught::lost(&inner.failures, "opencode dispatch", &sessions, &panic);
            ("cohost stopped following the opencode server", message)
        }
    };
    let settle = async |message| went_away(&inner, &live, &binding, turn_error, message).await;
    caught::settle_caught(&inner.core, &live.session_id, message, settle).await;
}

/// Performs the effects of the session's events until the stream ends or the session is
/// closed.
async fn follow(
    inner: &Arc<Inner>,
    live: &Arc<Live>,
    binding: &Binding,
    mut body: hyper::body::Incoming,
    connected: tokio::sync::oneshot::Sender<()>,
) {
    let mut connected = Some(connected);
    let mut decoder = SseDecoder::default();
    loop {
        let chunk = tokio::select! {
            _ = live.cancel.cancelled() => return,
            chunk = next_chunk(&mut body) => chunk,
        };
        let Some(chunk) = chunk else { break };
        for data in decoder.push(&chunk) {
            let Some(event) = Event::parse(&data) else {
                tracing::debug!(data = %data.chars().take(200).collect::<String>(), "unreadable opencode event");
                continue;
            };
            if event == Event::ServerConnected {
                if let Some(tx) = connected.take() {
                    let _ = tx.send(());
                }
                continue;
            }
            if event
                .session_id()
                .is_none_or(|id| id != binding.opencode_session)
            {
                continue;
            }
            let (effects, placed) = {
                let mut forwarder = lock(&live.forwarder);
                let effects = forwarder.apply(event);
                (effects, forwarder.placed.values().any(Option::is_some))
            };
            if placed {
                live.placed.send_replace(());
            }
            for effect in effects {
                perform(inner, live, binding, effect).await;
            }
        }
    }
}

/// The server went away (or is no longer followed): ends the running turn (`turn_error`),
/// settles its pending permissions and questions, and says the session is lost (`message`).
async fn went_away(
    inner: &Arc<Inner>,
    live: &Arc<Live>,
    binding: &Binding,
    turn_error: &str,
    message: String,
) {
    let running = lock(&live.forwarder).current.clone();
    if let Some(turn_id) = running {
        let effects = lock(&live.forwarder).end_turn(TurnCompleted {
            turn_id,
            status: TurnStatus::Interrupted,
            error: Some(turn_error.into()),
            duration_ms: None,
            lost: true,
        });
        for effect in effects {
            perform(inner, live, binding, effect).await;
        }
        inner
            .report(&live.session_id, AgentStatus::Interrupted)
            .await;
    }
    live.binding.send_replace(None);
    // Its pending permissions and questions went with it: no answer can reach them any more.
    for approval_id in take_all_pending(&inner.approvals, &live.session_id) {
        inner
            .store(&live.session_id, resolved_by_runtime(approval_id, None))
            .await;
    }
    inner.orphan_questions(&live.session_id).await;
    inner
        .status(&live.session_id, SessionState::Lost, Some(message))
        .await;
}

async fn perform(inner: &Arc<Inner>, live: &Arc<Live>, binding: &Binding, effect: Effect) {
    match effect {
        Effect::Store(kind) => inner.store(&live.session_id, kind).await,
        Effect::Publish(kind) => inner.core.publish(Some(live.session_id.clone()), kind),
        Effect::Report(status) => inner.report(&live.session_id, status).await,
        Effect::HoldApproval { approval_id } => {
            let interrupting = lock(&live.forwarder).interrupt_requested;
            if interrupting {
                // Asked while an interrupt is under way: never let it wait for an answer.
                inner.reject(binding, &approval_id).await;
            } else {
                lock(&inner.approvals).insert(approval_id, live.session_id.clone());
            }
        }
        Effect::ApprovalSettled { approval_id } => {
            let ours = lock(&inner.approvals).remove(&approval_id).is_some();
            if ours {
                inner
                    .store(&live.session_id, resolved_by_runtime(approval_id, None))
                    .await;
            }
        }
        Effect::AskQuestion(request) => inner.hold_question(live, binding, *request).await,
        Effect::QuestionSettled {
            request_id,
            answers,
        } => {
            inner
                .question_settled(&live.session_id, &request_id, answers)
                .await
        }
    }
}
