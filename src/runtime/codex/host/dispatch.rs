//! The dispatch task, one per backend: the only producer of its sessions' events. Each message is
//! parsed once (a notification into [`wire::ServerNotification`]), routed to its session by
//! thread, handed to that session's [`Forwarder`](super::forwarder::Forwarder), and the effects
//! it returns are performed in order before the next message is taken.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::super::normalize;
use super::super::rpc::Incoming;
use super::super::wire::ServerNotification;
use super::forwarder::{Effect, Forwarder, SessionFacts};
use super::{Backend, CodexHost, Inner, Live, PendingRequest, lock};
use crate::core::CoreHandle;
use crate::runtime::common::caught;

impl Inner {
    /// [`Inner::dispatch`] as a boxed future: a restart inside it spawns a new backend, whose
    /// dispatch is this same future, and the explicit type breaks that cycle for the compiler.
    pub(super) fn dispatch_boxed(
        self: Arc<Self>,
        backend: Arc<Backend>,
        incoming: tokio::sync::mpsc::Receiver<Incoming>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            let dispatch = Arc::clone(&self).dispatch(Arc::clone(&backend), incoming);
            if let Err(panic) = caught::caught(dispatch).await {
                self.abandon(backend, &panic).await;
            }
        })
    }

    /// The dispatch task: the only producer of a backend's sessions' events.
    async fn dispatch(
        self: Arc<Self>,
        backend: Arc<Backend>,
        mut incoming: tokio::sync::mpsc::Receiver<Incoming>,
    ) {
        loop {
            let message = tokio::select! {
                _ = self.cancel.cancelled() => return,
                message = incoming.recv() => message,
            };
            let Some(message) = message else { break };
            match message {
                Incoming::Notification { method, params } => {
                    let notification = ServerNotification::parse(&method, &params);
                    let Some(session_id) = notification
                        .thread_id()
                        .and_then(|thread| lock(&backend.threads).get(thread).cloned())
                    else {
                        continue;
                    };
                    let live = self.live_for(&session_id);
                    let facts = StoredFacts {
                        core: &self.core,
                        session_id: &session_id,
                    };
                    let effects = lock(&live.turn).apply(notification, &facts);
                    self.perform(&live, &backend, effects).await;
                }
                Incoming::Request { id, method, params } => {
                    let session_id = normalize::thread_id(&params)
                        .and_then(|thread| lock(&backend.threads).get(thread).cloned());
                    match session_id {
                        Some(session_id) => {
                            let live = self.live_for(&session_id);
                            let effects = Forwarder::request(id, &method, &params);
                            self.perform(&live, &backend, effects).await;
                        }
                        None => self.refuse(&backend, id, &method).await,
                    }
                }
            }
        }
        if self.cancel.is_cancelled() {
            return;
        }
        let reason = backend.rpc.closed().await;
        tracing::warn!(key = %backend.key, %reason, "codex backend exited; restarting it");
        self.restart(backend).await;
    }

    /// Performs a forwarder's effects for `live`, in order.
    pub(super) async fn perform(
        self: &Arc<Self>,
        live: &Arc<Live>,
        backend: &Arc<Backend>,
        effects: Vec<Effect>,
    ) {
        let session_id = live.session_id.as_str();
        for effect in effects {
            match effect {
                Effect::Touch => *lock(&backend.last_used) = Instant::now(),
                Effect::Store(kind) => self.store(session_id, kind).await,
                Effect::Publish(kind) => self.core.publish(Some(session_id.to_string()), kind),
                Effect::Report(status) => self.report(session_id, status).await,
                Effect::RequestResolved(request_id) => {
                    self.request_resolved(backend, session_id, &request_id)
                        .await
                }
                Effect::TurnEnded => {
                    // The thread now has a rollout: a waiting terminal can resume it.
                    if live
                        .terminal_pending
                        .swap(false, std::sync::atomic::Ordering::AcqRel)
                    {
                        let host = CodexHost {
                            inner: Arc::clone(self),
                        };
                        let session = session_id.to_string();
                        tokio::spawn(async move {
                            if let Err(error) = host.relaunch_terminal(&session).await {
                                tracing::warn!(session = %session, %error, "could not start the terminal");
                            }
                        });
                    }
                }
                Effect::HoldApproval {
                    approval_id,
                    rpc_id,
                } => {
                    lock(&self.approvals).insert(
                        approval_id,
                        PendingRequest {
                            session_id: session_id.to_string(),
                            backend: Arc::clone(backend),
                            request_id: rpc_id,
                        },
                    );
                }
                Effect::HoldInput { request_id, rpc_id } => {
                    self.hold_input(backend, session_id, request_id, rpc_id)
                }
                Effect::Refuse { rpc_id, method } => self.refuse(backend, rpc_id, &method).await,
            }
        }
    }

    /// A turn ended while nobody listened (a backfill) or with its backend: closes what it left
    /// open and stores its end.
    pub(super) async fn end_turn(
        self: &Arc<Self>,
        live: &Arc<Live>,
        backend: &Arc<Backend>,
        done: crate::protocol::TurnCompleted,
    ) {
        let effects = lock(&live.turn).end_turn(done);
        self.perform(live, backend, effects).await;
    }
}

/// What the forwarder asks of a session, read from the core's state when it asks.
struct StoredFacts<'a> {
    core: &'a CoreHandle,
    session_id: &'a str,
}

impl SessionFacts for StoredFacts<'_> {
    fn goal_active(&self) -> bool {
        self.core.read(|state| {
            state
                .sessions
                .get(self.session_id)
                .and_then(|s| s.goal.as_ref())
                .and_then(|goal| goal.get("status"))
                .and_then(Value::as_str)
                == Some("active")
        })
    }

    fn has_goal(&self) -> bool {
        self.core.read(|state| {
            state
                .sessions
                .get(self.session_id)
                .is_some_and(|s| s.goal.is_some())
        })
    }

    fn has_terminal(&self) -> bool {
        self.core.read(|state| {
            state
                .sessions
                .get(self.session_id)
                .is_some_and(|s| s.pane.is_some())
        })
    }
}
