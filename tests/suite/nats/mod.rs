//! Federation through a real `nats-server` with JetStream (the kit's [`NatsServer`]): the
//! publisher's order, subjects and ids, its recovery from a killed server and a killed daemon,
//! its health, the refusal of a plaintext remote URL, and per-machine permissions under the
//! sample server configuration of the docs.

pub(crate) mod hub;
mod hub_mcp;
mod hub_memory;
mod hub_ops;
mod hub_requests;
mod hub_surfaces;
mod hub_tasks;
mod permissions;
mod publish;

use std::time::Duration;

use futures_util::StreamExt;

use crate::support::nats::NatsServer;
use crate::support::*;

/// How long a test waits for the publisher to catch up (a reconnect backs off up to 2 s, an ack
/// waits up to 5 s).
pub(crate) const CATCH_UP: Duration = Duration::from_secs(45);

/// One message of a machine's stream, as a JetStream consumer reads it.
#[derive(Debug, Clone)]
struct Got {
    subject: String,
    msg_id: String,
    /// The `seq` of the event in its payload.
    seq: u64,
    session: Option<String>,
}

/// Starts a daemon publishing to `nats` as `machine`, with a tmux session `work` to report in.
pub(crate) fn publishing(nats: &NatsServer, machine: &str) -> (TmuxServer, TestDaemon) {
    let (tmux, _) = tmux_with_sessions(&["work"]);
    let url = nats.url();
    let daemon = TestDaemon::start(&tmux, &["--nats", &url, "--machine", machine]);
    (tmux, daemon)
}

/// A report that is a new event every time (its prompt differs).
pub(crate) fn post(daemon: &TestDaemon, i: usize) -> u64 {
    let status = if i.is_multiple_of(2) {
        "running"
    } else {
        "waiting"
    };
    daemon.report(&json!({
        "agent": "codex",
        "status": status,
        "tmuxSession": "work",
        "threadId": "t1",
        "lastUserPrompt": format!("prompt {i}"),
    }))
}

pub(crate) fn health(daemon: &TestDaemon) -> Value {
    let resp = daemon.get_no_token("/api/health");
    assert_eq!(resp.status, 200, "{}", resp.body);
    resp.json()
}

/// Waits until the server acknowledged every event the daemon logged.
pub(crate) fn wait_published(daemon: &TestDaemon) -> Value {
    daemon.wait_for(
        "every logged event acknowledged by nats-server",
        CATCH_UP,
        |d| {
            let health = health(d);
            let federation = &health["federation"];
            (federation["link"] == "connected"
                && federation["backlog"] == 0
                && federation["lastAckedSeq"] == health["seq"])
                .then_some(health)
        },
    )
}

/// This home's identity (part of every `Nats-Msg-Id`).
fn home_id(daemon: &TestDaemon) -> String {
    std::fs::read_to_string(daemon.home().join("federation/home-id"))
        .expect("federation/home-id")
        .trim()
        .to_string()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every message of `stream`, in stream order, through an ephemeral JetStream pull consumer.
fn read_stream(url: &str, stream: &str) -> Vec<Got> {
    runtime().block_on(async {
        let client = async_nats::connect(url)
            .await
            .expect("connect to nats-server");
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream(stream).await.expect("the machine's stream");
        let total = stream.info().await.expect("stream info").state.messages as usize;
        let consumer: async_nats::jetstream::consumer::PullConsumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::Config {
                deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::All,
                ack_policy: async_nats::jetstream::consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .expect("a consumer");
        let mut all = Vec::with_capacity(total);
        while all.len() < total {
            let mut batch = consumer
                .fetch()
                .max_messages(500)
                .expires(Duration::from_secs(2))
                .messages()
                .await
                .expect("fetch");
            let before = all.len();
            while let Some(message) = batch.next().await {
                let message = message.expect("a message");
                let payload: Value =
                    serde_json::from_slice(&message.payload).expect("a JSON event");
                all.push(Got {
                    subject: message.subject.to_string(),
                    msg_id: message
                        .headers
                        .as_ref()
                        .and_then(|h| h.get("Nats-Msg-Id"))
                        .map(|v| v.as_str().to_string())
                        .unwrap_or_default(),
                    seq: payload["seq"].as_u64().expect("seq in the payload"),
                    session: payload["session"].as_str().map(str::to_string),
                });
            }
            assert!(
                all.len() > before,
                "the consumer read nothing more: {} of {total}",
                all.len()
            );
        }
        all
    })
}

/// The machine's current view in the KV bucket.
fn machine_view(url: &str, machine: &str) -> Option<Value> {
    runtime().block_on(async {
        let client = async_nats::connect(url)
            .await
            .expect("connect to nats-server");
        let js = async_nats::jetstream::new(client);
        let kv = js.get_key_value("cohost_machines").await.ok()?;
        let bytes = kv.get(machine).await.ok()??;
        serde_json::from_slice(&bytes).ok()
    })
}

/// Checks that the stream holds every event of the daemon's log exactly once, in order, with its
/// subject and id, and prints the counts.
fn assert_mirrors_the_log(daemon: &TestDaemon, nats: &NatsServer, machine: &str, what: &str) {
    let logged = seqs(&daemon.events_after(0));
    let got = read_stream(&nats.url(), &format!("COHOST_{machine}"));
    let published: Vec<u64> = got.iter().map(|g| g.seq).collect();
    let mut unique = published.clone();
    unique.dedup();
    let duplicated = published.len() - unique.len();
    let lost = logged.iter().filter(|s| !published.contains(s)).count();
    eprintln!(
        "{what}: logged {}, in the stream {}, lost {lost}, duplicated {duplicated}",
        logged.len(),
        published.len()
    );
    assert_eq!(
        published, logged,
        "the stream must mirror the log, in order"
    );
    let home = home_id(daemon);
    for g in &got {
        assert_eq!(g.msg_id, format!("{machine}:{home}:{}", g.seq), "{g:?}");
        let subject = match &g.session {
            Some(session) => format!("cohost.ev.{machine}.{session}"),
            None => format!("cohost.ev.{machine}"),
        };
        assert_eq!(g.subject, subject, "{g:?}");
    }
}
