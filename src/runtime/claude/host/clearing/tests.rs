//! Unit tests of the clear-the-box machine on the literal screens Claude draws (the clear hint
//! of 2.1.197 and 2.1.332, the Rewind dialog: `screen.rs` tests hold the same captures, and
//! `tests/fixtures/claude/screens/` the real panes), step by step with explicit times.

use super::*;
use crate::runtime::claude::screen::analyze;

const MS: Duration = Duration::from_millis(1);

fn rule() -> String {
    "─".repeat(60)
}

/// A box still holding `text` (Claude took neither Escape yet).
fn holding(text: &str) -> Screen {
    analyze(&format!(
        "{rule}\n❯\u{a0}{text}\n{rule}\n  ? for shortcuts\n",
        rule = rule()
    ))
}

/// 2.1.197 after one Escape on a box with text: the hint in the footer.
fn hint_197() -> Screen {
    analyze(&format!(
        "{rule}\n❯\u{a0}a draft in the box\n{rule}\n                                   Esc again to clear\n",
        rule = rule()
    ))
}

/// 2.1.332 after one Escape on a box with text: the hint above the box.
fn hint_332() -> Screen {
    analyze(&format!(
        "                                   esc again to clear\n{rule}\n❯\u{a0}a draft in the box\n{rule}\n  ⏸ manual mode on\n",
        rule = rule()
    ))
}

fn empty() -> Screen {
    analyze(&format!(
        "{rule}\n❯\u{a0}\n{rule}\n  ? for shortcuts\n",
        rule = rule()
    ))
}

fn rewind() -> Screen {
    analyze(&format!(
        "{rule}\n  Rewind\n  Nothing to rewind to yet.\n  Esc to cancel\n",
        rule = rule()
    ))
}

/// Feeds a new machine the screens each step saw (`None`: the step saw none), at a time since
/// the clear began, and checks each step it answers.
fn check(script: &[(Duration, Option<Screen>, ClearStep)]) {
    let begin = Instant::now();
    let mut clearing = Clearing::new();
    for (index, (at, seen, expect)) in script.iter().enumerate() {
        let step = clearing.next(seen.as_ref(), begin + *at);
        assert_eq!(&step, expect, "step {index}: {seen:?} at {at:?}");
    }
}

/// The start every clear has: two Escapes, a moment, a look.
fn opening() -> Vec<(Duration, Option<Screen>, ClearStep)> {
    vec![
        (Duration::ZERO, None, ClearStep::Keys(&["Escape", "Escape"])),
        (Duration::ZERO, None, ClearStep::Sleep(CLEAR_POLL)),
        (CLEAR_POLL, None, ClearStep::Capture),
    ]
}

#[test]
fn two_escapes_that_empty_the_box_are_enough() {
    let mut script = opening();
    script.push((CLEAR_POLL, Some(empty()), ClearStep::Done(true)));
    check(&script);
}

#[test]
fn the_clear_hint_gets_one_more_escape_once() {
    for hint in [hint_197(), hint_332()] {
        assert!(hint.clear_pending && hint.has_draft(), "{hint:?}");
        let mut script = opening();
        script.extend([
            (CLEAR_POLL, Some(hint.clone()), ClearStep::Keys(&["Escape"])),
            (CLEAR_POLL, None, ClearStep::Sleep(CLEAR_POLL)),
            (2 * CLEAR_POLL, None, ClearStep::Capture),
            // The hint still shows (a late render): no second extra Escape.
            (
                2 * CLEAR_POLL,
                Some(hint.clone()),
                ClearStep::Sleep(CLEAR_POLL),
            ),
            (3 * CLEAR_POLL, None, ClearStep::Capture),
            (3 * CLEAR_POLL, Some(empty()), ClearStep::Done(true)),
        ]);
        check(&script);
    }
}

#[test]
fn a_rewind_dialog_an_escape_opened_is_closed_and_the_box_counts_as_empty() {
    let mut script = opening();
    script.extend([
        (CLEAR_POLL, Some(rewind()), ClearStep::CloseRewind),
        (CLEAR_POLL, None, ClearStep::Done(true)),
    ]);
    check(&script);
}

#[test]
fn a_box_that_keeps_its_text_gives_up_at_the_clear_timeout() {
    let text = holding("restore me after escape");
    let mut script = opening();
    script.extend([
        (CLEAR_POLL, Some(text.clone()), ClearStep::Sleep(CLEAR_POLL)),
        (CLEAR_TIMEOUT - MS, None, ClearStep::Capture),
        (
            CLEAR_TIMEOUT - MS,
            Some(text.clone()),
            ClearStep::Sleep(CLEAR_POLL),
        ),
        (CLEAR_TIMEOUT, None, ClearStep::Capture),
        (CLEAR_TIMEOUT, Some(text), ClearStep::Done(false)),
    ]);
    check(&script);
}
