//! Adopting an OpenCode TUI a person started by hand in a tmux pane (issue 25): so far what
//! its screen shows ([`screen`]), the one channel such a TUI offers, and its session's turns
//! and items read from OpenCode's database ([`database`], through `normalize::history`).
//!
//! A hand-started `opencode` listens on no port (its server runs inside the process; only
//! `--port N` opens one: docs/peers.md "An OpenCode TUI started by hand"), so a prompt can only
//! be pasted into its input box and a turn interrupted by its own key, Escape twice.
//!
//! Nothing here types into a pane; the session that drives an adopted OpenCode is still to be
//! built on these readers and the common checks (`runtime::common::adopted`).

pub mod database;
pub mod screen;
