//! The codex adapter: the only module that knows codex's `app-server` JSON-RPC protocol and how
//! to run it.
//!
//! [`rpc`] speaks the wire (framing, ids, server→client requests) over stdio or WebSocket;
//! [`process`] finds the codex binary and runs `codex app-server` children; [`home`] prepares
//! the private CODEX_HOME each backend runs in; [`adopt`] drives a codex TUI a person started by hand
//! in a tmux pane (its rollout, its composer read by [`tui_screen`]); [`wire`] types the payloads under codex's own
//! schema names. Nothing codex-specific leaves this module except
//! as `protocol` events.

pub mod adopt;
pub mod home;
pub mod host;
pub mod normalize;
pub mod process;
pub mod rpc;
mod session_host;
pub mod tui_screen;
pub mod wire;

/// What a profile may set on codex: through `thread/start` (`model`, `approvalPolicy`,
/// `sandbox`, `developerInstructions`) and its `config` overrides (`model_reasoning_effort`,
/// `mcp_servers.NAME`).
pub const PROFILE_SUPPORT: super::ProfileSupport = super::ProfileSupport {
    settings: &[
        "model",
        "effort",
        "approval_policy",
        "sandbox",
        "instructions",
        "mcp_servers",
    ],
    efforts: &["minimal", "low", "medium", "high", "xhigh"],
    approval_policies: &host::APPROVAL_POLICIES,
    sandboxes: &host::SANDBOXES,
    permission_modes: &[],
};
