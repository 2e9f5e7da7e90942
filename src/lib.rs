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
//! - [`notifier`] — `--notify-command`: a command run per attention notification.

//! - [`cli`], [`config`], [`client`] — the command line, its validated config, and its HTTP client.
//! - [`commands`] — the everyday commands: config file, completions, man page, service, tmux.

pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod core;
pub mod daemon;
pub mod http;
pub mod local_socket;
pub mod mcp;
pub mod notifier;
pub mod peers;
pub mod protocol;
pub mod redact;
pub mod runtime;
pub mod service;
pub mod tail;
pub mod tasks;
pub mod tmux;
pub mod watch;

#[cfg(test)]
mod tidy {
    use std::path::{Path, PathBuf};

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    /// Every `.rs` file under `path` (a file or a directory), with its code: comments and the
    /// test module that closes a file (`#[cfg(test)]` to its end) are left out, and files named
    /// `tests.rs` or `*_tests.rs` are skipped.
    fn code_of(path: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![path.to_path_buf()];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            let code: String = text
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .map(|line| format!("{line}\n"))
                .collect();
            let shown = path
                .strip_prefix(src())
                .unwrap_or(&path)
                .display()
                .to_string();
            out.push((shown, code));
        }
        out
    }

    /// The layering rules of docs/ARCHITECTURE.md ("Layers"), checked on the code.
    #[test]
    fn modules_import_only_what_their_layer_allows() {
        let mut broken = Vec::new();
        let mut forbid = |paths: &[&str], words: &[&str], why: &str| {
            for path in paths {
                for (file, code) in code_of(&src().join(path)) {
                    for word in words {
                        if code.contains(word) {
                            broken.push(format!("{file} uses `{word}`: {why}"));
                        }
                    }
                }
            }
        };
        // Surfaces are siblings over the service.
        forbid(
            &["http"],
            &["crate::mcp"],
            "surfaces do not import each other",
        );
        forbid(
            &["mcp"],
            &["crate::http"],
            "surfaces do not import each other",
        );
        forbid(
            &["http", "mcp"],
            &[
                "crate::core",
                "crate::runtime",
                "crate::tasks",
                "crate::tmux",
                "crate::watch",
            ],
            "surfaces reach the rest through the service",
        );
        // Runtimes do not know each other.
        forbid(
            &["runtime/codex"],
            &["runtime::claude"],
            "runtimes do not import each other",
        );
        forbid(
            &["runtime/claude"],
            &["runtime::codex"],
            "runtimes do not import each other",
        );
        forbid(
            &["runtime/common"],
            &["runtime::codex", "runtime::claude"],
            "common code imports no runtime",
        );
        // The watchers sit beside the runtimes: protocol, core and tmux only.
        forbid(
            &["watch"],
            &[
                "crate::runtime",
                "crate::service",
                "crate::http",
                "crate::mcp",
                "crate::tasks",
                "crate::daemon",
                "crate::cli",
                "crate::client",
                "axum",
                "rmcp",
            ],
            "watch imports protocol, core and tmux only",
        );
        // The core imports only the protocol; the protocol imports nothing.
        let others = [
            "crate::runtime",
            "crate::service",
            "crate::http",
            "crate::mcp",
            "crate::tasks",
            "crate::tmux",
            "crate::tail",
            "crate::daemon",
            "crate::config",
            "crate::cli",
            "crate::client",
            "crate::redact",
            "crate::peers",
            "crate::watch",
        ];
        forbid(&["core"], &others, "the core imports only the protocol");
        forbid(
            &["protocol"],
            &others,
            "the protocol imports nothing of the crate",
        );
        forbid(
            &["protocol"],
            &["crate::core"],
            "the protocol imports nothing of the crate",
        );
        // Nothing below the surfaces knows HTTP or MCP.
        forbid(
            &[
                "core",
                "runtime",
                "service",
                "tasks",
                "tmux",
                "tail.rs",
                "protocol",
                "redact.rs",
                "peers.rs",
            ],
            &["axum", "rmcp", "crate::http", "crate::mcp"],
            "nothing below the surfaces imports axum or rmcp",
        );
        // The runtimes are named only by the protocol, the registry and themselves.
        forbid(
            &["core", "service", "http", "mcp", "tasks", "runtime/common"],
            &["Runtime::Codex", "Runtime::Claude"],
            "`match Runtime` appears only where the registry is built (runtime/mod.rs)",
        );
        assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
    }

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
