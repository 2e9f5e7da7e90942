//! Hosted Pi sessions against the real `pi --mode rpc` (the release of this run of the matrix,
//! `COHOST_TEST_PI_BIN`, under `COHOST_TEST_PI_NODE`) and the kit's Messages mock, with a
//! private HOME holding Pi's config (provider `mock`, two models), which the host copies into
//! each session's own agent directory, and a private tmux server with a session `work` in the
//! sessions' working directory.

mod adopt;
mod capabilities;
mod host;
mod mcp;
mod tracker;
mod web;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use cohost::peers::PI;

use crate::support::hosted::{HostedFixture, MOCK_MODELS, write_pi_agent_dir};
use crate::support::hosted_cases::{Peer, is_random_uuid};
use crate::support::{Cohost, json, pinned_version};

pub use crate::support::hosted::{TURN_TIMEOUT, items, of_type};

/// What Pi's sessions look like to the shared scenarios: its `bash` tool takes the command
/// only, its gate offers no `acceptForSession`, and its approval ids are the dialogs' own
/// (random UUIDs).
pub const PEER: Peer = Peer {
    bash: |command, _| json!({ "command": command }),
    decisions: &["accept", "decline", "cancel"],
    // The gate's `confirm` dialog's id: Pi names each `extension_ui_request` with
    // `crypto.randomUUID()` (0.73.1 and 1.6.0 alike).
    approval_id: "the gate dialog's random UUID",
    approval_id_ok: is_random_uuid,
    made_up_approval: "made-up",
};

/// The daemon (told where pi is, with HOME = the private home and this run's node first on
/// PATH), the mock, the session's working directory and the tmux server (session `work`
/// there).
pub struct PiFixture(HostedFixture<Cohost>);

impl Deref for PiFixture {
    type Target = HostedFixture<Cohost>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for PiFixture {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

fn env_path(var: &str) -> PathBuf {
    let value = std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests through ./scripts/test, which installs {} {} and {} {}",
            PI.package,
            PI.oldest,
            PI.newest_package(),
            PI.newest
        )
    });
    assert!(Path::new(&value).is_file(), "{var}={value} does not exist");
    PathBuf::from(value)
}

impl PiFixture {
    pub fn start() -> PiFixture {
        PiFixture::start_with_args(&[])
    }

    /// [`PiFixture::start`] with more `cohost serve` arguments.
    pub fn start_with_args(args: &[&str]) -> PiFixture {
        PiFixture::start_with(args, &[])
    }

    /// [`PiFixture::start`] with more `cohost serve` arguments and environment.
    pub fn start_with(args: &[&str], extra_env: &[(&str, &str)]) -> PiFixture {
        pinned_version(&PI);
        let bin = env_path("COHOST_TEST_PI_BIN");
        let node = env_path("COHOST_TEST_PI_NODE");
        PiFixture(HostedFixture::start("pi", args, extra_env, |home, mock| {
            write_pi_agent_dir(home, mock, &MOCK_MODELS).unwrap();
            // Pi's launcher runs `env node`: this run's node first on PATH (the doctor finds it
            // there too), and pi's own directory after it.
            let path = format!(
                "{}:{}:{}",
                node.parent().unwrap().display(),
                bin.parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            );
            vec![
                ("PATH", path),
                ("COHOST_PI_BIN", bin.to_str().unwrap().to_string()),
                ("COHOST_WATCHERS", "none".to_string()),
            ]
        }))
    }
}
