//! The agent's state in memory: holds, commits and managed volumes, and the **effective
//! inventory** the funnel plans against: the inventory files plus everything fedvol did since
//! (volumes it provisioned or bound, host capacity held by holds and commits) — so that two
//! requests never get the same capacity or volume (DESIGN §6).

use std::collections::{BTreeMap, HashMap, HashSet};

use fedvol_common::funnel::{ClusterState, VolumeId};
use fedvol_common::model::{Inventory, PersistentVolume, Resources, VolumePhase};

use super::records::{Commit, Hold, ManagedVolume};
use super::store::{Snapshot, volume_key};

/// Holds, commits and managed volumes, keyed for lookup.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    /// Live holds by request id.
    pub holds: BTreeMap<String, Hold>,
    /// Commits by request id.
    pub commits: BTreeMap<String, Commit>,
    /// Managed volumes by [`volume_key`].
    pub volumes: BTreeMap<String, ManagedVolume>,
}

/// Adds `b` into `a`, saturating.
pub fn add_resources(a: &mut Resources, b: &Resources) {
    a.cpu = a.cpu.saturating_add(b.cpu);
    a.memory.0 = a.memory.0.saturating_add(b.memory.0);
    a.instances = a.instances.saturating_add(b.instances);
    for (k, v) in &b.devices {
        let e = a.devices.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

impl Ledger {
    /// The ledger as stored.
    pub fn from_snapshot(s: Snapshot) -> Self {
        Ledger {
            holds: s.holds.into_iter().map(|h| (h.request_id.clone(), h)).collect(),
            commits: s.commits.into_iter().map(|c| (c.request_id.clone(), c)).collect(),
            volumes: s.volumes.into_iter().map(|v| (volume_key(&v.id()), v)).collect(),
        }
    }

    /// A managed volume by id.
    pub fn volume(&self, id: &VolumeId) -> Option<&ManagedVolume> {
        self.volumes.get(&volume_key(id))
    }

    /// The ledger as it would be without request `request_id`: its hold, its commit and the
    /// volumes that commit provisioned or bound are left out (so re-planning a request answers
    /// the question it was first asked, not one where it already holds its own capacity).
    pub fn without(&self, request_id: &str) -> Ledger {
        let mut l = self.clone();
        l.holds.remove(request_id);
        if let Some(c) = l.commits.remove(request_id) {
            for cv in &c.volumes {
                if cv.holding != super::records::Holding::Existing {
                    l.volumes.remove(&volume_key(&cv.id));
                }
            }
        }
        l
    }

    /// True when `request_id` has a hold or a commit.
    pub fn knows(&self, request_id: &str) -> bool {
        self.holds.contains_key(request_id) || self.commits.contains_key(request_id)
    }

    /// Ids of holds whose lease lapsed at `now_ms`, except those in `in_flight` (a commit of
    /// them is running).
    pub fn expired(&self, now_ms: u64, in_flight: &HashSet<String>) -> Vec<String> {
        self.holds
            .values()
            .filter(|h| h.expires_ms <= now_ms && !in_flight.contains(&h.request_id))
            .map(|h| h.request_id.clone())
            .collect()
    }

    /// Capacity held on each host by holds and uncompleted commits, keyed `zone/host`.
    pub fn host_use(&self) -> BTreeMap<String, Resources> {
        let mut out: BTreeMap<String, Resources> = BTreeMap::new();
        let holds = self.holds.values().flat_map(|h| h.allocations().iter());
        let commits = self
            .commits
            .values()
            .filter(|c| c.completion.is_none())
            .flat_map(|c| c.allocations.iter());
        for a in holds.chain(commits) {
            add_resources(out.entry(format!("{}/{}", a.zone, a.host)).or_default(), &a.resources);
        }
        out
    }

    /// The inventory the funnel must see: `base` plus managed volumes (provisioned ones added,
    /// bound or released ones with their new phase, deleted ones removed), plus host capacity
    /// held by holds and uncompleted commits; new volumes of holds appear as `Pending` volumes
    /// (their names are taken). The [`ClusterState`] lists volumes held by holds.
    pub fn effective(&self, base: &Inventory) -> (Inventory, ClusterState) {
        let mut inv = base.clone();
        let mut state = ClusterState::default();

        // Keyed by borrowed names: this runs after every change, over every managed volume
        // (deleted ones included, until their commit is pruned), so it must not allocate per
        // volume.
        let mut index: HashMap<(Option<&str>, &str), usize> = HashMap::with_capacity(base.volumes.len());
        for (i, v) in base.volumes.iter().enumerate() {
            index.insert((v.provisioner.as_deref(), v.name.as_str()), i);
        }
        let mut gone: HashSet<usize> = HashSet::new();
        for mv in self.volumes.values() {
            match index.get(&(mv.pv.provisioner.as_deref(), mv.pv.name.as_str())) {
                Some(&i) if mv.deleted => {
                    gone.insert(i);
                }
                Some(&i) => inv.volumes[i] = mv.pv.clone(),
                None if !mv.deleted => inv.volumes.push(mv.pv.clone()),
                None => {}
            }
        }
        if !gone.is_empty() {
            let mut i = 0;
            inv.volumes.retain(|_| {
                let keep = !gone.contains(&i);
                i += 1;
                keep
            });
        }

        let mut hosts: HashMap<(String, String), (usize, usize)> = HashMap::new();
        for (zi, z) in inv.zones.iter().enumerate() {
            for (hi, h) in z.hosts.iter().enumerate() {
                hosts.insert((z.name.clone(), h.name.clone()), (zi, hi));
            }
        }
        for (key, r) in self.host_use() {
            let Some((zone, host)) = key.split_once('/') else {
                continue;
            };
            if let Some(&(zi, hi)) = hosts.get(&(zone.to_string(), host.to_string())) {
                add_resources(&mut inv.zones[zi].hosts[hi].allocated, &r);
            }
        }

        for h in self.holds.values() {
            for id in h.bound_volumes() {
                state.reserved_volumes.insert(id, h.request_id.clone());
            }
            for (_, nv) in h.new_volumes() {
                let id = VolumeId {
                    provisioner: Some(nv.provisioner.clone()),
                    name: nv.name.clone(),
                };
                state.reserved_volumes.insert(id, h.request_id.clone());
                inv.volumes.push(PersistentVolume {
                    name: nv.name.clone(),
                    provisioner: Some(nv.provisioner.clone()),
                    capacity: nv.capacity,
                    access_modes: nv.access_modes,
                    volume_mode: nv.volume_mode,
                    labels: nv.labels.clone(),
                    annotations: nv.annotations.clone(),
                    phase: VolumePhase::Pending,
                    claim_ref: None,
                    reclaim_policy: nv.reclaim_policy,
                    being_deleted: false,
                    node_affinity: None,
                    origin: Default::default(),
                });
            }
        }
        (inv, state)
    }
}
