//! Rehoming a codex TUI started by hand (issue 25): the real codex TUI, adopted (see `adopt.rs`),
//! with a turn by hand and one from HTTP, is moved under cohost's own app-server with
//! `POST /api/sessions/{id}/rehome`: refused (`busy`, nothing typed) while a turn runs; when idle
//! the person's TUI quits by its own `/quit`, the thread is resumed on cohost's backend from its
//! rollout and a `codex --remote` TUI shows the conversation in the same pane. The session, the
//! same id and thread, is hosted from then on: the next prompt from HTTP streams through cohost's
//! app-server (`item.delta`) to the mock model, and no turn is stored twice — also after a
//! daemon restart, which resumes the thread from the same rollout.

use serde_json::{Value, json};

use super::adopt::{Rig, adopt, events, send, turn_by_hand, wait_event};
use crate::suite::adopting::{
    assert_no_repeats, assert_prompts_once, assert_rehomed, rehome, wait_live,
};
use crate::suite::codex::host::session_sse;
use crate::support::TestDaemon;
use crate::support::claude_env::is_running;
use crate::support::mock_responses::Step;

#[track_caller]
fn completed(daemon: &TestDaemon, id: &str, turn: &str) -> Value {
    wait_event(daemon, id, "the turn's end", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn
    })
}

#[test]
fn an_adopted_codex_tui_is_rehomed_onto_cohosts_app_server_keeping_its_thread() {
    let rig = Rig::start();
    let mut daemon = rig.daemon();
    let watched = turn_by_hand(&rig, &daemon);
    let key = watched["key"].as_str().unwrap().to_string();
    let thread = watched["threadId"].as_str().unwrap().to_string();
    let (status, adopted) = adopt(&daemon, &key);
    assert_eq!(status, 201, "{adopted:#}");
    let id = adopted["session"]["id"].as_str().unwrap().to_string();
    let tui = adopted["session"]["adopted"]["pid"].as_u64().unwrap() as u32;

    // A prompt from HTTP completes in the adopted TUI.
    rig.mock.push(Step::text("Adopted reply."));
    let (status, sent) = send(&daemon, &id, "Hello from HTTP");
    assert_eq!(status, 200, "{sent}");
    let turn = sent["turnId"].as_str().unwrap().to_string();
    assert_eq!(
        completed(&daemon, &id, &turn)["data"]["status"],
        "completed"
    );

    // Mid-turn a rehome is refused and nothing is typed: the turn goes on, the TUI runs.
    rig.mock
        .push(Step::text("Once upon a time there was a very long story\n").then_hang());
    let (status, sent) = send(&daemon, &id, "Write a long story");
    assert_eq!(status, 200, "{sent}");
    let long = sent["turnId"].as_str().unwrap().to_string();
    rig.wait_screen("the streamed text", |s| s.contains("Once upon a time"));
    let (status, refused) = rehome(&daemon, &id);
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "busy", "{refused:#}");
    assert!(is_running(tui), "a refused rehome leaves the TUI running");
    assert!(!rig.screen().contains("/quit"), "{}", rig.screen());
    let view = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(view["control"], "adopted", "{view:#}");
    daemon
        .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
        .assert_ok();
    assert_eq!(
        completed(&daemon, &id, &long)["data"]["status"],
        "interrupted"
    );

    // Idle: rehomed. The same session and thread, hosted, in the same pane.
    let (status, rehomed) = rehome(&daemon, &id);
    assert_eq!(status, 200, "{rehomed:#}");
    assert_rehomed(
        &daemon, &id, &rehomed, &thread, &rig.tmux, &rig.pane, tui, rig.pid,
    );
    // The `codex --remote` TUI shows the resumed conversation.
    rig.wait_screen("the resumed conversation", |s| {
        s.contains("Hello by hand") && s.contains("Hello from HTTP") && s.contains("Adopted reply.")
    });

    // The next prompt from HTTP streams through cohost's app-server to the model.
    rig.mock.push(Step::text("Hosted reply after the rehome."));
    let mut stream = session_sse(&daemon, &id, None, None);
    let (status, sent) = send(&daemon, &id, "After the rehome");
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let next = sent["turnId"].as_str().unwrap().to_string();
    // Its reply streams: live-only `item.delta` events of the turn on the session's stream.
    let mut seen = Vec::new();
    loop {
        let event = stream
            .next_event()
            .unwrap_or_else(|| panic!("the stream ended before a delta: {seen:?}"))
            .json();
        if event["type"] == "item.delta" && event["data"]["turnId"] == next.as_str() {
            break;
        }
        seen.push(event["type"].to_string());
    }
    drop(stream);
    let done = completed(&daemon, &id, &next);
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    let all = events(&daemon, &id);
    let last = rig.mock.main_requests().last().unwrap().last_user_text();
    assert!(last.contains("After the rehome"), "{last}");
    rig.wait_screen("the hosted reply in the pane", |s| {
        s.contains("Hosted reply after the rehome.")
    });
    let thread_now = daemon.get(&format!("/api/sessions/{id}")).assert_ok();
    assert_eq!(thread_now["threadId"], thread.as_str(), "{thread_now:#}");

    // History once: the turn by hand backfilled, no turn or item stored twice.
    assert_no_repeats(&all);
    assert_prompts_once(
        &all,
        &["Hello by hand", "Hello from HTTP", "After the rehome"],
    );

    // After a daemon restart the thread is resumed from the same rollout: the next prompt
    // completes on the same thread, and nothing is stored twice.
    daemon.restart();
    let bound = wait_live(&daemon, &id);
    assert_eq!(bound["threadId"], thread.as_str(), "{bound:#}");
    assert_eq!(bound["control"], "hosted", "{bound:#}");
    rig.mock.push(Step::text("Reply after the restart."));
    let (status, sent) = send(&daemon, &id, "After the restart");
    assert_eq!(status, 200, "{sent}");
    let after = sent["turnId"].as_str().unwrap().to_string();
    let done = completed(&daemon, &id, &after);
    assert_eq!(done["data"]["status"], "completed", "{done:#}");
    let last = rig.mock.main_requests().last().unwrap().last_user_text();
    assert!(last.contains("After the restart"), "{last}");
    let all = events(&daemon, &id);
    assert_no_repeats(&all);
    assert_prompts_once(
        &all,
        &[
            "Hello by hand",
            "Hello from HTTP",
            "After the rehome",
            "After the restart",
        ],
    );
}
