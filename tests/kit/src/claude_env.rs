//! An offline, never-blocking home for the real `claude` TUI (see docs/peers.md, "Starting it"):
//! a throwaway `HOME` whose `~/.claude.json` marks onboarding done, approves the mock API key and
//! trusts the work directory, plus the environment that points the CLI at a
//! [`super::mock_messages::MockMessages`] and turns off everything that would reach the network.
//! Also finds the pinned claude binary and the files the TUI writes (transcripts, session status).
//!
//! Root: nothing here needs `--dangerously-skip-permissions`; as root that flag exits 1 unless
//! `IS_SANDBOX=1` is set and the bypass warning was accepted
//! ([`ClaudeEnv::allow_dangerous_skip_permissions`] arranges both).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::temp_dir;

/// The environment variable `./scripts/test` exports with the pinned claude executable.
pub const CLAUDE_BIN_ENV: &str = "COHOST_TEST_CLAUDE_BIN";
/// The API key the CLI sends as `x-api-key` (the mock ignores it).
pub const MOCK_API_KEY: &str = "sk-ant-mock-0000000000000000000000";

/// The pinned `claude` executable, from `COHOST_TEST_CLAUDE_BIN`. Panics (never skips) when it
/// is unset or missing.
pub fn claude_bin() -> PathBuf {
    let Some(path) = std::env::var_os(CLAUDE_BIN_ENV) else {
        panic!(
            "{CLAUDE_BIN_ENV} is not set: these tests drive the real Claude Code TUI. \
             Run them through ./scripts/test, which installs the pinned @anthropic-ai/claude-code \
             and exports {CLAUDE_BIN_ENV} (or export it yourself, e.g. `. /tmp/testenv.sh`)"
        );
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        panic!(
            "{CLAUDE_BIN_ENV}={} does not exist; run ./scripts/test to install the pinned claude",
            path.display()
        );
    }
    path
}

/// The folder name Claude Code uses for a project under `~/.claude/projects/`: every character
/// outside `[a-zA-Z0-9]` becomes `-` (paths over 200 characters get a hash suffix, which this
/// does not reproduce; test paths are short).
pub fn encode_project_dir(path: &Path) -> String {
    path.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A throwaway home for one claude process. Dropping it SIGKILLs any claude still running from
/// this home (see [`ClaudeEnv::kill_leftover_processes`]), then removes the home.
pub struct ClaudeEnv {
    dir: tempfile::TempDir,
    home: PathBuf,
    workdir: PathBuf,
    base_url: String,
    extra: Vec<(String, String)>,
}

impl ClaudeEnv {
    /// Creates the home and seeds `~/.claude.json` for `workdir` (canonicalised, created if
    /// missing), with the CLI talking to `mock_base_url` (`http://127.0.0.1:PORT`, no `/v1`).
    pub fn new(mock_base_url: &str, workdir: &Path) -> ClaudeEnv {
        std::fs::create_dir_all(workdir)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", workdir.display()));
        let workdir = workdir
            .canonicalize()
            .unwrap_or_else(|e| panic!("canonicalize {}: {e}", workdir.display()));
        let dir = temp_dir("cohost-claude-");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap_or_else(|e| panic!("mkdir {}: {e}", home.display()));
        let env = ClaudeEnv {
            dir,
            home,
            workdir,
            base_url: mock_base_url.trim_end_matches('/').to_owned(),
            extra: Vec::new(),
        };
        env.write_claude_json();
        env
    }

    fn write_claude_json(&self) {
        let approved = &MOCK_API_KEY[MOCK_API_KEY.len() - 20..];
        let mut projects = serde_json::Map::new();
        projects.insert(
            self.workdir.to_string_lossy().into_owned(),
            json!({ "hasTrustDialogAccepted": true }),
        );
        let seed = json!({
            "hasCompletedOnboarding": true,
            "customApiKeyResponses": { "approved": [approved], "rejected": [] },
            "projects": projects,
        });
        write_json(&self.claude_json(), &seed);
    }

    /// The full environment for the claude process; nothing else is needed. Start it from a
    /// cleared environment (for tmux: start the server with `env_clear()` and pass these with
    /// `new-session -e K=V`), so the caller's own `CLAUDE_CONFIG_DIR`, `CLAUDECODE`,
    /// `ANTHROPIC_*` or proxy variables cannot leak in.
    pub fn env(&self) -> Vec<(String, String)> {
        let path = std::env::var("PATH")
            .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin".into());
        let shell = if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let mut vars: Vec<(String, String)> = [
            ("HOME", self.home.to_string_lossy().into_owned()),
            ("PATH", path),
            ("SHELL", shell.to_owned()),
            ("TERM", "xterm-256color".to_owned()),
            ("LANG", "C.UTF-8".to_owned()),
            ("ANTHROPIC_BASE_URL", self.base_url.clone()),
            ("ANTHROPIC_API_KEY", MOCK_API_KEY.to_owned()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            (
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
                "1".to_owned(),
            ),
            ("DISABLE_AUTOUPDATER", "1".to_owned()),
            ("DISABLE_TELEMETRY", "1".to_owned()),
            ("DISABLE_ERROR_REPORTING", "1".to_owned()),
            ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
            ("no_proxy", "127.0.0.1,localhost".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (key, value) in &self.extra {
            vars.retain(|(k, _)| k != key);
            vars.push((key.clone(), value.clone()));
        }
        vars
    }

    /// Adds (or replaces) one variable of [`ClaudeEnv::env`].
    pub fn set_var(&mut self, key: &str, value: &str) {
        self.extra.retain(|(k, _)| k != key);
        self.extra.push((key.to_owned(), value.to_owned()));
    }

    /// The throwaway `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The canonical work directory (the trusted project).
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// A scratch directory next to the home that lives as long as this env.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// The pinned claude executable (see [`claude_bin`]).
    pub fn claude_bin(&self) -> PathBuf {
        claude_bin()
    }

    /// `HOME/.claude.json`.
    pub fn claude_json(&self) -> PathBuf {
        self.home.join(".claude.json")
    }

    /// `HOME/.claude/settings.json` (user settings; absent unless a test writes it).
    pub fn user_settings(&self) -> PathBuf {
        self.home.join(".claude").join("settings.json")
    }

    /// Writes a settings file into the scratch directory and returns its path, for
    /// `claude --settings FILE`.
    pub fn write_settings(&self, name: &str, settings: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        write_json(&path, settings);
        path
    }

    /// Makes `--dangerously-skip-permissions` start without a dialog: pre-accepts the bypass
    /// warning in `~/.claude/settings.json` and, as root (where the CLI refuses the flag
    /// otherwise), sets `IS_SANDBOX=1`.
    pub fn allow_dangerous_skip_permissions(&mut self) {
        let path = self.user_settings();
        let mut settings = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or_else(|| json!({}));
        settings["skipDangerousModePermissionPrompt"] = json!(true);
        write_json(&path, &settings);
        let is_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        if is_root {
            self.set_var("IS_SANDBOX", "1");
        }
    }

    /// `HOME/.claude/projects/<encoded workdir>`: where the transcripts go.
    pub fn project_dir(&self) -> PathBuf {
        self.home
            .join(".claude")
            .join("projects")
            .join(encode_project_dir(&self.workdir))
    }

    /// Every `<session-id>.jsonl` transcript of the work directory, sorted.
    pub fn transcripts(&self) -> Vec<PathBuf> {
        list_with_extension(&self.project_dir(), "jsonl")
    }

    /// `HOME/.claude/sessions`: one `<pid>.json` per live TUI.
    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join(".claude").join("sessions")
    }

    /// The parsed `~/.claude/sessions/<pid>.json` files (live status: `idle`, `busy`,
    /// `waiting`, `shell`), sorted by path. Unreadable or half-written files are skipped.
    pub fn session_files(&self) -> Vec<(PathBuf, Value)> {
        list_with_extension(&self.sessions_dir(), "json")
            .into_iter()
            .filter_map(|path| {
                let text = std::fs::read_to_string(&path).ok()?;
                let value = serde_json::from_str(&text).ok()?;
                Some((path, value))
            })
            .collect()
    }

    /// The `status` of the single live session file, if there is exactly one.
    pub fn session_status(&self) -> Option<String> {
        let files = self.session_files();
        match files.as_slice() {
            [(_, value)] => value["status"].as_str().map(str::to_owned),
            _ => None,
        }
    }
}

impl ClaudeEnv {
    /// SIGKILLs every claude process still listed in this home's `~/.claude/sessions/` (the CLI
    /// removes its file on a clean exit) and waits, at most 5 s, until they are gone. Dropping
    /// the env does this, so a TUI that outlives its test cannot write into the removed home.
    pub fn kill_leftover_processes(&self) {
        let pids: Vec<u32> = self
            .session_files()
            .iter()
            .filter_map(|(_, value)| value["pid"].as_u64())
            .filter_map(|pid| u32::try_from(pid).ok())
            .filter(|pid| is_claude(*pid))
            .collect();
        for pid in &pids {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while pids.iter().any(|pid| is_running(*pid)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for ClaudeEnv {
    fn drop(&mut self) {
        self.kill_leftover_processes();
    }
}

/// Whether `pid` is a live (not zombie) process.
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the parenthesised command name, which may hold spaces.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// Whether `pid` is a live process whose command line names claude (a guard against pid reuse).
fn is_claude(pid: u32) -> bool {
    is_running(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("claude"))
}

fn list_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == extension))
        .collect();
    paths.sort();
    paths
}

fn write_json(path: &Path, value: &Value) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
    }
    let text = serde_json::to_string_pretty(value).expect("serialize json");
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
