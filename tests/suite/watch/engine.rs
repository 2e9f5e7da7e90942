//! The watcher engine on files written by the test itself (recorded Claude transcript lines,
//! no agent running): partial lines, roots that appear after start, placement by cwd and the
//! unplaced list, the inotify limit's slow rescan, and the bounded start-up catch-up. The agents'
//! own behaviour is `claude_watch` and `codex_watch`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::suite::watch::common::{STATUS_WAIT, explain, instances, rules, wait_instance};
use crate::support::tmux::TmuxServer;
use crate::support::{TestDaemon, temp_dir};

const AGENT: &str = "claude-code";

fn line(value: Value) -> String {
    format!("{value}\n")
}

fn prompt(cwd: &Path, text: &str) -> String {
    line(json!({
        "type": "user",
        "message": { "role": "user", "content": text },
        "cwd": cwd,
        "timestamp": "2026-12-01T09:08:01.330Z",
        "origin": { "kind": "human" },
        "promptSource": "typed"
    }))
}

fn tool_use(id: &str) -> String {
    line(json!({
        "type": "assistant",
        "message": { "role": "assistant", "content": [
            { "type": "tool_use", "id": id, "name": "Bash", "input": { "command": "echo hi" } }
        ] }
    }))
}

fn tool_result(id: &str) -> String {
    line(json!({
        "type": "user",
        "message": { "role": "user", "content": [
            { "type": "tool_result", "tool_use_id": id, "content": "hi" }
        ] }
    }))
}

fn turn_end() -> String {
    line(json!({ "type": "system", "subtype": "turn_duration", "durationMs": 5 }))
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.write_all(text.as_bytes()).expect("append");
}

fn transcript(home: &Path, project: &str, id: &str) -> PathBuf {
    let dir = home.join(".claude/projects").join(project);
    std::fs::create_dir_all(&dir).expect("mkdir project");
    dir.join(format!("{id}.jsonl"))
}

fn daemon(tmux: &TmuxServer, home: &Path, extra: &[(&str, &str)]) -> TestDaemon {
    crate::suite::watch::common::daemon_watching(tmux, AGENT, home, extra)
}

#[test]
fn watch_partial_lines_wait_for_their_newline_and_roots_may_appear_later() {
    let dir = temp_dir("cohost-watch-engine-");
    let home = dir.path().join("home");
    let project = dir.path().join("proj");
    std::fs::create_dir_all(&project).expect("mkdir proj");
    let project = project.canonicalize().expect("canonical");
    let tmux = TmuxServer::with_sessions(&[("proj", &project)]);
    // `~/.claude` does not exist yet: the watcher waits for it.
    let daemon = daemon(&tmux, &home, &[]);
    let path = transcript(&home, "-proj", "t-partial");
    let whole = prompt(&project, "Partial please");
    let (first, rest) = whole.split_at(whole.len() / 2);
    append(&path, first);
    thread::sleep(Duration::from_millis(700));
    assert!(
        instances(&daemon, AGENT).is_empty(),
        "half a line says nothing yet"
    );
    append(&path, rest);
    let (session, running) = wait_instance(&daemon, AGENT, "running", |i| i["status"] == "running");
    assert_eq!(session, "proj", "placed by its cwd: {running:#}");
    assert_eq!(running["lastUserPrompt"], "Partial please");
    assert_eq!(running["liveness"], "unknown", "no process is known for it");
    append(&path, &tool_use("tu1"));
    wait_instance(&daemon, AGENT, "tool-running", |i| {
        i["status"] == "tool-running"
    });
    append(&path, &format!("{}{}", tool_result("tu1"), turn_end()));
    wait_instance(&daemon, AGENT, "done", |i| i["status"] == "done");
    let explained = explain(&daemon, "proj", "claude-code:t-partial");
    assert_eq!(explained["watcher"]["placement"], "cwd");
    let offsets: Vec<u64> = explained["watcher"]["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["locator"]["offset"].as_u64())
        .collect();
    assert_eq!(
        offsets.first(),
        Some(&0),
        "the first line is at offset 0: {offsets:?}"
    );
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
}

#[test]
fn watch_unplaced_agents_are_listed_not_dropped() {
    let dir = temp_dir("cohost-watch-engine-");
    let home = dir.path().join("home");
    let tmux = TmuxServer::with_sessions(&[("elsewhere", dir.path().join("other").as_path())]);
    let daemon = daemon(&tmux, &home, &[]);
    let path = transcript(&home, "-nowhere", "t-unplaced");
    append(
        &path,
        &prompt(Path::new("/nonexistent/nowhere"), "Where am I"),
    );
    let (session, _) = wait_instance(&daemon, AGENT, "unplaced", |i| i["status"] == "running");
    assert_eq!(session, ":unplaced");
    let state = daemon.cli_ok(&["state"]);
    assert!(
        state.contains("(unplaced)") && state.contains("claude-code:t-unplaced"),
        "{state}"
    );
    let text = daemon.cli_ok(&["explain", "unplaced", AGENT]);
    assert!(text.contains("placed:   unplaced"), "{text}");
    assert!(text.contains("user prompt"), "{text}");
    // An unknown instance is a clear 404.
    let resp = daemon.get("/api/state/elsewhere/agents/claude-code%3Anope/explain");
    resp.assert_error(404, "instance_not_found", None);
}

#[test]
fn watch_limit_degrades_to_a_slow_rescan_of_what_could_not_be_watched() {
    let dir = temp_dir("cohost-watch-engine-");
    let home = dir.path().join("home");
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| transcript(&home, &format!("-p{i}"), &format!("t-limit-{i}")))
        .collect();
    let tmux = TmuxServer::new();
    let daemon = daemon(
        &tmux,
        &home,
        &[
            ("COHOST_WATCH_MAX_WATCHES", "2"),
            ("COHOST_WATCH_RESCAN_MS", "500"),
        ],
    );
    let stats = daemon.wait_for("the catch-up", STATUS_WAIT, |daemon| {
        let stats = daemon.get("/api/watch").json();
        (stats["caughtUp"] == true).then_some(stats)
    });
    assert_eq!(stats["watchedDirs"], 2, "{stats:#}");
    assert!(
        stats["unwatchedDirs"].as_u64() >= Some(2),
        "the rest is rescanned: {stats:#}"
    );
    assert!(
        daemon
            .stderr_text()
            .contains("the inotify watch limit is reached"),
        "the degradation is visible in the log"
    );
    for (i, path) in paths.iter().enumerate() {
        append(path, &prompt(Path::new("/nowhere"), &format!("limit {i}")));
    }
    daemon.wait_for("all three, watched or rescanned", STATUS_WAIT, |daemon| {
        (instances(daemon, AGENT).len() == 3).then_some(())
    });
    let before = daemon.get("/api/watch").json();
    daemon.wait_for(
        "the slow rescan to run while directories are unwatched",
        STATUS_WAIT,
        |daemon| {
            (daemon.get("/api/watch").json()["timerWakeups"].as_u64()
                > before["timerWakeups"].as_u64())
            .then_some(())
        },
    );
}

#[test]
fn watch_start_up_reads_only_tails_and_old_files_not_at_all() {
    let dir = temp_dir("cohost-watch-engine-");
    let home = dir.path().join("home");
    let filler = line(json!({ "type": "progress", "data": "x".repeat(900) }));
    let big = |id: &str| {
        let path = transcript(&home, "-big", id);
        let mut text = prompt(Path::new("/nowhere"), "first prompt");
        while text.len() < 4 * 1024 * 1024 {
            text.push_str(&filler);
        }
        text.push_str(&prompt(Path::new("/nowhere"), "the last prompt"));
        text.push_str(&turn_end());
        std::fs::write(&path, text).expect("write big transcript");
        path
    };
    let _recent = big("t-recent");
    let old = big("t-old");
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(two_days_ago))
        .expect("age the old transcript");
    let tmux = TmuxServer::new();
    let daemon = daemon(&tmux, &home, &[]);
    let stats = daemon.wait_for("the catch-up", STATUS_WAIT, |daemon| {
        let stats = daemon.get("/api/watch").json();
        (stats["caughtUp"] == true).then_some(stats)
    });
    let read = stats["bytesRead"].as_u64().expect("bytesRead");
    assert!(
        read <= (64 + 256) * 1024,
        "start-up reads the first line and the last 256 KiB of the recent file only, read {read}: {stats:#}"
    );
    assert_eq!(stats["filesKnown"], 2);
    // The old file grows: now it is read (its tail), and its thread shows.
    append(&old, &prompt(Path::new("/nowhere"), "old but alive"));
    let (_, revived) = wait_instance(&daemon, AGENT, "the old thread", |i| {
        i["threadId"] == "t-old" && i["lastUserPrompt"] == "old but alive"
    });
    assert_eq!(revived["status"], "running");
    let explained = explain(&daemon, ":unplaced", "claude-code:t-old");
    assert!(
        rules(&explained).iter().any(|r| r.contains("user prompt")),
        "{explained:#}"
    );
    // The turn ends; then nothing changes: nothing is read and no timer runs.
    append(&old, &turn_end());
    wait_instance(&daemon, AGENT, "the old thread done", |i| {
        i["threadId"] == "t-old" && i["status"] == "done"
    });
    // The checkpoint has saved the old file to its end: nothing is pending.
    let size = std::fs::metadata(&old).unwrap().len();
    let checkpoint = daemon.home().join("watch/checkpoint.json");
    daemon.wait_for(
        "the checkpoint to save the old file's end",
        STATUS_WAIT,
        |_| {
            let saved: Value = serde_json::from_slice(&std::fs::read(&checkpoint).ok()?).ok()?;
            saved["files"]
                .as_array()?
                .iter()
                .any(|f| f["path"] == old.to_str().unwrap() && f["offset"] == size)
                .then_some(())
        },
    );
    let before = daemon.get("/api/watch").json();
    thread::sleep(Duration::from_secs(3));
    let after = daemon.get("/api/watch").json();
    assert_eq!(
        before["bytesRead"], after["bytesRead"],
        "no reads while idle"
    );
    assert_eq!(
        before["wakeups"], after["wakeups"],
        "no wakeup while nothing changes (the checkpoint is saved, no turn is open)"
    );
}

#[test]
fn watch_unknown_watchers_are_refused_by_name() {
    let home = temp_dir("cohost-watch-args-");
    for (args, env, needle) in [
        (
            vec!["--watchers", "cursor"],
            None,
            "unknown watcher `cursor`",
        ),
        (vec![], Some("codex,nope"), "unknown watcher `nope`"),
        (
            vec!["--watchers", "codex", "--no-watchers"],
            None,
            "cannot be used with",
        ),
    ] {
        let mut command = std::process::Command::new(crate::support::BIN);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(&args)
            .env_remove("COHOST_LISTEN")
            .env_remove("COHOST_WATCHERS")
            .env("COHOST_HOME", home.path().join("h"));
        if let Some(value) = env {
            command.env("COHOST_WATCHERS", value);
        }
        let output = crate::support::run_with_timeout(&mut command, Duration::from_secs(10));
        assert!(!output.status.success(), "{args:?} {env:?}: serve started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?} {env:?}: {stderr}");
    }
}
