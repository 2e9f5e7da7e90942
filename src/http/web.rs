//! `GET /`: the small web page — one self-contained HTML file (inline CSS and JS, no external
//! resource) that lists hosted sessions, follows one live, queues and sends prompts, shows the
//! queue with its control lease, interrupts and answers approvals.
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
            .map(|block| format!("'sha256-{}'", base64(&sha256(block.as_bytes()))))
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

/// FIPS 180-4 SHA-256 (the crate has no hashing dependency; this runs once per process).
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut state: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&bits.to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (word, bytes) in w.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = state;
        for (k, w) in K.iter().zip(w) {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(*k)
                .wrapping_add(w);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (word, value) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *word = word.wrapping_add(value);
        }
    }
    let mut digest = [0u8; 32];
    for (bytes, word) in digest.chunks_exact_mut(4).zip(state) {
        bytes.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// Standard base64 with padding, as CSP hash sources are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha256_known_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 1_000_000])),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn base64_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn csp_hashes_the_inline_blocks() {
        let html = "<style>a{}</style><p>x</p><script>go()</script>";
        let csp = content_security_policy(html);
        let script = format!("'sha256-{}'", base64(&sha256(b"go()")));
        let style = format!("'sha256-{}'", base64(&sha256(b"a{}")));
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
        // The only links are the empty data: icon.
        assert_eq!(PAGE.matches("href=").count(), 1);
        assert!(PAGE.contains(r#"<link rel="icon" href="data:,">"#));
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
