//! Passive watchers: cohost discovers the agents running on the machine from their own files
//! (Claude Code, Codex, OpenCode, Pi, Droid, Amp), follows those files incrementally and feeds
//! the tracker through the core like any other producer (`agent.updated`).
//!
//! The split: [`format`] is the contract — what one agent's files look like and how its records
//! turn into [`format::Observation`]s (pure: no I/O, no clock). The engine (discovery with
//! `notify`, byte offsets and checkpoints, liveness, placement in tmux, evidence for `explain`)
//! is shared by every agent and knows no agent by name. One module per agent implements
//! [`format::Format`].

pub mod format;

// One module per agent's format (issue 12, part 2).
pub mod amp;
pub mod droid;
pub mod opencode;
pub mod pi;
