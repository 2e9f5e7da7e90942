//! Rehoming an adopted codex TUI (`POST /api/sessions/{id}/rehome`): the same session, the same
//! thread, moved under cohost's own app-server in the same pane. Checked before anything is
//! typed (codex, `cohost-runner` and a backend with a WebSocket, which the `codex --remote` TUI
//! needs); then the person's TUI quits by its own `/quit` (`Adoptions::hand_over`: only when
//! idle, with no draft, in the verified pane), `session.rehomed` records the rollout, the thread
//! is resumed on the backend from that rollout (`thread/resume` with its `path`: the backend's
//! private CODEX_HOME does not hold it; codex goes on writing it where it is), the turns the
//! adoption did not mirror are backfilled once, and the pane runs `cohost-runner` with the
//! `codex --remote … resume <thread>` TUI — an ordinary hosted session from then on.

use std::path::PathBuf;

use super::{CodexHost, wire};
use crate::protocol::{AgentStatus, EventKind, HostedSessionView, Runtime, SessionRehomed};
use crate::runtime::HostError;
use crate::runtime::common::pane;

impl CodexHost {
    /// Moves the adopted codex of `session_id` under cohost's own app-server, in its pane.
    pub(in crate::runtime::codex) async fn rehome(
        &self,
        session_id: &str,
    ) -> Result<HostedSessionView, HostError> {
        if !self.adoptions().is_adopted(session_id) {
            return Err(HostError::NotAdopted(session_id.to_string()));
        }
        if let Err(error) = &self.inner.codex {
            return Err(HostError::unavailable(Runtime::Codex, error.clone()));
        }
        let runner = pane::runner(Runtime::Codex)?;
        let budget = self.inner.settings(session_id).and_then(|s| s.budget);
        let backend = self.inner.backend(budget.as_ref()).await?;
        if backend.ws_url.is_none() {
            return Err(HostError::Invalid(
                "cohost's codex backend has no WebSocket (COHOST_CODEX_TRANSPORT=stdio): no `codex --remote` TUI can attach, so nothing is rehomed".into(),
            ));
        }
        // From here the person's TUI is gone: what fails says how to get the conversation back.
        let record = self.adoptions().hand_over(session_id).await?;
        let thread_id = record.agent_session_id.clone();
        let lost = |what: String| {
            HostError::failed(
                Runtime::Codex,
                format!(
                    "{what}; the codex TUI in pane {} has quit: `codex resume {thread_id}` continues the conversation",
                    record.pane_id
                ),
            )
        };
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionRehomed(SessionRehomed {
                    thread_id: thread_id.clone(),
                    rollout: record.transcript.clone(),
                }),
            )
            .await?;
        link_rollout(&backend.home, std::path::Path::new(&record.transcript)).map_err(|e| {
            lost(format!(
                "cannot link the rollout into cohost's codex home: {e}"
            ))
        })?;
        let live = self.inner.live_for(session_id);
        let (developer_instructions, config) = super::profile_params(None);
        let answer = backend
            .rpc
            .call(&wire::ThreadResumeParams {
                thread_id: thread_id.clone(),
                path: Some(record.transcript.clone()),
                developer_instructions,
                config,
            })
            .await
            .map_err(|e| {
                lost(format!(
                    "cohost's app-server could not resume the thread: {e}"
                ))
            })?;
        *super::lock(&live.model) = answer.model.clone();
        // The turns the adoption mirrored are stored already: only the others are backfilled.
        let snapshot = answer
            .thread
            .map(|thread| self.inner.without_ended_turns(session_id, thread));
        self.inner
            .attach(&live, &thread_id, &backend, snapshot.as_ref(), None)
            .await?;
        let dir = self.write_terminal_launch(session_id).await?;
        let cwd = PathBuf::from(self.view(session_id)?.cwd);
        pane::respawn_adopted(
            &self.inner.core,
            &self.inner.tmux,
            session_id,
            &record,
            &cwd,
            &runner,
            &dir,
        )
        .await
        .map_err(lost)?;
        tracing::info!(session = %session_id, thread = %thread_id, pane = %record.pane_id, "rehomed an adopted codex onto cohost's app-server");
        self.inner.report(session_id, AgentStatus::Idle).await;
        self.view(session_id)
    }
}

/// Makes the rollout reachable by its thread id from cohost's codex home `home`: a symlink
/// `home/sessions/YYYY/MM/DD/<rollout file>` to it, where codex looks a thread id up (a `path`
/// alone is not enough for 0.169). codex writes the thread's next turns through it into the
/// person's own rollout, as their codex would; nothing else of their home is touched.
pub(super) fn link_rollout(
    home: &std::path::Path,
    rollout: &std::path::Path,
) -> std::io::Result<()> {
    let parts: Vec<&std::ffi::OsStr> = rollout.iter().collect();
    let tail = parts
        .len()
        .checked_sub(4)
        .map(|at| &parts[at..])
        .ok_or_else(|| {
            std::io::Error::other(format!("{} is no codex rollout path", rollout.display()))
        })?;
    let mut link = home.join("sessions");
    for part in tail {
        link.push(part);
    }
    if let Some(dir) = link.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::read_link(&link) {
        Ok(target) if target == rollout => return Ok(()),
        Ok(_) => std::fs::remove_file(&link)?,
        Err(_) => {}
    }
    std::os::unix::fs::symlink(rollout, &link)
}
