//! `cohost serve`: the settings (the config file under the flags and the environment), the
//! log subscriber, the runtime and the signals around `daemon::run`.

use std::io::Write;

use crate::config::ServeConfig;

/// Runs the daemon until a signal stops it.
pub fn run() -> anyhow::Result<()> {
    // The config file applies under the flags and the environment.
    let settings = crate::config::file::serve_settings(std::env::args_os().collect())?;
    let config = ServeConfig::from_settings(
        settings.home.clone(),
        settings.listen.clone(),
        &settings.args,
        &settings.origins,
    )?
    .with_profiles(&settings)?;
    serve(config)
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
        crate::daemon::run(
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
