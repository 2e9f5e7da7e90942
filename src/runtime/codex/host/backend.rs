//! Backend lifecycle: one `codex app-server` per execution budget, spawned on first use with its
//! prepared CODEX_HOME (and WebSocket token), restarted when it dies (its threads resumed and
//! backfilled), reaped when a per-budget backend sits idle, stopped on shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::process::{AppServerProcess, Listen};
use super::binding::BACKEND_EXITED;
use super::{Backend, CodexHost, Inner, lock};
use crate::protocol::{Budget, Runtime, SessionState};
use crate::runtime::HostError;
use crate::runtime::common::caught;

/// The key of the base backend (no budget), kept for the daemon's life.
pub(super) const BASE_KEY: &str = "codex";
/// Grace period for a backend to exit on shutdown before its process group is killed.
const BACKEND_STOP_GRACE: Duration = Duration::from_secs(3);
/// Restart attempts for a backend that keeps dying, and the pause between them.
const RESTART_ATTEMPTS: u32 = 5;
const RESTART_BACKOFF: Duration = Duration::from_millis(500);

fn backend_key(budget: Option<&Budget>) -> String {
    match budget {
        None => BASE_KEY.to_string(),
        Some(budget) => format!(
            "{BASE_KEY}-r{}-s{}",
            budget.request_max_retries, budget.stream_max_retries
        ),
    }
}

impl CodexHost {
    /// Stops every backend (graceful, then the process group is killed).
    pub(in crate::runtime::codex) async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let backends: Vec<Arc<Backend>> = self
            .inner
            .backends
            .lock()
            .await
            .drain()
            .map(|(_, b)| b)
            .collect();
        for backend in backends {
            if let Some(process) = backend.process.lock().await.take() {
                process.shutdown(BACKEND_STOP_GRACE).await;
            }
        }
    }

    /// Stops per-budget backends idle for longer than the TTL with no turn in flight.
    pub async fn reap_idle(&self) {
        let ttl = self.inner.config.backend_idle_ttl;
        let mut backends = self.inner.backends.lock().await;
        let idle: Vec<String> = backends
            .values()
            .filter(|backend| backend.key != BASE_KEY)
            .filter(|backend| lock(&backend.last_used).elapsed() >= ttl)
            .filter(|backend| {
                let sessions: Vec<String> = lock(&backend.threads).values().cloned().collect();
                let live = lock(&self.inner.live);
                sessions
                    .iter()
                    .all(|s| live.get(s).is_none_or(|l| lock(&l.turn).current.is_none()))
            })
            .map(|backend| backend.key.clone())
            .collect();
        for key in idle {
            if let Some(backend) = backends.remove(&key) {
                tracing::info!(key, "reaping an idle codex backend");
                if let Some(process) = backend.process.lock().await.take() {
                    tokio::spawn(async move { process.shutdown(BACKEND_STOP_GRACE).await });
                }
            }
        }
    }
}

impl Inner {
    /// The backend for a budget, spawning it (with its prepared CODEX_HOME) when needed.
    pub(super) async fn backend(
        self: &Arc<Self>,
        budget: Option<&Budget>,
    ) -> Result<Arc<Backend>, HostError> {
        let key = backend_key(budget);
        let mut backends = self.backends.lock().await;
        if let Some(backend) = backends.get(&key)
            && !backend.rpc.is_closed()
        {
            *lock(&backend.last_used) = Instant::now();
            return Ok(Arc::clone(backend));
        }
        let bin = self
            .codex
            .as_ref()
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.clone()))?;
        let home = self
            .config
            .cohost_home
            .join("codex")
            .join(&key)
            .join("home");
        super::super::home::prepare_home(&home, self.config.user_codex_home.as_deref())
            .map_err(|e| HostError::unavailable_by(Runtime::Codex, e.to_string(), e))?;
        let mut env = Vec::new();
        if let Some(budget) = budget {
            env.push((
                "OPENAI_REQUEST_MAX_RETRIES".to_string(),
                budget.request_max_retries.to_string(),
            ));
            env.push((
                "OPENAI_STREAM_MAX_RETRIES".to_string(),
                budget.stream_max_retries.to_string(),
            ));
        }
        // Backends listen on a loopback WebSocket with a fresh capability token, so a human's
        // TUI can co-drive their threads; cohost connects over that same socket.
        // `COHOST_CODEX_TRANSPORT=stdio` keeps the plain stdio transport (no co-driving).
        let (listen, token_file) =
            if std::env::var("COHOST_CODEX_TRANSPORT").as_deref() == Ok("stdio") {
                (Listen::Stdio, None)
            } else {
                let token_file = home.parent().unwrap_or(&home).join("ws-token");
                super::super::process::write_ws_token(&token_file).map_err(|e| {
                    HostError::unavailable_by(
                        Runtime::Codex,
                        format!(
                            "cannot write the websocket token {}: {e}",
                            token_file.display()
                        ),
                        e,
                    )
                })?;
                (
                    Listen::WebSocket {
                        port: 0,
                        token_file: token_file.clone(),
                    },
                    Some(token_file),
                )
            };
        let (process, rpc, incoming) = AppServerProcess::spawn(bin, &home, listen, &[], &env)
            .await
            .map_err(|e| HostError::unavailable_by(Runtime::Codex, e.to_string(), e))?;
        let ws_url = process.ws_url().map(str::to_string);
        rpc.initialize("cohost", env!("CARGO_PKG_VERSION"))
            .await
            .map_err(|e| HostError::unavailable_by(Runtime::Codex, e.to_string(), e))?;
        tracing::info!(key, pid = ?process.pid(), "started a codex app-server backend");
        let backend = Arc::new(Backend {
            key: key.clone(),
            budget: budget.cloned(),
            home: home.clone(),
            ws_url,
            token_file,
            rpc,
            process: tokio::sync::Mutex::new(Some(process)),
            threads: Mutex::new(HashMap::new()),
            last_used: Mutex::new(Instant::now()),
        });
        backends.insert(key, Arc::clone(&backend));
        tokio::spawn(Arc::clone(self).dispatch_boxed(Arc::clone(&backend), incoming));
        Ok(backend)
    }

    /// A backend taken out of service: no new session is given it, its pending approvals are
    /// dropped; its sessions (with their threads) are what it served, each unbound.
    async fn forget(self: &Arc<Self>, dead: &Arc<Backend>) -> Vec<(String, String)> {
        {
            let mut backends = self.backends.lock().await;
            if backends
                .get(&dead.key)
                .is_some_and(|b| Arc::ptr_eq(b, dead))
            {
                backends.remove(&dead.key);
            }
        }
        lock(&self.approvals).retain(|_, pending| !Arc::ptr_eq(&pending.backend, dead));
        let sessions: Vec<(String, String)> = lock(&dead.threads)
            .iter()
            .map(|(thread, session)| (session.clone(), thread.clone()))
            .collect();
        for (session_id, _) in &sessions {
            self.live_for(session_id).binding.send_replace(None);
        }
        sessions
    }

    /// A backend whose dispatch panicked: nothing reads its events any more. Its process is
    /// stopped, so the next session gets a backend of its own, and its sessions are settled as
    /// when a restart cannot bring them back: the running turn ends `interrupted` and `lost`
    /// (its pending approvals with it), and the session is `lost` with the panic's message (a
    /// restart of cohost resumes it; resuming it here could meet the same panic again, and
    /// again).
    pub(super) async fn abandon(self: &Arc<Self>, dead: Arc<Backend>, panic: &str) {
        let sessions = self.forget(&dead).await;
        tracing::error!(key = %dead.key, %panic, ?sessions, "a codex backend's dispatch panicked");
        if let Some(process) = dead.process.lock().await.take() {
            process.shutdown(BACKEND_STOP_GRACE).await;
        }
        let ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
        let message = caught::lost(&self.config.failures, "codex dispatch", &ids, panic);
        for (session_id, _) in &sessions {
            self.settle_lost(
                &dead,
                session_id,
                "cohost stopped following codex",
                &message,
            )
            .await;
        }
    }

    /// A session its backend can no longer run: its open turn ended `interrupted` and `lost`
    /// with `turn_error`, then the session `lost` with `message` — even if ending the turn
    /// panics (the forwarder a panicked dispatch left half-changed).
    async fn settle_lost(
        self: &Arc<Self>,
        dead: &Arc<Backend>,
        session_id: &str,
        turn_error: &str,
        message: &str,
    ) {
        let live = self.live_for(session_id);
        let settle = async |message| {
            self.end_cut_turn(&live, dead, turn_error, None).await;
            self.status(session_id, SessionState::Lost, Some(message))
                .await;
        };
        caught::settle_caught(&self.core, session_id, message.to_string(), settle).await;
    }

    /// Replaces a dead backend and resumes every thread it served.
    pub(super) async fn restart(self: &Arc<Self>, dead: Arc<Backend>) {
        let sessions = self.forget(&dead).await;
        for (session_id, _) in &sessions {
            self.status(
                session_id,
                SessionState::Restarting,
                Some("the codex backend exited".into()),
            )
            .await;
        }
        let mut attempt = 0;
        let backend = loop {
            attempt += 1;
            if self.cancel.is_cancelled() {
                return;
            }
            match self.backend(dead.budget.as_ref()).await {
                Ok(backend) => break backend,
                Err(error) if attempt < RESTART_ATTEMPTS => {
                    tracing::warn!(%error, attempt, "codex backend restart failed; retrying");
                    tokio::time::sleep(RESTART_BACKOFF * attempt).await;
                }
                Err(error) => {
                    let message = error.to_string();
                    for (session_id, _) in &sessions {
                        self.settle_lost(&dead, session_id, BACKEND_EXITED, &message)
                            .await;
                    }
                    return;
                }
            }
        };
        for (session_id, thread_id) in sessions {
            let live = self.live_for(&session_id);
            if let Err(error) = self
                .rebind(&live, &thread_id, Some(Arc::clone(&backend)))
                .await
            {
                tracing::warn!(session = %session_id, %error, "could not resume the thread");
                self.settle_lost(&dead, &session_id, BACKEND_EXITED, &error.to_string())
                    .await;
                continue;
            }
            // A co-driving TUI lost its server with the old backend: point it at the new one.
            let has_pane = self.core.read(|state| {
                state
                    .sessions
                    .get(&session_id)
                    .is_some_and(|s| s.pane.is_some())
            });
            if has_pane {
                let host = CodexHost {
                    inner: Arc::clone(self),
                };
                if let Err(error) = host.relaunch_terminal(&session_id).await {
                    tracing::warn!(session = %session_id, %error, "could not relaunch the terminal");
                }
            }
        }
    }
}
