//! The task registry and control leases: a pure state machine over logged events, like the
//! tracker and the session registry.
//!
//! `task.*` events move a task through its phases; a session's `turn.completed` finishes the
//! task that turn consumed, with the turn's last assistant message as its result — derived here,
//! not logged again, so replaying the log gives exactly the same tasks. `lease.changed` events
//! set each session's lease. It does no I/O and cannot fail.
//!
//! **Bounds.** Finished tasks (with their idempotency keys) are kept per session up to
//! [`MAX_FINISHED_PER_SESSION`] and for [`FINISHED_KEPT_MS`] after they finished, and up to
//! [`MAX_FINISHED`] in all — past that, the session holding the most gives up its oldest, so one
//! busy session never erases another's recent tasks. Unfinished tasks are bounded by the
//! manager's per-session queue limit.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::protocol::{
    CancelOutcome, Event, EventKind, Item, Lease, SessionState, TaskPhase, TaskQueued, TaskSource,
    TaskState, TurnStatus, WaitingReason,
};

/// Finished tasks kept (results included) in all sessions together.
pub const MAX_FINISHED: usize = 2000;
/// Finished tasks kept for one session: its oldest go first.
pub const MAX_FINISHED_PER_SESSION: usize = 500;
/// How long a finished task is kept (ms after it finished, by the log's clock).
pub const FINISHED_KEPT_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Completed turns remembered per session, so a task accepted after its (fast) turn already
/// ended still gets its result.
const RECENT_TURNS: usize = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    pub id: String,
    pub session: String,
    pub order: u64,
    pub prompt: String,
    pub source: TaskSource,
    pub idempotency_key: Option<String>,
    pub revision: u64,
    pub state: TaskState,
    pub phase: TaskPhase,
    pub created_at: u64,
    pub updated_at: u64,
    pub delivered_at: Option<u64>,
    pub accepted_at: Option<u64>,
    pub finished_at: Option<u64>,
    pub turn_id: Option<String>,
    pub accepted_as: Option<String>,
    pub lease_generation_at_delivery: Option<u64>,
    pub cancel_requested: bool,
    pub cancel_lease_generation: Option<u64>,
    pub cancel_outcome: Option<CancelOutcome>,
    pub abort_withheld: Option<String>,
    pub edit_keys: Vec<String>,
    /// In-place edits applied (keyed or not).
    #[serde(default)]
    pub edits: usize,
    pub supersedes: Option<String>,
    pub superseded_by: Option<String>,
    pub human_intervened: bool,
    pub error: Option<String>,
    /// Why the last delivery attempt did not happen (cleared on delivery).
    pub returned: Option<WaitingReason>,
    /// The final assistant text of the turn that consumed the task (unredacted; views redact).
    pub result: Option<String>,
    /// For a prompt the agent queued behind a running turn: that turn (not the task's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_behind: Option<String>,
}

impl TaskRecord {
    pub fn is_finished(&self) -> bool {
        self.state.is_finished()
    }
}

/// How a turn ended, as far as its task is concerned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnEnd {
    status: TurnStatus,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    lost: bool,
}

/// What a session remembers about a recent turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnNote {
    last_message: Option<String>,
    ended: Option<TurnEnd>,
    /// Its user messages (at most [`TURN_PROMPTS`]): a prompt the agent queued can start its
    /// turn before the acceptance that says it was queued is logged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    prompts: Vec<String>,
}

/// User messages remembered per recent turn.
const TURN_PROMPTS: usize = 4;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTasks {
    pub lease: Lease,
    /// Unfinished tasks (waiting and running), in queue order.
    pub open: Vec<String>,
    /// Finished tasks, newest last.
    pub finished: VecDeque<String>,
    next_order: u64,
    turns: VecDeque<(String, TurnNote)>,
}

impl SessionTasks {
    fn turn_mut(&mut self, turn_id: &str) -> &mut TurnNote {
        let index = match self.turns.iter().position(|(id, _)| id == turn_id) {
            Some(index) => index,
            None => {
                if self.turns.len() >= RECENT_TURNS {
                    self.turns.pop_front();
                }
                self.turns
                    .push_back((turn_id.to_string(), TurnNote::default()));
                self.turns.len() - 1
            }
        };
        &mut self.turns[index].1
    }

    fn turn(&self, turn_id: &str) -> Option<&TurnNote> {
        self.turns
            .iter()
            .find(|(id, _)| id == turn_id)
            .map(|(_, note)| note)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tasks {
    tasks: HashMap<String, TaskRecord>,
    sessions: BTreeMap<String, SessionTasks>,
    /// Task ids by `session \0 idempotency key`.
    keys: HashMap<String, String>,
    /// Finished task ids across sessions, oldest first (for the bound).
    finished: VecDeque<String>,
}

fn key_of(session: &str, key: &str) -> String {
    format!("{session}\0{key}")
}

impl Tasks {
    pub fn get(&self, id: &str) -> Option<&TaskRecord> {
        self.tasks.get(id)
    }

    pub fn by_key(&self, session: &str, key: &str) -> Option<&TaskRecord> {
        self.keys
            .get(&key_of(session, key))
            .and_then(|id| self.tasks.get(id))
    }

    pub fn lease(&self, session: &str) -> Lease {
        self.sessions
            .get(session)
            .map(|s| s.lease.clone())
            .unwrap_or_default()
    }

    pub fn session(&self, session: &str) -> Option<&SessionTasks> {
        self.sessions.get(session)
    }

    /// The session's unfinished tasks in queue order.
    pub fn open(&self, session: &str) -> impl Iterator<Item = &TaskRecord> {
        self.sessions
            .get(session)
            .into_iter()
            .flat_map(|s| s.open.iter())
            .filter_map(|id| self.tasks.get(id))
    }

    /// The session's finished tasks, newest first.
    pub fn recent(&self, session: &str) -> impl Iterator<Item = &TaskRecord> {
        self.sessions
            .get(session)
            .into_iter()
            .flat_map(|s| s.finished.iter().rev())
            .filter_map(|id| self.tasks.get(id))
    }

    /// Sessions with at least one waiting task.
    pub fn sessions_with_waiting(&self) -> Vec<String> {
        self.sessions
            .iter()
            .filter(|(id, _)| self.open(id).any(|t| t.state == TaskState::Waiting))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every unfinished task (for recovery after a restart).
    pub fn all_open(&self) -> Vec<TaskRecord> {
        self.sessions
            .keys()
            .flat_map(|s| self.open(s).cloned().collect::<Vec<_>>())
            .collect()
    }

    fn finish(&mut self, session: &str, id: &str, ts: u64) {
        let Some(entry) = self.sessions.get_mut(session) else {
            return;
        };
        entry.open.retain(|t| t != id);
        entry.finished.push_back(id.to_string());
        if let Some(task) = self.tasks.get_mut(id) {
            task.phase = TaskPhase::Finished;
            task.finished_at = Some(ts);
            task.updated_at = ts;
        }
        self.finished.push_back(id.to_string());
        self.bound_finished(session, ts);
    }

    /// Applies the bounds on finished tasks (see the module's doc) after one finished in
    /// `session` at `ts`.
    fn bound_finished(&mut self, session: &str, ts: u64) {
        let mut gone = Vec::new();
        // The session's own bound.
        if let Some(entry) = self.sessions.get_mut(session) {
            while entry.finished.len() > MAX_FINISHED_PER_SESSION {
                gone.extend(entry.finished.pop_front());
            }
        }
        // Age: the oldest finished tasks overall come first in `finished`.
        for id in &self.finished {
            let old = self
                .tasks
                .get(id)
                .and_then(|t| t.finished_at)
                .is_some_and(|at| at.saturating_add(FINISHED_KEPT_MS) < ts);
            if !old {
                break;
            }
            gone.push(id.clone());
        }
        for id in gone {
            self.forget(&id);
        }
        // All sessions: the one holding the most gives up its oldest.
        while self.finished.len() > MAX_FINISHED {
            let Some(oldest) = self
                .sessions
                .values()
                .max_by_key(|s| s.finished.len())
                .and_then(|s| s.finished.front().cloned())
            else {
                break;
            };
            self.forget(&oldest);
        }
    }

    /// Forgets a finished task: its record, its idempotency key and its places in the lists.
    fn forget(&mut self, id: &str) {
        if let Some(task) = self.tasks.remove(id) {
            if let Some(key) = &task.idempotency_key {
                self.keys.remove(&key_of(&task.session, key));
            }
            if let Some(s) = self.sessions.get_mut(&task.session) {
                s.finished.retain(|t| t != id);
            }
        }
        self.finished.retain(|t| t != id);
    }

    /// Ends the task its turn consumed, with the turn's outcome and last message.
    fn finish_with_turn(&mut self, session: &str, id: &str, turn: TurnEnd, ts: u64) {
        let status = turn.status;
        let result = self
            .sessions
            .get(session)
            .and_then(|s| {
                let turn = self.tasks.get(id)?.turn_id.as_deref()?;
                s.turn(turn)
            })
            .and_then(|note| note.last_message.clone());
        let Some(task) = self.tasks.get_mut(id) else {
            return;
        };
        if task.is_finished() {
            return;
        }
        task.result = result;
        if turn.lost {
            // The process holding the turn went away: nobody knows how it ended.
            task.state = TaskState::Unknown;
            task.error = turn.error;
            if task.cancel_requested {
                task.cancel_outcome = Some(CancelOutcome::OutcomeUnknown);
            }
            self.finish(session, id, ts);
            return;
        }
        task.error = turn.error;
        task.state = match status {
            TurnStatus::Completed => TaskState::Completed,
            TurnStatus::Failed => TaskState::Failed,
            TurnStatus::Interrupted => TaskState::Cancelled,
        };
        if task.cancel_requested {
            task.cancel_outcome = Some(match (task.cancel_outcome, status) {
                (Some(CancelOutcome::AbortWithheld), _) => CancelOutcome::AbortWithheld,
                (Some(CancelOutcome::AbortSent), TurnStatus::Interrupted) => CancelOutcome::Aborted,
                _ => CancelOutcome::FinishedBeforeAbort,
            });
        }
        if status == TurnStatus::Interrupted && task.cancel_outcome != Some(CancelOutcome::Aborted)
        {
            task.human_intervened = true;
        }
        self.finish(session, id, ts);
    }

    /// The open tasks a turn consumed: the one that started it, and any that steered it or were
    /// folded into it.
    fn open_tasks_of_turn(&self, session: &str, turn_id: &str) -> Vec<String> {
        self.open(session)
            .filter(|t| t.turn_id.as_deref() == Some(turn_id))
            .map(|t| t.id.clone())
            .collect()
    }

    pub fn apply(&mut self, event: &Event) {
        let Some(session) = event.session.as_deref() else {
            return;
        };
        let ts = event.ts;
        match &event.kind {
            EventKind::TaskQueued(queued) => self.queue(session, queued, ts),
            EventKind::TaskEdited(edited) => {
                if let Some(task) = self.tasks.get_mut(&edited.task_id) {
                    task.prompt = edited.prompt.clone();
                    task.revision = edited.revision;
                    task.edits += 1;
                    task.updated_at = ts;
                    if let Some(key) = &edited.edit_key {
                        task.edit_keys.push(key.clone());
                    }
                }
            }
            EventKind::TaskDelivered(delivered) => {
                if let Some(task) = self.tasks.get_mut(&delivered.task_id) {
                    task.state = TaskState::Running;
                    task.phase = TaskPhase::Delivered;
                    task.delivered_at = Some(ts);
                    task.lease_generation_at_delivery = Some(delivered.lease_generation);
                    task.returned = None;
                    task.revision += 1;
                    task.updated_at = ts;
                }
            }
            EventKind::TaskReturned(returned) => {
                if let Some(task) = self.tasks.get_mut(&returned.task_id) {
                    task.state = TaskState::Waiting;
                    task.phase = TaskPhase::Queued;
                    task.delivered_at = None;
                    task.lease_generation_at_delivery = None;
                    task.returned = Some(returned.reason);
                    task.revision += 1;
                    task.updated_at = ts;
                }
            }
            EventKind::TaskAccepted(accepted) => {
                let Some(task) = self.tasks.get_mut(&accepted.task_id) else {
                    return;
                };
                if task.is_finished() {
                    return;
                }
                task.state = TaskState::Running;
                task.phase = TaskPhase::Accepted;
                task.accepted_at = Some(ts);
                task.accepted_as = Some(accepted.accepted_as.clone());
                task.revision += 1;
                task.updated_at = ts;
                if accepted.accepted_as == "queued" {
                    // Claude queued it behind a running turn: its own turn starts later, and
                    // the user message carrying its text names it (see `ItemCompleted`).
                    task.queued_behind =
                        (!accepted.turn_id.is_empty()).then(|| accepted.turn_id.clone());
                    let prompt = task.prompt.trim().to_string();
                    // Its turn may have started (even ended) before this acceptance was logged:
                    // Claude takes a queued prompt as soon as the turn before it ends, while
                    // cohost may still be confirming the paste. Its own turn is then one after
                    // the turn it queued behind whose user message carries its text.
                    let own = self.sessions.get(session).and_then(|s| {
                        let behind = s.turns.iter().position(|(id, _)| *id == accepted.turn_id)?;
                        s.turns.iter().skip(behind + 1).find_map(|(id, note)| {
                            note.prompts
                                .iter()
                                .any(|text| {
                                    let text = text.trim();
                                    !prompt.is_empty() && (text == prompt || text.contains(&prompt))
                                })
                                .then(|| (id.clone(), note.ended.clone()))
                        })
                    });
                    if let Some((turn, ended)) = own {
                        if let Some(task) = self.tasks.get_mut(&accepted.task_id) {
                            task.turn_id = Some(turn);
                        }
                        if let Some(end) = ended {
                            self.finish_with_turn(session, &accepted.task_id, end, ts);
                        }
                    }
                    return;
                }
                task.turn_id = Some(accepted.turn_id.clone());
                // The turn may have ended before the acceptance was logged (a fast turn).
                let ended = self
                    .sessions
                    .get(session)
                    .and_then(|s| s.turn(&accepted.turn_id))
                    .and_then(|note| note.ended.clone());
                if let Some(end) = ended {
                    self.finish_with_turn(session, &accepted.task_id, end, ts);
                }
            }
            EventKind::TaskFinished(finished) => {
                let Some(task) = self.tasks.get_mut(&finished.task_id) else {
                    return;
                };
                if task.is_finished() {
                    return;
                }
                task.state = finished.state;
                if finished.cancel_outcome.is_some() {
                    task.cancel_outcome = finished.cancel_outcome;
                }
                if finished.state == TaskState::Cancelled {
                    task.cancel_requested = true;
                }
                task.error = finished.error.clone();
                task.superseded_by = finished.superseded_by.clone();
                task.revision += 1;
                self.finish(session, &finished.task_id, ts);
            }
            EventKind::TaskCancelRequested(request) => {
                if let Some(task) = self.tasks.get_mut(&request.task_id) {
                    task.cancel_requested = true;
                    task.cancel_lease_generation = Some(request.lease_generation);
                    task.revision += 1;
                    task.updated_at = ts;
                }
            }
            EventKind::TaskAbort(abort) => {
                if let Some(task) = self.tasks.get_mut(&abort.task_id)
                    && !task.is_finished()
                {
                    task.cancel_outcome = Some(abort.outcome);
                    task.abort_withheld = abort.reason.clone();
                    task.revision += 1;
                    task.updated_at = ts;
                }
            }
            EventKind::LeaseChanged(lease) => {
                let entry = self.sessions.entry(session.to_string()).or_default();
                entry.lease = lease.clone();
                entry.lease.since = ts;
            }
            EventKind::ItemCompleted(item) => match &item.item {
                Item::AgentMessage { text, .. } => {
                    // Remembered even before the session has a task: a direct send's task is
                    // recorded after its prompt went out, and a fast turn can end first.
                    self.sessions
                        .entry(session.to_string())
                        .or_default()
                        .turn_mut(&item.turn_id)
                        .last_message = Some(text.clone());
                }
                Item::UserMessage { text, .. } => {
                    let note = self
                        .sessions
                        .entry(session.to_string())
                        .or_default()
                        .turn_mut(&item.turn_id);
                    if note.prompts.len() < TURN_PROMPTS {
                        note.prompts.push(text.clone());
                    }
                    // Prompts the agent queued reach their turn: bind each to it. A turn can
                    // carry several queued prompts (Claude 2.1.197 folds the prompts queued
                    // behind one turn into the next), so a prompt found inside the message
                    // counts too — never one found in the turn it queued behind.
                    let text = text.trim();
                    let waiting: Vec<String> = self
                        .open(session)
                        .filter(|t| {
                            let prompt = t.prompt.trim();
                            t.phase == TaskPhase::Accepted
                                && t.accepted_as.as_deref() == Some("queued")
                                && t.turn_id.is_none()
                                && t.queued_behind.as_deref() != Some(item.turn_id.as_str())
                                && !prompt.is_empty()
                                && (prompt == text || text.contains(prompt))
                        })
                        .map(|t| t.id.clone())
                        .collect();
                    for id in waiting {
                        if let Some(task) = self.tasks.get_mut(&id) {
                            task.turn_id = Some(item.turn_id.clone());
                            task.updated_at = ts;
                        }
                    }
                }
                _ => {}
            },
            EventKind::TurnCompleted(turn) => {
                let end = TurnEnd {
                    status: turn.status,
                    error: turn.error.clone(),
                    lost: turn.lost,
                };
                self.sessions
                    .entry(session.to_string())
                    .or_default()
                    .turn_mut(&turn.turn_id)
                    .ended = Some(end.clone());
                for id in self.open_tasks_of_turn(session, &turn.turn_id) {
                    self.finish_with_turn(session, &id, end.clone(), ts);
                }
            }
            EventKind::SessionClosed(_) => self.orphan(session, "session closed", ts),
            EventKind::SessionStatus(status) if status.state == SessionState::Exited => {
                self.orphan(session, "the agent's process exited", ts)
            }
            // The status says why (the runtime's last output, a restart that failed, cohost's
            // follower of the session stopped).
            EventKind::SessionStatus(status) if status.state == SessionState::Lost => {
                let why = match &status.message {
                    Some(message) => format!("the session was lost: {message}"),
                    None => "the session was lost".to_string(),
                };
                self.orphan(session, &why, ts)
            }
            _ => {}
        }
    }

    fn queue(&mut self, session: &str, queued: &TaskQueued, ts: u64) {
        let entry = self.sessions.entry(session.to_string()).or_default();
        let order = queued.order.unwrap_or(entry.next_order);
        entry.next_order = entry.next_order.max(order + 1);
        let task = TaskRecord {
            id: queued.task_id.clone(),
            session: session.to_string(),
            order,
            prompt: queued.prompt.clone(),
            source: queued.source,
            idempotency_key: queued.idempotency_key.clone(),
            revision: 1,
            state: TaskState::Waiting,
            phase: TaskPhase::Queued,
            created_at: ts,
            updated_at: ts,
            delivered_at: None,
            accepted_at: None,
            finished_at: None,
            turn_id: None,
            accepted_as: None,
            lease_generation_at_delivery: None,
            cancel_requested: false,
            cancel_lease_generation: None,
            cancel_outcome: None,
            abort_withheld: None,
            edit_keys: Vec::new(),
            edits: 0,
            supersedes: queued.supersedes.clone(),
            superseded_by: None,
            human_intervened: false,
            error: None,
            returned: None,
            result: None,
            queued_behind: None,
        };
        let position = entry
            .open
            .iter()
            .position(|id| self.tasks.get(id).is_some_and(|t| t.order > order))
            .unwrap_or(entry.open.len());
        entry.open.insert(position, task.id.clone());
        if let Some(key) = &queued.idempotency_key {
            self.keys.insert(key_of(session, key), task.id.clone());
        }
        self.tasks.insert(task.id.clone(), task);
    }

    /// The session's agent is gone: waiting work is cancelled, delivered work is unknown.
    fn orphan(&mut self, session: &str, why: &str, ts: u64) {
        let open: Vec<String> = self.open(session).map(|t| t.id.clone()).collect();
        for id in open {
            let Some(task) = self.tasks.get_mut(&id) else {
                continue;
            };
            if task.state == TaskState::Waiting {
                task.state = TaskState::Cancelled;
                task.cancel_outcome = Some(CancelOutcome::CancelledBeforeDelivery);
            } else {
                task.state = TaskState::Unknown;
                if task.cancel_requested {
                    task.cancel_outcome = Some(CancelOutcome::OutcomeUnknown);
                }
            }
            task.error = Some(why.to_string());
            task.revision += 1;
            self.finish(session, &id, ts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        ItemEvent, LeaseHolder, TaskAbort, TaskAccepted, TaskDelivered, TurnCompleted,
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

    fn queued(id: &str, key: Option<&str>, order: Option<u64>) -> EventKind {
        EventKind::TaskQueued(TaskQueued {
            task_id: id.into(),
            prompt: format!("prompt {id}"),
            source: TaskSource::Api,
            idempotency_key: key.map(Into::into),
            order,
            supersedes: None,
        })
    }

    fn completed(turn: &str, status: TurnStatus) -> EventKind {
        EventKind::TurnCompleted(TurnCompleted {
            turn_id: turn.into(),
            status,
            error: None,
            duration_ms: None,
            lost: false,
        })
    }

    fn message(turn: &str, text: &str) -> EventKind {
        EventKind::ItemCompleted(ItemEvent {
            turn_id: turn.into(),
            item: Item::AgentMessage {
                id: format!("{turn}:m"),
                text: text.into(),
                interrupted: false,
            },
        })
    }

    #[test]
    fn queue_order_delivery_and_result() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, queued("a", Some("k"), None)));
        tasks.apply(&event(2, queued("b", None, None)));
        assert_eq!(tasks.by_key("s1", "k").unwrap().id, "a");
        let order: Vec<_> = tasks.open("s1").map(|t| t.id.as_str()).collect();
        assert_eq!(order, ["a", "b"]);
        // A replacement keeps the order it was given.
        tasks.apply(&event(3, queued("a2", None, Some(0))));
        let order: Vec<_> = tasks.open("s1").map(|t| t.id.as_str()).collect();
        assert_eq!(order, ["a", "a2", "b"]);

        tasks.apply(&event(
            4,
            EventKind::TaskDelivered(TaskDelivered {
                task_id: "a".into(),
                lease_generation: 0,
            }),
        ));
        tasks.apply(&event(
            5,
            EventKind::TaskAccepted(TaskAccepted {
                task_id: "a".into(),
                turn_id: "t1".into(),
                accepted_as: "turn".into(),
            }),
        ));
        tasks.apply(&event(6, message("t1", "first")));
        tasks.apply(&event(7, message("t1", "final")));
        tasks.apply(&event(8, completed("t1", TurnStatus::Completed)));
        let a = tasks.get("a").unwrap();
        assert_eq!(a.state, TaskState::Completed);
        assert_eq!(a.phase, TaskPhase::Finished);
        assert_eq!(a.result.as_deref(), Some("final"));
        assert_eq!(tasks.recent("s1").next().unwrap().id, "a");
    }

    #[test]
    fn a_task_accepted_after_its_turn_ended_still_finishes() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, queued("a", None, None)));
        tasks.apply(&event(2, message("t1", "fast")));
        tasks.apply(&event(3, completed("t1", TurnStatus::Completed)));
        tasks.apply(&event(
            4,
            EventKind::TaskAccepted(TaskAccepted {
                task_id: "a".into(),
                turn_id: "t1".into(),
                accepted_as: "turn".into(),
            }),
        ));
        let a = tasks.get("a").unwrap();
        assert_eq!(a.state, TaskState::Completed);
        assert_eq!(a.result.as_deref(), Some("fast"));
    }

    #[test]
    fn cancel_outcomes_follow_the_turn() {
        let mut tasks = Tasks::default();
        for (i, (id, turn)) in [("a", "t1"), ("b", "t2"), ("c", "t3")].iter().enumerate() {
            let base = i as u64 * 10;
            tasks.apply(&event(base + 1, queued(id, None, None)));
            tasks.apply(&event(
                base + 2,
                EventKind::TaskAccepted(TaskAccepted {
                    task_id: (*id).into(),
                    turn_id: (*turn).into(),
                    accepted_as: "turn".into(),
                }),
            ));
        }
        tasks.apply(&event(
            40,
            EventKind::TaskAbort(TaskAbort {
                task_id: "a".into(),
                outcome: CancelOutcome::AbortSent,
                reason: None,
            }),
        ));
        tasks.get_mut_for_test("a").cancel_requested = true;
        tasks.apply(&event(41, completed("t1", TurnStatus::Interrupted)));
        assert_eq!(
            tasks.get("a").unwrap().cancel_outcome,
            Some(CancelOutcome::Aborted)
        );
        assert!(!tasks.get("a").unwrap().human_intervened);

        tasks.get_mut_for_test("b").cancel_requested = true;
        tasks.apply(&event(
            42,
            EventKind::TaskAbort(TaskAbort {
                task_id: "b".into(),
                outcome: CancelOutcome::AbortSent,
                reason: None,
            }),
        ));
        tasks.apply(&event(43, completed("t2", TurnStatus::Completed)));
        let b = tasks.get("b").unwrap();
        assert_eq!(b.state, TaskState::Completed);
        assert_eq!(b.cancel_outcome, Some(CancelOutcome::FinishedBeforeAbort));

        // Interrupted by someone else: cancelled, flagged as a human intervention.
        tasks.apply(&event(44, completed("t3", TurnStatus::Interrupted)));
        let c = tasks.get("c").unwrap();
        assert_eq!(c.state, TaskState::Cancelled);
        assert!(c.human_intervened);
    }

    #[test]
    fn a_prompt_the_agent_queued_finishes_with_its_own_turn() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, queued("a", None, None)));
        tasks.apply(&event(
            2,
            EventKind::TaskAccepted(TaskAccepted {
                task_id: "a".into(),
                turn_id: "human-turn".into(),
                accepted_as: "queued".into(),
            }),
        ));
        // The human's turn ends: not the task's.
        tasks.apply(&event(3, message("human-turn", "for the human")));
        tasks.apply(&event(4, completed("human-turn", TurnStatus::Completed)));
        assert_eq!(tasks.get("a").unwrap().state, TaskState::Running);
        tasks.apply(&event(
            5,
            EventKind::ItemCompleted(ItemEvent {
                turn_id: "t2".into(),
                item: Item::UserMessage {
                    id: "t2:u".into(),
                    text: "prompt a\n".into(),
                },
            }),
        ));
        tasks.apply(&event(6, message("t2", "for the task")));
        tasks.apply(&event(7, completed("t2", TurnStatus::Completed)));
        let a = tasks.get("a").unwrap();
        assert_eq!(a.state, TaskState::Completed);
        assert_eq!(a.turn_id.as_deref(), Some("t2"));
        assert_eq!(a.result.as_deref(), Some("for the task"));
    }

    fn accepted(task: &str, turn: &str, accepted_as: &str) -> EventKind {
        EventKind::TaskAccepted(TaskAccepted {
            task_id: task.into(),
            turn_id: turn.into(),
            accepted_as: accepted_as.into(),
        })
    }

    fn user_message(turn: &str, text: &str) -> EventKind {
        EventKind::ItemCompleted(ItemEvent {
            turn_id: turn.into(),
            item: Item::UserMessage {
                id: format!("{turn}:u"),
                text: text.into(),
            },
        })
    }

    #[test]
    fn a_message_that_steered_a_turn_finishes_with_that_turn() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, queued("a", None, None)));
        tasks.apply(&event(2, accepted("a", "t1", "turn")));
        tasks.apply(&event(3, queued("b", None, None)));
        tasks.apply(&event(4, accepted("b", "t1", "steer")));
        tasks.apply(&event(5, queued("c", None, None)));
        tasks.apply(&event(6, message("t1", "done with both")));
        tasks.apply(&event(7, completed("t1", TurnStatus::Completed)));
        for id in ["a", "b"] {
            let task = tasks.get(id).unwrap();
            assert_eq!(task.state, TaskState::Completed, "{id}");
            assert_eq!(task.result.as_deref(), Some("done with both"), "{id}");
        }
        // Nothing is left in flight: the next task is the only open one.
        let open: Vec<&str> = tasks.open("s1").map(|t| t.id.as_str()).collect();
        assert_eq!(open, ["c"]);
    }

    #[test]
    fn a_queued_prompt_whose_turn_started_before_its_acceptance_was_logged_binds_to_it() {
        // Claude took the queued prompt as soon as the turn before it ended, while cohost was
        // still confirming the paste: its user message — even its turn's end — comes first.
        for ended_first in [false, true] {
            let mut tasks = Tasks::default();
            tasks.apply(&event(1, queued("a", None, None)));
            tasks.apply(&event(2, accepted("a", "t1", "turn")));
            tasks.apply(&event(3, queued("b", None, None)));
            tasks.apply(&event(4, message("t1", "first answer")));
            tasks.apply(&event(5, completed("t1", TurnStatus::Completed)));
            tasks.apply(&event(6, user_message("t2", "prompt b")));
            tasks.apply(&event(7, message("t2", "second answer")));
            if ended_first {
                tasks.apply(&event(8, completed("t2", TurnStatus::Completed)));
            }
            tasks.apply(&event(9, accepted("b", "t1", "queued")));
            assert_eq!(tasks.get("b").unwrap().turn_id.as_deref(), Some("t2"));
            if !ended_first {
                assert_eq!(tasks.get("b").unwrap().state, TaskState::Running);
                tasks.apply(&event(10, completed("t2", TurnStatus::Completed)));
            }
            let b = tasks.get("b").unwrap();
            assert_eq!(b.state, TaskState::Completed, "ended first: {ended_first}");
            assert_eq!(b.result.as_deref(), Some("second answer"));
            assert_eq!(
                tasks.get("a").unwrap().result.as_deref(),
                Some("first answer")
            );
        }
    }

    #[test]
    fn a_queued_prompt_never_binds_to_the_turn_it_queued_behind_or_an_earlier_one() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, user_message("t0", "prompt b")));
        tasks.apply(&event(2, completed("t0", TurnStatus::Completed)));
        tasks.apply(&event(3, user_message("t1", "prompt b")));
        tasks.apply(&event(4, queued("b", None, None)));
        tasks.apply(&event(5, accepted("b", "t1", "queued")));
        let b = tasks.get("b").unwrap();
        assert_eq!(b.turn_id, None);
        assert_eq!(b.state, TaskState::Running);
    }

    #[test]
    fn prompts_the_agent_folded_into_one_turn_all_finish_with_it() {
        let mut tasks = Tasks::default();
        for (seq, id) in [(1, "a"), (3, "b")] {
            tasks.apply(&event(seq, queued(id, None, None)));
            tasks.apply(&event(seq + 1, accepted(id, "human-turn", "queued")));
        }
        // A prompt of the turn they queued behind does not bind them, even with their text.
        tasks.apply(&event(5, user_message("human-turn", "prompt a")));
        tasks.apply(&event(6, completed("human-turn", TurnStatus::Completed)));
        assert_eq!(tasks.get("a").unwrap().state, TaskState::Running);
        // Claude 2.1.197 sends both queued prompts as one.
        tasks.apply(&event(7, user_message("t2", "prompt a\nprompt b")));
        tasks.apply(&event(8, message("t2", "answered both")));
        tasks.apply(&event(9, completed("t2", TurnStatus::Completed)));
        for id in ["a", "b"] {
            let task = tasks.get(id).unwrap();
            assert_eq!(task.state, TaskState::Completed, "{id}");
            assert_eq!(task.turn_id.as_deref(), Some("t2"), "{id}");
        }
    }

    #[test]
    fn the_first_turn_of_a_session_can_end_before_its_task_is_recorded() {
        let mut tasks = Tasks::default();
        // A direct send: the prompt went out and its turn ended before the task was logged.
        tasks.apply(&event(1, message("t1", "fast answer")));
        tasks.apply(&event(2, completed("t1", TurnStatus::Completed)));
        tasks.apply(&event(3, queued("a", None, None)));
        tasks.apply(&event(4, accepted("a", "t1", "turn")));
        let a = tasks.get("a").unwrap();
        assert_eq!(a.state, TaskState::Completed);
        assert_eq!(a.result.as_deref(), Some("fast answer"));
    }

    #[test]
    fn a_lost_turn_leaves_its_task_unknown() {
        let mut tasks = Tasks::default();
        tasks.apply(&event(1, queued("a", None, None)));
        tasks.apply(&event(
            2,
            EventKind::TaskAccepted(TaskAccepted {
                task_id: "a".into(),
                turn_id: "t1".into(),
                accepted_as: "turn".into(),
            }),
        ));
        tasks.apply(&event(
            3,
            EventKind::TurnCompleted(TurnCompleted {
                turn_id: "t1".into(),
                status: TurnStatus::Interrupted,
                error: Some("the backend exited".into()),
                duration_ms: None,
                lost: true,
            }),
        ));
        let a = tasks.get("a").unwrap();
        assert_eq!(a.state, TaskState::Unknown);
        assert_eq!(a.error.as_deref(), Some("the backend exited"));
        assert!(!a.human_intervened);
    }

    #[test]
    fn leases_and_orphans() {
        let mut tasks = Tasks::default();
        assert_eq!(tasks.lease("s1").holder, LeaseHolder::Managed);
        tasks.apply(&event(
            1,
            EventKind::LeaseChanged(Lease {
                holder: LeaseHolder::Human,
                generation: 1,
                since: 0,
                reason: Some("takeover".into()),
                by: None,
            }),
        ));
        assert_eq!(tasks.lease("s1").generation, 1);
        assert_eq!(tasks.lease("s1").since, 1);
        tasks.apply(&event(2, queued("a", None, None)));
        tasks.apply(&event(3, queued("b", None, None)));
        tasks.apply(&event(
            4,
            EventKind::TaskDelivered(TaskDelivered {
                task_id: "a".into(),
                lease_generation: 1,
            }),
        ));
        tasks.apply(&event(
            5,
            EventKind::SessionClosed(crate::protocol::SessionClosed {
                reason: "bye".into(),
            }),
        ));
        assert_eq!(tasks.get("a").unwrap().state, TaskState::Unknown);
        assert_eq!(tasks.get("b").unwrap().state, TaskState::Cancelled);
        assert_eq!(tasks.open("s1").count(), 0);
    }

    #[test]
    fn a_lost_session_orphans_its_tasks_saying_why_it_was_lost() {
        let mut tasks = Tasks::default();
        let status = |seq, state, message: Option<&str>| {
            event(
                seq,
                EventKind::SessionStatus(crate::protocol::SessionStatus {
                    state,
                    message: message.map(Into::into),
                }),
            )
        };
        tasks.apply(&event(1, queued("a", None, None)));
        tasks.apply(&status(
            2,
            SessionState::Lost,
            Some("pi exited: out of memory"),
        ));
        tasks.apply(&event(3, queued("b", None, None)));
        tasks.apply(&status(4, SessionState::Lost, None));
        tasks.apply(&event(5, queued("c", None, None)));
        tasks.apply(&status(6, SessionState::Exited, Some("claude exited")));
        let error = |id: &str| tasks.get(id).unwrap().error.clone();
        assert_eq!(
            error("a").as_deref(),
            Some("the session was lost: pi exited: out of memory")
        );
        assert_eq!(error("b").as_deref(), Some("the session was lost"));
        assert_eq!(error("c").as_deref(), Some("the agent's process exited"));
        for id in ["a", "b", "c"] {
            assert_eq!(tasks.get(id).unwrap().state, TaskState::Cancelled, "{id}");
        }
    }

    /// Queues and cancels task `id` (key `k{id}`) in `session` at `ts`.
    fn finish_one(tasks: &mut Tasks, session: &str, id: &str, ts: u64) {
        let in_session = |kind| Event {
            session: Some(session.into()),
            ..event(ts, kind)
        };
        tasks.apply(&in_session(queued(id, Some(&format!("k{id}")), None)));
        tasks.apply(&in_session(EventKind::TaskFinished(
            crate::protocol::TaskFinished {
                task_id: id.into(),
                state: TaskState::Cancelled,
                cancel_outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                error: None,
                superseded_by: None,
            },
        )));
    }

    #[test]
    fn finished_tasks_are_bounded_per_session_with_their_keys() {
        let mut tasks = Tasks::default();
        let n = MAX_FINISHED_PER_SESSION + 5;
        for i in 0..n {
            finish_one(&mut tasks, "s1", &format!("t{i}"), i as u64 + 1);
        }
        assert!(tasks.get("t0").is_none());
        assert!(tasks.by_key("s1", "kt0").is_none());
        assert!(tasks.by_key("s1", &format!("kt{}", n - 1)).is_some());
        assert_eq!(tasks.recent("s1").count(), MAX_FINISHED_PER_SESSION);
    }

    /// One busy session (2,001 finished tasks) leaves another session's recent tasks and their
    /// results alone.
    #[test]
    fn a_busy_session_does_not_erase_another_sessions_recent_tasks() {
        let mut tasks = Tasks::default();
        for i in 0..3 {
            finish_one(&mut tasks, "quiet", &format!("q{i}"), i + 1);
        }
        for i in 0..2001u64 {
            finish_one(&mut tasks, "busy", &format!("b{i}"), 10 + i);
        }
        let quiet: Vec<&str> = tasks.recent("quiet").map(|t| t.id.as_str()).collect();
        assert_eq!(quiet, ["q2", "q1", "q0"]);
        assert!(tasks.by_key("quiet", "kq0").is_some());
        assert_eq!(tasks.recent("busy").count(), MAX_FINISHED_PER_SESSION);
        // Many sessions: the total stays bounded, each losing its own oldest first.
        for s in 0..10u64 {
            for i in 0..MAX_FINISHED_PER_SESSION as u64 {
                finish_one(
                    &mut tasks,
                    &format!("s{s}"),
                    &format!("s{s}-{i}"),
                    5000 + s * 1000 + i,
                );
            }
        }
        assert_eq!(tasks.finished.len(), MAX_FINISHED);
        assert_eq!(
            tasks.recent("quiet").count(),
            3,
            "the smallest session keeps its tasks"
        );
    }

    #[test]
    fn finished_tasks_are_forgotten_a_week_after_they_finished() {
        let mut tasks = Tasks::default();
        finish_one(&mut tasks, "s1", "old", 1);
        finish_one(&mut tasks, "s2", "newer", 1 + FINISHED_KEPT_MS / 2);
        finish_one(&mut tasks, "s2", "late", 2 + FINISHED_KEPT_MS);
        assert!(tasks.get("old").is_none(), "a week and a moment later");
        assert!(tasks.by_key("s1", "kold").is_none());
        assert!(tasks.get("newer").is_some());
    }

    impl Tasks {
        fn get_mut_for_test(&mut self, id: &str) -> &mut TaskRecord {
            self.tasks.get_mut(id).unwrap()
        }
    }
}
