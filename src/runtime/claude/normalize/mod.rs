//! Claude Code hooks and transcript lines → cohost events.
//!
//! [`Normalizer`] is a small state machine fed with the session's `hooks.jsonl` lines, its
//! transcript JSONL lines and the TUI's session-file status, in whatever order they arrive.
//! Hooks fire 100–250 ms before the matching transcript lines land, so both sources map the same
//! thing to the same id — a tool call to its `tool_use_id`, a prompt to its `prompt_id` and text —
//! and the core stores whichever comes first and drops the other. A turn's end is held back
//! until the transcript has written it (`system/turn_duration`), so the assistant's reply is
//! stored before `turn.completed`. It does no I/O and reads no clock.
//!
//! This file holds the machine's state and its turn bookkeeping (start, end, ends held for the
//! transcript, the clock tick, interrupts, the session file); `hooks.rs` reads hook lines,
//! `transcript.rs` transcript lines, and `items.rs` holds the ids and shapes both agree on.

use std::collections::{HashSet, VecDeque};

use crate::protocol::{AgentStatus, EventKind, TurnCompleted, TurnSource, TurnStarted, TurnStatus};

mod hooks;
mod items;
mod transcript;

pub use items::{
    DECISIONS, approval_id, input_id, input_request, prompt_item_id, tool_item_id, unwrap_pasted,
};

/// How long a turn's end waits for the transcript to catch up before it is stored anyway.
pub const STOP_GRACE_MS: u64 = 5000;

/// Without hooks (an adopted Claude): how long a turn the session file shows ended (`idle`
/// after `busy`) waits for the transcript to say how — `turn_duration` (completed) or the
/// interrupt marker — before it ends `interrupted` (an Escape before the first token writes
/// neither). Claude writes `idle` about 60 ms after its turn ends and flushes the transcript
/// every 100 ms; seconds cover a loaded machine.
pub const IDLE_GRACE_MS: u64 = 3000;

/// What the host should do with a normalized input.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Store this event.
    Store(EventKind),
    /// Claude's own session id (and transcript) changed: startup, `/clear`, a fork.
    Bound {
        claude_session_id: String,
        transcript_path: Option<String>,
    },
    /// The transcript file to tail (it may not exist yet).
    Transcript(String),
    /// The agent's status for the tracker.
    Status(AgentStatus),
    /// A prompt reached Claude (`UserPromptSubmit`): `text` is what was submitted.
    PromptSubmitted { turn_id: String, text: String },
    /// The permission mode Claude's hooks report changed (or was seen for the first time).
    PermissionMode(String),
    /// A prompt reached Claude while a turn ran, and Claude queued it to run as a turn of its own
    /// later (2.1.332 fires `UserPromptSubmit` at once, naming the running turn).
    PromptQueued { text: String },
    /// A prompt queued while a tool ran was delivered into the running turn (the transcript's
    /// `queued_command` attachment; no `UserPromptSubmit` fires for it).
    PromptDelivered { text: String },
}

#[derive(Debug, Default)]
pub struct Normalizer {
    claude_session: Option<String>,
    transcript: Option<String>,
    /// The turn hooks say is running (Claude's `prompt_id`).
    turn: Option<String>,
    /// The turn the transcript is writing (the `promptId` of its last user line).
    transcript_turn: Option<String>,
    /// The turns a `Stop`/`StopFailure` ended that wait for the transcript's `turn_duration`,
    /// oldest first. More than one when Claude runs a queued prompt's turn (and its `Stop`)
    /// before cohost has read the transcript of the turn before it.
    pending_ends: VecDeque<PendingEnd>,
    /// `(turn, text)` of the last reply text the transcript wrote.
    last_reply: Option<(String, String)>,
    /// Uuids of transcript lines that belong to another session (a fork's copied history).
    inherited: HashSet<String>,
    /// Turns already ended, so a late signal does not end them twice.
    ended: HashSet<String>,
    /// Texts cohost injected and not yet seen submitted, to tell API turns from typed ones.
    injected: Vec<String>,
    /// The turn the last session-file status showed busy (`busy` seen with no turn: `None`).
    busy_turn: Option<String>,
    /// When the hooks opened the running turn: its `UserPromptSubmit`'s `receivedAt` (ms, the
    /// hook's clock, the machine's). The session file going `idle` after it ends the turn even
    /// when no reading saw it busy (a busy spell shorter than the reading interval).
    turn_since: Option<u64>,
    /// The last `permission_mode` a hook reported.
    permission_mode: Option<String>,
    /// Claude prompt ids that belong to another turn, and that turn: the prompts of one batch of
    /// queued prompts Claude sends as one request (several ids, one `Stop`).
    aliases: VecDeque<(String, String)>,
    /// The (trimmed) texts of the running turn's prompts.
    turn_texts: Vec<String>,
    /// A turn a batch of queued prompts opened that has produced nothing yet: further prompts of
    /// the same batch fold into it.
    batch_turn: Option<String>,
    /// Notifications of a turn whose end waits for the transcript, stored right after that
    /// end: Claude's idle prompt comes 1.5 s or more after its `Stop`, and a slow transcript
    /// read must not show "waiting for your input" before the turn has ended.
    held_attention: Vec<(String, Output)>,
    /// No hook reports this session (an adopted Claude, until a hook line arrives): the
    /// transcript opens turns and confirms prompts, the session file's status is the agent's,
    /// and its `idle` ends a turn only once the transcript had [`IDLE_GRACE_MS`] to say how.
    transcript_led: bool,
    /// The last clock reading the machine was given (`tick`, a hook line), in ms.
    now: u64,
    /// The session file's last status (transcript-led: a change is the agent's new status).
    file_status: Option<String>,
    /// Transcript-led, lines of a turn read before its prompt line (Claude may flush a first
    /// turn's reply above its prompt): replayed once a prompt opens the turn.
    before_prompt: Vec<crate::formats::claude::TranscriptRecord>,
}

/// Lines held for a prompt line at most (a first turn's flush is a few dozen).
const MAX_BEFORE_PROMPT: usize = 64;

/// A turn `Stop` ended whose end waits for the transcript (its reply and `turn_duration`).
#[derive(Debug, Clone)]
struct PendingEnd {
    done: TurnCompleted,
    /// When the end goes without the transcript (ms).
    deadline: u64,
    /// The reply `Stop` reported (`last_assistant_message`).
    awaited_reply: Option<String>,
    /// The transcript wrote the turn's `turn_duration` before its reply: the end waits for the
    /// reply line (Claude flushes a batch of lines in no fixed order).
    ended_before_reply: bool,
    /// No `Stop` ended it: the session file went `idle` (transcript-led), or a prompt opened the
    /// next turn. `done` says `interrupted` until the transcript's `turn_duration` (or a late
    /// `Stop`) says it completed.
    by_idle: bool,
}

/// Pending ends kept at most (a turn's end waits seconds; more is a stuck transcript).
const MAX_PENDING_ENDS: usize = 16;

/// Notifications held behind pending ends at most (one or two a turn).
const MAX_HELD_ATTENTION: usize = 16;

/// Aliases remembered (a batch folds at most a handful of prompts).
const MAX_ALIASES: usize = 64;

impl Normalizer {
    pub fn new() -> Self {
        Normalizer::default()
    }

    /// Restores what a restart must know: the claude session, transcript and running turn.
    pub fn resume(
        claude_session: Option<String>,
        transcript: Option<String>,
        turn: Option<String>,
    ) -> Self {
        Normalizer {
            claude_session,
            transcript,
            transcript_turn: turn.clone(),
            turn,
            ..Normalizer::default()
        }
    }

    /// Resumed with no turn running, `turn` being the session's last (ended) turn: transcript
    /// lines read again after a restart (the tail resumes from its last saved checkpoint) are
    /// that turn's — deduplicated, never ending it twice — not lines of the next prompt's turn
    /// flushed above its prompt line.
    pub fn resume_ended(&mut self, turn: String) {
        if self.turn.is_none() {
            self.transcript_turn = Some(turn.clone());
            self.ended.insert(turn);
        }
    }

    /// No hook reports this session: the transcript leads (see `transcript_led`). A hook line
    /// read later hands the lead back to the hooks.
    pub fn lead_by_transcript(&mut self) {
        self.transcript_led = true;
    }

    /// Whether the transcript leads (no hook has reported this session).
    pub fn transcript_led(&self) -> bool {
        self.transcript_led
    }

    /// Claude's session id changed without a hook saying so (the session file of an adopted
    /// Claude names another one after `/clear`): follow the new session and its transcript.
    pub fn rebind(&mut self, claude_session: &str, transcript: &str) -> Vec<Output> {
        let mut out = Vec::new();
        if self.claude_session.as_deref() != Some(claude_session) {
            self.claude_session = Some(claude_session.to_string());
            out.push(Output::Bound {
                claude_session_id: claude_session.to_string(),
                transcript_path: Some(transcript.to_string()),
            });
        }
        if self.transcript.as_deref() != Some(transcript) {
            self.transcript = Some(transcript.to_string());
            out.push(Output::Transcript(transcript.to_string()));
        }
        out
    }

    pub fn claude_session(&self) -> Option<&str> {
        self.claude_session.as_deref()
    }

    pub fn transcript(&self) -> Option<&str> {
        self.transcript.as_deref()
    }

    pub fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// Remembers a text cohost is about to paste, so its turn is attributed to the API.
    pub fn expect_injected(&mut self, text: &str) {
        self.injected.push(text.trim().to_string());
        if self.injected.len() > 16 {
            self.injected.remove(0);
        }
    }

    /// The turn a Claude prompt id belongs to (itself, unless it was folded into another).
    fn resolve(&self, prompt_id: &str) -> String {
        self.aliases
            .iter()
            .rev()
            .find(|(id, _)| id == prompt_id)
            .map(|(_, turn)| turn.clone())
            .unwrap_or_else(|| prompt_id.to_string())
    }

    fn alias(&mut self, prompt_id: &str, turn_id: &str) {
        if prompt_id == turn_id {
            return;
        }
        if self.aliases.len() >= MAX_ALIASES {
            self.aliases.pop_front();
        }
        self.aliases
            .push_back((prompt_id.to_string(), turn_id.to_string()));
    }

    /// The running turn, if it has not ended.
    fn open_turn(&self) -> Option<&str> {
        self.turn
            .as_deref()
            .filter(|turn| !self.ended.contains(*turn))
    }

    /// A turn a `UserPromptSubmit` opened, its hook run at `since` (`receivedAt`).
    fn begin_turn(&mut self, turn_id: &str, text: &str, since: Option<u64>, out: &mut Vec<Output>) {
        self.begin_turn_from(turn_id, text, true, out);
        if self.turn.as_deref() == Some(turn_id) && !self.ended.contains(turn_id) {
            self.turn_since = self.turn_since.or(since);
        }
    }

    /// `from_hooks: false` for a turn the transcript shows first: it does not replace a turn
    /// the hooks say is running (a fork's transcript starts with a copy of the parent's turns).
    fn begin_turn_from(
        &mut self,
        turn_id: &str,
        text: &str,
        from_hooks: bool,
        out: &mut Vec<Output>,
    ) {
        if self.turn.as_deref() != Some(turn_id) && !self.ended.contains(turn_id) {
            let source = match self.injected.iter().position(|t| t == text.trim()) {
                Some(i) => {
                    self.injected.remove(i);
                    TurnSource::Api
                }
                None => TurnSource::Terminal,
            };
            if from_hooks || self.turn.is_none() || self.transcript_led {
                // A new prompt means the turn before it is over: Claude runs one at a time (a
                // prompt queued behind a turn is told apart before this). One still open with
                // no end on its way ended without a `Stop` and without a word of the transcript
                // (an Escape before its first token).
                if let Some(open) = self.open_turn().map(str::to_string)
                    && !self.ends_pending(&open)
                {
                    let done = TurnCompleted {
                        turn_id: open,
                        status: TurnStatus::Interrupted,
                        error: None,
                        duration_ms: None,
                        lost: false,
                    };
                    if self.transcript_led {
                        self.end_turn(done, out);
                    } else {
                        // With hooks, its `Stop` may still be on its way (each hook runs as a
                        // process of its own, and two can land out of order), or its idle
                        // reading was missed: `interrupted` unless the `Stop` or the
                        // transcript says otherwise within the grace.
                        self.hold_end(
                            PendingEnd {
                                done,
                                deadline: self.now + STOP_GRACE_MS,
                                awaited_reply: None,
                                ended_before_reply: false,
                                by_idle: true,
                            },
                            out,
                        );
                    }
                }
                self.turn = Some(turn_id.to_string());
                self.turn_since = None;
                self.turn_texts.clear();
            }
            out.push(Output::Store(EventKind::TurnStarted(TurnStarted {
                turn_id: turn_id.to_string(),
                source,
            })));
            // No `UserPromptSubmit` confirms it: the transcript's prompt line does.
            if self.transcript_led {
                out.push(Output::PromptSubmitted {
                    turn_id: turn_id.to_string(),
                    text: text.to_string(),
                });
                out.push(Output::Status(AgentStatus::Running));
            }
        }
    }

    /// Holds a turn's end for the transcript (`pending_ends`), replacing one held for the same
    /// turn; past [`MAX_PENDING_ENDS`] the oldest goes now.
    fn hold_end(&mut self, pending: PendingEnd, out: &mut Vec<Output>) {
        self.pending_ends
            .retain(|held| held.done.turn_id != pending.done.turn_id);
        if self.pending_ends.len() >= MAX_PENDING_ENDS
            && let Some(oldest) = self.pending_ends.pop_front()
        {
            self.end_turn(oldest.done, out);
        }
        self.pending_ends.push_back(pending);
    }

    fn end_turn(&mut self, done: TurnCompleted, out: &mut Vec<Output>) {
        if self.batch_turn.as_deref() == Some(done.turn_id.as_str()) {
            self.batch_turn = None;
        }
        // Its pending end is moot either way (a turn ended once is never ended again).
        self.pending_ends
            .retain(|pending| pending.done.turn_id != done.turn_id);
        if self.ended.insert(done.turn_id.clone()) {
            if self.turn.as_deref() == Some(done.turn_id.as_str()) {
                self.turn = None;
                self.turn_since = None;
            }
            let status = match done.status {
                TurnStatus::Completed => AgentStatus::Done,
                TurnStatus::Interrupted => AgentStatus::Interrupted,
                TurnStatus::Failed => AgentStatus::Error,
            };
            let turn_id = done.turn_id.clone();
            out.push(Output::Store(EventKind::TurnCompleted(done)));
            // A turn that ended while a later one runs (its end held for the transcript) does
            // not say what the agent is doing now.
            if self.open_turn().is_none() {
                out.push(Output::Status(status));
            }
            self.release_attention(&turn_id, out);
        }
    }

    /// Holds a notification of `turn_id` behind the turn's pending end, if it has one;
    /// otherwise it goes out now.
    fn attention(&mut self, turn_id: &str, output: Output, out: &mut Vec<Output>) {
        if self.ends_pending(turn_id) && self.held_attention.len() < MAX_HELD_ATTENTION {
            self.held_attention.push((turn_id.to_string(), output));
        } else {
            out.push(output);
        }
    }

    fn release_attention(&mut self, turn_id: &str, out: &mut Vec<Output>) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held_attention)
            .into_iter()
            .partition(|(turn, _)| turn == turn_id);
        self.held_attention = later;
        out.extend(now.into_iter().map(|(_, output)| output));
    }
    /// Whether a `Stop` ended `turn_id` and its end waits for the transcript: the turn
    /// completed, and no later verdict may say otherwise. Another turn's pending end says
    /// nothing about this one.
    fn ends_pending(&self, turn_id: &str) -> bool {
        self.pending_ends
            .iter()
            .any(|pending| pending.done.turn_id == turn_id)
    }

    /// The turns whose ends wait for the transcript (for the debug log).
    fn pending_turns(&self) -> Vec<&str> {
        self.pending_ends
            .iter()
            .map(|pending| pending.done.turn_id.as_str())
            .collect()
    }

    /// Whether the transcript has written the reply `Stop` reported for a pending turn.
    fn reply_written(&self, pending: &PendingEnd) -> bool {
        match &pending.awaited_reply {
            Some(want) => self.last_reply.as_ref().is_some_and(|(turn, text)| {
                // The line's text is the reply, or the last block of a multi-block one.
                *turn == pending.done.turn_id && (text == want || want.ends_with(text.as_str()))
            }),
            None => true,
        }
    }

    /// Time passes: a turn end held for the transcript is released after the grace period.
    pub fn tick(&mut self, now: u64) -> Vec<Output> {
        self.now = self.now.max(now);
        let mut out = Vec::new();
        let due: Vec<TurnCompleted> = self
            .pending_ends
            .iter()
            .filter(|pending| now >= pending.deadline)
            .map(|pending| pending.done.clone())
            .collect();
        for done in due {
            self.end_turn(done, &mut out);
        }
        out
    }

    /// The TUI's session file (`~/.claude/sessions/<pid>.json`) `status`: the only signal that a
    /// human's Escape ended a turn, since no hook fires on an interrupt.
    /// cohost pressed Escape on `turn_id` and the TUI is idle again: the turn ended interrupted,
    /// unless it finished first (its `Stop` is pending or it already ended). This covers an
    /// Escape before the first token, whose busy spell can be too short for the session file.
    pub fn interrupted(&mut self, turn_id: &str) -> Vec<Output> {
        let mut out = Vec::new();
        tracing::debug!(
            turn_id,
            current = ?self.turn,
            pending = ?self.pending_turns(),
            "claude: cohost's Escape ended a turn"
        );
        if self.turn.as_deref() == Some(turn_id) && !self.ends_pending(turn_id) {
            self.end_turn(
                TurnCompleted {
                    turn_id: turn_id.to_string(),
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: false,
                },
                &mut out,
            );
        }
        out
    }

    /// A reading that does not say since when (the tests' shorthand).
    #[cfg(test)]
    pub fn session_status(&mut self, status: &str) -> Vec<Output> {
        self.session_status_since(status, None)
    }

    /// A reading of the session file: its `status`, and `since` (its `statusUpdatedAt`) when
    /// the file says when that status began.
    pub fn session_status_since(&mut self, status: &str, since: Option<u64>) -> Vec<Output> {
        let mut out = Vec::new();
        // Transcript-led, the file's status is the agent's (with hooks, the hooks say it).
        if self.transcript_led && self.file_status.as_deref() != Some(status) {
            self.file_status = Some(status.to_string());
            match status {
                "busy" => out.push(Output::Status(AgentStatus::Running)),
                "waiting" => out.push(Output::Status(AgentStatus::Waiting)),
                "shell" => out.push(Output::Status(AgentStatus::ToolRunning)),
                _ => {}
            }
        }
        // Only the turn that was seen busy, or that the file went idle after, is ended by
        // going idle: between a turn and the queued prompt that follows it the file reads idle
        // for a moment, when the hooks may have started the next turn already. A reading may
        // miss a short busy spell (an Escape right after the prompt); the idle's
        // `statusUpdatedAt`, later than the turn's `UserPromptSubmit`, still says it ended.
        let busy_turn = self.busy_turn.take();
        let idle_after_start = self
            .turn_since
            .zip(since)
            .is_some_and(|(started, idle)| idle > started);
        let running =
            status == "busy" || (self.transcript_led && matches!(status, "waiting" | "shell"));
        if running {
            self.busy_turn = self.turn.clone();
        }
        tracing::debug!(
            status,
            ?since,
            current = ?self.turn,
            turn_since = ?self.turn_since,
            busy = ?busy_turn,
            pending = ?self.pending_turns(),
            "claude: the session file's status applies"
        );
        if status == "idle"
            && let Some(turn) = self.turn.clone()
            && !self.ends_pending(&turn)
            && (busy_turn.as_deref() == Some(turn.as_str()) || idle_after_start)
        {
            if self.transcript_led {
                // No `Stop` came before this `idle` (none comes without hooks): the transcript
                // says how the turn ended, if it does so within the grace.
                self.pending_ends.push_back(PendingEnd {
                    done: TurnCompleted {
                        turn_id: turn,
                        status: TurnStatus::Interrupted,
                        error: None,
                        duration_ms: None,
                        lost: false,
                    },
                    deadline: self.now + IDLE_GRACE_MS,
                    awaited_reply: None,
                    ended_before_reply: false,
                    by_idle: true,
                });
                return out;
            }
            self.end_turn(
                TurnCompleted {
                    turn_id: turn,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: false,
                },
                &mut out,
            );
        }
        out
    }
}

#[cfg(test)]
mod led_tests;
#[cfg(test)]
mod tests;
