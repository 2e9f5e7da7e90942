//! Adopting an OpenCode TUI a person started by hand in a tmux pane (issue 25): so far only
//! what its screen shows ([`screen`]), the one channel such a TUI offers. A hand-started
//! `opencode` listens on no port (its server runs inside the process; only `--port N` opens
//! one: docs/peers.md "An OpenCode TUI started by hand"), so a prompt can only be pasted into
//! its input box and a turn interrupted by its own key, Escape twice.
//!
//! Nothing here types into a pane or reads OpenCode's database; the session that drives an
//! adopted OpenCode is still to be built on this reader, the common checks
//! (`runtime::common::adopted`) and the OpenCode watcher's database reader.

pub mod screen;
