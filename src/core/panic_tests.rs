//! A batch that panics, on the core thread or on a caller leading it (`inputs`): its callers and
//! every later one are refused with `Failed`, nothing more is written (no `daemon.stopped`), the
//! failure is announced for the daemon to stop on, and a shutdown still returns.

use std::time::Duration;

use super::event_log::FsyncPolicy;
use super::{CoreError, CoreHandle};
use crate::protocol::{EventKind, InstanceRef};

/// Long enough for a loaded machine: on the core thread, the batch's callers hear of the failure
/// (their replies dropped as it unwound) before it is marked.
const DEADLINE: Duration = Duration::from_secs(10);

fn core(home: &std::path::Path) -> (CoreHandle, std::thread::JoinHandle<()>) {
    super::started_for_tests(home, FsyncPolicy::Always)
}

fn event(key: &str) -> EventKind {
    EventKind::AgentPruned(InstanceRef { key: key.into() })
}

/// The log's text, all segments.
fn log_text(home: &std::path::Path) -> String {
    std::fs::read_dir(home.join("log"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect::<String>()
}

/// What every test checks once the planted batch (the event `boom`) panicked.
async fn assert_failed(
    core: CoreHandle,
    thread: std::thread::JoinHandle<()>,
    home: &std::path::Path,
    answer: Result<u64, CoreError>,
) {
    assert!(
        matches!(answer, Err(CoreError::Failed)),
        "the panicking batch's caller is told the core failed: {answer:?}"
    );
    tokio::time::timeout(DEADLINE, core.failed())
        .await
        .expect("the failure is announced");
    let failure = core.failure().expect("the failure says why");
    assert!(
        failure.contains("planted"),
        "the panic's message: {failure}"
    );
    for key in ["after-1", "after-2"] {
        let later = core.append(None, event(key)).await;
        assert!(
            matches!(later, Err(CoreError::Failed)),
            "every later append is refused: {later:?}"
        );
    }
    core.publish(None, event("live-after"));
    tokio::time::timeout(DEADLINE, core.shutdown())
        .await
        .expect("a shutdown after the failure returns");
    drop(core);
    thread.join().expect("the core thread ends without a panic");
    let log = log_text(home);
    assert!(log.contains("boom"), "written before the panic: {log}");
    assert!(!log.contains("after"), "nothing after the failure: {log}");
    assert!(!log.contains("daemon.stopped"), "no daemon.stopped: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_panicking_on_the_core_thread_fails_the_core_and_writes_nothing_more() {
    let home = tempfile::tempdir().unwrap();
    let (core, thread) = core(home.path());
    // The first append after the start goes to the core thread (no lone streak yet).
    core.plant_panic();
    let answer = core.append(None, event("boom")).await;
    assert_eq!(core.led(), 0, "the core thread handled the batch");
    assert_failed(core, thread, home.path(), answer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_panicking_on_its_leading_caller_fails_the_core_and_writes_nothing_more() {
    let home = tempfile::tempdir().unwrap();
    let (core, thread) = core(home.path());
    for i in 0..8 {
        core.append(None, event(&format!("k{i}"))).await.unwrap();
    }
    let led = core.led();
    assert!(led > 0, "the core was idle and lone before the panic");
    core.plant_panic();
    let answer = core.append(None, event("boom")).await;
    assert_eq!(core.led(), led + 1, "the caller led the panicking batch");
    assert_failed(core, thread, home.path(), answer).await;
}
