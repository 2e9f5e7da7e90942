//! cohost: a local daemon that hosts coding agents and follows every turn as one durable,
//! resumable event stream.
//!
//! Module map (see `docs/ARCHITECTURE.md`):
//! - [`protocol`] — our wire contract: events, API bodies. Imports nothing else from the crate.
//! - [`core`] — the single writer: seq assignment, the event log, the tracker, fan-out.
//! - [`tmux`] — the only module that speaks tmux.
//! - [`http`] — the HTTP surface (REST, long-poll, SSE) and its guard.
//! - [`daemon`] — wiring and shutdown order for `cohost serve`.
//! - [`cli`], [`config`], [`client`] — the command line, its validated config, and its HTTP client.

pub mod cli;
pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod http;
pub mod protocol;
pub mod tmux;
