//! Rehoming an adopted OpenCode TUI (`POST /api/sessions/{id}/rehome`): the same session, the
//! same OpenCode session id, moved under a server of cohost's in the same pane. A hand-started
//! TUI runs its server inside its own process, on no port, so cohost starts one (`opencode
//! serve` in the session's directory, on the user's OpenCode home, as every hosted session's)
//! and checks that it sees the session — all before anything is typed. Then the person's TUI
//! quits by its own key (`Adoptions::hand_over`: only when idle, with an empty box, in the
//! verified pane), `session.rehomed` records the database, the session is bound to the server
//! (its permission ruleset set from the session's policy — the default asks before tools that
//! act — and checked in OpenCode's answer; the turns before the adoption backfilled once, those
//! the adoption mirrored recognised and dropped), and the pane runs `cohost-runner` with
//! `opencode attach … --session <id>` — an ordinary hosted session with its co-driving TUI from
//! then on, restored after a daemon restart like any other.

use std::path::PathBuf;

use super::{OpencodeHost, path_segment, wire};
use crate::protocol::{AgentStatus, EventKind, HostedSessionView, Runtime, SessionRehomed};
use crate::runtime::HostError;
use crate::runtime::common::{lock, pane};

impl OpencodeHost {
    /// Moves the adopted OpenCode of `session_id` under a server of cohost's, in its pane.
    pub(super) async fn rehome_adopted(
        &self,
        session_id: &str,
    ) -> Result<HostedSessionView, HostError> {
        if !self.adoptions().is_adopted(session_id) {
            return Err(HostError::NotAdopted(session_id.to_string()));
        }
        let runner = pane::runner(Runtime::Opencode)?;
        let Some(opencode_session) = self.inner.thread_of(session_id) else {
            return Err(HostError::failed(
                Runtime::Opencode,
                format!("session `{session_id}` was never bound to an opencode session"),
            ));
        };
        // The server must see the session before the person's TUI quits for it.
        let server = self.spawn_server(session_id).await?;
        let path = format!("/session/{}", path_segment(&opencode_session)?);
        if let Err(error) = server.client.get::<wire::Session>(&path).await {
            return Err(HostError::failed(
                Runtime::Opencode,
                format!(
                    "cohost's opencode server does not find session {opencode_session} ({error}): it reads another OpenCode database than the TUI's (the daemon's HOME, XDG_DATA_HOME or OPENCODE_DB differ from the person's); nothing was typed, the TUI keeps running"
                ),
            ));
        }
        // From here the person's TUI is gone: what fails says how to get the conversation back.
        let record = self.adoptions().hand_over(session_id).await?;
        let lost = |what: String| {
            HostError::failed(
                Runtime::Opencode,
                format!(
                    "{what}; the opencode TUI in pane {} has quit: `opencode --session {opencode_session}` in {} continues the conversation",
                    record.pane_id,
                    self.view(session_id).map(|v| v.cwd).unwrap_or_default()
                ),
            )
        };
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionRehomed(SessionRehomed {
                    thread_id: opencode_session.clone(),
                    rollout: record.transcript.clone(),
                }),
            )
            .await?;
        let live = self.inner.live_for(session_id);
        if let Err(error) = self
            .bind_on(&live, server, Some(opencode_session.clone()), None)
            .await
        {
            self.inner
                .status(
                    session_id,
                    crate::protocol::SessionState::Lost,
                    Some(error.to_string()),
                )
                .await;
            return Err(lost(format!(
                "cohost's opencode server could not take the session: {error}"
            )));
        }
        // A turn cohost did not send is the person's, in the pane.
        lock(&live.forwarder).has_terminal = true;
        let dir = self.write_launch(session_id).await?;
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
        tracing::info!(session = %session_id, opencode_session = %opencode_session, pane = %record.pane_id, "rehomed an adopted opencode onto a server of cohost's");
        self.inner.report(session_id, AgentStatus::Idle).await;
        self.view(session_id)
    }
}
