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

/// A lost session of `runtime` restored by the host `make` builds (on the core, a tmux cache
/// and a directory): `restarting` when `restore` returns. On a current-thread runtime nothing
/// `restore` spawns has run by then, so that state is what `restore` itself stored.
async fn assert_restarting_once_restored(
    runtime: Runtime,
    make: impl FnOnce(CoreHandle, Arc<SessionCache>, &std::path::Path) -> Box<dyn SessionHost>,
) {
    let dir = tempfile::tempdir().unwrap();
    let core = one_lost_session(dir.path(), runtime).await;
    let host = make(core.clone(), tmux(dir.path()), dir.path());
    host.restore().await;
    let state = core.read(|state| {
        let session = state.sessions.get("cs_a").unwrap();
        (session.state, session.state_message.clone())
    });
    let resuming = "cohost restarted: resuming the session".to_string();
    assert_eq!(
        state,
        (SessionState::Restarting, Some(resuming)),
        "{runtime:?}"
    );
}

#[tokio::test]
async fn a_lost_pi_session_is_restarting_when_the_restore_returns() {
    assert_restarting_once_restored(Runtime::Pi, |core, tmux, dir| {
        let root = dir.join("pi");
        Box::new(super::pi::host::PiHost::new(
            core,
            tmux,
            root,
            TaskFailures::default(),
        ))
    })
    .await;
}

#[tokio::test]
async fn a_lost_opencode_session_is_restarting_when_the_restore_returns() {
    assert_restarting_once_restored(Runtime::Opencode, |core, tmux, dir| {
        let scratch = dir.join("opencode");
        let failures = TaskFailures::default();
        Box::new(super::opencode::host::OpencodeHost::new(
            core, tmux, scratch, failures,
        ))
    })
    .await;
}

#[tokio::test]
async fn a_lost_codex_session_is_restarting_when_the_restore_returns() {
    assert_restarting_once_restored(Runtime::Codex, |core, tmux, dir| {
        let config = super::codex::host::HostConfig {
            cohost_home: dir.join("home"),
            user_codex_home: None,
            backend_idle_ttl: super::codex::host::BACKEND_IDLE_TTL,
            park_timeout: super::codex::host::PARK_TIMEOUT,
            failures: TaskFailures::default(),
        };
        Box::new(super::codex::host::CodexHost::new(core, tmux, config))
    })
    .await;
}
