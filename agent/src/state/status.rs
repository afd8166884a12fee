//! Status and load: what the agent reports.

use fedvol_common::model::Resources;
use fedvol_proto::agent::{HoldSummary, ManagedVolumeInfo, StatusReply};

use super::core::Core;
use super::ledger::add_resources;

/// What the agent holds right now, for its metrics (read at each scrape, under the lock once).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// The inventory files' version being served.
    pub inventory_version: String,
    /// Live holds.
    pub holds: usize,
    /// Commits being run (between the `committing` mark and the record).
    pub commits_in_flight: usize,
    /// Commits recorded and not completed.
    pub commits_live: usize,
    /// Cluster load in [0, 1], as heartbeats report it.
    pub load: f64,
    /// The batch jobs of live commits by state (every state, 0 included).
    pub jobs: Vec<(fedvol_proto::batch::JobState, u64)>,
    /// Per zone of the inventory (in inventory order): its hosts' capacity, and the capacity
    /// held by holds and live commits.
    pub zones: Vec<ZoneGauges>,
}

/// One zone's capacity and use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZoneGauges {
    /// The zone's name.
    pub zone: String,
    /// The sum of its hosts' capacity.
    pub capacity: Resources,
    /// The capacity held by holds and uncompleted commits.
    pub in_use: Resources,
}

impl Core {
    /// The agent's gauges now ([`Gauges`]). Costs one pass over the hosts and the commits.
    pub fn gauges(&self) -> Gauges {
        let mut used = self.ledger.zone_use();
        let zones = self
            .base
            .zones
            .iter()
            .map(|z| {
                let mut capacity = Resources::default();
                for h in &z.hosts {
                    add_resources(&mut capacity, &h.capacity);
                }
                ZoneGauges {
                    zone: z.name.clone(),
                    capacity,
                    in_use: used.remove(&z.name).unwrap_or_default(),
                }
            })
            .collect();
        Gauges {
            inventory_version: self.base.version.clone(),
            holds: self.ledger.holds().len(),
            commits_in_flight: self.in_flight.len(),
            commits_live: self
                .ledger
                .commits()
                .values()
                .filter(|c| c.completion.is_none())
                .count(),
            load: self.load(),
            jobs: self.jobs_by_state(),
            zones,
        }
    }

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
