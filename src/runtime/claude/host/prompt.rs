//! Typing a prompt into the TUI for `ClaudeHost` (`inject`): the checks before it (the inject
//! lock, an earlier outcome by key, the verified pane, a TUI that runs), then the `typing.rs`
//! machine driven on the pane — bracketed paste, Enter, and Claude's confirmation
//! (`UserPromptSubmit`, or the prompt queued behind a running turn) — and the outcome recorded.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{MutexGuard, broadcast};

use super::typing::{self, Confirmed, Refusal, Tui, Typing};
use super::{ClaudeHost, Command, Live, lock};
use crate::protocol::Runtime;
use crate::runtime::claude::screen::{self, Screen};
use crate::runtime::common::inject;
use crate::runtime::{HostError, InjectOutcome, InjectState};

impl ClaudeHost {
    /// Types a prompt into the TUI: bracketed paste, Enter, then waits for Claude to confirm.
    pub(super) async fn inject(
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
        let outcome = match self.type_locked(&live, text).await? {
            Ok(Confirmed::Started(turn)) => (InjectState::Started, turn),
            Ok(Confirmed::Queued) => (
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
            Err(refusal) => return Err(refused(session_id, refusal)),
        };
        Ok(inject::record(&self.inner.core, session_id, outcome.0, &outcome.1, key).await?)
    }

    /// Types a prompt outside any caller's request (one Claude dropped from its queue, see
    /// `queued.rs`), serialized with the injects.
    pub(super) async fn type_prompt(
        &self,
        live: &Arc<Live>,
        text: &str,
    ) -> Result<Result<Confirmed, Refusal>, HostError> {
        let _serialized = live.inject.lock().await;
        self.type_locked(live, text).await
    }

    /// Types `text` into the session's verified pane (the caller holds the inject lock). A
    /// prompt Claude queued behind the running turn is remembered until it runs.
    async fn type_locked(
        &self,
        live: &Arc<Live>,
        text: &str,
    ) -> Result<Result<Confirmed, Refusal>, HostError> {
        let session_id = live.session_id.as_str();
        let pane = self.verified_pane(session_id).await?;
        if live.unfollowed.is_cancelled() {
            return Err(lost_before_typing(session_id, "nothing was typed"));
        }
        // The TUI exited: the pane shows its last frame, and nothing reads what is typed.
        if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(HostError::NotReadyBecause(format!(
                "session `{session_id}`: Claude's TUI has exited and was not started again; nothing was typed"
            )));
        }
        let since_interrupt = lock(&live.interrupted_at).map(|at| at.elapsed());
        let mut tui = PaneTui {
            host: self,
            live,
            pane: &pane,
            text,
            keys: None,
            submitted: None,
            entered: false,
        };
        let typed = typing::drive(Typing::new(since_interrupt), &mut tui).await?;
        if typed == Ok(Confirmed::Queued) {
            lock(&live.queued).push(text.to_string());
        }
        Ok(typed)
    }
}

/// The error a prompt the typing machine refused gets: each cause in its own words.
fn refused(session_id: &str, refusal: Refusal) -> HostError {
    let waited = typing::READY_TIMEOUT.as_secs();
    match refusal {
        Refusal::NotStarted => HostError::NotReadyBecause(format!(
            "session `{session_id}`: Claude's TUI has not started (no SessionStart within {waited} s); nothing was typed; retry shortly"
        )),
        Refusal::NotReady => HostError::NotReadyBecause(format!(
            "session `{session_id}`: Claude's input box was not usable within {waited} s (a dialog open, or no box on screen even after asking Claude to redraw); nothing was typed; retry shortly"
        )),
        Refusal::HumanTyping => HostError::HumanTyping(session_id.to_string()),
        Refusal::NotAccepted => {
            HostError::failed(Runtime::Claude, "claude did not accept the prompt")
        }
        Refusal::NeverConfirmed => HostError::failed(
            Runtime::Claude,
            "claude took the prompt but never confirmed it",
        ),
    }
}

/// A prompt refused because the session's follower panicked before it was submitted; `typed`
/// says what became of it.
fn lost_before_typing(session_id: &str, typed: &str) -> HostError {
    HostError::ClosedBecause(format!(
        "session `{session_id}` is lost: cohost stopped following this Claude (its follower panicked); restart cohost to follow it again; {typed}"
    ))
}

/// A prompt whose Enter was pressed when the session's follower panicked: Claude may have taken
/// it, and no word of it can reach cohost. `failed`, so no queue types it again.
fn lost_while_typing(session_id: &str) -> HostError {
    HostError::failed(
        Runtime::Claude,
        format!(
            "session `{session_id}` is lost: cohost stopped following this Claude (its follower panicked) after the prompt was submitted; Claude may have taken it; restart cohost to follow the session again"
        ),
    )
}

/// The session's verified pane, as the typing machine's [`Tui`].
struct PaneTui<'a> {
    host: &'a ClaudeHost,
    live: &'a Live,
    pane: &'a str,
    text: &'a str,
    /// The box's keys, from [`Tui::take_keys`] to the first Enter.
    keys: Option<MutexGuard<'a, ()>>,
    /// Claude's confirmations, from just before the paste.
    submitted: Option<broadcast::Receiver<(Option<String>, String)>>,
    /// Enter was pressed: the prompt may have been submitted.
    entered: bool,
}

impl Tui for PaneTui<'_> {
    async fn await_started(&mut self, timeout: Duration) -> bool {
        let mut started = self.live.started.subscribe();
        tokio::time::timeout(timeout, started.wait_for(|s| *s))
            .await
            .is_ok()
    }

    async fn take_keys(&mut self) {
        self.keys = Some(self.live.keys.lock().await);
    }

    async fn capture(&mut self) -> Result<Screen, HostError> {
        let capture = self
            .host
            .tmux()
            .capture(self.pane)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        Ok(screen::analyze(&capture))
    }

    async fn paste(&mut self) -> Result<(), HostError> {
        let _ = self
            .live
            .commands
            .send(Command::ExpectInjected(self.text.to_string()))
            .await;
        self.submitted = Some(self.live.submitted.subscribe());
        self.host
            .tmux()
            .paste(self.pane, self.text)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))
    }

    async fn enter(&mut self) -> Result<(), HostError> {
        self.entered = true;
        self.host
            .tmux()
            .send_keys(self.pane, &["Enter"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        self.keys = None;
        Ok(())
    }

    async fn await_confirmation(&mut self, timeout: Duration) -> Option<Confirmed> {
        let submitted = self.submitted.as_mut()?;
        tokio::select! {
            confirmed = wait_submitted(submitted, self.text, timeout) => confirmed,
            // No confirmation can come any more.
            _ = self.live.unfollowed.cancelled() => None,
        }
    }

    async fn clear(&mut self) {
        let _ = self.host.clear_box(self.pane).await;
    }

    async fn redraw(&mut self) {
        self.host.redraw(self.live, self.pane).await;
    }

    fn unfollowed(&self) -> bool {
        self.live.unfollowed.is_cancelled()
    }

    async fn give_up(&mut self) -> HostError {
        let session_id = &self.live.session_id;
        if self.entered {
            lost_while_typing(session_id)
        } else if self.submitted.is_some() {
            // Pasted, not submitted: nothing would confirm what an Enter sends.
            let _ = self.host.clear_box(self.pane).await;
            lost_before_typing(
                session_id,
                "the prompt was taken back out of the box, not submitted",
            )
        } else {
            lost_before_typing(session_id, "nothing was typed")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_prompt_says_which_cause_and_that_nothing_was_typed() {
        let message = |refusal| match refused("cs_1", refusal) {
            HostError::NotReadyBecause(message) => message,
            other => panic!("{refusal:?}: not `not_ready`: {other:?}"),
        };
        let not_started = message(Refusal::NotStarted);
        assert!(not_started.contains("has not started"), "{not_started}");
        let not_ready = message(Refusal::NotReady);
        assert!(
            not_ready.contains("input box was not usable within 30 s"),
            "{not_ready}"
        );
        for text in [&not_started, &not_ready] {
            assert!(text.starts_with("session `cs_1`"), "{text}");
            assert!(text.contains("nothing was typed"), "{text}");
        }
        assert!(matches!(
            refused("cs_1", Refusal::HumanTyping),
            HostError::HumanTyping(id) if id == "cs_1"
        ));
        for refusal in [Refusal::NotAccepted, Refusal::NeverConfirmed] {
            assert!(
                matches!(refused("cs_1", refusal), HostError::Failed { .. }),
                "{refusal:?}"
            );
        }
    }
}
