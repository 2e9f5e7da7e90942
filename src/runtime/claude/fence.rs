//! The hook fence: a turn end that no hook announces waits until the hooks already written
//! have been read.
//!
//! Two verdicts end a Claude turn without a hook: the TUI's session file going `idle` after a
//! turn it showed `busy` (a human's Escape), and cohost's own Escape leaving the TUI idle.
//! Both race the hooks: Claude runs the `Stop` hook (cohost-hook appends its line to
//! `hooks.jsonl` before it exits, and Claude waits for it) and only then writes `idle`, but
//! cohost reads the two files apart — the session file on a timer, `hooks.jsonl` through a
//! tail whose lines may still sit in a channel. Reading `idle` first would end a turn that
//! really completed as `interrupted` (and, since `Stop` is then ignored, lose its answer).
//!
//! So a verdict is held with the size `hooks.jsonl` had right after the verdict was reached;
//! it is released once the tail has read that far (a `Stop` read meanwhile makes the verdict
//! moot: the normalizer then ends the turn as completed). A hook line that never completes
//! (a hook killed mid-write) cannot hold a verdict for ever: past [`FENCE_LIMIT`] it is
//! released with a warning.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::normalize::{Normalizer, Output};

/// How long a verdict waits at most for the hooks tail.
pub const FENCE_LIMIT: Duration = Duration::from_secs(5);

/// A turn end that no hook announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The session file reads `idle`, since its `statusUpdatedAt` (when it says).
    Idle(Option<u64>),
    /// cohost's Escape stopped this turn and the TUI is idle again.
    Interrupted(String),
}

#[derive(Debug)]
struct Held {
    verdict: Verdict,
    upto: u64,
    since: Instant,
}

/// Verdicts waiting for the hooks tail, in the order they were reached.
#[derive(Debug, Default)]
pub struct HookFence {
    /// How far the hooks tail has been read (and its lines applied).
    read: u64,
    held: Vec<Held>,
}

impl HookFence {
    pub fn new(read: u64) -> HookFence {
        HookFence {
            read,
            held: Vec::new(),
        }
    }

    /// How far the hooks tail has been read.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// The hooks tail applied everything before `offset`.
    pub fn read_to(&mut self, offset: u64) {
        self.read = offset;
    }

    /// Whether an `Idle` verdict is waiting (the session file's later readings wait behind it).
    pub fn holds_idle(&self) -> bool {
        self.held
            .iter()
            .any(|h| matches!(h.verdict, Verdict::Idle(_)))
    }

    /// A verdict reached when `hooks.jsonl` held `written` bytes: it waits until those are read.
    pub fn hold(&mut self, verdict: Verdict, written: u64, now: Instant) {
        if matches!(verdict, Verdict::Idle(_)) && self.holds_idle() {
            return;
        }
        self.held.push(Held {
            verdict,
            upto: written,
            since: now,
        });
    }

    /// The verdicts that may apply now, oldest first: every hook line written before each was
    /// reached has been read, or it waited [`FENCE_LIMIT`] (the second value: true when it is
    /// released only by the limit).
    pub fn release(&mut self, now: Instant) -> Vec<(Verdict, bool)> {
        let mut out = Vec::new();
        // In order: a later verdict never overtakes an earlier one.
        while let Some(first) = self.held.first() {
            let caught_up = self.read >= first.upto;
            let expired = now.duration_since(first.since) >= FENCE_LIMIT;
            if !caught_up && !expired {
                break;
            }
            let held = self.held.remove(0);
            out.push((held.verdict, !caught_up));
        }
        out
    }
}

/// The session task's turn-ending inputs, applied through the fence to the normalizer in the
/// order the task reads them. Free of I/O, so that every order the two files can be read in is
/// tested on recorded lines (below); the task adds only the reading.
impl HookFence {
    /// A hook line the tail read; `read_to` is where the tail stands after it.
    pub fn hook(
        &mut self,
        normalizer: &mut Normalizer,
        line: &Value,
        read_to: u64,
        now_ms: u64,
    ) -> Vec<Output> {
        self.read_to(read_to);
        normalizer.hook(line, now_ms)
    }

    /// A reading of the session file's `status` (`since`: its `statusUpdatedAt`), taken when
    /// `hooks.jsonl` held `written` bytes. `idle` may end a turn no hook ended: it waits for
    /// the hooks written before it (read after the session file, so they include its `Stop`).
    /// Later readings wait behind a held `idle`, so `busy` cannot overtake it.
    pub fn session_status(
        &mut self,
        normalizer: &mut Normalizer,
        (status, since): (&str, Option<u64>),
        written: u64,
        now: Instant,
    ) -> Vec<Output> {
        if status == "idle" {
            self.hold(Verdict::Idle(since), written, now);
            Vec::new()
        } else if !self.holds_idle() {
            normalizer.session_status_since(status, since)
        } else {
            Vec::new()
        }
    }

    /// cohost's Escape stopped `turn` when `hooks.jsonl` held `written` bytes: held until those
    /// are read, since a `Stop` among them means the turn completed before the Escape did.
    pub fn interrupted(&mut self, turn: String, written: u64, now: Instant) {
        self.hold(Verdict::Interrupted(turn), written, now);
    }

    /// What the released verdicts mean now, and the verdicts released only by the limit.
    pub fn apply(
        &mut self,
        normalizer: &mut Normalizer,
        now: Instant,
    ) -> (Vec<Output>, Vec<Verdict>) {
        let mut outputs = Vec::new();
        let mut expired = Vec::new();
        for (verdict, by_limit) in self.release(now) {
            outputs.extend(match &verdict {
                Verdict::Idle(since) => normalizer.session_status_since("idle", *since),
                Verdict::Interrupted(turn) => normalizer.interrupted(turn),
            });
            if by_limit {
                expired.push(verdict);
            }
        }
        (outputs, expired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EventKind, TurnStatus};
    use serde_json::json;

    /// `hooks.jsonl` as cohost-hook writes it, and how far the tail has read it.
    #[derive(Default)]
    struct Hooks {
        lines: Vec<(Value, u64)>,
        written: u64,
        read: usize,
    }

    impl Hooks {
        /// Claude runs a hook: its line is appended (not yet read by cohost).
        fn write(&mut self, event: &str, payload: Value) {
            self.write_at(event, payload, 1);
        }

        /// [`write`](Self::write), the hook run at `received_at` (ms).
        fn write_at(&mut self, event: &str, payload: Value, received_at: u64) {
            // The shape cohost-hook writes, payloads as Claude Code 2.1.197 and 2.1.332 send
            // them (docs/peers.md).
            let line = json!({"receivedAt": received_at, "event": event, "payload": payload});
            self.written += line.to_string().len() as u64 + 1;
            self.lines.push((line, self.written));
        }

        /// The tail delivers every line written so far.
        fn read_all(&mut self, fence: &mut HookFence, n: &mut Normalizer) -> Vec<Output> {
            let mut out = Vec::new();
            while let Some((line, end)) = self.lines.get(self.read).cloned() {
                self.read += 1;
                out.extend(fence.hook(n, &line, end, 0));
            }
            out
        }
    }

    fn turn_ends(out: &[Output]) -> Vec<(String, TurnStatus)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Store(EventKind::TurnCompleted(t)) => Some((t.turn_id.clone(), t.status)),
                _ => None,
            })
            .collect()
    }

    /// Issue 20, item 1: an Escape on one turn, then a prompt whose turn completes — and the
    /// session file's `idle` after it is read before the tail has delivered the `Stop` that
    /// Claude wrote first. Through the fence the second turn ends `completed`; applied as it is
    /// read (what the session task did before the fence) the same inputs end it `interrupted`,
    /// and its answer is lost.
    fn interrupt_then_prompt(fenced: bool) -> Vec<(String, TurnStatus)> {
        let t0 = Instant::now();
        let mut n = Normalizer::new();
        let mut fence = HookFence::new(0);
        let mut hooks = Hooks::default();
        let mut out = Vec::new();
        let status = |fence: &mut HookFence, n: &mut Normalizer, s: &str, written: u64| {
            if fenced {
                let mut o = fence.session_status(n, (s, None), written, t0);
                o.extend(fence.apply(n, t0).0);
                o
            } else {
                n.session_status(s)
            }
        };
        hooks.write("SessionStart", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}));
        hooks.write("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"Write a long essay"}));
        out.extend(hooks.read_all(&mut fence, &mut n));
        out.extend(status(&mut fence, &mut n, "busy", hooks.written));
        // cohost's Escape: the TUI is idle again, no Stop (an interrupt runs no hook).
        fence.interrupted("p1".into(), hooks.written, t0);
        out.extend(fence.apply(&mut n, t0).0);
        out.extend(n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}})));
        out.extend(status(&mut fence, &mut n, "idle", hooks.written));
        // The next prompt, and its turn runs to the end.
        hooks.write("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p2","hook_event_name":"UserPromptSubmit","prompt":"Say hello"}));
        out.extend(hooks.read_all(&mut fence, &mut n));
        out.extend(status(&mut fence, &mut n, "busy", hooks.written));
        out.extend(n.transcript_line(&json!({"type":"user","promptId":"p2","message":{"role":"user","content":"Say hello"},"uuid":"u2"})));
        out.extend(n.transcript_line(&json!({"type":"assistant","uuid":"a2","message":{"id":"msg_2","model":"claude-opus-4-8","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}})));
        // Claude runs Stop (its line is in hooks.jsonl before the hook exits), then writes
        // `idle`; cohost reads the session file first.
        hooks.write("Stop", json!({"session_id":"s1","prompt_id":"p2","hook_event_name":"Stop","last_assistant_message":"Hello"}));
        out.extend(status(&mut fence, &mut n, "idle", hooks.written));
        out.extend(hooks.read_all(&mut fence, &mut n));
        if fenced {
            out.extend(fence.apply(&mut n, t0).0);
        }
        out.extend(
            n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":900})),
        );
        out.extend(n.tick(10_000));
        turn_ends(&out)
    }

    #[tokio::test(start_paused = true)]
    async fn after_an_interrupt_the_next_turn_completes_though_idle_is_read_before_its_stop() {
        assert_eq!(
            interrupt_then_prompt(true),
            vec![
                ("p1".to_string(), TurnStatus::Interrupted),
                ("p2".to_string(), TurnStatus::Completed)
            ]
        );
        // The same inputs, each applied as it is read, lose the second answer.
        assert_eq!(
            interrupt_then_prompt(false),
            vec![
                ("p1".to_string(), TurnStatus::Interrupted),
                ("p2".to_string(), TurnStatus::Interrupted)
            ]
        );
    }

    /// Issue 20 (seen under load after a daemon restart, Claude Code 2.1.332): a turn's end is
    /// read from the transcript before its `Stop` line is read from `hooks.jsonl`; the next
    /// turn is interrupted by cohost's Escape before its first token. The late `Stop` of the
    /// ended turn must not hold the next turn's interrupt: before the fix it left a pending end
    /// for the ended turn, the Escape's verdict was dropped for it, and the next turn never
    /// ended.
    #[tokio::test(start_paused = true)]
    async fn a_late_stop_of_an_ended_turn_does_not_swallow_the_next_turns_interrupt() {
        let t0 = Instant::now();
        let mut n = Normalizer::new();
        let mut fence = HookFence::new(0);
        let mut hooks = Hooks::default();
        let mut out = Vec::new();
        hooks.write("SessionStart", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}));
        hooks.write("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"typed while cohost was down"}));
        out.extend(hooks.read_all(&mut fence, &mut n));
        // The transcript tail delivers the whole turn, its end included, first.
        out.extend(n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":"typed while cohost was down"},"uuid":"u1"})));
        out.extend(n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"id":"msg_1","model":"claude-opus-4-8","content":[{"type":"text","text":"Typed answer."}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}})));
        out.extend(
            n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":177})),
        );
        // Then the hooks tail reads its Stop, and the next prompt's hook.
        hooks.write("Stop", json!({"session_id":"s1","prompt_id":"p1","hook_event_name":"Stop","last_assistant_message":"Typed answer."}));
        hooks.write("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p2","hook_event_name":"UserPromptSubmit","prompt":"Hang after the restart"}));
        out.extend(hooks.read_all(&mut fence, &mut n));
        // cohost's Escape before the first token: the TUI is idle and empty again.
        fence.interrupted("p2".into(), hooks.written, t0);
        out.extend(fence.apply(&mut n, t0).0);
        assert_eq!(
            turn_ends(&out),
            vec![
                ("p1".to_string(), TurnStatus::Completed),
                ("p2".to_string(), TurnStatus::Interrupted)
            ]
        );
        // Nothing is left to end later.
        assert!(turn_ends(&n.tick(60_000)).is_empty());
    }

    /// A person's Escape right after their prompt: the session file's busy spell (12 ms after
    /// the `UserPromptSubmit` hook to the `idle` 211 ms later, as Claude Code 2.1.332 wrote
    /// it) falls between two readings, and the reading that sees `idle` comes before the tail
    /// has delivered the prompt's hook. The idle's `statusUpdatedAt`, later than the hook's
    /// `receivedAt`, ends the turn; without it (`None`, what cohost read before) the turn never
    /// ends: no hook fires on an interrupt and, before the first token, the transcript writes
    /// no marker.
    fn escape_between_readings(since: fn(u64) -> Option<u64>) -> Vec<(String, TurnStatus)> {
        // The times 2.1.332 wrote, in ms after its SessionStart hook ran.
        const AT: u64 = 1_796_463_982_247;
        let t0 = Instant::now();
        let mut n = Normalizer::new();
        let mut fence = HookFence::new(0);
        let mut hooks = Hooks::default();
        let mut out = Vec::new();
        // A reading of the session file: `idle` since `at`.
        let idle = |fence: &mut HookFence, n: &mut Normalizer, at: u64, written: u64| {
            let mut o = fence.session_status(n, ("idle", since(AT + at)), written, t0);
            o.extend(fence.apply(n, t0).0);
            o
        };
        hooks.write_at("SessionStart", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}), AT);
        out.extend(hooks.read_all(&mut fence, &mut n));
        out.extend(idle(&mut fence, &mut n, 80, hooks.written));
        hooks.write_at("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"Stop me at once"}), AT + 330);
        // busy at 342, idle at 553: no reading saw the busy.
        out.extend(idle(&mut fence, &mut n, 553, hooks.written));
        assert!(turn_ends(&out).is_empty(), "held for the prompt's hook");
        out.extend(hooks.read_all(&mut fence, &mut n));
        out.extend(fence.apply(&mut n, t0).0);
        // Later readings of the same idle change nothing.
        out.extend(idle(&mut fence, &mut n, 553, hooks.written));
        turn_ends(&out)
    }

    #[tokio::test(start_paused = true)]
    async fn an_escape_between_two_readings_ends_the_turn_by_the_idle_after_its_prompt() {
        assert_eq!(
            escape_between_readings(Some),
            vec![("p1".to_string(), TurnStatus::Interrupted)]
        );
        assert_eq!(escape_between_readings(|_| None), vec![]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_verdict_waits_until_the_hooks_written_before_it_are_read() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(100);
        // The session file said idle when hooks.jsonl held 160 bytes (the Stop line).
        fence.hold(Verdict::Idle(None), 160, t0);
        assert!(fence.holds_idle());
        assert_eq!(fence.release(t0), vec![]);
        fence.read_to(130);
        assert_eq!(fence.release(t0 + Duration::from_millis(10)), vec![]);
        fence.read_to(160);
        assert_eq!(
            fence.release(t0 + Duration::from_millis(20)),
            vec![(Verdict::Idle(None), false)]
        );
        assert!(!fence.holds_idle());
        assert_eq!(fence.release(t0 + Duration::from_millis(30)), vec![]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caught_up_tail_releases_at_once() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(160);
        fence.hold(Verdict::Interrupted("t1".into()), 160, t0);
        assert_eq!(
            fence.release(t0),
            vec![(Verdict::Interrupted("t1".into()), false)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn verdicts_are_released_in_order_and_idle_is_held_once() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(0);
        fence.hold(Verdict::Idle(None), 50, t0);
        fence.hold(Verdict::Idle(None), 80, t0);
        fence.hold(Verdict::Interrupted("t1".into()), 40, t0);
        fence.read_to(45);
        // The interrupt's bytes are read, but it waits behind the earlier idle verdict.
        assert_eq!(fence.release(t0), vec![]);
        fence.read_to(50);
        assert_eq!(
            fence.release(t0),
            vec![
                (Verdict::Idle(None), false),
                (Verdict::Interrupted("t1".into()), false)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_that_never_completes_holds_a_verdict_only_until_the_limit() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(0);
        fence.hold(Verdict::Idle(None), 10, t0);
        tokio::time::advance(FENCE_LIMIT - Duration::from_millis(1)).await;
        assert_eq!(fence.release(Instant::now()), vec![]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            fence.release(Instant::now()),
            vec![(Verdict::Idle(None), true)]
        );
    }
}
