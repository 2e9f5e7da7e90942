//! What the hosts that keep a live state per session over the core share (codex, OpenCode,
//! Pi): the live state looked up or made by id ([`live_entry`]), the check that an id names an
//! open session of the runtime ([`check_open`]), waiting until a session is bound
//! ([`wait_bound`]), its settings, and the appends every host makes — a status, an event whose
//! duplicate counts as stored, an approval's answer (after [`check_decision`], or why there is
//! nothing to answer: [`not_pending`]), one resolved by the runtime, the close; and the
//! pending requests a host holds by id for the session that owns them ([`take_pending`],
//! [`take_all_pending`]); and a turn its runtime can no longer finish, ended from what the core
//! holds of it ([`end_cut_turn`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::lock;
use crate::core::{CoreError, CoreHandle};
use crate::protocol::{
    ApprovalId, ApprovalResolved, EventKind, Item, ItemEvent, Runtime, SessionClosed,
    SessionCreated, SessionState, SessionStatus, TurnCompleted, TurnStatus,
};
use crate::runtime::HostError;

/// The runtime's name with its article: `a pi`, `an opencode`.
pub fn a_runtime(runtime: Runtime) -> String {
    let name = runtime.as_str();
    if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {name}")
    } else {
        format!("a {name}")
    }
}

/// The live state of `session_id` in `live`, made with `make` when there is none yet.
pub fn live_entry<L>(
    live: &Mutex<HashMap<String, Arc<L>>>,
    session_id: &str,
    make: impl FnOnce() -> L,
) -> Arc<L> {
    Arc::clone(
        lock(live)
            .entry(session_id.to_string())
            .or_insert_with(|| Arc::new(make())),
    )
}

/// Whether `session_id` is an open session of `runtime`: an unknown, a closed, or another
/// runtime's session is refused, saying which.
pub fn check_open(core: &CoreHandle, session_id: &str, runtime: Runtime) -> Result<(), HostError> {
    let record = core.read(|state| {
        state
            .sessions
            .get(session_id)
            .map(|s| (s.is_closed(), s.created.runtime))
    });
    match record {
        None => Err(HostError::UnknownSession(session_id.to_string())),
        Some((true, _)) => Err(HostError::Closed(session_id.to_string())),
        Some((false, found)) if found == runtime => Ok(()),
        Some((false, _)) => Err(HostError::Invalid(format!(
            "session `{session_id}` is not {} session",
            a_runtime(runtime)
        ))),
    }
}

/// Refuses a prompt to a session that is `lost` (its runtime went away and could not be brought
/// back, or cohost stopped following it), saying why, rather than waiting for a binding that
/// will not come. A daemon's restore marks the lost sessions it resumes `restarting` first
/// ([`resuming_lost`]), so a prompt then waits for the session as for any other.
pub fn check_not_lost(core: &CoreHandle, session_id: &str) -> Result<(), HostError> {
    match lost_because(core, session_id) {
        None => Ok(()),
        Some(why) => Err(HostError::ClosedBecause(match why {
            Some(why) => format!("session `{session_id}` is lost: {why}"),
            None => format!("session `{session_id}` is lost"),
        })),
    }
}

/// Whether the session is `lost`, and its status message (why) if it has one.
pub fn lost_because(core: &CoreHandle, session_id: &str) -> Option<Option<String>> {
    core.read(|state| {
        let session = state.sessions.get(session_id)?;
        (session.state == SessionState::Lost).then(|| session.state_message.clone())
    })
}

/// Before a daemon's restore resumes `session_id`: a session left `lost` is marked
/// `restarting`, since it is being brought back (a prompt waits for it rather than being
/// refused by [`check_not_lost`]); any other is left as it is.
pub async fn resuming_lost(core: &CoreHandle, session_id: &str) {
    let message = "cohost restarted: resuming the session";
    from_lost(core, session_id, SessionState::Restarting, message).await
}

/// When a follower starts again on an agent that still runs (a Claude's TUI, an adopted agent,
/// after a restart of cohost): a session left `lost` — its follower had panicked — is `live`
/// again; any other is left as it is.
pub async fn following_again(core: &CoreHandle, session_id: &str) {
    let message = "cohost restarted: following the session again";
    from_lost(core, session_id, SessionState::Live, message).await
}

/// A `lost` session's status made `state` with `message`; any other session left as it is.
async fn from_lost(core: &CoreHandle, session_id: &str, state: SessionState, message: &str) {
    if lost_because(core, session_id).is_some() {
        status(core, session_id, state, Some(message.to_string())).await;
    }
}

/// The settings the session was created with.
pub fn settings(core: &CoreHandle, session_id: &str) -> Option<SessionCreated> {
    core.read(|state| state.sessions.get(session_id).map(|s| s.created.clone()))
}

/// What the session is bound to, once it is (a session being started or restored), waiting at
/// most `timeout`; `not_ready` after that.
pub async fn wait_bound<T: Clone>(
    bound: &watch::Sender<Option<T>>,
    timeout: Duration,
    session_id: &str,
) -> Result<T, HostError> {
    let mut rx = bound.subscribe();
    let wait = rx.wait_for(|bound| bound.is_some());
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(bound)) => bound
            .clone()
            .ok_or_else(|| HostError::NotReady(session_id.to_string())),
        _ => Err(HostError::NotReady(session_id.to_string())),
    }
}

/// Appends the session's `session.status` (a failure to store it is not the caller's).
pub async fn status(
    core: &CoreHandle,
    session_id: &str,
    state: SessionState,
    message: Option<String>,
) {
    let _ = core
        .append(
            Some(session_id.to_string()),
            EventKind::SessionStatus(SessionStatus { state, message }),
        )
        .await;
}

/// Appends, a duplicate (already stored) counting as stored.
pub async fn append_once(
    core: &CoreHandle,
    session_id: &str,
    kind: EventKind,
) -> Result<(), CoreError> {
    match core.append(Some(session_id.to_string()), kind).await {
        Ok(_) | Err(CoreError::Duplicate) => Ok(()),
        Err(error) => Err(error),
    }
}

/// [`append_once`], a failure logged (an event the runtime reported, which has no caller to
/// answer).
pub async fn store(core: &CoreHandle, session_id: &str, kind: EventKind, runtime: Runtime) {
    if let Err(error) = append_once(core, session_id, kind).await {
        tracing::error!(
            session = session_id,
            %error,
            "could not store {} event",
            a_runtime(runtime)
        )
    }
}

/// Refuses a decision that is not one of `decisions`.
pub fn check_decision(decision: &str, decisions: &[&str]) -> Result<(), HostError> {
    if decisions.contains(&decision) {
        Ok(())
    } else {
        Err(HostError::Invalid(format!(
            "decision must be one of {}, got `{decision}`",
            decisions.join(", ")
        )))
    }
}

/// Why an approval the host does not hold cannot be answered: it was resolved already, or
/// the session never had it.
pub fn not_pending(core: &CoreHandle, session_id: &str, approval_id: &str) -> HostError {
    let resolved = core.read(|state| {
        state
            .sessions
            .get(session_id)
            .and_then(|s| s.approvals.get(approval_id))
            .map(|a| a.resolved.is_some())
    });
    match resolved {
        Some(true) => HostError::ApprovalResolved(approval_id.to_string()),
        _ => HostError::UnknownApproval(approval_id.to_string()),
    }
}

/// Records the answer cohost gave to an approval (`by` the surface that answered).
pub async fn record_resolved(
    core: &CoreHandle,
    session_id: &str,
    approval_id: &str,
    decision: &str,
    by: &str,
) -> Result<(), HostError> {
    let resolved = ApprovalResolved {
        approval_id: approval_id.into(),
        decision: Some(decision.into()),
        by: by.into(),
    };
    append_once(core, session_id, EventKind::ApprovalResolved(resolved)).await?;
    Ok(())
}

/// An approval resolved by the runtime: answered elsewhere, made moot, or cancelled
/// (`decision`) by an interrupt.
pub fn resolved_by_runtime(
    approval_id: impl Into<ApprovalId>,
    decision: Option<&str>,
) -> EventKind {
    EventKind::ApprovalResolved(ApprovalResolved {
        approval_id: approval_id.into(),
        decision: decision.map(Into::into),
        by: "runtime".into(),
    })
}

/// Takes request `id` out of `held` (id → the session it belongs to) when `session_id` owns
/// it; whether it did. Whoever takes it is the one who resolves it.
pub fn take_pending(held: &Mutex<HashMap<String, String>>, id: &str, session_id: &str) -> bool {
    let mut held = lock(held);
    match held.get(id) {
        Some(owner) if owner == session_id => held.remove(id).is_some(),
        _ => false,
    }
}

/// Takes every request of `session_id` out of `held` (id → the session it belongs to), so
/// no one else resolves them.
pub fn take_all_pending(held: &Mutex<HashMap<String, String>>, session_id: &str) -> Vec<String> {
    lock(held)
        .extract_if(|_, owner| owner == session_id)
        .map(|(id, _)| id)
        .collect()
}

/// Records the session's close through the API.
pub async fn record_closed(core: &CoreHandle, session_id: &str) -> Result<(), HostError> {
    core.append(
        Some(session_id.to_string()),
        EventKind::SessionClosed(SessionClosed {
            reason: "closed through the API".into(),
        }),
    )
    .await?;
    Ok(())
}

/// Ends the turn the session's state still has open, which its runtime can no longer finish
/// (the runtime went down with the daemon, or cannot be started again), from what the core holds
/// of it: every pending approval resolved by the runtime, every item the turn left open closed
/// ([`interrupted`]), and the turn `interrupted` and `lost` with `error`. A session without an
/// open turn gets its pending approvals resolved alone.
pub async fn end_cut_turn(core: &CoreHandle, session_id: &str, runtime: Runtime, error: &str) {
    let (turn, approvals, open) = core.read(|state| {
        let Some(session) = state.sessions.get(session_id) else {
            return (None, Vec::new(), Vec::new());
        };
        let turn = session.active_turn.clone();
        let approvals: Vec<_> = session
            .pending_approvals()
            .map(|a| a.request.approval_id.clone())
            .collect();
        let open: Vec<ItemEvent> = session
            .open_items
            .values()
            .filter(|item| Some(&item.turn_id) == turn.as_ref())
            .cloned()
            .collect();
        (turn, approvals, open)
    });
    for approval_id in approvals {
        store(
            core,
            session_id,
            resolved_by_runtime(approval_id, None),
            runtime,
        )
        .await;
    }
    let Some(turn_id) = turn else { return };
    for item in open {
        let closed = ItemEvent {
            turn_id: item.turn_id,
            item: interrupted(item.item),
        };
        store(core, session_id, EventKind::ItemCompleted(closed), runtime).await;
    }
    let done = TurnCompleted {
        turn_id,
        status: TurnStatus::Interrupted,
        error: Some(error.into()),
        duration_ms: None,
        lost: true,
    };
    store(core, session_id, EventKind::TurnCompleted(done), runtime).await;
}

/// An item its cut turn left open, closed: a command, a file change or a tool call
/// `interrupted`, an agent's text `interrupted`; any other as it was.
pub fn interrupted(item: Item) -> Item {
    match item {
        Item::Command {
            id,
            command,
            cwd,
            exit_code,
            output,
            duration_ms,
            ..
        } => Item::Command {
            id,
            command,
            cwd,
            status: "interrupted".into(),
            exit_code,
            output,
            duration_ms,
        },
        Item::FileChange { id, changes, .. } => Item::FileChange {
            id,
            changes,
            status: "interrupted".into(),
        },
        Item::Tool {
            id,
            name,
            input,
            output,
            ..
        } => Item::Tool {
            id,
            name,
            input,
            output,
            status: "interrupted".into(),
        },
        Item::AgentMessage { id, text, .. } => Item::AgentMessage {
            id,
            text,
            interrupted: true,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core in `dir` with one session, `cs_a`, just created.
    async fn one_session(dir: &std::path::Path) -> CoreHandle {
        use crate::core::event_log::FsyncPolicy;
        let (core, _thread) = crate::core::started_for_tests(dir, FsyncPolicy::Never);
        let created = SessionCreated::plain(Runtime::Pi, "/w".into());
        core.append(Some("cs_a".into()), EventKind::SessionCreated(created))
            .await
            .unwrap();
        core
    }

    fn state_of(core: &CoreHandle) -> (SessionState, Option<String>) {
        core.read(|s| {
            let session = s.sessions.get("cs_a").unwrap();
            (session.state, session.state_message.clone())
        })
    }

    #[tokio::test]
    async fn a_cut_turn_ends_with_its_open_items_and_approvals_from_what_the_core_holds() {
        let dir = tempfile::tempdir().unwrap();
        let core = one_session(dir.path()).await;
        let kind = |value: serde_json::Value| serde_json::from_value::<EventKind>(value).unwrap();
        for event in [
            serde_json::json!({"type": "turn.started", "data": {"turnId": "t1", "source": "api"}}),
            serde_json::json!({"type": "item.started", "data": {"turnId": "t1", "item":
                {"type": "command", "id": "c1", "command": "make", "cwd": "/w", "status": "inProgress"}}}),
            serde_json::json!({"type": "item.started", "data": {"turnId": "t1", "item":
                {"type": "agentMessage", "id": "m1", "text": "Building"}}}),
            serde_json::json!({"type": "approval.requested", "data": {"approvalId": "ap1",
                "kind": "command", "turnId": "t1", "itemId": "c1", "command": "make",
                "decisions": ["accept", "decline"]}}),
        ] {
            core.append(Some("cs_a".into()), kind(event)).await.unwrap();
        }
        let mut appended = core.subscribe();
        end_cut_turn(
            &core,
            "cs_a",
            Runtime::Pi,
            "the daemon stopped during the turn",
        )
        .await;
        let mut stored = Vec::new();
        while let Ok(event) = appended.try_recv() {
            let value: serde_json::Value = serde_json::from_str(&event.json).unwrap();
            // The core's own: a turn that ended interrupted notifies.
            if value["type"] != "notification" {
                stored.push(serde_json::json!([value["type"], value["data"]]));
            }
        }
        assert_eq!(
            stored,
            vec![
                serde_json::json!(["approval.resolved",
                    {"approvalId": "ap1", "by": "runtime"}]),
                serde_json::json!(["item.completed", {"turnId": "t1", "item":
                    {"type": "command", "id": "c1", "command": "make", "cwd": "/w",
                     "status": "interrupted"}}]),
                serde_json::json!(["item.completed", {"turnId": "t1", "item":
                    {"type": "agentMessage", "id": "m1", "text": "Building", "interrupted": true}}]),
                serde_json::json!(["turn.completed", {"turnId": "t1", "status": "interrupted",
                    "error": "the daemon stopped during the turn", "lost": true}]),
            ]
        );
        let session = core.read(|s| s.sessions.get("cs_a").cloned().unwrap());
        assert_eq!(session.active_turn, None);
        assert!(session.open_items.is_empty());
        assert_eq!(session.pending_approvals().count(), 0);
        // Nothing open: nothing appended.
        end_cut_turn(&core, "cs_a", Runtime::Pi, "again").await;
        assert!(appended.try_recv().is_err(), "nothing appended");
    }

    #[tokio::test]
    async fn a_session_lost_to_its_follower_is_live_again_once_followed_again() {
        let dir = tempfile::tempdir().unwrap();
        let core = one_session(dir.path()).await;
        let mut appended = core.subscribe();
        following_again(&core, "cs_a").await;
        assert!(
            appended.try_recv().is_err(),
            "a session not lost: nothing appended"
        );
        status(&core, "cs_a", SessionState::Lost, Some("panicked".into())).await;
        following_again(&core, "cs_a").await;
        assert_eq!(
            state_of(&core),
            (
                SessionState::Live,
                Some("cohost restarted: following the session again".into())
            )
        );
    }

    #[tokio::test]
    async fn a_lost_session_refuses_prompts_saying_why_until_a_restore_resumes_it() {
        let dir = tempfile::tempdir().unwrap();
        let core = one_session(dir.path()).await;
        assert!(check_not_lost(&core, "cs_a").is_ok(), "a starting session");
        let why = "pi (pid 7) went away: out of memory".to_string();
        status(&core, "cs_a", SessionState::Lost, Some(why)).await;
        let refused = check_not_lost(&core, "cs_a").unwrap_err();
        assert!(
            matches!(&refused, HostError::ClosedBecause(m) if m == "session `cs_a` is lost: pi (pid 7) went away: out of memory"),
            "{refused:?}"
        );
        resuming_lost(&core, "cs_a").await;
        assert_eq!(
            state_of(&core),
            (
                SessionState::Restarting,
                Some("cohost restarted: resuming the session".into())
            )
        );
        assert!(
            check_not_lost(&core, "cs_a").is_ok(),
            "a session being resumed"
        );
        // A session that is not lost is left as it is: nothing is appended.
        let mut appended = core.subscribe();
        resuming_lost(&core, "cs_a").await;
        assert!(appended.try_recv().is_err(), "nothing appended");
        status(&core, "cs_a", SessionState::Lost, None).await;
        let refused = check_not_lost(&core, "cs_a").unwrap_err();
        assert!(
            matches!(&refused, HostError::ClosedBecause(m) if m == "session `cs_a` is lost"),
            "{refused:?}"
        );
    }

    #[test]
    fn runtimes_are_named_with_their_article() {
        let names: Vec<String> = [Runtime::Codex, Runtime::Opencode, Runtime::Pi]
            .into_iter()
            .map(a_runtime)
            .collect();
        assert_eq!(names, ["a codex", "an opencode", "a pi"]);
    }

    #[test]
    fn pending_requests_are_taken_only_by_their_session() {
        let held = Mutex::new(HashMap::from([
            ("a1".to_string(), "s1".to_string()),
            ("a2".to_string(), "s1".to_string()),
            ("b1".to_string(), "s2".to_string()),
        ]));
        assert!(!take_pending(&held, "b1", "s1"));
        assert!(take_pending(&held, "a1", "s1"));
        assert!(!take_pending(&held, "a1", "s1"));
        assert_eq!(take_all_pending(&held, "s1"), ["a2"]);
        assert!(take_all_pending(&held, "s1").is_empty());
        assert_eq!(lock(&held).keys().collect::<Vec<_>>(), ["b1"]);
    }

    #[test]
    fn a_decision_outside_the_list_is_refused_naming_it() {
        assert!(check_decision("accept", &["accept", "decline"]).is_ok());
        let refused = check_decision("maybe", &["accept", "decline"])
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("accept, decline") && refused.contains("`maybe`"),
            "{refused}"
        );
    }
}
