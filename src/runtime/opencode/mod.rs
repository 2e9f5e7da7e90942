//! The OpenCode runtime: each hosted session runs on its own `opencode serve` (loopback, a
//! generated password), which cohost drives over its HTTP API and follows on its `/event`
//! stream.
//!
//! [`process`] spawns and supervises the server, [`client`] speaks HTTP to it, [`sse`] frames
//! the stream, [`wire`] types what it sends (upstream names), [`normalize`] turns its events
//! into cohost's (pure, tested on OpenCode 1.18.33's literal events) and [`host`] is the
//! [`crate::runtime::SessionHost`] the registry names.
//!
//! **Boundary:** nothing outside `opencode/` sees OpenCode's JSON; only `protocol` events
//! leave it.

pub mod adopt;
pub mod client;
pub mod host;
pub mod normalize;
pub mod process;
pub mod sse;
pub mod wire;

/// What a profile may set on opencode: the session's model and approval policy, as a create
/// request does.
pub const PROFILE_SUPPORT: super::ProfileSupport = super::ProfileSupport {
    settings: &["model", "approval_policy"],
    efforts: &[],
    approval_policies: &host::APPROVAL_POLICIES,
    sandboxes: &[],
    permission_modes: &[],
};
