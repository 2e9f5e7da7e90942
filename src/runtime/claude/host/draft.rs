//! The input box of a live session, for `ClaudeHost`: the human's draft the lease watches,
//! clearing a prompt Claude handed back, and the careful Escapes that clear the box.

use super::clearing::{ClearStep, Clearing};
use super::{ClaudeHost, Live};
use crate::protocol::Runtime;
use crate::runtime::HostError;
use crate::runtime::claude::screen;

impl ClaudeHost {
    /// The text a human could have typed into the session's input box right now: none while a
    /// paste of ours is in progress (the inject lock is held) or the TUI has exited.
    pub(super) async fn draft(&self, session_id: &str) -> Result<Option<String>, HostError> {
        let live = self.live_session(session_id)?;
        let Ok(_inject) = live.inject.try_lock() else {
            return Ok(None);
        };
        Ok(self
            .box_screen(&live, session_id)
            .await?
            .filter(|screen| screen.has_draft())
            .map(|screen| screen.input.unwrap_or_default()))
    }

    pub(super) async fn box_screen(
        &self,
        live: &Live,
        session_id: &str,
    ) -> Result<Option<screen::Screen>, HostError> {
        if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        let pane = self.verified_pane(session_id).await?;
        let capture = self
            .tmux()
            .capture(&pane)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        Ok(Some(screen::analyze(&capture)))
    }

    /// Clears the input box if it still holds exactly `text` and Claude is idle (Claude puts a
    /// prompt back in the box when its turn is interrupted before the first token). Two Escapes
    /// clear a box with text in it; they are never sent to an empty box (that opens the rewind
    /// dialog) nor while a turn runs (they would interrupt it).
    pub(super) async fn clear_draft(
        &self,
        session_id: &str,
        text: &str,
    ) -> Result<bool, HostError> {
        let live = self.live_session(session_id)?;
        // No paste and no interrupt in progress while the box is read and cleared.
        let Ok(_inject) = live.inject.try_lock() else {
            return Ok(false);
        };
        let _keys = live.keys.lock().await;
        let turn_open = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .is_some_and(|s| s.active_turn.is_some())
        });
        if turn_open || live.status.borrow().as_str() == "busy" {
            return Ok(false);
        }
        let Some(screen) = self.box_screen(&live, session_id).await? else {
            return Ok(false);
        };
        if screen.busy
            || screen.dialog
            || !screen.has_draft()
            || screen.input.as_deref() != Some(text)
        {
            return Ok(false);
        }
        let pane = self.verified_pane(session_id).await?;
        self.clear_box(&pane).await
    }

    /// Clears the input box, which holds text: Escape twice, then — only when Claude shows it
    /// took just one of them (`esc again to clear`) — once more. Each step waits for the screen
    /// to show its effect instead of assuming it (the [`Clearing`] machine decides). Returns
    /// whether the box ended empty.
    pub(super) async fn clear_box(&self, pane: &str) -> Result<bool, HostError> {
        let keys = |keys: &'static [&'static str]| async move {
            self.tmux()
                .send_keys(pane, keys)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))
        };
        let mut clearing = Clearing::new();
        let mut seen = None;
        loop {
            match clearing.next(seen.take().as_ref(), tokio::time::Instant::now()) {
                ClearStep::Keys(sent) => keys(sent).await?,
                ClearStep::CloseRewind => {
                    tracing::warn!(pane, "closing a Rewind dialog an Escape opened");
                    keys(&["Escape"]).await?;
                }
                ClearStep::Sleep(delay) => tokio::time::sleep(delay).await,
                ClearStep::Capture => {
                    let capture = self
                        .tmux()
                        .capture(pane)
                        .await
                        .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                    seen = Some(screen::analyze(&capture));
                }
                ClearStep::Done(empty) => return Ok(empty),
            }
        }
    }
}
