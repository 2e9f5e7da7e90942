//! The codex host against the real codex app-server and the mock Responses server.

use std::collections::HashSet;
use std::sync::Barrier;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::codex_host::{CodexFixture, TURN_TIMEOUT, types};
use crate::support::http::Resp;
use crate::support::mock_responses::{Step, input_items};
use crate::support::{SseClient, TestDaemon};

#[test]
fn a_full_turn_is_streamed_into_session_events_in_order() {
    let fx = CodexFixture::start();
    fx.mock.push(Step::reasoning(
        "Thinking it over.",
        "Hello from the mock model!",
    ));
    let id = fx.create(json!({ "approvalPolicy": "never", "sandbox": "workspace-write" }));
    let view = fx.view(&id);
    assert_eq!(view["state"], "live", "{view}");
    assert!(view["threadId"].is_string(), "{view}");

    let sent = fx.send(&id, "Say hello");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn_id = sent["turnId"].as_str().unwrap().to_string();
    fx.wait_turns_completed(&id, 1);

    let events = fx.events(&id);
    let kinds: Vec<String> = events
        .iter()
        // `message.sent` records the inject's outcome when `turn/start` answers, which races
        // the turn's own notifications; it is checked on its own below.
        .filter(|e| {
            let kind = e["type"].as_str().unwrap();
            !["usage", "session.status", "message.sent", "notification"].contains(&kind)
                && !kind.starts_with("task.")
        })
        .map(|e| {
            let t = e["type"].as_str().unwrap().to_string();
            match e["data"]["item"]["type"].as_str() {
                Some(item) => format!("{t}:{item}"),
                None => t,
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session.created",
            "session.bound",
            "turn.started",
            "item.completed:userMessage",
            "item.completed:reasoning",
            "item.completed:agentMessage",
            "turn.completed",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
        "{events:#?}"
    );
    let started = events.iter().find(|e| e["type"] == "turn.started").unwrap();
    assert_eq!(started["data"]["turnId"], turn_id.as_str());
    assert_eq!(started["data"]["source"], "api");
    let reply = events
        .iter()
        .find(|e| e["data"]["item"]["type"] == "agentMessage")
        .unwrap();
    assert_eq!(reply["data"]["item"]["text"], "Hello from the mock model!");
    let done = events
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap();
    assert_eq!(done["data"]["status"], "completed");
    // Per-session seqs count up from 1 with no gap.
    let session_seqs: Vec<u64> = events
        .iter()
        .map(|e| e["sessionSeq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        session_seqs,
        (1..=session_seqs.len() as u64).collect::<Vec<_>>()
    );
    let sent_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.sent")
        .collect();
    assert_eq!(sent_events.len(), 1, "{:?}", types(&events));
    assert_eq!(sent_events[0]["data"]["turnId"], turn_id.as_str());
    // The prompt is tracked as a task: queued, delivered and accepted once each, and the turn
    // finished it with its reply.
    let task = sent["taskId"].as_str().unwrap();
    let task_kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["data"]["taskId"] == task)
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        task_kinds,
        ["task.queued", "task.delivered", "task.accepted"]
    );
    let view = fx.daemon.get(&format!("/api/tasks/{task}")).assert_ok();
    assert_eq!(view["task"]["state"], "completed", "{view:#}");
    assert_eq!(
        view["task"]["resultExcerpt"], "Hello from the mock model!",
        "{view:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the codex host suites (`codex_host_*.rs`).
// ---------------------------------------------------------------------------------------------

/// Any request with the token (PUT and DELETE included), over a fresh socket.
pub(crate) fn api(daemon: &TestDaemon, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let head = format!(
        "{method} {path} HTTP/1.1\nHost: 127.0.0.1:{}\nAuthorization: Bearer {}\nContent-Type: application/json",
        daemon.port(),
        daemon.token()
    );
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    daemon.raw(&head, body.as_bytes())
}

/// `POST /api/sessions/{id}/messages` with any body; the answer as is.
pub(crate) fn post_message(fx: &CodexFixture, id: &str, body: Value) -> Resp {
    fx.daemon
        .post(&format!("/api/sessions/{id}/messages"), &body)
}

/// Events of one type.
pub(crate) fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// `item.completed` events whose item has this type.
pub(crate) fn completed_items<'a>(events: &'a [Value], item_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == item_type)
        .collect()
}

/// One line per event, for failure messages.
pub(crate) fn dump(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("{} {} {}", e["seq"], e["type"], e["data"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every turn id appears once in `turn.started` and at most once in `turn.completed`, and every
/// item id at most once in `item.started` and in `item.completed`.
#[track_caller]
pub(crate) fn assert_no_duplicate_turns_or_items(events: &[Value]) {
    let mut seen = HashSet::new();
    for event in events {
        let key = match event["type"].as_str().unwrap_or("") {
            kind @ ("turn.started" | "turn.completed") => {
                format!("{kind}:{}", event["data"]["turnId"])
            }
            kind @ ("item.started" | "item.completed") => {
                format!("{kind}:{}", event["data"]["item"]["id"])
            }
            _ => continue,
        };
        assert!(
            seen.insert(key.clone()),
            "{key} is stored twice:\n{}",
            dump(events)
        );
    }
}

/// Opens a session's SSE stream (`?after=` and/or `Last-Event-ID`).
pub(crate) fn session_sse(
    daemon: &TestDaemon,
    id: &str,
    after: Option<u64>,
    last_event_id: Option<u64>,
) -> SseClient {
    let mut headers = vec![("Authorization", format!("Bearer {}", daemon.token()))];
    if let Some(last) = last_event_id {
        headers.push(("Last-Event-ID", last.to_string()));
    }
    let query = after.map(|a| format!("?after={a}")).unwrap_or_default();
    let client = SseClient::connect(
        daemon.port(),
        &format!("/api/sessions/{id}/events/stream{query}"),
        &headers,
    )
    .unwrap_or_else(|resp| panic!("the session stream answered {}: {}", resp.status, resp.body));
    client.set_read_timeout(TURN_TIMEOUT);
    client
}

/// A text long enough to stream for a while at `delay` per word.
pub(crate) fn words(n: usize) -> String {
    (1..=n)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// Inject: start, steer, serialization, idempotency; interrupt.
// ---------------------------------------------------------------------------------------------

#[test]
fn an_inject_mid_turn_steers_the_running_turn() {
    let fx = CodexFixture::start();
    // The long answer never ends by itself, so the steer finds it running however slow the
    // machine (codex drops the in-flight stream when a steer comes).
    fx.mock.push(
        Step::text(words(30))
            .delay(Duration::from_millis(100))
            .then_hang(),
    );
    fx.mock
        .push(Step::text("Short answer.").when_user_contains("keep it short"));
    let id = fx.create(json!({ "approvalPolicy": "never" }));

    let first = fx.send(&id, "Write a long answer");
    assert_eq!(first["outcome"], "started", "{first}");
    assert_eq!(first["duplicate"], false, "{first}");
    let turn_id = first["turnId"].as_str().unwrap().to_string();
    fx.wait_event(&id, "turn.started", |e| e["type"] == "turn.started");
    // The model is streaming the long answer: the second inject joins this turn.
    fx.mock.wait_for_requests(1, TURN_TIMEOUT);
    let second = fx.send(&id, "Actually, keep it short.");
    assert_eq!(second["outcome"], "steered", "{second}");
    assert_eq!(second["turnId"], turn_id.as_str(), "{second}");
    assert_eq!(second["duplicate"], false, "{second}");

    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    let started = of_type(&events, "turn.started");
    assert_eq!(started.len(), 1, "one turn only:\n{}", dump(&events));
    assert_eq!(started[0]["data"]["turnId"], turn_id.as_str());
    let done = of_type(&events, "turn.completed");
    assert_eq!(done[0]["data"]["status"], "completed", "{}", dump(&events));
    let users: Vec<(&str, &str)> = completed_items(&events, "userMessage")
        .iter()
        .map(|e| {
            (
                e["data"]["turnId"].as_str().unwrap(),
                e["data"]["item"]["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        users,
        [
            (turn_id.as_str(), "Write a long answer"),
            (turn_id.as_str(), "Actually, keep it short.")
        ],
        "{}",
        dump(&events)
    );
    // The abandoned long answer is not stored; the answer to the steer is.
    let replies: Vec<&str> = completed_items(&events, "agentMessage")
        .iter()
        .map(|e| e["data"]["item"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(replies, ["Short answer."], "{}", dump(&events));
    let sent: Vec<&str> = of_type(&events, "message.sent")
        .iter()
        .map(|e| e["data"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["started", "steered"]);
    assert_no_duplicate_turns_or_items(&events);

    // Idle again: the next inject opens a new turn.
    let third = fx.send(&id, "And now?");
    assert_eq!(third["outcome"], "started", "{third}");
    assert_ne!(third["turnId"], turn_id.as_str(), "{third}");
    fx.wait_turns_completed(&id, 2);
    assert_eq!(of_type(&fx.events(&id), "turn.started").len(), 2);
}

#[test]
fn two_concurrent_injects_open_one_turn() {
    let fx = CodexFixture::start();
    fx.mock
        .push(Step::text(words(20)).delay(Duration::from_millis(100)));
    let id = fx.create(json!({ "approvalPolicy": "never" }));

    let barrier = Barrier::new(2);
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = ["first racer", "second racer"]
            .into_iter()
            .map(|text| {
                let (fx, id, barrier) = (&fx, &id, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    fx.send(id, text)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut outcomes: Vec<&str> = answers
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["started", "steered"], "{answers:?}");
    assert_eq!(
        answers[0]["turnId"], answers[1]["turnId"],
        "both in one turn: {answers:?}"
    );

    fx.wait_turns_completed(&id, 1);
    let events = fx.events(&id);
    assert_eq!(
        of_type(&events, "turn.started").len(),
        1,
        "never two turns:\n{}",
        dump(&events)
    );
    let mut texts: Vec<&str> = completed_items(&events, "userMessage")
        .iter()
        .map(|e| {
            assert_eq!(e["data"]["turnId"], answers[0]["turnId"]);
            e["data"]["item"]["text"].as_str().unwrap()
        })
        .collect();
    texts.sort();
    assert_eq!(texts, ["first racer", "second racer"], "{}", dump(&events));
    assert_no_duplicate_turns_or_items(&events);
}

#[test]
fn an_idempotent_retry_is_not_sent_twice() {
    let fx = CodexFixture::start();
    fx.mock
        .push(Step::text("Once is enough.").delay(Duration::from_millis(50)));
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let body = json!({ "text": "hello once", "idempotencyKey": "retry-1" });

    let first = post_message(&fx, &id, body.clone()).assert_ok();
    assert_eq!(first["outcome"], "started", "{first}");
    assert_eq!(first["duplicate"], false, "{first}");
    // A retry while the turn runs, and another after it ended: neither is sent again.
    let retry = post_message(&fx, &id, body.clone()).assert_ok();
    assert_eq!(retry["duplicate"], true, "{retry}");
    assert_eq!(retry["turnId"], first["turnId"], "{retry}");
    assert_eq!(retry["outcome"], "started", "{retry}");
    fx.wait_turns_completed(&id, 1);
    let late = post_message(&fx, &id, body).assert_ok();
    assert_eq!(late["duplicate"], true, "{late}");
    assert_eq!(late["turnId"], first["turnId"], "{late}");

    let main = fx.mock.main_requests();
    assert_eq!(main.len(), 1, "the mock saw the text once");
    let mentions = main
        .iter()
        .flat_map(|r| input_items(&r.body).to_vec())
        .filter(|i| i["role"] == "user" && i.to_string().contains("hello once"))
        .count();
    assert_eq!(mentions, 1);
    let events = fx.events(&id);
    assert_eq!(of_type(&events, "turn.started").len(), 1);
    assert_eq!(of_type(&events, "message.sent").len(), 1);
    assert_eq!(completed_items(&events, "userMessage").len(), 1);

    // Another key is another message.
    let other = post_message(
        &fx,
        &id,
        json!({ "text": "hello once", "idempotencyKey": "retry-2" }),
    )
    .assert_ok();
    assert_eq!(other["duplicate"], false, "{other}");
    assert_eq!(other["outcome"], "started", "{other}");
    assert_ne!(other["turnId"], first["turnId"], "{other}");
    fx.wait_turns_completed(&id, 2);
    assert_eq!(fx.mock.main_requests().len(), 2);
}

#[test]
fn an_interrupt_ends_the_running_turn() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    let interrupt = |fx: &CodexFixture| {
        fx.daemon
            .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
            .assert_ok()
    };
    // Nothing to interrupt yet.
    assert_eq!(interrupt(&fx), json!({ "interrupted": false }));

    // 1. Mid-answer: deltas streamed, then the model stalls.
    fx.mock.push(
        Step::text("a partial answer that never ends")
            .delay(Duration::from_millis(100))
            .then_hang(),
    );
    let sent = fx.send(&id, "Start something long");
    let turn1 = sent["turnId"].as_str().unwrap().to_string();
    fx.wait_event(&id, "turn.started", |e| e["type"] == "turn.started");
    fx.mock.wait_for_requests(1, TURN_TIMEOUT);
    // A reader that connects mid-message (a reload) starts with the text so far, then the
    // deltas after it, placed by their offsets: what it ends with is the whole text, once.
    let whole = "a partial answer that never ends";
    // The first words have reached the daemon: a first reader sees a delta.
    let mut first = session_sse(&fx.daemon, &id, Some(0), None);
    let mut before = Vec::new();
    loop {
        let event = first
            .next_event()
            .unwrap_or_else(|| panic!("the stream ended before a delta: {before:?}"))
            .json();
        if event["type"] == "item.delta" {
            break;
        }
        before.push(event["type"].to_string());
    }
    drop(first);
    let mut stream = session_sse(&fx.daemon, &id, Some(0), None);
    let mut text = String::new();
    let mut snapshots = 0;
    let mut seen = Vec::new();
    while text != whole {
        let event = stream
            .next_event()
            .unwrap_or_else(|| panic!("the stream ended with {text:?}"))
            .json();
        seen.push(format!("{} {}", event["type"], event["data"]));
        if event["type"] != "item.delta" {
            continue;
        }
        let data = &event["data"];
        snapshots += usize::from(data["snapshot"] == true);
        let offset = data["offset"]
            .as_u64()
            .unwrap_or_else(|| panic!("an agent message delta without an offset: {event}"));
        let delta = data["delta"].as_str().unwrap();
        assert!(
            offset as usize <= text.len(),
            "a gap before {event} after {text:?}; the stream sent:\n{}\nthe session's stored events:\n{}",
            seen.join("\n"),
            fx.daemon
                .events_after(0)
                .iter()
                .filter(|e| e["session"] == id.as_str())
                .map(|e| format!("{} {} {}", e["seq"], e["type"], e["data"]))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let end = offset as usize + delta.len();
        if end > text.len() {
            text.push_str(&delta[text.len() - offset as usize..]);
        }
        assert!(whole.starts_with(&text), "{text:?} after {event}");
    }
    // Connected after the first words had streamed: they came as one snapshot.
    assert_eq!(snapshots, 1, "{snapshots} snapshots");
    drop(stream);
    assert_eq!(interrupt(&fx), json!({ "interrupted": true }));
    let done = fx.wait_event(&id, "the interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn1.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");
    // What streamed is stored, marked interrupted, before the turn's end: a reload shows it.
    let events = fx.events(&id);
    let kept = events
        .iter()
        .find(|e| e["type"] == "item.completed" && e["data"]["item"]["type"] == "agentMessage")
        .unwrap_or_else(|| panic!("no stored partial message: {events:?}"));
    assert_eq!(kept["data"]["item"]["text"], whole, "{kept}");
    assert_eq!(kept["data"]["item"]["interrupted"], true, "{kept}");
    assert!(kept["seq"].as_u64() < done["seq"].as_u64(), "{kept} {done}");
    fx.mock.wait_for_disconnects(1, TURN_TIMEOUT);
    assert_eq!(interrupt(&fx), json!({ "interrupted": false }));
    assert!(fx.view(&id)["activeTurnId"].is_null());

    // 2. Before the model answered anything.
    fx.mock.push(Step::hang());
    let sent = fx.send(&id, "Think hard");
    assert_eq!(sent["outcome"], "started", "{sent}");
    let turn2 = sent["turnId"].as_str().unwrap().to_string();
    fx.mock.wait_for_requests(2, TURN_TIMEOUT);
    let command = fx
        .daemon
        .post(
            &format!("/api/sessions/{id}/command"),
            &json!({ "text": "/interrupt" }),
        )
        .assert_ok();
    assert_eq!(
        command,
        json!({ "ok": true, "data": { "interrupted": true } })
    );
    let done = fx.wait_event(&id, "the second interrupted turn", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn2.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");

    // 3. Right after the send answered, before codex began the turn: still interrupted. (The
    // model may never be asked; the step only answers this prompt.)
    fx.mock.push(Step::hang().when_user_contains("Never mind"));
    let sent = fx.send(&id, "Never mind");
    let turn3 = sent["turnId"].as_str().unwrap().to_string();
    assert_eq!(interrupt(&fx), json!({ "interrupted": true }));
    let done = fx.wait_event(&id, "the turn interrupted at once", |e| {
        e["type"] == "turn.completed" && e["data"]["turnId"] == turn3.as_str()
    });
    assert_eq!(done["data"]["status"], "interrupted", "{done}");

    // The session goes on; codex tells the model about the aborted turn.
    let sent = fx.send(&id, "Continue please");
    assert_eq!(sent["outcome"], "started", "{sent}");
    fx.wait_turns_completed(&id, 4);
    let last = fx.mock.main_requests().pop().unwrap();
    assert_eq!(last.last_user_text(), "Continue please");
    assert!(
        last.body["input"].to_string().contains("turn_aborted"),
        "the model should hear about the interrupt"
    );
    let events = fx.events(&id);
    let messages = completed_items(&events, "agentMessage");
    assert_eq!(
        messages
            .iter()
            .map(|m| m["data"]["item"]["interrupted"] == true)
            .collect::<Vec<_>>(),
        [true, false],
        "the first turn's partial answer (interrupted) and the last turn's answer:\n{}",
        dump(&events)
    );
    assert_no_duplicate_turns_or_items(&events);
}
