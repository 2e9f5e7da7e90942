//! Clearing Claude's input box as a pure machine: [`Clearing`] is told what each capture of the
//! box shows (a [`Screen`]) and when, and answers the next [`ClearStep`] — Escapes, a named
//! delay, a capture, closing a Rewind dialog — or whether the box ended empty.
//!
//! The rules (see `docs/peers.md`): two Escapes clear a box with text; Claude sometimes takes
//! only one and says so (`esc again to clear`), and then gets one more, once; one Escape too
//! many on an emptied box opens the Rewind dialog, which one Escape closes. Each Escape waits for
//! the screen to show its effect: a loaded machine renders late. It does no I/O and reads no
//! clock; `ClaudeHost::clear_box` (`draft.rs`) carries the steps out on the verified pane.

use std::time::Duration;

use tokio::time::Instant;

use crate::runtime::claude::screen::Screen;

/// How long after the first Escapes the box may take to show it is empty.
pub(super) const CLEAR_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the box is looked at meanwhile.
pub(super) const CLEAR_POLL: Duration = Duration::from_millis(100);

/// The two Escapes that clear a box with text.
const ESCAPE_TWICE: &[&str] = &["Escape", "Escape"];
/// The one more Escape Claude asks for when it took only one.
const ESCAPE_ONCE: &[&str] = &["Escape"];

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClearStep {
    /// Send these keys; then report nothing.
    Keys(&'static [&'static str]),
    /// An Escape opened the Rewind dialog: close it with one Escape; then report nothing.
    CloseRewind,
    /// Sleep this long (a named delay); then report nothing.
    Sleep(Duration),
    /// Capture the pane and report its [`Screen`].
    Capture,
    /// The end: whether the box ended empty.
    Done(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    /// The first Escapes are sent; the deadline starts now.
    Escaped,
    /// Sleeping before the next look at the box.
    Sleeping {
        deadline: Instant,
    },
    /// Capturing the box.
    Looking {
        deadline: Instant,
    },
    /// The one more Escape is sent; a sleep comes next.
    EscapedAgain {
        deadline: Instant,
    },
    /// Closing the Rewind dialog.
    ClosingRewind,
    Finished,
}

/// The clear-the-box machine of one clear.
#[derive(Debug, Clone)]
pub(super) struct Clearing {
    phase: Phase,
    /// The one more Escape was sent.
    again: bool,
}

impl Clearing {
    pub(super) fn new() -> Self {
        Clearing {
            phase: Phase::Start,
            again: false,
        }
    }

    /// The next step, given the screen the last step captured (`None` after any other step,
    /// and on the first call) and the time.
    pub(super) fn next(&mut self, screen: Option<&Screen>, now: Instant) -> ClearStep {
        let step = match (self.phase, screen) {
            (Phase::Start, None) => {
                self.phase = Phase::Escaped;
                ClearStep::Keys(ESCAPE_TWICE)
            }
            (Phase::Escaped, None) => self.sleep(now + CLEAR_TIMEOUT),
            (Phase::EscapedAgain { deadline }, None) => self.sleep(deadline),
            (Phase::Sleeping { deadline }, None) => {
                self.phase = Phase::Looking { deadline };
                ClearStep::Capture
            }
            (Phase::Looking { deadline }, Some(screen)) => {
                if screen.rewind {
                    self.phase = Phase::ClosingRewind;
                    ClearStep::CloseRewind
                } else if screen.input.as_deref() == Some("") {
                    ClearStep::Done(true)
                } else if screen.clear_pending && screen.has_draft() && !self.again {
                    // Claude took one Escape of the two: one more, once.
                    self.again = true;
                    self.phase = Phase::EscapedAgain { deadline };
                    ClearStep::Keys(ESCAPE_ONCE)
                } else if now >= deadline {
                    ClearStep::Done(false)
                } else {
                    self.sleep(deadline)
                }
            }
            (Phase::ClosingRewind, None) => ClearStep::Done(true),
            // A driver that reports what it was not asked for is a bug: send nothing more.
            (phase, screen) => {
                tracing::warn!(?phase, ?screen, "claude clearing: an unexpected report");
                ClearStep::Done(false)
            }
        };
        if matches!(step, ClearStep::Done(_)) {
            self.phase = Phase::Finished;
        }
        step
    }

    fn sleep(&mut self, deadline: Instant) -> ClearStep {
        self.phase = Phase::Sleeping { deadline };
        ClearStep::Sleep(CLEAR_POLL)
    }
}

#[cfg(test)]
mod tests;
