//! Status and load: what the agent reports.

use fedvol_proto::agent::{HoldSummary, ManagedVolumeInfo, StatusReply};

use super::core::Core;

impl Core {
    /// The agent's status: holds, live commits, managed volumes with events (not those whose
    /// asset was deleted: they are history, and listing them made the answer grow with every
    /// workflow ever completed), capacity in use.
    pub fn status(&self) -> StatusReply {
        StatusReply {
            cluster: self.cluster.clone(),
            inventory_version: self.base.version.clone(),
            holds: self
                .ledger
                .holds()
                .values()
                .map(|h| HoldSummary {
                    request_id: h.request_id.clone(),
                    workflow: h.workflow.clone(),
                    expires_ms: h.expires_ms,
                })
                .collect(),
            committed: self
                .ledger
                .commits()
                .values()
                .filter(|c| c.completion.is_none())
                .map(|c| c.request_id.clone())
                .collect(),
            volumes: self
                .ledger
                .volumes()
                .values()
                .filter(|mv| !mv.deleted)
                .map(|mv| ManagedVolumeInfo {
                    name: mv.pv.name.clone(),
                    provisioner: mv.pv.provisioner.clone(),
                    capacity: mv.pv.capacity,
                    phase: format!("{:?}", mv.pv.phase),
                    request_id: mv.pv.claim_ref.as_ref().and_then(|c| c.uid.clone()),
                    events: mv.events.clone(),
                })
                .collect(),
            host_use: self.ledger.host_use(),
            load: self.load(),
            source: self.source.clone(),
        }
    }
}
