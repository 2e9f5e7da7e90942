//! What the daemon leaves in `$COHOST_HOME` for its clients: `daemon.json`, which says where the
//! running daemon listens (the CLI, `cohost web` and scripts read it).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The file's name in `$COHOST_HOME`.
pub const DAEMON_FILE: &str = "daemon.json";

/// `$COHOST_HOME/daemon.json`, written while the daemon runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DaemonFile {
    pub pid: u32,
    /// The TCP address it listens on (`127.0.0.1:7391`).
    pub listen: String,
    /// The cohost release running.
    pub version: String,
    /// The tmux socket the daemon uses (`None`: the user's default server).
    #[serde(default)]
    pub tmux_socket: Option<PathBuf>,
}
