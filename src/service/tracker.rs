//! The tracker: agent reports (`agent.updated` from hook scripts and `cohost event`), the
//! opensessions metadata routes, focus, the tmux refresh, and the state view.

use super::{Service, ServiceError};
use crate::core::now_ms;
use crate::protocol::codes;
use crate::protocol::{
    Accepted, AgentEventParams, AgentUpdate, EventKind, Field, Focus, Health, LogParams, MetaLog,
    MetaProgress, MetaStatus, SessionParams, SessionView, SetProgressParams, SetStatusParams,
    StateView,
};

/// What a tmux refresh found.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefreshAnswer {
    pub tmux_running: bool,
    pub sessions: usize,
}

impl Service {
    pub fn health(&self, listen: std::net::SocketAddr) -> Health {
        let failed_tasks = self.failed_tasks();
        Health {
            ok: failed_tasks.is_empty(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            seq: self.core.store.head(),
            listen: listen.to_string(),
            machine: self.machine().to_string(),
            federation: self.federation_health(),
            hub: self.hub_health(),
            failed_tasks,
        }
    }

    /// Records an agent's status in the tmux session it names (or whose directory holds its
    /// project).
    /// A report over the API; `tokenless` when it came without the bearer token (the hooks'
    /// routes), which bounds how many such instances a session keeps (see `core`'s cap).
    pub async fn agent_event(
        &self,
        params: AgentEventParams,
        tokenless: bool,
    ) -> Result<Accepted, ServiceError> {
        params.validate()?;
        let session = self
            .tmux
            .resolve(
                params.tmux_session.as_deref(),
                params.project_dir.as_deref(),
            )
            .await
            .map_err(|error| ServiceError::not_found(codes::SESSION_NOT_FOUND, error.message))?;
        let update = AgentUpdate {
            agent: params.agent,
            status: params.status,
            ts: params.ts.unwrap_or_else(now_ms),
            thread_id: params.thread_id,
            thread_name: params.thread_name,
            last_user_prompt: params.last_user_prompt,
            pane_id: params.pane_id,
            liveness: params.liveness,
            source: None,
            tokenless,
        };
        self.record(session, EventKind::AgentUpdated(update)).await
    }

    async fn live_tmux_session(&self, session: &str) -> Result<(), ServiceError> {
        if self.tmux.contains(session).await {
            Ok(())
        } else {
            Err(ServiceError::not_found(
                codes::SESSION_NOT_FOUND,
                format!("no live tmux session is named `{session}`"),
            ))
        }
    }

    async fn record(&self, session: String, kind: EventKind) -> Result<Accepted, ServiceError> {
        let seq = self.core.append(Some(session.clone()), kind).await?;
        Ok(Accepted {
            ok: true,
            seq,
            session,
        })
    }

    pub async fn set_status(&self, params: SetStatusParams) -> Result<Accepted, ServiceError> {
        params.validate()?;
        self.live_tmux_session(&params.session).await?;
        let kind = EventKind::MetaStatus(MetaStatus {
            text: params.text,
            tone: params.tone,
        });
        self.record(params.session, kind).await
    }

    pub async fn set_progress(&self, params: SetProgressParams) -> Result<Accepted, ServiceError> {
        params.validate()?;
        self.live_tmux_session(&params.session).await?;
        let kind = EventKind::MetaProgress(if params.clear {
            MetaProgress {
                clear: true,
                current: None,
                total: None,
                percent: None,
                label: None,
            }
        } else {
            MetaProgress {
                clear: false,
                current: params.current,
                total: params.total,
                percent: params.percent,
                label: params.label,
            }
        });
        self.record(params.session, kind).await
    }

    /// A log line (`notify`: shown as a notification too).
    pub async fn log(&self, params: LogParams, notify: bool) -> Result<Accepted, ServiceError> {
        params.validate()?;
        self.live_tmux_session(&params.session).await?;
        let kind = EventKind::MetaLog(MetaLog {
            message: params.message,
            tone: params.tone,
            source: params.source,
            notify,
        });
        self.record(params.session, kind).await
    }

    pub async fn clear_log(&self, params: SessionParams) -> Result<Accepted, ServiceError> {
        params.validate()?;
        self.live_tmux_session(&params.session).await?;
        self.record(
            params.session,
            EventKind::MetaLogCleared(Default::default()),
        )
        .await
    }

    /// Focus moved to a tmux session (`source`: `api`, or `tmux` from its hook).
    pub async fn focus(
        &self,
        session: String,
        source: Option<String>,
    ) -> Result<Accepted, ServiceError> {
        SessionParams {
            session: session.clone(),
        }
        .validate()?;
        let source = source.unwrap_or_else(|| "api".into());
        if source != "api" && source != "tmux" {
            return Err(ServiceError::field(
                Field::Source,
                format!("source must be `api` or `tmux`, got `{source}`"),
            ));
        }
        self.live_tmux_session(&session).await?;
        self.record(session, EventKind::SessionFocused(Focus { source }))
            .await
    }

    /// Re-reads tmux's sessions (its hooks call this when sessions come and go).
    pub async fn tmux_refresh(&self) -> RefreshAnswer {
        let list = self.tmux.refresh().await;
        RefreshAnswer {
            tmux_running: list.running,
            sessions: list.sessions.len(),
        }
    }

    /// Every tmux session with its agents, status, unseen flag and metadata.
    pub fn state_view(&self) -> StateView {
        let list = self.tmux.get();
        let core_state = self.core.state.read().unwrap_or_else(|e| e.into_inner());
        let tracker = &core_state.tracker;
        let sessions = list
            .sessions
            .iter()
            .map(|session| {
                let mut summary = tracker.session_view(&session.name);
                for instance in &mut summary.agents {
                    super::adopt::control_of(&core_state, instance);
                    instance.adoptable = self.adoptable(instance);
                }
                SessionView {
                    name: session.name.clone(),
                    id: session.id.clone(),
                    dir: session.dir.clone(),
                    windows: session.windows,
                    attached: session.attached,
                    status: summary.status,
                    unseen: summary.unseen,
                    agents: summary.agents,
                    metadata: summary.metadata,
                    machine: None,
                    machine_link: None,
                }
            })
            .collect();
        StateView {
            seq: self.core.store.head(),
            machine: self.machine().to_string(),
            focused_session: tracker.focused().map(str::to_string),
            tmux_running: list.running,
            sessions,
            unplaced: {
                let mut unplaced = tracker
                    .session_view(crate::protocol::UNPLACED_SESSION)
                    .agents;
                for instance in &mut unplaced {
                    super::adopt::control_of(&core_state, instance);
                }
                unplaced
            },
            machines: Vec::new(),
        }
    }
}
