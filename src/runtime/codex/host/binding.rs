//! Binding a session to a thread: a new thread (`thread/start`), a thread started elsewhere
//! (fork), or an existing one resumed on a (new) backend after a restart, with the backfill of
//! what the stream missed. Binding wakes the injects parked on the session.

use std::sync::Arc;

use super::super::normalize;
use super::super::rpc::RpcError;
use super::{Backend, Binding, Inner, Live, lock, wire};
use crate::protocol::{EventKind, Runtime, SessionBound, TurnCompleted, TurnStatus};
use crate::runtime::HostError;

/// A running turn's error when its backend exited under a running daemon.
pub(super) const BACKEND_EXITED: &str = "the codex backend exited during the turn";

/// `thread/resume` attempts while a thread has no rollout yet.
const RESUME_ATTEMPTS: u32 = 20;
const RESUME_BACKOFF: std::time::Duration = std::time::Duration::from_millis(250);

impl Inner {
    /// Starts a new thread for the session and binds it.
    pub(super) async fn bind_new(self: &Arc<Self>, live: &Arc<Live>) -> Result<(), HostError> {
        let settings = self
            .settings(&live.session_id)
            .ok_or_else(|| HostError::UnknownSession(live.session_id.clone()))?;
        let backend = self.backend(settings.budget.as_ref()).await?;
        let (developer_instructions, config) = super::profile_params(settings.profile.as_deref());
        let params = wire::ThreadStartParams {
            cwd: Some(settings.cwd.clone()),
            model: settings.model.clone(),
            approval_policy: settings.approval_policy.as_deref().map(Into::into),
            sandbox: settings.sandbox.as_deref().map(Into::into),
            developer_instructions,
            config,
        };
        let answer = backend.rpc.call(&params).await?;
        *lock(&live.model) = answer.model.clone();
        let thread_id = answer.thread.and_then(|thread| thread.id).ok_or_else(|| {
            HostError::failed(Runtime::Codex, "thread/start answered without a thread id")
        })?;
        self.attach(live, &thread_id, &backend, None, None).await
    }

    /// Routes `thread_id` on `backend` to the session, backfills `snapshot` (a Thread with
    /// turns, from resume or fork), logs the binding, and wakes parked injects. `cut`: why the
    /// turn the session was running ended when the old backend went (a resume): the backfill,
    /// where codex says only `interrupted`, gets it as its error, and `lost` (how the turn
    /// would have ended is not known).
    pub(super) async fn attach(
        self: &Arc<Self>,
        live: &Arc<Live>,
        thread_id: &str,
        backend: &Arc<Backend>,
        snapshot: Option<&wire::Thread>,
        cut: Option<&str>,
    ) -> Result<(), HostError> {
        lock(&backend.threads).insert(thread_id.to_string(), live.session_id.clone());
        let running = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .and_then(|s| s.active_turn.clone())
        });
        if let Some(turns) = snapshot.map(|thread| &thread.turns) {
            for turn in turns {
                for kind in normalize::backfill(turn) {
                    match kind {
                        // A turn that ended while nobody listened closes the items it left open.
                        EventKind::TurnCompleted(mut done) => {
                            if let Some(cut) = cut
                                && running.as_deref() == Some(done.turn_id.as_str())
                                && done.status == TurnStatus::Interrupted
                                && done.error.is_none()
                            {
                                done.error = Some(cut.to_string());
                                done.lost = true;
                            }
                            self.end_turn(live, backend, done).await
                        }
                        kind => self.store(&live.session_id, kind).await,
                    }
                }
                if turn.status == Some(wire::TurnStatus::InProgress)
                    && let Some(turn_id) = &turn.id
                {
                    lock(&live.turn).current = Some(turn_id.clone());
                }
            }
        }
        self.core
            .append(
                Some(live.session_id.clone()),
                EventKind::SessionBound(SessionBound {
                    thread_id: thread_id.to_string(),
                    backend: backend.key.clone(),
                }),
            )
            .await?;
        live.binding.send_replace(Some(Binding {
            thread_id: thread_id.to_string(),
            backend: Arc::clone(backend),
        }));
        Ok(())
    }

    /// `thread` without the turns whose end the session stored already (for a backfill that
    /// must not store them again under other item ids).
    pub(super) fn without_ended_turns(
        &self,
        session_id: &str,
        mut thread: wire::Thread,
    ) -> wire::Thread {
        thread.turns.retain(|turn| {
            turn.id.as_deref().is_some_and(|turn_id| {
                !self
                    .core
                    .read(|state| state.sessions.has_ended_turn(session_id, turn_id))
            })
        });
        thread
    }

    /// Resumes an existing thread on a (new) backend and backfills what the stream missed.
    /// A thread with no rollout yet is retried for a while; one that never had a turn is
    /// replaced by a new thread, since codex never persisted it.
    pub(super) async fn rebind(
        self: &Arc<Self>,
        live: &Arc<Live>,
        thread_id: &str,
        backend: Option<Arc<Backend>>,
    ) -> Result<(), HostError> {
        let settings = self
            .settings(&live.session_id)
            .ok_or_else(|| HostError::UnknownSession(live.session_id.clone()))?;
        // Without a backend to resume on, this is the daemon's start: the old backend went
        // with the daemon; with one, the old backend exited under a running daemon.
        let cut = match backend {
            None => "the daemon stopped during the turn",
            Some(_) => BACKEND_EXITED,
        };
        let backend = match backend {
            Some(backend) => backend,
            None => self.backend(settings.budget.as_ref()).await?,
        };
        let turns = self
            .core
            .read(|state| state.sessions.get(&live.session_id).map(|s| s.turns))
            .unwrap_or(0);
        let mut attempt = 0;
        let answer = loop {
            attempt += 1;
            match backend
                .rpc
                .call(&{
                    let profile = self.settings(&live.session_id).and_then(|s| s.profile);
                    let (developer_instructions, config) =
                        super::profile_params(profile.as_deref());
                    wire::ThreadResumeParams {
                        thread_id: thread_id.to_string(),
                        // A rehomed thread's rollout is where the person's codex wrote it.
                        path: self.core.read(|state| {
                            state
                                .sessions
                                .get(&live.session_id)
                                .and_then(|s| s.rehomed.as_ref())
                                .map(|r| r.rollout.clone())
                        }),
                        developer_instructions,
                        config,
                    }
                })
                .await
            {
                Ok(answer) => break answer,
                Err(RpcError::Server { message, .. }) if message.contains("no rollout found") => {
                    if turns == 0 || attempt >= RESUME_ATTEMPTS {
                        tracing::info!(session = %live.session_id, "thread was never persisted; starting a new one");
                        return self.bind_new(live).await;
                    }
                    tokio::time::sleep(RESUME_BACKOFF).await;
                }
                Err(error) => return Err(error.into()),
            }
        };
        lock(&live.turn).current = None;
        *lock(&live.model) = answer.model.clone();
        // A rehomed session's turns from its adoption were stored under the rollout's item
        // ids, not the app-server's: its ended turns are not backfilled again.
        let rehomed = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .is_some_and(|s| s.rehomed.is_some())
        });
        let snapshot = match answer.thread {
            Some(thread) if rehomed => Some(self.without_ended_turns(&live.session_id, thread)),
            thread => thread,
        };
        self.attach(live, thread_id, &backend, snapshot.as_ref(), Some(cut))
            .await?;
        // A turn the old backend was running and that did not end in the backfill is over.
        let running = lock(&live.turn).current.clone();
        self.end_cut_turn(live, &backend, cut, running.as_deref())
            .await;
        Ok(())
    }

    /// Ends the turn the session's state still has open, unless it is `running` (one a backend
    /// runs now): `interrupted` and `lost`, with `error` — its open items and pending approvals
    /// end with it. Through the session's forwarder, which also keeps a message streamed so
    /// far; `hosted::end_cut_turn` does the same from the core's state alone, for a session no
    /// backend took up (a restore that failed).
    pub(super) async fn end_cut_turn(
        self: &Arc<Self>,
        live: &Arc<Live>,
        backend: &Arc<Backend>,
        error: &str,
        running: Option<&str>,
    ) {
        let open = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .and_then(|s| s.active_turn.clone())
        });
        if let Some(turn_id) = open
            && running != Some(turn_id.as_str())
        {
            self.end_turn(
                live,
                backend,
                TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: Some(error.into()),
                    duration_ms: None,
                    lost: true,
                },
            )
            .await;
        }
    }
}
