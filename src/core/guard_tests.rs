//! The append guard: a watcher's removal of its own instance, admitted by the core only while
//! no hosted (or adopted) session reports that instance — whether the session's report was
//! logged before the removal was queued or arrives in the same batch.

use super::event_log::FsyncPolicy;
use super::{CoreError, CoreHandle, Guard};
use crate::protocol::{AgentStatus, AgentUpdate, EventKind, InstanceRef, SOURCE_HOSTED};

const SESSION: &str = "work";
const KEY: &str = "codex:thread-1";

fn core(home: &std::path::Path) -> (CoreHandle, std::thread::JoinHandle<()>) {
    super::started_for_tests(home, FsyncPolicy::Never)
}

fn report(source: &str) -> EventKind {
    EventKind::AgentUpdated(AgentUpdate {
        agent: "codex".into(),
        status: AgentStatus::Idle,
        ts: 1,
        thread_id: Some("thread-1".into()),
        thread_name: None,
        last_user_prompt: None,
        pane_id: Some("%1".into()),
        liveness: None,
        source: Some(source.into()),
        tokenless: false,
    })
}

fn prune() -> EventKind {
    EventKind::AgentPruned(InstanceRef { key: KEY.into() })
}

fn shown(core: &CoreHandle) -> Option<String> {
    core.read(|state| {
        state
            .tracker
            .instance(SESSION, KEY)
            .map(|(update, _)| update.source.clone().unwrap_or_default())
    })
}

#[tokio::test]
async fn a_guarded_removal_never_removes_an_instance_a_session_reports() {
    let home = tempfile::tempdir().unwrap();
    let (core, _thread) = core(home.path());
    let at = |s: &str| Some(s.to_string());

    // The watcher's own instance: removed.
    core.append(at(SESSION), report("watcher:codex"))
        .await
        .unwrap();
    core.append_guarded(at(SESSION), prune(), Guard::NotHosted)
        .await
        .unwrap();
    assert_eq!(shown(&core), None);

    // A session's report took its place before the removal was queued: refused, kept.
    core.append(at(SESSION), report("watcher:codex"))
        .await
        .unwrap();
    core.append(at(SESSION), report(SOURCE_HOSTED))
        .await
        .unwrap();
    let head = core.store.head();
    let refused = core
        .append_guarded(at(SESSION), prune(), Guard::NotHosted)
        .await;
    assert!(matches!(refused, Err(CoreError::Superseded)), "{refused:?}");
    assert_eq!(core.store.head(), head, "nothing was logged");
    assert_eq!(shown(&core).as_deref(), Some(SOURCE_HOSTED));

    // Queued together (one batch, or the report's batch first): the same.
    core.append_guarded(at(SESSION), prune(), Guard::None)
        .await
        .unwrap();
    core.append(at(SESSION), report("watcher:codex"))
        .await
        .unwrap();
    let (reported, refused) = tokio::join!(
        core.append(at(SESSION), report(SOURCE_HOSTED)),
        core.append_guarded(at(SESSION), prune(), Guard::NotHosted),
    );
    reported.unwrap();
    assert!(matches!(refused, Err(CoreError::Superseded)), "{refused:?}");
    assert_eq!(shown(&core).as_deref(), Some(SOURCE_HOSTED));

    // Unguarded, a removal is a removal (a session's own, moving its instance elsewhere).
    core.append(at(SESSION), prune()).await.unwrap();
    assert_eq!(shown(&core), None);
}
