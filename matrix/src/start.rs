//! `/start NAME [prompt]` in the control room: NAME is, in this order, one of cohost's agent
//! profiles (`[profiles.NAME]` of the daemon's config file, `GET /api/profiles`), one of the
//! bridge's own `[bridge.matrix.profiles.NAME]`, or a runtime the daemon hosts
//! (`GET /api/runtimes`); anything else answers the usage with the runtimes and the profiles
//! there are, and starts nothing.

use serde_json::{Value, json};

use crate::bridge::Bridge;
use crate::config::MatrixConfig;

pub const USAGE: &str = "usage: /start RUNTIME|PROFILE [prompt]  (e.g. /start codex Fix the tests)";

/// What `/start` may name: the daemon's runtimes and cohost's profiles (`GET /api/runtimes`
/// and `GET /api/profiles` as answered).
pub struct Choices {
    pub runtimes: Vec<String>,
    /// `GET /api/profiles`'s `profiles`: each `{"name", "values": [{"key", "value", …}]}`.
    pub profiles: Vec<Value>,
}

impl Choices {
    pub fn fetch(bridge: &Bridge) -> anyhow::Result<Choices> {
        let runtimes: Value = bridge.daemon.get("/api/runtimes")?;
        let profiles: Value = bridge.daemon.get("/api/profiles")?;
        Ok(Choices {
            runtimes: runtimes["runtimes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["runtime"].as_str().map(str::to_string))
                .collect(),
            profiles: profiles["profiles"].as_array().cloned().unwrap_or_default(),
        })
    }

    fn profile(&self, name: &str) -> Option<&Value> {
        self.profiles.iter().find(|p| p["name"] == name)
    }
}

/// The `POST /api/sessions` body for `/start target [prompt]`, or the answer that says why
/// nothing is started.
pub fn request(
    config: &MatrixConfig,
    choices: &Choices,
    target: &str,
    prompt: Option<&str>,
    key: &str,
) -> Result<Value, String> {
    let mut body = json!({"idempotencyKey": key});
    if target.is_empty() {
        return Err(usage(config, choices, None));
    }
    let no_cwd = |what: &str| {
        format!("no directory to start {what} in: set `cwd` in [bridge.matrix] (or in the profile)")
    };
    if let Some(profile) = choices.profile(target) {
        // cohost's profile: the daemon applies it; the bridge adds only what it lacks.
        body["profile"] = json!(target);
        let has = |key: &str| {
            profile["values"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["key"] == key)
        };
        if !has("cwd") {
            match &config.cwd {
                Some(cwd) => body["cwd"] = json!(cwd),
                None => return Err(no_cwd(&format!("profile `{target}`"))),
            }
        }
    } else if let Some(profile) = config.profiles.get(target) {
        body["runtime"] = json!(profile.runtime);
        match profile.cwd.as_ref().or(config.cwd.as_ref()) {
            Some(cwd) => body["cwd"] = json!(cwd),
            None => return Err(no_cwd(&format!("profile `{target}`"))),
        }
        for (field, value) in [
            ("model", &profile.model),
            ("approvalPolicy", &profile.approval_policy),
            ("sandbox", &profile.sandbox),
            ("permissionMode", &profile.permission_mode),
        ] {
            if let Some(value) = value {
                body[field] = json!(value);
            }
        }
    } else if choices.runtimes.iter().any(|r| r == target) {
        body["runtime"] = json!(target);
        match &config.cwd {
            Some(cwd) => body["cwd"] = json!(cwd),
            None => return Err(no_cwd(target)),
        }
    } else {
        return Err(usage(config, choices, Some(target)));
    }
    if let Some(prompt) = prompt {
        body["prompt"] = json!(prompt);
    }
    Ok(body)
}

/// The usage, with the runtimes and the profiles `/start` takes.
fn usage(config: &MatrixConfig, choices: &Choices, unknown: Option<&str>) -> String {
    let mut text = USAGE.to_string();
    if let Some(name) = unknown {
        text.push_str(&format!("\n`{name}` is neither a runtime nor a profile."));
    }
    let list = |names: Vec<&str>| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    text.push_str(&format!(
        "\nRuntimes: {}",
        list(choices.runtimes.iter().map(String::as_str).collect())
    ));
    text.push_str(&format!(
        "\nProfiles: {}",
        list(
            choices
                .profiles
                .iter()
                .filter_map(|p| p["name"].as_str())
                .collect()
        )
    ));
    // The bridge's own, less those a cohost profile of the same name hides.
    let own: Vec<&str> = config
        .profiles
        .keys()
        .map(String::as_str)
        .filter(|name| choices.profile(name).is_none())
        .collect();
    if !own.is_empty() {
        text.push_str(&format!("\nThe bridge's own profiles: {}", own.join(", ")));
    }
    text
}

/// Runs `/start`: creates the session and its room; answers what the room is told.
pub fn start(
    bridge: &Bridge,
    target: &str,
    prompt: Option<&str>,
    key: &str,
) -> anyhow::Result<String> {
    let choices = Choices::fetch(bridge)?;
    let body = match request(&bridge.config, &choices, target, prompt, key) {
        Ok(body) => body,
        Err(answer) => return Ok(answer),
    };
    let created: Value = bridge.daemon.post("/api/sessions", &body)?;
    let session = &created["session"];
    let id = session["id"].as_str().unwrap_or("?").to_string();
    let mut about = format!(
        "{} session in {}",
        session["runtime"].as_str().unwrap_or("?"),
        session["cwd"].as_str().unwrap_or("?")
    );
    if body["profile"].is_string() {
        about.push_str(&format!(", profile {target}"));
    }
    let (room, _) = bridge.ensure_room(&id, &about)?;
    Ok(format!(
        "started {id} ({about}); its room is {room} (you are invited)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn bridge_config(cwd: bool) -> MatrixConfig {
        let text = format!(
            r#"[bridge.matrix]
homeserver = "http://127.0.0.1:8008"
user = "@bot:localhost"
password_file = "/nonexistent"
allowed_users = ["@me:localhost"]
control_room = "!abc:localhost"
{}
[bridge.matrix.profiles.careful]
runtime = "codex"
approval_policy = "untrusted"
[bridge.matrix.profiles.shadowed]
runtime = "codex"
"#,
            if cwd { "cwd = \"/work\"" } else { "" }
        );
        MatrixConfig::from_table(&toml::from_str(&text).unwrap(), Path::new("c.toml")).unwrap()
    }

    fn choices() -> Choices {
        Choices {
            runtimes: vec!["codex".into(), "claude".into()],
            profiles: vec![
                json!({"name": "reviewer", "values": [{"key": "runtime", "value": "claude"}]}),
                json!({"name": "elsewhere", "values": [{"key": "runtime", "value": "codex"}, {"key": "cwd", "value": "/srv"}]}),
                json!({"name": "shadowed", "values": [{"key": "runtime", "value": "claude"}]}),
            ],
        }
    }

    #[test]
    fn cohost_profiles_win_then_the_bridges_own_then_runtimes() {
        let (config, choices) = (bridge_config(true), choices());
        let body = |target: &str, prompt| request(&config, &choices, target, prompt, "k");
        assert_eq!(
            body("reviewer", Some("Look")).unwrap(),
            json!({"idempotencyKey": "k", "profile": "reviewer", "cwd": "/work", "prompt": "Look"})
        );
        assert_eq!(
            body("elsewhere", None).unwrap(),
            json!({"idempotencyKey": "k", "profile": "elsewhere"}),
            "the profile's own cwd is not overridden"
        );
        assert_eq!(
            body("shadowed", None).unwrap(),
            json!({"idempotencyKey": "k", "profile": "shadowed", "cwd": "/work"}),
            "cohost's profile wins over the bridge's of the same name"
        );
        assert_eq!(
            body("careful", None).unwrap(),
            json!({"idempotencyKey": "k", "runtime": "codex", "cwd": "/work", "approvalPolicy": "untrusted"})
        );
        assert_eq!(
            body("claude", None).unwrap(),
            json!({"idempotencyKey": "k", "runtime": "claude", "cwd": "/work"})
        );
    }

    #[test]
    fn an_unknown_name_answers_the_usage_with_the_runtimes_and_profiles() {
        let (config, choices) = (bridge_config(true), choices());
        let answer = request(&config, &choices, "nope", None, "k").unwrap_err();
        assert_eq!(
            answer,
            format!(
                "{USAGE}\n`nope` is neither a runtime nor a profile.\nRuntimes: codex, claude\n\
                 Profiles: reviewer, elsewhere, shadowed\nThe bridge's own profiles: careful"
            )
        );
        let empty = request(&config, &choices, "", None, "k").unwrap_err();
        assert!(
            empty.starts_with(USAGE) && !empty.contains("neither"),
            "{empty}"
        );
        let no_cwd = request(&bridge_config(false), &choices, "codex", None, "k").unwrap_err();
        assert!(no_cwd.contains("set `cwd` in [bridge.matrix]"), "{no_cwd}");
        // A cohost profile with its own cwd needs none from the bridge.
        assert!(request(&bridge_config(false), &choices, "elsewhere", None, "k").is_ok());
    }
}
