//! Hosted OpenCode sessions against the real `opencode serve` (the release `./scripts/test`
//! pins, `COHOST_TEST_OPENCODE_BIN`) and the kit's Messages mock, with a private HOME holding
//! OpenCode's config (provider `mock`, two models) and its database, and a private tmux server
//! with a session `work` in the sessions' working directory.

mod adopt;
mod asks;
mod capabilities;
mod codrive;
mod host;
mod mcp;
mod rehome;
mod web;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use cohost::peers::OPENCODE;

use crate::support::hosted::{HostedFixture, MOCK_MODELS, write_opencode_config};
use crate::support::hosted_cases::Peer;
use crate::support::{Cohost, json, pinned_version};

pub use crate::support::hosted::{TURN_TIMEOUT, items, of_type};

/// What OpenCode's sessions look like to the shared scenarios: its `bash` tool wants a
/// description, a permission may be allowed for the session, and its request ids are `per_…`.
pub const PEER: Peer = Peer {
    bash: |command, description| json!({ "command": command, "description": description }),
    decisions: &["accept", "acceptForSession", "decline", "cancel"],
    approval_id: "OpenCode's permission request id, `per_…`",
    approval_id_ok: |id| id.len() > "per_".len() && id.starts_with("per_"),
    made_up_approval: "per_made_up",
};

/// The daemon (told where opencode is, with HOME = the private home), the mock, the
/// session's working directory and the tmux server (session `work` there).
pub struct OpencodeFixture(HostedFixture<Cohost>);

impl Deref for OpencodeFixture {
    type Target = HostedFixture<Cohost>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for OpencodeFixture {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

fn opencode_bin() -> PathBuf {
    pinned_version(&OPENCODE);
    let bin = std::env::var("COHOST_TEST_OPENCODE_BIN").unwrap_or_else(|_| {
        panic!(
            "COHOST_TEST_OPENCODE_BIN is not set: run the tests through ./scripts/test, which installs {} {}",
            OPENCODE.package, OPENCODE.oldest
        )
    });
    assert!(
        Path::new(&bin).is_file(),
        "COHOST_TEST_OPENCODE_BIN={bin} does not exist"
    );
    PathBuf::from(bin)
}

impl OpencodeFixture {
    pub fn start() -> OpencodeFixture {
        OpencodeFixture::start_with_args(&[])
    }

    /// [`OpencodeFixture::start`] with more `cohost serve` arguments.
    pub fn start_with_args(args: &[&str]) -> OpencodeFixture {
        OpencodeFixture::start_with(args, &[])
    }

    /// [`OpencodeFixture::start`] with more `cohost serve` arguments and environment.
    pub fn start_with(args: &[&str], extra_env: &[(&str, &str)]) -> OpencodeFixture {
        let bin = opencode_bin();
        OpencodeFixture(HostedFixture::start(
            "opencode",
            args,
            extra_env,
            |home, mock| {
                let config_dir = write_opencode_config(home, mock, &MOCK_MODELS).unwrap();
                let on = |name| (name, "1".to_string());
                vec![
                    // The kit points the daemon's XDG_CONFIG_HOME at its own config: OpenCode
                    // reads its config from there.
                    (
                        "XDG_CONFIG_HOME",
                        config_dir.parent().unwrap().to_str().unwrap().to_string(),
                    ),
                    ("COHOST_OPENCODE_BIN", bin.to_str().unwrap().to_string()),
                    on("OPENCODE_DISABLE_MODELS_FETCH"),
                    on("OPENCODE_DISABLE_AUTOUPDATE"),
                    on("OPENCODE_DISABLE_LSP_DOWNLOAD"),
                    on("OPENCODE_DISABLE_SHARE"),
                    on("OPENCODE_DISABLE_DEFAULT_PLUGINS"),
                ]
            },
        ))
    }
}
