//! Secret redaction for text that MCP tools return: API keys (`sk-…`, `sk-ant-…`, GitHub
//! tokens, AWS access key ids), bearer tokens and PEM private key blocks become `[REDACTED]`.
//!
//! The scan is a hand-written byte walk: every pattern starts with an ASCII prefix, so a match
//! always starts and ends on a char boundary.

use std::borrow::Cow;

use serde_json::Value;

/// Which bytes may follow a token prefix.
type Alphabet = fn(u8) -> bool;

/// Token prefixes, the shortest tail that makes them a secret, and the tail's alphabet.
const PREFIXES: [(&str, usize, Alphabet); 8] = [
    ("sk-", 16, is_key_byte),
    ("ghp_", 20, is_word_byte),
    ("gho_", 20, is_word_byte),
    ("ghu_", 20, is_word_byte),
    ("ghs_", 20, is_word_byte),
    ("ghr_", 20, is_word_byte),
    ("github_pat_", 20, is_word_byte),
    ("AKIA", 16, is_upper_alnum),
];

const PEM_BEGIN: &str = "-----BEGIN ";
const PEM_END: &str = "-----END ";

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_key_byte(b: u8) -> bool {
    is_word_byte(b) || b == b'-'
}

fn is_upper_alnum(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// RFC 6750 `b64token` characters.
fn is_bearer_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b)
}

fn run_len(bytes: &[u8], from: usize, accept: Alphabet) -> usize {
    bytes[from..].iter().take_while(|b| accept(**b)).count()
}

/// The end of a secret starting at `i` and what replaces it, if one starts there.
fn secret_at(text: &str, i: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let rest = &text[i..];
    // A token must not be the tail of a longer word (`task-…`, `xghp_…`).
    let at_boundary = i == 0 || !is_key_byte(bytes[i - 1]);
    if rest.starts_with(PEM_BEGIN) {
        let header_end = rest.find('\n').unwrap_or(rest.len());
        if rest[..header_end].contains("PRIVATE KEY-----") {
            let end = match rest.find(PEM_END) {
                Some(at) => {
                    let after = at + PEM_END.len();
                    match rest[after..].find("-----") {
                        Some(close) => after + close + 5,
                        None => rest.len(),
                    }
                }
                None => rest.len(),
            };
            return Some((i + end, "[REDACTED PRIVATE KEY]".to_string()));
        }
    }
    if at_boundary && rest.len() > 7 && rest.as_bytes()[..7].eq_ignore_ascii_case(b"bearer ") {
        let run = run_len(bytes, i + 7, is_bearer_byte);
        if run >= 8 {
            return Some((i + 7 + run, format!("{}[REDACTED]", &rest[..7])));
        }
    }
    if at_boundary {
        for (prefix, min, accept) in PREFIXES {
            if rest.starts_with(prefix) {
                let run = run_len(bytes, i + prefix.len(), accept);
                if run >= min {
                    return Some((i + prefix.len() + run, format!("{prefix}[REDACTED]")));
                }
            }
        }
    }
    None
}

/// `text` with every recognisable secret replaced; borrowed when there was none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Every pattern starts with an ASCII letter or `-`.
        if (bytes[i].is_ascii_alphabetic() || bytes[i] == b'-')
            && let Some((end, replacement)) = secret_at(text, i)
        {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..i]);
            out.push_str(&replacement);
            copied = end;
            i = end;
        } else {
            i += 1;
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// Redacts every string (and object key) in `value`; returns how many strings changed.
pub fn redact_value(value: &mut Value) -> usize {
    match value {
        Value::String(text) => match redact(text) {
            Cow::Borrowed(_) => 0,
            Cow::Owned(clean) => {
                *text = clean;
                1
            }
        },
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => {
            let mut changed = 0;
            if map.keys().any(|key| matches!(redact(key), Cow::Owned(_))) {
                let old = std::mem::take(map);
                for (key, item) in old {
                    let clean = redact(&key).into_owned();
                    changed += usize::from(clean != key);
                    map.insert(clean, item);
                }
            }
            changed + map.values_mut().map(redact_value).sum::<usize>()
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys() {
        assert_eq!(
            redact("key sk-proj-abcdefghijklmnop1234 end"),
            "key sk-[REDACTED] end"
        );
        assert_eq!(
            redact("ANTHROPIC_API_KEY=sk-ant-api03-AAAAbbbbCCCCdddd_eeee-ffff"),
            "ANTHROPIC_API_KEY=sk-[REDACTED]"
        );
        assert_eq!(
            redact("token: ghp_0123456789abcdefghijABCDEFGHIJ."),
            "token: ghp_[REDACTED]."
        );
        assert_eq!(
            redact("github_pat_11AAAAAAA0123456789_abcdefghij"),
            "github_pat_[REDACTED]"
        );
        assert_eq!(redact("id AKIAIOSFODNN7EXAMPLE"), "id AKIA[REDACTED]");
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(
            redact("Authorization: Bearer abc.DEF-123_456~xyz="),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(redact("bearer 0123456789"), "bearer [REDACTED]");
        // Prose is not a token.
        assert_eq!(redact("the Bearer of bad news"), "the Bearer of bad news");
    }

    #[test]
    fn private_keys() {
        let text = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter";
        assert_eq!(redact(text), "before\n[REDACTED PRIVATE KEY]\nafter");
        let cut = "x -----BEGIN RSA PRIVATE KEY-----\nMIIE";
        assert_eq!(redact(cut), "x [REDACTED PRIVATE KEY]");
        let public = "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----";
        assert_eq!(redact(public), public);
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for text in [
            "",
            "task-1234567890abcdefghij",
            "sk-short",
            "ask-abcdefghijklmnopqrstuvwxyz",
            "the sky is blue — ü ✓ sk",
            "ghp_short",
        ] {
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn multibyte_neighbours() {
        assert_eq!(
            redact("é sk-abcdefghijklmnopq ü"),
            "é sk-[REDACTED] ü".to_string()
        );
    }

    #[test]
    fn values() {
        let mut value = serde_json::json!({
            "a": ["ok", "sk-abcdefghijklmnopqrstu"],
            "b": {"c": "Bearer abcdefghijkl"},
            "n": 1
        });
        assert_eq!(redact_value(&mut value), 2);
        assert_eq!(
            value,
            serde_json::json!({
                "a": ["ok", "sk-[REDACTED]"],
                "b": {"c": "Bearer [REDACTED]"},
                "n": 1
            })
        );
    }
}
