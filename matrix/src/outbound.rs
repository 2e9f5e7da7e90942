//! cohost → Matrix: follows cohost's event stream (`GET /api/events/stream`, resumed from the
//! persisted cursor with `Last-Event-ID`) and posts each bridged session's turn in its room —
//! the agent's message streamed as one message edited in place, each tool call as one line,
//! the turn's end, approvals and questions numbered — then moves the cursor (fsync'd). An event
//! from before this start (catching up) is posted as a notice: no notification on replay.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bridge::{Bridge, Stream, lock};
use crate::state::Ask;

/// The longest agent message text kept in one Matrix message (events are capped at 64 KiB).
const MAX_TEXT: usize = 30_000;

pub fn run(bridge: Arc<Bridge>) -> anyhow::Result<()> {
    let page: Value = bridge.daemon.get("/api/events?after=0&limit=1")?;
    let head = page["head"].as_u64().unwrap_or(0);
    // `main` set the cursor at the first start: what came before is not this bridge's.
    let cursor = bridge.read(|s| s.cursor).unwrap_or(head).min(head);
    tracing::info!("following cohost's events after {cursor} (head {head})");
    let flusher = bridge.clone();
    std::thread::spawn(move || flush_loop(&flusher));
    let mut last_save = Instant::now();
    bridge
        .daemon
        .for_each_event("/api/events", cursor, true, |line| {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                return Ok(());
            };
            let seq = event["seq"].as_u64();
            let live = seq.is_none_or(|seq| seq > head);
            let posted = match handle(&bridge, &event, live) {
                Ok(posted) => posted,
                Err(e) => {
                    tracing::error!("posting event {seq:?} to Matrix: {e:#}");
                    true
                }
            };
            if let Some(seq) = seq
                && (posted || last_save.elapsed() > Duration::from_secs(2))
            {
                bridge.update(|s| s.cursor = Some(seq));
                last_save = Instant::now();
            }
            Ok(())
        })
}

/// Edits the streaming messages whose text changed, each at most once per `edit_interval_ms`.
fn flush_loop(bridge: &Bridge) {
    let interval = Duration::from_millis(bridge.config.edit_interval_ms);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let mut streams = lock(&bridge.streams);
        for (key, stream) in streams.iter_mut() {
            if stream.dirty && stream.last_edit.elapsed() >= interval {
                let txn = format!("e.{key}.{}", now_ms());
                bridge.try_edit(stream, &txn);
            }
        }
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Posts what `event` shows; answers whether it touched a bridged room.
fn handle(bridge: &Bridge, event: &Value, live: bool) -> anyhow::Result<bool> {
    let Some(session) = event["session"].as_str() else {
        return Ok(false);
    };
    let kind = event["type"].as_str().unwrap_or("");
    let data = &event["data"];
    if kind == "session.created" {
        let about = format!(
            "{} session in {}",
            data["runtime"].as_str().unwrap_or("?"),
            data["cwd"].as_str().unwrap_or("?")
        );
        let (room, _) = bridge.ensure_room(session, &about)?;
        bridge.post(
            &room,
            &format!("intro.{session}"),
            &format!(
                "Session {session}: {about}. A plain message here is a prompt; /help lists the commands."
            ),
            false,
        )?;
        return Ok(true);
    }
    let Some(room) = bridge.room_of(session) else {
        return Ok(false);
    };
    match kind {
        "item.delta" if data["kind"] == "agentMessage" => delta(bridge, session, &room, data)?,
        "item.started" => {
            if let Some(line) = tool_line(&data["item"], false) {
                let key = item_key(session, data);
                bridge.post(&room, &format!("t.{key}"), &line, false)?;
            }
        }
        "item.completed" => completed(bridge, session, &room, data, live)?,
        "turn.completed" => {
            let turn = data["turnId"].as_str().unwrap_or("");
            let status = data["status"].as_str().unwrap_or("completed");
            let mut line = format!("— turn ended: {status}");
            if let Some(error) = data["error"].as_str() {
                line.push_str(&format!(" ({error})"));
            }
            bridge.post(&room, &format!("end.{session}.{turn}"), &line, live)?;
        }
        "approval.requested" => {
            let id = data["approvalId"].as_str().unwrap_or("").to_string();
            let ask = bridge.update(|s| {
                s.ask(&id, session, |number| Ask {
                    session: session.to_string(),
                    number,
                    kind: "approval".into(),
                    detail: data["kind"].as_str().unwrap_or("").into(),
                    event_id: None,
                    text: approval_text(number, data),
                    question: None,
                    resolved: false,
                    order: 0,
                })
            });
            post_ask(bridge, &room, &id, &ask, live)?;
        }
        "input.requested" => {
            let id = data["requestId"].as_str().unwrap_or("").to_string();
            let first = &data["questions"][0];
            let question = first["id"].as_str().map(|qid| {
                let labels = first["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o["label"].as_str().map(str::to_string))
                    .collect();
                (qid.to_string(), labels)
            });
            let ask = bridge.update(|s| {
                s.ask(&id, session, |number| Ask {
                    session: session.to_string(),
                    number,
                    kind: "request".into(),
                    detail: data["kind"].as_str().unwrap_or("").into(),
                    event_id: None,
                    text: request_text(number, data),
                    question,
                    resolved: false,
                    order: 0,
                })
            });
            post_ask(bridge, &room, &id, &ask, live)?;
        }
        "approval.resolved" | "input.resolved" => {
            let id = data["approvalId"]
                .as_str()
                .or(data["requestId"].as_str())
                .unwrap_or("");
            let Some(ask) = bridge.read(|s| s.asks.get(id).cloned()) else {
                return Ok(false);
            };
            let by = data["by"].as_str().unwrap_or("someone");
            let how = match data["decision"].as_str() {
                Some(decision) => format!("{decision} by {by}"),
                None if by == "turn" => "moot: its turn ended".to_string(),
                None => format!("answered by {by}"),
            };
            let target = match &ask.event_id {
                Some(target) => target.clone(),
                None => bridge.post(&room, &format!("a.{id}"), &ask.text, false)?,
            };
            let body = format!("{}\n→ {how}", ask.text);
            bridge.edit(&room, &target, &format!("ar.{id}"), &body, false)?;
            bridge.update(|s| {
                if let Some(a) = s.asks.get_mut(id) {
                    a.resolved = true;
                }
            });
        }
        "notification" if data["kind"] == "error" => {
            let id = data["id"].as_str().unwrap_or("");
            let mut line = format!("⚠ {}", data["title"].as_str().unwrap_or("error"));
            if let Some(body) = data["body"].as_str() {
                line.push_str(&format!(": {body}"));
            }
            bridge.post(&room, &format!("n.{id}"), &line, live)?;
        }
        "session.closed" => {
            bridge.post(
                &room,
                &format!("closed.{session}"),
                "Session closed.",
                false,
            )?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn item_key(session: &str, data: &Value) -> String {
    let item = data["item"]["id"]
        .as_str()
        .or(data["itemId"].as_str())
        .unwrap_or("");
    format!("{session}/{item}")
}

fn post_ask(bridge: &Bridge, room: &str, id: &str, ask: &Ask, live: bool) -> anyhow::Result<()> {
    let event_id = bridge.post(room, &format!("a.{id}"), &ask.text, live)?;
    bridge.update(|s| {
        if let Some(a) = s.asks.get_mut(id) {
            a.event_id = Some(event_id);
        }
    });
    Ok(())
}

/// A live delta of an agent message: appended past the bytes already held (a snapshot or an
/// overlapping delta adds only what is new); the first one posts the message.
fn delta(bridge: &Bridge, session: &str, room: &str, data: &Value) -> anyhow::Result<()> {
    let key = item_key(session, data);
    let piece = data["delta"].as_str().unwrap_or("");
    let offset = data["offset"].as_u64().map(|o| o as usize);
    let mut streams = lock(&bridge.streams);
    let stream = match streams.get_mut(&key) {
        Some(stream) => stream,
        None => {
            let text = piece.to_string();
            let event_id = bridge.post(room, &format!("m.{key}"), &format!("{text} …"), false)?;
            streams.insert(
                key.clone(),
                Stream {
                    room: room.to_string(),
                    event_id,
                    text,
                    dirty: false,
                    last_edit: Instant::now(),
                },
            );
            return Ok(());
        }
    };
    let have = stream.text.len();
    let start = offset.unwrap_or(have);
    if start + piece.len() <= have {
        return Ok(());
    }
    let skip = have.saturating_sub(start);
    if let Some(new) = piece.get(skip..)
        && stream.text.len() < MAX_TEXT
    {
        stream.text.push_str(new);
        stream.dirty = true;
    }
    Ok(())
}

fn completed(
    bridge: &Bridge,
    session: &str,
    room: &str,
    data: &Value,
    live: bool,
) -> anyhow::Result<()> {
    let item = &data["item"];
    let key = item_key(session, data);
    match item["type"].as_str() {
        Some("agentMessage") => {
            let mut text = item["text"].as_str().unwrap_or("").to_string();
            if item["interrupted"] == true {
                text.push_str("\n(interrupted)");
            }
            if text.len() > MAX_TEXT {
                let mut cut = MAX_TEXT;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("\n… (cut: the whole message is on the web page)");
            }
            let mut streams = lock(&bridge.streams);
            let streamed = streams.remove(&key);
            let target = match &streamed {
                Some(stream) => stream.event_id.clone(),
                None => bridge.post(room, &format!("m.{key}"), &text, false)?,
            };
            // Streamed here, or maybe before a restart (a catch-up resend is the old message).
            if streamed.is_some() || !live {
                bridge.edit(room, &target, &format!("f.{key}"), &text, false)?;
            }
        }
        _ => {
            if let (Some(start), Some(done)) = (tool_line(item, false), tool_line(item, true)) {
                let target = bridge.post(room, &format!("t.{key}"), &start, false)?;
                bridge.edit(room, &target, &format!("tf.{key}"), &done, false)?;
            }
        }
    }
    Ok(())
}

/// A tool call as one line: started (`done` false) or with its status.
pub fn tool_line(item: &Value, done: bool) -> Option<String> {
    let status = item["status"].as_str().unwrap_or("");
    let (icon, what) = match item["type"].as_str()? {
        "command" => (
            "⚙",
            format!("`{}`", one_line(item["command"].as_str()?, 200)),
        ),
        "tool" => ("🔧", one_line(item["name"].as_str()?, 200)),
        "fileChange" => {
            let paths: Vec<&str> = item["changes"]
                .as_array()?
                .iter()
                .filter_map(|c| c["path"].as_str())
                .collect();
            ("✎", format!("edit {}", one_line(&paths.join(", "), 200)))
        }
        _ => return None,
    };
    if !done {
        return Some(format!("{icon} {what} …"));
    }
    let mut line = format!("{icon} {what} — {status}");
    if let Some(code) = item["exitCode"].as_i64() {
        line.push_str(&format!(" (exit {code})"));
    }
    Some(line)
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut}…")
}

pub fn approval_text(number: u32, data: &Value) -> String {
    let kind = data["kind"].as_str().unwrap_or("action");
    let mut text = format!("❓ Approval #{number} — {kind}");
    if let Some(command) = data["command"].as_str() {
        text.push_str(&format!(": `{}`", one_line(command, 500)));
    }
    if let Some(reason) = data["reason"].as_str() {
        text.push_str(&format!("\nReason: {}", one_line(reason, 500)));
    }
    let decisions: Vec<&str> = data["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut how = vec![format!("/approve {number}")];
    if decisions.contains(&"acceptForSession") {
        how.push(format!("/approve {number} session"));
    }
    how.push(format!("/decline {number}"));
    text.push_str(&format!("\nAnswer: {}", how.join(" · ")));
    text
}

pub fn request_text(number: u32, data: &Value) -> String {
    let kind = data["kind"].as_str().unwrap_or("request");
    let mut text = format!("❓ #{number} — the agent asks ({kind})");
    match kind {
        "question" => {
            for question in data["questions"].as_array().into_iter().flatten() {
                text.push_str(&format!(
                    "\n{}",
                    one_line(question["question"].as_str().unwrap_or(""), 1000)
                ));
                if question["isSecret"] == true {
                    text.push_str(
                        "\n(secret: answer it on the web page; nothing typed here is sent)",
                    );
                    continue;
                }
                for (i, option) in question["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    text.push_str(&format!(
                        "\n  {}. {}",
                        i + 1,
                        option["label"].as_str().unwrap_or("")
                    ));
                    if let Some(d) = option["description"].as_str().filter(|d| !d.is_empty()) {
                        text.push_str(&format!(" — {}", one_line(d, 200)));
                    }
                }
            }
            text.push_str(&format!(
                "\nAnswer: /answer {number} N (an option) or /answer {number} TEXT"
            ));
        }
        "plan" => {
            if let Some(plan) = data["plan"].as_str() {
                text.push_str(&format!("\n{plan}"));
            }
            text.push_str(&format!(
                "\nAnswer: /answer {number} approve · /answer {number} FEEDBACK"
            ));
        }
        _ => {
            if let Some(message) = data["message"].as_str() {
                text.push_str(&format!("\n{}", one_line(message, 1000)));
            }
            text.push_str(&format!("\nAnswer: /answer {number} accept|decline"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_fold_to_one_line_and_asks_are_numbered() {
        let item = json!({"type": "command", "id": "i", "command": "touch\n a.txt", "status": "completed", "exitCode": 0});
        assert_eq!(tool_line(&item, false).unwrap(), "⚙ `touch a.txt` …");
        assert_eq!(
            tool_line(&item, true).unwrap(),
            "⚙ `touch a.txt` — completed (exit 0)"
        );
        assert_eq!(tool_line(&json!({"type": "reasoning"}), true), None);
        let text = approval_text(
            3,
            &json!({"kind": "command", "command": "rm x", "decisions": ["accept", "acceptForSession", "decline"]}),
        );
        assert!(
            text.contains("Approval #3") && text.contains("/approve 3 session"),
            "{text}"
        );
        let secret = request_text(
            1,
            &json!({"kind": "question", "questions": [{"id": "q", "question": "Token?", "isSecret": true, "options": [{"label": "x"}]}]}),
        );
        assert!(
            secret.contains("answer it on the web page") && !secret.contains("1. x"),
            "{secret}"
        );
    }
}
