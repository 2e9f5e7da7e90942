//! The agent's Markdown as the HTML Matrix clients render (`format: org.matrix.custom.html`,
//! `formatted_body`), through `pulldown-cmark` — CommonMark with tables and strikethrough.
//!
//! What the agent wrote is text, never markup: raw HTML in it (`<script>`, `<img onerror=…>`)
//! is shown escaped, as written. Images become links (Matrix clients load only `mxc://`
//! images, and an agent's `![](https://…)` should not make every phone fetch a URL).
//! Text that Markdown leaves as one plain paragraph gets no HTML at all: `body` says it.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html};

/// The HTML for `text`, or `None` when Markdown makes nothing of it but one paragraph of text.
pub fn to_html(text: &str) -> Option<String> {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let events: Vec<Event> = Parser::new_ext(text, options)
        .map(|event| match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }),
            Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
            other => other,
        })
        .collect();
    let paragraphs = events
        .iter()
        .filter(|e| matches!(e, Event::Start(Tag::Paragraph)))
        .count();
    let plain = paragraphs <= 1
        && events.iter().all(|e| {
            matches!(
                e,
                Event::Start(Tag::Paragraph)
                    | Event::End(TagEnd::Paragraph)
                    | Event::Text(_)
                    | Event::SoftBreak
            )
        });
    if plain {
        return None;
    }
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    html::push_html(&mut out, events.into_iter());
    Some(out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn plain_text_gets_no_html() {
        assert_eq!(to_html("one two three"), None);
        assert_eq!(to_html("a & b < c \"quoted\""), None);
        assert_eq!(to_html("— turn ended: completed"), None);
        assert_eq!(to_html("two lines\nof text"), None);
        assert_eq!(to_html(""), None);
    }

    #[test]
    fn markdown_is_rendered() {
        let html = to_html("**Done**: see `main.rs`\n\n- one\n- two").unwrap();
        assert!(html.contains("<strong>Done</strong>"), "{html}");
        assert!(html.contains("<code>main.rs</code>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
        let html = to_html("```rust\nfn main() {}\n```").unwrap();
        assert!(
            html.contains("<pre><code class=\"language-rust\">fn main() {}"),
            "{html}"
        );
        let html = to_html("| a | b |\n|---|---|\n| 1 | 2 |").unwrap();
        assert!(html.contains("<td>1</td>"), "{html}");
        let html = to_html("~~gone~~").unwrap();
        assert!(html.contains("<del>gone</del>"), "{html}");
    }

    #[test]
    fn raw_html_is_text_and_images_are_links() {
        let html = to_html("hi <script>alert(1)</script> *there*").unwrap();
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        let html = to_html("<img src=x onerror=alert(1)>\n\nok").unwrap();
        assert!(!html.contains("<img"), "{html}");
        let html = to_html("see ![chart](https://example.org/c.png)").unwrap();
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.org/c.png\">chart</a>"),
            "{html}"
        );
    }
}
