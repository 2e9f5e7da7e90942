//! Writing to a live thread: inject (`turn/start`, or `turn/steer` while a turn runs; serialized
//! per session, so two injects never open two turns) and interrupt.

use std::time::Instant;

use super::super::rpc::RpcError;
use super::{CodexHost, lock, text_input, wire};
use crate::protocol::Runtime;
use crate::runtime::common::{hosted, inject};
use crate::runtime::{HostError, InjectOutcome, InjectState};

/// `turn/interrupt` attempts while codex has not begun a turn it already answered for.
const INTERRUPT_ATTEMPTS: u32 = 40;
const INTERRUPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(25);

/// The running turn named in codex's "expected active turn id `X` but found `Y`".
fn running_turn_in(message: &str) -> Option<String> {
    let after = message.split("but found").nth(1)?;
    let id = after.trim().trim_matches('`').split('`').next()?.trim();
    (!id.is_empty()).then(|| id.to_string())
}

impl CodexHost {
    /// Sends text to the session: `turn/start` when no turn is open, `turn/steer` when one is.
    pub(in crate::runtime::codex) async fn inject(
        &self,
        session_id: &str,
        text: &str,
        idempotency_key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        self.inject_input(session_id, text, text_input(text), idempotency_key)
            .await
    }

    /// [`CodexHost::inject`] with any input elements (text and images).
    pub(super) async fn inject_input(
        &self,
        session_id: &str,
        text: &str,
        input: Vec<wire::UserInput>,
        idempotency_key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        let live = self.inner.live_session(session_id)?;
        let _serialized = live.inject.lock().await;
        if let Some(earlier) =
            inject::previous(&self.inner.core, session_id, idempotency_key.as_deref())
        {
            return Ok(earlier);
        }
        hosted::check_not_lost(&self.inner.core, session_id)?;
        let binding = self.inner.wait_bound(&live).await?;
        let mut current = lock(&live.turn).current.clone();
        let mut outcome = None;
        // At most two steers: the second with the turn codex says is running, when our view
        // was behind (another client started a turn we had not processed yet).
        for _ in 0..2 {
            let Some(turn_id) = current.take() else { break };
            match binding
                .backend
                .rpc
                .call(&wire::TurnSteerParams {
                    thread_id: binding.thread_id.clone(),
                    input: input.clone(),
                    expected_turn_id: turn_id.clone(),
                })
                .await
            {
                Ok(answer) => {
                    let steered = answer.turn_id.unwrap_or_else(|| turn_id.clone());
                    outcome = Some((InjectState::Steered, steered));
                }
                // The turn ended while we decided: start a new one instead.
                Err(RpcError::Server { message, .. }) if message.contains("no active turn") => {
                    let mut turn = lock(&live.turn);
                    if turn.current.as_deref() == Some(turn_id.as_str()) {
                        turn.current = None;
                    }
                }
                Err(RpcError::Server { message, .. }) if message.contains("but found") => {
                    current = running_turn_in(&message);
                    if current.is_none() {
                        return Err(HostError::failed(Runtime::Codex, message));
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
        let (kind, turn_id) = match outcome {
            Some(outcome) => outcome,
            None => {
                // The turn known to run when we ask: codex answering with this one means the
                // text joined it. A different id is a new turn, even when its `turn/started`
                // was already forwarded (the notification and the answer race).
                let running_before = {
                    let mut turn = lock(&live.turn);
                    turn.pending_api += 1;
                    turn.current.clone()
                };
                let answer = binding
                    .backend
                    .rpc
                    .call(&wire::TurnStartParams {
                        thread_id: binding.thread_id.clone(),
                        input: input.clone(),
                        collaboration_mode: self.inner.collaboration_mode(&live),
                    })
                    .await;
                let answer = match answer {
                    Ok(answer) => answer,
                    Err(error) => {
                        let mut turn = lock(&live.turn);
                        turn.pending_api = turn.pending_api.saturating_sub(1);
                        return Err(error.into());
                    }
                };
                let turn_id = answer.turn.and_then(|turn| turn.id).ok_or_else(|| {
                    HostError::failed(Runtime::Codex, "turn/start answered without a turn id")
                })?;
                let mut turn = lock(&live.turn);
                if running_before.as_deref() == Some(turn_id.as_str()) {
                    // codex joined a turn that was already running: no turn/started will come.
                    turn.pending_api = turn.pending_api.saturating_sub(1);
                    (InjectState::Steered, turn_id)
                } else {
                    if turn.current.is_none() {
                        turn.current = Some(turn_id.clone());
                    }
                    (InjectState::Started, turn_id)
                }
            }
        };
        *lock(&binding.backend.last_used) = Instant::now();
        Ok(inject::record(
            &self.inner.core,
            session_id,
            kind,
            &turn_id,
            idempotency_key,
        )
        .await?)
    }

    /// Interrupts the running turn (with `turn`, only that one). `Ok(false)` when no turn (or
    /// another one) is running.
    pub(in crate::runtime::codex) async fn interrupt(
        &self,
        session_id: &str,
        turn: Option<&str>,
    ) -> Result<bool, HostError> {
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(false);
        };
        let Some(turn_id) = lock(&live.turn).current.clone() else {
            return Ok(false);
        };
        if turn.is_some_and(|wanted| wanted != turn_id) {
            return Ok(false);
        }
        // Right after `turn/start` answered, codex may not have begun the turn yet and says
        // "no active turn"; retry while the turn is still ours to end (its `turn/started` or
        // `turn/completed` is on the way).
        let mut attempt = 0;
        loop {
            attempt += 1;
            match binding
                .backend
                .rpc
                .call(&wire::TurnInterruptParams {
                    thread_id: binding.thread_id.clone(),
                    turn_id: turn_id.clone(),
                })
                .await
            {
                Ok(_) => return Ok(true),
                Err(RpcError::Server { message, .. }) if message.contains("no active turn") => {
                    let still_ours = lock(&live.turn).current.as_deref() == Some(turn_id.as_str());
                    if !still_ours || attempt >= INTERRUPT_ATTEMPTS {
                        return Ok(false);
                    }
                    tokio::time::sleep(INTERRUPT_BACKOFF).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn running_turn_is_read_from_the_steer_error() {
        let message = "expected active turn id `bogus-turn` but found `01a2276c-3b0c`";
        assert_eq!(
            super::running_turn_in(message).as_deref(),
            Some("01a2276c-3b0c")
        );
        assert_eq!(super::running_turn_in("no active turn to steer"), None);
    }
}
