//! Adopting an agent a person started by hand, and giving it back: the tracker instance and
//! what the passive watcher knows of it (its process, files), checked here for what the
//! service can tell — a session drives it already, it runs in no pane, no runtime adopts that
//! agent — then handed to the runtime that adopts it, which checks the pane and the process
//! again before anything is typed. How each instance is controlled (`watched`, `adopted`,
//! `hosted`) for the state view and explain is decided here too.

use super::{Service, ServiceError};
use crate::core::State;
use crate::protocol::codes;
use crate::protocol::{Control, HostedSessionView, InstanceView, SOURCE_HOSTED};
use crate::runtime::AdoptRequest;

impl Service {
    /// `POST /api/state/{session}/agents/{key}/adopt`: a session drives the instance from now
    /// on, in its own pane.
    pub async fn adopt(
        &self,
        tmux_session: &str,
        key: &str,
    ) -> Result<HostedSessionView, ServiceError> {
        let (found, driver) = self.core.read(|state| {
            let found = state
                .tracker
                .instance(tmux_session, key)
                .map(|(update, _)| update.clone());
            let driver = match &found {
                Some(update) => update
                    .thread_id
                    .as_deref()
                    .and_then(|thread| state.sessions.driving(thread)),
                // Right after an adoption the watched instance gives way to the session's own
                // (a moment with neither in the tracker): the same instance, adopted in the
                // same tmux session, is still driven.
                None => key
                    .split_once(':')
                    .and_then(|(_, thread)| state.sessions.driving(thread))
                    .filter(|record| {
                        record.adopted.as_ref().is_some_and(|adopted| {
                            adopted.key == key && adopted.tmux_session == tmux_session
                        })
                    }),
            }
            .map(|record| record.id.clone());
            (found, driver)
        });
        if let Some(driver) = driver {
            return Err(ServiceError::conflict(
                codes::ALREADY_DRIVEN,
                format!("session `{driver}` drives {key} already"),
            ));
        }
        let Some(update) = found else {
            return Err(ServiceError::not_found(
                codes::INSTANCE_NOT_FOUND,
                format!("session `{tmux_session}` has no agent instance `{key}`"),
            ));
        };
        let not_adoptable = |message: String| ServiceError::conflict(codes::NOT_ADOPTABLE, message);
        if update.source.as_deref() == Some(SOURCE_HOSTED) {
            return Err(not_adoptable(format!(
                "{key} was reported by a cohost session that has ended; only a watched agent can be adopted"
            )));
        }
        if !update.source_name().starts_with("watcher:") {
            return Err(not_adoptable(format!(
                "{key} was reported over the API: cohost cannot tell which process it is; only a watched agent can be adopted"
            )));
        }
        let Some(host) = self.hosts.adopter(&update.agent) else {
            return Err(ServiceError::new(
                super::ErrorKind::Invalid,
                codes::UNSUPPORTED,
                format!(
                    "adopting a watched {} is not supported (cohost adopts claude-code, codex, opencode and pi instances)",
                    update.agent
                ),
            ));
        };
        let Some(thread) = update.thread_id.clone() else {
            return Err(not_adoptable(format!(
                "{key} names no session of its agent"
            )));
        };
        let Some(pane_id) = update.pane_id.clone() else {
            return Err(not_adoptable(format!(
                "{key} runs in no tmux pane cohost can see (placed by its directory, or unplaced): there is nowhere to type"
            )));
        };
        let watched = self.watch.watched(key);
        let request = AdoptRequest {
            key: key.to_string(),
            agent: update.agent.clone(),
            agent_session_id: thread,
            tmux_session: tmux_session.to_string(),
            pane_id,
            pid: watched.as_ref().and_then(|w| w.pid),
            cwd: watched.as_ref().and_then(|w| w.cwd.clone()),
            files: watched.map(|w| w.files).unwrap_or_default(),
        };
        let view = host.adopt(request).await?;
        // The watcher's instance gives way to the session's.
        self.watch.replace(key);
        Ok(view)
    }

    /// `POST /api/sessions/{id}/disown`: an adopted agent is given back — the session ends, the
    /// agent keeps running and the watcher shows it again.
    pub async fn disown(&self, id: &str) -> Result<HostedSessionView, ServiceError> {
        let view = self.host_of(id)?.disown(id).await?;
        self.give_back(&view);
        Ok(view)
    }

    /// `POST /api/sessions/{id}/rehome`: an adopted agent moves under cohost's own host in its
    /// pane (codex: its thread resumed on cohost's app-server, a `codex --remote` TUI in the
    /// pane; claude: `claude --resume` under cohost's runner with its hooks); the session goes
    /// on, hosted, with the same id and thread.
    pub async fn rehome(&self, id: &str) -> Result<HostedSessionView, ServiceError> {
        Ok(self.host_of(id)?.rehome(id).await?)
    }

    /// The watcher shows an adopted agent whose session ended (given back, its pane gone, its
    /// exit) again: the key it was adopted under, and the one it runs under now (after `/clear`
    /// the agent runs another session than the one adopted).
    fn give_back(&self, view: &HostedSessionView) {
        let Some(adopted) = &view.adopted else {
            return;
        };
        self.watch.replace(&adopted.key);
        if let (Some((agent, _)), Some(thread)) =
            (adopted.key.split_once(':'), view.thread_id.as_deref())
        {
            let now = format!("{agent}:{thread}");
            if now != adopted.key {
                self.watch.replace(&now);
            }
        }
    }

    /// Runs until `cancel`: each `session.closed` of an adopted session (its agent exited or its
    /// pane went, which the runtime sees on its own) has the watcher show the agent again.
    pub async fn give_back_ended_adoptions(self, cancel: tokio_util::sync::CancellationToken) {
        let mut events = self.core.subscribe();
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                event = events.recv() => event,
            };
            let event = match event {
                Ok(event) => event,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if !event.json.contains(r#""type":"session.closed""#) {
                continue;
            }
            let Some(id) = event.session.as_deref() else {
                continue;
            };
            if let Some(view) = self
                .core
                .read(|state| state.session_view(id))
                .filter(|view| view.adopted.is_some())
            {
                self.give_back(&view);
            }
        }
    }

    /// Whether `adopt` may take `instance` (its `control` set): a watched instance of an agent a
    /// runtime adopts, naming its agent's session, in a pane, not exited. What `adopt` checks
    /// again, with the pane and the process, before anything is typed.
    pub(super) fn adoptable(&self, instance: &InstanceView) -> bool {
        instance.control == Some(Control::Watched)
            && instance.thread_id.is_some()
            && instance.pane_id.is_some()
            && instance.liveness != Some(crate::protocol::Liveness::Exited)
            && self.hosts.adopter(&instance.agent).is_some()
    }

    /// The cohost session (hosted or adopted, not closed) that drives the agent session
    /// `agent_session_id` (Claude's `session_id`), if one does: where what a hook reports about
    /// that agent session belongs.
    pub fn session_driving(&self, agent_session_id: &str) -> Option<String> {
        self.core.read(|state| {
            state
                .sessions
                .driving(agent_session_id)
                .map(|record| record.id.clone())
        })
    }
}

/// How cohost knows `instance`, and the session that drives it: a watcher's instance is
/// `watched`; one a session reports is that session's (`adopted` or `hosted`); one reported over
/// the API has none.
pub(super) fn control_of(state: &State, instance: &mut InstanceView) {
    if instance.source.starts_with("watcher:") {
        instance.control = Some(Control::Watched);
    } else if instance.source == SOURCE_HOSTED {
        let record = instance
            .thread_id
            .as_deref()
            .and_then(|thread| state.sessions.driving(thread));
        instance.control = Some(record.map_or(Control::Hosted, |r| r.control()));
        instance.session_id = record.map(|r| r.id.clone());
    }
}
