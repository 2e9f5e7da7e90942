//! The adopted side of a rehome (`CodexHost::rehome`): the person's codex TUI quit in its pane by
//! its own `/quit` command — typed only into the verified pane, only when the screen shows the
//! composer empty and neither the rollout nor the screen shows a turn running (a running turn is
//! never stopped: `busy`) — with the pane kept (`remain-on-exit`) for the TUI that replaces it,
//! then the follower stopped after a last read of the rollout, so every turn it saw is mirrored
//! once. Nothing is typed when a check fails, and the TUI then keeps running.

use std::time::Duration;

use super::{Adoptions, End};
use crate::protocol::{Runtime, SessionAdopted};
use crate::runtime::HostError;
use crate::runtime::codex::tui_screen::Composer;
use crate::runtime::common::adopted::Rehoming;
use crate::runtime::common::lock;

/// The TUI's own command that quits it.
const QUIT: &str = "/quit";
/// How long the TUI may take to show `/quit` in its composer, and to exit after Enter.
const SHOW_TIMEOUT: Duration = Duration::from_secs(5);
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

impl Adoptions {
    /// Quits the adopted TUI of `session_id` in its pane and stops following it; answers what
    /// was adopted (the pane, the rollout). Refused, with nothing typed, while a turn runs or a
    /// dialog is open (`Busy`), over a person's draft (`HumanTyping`), or when the pane is not
    /// the one adopted (`Closed`).
    pub async fn hand_over(&self, session_id: &str) -> Result<SessionAdopted, HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let busy = || {
            HostError::Busy(format!(
                "the adopted codex in session `{session_id}` runs a turn; it is rehomed only when idle (nothing was typed)"
            ))
        };
        if lock(&adopted.events).turn().is_some() {
            return Err(busy());
        }
        let screen = self.screen(&adopted).await?;
        if screen.busy {
            return Err(busy());
        }
        match &screen.composer {
            Composer::Empty => {}
            Composer::Draft(_) => return Err(HostError::HumanTyping(session_id.to_string())),
            Composer::Unreadable(why) => {
                return Err(HostError::Busy(format!(
                    "cannot read the codex composer in pane {} ({why}): a dialog may be open; nothing typed",
                    adopted.record.pane_id
                )));
            }
        }
        let record = adopted.record.clone();
        let pane = record.pane_id.as_str();
        let tmux = self.tmux.tmux();
        let failed =
            |e: crate::tmux::TmuxError| HostError::failed_by(Runtime::Codex, e.to_string(), e);
        // The pane outlives the TUI when the TUI is the pane's own process.
        let rehoming = Rehoming::start(tmux, pane, &adopted.rehoming, Runtime::Codex).await?;
        if let Err(e) = tmux.send_keys(pane, &["-l", QUIT]).await {
            return rehoming.fail(failed(e)).await;
        }
        let deadline = tokio::time::Instant::now() + SHOW_TIMEOUT;
        loop {
            let screen = match self.screen(&adopted).await {
                Ok(screen) => screen,
                Err(e) => return rehoming.fail(e).await,
            };
            if matches!(&screen.composer, Composer::Draft(shown) if shown.starts_with(QUIT)) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return rehoming
                    .fail(HostError::NotReadyBecause(format!(
                        "`{QUIT}` never showed in pane {pane}'s composer; not submitted, the TUI keeps running"
                    )))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Err(e) = self.verified(&adopted).await {
            return rehoming.fail(e).await;
        }
        if let Err(e) = tmux.send_keys(pane, &["Enter"]).await {
            return rehoming.fail(failed(e)).await;
        }
        rehoming
            .wait_exit(&record, "codex", &format!("`{QUIT}`"), EXIT_TIMEOUT)
            .await?;
        // The follower reads the rollout to its end, then stops without closing the session.
        let (done, ended) = tokio::sync::oneshot::channel();
        adopted
            .end
            .send((End::Rehomed, done))
            .await
            .map_err(|_| HostError::Closed(session_id.to_string()))?;
        let _ = ended.await;
        tracing::info!(session = %session_id, pane = %pane, "the adopted codex quit for a rehome");
        Ok(record)
    }
}
