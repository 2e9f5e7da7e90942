//! The web page as people use it, in a real Chromium driven over WebDriver, against the real
//! daemon with real codex and Claude sessions (only the model APIs are mocked): a streamed
//! turn, Markdown rendered inert, keyboard-only sending, queue/cancel/interrupt, take over and
//! release, approvals, questions and plans answered on the page, a reload mid-stream, a daemon
//! restart, phone and desktop layouts, every agent on the machine, and a 10,000-event session.
//! A failing check saves a screenshot and the page's HTML under `target/browser-screenshots/`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::suite::codex::host::{dump, of_type};
use crate::support::browser::{Browser, CONTROLS, Key, UI_TIMEOUT};
use crate::support::claude_host::ClaudeFixture;
use crate::support::codex_host::CodexFixture;
use crate::support::mock_messages::Step as ClaudeStep;
use crate::support::mock_responses::Step;
use crate::support::{TestDaemon, TmuxServer};

/// Long enough for a codex turn on a loaded machine.
pub(super) const TURN: Duration = Duration::from_secs(90);

pub(super) fn page_url(daemon: &TestDaemon, session: Option<&str>) -> String {
    let mut url = format!(
        "http://127.0.0.1:{}/#token={}",
        daemon.port(),
        daemon.token()
    );
    if let Some(session) = session {
        url.push_str("&session=");
        url.push_str(session);
    }
    url
}

/// A browser at `width`×`height` showing the page, connected, with `session` open.
pub(super) fn open(
    daemon: &TestDaemon,
    session: Option<&str>,
    (width, height): (u32, u32),
) -> Browser {
    let b = Browser::start();
    b.set_viewport(width, height);
    b.goto(&page_url(daemon, session));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    if session.is_some() {
        b.wait_visible("#sessionView", UI_TIMEOUT);
        b.wait_text("#followText", "live", UI_TIMEOUT);
    }
    b
}

pub(super) const DESKTOP: (u32, u32) = (1440, 900);
pub(super) const PHONE: (u32, u32) = (400, 860);

pub(super) fn wait_enabled(b: &Browser, css: &str, enabled: bool) {
    b.wait_for(
        &format!(
            "`{css}` to be {}",
            if enabled { "enabled" } else { "disabled" }
        ),
        UI_TIMEOUT,
        || (b.is_enabled(css) == enabled).then_some(()),
    );
}

pub(super) fn wait_exists(b: &Browser, css: &str, timeout: Duration) {
    b.wait_for(&format!("`{css}` to exist"), timeout, || {
        b.exists(css).then_some(())
    });
}

pub(super) fn wait_gone(b: &Browser, css: &str, timeout: Duration) {
    b.wait_for(&format!("`{css}` to go"), timeout, || {
        (!b.exists(css)).then_some(())
    });
}

/// The focused element's data-key or id (what the page restores focus by).
pub(super) fn focused(b: &Browser) -> String {
    b.exec(
        "const e = document.activeElement; \
         return !e || e === document.body ? 'body' : (e.dataset && e.dataset.key) || e.id || e.tagName;",
        vec![],
    )
    .as_str()
    .unwrap_or("none")
    .to_string()
}

/// The text of the agent message bubbles, in order.
fn agent_texts(b: &Browser) -> Vec<String> {
    let texts = b.exec(
        "return Array.from(document.querySelectorAll('#entries .msg.agent .text')).map(e => e.innerText.trim());",
        vec![],
    );
    texts
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// Agent output with everything a hostile model could plant, and Markdown to render.
pub(super) const PLANTED: &str = "## Findings\n\nThe **build** is *green* and `cargo test` passes:\n\n\
- first point\n- second point\n\n1. step one\n2. step two\n\n\
```rust\nfn main() { println!(\"<b>not bold</b>\"); }\n```\n\n\
Planted: <script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> \
<a href=\"javascript:window.__pwned=3\">raw link</a> [click me](javascript:window.__pwned=4) \
![pixel](https://example.invalid/p.png) and [the docs](https://example.com/docs).\n";

#[test]
fn a_streamed_turn_is_readable_markdown_is_inert_and_the_keyboard_alone_sends() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.assert_no_problems();
    // Nothing runs: nothing to interrupt; no text: nothing to send.
    assert!(!b.is_enabled("#interrupt"));
    assert!(!b.is_enabled("#queueTask"));
    assert_eq!(
        b.exec(
            "return document.querySelector('#sessions button[aria-current=\"true\"]').dataset.key;",
            vec![]
        ),
        json!(format!("s:{id}"))
    );

    // Keyboard only: Tab from the top of the page to the prompt, type, Ctrl+Enter.
    b.exec(
        "document.activeElement && document.activeElement.blur();",
        vec![],
    );
    let mut tabs = 0;
    while b.active_element_id().as_deref() != Some("prompt") {
        tabs += 1;
        if tabs > 80 {
            b.fail(&format!(
                "Tab never reached the prompt; focus is on {}",
                b.active_element_label()
            ));
        }
        b.press(&[Key::Tab]);
    }
    fx.mock.push(Step::exec("printf 'one\\ntwo\\n'"));
    fx.mock
        .push(Step::text(PLANTED).delay(Duration::from_millis(30)));
    b.type_active("Report on the build");
    b.press(&[Key::Control, Key::Enter]);

    // It streams: a typing bubble, then the finished message; the command is a card.
    wait_exists(&b, "#entries .msg.agent.typing", TURN);
    b.wait_text("#entries", "Turn done", TURN);
    assert!(
        !b.exists("#entries .msg.typing"),
        "a finished message still types"
    );
    let task = fx.wait_event(&id, "the task from the page", |e| {
        e["type"] == "task.queued"
    });
    assert_eq!(task["data"]["prompt"], "Report on the build", "{task}");
    let card = b.text("#entries details.command summary");
    assert!(card.contains("printf") && card.contains("exit 0"), "{card}");
    assert_eq!(
        b.exec(
            "return document.querySelector('#entries details.command').open;",
            vec![]
        ),
        json!(false),
        "command output is folded"
    );
    b.click("#entries details.command summary");
    b.wait_text("#entries details.command pre", "two", UI_TIMEOUT);

    // Markdown rendered; nothing planted runs, loads or navigates.
    let shown = b.exec(
        "const m = document.querySelector('#entries .msg.agent'); return {
           heading: (m.querySelector('[role=heading]') || {}).textContent,
           strong: Array.from(m.querySelectorAll('strong')).map(e => e.textContent),
           em: Array.from(m.querySelectorAll('em')).map(e => e.textContent),
           code: Array.from(m.querySelectorAll('code')).map(e => e.textContent),
           ul: m.querySelectorAll('ul > li').length, ol: m.querySelectorAll('ol > li').length,
           pre: (m.querySelector('pre code') || {}).textContent,
           active: m.querySelectorAll('script, img, iframe, object, embed, style, link, form, input').length,
           links: Array.from(m.querySelectorAll('a')).map(a => [a.textContent, a.getAttribute('href'), a.target, a.rel]),
           handlers: Array.from(m.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
           pwned: window.__pwned === undefined ? null : window.__pwned,
           text: m.innerText };",
        vec![],
    );
    assert_eq!(shown["heading"], "Findings", "{shown:#}");
    assert_eq!(shown["strong"], json!(["build"]), "{shown:#}");
    assert_eq!(shown["em"], json!(["green"]), "{shown:#}");
    assert_eq!(shown["ul"], 2, "{shown:#}");
    assert_eq!(shown["ol"], 2, "{shown:#}");
    assert_eq!(
        shown["pre"], "fn main() { println!(\"<b>not bold</b>\"); }",
        "{shown:#}"
    );
    assert_eq!(shown["active"], 0, "{shown:#}");
    assert_eq!(shown["handlers"], 0, "{shown:#}");
    assert_eq!(shown["pwned"], Value::Null, "{shown:#}");
    assert_eq!(
        shown["links"],
        json!([
            [
                "image: pixel",
                "https://example.invalid/p.png",
                "_blank",
                "noopener noreferrer nofollow"
            ],
            [
                "the docs",
                "https://example.com/docs",
                "_blank",
                "noopener noreferrer nofollow"
            ]
        ]),
        "only https links are links (an image is a link to it, never loaded): {shown:#}"
    );
    let text = shown["text"].as_str().unwrap();
    for planted in [
        "<script>",
        "onerror=",
        "javascript:window.__pwned=4",
        "<a href=",
    ] {
        assert!(
            text.contains(planted),
            "{planted:?} is shown as text: {text}"
        );
    }
    // The live region announced the finished message (once, not each chunk), then the turn's
    // end: each its own line in the region, neither written over the other.
    let said = b.wait_texts_in_order(
        "#announce > p",
        &["Agent: ## Findings", "Turn done"],
        UI_TIMEOUT,
    );
    assert_eq!(said.len(), 2, "one announcement each: {said:?}");
    assert_eq!(said[1], "Turn done", "{said:?}");
    b.assert_no_problems();
    // The screenshot README shows (refreshed with COHOST_UPDATE_SCREENSHOT=1), once the
    // queue and the list have caught up with the finished turn.
    b.wait_text("#recent", "Report on the build", UI_TIMEOUT);
    b.wait_text("#sessions", "idle", UI_TIMEOUT);
    b.exec(
        "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);",
        vec![],
    );
    let target = if std::env::var_os("COHOST_UPDATE_SCREENSHOT").is_some() {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/web-page.png")
    } else {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/browser-screenshots/web-page.png")
    };
    b.screenshot(&target);

    // An image attached in the composer goes with Send now (a queued task cannot carry one).
    use base64::Engine;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let file = std::env::temp_dir().join(format!("cohost-pixel-{}.png", std::process::id()));
    std::fs::write(
        &file,
        base64::engine::general_purpose::STANDARD
            .decode(png)
            .unwrap(),
    )
    .unwrap();
    b.send_keys("#attach", file.to_str().unwrap());
    b.wait_text("#thumbs", "cohost-pixel", UI_TIMEOUT);
    b.type_into("#prompt", "What is this?");
    assert!(!b.is_enabled("#queueTask"), "a task cannot carry an image");
    fx.mock.push(Step::text("A single pixel."));
    b.click("#sendNow");
    b.wait_text("#entries", "A single pixel.", TURN);
    let _ = std::fs::remove_file(&file);
    let last = fx.mock.main_requests().last().cloned().unwrap();
    assert!(
        last.body["input"]
            .to_string()
            .contains(&format!("data:image/png;base64,{png}")),
        "no image in the model request"
    );
    assert_eq!(b.text("#thumbs"), "", "the sent image is still attached");
    b.assert_no_problems();
}

#[test]
fn queue_cancel_interrupt_take_over_and_release_from_the_page() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.wait_text("#leaseLine", "the queue", UI_TIMEOUT);
    // The queue holds control: releasing makes no sense.
    assert!(!b.is_enabled("#release"));
    assert!(!b.is_enabled("#releaseDrop"));
    assert!(b.is_enabled("#takeover"));

    b.click("#takeover");
    b.wait_text("#leaseLine", "a person", UI_TIMEOUT);
    wait_enabled(&b, "#release", true);
    assert!(!b.is_enabled("#takeover"));
    let lease = fx.wait_event(&id, "the takeover", |e| e["type"] == "lease.changed");
    assert_eq!(lease["data"]["by"], "web", "{lease}");

    // A task queued while a person drives waits, with a reason people can read.
    b.type_into("#prompt", "Queued while I drive");
    b.click("#queueTask");
    b.wait_text("#pending", "a person has control", UI_TIMEOUT);
    let pending = b.text("#pending");
    assert!(!pending.contains("human_control"), "{pending}");
    wait_enabled(&b, "#releaseDrop", true);
    b.click("#pending button.cancel");
    b.wait_text("#recent", "cancelled", UI_TIMEOUT);
    b.wait_text("#pending", "nothing waiting", UI_TIMEOUT);

    // Dropped on release: said as a reason, not as an error.
    b.type_into("#prompt", "Dropped on release");
    b.click("#queueTask");
    b.wait_text("#pending", "Dropped on release", UI_TIMEOUT);
    wait_enabled(&b, "#releaseDrop", true);
    b.click("#releaseDrop");
    b.block_on(b.client().accept_alert())
        .unwrap_or_else(|e| b.fail(&format!("no confirm dialog: {e}")));
    b.wait_text("#leaseLine", "the queue", UI_TIMEOUT);
    b.wait_text("#recent", "Dropped on release", UI_TIMEOUT);
    let recent = b.text("#recent");
    assert!(
        !recent.contains("error:") && !recent.contains("Failed:"),
        "{recent}"
    );
    wait_enabled(&b, "#release", false);
    assert!(b.is_enabled("#takeover"));
    assert!(
        fx.events(&id)
            .iter()
            .filter(|e| e["type"] == "lease.changed")
            .all(|e| e["data"]["by"] == "web"),
        "{}",
        dump(&fx.events(&id))
    );

    // A task queued onto an idle session runs at once: the status line follows it to its end
    // instead of keeping the POST's answer ("waiting: the agent is busy").
    fx.mock.push(Step::text("Queued and done."));
    b.type_into("#prompt", "A queued one");
    b.click("#queueTask");
    b.wait_text("#entries", "Queued and done.", TURN);
    b.wait_for("the status line to say the task is done", TURN, || {
        (b.text("#composeStatus") == "Task done").then_some(())
    });
    // A send's line goes with the turn it started.
    fx.mock.push(Step::text("Sent and done."));
    b.type_into("#prompt", "A sent one");
    b.click("#sendNow");
    b.wait_text("#entries", "Sent and done.", TURN);
    b.wait_for("the status line to drop the send's answer", TURN, || {
        b.text("#composeStatus").is_empty().then_some(())
    });

    // Send now starts a turn; focus stays on the button while it is busy; Interrupt stops it.
    fx.mock.push(
        Step::text("a partial answer that the interrupt cuts short")
            .delay(Duration::from_millis(100))
            .then_hang(),
    );
    b.type_into("#prompt", "Start something long");
    b.click("#sendNow");
    // Busy, the button keeps the focus; sent (the prompt empty), the focus moves to the
    // prompt: never to <body>.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let now = focused(&b);
        assert!(now == "sendNow" || now == "prompt", "focus on {now}");
    }
    wait_exists(&b, "#entries .msg.agent.typing", TURN);
    wait_enabled(&b, "#interrupt", true);
    assert_eq!(focused(&b), "prompt");
    // The interrupt's answer is held until the page has shown the turn's end: the order
    // that, under load, left "Interrupt sent" standing after the turn it stopped.
    b.exec(
        "const real = window.fetch;
         window.fetch = (url, init) => {
           const answer = real(url, init);
           if (!String(url).endsWith('/interrupt')) return answer;
           return answer.then((r) => new Promise((resolve) => {
             const poll = setInterval(() => {
               if (!document.getElementById('entries').textContent.includes('Turn interrupted')) return;
               clearInterval(poll);
               window.__interruptAnswered = true;
               resolve(r);
             }, 20);
           }));
         };",
        vec![],
    );
    b.click("#interrupt");
    b.wait_text("#entries", "Turn interrupted", TURN);
    b.wait_for("the page to take the interrupt's answer", TURN, || {
        b.exec(
            "return window.__interruptAnswered === true && !document.getElementById('interrupt').hasAttribute('aria-busy');",
            vec![],
        )
        .as_bool()
        .unwrap()
        .then_some(())
    });
    // "Interrupt sent" went with the turn it stopped, though its answer came after the end.
    assert_eq!(
        b.text("#composeStatus"),
        "",
        "the status line outlived its turn"
    );
    wait_gone(&b, "#entries .msg.typing", UI_TIMEOUT);
    wait_exists(&b, "#entries .msg.agent.cut", UI_TIMEOUT);
    wait_enabled(&b, "#interrupt", false);
    assert_eq!(
        focused(&b),
        "prompt",
        "the disabled Interrupt handed focus on"
    );

    // Focus survives the list's re-render on Enter and the 5 s poll.
    b.exec(
        "document.querySelector('#sessions button[data-key]').focus();",
        vec![],
    );
    b.press(&[Key::Enter]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(focused(&b), format!("s:{id}"));
    fx.daemon
        .post(
            &format!("/api/sessions/{id}/lease"),
            &json!({ "action": "takeover", "by": "cli" }),
        )
        .assert_ok();
    b.wait_text("#sessions", "you have control", UI_TIMEOUT);
    assert_eq!(
        focused(&b),
        format!("s:{id}"),
        "the poll's re-render dropped focus"
    );
    b.assert_no_problems();
}

#[test]
fn an_approval_a_question_and_a_plan_are_answered_on_the_page() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted", "sandbox": "workspace-write" }));
    let b = open(&fx.daemon, Some(&id), DESKTOP);

    // Desktop notifications, turned on from the page. The browser's own notification display
    // is not ours to test: the Notification API is replaced by a recorder, and the tab hidden.
    b.exec(
        "window.__shown = [];
         const Recorder = function (title, options) { window.__shown.push([title, options && options.body]); this.close = () => {}; };
         Recorder.permission = 'default';
         Recorder.requestPermission = () => { Recorder.permission = 'granted'; return Promise.resolve('granted'); };
         window.Notification = Recorder;
         Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });",
        vec![],
    );
    b.click("#notifyToggle");
    b.wait_text("#notifyToggle", "Notifications on", UI_TIMEOUT);

    // An approval, with human labels and no raw identifiers.
    fx.mock.push(Step::exec("touch approved.txt"));
    fx.mock.push(Step::text("Made it."));
    b.type_into("#prompt", "Make a file");
    b.click("#sendNow");
    b.wait_text("#requests", "Run a command", TURN);
    // What waits for people shows in the tab's title and favicon.
    b.wait_for("the count in the title", UI_TIMEOUT, || {
        (b.exec("return document.title;", vec![]) == json!("(1) cohost")).then_some(())
    });
    let icon = b.exec(
        "return document.getElementById('favicon').getAttribute('href');",
        vec![],
    );
    assert!(
        icon.as_str().unwrap().starts_with("data:image/png;base64,"),
        "{icon}"
    );
    let card = b.text("#requests");
    assert!(card.contains("touch approved.txt"), "{card}");
    let shown = b.wait_for("a desktop notification", UI_TIMEOUT, || {
        let shown = b.exec("return window.__shown;", vec![]);
        (!shown.as_array().unwrap().is_empty()).then_some(shown)
    });
    assert_eq!(
        shown[0],
        json!([
            "approval needed: command",
            "/bin/bash -lc 'touch approved.txt'"
        ]),
        "{shown}"
    );
    b.exec("delete document.hidden;", vec![]);
    for raw in ["acceptForSession", "ap:"] {
        assert!(!card.contains(raw), "{raw:?} shown to people: {card}");
    }
    b.click_text("#requests button", "Allow once");
    b.wait_text("#entries", "Turn done", TURN);
    assert!(fx.work.join("approved.txt").exists());
    let resolved = fx.wait_event(&id, "approval.resolved", |e| {
        e["type"] == "approval.resolved"
    });
    assert_eq!(resolved["data"]["by"], "web", "{resolved}");
    assert_eq!(resolved["data"]["decision"], "accept", "{resolved}");
    b.wait_text("#entries", "allowed once by this page", UI_TIMEOUT);
    b.wait_for("the title without a count", UI_TIMEOUT, || {
        (b.exec("return document.title;", vec![]) == json!("cohost")).then_some(())
    });

    // Plan mode from the page; a question answered by picking an option.
    b.click("#planMode");
    fx.wait_event(&id, "session.mode plan", |e| {
        e["type"] == "session.mode" && e["data"]["mode"] == "plan"
    });
    fx.mock.push(Step::function_call(
        "request_user_input",
        json!({ "questions": [{
            "id": "color", "header": "Color", "question": "Which color?",
            "options": [{ "label": "Red", "description": "warm" }, { "label": "Blue", "description": "cold" }]
        }]}),
    ));
    fx.mock.push(Step::text(
        "<proposed_plan>\n# Paint\n1. Paint it **blue**\n</proposed_plan>\n",
    ));
    b.type_into("#prompt", "Pick a color with me");
    b.click("#sendNow");
    b.wait_text("#requests", "Which color?", TURN);
    b.click_text("#requests label", "Blue");
    b.click_text("#requests button", "Send answer");
    let answered = fx.wait_event(&id, "input.resolved", |e| e["type"] == "input.resolved");
    assert_eq!(answered["data"]["by"], "web", "{answered}");
    assert_eq!(
        answered["data"]["answers"]["color"],
        json!(["Blue"]),
        "{answered}"
    );

    // The plan: rendered, rejected with feedback, then the revised one approved.
    b.wait_text("#requests", "Plan to approve", TURN);
    let shown = b.exec(
        "return Array.from(document.querySelectorAll('#requests .plan .md strong')).map(e => e.textContent);",
        vec![],
    );
    assert_eq!(shown, json!(["blue"]), "the plan is Markdown");
    fx.mock.push(Step::text(
        "<proposed_plan>\n# Paint\n1. Paint it green\n</proposed_plan>\n",
    ));
    b.type_into("#requests textarea", "Green instead");
    b.click_text("#requests button", "Reject");
    b.wait_for("the revised plan", TURN, || {
        let events = fx.events(&id);
        (of_type(&events, "input.requested")
            .iter()
            .filter(|e| e["data"]["kind"] == "plan")
            .count()
            == 2)
            .then_some(())
    });
    let last = fx.mock.main_requests().last().cloned().unwrap();
    assert_eq!(last.last_user_text(), "Green instead");
    b.wait_text("#requests", "green", TURN);
    fx.mock.push(Step::text("Implemented."));
    b.click_text("#requests button", "Approve");
    b.wait_text("#entries", "Implemented.", TURN);
    wait_gone(&b, "#requests .request", UI_TIMEOUT);
    let events = fx.events(&id);
    let resolved: Vec<&Value> = of_type(&events, "input.resolved");
    assert_eq!(resolved.len(), 3, "{}", dump(&events));
    assert!(resolved.iter().all(|e| e["data"]["by"] == "web"));
    assert_eq!(resolved[1]["data"]["feedback"], "Green instead");
    assert_eq!(resolved[2]["data"]["decision"], "approve");
    b.assert_no_problems();
}

#[test]
fn a_claude_permission_prompt_is_denied_on_the_page_and_nothing_runs() {
    let fx = ClaudeFixture::start();
    fx.mock.push(
        ClaudeStep::tool_use(
            "Bash",
            json!({"command": "touch denied.txt", "description": "Create a file"}),
        )
        .then_text("Understood, I will not."),
    );
    let id = fx.create(json!({}));
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.type_into("#prompt", "Make a file");
    b.click("#sendNow");
    b.wait_text("#requests", "touch denied.txt", TURN);
    b.click_text("#requests button", "Deny");
    b.wait_text("#entries", "Understood, I will not.", TURN);
    assert!(
        !fx.work.join("denied.txt").exists(),
        "the denied command ran"
    );
    let resolved = fx.wait_event(&id, "approval.resolved", |e| {
        e["type"] == "approval.resolved"
    });
    assert_eq!(resolved["data"]["by"], "web", "{resolved}");
    assert_eq!(resolved["data"]["decision"], "decline", "{resolved}");
    b.assert_no_problems();
}

#[test]
fn a_reload_mid_stream_shows_the_text_so_far_once_and_a_cut_message_survives_a_reload() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let whole = "one two three four five six seven eight nine ten eleven twelve thirteen \
                 fourteen fifteen sixteen seventeen eighteen nineteen twenty";
    fx.mock.push(
        Step::text(whole)
            .delay(Duration::from_millis(150))
            .then_hang(),
    );
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.type_into("#prompt", "Count slowly");
    b.click("#sendNow");
    b.wait_for("a few words streamed", TURN, || {
        agent_texts(&b)
            .first()
            .filter(|t| t.split_whitespace().count() >= 4)
            .map(|_| ())
    });
    b.reload();
    b.wait_text("#followText", "live", UI_TIMEOUT);
    // Straight after the reload the bubble holds the text so far, from its first word.
    let early = b.wait_for("the bubble after the reload", UI_TIMEOUT, || {
        agent_texts(&b).first().cloned()
    });
    assert!(
        whole.starts_with(&early),
        "{early:?} is not the start of the message"
    );
    let title = b.exec(
        "return document.querySelector('#entries .msg.agent time').title;",
        vec![],
    );
    assert!(!title.as_str().unwrap().contains("undefined"), "{title}");
    // Then it streams on, to the whole text, once.
    b.wait_for("the whole text", TURN, || {
        (agent_texts(&b) == [whole.to_string()]).then_some(())
    });
    assert!(b.exists("#entries .msg.agent.typing"));

    b.click("#interrupt");
    b.wait_text("#entries", "Turn interrupted", TURN);
    wait_exists(&b, "#entries .msg.agent.cut", UI_TIMEOUT);
    assert!(!b.exists("#entries .msg.typing"));
    assert_eq!(agent_texts(&b), [whole.to_string()]);
    // Live and reloaded views agree: the cut message was stored with its text.
    b.reload();
    b.wait_text("#entries", "Turn interrupted", UI_TIMEOUT);
    assert_eq!(agent_texts(&b), [whole.to_string()]);
    assert!(b.exists("#entries .msg.agent.cut"));
    assert!(!b.exists("#entries .msg.typing"));

    // A steer restarts the answer: the stream it abandoned leaves no bubble, live or reloaded.
    // It never ends by itself (the steer must find it running, however slow the machine):
    // codex drops the in-flight stream when a steer comes.
    fx.mock.push(
        Step::text("a long answer that the steer abandons halfway through")
            .delay(Duration::from_millis(150))
            .then_hang(),
    );
    fx.mock
        .push(Step::text("Short answer.").when_user_contains("keep it short"));
    b.type_into("#prompt", "Write a long answer");
    b.click("#sendNow");
    b.wait_for("the long answer streaming", TURN, || {
        agent_texts(&b).get(1).filter(|t| !t.is_empty()).map(|_| ())
    });
    b.type_into("#prompt", "Actually, keep it short.");
    b.click("#sendNow");
    b.wait_text("#entries", "Short answer.", TURN);
    b.wait_for("the turn's end", TURN, || {
        (b.text("#entries").matches("Turn done").count() == 1).then_some(())
    });
    assert_eq!(agent_texts(&b), [whole, "Short answer."]);
    b.reload();
    b.wait_text("#entries", "Short answer.", UI_TIMEOUT);
    assert_eq!(agent_texts(&b), [whole, "Short answer."]);
    b.assert_no_problems();
}

#[test]
fn while_the_daemon_is_down_the_page_says_offline_then_recovers_by_itself() {
    let mut fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::text("Before the restart."));
    fx.send(&id, "First");
    fx.wait_turns_completed(&id, 1);
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.wait_text("#entries", "Before the restart.", UI_TIMEOUT);
    b.type_into("#prompt", "typed while it is down");

    fx.daemon.stop();
    b.wait_visible("#offline", UI_TIMEOUT);
    b.wait_text("#conn", "offline", UI_TIMEOUT);
    b.wait_text("#sessions", "daemon offline", UI_TIMEOUT);
    let enabled = b.exec(
        "return Array.from(document.querySelectorAll('#sessionView button, #sessionView input, #queuePane button'))
           .filter(e => !e.disabled && e.checkVisibility() && !['older', 'showBook'].includes(e.id)).map(e => e.id || e.textContent);",
        vec![],
    );
    assert_eq!(enabled, json!([]), "controls still enabled while offline");
    let live_badges = b.exec(
        "return Array.from(document.querySelectorAll('#sessions .badge.state')).length;",
        vec![],
    );
    assert_eq!(live_badges, json!(0), "a session still says its old state");

    fx.daemon.start_again_on_the_same_port();
    b.wait_for("the page back online", TURN, || {
        (b.text("#conn").contains("connected") && !b.exists("#offline:not([hidden])")).then_some(())
    });
    wait_enabled(&b, "#queueTask", true);
    fx.mock.push(Step::text("After the restart."));
    b.click("#queueTask");
    b.wait_text("#entries", "After the restart.", TURN);
    // The page's own requests to the stopped daemon are the only errors it logged.
    let problems: Vec<String> = b
        .problems()
        .into_iter()
        .filter(|p| !p.contains("ERR_CONNECTION_REFUSED") && !p.contains("ERR_EMPTY_RESPONSE"))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn at_400x860_and_1440x900_every_control_is_where_a_tap_lands() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    fx.mock.push(Step::text(PLANTED));
    fx.send(&id, "A first answer");
    fx.wait_turns_completed(&id, 1);
    // A pending approval and a waiting task put their controls on the page too.
    fx.mock.push(Step::exec("touch waiting.txt"));
    fx.send(&id, "Make a file");
    fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    let queued = fx.daemon.post(
        &format!("/api/sessions/{id}/tasks"),
        &json!({ "text": "Later" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);

    let b = open(&fx.daemon, Some(&id), PHONE);
    b.wait_text("#requests", "Run a command", UI_TIMEOUT);
    for tab in ["#tabList", "#tabSession", "#tabQueue"] {
        b.click(tab);
        b.assert_hit_test(CONTROLS);
    }
    // The transcript tab: the composer at the bottom, a transcript that scrolls.
    b.click("#tabSession");
    let layout = b.exec(
        "const c = document.getElementById('composer').getBoundingClientRect();
         const l = document.getElementById('log');
         return { bottom: c.bottom, height: innerHeight, log: l.clientHeight };",
        vec![],
    );
    let bottom = layout["bottom"].as_f64().unwrap();
    let height = layout["height"].as_f64().unwrap();
    assert!(
        bottom <= height && bottom > height - 4.0,
        "composer not pinned: {layout}"
    );
    assert!(layout["log"].as_f64().unwrap() >= 150.0, "{layout}");
    // The tap on Queue task lands on Queue task.
    b.type_into("#prompt", "From the phone");
    b.click("#queueTask");
    b.wait_text("#composeStatus", "Task", UI_TIMEOUT);

    b.set_viewport(DESKTOP.0, DESKTOP.1);
    b.assert_hit_test(CONTROLS);
    b.assert_no_problems();
}

#[test]
fn every_agent_on_the_machine_is_listed_and_a_session_starts_from_the_page() {
    let fx = CodexFixture::start();
    // An agent reported by a hook script, in the tmux session `work`.
    fx.daemon
        .post(
            "/api/agent-event",
            &json!({ "agent": "amp", "tmuxSession": "work", "status": "waiting", "threadId": "t-1", "threadName": "Fix the login" }),
        )
        .assert_ok();
    let b = open(&fx.daemon, None, DESKTOP);
    b.click("#showAgents");
    b.wait_text("#agents", "Fix the login", UI_TIMEOUT);
    let agents = b.text("#agents");
    assert!(
        agents.contains("work") && agents.contains("amp"),
        "{agents}"
    );
    assert!(agents.contains("waiting for you"), "{agents}");
    assert!(agents.contains("reported by a hook"), "{agents}");
    b.click_text("#agents button", "Focus");
    b.wait_text("#agents", "focused", UI_TIMEOUT);

    // Start a codex session from the form, with a first prompt.
    b.click("#showHosted");
    b.click("#newToggle");
    // The form suggests codex's models (the page read `/api/models`' list).
    let first_model = fx.daemon.get("/api/models?runtime=codex").assert_ok()["data"][0]["id"]
        .as_str()
        .expect("codex lists a model")
        .to_owned();
    b.wait_for("the model field's suggestions", UI_TIMEOUT, || {
        let values = b.exec(
            "return [...document.querySelectorAll('#modelList option')].map((o) => o.value);",
            vec![],
        );
        values
            .as_array()
            .is_some_and(|v| v.iter().any(|m| m == first_model.as_str()))
            .then_some(())
    });
    b.type_into("#newCwd", fx.work.to_str().unwrap());
    b.exec(
        "const s = document.getElementById('newMode'); s.value = 'never'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    fx.mock.push(Step::text("Started from the page."));
    b.type_into("#newPrompt", "Hello from the form");
    b.click("#newStart");
    b.wait_text("#entries", "Started from the page.", TURN);
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    let created = &sessions["sessions"][0];
    assert_eq!(created["runtime"], "codex", "{sessions}");
    assert_eq!(created["approvalPolicy"], "never", "{sessions}");
    // The hosted session shows among the agents too, and opens from there.
    b.click("#showAgents");
    b.wait_text("#agents", "hosted", UI_TIMEOUT);
    b.assert_no_problems();
}

/// A closed codex session of `turns` turns (5 events each) appended to the daemon's log while
/// it is stopped: what months of use leave behind.
fn write_long_session(daemon: &mut TestDaemon, turns: usize) -> String {
    daemon.stop();
    let long = crate::support::web::long_session(daemon.home(), turns, "cs_0000000000010000");
    let mut bytes = Vec::new();
    for line in &long.lines {
        cohost::core::log_line::encode(line, &mut bytes);
    }
    long.append(&bytes);
    daemon.start_again();
    long.session
}

#[test]
fn a_session_of_10000_events_opens_with_its_end_and_loads_older_on_scroll() {
    let tmux = TmuxServer::new();
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let id = write_long_session(&mut daemon, 2000);
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["turns"], 2000, "{view}");
    let t0 = Instant::now();
    let b = open(&daemon, Some(&id), DESKTOP);
    b.wait_text("#entries", "Answer 1999", TURN);
    let opened = t0.elapsed();
    let count = |b: &Browser| {
        b.exec(
            "return document.getElementById('entries').childElementCount;",
            vec![],
        )
        .as_u64()
        .unwrap()
    };
    let rendered = count(&b);
    assert!(rendered <= 500, "{rendered} entries in the page");
    b.wait_text("#older", "Load older", UI_TIMEOUT);
    // Scrolling to the top loads older entries, keeping the place.
    b.exec("document.getElementById('log').scrollTop = 0;", vec![]);
    b.wait_for("older entries", UI_TIMEOUT, || {
        (count(&b) > rendered).then_some(())
    });
    // Still responsive: a click gets its answer at once.
    let t1 = Instant::now();
    b.click("#showBook");
    b.wait_text("#entries", "Session closed", UI_TIMEOUT);
    eprintln!(
        "10,000-event session: opened in {opened:?} (browser start included), {rendered} entries rendered, toggle answered in {:?}",
        t1.elapsed()
    );
    b.assert_no_problems();
}

/// A session of more events than one window (the page reads 400 at a time from the daemon)
/// opens at its end, and scrolling back to its start loads every older window exactly once:
/// each question once, in order, each `before` cursor asked for once. The page keeps a bounded
/// number of nodes while it scrolls (the newest go as older ones come, and come back on the way
/// down): every step shows a run of consecutive questions, never more than its bound.
#[test]
fn a_session_longer_than_a_window_opens_at_its_end_and_pages_back_each_event_once() {
    let tmux = TmuxServer::new();
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let turns = 300;
    let id = write_long_session(&mut daemon, turns);
    let b = open(&daemon, Some(&id), DESKTOP);
    b.wait_text("#entries", &format!("Answer {}", turns - 1), TURN);
    // The questions with nodes, as numbers, and how many entries have nodes.
    fn shown(b: &Browser) -> (Vec<usize>, u64) {
        let v = b.exec(
            "return [Array.from(document.querySelectorAll('#entries .msg.user .text')).map((n) => n.textContent), document.getElementById('entries').childElementCount];",
            vec![],
        );
        let questions = v[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                let q = q.as_str().unwrap();
                q.strip_prefix("Question ")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("not a question: {q}"))
            })
            .collect();
        (questions, v[1].as_u64().unwrap())
    }
    // The page's bound: WINDOW + 2 × OLDER_PAGE entries.
    const MAX_NODES: u64 = 700;
    /// One scroll; what it shows (checked), added to `seen`.
    fn step(b: &Browser, scroll: &str, seen: &mut BTreeSet<usize>) -> Vec<usize> {
        b.exec(scroll, vec![]);
        let (questions, nodes) = shown(b);
        assert!(nodes <= MAX_NODES, "{nodes} entries have nodes");
        assert!(
            questions.windows(2).all(|w| w[1] == w[0] + 1),
            "not a run of consecutive questions: {questions:?}"
        );
        seen.extend(questions.iter().copied());
        questions
    }
    let mut seen = BTreeSet::new();
    let (opened, _) = shown(&b);
    assert!(
        !opened.is_empty() && opened.len() < turns,
        "the page opens with the last window only: {} questions",
        opened.len()
    );
    assert_eq!(*opened.last().unwrap(), turns - 1);
    // A person scrolling up: each time the top is reached, older entries come.
    let top = "document.getElementById('log').scrollTop = 0;";
    b.wait_for("the session's first question", TURN, || {
        (step(&b, top, &mut seen).first() == Some(&0)).then_some(())
    });
    assert_eq!(
        seen,
        (0..turns).collect(),
        "every question shown on the way up"
    );
    let (at_top, _) = shown(&b);
    assert!(
        at_top.len() < turns,
        "the newest nodes went as older ones came: {} questions shown at the top",
        at_top.len()
    );
    b.wait_for("the older button gone", UI_TIMEOUT, || {
        b.exec("return document.getElementById('older').hidden;", vec![])
            .as_bool()
            .unwrap()
            .then_some(())
    });
    // And down again: the newest entries come back, the oldest go; from the top's questions
    // on, none is skipped.
    let mut seen: BTreeSet<usize> = at_top.iter().copied().collect();
    let bottom = "const log = document.getElementById('log'); log.scrollTop = log.scrollHeight;";
    b.wait_for("the session's last question again", TURN, || {
        (step(&b, bottom, &mut seen).last() == Some(&(turns - 1))).then_some(())
    });
    assert_eq!(
        seen,
        (0..turns).collect(),
        "every question shown on the way down"
    );
    // Each window was read from the daemon once: the last one, then each `before` once.
    let reads: Vec<String> = b
        .exec(
            "return performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.includes('/events?'));",
            vec![],
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let lasts = reads.iter().filter(|r| r.contains("last=")).count();
    let befores: Vec<&String> = reads.iter().filter(|r| r.contains("before=")).collect();
    let mut unique = befores.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(lasts, 1, "{reads:#?}");
    assert_eq!(
        unique.len(),
        befores.len(),
        "a window read twice: {reads:#?}"
    );
    // 1,502 events, 400 a window: the last window and three before it.
    assert_eq!(befores.len(), 3, "{reads:#?}");
    b.assert_no_problems();
}
