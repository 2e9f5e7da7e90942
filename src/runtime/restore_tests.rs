//! A daemon's restore, as the daemon awaits it before serving: every lost session a runtime
//! resumes is `restarting` by the time `restore` returns, so no prompt sent once the daemon
//! listens is refused as lost for a session being brought back.

use std::sync::Arc;

use crate::core::CoreHandle;
use crate::core::event_log::FsyncPolicy;
use crate::failures::TaskFailures;
use crate::protocol::{EventKind, Runtime, SessionCreated, SessionState, SessionStatus};
use crate::runtime::SessionHost;
use crate::tmux::{SessionCache, Tmux};

/// A core holding one session of `runtime`, `cs_a`, left lost.
async fn one_lost_session(dir: &std::path::Path, runtime: Runtime) -> CoreHandle {
    let (core, _thread) = crate::core::started_for_tests(&dir.join("home"), FsyncPolicy::Never);
    let created = SessionCreated::plain(runtime, "/w".into());
    core.append(Some("cs_a".into()), EventKind::SessionCreated(created))
        .await
        .unwrap();
    let lost = SessionStatus {
        state: SessionState::Lost,
        message: Some("the agent went away".into()),
    };
    core.append(Some("cs_a".into()), EventKind::SessionStatus(lost))
        .await
        .unwrap();
    core
}

fn tmux(dir: &std::path::Path) -> Arc<SessionCache> {
    Arc::new(SessionCache::new(Tmux::new(Some(dir.join("no-tmux")))))
}

/// On a current-thread runtime nothing `restore` spawns has run when it returns: what the
/// session's state is then, `restore` itself stored.
async fn state_once_restored(
    core: &CoreHandle,
    host: &dyn SessionHost,
) -> (SessionState, Option<String>) {
    host.restore().await;
    core.read(|state| {
        let session = state.sessions.get("cs_a").unwrap();
        (session.state, session.state_message.clone())
    })
}

fn resuming() -> (SessionState, Option<String>) {
    (
        SessionState::Restarting,
        Some("cohost restarted: resuming the session".into()),
    )
}

#[tokio::test]
async fn a_lost_pi_session_is_restarting_when_the_restore_returns() {
    let dir = tempfile::tempdir().unwrap();
    let core = one_lost_session(dir.path(), Runtime::Pi).await;
    let host = super::pi::host::PiHost::new(
        core.clone(),
        tmux(dir.path()),
        dir.path().join("pi"),
        TaskFailures::default(),
    );
    assert_eq!(state_once_restored(&core, &host).await, resuming());
}

#[tokio::test]
async fn a_lost_opencode_session_is_restarting_when_the_restore_returns() {
    let dir = tempfile::tempdir().unwrap();
    let core = one_lost_session(dir.path(), Runtime::Opencode).await;
    let host = super::opencode::host::OpencodeHost::new(
        core.clone(),
        tmux(dir.path()),
        dir.path().join("opencode"),
        TaskFailures::default(),
    );
    assert_eq!(state_once_restored(&core, &host).await, resuming());
}

#[tokio::test]
async fn a_lost_codex_session_is_restarting_when_the_restore_returns() {
    let dir = tempfile::tempdir().unwrap();
    let core = one_lost_session(dir.path(), Runtime::Codex).await;
    let host = super::codex::host::CodexHost::new(
        core.clone(),
        tmux(dir.path()),
        super::codex::host::HostConfig {
            cohost_home: dir.path().join("home"),
            user_codex_home: None,
            backend_idle_ttl: super::codex::host::BACKEND_IDLE_TTL,
            park_timeout: super::codex::host::PARK_TIMEOUT,
            failures: TaskFailures::default(),
        },
    );
    assert_eq!(state_once_restored(&core, &host).await, resuming());
}
