//! The agent's state in memory: holds, commits and managed volumes, and the **effective
//! inventory** the funnel plans against: the inventory files plus everything fedvol did since
//! (volumes it provisioned or bound, host capacity held by holds and commits) — so that two
//! requests never get the same capacity or volume (docs/design.md §6).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use fedvol_common::decision::HostAllocation;
use fedvol_common::funnel::{ClusterState, VolumeId};
use fedvol_common::model::{Host, Inventory, PersistentVolume, Resources, VolumePhase};

use super::records::{Commit, Hold, ManagedVolume};
use super::store::{Snapshot, volume_key};

/// Holds, commits and managed volumes, keyed for lookup, and the capacity they take per host.
///
/// Invariant: `in_use` is always the sum of the allocations of every hold and every commit not
/// yet completed; holds and commits change only through [`Ledger::put_hold`],
/// [`Ledger::remove_hold`], [`Ledger::put_commit`] and [`Ledger::remove_commit`], which keep it
/// so. (Recomputing it at each change cost time in proportion to the live commits: with
/// thousands of running workflows, most of an agent's time.)
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    holds: BTreeMap<String, Hold>,
    commits: BTreeMap<String, Commit>,
    volumes: BTreeMap<String, ManagedVolume>,
    /// Changes whenever `volumes` changes (so the merged volume list can be cached).
    volumes_generation: u64,
    /// Capacity taken by holds and live commits: zone → host → resources.
    in_use: HashMap<String, HashMap<String, Resources>>,
}

/// Positions in an inventory: hosts (zone name → host name → (zone index, host index)) and
/// volumes (provisioner name, `""` for none → volume name → index). Built once per inventory
/// ([`InventoryIndex::new`]) and reused by every rebuild.
#[derive(Debug, Default, Clone)]
pub struct InventoryIndex {
    hosts: HashMap<String, HashMap<String, (usize, usize)>>,
    volumes: HashMap<String, HashMap<String, usize>>,
}

impl InventoryIndex {
    /// The index of `inv`'s hosts and volumes.
    pub fn new(inv: &Inventory) -> Self {
        let mut hosts: HashMap<String, HashMap<String, (usize, usize)>> = HashMap::new();
        for (zi, z) in inv.zones.iter().enumerate() {
            let zone = hosts.entry(z.name.clone()).or_default();
            for (hi, h) in z.hosts.iter().enumerate() {
                zone.insert(h.name.clone(), (zi, hi));
            }
        }
        let mut volumes: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for (i, v) in inv.volumes.iter().enumerate() {
            let p = v.provisioner.clone().unwrap_or_default();
            volumes.entry(p).or_default().entry(v.name.clone()).or_insert(i);
        }
        InventoryIndex { hosts, volumes }
    }

    /// Where host `host` of zone `zone` is, if the inventory has it.
    pub fn get(&self, zone: &str, host: &str) -> Option<(usize, usize)> {
        self.hosts.get(zone).and_then(|z| z.get(host)).copied()
    }

    /// Where volume `name` of `provisioner` is, if the inventory has it.
    pub fn volume(&self, provisioner: Option<&str>, name: &str) -> Option<usize> {
        self.volumes
            .get(provisioner.unwrap_or(""))
            .and_then(|p| p.get(name))
            .copied()
    }
}

/// Subtracts `b` from `a`, saturating at 0.
pub fn sub_resources(a: &mut Resources, b: &Resources) {
    a.cpu = a.cpu.saturating_sub(b.cpu);
    a.memory.0 = a.memory.0.saturating_sub(b.memory.0);
    a.instances = a.instances.saturating_sub(b.instances);
    for (k, v) in &b.devices {
        if let Some(e) = a.devices.get_mut(k) {
            *e = e.saturating_sub(*v);
        }
    }
    a.devices.retain(|_, v| *v > 0);
}

fn is_zero(r: &Resources) -> bool {
    r.cpu == 0 && r.memory.0 == 0 && r.instances == 0 && r.devices.is_empty()
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
        let mut l = Ledger {
            volumes: s.volumes.into_iter().map(|v| (volume_key(&v.id()), v)).collect(),
            ..Ledger::default()
        };
        for h in s.holds {
            l.put_hold(h);
        }
        for c in s.commits {
            l.put_commit(c);
        }
        l
    }

    /// Everything the ledger holds, as the store loads it.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            holds: self.holds.values().cloned().collect(),
            commits: self.commits.values().cloned().collect(),
            volumes: self.volumes.values().cloned().collect(),
        }
    }

    /// Managed volumes by [`volume_key`].
    pub fn volumes(&self) -> &BTreeMap<String, ManagedVolume> {
        &self.volumes
    }

    /// Adds or replaces a managed volume.
    pub fn put_volume(&mut self, mv: ManagedVolume) {
        self.volumes.insert(volume_key(&mv.id()), mv);
        self.volumes_generation += 1;
    }

    /// Removes the managed volume of `key` ([`volume_key`]).
    pub fn remove_volume(&mut self, key: &str) -> Option<ManagedVolume> {
        self.volumes_generation += 1;
        self.volumes.remove(key)
    }

    /// A number that changes whenever the managed volumes change.
    pub fn volumes_generation(&self) -> u64 {
        self.volumes_generation
    }

    /// Live holds by request id.
    pub fn holds(&self) -> &BTreeMap<String, Hold> {
        &self.holds
    }

    /// Commits (live and completed) by request id.
    pub fn commits(&self) -> &BTreeMap<String, Commit> {
        &self.commits
    }

    fn count(&mut self, allocations: &[HostAllocation], add: bool) {
        for a in allocations {
            let hosts = self.in_use.entry(a.zone.clone()).or_default();
            if add {
                add_resources(hosts.entry(a.host.clone()).or_default(), &a.resources);
            } else if let Some(r) = hosts.get_mut(&a.host) {
                sub_resources(r, &a.resources);
                if is_zero(r) {
                    hosts.remove(&a.host);
                }
            }
        }
    }

    /// Adds (or replaces) the hold of its request id.
    pub fn put_hold(&mut self, hold: Hold) {
        self.remove_hold(&hold.request_id);
        self.count(&hold.reply.decision.allocations, true);
        self.holds.insert(hold.request_id.clone(), hold);
    }

    /// Removes the hold of `request_id`, returning it.
    pub fn remove_hold(&mut self, request_id: &str) -> Option<Hold> {
        let h = self.holds.remove(request_id)?;
        self.count(&h.reply.decision.allocations, false);
        Some(h)
    }

    /// Adds (or replaces) the commit of its request id; its allocations count until it is
    /// completed.
    pub fn put_commit(&mut self, commit: Commit) {
        self.remove_commit(&commit.request_id);
        if commit.completion.is_none() {
            self.count(&commit.allocations, true);
        }
        self.commits.insert(commit.request_id.clone(), commit);
    }

    /// Removes the commit of `request_id`, returning it.
    pub fn remove_commit(&mut self, request_id: &str) -> Option<Commit> {
        let c = self.commits.remove(request_id)?;
        if c.completion.is_none() {
            self.count(&c.allocations, false);
        }
        Some(c)
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
        l.remove_hold(request_id);
        if let Some(c) = l.remove_commit(request_id) {
            for cv in &c.volumes {
                if cv.holding != super::records::Holding::Existing {
                    l.remove_volume(&volume_key(&cv.id));
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

    /// Capacity held in each zone by holds and uncompleted commits (the sum over its hosts).
    pub fn zone_use(&self) -> BTreeMap<String, Resources> {
        self.in_use
            .iter()
            .map(|(zone, hosts)| {
                let mut sum = Resources::default();
                for r in hosts.values() {
                    add_resources(&mut sum, r);
                }
                (zone.clone(), sum)
            })
            .collect()
    }

    /// Where the hosts holds and uncompleted commits hold capacity on are in the inventory
    /// `index` describes (zone index, host index in the zone): the hosts whose allocations
    /// [`Ledger::effective`] changes. Hosts the inventory lacks are left out.
    pub fn hosts_in_use(&self, index: &InventoryIndex) -> Vec<(usize, usize)> {
        self.in_use
            .iter()
            .flat_map(|(zone, hosts)| hosts.keys().filter_map(|host| index.get(zone, host)))
            .collect()
    }

    /// Capacity held on each host by holds and uncompleted commits, keyed `zone/host`.
    pub fn host_use(&self) -> BTreeMap<String, Resources> {
        self.in_use
            .iter()
            .flat_map(|(zone, hosts)| hosts.iter().map(move |(host, r)| (format!("{zone}/{host}"), r.clone())))
            .collect()
    }

    /// The inventory the funnel must see: `base` plus managed volumes (provisioned ones added,
    /// bound or released ones with their new phase, deleted ones removed), plus host capacity
    /// held by holds and uncompleted commits; new volumes of holds appear as `Pending` volumes
    /// (their names are taken). The [`ClusterState`] lists volumes held by holds.
    ///
    /// `index` is [`InventoryIndex::new`] of `base`. Cost: one pointer per host (hosts are shared
    /// with `base`; only hosts with capacity in use are copied) plus the managed volumes.
    pub fn effective(&self, base: &Inventory, index: &InventoryIndex) -> (Inventory, ClusterState) {
        self.effective_with(base, index, self.merged_volumes(base, index))
    }

    /// `base`'s volumes with the managed volumes merged in (provisioned ones added, bound or
    /// released ones with their new phase, deleted ones removed): what [`Ledger::effective`]
    /// starts from. It changes only when [`Ledger::volumes_generation`] does, so callers may
    /// keep it between changes of holds and commits.
    pub fn merged_volumes(&self, base: &Inventory, index: &InventoryIndex) -> Vec<Arc<PersistentVolume>> {
        self.merged_parts(base, index).0
    }

    /// [`Ledger::merged_volumes`], with what editing it later needs
    /// ([`super::merged::Merged`]): the positions in `base` whose record is deleted (left
    /// out), and the keys of the live records of volumes `base` lacks, in key order (the
    /// list's tail). One walk over the records.
    pub fn merged_parts(
        &self,
        base: &Inventory,
        index: &InventoryIndex,
    ) -> (Vec<Arc<PersistentVolume>>, BTreeSet<usize>, Vec<String>) {
        let mut volumes = base.volumes.clone();
        let mut gone = BTreeSet::new();
        let mut tail = Vec::new();
        for (key, mv) in &self.volumes {
            match index.volume(mv.pv.provisioner.as_deref(), &mv.pv.name) {
                Some(i) if mv.deleted => {
                    gone.insert(i);
                }
                Some(i) => volumes[i] = mv.pv.clone(),
                None if !mv.deleted => {
                    volumes.push(mv.pv.clone());
                    tail.push(key.clone());
                }
                None => {}
            }
        }
        if !gone.is_empty() {
            let mut i = 0;
            volumes.retain(|_| {
                let keep = !gone.contains(&i);
                i += 1;
                keep
            });
        }
        (volumes, gone, tail)
    }

    /// [`Ledger::effective`] from already merged volumes ([`Ledger::merged_volumes`]).
    pub fn effective_with(
        &self,
        base: &Inventory,
        index: &InventoryIndex,
        volumes: Vec<Arc<PersistentVolume>>,
    ) -> (Inventory, ClusterState) {
        let mut inv = Inventory {
            volumes,
            ..base.clone_without_volumes()
        };
        for (zone, used) in &self.in_use {
            for (host, r) in used {
                if let Some((zi, hi)) = index.get(zone, host) {
                    add_resources(&mut Arc::make_mut(&mut inv.zones[zi].hosts[hi]).allocated, r);
                }
            }
        }
        let state = self.held_volumes(&mut inv.volumes);
        (inv, state)
    }

    /// [`Ledger::effective_with`], made by editing `prev` in place instead of copying every
    /// host of `base`: `prev` must be the effective inventory of `base` that an earlier state of
    /// this ledger gave (by either), with its volumes already the merged ones of this ledger
    /// ([`Ledger::merged_volumes`], without what holds add: they are added here), and `hosts`
    /// (zone index, host index) every host whose
    /// capacity in use may differ since: the hosts that state used and the hosts this one uses
    /// ([`Ledger::hosts_in_use`] of each; repeats are harmless). Those hosts are read again
    /// from `base`, plus what this ledger holds on them; every other host keeps its pointer,
    /// which is `base`'s. The result equals what `effective_with` gives (a randomized test
    /// holds them equal). At 20,000 hosts, copying the host list and dropping the old one
    /// twice per commit was 36% of an agent's CPU per submit (`perf record`, BENCHMARKS.md).
    pub fn effective_patched(
        &self,
        prev: &mut Inventory,
        base: &Inventory,
        index: &InventoryIndex,
        hosts: impl IntoIterator<Item = (usize, usize)>,
    ) -> ClusterState {
        for (zi, hi) in hosts {
            let (Some(zone), Some(slot)) = (
                base.zones.get(zi),
                prev.zones.get_mut(zi).and_then(|z| z.hosts.get_mut(hi)),
            ) else {
                continue;
            };
            let Some(host) = zone.hosts.get(hi) else { continue };
            // What `effective_with` adds to this position: the use the index places here.
            let used = self
                .in_use
                .get(&zone.name)
                .and_then(|hosts| hosts.get(&host.name))
                .filter(|_| index.get(&zone.name, &host.name) == Some((zi, hi)));
            *slot = match used {
                Some(r) => {
                    let mut h = Host::clone(host);
                    add_resources(&mut h.allocated, r);
                    Arc::new(h)
                }
                None => host.clone(),
            };
        }
        self.held_volumes(&mut prev.volumes)
    }

    /// The volumes holds reserve, as the [`ClusterState`] lists them; each hold's new volumes
    /// are appended to `volumes` as `Pending` (their names are taken).
    fn held_volumes(&self, volumes: &mut Vec<Arc<PersistentVolume>>) -> ClusterState {
        let mut state = ClusterState::default();
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
                volumes.push(Arc::new(nv.to_persistent_volume(VolumePhase::Pending, None)));
            }
        }
        state
    }
}
