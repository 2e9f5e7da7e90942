//! The Matrix bridge's latency beside the HTTP API's: `cargo bench --bench matrix`.
//!
//! One daemon hosting a real codex (`$COHOST_TEST_CODEX_BIN`, on the kit's mock Responses model,
//! which streams each reply at once), a real Synapse (the kit's, `$COHOST_TEST_SYNAPSE`) and this
//! build's `cohost-matrix` bridging one codex session's room. Turn by turn, alternating so both
//! paths see the same background load:
//!
//! - **room**: a person's message in the session's room (`PUT …/send/m.room.message`) → the
//!   bridge's message holding the reply's first streamed word, as the person's own `/sync`
//!   long-poll returns it (the prompt goes Matrix → bridge → `POST …/messages` → codex → the
//!   model; the word comes back model → codex → cohost's event stream → bridge → Matrix);
//! - **http**: `POST /api/sessions/{id}/messages` → the first `item.delta` of the agent's
//!   message on `GET /api/events/stream`.
//!
//! Each clock starts just before the request is written; each reader (the person's `/sync`, the
//! SSE stream) runs on its own thread and stamps what it reads when it arrives. Every turn's end
//! is waited for before the next prompt. Reports p50 and p99 of each path and their difference.
//! Exits non-zero when a reply does not come within the deadline. See docs/benchmarks.md "The
//! Matrix bridge".

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use cohost_testkit::bench::{loadavg, ms, percentile, sorted};
use cohost_testkit::codex_host::CodexFixture;
use cohost_testkit::mock_responses::Step;
use cohost_testkit::synapse::{MatrixUser, Synapse, encode};
use cohost_testkit::{Binaries, SseClient, temp_dir};

struct Cohost;
impl Binaries for Cohost {
    const COHOST: &'static str = env!("CARGO_BIN_EXE_cohost");
}

const BRIDGE: &str = env!("CARGO_BIN_EXE_cohost-matrix");
const BOT: &str = "@cohostbot:localhost";
/// Measured turns per path, after `WARMUP` unmeasured ones each.
const ROUNDS: usize = 40;
const WARMUP: usize = 3;
/// A reply or a turn's end that takes longer fails the run.
const DEADLINE: Duration = Duration::from_secs(60);
const SYNC_FILTER: &str =
    r#"{"room":{"timeline":{"limit":50,"types":["m.room.message"]}},"presence":{"types":[]}}"#;

/// The bridge, killed when dropped.
struct Bridge(Child);

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("matrix bench: FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    println!("load average at start: {}", loadavg());
    let fx: CodexFixture<Cohost> = CodexFixture::start();
    let synapse = Synapse::start();
    synapse.register("cohostbot", "bot-password");
    let alice = synapse.user("alice");
    let control = alice.create_room("cohost control", &[BOT]);
    let dir = temp_dir("cohost-matrix-bench-");
    let secret = dir.path().join("bot-password");
    std::fs::write(&secret, "bot-password\n").map_err(|e| e.to_string())?;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    let config_dir = fx.daemon.config_dir().join("cohost");
    std::fs::create_dir_all(&config_dir).map_err(|e| e.to_string())?;
    let config = config_dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[bridge.matrix]\nhomeserver = \"{}\"\nuser = \"{BOT}\"\npassword_file = \"{}\"\n\
             allowed_users = [\"{}\"]\ncontrol_room = \"{control}\"\ncwd = \"{}\"\n\
             state_file = \"{}\"\n",
            synapse.base_url(),
            secret.display(),
            alice.user_id,
            fx.work().display(),
            dir.path().join("state.json").display(),
        ),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.path().join("bridge.log")).map_err(|e| e.to_string())?;
    let mut child = Command::new(BRIDGE)
        .env("XDG_CONFIG_HOME", fx.daemon.config_dir())
        .env_remove("COHOST_CONFIG")
        .arg("--home")
        .arg(fx.daemon.home())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("spawn {BRIDGE}: {e}"))?;
    let mut ready = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?)
        .read_line(&mut ready)
        .map_err(|e| e.to_string())?;
    let _bridge = Bridge(child);
    if ready.trim() != "cohost-matrix ready" {
        return Err(format!(
            "the bridge did not get ready: {}",
            std::fs::read_to_string(dir.path().join("bridge.log")).unwrap_or_default()
        ));
    }

    // The session and its room, from the control room.
    let (session, room_id) = start_session(&alice, &control)?;
    let (status, _) = alice.join(&room_id);
    if status != 200 {
        return Err(format!("joining {room_id} answered {status}"));
    }
    let room_events = follow_room(&synapse, &alice, &room_id)?;
    let stream = follow_stream(&fx, &session)?;

    // Per path: prompt → turn.started on the stream, → first item.delta on the stream, → the
    // first word in the room (room path only).
    let mut room = Times::default();
    let mut http = Times::default();
    for round in 0..WARMUP + ROUNDS {
        let measured = round >= WARMUP;
        // Room.
        let word = format!("Room{round}");
        fx.mock
            .push(Step::text(format!("{word} two three four five")));
        let t0 = Instant::now();
        alice.send_text(&room_id, &format!("Say {word}"));
        let started = wait(&stream, &format!("turn {word} started"), |kind| {
            kind == "turn.started"
        })?;
        let delta = wait(&stream, &format!("the first delta of {word}"), |kind| {
            kind == "item.delta"
        })?;
        let shown = wait(&room_events, &format!("{word} in the room"), |body| {
            body.starts_with(&word)
        })?;
        wait(&stream, &format!("the end of turn {word}"), |kind| {
            kind == "turn.completed"
        })?;
        if measured {
            room.push(t0, started, delta, Some(shown));
        }
        // HTTP.
        let word = format!("Http{round}");
        fx.mock
            .push(Step::text(format!("{word} two three four five")));
        let t0 = Instant::now();
        let sent = fx.daemon.post(
            &format!("/api/sessions/{session}/messages"),
            &json!({"text": format!("Say {word}")}),
        );
        if sent.status != 200 {
            return Err(format!(
                "POST …/messages answered {}: {}",
                sent.status, sent.body
            ));
        }
        let started = wait(&stream, &format!("turn {word} started"), |kind| {
            kind == "turn.started"
        })?;
        let delta = wait(&stream, &format!("the first delta of {word}"), |kind| {
            kind == "item.delta"
        })?;
        wait(&stream, &format!("the end of turn {word}"), |kind| {
            kind == "turn.completed"
        })?;
        if measured {
            http.push(t0, started, delta, None);
        }
    }
    println!(
        "prompt → first streamed word, {ROUNDS} turns each path, alternating (p50 · p99, ms):"
    );
    println!(
        "  room: Matrix message → its first word in the room      {}",
        pair(&room.shown)
    );
    println!(
        "  http: POST …/messages → first item.delta on SSE         {}",
        pair(&http.delta)
    );
    println!("  where the room path's time goes:");
    println!(
        "    room message → turn.started on SSE (Matrix → bridge → cohost → codex)   {}",
        pair(&room.started)
    );
    println!(
        "    POST …/messages → turn.started on SSE (the same, from HTTP)            {}",
        pair(&http.started)
    );
    println!(
        "    room message → first item.delta on SSE                                 {}",
        pair(&room.delta)
    );
    println!(
        "    first item.delta on SSE → the word in the room (cohost → bridge → Matrix) {}",
        pair(&room.outbound)
    );
    println!("load average at end: {}", loadavg());
    Ok(())
}

/// One path's measured turns: from the prompt to each point.
#[derive(Default)]
struct Times {
    started: Vec<Duration>,
    delta: Vec<Duration>,
    shown: Vec<Duration>,
    /// From the first delta on cohost's stream to the word in the room.
    outbound: Vec<Duration>,
}

impl Times {
    fn push(&mut self, t0: Instant, started: Instant, delta: Instant, shown: Option<Instant>) {
        self.started.push(started.saturating_duration_since(t0));
        self.delta.push(delta.saturating_duration_since(t0));
        if let Some(shown) = shown {
            self.shown.push(shown.saturating_duration_since(t0));
            self.outbound.push(shown.saturating_duration_since(delta));
        }
    }
}

/// "p50 · p99" of `values`, in ms.
fn pair(values: &[Duration]) -> String {
    let sorted = sorted(values);
    format!(
        "{:>9} · {:>9}",
        ms(percentile(&sorted, 50.0)),
        ms(percentile(&sorted, 99.0))
    )
}

/// `/start codex` in the control room: (session, room) from the bot's answer.
fn start_session(alice: &MatrixUser, control: &str) -> Result<(String, String), String> {
    let asked = alice.send_text(control, "/start codex");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let answer = alice.messages(control).into_iter().find_map(|e| {
            (e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == asked.as_str())
                .then(|| e["content"]["body"].as_str().unwrap_or("").to_string())
        });
        if let Some(answer) = answer {
            let session = answer
                .strip_prefix("started ")
                .and_then(|r| r.split_whitespace().next())
                .ok_or(format!("/start answered {answer:?}"))?;
            let room = answer
                .split("its room is ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .ok_or(format!("/start answered {answer:?}"))?;
            return Ok((session.to_string(), room.to_string()));
        }
        if Instant::now() > deadline {
            return Err("no answer to /start".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The bot's new messages in `room` (not edits), each stamped when the person's `/sync`
/// long-poll returned it (a second login of the person, on its own thread; it ends quietly when
/// Synapse stops).
fn follow_room(
    synapse: &Synapse,
    alice: &MatrixUser,
    room: &str,
) -> Result<Receiver<(Instant, String)>, String> {
    let filter = encode(SYNC_FILTER);
    let (_, first) = alice.call("GET", &format!("/sync?timeout=0&filter={filter}"), None);
    let mut since = first["next_batch"]
        .as_str()
        .ok_or("no next_batch")?
        .to_string();
    let base = synapse.base_url();
    let auth = format!("Bearer {}", alice.token);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let room = room.to_string();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        loop {
            let url = format!(
                "{base}/_matrix/client/v3/sync?timeout=20000&filter={filter}&since={}",
                encode(&since)
            );
            let Ok(mut resp) = agent.get(&url).header("Authorization", &auth).call() else {
                return;
            };
            let at = Instant::now();
            let Ok(text) = resp.body_mut().read_to_string() else {
                return;
            };
            let Ok(sync) = serde_json::from_str::<Value>(&text) else {
                return;
            };
            for event in sync["rooms"]["join"][&room]["timeline"]["events"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let content = &event["content"];
                if event["sender"] == BOT && content["m.relates_to"]["rel_type"] != "m.replace" {
                    let body = content["body"].as_str().unwrap_or("").to_string();
                    if tx.send((at, body)).is_err() {
                        return;
                    }
                }
            }
            match sync["next_batch"].as_str() {
                Some(next) => since = next.to_string(),
                None => return,
            }
        }
    });
    Ok(rx)
}

/// The session's events on `GET /api/events/stream` (their `type`, and `item.delta` only for
/// the agent's message), each stamped when it was read.
fn follow_stream(
    fx: &CodexFixture<Cohost>,
    session: &str,
) -> Result<Receiver<(Instant, String)>, String> {
    let token = fx.daemon.token();
    let mut sse = SseClient::connect(
        fx.daemon.port(),
        "/api/events/stream",
        &[("Authorization", format!("Bearer {token}"))],
    )
    .map_err(|r| format!("the event stream answered {}", r.status))?;
    sse.set_read_timeout(Duration::from_secs(300));
    let session = session.to_string();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        while let Ok(Some(event)) = sse.try_next() {
            let at = Instant::now();
            let Ok(value) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            if value["session"] != session.as_str() {
                continue;
            }
            let kind = value["type"].as_str().unwrap_or("").to_string();
            if kind == "item.delta" && value["data"]["kind"] != "agentMessage" {
                continue;
            }
            if tx.send((at, kind)).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// The stamp of the first message from `rx` that `pred` takes (the ones before are dropped).
fn wait(
    rx: &Receiver<(Instant, String)>,
    what: &str,
    pred: impl Fn(&str) -> bool,
) -> Result<Instant, String> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((at, text)) if pred(&text) => return Ok(at),
            Ok(_) => {}
            Err(_) => return Err(format!("timed out waiting for {what}")),
        }
    }
}
