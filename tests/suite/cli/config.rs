//! The config file (`$XDG_CONFIG_HOME/cohost/config.toml`): `serve` reads it under its flags and
//! environment, `cohost config show` names each setting's source, and every bad file is one
//! error naming the key and the file.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::*;

/// `cohost ARGS` with `XDG_CONFIG_HOME=config_home`, no COHOST_* from the caller's shell, plus `env`.
fn cohost(config_home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args);
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    for name in [
        "COHOST_WATCHERS",
        "COHOST_NOTIFY_COMMAND",
        "COHOST_MCP_ROOTS",
    ] {
        command.env_remove(name);
    }
    command
        .env("XDG_CONFIG_HOME", config_home)
        .env("NO_COLOR", "1");
    for (key, value) in env {
        command.env(key, value);
    }
    run_with_timeout(&mut command, Duration::from_secs(15))
}

fn write_config(config_home: &Path, text: &str) -> std::path::PathBuf {
    let path = config_home.join("cohost/config.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

fn stderr(output: &Output) -> String {
    strip_ansi(&String::from_utf8_lossy(&output.stderr))
}

#[test]
fn config_show_names_the_source_of_every_setting_flags_over_env_over_file() {
    let dir = temp_dir("cohost-config-");
    let roots = make_dir(&dir.path().join("projects"));
    let file = write_config(
        dir.path(),
        &format!(
            "listen = \"127.0.0.1:7400\"\nfsync = \"never\"\nsegment-mb = 8\nstale-after = 42\n\
             mcp-allowed-roots = [\"{roots}\"]\nno-watchers = true\n\
             notify-command = \"notify-send cohost\"\n"
        ),
    );
    let output = cohost(
        dir.path(),
        &["--listen", "127.0.0.1:7500", "config", "show", "--json"],
        &[("COHOST_STALE_AFTER", "7"), ("COHOST_PRUNE_AFTER", "99")],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["file"], file.to_str().unwrap());
    assert_eq!(shown["fileFound"], true);
    let setting = |key: &str| {
        let s = &shown["settings"][key];
        (
            s["value"].as_str().unwrap_or("?").to_string(),
            s["source"].as_str().unwrap_or("?").to_string(),
        )
    };
    let from_file = format!("file {}", file.display());
    // A flag beats the file; the environment beats the file; the file beats the defaults.
    assert_eq!(setting("listen"), ("127.0.0.1:7500".into(), "flag".into()));
    assert_eq!(
        setting("stale-after"),
        ("7".into(), "env COHOST_STALE_AFTER".into())
    );
    assert_eq!(
        setting("prune-after"),
        ("99".into(), "env COHOST_PRUNE_AFTER".into())
    );
    assert_eq!(setting("fsync"), ("never".into(), from_file.clone()));
    assert_eq!(setting("segment-mb"), ("8".into(), from_file.clone()));
    assert_eq!(
        setting("mcp-allowed-roots"),
        (format!("[{roots}]"), from_file.clone())
    );
    assert_eq!(setting("no-watchers"), ("true".into(), from_file.clone()));
    assert_eq!(
        setting("notify-command"),
        ("notify-send cohost".into(), from_file.clone())
    );
    assert_eq!(setting("retain-mb"), ("1024".into(), "default".into()));
    assert_eq!(setting("allow-remote"), ("false".into(), "default".into()));
    // Every `serve` option is a key (the ones other issues added included).
    for key in [
        "tmux-socket",
        "max-logs",
        "max-connections",
        "header-timeout",
        "body-timeout",
        "watchers",
        "allow-permission-modes",
    ] {
        assert!(shown["settings"][key].is_object(), "{key} missing: {shown}");
    }

    // The readable form is itself a config file: each line `key = value  # source`.
    let output = cohost(dir.path(), &["config", "show"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("# config file: {}", file.display())),
        "{text}"
    );
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("fsync"), "fsync = \"never\" # file");
    assert_eq!(line("listen"), "listen = \"127.0.0.1:7400\" # file");
    assert_eq!(line("segment-mb"), "segment-mb = 8 # file");
    assert_eq!(line("retain-mb"), "retain-mb = 1024 # default");

    // A variable for a setting the file's key excludes wins too (`watchers` / `no-watchers`).
    let output = cohost(
        dir.path(),
        &["config", "show", "--json"],
        &[("COHOST_WATCHERS", "codex")],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["settings"]["watchers"]["value"], "codex");
    assert_eq!(
        shown["settings"]["watchers"]["source"],
        "env COHOST_WATCHERS"
    );
    assert_eq!(shown["settings"]["no-watchers"]["value"], "false");

    // No file: every setting is a default, and `config path` names where the file would be.
    let empty = temp_dir("cohost-config-");
    let output = cohost(empty.path(), &["config", "show", "--json"], &[]);
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["fileFound"], false);
    assert!(
        shown["settings"]
            .as_object()
            .unwrap()
            .values()
            .all(|s| s["source"] == "default"),
        "{shown}"
    );
    let output = cohost(empty.path(), &["config", "path"], &[]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        empty.path().join("cohost/config.toml").to_str().unwrap()
    );
}

#[test]
fn serve_runs_with_the_config_file_settings() {
    let (tmux, _) = tmux_with_sessions(&["s1"]);
    let mut daemon = TestDaemon::start(&tmux, &[]);
    // The default stale age (600 s) never fires in a test; the file's 1 s does.
    write_config(&daemon.config_dir(), "stale-after = 1\n");
    daemon.restart();
    daemon.report_status("s1", "claude", "running");
    daemon.wait_for(
        "the agent to go stale after the file's 1 s",
        Duration::from_secs(10),
        |d| {
            let instance = d.instance("s1", "claude")?;
            (instance["status"] == "stale").then_some(())
        },
    );
}

#[test]
fn every_bad_config_file_is_one_error_naming_the_key_and_the_file() {
    let dir = temp_dir("cohost-config-");
    let path = dir.path().join("cohost/config.toml");
    let shown = path.display().to_string();
    let cases: &[(&str, &[&str])] = &[
        (
            "segmnt-mb = 8\n",
            &["unknown key `segmnt-mb`", "segment-mb"],
        ),
        (
            "segment-mb = \"big\"\n",
            &["`segment-mb`", "bad value `big`"],
        ),
        (
            "segment-mb = true\n",
            &["`segment-mb`", "must be a string or a number, not boolean"],
        ),
        (
            "no-watchers = \"yes\"\n",
            &["`no-watchers`", "must be true or false, not string"],
        ),
        (
            "fsync = \"sometimes\"\n",
            &["`fsync`", "bad value `sometimes`", "always, never"],
        ),
        (
            "fsync = [\"never\"]\n",
            &["`fsync`", "takes one value, not a list"],
        ),
        (
            "listen = \"somewhere\"\n",
            &["`listen`", "not an IP:PORT address"],
        ),
        ("segment-mb = 0\n", &["`segment-mb`", "must be at least 1"]),
        (
            "allow-permission-modes = [\"yolo\"]\n",
            &["`allow-permission-modes`", "yolo"],
        ),
        ("segment-mb = [\n", &["TOML parse error at line 1"]),
    ];
    for (text, needles) in cases {
        write_config(dir.path(), text);
        // `serve` refuses to start; `config show` reports the same error.
        for args in [&["serve"][..], &["config", "show"]] {
            let output = cohost(
                dir.path(),
                args,
                &[("COHOST_HOME", dir.path().join("home").to_str().unwrap())],
            );
            let error = stderr(&output);
            assert!(
                !output.status.success(),
                "{text:?} {args:?} was accepted: {error}"
            );
            assert!(
                error.contains(&shown),
                "{text:?}: the error does not name the file: {error}"
            );
            for needle in *needles {
                assert!(
                    error.contains(needle),
                    "{text:?}: {needle:?} not in {error}"
                );
            }
            assert_eq!(
                error
                    .trim()
                    .lines()
                    .filter(|l| l.starts_with("cohost:"))
                    .count(),
                1,
                "{error}"
            );
        }
    }
    assert!(
        !dir.path().join("home").exists(),
        "a refused serve created its home"
    );

    // Unreadable: the path is a directory.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let output = cohost(dir.path(), &["config", "show"], &[]);
    let error = stderr(&output);
    assert!(!output.status.success());
    assert!(
        error.contains(&format!(
            "refusing the config file {shown}: it is not a regular file"
        )),
        "{error}"
    );

    // A file named by COHOST_CONFIG must exist.
    let missing = dir.path().join("missing.toml");
    let output = cohost(
        dir.path(),
        &["config", "show"],
        &[("COHOST_CONFIG", missing.to_str().unwrap())],
    );
    let error = stderr(&output);
    assert!(!output.status.success());
    assert!(
        error.contains(&format!(
            "cannot read the config file {}",
            missing.display()
        )),
        "{error}"
    );
}

// See: issue 21, item 2 — "The config file is trusted whatever its owner and mode": a
// `config.toml` (or its directory) writable by another user ran its `notify-command` as the
// daemon's user; a FIFO as config hung start-up; `/dev/zero` read until memory ran out.
#[test]
fn a_config_file_another_user_could_write_is_refused_before_anything_starts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("cohost-config-");
    let home = dir.path().join("home");
    let marker = dir.path().join("notified");
    let path = write_config(
        dir.path(),
        &format!(
            "notify-command = \"touch {}\"\nstale-after = 1\n",
            marker.display()
        ),
    );
    let shown = path.display().to_string();
    let config_dir = path.parent().unwrap().to_path_buf();
    let serve = |env: &[(&str, &str)]| {
        let mut all = vec![("COHOST_HOME", home.to_str().unwrap())];
        all.extend_from_slice(env);
        cohost(
            dir.path(),
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tmux-socket",
                "/nonexistent",
            ],
            &all,
        )
    };
    let refused = |output: Output, expected: &[&str]| {
        let error = stderr(&output);
        assert!(!output.status.success(), "served: {error}");
        for text in expected {
            assert!(error.contains(text), "{text:?} not in: {error}");
        }
        assert!(error.contains("nothing was started"), "{error}");
        assert!(!home.exists(), "the refused daemon created its home");
        assert!(!marker.exists(), "the file's notify-command ran");
    };

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused(
        serve(&[]),
        &[
            &format!(
                "refusing the config file {shown}: it is writable by group or others (mode 0666)"
            ),
            &format!("chmod go-w {shown}"),
        ],
    );
    // `config show` reads the same file the same way.
    let output = cohost(dir.path(), &["config", "show"], &[]);
    assert!(!output.status.success(), "{}", stderr(&output));

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&config_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(
        serve(&[]),
        &[&format!(
            "its directory {} is writable by group or others (mode 0777)",
            config_dir.display()
        )],
    );
    std::fs::set_permissions(&config_dir, std::fs::Permissions::from_mode(0o755)).unwrap();

    // A FIFO is refused at once (not waited on), a device is not read at all.
    let fifo = dir.path().join("fifo.toml");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    refused(
        serve(&[("COHOST_CONFIG", fifo.to_str().unwrap())]),
        &["it is not a regular file"],
    );
    refused(
        serve(&[("COHOST_CONFIG", "/dev/zero")]),
        &["refusing the config file /dev/zero: it is not a regular file"],
    );
    // A file larger than any config is refused, not read into memory.
    let big = dir.path().join("big.toml");
    std::fs::write(&big, "# padding\n".repeat(200_000)).unwrap();
    refused(
        serve(&[("COHOST_CONFIG", big.to_str().unwrap())]),
        &["it is larger than 1048576 bytes"],
    );

    // The same file, safe again, is used.
    let output = cohost(dir.path(), &["config", "show"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("touch"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

// See: issue 21, item 2 — "The same for any file a setting names (notify command, profiles, MCP
// roots)".
/// The program `notify-command` runs and the directories `mcp-allowed-roots` opens to agents are
/// held to the config file's standard: writable by group or others (the file or a directory
/// above it) is refused before anything starts, naming the setting, the path and the fix.
#[test]
fn a_notify_program_or_an_mcp_root_another_user_could_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("cohost-config-");
    let home = dir.path().join("home");
    let marker = dir.path().join("notified");
    let bin = make_dir(&dir.path().join("bin"));
    let script = Path::new(&bin).join("notify.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o777)).unwrap();
    let root = make_dir(&dir.path().join("projects"));
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tmux-socket",
            "/nonexistent",
        ];
        args.extend_from_slice(extra);
        cohost(
            dir.path(),
            &args,
            &[("COHOST_HOME", home.to_str().unwrap())],
        )
    };
    let refused = |output: Output, expected: &[String]| {
        let error = stderr(&output);
        assert!(!output.status.success(), "served: {error}");
        for text in expected {
            assert!(error.contains(text.as_str()), "{text:?} not in: {error}");
        }
        assert!(error.contains("nothing was started"), "{error}");
        assert!(!home.exists(), "the refused daemon created its home");
        assert!(!marker.exists(), "the notify command ran");
    };
    let shown = script.display();
    // By path, and by name on PATH.
    refused(
        serve(&["--notify-command", &format!("{shown} --flag")]),
        &[
            format!(
                "refusing the program of --notify-command {shown}: it is writable by group or others (mode 0777)"
            ),
            format!("chmod go-w {shown}"),
        ],
    );
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let output = {
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tmux-socket",
                "/nonexistent",
                "--notify-command",
                "notify.sh",
            ])
            .env("XDG_CONFIG_HOME", dir.path())
            .env("COHOST_HOME", &home)
            .env("PATH", &path)
            .env("NO_COLOR", "1");
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        run_with_timeout(&mut command, Duration::from_secs(15))
    };
    refused(
        output,
        &[format!("refusing the program of --notify-command {shown}")],
    );
    // Its directory writable by others: the program could be replaced.
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(
        serve(&["--notify-command", &shown.to_string()]),
        &[format!(
            "its directory {bin} is writable by group or others (mode 0777)"
        )],
    );
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();

    // An MCP root others can write to, from the config file: the key and the file are named.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = write_config(dir.path(), &format!("mcp-allowed-roots = [\"{root}\"]\n"));
    refused(
        serve(&[]),
        &[
            format!(
                "refusing the agent directory of `mcp-allowed-roots` in {} {root}: it is writable by group or others (mode 0777)",
                file.display()
            ),
            format!("chmod go-w {root}"),
        ],
    );
    // The safe forms start: `notify-command = "cat …"` (codex_asks) and MCP roots in private
    // temporary directories (suite::mcp) run in the suite as before.
}
