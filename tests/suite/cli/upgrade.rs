//! Upgrades: today's daemon reads every home an earlier cohost wrote (the committed homes in
//! `tests/fixtures/homes/`), and refuses a home written in a newer format without changing it.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/homes")
        .join(name)
}

/// Copies a fixture home to `to` as the daemon keeps its files (private to the user).
fn copy_home(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_home(&entry.path(), &target);
        } else if entry.file_name() != "README.md" {
            std::fs::copy(entry.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

/// Every file and directory under `dir`: its bytes, mode and modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let bytes = if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
            Vec::new()
        } else {
            std::fs::read(&path).unwrap()
        };
        out.insert(
            path.strip_prefix(dir).unwrap().to_path_buf(),
            (bytes, meta.mode(), meta.mtime(), meta.mtime_nsec()),
        );
    }
    out
}

/// The fixture's events as the log holds them, without their checksums.
fn fixture_events(name: &str) -> Vec<Value> {
    let dir = fixture(name).join("log");
    let mut events = Vec::new();
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segments.sort();
    for segment in segments {
        for line in std::fs::read_to_string(segment).unwrap().lines() {
            let mut event: Value = serde_json::from_str(line).unwrap();
            event.as_object_mut().unwrap().remove("crc");
            events.push(event);
        }
    }
    events
}

#[test]
fn homes_written_by_earlier_formats_are_read_by_this_daemon() {
    for name in [
        "unversioned",
        "log1-no-checksums",
        "log2-snapshot1-checkpoint1",
    ] {
        let (tmux, _) = tmux_with_sessions(&["work", "play"]);
        // The fixtures' agents were last updated when the fixture was written: with the
        // default ages they would have gone stale (or been pruned) since.
        let ages = ["--stale-after", "999999999", "--prune-after", "999999999"];
        let mut daemon = TestDaemon::start(&tmux, &ages);
        daemon.stop();
        std::fs::remove_dir_all(daemon.home()).unwrap();
        copy_home(&fixture(name), daemon.home());
        daemon.start_again();

        // Every stored event reads back exactly, and the new daemon's first event follows them.
        let expected = fixture_events(name);
        assert_eq!(expected.len(), 10, "{name}");
        let events = daemon.events_after(0);
        assert_eq!(&events[..10], &expected[..], "{name}");
        assert_eq!(events[10]["seq"], 11, "{name}");
        assert_eq!(events[10]["type"], "daemon.started", "{name}");

        // The state is the one the old daemon left.
        let t1 = daemon.instance("work", "claude-code:t1").unwrap();
        assert_eq!(t1["status"], "waiting", "{name}");
        let t2 = daemon.instance("play", "codex:t2").unwrap();
        assert_eq!(
            (&t2["status"], &t2["unseen"]),
            (&json!("done"), &json!(true)),
            "{name}"
        );
        assert_eq!(daemon.state()["focusedSession"], "work", "{name}");
        assert!(
            !daemon.stderr_text().contains("damaged"),
            "{name}: {}",
            daemon.stderr_tail(20)
        );

        // The home now names the formats it holds.
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(daemon.home().join("format.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["log"], 2, "{name}");
        assert_eq!(manifest["snapshot"], 1, "{name}");
        assert_eq!(manifest["checkpoint"], 1, "{name}");
        assert_eq!(manifest["writtenBy"], env!("CARGO_PKG_VERSION"), "{name}");

        // And it still starts after this daemon wrote to it.
        daemon.restart();
        assert_eq!(
            daemon.instance("work", "claude-code:t1").unwrap()["status"],
            "waiting"
        );
    }
}

#[test]
fn a_home_in_a_newer_format_is_refused_and_left_untouched() {
    let dir = temp_dir("cohost-upgrade-");
    let home = dir.path().join("home");
    copy_home(&fixture("log2-snapshot1-checkpoint1"), &home);
    std::fs::write(
        home.join("format.json"),
        br#"{"log":3,"snapshot":1,"checkpoint":1,"writtenBy":"9.1.0"}"#,
    )
    .unwrap();
    let before = tree(&home);

    let run = |args: &[&str]| {
        let mut command = std::process::Command::new(BIN);
        command.args(args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command
            .env("COHOST_HOME", &home)
            .env("COHOST_WATCHERS", "none")
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("NO_COLOR", "1");
        run_with_timeout(&mut command, Duration::from_secs(15))
    };
    let output = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tmux-socket",
        "/nonexistent",
    ]);
    let error = strip_ansi(&String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "a newer home was served: {error}");
    let expected = format!(
        "was written by cohost 9.1.0 (event log format 3); this cohost {} reads event log formats up to 2",
        env!("CARGO_PKG_VERSION")
    );
    assert!(error.contains(&expected), "{error}");
    assert!(error.contains("nothing was changed"), "{error}");
    assert_eq!(tree(&home), before, "the refused home was changed");

    // The offline log check refuses it too, and changes nothing either.
    let output = run(&["log", "verify"]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(error.contains("cohost 9.1.0"), "{error}");
    assert_eq!(tree(&home), before, "log verify changed the refused home");

    // See: issue 21, item 8 — "the checkpoint-format refusal tells cohost 0.1.0 to 'run cohost
    // 0.1.0 or newer'": a newer format claimed by this very release (a development build, a
    // hand-edited manifest) is refused with advice that does not name the refusing release.
    let ours = env!("CARGO_PKG_VERSION");
    std::fs::write(
        home.join("format.json"),
        format!(r#"{{"log":2,"snapshot":1,"checkpoint":2,"writtenBy":"{ours}"}}"#),
    )
    .unwrap();
    let before = tree(&home);
    let output = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tmux-socket",
        "/nonexistent",
    ]);
    let error = strip_ansi(&String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "a newer home was served: {error}");
    assert!(
        error.contains("run a cohost release that reads checkpoint format 2"),
        "{error}"
    );
    assert!(
        !error.contains(&format!("run cohost {ours} or newer")),
        "{error}"
    );
    assert_eq!(tree(&home), before, "the refused home was changed");
}
