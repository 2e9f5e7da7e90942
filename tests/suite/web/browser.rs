//! The web page in a real headless Chromium, driven through WebDriver (see the kit's `browser`):
//! the page against the real daemon, and the kit's own detectors against planted faults.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::browser::{Browser, CONTROLS, Key, UI_TIMEOUT};
use crate::support::codex_host::{CodexFixture, TURN_TIMEOUT};
use crate::support::mock_responses::Step;
use crate::support::mock_server::Server;
use crate::support::{TestDaemon, wait_until};

/// The page's URL with the token in its fragment, as `cohost web` prints it.
fn page_url(daemon: &TestDaemon) -> String {
    format!("{}#token={}", daemon.url("/"), daemon.token())
}

/// Opens the page and waits until its connection pill says it is connected.
fn open_page(browser: &Browser, daemon: &TestDaemon) {
    browser.goto(&page_url(daemon));
    browser.wait_text("#conn", "connected", UI_TIMEOUT);
}

/// A page served under a given Content-Security-Policy (none if empty).
fn page(csp: &'static str, body: &'static str) -> axum::response::Response {
    let html =
        format!("<!doctype html><html><head><title>probe</title></head><body>{body}</body></html>");
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    if !csp.is_empty() {
        response.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static(csp),
        );
    }
    response
}

/// Waits until the browser's problems include one containing `needle`; returns them all.
fn wait_problem(browser: &Browser, needle: &str) -> Vec<String> {
    browser.wait_for(
        &format!("a browser-log problem containing {needle:?}"),
        UI_TIMEOUT,
        || {
            let problems = browser.problems();
            problems
                .iter()
                .any(|p| p.contains(needle))
                .then_some(problems)
        },
    )
}

#[test]
fn the_browser_kit_catches_console_errors_uncaught_exceptions_and_csp_violations() {
    let app = Router::new()
        .route("/clean", get(|| async { page("default-src 'none'", "<p id=ok>fine</p>") }))
        .route(
            "/console",
            get(|| async { page("", "<script>console.error('planted console error')</script>") }),
        )
        .route(
            "/throw",
            get(|| async { page("", "<script>throw new Error('planted exception')</script>") }),
        )
        .route(
            "/csp",
            get(|| async {
                page(
                    "default-src 'none'",
                    "<script>document.title = 'ran'</script><p>blocked</p>",
                )
            }),
        )
        .route(
            "/covered",
            get(|| async {
                page(
                    "",
                    "<button id=under style='position:absolute;top:10px;left:10px'>Under</button>\
                     <div id=cover style='position:absolute;top:0;left:0;width:300px;height:80px'></div>\
                     <button id=free style='position:absolute;top:100px;left:10px'>Free</button>\
                     <button id=far style='position:absolute;top:3000px;left:10px'>Far below</button>",
                )
            }),
        )
        // Chromium asks for the icon of every origin (a 404 would be a failed load, a problem).
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }));
    let server = Server::start("probe pages", app);
    let base = format!("http://{}", server.addr());
    let browser = Browser::start();

    // A clean page under a strict CSP: nothing.
    browser.goto(&format!("{base}/clean"));
    assert_eq!(browser.text("#ok"), "fine");
    assert_eq!(browser.problems(), Vec::<String>::new());
    // The viewport is the size asked for, as the page's media queries see it.
    browser.set_viewport(400, 860);
    assert_eq!(
        browser.exec(
            "return matchMedia('(width: 400px) and (height: 860px)').matches;",
            vec![]
        ),
        true
    );
    browser.set_viewport(1440, 900);

    // The hit test finds a covered button and passes a free one.
    browser.goto(&format!("{base}/covered"));
    let failures = browser.hit_test_all(CONTROLS);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(
        failures[0].starts_with("button#under \"Under\"") && failures[0].contains("div#cover"),
        "{failures:#?}"
    );

    // (a) console.error
    browser.goto(&format!("{base}/console"));
    let problems = wait_problem(&browser, "planted console error");
    assert_eq!(problems.len(), 1, "{problems:#?}");

    // (b) an uncaught exception
    browser.goto(&format!("{base}/throw"));
    let problems = wait_problem(&browser, "planted exception");
    assert!(problems[1].contains("Uncaught Error"), "{problems:#?}");

    // (c) an inline script the CSP blocks: it did not run, and the violation is reported.
    browser.goto(&format!("{base}/csp"));
    let problems = wait_problem(&browser, "Content Security Policy");
    assert_eq!(browser.exec("return document.title;", vec![]), "probe");
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[2].contains("script-src"), "{problems:#?}");
}

#[test]
fn the_page_loads_connected_with_no_console_error_and_no_csp_violation() {
    let daemon = TestDaemon::start_with(None, &[]);
    let browser = Browser::start();
    let t0 = Instant::now();
    open_page(&browser, &daemon);
    eprintln!("page connected in {} ms", t0.elapsed().as_millis());
    assert_eq!(browser.exec("return document.title;", vec![]), "cohost");
    let pill = browser.exec("return document.getElementById('conn').className;", vec![]);
    assert!(
        pill.as_str()
            .is_some_and(|c| c.split(' ').any(|c| c == "ok")),
        "the pill's class: {pill}"
    );
    // The pill says connected only once `/api/sessions` answered with the fragment's token; the
    // event stream is open by then too. Neither the load nor those requests logged anything.
    browser.assert_no_problems();
    // Today's page at a desktop size: every control can be hit at its centre.
    browser.set_viewport(1440, 900);
    browser.assert_hit_test(CONTROLS);
    browser.assert_no_problems();

    // Negative control, under the page's real CSP: an injected inline script is blocked and
    // reported, and a console error is caught.
    browser.exec(
        "const s = document.createElement('script'); s.textContent = 'window.planted = 1'; \
         document.head.append(s); console.error('planted on the page');",
        vec![],
    );
    let problems = wait_problem(&browser, "Content Security Policy");
    assert_eq!(
        browser.exec("return window.planted === undefined;", vec![]),
        true
    );
    assert!(
        problems.iter().any(|p| p.contains("planted on the page")),
        "{problems:#?}"
    );
}

#[test]
fn a_task_queued_on_the_page_streams_the_reply_into_the_transcript() {
    let fx = CodexFixture::start();
    let reply = "Hello from the mock model, through the page!";
    fx.mock
        .push(Step::text(reply).when_user_contains("Say hello"));
    let id = fx.create(json!({ "approvalPolicy": "never", "sandbox": "workspace-write" }));

    let browser = Browser::start();
    open_page(&browser, &fx.daemon);
    // The list names a session by its directory; its button carries the id.
    let button = format!("#sessions button[data-key='s:{id}']");
    browser.wait_for("the session in the list", UI_TIMEOUT, || {
        browser.exists(&button).then_some(())
    });
    browser.click(&button);
    browser.wait_visible("#prompt", UI_TIMEOUT);
    browser.type_into("#prompt", "Say hello from the page");
    assert!(browser.is_enabled("#queueTask"));
    browser.click("#queueTask");

    let log = browser.wait_text("#log", reply, TURN_TIMEOUT);
    assert!(log.contains("Say hello from the page"), "{log}");
    // The page queued a task (not a direct send), and the turn finished it with the reply.
    fx.wait_turns_completed(&id, 1);
    let task = queued_task(&fx, &id, 0);
    let view = wait_until("the task to complete", TURN_TIMEOUT, || {
        let view = fx.daemon.get(&format!("/api/tasks/{task}")).assert_ok();
        (view["task"]["state"] == "completed").then_some(view)
    });
    assert_eq!(view["task"]["resultExcerpt"], reply, "{view:#}");
    // The prompt box was emptied once the task was accepted.
    assert_eq!(
        browser.exec("return document.getElementById('prompt').value;", vec![]),
        ""
    );

    // The same from the keyboard: Ctrl+Enter in the prompt queues the task.
    let second = "A second reply, queued with Ctrl+Enter.";
    fx.mock
        .push(Step::text(second).when_user_contains("Keyboard"));
    browser.type_into("#prompt", "Keyboard: say it again");
    assert_eq!(browser.active_element_id().as_deref(), Some("prompt"));
    browser.press(&[Key::Control, Key::Enter]);
    browser.wait_text("#log", second, TURN_TIMEOUT);
    fx.wait_turns_completed(&id, 2);
    queued_task(&fx, &id, 1);
    browser.assert_no_problems();
}

/// The id of the session's `n`-th (0-based) `task.queued` event's task.
fn queued_task(fx: &CodexFixture, id: &str, n: usize) -> String {
    let events = fx.events(id);
    let queued: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "task.queued")
        .collect();
    assert!(queued.len() > n, "no task.queued #{n}: {events:#?}");
    queued[n]["data"]["taskId"].as_str().unwrap().to_string()
}

#[test]
fn a_failing_browser_wait_saves_a_screenshot_and_the_page() {
    let app = Router::new()
        .route(
            "/",
            get(|| async { page("", "<p id=here>planted text</p>") }),
        )
        .route(
            "/favicon.ico",
            get(|| async { axum::http::StatusCode::NO_CONTENT }),
        );
    let server = Server::start("probe pages", app);
    let browser = Browser::start();
    browser.goto(&format!("http://{}/", server.addr()));
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        browser.wait_text("#here", "never there", Duration::from_millis(300));
    }));
    let message = failed
        .expect_err("the wait must fail")
        .downcast::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("timed out after 300ms waiting for the text of `#here`"),
        "{message}"
    );
    // "(saved <dir>/<test>-1.png and <dir>/<test>-1.html)"
    let png = message
        .split("(saved ")
        .nth(1)
        .and_then(|rest| rest.split(" and ").next())
        .unwrap_or_else(|| panic!("no saved path in {message}"));
    assert!(
        png.ends_with(
            "browser-screenshots/a_failing_browser_wait_saves_a_screenshot_and_the_page-1.png"
        ),
        "{png}"
    );
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{png}: {e}"));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG: {png}");
    let html = std::fs::read_to_string(png.replace(".png", ".html")).unwrap();
    assert!(html.contains("<p id=\"here\">planted text</p>"), "{html}");
}
