//! The request guard: DNS-rebinding, cross-origin and token checks for every route.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use super::{ApiError, AppState};
use crate::protocol::codes;

/// Routes that opensessions' hook scripts call without a token.
const COMPAT_POSTS: [&str; 6] = [
    "/api/agent-event",
    "/set-status",
    "/set-progress",
    "/log",
    "/clear-log",
    "/notify",
];

pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, request.method(), request.uri(), request.headers()) {
        Ok(token) => {
            // The token holder's connection keeps its slot when the daemon is full.
            let mut request = request;
            if token == Token::Shown {
                if let Some(proof) = request.extensions().get::<super::server::ConnectionProof>() {
                    proof.prove();
                }
                request.extensions_mut().insert(TokenShown);
            }
            match read_body(request, state.body_timeout).await {
                Ok(request) => next.run(request).await,
                Err(error) => error.into_response(),
            }
        }
        Err(error) => {
            let path = request.uri().path().to_string();
            let presented = request.headers().contains_key(header::AUTHORIZATION);
            if error.code == "unauthorized" {
                failed_authentication(request.method(), &path, &error).await;
            }
            // A refusal reads the body it refuses too (bounded, as for a 413): answering
            // before a body sent in a second write has arrived makes hyper close the
            // connection, and a client that reuses it for its next request sees a disconnect.
            drain(request, state.body_timeout).await;
            if error.code == "unauthorized" {
                unauthorized(&path, presented, error)
            } else {
                error.into_response()
            }
        }
    }
}

/// JSON-RPC's code for a request refused before it was read: an implementation-defined server
/// error (`-32000` to `-32099`).
const JSONRPC_UNAUTHORIZED: i64 = -32001;

/// A 401 as bearer-token clients expect it: a `WWW-Authenticate: Bearer` challenge carrying
/// the reason (RFC 6750; no `resource_metadata`: cohost has no OAuth server), and, on the MCP
/// endpoint, the reason as a JSON-RPC error, which MCP clients show as the call's error rather
/// than start an OAuth discovery.
fn unauthorized(path: &str, presented: bool, error: ApiError) -> Response {
    let description = format!("cohost: {}", error.message).replace(['"', '\\'], "'");
    let challenge = if presented {
        format!(
            r#"Bearer realm="cohost", error="invalid_token", error_description="{description}""#
        )
    } else {
        format!(r#"Bearer realm="cohost", error_description="{description}""#)
    };
    let mut response = if path == "/mcp" {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": JSONRPC_UNAUTHORIZED,
                "message": format!("cohost: {}", error.message),
                "data": {"code": error.code},
            },
        });
        (error.status, axum::Json(body)).into_response()
    } else {
        error.into_response()
    };
    if let Ok(value) = axum::http::HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The body's announced length, and whether it is chunked.
fn body_length(headers: &HeaderMap) -> (Option<u64>, bool) {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    (length, headers.contains_key(header::TRANSFER_ENCODING))
}

/// Reads and drops a request body of at most [`DRAIN_BYTES`] within `timeout`, so that the
/// connection stays reusable after a refusal; a larger body, or a chunked one past the bound,
/// is not waited for (that connection closes).
async fn drain(request: Request, timeout: Duration) {
    let (length, chunked) = body_length(request.headers());
    let fits = match length {
        Some(n) => n > 0 && n <= DRAIN_BYTES as u64,
        None => chunked,
    };
    if fits {
        let body = axum::body::to_bytes(request.into_body(), DRAIN_BYTES);
        let _ = tokio::time::timeout(timeout, body).await;
    }
}

/// The largest refused body that is still read to its end before the 413.
const DRAIN_BYTES: usize = 1024 * 1024;

/// Reads the whole request body before the handler runs, within `timeout`. A handler that
/// ignores the body (interrupt, relaunch…) would otherwise answer before a body sent in a
/// second write has arrived, and hyper then closes the connection: a client that reuses it
/// sees a disconnect. `/mcp` bodies are read here too, so its limit and its timeout answer in
/// JSON like every route. A body that does not arrive in time is `408 request_timeout`, and
/// the connection closes (hyper does not reuse a connection whose body was not read).
async fn read_body(request: Request, timeout: Duration) -> Result<Request, ApiError> {
    // A prompt may carry images: its route alone takes a larger body.
    let limit = if request.method() == Method::POST
        && request.uri().path().starts_with("/api/sessions/")
        && request.uri().path().ends_with("/messages")
    {
        super::MAX_PROMPT_BODY_BYTES
    } else {
        super::MAX_BODY_BYTES
    };
    let (length, chunked) = body_length(request.headers());
    if length.unwrap_or(0) == 0 && !chunked {
        return Ok(request);
    }
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes"),
        )
    };
    let too_slow = || {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            codes::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                timeout.as_secs()
            ),
        )
    };
    if length.is_some_and(|n| n > limit as u64) {
        // Read a moderately oversized body to its end before refusing it, so the client can
        // finish sending and read the 413 (answering mid-upload closes the connection under
        // it). A body past the drain bound is not read: that connection closes.
        drain(request, timeout).await;
        return Err(too_large());
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(too_slow()),
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
        Ok(Err(error)) if error.to_string().contains("length limit") => Err(too_large()),
        Ok(Err(error)) => Err(ApiError::bad_request(
            codes::INVALID_BODY,
            format!("the body could not be read: {error}"),
        )),
    }
}

/// How long a wrong token's answer waits: guessing is slowed to a few tries a second per
/// connection (a 256-bit token is not guessed anyway; a client that keeps trying is noticed).
const WRONG_TOKEN_DELAY: Duration = Duration::from_millis(250);
/// At most one log line per this interval about failed authentications (with the count of the
/// ones it covers): a flood of bad requests cannot flood the log.
const AUTH_LOG_INTERVAL_MS: u64 = 10_000;

/// Logs a failed authentication (rate-limited) and, for a wrong token, waits before the answer.
async fn failed_authentication(method: &Method, path: &str, error: &ApiError) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_LOG_MS: AtomicU64 = AtomicU64::new(0);
    static UNLOGGED: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let last = LAST_LOG_MS.load(Ordering::Relaxed);
    let wrong = error.message.contains("is wrong");
    if now.saturating_sub(last) >= AUTH_LOG_INTERVAL_MS
        && LAST_LOG_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let also = UNLOGGED.swap(0, Ordering::Relaxed);
        tracing::warn!(
            %method,
            path,
            reason = if wrong { "wrong token" } else { "no token" },
            also_refused_since_last_report = also,
            "refused a request that failed authentication"
        );
    } else {
        UNLOGGED.fetch_add(1, Ordering::Relaxed);
    }
    if wrong {
        tokio::time::sleep(WRONG_TOKEN_DELAY).await;
    }
}

/// Set on a request that showed the bearer token (a handler may treat token-less requests of
/// the hooks' routes differently).
#[derive(Debug, Clone, Copy)]
pub struct TokenShown;

/// Whether a request that passed the guard showed the bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Shown,
    /// A route that needs none (health, the page, the hooks' token-less posts).
    NotNeeded,
}

fn check(
    state: &AppState,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<Token, ApiError> {
    let path = uri.path();
    // Only the first of repeated headers would be checked, and another layer (a proxy, a
    // library) might use the last: refuse the ambiguity.
    for name in [header::HOST, header::ORIGIN, header::AUTHORIZATION] {
        if headers.get_all(&name).iter().nth(1).is_some() {
            return Err(ApiError::bad_request(
                codes::DUPLICATE_HEADER,
                format!("the `{name}` header is given more than once"),
            ));
        }
    }
    // A page on another site that resolves its own name to 127.0.0.1 still sends its own Host.
    if !state.allow_remote {
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        if !is_loopback_host(host) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN_HOST,
                format!("Host `{host}` is not a loopback name or address"),
            ));
        }
        // An absolute-form request line (`GET http://evil.example/api/state`) names the
        // authority a proxy or another layer would use instead of Host: it is held to the same
        // rule.
        if let Some(authority) = uri.authority()
            && !is_loopback_host(authority.as_str())
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN_HOST,
                format!(
                    "the request line's authority `{authority}` is not a loopback name or address"
                ),
            ));
        }
    }
    let origin = headers.get(header::ORIGIN);
    if let Some(origin) = origin {
        let origin = origin.to_str().unwrap_or("");
        if !is_own_origin(origin, state.local_addr.port()) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                codes::FORBIDDEN_ORIGIN,
                format!("Origin `{origin}` is not this server"),
            ));
        }
    }
    // `GET /` is the web page: static, no data; it reads the token from its URL fragment.
    // `HEAD` is answered like `GET` (without the body), so it is guarded like `GET`.
    let reads = method == Method::GET || method == Method::HEAD;
    if path == "/api/health" || (reads && (path == "/" || path.starts_with("/.well-known/"))) {
        return Ok(Token::NotNeeded);
    }
    let authorization = headers.get(header::AUTHORIZATION);
    if authorization.is_none()
        && origin.is_none()
        && method == Method::POST
        && COMPAT_POSTS.contains(&path)
        && super::extract::is_json(headers)
    {
        return Ok(Token::NotNeeded);
    }
    let presented = authorization
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if constant_time_eq(token.as_bytes(), state.token.as_bytes()) => {
            Ok(Token::Shown)
        }
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            codes::UNAUTHORIZED,
            "the bearer token is wrong (see `cohost token`)",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            codes::UNAUTHORIZED,
            "this route needs `Authorization: Bearer <token>` (see `cohost token`)",
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a numeric port: nothing else (no
/// empty or non-numeric port, no second colon, no trailing dot).
pub fn is_loopback_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inner, "")) => (inner, None),
            Some((inner, after)) => match after.strip_prefix(':') {
                Some(port) => (inner, Some(port)),
                None => return false,
            },
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port_ok = port.is_none_or(|port| {
        !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok()
    });
    if !port_ok {
        return false;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// `http://<loopback>:<our port>`.
fn is_own_origin(origin: &str, port: u16) -> bool {
    let Some(authority) = origin.strip_prefix("http://") else {
        return false;
    };
    let Some((_, origin_port)) = authority.rsplit_once(':') else {
        return false;
    };
    origin_port == port.to_string() && is_loopback_host(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "localhost:7391",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:80",
            "[::1]",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "example.com",
            "10.0.0.1:7391",
            "localhost.evil.com",
            "[::2]:1",
            "127.0.0.1.nip.io",
            "127.0.0.1:abc",
            "127.0.0.1:",
            "localhost:99999",
            "localhost:7391:1",
            "localhost.",
            "[::1]:",
            "[::1]x",
            "[::1]:8a",
            "::1",
            "127.0.0.1:+80",
            "127.0.0.1: 80",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn own_origin() {
        assert!(is_own_origin("http://127.0.0.1:7391", 7391));
        assert!(is_own_origin("http://localhost:7391", 7391));
        assert!(is_own_origin("http://[::1]:7391", 7391));
        assert!(!is_own_origin("http://127.0.0.1:8080", 7391));
        assert!(!is_own_origin("https://127.0.0.1:7391", 7391));
        assert!(!is_own_origin("http://evil.com:7391", 7391));
        assert!(!is_own_origin("null", 7391));
    }
}
