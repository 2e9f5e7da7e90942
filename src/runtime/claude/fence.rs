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

use tokio::time::Instant;

/// How long a verdict waits at most for the hooks tail.
pub const FENCE_LIMIT: Duration = Duration::from_secs(5);

/// A turn end that no hook announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The session file reads `idle`.
    Idle,
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

    /// The hooks tail applied everything before `offset`.
    pub fn read_to(&mut self, offset: u64) {
        self.read = offset;
    }

    /// Whether an `Idle` verdict is waiting (the session file's later readings wait behind it).
    pub fn holds_idle(&self) -> bool {
        self.held.iter().any(|h| h.verdict == Verdict::Idle)
    }

    /// A verdict reached when `hooks.jsonl` held `written` bytes: it waits until those are read.
    pub fn hold(&mut self, verdict: Verdict, written: u64, now: Instant) {
        if verdict == Verdict::Idle && self.holds_idle() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_verdict_waits_until_the_hooks_written_before_it_are_read() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(100);
        // The session file said idle when hooks.jsonl held 160 bytes (the Stop line).
        fence.hold(Verdict::Idle, 160, t0);
        assert!(fence.holds_idle());
        assert_eq!(fence.release(t0), vec![]);
        fence.read_to(130);
        assert_eq!(fence.release(t0 + Duration::from_millis(10)), vec![]);
        fence.read_to(160);
        assert_eq!(
            fence.release(t0 + Duration::from_millis(20)),
            vec![(Verdict::Idle, false)]
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
        fence.hold(Verdict::Idle, 50, t0);
        fence.hold(Verdict::Idle, 80, t0);
        fence.hold(Verdict::Interrupted("t1".into()), 40, t0);
        fence.read_to(45);
        // The interrupt's bytes are read, but it waits behind the earlier idle verdict.
        assert_eq!(fence.release(t0), vec![]);
        fence.read_to(50);
        assert_eq!(
            fence.release(t0),
            vec![
                (Verdict::Idle, false),
                (Verdict::Interrupted("t1".into()), false)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_that_never_completes_holds_a_verdict_only_until_the_limit() {
        let t0 = Instant::now();
        let mut fence = HookFence::new(0);
        fence.hold(Verdict::Idle, 10, t0);
        tokio::time::advance(FENCE_LIMIT - Duration::from_millis(1)).await;
        assert_eq!(fence.release(Instant::now()), vec![]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(fence.release(Instant::now()), vec![(Verdict::Idle, true)]);
    }
}
