//! cohost: a local daemon that hosts coding agents and follows every turn as one durable,
//! resumable event stream.
//!
//! Module map (see `docs/ARCHITECTURE.md`):
//! - [`protocol`] — our wire contract: events, API bodies, the pane programs' files; the
//!   `cohost-protocol` crate (`protocol/`), which depends on nothing of this one.
//! - [`core`] — the single writer: seq assignment, the event log, the tracker, fan-out.
//! - [`tmux`] — the only module that speaks tmux.
//! - [`formats`] — the peers' own files and wire as pure serde types (below `runtime` and `watch`).
//! - [`runtime`] — the hosted runtimes behind one seam: `runtime::codex` (codex's `app-server`
//!   JSON-RPC and its children), `runtime::claude` (the Claude Code TUI, its hooks and
//!   transcript), `runtime::common` (what pane-hosted runtimes share).
//! - [`tail`] — a resumable JSONL tailer (inotify, byte-offset checkpoints).
//! - [`tasks`] — the task queue and control leases: delivery, cancel, takeover/release.
//! - [`http`] — the HTTP surface (REST, long-poll, SSE) and its guard.
//! - [`mcp`] — the MCP server (rmcp): tools over `/mcp` and `cohost mcp` (stdio).
//! - [`peers`] — the supported range of each peer CLI (codex, claude), written once.
//! - [`process`] — what `/proc` says of a process (alive, name, parents).
//! - [`failures`] — the tasks that panicked while the daemon went on, for health and doctor.
//! - [`daemon`] — wiring and shutdown order for `cohost serve`.
//! - [`notifier`] — `--notify-command`: a command run per attention notification.

//! - [`cli`], [`config`], [`client`] — the command line, its validated config, and its HTTP client.
//! - [`commands`] — the everyday commands: config file, completions, man page, service, tmux.

pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod core;
pub mod daemon;
pub mod failures;
pub mod federation;
pub mod formats;
pub mod http;
pub mod local_socket;
pub mod mcp;
pub mod notifier;
pub mod peers;
pub mod process;
pub use cohost_protocol as protocol;
pub mod redact;
pub mod runtime;
pub mod service;
pub mod tail;
pub mod tasks;
pub mod tmux;
pub mod watch;

#[cfg(test)]
mod tidy;
