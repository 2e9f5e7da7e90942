//! cohost's integration suite: one binary that drives the real `cohost` executable against real,
//! private tmux servers. Every test owns its own state directory, tmux socket and port.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
