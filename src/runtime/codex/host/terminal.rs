//! Co-driving: the human's `codex --remote … resume <thread>` TUI attached to a session's thread
//! over its backend's WebSocket — the spec (`GET …/terminal`), the pane running `cohost-runner`
//! with its `launch.json`, naming a thread so it can be resumed before its first turn, and the
//! relaunch (after the TUI exited, or a backend restart).
//!
//! The token travels in the environment or a 0600 file, never on a command line.

use std::path::PathBuf;

use super::{CodexHost, wire};
use crate::protocol::{HostedSessionView, Runtime};
use crate::runtime::common::pane;
use crate::runtime::{HostError, TerminalSpec};

/// The environment variable that carries the WebSocket token to the co-driving TUI.
pub const WS_TOKEN_ENV: &str = "COHOST_CODEX_WS_TOKEN";

impl CodexHost {
    /// The command that attaches the real codex TUI to the session's thread over the backend's
    /// WebSocket: `codex --remote ws://… --remote-auth-token-env VAR resume <thread>`, with the
    /// backend's CODEX_HOME. The token travels in the environment, never on the command line;
    /// it is replaced by `<redacted>` unless `include_token`.
    pub(in crate::runtime::codex) async fn terminal_spec(
        &self,
        session_id: &str,
        include_token: bool,
    ) -> Result<TerminalSpec, HostError> {
        let live = self.inner.live_session(session_id)?;
        let binding = self.inner.wait_bound(&live).await?;
        let bin = self
            .inner
            .codex
            .as_ref()
            .map_err(|e| HostError::unavailable(Runtime::Codex, e.clone()))?;
        let (Some(ws_url), Some(token_file)) =
            (&binding.backend.ws_url, &binding.backend.token_file)
        else {
            return Err(HostError::Invalid(
                "this session's backend has no WebSocket (COHOST_CODEX_TRANSPORT=stdio); it cannot be co-driven".into(),
            ));
        };
        let token = if include_token {
            std::fs::read_to_string(token_file)
                .map_err(|e| {
                    HostError::failed_by(
                        Runtime::Codex,
                        format!(
                            "cannot read the websocket token {}: {e}",
                            token_file.display()
                        ),
                        e,
                    )
                })?
                .trim()
                .to_string()
        } else {
            "<redacted>".to_string()
        };
        let cwd = self.view(session_id)?.cwd;
        let mut env = std::collections::BTreeMap::new();
        env.insert(
            "CODEX_HOME".to_string(),
            binding.backend.home.to_string_lossy().into_owned(),
        );
        env.insert(WS_TOKEN_ENV.to_string(), token);
        if let Some(root) = &bin.package_root {
            env.insert(
                "CODEX_MANAGED_PACKAGE_ROOT".to_string(),
                root.to_string_lossy().into_owned(),
            );
            env.insert("CODEX_MANAGED_BY_NPM".to_string(), "1".to_string());
        }
        Ok(TerminalSpec {
            command: bin.path.to_string_lossy().into_owned(),
            args: vec![
                "--remote".into(),
                ws_url.clone(),
                "--remote-auth-token-env".into(),
                WS_TOKEN_ENV.into(),
                "resume".into(),
                binding.thread_id.clone(),
            ],
            cwd,
            env,
        })
    }

    /// Makes a thread that has had no turn resumable by another client: `thread/name/set`
    /// writes its rollout (codex 0.169 writes none until the first turn otherwise). The name,
    /// `cohost <session>`, shows in the TUI's footer. False when codex refused.
    async fn persist_thread(&self, session_id: &str) -> bool {
        let Ok(live) = self.inner.live_session(session_id) else {
            return false;
        };
        let Ok(binding) = self.inner.wait_bound(&live).await else {
            return false;
        };
        let named = binding
            .backend
            .rpc
            .call(&wire::ThreadSetNameParams {
                thread_id: binding.thread_id.clone(),
                name: format!("cohost {session_id}"),
            })
            .await;
        match named {
            Ok(_) => true,
            Err(error) => {
                tracing::info!(session = %session_id, %error, "could not persist the thread before its first turn; the terminal waits for it");
                false
            }
        }
    }

    /// Opens a tmux pane running `cohost-runner`, which launches the TUI from the terminal spec
    /// and relaunches it on request. Records `session.pane`.
    pub(in crate::runtime::codex) async fn open_terminal(
        &self,
        session_id: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        pane::runner(Runtime::Codex)?;
        pane::refuse_second(session_id, self.view(session_id)?.pane_id.as_deref())?;
        // codex cannot resume a thread that has no rollout ("no rollout found"). Naming the
        // thread writes one without any model call, so the TUI can attach at once; should that
        // fail, the runner waits without a launch.json and the TUI starts when the first turn
        // ends.
        let ready = self.view(session_id)?.turns > 0 || self.persist_thread(session_id).await;
        let dir = if ready {
            self.write_terminal_launch(session_id).await?
        } else {
            let live = self.inner.live_session(session_id)?;
            live.terminal_pending
                .store(true, std::sync::atomic::Ordering::Release);
            self.terminal_dir(session_id)?
        };
        let cwd = PathBuf::from(self.view(session_id)?.cwd);
        pane::open_terminal(
            Runtime::Codex,
            &self.inner.core,
            &self.inner.tmux,
            session_id,
            tmux_session,
            &cwd,
            &dir,
        )
        .await?;
        self.view(session_id)
    }

    /// Writes `launch.json` for the runner: the terminal spec with the real token (the file is
    /// 0600 in the session's private directory).
    pub(super) async fn write_terminal_launch(
        &self,
        session_id: &str,
    ) -> Result<PathBuf, HostError> {
        let spec = self.terminal_spec(session_id, true).await?;
        let dir = self.terminal_dir(session_id)?;
        pane::write_spec(Runtime::Codex, &dir, session_id, spec)?;
        Ok(dir)
    }

    /// The private directory of a session's terminal (launch.json, runner.jsonl).
    fn terminal_dir(&self, session_id: &str) -> Result<PathBuf, HostError> {
        pane::terminal_dir(
            Runtime::Codex,
            &self.inner.config.cohost_home.join("codex").join("sessions"),
            session_id,
        )
    }

    /// Relaunches the session's TUI (after it exited, or stopping it first), against the
    /// backend's current endpoint, on the same thread.
    pub(in crate::runtime::codex) async fn relaunch_terminal(
        &self,
        session_id: &str,
    ) -> Result<(), HostError> {
        let pane = pane::relaunchable(&self.inner.core, &self.inner.tmux, session_id).await?;
        let dir = self.write_terminal_launch(session_id).await?;
        pane::relaunch(&dir, pane.runner_pid);
        Ok(())
    }
}
