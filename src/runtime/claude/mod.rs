//! The Claude Code adapter: the only module that knows Claude's hooks, transcripts and TUI.

pub mod doctor;
mod fence;
pub mod host;
pub mod normalize;
pub mod policy;
pub mod screen;

pub use policy::PermissionPolicy;

/// What a profile may set on claude: through the TUI's flags (`--model`, `--effort`,
/// `--permission-mode`, `--append-system-prompt-file`, `--mcp-config` with a generated file) and the
/// environment of its process.
pub const PROFILE_SUPPORT: super::ProfileSupport = super::ProfileSupport {
    settings: &[
        "model",
        "effort",
        "permission_mode",
        "instructions",
        "mcp_servers",
        "env",
    ],
    efforts: &["low", "medium", "high", "xhigh", "max"],
    approval_policies: &[],
    sandboxes: &[],
    permission_modes: &[
        "default",
        "acceptEdits",
        "plan",
        "auto",
        "bypassPermissions",
    ],
};
