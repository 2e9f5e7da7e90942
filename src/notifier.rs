//! `--notify-command`: runs a command once per `notification` event, with the event's JSON on
//! stdin, off the ingest path.
//!
//! It follows the core's broadcast like any subscriber (the core never waits for it), so a
//! slow or failing command costs nothing but its own notifications. Only live notifications
//! run it: a restart replays none. Rate-limited: at most [`BURST`] runs per [`WINDOW`]; one
//! past the limit is dropped with a warning (the event stays in the log and on every stream).
//! At most one command runs at a time, for at most [`RUN_TIMEOUT`]; its process group is killed
//! after that (and on shutdown).

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::core::CoreHandle;

/// Runs allowed per window.
pub const BURST: usize = 20;
/// The rate limit's window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long one run may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(10);

/// Follows the broadcast and runs `command` (through `sh -c`) for each notification.
pub async fn run(command: String, core: CoreHandle, cancel: CancellationToken) {
    let mut events = core.subscribe();
    let mut recent: VecDeque<Instant> = VecDeque::new();
    let mut dropped = 0u64;
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            event = events.recv() => event,
        };
        let event = match event {
            Ok(event) => event,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "the notify command fell behind; skipped events");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if event.ephemeral || !event.json.contains(r#""type":"notification""#) {
            continue;
        }
        let now = Instant::now();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > WINDOW)
        {
            recent.pop_front();
        }
        if recent.len() >= BURST {
            dropped += 1;
            tracing::warn!(
                seq = event.seq,
                dropped,
                "notify command rate limit ({BURST} per {WINDOW:?}) reached; notification not delivered to it"
            );
            continue;
        }
        recent.push_back(now);
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = run_once(&command, &event.json) => {}
        }
    }
}

async fn run_once(command: &str, json: &str) {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            tracing::warn!(%error, "could not start the notify command");
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let mut line = json.to_string();
        line.push('\n');
        // A command that does not read its stdin is not an error.
        let _ = stdin.write_all(line.as_bytes()).await;
    }
    match tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) if output.status.success() => {}
        Ok(Ok(output)) => tracing::warn!(
            status = %output.status,
            stderr = %String::from_utf8_lossy(&output.stderr).trim(),
            "the notify command failed"
        ),
        Ok(Err(error)) => tracing::warn!(%error, "the notify command failed"),
        Err(_) => tracing::warn!("the notify command ran longer than {RUN_TIMEOUT:?}; killed"),
    }
}
