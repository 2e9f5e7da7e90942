//! The passive watchers as the surfaces see them: the evidence behind an instance (`explain`)
//! and the watchers' counters. The watchers themselves run beside the core (`crate::watch`).

use super::{Service, ServiceError};
use crate::protocol::codes;
use crate::protocol::{ExplainView, WatchStats};

impl Service {
    /// The evidence behind instance `key` of tmux session `session` (`:unplaced` for agents in
    /// no session).
    pub fn explain(&self, session: &str, key: &str) -> Result<ExplainView, ServiceError> {
        let found = self.core.read(|state| {
            state
                .tracker
                .instance(session, key)
                .map(|(update, updated_at)| (update.clone(), updated_at))
        });
        match found {
            Some((update, updated_at)) => Ok(self.watch.explain(session, key, &update, updated_at)),
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
