//! The registry of hosted sessions: a pure state machine over logged events, like the tracker.
//!
//! It knows each session's settings, its runtime thread, the turn in progress, pending and
//! resolved approvals, the goal, the outcomes of idempotent injects, and which turns and items
//! were already stored — so the core can refuse a duplicate (a backfill after a resume, a
//! notification replayed to a reconnecting client) before it is logged.
//! It does no I/O and cannot fail.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::protocol::{
    ApprovalId, ApprovalRequested, ApprovalResolved, Control, Event, EventKind, HostedSessionView,
    InputKind, InputRequested, InputResolved, MessageSent, ResolvedBy, SessionCreated,
    SessionState, TurnCompleted,
};

/// One input request (a question, a plan, an elicitation, a permissions grant) and its
/// resolution, as the log tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRecord {
    pub request: InputRequested,
    pub requested_at: u64,
    pub resolved: Option<InputResolved>,
    #[serde(default)]
    pub resolved_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    pub request: ApprovalRequested,
    pub requested_at: u64,
    pub resolved: Option<ApprovalResolved>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub id: String,
    pub created: SessionCreated,
    pub created_at: u64,
    pub updated_at: u64,
    pub thread_id: Option<String>,
    pub backend: Option<String>,
    /// `starting`, `live`, `restarting`, `lost` or `closed`.
    pub state: SessionState,
    pub state_message: Option<String>,
    pub active_turn: Option<String>,
    pub turns: u64,
    pub last_turn: Option<TurnCompleted>,
    pub last_agent_message: Option<String>,
    pub goal: Option<serde_json::Value>,
    pub approvals: BTreeMap<ApprovalId, ApprovalRecord>,
    /// Input requests by request id, pending and resolved.
    #[serde(default)]
    pub requests: BTreeMap<String, InputRecord>,
    /// The collaboration mode set for the session's next turns (`session.mode`).
    #[serde(default)]
    pub mode: Option<String>,
    /// The model switched to after creation (`session.model`); `None`: the one it was created
    /// with.
    #[serde(default)]
    pub model: Option<String>,
    /// Items started and not completed yet (a command waiting for its approval, a tool running),
    /// so a restart can close them when their turn turns out to be over.
    #[serde(default)]
    pub open_items: BTreeMap<String, crate::protocol::ItemEvent>,
    /// The tmux pane of the session's terminal, when it has one.
    #[serde(default)]
    pub pane: Option<crate::protocol::SessionPane>,
    /// claude: the permission mode its own records last reported.
    #[serde(default)]
    pub permission_mode_seen: Option<crate::protocol::PermissionModeSeen>,
    /// An agent a person started by hand that this session drives (`session.adopted`).
    #[serde(default)]
    pub adopted: Option<crate::protocol::SessionAdopted>,
    /// An adopted agent moved under cohost (`session.rehomed`): the rollout its codex thread
    /// resumes from (claude: its transcript).
    #[serde(default)]
    pub rehomed: Option<crate::protocol::SessionRehomed>,
    /// Dedupe keys of stored turn and item events (`turn.started:<id>`, `item.completed:<id>`…).
    seen: HashSet<String>,
    /// Inject outcomes by idempotency key.
    sent: HashMap<String, MessageSent>,
}

impl SessionRecord {
    pub fn is_closed(&self) -> bool {
        self.state == SessionState::Closed
    }

    /// How cohost came to drive the session: it started the agent, or adopted one.
    pub fn control(&self) -> Control {
        if self.adopted.is_some() {
            Control::Adopted
        } else {
            Control::Hosted
        }
    }

    pub fn sent(&self, key: &str) -> Option<&MessageSent> {
        self.sent.get(key)
    }

    pub fn pending_approvals(&self) -> impl Iterator<Item = &ApprovalRecord> {
        self.approvals.values().filter(|a| a.resolved.is_none())
    }

    pub fn pending_requests(&self) -> impl Iterator<Item = &InputRecord> {
        self.requests.values().filter(|r| r.resolved.is_none())
    }

    /// Resolves every pending request `moot` selects, by `by` (a turn that ended, the next turn).
    fn resolve_moot(&mut self, by: ResolvedBy, at: u64, moot: impl Fn(&InputRequested) -> bool) {
        for record in self.requests.values_mut() {
            if record.resolved.is_none() && moot(&record.request) {
                record.resolved = Some(InputResolved::moot(&record.request.request_id, by.clone()));
                record.resolved_at = Some(at);
            }
        }
    }

    /// The model the session's next turns run on: the one switched to, else the one it was
    /// created with (`None`: the runtime's default).
    pub fn current_model(&self) -> Option<String> {
        self.model.clone().or_else(|| self.created.model.clone())
    }

    pub fn view(&self) -> HostedSessionView {
        HostedSessionView {
            id: self.id.clone(),
            name: String::new(),
            runtime: self.created.runtime,
            cwd: self.created.cwd.clone(),
            model: self.current_model(),
            approval_policy: self
                .created
                .runtime
                .has_approval_policy()
                .then(|| self.created.approval_policy.clone())
                .flatten(),
            permission_mode: self
                .permission_mode_seen
                .as_ref()
                .map(|seen| seen.mode.clone())
                .or_else(|| self.created.claude_permission_mode()),
            permission_mode_allowed: self.permission_mode_seen.as_ref().map(|seen| seen.allowed),
            sandbox: self.created.sandbox.clone(),
            thread_id: self.thread_id.clone(),
            state: self.state,
            state_message: self.state_message.clone(),
            active_turn_id: self.active_turn.clone(),
            turns: self.turns,
            last_turn_status: self.last_turn.as_ref().map(|t| t.status),
            last_agent_message: self.last_agent_message.clone(),
            goal: self.goal.clone(),
            pending_approvals: self.pending_approvals().count(),
            pending_requests: self.pending_requests().count(),
            mode: self.mode.clone(),
            forked_from: self.created.forked_from.clone(),
            profile: self.created.profile.as_ref().map(|p| p.redacted()),
            pane_id: self.pane.as_ref().map(|p| p.pane_id.clone()),
            tmux_session: self.pane.as_ref().map(|p| p.tmux_session.clone()),
            control: self.control(),
            adopted: self.adopted.clone(),
            lease: Default::default(),
            waiting_tasks: 0,
            created_at: self.created_at,
            updated_at: self.updated_at,
            machine: None,
            machine_link: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sessions {
    map: BTreeMap<String, SessionRecord>,
    /// Session ids by the idempotency key of the request that created them.
    created_keys: HashMap<String, String>,
}

/// The last component of a session's directory (the directory itself when it has none, the
/// id when it is empty).
fn base_name(record: &SessionRecord) -> &str {
    let cwd = record.created.cwd.as_str();
    match cwd.rsplit('/').find(|part| !part.is_empty()) {
        Some(last) => last,
        None if cwd.is_empty() => &record.id,
        None => cwd,
    }
}

/// The key under which an event is deduplicated, if it is one that must appear once.
pub(crate) fn dedupe_key(kind: &EventKind) -> Option<String> {
    match kind {
        EventKind::TurnStarted(t) => Some(format!("turn.started:{}", t.turn_id)),
        EventKind::TurnCompleted(t) => Some(format!("turn.completed:{}", t.turn_id)),
        EventKind::ItemStarted(i) => Some(format!("item.started:{}", i.id())),
        EventKind::ItemCompleted(i) => Some(format!("item.completed:{}", i.id())),
        EventKind::ApprovalRequested(a) => Some(format!("approval.requested:{}", a.approval_id)),
        EventKind::ApprovalResolved(a) => Some(format!("approval.resolved:{}", a.approval_id)),
        EventKind::InputRequested(r) => Some(format!("input.requested:{}", r.request_id)),
        EventKind::InputResolved(r) => Some(format!("input.resolved:{}", r.request_id)),
        EventKind::Notification(n) => Some(format!("notification:{}", n.id)),
        EventKind::SessionAttention(a) => Some(format!("session.attention:{}", a.id)),
        EventKind::Usage(u) => u.id.as_ref().map(|id| format!("usage:{id}")),
        EventKind::Error(e) => e.id.as_ref().map(|id| format!("error:{id}")),
        _ => None,
    }
}

impl Sessions {
    pub fn get(&self, id: &str) -> Option<&SessionRecord> {
        self.map.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SessionRecord> {
        self.map.values()
    }

    /// The session's name as every list shows it: the last component of its directory, with
    /// ` (2)`, ` (3)`… after it when earlier sessions (in creation order, any state) have a
    /// directory ending the same way. A session's name never changes: only later sessions
    /// take a number.
    pub fn name_of(&self, id: &str) -> Option<String> {
        let record = self.map.get(id)?;
        let base = base_name(record);
        let rank = self
            .map
            .values()
            .filter(|other| {
                (other.created_at, other.id.as_str()) < (record.created_at, record.id.as_str())
                    && base_name(other) == base
            })
            .count();
        Some(match rank {
            0 => base.to_string(),
            n => format!("{base} ({})", n + 1),
        })
    }

    pub fn by_creation_key(&self, key: &str) -> Option<&SessionRecord> {
        self.created_keys.get(key).and_then(|id| self.map.get(id))
    }

    /// The one place that says which cohost session drives an agent's own session: the open
    /// session (hosted, or adopted: `session.adopted` binds it to the agent's session id) whose
    /// thread is `agent_session_id` (Claude's `session_id`, as its hooks and session file name
    /// it). What a hook reports about a Claude session belongs to this session (an adopted one
    /// — `adopted` is set — hears it through the machine-wide hook, a hosted one through its
    /// own); `None`: no session drives it (a watched agent, or one cohost gave back).
    pub fn driving(&self, agent_session_id: &str) -> Option<&SessionRecord> {
        self.by_thread(agent_session_id)
    }

    pub fn by_thread(&self, thread_id: &str) -> Option<&SessionRecord> {
        self.map
            .values()
            .find(|s| s.thread_id.as_deref() == Some(thread_id) && !s.is_closed())
    }

    /// Whether `session` stored the end of turn `turn_id`.
    pub fn has_ended_turn(&self, session: &str, turn_id: &str) -> bool {
        self.map
            .get(session)
            .is_some_and(|record| record.seen.contains(&format!("turn.completed:{turn_id}")))
    }

    /// Whether logging `kind` for `session` would repeat something already stored.
    pub fn is_duplicate(&self, session: &str, kind: &EventKind) -> bool {
        let Some(record) = self.map.get(session) else {
            return false;
        };
        match dedupe_key(kind) {
            Some(key) => record.seen.contains(&key),
            None => false,
        }
    }

    pub fn apply(&mut self, event: &Event) {
        let Some(session) = event.session.as_deref() else {
            return;
        };
        if let EventKind::SessionCreated(created) = &event.kind {
            if let Some(key) = &created.idempotency_key {
                self.created_keys.insert(key.clone(), session.to_string());
            }
            self.map.insert(
                session.to_string(),
                SessionRecord {
                    id: session.to_string(),
                    created: created.clone(),
                    created_at: event.ts,
                    updated_at: event.ts,
                    thread_id: None,
                    backend: None,
                    state: SessionState::Starting,
                    state_message: None,
                    active_turn: None,
                    turns: 0,
                    last_turn: None,
                    last_agent_message: None,
                    goal: None,
                    approvals: BTreeMap::new(),
                    requests: BTreeMap::new(),
                    mode: None,
                    model: None,
                    open_items: BTreeMap::new(),
                    pane: None,
                    permission_mode_seen: None,
                    adopted: None,
                    rehomed: None,
                    seen: HashSet::new(),
                    sent: HashMap::new(),
                },
            );
            return;
        }
        let Some(record) = self.map.get_mut(session) else {
            return;
        };
        if let Some(key) = dedupe_key(&event.kind) {
            record.seen.insert(key);
        }
        record.updated_at = event.ts;
        match &event.kind {
            EventKind::SessionBound(bound) => {
                record.thread_id = Some(bound.thread_id.clone());
                record.backend = Some(bound.backend.clone());
                record.state = SessionState::Live;
                record.state_message = None;
            }
            EventKind::SessionStatus(status) => {
                record.state = status.state;
                record.state_message = status.message.clone();
            }
            EventKind::SessionPane(pane) => record.pane = Some(pane.clone()),
            EventKind::SessionAdopted(adopted) => record.adopted = Some(adopted.clone()),
            EventKind::SessionRehomed(rehomed) => {
                record.adopted = None;
                record.rehomed = Some(rehomed.clone());
            }
            EventKind::PermissionModeSeen(seen) => record.permission_mode_seen = Some(seen.clone()),
            EventKind::SessionClosed(closed) => {
                record.state = SessionState::Closed;
                record.state_message = Some(closed.reason.clone());
                record.active_turn = None;
            }
            EventKind::TurnStarted(turn) => {
                record.active_turn = Some(turn.turn_id.clone());
                record.turns += 1;
                // A plan offered after its turn (codex) is moot once the next turn starts.
                record.resolve_moot(ResolvedBy::Turn, event.ts, |request| {
                    request.kind == InputKind::Plan && request.turn_id.is_none()
                });
            }
            EventKind::TurnCompleted(turn) => {
                if record.active_turn.as_deref() == Some(turn.turn_id.as_str()) {
                    record.active_turn = None;
                }
                record.last_turn = Some(turn.clone());
                record
                    .open_items
                    .retain(|_, item| item.turn_id != turn.turn_id);
                // A turn that ended leaves nothing to answer.
                record.resolve_moot(ResolvedBy::Turn, event.ts, |request| {
                    request.turn_id.as_deref() == Some(turn.turn_id.as_str())
                });
                for approval in record.approvals.values_mut() {
                    if approval.resolved.is_none() && approval.request.turn_id == turn.turn_id {
                        approval.resolved = Some(ApprovalResolved {
                            approval_id: approval.request.approval_id.clone(),
                            decision: None,
                            by: "runtime".into(),
                        });
                    }
                }
            }
            EventKind::ItemStarted(item) => {
                record
                    .open_items
                    .insert(item.id().to_string(), item.clone());
            }
            EventKind::ItemCompleted(item) => {
                record.open_items.remove(item.id());
                if let crate::protocol::Item::AgentMessage { text, .. } = &item.item {
                    record.last_agent_message = Some(text.clone());
                }
            }
            EventKind::ApprovalRequested(request) => {
                record.approvals.insert(
                    request.approval_id.clone(),
                    ApprovalRecord {
                        request: request.clone(),
                        requested_at: event.ts,
                        resolved: None,
                    },
                );
            }
            EventKind::ApprovalResolved(resolved) => {
                if let Some(approval) = record.approvals.get_mut(resolved.approval_id.as_str())
                    && approval.resolved.is_none()
                {
                    approval.resolved = Some(resolved.clone());
                }
            }
            EventKind::InputRequested(request) => {
                record.requests.insert(
                    request.request_id.clone(),
                    InputRecord {
                        request: (**request).clone(),
                        requested_at: event.ts,
                        resolved: None,
                        resolved_at: None,
                    },
                );
            }
            EventKind::InputResolved(resolved) => {
                if let Some(request) = record.requests.get_mut(&resolved.request_id)
                    && request.resolved.is_none()
                {
                    request.resolved = Some(resolved.clone());
                    request.resolved_at = Some(event.ts);
                }
            }
            EventKind::SessionMode(mode) => record.mode = Some(mode.mode.clone()),
            EventKind::SessionModel(model) => record.model = Some(model.model.clone()),
            EventKind::GoalUpdated(goal) => record.goal = Some(goal.goal.clone()),
            EventKind::GoalCleared(_) => record.goal = None,
            EventKind::MessageSent(sent) => {
                if let Some(key) = &sent.idempotency_key {
                    record.sent.insert(key.clone(), sent.clone());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        Item, ItemEvent, Runtime, SessionBound, TurnSource, TurnStarted, TurnStatus,
    };

    fn event(seq: u64, kind: EventKind) -> Event {
        Event {
            seq,
            ts: seq,
            session: Some("s1".into()),
            session_seq: Some(seq),
            kind,
        }
    }

    #[test]
    fn sessions_in_one_directory_get_distinct_names_in_creation_order() {
        let mut sessions = Sessions::default();
        let create = |sessions: &mut Sessions, id: &str, ts: u64, cwd: &str| {
            let EventKind::SessionCreated(mut created) = created(None) else {
                unreachable!()
            };
            created.cwd = cwd.into();
            sessions.apply(&Event {
                seq: ts,
                ts,
                session: Some(id.into()),
                session_seq: Some(1),
                kind: EventKind::SessionCreated(created),
            });
        };
        // Ids sort against creation order: the order is the creation time's.
        create(&mut sessions, "cs_c", 1, "/home/me/proj");
        create(&mut sessions, "cs_b", 2, "/home/me/proj/");
        create(&mut sessions, "cs_a", 3, "/srv/other/proj");
        create(&mut sessions, "cs_d", 4, "/home/me/site");
        create(&mut sessions, "cs_e", 5, "/");
        let name = |id: &str| sessions.name_of(id).unwrap();
        assert_eq!(name("cs_c"), "proj");
        assert_eq!(name("cs_b"), "proj (2)");
        assert_eq!(name("cs_a"), "proj (3)");
        assert_eq!(name("cs_d"), "site");
        assert_eq!(name("cs_e"), "/");
        assert_eq!(sessions.name_of("cs_zz"), None);
    }

    fn created(key: Option<&str>) -> EventKind {
        EventKind::SessionCreated(SessionCreated {
            idempotency_key: key.map(Into::into),
            ..SessionCreated::plain(Runtime::Codex, "/w".into())
        })
    }

    #[test]
    fn lifecycle_and_dedupe() {
        let mut sessions = Sessions::default();
        sessions.apply(&event(1, created(Some("k1"))));
        assert_eq!(sessions.by_creation_key("k1").unwrap().id, "s1");
        sessions.apply(&event(
            2,
            EventKind::SessionBound(SessionBound {
                thread_id: "t".into(),
                backend: "codex".into(),
            }),
        ));
        assert_eq!(sessions.get("s1").unwrap().state, SessionState::Live);
        let started = EventKind::TurnStarted(TurnStarted {
            turn_id: "u1".into(),
            source: TurnSource::Api,
        });
        assert!(!sessions.is_duplicate("s1", &started));
        sessions.apply(&event(3, started.clone()));
        assert!(sessions.is_duplicate("s1", &started));
        assert_eq!(
            sessions.get("s1").unwrap().active_turn.as_deref(),
            Some("u1")
        );

        let item = EventKind::ItemCompleted(ItemEvent {
            turn_id: "u1".into(),
            item: Item::AgentMessage {
                id: "u1:m1".into(),
                text: "hi".into(),
                interrupted: false,
            },
        });
        sessions.apply(&event(4, item.clone()));
        assert!(sessions.is_duplicate("s1", &item));
        assert_eq!(
            sessions.get("s1").unwrap().last_agent_message.as_deref(),
            Some("hi")
        );

        sessions.apply(&event(
            5,
            EventKind::ApprovalRequested(ApprovalRequested {
                approval_id: "a1".into(),
                kind: "command".into(),
                turn_id: "u1".into(),
                item_id: None,
                command: None,
                cwd: None,
                reason: None,
                decisions: vec![],
            }),
        ));
        assert_eq!(sessions.get("s1").unwrap().pending_approvals().count(), 1);
        sessions.apply(&event(
            6,
            EventKind::TurnCompleted(TurnCompleted {
                turn_id: "u1".into(),
                status: TurnStatus::Interrupted,
                error: None,
                duration_ms: None,
                lost: false,
            }),
        ));
        // Usage and errors with an identity are stored once; without one, every time.
        let usage = |id: Option<&str>| {
            EventKind::Usage(crate::protocol::Usage {
                turn_id: "u1".into(),
                id: id.map(Into::into),
                total: Default::default(),
                last: Default::default(),
                context_window: None,
            })
        };
        sessions.apply(&event(7, usage(Some("transcript:x"))));
        assert!(sessions.is_duplicate("s1", &usage(Some("transcript:x"))));
        assert!(!sessions.is_duplicate("s1", &usage(Some("transcript:y"))));
        sessions.apply(&event(8, usage(None)));
        assert!(!sessions.is_duplicate("s1", &usage(None)));
        let record = sessions.get("s1").unwrap();
        assert_eq!(record.active_turn, None);
        assert_eq!(record.pending_approvals().count(), 0);
        assert_eq!(
            record.view().last_turn_status,
            Some(TurnStatus::Interrupted)
        );
    }

    #[test]
    fn input_requests_resolve_once_and_go_moot_with_their_turn() {
        let mut sessions = Sessions::default();
        sessions.apply(&event(1, created(None)));
        let request = |id: &str, kind: InputKind, turn: Option<&str>| {
            EventKind::InputRequested(Box::new(InputRequested {
                request_id: id.into(),
                kind,
                turn_id: turn.map(Into::into),
                item_id: None,
                questions: Vec::new(),
                plan: None,
                message: None,
                server: None,
                schema: None,
                url: None,
                permissions: None,
                decisions: Vec::new(),
            }))
        };
        sessions.apply(&event(2, request("q1", InputKind::Question, Some("u1"))));
        sessions.apply(&event(3, request("q2", InputKind::Question, Some("u1"))));
        sessions.apply(&event(4, request("p1", InputKind::Plan, None)));
        let record = sessions.get("s1").unwrap();
        assert_eq!(record.pending_requests().count(), 3);
        assert_eq!(record.view().pending_requests, 3);
        sessions.apply(&event(
            5,
            EventKind::InputResolved(InputResolved::moot("q1", ResolvedBy::Api)),
        ));
        // A second resolution changes nothing.
        sessions.apply(&event(
            6,
            EventKind::InputResolved(InputResolved::moot("q1", ResolvedBy::Runtime)),
        ));
        let record = sessions.get("s1").unwrap();
        assert_eq!(record.requests["q1"].resolved.as_ref().unwrap().by, "api");
        // The turn's end makes its questions moot; the plan waits for the next turn.
        sessions.apply(&event(
            7,
            EventKind::TurnCompleted(TurnCompleted {
                turn_id: "u1".into(),
                status: TurnStatus::Interrupted,
                error: None,
                duration_ms: None,
                lost: false,
            }),
        ));
        let record = sessions.get("s1").unwrap();
        assert_eq!(record.requests["q2"].resolved.as_ref().unwrap().by, "turn");
        assert!(record.requests["p1"].resolved.is_none());
        sessions.apply(&event(
            8,
            EventKind::TurnStarted(TurnStarted {
                turn_id: "u2".into(),
                source: TurnSource::Api,
            }),
        ));
        let record = sessions.get("s1").unwrap();
        assert_eq!(record.pending_requests().count(), 0);
        sessions.apply(&event(
            9,
            EventKind::SessionMode(crate::protocol::SessionMode {
                mode: "plan".into(),
            }),
        ));
        assert_eq!(
            sessions.get("s1").unwrap().view().mode.as_deref(),
            Some("plan")
        );
        sessions.apply(&event(
            10,
            EventKind::SessionModel(crate::protocol::SessionModel {
                model: "mock/mock-model-2".into(),
            }),
        ));
        assert_eq!(
            sessions.get("s1").unwrap().view().model.as_deref(),
            Some("mock/mock-model-2")
        );
    }
}
