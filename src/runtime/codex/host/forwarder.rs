//! The forwarder's state machine, one per live session: what each message codex sends about the
//! session's thread means, as a list of [`Effect`]s (events to store or publish, status reports,
//! requests to hold), and the per-thread tracking that needs — the turn codex runs, `turn/start`
//! calls whose `turn/started` has not come, items started and not completed, agent messages
//! streaming.
//!
//! Pure: no I/O, no clock, no lock; what it needs to know of the stored session (an active goal,
//! a terminal) it asks [`SessionFacts`]. The dispatch task (`dispatch.rs`) parses each message
//! once, calls [`Forwarder::apply`] (or [`Forwarder::request`]) and performs the effects in order.

use std::collections::HashMap;

use serde_json::Value;

use super::super::normalize::{self, Normalized};
use super::super::rpc::RequestId;
use super::super::wire::ServerNotification;
use crate::protocol::{
    AgentStatus, Empty, EventKind, Item, ItemEvent, TurnCompleted, TurnSource, TurnStarted,
    TurnStatus,
};

/// The most text of a streaming agent message kept to store if its turn ends first.
const MAX_STREAMED_TEXT: usize = 256 * 1024;

/// What the forwarder reads of the session as stored, asked only when a message needs it.
pub(super) trait SessionFacts {
    /// The session has a goal whose status is `active` (codex starts turns toward it).
    fn goal_active(&self) -> bool;
    /// The session has a goal at all.
    fn has_goal(&self) -> bool;
    /// A co-driving terminal pane is open on the session.
    fn has_terminal(&self) -> bool;
}

/// One thing the dispatch task does for a message, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Effect {
    /// The backend is in use now (a turn began), so the idle reaper leaves it be.
    Touch,
    /// Append this event (a duplicate is success).
    Store(EventKind),
    /// Broadcast this live-only event.
    Publish(EventKind),
    /// Mirror the session's status into the tracker.
    Report(AgentStatus),
    /// codex says this server request was answered or made moot: what of ours waits on it is
    /// resolved by the runtime.
    RequestResolved(RequestId),
    /// A turn ended: the thread has a rollout now, so a terminal waiting for one can start.
    TurnEnded,
    /// Keep server request `rpc_id` as approval `approval_id` until it is answered.
    HoldApproval {
        approval_id: String,
        rpc_id: RequestId,
    },
    /// Keep server request `rpc_id` as input request `request_id` until it is answered.
    HoldInput {
        request_id: String,
        rpc_id: RequestId,
    },
    /// Answer server request `rpc_id` with an error: nothing here relays `method`.
    Refuse { rpc_id: RequestId, method: String },
}

/// The per-thread tracking of one live session (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Forwarder {
    /// The turn codex is running, from `turn/start` answers and `turn/started` notifications.
    pub(super) current: Option<String>,
    /// `turn/start` calls sent by cohost whose `turn/started` has not arrived yet.
    pub(super) pending_api: usize,
    /// Items started but not completed, by cohost item id: closed when their turn ends.
    open_items: HashMap<String, (String, Item)>,
    /// Agent messages streaming (deltas seen, not completed), by cohost item id: their turn and
    /// the text so far. A turn that ends before the message completes stores that text, so a
    /// reader that reloads sees what a live reader saw.
    streaming: HashMap<String, (String, String)>,
}

impl Forwarder {
    /// A forwarder that closes `open_items` (cohost item id → turn id and item, as a previous
    /// run left them) when their turn ends.
    pub(super) fn with_open_items(open_items: HashMap<String, (String, Item)>) -> Self {
        Forwarder {
            open_items,
            ..Forwarder::default()
        }
    }

    /// One notification about the session's thread → its effects.
    pub(super) fn apply(
        &mut self,
        notification: ServerNotification,
        facts: &impl SessionFacts,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        for normalized in normalize::normalized(notification) {
            self.step(normalized, facts, &mut effects);
        }
        effects
    }

    fn step(&mut self, normalized: Normalized, facts: &impl SessionFacts, out: &mut Vec<Effect>) {
        match normalized {
            Normalized::TurnStarted { turn_id } => {
                self.current = Some(turn_id.clone());
                let source = if self.pending_api > 0 {
                    self.pending_api -= 1;
                    TurnSource::Api
                } else if facts.goal_active() {
                    TurnSource::Goal
                } else if facts.has_terminal() {
                    // Not cohost, not a goal: the human in the co-driving TUI.
                    TurnSource::Terminal
                } else {
                    TurnSource::Other
                };
                out.push(Effect::Touch);
                out.push(Effect::Store(EventKind::TurnStarted(TurnStarted {
                    turn_id,
                    source,
                })));
                out.push(Effect::Report(AgentStatus::Running));
            }
            Normalized::Store(EventKind::TurnCompleted(done)) => {
                let status = match done.status {
                    TurnStatus::Completed => AgentStatus::Done,
                    TurnStatus::Interrupted => AgentStatus::Interrupted,
                    TurnStatus::Failed => AgentStatus::Error,
                };
                out.extend(self.end_turn(done));
                out.push(Effect::Report(status));
                out.push(Effect::TurnEnded);
            }
            Normalized::Store(EventKind::ItemStarted(item)) => {
                self.open_items.insert(
                    item.id().to_string(),
                    (item.turn_id.clone(), item.item.clone()),
                );
                out.push(Effect::Store(EventKind::ItemStarted(item)));
            }
            Normalized::Store(EventKind::ItemCompleted(item)) => {
                self.open_items.remove(item.id());
                self.streaming.remove(item.id());
                let plan = match &item.item {
                    Item::Plan { id, text } => {
                        Some(normalize::plan_request(&item.turn_id, id, text))
                    }
                    _ => None,
                };
                out.push(Effect::Store(EventKind::ItemCompleted(item)));
                // A plan offered in plan mode waits for a person's decision.
                if let Some(plan) = plan {
                    out.push(Effect::Store(EventKind::InputRequested(Box::new(plan))));
                }
            }
            Normalized::Store(kind) => out.push(Effect::Store(kind)),
            Normalized::Live(kind) => {
                if let EventKind::ItemDelta(delta) = &kind
                    && delta.kind == "agentMessage"
                {
                    let (_, text) = self
                        .streaming
                        .entry(delta.item_id.clone())
                        .or_insert_with(|| (delta.turn_id.clone(), String::new()));
                    // Bounded like a stored event: past the cap the tail is not kept.
                    if text.len() + delta.delta.len() <= MAX_STREAMED_TEXT {
                        text.push_str(&delta.delta);
                    }
                }
                out.push(Effect::Publish(kind));
            }
            Normalized::RequestResolved { request_id } => {
                out.push(Effect::RequestResolved(request_id));
            }
            Normalized::GoalCleared => {
                if facts.has_goal() {
                    out.push(Effect::Store(EventKind::GoalCleared(Empty {})));
                }
            }
        }
    }

    /// A turn ended (`done`): closes what it left open, then stores its end. Items started and
    /// not completed (an interrupt drops them without `item/completed`) get the turn's end
    /// status; an agent message that was still streaming when the turn was interrupted or failed
    /// is stored with the text it had, marked `interrupted`.
    pub(super) fn end_turn(&mut self, done: TurnCompleted) -> Vec<Effect> {
        if self.current.as_deref() == Some(done.turn_id.as_str()) {
            self.current = None;
        }
        let ids: Vec<String> = self
            .open_items
            .iter()
            .filter(|(_, (turn_id, _))| *turn_id == done.turn_id)
            .map(|(id, _)| id.clone())
            .collect();
        let mut dangling: Vec<(String, Item)> = ids
            .into_iter()
            .filter_map(|id| self.open_items.remove(&id))
            .collect();
        let streamed: Vec<String> = self
            .streaming
            .iter()
            .filter(|(_, (turn_id, _))| *turn_id == done.turn_id)
            .map(|(id, _)| id.clone())
            .collect();
        for id in streamed {
            // A turn that completed abandoned this stream (a steer restarts the model's
            // answer): codex keeps nothing of it, nor does cohost.
            if let Some((turn_id, text)) = self.streaming.remove(&id)
                && done.status != TurnStatus::Completed
            {
                dangling.push((
                    turn_id,
                    Item::AgentMessage {
                        id,
                        text,
                        interrupted: true,
                    },
                ));
            }
        }
        let end_status = match done.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
        };
        let mut effects = Vec::with_capacity(dangling.len() + 1);
        for (turn_id, mut item) in dangling {
            match &mut item {
                Item::Command { status, .. }
                | Item::FileChange { status, .. }
                | Item::Tool { status, .. } => {
                    *status = end_status.to_string();
                }
                _ => {}
            }
            effects.push(Effect::Store(EventKind::ItemCompleted(ItemEvent {
                turn_id,
                item,
            })));
        }
        effects.push(Effect::Store(EventKind::TurnCompleted(done)));
        effects
    }

    /// A server request about the session's thread → hold it for a person (a question, an
    /// elicitation, a permissions grant), hold it as an approval, or refuse it.
    pub(super) fn request(rpc_id: RequestId, method: &str, params: &Value) -> Vec<Effect> {
        if let Some(request) = normalize::input_request(method, params, &rpc_id.to_string()) {
            return vec![
                Effect::HoldInput {
                    request_id: request.request_id.clone(),
                    rpc_id,
                },
                Effect::Store(EventKind::InputRequested(Box::new(request))),
                Effect::Report(AgentStatus::Waiting),
            ];
        }
        match normalize::approval_request(method, params) {
            Some(approval) => vec![
                Effect::HoldApproval {
                    approval_id: approval.approval_id.to_string(),
                    rpc_id,
                },
                Effect::Store(EventKind::ApprovalRequested(approval)),
                Effect::Report(AgentStatus::Waiting),
            ],
            None => vec![Effect::Refuse {
                rpc_id,
                method: method.to_string(),
            }],
        }
    }
}

#[cfg(test)]
#[path = "forwarder_tests.rs"]
mod tests;
