//! Every `cohost` command but the parsing (`cli.rs`) and the dispatch (`main.rs`): `serve`
//! ([`serve`]); the agents and the daemon ([`agents`]); hosted sessions ([`sessions`]); tasks
//! ([`tasks`]); `log verify` ([`log`]); `cohost mcp`'s stdio bridge ([`mcp_bridge`]); and here,
//! the everyday commands — `config show|path`, `completions`, `man`, `service`, `hooks`,
//! `status`, `next` (clap structs in `cli/integration.rs`). Each runs once and prints to stdout; the clients
//! reach the daemon through `client.rs`.

pub mod agents;
mod config;
mod hooks;
pub mod log;
pub mod mcp_bridge;
pub mod serve;
mod service;
pub mod sessions;
pub mod tasks;
mod tmux;

use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::cli::integration::{ConfigCommand, IntegrationCommand, Shell};

/// `cohost task status` without `--json`: one task view (`GET /api/tasks/{id}`'s `task`), a
/// field a line.
pub fn print_task(task: &serde_json::Value, out: &mut impl Write) -> anyhow::Result<()> {
    let text = |key: &str| match &task[key] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    writeln!(out, "task:      {}", text("taskId"))?;
    writeln!(out, "session:   {}", text("sessionId"))?;
    writeln!(
        out,
        "state:     {} ({}), revision {}",
        text("state"),
        text("phase"),
        text("revision")
    )?;
    for (label, key) in [
        ("position", "position"),
        ("waiting", "waitingReason"),
        ("turn", "turnId"),
        ("cancel", "cancelOutcome"),
        ("error", "error"),
        ("superseded", "supersededBy"),
    ] {
        let value = text(key);
        if !value.is_empty() {
            writeln!(out, "{label:<10} {value}")?;
        }
    }
    let preview = text("promptPreview");
    writeln!(out, "prompt:    {}", preview.lines().next().unwrap_or(""))?;
    Ok(())
}

/// Runs one everyday command; `home` is the global option.
pub fn run(home: Option<PathBuf>, command: IntegrationCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        IntegrationCommand::Config(ConfigCommand::Show { json }) => config::show(json, &mut out),
        IntegrationCommand::Config(ConfigCommand::Path) => {
            let (path, _) = crate::config::file::locate()?;
            writeln!(out, "{}", path.display())?;
            Ok(())
        }
        IntegrationCommand::Completions { shell } => {
            let mut command = Cli::command();
            let shell = match shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            // Into a buffer first: clap_complete panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "cohost", &mut script);
            out.write_all(&script)?;
            Ok(())
        }
        IntegrationCommand::Status { tmux, json } => tmux::status(home, tmux, json, &mut out),
        IntegrationCommand::Next {
            waiting,
            unseen,
            client,
        } => tmux::next(
            home,
            tmux::Want::from_flags(waiting, unseen),
            client,
            &mut out,
        ),
        IntegrationCommand::Service(command) => service::run(home, command, &mut out),
        IntegrationCommand::Hooks(command) => hooks::run(home, command, &mut out),
        IntegrationCommand::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut page)?;
            out.write_all(&page)?;
            Ok(())
        }
    }
}
