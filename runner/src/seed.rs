//! The `~/.claude.json` seed that keeps the Claude TUI from stopping at a first-run prompt:
//! `hasCompletedOnboarding`, the API-key approval (the key's last 20 characters) and
//! `projects[<realpath>].hasTrustDialogAccepted` for each trusted dir. It merges into the
//! existing file and writes it atomically (temp file + fsync + rename). It must never drop keys
//! it does not own, never leave a half-written file, and never write when nothing changes.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::journal::now_ms;
use crate::launch::SeedClaude;

/// How many trailing characters of the API key Claude remembers as approved.
const KEY_SUFFIX_CHARS: usize = 20;

/// Applies the seed. Returns the problems met along the way. None of them stop the launch: a
/// TUI that shows a prompt is still more useful than no TUI.
pub fn apply(seed: &SeedClaude) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Err(error) = apply_inner(seed, &mut warnings) {
        warnings.push(format!(
            "cannot seed {}/.claude.json: {error}",
            seed.home.display()
        ));
    }
    warnings
}

fn apply_inner(seed: &SeedClaude, warnings: &mut Vec<String>) -> io::Result<()> {
    fs::create_dir_all(&seed.home)?;
    let link = seed.home.join(".claude.json");
    // Write through a symlinked config rather than replacing the link with a file.
    let path = match fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(&link).unwrap_or(link),
        _ => link,
    };

    let (mut config, mode) = match fs::read(&path) {
        Ok(bytes) => {
            let mode = fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap_or(0o600);
            if bytes.iter().all(u8::is_ascii_whitespace) {
                (Map::new(), mode)
            } else {
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(Value::Object(map)) => (map, mode),
                    _ => {
                        let aside = PathBuf::from(format!(
                            "{}.cohost-corrupt-{}",
                            path.display(),
                            now_ms()
                        ));
                        fs::rename(&path, &aside)?;
                        warnings.push(format!(
                            "{} was not a JSON object; moved it to {}",
                            path.display(),
                            aside.display()
                        ));
                        (Map::new(), mode)
                    }
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (Map::new(), 0o600),
        Err(e) => return Err(e),
    };

    let trust: Vec<String> = seed
        .trust_dirs
        .iter()
        .map(|dir| match fs::canonicalize(dir) {
            Ok(real) => real.display().to_string(),
            Err(e) => {
                warnings.push(format!(
                    "trust dir {} has no realpath ({e}); trusting it as given",
                    dir.display()
                ));
                dir.display().to_string()
            }
        })
        .collect();
    let changed = merge(&mut config, seed.api_key.as_deref(), &trust);
    if changed {
        let mut text = serde_json::to_vec_pretty(&Value::Object(config))?;
        text.push(b'\n');
        write_atomically(&path, &text, mode)?;
    }
    Ok(())
}

/// Sets the seed keys in `config`; true if anything changed.
pub fn merge(config: &mut Map<String, Value>, api_key: Option<&str>, trust: &[String]) -> bool {
    let mut changed = false;
    if config.get("hasCompletedOnboarding") != Some(&Value::Bool(true)) {
        config.insert("hasCompletedOnboarding".into(), Value::Bool(true));
        changed = true;
    }

    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        let chars: Vec<char> = key.chars().collect();
        let suffix: String = chars[chars.len().saturating_sub(KEY_SUFFIX_CHARS)..]
            .iter()
            .collect();
        let responses = object_at(config, "customApiKeyResponses", &mut changed);
        let approved = array_at(responses, "approved", &mut changed);
        if !approved.iter().any(|v| v.as_str() == Some(&suffix)) {
            approved.push(Value::String(suffix.clone()));
            changed = true;
        }
        let rejected = array_at(responses, "rejected", &mut changed);
        let before = rejected.len();
        rejected.retain(|v| v.as_str() != Some(&suffix));
        changed |= rejected.len() != before;
    }

    if !trust.is_empty() {
        let projects = object_at(config, "projects", &mut changed);
        for dir in trust {
            let project = object_at(projects, dir, &mut changed);
            if project.get("hasTrustDialogAccepted") != Some(&Value::Bool(true)) {
                project.insert("hasTrustDialogAccepted".into(), Value::Bool(true));
                changed = true;
            }
        }
    }
    changed
}

/// `map[key]` as an object, replacing a missing or non-object value with `{}`.
fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    changed: &mut bool,
) -> &'a mut Map<String, Value> {
    let slot = map.entry(key).or_insert(Value::Null);
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
        *changed = true;
    }
    match slot {
        Value::Object(inner) => inner,
        _ => unreachable!("just made it an object"),
    }
}

/// `map[key]` as an array, replacing a missing or non-array value with `[]`.
fn array_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    changed: &mut bool,
) -> &'a mut Vec<Value> {
    let slot = map.entry(key).or_insert(Value::Null);
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
        *changed = true;
    }
    match slot {
        Value::Array(inner) => inner,
        _ => unreachable!("just made it an array"),
    }
}

/// Writes `bytes` to a temp file next to `path` with `mode`, syncs it and renames it over
/// `path`, so readers see the old file or the new one, never a mix.
fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".claude.json".into());
    let tmp = path.with_file_name(format!(".{name}.cohost-tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode given to open is filtered by the umask; set the intended one explicitly.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_other_keys_and_is_idempotent() {
        let mut config = json!({
            "theme": "dark",
            "customApiKeyResponses": {"approved": ["x"], "rejected": ["0123456789abcdefghij"]},
            "projects": {"/a": {"allowedTools": ["Bash"]}},
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        let trust = vec!["/a".to_string(), "/b".to_string()];
        assert!(merge(&mut config, Some("sk-0123456789abcdefghij"), &trust));
        assert_eq!(
            Value::Object(config.clone()),
            json!({
                "theme": "dark",
                "hasCompletedOnboarding": true,
                "customApiKeyResponses": {"approved": ["x", "0123456789abcdefghij"], "rejected": []},
                "projects": {
                    "/a": {"allowedTools": ["Bash"], "hasTrustDialogAccepted": true},
                    "/b": {"hasTrustDialogAccepted": true},
                },
            })
        );
        assert!(!merge(&mut config, Some("sk-0123456789abcdefghij"), &trust));
    }

    #[test]
    fn a_short_key_is_approved_whole() {
        let mut config = Map::new();
        assert!(merge(&mut config, Some("short"), &[]));
        assert_eq!(
            config["customApiKeyResponses"]["approved"],
            json!(["short"])
        );
        assert!(config.get("projects").is_none());
    }
}
