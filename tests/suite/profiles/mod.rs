//! Agent profiles (`[profiles.NAME]` in the config file): sessions of real codex and real
//! Claude started from a profile against the mock model servers, and every validation error
//! answered once with nothing started.

pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod errors;
pub(crate) mod reload;

use std::path::{Path, PathBuf};

/// A config file of profiles in its own directory (0700, as the daemon's check wants), with the
/// files it names beside it; `COHOST_CONFIG` points the daemon at it.
pub(crate) struct ConfigFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl ConfigFile {
    pub fn new(text: &str) -> ConfigFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        ConfigFile { dir, path }
    }

    pub fn write_beside(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join(name), text).unwrap();
    }

    pub fn env(&self) -> (&'static str, &str) {
        ("COHOST_CONFIG", self.path.to_str().unwrap())
    }
}

/// The kit's stdio MCP server (`tests/fixtures/mcp/echo_server.py`) as a profile's
/// `[profiles.NAME.mcp_servers.echo]` table, writing `ready` once its tools were listed.
pub(crate) fn echo_server_toml(profile: &str, ready: &Path) -> String {
    let python = std::env::var("COHOST_TEST_PYTHON")
        .expect("COHOST_TEST_PYTHON (./scripts/test installs the Python MCP SDK and sets it)");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/echo_server.py");
    format!(
        "[profiles.{profile}.mcp_servers.echo]\ncommand = {python:?}\nargs = [{:?}]\nenv = {{ COHOST_TEST_MCP_READY = {:?} }}\n",
        script.to_str().unwrap(),
        ready.to_str().unwrap()
    )
}
