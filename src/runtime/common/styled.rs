//! Splits a `tmux capture-pane -p -e` capture into lines of characters, each with whether one SGR
//! attribute is on: what the adopted TUIs' screen readers (`codex/tui_screen.rs`: dim,
//! `pi/tui_screen.rs`: reverse video) tell a placeholder, a cursor or a draft by. Pure; the
//! escape sequences are parsed by `anstyle-parse` (the VTE state machine), so an OSC or a
//! charset sequence is consumed whole, never read as text.

use anstyle_parse::{DefaultCharAccumulator, Params, Parser, Perform};

/// The SGR attribute a screen reader follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute {
    /// Faint (SGR 2 on, 22 off).
    Dim,
    /// Reverse video (SGR 7 on, 27 off).
    Reverse,
}

impl Attribute {
    fn on(self) -> u16 {
        match self {
            Attribute::Dim => 2,
            Attribute::Reverse => 7,
        }
    }

    fn off(self) -> u16 {
        match self {
            Attribute::Dim => 22,
            Attribute::Reverse => 27,
        }
    }
}

/// A line of the capture: its characters, each with whether the attribute is on.
pub type Line = Vec<(char, bool)>;

/// Splits a `capture-pane -e` text into lines of characters with `attribute` (SGR 0 or an empty
/// SGR turn it off as well; colour parameters `38;5;n` / `38;2;r;g;b` are skipped whole, and
/// their `:` forms are one parameter). Tabs are kept as characters, other controls dropped.
pub fn styled_lines(capture: &str, attribute: Attribute) -> Vec<Line> {
    let mut lines = Lines {
        attribute,
        on: false,
        lines: vec![Vec::new()],
    };
    let mut parser = Parser::<DefaultCharAccumulator>::default();
    for byte in capture.bytes() {
        parser.advance(&mut lines, byte);
    }
    lines.lines
}

/// A line's characters without attributes.
pub fn plain(line: &Line) -> String {
    line.iter().map(|(c, _)| *c).collect()
}

/// `text` without its escape sequences (lines kept, joined with `\n`).
pub fn strip(text: &str) -> String {
    let lines: Vec<String> = styled_lines(text, Attribute::Dim)
        .iter()
        .map(plain)
        .collect();
    lines.join("\n")
}

struct Lines {
    attribute: Attribute,
    on: bool,
    lines: Vec<Line>,
}

impl Lines {
    fn push(&mut self, c: char) {
        if let Some(line) = self.lines.last_mut() {
            line.push((c, self.on));
        }
    }
}

impl Perform for Lines {
    fn print(&mut self, c: char) {
        self.push(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => self.lines.push(Vec::new()),
            b'\t' => self.push('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: u8) {
        // `ESC [ > 4 m` and the like (a private marker) are not SGR.
        if action == b'm' && intermediates.is_empty() {
            self.on = apply_sgr(params, self.attribute, self.on);
        }
    }
}

fn apply_sgr(params: &Params, attribute: Attribute, mut on: bool) -> bool {
    if params.is_empty() {
        return false;
    }
    let mut params = params.iter();
    while let Some(param) = params.next() {
        match param {
            [0] => on = false,
            [p] if *p == attribute.on() => on = true,
            [p] if *p == attribute.off() => on = false,
            [38] | [48] | [58] => match params.next() {
                Some([5]) => {
                    params.next();
                }
                Some([2]) => {
                    params.next();
                    params.next();
                    params.next();
                }
                _ => {}
            },
            _ => {}
        }
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(capture: &str, attribute: Attribute) -> Vec<String> {
        styled_lines(capture, attribute)
            .iter()
            .map(|line| {
                line.iter()
                    .map(|(c, on)| if *on { c.to_ascii_uppercase() } else { *c })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_attribute_is_followed_through_resets_and_colours() {
        let capture = "a\u{1b}[2mb\u{1b}[22mc\u{1b}[2;38;5;2md\u{1b}[0me\n\u{1b}[2mf\u{1b}[mg";
        assert_eq!(marked(capture, Attribute::Dim), ["aBcDe", "Fg"]);
        // A colour whose value is 2 or 7 is not the attribute.
        let capture = "\u{1b}[38;5;7ma\u{1b}[38;2;7;7;7mb\u{1b}[38:5:7mc\u{1b}[7md\u{1b}[27me";
        assert_eq!(marked(capture, Attribute::Reverse), ["abcDe"]);
        // Reverse's off is 27, not dim's 22.
        assert_eq!(
            marked("\u{1b}[7ma\u{1b}[22mb\u{1b}[27mc", Attribute::Reverse),
            ["ABc"]
        );
    }

    #[test]
    fn other_sequences_are_consumed_whole() {
        // An OSC 8 hyperlink, a charset selection, a cursor move, a carriage return.
        let capture =
            "\u{1b}]8;;https://x.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\ \u{1b}(Bok\u{1b}[2C\r›\tx";
        assert_eq!(marked(capture, Attribute::Dim), ["link ok›\tx"]);
        assert_eq!(plain(&styled_lines("é ü", Attribute::Dim)[0]), "é ü");
        assert_eq!(strip("\u{1b}[2mINFO\u{1b}[0m a\nb"), "INFO a\nb");
    }
}
