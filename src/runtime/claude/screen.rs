//! Reads Claude Code's TUI from a plain-text pane capture (`tmux capture-pane -p`) and says
//! whether the live input box is ready for a prompt, holds a draft, or is hidden by a dialog.
//!
//! Pure: it takes the captured text and does no IO, so it never talks to tmux itself; the
//! Claude host captures the pane and asks [`analyze`] before pasting. The rules come from
//! watching claude 2.1.197 and hold unchanged on 2.1.332 (real captures of both are in
//! `tests/fixtures/claude/screens/<release>/`; 2.1.332 adds a mode footer and an effort line,
//! which the rules ignore):
//!
//! - The live input box is the last line starting with `❯` and a NO-BREAK SPACE (U+00A0) with a
//!   rule line (`─` at least 20 times) directly above it; it ends at the next rule line. Prompts
//!   in the scroll-back are drawn `❯ text` with a normal space and never count.
//! - The text after `❯\u{a0}`, plus the two-space-indented lines below it, is the unsent input.
//!   `Press up to edit queued messages` there is a placeholder meaning prompts are queued.
//! - Busy when the footer (the first non-empty line below the box) says `esc to interrupt`, or
//!   a spinner line (`✻ Churning… (3s · ↓ 26 tokens)`) sits above the box. A finished turn's
//!   line (`✻ Baked for 3s`) has no ellipsis and is not busy.
//! - A dialog (permission, trust, Rewind, …) replaces the box and shows one of a few phrases.
//!
//! The screen is a weak signal: the session file's `status` is the stronger one, and the host
//! should want both before it pastes.

/// What one capture of the Claude TUI shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Screen {
    /// The unsent text in the live input box (trimmed; lines of a multi-line draft joined with
    /// `\n`), `Some("")` for an empty box, `None` when no input box is on screen.
    pub input: Option<String>,
    /// A turn is running: the footer says `esc to interrupt` or a spinner is showing.
    pub busy: bool,
    /// A dialog hides the input box (permission prompt, trust, Rewind, warnings).
    pub dialog: bool,
    /// The box shows `Press up to edit queued messages`: prompts wait for the running turn.
    pub queued: bool,
    /// Claude took one Escape on a box with text and waits for a second to clear it (`Esc again
    /// to clear` in the footer on 2.1.197, `esc again to clear` above the box on 2.1.332).
    pub clear_pending: bool,
    /// The Rewind dialog is open (two Escapes on an empty box open it; one Escape closes it).
    pub rewind: bool,
}

impl Screen {
    /// True when a prompt can be pasted now: the box is on screen and empty, no turn runs, no
    /// dialog is open and nothing is queued. Callers should see it twice, about 0.3 s apart.
    pub fn ready(&self) -> bool {
        self.input.as_deref() == Some("") && !self.busy && !self.dialog && !self.queued
    }

    /// True when the box holds text someone typed or pasted but did not send (a collapsed
    /// paste placeholder such as `[Pasted text #1 +4 lines]` counts).
    pub fn has_draft(&self) -> bool {
        self.input.as_deref().is_some_and(|input| !input.is_empty())
    }
}

/// The prompt marker of the live input box: `❯` and a NO-BREAK SPACE.
const BOX_PROMPT: &str = "❯\u{a0}";

/// How many `─` make a rule line.
const MIN_RULE_CHARS: usize = 20;

/// The placeholder the box shows while prompts are queued.
const QUEUED_PLACEHOLDER: &str = "Press up to edit queued messages";

/// The footer hint shown while a turn runs (compared case-insensitively).
const BUSY_FOOTER: &str = "esc to interrupt";

/// Phrases that only a dialog shows.
const DIALOG_PHRASES: [&str; 4] = [
    "Do you want to proceed?",
    "Esc to cancel",
    "Enter to confirm",
    "Enter to continue",
];

/// The hint Claude shows after one Escape on a box with text (compared case-insensitively).
const CLEAR_HINT: &str = "esc again to clear";

/// Reads one `capture-pane -p` text.
pub fn analyze(capture: &str) -> Screen {
    let lines: Vec<&str> = capture.lines().collect();
    let Some(top) = find_box(&lines) else {
        let dialog = DIALOG_PHRASES.iter().any(|phrase| capture.contains(phrase));
        return Screen {
            input: None,
            busy: false,
            dialog,
            queued: false,
            clear_pending: false,
            rewind: dialog && lines.iter().any(|line| line.trim() == "Rewind"),
        };
    };

    // The box runs from the prompt line to the next rule line (or the end of the capture).
    let bottom = lines[top + 1..]
        .iter()
        .position(|line| is_rule(line))
        .map(|index| top + 1 + index);
    let box_end = bottom.unwrap_or(lines.len());
    let mut input_lines = Vec::with_capacity(box_end - top);
    input_lines.push(lines[top].strip_prefix('❯').unwrap_or(lines[top]));
    for line in &lines[top + 1..box_end] {
        input_lines.push(line.strip_prefix("  ").unwrap_or(line));
    }
    let joined = input_lines
        .iter()
        .map(|line| line.trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    let mut input = joined.trim_matches(is_blank).to_owned();
    let queued = input.contains(QUEUED_PLACEHOLDER);
    if queued {
        input.clear();
    }

    let footer_busy = bottom.is_some_and(|bottom| {
        lines[bottom + 1..]
            .iter()
            .find(|line| !line.trim().is_empty())
            .is_some_and(|footer| footer.to_lowercase().contains(BUSY_FOOTER))
    });
    // `top - 1` is the rule line above the box.
    let spinner_busy = status_line(&lines[..top - 1]).is_some_and(is_spinner);

    Screen {
        input: Some(input),
        busy: footer_busy || spinner_busy,
        dialog: false,
        queued,
        clear_pending: capture.to_lowercase().contains(CLEAR_HINT),
        rewind: false,
    }
}

/// The index of the live input box's prompt line: the last `❯\u{a0}` line with a rule below it
/// (the box's bottom edge, after its continuation lines) and a rule above — or a line that
/// begins as one, the top rule half drawn over by a spinner line (2.1.197 leaves
/// `───runched for 4s` or `──Baked for─4s` there after an interrupt: two rule characters can be
/// all that is left). A `❯` line with no rule below is a leftover
/// of a redraw, not the box: read as one, its lines would run into the footer and
/// `? for shortcuts` would pass for a human's draft.
fn find_box(lines: &[&str]) -> Option<usize> {
    (1..lines.len()).rev().find(|&index| {
        let line = lines[index];
        let above = lines[index - 1];
        (line.starts_with(BOX_PROMPT) || line.trim_end() == "❯")
            && (is_rule(above) || above.trim_start().starts_with("──"))
            && lines[index + 1..].iter().any(|below| is_rule(below))
    })
}

/// A horizontal rule: at least [`MIN_RULE_CHARS`] `─` from the first non-blank character.
fn is_rule(line: &str) -> bool {
    line.trim_start()
        .chars()
        .take_while(|&c| c == '─')
        .take(MIN_RULE_CHARS)
        .count()
        == MIN_RULE_CHARS
}

/// Whitespace as the TUI draws it, including the NO-BREAK SPACE of the prompt marker.
fn is_blank(c: char) -> bool {
    c.is_whitespace()
}

/// The line where a spinner would be: walking up from the box, the first non-blank line that
/// starts in column 0 and is not a queued prompt (`❯ text`, drawn under the spinner).
///
/// Indented lines are stepped over: they are what the TUI hangs under the spinner (tips,
/// to-do lists) or continuation lines of an earlier reply. Testing only this one line, and
/// not every line of the scroll-back, keeps a reply line such as `- Loading config…` from
/// reading as a spinner forever; a spinner missed this way still shows in the footer and in
/// the session file.
fn status_line<'a>(above: &[&'a str]) -> Option<&'a str> {
    above.iter().rev().copied().find(|line| {
        !line.trim().is_empty() && !line.starts_with(char::is_whitespace) && !line.starts_with('❯')
    })
}

/// `^\s*[^\w\s]\s+\w[\w' -]*…`: a glyph, a space, words, then an ellipsis, as in
/// `✻ Churning… (3s · ↓ 26 tokens)` or `* Pollinating…`.
fn is_spinner(line: &str) -> bool {
    let mut chars = line.trim_start().chars().peekable();
    match chars.next() {
        Some(glyph) if !is_word(glyph) && !glyph.is_whitespace() => {}
        _ => return false,
    }
    if chars.next_if(|c| c.is_whitespace()).is_none() {
        return false;
    }
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    if chars.next_if(|&c| is_word(c)).is_none() {
        return false;
    }
    while chars
        .next_if(|&c| is_word(c) || c == '\'' || c == ' ' || c == '-')
        .is_some()
    {}
    chars.next() == Some('…')
}

/// A regex `\w` character (Unicode letters, digits, marks and connector punctuation).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "────────────────────────────────────────────────────────────";

    /// Builds a capture: the scroll-back lines, the box (rule, prompt lines, rule), a footer.
    fn screen(above: &[&str], input: &[&str], footer: &str) -> String {
        let mut lines: Vec<String> = above.iter().map(|line| line.to_string()).collect();
        lines.push(RULE.to_owned());
        for (index, line) in input.iter().enumerate() {
            if index == 0 {
                lines.push(format!("❯\u{a0}{line}"));
            } else {
                lines.push(format!("  {line}"));
            }
        }
        lines.push(RULE.to_owned());
        lines.push(footer.to_owned());
        lines.push(String::new());
        lines.join("\n")
    }

    #[test]
    fn idle_empty_box_is_ready() {
        let capture = screen(
            &["", " ✻ Welcome to Claude Code!", ""],
            &[""],
            "  ? for shortcuts",
        );
        let seen = analyze(&capture);
        assert_eq!(
            seen,
            Screen {
                input: Some(String::new()),
                busy: false,
                dialog: false,
                queued: false,
                ..Screen::default()
            }
        );
        assert!(seen.ready());
        assert!(!seen.has_draft());
    }

    #[test]
    fn draft_is_not_ready() {
        let seen = analyze(&screen(&[], &["fix the tests please  "], ""));
        assert_eq!(seen.input.as_deref(), Some("fix the tests please"));
        assert!(seen.has_draft());
        assert!(!seen.ready());
        assert!(!seen.busy);
    }

    #[test]
    fn multi_line_draft_joins_indented_lines() {
        let seen = analyze(&screen(
            &[],
            &["first line", "second line", "  indented"],
            "",
        ));
        assert_eq!(
            seen.input.as_deref(),
            Some("first line\nsecond line\n  indented")
        );
        assert!(seen.has_draft());
    }

    #[test]
    fn collapsed_paste_counts_as_draft() {
        let seen = analyze(&screen(
            &[],
            &["[Pasted text #1 +4 lines]"],
            "  paste again to expand",
        ));
        assert_eq!(seen.input.as_deref(), Some("[Pasted text #1 +4 lines]"));
        assert!(seen.has_draft());
        assert!(!seen.ready());
    }

    #[test]
    fn queued_prompts_are_not_a_draft() {
        let capture = screen(
            &[
                "❯ first prompt",
                "",
                "✻ Churning… (3s · ↓ 26 tokens)",
                "",
                "❯ Queued prompt A",
            ],
            &["Press up to edit queued messages"],
            "  esc to interrupt",
        );
        let seen = analyze(&capture);
        assert_eq!(
            seen,
            Screen {
                input: Some(String::new()),
                busy: true,
                dialog: false,
                queued: true,
                ..Screen::default()
            }
        );
        assert!(!seen.has_draft());
        assert!(!seen.ready());
    }

    #[test]
    fn spinner_above_box_is_busy_even_with_blank_footer() {
        let capture = screen(
            &[
                "❯ say hi",
                "",
                "● Working on it",
                "",
                "✻ Churning… (3s · ↓ 26 tokens)",
                "  ⎿  Tip: Use /memory to edit your memory files",
                "",
            ],
            &["a draft typed meanwhile"],
            "",
        );
        let seen = analyze(&capture);
        assert!(seen.busy);
        assert!(seen.has_draft());
        assert!(!seen.ready());
    }

    #[test]
    fn spinner_without_status_is_busy() {
        let seen = analyze(&screen(&["* Pollinating…"], &[""], "  ? for shortcuts"));
        assert!(seen.busy);
        assert!(!seen.ready());
    }

    #[test]
    fn busy_footer_is_busy() {
        let seen = analyze(&screen(&["❯ run the build"], &[""], "  esc to interrupt"));
        assert!(seen.busy);
        assert!(!seen.ready());
    }

    #[test]
    fn finished_spinner_line_is_not_busy() {
        let capture = screen(
            &[
                "❯ say hi",
                "",
                "● Hi! How can I help?",
                "",
                "✻ Baked for 3s",
                "",
            ],
            &[""],
            "  ? for shortcuts · ← for agents",
        );
        let seen = analyze(&capture);
        assert!(!seen.busy);
        assert!(seen.ready());
    }

    #[test]
    fn ellipsis_in_an_old_reply_is_not_a_spinner() {
        let capture = screen(
            &[
                "● Here is the plan:",
                "  - Loading config…",
                "",
                "● Done.",
                "",
            ],
            &[""],
            "",
        );
        assert!(analyze(&capture).ready());
    }

    #[test]
    fn permission_dialog_hides_the_box() {
        let capture = [
            "● Bash(touch file)",
            "",
            "────────────────────────────────────────────────────────────",
            " Bash command",
            "",
            "   touch file",
            "",
            " Do you want to proceed?",
            " ❯ 1. Yes",
            "   2. Yes, and don't ask again for touch commands",
            "   3. No, and tell Claude what to do differently (esc)",
            "",
            " Esc to cancel · Tab to amend",
        ]
        .join("\n");
        let seen = analyze(&capture);
        assert_eq!(
            seen,
            Screen {
                input: None,
                busy: false,
                dialog: true,
                queued: false,
                ..Screen::default()
            }
        );
        assert!(!seen.ready());
        assert!(!seen.has_draft());
    }

    #[test]
    fn scroll_back_prompt_is_not_the_box() {
        let capture = screen(
            &[RULE, "❯ old prompt", RULE, "", "● An old answer", ""],
            &[""],
            "  ? for shortcuts",
        );
        let seen = analyze(&capture);
        assert_eq!(seen.input.as_deref(), Some(""));
        assert!(seen.ready());
    }

    #[test]
    fn no_box_at_all() {
        let seen = analyze("$ claude\nLoading…\n\n");
        assert_eq!(seen, Screen::default());
        assert!(!seen.ready());
        assert!(!seen.has_draft());
    }

    #[test]
    fn box_needs_the_rule_above() {
        let seen = analyze("some text\n❯\u{a0}\n────────────────────────\n");
        assert_eq!(seen.input, None);
    }

    #[test]
    fn last_box_wins() {
        let older = screen(&[], &["stale draft"], "");
        let capture = format!("{older}\n{}", screen(&[], &[""], "  ? for shortcuts"));
        assert!(analyze(&capture).ready());
    }

    /// The releases with captured screens: both ends of the supported range.
    const RELEASES: [&str; 2] = [crate::peers::CLAUDE.oldest, crate::peers::CLAUDE.newest];

    /// Reads a real capture of `release` from `tests/fixtures/claude/screens/<release>/` (see
    /// the README there).
    fn fixture(release: &str, name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude/screens")
            .join(release)
            .join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read screen fixture {}: {err}", path.display()))
    }

    fn state(input: Option<&str>, busy: bool, dialog: bool, queued: bool) -> Screen {
        Screen {
            input: input.map(str::to_owned),
            busy,
            dialog,
            queued,
            clear_pending: false,
            rewind: false,
        }
    }

    #[test]
    fn the_clear_hint_and_the_rewind_dialog() {
        // Literal bottoms of captures of 2.1.197 and 2.1.332 (tests/fixtures/claude/screens/).
        let rule = "─".repeat(60);
        let hint_197 = format!(
            "{rule}\n❯\u{a0}a draft in the box\n{rule}\n                                   Esc again to clear\n"
        );
        let hint_332 = format!(
            "                                   esc again to clear\n{rule}\n❯\u{a0}a draft in the box\n{rule}\n  ⏸ manual mode on\n"
        );
        for capture in [hint_197, hint_332] {
            let seen = analyze(&capture);
            assert!(seen.clear_pending && seen.has_draft(), "{seen:?}");
        }
        let rewind = format!("{rule}\n  Rewind\n  Nothing to rewind to yet.\n  Esc to cancel\n");
        let seen = analyze(&rewind);
        assert!(
            seen.rewind && seen.dialog && seen.input.is_none(),
            "{seen:?}"
        );
        let idle = analyze(&format!("{rule}\n❯\u{a0}\n{rule}\n  ? for shortcuts\n"));
        assert!(!idle.clear_pending && !idle.rewind);
    }

    #[test]
    fn real_screens_classify_as_documented() {
        let cases = [
            ("idle_empty.txt", state(Some(""), false, false, false)),
            (
                "draft.txt",
                state(
                    Some("a human draft that is not sent yet"),
                    false,
                    false,
                    false,
                ),
            ),
            ("busy_spinner.txt", state(Some(""), true, false, false)),
            (
                "escape_restored_prompt.txt",
                state(Some("restore me after escape"), false, false, false),
            ),
            ("busy_streaming.txt", state(Some(""), true, false, false)),
            ("interrupted_idle.txt", state(Some(""), false, false, false)),
            ("queued_while_busy.txt", state(Some(""), true, false, true)),
            ("idle_after_reply.txt", state(Some(""), false, false, false)),
            ("permission_dialog.txt", state(None, false, true, false)),
        ];
        for release in RELEASES {
            for (name, expected) in &cases {
                assert_eq!(
                    &analyze(&fixture(release, name)),
                    expected,
                    "{release}/{name}"
                );
            }
            let ready: Vec<&str> = cases
                .iter()
                .filter(|(name, _)| analyze(&fixture(release, name)).ready())
                .map(|(name, _)| *name)
                .collect();
            assert_eq!(
                ready,
                [
                    "idle_empty.txt",
                    "interrupted_idle.txt",
                    "idle_after_reply.txt"
                ],
                "{release}"
            );
        }
    }

    #[test]
    fn real_spinner_alone_is_busy() {
        // The footer says `esc to interrupt` too; without it the spinner line must suffice.
        for release in RELEASES {
            let capture = fixture(release, "busy_spinner.txt");
            let without_footer: String = capture
                .lines()
                .filter(|line| !line.contains("esc to interrupt"))
                .map(|line| format!("{line}\n"))
                .collect();
            assert!(analyze(&without_footer).busy, "{release}");
        }
    }

    #[test]
    fn spinner_pattern() {
        assert!(is_spinner("✻ Churning… (3s · ↓ 26 tokens)"));
        assert!(is_spinner("  ✢ Don't-panic ing…"));
        assert!(is_spinner("* Pollinating…"));
        assert!(!is_spinner("✻ Baked for 3s"));
        assert!(!is_spinner("Churning…"));
        assert!(!is_spinner("✻Churning…"));
        assert!(!is_spinner("✻ Tip: wait…"));
    }

    /// 2.1.197 after cohost's Escape on a queued prompt's turn, as a CI run captured it (the
    /// screen stayed so): the top rule half drawn over, and a stray `❯` line under the box's
    /// bottom rule. The box is the empty one between the rules; the footer is no draft (it
    /// was read as one, and the human was handed the lease).
    #[test]
    fn a_stray_prompt_line_under_the_box_is_not_the_box() {
        let rule = "─".repeat(80);
        let capture = [
            "● Baked for 0s",
            "  word35 word36 word37 word38 word39 word40",
            "",
            "✻ Cogitated for 4s",
            "",
            "❯ Cancel me later",
            "",
            "───runched for 4s",
            "❯\u{a0}",
            rule.as_str(),
            "❯\u{a0}",
            "",
            "  ? for shortcuts · ← for agents",
            "",
        ]
        .join("\n");
        let seen = analyze(&capture);
        assert_eq!(seen.input.as_deref(), Some(""), "{seen:?}");
        assert!(!seen.has_draft());
        assert!(seen.ready(), "{seen:?}");
        // Without a rule below anywhere there is no box at all: nothing is pasted, nothing
        // passes for a draft.
        let no_bottom = "x\n────────────────────────────────\n❯\u{a0}\n\n  ? for shortcuts\n";
        assert_eq!(analyze(no_bottom).input, None);
    }

    /// Captured in CI (2.1.197, an Escape on a queued prompt's turn): the box's top rule half
    /// overwritten, the prompt Claude handed back on a stray line under the bottom rule.
    #[test]
    fn the_prompt_handed_back_under_the_box_after_an_escape() {
        let rule = "─".repeat(80);
        let capture = [
            "✻ Cogitated for 4s",
            "",
            "❯ Cancel me later",
            "",
            "──Baked for─4s",
            "❯\u{a0}",
            rule.as_str(),
            "❯ Cancel me later",
            "",
            "",
            "",
        ]
        .join("\n");
        let seen = analyze(&capture);
        assert_eq!(seen.input.as_deref(), Some(""), "{seen:?}");
    }
}
