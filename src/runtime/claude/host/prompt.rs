//! Typing a prompt into the TUI for `ClaudeHost` (`inject`): bracketed paste, Enter, and
//! Claude's confirmation (`UserPromptSubmit`, or the prompt queued behind a running turn).

use std::time::Duration;

use tokio::sync::broadcast;

use super::{ClaudeHost, Command, lock};
use crate::protocol::Runtime;
use crate::runtime::claude::screen;
use crate::runtime::common::inject;
use crate::runtime::{HostError, InjectOutcome, InjectState};

/// How long an inject waits for the TUI to be ready (a new session starts in about a second).
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Claude gets to confirm a pasted prompt before Enter is sent once more.
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after an interrupted turn nothing is pasted into the box.
const AFTER_INTERRUPT: Duration = Duration::from_secs(2);
/// How long a prompt Claude took from the box may still wait for its confirmation.
const LATE_SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How Claude took a pasted prompt.
enum Confirmed {
    Started(String),
    Queued,
}

impl ClaudeHost {
    /// Types a prompt into the TUI: bracketed paste, Enter, then waits for Claude to confirm.
    pub async fn inject(
        &self,
        session_id: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        let live = self.live_session(session_id)?;
        let _serialized = live.inject.lock().await;
        if let Some(earlier) = inject::previous(&self.inner.core, session_id, key.as_deref()) {
            return Ok(earlier);
        }
        let pane = self.verified_pane(session_id).await?;
        // The TUI exited: the pane shows its last frame, and nothing reads what is typed.
        if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(HostError::NotReady(session_id.to_string()));
        }
        // Claude hands an interrupted prompt back into the box, sometimes well after the turn
        // ended; a paste in between would merge with it. Let that settle first.
        let since_interrupt = lock(&live.interrupted_at).map(|at| at.elapsed());
        if let Some(since) = since_interrupt.filter(|since| *since < AFTER_INTERRUPT) {
            tokio::time::sleep(AFTER_INTERRUPT - since).await;
        }
        let mut started = live.started.subscribe();
        if tokio::time::timeout(READY_TIMEOUT, started.wait_for(|s| *s))
            .await
            .is_err()
        {
            return Err(HostError::NotReady(session_id.to_string()));
        }
        // An interrupt watching the box (to clear a prompt Claude hands back) must not take our
        // paste for that prompt: the box is read and typed into by one of them at a time.
        let keys = live.keys.lock().await;
        // Wait until the box is usable: no dialog, and not a human's draft. The screen decides
        // busy-or-idle: the session file lags the screen by tens of milliseconds.
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let busy = loop {
            let capture = self
                .tmux()
                .capture(&pane)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
            let screen = screen::analyze(&capture);
            if screen.has_draft() {
                return Err(HostError::HumanTyping(session_id.to_string()));
            }
            if !screen.dialog && screen.input.is_some() && (screen.busy || screen.ready()) {
                break screen.busy;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::NotReady(session_id.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let _ = live
            .commands
            .send(Command::ExpectInjected(text.to_string()))
            .await;
        let mut submitted = live.submitted.subscribe();
        let tmux = self.tmux();
        tmux.paste(&pane, text)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        // Give the TUI a moment to take the paste before Enter (a burst can swallow it).
        tokio::time::sleep(Duration::from_millis(150)).await;
        tmux.send_keys(&pane, &["Enter"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        drop(keys);
        let outcome = match self.confirm(&pane, &mut submitted, text, busy).await? {
            Some(outcome) => outcome,
            None => {
                // Still in the box? Enter once more, never twice.
                let capture = tmux
                    .capture(&pane)
                    .await
                    .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                if screen::analyze(&capture).has_draft() {
                    tmux.send_keys(&pane, &["Enter"])
                        .await
                        .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                }
                match self.confirm(&pane, &mut submitted, text, busy).await? {
                    Some(outcome) => outcome,
                    None => {
                        let capture = tmux
                            .capture(&pane)
                            .await
                            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                        if screen::analyze(&capture).has_draft() {
                            // Take our text back out of the box rather than leave it for
                            // someone to send.
                            let _ = self.clear_box(&pane).await;
                            return Err(HostError::failed(
                                Runtime::Claude,
                                "claude did not accept the prompt",
                            ));
                        }
                        // The box is empty: Claude took the prompt, and its confirmation (the
                        // UserPromptSubmit hook) is late — a loaded machine, a slow hook. Wait
                        // for it rather than report a prompt that runs as not sent.
                        match wait_submitted(&mut submitted, text, LATE_SUBMIT_TIMEOUT).await {
                            Some(confirmed) => confirmed,
                            None => {
                                return Err(HostError::failed(
                                    Runtime::Claude,
                                    "claude took the prompt but never confirmed it",
                                ));
                            }
                        }
                    }
                }
            }
        };
        let outcome = match outcome {
            Confirmed::Started(turn) => (InjectState::Started, turn),
            Confirmed::Queued => (
                InjectState::Queued,
                self.inner
                    .core
                    .read(|state| {
                        state
                            .sessions
                            .get(session_id)
                            .and_then(|s| s.active_turn.clone())
                    })
                    .unwrap_or_default(),
            ),
        };
        Ok(inject::record(&self.inner.core, session_id, outcome.0, &outcome.1, key).await?)
    }

    /// Waits for Claude to take a pasted prompt: `UserPromptSubmit` for it (a new turn), or —
    /// when a turn was running — the box emptied with the prompt queued behind the turn.
    async fn confirm(
        &self,
        pane: &str,
        submitted: &mut broadcast::Receiver<(Option<String>, String)>,
        text: &str,
        was_busy: bool,
    ) -> Result<Option<Confirmed>, HostError> {
        let deadline = tokio::time::Instant::now() + SUBMIT_TIMEOUT;
        loop {
            let wait = Duration::from_millis(if was_busy { 150 } else { 250 });
            if let Some(confirmed) = wait_submitted(submitted, text, wait).await {
                return Ok(Some(confirmed));
            }
            if was_busy {
                let capture = self
                    .tmux()
                    .capture(pane)
                    .await
                    .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                let screen = screen::analyze(&capture);
                if !screen.has_draft() && (screen.queued || screen.busy) {
                    return Ok(Some(Confirmed::Queued));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}

/// Waits for Claude's word on a pasted `text` (compared as the user wrote it: the normalizer
/// removed any `<pasted_content>` wrapper).
async fn wait_submitted(
    rx: &mut broadcast::Receiver<(Option<String>, String)>,
    text: &str,
    timeout: Duration,
) -> Option<Confirmed> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok((turn_id, submitted))) if submitted.trim() == text.trim() => {
                return Some(match turn_id {
                    Some(turn) => Confirmed::Started(turn),
                    None => Confirmed::Queued,
                });
            }
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
            _ => return None,
        }
    }
}
