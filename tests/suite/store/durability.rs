//! Restarts (graceful and kill -9), torn log lines, segment rolling and retention, the home lock,
//! and the token file.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::support::*;

/// The session-relevant parts of /api/state (what a restart must keep).
fn tracked(daemon: &TestDaemon) -> Value {
    let mut state = daemon.state();
    state.as_object_mut().unwrap().remove("seq");
    state
}

fn last_segment(daemon: &TestDaemon) -> std::path::PathBuf {
    let (name, _) = daemon.segments().pop().expect("a log segment");
    daemon.log_dir().join(name)
}

fn log_lines(daemon: &TestDaemon) -> Vec<Value> {
    let mut all = Vec::new();
    for (name, _) in daemon.segments() {
        let text = String::from_utf8(segment_lines(&daemon.log_dir().join(&name))).unwrap();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{name} does not end with a newline"
        );
        for line in text.lines() {
            all.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{name}: bad line {line:?}: {e}")),
            );
        }
    }
    all
}

#[test]
fn graceful_restart_keeps_state_and_continues_the_cursor() {
    let (tmux, _) = tmux_with_sessions(&["s1", "s2"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "done");
    daemon
        .report(&json!({"agent": "b", "status": "running", "tmuxSession": "s1", "threadId": "t"}));
    daemon.report_status("s2", "c", "error");
    daemon
        .post("/api/focus", &json!({"session": "s2"}))
        .assert_ok();
    daemon
        .post_no_token(
            "/set-status",
            &json!({"session": "s1", "text": "deploying", "tone": "info"}),
        )
        .assert_ok();
    daemon
        .post_no_token("/log", &json!({"session": "s1", "message": "m1"}))
        .assert_ok();
    let head_before = daemon.head();
    let events_before = daemon.events_after(0);
    let state_before = tracked(&daemon);
    let old_port = daemon.port();
    let old_token = daemon.token();

    // An open stream must not hold up a graceful stop: it ends.
    let mut stream = daemon
        .sse(&format!("?after={head_before}"), None)
        .unwrap_or_else(|r| panic!("{r:?}"));
    let stopping = Instant::now();
    daemon.stop();
    let stop_took = stopping.elapsed();
    assert!(
        stop_took < Duration::from_secs(4),
        "graceful stop took {stop_took:?} with an open stream"
    );
    stream.set_read_timeout(Duration::from_secs(3));
    match stream.try_next() {
        Ok(None) => {}
        other => panic!("the stream should have ended at shutdown, got {other:?}"),
    }
    assert_eq!(
        daemon.stdout_lines().len(),
        1,
        "serve prints exactly one stdout line: {:?}",
        daemon.stdout_lines()
    );
    assert!(
        !daemon.home().join("daemon.json").exists(),
        "daemon.json is removed on clean exit"
    );
    assert!(
        daemon.home().join("snapshot.json").exists(),
        "a clean exit writes a snapshot"
    );
    let on_disk = log_lines(&daemon);
    let last = on_disk.last().unwrap();
    assert_eq!(last["type"], "daemon.stopped", "{last}");
    assert_eq!(last["seq"], head_before + 1);

    daemon.start_again();
    assert_eq!(daemon.token(), old_token, "the token survives restarts");
    let _ = old_port;
    let head = daemon.head();
    assert_eq!(
        head,
        head_before + 2,
        "daemon.stopped and daemon.started follow the old head"
    );
    assert_eq!(
        tracked(&daemon),
        state_before,
        "the tracker survives a graceful restart"
    );
    let events = daemon.events_after(0);
    assert_contiguous(&seqs(&events), 1, head);
    assert_eq!(
        &events[..events_before.len()],
        &events_before[..],
        "earlier events are unchanged"
    );
    assert_eq!(events[head_before as usize]["type"], "daemon.stopped");
    assert_eq!(events[head_before as usize + 1]["type"], "daemon.started");
    // The old cursor continues.
    let page = daemon
        .get(&format!("/api/events?after={head_before}"))
        .assert_ok();
    assert_eq!(
        seqs(page["events"].as_array().unwrap()),
        [head_before + 1, head_before + 2]
    );
    let seq = daemon.report_status("s1", "a", "running");
    assert_eq!(seq, head + 1);
    let new = &daemon.events_after(seq - 1)[0];
    // s1 had: done, its `turn-ended` notification, running, status, log.
    assert_eq!(
        new["sessionSeq"], 6,
        "per-session seqs continue after a restart: {new}"
    );
    assert_eq!(daemon.instance("s1", "a").unwrap()["unseen"], false);
}

#[test]
fn kill_9_restart_keeps_every_acknowledged_event() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "done");
    daemon.report_status("s1", "b", "waiting");
    daemon
        .post_no_token(
            "/set-progress",
            &json!({"session": "s1", "current": 1, "total": 4}),
        )
        .assert_ok();
    // A graceful restart first, so the state comes from a snapshot plus the log after it.
    daemon.restart();
    daemon
        .post("/api/focus", &json!({"session": "s1"}))
        .assert_ok();
    daemon.report_status("s1", "c", "interrupted");
    daemon
        .post_no_token(
            "/log",
            &json!({"session": "s1", "message": "after snapshot"}),
        )
        .assert_ok();
    let head_before = daemon.head();
    let events_before = daemon.events_after(0);
    let state_before = tracked(&daemon);

    daemon.kill9();
    assert!(
        daemon.home().join("daemon.json").exists(),
        "kill -9 leaves daemon.json behind"
    );
    daemon.start_again();
    let head = daemon.head();
    assert_eq!(
        head,
        head_before + 1,
        "no daemon.stopped after kill -9; daemon.started follows the old head"
    );
    assert_eq!(
        tracked(&daemon),
        state_before,
        "the tracker survives kill -9"
    );
    assert_eq!(
        daemon.instance("s1", "a").unwrap()["unseen"],
        false,
        "the focus after the snapshot was replayed"
    );
    assert_eq!(daemon.instance("s1", "c").unwrap()["unseen"], true);
    let events = daemon.events_after(0);
    assert_contiguous(&seqs(&events), 1, head);
    assert_eq!(&events[..events_before.len()], &events_before[..]);
    assert_eq!(events.last().unwrap()["type"], "daemon.started");
    let seq = daemon.report_status("s1", "d", "running");
    assert_eq!(seq, head + 1);
    // Twice in a row, with no snapshot written in between.
    daemon.kill9();
    daemon.start_again();
    assert_eq!(daemon.head(), seq + 1);
    assert_eq!(daemon.instance("s1", "d").unwrap()["status"], "running");
}

#[test]
fn a_torn_last_line_is_cut_and_the_log_continues() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "done");
    daemon.report_status("s1", "b", "running");
    for (round, stop_gracefully) in [(0, true), (1, false)] {
        let head_before = daemon.head();
        let state_before = tracked(&daemon);
        if stop_gracefully {
            daemon.stop();
        } else {
            daemon.kill9();
        }
        let stored_head = head_before + u64::from(stop_gracefully);
        let segment = last_segment(&daemon);
        let intact = segment_lines(&segment);
        // A crash in the middle of a write: the next event, half written where the lines end
        // (over the zeros written ahead of them, after kill -9).
        let torn = format!(
            r#"{{"seq":{},"ts":1,"session":"s1","sessionSeq":99,"type":"agent.upd"#,
            stored_head + 1
        );
        std::os::unix::fs::FileExt::write_all_at(
            &fs::OpenOptions::new().write(true).open(&segment).unwrap(),
            torn.as_bytes(),
            intact.len() as u64,
        )
        .unwrap();

        daemon.start_again();
        let after = fs::read(&segment).unwrap();
        assert!(
            after.starts_with(&intact),
            "round {round}: complete lines must be kept"
        );
        assert!(
            !String::from_utf8_lossy(&after).contains("agent.upd\""),
            "round {round}: the torn line must be gone"
        );
        assert!(
            !String::from_utf8_lossy(&after[intact.len()..]).contains(r#""ts":1,"#),
            "round {round}: the torn bytes must be gone"
        );
        assert_eq!(
            daemon.stderr_text().matches("torn last line").count(),
            round + 1,
            "round {round}: the truncation is logged once per torn line"
        );
        let head = daemon.head();
        assert_eq!(
            head,
            stored_head + 1,
            "round {round}: daemon.started takes the torn line's seq"
        );
        let events = daemon.events_after(0);
        assert_contiguous(&seqs(&events), 1, head);
        assert!(
            events.iter().all(|e| e["sessionSeq"] != 99),
            "round {round}"
        );
        assert_eq!(tracked(&daemon), state_before, "round {round}");
        let seq = daemon.report_status("s1", "c", "running");
        assert_eq!(seq, head + 1, "round {round}");
        for line in log_lines(&daemon) {
            assert!(line["seq"].as_u64().is_some());
        }
    }
}

#[test]
fn segments_roll_and_retention_keeps_state_through_the_snapshot() {
    let (tmux, _) = tmux_with_sessions(&["keep", "bulk"]);
    let mut daemon = TestDaemon::start(
        &tmux,
        &["--segment-mb", "1", "--retain-mb", "2", "--fsync", "never"],
    );
    // State written early, whose events retention will delete: only the snapshot keeps it.
    daemon.report(
        &json!({"agent": "early", "status": "done", "tmuxSession": "keep", "threadName": "first"}),
    );
    daemon
        .post_no_token(
            "/set-status",
            &json!({"session": "keep", "text": "keep me", "tone": "success"}),
        )
        .assert_ok();
    daemon
        .post_no_token("/log", &json!({"session": "keep", "message": "early log"}))
        .assert_ok();

    // ~5 MiB of events.
    let prompt = "z".repeat(15 * 1024);
    for i in 0..350 {
        let status = if i % 2 == 0 {
            "running"
        } else {
            "tool-running"
        };
        daemon.report(&json!({"agent": "bulk", "status": status, "tmuxSession": "bulk", "lastUserPrompt": prompt}));
    }
    let head = daemon.head();
    let segments = daemon.segments();
    let names: Vec<&str> = segments.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.iter().all(|n| n.len() == 26),
        "segments are named by a 20-digit seq: {names:?}"
    );
    assert!(
        !names.contains(&"00000000000000000001.jsonl"),
        "the oldest segment must be deleted: {names:?}"
    );
    let total: u64 = segments.iter().map(|(_, b)| b).sum();
    assert!(
        total <= 3 * 1024 * 1024 + 64 * 1024,
        "retention keeps the log near --retain-mb, got {total} bytes in {segments:?}"
    );
    for (name, bytes) in &segments[..segments.len() - 1] {
        assert!(
            *bytes >= 1024 * 1024,
            "closed segment {name} is {bytes} bytes, below --segment-mb"
        );
        assert!(
            *bytes < 1024 * 1024 + 20 * 1024,
            "closed segment {name} is {bytes} bytes, far above --segment-mb"
        );
    }
    assert!(
        daemon.home().join("snapshot.json").exists(),
        "rolling writes a snapshot"
    );
    let oldest: u64 = names[0].trim_end_matches(".jsonl").parse().unwrap();
    assert!(oldest > 3);

    // A cursor just before the oldest retained event works.
    let page = daemon
        .get(&format!("/api/events?after={}&limit=5", oldest - 1))
        .assert_ok();
    assert_eq!(page["events"][0]["seq"], oldest);
    let events = daemon.events_after(oldest - 1);
    assert_contiguous(&seqs(&events), oldest, head);

    let keep_before = daemon.session("keep");
    daemon.kill9();
    daemon.start_again();
    assert_eq!(daemon.head(), head + 1);
    let keep = daemon.session("keep");
    assert_eq!(
        keep, keep_before,
        "state from deleted segments comes back from the snapshot"
    );
    assert_eq!(keep["agents"][0]["key"], "early");
    assert_eq!(keep["agents"][0]["unseen"], true);
    assert_eq!(keep["metadata"]["status"]["text"], "keep me");
    // A cursor from before the oldest retained event has expired.
    assert_expired(&daemon, 0);
    assert_expired(&daemon, oldest - 2);
    let events = daemon.events_after(oldest - 1);
    assert_contiguous(&seqs(&events), oldest, head + 1);
    assert_eq!(
        daemon.instance("bulk", "bulk").unwrap()["status"],
        "tool-running"
    );
}

#[track_caller]
fn assert_expired(daemon: &TestDaemon, after: u64) {
    daemon
        .get(&format!("/api/events?after={after}"))
        .assert_error(410, "cursor_expired", None);
    match daemon.sse(&format!("?after={after}"), None) {
        Ok(_) => daemon.fail(&format!(
            "a stream from expired cursor {after} was accepted"
        )),
        Err(resp) => {
            resp.assert_error(410, "cursor_expired", None);
        }
    }
}

/// Retention deletes segments while the daemon runs; a cursor into them must expire at once,
/// not only after a restart (docs/api.md: "410 cursor_expired when retention deleted the events
/// after `after`").
#[test]
fn a_cursor_into_deleted_segments_expires_while_the_daemon_runs() {
    let (tmux, _) = tmux_with_sessions(&["bulk"]);
    let daemon = TestDaemon::start(
        &tmux,
        &["--segment-mb", "1", "--retain-mb", "2", "--fsync", "never"],
    );
    let prompt = "z".repeat(15 * 1024);
    for _ in 0..300 {
        daemon.report(&json!({"agent": "bulk", "status": "running", "tmuxSession": "bulk", "lastUserPrompt": prompt}));
    }
    let segments = daemon.segments();
    assert!(
        segments[0].0 != "00000000000000000001.jsonl",
        "retention should have deleted the first segment: {segments:?}"
    );
    let oldest: u64 = segments[0].0.trim_end_matches(".jsonl").parse().unwrap();
    // Still running: the events after 0 are gone from disk.
    assert_expired(&daemon, 0);
    assert_expired(&daemon, oldest - 2);
    let page = daemon
        .get(&format!("/api/events?after={}&limit=1", oldest - 1))
        .assert_ok();
    assert_eq!(page["events"][0]["seq"], oldest);
}

#[test]
fn a_second_daemon_on_the_same_home_is_refused() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let output = run_with_timeout(&mut daemon.serve_command(), Duration::from_secs(10));
    assert!(
        !output.status.success(),
        "a second daemon started on the same home"
    );
    let stderr = strip_ansi(&String::from_utf8_lossy(&output.stderr));
    assert!(stderr.contains("already running"), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The first one is unharmed.
    daemon.report_status("s1", "a", "running");
}

// See: issue 21, item 4 — "Removing `$COHOST_HOME/lock` lets two daemons write one log".
#[test]
fn a_removed_lock_file_does_not_let_a_second_daemon_share_the_home() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "running");
    std::fs::remove_file(daemon.home().join("lock")).unwrap();
    let before = daemon.stored_fingerprint();
    let output = run_with_timeout(&mut daemon.serve_command(), Duration::from_secs(10));
    assert!(
        !output.status.success(),
        "a second daemon started on the same home once its lock file was removed"
    );
    let stderr = strip_ansi(&String::from_utf8_lossy(&output.stderr));
    assert!(
        stderr.contains(&format!(
            "another cohost daemon (pid {}) is already running",
            daemon.pid()
        )),
        "{stderr}"
    );
    // Nothing was written, and the first daemon is unharmed: its log, its hooks.
    assert_eq!(daemon.stored_fingerprint(), before);
    assert!(
        !daemon.home().join("lock").exists(),
        "the refused daemon wrote a lock file"
    );
    let hooks = tmux.run(&["show-hooks", "-g"]);
    assert!(hooks.contains("tmux-refresh"), "{hooks}");
    daemon.report_status("s1", "a", "done");
}

#[test]
fn the_token_file_is_private() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let token_path = daemon.home().join("token");
    let mode = fs::metadata(&token_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "token mode {mode:o}");
    let home_mode = fs::metadata(daemon.home()).unwrap().permissions().mode() & 0o777;
    assert_eq!(home_mode, 0o700, "home mode {home_mode:o}");
    let token = daemon.token();
    assert!(
        token.len() >= 32 && token.chars().all(|c| c.is_ascii_hexdigit()),
        "{token:?}"
    );

    // A token file others can read is tightened on the next start.
    daemon.stop();
    fs::set_permissions(&token_path, fs::Permissions::from_mode(0o644)).unwrap();
    daemon.start_again();
    let mode = fs::metadata(&token_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "token mode after restart {mode:o}");
    assert_eq!(daemon.token(), token);
    assert_eq!(daemon.get("/api/state").status, 200);
}

/// Runs `cohost serve` on the daemon's home expecting it to refuse to start; returns stderr.
fn serve_refused(daemon: &TestDaemon) -> String {
    let started = Instant::now();
    let output = run_with_timeout(&mut daemon.serve_command(), Duration::from_secs(10));
    assert!(!output.status.success(), "the daemon started");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        output.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    strip_ansi(&String::from_utf8_lossy(&output.stderr))
}

// See: issue 15, defect 4 — "a symlinked token is followed, its target chmod-ed to 0600 and
// used; a FIFO blocks start-up".
#[test]
fn r15_a_token_that_is_a_link_or_a_fifo_is_refused_at_once() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    let token = daemon.token();
    daemon.stop();
    let token_path = daemon.home().join("token");

    let target = daemon.scratch().join("elsewhere");
    fs::write(&target, format!("{token}\n")).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
    fs::remove_file(&token_path).unwrap();
    std::os::unix::fs::symlink(&target, &token_path).unwrap();
    let stderr = serve_refused(&daemon);
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert!(stderr.contains("token"), "{stderr}");
    let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the link's target was changed");

    fs::remove_file(&token_path).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&token_path)
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = serve_refused(&daemon);
    assert!(stderr.contains("FIFO"), "{stderr}");

    // A regular token file is used again.
    fs::remove_file(&token_path).unwrap();
    fs::write(&token_path, format!("{token}\n")).unwrap();
    fs::set_permissions(&token_path, fs::Permissions::from_mode(0o600)).unwrap();
    daemon.start_again();
    assert_eq!(daemon.token(), token);
}

// See: issue 21, item 8 — "a log whose only segment is a symlink is reported '0 missing'"
// (the daemon would then have started a fresh log, reusing its seqs), and "segment files are
// 0644".
#[test]
fn a_segment_that_is_a_link_is_refused_and_segments_are_private() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "running");
    let segment = last_segment(&daemon);
    let mode = fs::metadata(&segment).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a new segment is private");
    daemon.stop();

    // The only segment is a link: refused at start and by `log verify`, nothing changed.
    let moved = daemon.scratch().join("moved.jsonl");
    fs::rename(&segment, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &segment).unwrap();
    let before = fs::read(&moved).unwrap();
    let stderr = serve_refused(&daemon);
    let name = segment.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains(&name) && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
    let output = daemon.cli(&["log", "verify"]);
    let text = strip_ansi(&format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ));
    assert!(!output.status.success(), "log verify passed: {text}");
    assert!(text.contains("is a symbolic link"), "{text}");
    assert!(
        fs::symlink_metadata(&segment)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    assert_eq!(fs::read(&moved).unwrap(), before);

    // The file itself, readable by others as an earlier release wrote it: used and tightened.
    fs::remove_file(&segment).unwrap();
    fs::rename(&moved, &segment).unwrap();
    fs::set_permissions(&segment, fs::Permissions::from_mode(0o644)).unwrap();
    daemon.start_again();
    assert_eq!(daemon.instance("s1", "a").unwrap()["status"], "running");
    let mode = fs::metadata(&segment).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the active segment was not tightened");
}

#[test]
fn a_snapshot_that_is_a_link_or_a_fifo_is_refused_at_once() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    daemon.report_status("s1", "a", "running");
    daemon.stop();
    let snapshot = daemon.home().join("snapshot.json");
    let moved = daemon.scratch().join("snapshot.json");
    fs::rename(&snapshot, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &snapshot).unwrap();
    let stderr = serve_refused(&daemon);
    assert!(
        stderr.contains("snapshot.json") && stderr.contains("symbolic link"),
        "{stderr}"
    );
    fs::remove_file(&snapshot).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(&snapshot)
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = serve_refused(&daemon);
    assert!(stderr.contains("FIFO"), "{stderr}");
    fs::remove_file(&snapshot).unwrap();
    fs::rename(&moved, &snapshot).unwrap();
    daemon.start_again();
    assert_eq!(daemon.instance("s1", "a").unwrap()["status"], "running");
    assert!(
        !daemon.home().join("snapshot.json.tmp").exists()
            && !daemon.home().join("daemon.json.tmp").exists()
    );
}
