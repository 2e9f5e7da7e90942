//! A session's follower — the task that turns a runtime's output into the session's events —
//! run with its panic caught. Uncaught, a panic ends that task alone: the session stays `live`
//! while nothing reads its runtime any more, and nothing says so. Caught, the session is marked
//! `lost` with the panic's message (and the log says which task it was); a restart of cohost
//! restores it as it restores any session that is not closed.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::core::CoreHandle;
use crate::failures::TaskFailures;
use crate::protocol::SessionState;

/// Runs `task`; its panic, if it panics, as the panic's message.
pub async fn caught<F: Future>(task: F) -> Result<F::Output, String> {
    AssertUnwindSafe(task)
        .catch_unwind()
        .await
        .map_err(|payload| crate::core::panic_message(&*payload))
}

/// What a session lost to its follower's panic says (`session.status`'s message).
fn lost_message(task: &str, panic: &str) -> String {
    format!(
        "cohost stopped following this session: its {task} panicked ({panic}); restart cohost to follow it again"
    )
}

/// Records that `task`, following `sessions`, panicked, in the list `/api/health`
/// (`failedTasks`, `ok: false`) and `cohost doctor` show, and returns what those sessions'
/// `session.status` says ([`lost_message`]).
pub fn lost(failures: &TaskFailures, task: &str, sessions: &[String], panic: &str) -> String {
    let named = match sessions {
        [] => format!("the {task}"),
        [one] => format!("the {task} of session `{one}`"),
        many => format!("the {task} of sessions `{}`", many.join("`, `")),
    };
    failures.record(&named, panic);
    lost_message(task, panic)
}

/// Runs `settle`, which ends a hosted session whose runtime went away or whose dispatch
/// panicked (its turn, its dialogs, its `lost` status with `message`); should that panic too —
/// a panic can leave what it settles half-changed —, the session is still marked `lost` with
/// `message`.
pub async fn settle_caught<S>(core: &CoreHandle, session_id: &str, message: String, settle: S)
where
    S: AsyncFnOnce(String),
{
    if let Err(panic) = caught(settle(message.clone())).await {
        tracing::error!(session = session_id, %panic, "settling a session that went away panicked");
        super::hosted::status(core, session_id, SessionState::Lost, Some(message)).await;
    }
}

/// Runs `task`, a session's follower named `name` (`claude follower`…); should it panic, runs
/// `on_panic` — which stops what must not go on unfollowed (typing into the agent's pane) and
/// names the sessions the task followed —, logs it, records it for health and doctor, and marks
/// each of those sessions `lost` with [`lost_message`].
pub async fn follow_caught<F>(
    core: &CoreHandle,
    failures: &TaskFailures,
    name: &str,
    on_panic: impl FnOnce() -> Vec<String>,
    task: F,
) where
    F: Future<Output = ()>,
{
    let Err(panic) = caught(task).await else {
        return;
    };
    let sessions = on_panic();
    tracing::error!(task = name, panic = %panic, ?sessions, "a session's follower panicked");
    let message = lost(failures, name, &sessions, &panic);
    for session_id in sessions {
        super::hosted::status(core, &session_id, SessionState::Lost, Some(message.clone())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event_log::FsyncPolicy;
    use crate::protocol::{EventKind, Runtime, SessionCreated};

    async fn created(core: &CoreHandle, id: &str) {
        let created = SessionCreated::plain(Runtime::Codex, "/w".into());
        core.append(Some(id.to_string()), EventKind::SessionCreated(created))
            .await
            .unwrap();
    }

    fn state(core: &CoreHandle, id: &str) -> (SessionState, Option<String>) {
        core.read(|state| {
            let session = state.sessions.get(id).expect("the session");
            (session.state, session.state_message.clone())
        })
    }

    #[tokio::test]
    async fn a_follower_that_panics_marks_its_sessions_lost_with_the_message() {
        let dir = tempfile::tempdir().unwrap();
        let (core, _thread) = crate::core::started_for_tests(dir.path(), FsyncPolicy::Never);
        for id in ["cs_a", "cs_b"] {
            created(&core, id).await;
        }
        let failures = TaskFailures::default();
        follow_caught(
            &core,
            &failures,
            "codex dispatch",
            || vec!["cs_a".to_string(), "cs_b".to_string()],
            async { panic!("planted: a notification it could not take") },
        )
        .await;
        assert_eq!(
            failures.list(),
            [
                "the codex dispatch of sessions `cs_a`, `cs_b` panicked: planted: a notification it \
              could not take"
            ]
        );
        // One session, or none.
        lost(&failures, "pi dispatch", &["cs_c".into()], "planted");
        lost(&failures, "codex dispatch", &[], "planted");
        assert_eq!(
            failures.list()[1..],
            [
                "the pi dispatch of session `cs_c` panicked: planted",
                "the codex dispatch panicked: planted"
            ]
        );
        for id in ["cs_a", "cs_b"] {
            assert_eq!(
                state(&core, id),
                (
                    SessionState::Lost,
                    Some(
                        "cohost stopped following this session: its codex dispatch panicked \
                         (planted: a notification it could not take); restart cohost to follow \
                         it again"
                            .to_string()
                    )
                ),
                "{id}"
            );
        }
    }

    #[tokio::test]
    async fn a_settling_that_panics_still_marks_the_session_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (core, _thread) = crate::core::started_for_tests(dir.path(), FsyncPolicy::Never);
        created(&core, "cs_a").await;
        let message = "pi (pid 7) went away".to_string();
        settle_caught(&core, "cs_a", message, async |_| {
            panic!("planted: a forwarder left half-changed")
        })
        .await;
        assert_eq!(
            state(&core, "cs_a"),
            (SessionState::Lost, Some("pi (pid 7) went away".to_string()))
        );
    }

    #[tokio::test]
    async fn a_follower_that_ends_leaves_its_sessions_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let (core, _thread) = crate::core::started_for_tests(dir.path(), FsyncPolicy::Never);
        created(&core, "cs_a").await;
        let before = state(&core, "cs_a");
        let mut asked = false;
        let failures = TaskFailures::default();
        follow_caught(
            &core,
            &failures,
            "pi dispatch",
            || {
                asked = true;
                vec!["cs_a".to_string()]
            },
            async {},
        )
        .await;
        assert!(!asked, "on_panic runs only after a panic");
        assert!(failures.list().is_empty(), "nothing recorded");
        assert_eq!(state(&core, "cs_a"), before);
        assert_ne!(before.0, SessionState::Lost);
    }
}
