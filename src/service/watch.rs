//! The passive watchers as the surfaces see them: the evidence behind an instance (`explain`)
//! and the watchers' counters. The watchers themselves run beside the core (`crate::watch`).

use super::{Service, ServiceError};
use crate::protocol::codes;
use crate::protocol::{ExplainView, InstanceView, WatchStats};

impl Service {
    /// The evidence behind instance `key` of tmux session `session` (`:unplaced` for agents in
    /// no session).
    /// How the instance is controlled comes with it (`watched`, `adopted` with what cohost
    /// checked when it adopted it, `hosted`) and the session that drives it.
    pub fn explain(&self, session: &str, key: &str) -> Result<ExplainView, ServiceError> {
        let found = self.core.read(|state| {
            let (update, updated_at) = state.tracker.instance(session, key)?;
            let mut instance = InstanceView {
                key: key.to_string(),
                agent: update.agent.clone(),
                status: update.status,
                unseen: false,
                ts: update.ts,
                updated_at,
                thread_id: update.thread_id.clone(),
                thread_name: None,
                last_user_prompt: None,
                pane_id: update.pane_id.clone(),
                liveness: update.liveness,
                source: update.source_name().to_string(),
                control: None,
                session_id: None,
                adoptable: false,
                machine: None,
            };
            super::adopt::control_of(state, &mut instance);
            let adopted = instance
                .session_id
                .as_deref()
                .and_then(|id| state.sessions.get(id))
                .and_then(|record| record.adopted.clone());
            Some((update.clone(), updated_at, instance, adopted))
        });
        match found {
            Some((update, updated_at, instance, adopted)) => {
                let mut view = self.watch.explain(session, key, &update, updated_at);
                view.control = instance.control;
                view.session_id = instance.session_id;
                view.adopted = adopted;
                Ok(view)
            }
            None => Err(ServiceError::not_found(
                codes::INSTANCE_NOT_FOUND,
                format!("session `{session}` has no agent instance `{key}`"),
            )),
        }
    }

    pub fn watch_stats(&self) -> WatchStats {
        self.watch.stats()
    }
}
