//! `cohost service install|uninstall|status`: `cohost serve` as a systemd user unit, started at
//! login, restarted on failure, logging to the journal. systemd is driven through `systemctl
//! --user` (found on PATH); where no user manager answers, the commands say so and print what to
//! run instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, anyhow};
use serde_json::json;

use crate::cli::integration::ServiceCommand;
use crate::client::Client;

/// The unit's name.
pub const UNIT: &str = "cohost.service";

/// `$XDG_CONFIG_HOME/systemd/user/cohost.service` (else `~/.config/systemd/user/…`).
fn unit_path() -> anyhow::Result<PathBuf> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => std::path::absolute(PathBuf::from(dir))?,
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    anyhow!("cannot find the unit directory: set XDG_CONFIG_HOME or HOME")
                })?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(config.join("systemd/user").join(UNIT))
}

/// A value for a unit file line, quoted when it must be (systemd's rules: `"` and `\` escaped,
/// `%` doubled).
fn quoted(value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// The unit file for the executable `cohost`, with `env` written as `Environment=` lines.
pub fn unit_file(cohost: &Path, env: &[(String, String)]) -> String {
    let mut environment = String::new();
    for (key, value) in env {
        environment.push_str(&format!(
            "Environment={}\n",
            quoted(&format!("{key}={value}"))
        ));
    }
    format!(
        "# Written by `cohost service install`; `cohost service uninstall` removes it.\n\
         # Settings: ~/.config/cohost/config.toml (see `cohost config show`).\n\
         [Unit]\n\
         Description=cohost: hosts coding agents and streams their events\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={} serve\n\
         {environment}\
         Restart=on-failure\n\
         RestartSec=2\n\
         # The first SIGTERM stops cohost gracefully (it syncs the log and writes a snapshot).\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec=30\n\
         StandardOutput=journal\n\
         StandardError=journal\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        quoted(&cohost.display().to_string())
    )
}

/// Whether a systemd user manager answers `systemctl --user`.
fn systemd_user() -> bool {
    Command::new("systemctl")
        .args(["--user", "show-environment"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn systemctl(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .context("cannot run systemctl")?;
    if !output.status.success() {
        anyhow::bail!(
            "systemctl --user {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// `systemctl --user ARGS`' first line of output, whatever its exit status (`is-enabled`,
/// `is-active` answer through both).
fn systemctl_answer(args: &[&str]) -> String {
    Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

const NO_SYSTEMD: &str = "systemd is not running here (no user manager answers `systemctl --user`)";

pub fn run(
    home: Option<PathBuf>,
    command: ServiceCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let path = unit_path()?;
    match command {
        ServiceCommand::Install { no_start } => {
            let cohost = std::env::current_exe().context("cannot find cohost's own executable")?;
            let mut env = Vec::new();
            if let Some(home) = home.filter(|h| !h.as_os_str().is_empty()) {
                let home = std::path::absolute(&home)?;
                env.push(("COHOST_HOME".to_string(), home.display().to_string()));
            }
            if let Some(config) =
                std::env::var_os(crate::config::file::CONFIG_ENV).filter(|v| !v.is_empty())
            {
                let config = std::path::absolute(PathBuf::from(config))?;
                env.push(("COHOST_CONFIG".to_string(), config.display().to_string()));
            }
            // The agents (codex, claude) are found on PATH: the shell's, not the manager's.
            if let Some(search) = std::env::var_os("PATH") {
                env.push(("PATH".to_string(), search.to_string_lossy().into_owned()));
            }
            let text = unit_file(&cohost, &env);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(out, "wrote {}", path.display())?;
            if !systemd_user() {
                writeln!(out, "{NO_SYSTEMD}: the unit is not enabled.")?;
                writeln!(
                    out,
                    "Start cohost yourself instead, e.g. from your shell's profile:\n  {0} status >/dev/null 2>&1 || nohup {0} serve >>\"${{XDG_STATE_HOME:-$HOME/.local/state}}/cohost-serve.log\" 2>&1 &",
                    cohost.display()
                )?;
                return Ok(());
            }
            systemctl(&["daemon-reload"])?;
            if no_start {
                writeln!(
                    out,
                    "not started: `systemctl --user enable --now {UNIT}` starts it"
                )?;
                return Ok(());
            }
            systemctl(&["enable", "--now", UNIT])?;
            writeln!(
                out,
                "enabled and started {UNIT}: `journalctl --user -u {UNIT}` shows its log"
            )?;
            Ok(())
        }
        ServiceCommand::Uninstall => {
            let systemd = systemd_user();
            if systemd && path.exists() {
                systemctl(&["disable", "--now", UNIT])?;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => writeln!(out, "removed {}", path.display())?,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    writeln!(out, "{} is not installed", path.display())?
                }
                Err(error) => {
                    return Err(anyhow!("cannot remove {}: {error}", path.display()));
                }
            }
            if systemd {
                systemctl(&["daemon-reload"])?;
            } else {
                writeln!(
                    out,
                    "{NO_SYSTEMD}: stop a cohost you started yourself with Ctrl-C or SIGTERM to its process"
                )?;
            }
            Ok(())
        }
        ServiceCommand::Status { json } => {
            let installed = path.is_file();
            let systemd = systemd_user();
            let (enabled, active) = if systemd {
                (
                    systemctl_answer(&["is-enabled", UNIT]),
                    systemctl_answer(&["is-active", UNIT]),
                )
            } else {
                (String::new(), String::new())
            };
            let healthy = Client::new(home)
                .and_then(|client| client.get::<serde_json::Value>("/api/health"))
                .is_ok();
            if json {
                let body = json!({
                    "unit": path,
                    "installed": installed,
                    "systemd": systemd,
                    "enabled": (systemd).then_some(enabled.as_str()),
                    "active": (systemd).then_some(active.as_str()),
                    "daemonHealthy": healthy,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
                return Ok(());
            }
            writeln!(
                out,
                "unit:      {} ({})",
                path.display(),
                if installed {
                    "installed"
                } else {
                    "not installed"
                }
            )?;
            if systemd {
                writeln!(out, "enabled:   {enabled}")?;
                writeln!(out, "active:    {active}")?;
            } else {
                writeln!(out, "systemd:   {NO_SYSTEMD}")?;
            }
            writeln!(
                out,
                "daemon:    {}",
                if healthy {
                    "answering"
                } else {
                    "not answering"
                }
            )?;
            Ok(())
        }
    }
}
