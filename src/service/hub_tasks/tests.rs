//! The outbox's edit and supersede rules, on tasks in memory.

use super::*;

fn waiting(id: &str) -> HubTask {
    HubTask {
        id: id.to_string(),
        machine: "beta".into(),
        session: "cs_1".into(),
        text: "first".into(),
        source: TaskSource::Api,
        caller_key: None,
        key: format!("hub:hub:{id}"),
        stage: Stage::Waiting,
        machine_task: None,
        seen: None,
        error: None,
        created_at: 1,
        delivered_at: None,
        finished_at: None,
        revision: 0,
        edits: 0,
        edit_keys: Vec::new(),
        supersedes: None,
        superseded_by: None,
        in_doubt: false,
        delivering: false,
    }
}

fn edit(revision: u64, text: &str, key: Option<&str>) -> EditBody {
    EditBody {
        revision,
        text: text.into(),
        idempotency_key: key.map(str::to_string),
    }
}

#[test]
fn a_waiting_hub_task_is_edited_with_the_local_queues_rules() {
    let mut tasks = vec![waiting("hubtask_a")];
    let edited = edit_waiting(&mut tasks, 0, edit(0, "second", Some("k"))).unwrap();
    assert_eq!((edited.task.revision, edited.replayed), (1, false));
    assert_eq!(tasks[0].text, "second");
    // The same key finds the edit; a stale revision is a conflict.
    let again = edit_waiting(&mut tasks, 0, edit(0, "second", Some("k"))).unwrap();
    assert!(again.replayed);
    let stale = edit_waiting(&mut tasks, 0, edit(0, "third", None)).unwrap_err();
    assert_eq!(stale.code, codes::REVISION_CONFLICT);
    // At most MAX_EDITS edits.
    for revision in 1..crate::tasks::MAX_EDITS as u64 {
        edit_waiting(&mut tasks, 0, edit(revision, "more", None)).unwrap();
    }
    let limit = tasks[0].revision;
    let refused = edit_waiting(&mut tasks, 0, edit(limit, "one more", None)).unwrap_err();
    assert_eq!(refused.code, codes::EDIT_LIMIT);
    // A delivery left unanswered: not edited here, the machine named.
    let mut doubt = vec![waiting("hubtask_b")];
    doubt[0].in_doubt = true;
    let refused = edit_waiting(&mut doubt, 0, edit(0, "x", None)).unwrap_err();
    assert_eq!(refused.code, codes::MACHINE_UNREACHABLE);
    assert!(refused.to_string().contains("`beta`"), "{refused}");
    assert_eq!(doubt[0].text, "first");
}

#[test]
fn a_superseded_hub_task_is_cancelled_and_its_replacement_takes_its_place() {
    let mut tasks = vec![waiting("hubtask_a"), waiting("hubtask_b")];
    let done = supersede_waiting(&mut tasks, 0, edit(0, "new", Some("s")), "hub").unwrap();
    assert_eq!(tasks[0].stage, Stage::Cancelled);
    assert_eq!(tasks[1].text, "new");
    assert_eq!(tasks[1].supersedes.as_deref(), Some("hubtask_a"));
    assert_eq!(done.task.position, Some(0), "in the first one's place");
    assert_eq!(tasks[2].id, "hubtask_b");
    let again = supersede_waiting(&mut tasks, 0, edit(0, "new", Some("s")), "hub").unwrap();
    assert!(again.replayed);
    assert_eq!(again.task.task_id, tasks[1].id);
    // The key of another task is refused; a cancelled task is no longer waiting.
    tasks[2].caller_key = Some("other".into());
    let used = supersede_waiting(&mut tasks, 1, edit(0, "x", Some("other")), "hub");
    assert_eq!(used.unwrap_err().code, codes::INVALID_REQUEST);
    let late = supersede_waiting(&mut tasks, 0, edit(0, "x", None), "hub").unwrap_err();
    assert_eq!(late.code, codes::NOT_WAITING);
}
