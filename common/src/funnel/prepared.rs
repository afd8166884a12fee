//! An inventory prepared for planning: its hosts' numbers in columns ([`super::columns`]), their
//! tags interned as sets ([`super::tagsets`]), the cluster load and an index of its volumes'
//! names ([`super::volume_names`]), built once and read by every plan on that inventory
//! (the funnel's `plan_prepared`). The agent keeps one with its effective inventory and refreshes
//! only the allocations of the hosts its holds and commits use ([`Prepared::refreshed`]);
//! `fedvol plan` builds one per inventory per run.
//!
//! A plan checks that the prepared form has the inventory's version and shape, and prepares the
//! inventory afresh when it does not; it uses the volume index only when the inventory still
//! starts with the indexed volumes. Between reloads, keeping the allocations in step with the
//! inventory's is the caller's part ([`Prepared::refreshed`] after every change).

use std::sync::Arc;

use crate::model::{Inventory, PowerState};

use super::allocated::Allocated;
use super::columns::Fixed;
use super::tagsets::{Interner, TagSets};
use super::volume_names::VolumeNames;

/// One inventory prepared for planning (see the module documentation). Two are equal when
/// their host data, load and version are (the volume index is a lookup aid, not compared).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The inventory's `version` when it was prepared.
    version: String,
    /// Power, capacity, zone boundaries (shared by the refreshed copies).
    fixed: Arc<Fixed>,
    /// Interned tag sets (shared by the refreshed copies).
    tags: Arc<TagSets>,
    /// Allocations per host.
    allocated: Allocated,
    /// The funnel's `cluster_load` of the inventory.
    load: f64,
    /// Where each volume is, by provisioner and name (`None`: prepared for one plan).
    volumes: Option<VolumeNames>,
}

impl PartialEq for Prepared {
    fn eq(&self, other: &Prepared) -> bool {
        (&self.version, &self.fixed, &self.tags, &self.allocated)
            == (&other.version, &other.fixed, &other.tags, &other.allocated)
            && self.load == other.load
    }
}

impl Prepared {
    /// Prepares `inv` (passes over its hosts for the columns and the tag sets, one over its
    /// volumes for their names).
    pub fn new(inv: &Inventory) -> Self {
        let mut prepared = Prepared::hosts_of(inv);
        prepared.volumes = Some(VolumeNames::new(inv));
        prepared
    }

    /// [`Prepared::new`] without the volume index, for one plan (`plan_cluster`): its few
    /// lookups walk the volumes, cheaper than indexing them.
    pub fn for_one_plan(inv: &Inventory) -> Self {
        Prepared::hosts_of(inv)
    }

    /// The host part of [`Prepared::new`], in one pass over the hosts (each host is read once:
    /// at 100k hosts, reading them is most of the cost).
    fn hosts_of(inv: &Inventory) -> Self {
        let mut fixed = Fixed::with_capacity(inv);
        let mut allocated = Allocated::with_capacity(fixed.hosts());
        let mut tags = Interner::default();
        for z in &inv.zones {
            fixed.open_zone();
            for h in &z.hosts {
                let cap = fixed.push(h);
                allocated.push(h, cap, h.power == PowerState::On);
                tags.push(&h.tags);
            }
        }
        fixed.close();
        let load = allocated.load();
        Prepared {
            version: inv.version.clone(),
            fixed: Arc::new(fixed),
            tags: Arc::new(tags.finish()),
            allocated,
            load,
            volumes: None,
        }
    }

    /// The prepared form of `inv`, an inventory whose hosts differ from those `self` was
    /// prepared from only in the allocations of `hosts` (zone index, host index in the zone):
    /// the same fixed columns and tag sets, those hosts' allocations read again, the load
    /// recomputed from the columns; the volume index is kept while `inv` still starts with the
    /// indexed volumes, else built again. The agent calls it each time its holds and commits
    /// change, with the hosts whose allocations may have changed. An `inv` of another version
    /// or shape is prepared afresh.
    pub fn refreshed(&self, inv: &Inventory, hosts: impl IntoIterator<Item = (usize, usize)>) -> Self {
        self.refreshed_with(inv, hosts, |v| v.with_sorted_run(0), None)
    }

    /// [`Prepared::refreshed`] for the agent's inventory, whose volumes at positions `run` are
    /// sorted by provisioner, then name, each once (the volumes it made or bound, after the
    /// inventory's own: `agent::state::merged`), as the caller vouches for `inv` alone: the
    /// volume index covers the volumes before `run.start` only (built again when it covers
    /// another number), and a lookup searches the run by halves instead of walking it
    /// ([`super::volume_names`]). A prepared form refreshed from this one by
    /// [`Prepared::refreshed`] forgets the run.
    pub fn refreshed_sorted(
        &self,
        inv: &Inventory,
        hosts: impl IntoIterator<Item = (usize, usize)>,
        run: std::ops::Range<usize>,
    ) -> Self {
        let mut p = self.refreshed_with(inv, hosts, |v| v.with_sorted_run(0), Some(run.start));
        if let Some(v) = p.volumes.as_mut()
            && v.indexed() == run.start
            && run.end <= inv.volumes.len()
        {
            debug_assert!(v.runs_sorted(inv, run.end), "the volumes vouched sorted are not");
            *v = v.with_sorted_run(run.end);
        }
        p
    }

    /// As [`Prepared::refreshed`], for an `inv` whose volumes are those `self` indexed with the
    /// ones at positions `removed` (ascending) left out and others replaced by volumes of the
    /// same provisioner and name: the volume index is edited ([`VolumeNames::edited`]) instead
    /// of built again (a hash of every volume and a sort). Built again all the same when the
    /// edited index does not match `inv`'s volumes.
    pub fn refreshed_edited(
        &self,
        inv: &Inventory,
        hosts: impl IntoIterator<Item = (usize, usize)>,
        removed: &[usize],
    ) -> Self {
        self.refreshed_with(inv, hosts, |v| v.edited(inv, removed), None)
    }

    /// [`Prepared::refreshed`] with the volume index `edit` makes of the current one, kept
    /// when it still [covers](VolumeNames::covers) `inv` (and indexes `first` volumes, when
    /// given), else built again (over `first` volumes, when given).
    fn refreshed_with(
        &self,
        inv: &Inventory,
        hosts: impl IntoIterator<Item = (usize, usize)>,
        edit: impl FnOnce(&VolumeNames) -> VolumeNames,
        first: Option<usize>,
    ) -> Self {
        if !self.fits(inv) {
            return Prepared::new(inv);
        }
        let mut allocated = self.allocated.clone();
        allocated.refresh(&self.fixed, inv, hosts);
        let load = allocated.load();
        let volumes = match self.volumes.as_ref().map(edit) {
            Some(v) if v.covers(inv) && first.is_none_or(|n| v.indexed() == n) => v,
            _ => VolumeNames::of_first(inv, first.unwrap_or(inv.volumes.len())),
        };
        Prepared {
            version: self.version.clone(),
            fixed: self.fixed.clone(),
            tags: self.tags.clone(),
            allocated,
            load,
            volumes: Some(volumes),
        }
    }

    /// True when `self` was prepared from an inventory with `inv`'s version and as many zones,
    /// each with as many hosts.
    pub fn fits(&self, inv: &Inventory) -> bool {
        self.version == inv.version && self.fixed.same_shape(inv) && self.tags.hosts() == self.fixed.hosts()
    }

    /// Cluster load in [0, 1] (the funnel's `cluster_load` of the inventory).
    pub fn load(&self) -> f64 {
        self.load
    }

    /// Power, capacity and zone boundaries.
    pub fn fixed(&self) -> &Fixed {
        &self.fixed
    }

    /// Allocations per host.
    pub fn allocated(&self) -> &Allocated {
        &self.allocated
    }

    /// Interned tag sets.
    pub fn tags(&self) -> &TagSets {
        &self.tags
    }

    /// The volume index, when `inv` still starts with the volumes it indexed
    /// ([`VolumeNames::covers`], a comparison of pointers).
    pub fn volume_names(&self, inv: &Inventory) -> Option<&VolumeNames> {
        self.volumes.as_ref().filter(|v| v.covers(inv))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::funnel::{ClusterState, PlanRequest, plan_cluster, plan_prepared};
    use crate::synth::{SynthSizes, cluster, workflow};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Refreshing the hosts whose allocations changed gives what preparing the changed
        /// inventory afresh gives, plans on it as on the changed inventory, and refreshing them
        /// back gives the first one again (what the agent relies on between reloads).
        #[test]
        fn refreshing_changed_hosts_equals_preparing_afresh(
            hosts in 1usize..2500,
            changes in prop::collection::vec((any::<prop::sample::Index>(), 0u64..64, 0u128..(1 << 40), 0u64..16), 0..20),
        ) {
            let base = cluster("c", SynthSizes { hosts, provisioners: 1, volumes: 0 });
            let prepared = Prepared::new(&base);
            let mut changed = base.clone();
            let mut touched = Vec::new();
            for (pick, cpu, mem, inst) in &changes {
                let at = pick.index(hosts);
                let (zi, hi) = (at / 1000, at % 1000);
                let h = Arc::make_mut(&mut changed.zones[zi].hosts[hi]);
                h.allocated.cpu = *cpu;
                h.allocated.memory.0 = *mem;
                h.allocated.instances = *inst;
                touched.push((zi, hi));
            }
            let refreshed = prepared.refreshed(&changed, touched.iter().copied());
            prop_assert_eq!(&refreshed, &Prepared::new(&changed));
            // A plan on the refreshed form is the one-off plan of the changed inventory.
            let req = PlanRequest::new("r", workflow(2, 10), "u").with_seed(hosts as u64);
            let state = ClusterState::default();
            prop_assert_eq!(plan_prepared(&changed, &refreshed, &state, &req), plan_cluster(&changed, &state, &req));
            // And back: the same hosts refreshed from the first inventory (the agent's release).
            prop_assert_eq!(refreshed.refreshed(&base, touched), prepared);
            prop_assert_eq!(Prepared::new(&changed).load(), crate::funnel::cluster_load(&changed));
        }
    }

    #[test]
    fn another_version_or_shape_is_prepared_afresh() {
        let sizes = |hosts| SynthSizes {
            hosts,
            provisioners: 1,
            volumes: 0,
        };
        let small = cluster("c", sizes(10));
        let prepared = Prepared::new(&small);
        assert!(prepared.fits(&small));
        let mut bigger = cluster("c", sizes(11));
        assert!(!prepared.fits(&bigger));
        bigger.version = small.version.clone();
        assert!(!prepared.fits(&bigger), "same version, another shape");
        assert_eq!(prepared.refreshed(&bigger, []), Prepared::new(&bigger));
    }
}
