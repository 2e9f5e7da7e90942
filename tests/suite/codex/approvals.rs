//! Approvals relayed from the real codex app-server: requested, listed, answered once.

use serde_json::{Value, json};

use crate::suite::codex::host::{completed_items, dump, of_type};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

fn decide(
    fx: &CodexFixture,
    id: &str,
    approval: &str,
    decision: &str,
) -> crate::support::http::Resp {
    fx.daemon.post(
        &format!("/api/sessions/{id}/approvals/{approval}"),
        &json!({ "decision": decision }),
    )
}

/// Waits for the approval of the turn `turn_id` and returns its id.
fn wait_approval(fx: &CodexFixture, id: &str, turn_id: &str) -> Value {
    fx.wait_event(id, "approval.requested", |e| {
        e["type"] == "approval.requested" && e["data"]["turnId"] == turn_id
    })
}

#[test]
fn approvals_are_relayed_answered_once_and_refused_when_stale() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted", "sandbox": "workspace-write" }));

    // Accept: the command runs.
    fx.mock.push(Step::exec("touch approved.txt"));
    fx.mock.push(Step::text("Created it."));
    let sent = fx.send(&id, "Create approved.txt");
    let turn1 = sent["turnId"].as_str().unwrap().to_string();
    let requested = wait_approval(&fx, &id, &turn1);
    let data = &requested["data"];
    let approval = data["approvalId"].as_str().unwrap().to_string();
    assert_eq!(data["kind"], "command", "{requested}");
    assert!(
        approval.starts_with(&format!("ap:{turn1}:")) && approval.ends_with(":command"),
        "deterministic approval id: {approval}"
    );
    assert!(
        data["command"]
            .as_str()
            .unwrap_or("")
            .contains("touch approved.txt"),
        "{requested}"
    );
    assert_eq!(
        data["decisions"],
        json!(["accept", "acceptForSession", "decline", "cancel"])
    );
    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{listed}");
    assert_eq!(approvals[0]["pending"], true, "{listed}");
    assert_eq!(approvals[0]["request"]["approvalId"], approval.as_str());
    assert_eq!(fx.view(&id)["pendingApprovals"], 1);
    assert!(
        !fx.work.join("approved.txt").exists(),
        "nothing runs before the answer"
    );

    // A decision codex does not know is refused before anything is sent.
    decide(&fx, &id, &approval, "maybe").assert_error(400, "invalid_field", Some("decision"));
    let answer = decide(&fx, &id, &approval, "accept").assert_ok();
    assert_eq!(answer["ok"], true, "{answer}");
    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    let commands = completed_items(&events, "command");
    assert_eq!(commands.len(), 1, "{}", dump(&events));
    let item = &commands[0]["data"]["item"];
    assert_eq!(item["status"], "completed", "{item}");
    assert_eq!(item["exitCode"], 0, "{item}");
    assert_eq!(
        data["itemId"], item["id"],
        "the approval names the item it is about"
    );
    assert!(fx.work.join("approved.txt").exists(), "the command ran");
    let resolved: Vec<&Value> = of_type(&events, "approval.resolved");
    assert_eq!(resolved.len(), 1, "resolved once:\n{}", dump(&events));
    assert_eq!(resolved[0]["data"]["approvalId"], approval.as_str());
    assert_eq!(resolved[0]["data"]["decision"], "accept");
    assert_eq!(resolved[0]["data"]["by"], "api");

    // Answering again, or an id that never existed.
    decide(&fx, &id, &approval, "accept").assert_error(409, "approval_resolved", None);
    decide(&fx, &id, "ap:made:up:command", "accept").assert_error(404, "approval_not_found", None);

    // Decline: the command does not run, the item says so.
    fx.mock.push(Step::exec("touch declined.txt"));
    fx.mock.push(Step::text("Fine, I did not."));
    let sent = fx.send(&id, "Create declined.txt");
    let turn2 = sent["turnId"].as_str().unwrap().to_string();
    let requested = wait_approval(&fx, &id, &turn2);
    let declined = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(declined, approval);
    decide(&fx, &id, &declined, "decline").assert_ok();
    fx.wait_turns_completed(&id, 2);
    let events = fx.events(&id);
    let item = completed_items(&events, "command")
        .into_iter()
        .find(|e| e["data"]["turnId"] == turn2.as_str())
        .unwrap_or_else(|| panic!("no command item in turn 2:\n{}", dump(&events)));
    assert_eq!(item["data"]["item"]["status"], "declined", "{item}");
    assert!(
        !fx.work.join("declined.txt").exists(),
        "a declined command must not run"
    );
    decide(&fx, &id, &declined, "accept").assert_error(409, "approval_resolved", None);

    let listed = fx
        .daemon
        .get(&format!("/api/sessions/{id}/approvals"))
        .assert_ok();
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 2, "{listed}");
    assert!(approvals.iter().all(|a| a["pending"] == false), "{listed}");
    assert_eq!(fx.view(&id)["pendingApprovals"], 0);
    assert_eq!(
        of_type(&events, "approval.resolved").len(),
        2,
        "{}",
        dump(&events)
    );
    crate::suite::codex::host::assert_no_duplicate_turns_or_items(&events);
}

#[test]
fn an_interrupt_resolves_a_pending_approval() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    fx.mock.push(Step::exec("touch never.txt"));
    let sent = fx.send(&id, "Create never.txt");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    let requested = wait_approval(&fx, &id, &turn);
    let approval = requested["data"]["approvalId"]
        .as_str()
        .unwrap()
        .to_string();

    let interrupted = fx
        .daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(interrupted["interrupted"], true, "{interrupted}");
    let done = fx.wait_event(&id, "the interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    // codex reports the request moot; the approval is resolved by the runtime, not by anyone's
    // decision.
    let resolved = fx.wait_event(&id, "approval.resolved", |e| {
        e["type"] == "approval.resolved" && e["data"]["approvalId"] == approval.as_str()
    });
    assert_eq!(resolved["data"]["by"], "runtime", "{resolved}");
    assert!(resolved["data"]["decision"].is_null(), "{resolved}");
    assert_eq!(fx.view(&id)["pendingApprovals"], 0);
    decide(&fx, &id, &approval, "accept").assert_error(409, "approval_resolved", None);

    let events = fx.events(&id);
    // The command that waited for the answer is closed with the turn, never run.
    let item = completed_items(&events, "command");
    assert_eq!(item.len(), 1, "{}", dump(&events));
    assert_ne!(
        item[0]["data"]["item"]["status"],
        "completed",
        "{}",
        dump(&events)
    );
    assert!(!fx.work.join("never.txt").exists());
    assert_eq!(
        of_type(&events, "approval.resolved").len(),
        1,
        "{}",
        dump(&events)
    );
}
