//! A damaged event log (issue 15): lost lines, a snapshot ahead of the log. Readers on every
//! surface skip what is missing and say so once; nothing after the damage is lost.

use std::fs;
use std::time::Duration;

use crate::support::*;

/// Cuts the last `n` complete lines off the last segment.
fn drop_last_lines(daemon: &TestDaemon, n: usize) {
    let (name, _) = daemon.segments().pop().expect("a segment");
    let path = daemon.log_dir().join(name);
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() > n,
        "the last segment has only {} lines",
        lines.len()
    );
    let kept: String = lines[..lines.len() - n]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect();
    fs::write(&path, kept).unwrap();
}

/// A daemon whose log lost its last three lines (seqs `h-1..=h+1`) while its snapshot (written
/// at the graceful stop, at `h+1`) still covers them. Returns the daemon and `h`.
fn daemon_with_a_lost_tail() -> (TmuxServer, TestDaemon, u64) {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    for i in 0..6 {
        daemon.report_status("s1", &format!("a{i}"), "running");
    }
    let head = daemon.head();
    daemon.stop();
    assert!(daemon.home().join("snapshot.json").exists());
    drop_last_lines(&daemon, 3);
    daemon.start_again();
    (tmux, daemon, head)
}

// See: issue 15, defect 1 — "Readers stall for ever at a gap in seq".
#[test]
fn r15_readers_never_stall_at_a_gap_in_seq() {
    let (_tmux, daemon, head) = daemon_with_a_lost_tail();
    let gap = json!([{"from": head - 1, "to": head + 1}]);
    let new_head = daemon.head();
    assert!(
        new_head >= head + 2,
        "new events follow the snapshot: {new_head}"
    );

    // A page from a cursor right before the gap returns the next stored event.
    let page = daemon
        .get(&format!("/api/events?after={}", head - 2))
        .assert_ok();
    let events = page["events"].as_array().unwrap();
    assert_eq!(events[0]["seq"], head + 2, "{page}");
    assert_eq!(events[0]["type"], "daemon.started", "{page}");
    assert_eq!(page["gaps"], gap, "{page}");
    // From inside the gap, only the rest of it is reported; past it, nothing.
    let page = daemon.get(&format!("/api/events?after={head}")).assert_ok();
    assert_eq!(page["events"][0]["seq"], head + 2, "{page}");
    assert_eq!(page["gaps"], json!([{"from": head + 1, "to": head + 1}]));
    let page = daemon
        .get(&format!("/api/events?after={}", head + 2))
        .assert_ok();
    assert!(page.get("gaps").is_none(), "{page}");
    // Following `next` from 0 reaches the head.
    let all = daemon.events_after(0);
    assert_eq!(all.last().unwrap()["seq"], new_head);

    // A long-poll before the gap answers at once.
    let started = std::time::Instant::now();
    let page = daemon
        .get(&format!("/api/events?after={}&wait=20", head - 2))
        .assert_ok();
    assert_eq!(page["events"][0]["seq"], head + 2);
    assert!(started.elapsed() < Duration::from_secs(5));

    // An SSE stream resumed before the gap says so once, then delivers stored and live events.
    let mut stream = daemon
        .sse("", Some(head - 2))
        .unwrap_or_else(|r| panic!("{r:?}"));
    let first = stream.next_event().expect("a gap message");
    assert_eq!(first.event.as_deref(), Some("gap"), "{first:?}");
    assert_eq!(first.id, None);
    assert_eq!(first.json(), gap[0]);
    let mut seen = Vec::new();
    while seen.last() != Some(&new_head) {
        let event = stream.next_event().expect("an event");
        assert_eq!(event.event, None, "only one gap message: {event:?}");
        seen.push(event.id.expect("an id"));
    }
    assert_eq!(seen[0], head + 2);
    let live = daemon.report_status("s1", "live", "running");
    let event = stream.next_event().expect("the live event");
    assert_eq!(event.id, Some(live));

    // The CLI prints the events after the gap, and the gap on stderr.
    let output = daemon.cli(&["events", "--after", &(head - 2).to_string()]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["seq"], head + 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("events {}..={} are missing", head - 1, head + 1)),
        "{stderr}"
    );

    // The MCP events tool too.
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "events", "arguments": {"after": head - 2, "limit": 2}}
    });
    let bearer = format!("Bearer {}", daemon.token());
    let resp = daemon.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        Some(&call.to_string()),
    );
    let answer = resp.assert_ok();
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["events"][0]["seq"], head + 2, "{answer}");
    assert_eq!(result["gaps"], gap, "{answer}");
}
