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
//!   the box's place, bottom line included: read as unreadable by [`analyze`], and read by
//!   [`permission`] (its layout: there). Other dialogs (`/sessions`, `/models`, the command
//!   palette) open over the conversation, dimming it and the box, under a header of their title
//!   and `esc`: unreadable too (a paste would go into their search).
//! - The conversation's user messages are `┃` blocks too, their bar in the agent's colour
//!   ([`user_messages`]); a tool's block draws its bar in the background's colour.
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

/// The title of a dialog's header on `line`, if the line is one: OpenCode's dialogs (`/sessions`,
/// `/models`, the command palette) open over the conversation, which they dim, with a header of
/// their title and `esc` at its right end, on a panel of its own background. A stretch of the
/// line on one background whose text is a title, two spaces or more, and `esc`.
fn dialog_title(line: &[Cell]) -> Option<String> {
    line.chunk_by(|a, b| a.style.bg == b.style.bg)
        .find_map(|run| {
            let text = plain(run);
            let title = text.trim().strip_suffix("esc")?;
            (title.ends_with("  ") && !title.trim().is_empty() && !title.contains('┃'))
                .then(|| title.trim().to_string())
        })
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
    if let Some(title) = lines[..bottom].iter().find_map(|line| dialog_title(line)) {
        return screen(InputBox::Unreadable(format!(
            "a dialog (`{title}`) is open over the conversation"
        )));
    }
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

/// The conversation's user messages shown above the input box, top down, as shown (a wrapped
/// line's parts on lines of their own): the `┃` blocks whose bar is drawn visibly (in the
/// agent's colour; a tool's block draws its bar in the background's colour, so it is not a
/// user message) on another background than the box's, each without its blank first and last
/// lines, and without a sidebar right of it. Empty when no box is on screen (what the
/// conversation shows cannot be told from a dialog then) or no user message is in view (a long
/// reply scrolled them away).
pub fn user_messages(capture: &str) -> Vec<String> {
    let lines = styled::cells(capture);
    let Some(bottom) = lines
        .iter()
        .rposition(|l| plain(l).trim_start().starts_with("╹▀▀▀"))
    else {
        return Vec::new();
    };
    let Some((_, background)) = bottom.checked_sub(1).and_then(|at| bar_line(&lines[at])) else {
        return Vec::new();
    };
    let mut messages = Vec::new();
    let mut block: Option<Vec<String>> = None;
    for line in &lines[..bottom - 1] {
        let user = panel(line).filter(|(at, cells)| {
            let visible = at
                .checked_sub(1)
                .is_some_and(|left| line[*at].style.fg != line[left].style.bg);
            visible && cells.first().is_some_and(|c| c.style.bg != background)
        });
        match user {
            Some((_, cells)) => {
                let text = text_of(cells);
                let text = text.strip_prefix("  ").unwrap_or(text.trim_start());
                block.get_or_insert_with(Vec::new).push(text.to_string());
            }
            None => messages.extend(block.take()),
        }
    }
    messages.extend(block.take());
    messages
        .into_iter()
        .map(|rows| rows.join("\n").trim_matches('\n').to_string())
        .filter(|text| !text.is_empty())
        .collect()
}

/// Whether a user message shown on screen (`shown`, from [`user_messages`]) is `prompt`: the
/// same text (whitespace, which wrapping moves, not compared), a paste's placeholder for it, the
/// end of it (a message cut at the screen's top), or it followed by more lines (what the message
/// attached).
pub fn shows_prompt(shown: &str, prompt: &str) -> bool {
    let squeezed = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let (shown_s, prompt_s) = (squeezed(shown), squeezed(prompt));
    !prompt_s.is_empty()
        && (shows(shown, prompt) || prompt_s.ends_with(&shown_s) || shown_s.starts_with(&prompt_s))
}

/// The header of OpenCode's permission dialog (after `△ `); its later stages are titled
/// `Always allow` (after choosing `Allow always`) and `Reject permission` (rejecting in a
/// subagent's session).
pub const PERMISSION_HEADER: &str = "Permission required";
/// The dialog's options, the first selected when it opens.
const PERMISSION_OPTIONS: &str = "Allow once   Allow always   Reject";
/// The hints right of the options.
const PERMISSION_HINTS: &str = "ctrl+f fullscreen  \u{21c6} select  enter confirm";
/// The releases whose permission dialog is known (captured in
/// `tests/fixtures/opencode/screens/<release>/permission*.ansi`): only on these is it answered
/// by a key.
pub const PERMISSION_RELEASES: [&str; 1] = ["1.18.33"];

/// What a permission dialog asks: the line under its header (an icon and a title: `# Shell
/// command`, `→ Edit src/main.rs`, `⚙ Call tool x`) and the body's lines (`$ echo hi`), as
/// shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub title: String,
    pub body: Vec<String>,
}

impl Asked {
    /// The command of a shell-command permission (`# Shell command`, the body `$ <command>`, a
    /// long one wrapped over more lines); `None` for another permission.
    pub fn command(&self) -> Option<String> {
        if self.title != "# Shell command" {
            return None;
        }
        let (first, rest) = self.body.split_first()?;
        let first = first.strip_prefix("$ ")?;
        Some(
            std::iter::once(first)
                .chain(rest.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    /// The permission in words, for a message.
    pub fn describe(&self) -> String {
        match self.command() {
            Some(command) => format!("running `{command}`"),
            None if self.body.is_empty() => format!("`{}`", self.title),
            None => format!("`{}` ({})", self.title, self.body.join(" / ")),
        }
    }
}

/// A permission dialog seen on the OpenCode TUI's screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionDialog {
    /// Its title after `△`: [`PERMISSION_HEADER`], or a later stage's (`Always allow`).
    pub stage: String,
    /// What it asks (the [`PERMISSION_HEADER`] stage only; empty for another).
    pub asked: Asked,
    /// Whether it is exactly the known dialog with `Allow once` selected (`Ok`), or why not:
    /// only then may it be answered with a key.
    pub exact: Result<(), String>,
}

/// A `┃` panel line: the bar's column and the cells right of it up to the first drawn on the
/// background left of the bar (where a sidebar may follow).
fn panel(line: &[Cell]) -> Option<(usize, &[Cell])> {
    let at = line.iter().position(|cell| !cell.c.is_whitespace())?;
    if line[at].c != '┃' {
        return None;
    }
    let rest = &line[at + 1..];
    let end = match at.checked_sub(1) {
        Some(left) => rest
            .iter()
            .position(|cell| cell.style.bg == line[left].style.bg)
            .unwrap_or(rest.len()),
        None => rest.len(),
    };
    Some((at, &rest[..end]))
}

fn text_of(cells: &[Cell]) -> String {
    plain(cells).trim_end().to_string()
}

/// The permission dialog on a `capture-pane -p -e` capture, if one is on screen: a `┃` panel
/// whose line says `△ <title>`, with no input box below it (the dialog takes the box's place);
/// what it asks and whether it is exactly the known dialog.
///
/// The known dialog (OpenCode 1.18.33, a pane 80 columns or wider, not fullscreen), top down, each
/// line a `┃` panel line at the same column: a blank line; `  △ Permission required`; the
/// icon and title indented four (`    # Shell command`); a blank line; the body indented two
/// (`  $ echo hi`; a diff, patterns, a path, …), ending in a blank line; then, on another
/// background, a blank line, the options `   Allow once   Allow always   Reject` with the hints
/// `ctrl+f fullscreen  ⇆ select  enter confirm` right of them, and a blank line; then no more
/// panel lines. The selected option is drawn on its own background (the others on the options'
/// line's): exact only with `Allow once` selected (Enter would answer what is selected).
/// Anything else — another option selected, fullscreen, a narrow pane's column layout, a later
/// stage — is seen but not exact.
pub fn permission(capture: &str) -> Option<PermissionDialog> {
    let lines = styled::cells(capture);
    let panels: Vec<Option<(usize, &[Cell])>> = lines.iter().map(|l| panel(l)).collect();
    let header = panels.iter().rposition(|p| {
        p.is_some_and(|(_, cells)| text_of(cells).trim_start().starts_with("\u{25b3} "))
    })?;
    let texts: Vec<String> = lines.iter().map(|l| plain(l)).collect();
    if texts[header..]
        .iter()
        .any(|t| t.trim_start().starts_with("╹▀▀▀"))
    {
        // The input box is on screen below it: a user message that reads so, not a dialog.
        return None;
    }
    let (column, cells) = panels[header]?;
    let stage = text_of(cells)
        .trim_start()
        .trim_start_matches('\u{25b3}')
        .trim()
        .to_string();
    let mut dialog = PermissionDialog {
        stage,
        asked: Asked {
            title: String::new(),
            body: Vec::new(),
        },
        exact: Ok(()),
    };
    if dialog.stage != PERMISSION_HEADER {
        dialog.exact = Err(format!(
            "the dialog shows its `{}` stage, not `{PERMISSION_HEADER}`",
            dialog.stage
        ));
        return Some(dialog);
    }
    // The panel's lines at the header's column, from the one above the header down.
    let start = header.checked_sub(1);
    let run: Vec<&[Cell]> = start
        .map(|start| {
            panels[start..]
                .iter()
                .map_while(|p| p.filter(|(c, _)| *c == column).map(|(_, cells)| cells))
                .collect()
        })
        .unwrap_or_default();
    dialog.exact = read_permission(&run, &mut dialog.asked);
    Some(dialog)
}

/// Reads the panel lines of a permission dialog (from the blank line above its header) into
/// `asked`; whether they are exactly the known dialog with `Allow once` selected.
fn read_permission(run: &[&[Cell]], asked: &mut Asked) -> Result<(), String> {
    let text = |at: usize| run.get(at).map(|cells| text_of(cells));
    let background = |cells: &[Cell]| cells.first().map(|c| c.style.bg.clone());
    if text(0).as_deref() != Some("") {
        return Err("no blank line above the header".into());
    }
    let panel_bg = run.get(1).and_then(|cells| background(cells));
    let Some(title) = text(2).and_then(|t| t.strip_prefix("    ").map(str::to_string)) else {
        return Err(format!("no title under the header: {:?}", text(2)));
    };
    if title.trim().is_empty() || title.starts_with(' ') {
        return Err(format!("no title under the header: {title:?}"));
    }
    asked.title = title;
    if text(3).as_deref() != Some("") {
        return Err(format!("no blank line under the title: {:?}", text(3)));
    }
    // The body: the lines on the panel's background; the options follow on another.
    let options_at = (4..run.len())
        .find(|at| background(run[*at]) != panel_bg)
        .ok_or("no options below the dialog's body")?;
    let mut body: Vec<String> = Vec::new();
    for at in 4..options_at {
        let line = text(at).unwrap_or_default();
        if line.is_empty() {
            body.push(line);
            continue;
        }
        match line.strip_prefix("  ") {
            Some(rest) => body.push(rest.to_string()),
            None => return Err(format!("a body line not indented: {line:?}")),
        }
    }
    if body.pop().as_deref() != Some("") {
        return Err("no blank line under the body".into());
    }
    while body.last().is_some_and(String::is_empty) {
        body.pop();
    }
    asked.body = body;
    if asked.body.is_empty() {
        return Err("the dialog's body is empty".into());
    }
    let area: Vec<&[Cell]> = run[options_at..].to_vec();
    let [above, options, below] = area.as_slice() else {
        return Err(format!(
            "the options are not three lines (a blank one, the options, a blank one) ending the dialog: {} lines",
            area.len()
        ));
    };
    if !text_of(above).is_empty() || !text_of(below).is_empty() {
        return Err("the options line is not framed by blank lines".into());
    }
    let shown = plain(options);
    let Some(hints) = shown.trim().strip_prefix(PERMISSION_OPTIONS) else {
        return Err(format!(
            "the options are not `{PERMISSION_OPTIONS}`: {:?}",
            shown.trim()
        ));
    };
    if !hints.starts_with("  ") || hints.trim() != PERMISSION_HINTS {
        return Err(format!(
            "the hints are not `{PERMISSION_HINTS}`: {:?}",
            hints.trim()
        ));
    }
    // Which option is selected: drawn on another background than the options line's.
    let line_bg = options.first().map(|c| c.style.bg.clone());
    let chars: Vec<char> = shown.chars().collect();
    let selected: Vec<&str> = ["Allow once", "Allow always", "Reject"]
        .into_iter()
        .filter(|label| {
            let label: Vec<char> = label.chars().collect();
            let at = chars
                .windows(label.len())
                .position(|w| w == label.as_slice());
            at.is_some_and(|at| {
                options[at..at + label.len()]
                    .iter()
                    .all(|cell| Some(&cell.style.bg) != line_bg.as_ref())
            })
        })
        .collect();
    if selected != ["Allow once"] {
        return Err(format!(
            "`Allow once` is not the one option selected (selected: {selected:?})"
        ));
    }
    Ok(())
}

/// The key that gives `decision` to the known permission dialog of `release`: `accept` is
/// Enter on `Allow once` (selected when the dialog opens; checked before), `cancel` is Escape
/// (OpenCode's reject without a message: the tool does not run and the turn ends); `None` for
/// another release or decision.
pub fn permission_key(release: &str, decision: &str) -> Option<&'static str> {
    if !PERMISSION_RELEASES.contains(&release) {
        return None;
    }
    match decision {
        "accept" => Some("Enter"),
        "cancel" => Some("Escape"),
        _ => None,
    }
}

/// The decisions an adopted OpenCode's permission takes by a key ([`permission_key`]).
/// `Allow always` (a second dialog to confirm) and a reject with a message to the model (only
/// in a subagent's session) are not offered.
pub const PERMISSION_DECISIONS: [&str; 2] = ["accept", "cancel"];

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

    /// The user messages in view, without the sidebar right of them (its title `ok`), the
    /// box, or a tool's block (`$ echo hi`, its output), on a wide and a narrow pane.
    #[test]
    fn the_user_messages_in_view_are_read_without_sidebar_box_or_tool_blocks() {
        assert_eq!(user_messages(&fixture("session-wide")), ["Hello by hand"]);
        assert_eq!(user_messages(&fixture("session-narrow")), ["Hello by hand"]);
        assert_eq!(
            user_messages(&fixture("busy")),
            ["Tell me a long story\nplease"]
        );
        assert_eq!(
            user_messages(&fixture("permission-accepted")),
            ["Run echo hi please"]
        );
        // `/sessions` over the conversation dims it all: no message is read.
        assert!(user_messages(&fixture("dialog-sessions")).is_empty());
        assert!(user_messages(&fixture("empty")).is_empty());
        assert!(user_messages(&fixture("draft")).is_empty());
        // No box, no colours: nothing is read.
        assert!(user_messages(&fixture("permission")).is_empty());
        assert!(user_messages(&styled::strip(&fixture("session-wide"))).is_empty());
    }

    #[test]
    fn a_shown_message_is_a_prompt_wrapped_pasted_cut_at_the_top_or_with_attachments() {
        assert!(shows_prompt(
            "Tell me a long story\nplease",
            "Tell me a long story please"
        ));
        assert!(shows_prompt("[Pasted ~3 lines]", "a\nb\nc"));
        assert!(shows_prompt("story please", "Tell me a long story please"));
        assert!(shows_prompt("explain @a.rs\na.rs", "explain @a.rs"));
        assert!(!shows_prompt("Second session prompt", "Hello by hand"));
        assert!(!shows_prompt("Hello", ""));
    }

    /// A dialog over the conversation (which dims it, the box too) is no empty box: a paste
    /// would go into the dialog's search.
    #[test]
    fn a_dialog_over_the_conversation_is_unreadable() {
        for (name, title) in [
            ("dialog-sessions", "Sessions"),
            ("dialog-commands", "Commands"),
            ("dialog-models", "Select model"),
        ] {
            assert_eq!(
                analyze(&fixture(name)).input,
                InputBox::Unreadable(format!(
                    "a dialog (`{title}`) is open over the conversation"
                )),
                "{name}"
            );
        }
    }

    /// OpenCode's permission dialog takes the box's place: nothing may be typed.
    #[test]
    fn a_permission_dialog_is_unreadable() {
        let read = analyze(&fixture("permission"));
        assert!(matches!(read.input, InputBox::Unreadable(_)), "{read:?}");
    }

    /// The recorded permission dialogs (a 45-line pane, and a 200x50 one with a conversation
    /// of `┃` blocks above and a sidebar right of it) are read exactly, with what they ask.
    #[test]
    fn the_recorded_permission_dialogs_match_exactly() {
        for (name, command) in [
            ("permission", "echo hi"),
            ("permission-second", "echo second > second.txt"),
        ] {
            let dialog = permission(&fixture(name)).expect(name);
            assert_eq!(
                dialog,
                PermissionDialog {
                    stage: PERMISSION_HEADER.into(),
                    asked: Asked {
                        title: "# Shell command".into(),
                        body: vec![format!("$ {command}")],
                    },
                    exact: Ok(()),
                },
                "{name}"
            );
            assert_eq!(dialog.asked.command().as_deref(), Some(command), "{name}");
        }
        assert_eq!(permission_key("1.18.33", "accept"), Some("Enter"));
        assert_eq!(permission_key("1.18.33", "cancel"), Some("Escape"));
        assert_eq!(permission_key("1.18.33", "decline"), None);
        assert_eq!(
            permission_key("1.18.32", "accept"),
            None,
            "an unknown release"
        );
    }

    /// Another option selected (a person pressed an arrow key), the dialog's `Always allow`
    /// stage, edited lines: seen, never exact.
    #[test]
    fn near_misses_of_the_permission_dialog_are_seen_but_not_exact() {
        for name in ["permission-moved", "permission-reject-selected"] {
            let dialog = permission(&fixture(name)).expect(name);
            assert_eq!(dialog.asked.command().as_deref(), Some("echo hi"), "{name}");
            let why = dialog.exact.expect_err(name);
            assert!(why.contains("not the one option selected"), "{name}: {why}");
        }
        let always = permission(&fixture("permission-always")).expect("always");
        assert_eq!(always.stage, "Always allow");
        assert!(always.exact.is_err(), "{always:?}");
        let good = fixture("permission-second");
        for (from, to) in [
            ("Allow once", "Allow twice"),
            ("Allow always", "Allow ever"),
            ("Reject", "Refuse"),
            ("enter ", "return "),
            ("fullscreen", "minimize"),
            // The title indented two, not four.
            ("    \u{1b}[38;5;8m#", "  \u{1b}[38;5;8m#"),
        ] {
            let edited = good.replacen(from, to, 1);
            assert!(edited != good, "{from}");
            let dialog = permission(&edited).expect(from);
            assert!(dialog.exact.is_err(), "{from} -> {to}: {dialog:?}");
        }
        // Without colours neither the panel nor the selection can be told.
        let plain = permission(&styled::strip(&good));
        assert!(plain.is_none_or(|d| d.exact.is_err()));
        // A line more in the options' area.
        let lines: Vec<&str> = good.lines().collect();
        let options = lines.iter().position(|l| l.contains("Allow once")).unwrap();
        let extra = [&lines[..=options], &lines[options..]].concat().join("\n");
        let dialog = permission(&extra).unwrap();
        assert!(dialog.exact.is_err(), "{dialog:?}");
    }

    /// No dialog: the other screens, and the screens after a dialog was answered.
    #[test]
    fn other_screens_show_no_permission_dialog() {
        for name in [
            "empty",
            "draft",
            "draft-in-session",
            "pasted",
            "busy",
            "interrupt-hint",
            "interrupted",
            "permission-accepted",
            "permission-rejected",
        ] {
            assert_eq!(permission(&fixture(name)), None, "{name}");
        }
        // A user message that reads like the dialog, above the input box, is not one.
        let typed = fixture("draft-in-session").replacen("x", "\u{25b3} Permission required", 1);
        assert_eq!(permission(&typed), None);
        assert!(matches!(
            analyze(&fixture("permission-second")).input,
            InputBox::Unreadable(_)
        ));
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
