//! The core, the single writer (run by its thread or by a lone caller: `inputs.rs`): start-up
//! (snapshot + log replay), batches admitted, sequenced, logged, applied, pushed to the ring,
//! broadcast and acknowledged, in that order.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use tokio::sync::{broadcast, mpsc, oneshot};

use super::damage::{damage_report, for_event, log_damage};
use super::event_log::{self, EventLog};
use super::inputs::Shared;
use super::snapshot::{self, Snapshot};
use super::store::{SessionIndex, Store};
use super::streaming::ephemeral_line;
use super::{
    BROADCAST_CAPACITY, CoreConfig, CoreError, CoreHandle, CoreInput, Guard, INPUT_CAPACITY, State,
    StorageError, StoredEvent, format, log_line, notify, now_ms, ring, sessions, tracker,
};
use crate::protocol::{
    DaemonInfo, Event, EventKind, InstanceRef, LogDamage, SCHEMA_VERSION, SeqRange,
};

/// The most inputs handled in one batch (one write, one fsync).
const MAX_BATCH: usize = 1024;

/// What start-up found, for logging and tests.
#[derive(Debug, Clone)]
pub struct StartInfo {
    pub head: u64,
    pub snapshot_seq: u64,
    pub replayed: usize,
    pub truncated_bytes: u64,
    /// What was wrong with the log, also written as the `log.damaged` event.
    pub damage: Option<LogDamage>,
}

pub(super) struct Core {
    config: CoreConfig,
    log: EventLog,
    store: Arc<Store>,
    state: Arc<RwLock<State>>,
    bus: broadcast::Sender<Arc<StoredEvent>>,
    seq: u64,
    session_seqs: HashMap<String, u64>,
    /// The answers of the batch just handled, sent (`Core::take_replies`)
    /// once the core is released and the batch counted as handled (`inputs`).
    replies: Vec<(Reply, Result<u64, CoreError>)>,
    /// A test's panic, planted in the next batch right after its write (`panic_tests`).
    #[cfg(test)]
    pub(super) panic_after_write: bool,
}

/// Opens the log, rebuilds state from the snapshot and the log after it, writes
/// `daemon.started`, and starts the core thread.
pub fn start(
    config: CoreConfig,
) -> anyhow::Result<(CoreHandle, std::thread::JoinHandle<()>, StartInfo)> {
    use anyhow::Context as _;
    let mut notes = Vec::new();
    let snapshot = match Snapshot::load(&config.home)? {
        snapshot::Loaded::Found(snapshot) => *snapshot,
        snapshot::Loaded::Missing => Snapshot::default(),
        snapshot::Loaded::Newer { schema } => anyhow::bail!(
            "{} has format {schema}, written by a newer cohost; this cohost {} reads snapshot formats up to {}",
            config.home.join("snapshot.json").display(),
            env!("CARGO_PKG_VERSION"),
            format::SNAPSHOT_FORMAT
        ),
        snapshot::Loaded::Unusable { reason, damaged } => {
            tracing::warn!("{reason}; replaying the whole log");
            if damaged {
                notes.push(format!(
                    "{reason}; the state was rebuilt from the log alone"
                ));
            }
            Snapshot::default()
        }
    };
    let snapshot_seq = snapshot.seq;
    let (log, mut recovery) =
        EventLog::open(config.log.clone(), snapshot_seq).with_context(|| {
            format!(
                "failed to open the event log in {}",
                config.log.dir.display()
            )
        })?;

    let mut state = snapshot.state;
    state.tracker.set_config(config.tracker);
    let mut session_seqs = snapshot.session_seqs;
    let mut ring = ring::Ring::default();
    let replayed = recovery.lines.len();
    for line in std::mem::take(&mut recovery.lines) {
        match serde_json::from_str::<Event>(&line.json) {
            Ok(event) => state.apply(&event),
            // Kinds from a newer version are kept in the log and the ring but not applied.
            Err(error) => {
                tracing::warn!(seq = line.seq, %error, "an event in the log has an unknown shape")
            }
        }
        if let (Some(session), Some(session_seq)) = (&line.session, line.session_seq) {
            session_seqs.insert(session.clone(), session_seq);
        }
        ring.push(Arc::new(StoredEvent::from(line)));
    }
    let damage = damage_report(&recovery, snapshot_seq, &config.log.quarantine, notes);
    match (&damage, &recovery.quarantine_summary) {
        (Some(damage), summary) => log_damage(damage, summary.as_deref()),
        // Only lines an earlier start quarantined and could not take out: not news, but
        // still in the segment.
        (None, Some(summary)) => tracing::warn!("the event log: {summary}"),
        (None, None) => {}
    }
    // Above every seq the log or the snapshot may have used: a seq a client has seen is
    // never given to another event.
    let seq = recovery.head.max(snapshot_seq);
    let mut lost: Vec<SeqRange> = damage
        .iter()
        .flat_map(|damage| &damage.missing)
        .map(|range| SeqRange {
            from: range.from,
            to: range.to,
        })
        .chain(recovery.known_missing.iter().copied())
        .collect();
    lost.sort_by_key(|range| range.from);
    let store = Arc::new(Store::new(
        ring,
        log.reader(),
        seq,
        SessionIndex::new(std::mem::take(&mut recovery.by_session)),
        lost,
    ));
    let (bus, _) = broadcast::channel(BROADCAST_CAPACITY);
    let state = Arc::new(RwLock::new(state));
    let info = StartInfo {
        head: seq,
        snapshot_seq,
        replayed,
        truncated_bytes: recovery.truncated_bytes,
        damage: damage.clone(),
    };
    let mut core = Core {
        config,
        log,
        store: Arc::clone(&store),
        state: Arc::clone(&state),
        bus: bus.clone(),
        seq,
        session_seqs,
        replies: Vec::new(),
        #[cfg(test)]
        panic_after_write: false,
    };
    let mut first = vec![Entry::stored(
        None,
        EventKind::DaemonStarted(daemon_info()),
        None,
    )];
    let mut unlisted = Vec::new();
    if let Some(damage) = damage {
        let (event, rest) = for_event(&damage);
        unlisted = rest;
        first.push(Entry::stored(None, EventKind::LogDamaged(event), None));
    }
    let started = core.write_batch(first);
    if let Err(error) = started {
        anyhow::bail!("failed to write to the event log: {error}");
    }
    if let Err(error) = event_log::record_gaps(&core.config.log.quarantine, &unlisted) {
        tracing::warn!(
            file = %core.config.log.quarantine.display(),
            %error,
            "could not record the missing ranges the log.damaged event does not list; the next start reports them again"
        );
    }
    let (tx, rx) = mpsc::channel(INPUT_CAPACITY);
    let shared = Arc::new(Shared::new(core));
    let thread = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("cohost-core".into())
            .spawn(move || shared.run(rx))
            .context("failed to start the core thread")?
    };
    Ok((
        CoreHandle {
            tx,
            shared,
            store,
            state,
            bus,
        },
        thread,
        info,
    ))
}

pub fn daemon_info() -> DaemonInfo {
    DaemonInfo {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

pub(super) type Reply = oneshot::Sender<Result<u64, CoreError>>;

/// A batch's answers, held back until the batch is counted as handled (`inputs`): a caller
/// that sends its next event the moment it has its answer then finds the core idle.
#[must_use]
pub(super) struct Replies(Vec<(Reply, Result<u64, CoreError>)>);

impl Replies {
    pub(super) fn send(self) {
        for (reply, answer) in self.0 {
            let _ = reply.send(answer);
        }
    }
}

/// One entry of a batch: an event to store (with its caller's reply) or a live-only one.
struct Entry {
    session: Option<String>,
    kind: EventKind,
    guard: Guard,
    reply: Option<Reply>,
    ephemeral: bool,
}

impl Entry {
    /// A caller's append, admitted if `guard` holds.
    fn append(session: Option<String>, kind: EventKind, guard: Guard, reply: Reply) -> Self {
        Entry {
            guard,
            ..Entry::stored(session, kind, Some(reply))
        }
    }

    fn stored(session: Option<String>, kind: EventKind, reply: Option<Reply>) -> Self {
        Entry {
            session,
            kind,
            guard: Guard::None,
            reply,
            ephemeral: false,
        }
    }
}

/// One session's instances as a batch leaves them (see `handle_batch`).
#[derive(Default)]
struct BatchInstances {
    keys: HashSet<String>,
    reported: HashSet<String>,
    tokenless_added: Vec<(String, String)>,
}

impl Core {
    /// Handles `first` and what else is queued as one batch, up to [`MAX_BATCH`] inputs or a
    /// shutdown. Returns how many inputs it took (the shutdown not counted) and the shutdown's
    /// reply if it met one.
    pub(super) fn step(
        &mut self,
        first: CoreInput,
        rx: &mut mpsc::Receiver<CoreInput>,
    ) -> (usize, Option<oneshot::Sender<()>>) {
        let mut batch = Vec::new();
        let mut tick = false;
        let mut shutdown = None;
        let mut taken = 0;
        let mut next = Some(first);
        while let Some(input) = next {
            match input {
                CoreInput::Append {
                    session,
                    kind,
                    guard,
                    reply,
                } => batch.push(Entry::append(session, kind, guard, reply)),
                CoreInput::Publish { session, kind } => batch.push(Entry {
                    session,
                    kind,
                    guard: Guard::None,
                    reply: None,
                    ephemeral: true,
                }),
                CoreInput::Tick => tick = true,
                CoreInput::Shutdown { reply } => {
                    shutdown = Some(reply);
                    break;
                }
            }
            taken += 1;
            next = if batch.len() < MAX_BATCH {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        if tick {
            let due = self
                .state
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .tracker
                .due(now_ms());
            batch.extend(
                due.into_iter()
                    .map(|(session, kind)| Entry::stored(Some(session), kind, None)),
            );
        }
        if !batch.is_empty() {
            self.handle_batch(batch);
        }
        (taken, shutdown)
    }

    /// Takes the answers of the batch just handled, sent once the core is released.
    pub(super) fn take_replies(&mut self) -> Replies {
        Replies(std::mem::take(&mut self.replies))
    }

    /// One append handled as a batch of its own, on its caller's thread (`inputs::Shared::append`).
    pub(super) fn append_one(
        &mut self,
        session: Option<String>,
        kind: EventKind,
        guard: Guard,
        reply: Reply,
    ) {
        self.handle_batch(vec![Entry::append(session, kind, guard, reply)]);
    }

    /// Refuses the inputs that raced the shutdown rather than dropping them silently, then
    /// writes `daemon.stopped`, syncs and saves the snapshot.
    pub(super) fn stop(
        &mut self,
        rx: &mut mpsc::Receiver<CoreInput>,
        reply: Option<oneshot::Sender<()>>,
    ) {
        rx.close();
        while let Ok(input) = rx.try_recv() {
            if let CoreInput::Append { reply, .. } = input {
                let _ = reply.send(Err(CoreError::ShuttingDown));
            }
        }
        if let Err(error) = self.write_batch(vec![Entry::stored(
            None,
            EventKind::DaemonStopped(daemon_info()),
            None,
        )]) {
            tracing::error!(%error, "failed to write daemon.stopped");
        }
        if let Err(error) = self.log.sync() {
            tracing::error!(%error, "failed to sync the event log on shutdown");
        }
        self.save_snapshot();
        tracing::debug!("core stopped");
        if let Some(reply) = reply {
            let _ = reply.send(());
        }
    }

    /// Refuses, before anything is written, events that repeat a stored turn, item or approval
    /// (a backfill, a replay), and reports for new instances beyond the per-session cap unless
    /// a finished instance can make room: it is pruned first (`agent.pruned`, logged right
    /// before the report), seen ones before unseen ones, the least recently updated first.
    fn handle_batch(&mut self, batch: Vec<Entry>) {
        let mut accepted = Vec::with_capacity(batch.len());
        {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            let max_instances = state.tracker.config().max_instances;
            // Keys admitted earlier in this same batch are duplicates too.
            let mut batch_keys = std::collections::HashSet::new();
            // Each session's instance keys as this batch leaves them, the keys it reported, and
            // the token-less ones it added (`(key, agent)`).
            let mut instances: HashMap<String, BatchInstances> = HashMap::new();
            // `(session, key)` of the instances this batch reports from a hosted session.
            let mut hosted_reports: HashSet<(String, String)> = HashSet::new();
            for entry in batch {
                let refusal = match (&entry.session, &entry.kind) {
                    (Some(session), EventKind::AgentPruned(pruned))
                        if entry.guard == Guard::NotHosted
                            && (hosted_reports
                                .contains(&(session.clone(), pruned.key.clone()))
                                || state.tracker.instance(session, &pruned.key).is_some_and(
                                    |(update, _)| {
                                        update.source.as_deref()
                                            == Some(crate::protocol::SOURCE_HOSTED)
                                    },
                                )) =>
                    {
                        Some(CoreError::Superseded)
                    }
                    (Some(session), EventKind::AgentUpdated(update)) => {
                        let seen =
                            instances
                                .entry(session.clone())
                                .or_insert_with(|| BatchInstances {
                                    keys: state.tracker.instance_keys(session),
                                    ..BatchInstances::default()
                                });
                        let key = update.key();
                        let mut refusal = None;
                        if !seen.keys.contains(&key) {
                            let mut victims = Vec::new();
                            {
                                let skip =
                                    |k: &str| !seen.keys.contains(k) || seen.reported.contains(k);
                                if update.tokenless {
                                    // Bounded per source (the agent name), then per session.
                                    let present: Vec<(String, String)> = state
                                        .tracker
                                        .tokenless(session)
                                        .into_iter()
                                        .filter(|(k, _)| seen.keys.contains(k))
                                        .chain(seen.tokenless_added.iter().cloned())
                                        .collect();
                                    let same_agent =
                                        present.iter().filter(|(_, a)| *a == update.agent).count();
                                    let bound = if same_agent >= tracker::MAX_TOKENLESS_PER_AGENT {
                                        Some((
                                            Some(update.agent.as_str()),
                                            format!(
                                                "{} per agent; this one is `{}`",
                                                tracker::MAX_TOKENLESS_PER_AGENT,
                                                update.agent
                                            ),
                                            tracker::MAX_TOKENLESS_PER_AGENT,
                                        ))
                                    } else if present.len() >= tracker::MAX_TOKENLESS_PER_SESSION {
                                        Some((
                                            None,
                                            "in all".to_string(),
                                            tracker::MAX_TOKENLESS_PER_SESSION,
                                        ))
                                    } else {
                                        None
                                    };
                                    if let Some((agent, scope, max)) = bound {
                                        match state.tracker.tokenless_victim(session, agent, skip) {
                                            Some(victim) => victims.push(victim),
                                            None => {
                                                refusal = Some(CoreError::TooManyTokenless {
                                                    session: session.clone(),
                                                    scope,
                                                    max,
                                                });
                                            }
                                        }
                                    }
                                }
                                let left = seen.keys.len() - victims.len();
                                if refusal.is_none() && left >= max_instances {
                                    let skip_also =
                                        |k: &str| skip(k) || victims.iter().any(|v| v == k);
                                    match state
                                        .tracker
                                        .eviction_candidate(session, skip_also)
                                        .or_else(|| {
                                            state.tracker.tokenless_victim(session, None, skip_also)
                                        }) {
                                        Some(victim) => victims.push(victim),
                                        None => {
                                            refusal = Some(CoreError::TooManyInstances {
                                                session: session.clone(),
                                                max: max_instances,
                                            });
                                        }
                                    }
                                }
                            }
                            if refusal.is_none() {
                                for victim in victims {
                                    seen.keys.remove(&victim);
                                    accepted.push(Entry::stored(
                                        Some(session.clone()),
                                        EventKind::AgentPruned(InstanceRef { key: victim }),
                                        None,
                                    ));
                                }
                                if update.tokenless {
                                    seen.tokenless_added
                                        .push((key.clone(), update.agent.clone()));
                                }
                            }
                        }
                        if refusal.is_none() {
                            if update.source.as_deref() == Some(crate::protocol::SOURCE_HOSTED) {
                                hosted_reports.insert((session.clone(), key.clone()));
                            }
                            seen.keys.insert(key.clone());
                            seen.reported.insert(key);
                        }
                        refusal
                    }
                    (Some(session), kind)
                        if !entry.ephemeral
                            && (state.sessions.is_duplicate(session, kind)
                                || sessions::dedupe_key(kind).is_some_and(|key| {
                                    !batch_keys.insert(format!("{session}\0{key}"))
                                })) =>
                    {
                        Some(CoreError::Duplicate)
                    }
                    _ => None,
                };
                match refusal {
                    Some(error) => {
                        if let Some(reply) = entry.reply {
                            self.replies.push((reply, Err(error)));
                        }
                    }
                    None => accepted.push(entry),
                }
            }
        }
        if accepted.is_empty() {
            return;
        }
        if let Err(error) = self.write_batch(accepted) {
            tracing::error!(%error, "failed to append to the event log");
        }
    }

    /// Sequences, writes, applies, publishes and acknowledges a batch. On a write error every
    /// reply gets the error and the counters are rolled back, so seqs stay contiguous.
    fn write_batch(&mut self, batch: Vec<Entry>) -> Result<(), Arc<StorageError>> {
        let now = now_ms();
        let saved_seq = self.seq;
        let mut saved_session_seqs: Vec<(String, Option<u64>)> = Vec::new();
        let mut buf = Vec::with_capacity(batch.len() * 256);
        // (event, its line, whether it is stored) in batch order.
        let mut events = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        let mut batch: std::collections::VecDeque<Entry> = batch.into();
        let mut notified = notify::BatchSeen::default();
        while let Some(entry) = batch.pop_front() {
            if entry.ephemeral {
                let mut kind = entry.kind;
                if let EventKind::ItemDelta(delta) = &mut kind
                    && delta.kind == "agentMessage"
                {
                    delta.snapshot = false;
                    delta.offset = Some(self.store.streaming().delta(
                        entry.session.as_ref(),
                        delta,
                        self.seq,
                    ));
                }
                let line = ephemeral_line(now, entry.session.as_ref(), &kind);
                let event = Event {
                    seq: self.seq,
                    ts: now,
                    session: entry.session,
                    session_seq: None,
                    kind,
                };
                events.push((event, line, false));
                continue;
            }
            self.seq += 1;
            let session_seq = entry.session.as_ref().map(|session| {
                let counter = self.session_seqs.entry(session.clone()).or_insert(0);
                saved_session_seqs.push((session.clone(), Some(*counter).filter(|n| *n > 0)));
                *counter += 1;
                *counter
            });
            let event = Event {
                seq: self.seq,
                ts: now,
                session: entry.session,
                session_seq,
                kind: entry.kind,
            };
            // The notification this event calls for is stored right after it, in this batch.
            let derived = {
                let state = self.state.read().unwrap_or_else(|e| e.into_inner());
                notify::derive(
                    &state,
                    &mut notified,
                    event.seq,
                    event.session.as_deref(),
                    &event.kind,
                )
            };
            if let Some(notification) = derived {
                batch.push_front(Entry::stored(
                    event.session.clone(),
                    EventKind::Notification(notification),
                    None,
                ));
            }
            // Serializing our own types into a Vec cannot fail.
            let json = serde_json::to_string(&event).unwrap_or_default();
            log_line::encode(&json, &mut buf);
            events.push((event, json, true));
            replies.push(entry.reply);
        }
        if !buf.is_empty()
            && let Err(error) = self.log.append(&buf)
        {
            self.seq = saved_seq;
            for (session, previous) in saved_session_seqs.into_iter().rev() {
                match previous {
                    Some(n) => {
                        self.session_seqs.insert(session, n);
                    }
                    None => {
                        self.session_seqs.remove(&session);
                    }
                }
            }
            let error = Arc::new(StorageError {
                dir: self.config.log.dir.clone(),
                source: error,
            });
            for reply in replies.into_iter().flatten() {
                self.replies
                    .push((reply, Err(CoreError::Storage(Arc::clone(&error)))));
            }
            return Err(error);
        }
        #[cfg(test)]
        if std::mem::take(&mut self.panic_after_write) {
            panic!("a test's panic, planted after the batch's write");
        }
        let published: Vec<Arc<StoredEvent>> = {
            let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
            events
                .into_iter()
                .map(|(event, json, stored)| {
                    if stored {
                        state.apply(&event);
                        self.store
                            .streaming()
                            .stored(event.session.as_ref(), &event.kind);
                    }
                    Arc::new(StoredEvent {
                        seq: event.seq,
                        session: event.session,
                        session_seq: event.session_seq,
                        json: json.into(),
                        ephemeral: !stored,
                    })
                })
                .collect()
        };
        let stored: Vec<Arc<StoredEvent>> = published
            .iter()
            .filter(|event| !event.ephemeral)
            .cloned()
            .collect();
        // Each stored event becomes readable right before it is broadcast, in batch order: a
        // subscriber that finds a stored event in the store has then already been sent every
        // live-only event published before it.
        for event in &published {
            if !event.ephemeral {
                self.store.push(std::slice::from_ref(event));
            }
            // No subscriber is not an error.
            let _ = self.bus.send(Arc::clone(event));
        }
        for (reply, event) in replies.into_iter().zip(&stored) {
            if let Some(reply) = reply {
                self.replies.push((reply, Ok(event.seq)));
            }
        }
        if self.log.wants_roll() {
            self.roll();
        }
        Ok(())
    }

    fn roll(&mut self) {
        if let Err(error) = self.log.roll(self.seq + 1) {
            tracing::error!(%error, "failed to start a new log segment");
            return;
        }
        if self.save_snapshot() {
            match self.log.apply_retention(self.seq) {
                Ok(_) => self.store.trim_index(),
                Err(error) => tracing::error!(%error, "failed to apply log retention"),
            }
        }
    }

    fn save_snapshot(&self) -> bool {
        let snapshot = Snapshot {
            schema: SCHEMA_VERSION,
            seq: self.seq,
            session_seqs: self.session_seqs.clone(),
            state: self.state.read().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        match snapshot.save(&self.config.home) {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(%error, "failed to write the state snapshot");
                false
            }
        }
    }
}
