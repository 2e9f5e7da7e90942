//! `SESSION_DIR/launch.json`, the daemon's description of what to run: argv, cwd, an env
//! overlay and the optional `~/.claude.json` seed. It owns parsing and validation and turns a
//! launch into a `Command`; it must never start anything itself or read stdin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// The largest launch.json read.
const MAX_LAUNCH_FILE: u64 = 16 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// The program (absolute path recommended) and its arguments; must not be empty.
    pub argv: Vec<String>,
    /// The child's working directory; the runner's own when absent.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Overlaid on the runner's environment; a `null` value removes the variable.
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub seed_claude: Option<SeedClaude>,
    /// Optional: the id shown in the "relaunch with" hint.
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeedClaude {
    pub home: PathBuf,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub trust_dirs: Vec<PathBuf>,
}

impl Launch {
    /// Reads and validates `path`.
    pub fn read(path: &Path) -> Result<Launch, String> {
        use std::io::Read;
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut bytes = Vec::new();
        file.take(MAX_LAUNCH_FILE)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let launch: Launch = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a valid launch: {e}", path.display()))?;
        if launch.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(format!("{}: argv is empty", path.display()));
        }
        Ok(launch)
    }

    /// The command to spawn: argv, cwd, the runner's env overlaid with `env`. stdio is inherited
    /// (the pane's terminal).
    pub fn command(&self) -> Command {
        let mut argv = self.argv.iter();
        let mut cmd = Command::new(argv.next().map_or("", String::as_str));
        cmd.args(argv);
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        for (key, value) in &self.env {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        cmd
    }

    /// The session id for the pane hint: `sessionId`, else `env.COHOST_SESSION_ID`.
    pub fn hint_id(&self) -> Option<&str> {
        self.session_id
            .as_deref()
            .or_else(|| self.env.get("COHOST_SESSION_ID").and_then(|v| v.as_deref()))
    }

    /// The program's file name, for the pane hint.
    pub fn program_name(&self) -> &str {
        self.argv
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .unwrap_or("agent")
    }
}
