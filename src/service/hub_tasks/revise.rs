//! A hub task revised while it waits at the hub (`edit`, `supersede`), under the outbox's lock:
//! the rules of the machine's own queue (the revision the caller saw, at most `MAX_EDITS`
//! edits, a retried idempotency key finding its edit or replacement) plus the hub's own — a
//! task whose delivery is in doubt is not revised here.

use super::{HubTask, Stage, in_doubt, new_id, placed};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{EditBody, EditResult};
use crate::service::ServiceError;

/// An edit of a task still at the hub: the local queue's rules (a retried key finds its edit;
/// only a waiting task at the revision the caller saw, at most `MAX_EDITS` times).
pub(super) fn edit_waiting(
    tasks: &mut [HubTask],
    index: usize,
    edit: EditBody,
) -> Result<EditResult, ServiceError> {
    if let Some(key) = &edit.idempotency_key
        && tasks[index].edit_keys.contains(key)
    {
        return Ok(EditResult {
            task: placed(tasks, index),
            superseded: None,
            replayed: true,
        });
    }
    check_waiting(&tasks[index], edit.revision, "edited")?;
    let task = &mut tasks[index];
    if task.edits >= crate::tasks::MAX_EDITS {
        return Err(ServiceError::conflict(
            codes::EDIT_LIMIT,
            format!(
                "task `{}` was edited {} times; supersede it instead",
                task.id,
                crate::tasks::MAX_EDITS
            ),
        ));
    }
    task.text = edit.text;
    task.revision += 1;
    task.edits += 1;
    task.edit_keys.extend(edit.idempotency_key);
    tracing::info!(task = %task.id, revision = task.revision, "hub: a waiting task edited at the hub");
    Ok(EditResult {
        task: placed(tasks, index),
        superseded: None,
        replayed: false,
    })
}

/// A supersede of a task still at the hub: it is cancelled here and a new hub task takes its
/// place in the order (a retried key finds the replacement; a key used otherwise is refused).
pub(super) fn supersede_waiting(
    tasks: &mut Vec<HubTask>,
    index: usize,
    edit: EditBody,
    hub: &str,
) -> Result<EditResult, ServiceError> {
    let (machine, session, old) = (
        tasks[index].machine.clone(),
        tasks[index].session.clone(),
        tasks[index].id.clone(),
    );
    if let Some(key) = &edit.idempotency_key
        && let Some(existing) = tasks.iter().position(|t| {
            t.machine == machine && t.session == session && t.caller_key.as_deref() == Some(key)
        })
    {
        if tasks[existing].supersedes.as_deref() == Some(old.as_str()) {
            return Ok(EditResult {
                task: placed(tasks, existing),
                superseded: Some(placed(tasks, index)),
                replayed: true,
            });
        }
        return Err(ServiceError::invalid(format!(
            "idempotency key already used by task `{}`",
            tasks[existing].id
        )));
    }
    check_waiting(&tasks[index], edit.revision, "superseded")?;
    let id = new_id();
    let replacement = HubTask {
        key: edit
            .idempotency_key
            .clone()
            .unwrap_or_else(|| format!("hub:{hub}:{id}")),
        id: id.clone(),
        machine,
        session,
        text: edit.text,
        source: tasks[index].source,
        caller_key: edit.idempotency_key,
        stage: Stage::Waiting,
        machine_task: None,
        seen: None,
        error: None,
        created_at: now_ms(),
        delivered_at: None,
        finished_at: None,
        revision: 0,
        edits: 0,
        edit_keys: Vec::new(),
        supersedes: Some(old.clone()),
        superseded_by: None,
        in_doubt: false,
        delivering: false,
    };
    let task = &mut tasks[index];
    task.stage = Stage::Cancelled;
    task.finished_at = Some(now_ms());
    task.superseded_by = Some(id.clone());
    tasks.insert(index + 1, replacement);
    tracing::info!(task = %old, replacement = %id, "hub: a waiting task superseded at the hub");
    Ok(EditResult {
        task: placed(tasks, index + 1),
        superseded: Some(tasks[index].view(None)),
        replayed: false,
    })
}

/// An edit's precondition at the hub: the task still waits here, its delivery not in doubt, at
/// the revision the caller saw.
fn check_waiting(task: &HubTask, revision: u64, what: &str) -> Result<(), ServiceError> {
    if task.stage != Stage::Waiting {
        return Err(ServiceError::conflict(
            codes::NOT_WAITING,
            format!(
                "task `{}` is {}, no longer waiting",
                task.id,
                task.view(None).state.as_str()
            ),
        ));
    }
    if task.in_doubt {
        return Err(in_doubt(task, what));
    }
    if task.revision != revision {
        return Err(ServiceError::conflict(
            codes::REVISION_CONFLICT,
            format!(
                "task `{}` is at revision {}, not {revision}",
                task.id, task.revision
            ),
        ));
    }
    Ok(())
}
