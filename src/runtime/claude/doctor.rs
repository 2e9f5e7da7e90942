//! `cohost doctor` for Claude Code: is `claude` there, which release, inside the tested range
//! (`crate::peers::CLAUDE`; outside is a warning, never a refusal), can cohost install its hooks
//! (the `cohost-hook` and `cohost-runner` helpers, a writable session store), and which
//! permission mode sessions start in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::PermissionPolicy;
use super::host::find_claude;
use crate::peers::{self, Place};
use crate::runtime::common::sibling_binary;

/// How long `claude --version` may take (the npm launcher starts node first).
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaudeDoctor {
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The releases cohost is tested with.
    pub supported: peers::Supported,
    /// Where `version` lies: `older`, `tested` or `newer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_place: Option<Place>,
    /// `cohost-hook` and `cohost-runner` were found and the session store is writable.
    pub hooks_installable: bool,
    /// The mode a session starts in when its request names none.
    pub permission_mode: &'static str,
    /// Every mode this daemon lets sessions use.
    pub allowed_permission_modes: Vec<&'static str>,
    /// What stops claude sessions from working.
    pub issues: Vec<String>,
    /// What works but deserves a look (a release outside the tested range).
    pub warnings: Vec<String>,
}

/// Checks claude as the daemon would run it; `store` is `$COHOST_HOME/claude`.
pub async fn doctor(store: &Path, policy: &PermissionPolicy) -> ClaudeDoctor {
    let mut issues = Vec::new();
    let mut warnings = Vec::new();
    let (found, path, version) = match find_claude() {
        Ok(path) => {
            let version = match version_of(&path, &store.join("doctor-home")).await {
                Ok(version) => Some(version),
                Err(error) => {
                    issues.push(format!("`claude --version` failed: {error}"));
                    None
                }
            };
            (true, Some(path.display().to_string()), version)
        }
        Err(error) => {
            issues.push(format!("{error}; claude sessions are unavailable"));
            (false, None, None)
        }
    };
    let version_place = version.as_deref().and_then(|v| peers::CLAUDE.place(v));
    if let Some(warning) = version.as_deref().and_then(|v| peers::CLAUDE.warning(v)) {
        warnings.push(warning);
    }
    let mut hooks_installable = true;
    for (name, env) in [
        ("cohost-hook", "COHOST_HOOK_BIN"),
        ("cohost-runner", "COHOST_RUNNER_BIN"),
    ] {
        if let Err(error) = sibling_binary(name, env) {
            hooks_installable = false;
            issues.push(error);
        }
    }
    if !(std::fs::create_dir_all(store).is_ok() && writable(store)) {
        hooks_installable = false;
        issues.push(format!(
            "the claude session store {} is not writable",
            store.display()
        ));
    }
    ClaudeDoctor {
        found,
        path,
        version,
        supported: peers::CLAUDE,
        version_place,
        hooks_installable,
        permission_mode: PermissionPolicy::DEFAULT,
        allowed_permission_modes: policy.allowed().to_vec(),
        issues,
        warnings,
    }
}

/// `claude --version`, run with a scratch `HOME` (the CLI may write its config there) and no
/// auto-update.
async fn version_of(claude: &Path, scratch: &Path) -> Result<String, String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let mut command = tokio::process::Command::new(claude);
    command
        .arg("--version")
        .env("HOME", scratch)
        .env("CLAUDE_CONFIG_DIR", scratch.join(".claude"))
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("no answer within {VERSION_TIMEOUT:?}"))?
        .map_err(|e| format!("{}: {e}", claude.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    peers::version_in(&stdout).ok_or_else(|| format!("no version in {:?}", stdout.trim()))
}

fn writable(dir: &Path) -> bool {
    let probe: PathBuf = dir.join(".cohost-write-probe");
    let ok = std::fs::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}
