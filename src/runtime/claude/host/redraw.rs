//! Asking Claude to draw its whole screen again when the pane shows no input box it could be
//! read from, for `ClaudeHost`.
//!
//! Claude draws by difference: each frame writes only the cells that changed since the frame
//! before. When the terminal's cells stop matching what Claude believes it drew (2.1.197, after
//! an Escape under load, left its top rule drawn over and the prompt it handed back on a stray
//! line below the box; any other write to the pane's terminal does the same), the damage stays
//! until Claude redraws everything, and the screen reader finds no box: an interrupt cannot see
//! the TUI come back idle, and a prompt is never typed.
//!
//! One Ctrl+L repairs it. Claude binds it to `chat:clearInput`, whose first press forces a full
//! redraw and leaves the box's text as it was; observed on 2.1.197 and 2.1.332, idle, busy, with
//! a draft and with the prompt an Escape handed back (`docs/peers.md`). The same key pressed
//! twice within two seconds is a double press Claude's code can turn into `/clear` (neither
//! build did, but that is a flag away), so a session gets at most one per [`REDRAW_EVERY`].
//! [`Unreadable`] is the pure rule of when to ask; [`ClaudeHost::redraw`] sends the key.

use std::time::Duration;

use tokio::time::Instant;

use super::{ClaudeHost, Live, lock};
use crate::runtime::claude::screen::Screen;

/// The key that makes Claude draw its whole screen again.
const REDRAW_KEY: &str = "C-l";
/// How long the pane must show no box (and no dialog) before a redraw is asked for: Claude's
/// own frames repair a passing glitch within a frame or two.
pub(super) const UNREADABLE_FOR: Duration = Duration::from_secs(1);
/// The least time between two redraws of one session (a double press is two within 2 s).
pub(super) const REDRAW_EVERY: Duration = Duration::from_secs(5);

/// Follows the captures of one watch of the pane and says when a redraw is due.
#[derive(Debug, Clone, Default)]
pub(super) struct Unreadable {
    /// Since when the captures have shown neither a box nor a dialog.
    since: Option<Instant>,
}

impl Unreadable {
    /// Takes one capture, seen at `now`: `true` when the pane has shown no box and no dialog for
    /// [`UNREADABLE_FOR`] (the count starts again after that, and after any readable capture).
    pub(super) fn due(&mut self, screen: &Screen, now: Instant) -> bool {
        if screen.input.is_some() || screen.dialog {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= UNREADABLE_FOR {
            self.since = None;
            true
        } else {
            false
        }
    }
}

impl ClaudeHost {
    /// Asks the TUI in `pane` (the session's verified pane) to draw its whole screen again,
    /// unless this session had one less than [`REDRAW_EVERY`] ago. Whether the key was sent.
    pub(super) async fn redraw(&self, live: &Live, pane: &str) -> bool {
        {
            let mut last = lock(&live.redrawn_at);
            let now = Instant::now();
            if last.is_some_and(|at| now.duration_since(at) < REDRAW_EVERY) {
                return false;
            }
            *last = Some(now);
        }
        match self.tmux().send_keys(pane, &[REDRAW_KEY]).await {
            Ok(()) => {
                tracing::info!(session = %live.session_id, pane, "claude: the pane showed no input box; asked the TUI to redraw it (Ctrl+L)");
                true
            }
            Err(error) => {
                tracing::warn!(session = %live.session_id, pane, %error, "claude: the redraw key could not be sent");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_box() -> Screen {
        Screen::default()
    }

    fn empty_box() -> Screen {
        Screen {
            input: Some(String::new()),
            ..Screen::default()
        }
    }

    fn dialog() -> Screen {
        Screen {
            dialog: true,
            ..Screen::default()
        }
    }

    #[test]
    fn a_redraw_is_due_once_the_pane_stayed_unreadable_for_a_second() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut unreadable = Unreadable::default();
        assert!(!unreadable.due(&no_box(), at(0)));
        assert!(!unreadable.due(&no_box(), at(500)));
        assert!(!unreadable.due(&no_box(), at(999)));
        assert!(unreadable.due(&no_box(), at(1000)));
        // The count starts again: not due on the next capture.
        assert!(!unreadable.due(&no_box(), at(1100)));
        assert!(unreadable.due(&no_box(), at(2100)));
    }

    #[test]
    fn a_box_or_a_dialog_on_screen_starts_the_count_again() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut unreadable = Unreadable::default();
        assert!(!unreadable.due(&no_box(), at(0)));
        assert!(!unreadable.due(&empty_box(), at(600)));
        assert!(!unreadable.due(&no_box(), at(700)));
        assert!(!unreadable.due(&no_box(), at(1500)));
        // A dialog hides the box on purpose: never a reason to redraw.
        assert!(!unreadable.due(&dialog(), at(1600)));
        assert!(!unreadable.due(&dialog(), at(5000)));
        assert!(!unreadable.due(&no_box(), at(5100)));
        assert!(unreadable.due(&no_box(), at(6100)));
    }
}
