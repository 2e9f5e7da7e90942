//! A machine's side of commands from a hub (`serve --nats-commands`): it answers NATS requests
//! on `cohost.cmd.<machine>` by executing each as a client of its own service layer
//! ([`Service::serve_command`]) — the same checks, idempotency keys and refusals as its HTTP
//! API — so this machine's core stays the single writer of its events.
//!
//! Who may send commands is the NATS server's business: give only hub credentials permission to
//! publish on `cohost.cmd.>`, and each machine permission to subscribe to its own subject only
//! and to answer what it received (`allow_responses`; see docs/federation.md). A subscription
//! the server refuses stops the responder, named in the federation status (`refused`).

use anyhow::Context;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::connect::NatsConfig;
use super::names;
use crate::protocol::{RemoteCommand, RemoteError, RemoteReply};
use crate::service::{FederationStatus, Service};

/// What the command responder needs.
pub struct Commands {
    pub service: Service,
    pub machine: String,
    pub nats: NatsConfig,
    /// Where a refused permission is shown (the publisher's status).
    pub status: FederationStatus,
}

impl Commands {
    /// Answers commands until `cancel`; each runs in its own task (a prompt waits for its
    /// turn to start).
    pub async fn run(self, cancel: CancellationToken) {
        if let Err(error) = self.serve(&cancel).await {
            tracing::error!(error = %format!("{error:#}"), "federation: the command responder stopped");
        }
    }

    async fn serve(&self, cancel: &CancellationToken) -> anyhow::Result<()> {
        let (client, mut refusals) = self
            .nats
            .connect(
                &self.machine,
                "commands",
                std::sync::Arc::clone(&self.status),
            )
            .await?;
        let subject = names::command_subject(&self.machine);
        let mut requests = client
            .subscribe(subject.clone())
            .await
            .with_context(|| format!("failed to subscribe to {subject}"))?;
        tracing::info!(%subject, "federation: taking commands from a hub");
        let tasks = tokio_util::task::TaskTracker::new();
        loop {
            let request = tokio::select! {
                _ = cancel.cancelled() => break,
                request = requests.next() => request,
                refusal = refusals.refused() => {
                    tasks.close();
                    tasks.wait().await;
                    anyhow::bail!("taking commands stopped: {refusal}");
                }
            };
            let Some(request) = request else { break };
            let Some(reply_to) = request.reply.clone() else {
                continue;
            };
            let service = self.service.clone();
            let client = client.clone();
            tasks.spawn(async move {
                let reply = match serde_json::from_slice::<RemoteCommand>(&request.payload) {
                    Ok(command) => service.serve_command(command).await,
                    Err(error) => RemoteReply {
                        ok: None,
                        error: Some(RemoteError {
                            kind: "invalid".to_string(),
                            code: crate::protocol::codes::INVALID_REQUEST.to_string(),
                            message: format!("not a command this cohost knows: {error}"),
                        }),
                    },
                };
                let bytes = serde_json::to_vec(&reply).unwrap_or_default();
                if let Err(error) = client.publish(reply_to, bytes.into()).await {
                    tracing::warn!(%error, "federation: failed to answer a hub's command");
                }
            });
        }
        tasks.close();
        tasks.wait().await;
        Ok(())
    }
}
