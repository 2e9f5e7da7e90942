//! The `cohost` binary: parses the command line and runs one command.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use serde_json::json;

use cohost::cli::{Cli, Command};
use cohost::client::{Client, render_state};
use cohost::config::ServeConfig;

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
        Command::Serve(args) => {
            let config = ServeConfig::from_args(cli.home, cli.listen, &args)?;
            serve(config)
        }
        Command::State { json } => {
            let client = Client::new(cli.home, cli.listen)?;
            let state = client.state()?;
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &state)?;
                writeln!(out)?;
            } else {
                render_state(&state, &mut out)?;
            }
            Ok(())
        }
        Command::Events { after, follow } => {
            let client = Client::new(cli.home, cli.listen)?;
            client.print_events(after, follow, &mut std::io::stdout().lock())
        }
        Command::Event(args) => {
            let client = Client::new(cli.home, cli.listen)?;
            let project_dir = args.project_dir.map(|dir| {
                std::path::absolute(&dir)
                    .unwrap_or(dir)
                    .to_string_lossy()
                    .into_owned()
            });
            let mut body = json!({ "agent": args.agent, "status": args.status });
            let fields = [
                ("tmuxSession", args.session.map(serde_json::Value::from)),
                ("projectDir", project_dir.map(serde_json::Value::from)),
                ("threadId", args.thread_id.map(serde_json::Value::from)),
                ("threadName", args.thread_name.map(serde_json::Value::from)),
                ("lastUserPrompt", args.prompt.map(serde_json::Value::from)),
                ("paneId", args.pane_id.map(serde_json::Value::from)),
                (
                    "liveness",
                    args.liveness
                        .map(|l| serde_json::to_value(l).unwrap_or_default()),
                ),
                ("ts", args.ts.map(serde_json::Value::from)),
            ];
            for (key, value) in fields {
                if let Some(value) = value {
                    body[key] = value;
                }
            }
            let answer: serde_json::Value = client.post("/api/agent-event", &body)?;
            println!("{answer}");
            Ok(())
        }
        Command::Focus { session, source } => {
            let client = Client::new(cli.home, cli.listen)?;
            let _: serde_json::Value = client.post(
                "/api/focus",
                &json!({ "session": session, "source": source }),
            )?;
            Ok(())
        }
        Command::Token => {
            let client = Client::new(cli.home, cli.listen)?;
            println!("{}", client.token()?);
            Ok(())
        }
        Command::TmuxRefresh => {
            let client = Client::new(cli.home, cli.listen)?;
            let _: serde_json::Value = client.post("/api/tmux/refresh", &json!({}))?;
            Ok(())
        }
    }
}

fn serve(config: ServeConfig) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (first_signal, signalled) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(signals(first_signal));
        cohost::daemon::run(
            config,
            async move {
                let _ = signalled.await;
            },
            |addr| {
                // One machine-readable line on stdout for scripts and tests; logs go to stderr.
                println!("cohost listening on {addr}");
                let _ = std::io::stdout().flush();
            },
        )
        .await
    })
}

/// The first SIGINT or SIGTERM starts a graceful shutdown; a second one forces exit.
async fn signals(first: tokio::sync::oneshot::Sender<()>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down (signal again to force)");
    let _ = first.send(());
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::warn!("second signal: exiting now");
    std::process::exit(130);
}
