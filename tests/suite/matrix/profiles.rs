//! `/start NAME` from the control room takes cohost's agent profiles (`[profiles.NAME]` of the
//! daemon's config file) first, then the bridge's own, then a runtime; an unknown name answers
//! the usage with the runtimes and the profiles there are, and starts nothing.

use std::path::Path;

use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

use super::Rig;

const PROFILES: &str = r#"[profiles.reviewer]
runtime = "codex"
approval_policy = "never"
sandbox = "read-only"

# The bridge's own `careful` says approval_policy = "untrusted": cohost's wins.
[profiles.careful]
runtime = "codex"
approval_policy = "on-request"
"#;

#[test]
fn start_takes_cohosts_profiles_first_and_an_unknown_name_lists_runtimes_and_profiles() {
    let rig = Rig::<CodexFixture>::start_with(PROFILES);

    let unknown = rig.command(&rig.control, "/start nope Do it");
    assert!(
        unknown.starts_with("usage: /start RUNTIME|PROFILE [prompt]"),
        "{unknown}"
    );
    assert!(
        unknown.contains("`nope` is neither a runtime nor a profile."),
        "{unknown}"
    );
    assert!(unknown.contains("\nRuntimes: codex, claude"), "{unknown}");
    assert!(
        unknown.contains("\nProfiles: careful, reviewer"),
        "{unknown}"
    );
    assert!(
        !unknown.contains("The bridge's own profiles"),
        "the bridge's `careful` is hidden by cohost's: {unknown}"
    );
    let empty = rig.command(&rig.control, "/start");
    assert!(
        empty.starts_with("usage: /start") && empty.contains("\nProfiles: careful, reviewer"),
        "{empty}"
    );
    assert_eq!(rig.command(&rig.control, "/sessions"), "no hosted sessions");

    // cohost's profile, with the room's prompt; the cwd is the bridge's (the profile has none).
    rig.fx.mock.push(Step::text("Reviewed."));
    let (session, room) = rig.start_session("reviewer Review the code");
    let view = rig.fx.view(&session);
    assert_eq!(view["profile"]["name"], "reviewer", "{view:#}");
    assert_eq!(view["approvalPolicy"], "never", "{view:#}");
    assert_eq!(view["sandbox"], "read-only", "{view:#}");
    assert_eq!(
        Path::new(view["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        rig.fx.work().canonicalize().unwrap(),
        "{view:#}"
    );
    rig.wait_bot(&room, "the session's intro", |b| {
        b.starts_with(&format!("Session {session}: codex session in"))
    });
    rig.wait_bot(&room, "the reply", |b| b == "Reviewed.");
    rig.wait_bot(&room, "the turn's end", |b| b == "— turn ended: completed");
    assert!(
        rig.fx
            .mock
            .received()
            .iter()
            .any(|r| r.last_user_text() == "Review the code"),
        "the prompt did not reach the model"
    );

    // A name both cohost and the bridge define: cohost's profile.
    let (careful, _) = rig.start_session("careful");
    let view = rig.fx.view(&careful);
    assert_eq!(view["profile"]["name"], "careful", "{view:#}");
    assert_eq!(view["approvalPolicy"], "on-request", "{view:#}");
}
