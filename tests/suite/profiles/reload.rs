//! Reloading the profiles (`POST /api/profiles/reload`, `cohost profiles reload`, SIGHUP):
//! the config file's `[profiles.*]` read and validated again; a session started before keeps
//! the values it started with, one started after takes the new ones; a file that does not
//! validate answers one error naming the file, the profile and the key, and the old profiles
//! stay. Real codex against the mock model.

use serde_json::{Value, json};

use super::ConfigFile;
use crate::support::codex_host::CodexFixture;

fn profile(model: &str) -> String {
    format!("[profiles.r]\nruntime = \"codex\"\nmodel = {model:?}\napproval_policy = \"never\"\n")
}

/// The effective `model` of profile `r` as `GET /api/profiles` shows it.
fn listed_model(listed: &Value) -> Value {
    listed["profiles"]
        .as_array()
        .and_then(|profiles| profiles.iter().find(|p| p["name"] == "r"))
        .and_then(|p| p["values"].as_array())
        .and_then(|values| values.iter().find(|v| v["key"] == "model"))
        .map(|v| v["value"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_reload_changes_only_later_sessions_and_a_bad_file_changes_nothing() {
    let config = ConfigFile::new(&profile("before-model"));
    let fx = CodexFixture::start_with_env(&[], "", &[config.env()]);
    let start = |what: &str| {
        let created = fx.daemon.post(
            "/api/sessions",
            &json!({ "profile": "r", "cwd": fx.work() }),
        );
        assert_eq!(created.status, 201, "{what}: {}", created.body);
        created.json()["session"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let before = start("before the edit");
    assert_eq!(fx.view(&before)["model"], "before-model");

    // Edited and reloaded: the answer is the new list.
    std::fs::write(&config.path, profile("after-model")).unwrap();
    let reloaded = fx.daemon.post("/api/profiles/reload", &json!({}));
    assert_eq!(reloaded.status, 200, "{}", reloaded.body);
    assert_eq!(listed_model(&reloaded.json()), "after-model");
    let after = start("after the edit");
    assert_eq!(fx.view(&after)["model"], "after-model");
    let kept = fx.view(&before);
    assert_eq!(
        kept["model"], "before-model",
        "a session started before keeps its values: {kept}"
    );

    // A file that does not validate: one error naming file, profile and key; nothing changes.
    std::fs::write(
        &config.path,
        format!("{}effort = \"loud\"\n", profile("bad-model")),
    )
    .unwrap();
    let refused = fx.daemon.post("/api/profiles/reload", &json!({}));
    refused.assert_error(400, "invalid_config", None);
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    let file = config.path.to_str().unwrap();
    assert!(
        message.contains(file)
            && message.contains("profile `r`")
            && message.contains("`effort`")
            && message.contains("the profiles were not changed"),
        "{message}"
    );
    let listed = fx.daemon.get("/api/profiles").assert_ok();
    assert_eq!(listed_model(&listed), "after-model", "{listed}");
    // The same through the CLI: it fails with the daemon's message.
    let cli = fx.daemon.cli(&["profiles", "reload"]);
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(
        !cli.status.success() && stderr.contains("`effort`") && stderr.contains(file),
        "{stderr}"
    );
    // Not TOML at all.
    std::fs::write(&config.path, "[profiles.r\n").unwrap();
    let refused = fx.daemon.post("/api/profiles/reload", &json!({}));
    refused.assert_error(400, "invalid_config", None);
    assert_eq!(
        listed_model(&fx.daemon.get("/api/profiles").assert_ok()),
        "after-model"
    );

    // `cohost profiles reload` once the file is fixed.
    std::fs::write(&config.path, profile("cli-model")).unwrap();
    let said = fx.daemon.cli_ok(&["profiles", "reload"]);
    assert!(
        said.contains("profiles reloaded from") && said.contains('r'),
        "{said}"
    );
    assert_eq!(
        listed_model(&fx.daemon.get("/api/profiles").assert_ok()),
        "cli-model"
    );

    // SIGHUP reads it again too.
    std::fs::write(&config.path, profile("hup-model")).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &fx.daemon.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    fx.daemon.wait_for(
        "the profiles reloaded on SIGHUP",
        std::time::Duration::from_secs(10),
        |daemon| {
            (listed_model(&daemon.get("/api/profiles").assert_ok()) == "hup-model").then_some(())
        },
    );
    let last = start("after SIGHUP");
    assert_eq!(fx.view(&last)["model"], "hup-model");
    assert_eq!(fx.view(&after)["model"], "after-model");
}
