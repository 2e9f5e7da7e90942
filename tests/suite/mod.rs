//! The integration tests, one folder per area of cohost.

mod adopting;
mod claude;
mod cli;
mod codex;
mod http;
mod matrix;
mod mcp;
mod nats;
mod opencode;
mod pi;
mod profiles;
mod store;
mod tasks;
mod watch;
mod web;
