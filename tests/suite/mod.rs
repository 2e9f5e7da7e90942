//! The integration tests, one module per area of cohost.

mod claude_host;
mod claude_host_more;
mod claude_smoke;
mod cli;
mod codex_codrive;
mod codex_host;
mod codex_host_approvals;
mod codex_host_capabilities;
mod codex_host_recovery;
mod codex_host_surface;
mod codex_smoke;
mod durability;
mod events_sse;
mod http_limits;
mod log_damage;
mod mcp;
mod metadata;
mod security;
mod tasks;
mod tasks_claude;
mod tmux_hooks;
mod tracker_api;
mod watch_peers;
mod web;
