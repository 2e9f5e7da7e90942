//! A hub's view of other machines (`serve --hub`): what the federation's hub consumer heard from
//! each machine — its last published view (state and hosted sessions) and its events — and how
//! the surfaces see it merged with this machine's own.
//!
//! Memory is bounded: each machine's newest events are held in memory up to a budget of bytes
//! (`--hub-memory-mb`); older ones are read back, when a reader asks for them, from where the
//! hub keeps every event it received ([`ColdEvents`], the hub's copy on disk).
//!
//! This is a reader's world, never the log: the hub consumer (`crate::federation::hub`, above
//! the service) fills the [`HubWorld`]; nothing here appends to this machine's log, and another
//! machine's events are served from here with that machine's own seqs. Another machine's ids
//! are machine-qualified (`laptop/<session>`); this machine's ids keep working unchanged.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use serde::Deserialize;

mod read;
mod remote;

use super::{ErrorKind, Service, ServiceError};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{
    ApprovalDecided, Capability, HostedSessionView, HubHealth, Interrupted, LeaseHolder,
    MachineLink, MachineLinkState, RemoteCommand, RemoteError, RemoteOp, RemoteReply,
    RemoteSurface, RequestAnswered, SessionReply, StateView, TaskReply, TaskSource, TaskView,
};

/// How long a command to another machine waits for its answer.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// A command on its way to another machine: the hub's NATS link (`federation::hub`) sends it by
/// request/reply and answers `reply` with the machine's answer, or why there was none.
pub struct CommandRequest {
    pub machine: String,
    pub command: RemoteCommand,
    pub reply: tokio::sync::oneshot::Sender<Result<RemoteReply, String>>,
}

/// The most events one read of another machine's session returns.
pub const MAX_REMOTE_LIMIT: usize = 1000;

/// A machine's view as its publisher puts it in the KV bucket (`federation::publisher`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteView {
    pub machine: String,
    #[serde(default)]
    pub acked_seq: u64,
    #[serde(default)]
    pub at: u64,
    pub state: StateView,
    #[serde(default)]
    pub sessions: Vec<HostedSessionView>,
}

/// One event of another machine: its own seq, its session, its exact line.
#[derive(Debug, Clone)]
pub struct RemoteEvent {
    pub seq: u64,
    pub session: Option<String>,
    pub json: Arc<str>,
}

/// A machine's events the hub no longer holds in memory, read back from where it keeps every
/// event it received (`federation::mirror`, the hub's copy on disk, written before an event
/// reaches the world).
pub trait ColdEvents: Send + Sync {
    /// Calls `visit` with each event of `machine` kept there after seq `after` — its seq, its
    /// session, its JSON — in seq order, until `visit` answers `false`.
    fn scan(
        &self,
        machine: &str,
        after: u64,
        visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
    ) -> anyhow::Result<()>;

    /// The same backwards: each event up to seq `through`, newest first, until `visit` answers
    /// `false`.
    fn scan_back(
        &self,
        machine: &str,
        through: u64,
        visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
    ) -> anyhow::Result<()>;
}

/// The default budget of one machine's events in a hub's memory (`--hub-memory-mb`).
pub const DEFAULT_HUB_MEMORY: usize = 64 << 20;

/// What one held event costs the budget: its JSON, its session and the entry itself.
fn cost(event: &RemoteEvent) -> usize {
    event.json.len() + event.session.as_ref().map_or(0, String::len) + 64
}

/// What the hub holds of one machine.
#[derive(Debug, Default)]
struct RemoteMachine {
    view: Option<RemoteView>,
    /// When the machine was last heard from (ms, the NATS server's clock).
    heard_at: Option<u64>,
    /// Its newest events, in seq order, each once, within the hub's budget.
    events: VecDeque<RemoteEvent>,
    /// What `events` costs ([`cost`]).
    held_bytes: usize,
    /// The newest seq let go from memory (0: none); events up to it are read from the
    /// [`ColdEvents`].
    evicted_through: u64,
    /// The newest seq received.
    last: u64,
    /// Every session its events named, held or not.
    sessions: BTreeSet<String>,
    duplicates: u64,
    last_error: Option<String>,
}

impl RemoteMachine {
    fn last_seq(&self) -> u64 {
        self.last
    }

    /// Lets the oldest events go until the held ones fit `budget` (the newest always stays).
    fn evict_to(&mut self, budget: usize) {
        while self.held_bytes > budget && self.events.len() > 1 {
            if let Some(event) = self.events.pop_front() {
                self.held_bytes -= cost(&event);
                self.evicted_through = event.seq;
            }
        }
    }

    fn link(&self, now: u64, down_after_ms: u64) -> MachineLinkState {
        match self.heard_at {
            Some(at) if now.saturating_sub(at) <= down_after_ms => MachineLinkState::Up,
            _ => MachineLinkState::Down,
        }
    }
}

/// Every other machine a hub views, shared between the hub consumer (which writes) and the
/// service (which reads).
pub struct HubWorld {
    machines: RwLock<BTreeMap<String, RemoteMachine>>,
    down_after_ms: u64,
    /// The bytes of one machine's events held in memory ([`cost`]).
    budget: usize,
    /// Where events let go from memory are read back (set by the hub consumer).
    cold: OnceLock<Arc<dyn ColdEvents>>,
    /// Bumped whenever events are added (long polls wait on it).
    changed: tokio::sync::watch::Sender<u64>,
    /// Where commands to other machines go (set once the hub's NATS link runs).
    commands: OnceLock<tokio::sync::mpsc::Sender<CommandRequest>>,
    /// Tasks queued here for other machines (`hub_tasks`), once opened.
    tasks: OnceLock<super::hub_tasks::HubTasks>,
}

/// What [`HubWorld::add_events`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Added {
    pub added: usize,
    pub duplicates: usize,
}

impl HubWorld {
    /// A world where a machine not heard from for `down_after` is `down` and each machine's
    /// newest events are held in memory up to `budget` bytes.
    pub fn new(down_after: Duration, budget: usize) -> Arc<HubWorld> {
        Arc::new(HubWorld {
            machines: RwLock::default(),
            down_after_ms: down_after.as_millis() as u64,
            budget,
            cold: OnceLock::new(),
            changed: tokio::sync::watch::channel(0).0,
            commands: OnceLock::new(),
            tasks: OnceLock::new(),
        })
    }

    /// Opens the hub's task outbox, `$home/hub/tasks.json` (the tasks it keeps for machines
    /// that are down).
    pub fn open_tasks(&self, home: &std::path::Path) -> anyhow::Result<()> {
        let tasks = super::hub_tasks::HubTasks::open(home)?;
        let _ = self.tasks.set(tasks);
        Ok(())
    }

    pub(super) fn tasks(&self) -> Option<&super::hub_tasks::HubTasks> {
        self.tasks.get()
    }

    /// Where the events let go from memory are read back.
    pub fn set_cold(&self, cold: Arc<dyn ColdEvents>) {
        let _ = self.cold.set(cold);
    }

    /// Connects the commands to other machines to the hub's NATS link.
    pub fn set_command_link(&self, link: tokio::sync::mpsc::Sender<CommandRequest>) {
        let _ = self.commands.set(link);
    }

    fn write<T>(&self, f: impl FnOnce(&mut BTreeMap<String, RemoteMachine>) -> T) -> T {
        f(&mut self.machines.write().unwrap_or_else(|e| e.into_inner()))
    }

    fn read<T>(&self, f: impl FnOnce(&BTreeMap<String, RemoteMachine>) -> T) -> T {
        f(&self.machines.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// A machine's new view (heard at `heard_at`, the KV entry's time).
    pub fn set_view(&self, view: RemoteView, heard_at: u64) {
        self.write(|machines| {
            let machine = machines.entry(view.machine.clone()).or_default();
            machine.heard_at = machine.heard_at.max(Some(heard_at));
            machine.view = Some(view);
            machine.last_error = None;
        });
    }

    /// Makes a machine known (its events or view may come later).
    pub fn know(&self, machine: &str) {
        self.write(|machines| {
            machines.entry(machine.to_string()).or_default();
        });
    }

    /// The newest seq held of `machine` (0 when none).
    pub fn last_seq(&self, machine: &str) -> u64 {
        self.read(|machines| machines.get(machine).map_or(0, RemoteMachine::last_seq))
    }

    /// Adds a machine's events in order; an event whose seq is not past the newest held is a
    /// duplicate, dropped and counted. `heard_at`: when the newest was published.
    pub fn add_events(
        &self,
        machine: &str,
        events: impl IntoIterator<Item = RemoteEvent>,
        heard_at: Option<u64>,
    ) -> Added {
        let added = self.write(|machines| {
            let held = machines.entry(machine.to_string()).or_default();
            let mut added = Added::default();
            for event in events {
                if event.seq <= held.last_seq() {
                    added.duplicates += 1;
                } else {
                    held.last = event.seq;
                    held.held_bytes += cost(&event);
                    if let Some(session) = &event.session
                        && !held.sessions.contains(session)
                    {
                        held.sessions.insert(session.clone());
                    }
                    held.events.push_back(event);
                    added.added += 1;
                }
            }
            held.evict_to(self.budget);
            held.duplicates += added.duplicates as u64;
            held.heard_at = held.heard_at.max(heard_at);
            added
        });
        if added.added > 0 {
            self.changed.send_modify(|n| *n += 1);
        }
        added
    }

    /// Counts events a machine's stream delivered again that were dropped before
    /// [`HubWorld::add_events`].
    pub fn count_duplicates(&self, machine: &str, duplicates: u64) {
        self.write(|machines| {
            machines.entry(machine.to_string()).or_default().duplicates += duplicates;
        });
    }

    /// Shows (or clears) the last failure reading a machine.
    pub fn set_error(&self, machine: &str, error: Option<String>) {
        self.write(|machines| {
            machines.entry(machine.to_string()).or_default().last_error = error;
        });
    }

    /// Runs `f` on the machine holding `session`: `machine_not_found` for a machine the hub
    /// has not heard of, `session_not_found` for a session neither its view nor its events name.
    fn session<T>(
        &self,
        machine: &str,
        session: &str,
        f: impl FnOnce(&RemoteMachine) -> T,
    ) -> Result<T, ServiceError> {
        self.read(|machines| {
            let m = machines.get(machine).ok_or_else(|| {
                ServiceError::not_found(
                    codes::MACHINE_NOT_FOUND,
                    format!("no machine `{machine}`: the hub has heard of none by that name"),
                )
            })?;
            let known = m
                .view
                .as_ref()
                .is_some_and(|v| v.sessions.iter().any(|s| s.id == session))
                || m.sessions.contains(session);
            if !known {
                return Err(ServiceError::unknown_session(&qualify(machine, session)));
            }
            Ok(f(m))
        })
    }

    /// Told whenever events of any machine are added.
    pub(super) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The machine and session of another machine's own task (`task_…`), when its
    /// `task.queued` is among the events held in memory (newest first).
    pub(super) fn task_owner(&self, task: &str) -> Option<(String, String)> {
        let needle = format!("\"taskId\":{}", serde_json::to_string(task).ok()?);
        self.read(|machines| {
            machines.iter().find_map(|(name, m)| {
                m.events.iter().rev().find_map(|e| {
                    (e.json.contains(&needle) && e.json.contains("\"type\":\"task.queued\""))
                        .then(|| e.session.clone())
                        .flatten()
                        .map(|session| (name.clone(), session))
                })
            })
        })
    }

    /// The control lease of `machine`'s session as its last view showed it (a machine that is
    /// down); `machine_unreachable` when its view does not show the session.
    pub(super) fn last_lease(
        &self,
        machine: &str,
        session: &str,
    ) -> Result<crate::protocol::Lease, ServiceError> {
        self.session(machine, session, |m| {
            m.view
                .as_ref()
                .and_then(|v| v.sessions.iter().find(|s| s.id == session))
                .map(|s| s.lease.clone())
        })?
        .ok_or_else(|| {
            ServiceError::new(
                ErrorKind::Unavailable,
                codes::MACHINE_UNREACHABLE,
                format!(
                    "the machine `{machine}` does not answer and its last view does not show the session `{session}`"
                ),
            )
        })
    }

    /// Every machine's link, by name.
    pub fn links(&self) -> Vec<MachineLink> {
        let now = now_ms();
        self.read(|machines| {
            machines
                .iter()
                .map(|(name, m)| {
                    let received = m.last_seq();
                    let head = m
                        .view
                        .as_ref()
                        .map_or(0, |v| v.state.seq.max(v.acked_seq))
                        .max(received);
                    MachineLink {
                        machine: name.clone(),
                        link: m.link(now, self.down_after_ms),
                        last_heard: m.heard_at,
                        received_seq: received,
                        head_seq: head,
                        lag: head - received,
                        duplicates_dropped: m.duplicates,
                        memory_bytes: m.held_bytes as u64,
                        on_disk_through: m.evicted_through,
                        last_error: m.last_error.clone(),
                    }
                })
                .collect()
        })
    }
}

/// A read of another machine's session (`GET /api/sessions/{machine}/{id}/events`).
#[derive(Debug)]
pub struct RemotePage {
    pub machine: String,
    pub session: String,
    pub events: Vec<RemoteEvent>,
    pub next: u64,
    pub head: u64,
    pub link: MachineLinkState,
    /// A backwards window's next `before` when the session has older events (`None` for a
    /// forward read, or when the window reaches the session's first event).
    pub older_before: Option<u64>,
}

impl Service {
    /// Makes this daemon a hub over `world`.
    pub fn with_hub(mut self, world: Arc<HubWorld>) -> Service {
        self.machine.hub = Some(world);
        self
    }

    /// The hub's world, when this daemon is a hub.
    pub fn hub_world(&self) -> Option<Arc<HubWorld>> {
        self.machine.hub.clone()
    }

    /// `/api/health` `hub`.
    pub(super) fn hub_health(&self) -> Option<HubHealth> {
        let world = self.machine.hub.as_ref()?;
        Some(HubHealth {
            down_after_ms: world.down_after_ms,
            machines: world.links(),
        })
    }

    /// `GET /api/state`: this machine's state and, on a hub, every other machine's last known
    /// one, qualified by machine, with each machine's link.
    pub fn world_state(&self) -> StateView {
        let mut state = self.state_view();
        let Some(world) = &self.machine.hub else {
            return state;
        };
        let own = self.machine().to_string();
        for session in &mut state.sessions {
            session.machine = Some(own.clone());
            for agent in &mut session.agents {
                agent.machine = Some(own.clone());
            }
        }
        for agent in &mut state.unplaced {
            agent.machine = Some(own.clone());
        }
        let now = now_ms();
        world.read(|machines| {
            for (name, m) in machines {
                let Some(view) = &m.view else { continue };
                let link = m.link(now, world.down_after_ms);
                for session in &view.state.sessions {
                    let mut session = session.clone();
                    session.name = qualify(name, &session.name);
                    session.id = qualify(name, &session.id);
                    session.machine = Some(name.clone());
                    session.machine_link = Some(link);
                    for agent in &mut session.agents {
                        agent.machine = Some(name.clone());
                        agent.session_id = agent.session_id.as_deref().map(|id| qualify(name, id));
                        agent.adoptable = false;
                    }
                    state.sessions.push(session);
                }
                for agent in &view.state.unplaced {
                    let mut agent = agent.clone();
                    agent.machine = Some(name.clone());
                    agent.session_id = agent.session_id.as_deref().map(|id| qualify(name, id));
                    agent.adoptable = false;
                    state.unplaced.push(agent);
                }
            }
        });
        state.machines = world.links();
        state
    }

    /// `GET /api/sessions`: this machine's hosted sessions and, on a hub, every other machine's
    /// (ids qualified, `machine` and the machine's link on each).
    pub fn world_sessions(&self) -> Vec<HostedSessionView> {
        let mut sessions = self.sessions();
        let Some(world) = &self.machine.hub else {
            return sessions;
        };
        let own = self.machine().to_string();
        for session in &mut sessions {
            session.machine = Some(own.clone());
        }
        let now = now_ms();
        world.read(|machines| {
            for (name, m) in machines {
                let Some(view) = &m.view else { continue };
                let link = m.link(now, world.down_after_ms);
                for session in &view.sessions {
                    let mut session = session.clone();
                    session.id = qualify(name, &session.id);
                    session.machine = Some(name.clone());
                    session.machine_link = Some(link);
                    sessions.push(session);
                }
            }
        });
        sessions
    }

    /// Splits a machine-qualified id naming another machine a hub views: `(machine, id)`.
    /// `None` for a local id (this machine's own prefix is stripped by [`Service::local_id`]).
    pub fn remote_id<'a>(&self, id: &'a str) -> Option<(&'a str, &'a str)> {
        let world = self.machine.hub.as_ref()?;
        let (machine, rest) = id.split_once('/')?;
        if machine == self.machine() {
            return None;
        }
        world
            .read(|machines| machines.contains_key(machine))
            .then_some((machine, rest))
    }

    /// A local id as given, or with this machine's own prefix (`<this machine>/<id>`) removed.
    pub fn local_id<'a>(&self, id: &'a str) -> &'a str {
        match id.split_once('/') {
            Some((machine, rest)) if machine == self.machine() => rest,
            _ => id,
        }
    }
}

impl Service {
    /// Whether this daemon is a hub that has heard of `machine` (else `machine_not_found`).
    pub fn known_machine(&self, machine: &str) -> Result<&Arc<HubWorld>, ServiceError> {
        let unknown = || {
            ServiceError::not_found(
                codes::MACHINE_NOT_FOUND,
                format!("no machine `{machine}`: the hub has heard of none by that name"),
            )
        };
        let world = self.machine.hub.as_ref().ok_or_else(unknown)?;
        if !world.read(|machines| machines.contains_key(machine)) {
            return Err(unknown());
        }
        Ok(world)
    }

    /// A command for another machine's session at a hub — every route that acts on a session
    /// (`RemoteOp`: a prompt, an interrupt, an approval's or a request's answer, a task, …) —
    /// sent to the machine that owns it, which decides and writes; the answer is that
    /// machine's (its refusals keep their class and code, the message names the machine). A
    /// machine that does not answer within [`COMMAND_TIMEOUT`] (or takes no commands) is
    /// `machine_unreachable`, naming it.
    pub async fn remote(
        &self,
        machine: &str,
        session: &str,
        op: RemoteOp,
    ) -> Result<serde_json::Value, ServiceError> {
        self.remote_from(RemoteSurface::Http, machine, session, op)
            .await
    }

    /// [`Service::remote`] from a named surface of the hub, whose rules the owning machine
    /// applies (MCP's: no interrupt or answer while a human holds the lease).
    pub async fn remote_from(
        &self,
        surface: RemoteSurface,
        machine: &str,
        session: &str,
        op: RemoteOp,
    ) -> Result<serde_json::Value, ServiceError> {
        let world = self.known_machine(machine)?;
        let command = RemoteCommand {
            session: session.to_string(),
            from: self.machine().to_string(),
            surface,
            op,
        };
        let unreachable = |why: String| {
            ServiceError::new(
                ErrorKind::Unavailable,
                codes::MACHINE_UNREACHABLE,
                format!(
                    "the machine `{machine}` did not take the command: {why}; nothing was done here"
                ),
            )
        };
        let link = world
            .commands
            .get()
            .ok_or_else(|| unreachable("the hub is not connected to NATS yet".to_string()))?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        link.send(CommandRequest {
            machine: machine.to_string(),
            command,
            reply,
        })
        .await
        .map_err(|_| unreachable("the hub's NATS link stopped".to_string()))?;
        let answer = tokio::time::timeout(COMMAND_TIMEOUT + Duration::from_secs(1), answer)
            .await
            .map_err(|_| unreachable(format!("no answer within {COMMAND_TIMEOUT:?}")))?
            .map_err(|_| unreachable("the hub's NATS link stopped".to_string()))?
            .map_err(unreachable)?;
        match (answer.ok, answer.error) {
            (Some(ok), None) => Ok(ok),
            (_, Some(error)) => Err(ServiceError::new(
                kind_of(&error.kind),
                codes::ALL
                    .iter()
                    .find(|c| **c == error.code)
                    .copied()
                    .unwrap_or(codes::INTERNAL_ERROR),
                format!("the machine `{machine}` answered: {}", error.message),
            )),
            (None, None) => Err(unreachable("its answer was empty".to_string())),
        }
    }

    /// The owning machine's side of a [`RemoteCommand`] (`serve --nats-commands`): executed as
    /// a client of this service, exactly as the HTTP API would, and answered the same way.
    pub async fn serve_command(&self, command: RemoteCommand) -> RemoteReply {
        let RemoteCommand {
            session,
            from,
            surface,
            op,
        } = command;
        if surface == RemoteSurface::Mcp
            && let Some(what) = mcp_lease_bound(&op)
            && self
                .lease(&session)
                .is_ok_and(|lease| lease.holder == LeaseHolder::Human)
        {
            // MCP acts only while the lease is managed, as MCP on this machine refuses.
            return refusal(ServiceError::new(
                ErrorKind::Forbidden,
                codes::HUMAN_CONTROL,
                format!("a human holds this session's control lease; only they {what}"),
            ));
        }
        let answer = match op {
            RemoteOp::Prompt { message } => {
                tracing::info!(%session, hub = %from, "a prompt from a hub");
                self.send_prompt(
                    &session,
                    &message.text,
                    message.images,
                    message.idempotency_key,
                )
                .await
                .and_then(to_value)
            }
            RemoteOp::Interrupt {} => {
                tracing::info!(%session, hub = %from, "an interrupt from a hub");
                self.interrupt(&session)
                    .await
                    .and_then(|interrupted| to_value(Interrupted { interrupted }))
            }
            RemoteOp::Approval { approval, decision } => {
                tracing::info!(%session, %approval, hub = %from, "an approval's answer from a hub");
                let by = decision.by.unwrap_or_else(|| hub_by(&from));
                self.resolve_approval(&session, &approval, &decision.decision, Some(&by))
                    .await
                    .and_then(|()| {
                        to_value(ApprovalDecided {
                            ok: true,
                            approval_id: approval.into(),
                            decision: decision.decision.into(),
                        })
                    })
            }
            RemoteOp::Answer {
                request,
                mut answer,
            } => {
                tracing::info!(%session, %request, hub = %from, "a request's answer from a hub");
                answer.by = Some(answer.by.unwrap_or_else(|| hub_by(&from)));
                self.answer_request(&session, &request, answer)
                    .await
                    .and_then(|()| {
                        to_value(RequestAnswered {
                            ok: true,
                            request_id: request,
                        })
                    })
            }
            RemoteOp::Approvals {} => self
                .approvals(&session)
                .and_then(|approvals| to_value(crate::protocol::ApprovalList { approvals })),
            RemoteOp::Requests {} => self
                .requests(&session)
                .and_then(|requests| to_value(crate::protocol::RequestList { requests })),
            RemoteOp::Task { task } => {
                tracing::info!(%session, hub = %from, "a task from a hub");
                match task_source(task.source.as_deref()) {
                    Ok(source) => self
                        .queue_task(&session, &task.text, task.idempotency_key, source)
                        .await
                        .and_then(to_value),
                    Err(error) => Err(error),
                }
            }
            RemoteOp::TaskStatus { task } => self
                .task_of(&session, &task)
                .and_then(|task| to_value(TaskReply { task })),
            RemoteOp::TaskCancel { task } => {
                tracing::info!(%session, %task, hub = %from, "a task's cancel from a hub");
                match self.task_of(&session, &task) {
                    Ok(_) => self.cancel_task(&task, None).await.and_then(to_value),
                    Err(error) => Err(error),
                }
            }
            RemoteOp::TaskResult {
                task,
                offset,
                max_bytes,
            } => self
                .task_of(&session, &task)
                .and_then(|_| self.task_result(&task, offset, max_bytes))
                .and_then(to_value),
            RemoteOp::TaskEdit { task, edit } => {
                tracing::info!(%session, %task, hub = %from, "a task's edit from a hub");
                match self.task_of(&session, &task) {
                    Ok(_) => self
                        .edit_task(&task, edit.revision, &edit.text, edit.idempotency_key)
                        .await
                        .and_then(to_value),
                    Err(error) => Err(error),
                }
            }
            RemoteOp::TaskSupersede { task, edit } => {
                tracing::info!(%session, %task, hub = %from, "a task's supersede from a hub");
                match self.task_of(&session, &task) {
                    Ok(_) => self
                        .supersede_task(&task, edit.revision, &edit.text, edit.idempotency_key)
                        .await
                        .and_then(to_value),
                    Err(error) => Err(error),
                }
            }
            RemoteOp::Queue {} => self.queue(&session).and_then(to_value),
            RemoteOp::LeaseGet {} => self.lease(&session).and_then(|lease| {
                to_value(crate::protocol::LeaseReply {
                    lease,
                    dropped: None,
                })
            }),
            RemoteOp::Mode { mode } => {
                tracing::info!(%session, mode = %mode.mode, hub = %from, "a mode from a hub");
                self.set_mode(&session, &mode.mode).await.and_then(to_value)
            }
            RemoteOp::GoalGet {} => self.goal_get(&session).await.and_then(to_value),
            RemoteOp::GoalSet { goal } => {
                tracing::info!(%session, hub = %from, "a goal from a hub");
                self.goal_set(&session, goal.objective, goal.status, goal.token_budget)
                    .await
                    .and_then(to_value)
            }
            RemoteOp::GoalClear {} => {
                tracing::info!(%session, hub = %from, "a goal's clear from a hub");
                self.goal_clear(&session).await.and_then(to_value)
            }
            RemoteOp::Fork { fork } => {
                tracing::info!(%session, hub = %from, "a fork from a hub");
                match self.fork(&session, fork.after_turn_id).await {
                    Ok(Ok(view)) => to_value(Capability::ok(serde_json::json!(SessionReply {
                        session: view
                    }))),
                    Ok(Err(capability)) => to_value(capability),
                    Err(error) => Err(error),
                }
            }
            RemoteOp::Models { runtime } => {
                self.models(runtime.as_deref()).await.and_then(to_value)
            }
            RemoteOp::Model { model } => {
                tracing::info!(%session, hub = %from, "a model from a hub");
                self.set_model(&session, &model.model, model.thinking_level.as_deref())
                    .await
                    .and_then(to_value)
            }
            RemoteOp::Lease { mut lease } => {
                tracing::info!(%session, action = %lease.action, hub = %from, "a lease from a hub");
                lease.by = Some(lease.by.unwrap_or_else(|| hub_by(&from)));
                self.set_lease(&session, lease).await.and_then(to_value)
            }
            RemoteOp::Create { mut create } => {
                tracing::info!(runtime = %create.runtime, hub = %from, "a session's start from a hub");
                match create.machine.take() {
                    Some(machine) if machine != self.machine() => Err(ServiceError::invalid(
                        format!("this machine is `{}`, not `{machine}`", self.machine()),
                    )),
                    // MCP starts sessions only under this machine's project roots.
                    _ if surface == RemoteSurface::Mcp => match self.mcp_cwd(
                        Some(create.cwd.as_str()).filter(|cwd| !cwd.is_empty()),
                        create.profile.as_deref(),
                    ) {
                        Ok(cwd) => {
                            create.cwd = cwd;
                            self.create(create.into()).await.and_then(to_value)
                        }
                        Err(error) => Err(error),
                    },
                    _ => self.create(create.into()).await.and_then(to_value),
                }
            }
        };
        match answer {
            Ok(ok) => RemoteReply {
                ok: Some(ok),
                error: None,
            },
            Err(error) => refusal(error),
        }
    }

    /// A task of `session` (a hub names both; a task of another session is not found).
    fn task_of(&self, session: &str, task: &str) -> Result<TaskView, ServiceError> {
        let view = self.task(task)?;
        if view.session_id != session {
            return Err(ServiceError::not_found(
                codes::TASK_NOT_FOUND,
                format!("no task `{task}` in the session `{session}`"),
            ));
        }
        Ok(view)
    }
}

/// A task's `source` as the task routes take it: `api` (default) or `cli`; and `mcp`, which
/// only a hub's MCP `send` names (the HTTP route refuses it before).
pub fn task_source(source: Option<&str>) -> Result<TaskSource, ServiceError> {
    match source {
        None | Some("api") => Ok(TaskSource::Api),
        Some("cli") => Ok(TaskSource::Cli),
        Some("mcp") => Ok(TaskSource::Mcp),
        Some(other) => Err(ServiceError::new(
            ErrorKind::Invalid,
            codes::INVALID_FIELD,
            format!("`source` must be api or cli, got `{other}`"),
        )),
    }
}

/// What MCP may not do while a human holds the session's lease (as its tools refuse locally),
/// or `None` for an op MCP does alike under any lease.
fn mcp_lease_bound(op: &RemoteOp) -> Option<&'static str> {
    match op {
        RemoteOp::Interrupt {} => Some("interrupt its turns"),
        RemoteOp::Answer { .. } => Some("answers what the agent asks"),
        RemoteOp::Model { .. } => Some("changes its model"),
        RemoteOp::Mode { .. } => Some("changes its mode"),
        _ => None,
    }
}

/// A refusal as a command's answer: its class, code and message.
fn refusal(error: ServiceError) -> RemoteReply {
    RemoteReply {
        ok: None,
        error: Some(RemoteError {
            kind: kind_name(error.kind).to_string(),
            code: error.code.to_string(),
            message: error.to_string(),
        }),
    }
}

/// Who answered, as the owning machine's `approval.resolved` / `input.resolved` says when the
/// hub's caller named nobody: `hub:<hub>` (at most 64 bytes, as `by` allows).
fn hub_by(hub: &str) -> String {
    let mut by = format!("hub:{hub}");
    while by.len() > 64 {
        by.pop();
    }
    by
}

fn to_value(value: impl serde::Serialize) -> Result<serde_json::Value, ServiceError> {
    serde_json::to_value(value)
        .map_err(|e| ServiceError::new(ErrorKind::Internal, codes::INTERNAL_ERROR, e.to_string()))
}

/// An error class as a command's answer names it.
pub fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Invalid => "invalid",
        ErrorKind::NotFound => "not_found",
        ErrorKind::Conflict => "conflict",
        ErrorKind::Gone => "gone",
        ErrorKind::TooMany => "too_many",
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::Upstream => "upstream",
        ErrorKind::Internal => "internal",
        ErrorKind::Forbidden => "forbidden",
    }
}

/// The error class a command's answer names (`upstream` for one this hub does not know).
pub fn kind_of(name: &str) -> ErrorKind {
    [
        ErrorKind::Invalid,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Gone,
        ErrorKind::TooMany,
        ErrorKind::Unavailable,
        ErrorKind::Upstream,
        ErrorKind::Internal,
        ErrorKind::Forbidden,
    ]
    .into_iter()
    .find(|k| kind_name(*k) == name)
    .unwrap_or(ErrorKind::Upstream)
}

/// `<machine>/<id>`.
pub fn qualify(machine: &str, id: &str) -> String {
    format!("{machine}/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event of `session` with `seq` (also read.rs's tests).
    pub(super) fn event(seq: u64, session: &str) -> RemoteEvent {
        RemoteEvent {
            seq,
            session: Some(session.to_string()),
            json: format!("{{\"seq\":{seq},\"session\":\"{session}\"}}").into(),
        }
    }

    #[test]
    fn events_are_held_once_in_order_and_a_silent_machine_is_down() {
        let world = HubWorld::new(Duration::from_secs(5), DEFAULT_HUB_MEMORY);
        let added = world.add_events("b", [event(1, "s"), event(2, "s")], Some(now_ms()));
        assert_eq!(added.added, 2);
        // A redelivery (after a restart) adds nothing and is counted.
        let again = world.add_events("b", [event(2, "s"), event(3, "t")], None);
        assert_eq!(
            again,
            Added {
                added: 1,
                duplicates: 1
            }
        );
        assert_eq!(world.last_seq("b"), 3);
        let link = &world.links()[0];
        assert_eq!(link.link, MachineLinkState::Up);
        assert_eq!(link.duplicates_dropped, 1);
        world.write(|m| m.get_mut("b").unwrap().heard_at = Some(now_ms() - 6_000));
        assert_eq!(world.links()[0].link, MachineLinkState::Down);
        world.know("never");
        let never = world.links().into_iter().find(|l| l.machine == "never");
        assert_eq!(never.unwrap().link, MachineLinkState::Down);
    }
}
