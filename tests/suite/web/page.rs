//! The web page at `GET /`: served without a token but behind the Host and Origin checks, with
//! strict headers and no secret in it; every other route still needs the token; `cohost web`
//! prints the page's URL with the token in its fragment.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::*;

/// `GET /` through ureq: status, headers (lower-cased names) and body.
fn get_page(
    daemon: &TestDaemon,
    headers: &[(&str, &str)],
) -> (u16, HashMap<String, String>, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .new_agent();
    let mut request = agent.get(daemon.url("/"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("GET /");
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_ascii_lowercase(),
                value.to_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let body = response.body_mut().read_to_string().expect("the body");
    (status, headers, body)
}

#[test]
fn web_page_is_served_without_a_token_with_strict_headers_and_no_secret() {
    let daemon = TestDaemon::start_with(None, &[]);
    let token = daemon.token();
    let own_origin = format!("http://127.0.0.1:{}", daemon.port());
    for headers in [vec![], vec![("Origin", own_origin.as_str())]] {
        let (status, headers, body) = get_page(&daemon, &headers);
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        assert_eq!(headers["cache-control"], "no-store");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["referrer-policy"], "no-referrer");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let csp = &headers["content-security-policy"];
        assert!(csp.starts_with("default-src 'none';"), "{csp}");
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("style-src 'sha256-"), "{csp}");
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(
            body.starts_with("<!doctype html>"),
            "{}",
            http::short(&body)
        );
        assert!(body.contains("<title>cohost</title>"));
        assert!(!body.contains(&token), "the page must not carry the token");
        // Only same-origin API paths: no absolute URL anywhere in the page.
        assert!(body.contains("\"/api/sessions"));
        for scheme in ["http:", "https:", "ws:", "wss:"] {
            assert!(!body.contains(scheme), "the page mentions `{scheme}`");
        }
    }
    // A token, right or not, changes nothing about the page.
    let bearer = format!("Bearer {token}");
    let (status, _, _) = get_page(&daemon, &[("Authorization", &bearer)]);
    assert_eq!(status, 200);
}

#[test]
fn web_page_keeps_the_host_and_origin_checks() {
    let daemon = TestDaemon::start_with(None, &[]);
    let port = daemon.port();
    for origin in [
        "http://evil.example".to_string(),
        format!("http://evil.example:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        "null".to_string(),
    ] {
        daemon
            .request("GET", "/", &[("Origin", &origin)], None)
            .assert_error(403, "forbidden_origin", None);
    }
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
    ] {
        daemon
            .raw(&format!("GET / HTTP/1.1\nHost: {host}"), b"")
            .assert_error(403, "forbidden_host", None);
    }
    let page = daemon.raw(&format!("GET / HTTP/1.1\nHost: localhost:{port}"), b"");
    assert_eq!(page.status, 200, "{}", http::short(&page.body));
}

#[test]
fn only_get_slash_is_exempt_from_the_token() {
    let daemon = TestDaemon::start_with(None, &[]);
    for path in [
        "/api/sessions",
        "/api/state",
        "/api/events",
        "/index.html",
        "//",
        "/nope",
    ] {
        daemon
            .get_no_token(path)
            .assert_error(401, "unauthorized", None);
    }
    daemon
        .post_no_token("/", &json!({}))
        .assert_error(401, "unauthorized", None);
    // HEAD is answered like GET: the page's headers, no body, no token needed.
    let head = daemon.raw(
        &format!("HEAD / HTTP/1.1\nHost: 127.0.0.1:{}", daemon.port()),
        b"",
    );
    assert_eq!(head.status, 200, "{}", head.body);
    assert!(head.body.is_empty(), "{}", head.body);
    let head = daemon.raw(
        &format!(
            "HEAD /api/state HTTP/1.1\nHost: 127.0.0.1:{}",
            daemon.port()
        ),
        b"",
    );
    assert_eq!(
        head.status, 401,
        "a guarded GET route stays guarded for HEAD"
    );
    // With the token, the API answers as before.
    assert!(daemon.get("/api/sessions").assert_ok()["sessions"].is_array());
    daemon
        .post("/", &json!({}))
        .assert_error(405, "method_not_allowed", None);
}

#[test]
fn cohost_web_prints_the_page_url_with_the_token_in_its_fragment() {
    let mut daemon = TestDaemon::start_with(None, &[]);
    let token = daemon.token();
    let port = daemon.port();
    let expected = format!("http://127.0.0.1:{port}/#token={token}");
    assert_eq!(daemon.cli_ok(&["web"]).trim(), expected);
    // The address is the one the daemon says it bound (asked over its socket), whatever
    // `--listen` the command was given: a URL only for the daemon it reached.
    assert_eq!(
        daemon
            .cli_ok(&[
                "--listen",
                &format!("localhost:{}", port.wrapping_add(1)),
                "web"
            ])
            .trim(),
        expected
    );
    // The URL without its fragment is the page, and the fragment's token opens the API.
    let (url, fragment) = expected.split_once('#').unwrap();
    assert_eq!(url, daemon.url("/"));
    let bearer = format!("Bearer {}", fragment.strip_prefix("token=").unwrap());
    daemon
        .request("GET", "/api/sessions", &[("Authorization", &bearer)], None)
        .assert_ok();
    // No daemon, no URL.
    daemon.stop();
    let output = daemon.cli(&["web"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not running"), "{stderr}");
    assert!(output.stdout.is_empty());
}
