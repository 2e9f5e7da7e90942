//! What a surface sees of a task: the view (state, phase, waiting reason, position, excerpts,
//! redacted), built from the registry in one place.

use super::*;

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub(super) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub(super) fn redacted(text: &str) -> String {
    crate::redact::redact(text).into_owned()
}

/// Why a waiting task waits, from the session's state.
pub(super) fn waiting_reason(state: &State, task: &TaskRecord, position: usize) -> WaitingReason {
    let lease = state.tasks.lease(&task.session);
    if lease.holder == LeaseHolder::Human {
        return WaitingReason::HumanControl;
    }
    let session = state.sessions.get(&task.session);
    if session.is_none_or(|s| s.state != SessionState::Live) {
        return WaitingReason::NotReady;
    }
    let in_flight = state
        .tasks
        .open(&task.session)
        .any(|t| t.state == TaskState::Running);
    if position > 0 || in_flight {
        return WaitingReason::QueuedBehindOtherTask;
    }
    if session.is_some_and(|s| s.active_turn.is_some()) {
        return WaitingReason::Busy;
    }
    task.returned.unwrap_or(WaitingReason::Busy)
}

/// A task as clients see it (prompt and result redacted and cut).
pub fn view(state: &State, task: &TaskRecord) -> TaskView {
    let position = (task.state == TaskState::Waiting).then(|| {
        state
            .tasks
            .open(&task.session)
            .filter(|t| t.state == TaskState::Waiting)
            .position(|t| t.id == task.id)
            .unwrap_or(0)
    });
    let result = task.result.as_deref().map(redacted);
    let excerpt = result.as_deref().map(|r| cut(r, MAX_EXCERPT).to_string());
    TaskView {
        task_id: task.id.clone(),
        session_id: task.session.clone(),
        machine: None,
        machine_task_id: None,
        state: task.state,
        phase: task.phase,
        revision: task.revision,
        position,
        waiting_reason: position.map(|p| waiting_reason(state, task, p)),
        source: task.source,
        prompt_preview: redacted(cut(&task.prompt, MAX_PROMPT_PREVIEW)),
        prompt_bytes: task.prompt.len(),
        turn_id: task.turn_id.clone(),
        accepted_as: task.accepted_as.clone(),
        lease_generation_at_delivery: task.lease_generation_at_delivery,
        cancel_requested: task.cancel_requested,
        cancel_outcome: task.cancel_outcome,
        abort_withheld: task.abort_withheld.clone(),
        supersedes: task.supersedes.clone(),
        superseded_by: task.superseded_by.clone(),
        human_intervened: task.human_intervened,
        error: task.error.clone(),
        created_at: task.created_at,
        delivered_at: task.delivered_at,
        accepted_at: task.accepted_at,
        finished_at: task.finished_at,
        result_bytes: result.as_ref().map(String::len),
        result_excerpt_truncated: match (&result, &excerpt) {
            (Some(r), Some(e)) => r.len() > e.len(),
            _ => false,
        },
        result_excerpt: excerpt,
    }
}
