//! The publisher: a reader of the event log, like an SSE subscriber, that mirrors every stored
//! event into the machine's JetStream stream, in order, exactly once.
//!
//! - It reads the store after its cursor (the broadcast only wakes it), so it never slows or
//!   blocks ingest: a lagging broadcast receiver is only a wake-up lost, and the store holds every
//!   event it has not published.
//! - Each event is published to `cohost.ev.<machine>[.<session>]` with `Nats-Msg-Id`
//!   `<machine>:<home id>:<seq>` and `Nats-Expected-Last-Sequence` = the stream sequence its
//!   predecessor gets, in windows of [`WINDOW`]: the server stores an event only right after its
//!   predecessor, so a window cut by a lost link (or a stale publish the client flushes after a
//!   reconnect) can never leave a later event stored before an earlier one. The stream sequence,
//!   unlike the last message id, survives a server restart whatever the duplicate window.
//! - Acks are awaited in order; the last acknowledged seq is checkpointed durably after each
//!   window (`checkpoint::save`). On any failure (a lost link, a restarted server, a refused
//!   publish) the publisher asks the stream for its last message and resumes after it: nothing
//!   is re-sent that the server holds, nothing it lacks is skipped. A re-sent event the server
//!   does hold is dropped by its duplicate window all the same.
//! - After a publish, the machine's current view (state and hosted sessions) is put into the KV
//!   bucket under its name, at most once a second.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use async_nats::jetstream::{self, message::PublishMessage as Publish, stream};
use tokio_util::sync::CancellationToken;

use super::checkpoint;
use super::connect::NatsConfig;
use super::names;
use crate::core::CoreHandle;
use crate::core::event_log::ReadError;
use crate::core::now_ms;
use crate::service::{FederationStatus, Service};

/// Events published before their acks are awaited.
pub const WINDOW: usize = 256;
/// How long the server's ack of one publish may take.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the stream keeps a message id to drop a duplicate of it.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);
/// How often the machine's view is put into the KV bucket at most.
const VIEW_INTERVAL: Duration = Duration::from_secs(1);

/// What the publisher needs: the log, the service (for the machine's view), the home (for its
/// files), the names, and where it reports.
pub struct Publisher {
    pub core: CoreHandle,
    pub service: Service,
    pub home: PathBuf,
    pub machine: String,
    pub nats: NatsConfig,
    pub status: FederationStatus,
}

/// Where the next window starts: the last event seq the stream holds of this home, and the
/// stream's last sequence.
struct Cursor {
    seq: u64,
    stream_seq: u64,
}

impl Publisher {
    /// A status with the names filled in, before the publisher runs.
    pub fn initial_status(nats: &NatsConfig, machine: &str) -> crate::protocol::FederationHealth {
        crate::protocol::FederationHealth {
            url: nats.url.clone(),
            stream: names::stream_name(machine),
            link: "connecting".to_string(),
            ..Default::default()
        }
    }

    fn set(&self, f: impl FnOnce(&mut crate::protocol::FederationHealth)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn failed(&self, error: &anyhow::Error) {
        let text = format!("{error:#}");
        tracing::warn!(error = %text, "federation: publishing failed; resuming from the stream's last message");
        self.set(|s| {
            s.last_error = Some(text);
            s.last_error_at = Some(now_ms());
        });
    }

    /// Runs until `cancel`: connects (in the background), then publishes, resuming after every
    /// failure with a growing delay (100 ms to 2 s).
    pub async fn run(self, cancel: CancellationToken) {
        let home_id = match checkpoint::home_id(&self.home) {
            Ok(id) => id,
            Err(error) => {
                self.failed(&error);
                return;
            }
        };
        let (client, mut refusals) = match self
            .nats
            .connect(&self.machine, "publisher", Arc::clone(&self.status))
            .await
        {
            Ok(connected) => connected,
            Err(error) => {
                self.failed(&error);
                return;
            }
        };
        let link = tokio::spawn(watch_link(
            client.clone(),
            Arc::clone(&self.status),
            cancel.clone(),
        ));
        let js = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .build(client);
        let mut delay = Duration::from_millis(100);
        loop {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => break,
                outcome = self.publish(&js, &home_id, &cancel) => outcome,
                refusal = refusals.refused() => {
                    // A refused permission is the server's configuration, not a passing
                    // failure: trying again would only be refused again (and an unanswered
                    // request times out without saying why). Publishing stops, visibly; the log
                    // keeps every event, and a restart with fixed permissions resumes after the
                    // stream's last message.
                    link.abort();
                    tracing::error!(error = %refusal, "federation: publishing stopped: the NATS server refused a permission; nothing is lost locally, restart the daemon once the permissions are fixed");
                    self.set(|s| {
                        s.link = "refused".to_string();
                        s.last_error = Some(refusal);
                        s.last_error_at = Some(now_ms());
                    });
                    return;
                }
            };
            match outcome {
                Ok(()) => break,
                Err(error) => self.failed(&error),
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        link.abort();
    }

    /// Makes sure of the stream, finds where to resume, and publishes until cancelled (`Ok`) or
    /// a failure (`Err`).
    async fn publish(
        &self,
        js: &jetstream::Context,
        home_id: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        let stream_name = names::stream_name(&self.machine);
        let stream = ensure_stream(js, &self.machine).await?;
        let mut cursor = self.resume(&stream, &stream_name, home_id).await?;
        // The view is a convenience for a hub: a bucket that cannot be made never holds up the
        // events (`put_view` tries again).
        let mut kv = None;
        let mut view_at: Option<Instant> = None;
        let mut wake = self.core.subscribe();
        let store = Arc::clone(&self.core.store);
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let page = match store.read_after_async(cursor.seq, WINDOW).await {
                Ok(page) => page,
                Err(ReadError::CursorExpired { oldest, .. }) => {
                    // Retention deleted events before they could be published: say so, and go
                    // on from the oldest one left.
                    self.failed(&anyhow!(
                        "events {} to {} were deleted by retention before the server acknowledged them",
                        cursor.seq + 1,
                        oldest.saturating_sub(1)
                    ));
                    cursor.seq = oldest.saturating_sub(1);
                    continue;
                }
                Err(error) => return Err(error).context("failed to read the event log"),
            };
            if page.events.is_empty() {
                if view_at.is_none_or(|at| at.elapsed() >= VIEW_INTERVAL) {
                    self.put_view(js, &mut kv, cursor.seq).await;
                    view_at = Some(Instant::now());
                }
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    woken = wake.recv() => {
                        if matches!(woken, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                            return Ok(());
                        }
                    }
                    _ = tokio::time::sleep(VIEW_INTERVAL) => {}
                }
                continue;
            }
            let mut pending = Vec::with_capacity(page.events.len());
            let mut failure = None;
            for (k, event) in page.events.iter().filter(|e| !e.ephemeral).enumerate() {
                let id = names::msg_id(&self.machine, home_id, event.seq);
                let subject = names::subject(&self.machine, event.session.as_deref());
                let message = Publish::build()
                    .payload(bytes::Bytes::copy_from_slice(event.json.as_bytes()))
                    .message_id(&id)
                    .expected_last_sequence(cursor.stream_seq + k as u64);
                match js.send_publish(subject, message).await {
                    Ok(ack) => pending.push((event.seq, ack)),
                    Err(error) => {
                        failure =
                            Some(anyhow!(error).context(format!("publishing seq {}", event.seq)));
                        break;
                    }
                }
            }
            let before = cursor.seq;
            for (seq, ack) in pending {
                match ack.await {
                    Ok(ack) => {
                        cursor.seq = seq;
                        cursor.stream_seq = ack.sequence;
                    }
                    Err(error) => {
                        failure =
                            Some(anyhow!(error).context(format!("the server's ack of seq {seq}")));
                        break;
                    }
                }
            }
            if cursor.seq != before {
                self.checkpoint(&stream_name, cursor.seq).await?;
            }
            if let Some(failure) = failure {
                return Err(failure);
            }
            if view_at.is_none_or(|at| at.elapsed() >= VIEW_INTERVAL) {
                self.put_view(js, &mut kv, cursor.seq).await;
                view_at = Some(Instant::now());
            }
        }
    }

    /// Saves the checkpoint (synced) and shows the progress.
    async fn checkpoint(&self, stream: &str, seq: u64) -> anyhow::Result<()> {
        let home = self.home.clone();
        let name = stream.to_string();
        tokio::task::spawn_blocking(move || checkpoint::save(&home, &name, seq))
            .await
            .map_err(|e| anyhow!("the checkpoint task failed: {e}"))?
            .context("failed to write the publish checkpoint")?;
        self.set(|s| {
            s.last_acked_seq = seq;
            s.last_ack_at = Some(now_ms());
            s.last_error = None;
            s.last_error_at = None;
        });
        Ok(())
    }

    /// Where to resume: after the stream's last message when it is this home's (whatever the
    /// checkpoint says: the stream is what the server acknowledged); after the checkpoint when
    /// the stream's last message is another's; from the start when the stream is empty.
    async fn resume(
        &self,
        stream: &stream::Stream,
        stream_name: &str,
        home_id: &str,
    ) -> anyhow::Result<Cursor> {
        let saved = {
            let home = self.home.clone();
            let name = stream_name.to_string();
            tokio::task::spawn_blocking(move || checkpoint::load(&home, &name))
                .await
                .map_err(|e| anyhow!("the checkpoint task failed: {e}"))??
        };
        let info = stream
            .get_info()
            .await
            .with_context(|| format!("failed to read the stream {stream_name}"))?;
        let cursor = if info.state.messages == 0 {
            if saved > 0 {
                tracing::warn!(
                    checkpoint = saved,
                    "federation: the stream holds none of the events published before; publishing the retained log again"
                );
            }
            Cursor {
                seq: 0,
                stream_seq: info.state.last_sequence,
            }
        } else {
            let last = stream
                .get_raw_message(info.state.last_sequence)
                .await
                .with_context(|| format!("failed to read the last message of {stream_name}"))?;
            let id = last
                .headers
                .get(async_nats::header::NATS_MESSAGE_ID)
                .map(|v| v.as_str().to_string());
            match id
                .as_deref()
                .and_then(|id| names::seq_of_msg_id(id, &self.machine, home_id))
            {
                Some(seq) => Cursor {
                    seq,
                    stream_seq: info.state.last_sequence,
                },
                None => {
                    tracing::warn!(
                        last = ?id,
                        "federation: the stream's last message is not this home's (is the machine name used twice?); resuming after the checkpoint"
                    );
                    Cursor {
                        seq: saved,
                        stream_seq: info.state.last_sequence,
                    }
                }
            }
        };
        if cursor.seq != saved {
            tracing::info!(
                checkpoint = saved,
                stream = cursor.seq,
                "federation: resuming after the stream's last message"
            );
        }
        self.checkpoint(stream_name, cursor.seq).await?;
        Ok(cursor)
    }

    /// Puts the machine's current view into the KV bucket (made first when `kv` is `None`); a
    /// failure is shown, not fatal.
    async fn put_view(
        &self,
        js: &jetstream::Context,
        kv: &mut Option<jetstream::kv::Store>,
        acked: u64,
    ) {
        if kv.is_none() {
            match ensure_bucket(js).await {
                Ok(store) => *kv = Some(store),
                Err(error) => return self.failed(&error),
            }
        }
        let Some(kv) = kv.as_ref() else { return };
        let view = serde_json::json!({
            "machine": self.machine,
            "ackedSeq": acked,
            "at": now_ms(),
            "state": self.service.state_view(),
            "sessions": self.service.sessions(),
        });
        let bytes = match serde_json::to_vec(&view) {
            Ok(bytes) => bytes,
            Err(error) => return self.failed(&anyhow!(error)),
        };
        match tokio::time::timeout(ACK_TIMEOUT, kv.put(&self.machine, bytes.into())).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => self.failed(&anyhow!(error).context("putting the machine's view")),
            Err(_) => self.failed(&anyhow!("putting the machine's view timed out")),
        }
    }
}

/// Creates the machine's stream, or checks the one there: file storage, both subjects, the
/// duplicate window.
async fn ensure_stream(js: &jetstream::Context, machine: &str) -> anyhow::Result<stream::Stream> {
    let name = names::stream_name(machine);
    let subjects = names::stream_subjects(machine);
    let stream = js
        .get_or_create_stream(stream::Config {
            name: name.clone(),
            subjects: subjects.clone(),
            storage: stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await
        .with_context(|| format!("failed to create or find the stream {name}"))?;
    let config = &stream.cached_info().config;
    if let Some(missing) = subjects.iter().find(|s| !config.subjects.contains(s)) {
        anyhow::bail!(
            "the stream {name} exists without the subject {missing} (it has {:?}); fix or delete it",
            config.subjects
        );
    }
    Ok(stream)
}

/// The KV bucket of the machines' views, made when missing (one value per key).
///
/// The bucket's stream is made here with the KV conventions (`KV_<bucket>`, `$KV.<bucket>.>`,
/// one message per subject, rollups, direct gets) rather than by `create_key_value`, which first
/// asks for the account's info in a shape nats-server 2.9 does not answer.
pub(super) async fn ensure_bucket(js: &jetstream::Context) -> anyhow::Result<jetstream::kv::Store> {
    if let Ok(kv) = js.get_key_value(names::KV_BUCKET).await {
        return Ok(kv);
    }
    let bucket = names::KV_BUCKET;
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        storage: stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    })
    .await
    .with_context(|| format!("failed to create the KV bucket {bucket}"))?;
    js.get_key_value(bucket)
        .await
        .with_context(|| format!("failed to open the KV bucket {bucket}"))
}

/// Shows the client's link state as it changes: `connected`, else `disconnected` (the status
/// starts as `connecting`, before the client was first looked at).
async fn watch_link(
    client: async_nats::Client,
    status: FederationStatus,
    cancel: CancellationToken,
) {
    let mut interval = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = interval.tick() => {}
        }
        let link = match client.connection_state() {
            async_nats::connection::State::Connected => "connected",
            _ => "disconnected",
        };
        let mut status = status.lock().unwrap_or_else(|e| e.into_inner());
        if status.link != link {
            tracing::info!(link, "federation: the NATS link changed");
            status.link = link.to_string();
        }
    }
}
