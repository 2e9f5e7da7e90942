//! Every profile validation error answers one clear error: at daemon start (the daemon does
//! not start) and at create over HTTP (nothing is started).

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::ConfigFile;
use crate::support::*;

/// `cohost serve` (and `cohost config show`) with `config`: each exits with one error naming the
/// file, the profile and the key, and `serve` never listens.
fn refused_at_start(text: &str, needles: &[&str]) {
    let config = ConfigFile::new(text);
    config.write_beside("notes.md", "Take notes.");
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["config", "show"],
    ] {
        let mut command = Command::new(BIN);
        command.args(args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command
            .env("COHOST_CONFIG", &config.path)
            .env("COHOST_HOME", home.path().join("home"))
            .env("COHOST_WATCHERS", "none")
            .env("NO_COLOR", "1");
        let output = run_with_timeout(&mut command, Duration::from_secs(15));
        let stderr = strip_ansi(&String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            !output.status.success(),
            "{text:?} {args:?} was accepted: {stderr}"
        );
        assert!(!stdout.contains("listening"), "{text:?}: {stdout}");
        let first = format!("config file {}: profile `", config.path.display());
        assert!(stderr.contains(&first), "{text:?} {args:?}: {stderr}");
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{text:?} {args:?}: {needle:?} in {stderr}"
            );
        }
        assert!(
            stderr.trim_end().lines().count() == 1,
            "one error line: {stderr}"
        );
        if args[0] == "serve" {
            assert!(
                !home.path().join("home").join("log").exists(),
                "nothing was started: {stderr}"
            );
        }
    }
}

#[test]
fn every_bad_profile_stops_the_daemon_with_one_error_naming_profile_key_and_file() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[profiles.r]\nrutime = \"codex\"\n",
            &["profile `r`: `rutime` is not a profile key"],
        ),
        (
            "[profiles.r]\nruntime = \"codex\"\neffort = \"max\"\n",
            &["profile `r`: `effort` must be one of", "got `max`"],
        ),
        (
            "[profiles.r]\nextends = \"base\"\n",
            &["profile `r`: `extends` names `base`, which is not a profile"],
        ),
        (
            "[profiles.a]\nextends = \"b\"\n[profiles.b]\nextends = \"a\"\n",
            &["`extends` makes a cycle: "],
        ),
        (
            "[profiles.r]\nruntime = \"codex\"\npermission_mode = \"plan\"\n",
            &["profile `r`: `permission_mode` cannot be honoured by runtime codex"],
        ),
        (
            "[profiles.r]\nruntime = \"claude\"\nskills = [\"skills/review\"]\n",
            &["profile `r`: `skills` cannot be honoured by runtime claude"],
        ),
        (
            "[profiles.r]\nruntime = \"claude\"\npermission_mode = \"bypassPermissions\"\n",
            &["profile `r`: `permission_mode`", "bypassPermissions"],
        ),
        (
            "[profiles.r]\ninstructions_file = \"missing.md\"\n",
            &["profile `r`: `instructions_file` cannot be read (missing.md)"],
        ),
        (
            "[profiles.r.mcp_servers.x]\nargs = [\"a\"]\n",
            &["profile `r`: `mcp_servers.x` needs `command`"],
        ),
        (
            "[profiles.r]\nruntime = \"pi\"\ninstructions_file = \"notes.md\"\n",
            &["profile `r`: `instructions` cannot be honoured by runtime pi"],
        ),
    ];
    for (text, needles) in cases {
        refused_at_start(text, needles);
    }
}

#[test]
fn a_create_whose_profile_cannot_apply_is_one_error_and_starts_nothing() {
    let work = tempfile::tempdir().unwrap();
    let config = ConfigFile::new(
        "[profiles.anywhere]\ninstructions = \"Be brief.\"\n\
         [profiles.coder]\nruntime = \"codex\"\nsandbox = \"read-only\"\n",
    );
    let daemon = TestDaemon::start_with_env(None, &[], &[config.env()]);
    let file = config.path.display().to_string();
    let cwd = work.path().to_str().unwrap();
    let cases = [
        (
            json!({ "profile": "nope", "cwd": cwd }),
            "profile `nope` is not a profile of the config file (the profiles are: anywhere, coder)",
        ),
        (
            json!({ "profile": "anywhere", "cwd": cwd }),
            "profile `anywhere`: `runtime` is not set",
        ),
        (
            json!({ "profile": "anywhere", "runtime": "pi", "cwd": cwd }),
            "profile `anywhere`: `instructions` cannot be honoured by runtime pi",
        ),
        (
            json!({ "profile": "coder", "runtime": "claude", "cwd": cwd }),
            "profile `coder`: `sandbox` cannot be honoured by runtime claude",
        ),
        (
            json!({ "profile": "coder", "sandbox": "open", "cwd": cwd }),
            "profile `coder`: `sandbox` (from the request) must be one of",
        ),
    ];
    for (body, says) in cases {
        let resp = daemon.post("/api/sessions", &body);
        assert_eq!(resp.status, 400, "{body}: {}", resp.body);
        let error = resp.json();
        assert_eq!(error["error"]["code"], "invalid_field", "{error}");
        assert_eq!(error["error"]["field"], "profile", "{error}");
        let message = error["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{body}: {message}");
        assert!(message.contains(&file), "names the file: {message}");
    }
    // Without a profile, runtime and cwd are required.
    let resp = daemon.post("/api/sessions", &json!({ "cwd": cwd }));
    assert_eq!(resp.status, 400, "{}", resp.body);
    resp.assert_error(400, "missing_field", Some("runtime"));
    let sessions = daemon.get("/api/sessions").assert_ok();
    assert_eq!(sessions["sessions"], json!([]), "nothing was started");
    let created = daemon
        .events_after(0)
        .into_iter()
        .filter(|e| e["type"] == "session.created")
        .count();
    assert_eq!(created, 0);

    // The profiles, with their values and where each came from.
    let listed = daemon.get("/api/profiles").assert_ok();
    assert_eq!(listed["file"], file.as_str(), "{listed}");
    let coder = &listed["profiles"][1];
    assert_eq!(coder["name"], "coder", "{listed}");
    assert_eq!(
        coder["values"][1],
        json!({ "key": "sandbox", "value": "read-only", "from": "profile coder" }),
        "{listed}"
    );

    // The same through the CLI.
    let list = daemon.cli_ok(&["profiles"]);
    assert!(
        list.contains("coder") && list.contains("anywhere"),
        "{list}"
    );
    let shown = daemon.cli_ok(&["profiles", "show", "coder"]);
    assert!(
        shown.contains("sandbox = \"read-only\"  # profile coder"),
        "{shown}"
    );
    let refused = daemon.cli(&["start", "--profile", "coder", "--runtime-is-not-a-flag"]);
    assert!(!refused.status.success());
    let refused = daemon.cli(&["start", "--profile", "anywhere", "pi"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr
                .contains("profile `anywhere`: `instructions` cannot be honoured by runtime pi"),
        "{stderr}"
    );
}
