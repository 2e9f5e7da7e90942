//! The Pi runtime: each hosted session runs its own `pi --mode rpc` (Pi 0.73.1 to 1.6.0), which
//! cohost drives with RPC commands on its stdin and follows by the events on its stdout.
//!
//! [`process`] spawns and supervises the child and speaks the RPC, [`wire`] types what goes
//! each way (upstream names), [`normalize`] turns Pi's events into cohost's (pure, tested on
//! the literal lines of both releases). [`adopt`] drives a Pi TUI a person started by hand in a
//! tmux pane (its screen read by [`tui_screen`], its session file followed).
//!
//! **Boundary:** nothing outside `pi/` sees Pi's JSON; only `protocol` events leave it.

pub mod adopt;
pub mod host;
pub mod normalize;
pub mod process;
pub mod tui_screen;
pub mod wire;

/// What a profile may set on pi: the session's model and approval policy, as a create request
/// does.
pub const PROFILE_SUPPORT: super::ProfileSupport = super::ProfileSupport {
    settings: &["model", "approval_policy"],
    efforts: &[],
    approval_policies: &host::APPROVAL_POLICIES,
    sandboxes: &[],
    permission_modes: &[],
};
