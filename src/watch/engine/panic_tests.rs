//! The engine thread's panic: caught, logged, and kept for `/api/health` and `cohost doctor`
//! (`WatchHandle::failure`), instead of the watchers stopping without a word.

use std::sync::Arc;
use std::time::Duration;

use super::{WatchConfig, WatchHandle, WatchLimits};
use crate::core::CoreHandle;
use crate::core::event_log::FsyncPolicy;
use crate::tmux::{SessionCache, Tmux};
use crate::watch::format::{WatchEnv, WatchedAgent};

const DEADLINE: Duration = Duration::from_secs(10);

fn core(home: &std::path::Path) -> CoreHandle {
    crate::core::started_for_tests(home, FsyncPolicy::Never).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_engine_thread_is_kept_as_the_watchers_failure() {
    let dir = tempfile::tempdir().unwrap();
    let watch = WatchHandle::start(
        WatchConfig {
            agents: vec![WatchedAgent::ClaudeCode],
            env: WatchEnv {
                home: dir.path().join("user"),
                vars: Default::default(),
            },
            state_dir: dir.path().join("watch"),
            limits: WatchLimits::default(),
        },
        core(&dir.path().join("home")),
        Arc::new(SessionCache::new(Tmux::new(Some(
            dir.path().join("no-tmux"),
        )))),
    )
    .unwrap();
    assert_eq!(watch.failure(), None);
    watch.plant_panic();
    // `stop` joins the engine thread, which keeps its panic before it ends (the planted
    // message is handled before the stop behind it).
    tokio::time::timeout(DEADLINE, watch.stop())
        .await
        .expect("stopping watchers whose engine panicked returns");
    assert_eq!(watch.failure().as_deref(), Some("a test's planted panic"));
}
