//! The command line: commands, completions, the config file, the Claude hook, install, JSON output, the service, tmux.

pub(crate) mod commands;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod hooks;
pub(crate) mod install;
pub(crate) mod json;
pub(crate) mod service;
pub(crate) mod tmux;
pub(crate) mod tmux_hooks;
pub(crate) mod upgrade;
