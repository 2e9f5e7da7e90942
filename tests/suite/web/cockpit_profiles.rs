//! Starting a session from a profile on the page (issue 27), in a real Chromium against the
//! real daemon and a real codex (only the model API is mocked): the New session form's profile
//! picker fills the form from `GET /api/profiles`, the person changes one field, the request
//! carries the profile and that field only, and the session's header shows the effective
//! values with where each came from.
//! (Named `cockpit_…` so the newest half of the matrix, which runs `suite::web::cockpit`, runs
//! it too.)

use serde_json::json;

use super::cockpit::{DESKTOP, TURN, open};
use crate::suite::profiles::ConfigFile;
use crate::support::browser::UI_TIMEOUT;
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

#[test]
fn a_session_started_from_a_profile_on_the_page_shows_the_profiles_values_and_the_one_changed() {
    let project = tempfile::tempdir().unwrap();
    let project_dir = project.path().to_str().unwrap().to_string();
    let config = ConfigFile::new(&format!(
        "[profiles.base]\nruntime = \"codex\"\napproval_policy = \"untrusted\"\nsandbox = \"read-only\"\ninstructions = \"Review carefully.\"\n\n[profiles.reviewer]\nextends = \"base\"\nmodel = \"profile-model-7\"\neffort = \"high\"\ncwd = {project_dir:?}\nprompt = \"Hello from the profile\"\n"
    ));
    let fx = CodexFixture::start_with_env(&[], "", &[config.env()]);
    let b = open(&fx.daemon, None, DESKTOP);
    // Keep the create requests the page sends, to see what it sends.
    b.exec(
        "window.__creates = []; const f = window.fetch; \
         window.fetch = (url, init) => { \
           if (String(url).endsWith('/api/sessions') && init && init.method === 'POST') window.__creates.push(JSON.parse(init.body)); \
           return f(url, init); };",
        vec![],
    );
    b.click("#showHosted");
    b.click("#newToggle");
    b.wait_for("the profiles offered", UI_TIMEOUT, || {
        b.exists("#newProfile option[value='reviewer']")
            .then_some(())
    });
    b.wait_for("codex offered", UI_TIMEOUT, || {
        b.exists("#newRuntime option[value='codex']").then_some(())
    });
    b.exec(
        "const s = document.getElementById('newProfile'); s.value = 'reviewer'; s.dispatchEvent(new Event('change'));",
        vec![],
    );
    let form = b.exec(
        "return ['newRuntime', 'newCwd', 'newModel', 'newMode', 'newPrompt'].map((id) => document.getElementById(id).value);",
        vec![],
    );
    assert_eq!(
        form,
        json!([
            "codex",
            project_dir,
            "profile-model-7",
            "untrusted",
            "Hello from the profile"
        ]),
        "the profile fills the form"
    );
    let note = b.text("#newProfileNote");
    assert!(
        note.contains("effort high")
            && note.contains("sandbox read-only")
            && note.contains("instructions"),
        "{note}"
    );

    // The person changes the model, and starts.
    b.clear("#newModel");
    b.type_into("#newModel", "page-model-9");
    fx.mock.push(Step::text("Started from a profile."));
    b.click("#newStart");
    b.wait_text("#entries", "Started from a profile.", TURN);

    let sent = b.exec("return window.__creates;", vec![]);
    let sent = sent.as_array().unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let mut body = sent[0].clone();
    assert!(body["idempotencyKey"].is_string(), "{body}");
    body.as_object_mut().unwrap().remove("idempotencyKey");
    assert_eq!(
        body,
        json!({ "profile": "reviewer", "model": "page-model-9" }),
        "the profile and the one field changed, nothing else"
    );

    let header = b.wait_text("#sessionProfile", "Profile reviewer", UI_TIMEOUT);
    for part in [
        "runtime codex (profile base)",
        "model page-model-9 (changed at start)",
        "effort high (profile reviewer)",
        "approval policy untrusted (profile base)",
        "sandbox read-only (profile base)",
        &format!("cwd {project_dir} (profile reviewer)"),
        "instructions \u{201c}Review carefully.\u{201d} (profile base)",
        "first prompt (profile reviewer)",
    ] {
        assert!(header.contains(part), "{part:?} in the header: {header}");
    }

    // What the header says is what codex was given.
    let requests = fx.mock.main_requests();
    let first = &requests[0];
    assert_eq!(first.body["model"], "page-model-9", "{}", first.body);
    assert_eq!(first.body["reasoning"]["effort"], "high", "{}", first.body);
    assert!(
        first.body.to_string().contains("Hello from the profile"),
        "the profile's first prompt: {}",
        first.body
    );
    b.assert_no_problems();
}
