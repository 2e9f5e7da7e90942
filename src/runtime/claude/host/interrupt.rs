//! Interrupting a turn for `ClaudeHost`: one Escape, then watching the box for the prompt
//! Claude may hand back (cleared) and for the TUI to come back idle (told to the follower); a
//! pane that stops showing the box meanwhile is redrawn (`redraw.rs`).

use std::time::Duration;

use super::redraw::Unreadable;
use super::{ClaudeHost, Command};
use crate::protocol::Runtime;
use crate::runtime::HostError;
use crate::runtime::claude::screen;

impl ClaudeHost {
    /// One Escape while a turn runs (with `turn`, only while that turn runs); `Ok(false)` when
    /// Claude is idle or runs another turn.
    pub(super) async fn interrupt(
        &self,
        session_id: &str,
        turn: Option<&str>,
    ) -> Result<bool, HostError> {
        let live = self.live_session(session_id)?;
        let _keys = live.keys.lock().await;
        let pane = self.verified_pane(session_id).await?;
        let active = || {
            self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.active_turn.clone())
            })
        };
        let active_turn = active();
        if turn.is_some_and(|wanted| active_turn.as_deref() != Some(wanted)) {
            return Ok(false);
        }
        let turn_open = active_turn.is_some();
        // The session file as it is now, not as the last tick read it: a turn that just ended
        // must not look busy for up to a tick (an Escape on an idle TUI is no interrupt).
        let busy = self
            .inner
            .session_file_status(&live)
            .unwrap_or_else(|| live.status.borrow().clone())
            == "busy";
        if !turn_open && !busy {
            return Ok(false);
        }
        let before = match self.tmux().capture(&pane).await {
            Ok(capture) => screen::analyze(&capture).input,
            Err(_) => None,
        };
        // Never a blind double Escape: on an empty box it opens the rewind dialog.
        self.tmux()
            .send_keys(&pane, &["Escape"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        // Interrupted before the first token, Claude puts the prompt back in the box, after the
        // turn stops (which can take a while on a busy machine): watch the screen until the box
        // shows that text, or has stayed idle and empty for a moment.
        // On a loaded machine the TUI can take seconds to stop: the deadline is generous, and
        // the loop ends as soon as the box has been idle and empty for half a second.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        let mut idle_since = None;
        let mut cleared = false;
        let mut concluded = false;
        let mut unreadable = Unreadable::default();
        tracing::debug!(session = %session_id, turn = ?active_turn, before = ?before, "interrupt: Escape sent");
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            // Another turn runs now (a prompt queued behind ours started once ours stopped):
            // ours is over, and nothing of this interrupt may touch the new one.
            if let Some(now) = active()
                && active_turn.as_deref() != Some(now.as_str())
            {
                tracing::debug!(session = %session_id, turn = ?active_turn, now, "interrupt: another turn runs; the watch ends");
                concluded = true;
                break;
            }
            let Ok(capture) = self.tmux().capture(&pane).await else {
                tracing::debug!(session = %session_id, "interrupt: the pane cannot be captured; the watch ends");
                concluded = true;
                break;
            };
            let screen = screen::analyze(&capture);
            // A pane that shows no box for a while is damaged, not busy: only a full redraw
            // brings the box (and the prompt Claude handed back) into view again.
            if unreadable.due(&screen, tokio::time::Instant::now()) {
                let asked = self.redraw(&live, &pane).await;
                tracing::debug!(session = %session_id, asked, "interrupt: no box on screen; redraw");
            }
            if screen.input.is_none() || screen.busy || screen.dialog {
                idle_since = None;
                continue;
            }
            if screen.has_draft() && screen.input != before && !cleared {
                // The prompt Claude put back: clear it, watching the screen between keys.
                cleared = true;
                let cleared_box = self.clear_box(&pane).await;
                tracing::debug!(session = %session_id, input = ?screen.input, ?cleared_box, "interrupt: cleared the prompt Claude put back");
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= Duration::from_millis(500) {
                // Idle and empty after our Escape: no hook says so, so tell the follower.
                tracing::debug!(session = %session_id, turn = ?active_turn, "interrupt: the TUI is idle and empty; the turn ended interrupted");
                if let Some(turn) = &active_turn {
                    let _ = live.commands.send(Command::Interrupted(turn.clone())).await;
                }
                concluded = true;
                break;
            }
        }
        if !concluded {
            tracing::warn!(
                session = %session_id,
                turn = ?active_turn,
                "interrupt: the TUI did not come back idle and empty within 15 s of the Escape; the turn ends when the TUI says so"
            );
        }
        Ok(true)
    }
}
