//! The integration tests, one module per area of cohost.

mod cli;
mod codex_host;
mod codex_smoke;
mod durability;
mod events_sse;
mod metadata;
mod security;
mod tmux_hooks;
mod tracker_api;
