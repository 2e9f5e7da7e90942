//! The Claude Code adapter: the only module that knows Claude's hooks, transcripts and TUI.

pub mod screen;
pub mod tail;
