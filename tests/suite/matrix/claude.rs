//! The Matrix bridge with a hosted Claude (the real `claude` TUI in tmux, on the kit's mock
//! Messages model), started from the room: its permission prompt is posted in the room with its
//! choices, approved there, the tool runs, the message says who answered, and a second
//! `/approve` is told it is too late.

use serde_json::json;

use crate::support::claude_host::ClaudeFixture;
use crate::support::mock_messages::Step;

use super::{BOT, Rig, assert_each_once};

#[test]
fn a_claude_permission_prompt_is_approved_from_the_room_and_a_second_approval_is_too_late() {
    let rig = Rig::<ClaudeFixture>::start();
    rig.fx.mock.push(
        Step::tool_use(
            "Bash",
            json!({"command": "touch approved.txt", "description": "Create a file"}),
        )
        .then_text("Created it."),
    );
    let (session, room) = rig.start_session("claude");
    let view = rig.fx.view(&session);
    assert_eq!(view["runtime"], "claude", "{view}");
    assert_eq!(view["permissionMode"], "default", "{view}");
    rig.wait_bot(&room, "the session's intro", |b| {
        b.starts_with(&format!("Session {session}: claude session in"))
    });

    assert_eq!(rig.command(&room, "Make a file"), "sent: a turn started");
    // cohost's side first, so a failure says whether Claude asked or the bridge did not post.
    let requested = rig.fx.wait_event(&session, "the permission request", |e| {
        e["type"] == "approval.requested"
    });
    assert_eq!(requested["data"]["command"], "touch approved.txt");
    let (msgtype, _) = rig.wait_bot(&room, "the approval with its choices", |b| {
        b.starts_with("❓ Approval #1 — command: `touch approved.txt`")
            && b.contains("\nReason: Create a file\n")
            && b.ends_with("Answer: /approve 1 · /approve 1 session · /decline 1")
    });
    assert_eq!(msgtype, "m.text", "a live approval notifies");
    assert!(
        !rig.fx.work.join("approved.txt").exists(),
        "the tool ran before it was approved"
    );

    assert_eq!(rig.command(&room, "/approve 1"), "#1: accept");
    rig.wait_bot(&room, "the approval marked answered", |b| {
        b.starts_with("❓ Approval #1") && b.ends_with("→ accept by @alice:localhost")
    });
    rig.wait_bot(&room, "the reply", |b| b == "Created it.");
    rig.wait_bot(&room, "the turn's end", |b| b == "— turn ended: completed");
    assert!(
        rig.fx.work.join("approved.txt").exists(),
        "the approved command did not run"
    );
    rig.wait_bot(&room, "the command's line", |b| {
        b == "⚙ `touch approved.txt` — completed"
    });
    let resolved = || -> Vec<serde_json::Value> {
        rig.fx
            .events(&session)
            .into_iter()
            .filter(|e| e["type"] == "approval.resolved")
            .collect()
    };
    let first = resolved();
    assert_eq!(first.len(), 1, "{first:#?}");
    assert_eq!(first[0]["data"]["decision"], "accept");
    assert_eq!(first[0]["data"]["by"], "@alice:localhost");

    // A second answer is too late and changes nothing.
    assert_eq!(
        rig.command(&room, "/approve 1"),
        "too late: approval #1 was already answered"
    );
    assert_eq!(
        rig.command(&room, "/decline 1"),
        "too late: approval #1 was already answered"
    );
    assert_eq!(resolved(), first, "a late answer was taken");
    let bodies = rig.bot_bodies(&room);
    assert_eq!(
        bodies
            .iter()
            .filter(|b| b.starts_with("❓ Approval"))
            .count(),
        1,
        "{bodies:#?}"
    );
    assert!(
        rig.seen(&room)
            .iter()
            .all(|r| r.0 == BOT || r.0 == "@alice:localhost")
    );
    assert_each_once(
        &bodies
            .into_iter()
            .filter(|b| !b.starts_with("too late"))
            .collect::<Vec<_>>(),
    );
}
