//! GET /api/events (pages and long-poll) and GET /api/events/stream (SSE with resume).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::*;

const TYPES: [&str; 11] = [
    "daemon.started",
    "notification",
    "daemon.stopped",
    "agent.updated",
    "agent.stale",
    "agent.pruned",
    "session.focused",
    "meta.status",
    "meta.progress",
    "meta.log",
    "meta.log_cleared",
];

#[test]
fn events_have_the_documented_shape_and_page_by_cursor() {
    let (tmux, _) = tmux_with_sessions(&["s1", "s2"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "running");
    daemon.report_status("s2", "a", "done");
    daemon.report_status("s1", "a", "done");
    daemon
        .post_no_token("/set-status", &json!({"session": "s2", "text": "hi"}))
        .assert_ok();
    daemon
        .post("/api/focus", &json!({"session": "s1"}))
        .assert_ok();
    let head = daemon.head();
    // Each `done` is followed by its `turn-ended` notification.
    assert_eq!(head, 8);

    let resp = daemon.get("/api/events?after=0");
    assert!(
        resp.content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        resp.content_type
    );
    let page = resp.assert_ok();
    assert_eq!(page["head"], head);
    assert_eq!(page["next"], head);
    let events = page["events"].as_array().unwrap().clone();
    assert_contiguous(&seqs(&events), 1, head);

    let first = &events[0];
    assert_eq!(first["type"], "daemon.started");
    assert!(
        first.get("session").is_none() && first.get("sessionSeq").is_none(),
        "{first}"
    );
    assert_eq!(first["data"]["pid"], daemon.pid());
    assert!(first["data"]["version"].is_string());

    let mut session_seqs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for event in &events {
        let object = event.as_object().unwrap();
        assert!(
            event["ts"]
                .as_u64()
                .is_some_and(|ts| ts > 1_600_000_000_000),
            "ts in ms: {event}"
        );
        assert!(TYPES.contains(&event["type"].as_str().unwrap()), "{event}");
        assert!(event["data"].is_object(), "{event}");
        for key in object.keys() {
            assert!(
                ["seq", "ts", "session", "sessionSeq", "type", "data"].contains(&key.as_str()),
                "unexpected key {key} in {event}"
            );
        }
        if let Some(session) = event["session"].as_str() {
            session_seqs
                .entry(session.into())
                .or_default()
                .push(event["sessionSeq"].as_u64().expect("sessionSeq"));
        }
    }
    assert_eq!(session_seqs["s1"], [1, 2, 3, 4]);
    assert_eq!(session_seqs["s2"], [1, 2, 3]);
    assert_eq!(events[3]["type"], "notification");
    assert_eq!(events[3]["data"]["kind"], "turn-ended");
    assert_eq!(events[3]["data"]["cause"], 3);
    assert_eq!(
        events[1]["data"],
        json!({"agent": "a", "status": "running", "ts": events[1]["data"]["ts"]})
    );
    assert_eq!(events[7]["type"], "session.focused");

    // Pages.
    let page = daemon.get("/api/events?after=0&limit=2").assert_ok();
    assert_eq!(seqs(page["events"].as_array().unwrap()), [1, 2]);
    assert_eq!(page["next"], 2);
    assert_eq!(page["head"], head);
    let page = daemon.get("/api/events?after=2&limit=3").assert_ok();
    assert_eq!(seqs(page["events"].as_array().unwrap()), [3, 4, 5]);
    assert_eq!(page["next"], 5);
    let page = daemon.get(&format!("/api/events?after={head}")).assert_ok();
    assert_eq!(page["events"], json!([]));
    assert_eq!(page["next"], head, "an empty page keeps the cursor");
    // The page's events are the same bytes as the stream's.
    let mut stream = daemon
        .sse("?after=0", None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    for expected in &events {
        let event = stream.next_event().expect("event");
        assert_eq!(event.id, expected["seq"].as_u64());
        assert_eq!(&event.json(), expected);
    }
}

#[test]
fn long_poll_waits_for_the_next_event() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = Arc::new(TestDaemon::start(&tmux, &[]));
    let head = daemon.head();

    // Nothing arrives: the poll answers empty after roughly `wait`.
    let started = Instant::now();
    let page = daemon
        .get(&format!("/api/events?after={head}&wait=0.4"))
        .assert_ok();
    let took = started.elapsed();
    assert_eq!(page["events"], json!([]));
    assert_eq!(page["next"], head);
    assert!(
        took >= Duration::from_millis(350),
        "answered after {took:?}, before the wait"
    );
    assert!(took < Duration::from_secs(3), "answered after {took:?}");

    // An event arrives: the poll answers at once with it.
    let poller = {
        let daemon = Arc::clone(&daemon);
        thread::spawn(move || {
            let started = Instant::now();
            let page = daemon
                .get(&format!("/api/events?after={head}&wait=20"))
                .assert_ok();
            (page, started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(300));
    let seq = daemon.report_status("s1", "a", "running");
    let (page, took) = poller.join().unwrap();
    assert_eq!(seqs(page["events"].as_array().unwrap()), [seq]);
    assert!(
        took < Duration::from_secs(5),
        "the long-poll took {took:?} to see a new event"
    );
    // With events already there, wait does not delay the answer.
    let started = Instant::now();
    let page = daemon.get("/api/events?after=0&wait=20").assert_ok();
    assert!(!page["events"].as_array().unwrap().is_empty());
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn stream_without_cursor_starts_at_the_present() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "old", "running");
    let mut stream = daemon.sse("", None).unwrap_or_else(|r| panic!("{r:?}"));
    let seq = daemon.report_status("s1", "new", "running");
    let event = stream.next_event().expect("an event");
    assert_eq!(event.id, Some(seq));
    let json = event.json();
    assert_eq!(json["seq"], seq);
    assert_eq!(json["data"]["agent"], "new");
    // `?after=` replays from the cursor; Last-Event-ID wins over it.
    let mut replay = daemon
        .sse("?after=0", None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(replay.next_event().unwrap().id, Some(1));
    let mut resumed = daemon
        .sse("?after=0", Some(seq - 1))
        .unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(resumed.next_event().unwrap().id, Some(seq));
}

/// Posts `count` reports from one thread, recording the last seq.
fn spawn_poster(
    daemon: Arc<TestDaemon>,
    count: usize,
    pause: Duration,
    last: Arc<AtomicU64>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for i in 0..count {
            let status = if i % 2 == 0 {
                "running"
            } else {
                "tool-running"
            };
            let seq = daemon.report(&json!({"agent": "poster", "status": status, "tmuxSession": "s1", "lastUserPrompt": format!("n{i}")}));
            last.fetch_max(seq, Ordering::SeqCst);
            if !pause.is_zero() {
                thread::sleep(pause);
            }
        }
    })
}

#[test]
fn sse_resumes_after_dropped_connections_without_gap_or_duplicate() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = Arc::new(TestDaemon::start(&tmux, &["--fsync", "never"]));
    let start = daemon.head();
    let total = 400;
    let last = Arc::new(AtomicU64::new(0));
    let mut stream = daemon
        .sse(&format!("?after={start}"), None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    let poster = spawn_poster(
        Arc::clone(&daemon),
        total,
        Duration::from_millis(2),
        Arc::clone(&last),
    );

    // Nothing else writes events, so the poster's events are exactly start+1..=start+total.
    let final_seq = start + total as u64;
    let mut received: Vec<u64> = Vec::new();
    let mut reconnects = 0;
    let mut reconnects_while_posting = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.last().is_none_or(|last| *last < final_seq) {
        let event = stream
            .next_event()
            .unwrap_or_else(|| daemon.fail("the stream ended"));
        let id = event.id.expect("every event has an id");
        assert_eq!(event.json()["seq"], id, "id and seq agree");
        received.push(id);
        assert!(
            Instant::now() < deadline,
            "did not receive every event in time"
        );
        // Drop the connection every 37 events, mid-stream, and resume from the last id seen:
        // alternately with Last-Event-ID (what EventSource does) and with `?after=`.
        if received.len().is_multiple_of(37) && id < final_seq {
            drop(stream);
            reconnects += 1;
            if !poster.is_finished() {
                reconnects_while_posting += 1;
            }
            stream = if reconnects % 2 == 0 {
                daemon.sse("?after=0", Some(id))
            } else {
                daemon.sse(&format!("?after={id}"), None)
            }
            .unwrap_or_else(|r| panic!("reconnect failed: {r:?}"));
        }
    }
    poster.join().unwrap();
    assert_eq!(
        last.load(Ordering::SeqCst),
        final_seq,
        "the poster's last seq"
    );
    assert!(
        reconnects >= 5 && reconnects_while_posting >= 3,
        "too few reconnects ({reconnects}, {reconnects_while_posting} while posting)"
    );
    assert_contiguous(&received, start + 1, final_seq);
}

#[test]
fn a_lagging_sse_client_still_gets_every_event_in_order() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = Arc::new(TestDaemon::start(&tmux, &["--fsync", "never"]));
    let start = daemon.head();
    let mut stream = daemon
        .sse(&format!("?after={start}"), None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    stream.set_read_timeout(Duration::from_secs(20));

    // 6000 events of ~2 KiB: more than the broadcast buffer and more than the socket buffers,
    // so the stream has to fall back to the store to catch up.
    let threads = 4;
    let per_thread = 1500;
    let posting = Arc::new(AtomicBool::new(true));
    let posters: Vec<_> = (0..threads)
        .map(|t| {
            let daemon = Arc::clone(&daemon);
            thread::spawn(move || {
                let prompt = "p".repeat(2048);
                for i in 0..per_thread {
                    daemon.report(&json!({
                        "agent": format!("bot{t}"), "status": "running", "tmuxSession": "s1",
                        "threadName": format!("{t}-{i}"), "lastUserPrompt": prompt,
                    }));
                }
            })
        })
        .collect();
    let watcher = {
        let posting = Arc::clone(&posting);
        thread::spawn(move || {
            for poster in posters {
                poster.join().unwrap();
            }
            posting.store(false, Ordering::SeqCst);
        })
    };
    let expected = (threads * per_thread) as u64;
    let mut received = Vec::with_capacity(expected as usize);
    let mut per_thread_order: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while (received.len() as u64) < expected {
        // Read slowly while the posters run.
        if posting.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(10));
        }
        let event = stream
            .next_event()
            .unwrap_or_else(|| daemon.fail("the stream ended"));
        let json = event.json();
        assert_eq!(json["seq"].as_u64(), event.id);
        if let Some(name) = json["data"]["threadName"].as_str() {
            let (t, i) = name.split_once('-').unwrap();
            per_thread_order
                .entry(t.to_string())
                .or_default()
                .push(i.parse().unwrap());
        }
        received.push(event.id.unwrap());
        assert!(
            Instant::now() < deadline,
            "only {} of {expected} events arrived in time",
            received.len()
        );
    }
    watcher.join().unwrap();
    assert_contiguous(&received, start + 1, start + expected);
    for (t, order) in per_thread_order {
        assert_eq!(
            order,
            (0..per_thread as u64).collect::<Vec<_>>(),
            "thread {t}'s events out of order"
        );
    }
    assert_eq!(daemon.head(), start + expected);
}

/// `GET /api/sessions/{id}/events?last=N`, then `?before=…&limit=N` window by window: a long
/// session (with other sessions' traffic before and between its events, on disk across
/// segments after a restart) read backwards from its end, every event once and in order, and
/// the forward read from the window's `next` finds nothing missed.
#[test]
fn a_long_session_is_read_from_its_end_backwards_window_by_window() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.stop();
    let others = crate::support::web::others(daemon.home(), 3_000, &["s1"]);
    let mut bytes = Vec::new();
    for line in &others.lines {
        cohost::core::log_line::encode(line, &mut bytes);
    }
    others.append(&bytes);
    let long = crate::support::web::long_session(daemon.home(), 600, "cs_0000000000000600");
    bytes.clear();
    for line in &long.lines {
        cohost::core::log_line::encode(line, &mut bytes);
    }
    long.append(&bytes);
    daemon.start_again();
    let id = &long.session;
    let expected: Vec<u64> = long
        .lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let seqs = |page: &Value| -> Vec<u64> {
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    let head = daemon.head();
    let window = daemon
        .get(&format!("/api/sessions/{id}/events?last=200"))
        .assert_ok();
    assert_eq!(seqs(&window), expected[expected.len() - 200..], "{window}");
    assert_eq!(window["next"], head, "{window}");
    assert_eq!(window["hasOlder"], true, "{window}");
    assert_eq!(window["events"][199]["type"], "session.closed");
    let mut seen = seqs(&window);
    let mut before = window["olderBefore"].as_u64().unwrap();
    let mut windows = 1;
    loop {
        let page = daemon
            .get(&format!(
                "/api/sessions/{id}/events?before={before}&limit=700"
            ))
            .assert_ok();
        windows += 1;
        assert_eq!(page["next"], before - 1, "{page}");
        let mut older = seqs(&page);
        assert!(older.len() <= 700);
        older.append(&mut seen);
        seen = older;
        if page["hasOlder"] == false {
            assert!(page.get("olderBefore").is_none(), "{page}");
            break;
        }
        before = page["olderBefore"].as_u64().unwrap();
    }
    assert_eq!(seen, expected);
    assert_eq!(windows, 1 + (expected.len() - 200).div_ceil(700));
    // The window's `next` is where a forward read (or the stream) goes on: nothing between.
    let after = daemon
        .get(&format!("/api/sessions/{id}/events?after={head}"))
        .assert_ok();
    assert_eq!(after["events"], json!([]), "{after}");
}
