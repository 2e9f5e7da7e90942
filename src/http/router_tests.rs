//! The router in process (`tower::ServiceExt::oneshot`, no socket): the guard's Host, Origin
//! and token rules, the token-less opensessions routes, and the error mapping — every refusal
//! one JSON shape with the status of its class.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::{AppState, router};
use crate::core::CoreConfig;
use crate::core::event_log::{FsyncPolicy, LogConfig};
use crate::core::tracker::TrackerConfig;
use crate::runtime::Hosts;
use crate::service::Service;
use crate::tasks::TaskManager;
use crate::tmux::{SessionCache, Tmux};

const TOKEN: &str = "test-token-0123456789";

struct Fixture {
    app: axum::Router,
    core: crate::core::CoreHandle,
    _home: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let (core, _thread, _) = crate::core::start(CoreConfig {
        home: home.path().to_path_buf(),
        log: LogConfig {
            dir: home.path().join("log"),
            quarantine: home.path().join("quarantine.jsonl"),
            segment_bytes: 1 << 20,
            retain_bytes: 1 << 24,
            fsync: FsyncPolicy::Never,
        },
        tracker: TrackerConfig::default(),
    })
    .unwrap();
    let hosts = Hosts::from_hosts(Vec::new());
    let cancel = CancellationToken::new();
    let handle = core.clone();
    let service = Service::new(crate::service::ServiceParts {
        core: core.clone(),
        tmux: Arc::new(SessionCache::new(Tmux::new(Some(
            home.path().join("no-tmux"),
        )))),
        hosts: hosts.clone(),
        tasks: TaskManager::new(core, hosts),
        mcp_roots: Vec::new(),
        shutdown: cancel.clone(),
        watch: crate::watch::WatchHandle::disabled(),
        profiles: Default::default(),
        profiles_reload: None,
    });
    let state = AppState::new(crate::http::AppStateParts {
        service,
        token: TOKEN.into(),
        local_addr: "127.0.0.1:7391".parse().unwrap(),
        allow_remote: false,
        shutdown: cancel,
        body_timeout: std::time::Duration::from_secs(5),
    });
    Fixture {
        app: router(state, axum::Router::new()),
        core: handle,
        _home: home,
    }
}

struct Sent {
    status: StatusCode,
    body: Value,
}

impl Fixture {
    async fn send(&self, request: Request<Body>) -> Sent {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.to_str().unwrap_or("").starts_with("application/json"));
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            assert!(
                is_json,
                "a non-JSON answer: {}",
                String::from_utf8_lossy(&bytes)
            );
            serde_json::from_slice(&bytes).unwrap()
        };
        Sent { status, body }
    }
}

fn get(path: &str) -> axum::http::request::Builder {
    Request::get(path).header(header::HOST, "127.0.0.1:7391")
}

fn authed(builder: axum::http::request::Builder) -> axum::http::request::Builder {
    builder.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
}

#[track_caller]
fn refused(sent: &Sent, status: StatusCode, code: &str) {
    assert_eq!(sent.status, status, "{}", sent.body);
    assert_eq!(sent.body["error"]["code"], code, "{}", sent.body);
    assert!(sent.body["error"]["message"].is_string(), "{}", sent.body);
}

#[tokio::test]
async fn the_guard_checks_host_origin_and_token_in_that_order() {
    let fx = fixture();
    // No token, wrong token, right token.
    let sent = fx
        .send(get("/api/state").body(Body::empty()).unwrap())
        .await;
    refused(&sent, StatusCode::UNAUTHORIZED, "unauthorized");
    let sent = fx
        .send(
            get("/api/state")
                .header(header::AUTHORIZATION, "Bearer nope")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    refused(&sent, StatusCode::UNAUTHORIZED, "unauthorized");
    let sent = fx
        .send(authed(get("/api/state")).body(Body::empty()).unwrap())
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert!(sent.body["sessions"].is_array());

    // A rebinding Host is refused before the token is even looked at.
    let sent = fx
        .send(
            authed(Request::get("/api/state").header(header::HOST, "evil.example:7391"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(sent.status, StatusCode::FORBIDDEN, "{}", sent.body);
    // A foreign Origin too, even with the token.
    let sent = fx
        .send(
            authed(get("/api/state"))
                .header(header::ORIGIN, "http://evil.example")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(sent.status, StatusCode::FORBIDDEN, "{}", sent.body);

    // The health route and the page need no token.
    let sent = fx
        .send(get("/api/health").body(Body::empty()).unwrap())
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(sent.body["ok"], true);
}

#[tokio::test]
async fn opensessions_posts_need_no_token_but_json_and_no_origin() {
    let fx = fixture();
    let post = |origin: Option<&str>, content_type: &str| {
        let mut builder = Request::post("/api/agent-event")
            .header(header::HOST, "127.0.0.1:7391")
            .header(header::CONTENT_TYPE, content_type);
        if let Some(origin) = origin {
            builder = builder.header(header::ORIGIN, origin);
        }
        builder
            .body(Body::from(
                json!({"agent": "a", "status": "running", "tmuxSession": "nowhere"}).to_string(),
            ))
            .unwrap()
    };
    // Past the guard without a token: the session is unknown (no tmux here), as JSON.
    let sent = fx.send(post(None, "application/json")).await;
    refused(&sent, StatusCode::NOT_FOUND, "session_not_found");
    // A browser "simple" request (text/plain) or one with an Origin needs the token.
    let sent = fx.send(post(None, "text/plain")).await;
    refused(&sent, StatusCode::UNAUTHORIZED, "unauthorized");
    let sent = fx
        .send(post(Some("http://127.0.0.1:7391"), "application/json"))
        .await;
    refused(&sent, StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn errors_are_one_json_shape_with_the_status_of_their_class() {
    let fx = fixture();
    let call = |method: &str, path: &str, body: Option<Value>| {
        let builder = authed(
            Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, "127.0.0.1:7391"),
        );
        match body {
            Some(body) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
            None => builder.body(Body::empty()).unwrap(),
        }
    };
    // Not found (service), with the code of the resource.
    let sent = fx.send(call("GET", "/api/sessions/cs_nope", None)).await;
    refused(&sent, StatusCode::NOT_FOUND, "session_not_found");
    let sent = fx.send(call("GET", "/api/tasks/task_nope", None)).await;
    refused(&sent, StatusCode::NOT_FOUND, "task_not_found");
    // Invalid field (service): 400 naming the field.
    let sent = fx
        .send(call(
            "POST",
            "/api/sessions",
            Some(json!({"runtime": "vim", "cwd": "/"})),
        ))
        .await;
    refused(&sent, StatusCode::BAD_REQUEST, "invalid_field");
    assert_eq!(sent.body["error"]["field"], "runtime");
    // A runtime with no host here: unavailable, not a crash.
    let sent = fx
        .send(call(
            "POST",
            "/api/sessions",
            Some(json!({"runtime": "codex", "cwd": "/"})),
        ))
        .await;
    refused(&sent, StatusCode::SERVICE_UNAVAILABLE, "unsupported");
    // A bad query (the extractor) and an unknown body field (the JSON extractor).
    let sent = fx.send(call("GET", "/api/events?after=x", None)).await;
    refused(&sent, StatusCode::BAD_REQUEST, "invalid_field");
    let sent = fx
        .send(call(
            "POST",
            "/api/sessions/cs_x/messages",
            Some(json!({"text": "hi", "extra": 1})),
        ))
        .await;
    assert_eq!(sent.status, StatusCode::BAD_REQUEST, "{}", sent.body);
    // A cursor ahead of the log, routes and methods that do not exist.
    let sent = fx.send(call("GET", "/api/events?after=999999", None)).await;
    refused(&sent, StatusCode::BAD_REQUEST, "invalid_field");
    assert_eq!(sent.body["error"]["field"], "after");
    let sent = fx.send(call("GET", "/api/nope", None)).await;
    refused(&sent, StatusCode::NOT_FOUND, "not_found");
    let sent = fx.send(call("DELETE", "/api/state", None)).await;
    refused(&sent, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

/// A stream resumed mid-message (its cursor the head, a delta arriving before its first read)
/// starts with the text so far, not with a delta past a gap: the delta came first once (seen
/// in `suite::codex::host::an_interrupt_ends_the_running_turn` under load, "a gap before … after
/// \"\"").
#[tokio::test]
async fn a_stream_resumed_mid_message_sends_the_text_so_far_before_the_next_delta() {
    use crate::protocol::{Empty, EventKind, ItemDelta};
    use http_body_util::BodyExt;
    let fx = fixture();
    let delta = |text: &str| {
        EventKind::ItemDelta(ItemDelta {
            turn_id: "t1".into(),
            item_id: "t1:m1".into(),
            kind: "agentMessage".into(),
            delta: text.into(),
            offset: None,
            snapshot: false,
        })
    };
    let session = Some("s1".to_string());
    let head = fx
        .core
        .append(session.clone(), EventKind::MetaLogCleared(Empty {}))
        .await
        .unwrap();
    let streamed = |fx: &Fixture| {
        fx.core
            .store
            .streaming()
            .snapshot(None)
            .first()
            .map(|e| e.json.to_string())
            .unwrap_or_default()
    };
    let wait_streamed = |text: &'static str| {
        let fx = &fx;
        async move {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            while !streamed(fx).contains(text) {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the core never recorded {text:?}: {}",
                    streamed(fx)
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    };
    fx.core.publish(session.clone(), delta("Hello "));
    fx.core.publish(session.clone(), delta("wor"));
    wait_streamed("Hello wor").await;
    // The reader reconnects at the head; the next delta is broadcast before its first read.
    let response = fx
        .app
        .clone()
        .oneshot(
            authed(get(&format!("/api/events/stream?after={head}")))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    fx.core.publish(session.clone(), delta("ld"));
    wait_streamed("Hello world").await;
    let mut body = response.into_body();
    let mut text = String::new();
    let mut data = Vec::new();
    while data.len() < 2 {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), body.frame())
            .await
            .unwrap_or_else(|_| panic!("no second event; the stream sent {text:?}"))
            .expect("the stream ended")
            .unwrap();
        if let Ok(bytes) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
        data = text
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(|json| serde_json::from_str::<Value>(json).unwrap())
            .collect();
    }
    let first = &data[0]["data"];
    assert_eq!(first["snapshot"], true, "{text}");
    assert_eq!(first["offset"], 0, "{text}");
    assert_eq!(first["delta"], "Hello world", "{text}");
    assert_eq!(data[1]["data"]["offset"], 9, "{text}");
}

/// `last=N` and `before=SEQ&limit=N`: a session's events read backwards, window by window,
/// each once and in order; the wrong combinations are refused naming the parameter.
#[tokio::test]
async fn a_session_is_read_backwards_in_windows() {
    use crate::protocol::{Empty, EventKind, Runtime, SessionCreated};
    let fx = fixture();
    let mut of_s1 = Vec::new();
    for i in 0..25 {
        let session = if i % 3 == 0 { "s2" } else { "s1" };
        let kind = if i < 2 {
            EventKind::SessionCreated(SessionCreated::plain(Runtime::Codex, "/w".into()))
        } else {
            EventKind::MetaLogCleared(Empty {})
        };
        let seq = fx.core.append(Some(session.into()), kind).await.unwrap();
        if session == "s1" {
            of_s1.push(seq);
        }
    }
    let head = fx.core.store.head();
    let read = |path: String| {
        let fx = &fx;
        async move {
            fx.send(authed(get(&path)).body(Body::empty()).unwrap())
                .await
        }
    };
    let seqs = |body: &Value| -> Vec<u64> {
        body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let sent = read("/api/sessions/s1/events?last=4".into()).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(seqs(&sent.body), of_s1[of_s1.len() - 4..]);
    assert_eq!(sent.body["next"], head);
    assert_eq!(sent.body["head"], head);
    assert_eq!(sent.body["hasOlder"], true);
    let mut before = sent.body["olderBefore"].as_u64().unwrap();
    assert_eq!(before, of_s1[of_s1.len() - 4]);
    assert!(sent.body.get("gaps").is_none());
    // The answer is the protocol's window.
    serde_json::from_value::<crate::protocol::EventsWindow>(sent.body.clone()).unwrap();
    let mut seen = seqs(&sent.body);
    loop {
        let sent = read(format!("/api/sessions/s1/events?before={before}&limit=5")).await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
        assert_eq!(sent.body["next"], before - 1);
        let mut older = seqs(&sent.body);
        older.append(&mut seen);
        seen = older;
        match sent.body["olderBefore"].as_u64() {
            Some(next) => {
                assert_eq!(sent.body["hasOlder"], true);
                before = next;
            }
            None => {
                assert_eq!(sent.body["hasOlder"], false);
                break;
            }
        }
    }
    assert_eq!(seen, of_s1);
    // `before` alone takes the default limit.
    let sent = read(format!("/api/sessions/s1/events?before={}", head + 1)).await;
    assert_eq!(seqs(&sent.body), of_s1);
    // Refusals, each naming its parameter.
    for (query, field) in [
        ("last=0", "last"),
        ("last=1001", "last"),
        ("last=x", "last"),
        ("last=2&before=3", "before"),
        ("last=2&limit=3", "limit"),
        ("last=2&after=1", "after"),
        ("before=3&wait=1", "wait"),
        ("before=0", "before"),
        ("before=999999", "before"),
        ("before=3&limit=0", "limit"),
    ] {
        let sent = read(format!("/api/sessions/s1/events?{query}")).await;
        refused(&sent, StatusCode::BAD_REQUEST, "invalid_field");
        assert_eq!(sent.body["error"]["field"], field, "{query}: {}", sent.body);
    }
    let sent = read("/api/events?last=3".into()).await;
    refused(&sent, StatusCode::BAD_REQUEST, "invalid_field");
    assert_eq!(sent.body["error"]["field"], "last");
    let sent = read("/api/sessions/nobody/events?last=3".into()).await;
    refused(&sent, StatusCode::NOT_FOUND, "session_not_found");
}
