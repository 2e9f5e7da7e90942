//! Typing a prompt into Claude's TUI as a pure machine: [`Typing`] is told what the driver saw
//! (a [`Screen`] analysed from a `capture-pane`, Claude's `SessionStart` or its confirmation of
//! the prompt, or nothing) and at what time, and answers the next [`Step`]: capture, paste,
//! Enter, wait a named delay, clear the box, or stop with the outcome or a [`Refusal`].
//!
//! It does no I/O and reads no clock; [`drive`] is the only async part: it carries out each step
//! on a [`Tui`] (the host's verified pane, or a test's recorded screens) and sleeps what the
//! machine says. The rules (see `docs/peers.md` and the screens in
//! `tests/fixtures/claude/screens/`): never paste into a human's draft or under a dialog; after
//! an interrupt, let Claude hand its prompt back first; give the TUI a moment between the paste
//! and Enter; press Enter a second time only when the prompt is still in the box, and take it
//! back out when even that did not send it; a box that emptied means Claude took the prompt, so
//! its late confirmation is waited for; a pane that shows no box at all for a while is asked to
//! redraw (`redraw.rs`).

use std::time::Duration;

use tokio::time::Instant;

use super::redraw::Unreadable;
use crate::runtime::HostError;
use crate::runtime::claude::screen::Screen;

/// How long an inject waits for the TUI to be ready (a new session starts in about a second).
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Claude gets to confirm a pasted prompt before Enter is sent once more.
pub(super) const SUBMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after an interrupted turn nothing is pasted into the box.
pub(super) const AFTER_INTERRUPT: Duration = Duration::from_secs(2);
/// How long a prompt Claude took from the box may still wait for its confirmation.
pub(super) const LATE_SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the box is looked at while it is not usable yet.
pub(super) const READY_POLL: Duration = Duration::from_millis(100);
/// The moment the TUI gets to take the paste before Enter (a burst can swallow the Enter).
pub(super) const PASTE_SETTLE: Duration = Duration::from_millis(150);
/// How long Claude's word is awaited between looks at the box while a turn runs (the prompt
/// then shows as queued on screen; 2.1.197 sends no hook for it until the turn ends).
pub(super) const CONFIRM_POLL_BUSY: Duration = Duration::from_millis(150);
/// How long Claude's word is awaited at a time while no turn runs (only the hook confirms).
pub(super) const CONFIRM_POLL_IDLE: Duration = Duration::from_millis(250);

/// How Claude took a pasted prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Confirmed {
    /// `UserPromptSubmit` opened this turn.
    Started(String),
    /// Claude queued the prompt behind the running turn.
    Queued,
}

/// Why a prompt was not typed, or not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The TUI did not start (no `SessionStart`) within [`READY_TIMEOUT`]; nothing typed.
    NotStarted,
    /// The TUI showed no usable box within [`READY_TIMEOUT`]; nothing typed.
    NotReady,
    /// A person's draft is in the box; nothing typed.
    HumanTyping,
    /// The prompt was still in the box after a second Enter; it was taken back out.
    NotAccepted,
    /// The box emptied, but Claude never confirmed the prompt within [`LATE_SUBMIT_TIMEOUT`].
    NeverConfirmed,
}

/// What the driver does next, then reports back as a [`Seen`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Sleep this long (one of the named delays above); then `Seen::Nothing`.
    Sleep(Duration),
    /// Wait up to this long for the TUI's `SessionStart`: `Seen::Started`, else `Seen::Quiet`.
    AwaitStarted(Duration),
    /// Take the lock on the box's keys (an interrupt watching the box must not take our paste
    /// for the prompt Claude hands back); then `Seen::Nothing`. The first Enter releases it.
    TakeKeys,
    /// Capture the pane: `Seen::Screen`.
    Capture,
    /// Tell the follower the text is ours, and paste it; then `Seen::Nothing`.
    Paste,
    /// Press Enter; then `Seen::Nothing`.
    Enter,
    /// Wait up to this long for Claude's word on the prompt: `Seen::Confirmed`, else
    /// `Seen::Quiet`.
    AwaitConfirmation(Duration),
    /// Take our text back out of the box (careful Escapes); then `Seen::Nothing`.
    Clear,
    /// The pane has shown no box for a while: ask the TUI to redraw it; then `Seen::Nothing`.
    Redraw,
    /// The end: how Claude took the prompt, or why it was not typed or not taken.
    Done(Result<Confirmed, Refusal>),
}

/// What the driver saw when it carried out the last step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// The step is done (and the first call, before any step).
    Nothing,
    /// `SessionStart` has been seen.
    Started,
    /// The wait ran out.
    Quiet,
    /// The pane as [`crate::runtime::claude::screen::analyze`] read it.
    Screen(Screen),
    /// Claude confirmed the prompt.
    Confirmed(Confirmed),
}

/// The first or the second Enter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    First,
    Second,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing done yet.
    Start,
    /// Sleeping out [`AFTER_INTERRUPT`].
    Settling,
    /// Waiting for `SessionStart`.
    Starting,
    /// Taking the keys.
    Locking,
    /// Looking at the box until it is usable, or `deadline`.
    Ready { deadline: Instant },
    /// Pasted; the settle comes next.
    Pasted,
    /// Settled; Enter comes next.
    Settled,
    /// Enter pressed in this round; the round's deadline starts now.
    Entered(Round),
    /// Waiting for Claude's word (and, while a turn runs, looking at the box) until `deadline`.
    Confirming { round: Round, deadline: Instant },
    /// The round ran out: looking at the box.
    Checking(Round),
    /// Taking our prompt back out of the box.
    Clearing,
    /// The box emptied: waiting for the late confirmation.
    Late,
    /// Done.
    Finished,
}

/// The type-and-confirm machine of one inject.
#[derive(Debug, Clone)]
pub(super) struct Typing {
    phase: Phase,
    /// How long ago the last turn ended interrupted, when one did.
    since_interrupt: Option<Duration>,
    /// A turn ran when the box became usable: the prompt will be queued behind it.
    busy: bool,
    /// How long the captures of the box have shown none.
    unreadable: Unreadable,
}

impl Typing {
    /// A new inject; `since_interrupt`: how long ago the session's last turn ended interrupted.
    pub(super) fn new(since_interrupt: Option<Duration>) -> Self {
        Typing {
            phase: Phase::Start,
            since_interrupt,
            busy: false,
            unreadable: Unreadable::default(),
        }
    }

    /// The next step, given what the last one saw at `now` (first call: `Seen::Nothing`).
    pub(super) fn next(&mut self, seen: Seen, now: Instant) -> Step {
        let step = match (self.phase, seen) {
            (Phase::Start, Seen::Nothing) => match self.since_interrupt {
                // Claude hands an interrupted prompt back into the box, sometimes well after the
                // turn ended; a paste in between would merge with it. Let that settle first.
                Some(since) if since < AFTER_INTERRUPT => {
                    self.phase = Phase::Settling;
                    Step::Sleep(AFTER_INTERRUPT - since)
                }
                _ => self.await_started(),
            },
            (Phase::Settling, Seen::Nothing) => self.await_started(),
            (Phase::Starting, Seen::Started) => {
                self.phase = Phase::Locking;
                Step::TakeKeys
            }
            (Phase::Starting, Seen::Quiet) => Step::Done(Err(Refusal::NotStarted)),
            (Phase::Locking, Seen::Nothing) => {
                self.phase = Phase::Ready {
                    deadline: now + READY_TIMEOUT,
                };
                Step::Capture
            }
            (Phase::Ready { .. }, Seen::Nothing) => Step::Capture,
            // Wait until the box is usable: no dialog, and not a human's draft. The screen
            // decides busy-or-idle: the session file lags the screen by tens of milliseconds.
            (Phase::Ready { deadline }, Seen::Screen(screen)) => {
                if screen.has_draft() {
                    Step::Done(Err(Refusal::HumanTyping))
                } else if !screen.dialog
                    && screen.input.is_some()
                    && (screen.busy || screen.ready())
                {
                    self.busy = screen.busy;
                    self.phase = Phase::Pasted;
                    Step::Paste
                } else if now >= deadline {
                    Step::Done(Err(Refusal::NotReady))
                } else if self.unreadable.due(&screen, now) {
                    Step::Redraw
                } else {
                    Step::Sleep(READY_POLL)
                }
            }
            (Phase::Pasted, Seen::Nothing) => {
                self.phase = Phase::Settled;
                Step::Sleep(PASTE_SETTLE)
            }
            (Phase::Settled, Seen::Nothing) => {
                self.phase = Phase::Entered(Round::First);
                Step::Enter
            }
            (Phase::Entered(round), Seen::Nothing) => self.confirm(round, now),
            (Phase::Confirming { .. } | Phase::Late, Seen::Confirmed(confirmed)) => {
                Step::Done(Ok(confirmed))
            }
            (Phase::Confirming { .. }, Seen::Quiet) if self.busy => Step::Capture,
            (Phase::Confirming { round, deadline }, Seen::Quiet) => {
                self.confirm_until(round, deadline, now)
            }
            // While a turn runs, Claude queues the prompt: the box empties and shows it queued.
            (Phase::Confirming { round, deadline }, Seen::Screen(screen)) => {
                if !screen.has_draft() && (screen.queued || screen.busy) {
                    Step::Done(Ok(Confirmed::Queued))
                } else {
                    self.confirm_until(round, deadline, now)
                }
            }
            // Still in the box? Enter once more, never twice.
            (Phase::Checking(Round::First), Seen::Screen(screen)) => {
                if screen.has_draft() {
                    self.phase = Phase::Entered(Round::Second);
                    Step::Enter
                } else {
                    self.confirm(Round::Second, now)
                }
            }
            (Phase::Checking(Round::Second), Seen::Screen(screen)) => {
                if screen.has_draft() {
                    // Take our text back out of the box rather than leave it for someone to send.
                    self.phase = Phase::Clearing;
                    Step::Clear
                } else {
                    // The box is empty: Claude took the prompt, and its confirmation (the
                    // UserPromptSubmit hook) is late — a loaded machine, a slow hook. Wait for
                    // it rather than report a prompt that runs as not sent.
                    self.phase = Phase::Late;
                    Step::AwaitConfirmation(LATE_SUBMIT_TIMEOUT)
                }
            }
            (Phase::Clearing, Seen::Nothing) => Step::Done(Err(Refusal::NotAccepted)),
            (Phase::Late, Seen::Quiet) => Step::Done(Err(Refusal::NeverConfirmed)),
            // A driver that reports what it was not asked for is a bug: type nothing more.
            (phase, seen) => {
                tracing::warn!(?phase, ?seen, "claude typing: an unexpected report");
                Step::Done(Err(Refusal::NotReady))
            }
        };
        if matches!(step, Step::Done(_)) {
            self.phase = Phase::Finished;
        }
        step
    }

    fn await_started(&mut self) -> Step {
        self.phase = Phase::Starting;
        Step::AwaitStarted(READY_TIMEOUT)
    }

    /// Starts a round of waiting for Claude's word: [`SUBMIT_TIMEOUT`] from `now`.
    fn confirm(&mut self, round: Round, now: Instant) -> Step {
        self.phase = Phase::Confirming {
            round,
            deadline: now + SUBMIT_TIMEOUT,
        };
        self.await_confirmation()
    }

    /// Waits on in the round, unless its deadline has come: then the box is looked at.
    fn confirm_until(&mut self, round: Round, deadline: Instant, now: Instant) -> Step {
        if now >= deadline {
            self.phase = Phase::Checking(round);
            Step::Capture
        } else {
            self.phase = Phase::Confirming { round, deadline };
            self.await_confirmation()
        }
    }

    fn await_confirmation(&self) -> Step {
        Step::AwaitConfirmation(if self.busy {
            CONFIRM_POLL_BUSY
        } else {
            CONFIRM_POLL_IDLE
        })
    }
}

/// What [`drive`] needs of the TUI: the host's verified pane (`prompt.rs`), or a test's script.
pub(super) trait Tui {
    /// Waits up to `timeout` for `SessionStart`; whether it came.
    async fn await_started(&mut self, timeout: Duration) -> bool;
    /// Takes the lock on the box's keys (held until [`Tui::enter`]).
    async fn take_keys(&mut self);
    /// Captures the pane and analyses it.
    async fn capture(&mut self) -> Result<Screen, HostError>;
    /// Tells the follower the prompt is ours, and pastes it.
    async fn paste(&mut self) -> Result<(), HostError>;
    /// Presses Enter, and lets go of the keys.
    async fn enter(&mut self) -> Result<(), HostError>;
    /// Waits up to `timeout` for Claude's word on the prompt.
    async fn await_confirmation(&mut self, timeout: Duration) -> Option<Confirmed>;
    /// Takes the prompt back out of the box (best effort).
    async fn clear(&mut self);
    /// Asks the TUI to draw its whole screen again (best effort, at most one per
    /// [`super::redraw::REDRAW_EVERY`]).
    async fn redraw(&mut self);
    /// Whether nothing follows the TUI any more (the session's follower panicked): no word of
    /// Claude's can come, so [`drive`] types nothing more and stops.
    fn unfollowed(&self) -> bool;
    /// Stops typing into an unfollowed TUI (a prompt pasted and not submitted taken back out of
    /// the box): what became of the prompt, as the error.
    async fn give_up(&mut self) -> HostError;
}

/// Runs `typing` on `tui` to its end: carries out each step, sleeps what the machine says.
pub(super) async fn drive(
    mut typing: Typing,
    tui: &mut impl Tui,
) -> Result<Result<Confirmed, Refusal>, HostError> {
    let mut seen = Seen::Nothing;
    loop {
        if tui.unfollowed() {
            return Err(tui.give_up().await);
        }
        let step = typing.next(seen, Instant::now());
        tracing::debug!(?step, "claude typing");
        seen = match step {
            Step::Sleep(delay) => {
                tokio::time::sleep(delay).await;
                Seen::Nothing
            }
            Step::AwaitStarted(timeout) => {
                if tui.await_started(timeout).await {
                    Seen::Started
                } else {
                    Seen::Quiet
                }
            }
            Step::TakeKeys => {
                tui.take_keys().await;
                Seen::Nothing
            }
            Step::Capture => {
                let screen = tui.capture().await?;
                tracing::debug!(?screen, "claude typing: the box");
                Seen::Screen(screen)
            }
            Step::Paste => {
                tui.paste().await?;
                Seen::Nothing
            }
            Step::Enter => {
                tui.enter().await?;
                Seen::Nothing
            }
            Step::AwaitConfirmation(timeout) => match tui.await_confirmation(timeout).await {
                Some(confirmed) => Seen::Confirmed(confirmed),
                None => Seen::Quiet,
            },
            Step::Clear => {
                tui.clear().await;
                Seen::Nothing
            }
            Step::Redraw => {
                tui.redraw().await;
                Seen::Nothing
            }
            Step::Done(outcome) => return Ok(outcome),
        }
    }
}

#[cfg(test)]
mod tests;
