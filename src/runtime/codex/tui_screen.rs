//! Reads the codex TUI's composer from a pane capture with its attributes
//! (`tmux capture-pane -p -e`), for an adopted codex: whether the composer is empty (ready for a
//! prompt), holds text a person typed (a draft, never typed into), or cannot be read (then
//! nothing is typed either: it fails closed).
//!
//! Pure: it takes the captured text and does no IO. The rules come from watching codex 0.169.0
//! and 0.171.0 in a tmux pane (real captures in `tests/fixtures/codex/screens/<release>/`):
//!
//! - The composer is the last line starting with `›` (U+203A) and a space. Prompts in the
//!   scroll-back are drawn the same way, so only the last one counts, and a screen with a dialog
//!   (`Press enter to confirm`, whose options are `› 1. …` lines) has no readable composer.
//! - An empty composer shows a placeholder (`Ask Codex to do anything`, and others) drawn dim
//!   (SGR 2); what a person typed is drawn without dim. So the composer's text is its non-dim
//!   characters after `› `, plus the two-space-indented lines below it up to the first blank line
//!   (a multi-line draft); the footer follows after a blank line.
//! - A turn runs while a line says `esc to interrupt` (`• Working (3s • esc to interrupt)`); the
//!   converse does not hold: while a reply streams (or its stream stalls) the line is gone and
//!   the composer looks idle, so the rollout, not the screen, says whether a turn runs.
//!
//! Plain text alone cannot tell the placeholder from a draft: a capture without attributes is
//! read as unreadable.

use crate::runtime::common::styled::{Attribute, Line, plain, styled_lines};

/// What one capture of the codex TUI shows of its composer: empty when only the dim
/// placeholder shows.
pub use crate::runtime::common::adopted::InputBox as Composer;

/// One capture of the codex TUI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub composer: Composer,
    /// A turn is running: a line says `esc to interrupt`.
    pub busy: bool,
}

impl Screen {
    /// Whether a prompt may be pasted now: the composer is read and empty.
    pub fn ready(&self) -> bool {
        self.composer == Composer::Empty
    }
}

/// Phrases of the dialogs that replace the composer (approvals, questions, pickers).
const DIALOG: [&str; 3] = [
    "Press enter to confirm",
    "esc to cancel",
    "Would you like to run the following command?",
];

/// Reads a `capture-pane -p -e` capture of the codex TUI.
pub fn analyze(capture: &str) -> Screen {
    let lines = styled_lines(capture, Attribute::Dim);
    let texts: Vec<String> = lines.iter().map(plain).collect();
    let busy = texts.iter().any(|t| t.contains("esc to interrupt"));
    let composer = composer(&lines, &texts, capture);
    Screen { composer, busy }
}

fn composer(lines: &[Line], texts: &[String], capture: &str) -> Composer {
    if !capture.contains('\u{1b}') {
        return Composer::Unreadable(
            "the capture has no attributes: the placeholder cannot be told from a draft".into(),
        );
    }
    if let Some(phrase) = DIALOG
        .iter()
        .find(|phrase| texts.iter().any(|t| t.contains(*phrase)))
    {
        return Composer::Unreadable(format!("a dialog is on screen (`{phrase}`)"));
    }
    let Some(at) = texts.iter().rposition(|t| t.starts_with("\u{203a} ")) else {
        return Composer::Unreadable("no composer (`› `) on screen".into());
    };
    let mut typed = vec![typed_text(&lines[at][2..])];
    for (line, text) in lines[at + 1..].iter().zip(&texts[at + 1..]) {
        if text.trim().is_empty() {
            break;
        }
        if !text.starts_with("  ") {
            return Composer::Unreadable(format!(
                "the line below the composer is not part of it: `{}`",
                text.trim()
            ));
        }
        typed.push(typed_text(&line[2..]));
    }
    let text = typed.join("\n").trim().to_string();
    if text.is_empty() {
        Composer::Empty
    } else {
        Composer::Draft(text)
    }
}

/// The characters of a composer line a person typed: the ones not drawn dim.
fn typed_text(line: &[(char, bool)]) -> String {
    line.iter()
        .filter(|(_, dim)| !dim)
        .map(|(c, _)| *c)
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// The codex releases whose approval prompts are known (captured in
/// `tests/fixtures/codex/screens/<release>/`: `approval.ansi` for a command, `patch.ansi` for
/// file edits): only on these is an approval answered by a key.
pub const APPROVAL_RELEASES: [&str; 2] = ["0.169.0", "0.171.0"];

/// The header line of codex's command-approval prompt.
const APPROVAL_HEADER: &str = "  Would you like to run the following command?";
/// The header line of codex's file-edit approval prompt (a patch outside the writable roots).
const EDITS_HEADER: &str = "  Would you like to make the following edits?";
/// The prompt's last line.
const APPROVAL_FOOTER: &str = "  Press enter to confirm or esc to cancel";

/// What an approval prompt asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// To run a command: the command shown after `$ ` (its lines joined with `\n`; empty when
    /// none could be read).
    Command(String),
    /// To make file edits: the `Destination:` shown (empty when none could be read), and the
    /// `Description:`.
    Edits {
        destination: String,
        description: String,
    },
}

/// An approval prompt seen on the codex TUI's screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt {
    pub asked: Asked,
    /// The `Reason:` line, when codex shows one.
    pub reason: Option<String>,
    /// Whether the prompt is exactly the known one, with the first option selected (`Ok`),
    /// or why not: only then may it be answered with a key.
    pub exact: Result<(), String>,
}

/// The approval prompt on a `capture-pane -p` capture (attributes are ignored), if a known
/// header is on screen: what it asks about and whether it matches the known prompt exactly.
///
/// The known prompts (codex 0.169.0 and 0.171.0 alike) are, to the bottom of the screen:
/// - a command: the header, a blank line, `  Environment: …` and `  Reason: …` (each optional,
///   each followed by a blank line), `  $ <command>` (lines indented four spaces continue it),
///   two blank lines, the three options `› 1. Yes, proceed (y)`, `  2. Yes, and don't ask again
///   for commands that start with `…` (p)`, `  3. No, and tell Codex what to do differently
///   (esc)`, a blank line and the footer;
/// - file edits: the header, a blank line, the optional `Environment:`/`Reason:` lines as
///   above, `  Description: …`, `  Destination: <path>`, two blank lines, the options `› 1. Yes,
///   proceed (y)`, `  2. Yes, and don't ask again for these files (a)`, `  3. No, and tell
///   Codex what to do differently (esc)`, a blank line and the footer.
///
/// Anything else — another selection, another option, a wrapped line, text below — is not
/// exact.
pub fn approval(capture: &str) -> Option<ApprovalPrompt> {
    let lines: Vec<String> = styled_lines(capture, Attribute::Dim)
        .iter()
        .map(|l| plain(l).trim_end().to_string())
        .collect();
    let at = lines
        .iter()
        .rposition(|l| l == APPROVAL_HEADER || l == EDITS_HEADER)?;
    let edits = lines[at] == EDITS_HEADER;
    let mut prompt = ApprovalPrompt {
        asked: if edits {
            Asked::Edits {
                destination: String::new(),
                description: String::new(),
            }
        } else {
            Asked::Command(String::new())
        },
        reason: None,
        exact: Ok(()),
    };
    prompt.exact = read_approval(&lines[at + 1..], &mut prompt);
    Some(prompt)
}

fn read_approval(lines: &[String], prompt: &mut ApprovalPrompt) -> Result<(), String> {
    fn blank<'a>(rest: &mut impl Iterator<Item = &'a str>, after: &str) -> Result<(), String> {
        match rest.next() {
            Some("") => Ok(()),
            other => Err(format!("no blank line after {after}: {other:?}")),
        }
    }
    let mut rest = lines.iter().map(String::as_str).peekable();
    blank(&mut rest, "the header")?;
    if rest
        .peek()
        .is_some_and(|l| l.starts_with("  Environment: "))
    {
        rest.next();
        blank(&mut rest, "the environment")?;
    }
    if let Some(reason) = rest.peek().and_then(|l| l.strip_prefix("  Reason: ")) {
        prompt.reason = Some(reason.to_string());
        rest.next();
        blank(&mut rest, "the reason")?;
    }
    let second = match &mut prompt.asked {
        Asked::Command(command) => {
            let Some(first) = rest.next().and_then(|l| l.strip_prefix("  $ ")) else {
                return Err("no `$ command` line".into());
            };
            let mut lines = vec![first.to_string()];
            while let Some(more) = rest.peek().and_then(|l| l.strip_prefix("    ")) {
                lines.push(more.to_string());
                rest.next();
            }
            *command = lines.join("\n");
            None
        }
        Asked::Edits {
            destination,
            description,
        } => {
            let Some(text) = rest.next().and_then(|l| l.strip_prefix("  Description: ")) else {
                return Err("no `Description:` line".into());
            };
            *description = text.to_string();
            let Some(path) = rest.next().and_then(|l| l.strip_prefix("  Destination: ")) else {
                return Err("no `Destination:` line".into());
            };
            *destination = path.to_string();
            Some("  2. Yes, and don't ask again for these files (a)")
        }
    };
    blank(&mut rest, "what it asks about")?;
    blank(&mut rest, "what it asks about")?;
    let options: Vec<&str> = rest.by_ref().take_while(|l| !l.is_empty()).collect();
    let known = match options.as_slice() {
        [one, two, three] => {
            *one == "\u{203a} 1. Yes, proceed (y)"
                && match second {
                    Some(second) => *two == second,
                    None => two
                        .strip_prefix(
                            "  2. Yes, and don't ask again for commands that start with `",
                        )
                        .is_some_and(|t| t.ends_with("` (p)")),
                }
                && *three == "  3. No, and tell Codex what to do differently (esc)"
        }
        _ => false,
    };
    if !known {
        return Err(format!(
            "the options are not the known ones with the first selected: {options:?}"
        ));
    }
    match rest.next() {
        Some(APPROVAL_FOOTER) => {}
        other => return Err(format!("no `Press enter to confirm` line: {other:?}")),
    }
    if let Some(extra) = rest.find(|l| !l.is_empty()) {
        return Err(format!("text below the prompt: `{}`", extra.trim()));
    }
    Ok(())
}

/// The key that gives `decision` to the known approval prompt of `release`; `None` when the
/// release's prompt is not known or the prompt has no such answer.
pub fn approval_key(release: &str, decision: &str) -> Option<&'static str> {
    if !APPROVAL_RELEASES.contains(&release) {
        return None;
    }
    match decision {
        "accept" => Some("y"),
        "cancel" => Some("Escape"),
        _ => None,
    }
}

/// The decisions the known prompts offer by a key: `accept` (`y`, run it or make the edits
/// this once) and `cancel` (Escape: `No, and tell Codex what to do differently`, which ends the
/// turn). Their second option (a rule for later commands or files) is not offered.
pub const APPROVAL_DECISIONS: [&str; 2] = ["accept", "cancel"];

/// What the screen says a person answered, after a command's prompt closed: `accept` (`✔ You
/// approved codex to run <command>`) or `cancel` (`✗ You canceled the request to run
/// <command>`). (File edits leave no such line: their answer is not known from the screen.)
pub fn answered(capture: &str, command: &str) -> Option<&'static str> {
    if command.is_empty() {
        return None;
    }
    let lines: Vec<String> = styled_lines(capture, Attribute::Dim)
        .iter()
        .map(plain)
        .collect();
    lines.iter().rev().find_map(|l| {
        let l = l.trim();
        if l.starts_with("\u{2714} You approved codex to run ") && l.contains(command) {
            Some("accept")
        } else if l.starts_with("\u{2717} You canceled the request to run ") && l.contains(command)
        {
            Some("cancel")
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASES: [&str; 2] = ["0.169.0", "0.171.0"];

    fn fixture(release: &str, name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex/screens")
            .join(release)
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn the_placeholder_is_an_empty_composer() {
        for release in RELEASES {
            let screen = analyze(&fixture(release, "empty.ansi"));
            assert_eq!(screen.composer, Composer::Empty, "{release}");
            assert!(screen.ready() && !screen.busy, "{release}");
        }
    }

    #[test]
    fn typed_text_is_a_draft() {
        for release in RELEASES {
            let screen = analyze(&fixture(release, "draft.ansi"));
            assert_eq!(
                screen.composer,
                Composer::Draft("half typed draft".into()),
                "{release}"
            );
            let screen = analyze(&fixture(release, "multiline.ansi"));
            assert_eq!(
                screen.composer,
                Composer::Draft("line one\nline two".into()),
                "{release}"
            );
            assert!(!screen.ready());
        }
    }

    #[test]
    fn without_attributes_or_composer_or_with_a_dialog_it_fails_closed() {
        let plain = "\u{203a} Ask Codex to do anything\n\n  ? for shortcuts\n";
        assert!(matches!(analyze(plain).composer, Composer::Unreadable(_)));
        let none = "\u{1b}[1mhello\u{1b}[0m\n";
        assert!(matches!(analyze(none).composer, Composer::Unreadable(_)));
        let dialog = "\u{1b}[0m  $ touch x\n\n\u{203a} 1. Yes, proceed (y)\n  2. No (esc)\n\n  Press enter to confirm or esc to cancel\n";
        assert!(matches!(analyze(dialog).composer, Composer::Unreadable(_)));
    }

    #[test]
    fn busy_and_colour_parameters() {
        let screen = analyze(
            "\u{1b}[0m\u{2022} Working (3s \u{2022} esc to interrupt)\n\n\u{1b}[1m\u{203a}\u{1b}[0m \u{1b}[2mAsk Codex to do anything\u{1b}[0m\n",
        );
        assert!(screen.busy && screen.ready());
        // `38;2;2;2;2` is a colour, not dim.
        let screen = analyze("\u{1b}[38;2;2;2;2m\u{203a} typed\u{1b}[0m\n");
        assert_eq!(screen.composer, Composer::Draft("typed".into()));
    }

    #[test]
    fn the_recorded_approval_prompts_match_exactly() {
        for release in RELEASES {
            let prompt = approval(&fixture(release, "approval.ansi")).expect(release);
            assert_eq!(
                prompt,
                ApprovalPrompt {
                    asked: Asked::Command("touch made_by_codex.txt".into()),
                    reason: Some("Need to create a file".into()),
                    exact: Ok(()),
                },
                "{release}"
            );
            assert_eq!(approval_key(release, "accept"), Some("y"));
            assert_eq!(approval_key(release, "cancel"), Some("Escape"));
            assert_eq!(approval_key(release, "acceptForSession"), None);
            // The composer is not readable under the prompt.
            assert!(matches!(
                analyze(&fixture(release, "approval.ansi")).composer,
                Composer::Unreadable(_)
            ));
        }
        assert_eq!(
            approval_key("0.170.0", "accept"),
            None,
            "an unknown release"
        );
    }

    #[test]
    fn the_recorded_file_edit_prompts_match_exactly() {
        for release in RELEASES {
            let capture = fixture(release, "patch.ansi");
            let prompt = approval(&capture).expect(release);
            let Asked::Edits {
                destination,
                description,
            } = &prompt.asked
            else {
                panic!("{release}: {prompt:?}");
            };
            assert!(
                destination.starts_with("/var/tmp/cohost-patch-")
                    && destination.ends_with("/patched.txt"),
                "{release}: {prompt:?}"
            );
            assert_eq!(description, "Apply proposed file edits", "{release}");
            assert_eq!(prompt.reason, None, "{release}");
            assert_eq!(prompt.exact, Ok(()), "{release}: {prompt:?}");
            assert!(matches!(
                analyze(&capture).composer,
                Composer::Unreadable(_)
            ));
            // The command prompt's second option is not the edits prompt's, nor the reverse.
            for (from, to) in [
                ("for these files (", "for these paths ("),
                ("Description: ", "Summary: "),
                ("Destination: ", "Target: "),
                ("1. Yes, proceed", "1. Yes, go"),
            ] {
                let edited = capture.replacen(from, to, 1);
                assert_ne!(edited, capture, "{from}");
                let prompt = approval(&edited).expect(from);
                assert!(
                    prompt.exact.is_err(),
                    "{release}: {from} -> {to}: {prompt:?}"
                );
            }
            // After the answer the prompt is gone, and the screen names no answer.
            let approved = fixture(release, "patch_approved.ansi");
            assert_eq!(approval(&approved), None, "{release}");
            assert_eq!(answered(&approved, ""), None, "{release}");
        }
    }

    #[test]
    fn near_misses_are_seen_but_not_exact() {
        for release in RELEASES {
            // A person moved the selection to the second option.
            let moved = approval(&fixture(release, "approval_moved.ansi")).expect(release);
            assert_eq!(
                moved.asked,
                Asked::Command("touch made_by_codex.txt".into())
            );
            assert!(moved.exact.is_err(), "{release}: {moved:?}");
            let good = fixture(release, "approval.ansi");
            for (from, to) in [
                ("Yes, proceed (", "Yes, run it ("),
                ("Press ", "Hit "),
                ("don't ask again", "never ask"),
                ("tell Codex what to do differently", "tell Codex"),
            ] {
                let edited = good.replacen(from, to, 1);
                assert_ne!(edited, good, "{from}");
                let prompt = approval(&edited).expect(from);
                assert!(
                    prompt.exact.is_err(),
                    "{release}: {from} -> {to}: {prompt:?}"
                );
            }
            // A fourth option, and text below the prompt.
            let extra = good.replacen("  3. No,", "  3. Something else (x)\n  4. No,", 1);
            assert_ne!(extra, good);
            assert!(approval(&extra).unwrap().exact.is_err());
            let below = format!("{}\n  more text\n", good.trim_end());
            assert!(approval(&below).unwrap().exact.is_err());
            // No prompt: the empty composer, and the screens after an answer.
            assert_eq!(approval(&fixture(release, "empty.ansi")), None);
            let approved = fixture(release, "approved.ansi");
            assert_eq!(approval(&approved), None);
            assert_eq!(
                answered(&approved, "touch made_by_codex.txt"),
                Some("accept")
            );
            let canceled = fixture(release, "canceled.ansi");
            assert_eq!(approval(&canceled), None);
            assert_eq!(
                answered(&canceled, "echo second > second.txt"),
                Some("cancel")
            );
        }
    }
}
