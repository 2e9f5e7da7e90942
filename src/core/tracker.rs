//! The agent tracker: a pure state machine over logged [`Event`]s.
//!
//! It owns every agent instance per tmux session, their unseen flags, the focused session and the
//! opensessions-style metadata (status, progress, logs).
//! It does no I/O, reads no clock and cannot fail: time comes in through the events (`Event::ts`)
//! and through the `now` argument of [`Tracker::due`], so replaying the log rebuilds exactly the
//! state the daemon had. It is serializable only for the snapshot file; the API shape is built by
//! [`Tracker::session_view`].

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::protocol::{
    AgentStatus, AgentUpdate, Event, EventKind, InstanceRef, InstanceView, Liveness, LogView,
    MetadataView, ProgressView, StatusView,
};

/// Thresholds that shape the tracker's aging. They are not part of the log: changing them between
/// runs changes only what `due` proposes from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackerConfig {
    /// A running, tool-running or waiting instance with no update for this long becomes `stale`
    /// (unless it reported `liveness: alive`).
    pub stale_after_ms: u64,
    /// A finished (`done`, `error`, `interrupted`) or `stale` instance that is seen is removed after
    /// this long without an update.
    pub prune_after_ms: u64,
    /// Metadata log entries kept per session; older ones are dropped first.
    pub max_logs: usize,
    /// Instances kept per session; a report for a new instance beyond it is refused.
    pub max_instances: usize,
}

/// Instances reported without the token kept per agent name in a session, and per session:
/// past either, a new one replaces the least recently updated of them (finished ones first),
/// so token-less reports — anyone's — can never fill a session's cap. Reports with the token,
/// hosted sessions and watchers are not counted.
pub const MAX_TOKENLESS_PER_AGENT: usize = 16;
pub const MAX_TOKENLESS_PER_SESSION: usize = 64;

/// A finished (or stale) instance reported without the token goes this soon once seen (or
/// after `prune_after_ms`, if that is sooner), and after `prune_after_ms` even unseen: anyone
/// can post token-less reports, so they neither linger in every reader's state nor keep
/// their places for long.
pub const TOKENLESS_PRUNE_AFTER_MS: u64 = 5 * 60 * 1000;

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            stale_after_ms: 10 * 60 * 1000,
            prune_after_ms: 30 * 60 * 1000,
            max_logs: 100,
            max_instances: 256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Instance {
    update: AgentUpdate,
    unseen: bool,
    updated_at: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    status: Option<StatusView>,
    progress: Option<ProgressView>,
    logs: VecDeque<LogView>,
}

impl Metadata {
    fn is_empty(&self) -> bool {
        self.status.is_none() && self.progress.is_none() && self.logs.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionEntry {
    instances: BTreeMap<String, Instance>,
    metadata: Metadata,
}

/// The whole tracker state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tracker {
    sessions: BTreeMap<String, SessionEntry>,
    focused: Option<String>,
    #[serde(skip)]
    config: TrackerConfig,
}

/// The derived, per-session summary used by `GET /api/state`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub status: Option<AgentStatus>,
    pub unseen: bool,
    pub agents: Vec<InstanceView>,
    pub metadata: MetadataView,
}

impl Tracker {
    pub fn new(config: TrackerConfig) -> Self {
        Tracker {
            config,
            ..Tracker::default()
        }
    }

    pub fn set_config(&mut self, config: TrackerConfig) {
        self.config = config;
    }

    pub fn config(&self) -> TrackerConfig {
        self.config
    }

    /// Whether a report for `key` in `session` fits under `max_instances`.
    pub fn admits(&self, session: &str, key: &str) -> bool {
        match self.sessions.get(session) {
            Some(entry) => {
                entry.instances.contains_key(key)
                    || entry.instances.len() < self.config.max_instances
            }
            None => true,
        }
    }

    /// The keys of the session's instances.
    pub fn instance_keys(&self, session: &str) -> std::collections::HashSet<String> {
        self.sessions
            .get(session)
            .map(|entry| entry.instances.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The session's instances reported without the token: `(key, agent)`.
    pub fn tokenless(&self, session: &str) -> Vec<(String, String)> {
        self.sessions
            .get(session)
            .map(|entry| {
                entry
                    .instances
                    .iter()
                    .filter(|(_, i)| i.update.tokenless)
                    .map(|(key, i)| (key.clone(), i.update.agent.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The token-less instance to drop first (of `agent` only, when given): finished or stale
    /// ones before the others, then the least recently updated; never one `skip` names.
    pub fn tokenless_victim(
        &self,
        session: &str,
        agent: Option<&str>,
        skip: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let entry = self.sessions.get(session)?;
        entry
            .instances
            .iter()
            .filter(|(key, i)| {
                i.update.tokenless && agent.is_none_or(|a| i.update.agent == a) && !skip(key)
            })
            .min_by_key(|(key, i)| {
                let finished =
                    i.update.status.is_terminal() || i.update.status == AgentStatus::Stale;
                (!finished, i.updated_at, (*key).clone())
            })
            .map(|(key, _)| key.clone())
    }

    /// The instance to drop so that a new one fits under `max_instances`: a finished or stale
    /// one, seen ones before unseen ones, the least recently updated first; never one `skip`
    /// names. `None` when every instance is busy or idle: the new one is then refused.
    pub fn eviction_candidate(&self, session: &str, skip: impl Fn(&str) -> bool) -> Option<String> {
        let entry = self.sessions.get(session)?;
        entry
            .instances
            .iter()
            .filter(|(key, instance)| {
                let status = instance.update.status;
                (status.is_terminal() || status == AgentStatus::Stale) && !skip(key)
            })
            .min_by_key(|(key, instance)| (instance.unseen, instance.updated_at, (*key).clone()))
            .map(|(key, _)| key.clone())
    }

    /// Applies one logged event. Events without a session, or of kinds the tracker does not
    /// follow, change nothing.
    pub fn apply(&mut self, event: &Event) {
        let Some(session) = event.session.as_deref() else {
            return;
        };
        let now = event.ts;
        match &event.kind {
            EventKind::AgentUpdated(update) => {
                let entry = self.sessions.entry(session.to_string()).or_default();
                // A terminal status is news for whoever looks next; anything else means the agent
                // is busy or idle again, so an older "finished" notice no longer applies.
                let unseen = update.status.is_terminal();
                entry.instances.insert(
                    update.key(),
                    Instance {
                        update: update.clone(),
                        unseen,
                        updated_at: now,
                    },
                );
            }
            EventKind::AgentStale(InstanceRef { key }) => {
                if let Some(instance) = self.instance_mut(session, key) {
                    instance.update.status = AgentStatus::Stale;
                }
            }
            EventKind::AgentPruned(InstanceRef { key }) => {
                if let Some(entry) = self.sessions.get_mut(session) {
                    entry.instances.remove(key);
                }
                self.drop_if_empty(session);
            }
            EventKind::SessionFocused(_) => {
                self.focused = Some(session.to_string());
                if let Some(entry) = self.sessions.get_mut(session) {
                    for instance in entry.instances.values_mut() {
                        if instance.update.status.is_terminal() {
                            instance.unseen = false;
                            // A hosted session outlives its turns: once its end is seen, the
                            // agent waits for the next prompt (its lists say `idle`), and is
                            // not pruned as a finished agent would be.
                            if instance.update.source.as_deref()
                                == Some(crate::protocol::SOURCE_HOSTED)
                            {
                                instance.update.status = AgentStatus::Idle;
                            }
                        }
                    }
                }
            }
            EventKind::MetaStatus(status) => {
                let entry = self.sessions.entry(session.to_string()).or_default();
                entry.metadata.status = status.text.as_ref().map(|text| StatusView {
                    text: text.clone(),
                    tone: status.tone,
                    ts: now,
                });
                self.drop_if_empty(session);
            }
            EventKind::MetaProgress(progress) => {
                let entry = self.sessions.entry(session.to_string()).or_default();
                entry.metadata.progress = (!progress.clear).then(|| ProgressView {
                    current: progress.current,
                    total: progress.total,
                    percent: progress.percent,
                    label: progress.label.clone(),
                    ts: now,
                });
                self.drop_if_empty(session);
            }
            EventKind::MetaLog(log) => {
                let max_logs = self.config.max_logs;
                let entry = self.sessions.entry(session.to_string()).or_default();
                entry.metadata.logs.push_back(LogView {
                    message: log.message.clone(),
                    tone: log.tone,
                    source: log.source.clone(),
                    notify: log.notify,
                    ts: now,
                });
                while entry.metadata.logs.len() > max_logs {
                    entry.metadata.logs.pop_front();
                }
                self.drop_if_empty(session);
            }
            EventKind::MetaLogCleared(_) => {
                if let Some(entry) = self.sessions.get_mut(session) {
                    entry.metadata.logs.clear();
                }
                self.drop_if_empty(session);
            }
            // Daemon and hosted-session events are not the tracker's business.
            _ => {}
        }
    }

    /// The aging events due at `now`: `agent.stale` for quiet busy instances and `agent.pruned`
    /// for finished, seen ones. The caller logs them and applies them like any other event.
    pub fn due(&self, now: u64) -> Vec<(String, EventKind)> {
        let mut due = Vec::new();
        for (session, entry) in &self.sessions {
            for (key, instance) in &entry.instances {
                let quiet_for = now.saturating_sub(instance.updated_at);
                let status = instance.update.status;
                let alive = instance.update.liveness == Some(Liveness::Alive);
                if status.can_go_stale() && !alive && quiet_for >= self.config.stale_after_ms {
                    due.push((
                        session.clone(),
                        EventKind::AgentStale(InstanceRef { key: key.clone() }),
                    ));
                } else if (status.is_terminal() || status == AgentStatus::Stale)
                    && quiet_for >= self.prune_after(instance)
                {
                    due.push((
                        session.clone(),
                        EventKind::AgentPruned(InstanceRef { key: key.clone() }),
                    ));
                }
            }
        }
        due
    }

    /// How long a finished instance stays without an update (`u64::MAX`: until it is seen).
    fn prune_after(&self, instance: &Instance) -> u64 {
        match (instance.update.tokenless, instance.unseen) {
            (false, true) => u64::MAX,
            (false, false) => self.config.prune_after_ms,
            (true, true) => self.config.prune_after_ms,
            (true, false) => self.config.prune_after_ms.min(TOKENLESS_PRUNE_AFTER_MS),
        }
    }

    pub fn focused(&self) -> Option<&str> {
        self.focused.as_deref()
    }

    /// Names of the sessions the tracker holds anything for.
    pub fn session_names(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// The session's instances (newest update first), derived status and unseen, and metadata.
    pub fn session_view(&self, session: &str) -> SessionSummary {
        let Some(entry) = self.sessions.get(session) else {
            return SessionSummary {
                status: None,
                unseen: false,
                agents: Vec::new(),
                metadata: MetadataView::default(),
            };
        };
        let mut agents: Vec<InstanceView> = entry
            .instances
            .iter()
            .map(|(key, instance)| InstanceView {
                key: key.clone(),
                agent: instance.update.agent.clone(),
                status: instance.update.status,
                unseen: instance.unseen,
                ts: instance.update.ts,
                updated_at: instance.updated_at,
                thread_id: instance.update.thread_id.clone(),
                thread_name: instance.update.thread_name.clone(),
                last_user_prompt: instance.update.last_user_prompt.clone(),
                pane_id: instance.update.pane_id.clone(),
                liveness: instance.update.liveness,
                source: instance.update.source_name().to_string(),
                control: None,
                session_id: None,
                adoptable: false,
                machine: None,
            })
            .collect();
        agents.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.key.cmp(&b.key)));
        let status = agents
            .iter()
            .map(|agent| agent.status)
            .max_by_key(|status| status.priority());
        let unseen = agents.iter().any(|agent| agent.unseen);
        SessionSummary {
            status,
            unseen,
            agents,
            metadata: MetadataView {
                status: entry.metadata.status.clone(),
                progress: entry.metadata.progress.clone(),
                logs: entry.metadata.logs.iter().cloned().collect(),
            },
        }
    }

    /// Where the instance `key` is and what it last reported, with when the tracker took it
    /// (the first session holding it, by name).
    pub fn find(&self, key: &str) -> Option<(&str, &AgentUpdate, u64)> {
        self.sessions.iter().find_map(|(session, entry)| {
            let instance = entry.instances.get(key)?;
            Some((session.as_str(), &instance.update, instance.updated_at))
        })
    }

    /// The instances a hosted session reports (`source: hosted`) under its thread id, in
    /// whatever tmux session they are: `(tmux session, what it reported, unseen)`.
    pub fn hosted_instances(&self, thread_id: &str) -> Vec<(String, AgentUpdate, bool)> {
        self.sessions
            .iter()
            .flat_map(|(session, entry)| {
                entry.instances.values().filter_map(move |instance| {
                    let update = &instance.update;
                    (update.source.as_deref() == Some(crate::protocol::SOURCE_HOSTED)
                        && update.thread_id.as_deref() == Some(thread_id))
                    .then(|| (session.clone(), update.clone(), instance.unseen))
                })
            })
            .collect()
    }

    /// The instance `key` of `session`: what it last reported and when the tracker took it.
    pub fn instance(&self, session: &str, key: &str) -> Option<(&AgentUpdate, u64)> {
        let instance = self.sessions.get(session)?.instances.get(key)?;
        Some((&instance.update, instance.updated_at))
    }

    fn instance_mut(&mut self, session: &str, key: &str) -> Option<&mut Instance> {
        self.sessions.get_mut(session)?.instances.get_mut(key)
    }

    fn drop_if_empty(&mut self, session: &str) {
        if self
            .sessions
            .get(session)
            .is_some_and(|entry| entry.instances.is_empty() && entry.metadata.is_empty())
        {
            self.sessions.remove(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Focus, MetaLog, MetaProgress, MetaStatus, Tone};

    const MIN: u64 = 60 * 1000;

    struct Fixture {
        tracker: Tracker,
        seq: u64,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                tracker: Tracker::new(TrackerConfig {
                    stale_after_ms: 10 * MIN,
                    prune_after_ms: 30 * MIN,
                    max_logs: 3,
                    max_instances: 2,
                }),
                seq: 0,
            }
        }

        fn apply(&mut self, session: &str, ts: u64, kind: EventKind) {
            self.seq += 1;
            self.tracker.apply(&Event {
                seq: self.seq,
                ts,
                session: Some(session.into()),
                session_seq: None,
                kind,
            });
        }

        fn report(
            &mut self,
            session: &str,
            ts: u64,
            agent: &str,
            thread: Option<&str>,
            status: AgentStatus,
        ) {
            self.apply(
                session,
                ts,
                EventKind::AgentUpdated(update(agent, thread, status)),
            );
        }

        fn tick(&mut self, now: u64) -> Vec<(String, EventKind)> {
            let due = self.tracker.due(now);
            for (session, kind) in due.clone() {
                self.apply(&session, now, kind);
            }
            due
        }

        fn view(&self, session: &str) -> SessionSummary {
            self.tracker.session_view(session)
        }
    }

    fn update(agent: &str, thread: Option<&str>, status: AgentStatus) -> AgentUpdate {
        AgentUpdate {
            agent: agent.into(),
            status,
            ts: 1,
            thread_id: thread.map(Into::into),
            thread_name: None,
            last_user_prompt: None,
            pane_id: None,
            liveness: None,
            source: None,
            tokenless: false,
        }
    }

    fn focus() -> EventKind {
        EventKind::SessionFocused(Focus {
            source: "api".into(),
        })
    }

    #[test]
    fn instances_are_keyed_by_agent_and_thread() {
        let mut fx = Fixture::new();
        fx.report("work", 0, "codex", Some("t1"), AgentStatus::Running);
        fx.report("work", 1, "codex", Some("t1"), AgentStatus::ToolRunning);
        fx.report("work", 2, "amp", None, AgentStatus::Idle);
        let view = fx.view("work");
        let keys: Vec<_> = view.agents.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["amp", "codex:t1"]);
        assert_eq!(view.agents[1].status, AgentStatus::ToolRunning);
        assert_eq!(view.status, Some(AgentStatus::ToolRunning));
    }

    #[test]
    fn every_status_is_stored_and_only_terminal_ones_are_unseen() {
        for status in AgentStatus::ALL {
            let mut fx = Fixture::new();
            fx.report("s", 0, "a", None, status);
            let view = fx.view("s");
            assert_eq!(view.agents[0].status, status);
            assert_eq!(view.unseen, status.is_terminal(), "{status}");
        }
    }

    #[test]
    fn non_terminal_update_clears_unseen() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", None, AgentStatus::Done);
        assert!(fx.view("s").unseen);
        fx.report("s", 1, "a", None, AgentStatus::Running);
        assert!(!fx.view("s").unseen);
    }

    #[test]
    fn focus_marks_terminal_instances_seen_only_in_that_session() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", None, AgentStatus::Done);
        fx.report("s", 0, "b", None, AgentStatus::Error);
        fx.report("other", 0, "a", None, AgentStatus::Interrupted);
        fx.apply("s", 1, focus());
        assert!(!fx.view("s").unseen);
        assert!(fx.view("other").unseen);
        assert_eq!(fx.tracker.focused(), Some("s"));
    }

    #[test]
    fn a_seen_hosted_instance_is_idle_and_kept_while_others_stay_finished() {
        let mut fx = Fixture::new();
        let mut hosted = update("codex", Some("t1"), AgentStatus::Done);
        hosted.source = Some(crate::protocol::SOURCE_HOSTED.into());
        fx.apply("s", 0, EventKind::AgentUpdated(hosted));
        fx.report("s", 0, "amp", None, AgentStatus::Done);
        assert_eq!(fx.tracker.hosted_instances("t1").len(), 1);
        assert!(fx.tracker.hosted_instances("t1")[0].2, "unseen");
        assert!(fx.tracker.hosted_instances("t2").is_empty());
        fx.apply("s", 1, focus());
        let view = fx.view("s");
        let status = |key: &str| view.agents.iter().find(|a| a.key == key).unwrap().status;
        // The hosted session waits for its next prompt; the other agent finished and was seen.
        assert_eq!(status("codex:t1"), AgentStatus::Idle);
        assert_eq!(status("amp"), AgentStatus::Done);
        assert!(!view.unseen);
        // So only the other is pruned once it is old.
        let pruned: Vec<_> = fx
            .tick(40 * MIN)
            .into_iter()
            .map(|(_, kind)| kind)
            .collect();
        assert_eq!(
            pruned,
            [EventKind::AgentPruned(InstanceRef { key: "amp".into() })]
        );
    }

    #[test]
    fn session_unseen_is_derived_from_any_instance() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", None, AgentStatus::Running);
        fx.report("s", 0, "b", None, AgentStatus::Done);
        let view = fx.view("s");
        assert!(view.unseen);
        assert_eq!(view.status, Some(AgentStatus::Running));
    }

    #[test]
    fn busy_instances_go_stale_unless_alive() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "run", None, AgentStatus::Running);
        fx.report("s", 0, "wait", None, AgentStatus::Waiting);
        fx.apply(
            "s",
            0,
            EventKind::AgentUpdated(AgentUpdate {
                liveness: Some(Liveness::Alive),
                ..update("alive", None, AgentStatus::Running)
            }),
        );
        fx.report("s", 0, "idle", None, AgentStatus::Idle);
        assert!(fx.tick(10 * MIN - 1).is_empty());
        let due = fx.tick(10 * MIN);
        assert_eq!(due.len(), 2, "{due:?}");
        let view = fx.view("s");
        let status_of = |key: &str| view.agents.iter().find(|a| a.key == key).unwrap().status;
        assert_eq!(status_of("run"), AgentStatus::Stale);
        assert_eq!(status_of("wait"), AgentStatus::Stale);
        assert_eq!(status_of("alive"), AgentStatus::Running);
        assert_eq!(status_of("idle"), AgentStatus::Idle);
        // Aging again proposes nothing new until the prune delay.
        assert!(fx.tick(10 * MIN + 1).is_empty());
    }

    #[test]
    fn finished_seen_instances_are_pruned_and_unseen_ones_kept() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "seen", None, AgentStatus::Done);
        fx.apply("s", 0, focus());
        fx.report("s", 0, "unseen", None, AgentStatus::Error);
        fx.report("s", 0, "idle", None, AgentStatus::Idle);
        assert!(fx.tick(30 * MIN - 1).is_empty());
        let due = fx.tick(30 * MIN);
        assert_eq!(
            due,
            vec![(
                "s".to_string(),
                EventKind::AgentPruned(InstanceRef { key: "seen".into() })
            )]
        );
        let keys: Vec<_> = fx.view("s").agents.into_iter().map(|a| a.key).collect();
        assert_eq!(keys, ["idle", "unseen"]);
    }

    #[test]
    fn finished_token_less_instances_age_out_fast_once_seen_and_in_time_even_unseen() {
        let mut fx = Fixture::new();
        let tokenless = |agent: &str, status| {
            EventKind::AgentUpdated(AgentUpdate {
                tokenless: true,
                ..update(agent, None, status)
            })
        };
        fx.apply("s", 0, tokenless("seen", AgentStatus::Done));
        fx.apply("s", 0, focus());
        fx.apply("s", 0, tokenless("unseen", AgentStatus::Error));
        fx.apply("s", 0, tokenless("busy", AgentStatus::Running));
        fx.report("s", 0, "kept", None, AgentStatus::Done);
        let pruned = |due: Vec<(String, EventKind)>| -> Vec<String> {
            due.into_iter()
                .filter_map(|(_, kind)| match kind {
                    EventKind::AgentPruned(r) => Some(r.key),
                    _ => None,
                })
                .collect()
        };
        assert!(pruned(fx.tick(TOKENLESS_PRUNE_AFTER_MS - 1)).is_empty());
        assert_eq!(pruned(fx.tick(TOKENLESS_PRUNE_AFTER_MS)), ["seen"]);
        // The busy one goes stale at 10 minutes (nothing to see: it goes at the next look);
        // the unseen one at 30, while the unseen instance reported with the token stays until
        // someone sees it.
        assert!(pruned(fx.tick(10 * MIN)).is_empty());
        assert!(pruned(fx.tick(30 * MIN - 1)).contains(&"busy".to_string()));
        assert_eq!(pruned(fx.tick(30 * MIN)), ["unseen"]);
        let keys: Vec<_> = fx.view("s").agents.into_iter().map(|a| a.key).collect();
        assert_eq!(keys, ["kept"]);
    }

    #[test]
    fn pruning_the_last_instance_forgets_the_session() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", None, AgentStatus::Done);
        fx.apply("s", 0, focus());
        fx.tick(30 * MIN);
        assert!(fx.tracker.session_names().next().is_none());
    }

    #[test]
    fn instance_cap_admits_existing_keys_only() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", None, AgentStatus::Idle);
        fx.report("s", 0, "b", None, AgentStatus::Idle);
        assert!(fx.tracker.admits("s", "a"));
        assert!(!fx.tracker.admits("s", "c"));
        assert!(fx.tracker.admits("other", "c"));
    }

    #[test]
    fn eviction_picks_finished_seen_instances_first_then_the_oldest() {
        let mut fx = Fixture::new();
        fx.report("s", 10, "busy", None, AgentStatus::Running);
        fx.report("s", 20, "idle", None, AgentStatus::Idle);
        assert_eq!(fx.tracker.eviction_candidate("s", |_| false), None);
        fx.report("s", 30, "unseen-old", None, AgentStatus::Done);
        fx.report("s", 40, "unseen-new", None, AgentStatus::Error);
        assert_eq!(
            fx.tracker.eviction_candidate("s", |_| false).as_deref(),
            Some("unseen-old")
        );
        fx.apply(
            "s",
            50,
            EventKind::SessionFocused(Focus {
                source: "api".into(),
            }),
        );
        fx.report("s", 60, "unseen-newest", None, AgentStatus::Interrupted);
        // Seen ones first, even if newer than an unseen one.
        assert_eq!(
            fx.tracker.eviction_candidate("s", |_| false).as_deref(),
            Some("unseen-old")
        );
        fx.report("s", 70, "unseen-old", None, AgentStatus::Done);
        assert_eq!(
            fx.tracker.eviction_candidate("s", |_| false).as_deref(),
            Some("unseen-new")
        );
        assert_eq!(
            fx.tracker
                .eviction_candidate("s", |key| key == "unseen-new")
                .as_deref(),
            Some("unseen-newest")
        );
        assert_eq!(fx.tracker.eviction_candidate("other", |_| false), None);
    }

    #[test]
    fn metadata_status_progress_and_capped_logs() {
        let mut fx = Fixture::new();
        fx.apply(
            "s",
            5,
            EventKind::MetaStatus(MetaStatus {
                text: Some("Deploying".into()),
                tone: Some(Tone::Warn),
            }),
        );
        fx.apply(
            "s",
            6,
            EventKind::MetaProgress(MetaProgress {
                clear: false,
                current: Some(3),
                total: Some(10),
                percent: None,
                label: Some("services".into()),
            }),
        );
        for i in 0..5 {
            fx.apply(
                "s",
                7 + i,
                EventKind::MetaLog(MetaLog {
                    message: format!("m{i}"),
                    tone: None,
                    source: None,
                    notify: false,
                }),
            );
        }
        let meta = fx.view("s").metadata;
        assert_eq!(meta.status.unwrap().text, "Deploying");
        assert_eq!(meta.progress.unwrap().current, Some(3));
        let messages: Vec<_> = meta.logs.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(messages, ["m2", "m3", "m4"]);

        fx.apply(
            "s",
            20,
            EventKind::MetaStatus(MetaStatus {
                text: None,
                tone: None,
            }),
        );
        fx.apply(
            "s",
            21,
            EventKind::MetaProgress(MetaProgress {
                clear: true,
                current: None,
                total: None,
                percent: None,
                label: None,
            }),
        );
        fx.apply("s", 22, EventKind::MetaLogCleared(Default::default()));
        assert_eq!(fx.view("s").metadata, MetadataView::default());
        assert!(fx.tracker.session_names().next().is_none());
    }

    #[test]
    fn snapshot_round_trip_preserves_state() {
        let mut fx = Fixture::new();
        fx.report("s", 0, "a", Some("t"), AgentStatus::Done);
        fx.apply("s", 1, focus());
        let json = serde_json::to_string(&fx.tracker).unwrap();
        let mut back: Tracker = serde_json::from_str(&json).unwrap();
        back.set_config(fx.tracker.config());
        assert_eq!(back, fx.tracker);
    }
}
