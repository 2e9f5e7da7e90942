//! Prompts cohost typed while a turn ran, which Claude took into its own queue: followed until
//! they run, and typed again when Claude dropped one.
//!
//! Claude queues a prompt sent while a turn runs and submits it once the turn ends (a
//! `UserPromptSubmit` and a user line of its own), or, while a tool runs, delivers it into the
//! running turn (a `queued_command` attachment). Now and then it does neither: the prompt leaves
//! the box and never runs (reported upstream as anthropics/claude-code#20431 and #20860, "queued
//! messages swallowed", most often near a turn's end; seen once in this suite's load runs with
//! 2.1.197). cohost told its caller the prompt was queued, so it must not be lost silently.
//!
//! Each prompt `prompt.rs` reports `queued` is remembered; the session task forgets it when a
//! user message with its text is stored or Claude reports it delivered. When a turn ends with one
//! still remembered, [`ClaudeHost::watch_queued`] looks at the pane: a box that stays ready (no
//! turn running, session file idle, nothing queued on screen) for [`QUIET_LOOKS`] looks in a row
//! means Claude dropped it. It is then typed again (as an idle prompt: a turn of its own, sent
//! from cohost), with an `error` event saying so — unless a person has control of the session
//! (they may have taken it out of the queue themselves) or the prompt's task was cancelled: then
//! only the `error` event.

use std::sync::Arc;
use std::time::Duration;

use super::{ClaudeHost, Live, lock};
use crate::protocol::{ErrorEvent, EventKind, LeaseHolder};
use crate::runtime::claude::screen::Screen;

/// How long apart the pane is looked at after a turn's end.
const LOOK_EVERY: Duration = Duration::from_millis(500);
/// Looks in a row that must find the box ready before a prompt counts as dropped (Claude
/// submits its queue at once when a turn ends, and the box shows busy again within a frame).
const QUIET_LOOKS: u32 = 3;
/// How long after a turn's end the box is watched for; a box that never becomes ready (a
/// dialog, a person's draft) keeps the prompts remembered for the next turn's end.
const WATCH_FOR: Duration = Duration::from_secs(30);

/// What one look at the session says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    /// Nothing of ours waits any more.
    Done,
    /// A turn runs again (Claude submitting its queue, or another prompt): its end looks again.
    TurnRunning,
    /// The box is not ready (busy, a dialog, a draft, prompts queued on screen).
    Busy,
    /// The box is ready and nothing runs.
    Quiet,
}

/// Judges one look: `waiting` prompts of ours, whether a turn runs, the session file's status
/// and the pane as analysed.
pub(super) fn look(waiting: usize, turn_running: bool, status: &str, screen: &Screen) -> Look {
    if waiting == 0 {
        Look::Done
    } else if turn_running {
        Look::TurnRunning
    } else if status == "idle" && screen.ready() {
        Look::Quiet
    } else {
        Look::Busy
    }
}

/// The verdict after a run of looks: `Some(true)` dropped, `Some(false)` stop watching.
pub(super) fn verdict(looks: &[Look]) -> Option<bool> {
    match looks.last()? {
        Look::Done | Look::TurnRunning => Some(false),
        _ => {
            let quiet = looks
                .iter()
                .rev()
                .take_while(|l| **l == Look::Quiet)
                .count();
            (quiet as u32 >= QUIET_LOOKS).then_some(true)
        }
    }
}

impl ClaudeHost {
    /// After a turn's end: watches for the prompts of ours Claude queued, and types again those
    /// it dropped. One watch per session at a time.
    pub(super) fn watch_queued(&self, live: &Arc<Live>) {
        if lock(&live.queued).is_empty()
            || live
                .queue_watch
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let this = self.clone();
        let live = Arc::clone(live);
        tokio::spawn(async move {
            let dropped = this.dropped_prompts(&live).await;
            live.queue_watch
                .store(false, std::sync::atomic::Ordering::SeqCst);
            for text in dropped {
                this.retype(&live, &text).await;
            }
        });
    }

    /// Looks at the pane until the prompts ran, a turn runs, or the box stayed ready: then the
    /// prompts still waiting are taken out of the list and returned.
    async fn dropped_prompts(&self, live: &Arc<Live>) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + WATCH_FOR;
        let mut looks = Vec::new();
        while tokio::time::Instant::now() < deadline {
            tokio::select! {
                _ = live.cancel.cancelled() => return Vec::new(),
                _ = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
                return Vec::new();
            }
            let waiting = lock(&live.queued).len();
            let running = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(&live.session_id)
                    .is_some_and(|s| s.active_turn.is_some())
            });
            let screen = match self.verified_pane(&live.session_id).await {
                Ok(pane) => match self.tmux().capture(&pane).await {
                    Ok(capture) => crate::runtime::claude::screen::analyze(&capture),
                    Err(_) => return Vec::new(),
                },
                Err(_) => return Vec::new(),
            };
            let status = live.status.borrow().clone();
            looks.push(look(waiting, running, &status, &screen));
            match verdict(&looks) {
                Some(true) => return std::mem::take(&mut *lock(&live.queued)),
                Some(false) => return Vec::new(),
                None => {}
            }
        }
        Vec::new()
    }

    /// Types a prompt Claude dropped again, unless a person has control of the session.
    async fn retype(&self, live: &Arc<Live>, text: &str) {
        let session_id = &live.session_id;
        let (human, cancelled) = self.inner.core.read(|state| {
            (
                state.tasks.lease(session_id).holder == LeaseHolder::Human,
                // A task of this prompt whose cancel was asked: the cancel wins.
                state
                    .tasks
                    .open(session_id)
                    .any(|t| t.cancel_requested && t.prompt.trim() == text.trim()),
            )
        });
        let preview: String = text.chars().take(80).collect();
        if cancelled {
            tracing::warn!(session = %session_id, prompt = %preview, "claude dropped a prompt it had queued; its task was cancelled, so it is not typed again");
            self.inner
                .store(
                    session_id,
                    dropped_event(
                        text,
                        "; its task was cancelled, so cohost did not type it again",
                    ),
                )
                .await;
            return;
        }
        if human {
            tracing::warn!(session = %session_id, prompt = %preview, "claude dropped a prompt it had queued; a person has control, so it is not typed again");
            self.inner
                .store(
                    session_id,
                    dropped_event(
                        text,
                        "; a person has control of the session, so cohost did not type it again",
                    ),
                )
                .await;
            return;
        }
        tracing::warn!(session = %session_id, prompt = %preview, "claude dropped a prompt it had queued; typing it again");
        self.inner
            .store(session_id, dropped_event(text, "; cohost typed it again"))
            .await;
        match self.type_prompt(live, text).await {
            // Queued again (a turn began meanwhile): `type_locked` remembers it again.
            Ok(Ok(_)) => {}
            Ok(Err(refusal)) => {
                tracing::warn!(session = %session_id, ?refusal, "a dropped prompt could not be typed again");
                self.inner
                    .store(
                        session_id,
                        dropped_event(text, &format!("; typing it again failed: {refusal:?}")),
                    )
                    .await;
            }
            Err(error) => {
                tracing::warn!(session = %session_id, %error, "a dropped prompt could not be typed again");
                self.inner
                    .store(
                        session_id,
                        dropped_event(text, &format!("; typing it again failed: {error}")),
                    )
                    .await;
            }
        }
    }
}

fn dropped_event(text: &str, then: &str) -> EventKind {
    let preview: String = text.chars().take(200).collect();
    EventKind::Error(ErrorEvent {
        turn_id: None,
        id: None,
        message: format!(
            "Claude dropped a prompt it had queued (it left the box and never ran): {preview:?}{then}"
        ),
        code: Some("claude_dropped_queued_prompt".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(input: Option<&str>, busy: bool, queued: bool) -> Screen {
        Screen {
            input: input.map(str::to_string),
            busy,
            queued,
            ..Screen::default()
        }
    }

    #[test]
    fn a_box_that_stays_ready_with_a_prompt_waiting_means_it_was_dropped() {
        let ready = screen(Some(""), false, false);
        let quiet = look(1, false, "idle", &ready);
        assert_eq!(quiet, Look::Quiet);
        assert_eq!(verdict(&[quiet]), None);
        assert_eq!(verdict(&[quiet, quiet]), None);
        assert_eq!(verdict(&[quiet, quiet, quiet]), Some(true));
        // A busy look in between starts the count again.
        let busy = look(1, false, "busy", &ready);
        assert_eq!(busy, Look::Busy);
        assert_eq!(verdict(&[quiet, quiet, busy, quiet, quiet]), None);
        assert_eq!(verdict(&[quiet, busy, quiet, quiet, quiet]), Some(true));
    }

    #[test]
    fn a_prompt_that_ran_or_a_turn_that_runs_ends_the_watch() {
        let ready = screen(Some(""), false, false);
        assert_eq!(look(0, false, "idle", &ready), Look::Done);
        assert_eq!(
            verdict(&[Look::Quiet, Look::Quiet, Look::Done]),
            Some(false)
        );
        assert_eq!(look(1, true, "idle", &ready), Look::TurnRunning);
        assert_eq!(
            verdict(&[Look::Quiet, Look::Quiet, Look::TurnRunning]),
            Some(false)
        );
    }

    #[test]
    fn a_busy_box_a_queue_on_screen_or_a_draft_is_not_quiet() {
        // Claude submitting its queue: the spinner is back.
        assert_eq!(
            look(1, false, "idle", &screen(Some(""), true, false)),
            Look::Busy
        );
        // Prompts still queued on screen.
        assert_eq!(
            look(1, false, "idle", &screen(Some(""), false, true)),
            Look::Busy
        );
        // A person's draft.
        assert_eq!(
            look(1, false, "idle", &screen(Some("half typed"), false, false)),
            Look::Busy
        );
        // No box at all (a dialog took the screen).
        assert_eq!(
            look(1, false, "idle", &screen(None, false, false)),
            Look::Busy
        );
        // The session file still says busy.
        assert_eq!(
            look(1, false, "busy", &screen(Some(""), false, false)),
            Look::Busy
        );
        assert_eq!(verdict(&[Look::Busy, Look::Busy, Look::Busy]), None);
    }
}
