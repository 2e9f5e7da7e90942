//! This daemon's machine name (what qualifies its ids across machines) and, when it publishes
//! into NATS JetStream, the publisher's status as health and doctor show it.
//!
//! The publisher (`crate::federation`, above the service) writes the status; the service only
//! reads it, adding the log's head so the backlog is measured when it is asked for.

use std::sync::{Arc, Mutex};

use super::Service;
use crate::protocol::FederationHealth;

/// The publisher's status, shared with it: it sets what it knows (link, acked seq, errors).
pub type FederationStatus = Arc<Mutex<FederationHealth>>;

#[derive(Clone, Default)]
pub(super) struct MachineInfo {
    name: Arc<str>,
    federation: Option<FederationStatus>,
    /// A hub's view of the other machines (`with_hub`).
    pub(super) hub: Option<Arc<super::hub::HubWorld>>,
}

impl Service {
    /// Names this daemon's machine and, when it publishes, shares the publisher's status.
    pub fn with_machine(mut self, name: &str, federation: Option<FederationStatus>) -> Service {
        self.machine = MachineInfo {
            name: name.into(),
            federation,
            hub: self.machine.hub.take(),
        };
        self
    }

    /// This daemon's machine name.
    pub fn machine(&self) -> &str {
        &self.machine.name
    }

    /// The publisher's status with the backlog measured now; `None` without `--nats`.
    pub fn federation_health(&self) -> Option<FederationHealth> {
        let status = self.machine.federation.as_ref()?;
        let mut health = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
        health.last_logged_seq = self.core.store.head();
        health.backlog = health.last_logged_seq.saturating_sub(health.last_acked_seq);
        Some(health)
    }
}

impl Service {
    /// `cohost doctor`'s `machine` and `federation` sections: the name, and the publisher's link,
    /// backlog and last error; a link that is down or an error is a warning (local work goes on).
    pub(super) fn doctor_federation(&self, answer: &mut crate::protocol::DoctorReport) {
        answer.sections.insert(
            "machine".to_string(),
            serde_json::Value::String(self.machine().to_string()),
        );
        let Some(health) = self.federation_health() else {
            return;
        };
        if health.link != "connected" {
            answer.warnings.push(format!(
                "federation: the link to {} is {}; {} events wait to be published",
                health.url, health.link, health.backlog
            ));
        }
        for refused in &health.refused {
            answer
                .issues
                .push(format!("federation: a permission was refused: {refused}"));
        }
        if let Some(error) = health
            .last_error
            .as_ref()
            .filter(|_| health.refused.is_empty())
        {
            answer
                .warnings
                .push(format!("federation: the last publish failed: {error}"));
        }
        answer.sections.insert(
            "federation".to_string(),
            serde_json::to_value(&health).unwrap_or_default(),
        );
    }
}

impl Service {
    /// The publisher's shared status (the one `with_machine` was given).
    pub fn federation_status(&self) -> Option<FederationStatus> {
        self.machine.federation.clone()
    }
}
