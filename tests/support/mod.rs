//! Glue between the integration suite and the test kit (`tests/kit`, crate `cohost-testkit`):
//! everything the kit has, re-exported under the paths the suite uses (`crate::support::…`), bound
//! to this build's `cohost` binary, plus what needs the `cohost` library itself
//! ([`pinned_version`]).
//!
//! The kit cannot name the binary (only this package's integration tests and benches get
//! `env!("CARGO_BIN_EXE_cohost")`), so its daemon-spawning types take a [`Binaries`] parameter;
//! the aliases here ([`TestDaemon`], [`codex_host::CodexFixture`], [`claude_host::ClaudeFixture`])
//! fix it to [`Cohost`].

pub use cohost_testkit::*;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_cohost");

/// This build's executables, for the kit.
pub struct Cohost;

impl Binaries for Cohost {
    const COHOST: &'static str = BIN;
}

/// A `cohost serve` of this build (see [`cohost_testkit::TestDaemon`]).
pub type TestDaemon = cohost_testkit::TestDaemon<Cohost>;

pub mod codex_host {
    //! [`cohost_testkit::codex_host`], with the fixture bound to this build's binary.
    pub use cohost_testkit::codex_host::*;

    pub type CodexFixture = cohost_testkit::codex_host::CodexFixture<super::Cohost>;
}

pub mod claude_host {
    //! [`cohost_testkit::claude_host`]'s fixture, bound to this build's binary.
    pub type ClaudeFixture = cohost_testkit::claude_host::ClaudeFixture<super::Cohost>;
}

/// The release of a peer CLI under test, as `./scripts/test` exports it for each run of the
/// version matrix (`COHOST_TEST_CODEX_VERSION`, `COHOST_TEST_CLAUDE_VERSION`). It must be one of
/// the two ends of the range in `src/peers.rs`. Panics (never skips) when it is unset.
pub fn pinned_version(peer: &cohost::peers::Supported) -> String {
    let var = format!("COHOST_TEST_{}_VERSION", peer.name.to_uppercase());
    let version = std::env::var(&var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests through ./scripts/test, which installs {} {} and {} \
             and exports the version of each run",
            peer.name, peer.oldest, peer.newest
        )
    });
    assert!(
        version == peer.oldest || version == peer.newest,
        "{var}={version} is neither end of the supported range {} in src/peers.rs",
        peer.range()
    );
    version
}
