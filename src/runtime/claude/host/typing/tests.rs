//! Unit tests of the typing machine on real captured screens (`tests/fixtures/claude/screens/`,
//! both ends of the supported range): step by step with explicit times, and driven to its end
//! on a scripted TUI in tokio's paused time, where the named delays and timeouts show as elapsed
//! time. No process, no tmux.

use std::collections::VecDeque;

use super::super::redraw::UNREADABLE_FOR;
use super::*;
use crate::runtime::claude::screen::analyze;

/// The releases with captured screens: both ends of the supported range.
const RELEASES: [&str; 2] = [crate::peers::CLAUDE.oldest, crate::peers::CLAUDE.newest];

const MS: Duration = Duration::from_millis(1);

/// A real capture of `release` (see `tests/fixtures/claude/screens/README.md`), analysed.
fn screen(release: &str, name: &str) -> Screen {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude/screens")
        .join(release)
        .join(name);
    let capture = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read screen fixture {}: {err}", path.display()));
    analyze(&capture)
}

fn seen(release: &str, name: &str) -> Seen {
    Seen::Screen(screen(release, name))
}

fn started(turn: &str) -> Confirmed {
    Confirmed::Started(turn.to_string())
}

/// Feeds a new machine what the driver saw, and when (time since the inject began), and checks
/// each step it answers.
fn check(since_interrupt: Option<Duration>, script: &[(Duration, Seen, Step)]) {
    let begin = Instant::now();
    let mut typing = Typing::new(since_interrupt);
    for (index, (at, seen, expect)) in script.iter().enumerate() {
        let step = typing.next(seen.clone(), begin + *at);
        assert_eq!(&step, expect, "step {index}: {seen:?} at {at:?}");
    }
}

/// A damaged pane, in the shape 2.1.197 left after an Escape under load (composed after a CI
/// capture): the box's top rule drawn over by the turn's last status line, the prompt Claude
/// handed back on a stray line under the bottom rule. No box can be read from it.
fn damaged() -> Screen {
    let rule = "─".repeat(80);
    let capture = [
        "✻ Cogitated for 4s",
        "",
        "S utéed for 4s",
        "❯\u{a0}",
        rule.as_str(),
        "❯ Cancel─me─later ───",
        "",
    ]
    .join("\n");
    let seen = analyze(&capture);
    assert_eq!(seen.input, None, "{seen:?}");
    assert!(!seen.dialog, "{seen:?}");
    seen
}

/// The steps up to the first capture of the box, for a TUI that has started.
fn up_to_capture() -> Vec<(Duration, Seen, Step)> {
    vec![
        (
            Duration::ZERO,
            Seen::Nothing,
            Step::AwaitStarted(READY_TIMEOUT),
        ),
        (Duration::ZERO, Seen::Started, Step::TakeKeys),
        (Duration::ZERO, Seen::Nothing, Step::Capture),
    ]
}

#[test]
fn an_idle_box_is_pasted_entered_and_confirmed() {
    for release in RELEASES {
        for idle in [
            "idle_empty.txt",
            "idle_after_reply.txt",
            "interrupted_idle.txt",
        ] {
            let mut script = up_to_capture();
            script.extend([
                (Duration::ZERO, seen(release, idle), Step::Paste),
                (Duration::ZERO, Seen::Nothing, Step::Sleep(PASTE_SETTLE)),
                (PASTE_SETTLE, Seen::Nothing, Step::Enter),
                (
                    PASTE_SETTLE,
                    Seen::Nothing,
                    Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
                ),
                (
                    400 * MS,
                    Seen::Quiet,
                    Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
                ),
                (
                    500 * MS,
                    Seen::Confirmed(started("p1")),
                    Step::Done(Ok(started("p1"))),
                ),
            ]);
            check(None, &script);
        }
    }
}

#[test]
fn a_box_with_text_is_refused_as_human_typing_and_nothing_is_typed() {
    for release in RELEASES {
        // A person's draft, and a prompt Claude put back after an Escape: both are someone's.
        for draft in ["draft.txt", "escape_restored_prompt.txt"] {
            let mut script = up_to_capture();
            script.push((
                Duration::ZERO,
                seen(release, draft),
                Step::Done(Err(Refusal::HumanTyping)),
            ));
            check(None, &script);
        }
    }
}

#[test]
fn a_pane_with_no_box_for_a_second_is_asked_to_redraw_then_looked_at_again() {
    let mut script = up_to_capture();
    script.extend([
        (
            Duration::ZERO,
            Seen::Screen(damaged()),
            Step::Sleep(READY_POLL),
        ),
        (READY_POLL, Seen::Nothing, Step::Capture),
        (READY_POLL, Seen::Screen(damaged()), Step::Sleep(READY_POLL)),
        (999 * MS, Seen::Nothing, Step::Capture),
        (999 * MS, Seen::Screen(damaged()), Step::Sleep(READY_POLL)),
        (1000 * MS, Seen::Nothing, Step::Capture),
        (1000 * MS, Seen::Screen(damaged()), Step::Redraw),
        (1000 * MS, Seen::Nothing, Step::Capture),
        (1050 * MS, seen(RELEASES[0], "idle_empty.txt"), Step::Paste),
    ]);
    check(None, &script);
}

#[test]
fn a_dialog_is_never_typed_into_and_gives_not_ready_at_the_ready_timeout() {
    for release in RELEASES {
        let dialog = || seen(release, "permission_dialog.txt");
        let mut script = up_to_capture();
        script.extend([
            (Duration::ZERO, dialog(), Step::Sleep(READY_POLL)),
            (READY_POLL, Seen::Nothing, Step::Capture),
            (READY_POLL, dialog(), Step::Sleep(READY_POLL)),
            (READY_TIMEOUT - MS, Seen::Nothing, Step::Capture),
            (READY_TIMEOUT - MS, dialog(), Step::Sleep(READY_POLL)),
            (READY_TIMEOUT, Seen::Nothing, Step::Capture),
            (READY_TIMEOUT, dialog(), Step::Done(Err(Refusal::NotReady))),
        ]);
        check(None, &script);
    }
}

#[test]
fn a_dialog_that_closes_lets_the_prompt_in() {
    for release in RELEASES {
        let mut script = up_to_capture();
        script.extend([
            (
                Duration::ZERO,
                seen(release, "permission_dialog.txt"),
                Step::Sleep(READY_POLL),
            ),
            (READY_POLL, Seen::Nothing, Step::Capture),
            (READY_POLL, seen(release, "idle_empty.txt"), Step::Paste),
        ]);
        check(None, &script);
    }
}

#[test]
fn a_prompt_typed_while_a_turn_runs_is_queued_when_the_screen_shows_it() {
    for release in RELEASES {
        for busy in ["busy_spinner.txt", "busy_streaming.txt"] {
            let mut script = up_to_capture();
            script.extend([
                (Duration::ZERO, seen(release, busy), Step::Paste),
                (Duration::ZERO, Seen::Nothing, Step::Sleep(PASTE_SETTLE)),
                (PASTE_SETTLE, Seen::Nothing, Step::Enter),
                (
                    PASTE_SETTLE,
                    Seen::Nothing,
                    Step::AwaitConfirmation(CONFIRM_POLL_BUSY),
                ),
                // Between the waits for Claude's word, the box is looked at: our prompt is
                // still in it (Claude has not taken the paste yet), so the wait goes on.
                (300 * MS, Seen::Quiet, Step::Capture),
                (
                    300 * MS,
                    Seen::Screen(Screen {
                        input: Some("our prompt".into()),
                        ..screen(release, busy)
                    }),
                    Step::AwaitConfirmation(CONFIRM_POLL_BUSY),
                ),
                // Emptied while the turn runs: queued (2.1.332 also says so in a hook).
                (450 * MS, Seen::Quiet, Step::Capture),
                (
                    450 * MS,
                    seen(release, "queued_while_busy.txt"),
                    Step::Done(Ok(Confirmed::Queued)),
                ),
            ]);
            check(None, &script);
        }
    }
}

#[test]
fn after_an_interrupt_the_paste_waits_out_the_rest_of_the_settle() {
    check(
        Some(500 * MS),
        &[
            (Duration::ZERO, Seen::Nothing, Step::Sleep(1500 * MS)),
            (1500 * MS, Seen::Nothing, Step::AwaitStarted(READY_TIMEOUT)),
        ],
    );
    check(
        Some(AFTER_INTERRUPT),
        &[(
            Duration::ZERO,
            Seen::Nothing,
            Step::AwaitStarted(READY_TIMEOUT),
        )],
    );
}

#[test]
fn a_tui_that_never_starts_is_not_ready() {
    check(
        None,
        &[
            (
                Duration::ZERO,
                Seen::Nothing,
                Step::AwaitStarted(READY_TIMEOUT),
            ),
            (
                READY_TIMEOUT,
                Seen::Quiet,
                Step::Done(Err(Refusal::NotStarted)),
            ),
        ],
    );
}

#[test]
fn a_prompt_still_in_the_box_gets_one_more_enter_and_a_late_confirmation_is_awaited() {
    let release = crate::peers::CLAUDE.newest;
    let first_round_ends = PASTE_SETTLE + SUBMIT_TIMEOUT;
    let second_round_ends = first_round_ends + SUBMIT_TIMEOUT;
    let mut script = up_to_capture();
    script.extend([
        (Duration::ZERO, seen(release, "idle_empty.txt"), Step::Paste),
        (Duration::ZERO, Seen::Nothing, Step::Sleep(PASTE_SETTLE)),
        (PASTE_SETTLE, Seen::Nothing, Step::Enter),
        (
            PASTE_SETTLE,
            Seen::Nothing,
            Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
        ),
        (first_round_ends, Seen::Quiet, Step::Capture),
        // Still in the box (the draft screen stands for our text there): Enter once more.
        (first_round_ends, seen(release, "draft.txt"), Step::Enter),
        (
            first_round_ends,
            Seen::Nothing,
            Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
        ),
        (
            second_round_ends - MS,
            Seen::Quiet,
            Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
        ),
        (second_round_ends, Seen::Quiet, Step::Capture),
        // The box emptied: Claude took it; its word is late.
        (
            second_round_ends,
            seen(release, "idle_empty.txt"),
            Step::AwaitConfirmation(LATE_SUBMIT_TIMEOUT),
        ),
        (
            second_round_ends + SUBMIT_TIMEOUT,
            Seen::Confirmed(started("p2")),
            Step::Done(Ok(started("p2"))),
        ),
    ]);
    check(None, &script);
}

#[test]
fn an_empty_box_after_the_first_round_gets_no_second_enter() {
    let release = crate::peers::CLAUDE.oldest;
    let first_round_ends = PASTE_SETTLE + SUBMIT_TIMEOUT;
    let mut script = up_to_capture();
    script.extend([
        (Duration::ZERO, seen(release, "idle_empty.txt"), Step::Paste),
        (Duration::ZERO, Seen::Nothing, Step::Sleep(PASTE_SETTLE)),
        (PASTE_SETTLE, Seen::Nothing, Step::Enter),
        (
            PASTE_SETTLE,
            Seen::Nothing,
            Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
        ),
        (first_round_ends, Seen::Quiet, Step::Capture),
        (
            first_round_ends,
            seen(release, "idle_empty.txt"),
            Step::AwaitConfirmation(CONFIRM_POLL_IDLE),
        ),
        (
            first_round_ends + SUBMIT_TIMEOUT,
            Seen::Quiet,
            Step::Capture,
        ),
        (
            first_round_ends + SUBMIT_TIMEOUT,
            seen(release, "draft.txt"),
            Step::Clear,
        ),
        (
            first_round_ends + SUBMIT_TIMEOUT,
            Seen::Nothing,
            Step::Done(Err(Refusal::NotAccepted)),
        ),
    ]);
    check(None, &script);
}

/// A TUI played from a script in paused time: the screens each capture shows in turn (the
/// last one stays), and when Claude's word on the prompt comes, if ever.
struct ScriptedTui {
    begin: Instant,
    started: bool,
    screens: VecDeque<Screen>,
    confirm_at: Option<(Duration, Confirmed)>,
    /// The keys sent and the clears, with the time since the inject began.
    typed: Vec<(&'static str, Duration)>,
    /// A damaged pane: every capture shows this until the TUI is asked to redraw.
    damaged: Option<Screen>,
    /// When nothing follows the TUI any more (its follower panicked), if ever.
    unfollowed_at: Option<Duration>,
}

impl ScriptedTui {
    fn new(screens: &[Screen], confirm_at: Option<(Duration, Confirmed)>) -> Self {
        ScriptedTui {
            begin: Instant::now(),
            started: true,
            screens: screens.iter().cloned().collect(),
            confirm_at,
            typed: Vec::new(),
            damaged: None,
            unfollowed_at: None,
        }
    }

    fn note(&mut self, what: &'static str) {
        self.typed.push((what, self.begin.elapsed()));
    }
}

impl Tui for ScriptedTui {
    async fn await_started(&mut self, timeout: Duration) -> bool {
        if !self.started {
            tokio::time::sleep(timeout).await;
        }
        self.started
    }

    async fn take_keys(&mut self) {}

    async fn capture(&mut self) -> Result<Screen, HostError> {
        if let Some(damaged) = &self.damaged {
            return Ok(damaged.clone());
        }
        Ok(if self.screens.len() > 1 {
            self.screens.pop_front().unwrap()
        } else {
            self.screens.front().cloned().unwrap()
        })
    }

    async fn paste(&mut self) -> Result<(), HostError> {
        self.note("paste");
        Ok(())
    }

    async fn enter(&mut self) -> Result<(), HostError> {
        self.note("Enter");
        Ok(())
    }

    async fn await_confirmation(&mut self, timeout: Duration) -> Option<Confirmed> {
        let until = Instant::now() + timeout;
        match &self.confirm_at {
            Some((at, confirmed)) if self.begin + *at <= until => {
                tokio::time::sleep_until(self.begin + *at).await;
                Some(confirmed.clone())
            }
            _ => {
                tokio::time::sleep_until(until).await;
                None
            }
        }
    }

    async fn clear(&mut self) {
        self.note("clear");
    }

    async fn redraw(&mut self) {
        self.note("redraw");
        self.damaged = None;
    }

    fn unfollowed(&self) -> bool {
        self.unfollowed_at
            .is_some_and(|at| self.begin.elapsed() >= at)
    }

    async fn give_up(&mut self) -> HostError {
        self.note("give up");
        HostError::ClosedBecause("unfollowed".into())
    }
}

/// Drives a new machine on `tui` in paused time: the outcome and how long it took.
async fn run(tui: &mut ScriptedTui) -> (Result<Confirmed, Refusal>, Duration) {
    let outcome = drive(Typing::new(None), tui).await.unwrap();
    (outcome, tui.begin.elapsed())
}

#[tokio::test(start_paused = true)]
async fn driven_an_idle_box_is_typed_once_and_confirmed() {
    for release in RELEASES {
        let mut tui = ScriptedTui::new(
            &[screen(release, "idle_empty.txt")],
            Some((Duration::from_secs(1), started("p1"))),
        );
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Ok(started("p1")));
        assert_eq!(took, Duration::from_secs(1));
        assert_eq!(
            tui.typed,
            [("paste", Duration::ZERO), ("Enter", PASTE_SETTLE)]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn driven_an_unfollowed_tui_gets_nothing_more_typed_and_the_machine_stops() {
    let one_ms = Duration::from_millis(1);
    let cases: [(Duration, &[(&str, Duration)]); 2] = [
        // After the Enter, waiting for a word that cannot come: no second Enter.
        (
            PASTE_SETTLE + one_ms,
            &[
                ("paste", Duration::ZERO),
                ("Enter", PASTE_SETTLE),
                ("give up", PASTE_SETTLE + CONFIRM_POLL_IDLE),
            ],
        ),
        // Between the paste and the Enter: no Enter at all.
        (
            one_ms,
            &[("paste", Duration::ZERO), ("give up", PASTE_SETTLE)],
        ),
    ];
    for release in RELEASES {
        for (unfollowed_at, typed) in cases {
            let mut tui = ScriptedTui::new(&[screen(release, "idle_empty.txt")], None);
            tui.unfollowed_at = Some(unfollowed_at);
            let outcome = drive(Typing::new(None), &mut tui).await;
            assert!(
                matches!(outcome, Err(HostError::ClosedBecause(_))),
                "{outcome:?}"
            );
            assert_eq!(tui.typed, typed);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_human_draft_is_refused_with_nothing_typed() {
    for release in RELEASES {
        let mut tui = ScriptedTui::new(&[screen(release, "draft.txt")], None);
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Err(Refusal::HumanTyping));
        assert_eq!(took, Duration::ZERO);
        assert!(tui.typed.is_empty(), "{:?}", tui.typed);
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_dialog_that_stays_is_not_ready_after_the_ready_timeout() {
    for release in RELEASES {
        let mut tui = ScriptedTui::new(&[screen(release, "permission_dialog.txt")], None);
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Err(Refusal::NotReady));
        assert_eq!(took, READY_TIMEOUT);
        assert!(tui.typed.is_empty(), "{:?}", tui.typed);
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_damaged_pane_is_redrawn_once_and_the_prompt_typed_into_the_box_it_shows() {
    for release in RELEASES {
        let mut tui = ScriptedTui::new(
            &[screen(release, "idle_empty.txt")],
            Some((Duration::from_secs(2), started("p1"))),
        );
        tui.damaged = Some(damaged());
        let (outcome, _) = run(&mut tui).await;
        assert_eq!(outcome, Ok(started("p1")));
        let redraw = UNREADABLE_FOR;
        assert_eq!(
            tui.typed,
            [
                ("redraw", redraw),
                ("paste", redraw),
                ("Enter", redraw + PASTE_SETTLE)
            ]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_pane_that_stays_damaged_is_asked_once_a_second_and_is_not_ready() {
    let mut tui = ScriptedTui::new(&[damaged()], None);
    let (outcome, took) = run(&mut tui).await;
    assert_eq!(outcome, Err(Refusal::NotReady));
    assert_eq!(took, READY_TIMEOUT);
    // Asked again after each second of no box (the host sends at most one per 5 s); nothing
    // else is ever typed.
    assert!(tui.typed.len() >= 2, "{:?}", tui.typed);
    assert!(
        tui.typed.iter().all(|(what, _)| *what == "redraw"),
        "{:?}",
        tui.typed
    );
}

#[tokio::test(start_paused = true)]
async fn driven_a_tui_that_never_starts_is_not_ready_after_the_ready_timeout() {
    let mut tui = ScriptedTui::new(&[screen(RELEASES[0], "idle_empty.txt")], None);
    tui.started = false;
    let (outcome, took) = run(&mut tui).await;
    assert_eq!(outcome, Err(Refusal::NotStarted));
    assert_eq!(took, READY_TIMEOUT);
    assert!(tui.typed.is_empty(), "{:?}", tui.typed);
}

#[tokio::test(start_paused = true)]
async fn driven_a_prompt_that_never_confirms_times_out_after_the_named_delays() {
    for release in RELEASES {
        // The box empties after Enter (Claude took the prompt), but no word ever comes.
        let mut tui = ScriptedTui::new(&[screen(release, "idle_empty.txt")], None);
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Err(Refusal::NeverConfirmed));
        assert_eq!(
            took,
            PASTE_SETTLE + SUBMIT_TIMEOUT + SUBMIT_TIMEOUT + LATE_SUBMIT_TIMEOUT
        );
        assert_eq!(
            tui.typed,
            [("paste", Duration::ZERO), ("Enter", PASTE_SETTLE)]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_prompt_left_in_the_box_gets_one_more_enter_then_is_cleared() {
    for release in RELEASES {
        let idle = screen(release, "idle_empty.txt");
        let ours = screen(release, "draft.txt");
        let mut tui = ScriptedTui::new(&[idle, ours], None);
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Err(Refusal::NotAccepted));
        let second_enter = PASTE_SETTLE + SUBMIT_TIMEOUT;
        assert_eq!(took, second_enter + SUBMIT_TIMEOUT);
        assert_eq!(
            tui.typed,
            [
                ("paste", Duration::ZERO),
                ("Enter", PASTE_SETTLE),
                ("Enter", second_enter),
                ("clear", second_enter + SUBMIT_TIMEOUT),
            ]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn driven_a_prompt_typed_while_busy_is_queued_at_the_first_look() {
    for release in RELEASES {
        let mut tui = ScriptedTui::new(
            &[
                screen(release, "busy_spinner.txt"),
                screen(release, "queued_while_busy.txt"),
            ],
            None,
        );
        let (outcome, took) = run(&mut tui).await;
        assert_eq!(outcome, Ok(Confirmed::Queued));
        assert_eq!(took, PASTE_SETTLE + CONFIRM_POLL_BUSY);
        assert_eq!(
            tui.typed,
            [("paste", Duration::ZERO), ("Enter", PASTE_SETTLE)]
        );
    }
}
