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

/// What one capture of the codex TUI shows of its composer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Composer {
    /// Only the dim placeholder: ready for a prompt.
    Empty,
    /// Text a person typed and has not sent (lines joined with `\n`).
    Draft(String),
    /// No composer could be read (the reason): nothing may be typed.
    Unreadable(String),
}

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

/// A line of the capture: its characters, each with whether it is drawn dim.
type Line = Vec<(char, bool)>;

/// Splits a `capture-pane -e` text into lines of characters with their dim attribute (SGR 2 on,
/// 0 or 22 off; colour parameters `38;5;n` / `38;2;r;g;b` are skipped whole).
fn styled_lines(capture: &str) -> Vec<Line> {
    let mut lines = vec![Vec::new()];
    let mut dim = false;
    let mut chars = capture.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => lines.push(Vec::new()),
            '\u{1b}' => {
                if chars.peek() != Some(&'[') {
                    // Another escape (OSC, charset): skip its next character.
                    chars.next();
                    continue;
                }
                chars.next();
                let mut params = String::new();
                let mut last = None;
                for p in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&p) {
                        last = Some(p);
                        break;
                    }
                    params.push(p);
                }
                if last == Some('m') {
                    dim = apply_sgr(&params, dim);
                }
            }
            '\r' => {}
            c => {
                if let Some(line) = lines.last_mut() {
                    line.push((c, dim));
                }
            }
        }
    }
    lines
}

fn apply_sgr(params: &str, mut dim: bool) -> bool {
    let mut parts = params.split([';', ':']);
    while let Some(part) = parts.next() {
        match part {
            "" | "0" | "22" => dim = false,
            "2" => dim = true,
            "38" | "48" | "58" => match parts.next() {
                Some("5") => {
                    parts.next();
                }
                Some("2") => {
                    parts.next();
                    parts.next();
                    parts.next();
                }
                _ => {}
            },
            _ => {}
        }
    }
    dim
}

fn plain(line: &Line) -> String {
    line.iter().map(|(c, _)| *c).collect()
}

/// Reads a `capture-pane -p -e` capture of the codex TUI.
pub fn analyze(capture: &str) -> Screen {
    let lines = styled_lines(capture);
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
}
