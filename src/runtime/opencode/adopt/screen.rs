//! Reads OpenCode's input box from a pane capture with its attributes (`tmux capture-pane -p
//! -e`), for an adopted OpenCode TUI: whether the box is empty (ready for a prompt), holds text
//! a person typed (a draft, never typed into), or cannot be read (then nothing is typed either:
//! it fails closed); and whether OpenCode shows a turn running.
//!
//! Pure: it takes the captured text and does no IO. The rules come from watching OpenCode
//! 1.18.33 in a tmux pane (real captures in `tests/fixtures/opencode/screens/1.18.33/`):
//!
//! - The box is closed by a line starting `╹▀▀▀`; the line above it is the agent and model
//!   (`┃  Build · Mock Model Mock Anthropic`). Above that, lines starting with `┃` drawn on the
//!   model line's background: a blank one at the top and one at the bottom, what is typed in
//!   between (a bracketed paste keeps its newlines, one line each). The conversation's user
//!   messages carry the same `┃` on another background, which tells them from the box.
//! - Before the first prompt an empty box shows a placeholder, `Ask anything… "<a suggestion>"`
//!   (the suggestion varies), in the model line's dim colour; once a session runs, an empty box
//!   shows nothing.
//! - A permission dialog (`△ Permission required`, `Allow once   Allow always   Reject`) takes
//!   the box's place, bottom line included: read as unreadable.
//! - A paste of three lines or more, or of more than 150 characters, shows as `[Pasted ~N
//!   lines]` (N its lines; [`shows`]); OpenCode stores the whole text when it is submitted.
//! - The line below the box is the status: `esc interrupt` while a turn runs, `esc again to
//!   interrupt` after a first Escape (a second one interrupts), else the working directory.
//!   OpenCode's database, not the screen, says whether a turn runs; the screen is checked
//!   before a key is sent.

use crate::runtime::common::styled::{self, Cell};

pub use crate::runtime::common::adopted::InputBox;

/// One capture of the OpenCode TUI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub input: InputBox,
    /// The status line says `esc interrupt` (or `esc again to interrupt`): a turn runs.
    pub busy: bool,
    /// The status line says `esc again to interrupt`: a first Escape was pressed.
    pub interrupt_armed: bool,
    /// The empty box shows the placeholder of a session's first prompt: the TUI shows a new
    /// session (started with `/new`, or none yet), not one that has messages.
    pub new_session: bool,
}

/// The placeholder an empty box shows before the first prompt.
const PLACEHOLDER: &str = "Ask anything… \"";

fn plain(line: &[Cell]) -> String {
    line.iter().map(|cell| cell.c).collect()
}

/// The box's `┃` line: the text after the bar (trimmed at the end) and the background the bar's
/// next cell is drawn on; `None` for a line that is not a bar line.
fn bar_line(line: &[Cell]) -> Option<(String, String)> {
    let at = line.iter().position(|cell| !cell.c.is_whitespace())?;
    if line[at].c != '┃' {
        return None;
    }
    let rest = &line[at + 1..];
    let background = rest
        .first()
        .map(|cell| cell.style.bg.clone())
        .unwrap_or_default();
    let text = plain(rest);
    let text = text.strip_prefix("  ").unwrap_or(text.trim_start());
    Some((text.trim_end().to_string(), background))
}

/// Whether the box's draft `shown` is `text` pasted: the text itself (OpenCode wraps a long
/// line: whitespace is not compared), or the placeholder OpenCode shows for a paste of three
/// lines or more, or of more than 150 characters (`[Pasted ~N lines]`, N its lines).
pub fn shows(shown: &str, text: &str) -> bool {
    let squeezed = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    if squeezed(shown) == squeezed(text) {
        return true;
    }
    [text.lines().count(), text.split('\n').count()]
        .iter()
        .any(|n| shown == format!("[Pasted ~{n} lines]"))
}

/// Reads a `capture-pane -p -e` capture of the OpenCode TUI.
pub fn analyze(capture: &str) -> Screen {
    let lines = styled::cells(capture);
    let texts: Vec<String> = lines.iter().map(|l| plain(l)).collect();
    let unreadable = |why: &str| Screen {
        input: InputBox::Unreadable(why.to_string()),
        busy: false,
        interrupt_armed: false,
        new_session: false,
    };
    let Some(bottom) = texts
        .iter()
        .rposition(|t| t.trim_start().starts_with("╹▀▀▀"))
    else {
        return unreadable("no input box (its `╹▀▀▀` bottom line) on screen");
    };
    let status = texts.get(bottom + 1).map(String::as_str).unwrap_or("");
    let busy = status.contains("esc interrupt") || status.contains("esc again to interrupt");
    let interrupt_armed = status.contains("esc again to interrupt");
    let screen = |input| Screen {
        input,
        busy,
        interrupt_armed,
        new_session: false,
    };
    let Some((model, background)) = bottom.checked_sub(1).and_then(|at| bar_line(&lines[at]))
    else {
        return screen(InputBox::Unreadable(
            "no agent and model line above the input box's bottom".into(),
        ));
    };
    if background.is_empty() {
        return screen(InputBox::Unreadable(
            "a capture without colours (the box cannot be told from a message)".into(),
        ));
    }
    if !model.contains(" · ") {
        return screen(InputBox::Unreadable(format!(
            "the input box's last line is not the agent and model: {model:?}"
        )));
    }
    // The box's lines, bottom up, until a line that is not a bar on the model line's background.
    let mut rows = Vec::new();
    let mut at = bottom - 1;
    while at > 0 {
        at -= 1;
        match bar_line(&lines[at]) {
            Some((text, bg)) if bg == background => rows.push(text),
            _ => break,
        }
    }
    rows.reverse();
    // A blank line at the top and one above the model line frame what is typed.
    let typed = match rows.as_slice() {
        [first, typed @ .., last] if first.is_empty() && last.is_empty() => typed,
        _ => {
            return screen(InputBox::Unreadable(format!(
                "the input box has no blank first and last line: {rows:?}"
            )));
        }
    };
    let text = typed.join("\n");
    let text = text.trim_matches('\n');
    let placeholder = typed.len() == 1 && text.starts_with(PLACEHOLDER) && text.ends_with('"');
    let input = if text.is_empty() || placeholder {
        InputBox::Empty
    } else {
        InputBox::Draft(text.to_string())
    };
    Screen {
        new_session: placeholder,
        ..screen(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/opencode/screens/1.18.33/{name}.ansi",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The reason a capture stripped of its escapes is unreadable.
    fn analyze_plain(capture: &str) -> String {
        match analyze(&styled::strip(capture)).input {
            InputBox::Unreadable(why) => why,
            other => panic!("read without colours: {other:?}"),
        }
    }

    fn screen(input: InputBox, busy: bool, interrupt_armed: bool) -> Screen {
        Screen {
            input,
            busy,
            interrupt_armed,
            new_session: false,
        }
    }

    /// The placeholder is an empty box, and says the TUI shows a new session: one with
    /// messages shows an empty box without it.
    #[test]
    fn the_placeholder_of_a_new_tui_is_an_empty_box_of_a_new_session() {
        assert_eq!(
            analyze(&fixture("empty")),
            Screen {
                new_session: true,
                ..screen(InputBox::Empty, false, false)
            }
        );
    }

    #[test]
    fn typed_text_is_a_draft() {
        assert_eq!(
            analyze(&fixture("draft")),
            screen(InputBox::Draft("a draft".into()), false, false)
        );
        assert_eq!(
            analyze(&fixture("draft-in-session")),
            screen(InputBox::Draft("x".into()), false, false)
        );
    }

    #[test]
    fn a_bracketed_paste_keeps_its_lines() {
        assert_eq!(
            analyze(&fixture("pasted")),
            screen(
                InputBox::Draft("Tell me a long story\nplease".into()),
                false,
                false
            )
        );
    }

    /// The user message above the box has the same `┃` on another background: not the box's.
    #[test]
    fn a_running_turn_is_busy_and_its_prompt_is_not_the_box() {
        assert_eq!(
            analyze(&fixture("busy")),
            screen(InputBox::Empty, true, false)
        );
        assert_eq!(
            analyze(&fixture("interrupt-hint")),
            screen(InputBox::Empty, true, true)
        );
        assert_eq!(
            analyze(&fixture("interrupted")),
            screen(InputBox::Empty, false, false)
        );
    }

    /// A user message drawn right above the box (its `┃` lines on the conversation's
    /// background) is not read as typed text.
    #[test]
    fn a_message_right_above_the_box_is_not_a_draft() {
        let busy = fixture("busy");
        let lines: Vec<&str> = busy.lines().collect();
        // Lines 1..5 are the prompt's message block, 38.. the box and its status.
        assert!(lines[2].contains("Tell me a long story"), "{}", lines[2]);
        let abutting = [&lines[1..5], &lines[38..]].concat().join("\n");
        assert_eq!(analyze(&abutting), screen(InputBox::Empty, true, false));
    }

    /// OpenCode's permission dialog takes the box's place: nothing may be typed.
    #[test]
    fn a_permission_dialog_is_unreadable() {
        let read = analyze(&fixture("permission"));
        assert!(matches!(read.input, InputBox::Unreadable(_)), "{read:?}");
    }

    /// A long paste shows as OpenCode's placeholder (observed on 1.18.33: three lines or more,
    /// or over 150 characters on one line).
    #[test]
    fn a_long_paste_shows_as_its_placeholder() {
        assert!(shows(
            "Tell me a long story\nplease",
            "Tell me a long\nstory please"
        ));
        assert!(shows("[Pasted ~3 lines]", "a\nb\nc"));
        assert!(shows("[Pasted ~1 lines]", &"x".repeat(151)));
        assert!(!shows("[Pasted ~2 lines]", "a\nb\nc"));
        assert!(!shows("a draft", "another text"));
    }

    #[test]
    fn a_screen_without_the_box_is_unreadable() {
        let shell = "\u{1b}[32muser@host\u{1b}[0m:~$ opencode\nbash: opencode: not found\n";
        assert!(matches!(analyze(shell).input, InputBox::Unreadable(_)));
        // Something else drawn where the agent and model line is (a dialog): unreadable.
        let other = fixture("empty").replace('·', "-");
        assert!(matches!(analyze(&other).input, InputBox::Unreadable(_)));
        // Without colours the box cannot be told from a user message: unreadable.
        let plain: String = analyze_plain(&fixture("draft"));
        assert!(plain.contains("without colours"), "{plain}");
    }
}
