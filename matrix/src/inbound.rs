//! Matrix → cohost: long-polls the homeserver's `/sync` from the persisted `next_batch`, obeys
//! the allowed users' messages in the control room and the sessions' rooms (everyone else is
//! ignored, logged once), and answers each command in reply. A handled event is remembered
//! (fsync'd) before the next one, and prompts carry the Matrix event id as their idempotency
//! key, so a batch replayed after a restart acts once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::bridge::Bridge;
use crate::commands::{CONTROL_USAGE, Command, Room, SESSION_USAGE, parse};

const SYNC_FILTER: &str = r#"{"room":{"timeline":{"limit":100,"types":["m.room.message"]},"state":{"types":[]},"ephemeral":{"types":[]},"account_data":{"types":[]}},"presence":{"types":[]},"account_data":{"types":[]}}"#;
const FIRST_FILTER: &str = r#"{"room":{"timeline":{"limit":0},"state":{"types":[]},"ephemeral":{"types":[]},"account_data":{"types":[]}},"presence":{"types":[]},"account_data":{"types":[]}}"#;

/// The first start's sync token: what was said before the bridge ever ran is not a command
/// to it.
pub fn first_sync(bridge: &Bridge) -> anyhow::Result<()> {
    let sync = crate::homeserver::retrying("sync", || bridge.hs.sync(None, 0, FIRST_FILTER))?;
    let next = sync["next_batch"].as_str().unwrap_or("").to_string();
    bridge.update(|s| s.next_batch = Some(next));
    Ok(())
}

pub fn run(bridge: Arc<Bridge>) -> anyhow::Result<()> {
    let mut ignored: HashSet<String> = HashSet::new();
    loop {
        let since = bridge.read(|s| s.next_batch.clone());
        let sync = crate::homeserver::retrying("sync", || {
            bridge.hs.sync(since.as_deref(), 30_000, SYNC_FILTER)
        })?;
        for (room, joined) in sync["rooms"]["join"].as_object().into_iter().flatten() {
            let kind = if *room == bridge.control_room {
                Room::Control
            } else if bridge.read(|s| s.session_of_room(room).is_some()) {
                Room::Session
            } else {
                continue;
            };
            if joined["timeline"]["limited"] == true {
                tracing::warn!(
                    "room {room}: more messages arrived than one sync returns; the oldest were skipped"
                );
            }
            for event in joined["timeline"]["events"]
                .as_array()
                .into_iter()
                .flatten()
            {
                on_message(&bridge, room, kind, event, &mut ignored);
            }
        }
        let next = sync["next_batch"].as_str().map(str::to_string);
        if next.is_some() {
            bridge.update(|s| s.next_batch = next);
        } else {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

fn on_message(
    bridge: &Bridge,
    room: &str,
    kind: Room,
    event: &Value,
    ignored: &mut HashSet<String>,
) {
    let sender = event["sender"].as_str().unwrap_or("");
    let Some(event_id) = event["event_id"].as_str() else {
        return;
    };
    let content = &event["content"];
    if event["type"] != "m.room.message"
        || sender == bridge.bot
        || content["m.relates_to"]["rel_type"] == "m.replace"
        || content["msgtype"] != "m.text"
    {
        return;
    }
    if !bridge.config.allowed_users.iter().any(|u| u == sender) {
        if ignored.insert(sender.to_string()) {
            tracing::warn!(
                "ignoring {sender} in {room}: not in [bridge.matrix] allowed_users (said once)"
            );
        }
        return;
    }
    if bridge.read(|s| s.was_handled(event_id)) {
        return;
    }
    let text = content["body"].as_str().unwrap_or("");
    let answer = match parse(text, kind) {
        Ok(command) => execute(bridge, room, event_id, sender, command),
        Err(usage) => usage,
    };
    if let Err(e) = bridge.reply(room, event_id, &answer) {
        tracing::error!("answering {event_id} in {room}: {e:#}");
    }
    bridge.update(|s| s.mark_handled(event_id));
}

/// What a failed cohost call says in the room.
fn refusal(error: &anyhow::Error) -> String {
    match error.downcast_ref::<cohost::client::ClientError>() {
        Some(cohost::client::ClientError::Api { code, message, .. }) => {
            format!("refused ({code}): {message}")
        }
        _ => format!("failed: {error:#}"),
    }
}

fn api_code(error: &anyhow::Error) -> Option<&str> {
    match error.downcast_ref::<cohost::client::ClientError>() {
        Some(cohost::client::ClientError::Api { code, .. }) => Some(code),
        _ => None,
    }
}

/// `by` for cohost: the Matrix user, when it fits the field's 64 printable bytes.
fn by(sender: &str) -> String {
    if sender.len() <= 64 && sender.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        sender.to_string()
    } else {
        "matrix".to_string()
    }
}

fn execute(bridge: &Bridge, room: &str, event_id: &str, sender: &str, command: Command) -> String {
    let session = bridge.read(|s| s.session_of_room(room));
    let key = format!("matrix:{event_id}");
    let path = |tail: &str| format!("/api/sessions/{}{tail}", session.as_deref().unwrap_or(""));
    let result: anyhow::Result<String> = match command {
        Command::Help => Ok(if session.is_some() {
            SESSION_USAGE
        } else {
            CONTROL_USAGE
        }
        .to_string()),
        Command::Sessions => sessions(bridge),
        Command::State => state(bridge),
        Command::Start { target, prompt } => {
            crate::start::start(bridge, &target, prompt.as_deref(), &key)
        }
        Command::Send(text) | Command::Steer(text) => bridge
            .daemon
            .post::<Value>(
                &path("/messages"),
                &json!({"text": text, "idempotencyKey": key}),
            )
            .map(|a| match a["outcome"].as_str() {
                Some("steered") => "steered into the running turn".to_string(),
                Some("started") => "sent: a turn started".to_string(),
                other => format!("sent ({})", other.unwrap_or("?")),
            }),
        Command::Queue(text) => bridge
            .daemon
            .post::<Value>(
                &path("/tasks"),
                &json!({"text": text, "idempotencyKey": key}),
            )
            .map(|a| {
                format!(
                    "queued as {}",
                    a["task"]["id"]
                        .as_str()
                        .or(a["id"].as_str())
                        .unwrap_or("a task")
                )
            }),
        Command::Interrupt => bridge
            .daemon
            .post::<Value>(&path("/interrupt"), &json!({}))
            .map(|a| {
                if a["interrupted"] == true {
                    "interrupted the running turn".to_string()
                } else {
                    "no turn was running".to_string()
                }
            }),
        Command::Approve {
            number,
            for_session,
        } => {
            let decision = if for_session {
                "acceptForSession"
            } else {
                "accept"
            };
            decide(bridge, session.as_deref(), number, decision, sender)
        }
        Command::Decline(number) => decide(bridge, session.as_deref(), number, "decline", sender),
        Command::Answer { number, text } => {
            answer(bridge, session.as_deref(), number, &text, sender)
        }
        Command::Takeover => bridge
            .daemon
            .post::<Value>(
                &path("/lease"),
                &json!({"action": "takeover", "by": by(sender)}),
            )
            .map(|a| {
                format!(
                    "you hold the session now (lease {})",
                    a["lease"]["holder"].as_str().unwrap_or("?")
                )
            }),
        Command::Release { drop_queued } => bridge
            .daemon
            .post::<Value>(
                &path("/lease"),
                &json!({"action": "release", "dropQueued": drop_queued, "by": by(sender)}),
            )
            .map(|a| {
                format!(
                    "released: the queue drives it again (lease {})",
                    a["lease"]["holder"].as_str().unwrap_or("?")
                )
            }),
        Command::Model(model) => bridge
            .daemon
            .put::<Value>(&path("/model"), &json!({"model": model}))
            .map(capability),
        Command::Forward(text) => bridge
            .daemon
            .post::<Value>(&path("/command"), &json!({"text": text}))
            .map(capability),
    };
    result.unwrap_or_else(|e| refusal(&e))
}

/// A capability result (`{"ok", "data"}` or `{"ok": false, "reason", "message"}`) in words.
fn capability(answer: Value) -> String {
    if answer["ok"] == true {
        let data = answer["data"].to_string();
        let shown: String = data.chars().take(3000).collect();
        format!("ok: {shown}")
    } else {
        format!(
            "not done ({}): {}",
            answer["reason"].as_str().unwrap_or("?"),
            answer["message"].as_str().unwrap_or("")
        )
    }
}

fn sessions(bridge: &Bridge) -> anyhow::Result<String> {
    let list: Value = bridge.daemon.get("/api/sessions")?;
    let mut lines = Vec::new();
    for s in list["sessions"].as_array().into_iter().flatten() {
        let id = s["id"].as_str().unwrap_or("?");
        let mut line = format!(
            "• {id} — {} {}",
            s["runtime"].as_str().unwrap_or("?"),
            s["state"].as_str().unwrap_or("?")
        );
        if s["activeTurnId"].is_string() {
            line.push_str(", turn running");
        }
        let waiting = s["pendingApprovals"].as_u64().unwrap_or(0)
            + s["pendingRequests"].as_u64().unwrap_or(0);
        if waiting > 0 {
            line.push_str(&format!(", {waiting} waiting for you"));
        }
        match bridge.room_of(id) {
            Some(room) => line.push_str(&format!(" — room {room}")),
            None => line.push_str(" — no room"),
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return Ok("no hosted sessions".into());
    }
    Ok(lines.join("\n"))
}

fn state(bridge: &Bridge) -> anyhow::Result<String> {
    let state: Value = bridge.daemon.get("/api/state")?;
    let mut lines = Vec::new();
    let groups = state["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["name"].as_str().unwrap_or("?"), &s["agents"]));
    let unplaced = std::iter::once((":unplaced", &state["unplaced"]));
    for (name, agents) in groups.chain(unplaced) {
        for agent in agents.as_array().into_iter().flatten() {
            let status = agent["status"].as_str().unwrap_or("?");
            let mut line = format!(
                "• {name} / {}: {status}",
                agent["agent"].as_str().unwrap_or("?")
            );
            if agent["unseen"] == true {
                line.push_str(" (done, not seen)");
            }
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return Ok("no agents running, waiting or done".into());
    }
    Ok(lines.join("\n"))
}

/// `/approve N` and `/decline N`: the approval numbered N in this room.
fn decide(
    bridge: &Bridge,
    session: Option<&str>,
    number: u32,
    decision: &str,
    sender: &str,
) -> anyhow::Result<String> {
    let session = session.unwrap_or("");
    let Some((id, ask)) = bridge.read(|s| s.ask_by_number(session, number)) else {
        return Ok(format!("there is no #{number} in this room"));
    };
    if ask.kind != "approval" {
        return Ok(format!(
            "#{number} is a question: answer it with /answer {number} …"
        ));
    }
    let path = format!(
        "/api/sessions/{session}/approvals/{}",
        crate::homeserver::encode(&id)
    );
    match bridge
        .daemon
        .post::<Value>(&path, &json!({"decision": decision, "by": by(sender)}))
    {
        Ok(_) => Ok(format!("#{number}: {decision}")),
        Err(e) if api_code(&e) == Some("approval_resolved") => {
            Ok(format!("too late: approval #{number} was already answered"))
        }
        Err(e) => Err(e),
    }
}

/// `/answer [N] TEXT`: a question gets the option numbered TEXT (or TEXT itself); a plan,
/// an elicitation or a permissions request goes through cohost's `/answer` command.
fn answer(
    bridge: &Bridge,
    session: Option<&str>,
    number: Option<u32>,
    text: &str,
    sender: &str,
) -> anyhow::Result<String> {
    let session = session.unwrap_or("");
    let found = match number {
        Some(n) => bridge.read(|s| s.ask_by_number(session, n)),
        None => bridge.read(|s| {
            s.asks
                .iter()
                .filter(|(_, a)| a.session == session && a.kind == "request" && !a.resolved)
                .min_by_key(|(_, a)| a.number)
                .map(|(id, a)| (id.clone(), a.clone()))
        }),
    };
    let Some((id, ask)) = found else {
        return Ok(match number {
            Some(n) => format!("there is no #{n} in this room"),
            None => "nothing is waiting for an answer".to_string(),
        });
    };
    let n = ask.number;
    if ask.kind != "request" {
        return Ok(format!("#{n} is an approval: /approve {n} or /decline {n}"));
    }
    if ask.text.contains("(secret:") {
        return Ok(format!("#{n} is secret: answer it on the web page"));
    }
    let result = if let (Some((qid, labels)), "question") = (&ask.question, ask.detail.as_str()) {
        let chosen = text
            .parse::<usize>()
            .ok()
            .and_then(|i| labels.get(i.wrapping_sub(1)).cloned())
            .unwrap_or_else(|| text.to_string());
        let path = format!(
            "/api/sessions/{session}/requests/{}",
            crate::homeserver::encode(&id)
        );
        bridge
            .daemon
            .post::<Value>(&path, &json!({"answers": {qid: chosen}, "by": by(sender)}))
            .map(|_| format!("#{n}: answered {chosen}"))
    } else {
        bridge
            .daemon
            .post::<Value>(
                &format!("/api/sessions/{session}/command"),
                &json!({"text": format!("/answer {id} {text}")}),
            )
            .map(|a| {
                if a["ok"] == true {
                    format!("#{n}: answered")
                } else {
                    capability(a)
                }
            })
    };
    match result {
        Err(e) if api_code(&e) == Some("request_resolved") => {
            Ok(format!("too late: #{n} was already answered"))
        }
        other => other,
    }
}
