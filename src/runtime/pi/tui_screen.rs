//! Reads Pi's input box from a pane capture with its attributes (`tmux capture-pane -p -e`),
//! for an adopted Pi TUI: whether the box is empty (ready for a prompt), holds text a person
//! typed (a draft, never typed into), or cannot be read (then nothing is typed either: it fails
//! closed); and whether Pi shows a turn working.
//!
//! Pure: it takes the captured text and does no IO. The rules come from watching Pi 0.73.1 and
//! 1.6.0 in a tmux pane (real captures in `tests/fixtures/pi/screens/<release>/`):
//!
//! - The input box is the lines between the last two rule lines (lines of `─`; 1.6.0 writes its
//!   `⠴ Working` status into the upper one); below it only the footer (directory, tokens,
//!   model). The box has no prompt sign and no placeholder: an empty box is one line holding
//!   only the cursor, a reverse-video cell (SGR 7). What a person typed (or pasted: newlines
//!   kept, a long paste shown as `[paste #1 +31 lines]`) is the box's text.
//! - A selector or dialog (`/model`, …) is drawn between the same rules, with blank lines and
//!   `Escape … to cancel` hints: read as unreadable. So is a box without the cursor, and a
//!   capture without attributes (the cursor cannot be seen).
//! - A turn is working while `Working` shows on the upper rule (1.6.0) or just above it
//!   (0.73.1: `⠏ Working...`). The session file, not the screen, says whether a turn runs.

use crate::runtime::common::styled::{Attribute, Line, plain, styled_lines};

pub use crate::runtime::common::adopted::InputBox;

/// One capture of the Pi TUI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub input: InputBox,
    /// `Working` shows by the box: Pi runs a turn.
    pub busy: bool,
}

/// Phrases of the selectors and dialogs that take the box's place.
const DIALOG: [&str; 3] = ["to cancel", "Enter to select", "Only showing models"];

/// A rule line: `─` at both ends (text may sit in between: 1.6.0's status).
fn is_rule(text: &str) -> bool {
    let text = text.trim();
    text.chars().count() >= 10 && text.starts_with('─') && text.ends_with('─')
}

/// Reads a `capture-pane -p -e` capture of the Pi TUI.
pub fn analyze(capture: &str) -> Screen {
    let lines = styled_lines(capture, Attribute::Reverse);
    let texts: Vec<String> = lines.iter().map(plain).collect();
    let rules: Vec<usize> = texts
        .iter()
        .enumerate()
        .filter(|(_, t)| is_rule(t))
        .map(|(at, _)| at)
        .collect();
    let (top, bottom) = match rules[..] {
        [.., top, bottom] => (top, bottom),
        _ => {
            return Screen {
                input: InputBox::Unreadable("no input box (two rule lines) on screen".into()),
                busy: false,
            };
        }
    };
    let busy = texts[top.saturating_sub(2)..=top]
        .iter()
        .any(|t| t.contains("Working"));
    Screen {
        input: input(&lines[top + 1..bottom], &texts[top + 1..bottom]),
        busy,
    }
}

fn input(lines: &[Line], texts: &[String]) -> InputBox {
    if texts.is_empty() {
        return InputBox::Unreadable("nothing between the input box's rules".into());
    }
    if let Some(phrase) = DIALOG
        .iter()
        .find(|phrase| texts.iter().any(|t| t.contains(*phrase)))
    {
        return InputBox::Unreadable(format!("a selector or dialog is on screen (`{phrase}`)"));
    }
    if texts.len() > 1 && texts.iter().any(|t| t.trim().is_empty()) {
        return InputBox::Unreadable(
            "the box holds blank lines: a selector or dialog, not the input box".into(),
        );
    }
    if !lines.iter().flatten().any(|(_, reverse)| *reverse) {
        return InputBox::Unreadable(
            "no cursor in the input box (or a capture without attributes)".into(),
        );
    }
    let text = texts
        .iter()
        .map(|t| t.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string();
    if text.is_empty() {
        InputBox::Empty
    } else {
        InputBox::Draft(text)
    }
}

/// Whether the box shows `text` as pasted: the same characters but for the wrapping (lines the
/// box breaks), or Pi's marker for a long paste (`[paste #1 +31 lines]`).
pub fn shows(shown: &str, text: &str) -> bool {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    (shown.starts_with("[paste #") && shown.ends_with(" lines]")) || squeeze(shown) == squeeze(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(release: &str, name: &str) -> Screen {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/pi/screens")
            .join(release)
            .join(format!("{name}.ansi"));
        analyze(&std::fs::read_to_string(&path).unwrap())
    }

    #[test]
    fn recorded_screens_of_both_releases() {
        for release in ["0.73.1", "1.6.0"] {
            let idle = screen(release, "idle");
            assert_eq!(
                idle,
                Screen {
                    input: InputBox::Empty,
                    busy: false
                },
                "{release}"
            );
            assert_eq!(
                screen(release, "draft").input,
                InputBox::Draft("half typed draft".into()),
                "{release}"
            );
            let pasted = screen(release, "pasted").input;
            assert_eq!(
                pasted,
                InputBox::Draft("first line\nsecond line".into()),
                "{release}"
            );
            let InputBox::Draft(long) = screen(release, "long-paste").input else {
                panic!("{release}")
            };
            assert!(shows(&long, "a text of 31 lines"), "{release}: {long}");
            assert!(!shows("half typed draft", "first line"));
            assert!(shows(
                "first line\nsecond line",
                "first line\nsecond  line\n"
            ));
            let busy = screen(release, "busy");
            assert_eq!(
                busy,
                Screen {
                    input: InputBox::Empty,
                    busy: true
                },
                "{release}"
            );
            assert_eq!(
                screen(release, "interrupted"),
                Screen {
                    input: InputBox::Empty,
                    busy: false
                },
                "{release}"
            );
            let dialog = screen(release, "dialog").input;
            assert!(
                matches!(&dialog, InputBox::Unreadable(why) if why.contains("selector")),
                "{release}: {dialog:?}"
            );
        }
    }

    #[test]
    fn what_cannot_be_read_is_unreadable() {
        // Without attributes the cursor is not seen: an empty box cannot be told.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/pi/screens/0.73.1/idle.ansi");
        let capture = std::fs::read_to_string(path).unwrap();
        let mut bare = String::new();
        let mut skipping = false;
        for c in capture.chars() {
            match c {
                '\u{1b}' => skipping = true,
                'm' if skipping => skipping = false,
                c if !skipping => bare.push(c),
                _ => {}
            }
        }
        assert!(matches!(
            analyze(&bare).input,
            InputBox::Unreadable(why) if why.contains("cursor")
        ));
        // A shell: no box at all.
        assert!(matches!(
            analyze("$ ls\nfile\n$ \u{1b}[7m \u{1b}[0m\n").input,
            InputBox::Unreadable(why) if why.contains("no input box")
        ));
    }
}
