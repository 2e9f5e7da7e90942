//! The Claude Code adapter: the only module that knows Claude's hooks, transcripts and TUI.

pub mod doctor;
mod fence;
pub mod host;
pub mod normalize;
pub mod policy;
pub mod screen;

pub use policy::PermissionPolicy;
