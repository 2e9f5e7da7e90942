//! Appends their callers handle themselves when the core is idle (`inputs`): the same events,
//! the same order for each caller, nothing after `daemon.stopped`, and the core thread's batches
//! again under concurrent load.

use super::event_log::FsyncPolicy;
use super::{CoreError, CoreHandle};
use crate::protocol::{EventKind, InstanceRef};

fn core(home: &std::path::Path) -> (CoreHandle, std::thread::JoinHandle<()>) {
    super::started_for_tests(home, FsyncPolicy::Always)
}

/// An event with no session: admitted as it is, and its key tells it apart.
fn event(key: String) -> EventKind {
    EventKind::AgentPruned(InstanceRef { key })
}

/// The key of one of this test's events, stored or live-only (which has no seq).
fn key_of(json: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    let kind: EventKind = serde_json::from_value(value).unwrap();
    match kind {
        EventKind::AgentPruned(InstanceRef { key }) => key,
        other => panic!("not one of this test's events: {other:?}"),
    }
}

#[tokio::test]
async fn a_lone_caller_writes_its_own_event_in_order_with_what_it_published_before() {
    let home = tempfile::tempdir().unwrap();
    let (core, _thread) = core(home.path());
    let mut bus = core.subscribe();
    let mut seqs = Vec::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        // Every eighth round publishes first: that live-only event is pending when the append
        // comes, so the append goes behind it to the core thread.
        if i % 8 == 0 {
            core.publish(None, event(format!("live-{i}")));
            expected.push((true, format!("live-{i}")));
        }
        seqs.push(
            core.append(None, event(format!("stored-{i}")))
                .await
                .unwrap(),
        );
        expected.push((false, format!("stored-{i}")));
    }
    // After each publish, four lone batches by the core thread (`LONE_STREAK`), then the
    // caller leads the three rounds left before the next publish: at least 5 × 3.
    assert!(
        core.led() >= 15,
        "lone appends one at a time are written by their callers; led {}",
        core.led()
    );
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "seqs {seqs:?}");
    let mut seen = Vec::new();
    while seen.len() < expected.len() {
        let event = bus.recv().await.unwrap();
        seen.push((event.ephemeral, key_of(&event.json)));
    }
    assert_eq!(seen, expected);
    let stored = core.store.read_after(seqs[0] - 1, 100).unwrap();
    let keys: Vec<String> = stored.events.iter().map(|e| key_of(&e.json)).collect();
    let want: Vec<String> = (0..40).map(|i| format!("stored-{i}")).collect();
    assert_eq!(keys, want, "the log holds every append once, in order");
}

#[tokio::test]
async fn nothing_is_written_after_daemon_stopped_even_by_a_caller_that_could_lead() {
    let home = tempfile::tempdir().unwrap();
    let (core, thread) = core(home.path());
    for i in 0..8 {
        core.append(None, event(format!("k{i}"))).await.unwrap();
    }
    assert!(
        core.led() > 0,
        "the core was idle and lone before the shutdown"
    );
    core.shutdown().await;
    let after = core.append(None, event("late".into())).await;
    assert!(
        matches!(after, Err(CoreError::ShuttingDown)),
        "an append after the shutdown is refused: {after:?}"
    );
    drop(core);
    thread.join().unwrap();
    let log = std::fs::read_dir(home.path().join("log"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect::<String>();
    let last = log
        .trim_end_matches('\0')
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("daemon.stopped"), "the last line: {last}");
    assert!(!log.contains("late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_each_get_one_seq_whoever_writes_them() {
    let home = tempfile::tempdir().unwrap();
    let (core, _thread) = core(home.path());
    // Lone first, so callers lead when the burst starts.
    for i in 0..6 {
        core.append(None, event(format!("warm-{i}"))).await.unwrap();
    }
    let first = core.store.read_after(0, 1000).unwrap().events.len() as u64;
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let core = core.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..20 {
                    seqs.push(core.append(None, event(format!("t{t}-{i}"))).await.unwrap());
                }
                seqs
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        let seqs = task.await.unwrap();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "one caller's seqs in order: {seqs:?}"
        );
        all.extend(seqs);
    }
    all.sort_unstable();
    let want: Vec<u64> = (first + 1..=first + 64 * 20).collect();
    assert_eq!(all, want, "every append one seq, none twice, none skipped");
    let stored = core.store.read_after(first, 2000).unwrap();
    assert_eq!(stored.events.len(), 64 * 20);
}
