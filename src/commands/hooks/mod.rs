//! `cohost hooks install|uninstall|status`: the opt-in machine-wide Claude hook. `install` adds
//! `cohost-hook --home <this home> <Event>` for the events in [`EVENTS`] to the person's own
//! Claude settings (`$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`: the
//! file Claude reads its user settings from), so every Claude on the machine reports its status
//! to this daemon; the hook answers at once and changes nothing for a Claude no cohost session
//! drives, or when no daemon runs (`hooks/README.md`).
//!
//! The file is edited as text ([`settings`]): the person's entries stay first, in their order,
//! byte for byte. Before the first change the file is copied to `settings.json.cohost-backup`
//! beside it, and `settings.json.cohost-install.json` records what cohost wrote (its SHA-256),
//! so `uninstall` puts the backup back byte for byte when the file is still exactly that —
//! and otherwise takes out only cohost's entries, and says so. A file that is not JSON is
//! refused and left as it is.

mod json_text;
mod settings;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Digest;

use crate::cli::integration::HooksCommand;
use settings::{Edited, Wanted};

/// The events the machine-wide hook is registered for, with their matchers: the status of a
/// turn (prompt, tools, approvals, its end) and the session's start and end.
pub const EVENTS: [(&str, &str); 10] = [
    ("SessionStart", ""),
    ("SessionEnd", ""),
    ("UserPromptSubmit", ""),
    ("PreToolUse", "*"),
    ("PostToolUse", "*"),
    ("PostToolUseFailure", "*"),
    ("PermissionRequest", "*"),
    ("Notification", ""),
    ("Stop", ""),
    ("StopFailure", ""),
];

/// Claude's own bound on a status event's hook (the hook itself gives up on the daemon after
/// about 2 s).
const STATUS_TIMEOUT_SECS: u64 = 10;
/// Claude's bound on the `PermissionRequest` hook: a relayed request waits for a person (the
/// daemon's own wait is 300 s).
const PERMISSION_TIMEOUT_SECS: u64 = 600;
/// The largest settings file read.
const MAX_SETTINGS_BYTES: u64 = 16 * 1024 * 1024;

/// The hooks cohost wants for `hook` (the absolute `cohost-hook`) reporting to `home`.
fn wanted(hook: &Path, home: &Path) -> Vec<Wanted> {
    let hook = hook.display().to_string();
    let home = home.display().to_string();
    EVENTS
        .iter()
        .map(|&(event, matcher)| Wanted {
            event,
            matcher,
            hook: json!({
                "type": "command",
                "command": settings::command_line(&hook, &home, event),
                "timeout": if event == "PermissionRequest" { PERMISSION_TIMEOUT_SECS } else { STATUS_TIMEOUT_SECS },
            }),
        })
        .collect()
}

/// The settings file and what cohost keeps beside it.
struct Files {
    /// As Claude names it.
    settings: PathBuf,
    backup: PathBuf,
    record: PathBuf,
}

impl Files {
    /// `$CLAUDE_CONFIG_DIR/settings.json` (an empty variable counts as unset), else
    /// `~/.claude/settings.json`.
    fn locate() -> anyhow::Result<Files> {
        let dir = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => std::path::absolute(PathBuf::from(dir))?,
            None => {
                let home = std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| {
                        anyhow!("cannot find Claude's settings: set HOME or CLAUDE_CONFIG_DIR")
                    })?;
                PathBuf::from(home).join(".claude")
            }
        };
        Ok(Files {
            settings: dir.join("settings.json"),
            backup: dir.join("settings.json.cohost-backup"),
            record: dir.join("settings.json.cohost-install.json"),
        })
    }

    /// The settings' bytes, `None` when there is no such file.
    fn read(&self) -> anyhow::Result<Option<Vec<u8>>> {
        read_file(&self.settings)
    }

    fn load_record(&self) -> anyhow::Result<Option<Record>> {
        let Some(bytes) = read_file(&self.record)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("cannot read {}", self.record.display()))
    }

    fn save_record(&self, record: &Record) -> anyhow::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(record)?;
        bytes.push(b'\n');
        crate::core::private_file::write_atomic(&self.record, &bytes, 0o600)
            .with_context(|| format!("cannot write {}", self.record.display()))
    }

    fn remove_record(&self) -> anyhow::Result<()> {
        remove_if_there(&self.record)
    }

    /// Replaces the settings with `bytes`, through a symbolic link if the file is one, keeping
    /// its mode (a new file is 0600: settings may hold keys).
    fn write(&self, bytes: &[u8]) -> anyhow::Result<()> {
        let real = match std::fs::canonicalize(&self.settings) {
            Ok(real) => real,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => self.settings.clone(),
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("cannot find {}", self.settings.display()));
            }
        };
        let mode = std::fs::metadata(&real)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600);
        crate::core::private_file::write_atomic(&real, bytes, mode)
            .with_context(|| format!("cannot write {}", real.display()))?;
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of {}", real.display()))
    }
}

fn read_file(path: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    use std::io::Read;
    match std::fs::File::open(path) {
        Ok(file) => {
            let mut bytes = Vec::new();
            file.take(MAX_SETTINGS_BYTES + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if bytes.len() as u64 > MAX_SETTINGS_BYTES {
                bail!(
                    "{} is larger than {MAX_SETTINGS_BYTES} bytes",
                    path.display()
                );
            }
            Ok(Some(bytes))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn remove_if_there(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("cannot remove {}", path.display())),
    }
}

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `settings.json.cohost-install.json`: what the first install found and what cohost last
/// wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    /// The settings file existed before the first install (its bytes are the backup).
    existed: bool,
    /// The SHA-256 of the backup: it is put back only while it still has it.
    #[serde(default)]
    backup_sha256: Option<String>,
    /// The SHA-256 of the settings as cohost last wrote them, while nothing else has changed
    /// them since the backup: `uninstall` restores the backup only when the file still has it.
    /// `None` once cohost wrote over a file someone else had changed.
    sha256: Option<String>,
    /// The hook and home last installed.
    hook: String,
    home: String,
}

/// The text of the settings: UTF-8, or refused like any file that is not JSON.
fn text_of<'a>(bytes: Option<&'a [u8]>, path: &Path) -> anyhow::Result<&'a str> {
    std::str::from_utf8(bytes.unwrap_or_default()).map_err(|_| {
        anyhow!(
            "{}: it is not valid JSON (not UTF-8); fix or move it first: cohost changes nothing in it",
            path.display()
        )
    })
}

pub fn run(
    home: Option<PathBuf>,
    command: HooksCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let files = Files::locate()?;
    let home = crate::config::resolve_home(home)?;
    match command {
        HooksCommand::Install => install(&files, &home, out),
        HooksCommand::Uninstall => uninstall(&files, out),
        HooksCommand::Status { json } => status(&files, &home, json, out),
    }
}

/// The absolute `cohost-hook` this cohost runs with.
fn hook_binary() -> anyhow::Result<PathBuf> {
    let hook = crate::runtime::common::sibling_binary("cohost-hook", "COHOST_HOOK_BIN")
        .map_err(|e| anyhow!(e))?;
    Ok(std::path::absolute(&hook)?)
}

fn install(files: &Files, home: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    let hook = hook_binary()?;
    let before = files.read()?;
    let text = text_of(before.as_deref(), &files.settings)?;
    let edited = settings::install(text, &wanted(&hook, home))
        .map_err(|e| anyhow!("{}: {e}", files.settings.display()))?;
    let Edited::Changed(after) = edited else {
        writeln!(
            out,
            "cohost's hooks are already in {}: nothing changed",
            files.settings.display()
        )?;
        return Ok(());
    };
    if let Some(dir) = files.settings.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let record = match files.load_record()? {
        None => {
            // The first change: the person's file (if any) is kept as it is.
            if let Some(bytes) = &before {
                crate::core::private_file::write_atomic(&files.backup, bytes, 0o600)
                    .with_context(|| format!("cannot write {}", files.backup.display()))?;
            }
            Record {
                existed: before.is_some(),
                backup_sha256: before.as_deref().map(sha256),
                sha256: Some(sha256(after.as_bytes())),
                hook: hook.display().to_string(),
                home: home.display().to_string(),
            }
        }
        Some(record) => {
            let untouched = record.sha256.as_deref()
                == Some(sha256(before.as_deref().unwrap_or_default()).as_str());
            Record {
                // Changed by someone else since: the backup can no longer stand for it.
                sha256: untouched.then(|| sha256(after.as_bytes())),
                hook: hook.display().to_string(),
                home: home.display().to_string(),
                ..record
            }
        }
    };
    files.save_record(&record)?;
    files.write(after.as_bytes())?;
    writeln!(
        out,
        "added cohost's hook ({}) for {} Claude events to {}",
        hook.display(),
        EVENTS.len(),
        files.settings.display()
    )?;
    if record.existed {
        writeln!(
            out,
            "your settings from before are in {}",
            files.backup.display()
        )?;
    }
    writeln!(
        out,
        "every Claude started from now on reports to the cohost daemon of {}",
        home.display()
    )?;
    Ok(())
}

fn uninstall(files: &Files, out: &mut impl Write) -> anyhow::Result<()> {
    let now = files.read()?;
    let record = files.load_record()?;
    let backup = read_file(&files.backup)?;
    if let Some(record) = &record
        && let Some(current) = &now
        && record.sha256.as_deref() == Some(sha256(current).as_str())
    {
        // Nothing but cohost changed the file: it goes back to what it was, byte for byte.
        let intact =
            |original: &Vec<u8>| record.backup_sha256.as_deref() == Some(sha256(original).as_str());
        match (&backup, record.existed) {
            (Some(original), true) if intact(original) => {
                files.write(original)?;
                writeln!(
                    out,
                    "restored {} byte for byte from {}",
                    files.settings.display(),
                    files.backup.display()
                )?;
                remove_if_there(&files.backup)?;
                files.remove_record()?;
                return Ok(());
            }
            (_, false) => {
                remove_if_there(&files.settings)?;
                writeln!(
                    out,
                    "removed {}: there was none before cohost's install",
                    files.settings.display()
                )?;
                files.remove_record()?;
                return Ok(());
            }
            // The backup is gone or changed: cohost's entries are taken out instead.
            (_, true) => {}
        }
    }
    let text = text_of(now.as_deref(), &files.settings)?;
    let edited =
        settings::uninstall(text).map_err(|e| anyhow!("{}: {e}", files.settings.display()))?;
    files.remove_record()?;
    match edited {
        Edited::Unchanged => writeln!(
            out,
            "cohost's hooks are not in {}: nothing changed",
            files.settings.display()
        )?,
        Edited::Changed(after) => {
            files.write(after.as_bytes())?;
            writeln!(
                out,
                "{} was changed since cohost's install, so only cohost's hook entries were removed; everything else in it is as it was",
                files.settings.display()
            )?;
            if backup.is_some() {
                writeln!(
                    out,
                    "the settings from before the install are still in {}",
                    files.backup.display()
                )?;
            }
        }
    }
    Ok(())
}

/// What `status` finds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    settings: PathBuf,
    /// `installed`, `not installed` or `stale`.
    state: &'static str,
    /// Why it is stale.
    problems: Vec<String>,
    /// This cohost's `cohost-hook` (when it has one) and home: what `install` writes.
    hook: Option<PathBuf>,
    home: PathBuf,
    backup: Option<PathBuf>,
    /// `uninstall` would restore the file byte for byte.
    restorable: bool,
}

/// The state of the installed hooks in `text` against what this cohost installs (`hook`: its
/// `cohost-hook`, when it has one): stale when a hook names a program that is not there,
/// another `cohost-hook` or another home, or when an event is missing or differs.
fn judge(
    text: &str,
    hook: Option<&Path>,
    home: &Path,
) -> anyhow::Result<(&'static str, Vec<String>)> {
    let found = settings::inspect(text).map_err(|e| anyhow!("{e}"))?;
    if found.is_empty() {
        return Ok(("not installed", Vec::new()));
    }
    let mut problems = Vec::new();
    let mut programs: Vec<&str> = found.iter().map(|f| f.command.program.as_str()).collect();
    programs.sort_unstable();
    programs.dedup();
    for program in programs {
        if !Path::new(program).is_file() {
            problems.push(format!("{program} does not exist (moved or removed?)"));
        } else if let Some(hook) = hook.filter(|hook| Path::new(program) != *hook) {
            problems.push(format!(
                "{program} is not this cohost's hook ({})",
                hook.display()
            ));
        }
    }
    let mut homes: Vec<&str> = found.iter().map(|f| f.command.home.as_str()).collect();
    homes.sort_unstable();
    homes.dedup();
    for other in homes.into_iter().filter(|h| Path::new(h) != home) {
        problems.push(format!(
            "it reports to the daemon of {other}, not {}",
            home.display()
        ));
    }
    for &(event, _) in &EVENTS {
        if !found.iter().any(|f| f.event == event) {
            problems.push(format!("no hook for {event}"));
        }
    }
    if let Some(hook) = hook
        && problems.is_empty()
    {
        for want in wanted(hook, home) {
            if found
                .iter()
                .any(|f| f.event == want.event && f.hook != want.hook)
            {
                problems.push(format!("the {} hook differs", want.event));
            }
        }
    }
    Ok(if problems.is_empty() {
        ("installed", problems)
    } else {
        ("stale", problems)
    })
}

fn status(files: &Files, home: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let hook = hook_binary();
    let bytes = files.read()?;
    let text = text_of(bytes.as_deref(), &files.settings)?;
    let (state, mut problems) = judge(text, hook.as_deref().ok(), home)
        .map_err(|e| anyhow!("{}: {e}", files.settings.display()))?;
    let record = files.load_record()?;
    let backup = read_file(&files.backup)?;
    let restorable = match (&record, &bytes) {
        (Some(record), Some(bytes)) => {
            record.sha256.as_deref() == Some(sha256(bytes).as_str())
                && (!record.existed
                    || backup.as_deref().map(sha256).as_deref() == record.backup_sha256.as_deref())
        }
        _ => false,
    };
    if let Err(error) = &hook {
        problems.push(format!("{error:#}"));
    }
    let status = Status {
        settings: files.settings.clone(),
        state,
        problems,
        hook: hook.ok(),
        home: home.to_path_buf(),
        backup: backup.is_some().then(|| files.backup.clone()),
        restorable,
    };
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
        return Ok(());
    }
    writeln!(out, "settings:  {}", status.settings.display())?;
    writeln!(out, "hooks:     {}", status.state)?;
    for problem in &status.problems {
        writeln!(out, "  - {problem}")?;
    }
    if state == "stale" {
        writeln!(out, "`cohost hooks install` brings them up to date")?;
    }
    if let Some(backup) = &status.backup {
        writeln!(out, "backup:    {}", backup.display())?;
    }
    if state != "not installed" {
        writeln!(
            out,
            "uninstall: {}",
            if restorable {
                "restores the file byte for byte"
            } else {
                "removes cohost's entries only (the file changed since the install)"
            }
        )?;
    }
    Ok(())
}
