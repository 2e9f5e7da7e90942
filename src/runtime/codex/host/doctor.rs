//! `cohost doctor` for codex: the binary and its version (against the tested releases), the
//! login, and the directories cohost writes and reads.

use std::path::Path;
use std::time::Duration;

use super::CodexHost;

/// `cohost doctor` and `GET /api/doctor`: what cohost needs from codex, checked.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Doctor {
    pub ok: bool,
    pub codex_found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_in: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_mode: Option<String>,
    pub session_store_writable: bool,
    pub codex_sessions_readable: bool,
    /// The codex releases cohost is tested with.
    pub codex_supported: crate::peers::Supported,
    /// Where `codexVersion` lies: `older`, `tested` or `newer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_version_place: Option<crate::peers::Place>,
    pub issues: Vec<String>,
    /// What works but deserves a look (a release outside the tested range).
    pub warnings: Vec<String>,
}

impl CodexHost {
    pub(in crate::runtime::codex) async fn doctor(&self) -> Doctor {
        let mut issues = Vec::new();
        let (codex_found, codex_path, codex_version) = match &self.inner.codex {
            Ok(bin) => {
                let mut bin = bin.clone();
                let scratch = self
                    .inner
                    .config
                    .cohost_home
                    .join("codex")
                    .join("doctor-home");
                let _ = std::fs::create_dir_all(&scratch);
                let version = match bin.detect_version(&scratch).await {
                    Ok(version) => Some(version),
                    Err(error) => {
                        issues.push(format!("`codex --version` failed: {error}"));
                        None
                    }
                };
                (true, Some(bin.path.display().to_string()), version)
            }
            Err(error) => {
                issues.push(error.clone());
                (false, None, None)
            }
        };
        let (mut logged_in, mut auth_mode) = (None, None);
        if let Ok(bin) = &self.inner.codex {
            let mut command = tokio::process::Command::new(&bin.path);
            command.args(["login", "status"]).kill_on_drop(true);
            if let Some(home) = &self.inner.config.user_codex_home {
                command.env("CODEX_HOME", home);
            }
            match tokio::time::timeout(Duration::from_secs(10), command.output()).await {
                Ok(Ok(output)) => {
                    let text = format!(
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    );
                    let lower = text.to_lowercase();
                    let yes = output.status.success()
                        && lower.contains("logged in")
                        && !lower.contains("not logged in");
                    logged_in = Some(yes);
                    if yes {
                        auth_mode = Some(if lower.contains("api key") {
                            "apiKey".to_string()
                        } else if lower.contains("chatgpt") {
                            "chatgpt".to_string()
                        } else {
                            text.trim().lines().next().unwrap_or("").to_string()
                        });
                    } else {
                        issues.push(format!(
                            "codex is not logged in (`codex login status`: {}); a custom model provider in config.toml still works",
                            text.trim().lines().next().unwrap_or("no output")
                        ));
                    }
                }
                Ok(Err(error)) => {
                    issues.push(format!("`codex login status` could not run: {error}"))
                }
                Err(_) => issues.push("`codex login status` timed out".into()),
            }
        }
        let store = self.inner.config.cohost_home.join("codex");
        let session_store_writable =
            std::fs::create_dir_all(&store).is_ok() && probe_writable(&store);
        if !session_store_writable {
            issues.push(format!(
                "the session store {} is not writable",
                store.display()
            ));
        }
        let sessions_dir = self
            .inner
            .config
            .user_codex_home
            .clone()
            .map(|home| home.join("sessions"));
        let codex_sessions_readable = match &sessions_dir {
            Some(dir) if dir.exists() => std::fs::read_dir(dir).is_ok(),
            // No sessions yet is fine: there is nothing to read.
            Some(_) => true,
            None => false,
        };
        if !codex_sessions_readable {
            issues.push(match &sessions_dir {
                Some(dir) => format!("codex sessions in {} are not readable", dir.display()),
                None => "no CODEX_HOME or HOME to find codex sessions in".into(),
            });
        }
        let codex_version_place = codex_version
            .as_deref()
            .and_then(|v| crate::peers::CODEX.place(v));
        let warnings = codex_version
            .as_deref()
            .and_then(|v| crate::peers::CODEX.warning(v))
            .into_iter()
            .collect();
        Doctor {
            ok: issues.is_empty(),
            codex_found,
            codex_path,
            codex_version,
            codex_supported: crate::peers::CODEX,
            codex_version_place,
            warnings,
            logged_in,
            auth_mode,
            session_store_writable,
            codex_sessions_readable,
            issues,
        }
    }
}

fn probe_writable(dir: &Path) -> bool {
    let probe = dir.join(".cohost-write-probe");
    let ok = std::fs::write(&probe, b"ok").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}
