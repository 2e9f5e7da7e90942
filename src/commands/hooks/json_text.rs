//! A JSON document as text with the place of every value, and edits on that text: what lets
//! `cohost hooks` add and remove its entries in a person's Claude settings without touching a
//! byte of theirs (no re-serialization: their key order, spacing, indentation and number
//! spellings stay as they wrote them). Pure: a string in, spans and a string out.
//!
//! The parser expects text `serde_json` already accepted (the caller checks that first, for the
//! error message); it still answers an error, never a panic, for anything else.

use serde_json::Value;

/// Where a value sits in the text: `start..end` (`end` just past it).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Object {
        start: usize,
        end: usize,
        members: Vec<Member>,
    },
    Array {
        start: usize,
        end: usize,
        items: Vec<Node>,
    },
    /// A string, number, `true`, `false` or `null`.
    Scalar { start: usize, end: usize },
}

/// One `"key": value` of an object; its span runs from the key's opening quote to the value's
/// end.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub start: usize,
    pub value: Node,
}

impl Node {
    pub fn start(&self) -> usize {
        match self {
            Node::Object { start, .. } | Node::Array { start, .. } | Node::Scalar { start, .. } => {
                *start
            }
        }
    }

    pub fn end(&self) -> usize {
        match self {
            Node::Object { end, .. } | Node::Array { end, .. } | Node::Scalar { end, .. } => *end,
        }
    }

    /// The value of `key` in an object: the last one, as JSON parsers (and Claude) read a
    /// duplicated key.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object { members, .. } => members
                .iter()
                .rev()
                .find(|m| m.key == key)
                .map(|m| &m.value),
            _ => None,
        }
    }

    /// The value itself, parsed from its text.
    pub fn value(&self, text: &str) -> Option<Value> {
        serde_json::from_str(text.get(self.start()..self.end())?).ok()
    }
}

/// Parses the whole of `text` (one value, whitespace around it).
pub fn parse(text: &str) -> Result<Node, String> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        at: 0,
        depth: 0,
    };
    parser.skip_ws();
    let node = parser.value()?;
    parser.skip_ws();
    if parser.at != parser.bytes.len() {
        return Err(format!("unexpected text at byte {}", parser.at));
    }
    Ok(node)
}

/// Deeper nesting than this is refused (serde_json's own limit is 128).
const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Node, String> {
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let start = self.at;
                self.string()?;
                Ok(Node::Scalar {
                    start,
                    end: self.at,
                })
            }
            Some(_) => {
                let start = self.at;
                while let Some(b) = self.bytes.get(self.at) {
                    if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.at += 1;
                }
                if start == self.at {
                    return Err(format!("expected a value at byte {start}"));
                }
                Ok(Node::Scalar {
                    start,
                    end: self.at,
                })
            }
            None => Err("unexpected end of the text".into()),
        }
    }

    /// Skips a string (the opening quote is at `at`) and answers its decoded text.
    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        self.expect(b'"')?;
        loop {
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
                None => return Err(format!("unterminated string at byte {start}")),
            }
        }
        let raw = self
            .text
            .get(start..self.at)
            .ok_or_else(|| format!("a string at byte {start} is not UTF-8"))?;
        serde_json::from_str(raw).map_err(|e| format!("a string at byte {start}: {e}"))
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Node, String> {
        self.enter()?;
        let start = self.at;
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
        } else {
            loop {
                self.skip_ws();
                let member_start = self.at;
                let key = self.string()?;
                self.skip_ws();
                self.expect(b':')?;
                self.skip_ws();
                let value = self.value()?;
                members.push(Member {
                    key,
                    start: member_start,
                    value,
                });
                self.skip_ws();
                match self.bytes.get(self.at) {
                    Some(b',') => self.at += 1,
                    Some(b'}') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(format!("expected `,` or `}}` at byte {}", self.at)),
                }
            }
        }
        self.depth -= 1;
        Ok(Node::Object {
            start,
            end: self.at,
            members,
        })
    }

    fn array(&mut self) -> Result<Node, String> {
        self.enter()?;
        let start = self.at;
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
        } else {
            loop {
                self.skip_ws();
                items.push(self.value()?);
                self.skip_ws();
                match self.bytes.get(self.at) {
                    Some(b',') => self.at += 1,
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(format!("expected `,` or `]` at byte {}", self.at)),
                }
            }
        }
        self.depth -= 1;
        Ok(Node::Array {
            start,
            end: self.at,
            items,
        })
    }
}

/// One change to the text: `range` replaced by `with` (an insertion has an empty range).
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub with: String,
}

/// Applies non-overlapping `edits` to `text`.
pub fn apply(text: &str, mut edits: Vec<Edit>) -> Result<String, String> {
    edits.sort_by_key(|e| (e.start, e.end));
    for pair in edits.windows(2) {
        if pair[0].end > pair[1].start {
            return Err("two edits of the settings overlap".into());
        }
    }
    let mut out = String::with_capacity(text.len() + 1024);
    let mut at = 0;
    for edit in &edits {
        out.push_str(
            text.get(at..edit.start)
                .ok_or("an edit is not on a character boundary")?,
        );
        out.push_str(&edit.with);
        at = edit.end;
    }
    out.push_str(text.get(at..).ok_or("an edit is past the text")?);
    Ok(out)
}

/// How the document is laid out, for text cohost adds: the indentation unit, and whether it
/// is written on one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub unit: String,
    pub one_line: bool,
}

impl Layout {
    /// The layout of `text`: the shortest indentation of a line that has any (two spaces when
    /// none does), and one line when no newline comes before its last non-blank byte.
    pub fn of(text: &str) -> Layout {
        let unit = text
            .lines()
            .map(|line| {
                let rest = line.trim_start_matches([' ', '\t']);
                &line[..line.len() - rest.len()]
            })
            .filter(|indent| !indent.is_empty())
            .min_by_key(|indent| indent.len())
            .unwrap_or("  ")
            .to_string();
        Layout {
            unit,
            one_line: !text.trim_end().contains('\n'),
        }
    }

    /// `value` as text starting at a line indented by `indent`: pretty with this layout's
    /// unit (compact on a one-line document).
    pub fn render(&self, value: &Value, indent: &str) -> String {
        if self.one_line {
            return value.to_string();
        }
        let mut bytes = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
        if serde::Serialize::serialize(value, &mut serializer).is_err() {
            return value.to_string();
        }
        String::from_utf8_lossy(&bytes).replace('\n', &format!("\n{indent}"))
    }
}

/// The indentation of the line holding byte `at`.
pub fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at.min(text.len())]
        .rfind('\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let line = &text[line_start..];
    let rest = line.trim_start_matches([' ', '\t']);
    &line[..line.len() - rest.len()]
}

/// The items of a container, by span (members of an object from their key).
fn spans(node: &Node) -> Vec<(usize, usize)> {
    match node {
        Node::Object { members, .. } => members.iter().map(|m| (m.start, m.value.end())).collect(),
        Node::Array { items, .. } => items.iter().map(|i| (i.start(), i.end())).collect(),
        Node::Scalar { .. } => Vec::new(),
    }
}

/// Where new items go in a container: what precedes each (after the comma), and the
/// indentation they are rendered at (`None`: compact, on the line of the items before them).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub separator: String,
    pub indent: Option<String>,
}

impl Placement {
    /// How new items of container `node` are laid out: like the items it holds (on their own
    /// lines, or on one line), else — empty — on new lines one unit deeper than the container's
    /// line (compact in a one-line document).
    pub fn of(text: &str, node: &Node, layout: &Layout) -> Placement {
        let existing = spans(node);
        let gap = match existing.as_slice() {
            [.., (_, prev_end), (next_start, _)] => text.get(*prev_end..*next_start).map(|gap| {
                // Past the comma.
                let gap = gap.trim_start_matches([' ', '\t', '\n', '\r']);
                gap.strip_prefix(',').unwrap_or(gap).to_string()
            }),
            [(first_start, _)] => text.get(node.start() + 1..*first_start).map(str::to_string),
            [] => None,
        };
        // After a lone item, a space only where the document puts one after its commas.
        let lone = if text.contains(", ") { " " } else { "" };
        if layout.one_line {
            let separator = match gap {
                Some(gap) if !gap.contains('\n') && !existing.is_empty() => {
                    if gap.is_empty() && existing.len() == 1 {
                        lone.to_string()
                    } else {
                        gap
                    }
                }
                _ if existing.is_empty() => String::new(),
                _ => lone.to_string(),
            };
            return Placement {
                separator,
                indent: None,
            };
        }
        match gap {
            Some(gap) if gap.contains('\n') => {
                let indent = gap[gap.rfind('\n').map(|i| i + 1).unwrap_or(0)..].to_string();
                Placement {
                    separator: gap,
                    indent: Some(indent),
                }
            }
            // Items written on the container's line stay there.
            Some(gap) => Placement {
                separator: if gap.is_empty() && existing.len() == 1 {
                    " ".to_string()
                } else {
                    gap
                },
                indent: None,
            },
            None => {
                let indent = format!("{}{}", line_indent(text, node.start()), layout.unit);
                Placement {
                    separator: format!("\n{indent}"),
                    indent: Some(indent),
                }
            }
        }
    }

    /// `value` rendered for this place.
    pub fn render(&self, layout: &Layout, value: &Value) -> String {
        match &self.indent {
            Some(indent) => layout.render(value, indent),
            None => value.to_string(),
        }
    }

    /// A member `"key": value` rendered for this place.
    pub fn render_member(&self, layout: &Layout, key: &str, value: &Value) -> String {
        format!(
            "{}: {}",
            Value::String(key.to_string()),
            self.render(layout, value)
        )
    }
}

/// The edit that adds `items` (rendered for `placement`) at the end of the container `node`,
/// after what it holds.
pub fn append(text: &str, node: &Node, items: &[String], placement: &Placement) -> Option<Edit> {
    if items.is_empty() {
        return None;
    }
    let separator = &placement.separator;
    let joined = items.join(&format!(",{separator}"));
    match spans(node).last() {
        Some(&(_, last_end)) => Some(Edit {
            start: last_end,
            end: last_end,
            with: format!(",{separator}{joined}"),
        }),
        None => {
            // An empty container: its inside (blank, if anything) becomes the items.
            let closing = if placement.indent.is_some() {
                format!("\n{}", line_indent(text, node.start()))
            } else {
                String::new()
            };
            Some(Edit {
                start: node.start() + 1,
                end: node.end() - 1,
                with: format!("{separator}{joined}{closing}"),
            })
        }
    }
}

/// The edits that take the items at `remove` (indices into the container `node`) out of it,
/// with their commas, keeping every other byte. Removing all of them leaves `{}` / `[]`.
pub fn remove(node: &Node, remove: &[usize]) -> Vec<Edit> {
    let items = spans(node);
    let kept: Vec<usize> = (0..items.len()).filter(|i| !remove.contains(i)).collect();
    let Some(&first_kept) = kept.first() else {
        return if items.is_empty() {
            Vec::new()
        } else {
            vec![Edit {
                start: node.start() + 1,
                end: node.end() - 1,
                with: String::new(),
            }]
        };
    };
    let mut edits = Vec::new();
    for &index in remove {
        if index >= items.len() {
            continue;
        }
        let edit = if index < first_kept {
            // Before every kept item: the item up to the next one's start.
            (items[index].0, items[index + 1].0)
        } else {
            // After a kept item: from the previous item's end (its comma) to this one's end.
            (items[index - 1].1, items[index].1)
        };
        edits.push(Edit {
            start: edit.0,
            end: edit.1,
            with: String::new(),
        });
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(text: &str) -> Node {
        parse(text).unwrap()
    }

    #[test]
    fn spans_point_at_the_values() {
        let text = r#" { "a" : [1, "x\"]", {"b": null}], "c": {} } "#;
        let root = node(text);
        let a = root.get("a").unwrap();
        assert_eq!(&text[a.start()..a.end()], r#"[1, "x\"]", {"b": null}]"#);
        assert_eq!(a.value(text), Some(json!([1, "x\"]", {"b": null}])));
        assert_eq!(root.get("c").unwrap().value(text), Some(json!({})));
        assert!(root.get("d").is_none());
        // The last of a duplicated key, as JSON parsers read it.
        assert_eq!(
            node(r#"{"k": 1, "k": 2}"#)
                .get("k")
                .unwrap()
                .value(r#"{"k": 1, "k": 2}"#),
            Some(json!(2))
        );
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "[1] x", "\"open"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn removing_keeps_every_other_byte() {
        let text = "[\n  1,\n  2,\n  3\n]";
        let root = node(text);
        let cases: [(&[usize], &str); 6] = [
            (&[0], "[\n  2,\n  3\n]"),
            (&[1], "[\n  1,\n  3\n]"),
            (&[2], "[\n  1,\n  2\n]"),
            (&[0, 1], "[\n  3\n]"),
            (&[1, 2], "[\n  1\n]"),
            (&[0, 1, 2], "[]"),
        ];
        for (indices, want) in cases {
            let out = apply(text, remove(&root, indices)).unwrap();
            assert_eq!(out, want, "{indices:?}");
        }
        let text = r#"{"a": 1, "b": 2}"#;
        let out = apply(text, remove(&node(text), &[0])).unwrap();
        assert_eq!(out, r#"{"b": 2}"#);
    }

    #[test]
    fn appending_follows_the_layout() {
        let append_to = |text: &str, key: Option<&str>, item: &Value| {
            let layout = Layout::of(text);
            let root = node(text);
            let target = key.map(|k| root.get(k).unwrap()).unwrap_or(&root);
            let place = Placement::of(text, target, &layout);
            let rendered = place.render(&layout, item);
            apply(
                text,
                vec![append(text, target, &[rendered], &place).unwrap()],
            )
            .unwrap()
        };
        let three = json!(3);
        assert_eq!(
            append_to("[\n    1,\n    2\n]", None, &three),
            "[\n    1,\n    2,\n    3\n]"
        );
        assert_eq!(append_to("[\n  1\n]", None, &three), "[\n  1,\n  3\n]");
        assert_eq!(append_to("[1, 2]", None, &three), "[1, 2, 3]");
        assert_eq!(append_to("[1]", None, &three), "[1,3]");
        assert_eq!(append_to("[[1], 2]", None, &three), "[[1], 2, 3]");
        assert_eq!(
            append_to("{\n  \"a\": []\n}", Some("a"), &json!({"x": 1})),
            "{\n  \"a\": [\n    {\n      \"x\": 1\n    }\n  ]\n}"
        );
        assert_eq!(
            append_to("{\n  \"a\": [1]\n}", Some("a"), &three),
            "{\n  \"a\": [1, 3]\n}"
        );
        assert_eq!(
            append_to("{\"a\": []}", Some("a"), &json!({"x": 1})),
            "{\"a\": [{\"x\":1}]}"
        );
    }

    #[test]
    fn layout_and_rendering() {
        let text = "{\n\t\"a\": {\n\t\t\"b\": 1\n\t}\n}\n";
        let layout = Layout::of(text);
        assert_eq!(layout.unit, "\t");
        assert!(!layout.one_line);
        assert_eq!(
            layout.render(&json!({"x": [1]}), "\t"),
            "{\n\t\t\"x\": [\n\t\t\t1\n\t\t]\n\t}"
        );
        assert!(Layout::of("{\"a\": 1}\n").one_line);
        assert_eq!(
            Layout::of("{\"a\": 1}").render(&json!({"x": 1}), ""),
            "{\"x\":1}"
        );
        assert_eq!(line_indent("{\n   \"a\": 1", 8), "   ");
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let edits = vec![
            Edit {
                start: 0,
                end: 3,
                with: String::new(),
            },
            Edit {
                start: 2,
                end: 4,
                with: String::new(),
            },
        ];
        assert!(apply("abcdef", edits).is_err());
    }
}
