//! What the watcher suites (`claude_watch`, `codex_watch`) share: real agents started in panes
//! of a private tmux server from a cleared environment, a daemon with one watcher on whose
//! `HOME` is the agent's, and readers for the watcher's instances and events.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::TestDaemon;
use crate::support::tmux::TmuxServer;

/// How long a status may take to show after the agent wrote it (the agent itself is slow to
/// start on a loaded 2-core machine; the watcher is not).
pub const STATUS_WAIT: Duration = Duration::from_secs(45);

/// Starts the daemon with only `watcher` on, seeing `home` as `$HOME` (plus `extra` env).
pub fn daemon_watching(
    tmux: &TmuxServer,
    watcher: &str,
    home: &Path,
    extra: &[(&str, &str)],
) -> TestDaemon {
    let home = home.to_string_lossy().into_owned();
    let mut env: Vec<(&str, &str)> = vec![("COHOST_WATCHERS", watcher), ("HOME", &home)];
    env.extend_from_slice(extra);
    TestDaemon::start_with_env(Some(tmux.socket()), &[], &env)
}

/// Every watcher instance of `agent` in the state: `(session, instance)`, unplaced ones under
/// `:unplaced`.
pub fn instances(daemon: &TestDaemon, agent: &str) -> Vec<(String, Value)> {
    let state = daemon.state();
    let mut found = Vec::new();
    for session in state["sessions"].as_array().into_iter().flatten() {
        for instance in session["agents"].as_array().into_iter().flatten() {
            if instance["agent"] == agent {
                found.push((
                    session["name"].as_str().unwrap_or("").to_owned(),
                    instance.clone(),
                ));
            }
        }
    }
    for instance in state["unplaced"].as_array().into_iter().flatten() {
        if instance["agent"] == agent {
            found.push((":unplaced".to_owned(), instance.clone()));
        }
    }
    found
}

/// Waits until `check` holds for the instances of `agent` (`(session, instance)` pairs); on a
/// timeout, fails with every instance, how the daemon explains each, and the watch view.
#[track_caller]
pub fn wait_instances<T>(
    daemon: &TestDaemon,
    agent: &str,
    what: &str,
    check: impl Fn(&[(String, Value)]) -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + STATUS_WAIT;
    loop {
        let found = instances(daemon, agent);
        if let Some(hit) = check(&found) {
            return hit;
        }
        if std::time::Instant::now() >= deadline {
            let explained: Vec<Value> = found
                .iter()
                .map(|(session, i)| explain(daemon, session, i["key"].as_str().unwrap_or("")))
                .collect();
            daemon.fail(&format!(
                "timed out after {STATUS_WAIT:?} waiting for {what}; instances: {found:#?}\nexplained: {explained:#?}\nwatch: {:#}",
                daemon.get("/api/watch").json()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the single instance of `agent` to satisfy `check`; returns `(session, instance)`.
#[track_caller]
pub fn wait_instance(
    daemon: &TestDaemon,
    agent: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> (String, Value) {
    wait_instances(daemon, agent, what, |found| {
        found.iter().find(|(_, instance)| check(instance)).cloned()
    })
}

/// The argv that runs `bin ARGS…` the way a script does, from a shell that then prints
/// `headless-exit=<status>` and stays (so its pane does).
pub fn headless_argv(bin: &std::path::Path, args: &[&str]) -> Vec<String> {
    let mut argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        r#""$@"; echo "headless-exit=$?"; exec sleep 600"#.to_owned(),
        "sh".to_owned(),
        bin.to_string_lossy().into_owned(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    argv
}

/// The `agent.updated` / `agent.pruned` events for instance `key`, oldest first.
pub fn instance_events(daemon: &TestDaemon, key: &str) -> Vec<Value> {
    daemon
        .events_after(0)
        .into_iter()
        .filter(|event| match event["type"].as_str() {
            Some("agent.updated") => {
                format!(
                    "{}:{}",
                    event["data"]["agent"].as_str().unwrap_or(""),
                    event["data"]["threadId"].as_str().unwrap_or("")
                ) == key
            }
            Some("agent.pruned") | Some("agent.stale") => event["data"]["key"] == key,
            _ => false,
        })
        .collect()
}

/// The statuses of `agent.updated` events, in order.
pub fn statuses(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "agent.updated")
        .map(|e| e["data"]["status"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Whether `wanted` appears in `seen` in this order (not necessarily next to each other).
pub fn in_order(seen: &[String], wanted: &[&str]) -> bool {
    let mut wanted = wanted.iter().peekable();
    for status in seen {
        if wanted.peek().is_some_and(|w| *w == status) {
            wanted.next();
        }
    }
    wanted.peek().is_none()
}

/// No two `agent.updated` events in a row say the same thing (what the engine promises: it
/// emits only what changed).
#[track_caller]
pub fn assert_no_repeats(events: &[Value]) {
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "agent.updated")
        .collect();
    for pair in updates.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let same = a["session"] == b["session"]
            && a["data"]["status"] == b["data"]["status"]
            && a["data"]["threadName"] == b["data"]["threadName"]
            && a["data"]["lastUserPrompt"] == b["data"]["lastUserPrompt"]
            && a["data"]["paneId"] == b["data"]["paneId"]
            && a["data"]["liveness"] == b["data"]["liveness"];
        assert!(
            !same,
            "the watcher emitted the same update twice (seq {} and {}): {b}",
            a["seq"], b["seq"]
        );
    }
}

/// Waits until the watcher has read every file it knows once (`/api/watch` `caughtUp`): what a
/// restart would re-emit is emitted by then, so a quiet window after it means something.
pub fn wait_caught_up(daemon: &TestDaemon) {
    daemon.wait_for("the watcher's catch-up", STATUS_WAIT, |daemon| {
        (daemon.get("/api/watch").json()["caughtUp"] == true).then_some(())
    });
}

/// GET the explain route for `key` in `session`.
pub fn explain(daemon: &TestDaemon, session: &str, key: &str) -> Value {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    let resp = daemon.get(&format!(
        "/api/state/{}/agents/{}/explain",
        encode(session),
        encode(key)
    ));
    assert_eq!(
        resp.status, 200,
        "explain answered {}: {}",
        resp.status, resp.body
    );
    resp.json()
}

/// The rules in an explain answer's evidence.
pub fn rules(explained: &Value) -> Vec<String> {
    explained["watcher"]["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["rule"].as_str().unwrap_or("").to_owned())
        .collect()
}
