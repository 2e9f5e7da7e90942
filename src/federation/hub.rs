//! The hub consumer (`serve --hub`): a reader of every other machine's stream and view, which
//! fills the service's [`HubWorld`] — never this machine's log.
//!
//! - The KV bucket `cohost_machines` is watched: each machine's view (state and hosted
//!   sessions) replaces the last one, and its time is the machine's heartbeat (the publisher
//!   puts it about once a second while it runs). A machine heard of here gets a consumer.
//! - Each machine's stream `COHOST_<machine>` is read through a durable pull consumer
//!   `cohost_hub_<hub machine>` (ack policy `all`): a window of messages is appended to the
//!   machine's copy (`mirror`) and synced, then added to the world, then acknowledged, so a
//!   restarted hub reads its copies back and the consumer resumes right after the last
//!   acknowledged message. A message delivered again (not acknowledged before a kill) is
//!   dropped by its event seq and counted.
//! - A consumer whose acknowledged floor is past the hub's copy (the hub's home was wiped) is
//!   made anew from the copy's end, and a stream made anew (a new server) is read from its
//!   start: the event seqs drop what the hub already holds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow};
use async_nats::jetstream::{self, consumer};
use futures_util::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

use super::connect::NatsConfig;
use super::mirror::{self, Mirror};
use super::names;
use crate::protocol::RemoteReply;
use crate::service::{
    COMMAND_TIMEOUT, CommandRequest, FederationStatus, HubWorld, RemoteEvent, RemoteView,
};

/// Messages appended and acknowledged together at most.
const BATCH: usize = 256;
/// How long a JetStream request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest pause between two attempts after a failure.
const MAX_DELAY: Duration = Duration::from_secs(2);

/// What the hub consumer needs: the world it fills, the home (for the copies), this machine's
/// name (its own stream is not consumed: its events are in its log) and the server.
pub struct Hub {
    pub world: Arc<HubWorld>,
    pub home: PathBuf,
    pub machine: String,
    pub nats: NatsConfig,
    /// Where a permission the server refuses the hub is shown (the publisher's status).
    pub status: FederationStatus,
}

/// Sends the hub's commands to their machines by NATS request/reply (`cohost.cmd.<machine>`),
/// each in its own task, and hands back the machine's answer or why there was none.
async fn send_commands(
    client: async_nats::Client,
    mut requests: tokio::sync::mpsc::Receiver<CommandRequest>,
    cancel: CancellationToken,
) {
    loop {
        let request = tokio::select! {
            _ = cancel.cancelled() => return,
            request = requests.recv() => request,
        };
        let Some(request) = request else { return };
        let client = client.clone();
        tokio::spawn(async move {
            let subject = names::command_subject(&request.machine);
            let answer = match serde_json::to_vec(&request.command) {
                Err(error) => Err(format!("the command could not be written: {error}")),
                Ok(payload) => {
                    match tokio::time::timeout(
                        COMMAND_TIMEOUT,
                        client.request(subject, payload.into()),
                    )
                    .await
                    {
                        Err(_) => Err(format!("no answer within {COMMAND_TIMEOUT:?}")),
                        Ok(Err(error))
                            if error.kind() == async_nats::RequestErrorKind::NoResponders =>
                        {
                            Err("nothing takes its commands (its daemon is stopped, or runs without --nats-commands)".to_string())
                        }
                        Ok(Err(error)) => Err(error.to_string()),
                        Ok(Ok(message)) => serde_json::from_slice::<RemoteReply>(&message.payload)
                            .map_err(|e| format!("its answer is not readable: {e}")),
                    }
                }
            };
            let _ = request.reply.send(answer);
        });
    }
}

/// How a read of a machine's stream ended without an error.
enum Ended {
    Cancelled,
    /// A message past the next one the hub needs: the consumer is made anew.
    Gap {
        expected: u64,
        got: u64,
    },
}

/// Milliseconds since the epoch of a NATS time.
fn ms(time: impl Into<SystemTime>) -> u64 {
    time.into()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The durable consumer's name on every machine's stream.
pub fn durable_name(hub: &str) -> String {
    format!("cohost_hub_{hub}")
}

impl Hub {
    /// Runs until `cancel`: reads the copies back, connects, watches the views and follows
    /// every machine's stream.
    pub async fn run(self, cancel: CancellationToken) {
        let this = Arc::new(self);
        let mut followed = std::collections::HashSet::new();
        let tasks = tokio_util::task::TaskTracker::new();
        // A refused permission is recorded in the status (and logged) by the connection; the
        // hub's loops go on (each machine's stream on its own), and health and doctor name it.
        let client = match this
            .nats
            .connect(&this.machine, "hub", Arc::clone(&this.status))
            .await
        {
            Ok((client, _refusals)) => client,
            Err(error) => {
                tracing::error!(error = %format!("{error:#}"), "hub: cannot connect to NATS");
                return;
            }
        };
        let (commands, requests) = tokio::sync::mpsc::channel(64);
        this.world.set_command_link(commands);
        this.world
            .set_cold(Arc::new(mirror::Copies::new(this.home.clone())));
        tasks.spawn(send_commands(client.clone(), requests, cancel.clone()));
        let js = jetstream::ContextBuilder::new()
            .timeout(REQUEST_TIMEOUT)
            .build(client);
        for machine in mirror::machines(&this.home) {
            if machine != this.machine && followed.insert(machine.clone()) {
                tasks.spawn(Arc::clone(&this).follow(js.clone(), machine, cancel.clone()));
            }
        }
        let mut delay = Duration::from_millis(100);
        loop {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => break,
                outcome = this.watch_views(&js, &mut followed, &tasks, &cancel) => outcome,
            };
            if let Err(error) = outcome {
                tracing::warn!(error = %format!("{error:#}"), "hub: watching the machines' views failed; watching again");
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_DELAY);
        }
        tasks.close();
        tasks.wait().await;
    }

    /// Watches the KV bucket: every machine's view and heartbeat; a machine seen for the first
    /// time gets a consumer.
    async fn watch_views(
        self: &Arc<Self>,
        js: &jetstream::Context,
        followed: &mut std::collections::HashSet<String>,
        tasks: &tokio_util::task::TaskTracker,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        let kv = super::publisher::ensure_bucket(js).await?;
        let mut watch = kv
            .watch_all()
            .await
            .context("failed to watch the machines' views")?;
        while let Some(entry) = watch.next().await {
            let entry = entry.context("the machines' views")?;
            if entry.operation != jetstream::kv::Operation::Put || entry.key == self.machine {
                continue;
            }
            let machine = entry.key.clone();
            if names::check_machine(&machine).is_err() {
                continue;
            }
            if followed.insert(machine.clone()) {
                tasks.spawn(Arc::clone(self).follow(js.clone(), machine.clone(), cancel.clone()));
            }
            match serde_json::from_slice::<RemoteView>(&entry.value) {
                Ok(view) if view.machine == machine => self.world.set_view(view, ms(entry.created)),
                Ok(view) => self.world.set_error(
                    &machine,
                    Some(format!(
                        "the view under `{machine}` names the machine `{}`",
                        view.machine
                    )),
                ),
                Err(error) => self.world.set_error(
                    &machine,
                    Some(format!("the machine's view is not readable: {error}")),
                ),
            }
        }
        Err(anyhow!("the watch of the machines' views ended"))
    }

    /// Follows one machine's stream until `cancel`, again after every failure.
    async fn follow(
        self: Arc<Self>,
        js: jetstream::Context,
        machine: String,
        cancel: CancellationToken,
    ) {
        let opened = {
            let home = self.home.clone();
            let name = machine.clone();
            let world = Arc::clone(&self.world);
            tokio::task::spawn_blocking(move || {
                Mirror::open(&home, &name, |held| {
                    world.add_events(&name, held, None);
                })
            })
            .await
        };
        let mut copy = match opened {
            Ok(Ok((copy, held))) => {
                tracing::info!(%machine, events = held, "hub: read the machine's copy back");
                self.world.know(&machine);
                copy
            }
            Ok(Err(error)) => {
                return self.world.set_error(&machine, Some(format!("{error:#}")));
            }
            Err(error) => return self.world.set_error(&machine, Some(error.to_string())),
        };
        let mut delay = Duration::from_millis(100);
        let mut anew = false;
        loop {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return,
                outcome = self.consume(&js, &machine, &mut copy, anew, &cancel) => outcome,
            };
            anew = false;
            match outcome {
                Ok(Ended::Cancelled) => return,
                Ok(Ended::Gap { expected, got }) => {
                    tracing::warn!(%machine, expected, got, "hub: the consumer skipped messages (delivered to a hub process that died); making it anew after what the hub holds");
                    anew = true;
                    continue;
                }
                Err(error) => {
                    let text = format!("{error:#}");
                    tracing::warn!(%machine, error = %text, "hub: reading the machine's stream failed; resuming");
                    self.world.set_error(&machine, Some(text));
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_DELAY);
        }
    }

    /// The machine's durable consumer, resuming after what the copy holds; made anew (from the
    /// copy's end) when `anew`, or when it is past the copy.
    async fn consumer(
        &self,
        js: &jetstream::Context,
        machine: &str,
        copy: &Mirror,
        anew: bool,
    ) -> anyhow::Result<consumer::PullConsumer> {
        let stream_name = names::stream_name(machine);
        let stream = js
            .get_stream(&stream_name)
            .await
            .with_context(|| format!("no stream {stream_name} yet"))?;
        let last = stream
            .get_info()
            .await
            .with_context(|| format!("failed to read the stream {stream_name}"))?
            .state
            .last_sequence;
        let durable = durable_name(&self.machine);
        // A stream shorter than the copy was made anew: read it from its start.
        let start = if last < copy.stream_seq {
            1
        } else {
            copy.stream_seq + 1
        };
        if let Ok(info) = stream.consumer_info(&durable).await {
            let floor = info.ack_floor.stream_sequence;
            if !anew && floor <= copy.stream_seq && last >= copy.stream_seq {
                return stream
                    .get_consumer::<consumer::pull::Config>(&durable)
                    .await
                    .map_err(|e| anyhow!("failed to open the consumer {durable}: {e}"));
            }
            tracing::warn!(%machine, floor, held = copy.stream_seq, "hub: the durable consumer is past what the hub holds; making it anew");
            stream
                .delete_consumer(&durable)
                .await
                .with_context(|| format!("failed to delete the consumer {durable}"))?;
        }
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(durable.clone()),
                description: Some(format!("the cohost hub {}", self.machine)),
                deliver_policy: if start <= 1 {
                    consumer::DeliverPolicy::All
                } else {
                    consumer::DeliverPolicy::ByStartSequence {
                        start_sequence: start,
                    }
                },
                ack_policy: consumer::AckPolicy::All,
                ack_wait: Duration::from_secs(30),
                ..Default::default()
            })
            .await
            .with_context(|| format!("failed to create the consumer {durable} on {stream_name}"))
    }

    /// Reads the machine's stream: windows of messages appended to the copy, added to the
    /// world, then acknowledged (the last one acknowledges the window).
    ///
    /// The stream's sequences are consecutive, so a message past the next one the copy needs
    /// is a gap: messages delivered to a pull request of a hub process that died (its requests
    /// outlive it on the server until they expire), which an `all` ack would acknowledge. The
    /// window is kept up to the gap, nothing is acknowledged, and the consumer is made anew.
    async fn consume(
        &self,
        js: &jetstream::Context,
        machine: &str,
        copy: &mut Mirror,
        anew: bool,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Ended> {
        let consumer = self.consumer(js, machine, copy, anew).await?;
        // After the consumer is made anew, its first message sets where the stream starts (a
        // stream made anew, or one whose oldest messages are gone).
        let mut baseline = anew || copy.stream_seq == 0;
        let mut next_stream = copy.stream_seq + 1;
        let mut messages = consumer
            .messages()
            .await
            .context("failed to pull the machine's messages")?;
        self.world.set_error(machine, None);
        loop {
            let first = tokio::select! {
                _ = cancel.cancelled() => return Ok(Ended::Cancelled),
                next = messages.next() => next,
            };
            let Some(first) = first else {
                return Err(anyhow!("the machine's messages ended"));
            };
            let mut window = vec![first.map_err(|e| anyhow!(e))?];
            while window.len() < BATCH {
                match messages.next().now_or_never() {
                    Some(Some(message)) => window.push(message.map_err(|e| anyhow!(e))?),
                    _ => break,
                }
            }
            let held = self.world.last_seq(machine);
            let mut fresh: Vec<(u64, RemoteEvent)> = Vec::with_capacity(window.len());
            let mut heard = None;
            let mut duplicates = 0;
            let mut gap = None;
            for message in &window {
                let info = message.info().map_err(|e| anyhow!(e))?;
                if baseline {
                    next_stream = info.stream_sequence;
                    baseline = false;
                }
                if info.stream_sequence < next_stream {
                    duplicates += 1;
                    continue;
                }
                if info.stream_sequence > next_stream {
                    gap = Some(Ended::Gap {
                        expected: next_stream,
                        got: info.stream_sequence,
                    });
                    break;
                }
                next_stream += 1;
                heard = heard.max(Some(ms(info.published)));
                let json = std::str::from_utf8(&message.payload).map_err(|_| {
                    anyhow!("stream sequence {} is not UTF-8", info.stream_sequence)
                })?;
                let event = mirror::parse(json).with_context(|| {
                    format!("stream sequence {} of {machine}", info.stream_sequence)
                })?;
                if event.seq <= held.max(fresh.last().map_or(0, |(_, e)| e.seq)) {
                    duplicates += 1;
                    continue;
                }
                fresh.push((info.stream_sequence, event));
            }
            copy.append(&fresh)
                .await
                .with_context(|| format!("failed to write the hub's copy of {machine}"))?;
            let added = self
                .world
                .add_events(machine, fresh.into_iter().map(|(_, e)| e), heard);
            if duplicates > 0 {
                tracing::info!(%machine, duplicates, added = added.added, "hub: dropped events delivered again");
                self.world.count_duplicates(machine, duplicates);
            }
            if let Some(gap) = gap {
                return Ok(gap);
            }
            if let Some(last) = window.last() {
                last.ack()
                    .await
                    .map_err(|e| anyhow!(e))
                    .context("failed to acknowledge the window")?;
            }
        }
    }
}
