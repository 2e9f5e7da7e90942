//! The `cohost` binary: parses the command line and runs one command (each in
//! `cohost::commands`).

use std::process::ExitCode;

use clap::Parser;

use cohost::cli::{Cli, Command, LogCommand};
use cohost::client::Client;
use cohost::commands;

/// Small allocations and frees on every request and event (headers, bodies, events, lines):
/// mimalloc's thread-local free lists do them in a fraction of glibc malloc's time (measured
/// with `cargo bench --bench ingest_ratio`, docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if let Some(io) = error.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("cohost: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(_) => commands::serve::run(),
        Command::State { json } => commands::agents::state(&Client::new(cli.home)?, json),
        Command::Explain {
            session,
            agent,
            json,
        } => commands::agents::explain(&Client::new(cli.home)?, session, agent, json),
        Command::Adopt {
            session,
            agent,
            json,
        } => commands::agents::adopt(&Client::new(cli.home)?, session, agent, json),
        Command::Disown { id } => commands::sessions::disown(&Client::new(cli.home)?, id),
        Command::Rehome { id } => commands::sessions::rehome(&Client::new(cli.home)?, id),
        Command::Events {
            id,
            after,
            follow,
            json,
        } => commands::agents::events(&Client::new(cli.home)?, id, after, follow, json),
        Command::Start(args) => commands::sessions::start(&Client::new(cli.home)?, args),
        Command::Profiles { command, json } => {
            commands::sessions::profiles(&Client::new(cli.home)?, command, json)
        }
        Command::Sessions { json } => commands::sessions::list(&Client::new(cli.home)?, json),
        Command::Send {
            id,
            text,
            idempotency_key,
        } => commands::sessions::send(&Client::new(cli.home)?, id, text, idempotency_key),
        Command::Queue { id, json } => commands::sessions::queue(&Client::new(cli.home)?, id, json),
        Command::Takeover { id } => commands::sessions::takeover(&Client::new(cli.home)?, id),
        Command::Release { id, drop_queued } => {
            commands::sessions::release(&Client::new(cli.home)?, id, drop_queued)
        }
        Command::Interrupt { id } => commands::sessions::interrupt(&Client::new(cli.home)?, id),
        Command::Requests { id, all, json } => {
            commands::sessions::requests(&Client::new(cli.home)?, id, all, json)
        }
        Command::Answer(args) => commands::sessions::answer(&Client::new(cli.home)?, args),
        Command::Mode { id, mode } => commands::sessions::mode(&Client::new(cli.home)?, id, mode),
        Command::Approve {
            id,
            approval,
            decision,
        } => commands::sessions::approve(&Client::new(cli.home)?, id, approval, decision),
        Command::Goal {
            id,
            text,
            clear,
            status,
            token_budget,
        } => commands::sessions::goal(
            &Client::new(cli.home)?,
            id,
            text,
            clear,
            status,
            token_budget,
        ),
        Command::Fork { id, after_turn } => {
            commands::sessions::fork(&Client::new(cli.home)?, id, after_turn)
        }
        Command::Models { json } => commands::sessions::models(&Client::new(cli.home)?, json),
        Command::Attach { id } => commands::sessions::attach(&Client::new(cli.home)?, id),
        Command::Relaunch { id } => commands::sessions::relaunch(&Client::new(cli.home)?, id),
        Command::Doctor { json } => commands::sessions::doctor(&Client::new(cli.home)?, json),
        Command::Event(args) => commands::agents::event(&Client::new(cli.home)?, args),
        Command::Focus { session, source } => {
            commands::agents::focus(&Client::new(cli.home)?, session, source)
        }
        Command::Token => commands::agents::token(&Client::new(cli.home)?),
        Command::Web => commands::agents::web(&Client::new(cli.home)?),
        Command::TmuxRefresh => commands::agents::tmux_refresh(&Client::new(cli.home)?),
        Command::Task(command) => commands::tasks::run(&Client::new(cli.home)?, command),
        Command::Mcp => commands::mcp_bridge::run(cli.home),
        Command::Log(LogCommand::Verify { json }) => commands::log::verify(cli.home, json),
        Command::Integration(command) => commands::run(cli.home, command),
    }
}
