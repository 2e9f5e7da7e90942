//! Splits a `tmux capture-pane -p -e` capture into lines of characters with how each is drawn:
//! what the adopted TUIs' screen readers tell a placeholder, a cursor, a draft or a box by
//! (`codex/tui_screen.rs`: dim, `pi/tui_screen.rs`: reverse video, `opencode/adopt/screen.rs`:
//! the background colour). Pure; the
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

/// How a character is drawn: the SGR state it was written in. A colour is its parameters as
/// written (`5;234`, `2;10;20;30`, `32`, `104`); empty for the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Style {
    pub dim: bool,
    pub reverse: bool,
    pub fg: String,
    pub bg: String,
}

impl Style {
    fn has(&self, attribute: Attribute) -> bool {
        match attribute {
            Attribute::Dim => self.dim,
            Attribute::Reverse => self.reverse,
        }
    }
}

/// One character of a capture and how it is drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub c: char,
    pub style: Style,
}

/// A line of the capture: its characters, each with whether the attribute is on.
pub type Line = Vec<(char, bool)>;

/// Splits a `capture-pane -e` text into lines of characters with `attribute` (see [`cells`]).
pub fn styled_lines(capture: &str, attribute: Attribute) -> Vec<Line> {
    cells(capture)
        .into_iter()
        .map(|line| {
            line.into_iter()
                .map(|cell| (cell.c, cell.style.has(attribute)))
                .collect()
        })
        .collect()
}

/// Splits a `capture-pane -e` text into lines of cells: dim (SGR 2 on, 22 off), reverse video
/// (7 on, 27 off), the foreground and background colours (30–37, 90–97 and `38;5;n` /
/// `38;2;r;g;b`, 39 the default; 40–47, 100–107 and `48;…`, 49 the default; the `:` forms
/// alike); SGR 0 or an empty SGR resets them all. Tabs are kept as characters, other controls
/// dropped.
pub fn cells(capture: &str) -> Vec<Vec<Cell>> {
    let mut lines = Lines {
        style: Style::default(),
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
    let lines: Vec<String> = cells(text)
        .iter()
        .map(|line| line.iter().map(|cell| cell.c).collect())
        .collect();
    lines.join("\n")
}

struct Lines {
    style: Style,
    lines: Vec<Vec<Cell>>,
}

impl Lines {
    fn push(&mut self, c: char) {
        if let Some(line) = self.lines.last_mut() {
            line.push(Cell {
                c,
                style: self.style.clone(),
            });
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
            apply_sgr(params, &mut self.style);
        }
    }
}

/// A colour's parameters after 38/48/58: `5;n` or `2;r;g;b`, from the rest of a `:` parameter
/// or from the `;` parameters that follow.
fn colour<'a>(rest: &[u16], params: &mut impl Iterator<Item = &'a [u16]>) -> String {
    let mut parts: Vec<u16> = rest.to_vec();
    if parts.is_empty() {
        let take = match params.next() {
            Some([5]) => {
                parts.push(5);
                1
            }
            Some([2]) => {
                parts.push(2);
                3
            }
            _ => 0,
        };
        for _ in 0..take {
            if let Some([n]) = params.next() {
                parts.push(*n);
            }
        }
    }
    parts
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(";")
}

fn apply_sgr(params: &Params, style: &mut Style) {
    if params.is_empty() {
        *style = Style::default();
        return;
    }
    let mut params = params.iter();
    while let Some(param) = params.next() {
        match param {
            [0] => *style = Style::default(),
            [2] => style.dim = true,
            [22] => style.dim = false,
            [7] => style.reverse = true,
            [27] => style.reverse = false,
            [39] => style.fg.clear(),
            [49] => style.bg.clear(),
            [38, rest @ ..] => style.fg = colour(rest, &mut params),
            [48, rest @ ..] => style.bg = colour(rest, &mut params),
            [58, rest @ ..] => {
                colour(rest, &mut params);
            }
            [n @ (30..=37 | 90..=97)] => style.fg = n.to_string(),
            [n @ (40..=47 | 100..=107)] => style.bg = n.to_string(),
            _ => {}
        }
    }
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
    fn colours_are_their_parameters_as_written() {
        let capture =
            "a\u{1b}[38;5;234;48;2;1;2;3mb\u{1b}[39mc\u{1b}[32;104md\u{1b}[38:5:7;49me\u{1b}[0mf";
        let styles: Vec<(char, String, String)> = cells(capture)[0]
            .iter()
            .map(|cell| (cell.c, cell.style.fg.clone(), cell.style.bg.clone()))
            .collect();
        let want = [
            ('a', "", ""),
            ('b', "5;234", "2;1;2;3"),
            ('c', "", "2;1;2;3"),
            ('d', "32", "104"),
            ('e', "5;7", ""),
            ('f', "", ""),
        ]
        .map(|(c, fg, bg)| (c, fg.to_string(), bg.to_string()));
        assert_eq!(styles, want);
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
