//! Idempotent injects: a prompt sent with an idempotency key is recorded as `message.sent`
//! under that key, and a repeat of the key answers the first outcome without sending again.

use crate::core::{CoreError, CoreHandle};
use crate::protocol::{EventKind, MessageSent};
use crate::runtime::{InjectOutcome, InjectState};

/// The outcome an earlier inject with `key` had in this session, as a duplicate.
pub fn previous(core: &CoreHandle, session_id: &str, key: Option<&str>) -> Option<InjectOutcome> {
    let key = key?;
    let sent = core.read(|state| {
        state
            .sessions
            .get(session_id)
            .and_then(|s| s.sent(key).cloned())
    })?;
    Some(InjectOutcome {
        outcome: sent.outcome,
        turn_id: sent.turn_id,
        duplicate: true,
    })
}

/// Records what an inject did (`message.sent`, under its key if it had one).
pub async fn record(
    core: &CoreHandle,
    session_id: &str,
    outcome: InjectState,
    turn_id: &str,
    key: Option<String>,
) -> Result<InjectOutcome, CoreError> {
    core.append(
        Some(session_id.to_string()),
        EventKind::MessageSent(MessageSent {
            outcome,
            turn_id: turn_id.to_string(),
            idempotency_key: key,
        }),
    )
    .await?;
    Ok(InjectOutcome {
        outcome,
        turn_id: turn_id.to_string(),
        duplicate: false,
    })
}
