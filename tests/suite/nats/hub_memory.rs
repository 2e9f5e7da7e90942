//! The hub's memory bound (`--hub-memory-mb`) against a real nats-server: a machine's events
//! past the hub's budget leave its memory (its health says how far), and every read that
//! reaches past memory — the session's pages from the start, its SSE stream from cursor 0, a
//! window scrolled back to the first event — returns the machine's events, each once, with
//! their seqs, read from the hub's copy on disk; the same after the hub restarts (it reads its
//! copy back within the budget).

use super::hub::{hub_with, link, wait_caught_up};
use super::*;

/// The hub's budget: 1 MiB of each machine's events, the smallest `--hub-memory-mb`.
const BUDGET: u64 = 1 << 20;

/// Reports whose prompt is large, so the machine's events outgrow the budget quickly (a prompt
/// stays under the API's 16 KiB).
const REPORTS: usize = 96;
const PROMPT_BYTES: usize = 15_000;

fn report(daemon: &TestDaemon, i: usize) {
    daemon.report(&json!({
        "agent": "codex",
        "status": if i.is_multiple_of(2) { "running" } else { "waiting" },
        "tmuxSession": "work",
        "threadId": "t1",
        "lastUserPrompt": format!("prompt {i} {}", "x".repeat(PROMPT_BYTES)),
    }));
}

/// The session's events on the machine itself, in seq order.
fn own(daemon: &TestDaemon) -> Vec<Value> {
    daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["session"] == "work")
        .collect()
}

/// The session at the hub through its SSE stream from cursor 0, up to `last`.
fn replay_sse(hub: &TestDaemon, last: u64) -> Vec<Value> {
    let headers = vec![("Authorization", format!("Bearer {}", hub.token()))];
    let mut client = SseClient::connect(
        hub.port(),
        "/api/sessions/alpha/work/events/stream?after=0",
        &headers,
    )
    .unwrap_or_else(|resp| panic!("the hub's stream answered {}: {}", resp.status, resp.body));
    client.set_read_timeout(CATCH_UP);
    let mut events = Vec::new();
    while events
        .last()
        .and_then(|e: &Value| e["seq"].as_u64())
        .is_none_or(|seq| seq < last)
    {
        let Some(event) = client.next_event() else {
            panic!(
                "the hub's stream ended or stalled after {} events (want through seq {last})",
                events.len()
            );
        };
        if event.event.as_deref() == Some("ping") || event.data.is_empty() {
            continue;
        }
        let value = event.json();
        assert_eq!(
            event.id,
            value["seq"].as_u64(),
            "an SSE id is the event's own seq: {value}"
        );
        events.push(value);
    }
    events
}

/// The session at the hub in backwards windows of 5, from its end to its first event.
fn scroll_back(hub: &TestDaemon) -> Vec<Value> {
    let mut page = hub
        .get("/api/sessions/alpha/work/events?last=5")
        .assert_ok();
    let mut windows = vec![page["events"].as_array().unwrap().clone()];
    while page["hasOlder"] == true {
        let before = &page["olderBefore"];
        page = hub
            .get(&format!(
                "/api/sessions/alpha/work/events?before={before}&limit=5"
            ))
            .assert_ok();
        windows.push(page["events"].as_array().unwrap().clone());
    }
    windows.into_iter().rev().flatten().collect()
}

/// Every read of the session at the hub is the machine's own events; prints the counts.
fn assert_every_read(hub: &TestDaemon, want: &[Value], what: &str) {
    let last = want.last().unwrap()["seq"].as_u64().unwrap();
    for (how, got) in [
        ("pages from the start", hub.session_events("alpha/work")),
        ("SSE from cursor 0", replay_sse(hub, last)),
        ("windows scrolled back", scroll_back(hub)),
    ] {
        let mut seqs: Vec<u64> = got.iter().filter_map(|e| e["seq"].as_u64()).collect();
        let read = seqs.len();
        seqs.sort_unstable();
        seqs.dedup();
        let lost = want
            .iter()
            .filter(|e| !seqs.contains(&e["seq"].as_u64().unwrap()))
            .count();
        eprintln!(
            "{what}, {how}: on the machine {}, read {read}, lost {lost}, duplicated {}",
            want.len(),
            read - seqs.len()
        );
        assert!(
            got == want,
            "{what}, {how}: the hub's read must be the machine's events, byte for byte"
        );
    }
}

#[test]
fn a_hub_past_its_memory_budget_reads_every_event_back_from_its_copy() {
    let nats = NatsServer::start();
    let (_tmux_a, alpha) = publishing(&nats, "alpha");
    let (_tmux_h, mut hub) = hub_with(&nats, &["--hub-memory-mb", "1"]);
    for i in 0..REPORTS {
        report(&alpha, i);
    }
    let want = own(&alpha);
    let bytes: usize = want.iter().map(|e| e.to_string().len()).sum();
    assert!(
        bytes as u64 > BUDGET + BUDGET / 4,
        "the machine's events ({bytes} bytes) must outgrow the hub's budget by a quarter"
    );

    let at = wait_caught_up(&hub, &alpha, "alpha");
    eprintln!("alpha at the hub: {at}");
    let first = want[0]["seq"].as_u64().unwrap();
    let on_disk = at["onDiskThrough"].as_u64().unwrap();
    assert!(
        on_disk > first,
        "the oldest events must have left the hub's memory: {at}"
    );
    assert!(at["memoryBytes"].as_u64().unwrap() <= BUDGET, "{at}");
    assert_every_read(&hub, &want, "past the budget");

    // The hub restarted reads its copy back and holds no more than its budget.
    hub.restart();
    let at = hub.wait_for("the hub read its copy back", CATCH_UP, |h| {
        link(h, "alpha").filter(|l| l["receivedSeq"] == want.last().unwrap()["seq"])
    });
    eprintln!("alpha at the restarted hub: {at}");
    assert!(at["onDiskThrough"].as_u64().unwrap() > first, "{at}");
    assert!(at["memoryBytes"].as_u64().unwrap() <= BUDGET, "{at}");
    // New events after the restart join them, in order.
    for i in REPORTS..REPORTS + 4 {
        report(&alpha, i);
    }
    let want = own(&alpha);
    wait_caught_up(&hub, &alpha, "alpha");
    assert_every_read(&hub, &want, "after the hub restarted");
}
