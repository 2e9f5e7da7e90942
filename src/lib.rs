//! cohost: a local daemon that hosts coding agents and follows every turn as one durable,
//! resumable event stream.
//!
//! Module map (see `docs/ARCHITECTURE.md`):
//! - [`protocol`] — our wire contract: events, API bodies. Imports nothing else from the crate.
//! - [`core`] — the single writer: seq assignment, the event log, the tracker, fan-out.
//! - [`tmux`] — the only module that speaks tmux.
//! - [`runtime`] — the hosted runtimes behind one seam: `runtime::codex` (codex's `app-server`
//!   JSON-RPC and its children), `runtime::claude` (the Claude Code TUI, its hooks and
//!   transcript), `runtime::common` (what pane-hosted runtimes share).
//! - [`tail`] — a resumable JSONL tailer (inotify, byte-offset checkpoints).
//! - [`tasks`] — the task queue and control leases: delivery, cancel, takeover/release.
//! - [`http`] — the HTTP surface (REST, long-poll, SSE) and its guard.
//! - [`mcp`] — the MCP server (rmcp): tools over `/mcp` and `cohost mcp` (stdio).
//! - [`peers`] — the supported range of each peer CLI (codex, claude), written once.
//! - [`daemon`] — wiring and shutdown order for `cohost serve`.
//! - [`private_file`] — the daemon's own files: no-follow, regular, owned, replaced atomically.
//! - [`cli`], [`config`], [`client`] — the command line, its validated config, and its HTTP client.

pub mod cli;
pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod http;
pub mod mcp;
pub mod peers;
pub mod private_file;
pub mod protocol;
pub mod redact;
pub mod runtime;
pub mod service;
pub mod tail;
pub mod tasks;
pub mod tmux;

#[cfg(test)]
mod tidy {
    /// Every source file starts with a `//!` paragraph saying what it owns.
    #[test]
    fn every_module_has_a_doc_paragraph() {
        fn visit(dir: &std::path::Path, missing: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    visit(&path, missing);
                } else if path.extension().is_some_and(|ext| ext == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if !text.starts_with("//!") {
                        missing.push(path.display().to_string());
                    }
                }
            }
        }
        let mut missing = Vec::new();
        visit(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut missing,
        );
        assert!(
            missing.is_empty(),
            "files without a //! header: {missing:?}"
        );
    }
}
