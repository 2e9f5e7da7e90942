//! The adopted side of a rehome (`OpencodeHost::rehome`): the person's OpenCode TUI quits in its
//! pane by its own key, Ctrl+C on an empty box (OpenCode's `app_exit`; observed on 1.18.33: the
//! TUI exits at once, status 0) — sent only into the verified pane, only when the database shows
//! no turn running, no permission dialog is pending, and the screen shows the adopted session's
//! box empty with no turn running (Ctrl+C on a draft would clear the person's text: refused,
//! `human_typing`) — with the pane kept (`remain-on-exit`) for the TUI that replaces it, then
//! the follower stopped after a last read of the database, so every turn it saw is mirrored
//! once. Nothing is typed when a check fails, and the TUI then keeps running.

use std::time::Duration;

use super::approval::Shown;
use super::{Adoptions, End};
use crate::protocol::{Runtime, SessionAdopted};
use crate::runtime::HostError;
use crate::runtime::common::adopted::{InputBox, Rehoming};
use crate::runtime::common::lock;

/// OpenCode's key that quits the TUI when its box is empty.
const QUIT_KEY: &str = "C-c";
/// How long the TUI may take to exit after the key.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

impl Adoptions {
    /// Quits the adopted OpenCode of `session_id` in its pane and stops following it; answers
    /// what was adopted (the pane, the database). Refused, with nothing typed, while a turn runs
    /// or a dialog is open (`Busy`), over a person's draft (`HumanTyping`), on a screen that
    /// shows another session or cannot be read (`NotReady`), or when the pane is not the one
    /// adopted (`Closed`).
    pub async fn hand_over(&self, session_id: &str) -> Result<SessionAdopted, HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let pane = adopted.record.pane_id.clone();
        let busy = |what: &str| {
            HostError::Busy(format!(
                "the adopted opencode in session `{session_id}` {what}; it is rehomed only when idle (nothing was typed)"
            ))
        };
        if lock(&adopted.follow).running.is_some() {
            return Err(busy("runs a turn"));
        }
        if matches!(*lock(&adopted.approval), Shown::Pending { .. }) {
            return Err(busy("shows a permission dialog"));
        }
        let shown = self.settled_screen(&adopted).await?;
        if shown.busy || lock(&adopted.follow).running.is_some() {
            return Err(busy("runs a turn"));
        }
        match &shown.input {
            InputBox::Empty => {}
            InputBox::Draft(_) => return Err(HostError::HumanTyping(session_id.to_string())),
            InputBox::Unreadable(why) => {
                return Err(HostError::NotReadyBecause(format!(
                    "cannot read opencode's input box in pane {pane} ({why}): a dialog may be open; nothing typed"
                )));
            }
        }
        if shown.new_session {
            return Err(HostError::NotReadyBecause(format!(
                "opencode in pane {pane} shows a new session (its first prompt's placeholder), not the adopted one; nothing typed"
            )));
        }
        self.check_session(&adopted).await?;
        let record = adopted.record.clone();
        let tmux = self.tmux.tmux();
        let rehoming = Rehoming::start(tmux, &pane, &adopted.rehoming, Runtime::Opencode).await?;
        if let Err(e) = self.verified(&adopted).await {
            return rehoming.fail(e).await;
        }
        if let Err(e) = tmux.send_keys(&pane, &[QUIT_KEY]).await {
            let failed = HostError::failed_by(Runtime::Opencode, e.to_string(), e);
            return rehoming.fail(failed).await;
        }
        rehoming
            .wait_exit(&record, "opencode", "Ctrl+C", EXIT_TIMEOUT)
            .await?;
        // The follower reads the database to its end, then stops without closing the session.
        let (done, ended) = tokio::sync::oneshot::channel();
        adopted
            .end
            .send((End::Rehomed, done))
            .await
            .map_err(|_| HostError::Closed(session_id.to_string()))?;
        let _ = ended.await;
        tracing::info!(session = %session_id, pane = %pane, "the adopted opencode quit for a rehome");
        Ok(record)
    }
}
