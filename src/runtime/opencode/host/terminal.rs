//! Co-driving an OpenCode session: `opencode attach` on the session's own server — the spec
//! (`GET …/terminal`), the pane running `cohost-runner` with its `launch.json`
//! ([`pane`](crate::runtime::common::pane), as codex's), and the relaunch (after the TUI exited,
//! or once a daemon restart gave the session a new server) — and the session's instance in the
//! tracker, placed in its pane when it has one, else in the tmux session of its directory.
//!
//! The server's password travels in the environment or a 0600 file, never on a command line.

use std::path::PathBuf;

use super::{Inner, OpencodeHost};
use crate::protocol::{AgentStatus, HostedSessionView, Liveness, Runtime, TerminalSpec};
use crate::runtime::HostError;
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::common::{lock, pane};

/// The variables of the daemon's environment that say where OpenCode's files are (its config,
/// its database, its state): the server has them, and the TUI attached to it gets the same.
fn opencode_environment() -> impl Iterator<Item = (String, String)> {
    std::env::vars().filter(|(key, _)| {
        key == "HOME"
            || key.starts_with("XDG_")
            || (key.starts_with("OPENCODE_") && !key.starts_with("OPENCODE_SERVER_"))
    })
}

impl OpencodeHost {
    /// `opencode attach http://127.0.0.1:PORT --session ses_… --dir CWD` on the session's
    /// server, with the Basic-auth user and password in `env` (the password `<redacted>`
    /// unless `include_token`).
    pub(super) async fn spec(
        &self,
        session_id: &str,
        include_token: bool,
    ) -> Result<TerminalSpec, HostError> {
        let live = self.inner.live_session(session_id)?;
        let binding = self.inner.wait_bound(&live).await?;
        let bin = self.bin()?.clone();
        let cwd = self.view(session_id)?.cwd;
        let mut env = std::collections::BTreeMap::new();
        env.insert(
            "OPENCODE_SERVER_USERNAME".to_string(),
            super::super::process::USERNAME.to_string(),
        );
        env.insert(
            "OPENCODE_SERVER_PASSWORD".to_string(),
            if include_token {
                binding.server.password.clone()
            } else {
                "<redacted>".to_string()
            },
        );
        env.insert("OPENCODE_DISABLE_AUTOUPDATE".to_string(), "1".to_string());
        Ok(TerminalSpec {
            command: bin.to_string_lossy().into_owned(),
            args: vec![
                "attach".to_string(),
                format!("http://127.0.0.1:{}", binding.client().port()),
                "--session".to_string(),
                binding.opencode_session.clone(),
                "--dir".to_string(),
                cwd.clone(),
            ],
            cwd,
            env,
        })
    }

    /// Opens a tmux pane running `cohost-runner`, which launches `opencode attach` from the
    /// spec and relaunches it on request. Records `session.pane`; the session's instance in
    /// the tracker moves to the pane.
    pub(super) async fn open_pane(
        &self,
        session_id: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        pane::runner(Runtime::Opencode)?;
        pane::refuse_second(session_id, self.view(session_id)?.pane_id.as_deref())?;
        let dir = self.write_launch(session_id).await?;
        let cwd = PathBuf::from(self.view(session_id)?.cwd);
        // A turn cohost did not send is now the person's in the pane (said before the pane
        // opens: the TUI may send one as soon as it runs).
        let live = self.inner.live_session(session_id)?;
        lock(&live.forwarder).has_terminal = true;
        let opened = pane::open_terminal(
            Runtime::Opencode,
            &self.inner.core,
            &self.inner.tmux,
            session_id,
            tmux_session,
            &cwd,
            &dir,
        )
        .await;
        if let Err(error) = opened {
            lock(&live.forwarder).has_terminal = false;
            return Err(error);
        }
        self.inner.report_again(session_id).await;
        self.view(session_id)
    }

    /// Starts the pane's `opencode attach` again, against the session's current server.
    pub(super) async fn relaunch_pane(&self, session_id: &str) -> Result<(), HostError> {
        let pane = pane::relaunchable(&self.inner.core, &self.inner.tmux, session_id).await?;
        let dir = self.write_launch(session_id).await?;
        pane::relaunch(&dir, pane.runner_pid);
        Ok(())
    }

    /// Writes `launch.json` for the runner: the spec with the real password, plus where
    /// OpenCode's files are, as the server has it (the file is 0600 in the session's private
    /// directory, `$COHOST_HOME/opencode/sessions/<id>`).
    pub(super) async fn write_launch(&self, session_id: &str) -> Result<PathBuf, HostError> {
        let mut spec = self.spec(session_id, true).await?;
        for (key, value) in opencode_environment() {
            spec.env.entry(key).or_insert(value);
        }
        let dir = pane::terminal_dir(
            Runtime::Opencode,
            &self.inner.scratch.join("sessions"),
            session_id,
        )?;
        pane::write_spec(Runtime::Opencode, &dir, session_id, spec)?;
        Ok(dir)
    }
}

impl Inner {
    /// Mirrors the session's status into the tracker as agent `opencode`, keyed by OpenCode's
    /// session id: in its pane's tmux session when it has a pane, else in the tmux session
    /// whose directory holds its cwd.
    pub(super) async fn report(&self, session_id: &str, status: AgentStatus) {
        let Some((cwd, thread, pane)) = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.created.cwd.clone(), s.thread_id.clone(), s.pane.clone()))
        }) else {
            return;
        };
        let Some(thread) = thread else { return };
        let placement = match &pane {
            Some(pane) => Placement::Pane {
                tmux_session: &pane.tmux_session,
                pane_id: &pane.pane_id,
            },
            None => Placement::Cwd(&cwd),
        };
        mirror::report(
            &self.core,
            &self.tmux,
            Report {
                agent: "opencode",
                thread_id: &thread,
                session_id,
                placement,
                status,
                liveness: Liveness::Alive,
            },
        )
        .await;
    }

    /// Reports the session's last status again (where it shows now: a pane just opened).
    async fn report_again(&self, session_id: &str) {
        let last = self.core.read(|state| {
            let thread = state.sessions.get(session_id)?.thread_id.clone()?;
            state
                .tracker
                .hosted_instances(&thread)
                .into_iter()
                .find(|(_, update, _)| update.agent == "opencode")
                .map(|(_, update, _)| update.status)
        });
        if let Some(status) = last {
            self.report(session_id, status).await;
        }
    }
}
