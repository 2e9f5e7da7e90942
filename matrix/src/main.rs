//! `cohost-matrix`: the Matrix chat bridge (docs/matrix.md). A client of a running cohost
//! daemon (its HTTP API over the home's socket, with the token) and of a Matrix homeserver (as
//! one bot user), never a writer of cohost's state: commands in a control room and in one room
//! per hosted session become API calls, and the event stream becomes messages in those rooms.
//!
//! ```text
//! cohost-matrix [--config FILE] [--home DIR]
//! ```
//! reads `[bridge.matrix]` from cohost's config file (`$COHOST_CONFIG`, else
//! `$XDG_CONFIG_HOME/cohost/config.toml`), prints `cohost-matrix ready` once it follows both
//! sides, and runs until stopped.

mod bridge;
mod commands;
mod config;
mod homeserver;
mod inbound;
mod markdown;
mod outbound;
mod start;
mod state;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::Value;

use crate::bridge::Bridge;
use crate::config::{MatrixConfig, Secret};
use crate::homeserver::Homeserver;
use crate::state::State;

#[derive(Parser)]
#[command(
    name = "cohost-matrix",
    about = "Drive cohost's agents from Matrix rooms"
)]
struct Args {
    /// cohost's config file (default: $COHOST_CONFIG, else $XDG_CONFIG_HOME/cohost/config.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// cohost's home, whose daemon the bridge talks to (default: $COHOST_HOME).
    #[arg(long, env = "COHOST_HOME")]
    home: Option<PathBuf>,
}

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    if let Err(error) = run(Args::parse()) {
        eprintln!("cohost-matrix: {error:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let (file, explicit) = match args.config {
        Some(file) => (file, true),
        None => cohost::config::file::locate()?,
    };
    let Some(table) = cohost::config::file::load(&file, explicit)? else {
        bail!(
            "no config file at {}: the bridge's settings are its [bridge.matrix] table",
            file.display()
        );
    };
    let config = MatrixConfig::from_table(&table, &file)?;
    let home = cohost::config::resolve_home(args.home.clone())?;
    let daemon = cohost::client::Client::new(Some(home.clone()))?;
    let agent = homeserver::agent(config.roots()?);
    let hs = match config.secret()? {
        Secret::Token(token) => Homeserver::with_token(&config.homeserver, &token, agent),
        Secret::Password(password) => Homeserver::login(
            &config.homeserver,
            &config.user,
            &password,
            &config.device_id,
            agent,
        )?,
    };
    let bot = hs.whoami()?;
    if bot != config.user {
        bail!(
            "the secret logs in as {bot}, but [bridge.matrix] user is {}",
            config.user
        );
    }
    let control_room = hs.join(&config.control_room).with_context(|| {
        format!(
            "the bot cannot join the control room {} (invite {} to it first)",
            config.control_room, config.user
        )
    })?;
    let state_path = config
        .state_file
        .clone()
        .unwrap_or_else(|| home.join("matrix-bridge.json"));
    let state = State::load(&state_path)?;
    let bridge = Arc::new(Bridge::new(
        config,
        hs,
        bot,
        daemon,
        control_room,
        state,
        state_path,
    ));
    // Both cursors exist before anything is followed, so `ready` means nothing said from now on
    // is missed.
    let page: Value = bridge
        .daemon
        .get("/api/events?after=0&limit=1")
        .context("reaching the cohost daemon")?;
    let head = page["head"].as_u64().unwrap_or(0);
    if bridge.read(|s| s.cursor.is_none()) {
        bridge.update(|s| s.cursor = Some(head));
    }
    if bridge.read(|s| s.next_batch.is_none()) {
        inbound::first_sync(&bridge)?;
    }
    let out = {
        let bridge = bridge.clone();
        std::thread::spawn(move || outbound::run(bridge))
    };
    let inb = {
        let bridge = bridge.clone();
        std::thread::spawn(move || inbound::run(bridge))
    };
    println!("cohost-matrix ready");
    tracing::info!("bridging as {} in {}", bridge.bot, bridge.control_room);
    loop {
        if out.is_finished() {
            return match out.join() {
                Ok(result) => result.context("following cohost's events"),
                Err(_) => bail!("the cohost side panicked"),
            };
        }
        if inb.is_finished() {
            return match inb.join() {
                Ok(result) => result.context("following Matrix"),
                Err(_) => bail!("the Matrix side panicked"),
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
