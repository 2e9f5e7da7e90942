//! Parsing one config file's `profiles` table: every key, type and value a profile may hold,
//! each error naming the profile, the key and the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{KEYS, MAX_INSTRUCTIONS, Profile, ProfileError, Profiles, check_runtime};
use crate::protocol::{McpServer, Runtime};

/// The keys of an `[profiles.NAME.mcp_servers.SERVER]` table.
const SERVER_KEYS: [&str; 5] = ["command", "args", "env", "url", "headers"];

/// How an error of `profile` names `key`.
pub(super) struct Naming<'a> {
    pub(super) file: Option<&'a Path>,
    pub(super) profile: &'a str,
}

impl Naming<'_> {
    pub(super) fn error(&self, key: &str, reason: impl Into<String>) -> ProfileError {
        ProfileError {
            file: self.file.map(Path::to_path_buf),
            profile: self.profile.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

fn type_name(value: &toml::Value) -> &'static str {
    value.type_str()
}

fn string(naming: &Naming, key: &str, value: &toml::Value) -> Result<String, ProfileError> {
    match value {
        toml::Value::String(text) if !text.trim().is_empty() => Ok(text.clone()),
        toml::Value::String(_) => Err(naming.error(key, "must not be empty")),
        other => Err(naming.error(key, format!("must be a string, not {}", type_name(other)))),
    }
}

fn string_map(
    naming: &Naming,
    key: &str,
    value: &toml::Value,
    check_name: impl Fn(&str) -> bool,
    what: &str,
) -> Result<BTreeMap<String, String>, ProfileError> {
    let toml::Value::Table(table) = value else {
        return Err(naming.error(
            key,
            format!("must be a table of strings, not {}", type_name(value)),
        ));
    };
    let mut map = BTreeMap::new();
    for (name, item) in table {
        let entry = format!("{key}.{name}");
        if !check_name(name) {
            return Err(naming.error(&entry, format!("is not a valid {what}")));
        }
        let toml::Value::String(text) = item else {
            return Err(naming.error(&entry, format!("must be a string, not {}", type_name(item))));
        };
        map.insert(name.clone(), text.clone());
    }
    Ok(map)
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
}

/// A profile's or an MCP server's name: letters, digits, `-` and `_` (codex and Claude build
/// tool names from a server's name), 1 to 64 bytes.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn mcp_server(naming: &Naming, key: &str, value: &toml::Value) -> Result<McpServer, ProfileError> {
    let toml::Value::Table(table) = value else {
        return Err(naming.error(
            key,
            format!(
                "must be a table (`command`, `args`, `env` or `url`, `headers`), not {}",
                type_name(value)
            ),
        ));
    };
    let mut server = McpServer {
        command: None,
        args: Vec::new(),
        env: BTreeMap::new(),
        url: None,
        headers: BTreeMap::new(),
    };
    for (name, item) in table {
        let entry = format!("{key}.{name}");
        match name.as_str() {
            "command" => server.command = Some(string(naming, &entry, item)?),
            "args" => server.args = strings(naming, &entry, item)?,
            "env" => server.env = string_map(naming, &entry, item, is_env_name, "variable name")?,
            "url" => {
                let url = string(naming, &entry, item)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(naming.error(
                        &entry,
                        format!("must be an http:// or https:// URL, got `{url}`"),
                    ));
                }
                server.url = Some(url);
            }
            "headers" => {
                server.headers = string_map(naming, &entry, item, is_header_name, "header name")?
            }
            other => {
                return Err(naming.error(
                    &format!("{key}.{other}"),
                    format!(
                        "is not a key of an MCP server (the keys are: {})",
                        SERVER_KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => Err(naming.error(
            key,
            "sets both `command` (a stdio server) and `url` (an HTTP server): choose one",
        )),
        (None, None) => Err(naming.error(
            key,
            "needs `command` (a stdio server) or `url` (an HTTP server)",
        )),
        (Some(_), None) if !server.headers.is_empty() => Err(naming.error(
            &format!("{key}.headers"),
            "applies to an HTTP server (`url`), not a stdio one (`command`)",
        )),
        (None, Some(_)) if !server.args.is_empty() || !server.env.is_empty() => Err(naming.error(
            &format!(
                "{key}.{}",
                if server.args.is_empty() {
                    "env"
                } else {
                    "args"
                }
            ),
            "applies to a stdio server (`command`), not an HTTP one (`url`)",
        )),
        _ => Ok(server),
    }
}

fn strings(naming: &Naming, key: &str, value: &toml::Value) -> Result<Vec<String>, ProfileError> {
    let toml::Value::Array(items) = value else {
        return Err(naming.error(
            key,
            format!("must be a list of strings, not {}", type_name(value)),
        ));
    };
    items
        .iter()
        .map(|item| match item {
            toml::Value::String(text) => Ok(text.clone()),
            other => Err(naming.error(
                key,
                format!("must be a list of strings, not of {}", type_name(other)),
            )),
        })
        .collect()
}

/// Parses one `[profiles.NAME]` table. `read_file` reads `instructions_file` (a path relative
/// to the config file's directory); `daemon_refuses` says why the daemon does not allow a
/// Claude permission mode (`--allow-permission-mode`), if it does not.
fn parse_one(
    naming: &Naming,
    value: &toml::Value,
    read_file: &dyn Fn(&Path) -> Result<String, String>,
    daemon_refuses: &dyn Fn(&str) -> Option<String>,
) -> Result<Profile, ProfileError> {
    let toml::Value::Table(table) = value else {
        return Err(naming.error(
            "",
            format!(
                "must be a table (`[profiles.{}]`), not {}",
                naming.profile,
                type_name(value)
            ),
        ));
    };
    let mut profile = Profile::default();
    if table.contains_key("instructions") && table.contains_key("instructions_file") {
        return Err(naming.error(
            "instructions_file",
            "and `instructions` are both set: choose one",
        ));
    }
    for (key, value) in table {
        let text = || string(naming, key, value);
        match key.as_str() {
            "extends" => profile.extends = Some(text()?),
            "runtime" => {
                let name = text()?;
                profile.runtime = Some(Runtime::parse(&name).ok_or_else(|| {
                    naming.error(
                        key,
                        format!(
                            "must be one of {}, got `{name}`",
                            Runtime::ALL.map(Runtime::as_str).join(", ")
                        ),
                    )
                })?);
            }
            "model" => {
                let model = text()?;
                if model.len() > 256 {
                    return Err(naming.error(key, "must be at most 256 bytes"));
                }
                profile.model = Some(model);
            }
            "effort" => profile.effort = Some(text()?),
            "approval_policy" => profile.approval_policy = Some(text()?),
            "permission_mode" => {
                let mode = text()?;
                if let Some(refusal) = daemon_refuses(&mode) {
                    return Err(naming.error(key, refusal));
                }
                profile.permission_mode = Some(mode);
            }
            "sandbox" => profile.sandbox = Some(text()?),
            "instructions" => {
                let instructions = text()?;
                if instructions.len() > MAX_INSTRUCTIONS {
                    return Err(
                        naming.error(key, format!("must be at most {MAX_INSTRUCTIONS} bytes"))
                    );
                }
                profile.instructions = Some(instructions);
            }
            "instructions_file" => {
                let path = PathBuf::from(text()?);
                let instructions = read_file(&path).map_err(|why| {
                    naming.error(key, format!("cannot be read ({}): {why}", path.display()))
                })?;
                if instructions.trim().is_empty() {
                    return Err(naming.error(key, format!("{} is empty", path.display())));
                }
                if instructions.len() > MAX_INSTRUCTIONS {
                    return Err(naming.error(
                        key,
                        format!("{} is larger than {MAX_INSTRUCTIONS} bytes", path.display()),
                    ));
                }
                profile.instructions = Some(instructions);
            }
            "mcp_servers" => {
                let toml::Value::Table(servers) = value else {
                    return Err(naming.error(
                        key,
                        format!("must be a table of servers, not {}", type_name(value)),
                    ));
                };
                for (name, server) in servers {
                    let entry = format!("mcp_servers.{name}");
                    if !is_name(name) {
                        return Err(naming.error(
                            &entry,
                            "is not a valid server name (1 to 64 letters, digits, `-`, `_`)",
                        ));
                    }
                    profile
                        .mcp_servers
                        .insert(name.clone(), mcp_server(naming, &entry, server)?);
                }
            }
            "skills" => profile.skills = Some(strings(naming, key, value)?),
            "env" => profile.env = string_map(naming, key, value, is_env_name, "variable name")?,
            "cwd" => {
                let cwd = text()?;
                if !(cwd.starts_with('/') || cwd.starts_with('~')) {
                    return Err(naming.error(
                        key,
                        format!("must be an absolute path (or start with `~`), got `{cwd}`"),
                    ));
                }
                profile.cwd = Some(cwd);
            }
            "prompt" => profile.prompt = Some(text()?),
            other => {
                return Err(naming.error(
                    other,
                    format!("is not a profile key (the keys are: {})", KEYS.join(", ")),
                ));
            }
        }
    }
    Ok(profile)
}

/// Parses and validates the config file's `profiles` table: every key and value, every parent
/// named by `extends`, no cycle, and every profile whose chain names a runtime checked against
/// what that runtime honours. The first problem is the error.
pub fn parse(
    profiles: &toml::Value,
    file: &Path,
    read_file: &dyn Fn(&Path) -> Result<String, String>,
    daemon_refuses: &dyn Fn(&str) -> Option<String>,
) -> Result<Profiles, ProfileError> {
    let toml::Value::Table(table) = profiles else {
        return Err(ProfileError {
            file: Some(file.to_path_buf()),
            profile: "profiles".into(),
            key: "profiles".into(),
            reason: format!(
                "must be a table of profiles (`[profiles.NAME]`), not {}",
                type_name(profiles)
            ),
        });
    };
    let mut by_name = BTreeMap::new();
    for (name, value) in table {
        let naming = Naming {
            file: Some(file),
            profile: name,
        };
        if !is_name(name) {
            return Err(naming.error(
                "",
                "is not a valid profile name (1 to 64 letters, digits, `-`, `_`)",
            ));
        }
        by_name.insert(
            name.clone(),
            parse_one(&naming, value, read_file, daemon_refuses)?,
        );
    }
    let profiles = Profiles {
        file: Some(file.to_path_buf()),
        by_name,
    };
    for name in profiles.by_name.keys() {
        let effective = profiles.effective(name)?;
        if let Some(runtime) = &effective.runtime {
            check_runtime(&effective, runtime.value, profiles.file.as_deref())?;
        }
    }
    Ok(profiles)
}

/// Reads `instructions_file` relative to the config file's directory: a regular file of at
/// most [`MAX_INSTRUCTIONS`] bytes of UTF-8.
pub fn read_beside(config: &Path) -> impl Fn(&Path) -> Result<String, String> + '_ {
    move |path: &Path| {
        let full = match config.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        };
        let metadata = std::fs::metadata(&full).map_err(|e| e.to_string())?;
        if !metadata.is_file() {
            return Err("it is not a regular file".into());
        }
        if metadata.len() > MAX_INSTRUCTIONS as u64 {
            return Err(format!("it is larger than {MAX_INSTRUCTIONS} bytes"));
        }
        let bytes = std::fs::read(&full).map_err(|e| e.to_string())?;
        String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
    }
}
