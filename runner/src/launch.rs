//! `SESSION_DIR/launch.json`, the daemon's description of what to run: argv, cwd, an env
//! overlay and the optional `~/.claude.json` seed. It owns parsing and validation and turns a
//! launch into a `Command`; it must never start anything itself or read stdin.

use std::path::Path;
use std::process::Command;

/// The largest launch.json read.
const MAX_LAUNCH_FILE: u64 = 16 * 1024 * 1024;

pub use crate::boundary::{Launch, SeedClaude};

/// Reading, validating and running a [`Launch`] (the type is shared with the daemon).
pub trait LaunchExt: Sized {
    fn read(path: &Path) -> Result<Self, String>;
    fn command(&self) -> Command;
    fn hint_id(&self) -> Option<&str>;
    fn program_name(&self) -> &str;
}

impl LaunchExt for Launch {
    /// Reads and validates `path`.
    fn read(path: &Path) -> Result<Launch, String> {
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
    fn command(&self) -> Command {
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
    fn hint_id(&self) -> Option<&str> {
        self.session_id
            .as_deref()
            .or_else(|| self.env.get("COHOST_SESSION_ID").and_then(|v| v.as_deref()))
    }

    /// The program's file name, for the pane hint.
    fn program_name(&self) -> &str {
        self.argv
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .unwrap_or("agent")
    }
}
