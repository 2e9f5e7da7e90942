//! Attention notifications, derived in one place: from the event about to be stored and the state
//! before it, [`derive`] proposes the `notification` the core stores right after it.
//!
//! A notification is derived once, when its cause is first written: replays and restarts apply
//! the stored notification and never derive it again, and a cause refused as a duplicate (a
//! backfilled turn, a replayed approval) derives nothing. Pure: no I/O, no clock, cannot fail.

use std::collections::HashMap;

use super::State;
use crate::protocol::{AgentStatus, EventKind, Notification, TurnStatus, notification_kind};

/// What a batch has already derived for watched instances, so two updates of one instance in a
/// batch (whose state is applied only after the batch is written) notify once.
#[derive(Default)]
pub struct BatchSeen {
    statuses: HashMap<String, AgentStatus>,
}

/// The longest body a notification carries (the agent's last message, an error text).
const BODY_CHARS: usize = 280;

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(BODY_CHARS).collect();
    if text.chars().count() > BODY_CHARS {
        out.push('…');
    }
    out
}

/// The notification `kind` (stored as seq `cause` in `session`) calls for, if any.
pub fn derive(
    state: &State,
    seen: &mut BatchSeen,
    cause: u64,
    session: Option<&str>,
    kind: &EventKind,
) -> Option<Notification> {
    let session = session?;
    let hosted = state.sessions.get(session);
    let base = |kind: &str, id: String, title: String| Notification {
        kind: kind.to_string(),
        id,
        cause,
        title,
        body: None,
        source: "hosted".into(),
        agent: hosted.map(|s| s.created.runtime.as_str().to_string()),
        turn_id: None,
        request_id: None,
    };
    match kind {
        EventKind::TurnCompleted(turn) if hosted.is_some() => {
            let status = match turn.status {
                TurnStatus::Completed => "completed",
                TurnStatus::Interrupted => "was interrupted",
                TurnStatus::Failed => "failed",
            };
            let mut n = base(
                notification_kind::TURN_ENDED,
                format!("turn-ended:{session}:{}", turn.turn_id),
                format!("turn {status}"),
            );
            n.body = match &turn.error {
                Some(error) => Some(excerpt(error)),
                None => hosted
                    .and_then(|s| s.last_agent_message.as_deref())
                    .map(excerpt),
            };
            n.turn_id = Some(turn.turn_id.clone());
            Some(n)
        }
        EventKind::ApprovalRequested(approval) if hosted.is_some() => {
            let mut n = base(
                notification_kind::INPUT_NEEDED,
                format!("input-needed:{session}:{}", approval.approval_id),
                format!("approval needed: {}", approval.kind),
            );
            n.body = approval
                .command
                .as_deref()
                .or(approval.reason.as_deref())
                .map(excerpt);
            n.turn_id = Some(approval.turn_id.clone()).filter(|t| !t.is_empty());
            n.request_id = Some(approval.approval_id.to_string());
            Some(n)
        }
        EventKind::InputRequested(request) if hosted.is_some() => {
            let mut n = base(
                notification_kind::INPUT_NEEDED,
                format!("input-needed:{session}:{}", request.request_id),
                format!("{} waiting for an answer", request.kind.as_str()),
            );
            n.body = request
                .questions
                .first()
                .map(|q| q.question.as_str())
                .or(request.message.as_deref())
                .or(request.plan.as_deref())
                .map(excerpt);
            n.turn_id = request.turn_id.clone();
            n.request_id = Some(request.request_id.clone());
            Some(n)
        }
        // The agent says it waits (Claude's `Notification` hook). A pending approval or request
        // already notified this wait when it was requested.
        EventKind::SessionAttention(attention) if attention.is_waiting() => {
            let record = hosted?;
            if record.pending_approvals().next().is_some()
                || record.pending_requests().next().is_some()
            {
                return None;
            }
            let mut n = base(
                notification_kind::INPUT_NEEDED,
                format!("input-needed:{session}:{}", attention.id),
                format!("waiting for you ({})", attention.kind),
            );
            n.body = attention.message.as_deref().map(excerpt);
            n.turn_id = attention.turn_id.clone();
            Some(n)
        }
        EventKind::Error(error) if hosted.is_some() => {
            let mut n = base(
                notification_kind::ERROR,
                format!("error:{session}:{cause}"),
                "error".into(),
            );
            n.body = Some(excerpt(&error.message));
            n.turn_id = error.turn_id.clone();
            Some(n)
        }
        EventKind::AgentUpdated(update) => {
            // A hosted session's own mirror in the tracker is notified from its events above.
            let mirrored = update.thread_id.as_deref().is_some_and(|thread| {
                state.sessions.get(thread).is_some() || state.sessions.by_thread(thread).is_some()
            });
            let kind = match update.status {
                AgentStatus::Waiting => notification_kind::INPUT_NEEDED,
                AgentStatus::Done | AgentStatus::Interrupted => notification_kind::TURN_ENDED,
                AgentStatus::Error => notification_kind::ERROR,
                _ => {
                    seen.statuses
                        .insert(format!("{session}\0{}", update.key()), update.status);
                    return None;
                }
            };
            if mirrored {
                return None;
            }
            let key = update.key();
            let previous = match seen.statuses.get(&format!("{session}\0{key}")) {
                Some(status) => Some(*status),
                None => state
                    .tracker
                    .session_view(session)
                    .agents
                    .iter()
                    .find(|a| a.key == key)
                    .map(|a| a.status),
            };
            seen.statuses
                .insert(format!("{session}\0{key}"), update.status);
            if previous == Some(update.status) {
                return None;
            }
            Some(Notification {
                kind: kind.to_string(),
                id: format!("{kind}:{session}:{key}:{cause}"),
                cause,
                title: format!("{} {}", update.agent, update.status.as_str()),
                body: update.last_user_prompt.as_deref().map(excerpt),
                source: "watched".into(),
                agent: Some(update.agent.clone()),
                turn_id: None,
                request_id: None,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        AgentUpdate, Event, InputKind, InputRequested, Runtime, SessionCreated, TurnCompleted,
    };

    fn event(seq: u64, session: &str, kind: EventKind) -> Event {
        Event {
            seq,
            ts: seq,
            session: Some(session.into()),
            session_seq: Some(seq),
            kind,
        }
    }

    fn hosted() -> State {
        let mut state = State::default();
        state.apply(&event(
            1,
            "s1",
            EventKind::SessionCreated(SessionCreated::plain(Runtime::Codex, "/w".into())),
        ));
        state
    }

    fn update(status: AgentStatus, thread: Option<&str>) -> EventKind {
        EventKind::AgentUpdated(AgentUpdate {
            agent: "claude".into(),
            status,
            ts: 1,
            thread_id: thread.map(Into::into),
            thread_name: None,
            last_user_prompt: Some("fix it".into()),
            pane_id: None,
            liveness: None,
            source: None,
            tokenless: false,
        })
    }

    #[test]
    fn hosted_turns_and_requests_notify_once_with_stable_ids() {
        let state = hosted();
        let mut seen = BatchSeen::default();
        let done = EventKind::TurnCompleted(TurnCompleted {
            turn_id: "t1".into(),
            status: TurnStatus::Completed,
            error: None,
            duration_ms: None,
            lost: false,
        });
        let n = derive(&state, &mut seen, 7, Some("s1"), &done).unwrap();
        assert_eq!(n.kind, "turn-ended");
        assert_eq!(n.id, "turn-ended:s1:t1");
        assert_eq!(n.cause, 7);
        assert_eq!(n.agent.as_deref(), Some("codex"));
        let asked = EventKind::InputRequested(Box::new(InputRequested {
            request_id: "in:t1:c1:question".into(),
            kind: InputKind::Question,
            turn_id: Some("t1".into()),
            item_id: None,
            questions: Vec::new(),
            plan: None,
            message: Some("Proceed?".into()),
            server: None,
            schema: None,
            url: None,
            permissions: None,
            decisions: Vec::new(),
        }));
        let n = derive(&state, &mut seen, 8, Some("s1"), &asked).unwrap();
        assert_eq!(n.kind, "input-needed");
        assert_eq!(n.request_id.as_deref(), Some("in:t1:c1:question"));
        assert_eq!(n.body.as_deref(), Some("Proceed?"));
        // Not for a session cohost does not host, nor for its own notifications.
        assert!(derive(&state, &mut seen, 9, Some("other"), &done).is_none());
        assert!(
            derive(
                &state,
                &mut seen,
                10,
                Some("s1"),
                &EventKind::Notification(n)
            )
            .is_none()
        );
    }

    #[test]
    fn watched_agents_notify_on_a_change_of_status_only() {
        let mut state = hosted();
        let mut seen = BatchSeen::default();
        let waiting = update(AgentStatus::Waiting, Some("th"));
        let n = derive(&state, &mut seen, 2, Some("work"), &waiting).unwrap();
        assert_eq!(
            (n.kind.as_str(), n.source.as_str()),
            ("input-needed", "watched")
        );
        // The same status again in the same batch, or after it was applied: nothing.
        assert!(derive(&state, &mut seen, 3, Some("work"), &waiting).is_none());
        state.apply(&event(2, "work", waiting.clone()));
        let mut fresh = BatchSeen::default();
        assert!(derive(&state, &mut fresh, 4, Some("work"), &waiting).is_none());
        let running = update(AgentStatus::Running, Some("th"));
        assert!(derive(&state, &mut fresh, 5, Some("work"), &running).is_none());
        let done = update(AgentStatus::Done, Some("th"));
        assert_eq!(
            derive(&state, &mut fresh, 6, Some("work"), &done)
                .unwrap()
                .kind,
            "turn-ended"
        );
        // A hosted session's own mirror (its id or thread) is notified from its events.
        let mirror = update(AgentStatus::Done, Some("s1"));
        assert!(derive(&state, &mut BatchSeen::default(), 7, Some("work"), &mirror).is_none());
    }

    #[test]
    fn an_agent_waiting_notifies_once_unless_a_pending_ask_already_did() {
        use crate::protocol::{ApprovalRequested, SessionAttention};
        let attention = |id: &str, kind: &str| {
            EventKind::SessionAttention(SessionAttention {
                id: id.into(),
                kind: kind.into(),
                message: Some("Claude is waiting for your input".into()),
                turn_id: Some("t1".into()),
            })
        };
        let mut state = hosted();
        let mut seen = BatchSeen::default();
        let idle = attention("c1:100:idle_prompt", "idle_prompt");
        let n = derive(&state, &mut seen, 5, Some("s1"), &idle).unwrap();
        assert_eq!(n.kind, "input-needed");
        assert_eq!(n.id, "input-needed:s1:c1:100:idle_prompt");
        assert_eq!(n.body.as_deref(), Some("Claude is waiting for your input"));
        assert_eq!(n.turn_id.as_deref(), Some("t1"));
        // Not a wait: stored, notifies nothing; nor for a session cohost does not host.
        let auth = attention("c1:101:auth_success", "auth_success");
        assert!(derive(&state, &mut seen, 6, Some("s1"), &auth).is_none());
        assert!(derive(&state, &mut seen, 6, Some("other"), &idle).is_none());
        // A permission dialog whose approval is pending was notified by the approval.
        state.apply(&event(
            7,
            "s1",
            EventKind::ApprovalRequested(ApprovalRequested {
                approval_id: "a1".into(),
                kind: "command".into(),
                turn_id: "t1".into(),
                item_id: None,
                command: Some("touch x".into()),
                cwd: None,
                reason: None,
                decisions: Vec::new(),
            }),
        ));
        let prompt = attention("c1:102:permission_prompt", "permission_prompt");
        assert!(derive(&state, &mut seen, 8, Some("s1"), &prompt).is_none());
    }
}
