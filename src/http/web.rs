//! `GET /`: the web page — one self-contained HTML file (inline CSS and JS, no external
//! resource) that lists hosted sessions and every agent the tracker knows, follows a session
//! live (Markdown rendered to DOM nodes, never HTML), queues and sends prompts, shows the queue
//! with its control lease, interrupts, answers approvals and input requests, and starts
//! sessions.
//!
//! The page holds no data: it needs no token to load (the guard lets exactly `GET /` through,
//! after its Host and Origin checks). It reads the token from its URL fragment (`#token=…`,
//! never sent to the server; `cohost web` prints that URL), keeps it in `sessionStorage` and
//! sends it as `Authorization: Bearer` on every API call.
//!
//! The Content-Security-Policy allows only the page's own inline script and style, by their
//! SHA-256 hashes (computed here from the served file, so they cannot drift from it), and
//! connections to this origin.

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("index.html");

/// Always a valid header (ASCII, no control characters); if it were not, the page would be
/// refused everything rather than allowed anything.
static CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    HeaderValue::from_str(&content_security_policy(PAGE))
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
});

/// `GET /`.
pub async fn index() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::CONTENT_SECURITY_POLICY, CSP.clone()),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        PAGE,
    )
        .into_response()
}

/// The policy for `html`: its inline `<script>` and `<style>` blocks by hash, fetches to this
/// origin only, nothing else (no frames, forms, plugins or base URL changes).
fn content_security_policy(html: &str) -> String {
    let hashes = |tag: &str| {
        inline_blocks(html, tag)
            .iter()
            .map(|block| format!("'sha256-{}'", csp_hash(block)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hashes("script"),
        hashes("style"),
    )
}

/// The text of every `<tag>…</tag>` block (attribute-less opening tags only, as the page
/// writes them), exactly as a browser hashes it for the CSP.
fn inline_blocks<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut blocks = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else {
            break;
        };
        blocks.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    blocks
}

/// The CSP hash source of a block: standard base64 (with padding) of its SHA-256.
fn csp_hash(block: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(block.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csp_hash_is_base64_of_sha256() {
        // printf 'abc' | openssl dgst -sha256 -binary | base64
        assert_eq!(
            csp_hash("abc"),
            "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
        );
        assert_eq!(csp_hash(""), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }

    #[test]
    fn csp_hashes_the_inline_blocks() {
        let html = "<style>a{}</style><p>x</p><script>go()</script>";
        let csp = content_security_policy(html);
        let script = format!("'sha256-{}'", csp_hash("go()"));
        let style = format!("'sha256-{}'", csp_hash("a{}"));
        assert!(csp.contains(&format!("script-src {script};")), "{csp}");
        assert!(csp.contains(&format!("style-src {style};")), "{csp}");
    }

    /// The page's CSP covers its one script and one style and allows nothing from elsewhere.
    #[test]
    fn page_policy_is_strict() {
        assert_eq!(inline_blocks(PAGE, "script").len(), 1);
        assert_eq!(inline_blocks(PAGE, "style").len(), 1);
        let csp = content_security_policy(PAGE);
        assert!(csp.starts_with("default-src 'none';"), "{csp}");
        assert!(csp.contains("connect-src 'self';"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        for loose in ["unsafe", "http:", "https:", "*"] {
            assert!(!csp.contains(loose), "`{loose}` in {csp}");
        }
        assert_eq!(CSP.to_str().unwrap(), csp);
    }

    /// The hashes only hold if the browser sees the same bytes: no CR (HTML parsing turns CRLF
    /// into LF), ASCII only (no encoding question), and no other `<script`/`<style` tags.
    #[test]
    fn page_is_self_contained() {
        assert!(PAGE.is_ascii(), "keep index.html ASCII (escape in JS)");
        assert!(!PAGE.contains('\r'));
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert_eq!(PAGE.matches("<style").count(), 1);
        for external in [
            "http:",
            "https:",
            "ws:",
            "wss:",
            "//",
            "src=",
            "@import",
            "url(",
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            // `//` would also catch comments: the page uses `/* */` comments only.
            assert!(!PAGE.contains(external), "index.html contains `{external}`");
        }
        // The only link in the markup is the empty data: icon (the script swaps in a drawn
        // data: PNG; links in agent output are made by the script, http(s) and mailto only).
        assert_eq!(PAGE.matches("href=").count(), 1);
        assert!(PAGE.contains(r#"<link id="favicon" rel="icon" href="data:,">"#));
        // Every fetch goes to this origin's API.
        for (i, _) in PAGE.match_indices("fetch(") {
            let rest = &PAGE[i + "fetch(".len()..];
            assert!(
                rest.starts_with("path") || rest.starts_with("url") || rest.starts_with("\"/api/"),
                "fetch with an unexpected target: {}",
                &rest[..rest.len().min(40)]
            );
        }
    }
}
