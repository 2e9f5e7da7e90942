//! The web page's New session form starts an OpenCode session in the real browser: the
//! runtime offered, its approval policies, its models suggested, and the first prompt's turn
//! shown in the transcript.

use super::OpencodeFixture;
use crate::support::browser::{Browser, UI_TIMEOUT};
use crate::support::json;
use crate::support::mock_messages::Step;

#[test]
fn the_new_session_form_starts_an_opencode_session() {
    let fx = OpencodeFixture::start();
    let b = Browser::start();
    b.set_viewport(1440, 900);
    b.goto(&format!(
        "http://127.0.0.1:{}/#token={}",
        fx.daemon.port(),
        fx.daemon.token()
    ));
    b.wait_text("#conn", "connected", UI_TIMEOUT);
    b.click("#showHosted");
    b.click("#newToggle");
    // The daemon lists its runtimes (`GET /api/runtimes`); the form offers what it lists.
    b.wait_for("opencode offered", UI_TIMEOUT, || {
        b.exists("#newRuntime option[value='opencode']")
            .then_some(())
    });
    b.exec(
        "const s = document.getElementById('newRuntime'); s.value = 'opencode'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    b.wait_text("#newModeField label", "Approval policy", UI_TIMEOUT);
    // The form suggests OpenCode's models (the page read `/api/models?runtime=opencode`).
    b.wait_for("opencode's models suggested", super::TURN_TIMEOUT, || {
        let values = b.exec(
            "return [...document.querySelectorAll('#modelList option')].map((o) => o.value);",
            vec![],
        );
        values
            .as_array()
            .is_some_and(|v| v.iter().any(|m| m == "mock/mock-model-2"))
            .then_some(())
    });
    let modes = b.exec(
        "return [...document.querySelectorAll('#newMode option')].map((o) => o.value);",
        vec![],
    );
    assert_eq!(modes, json!(["on-request", "untrusted", "never"]));
    b.type_into("#newCwd", fx.work.to_str().unwrap());
    b.exec(
        "const s = document.getElementById('newMode'); s.value = 'never'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    fx.mock.push(Step::text("Started from the page."));
    b.type_into("#newPrompt", "Hello from the form");
    b.click("#newStart");
    b.wait_text("#entries", "Started from the page.", super::TURN_TIMEOUT);
    let sessions = fx.daemon.get("/api/sessions").assert_ok();
    let created = &sessions["sessions"][0];
    assert_eq!(created["runtime"], "opencode", "{sessions}");
    assert_eq!(created["approvalPolicy"], "never", "{sessions}");
    b.assert_no_problems();
}
