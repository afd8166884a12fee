//! The hosts' numbers laid out column by column: one vector per field (power, capacity cores,
//! memory and instances, allocated cores, memory and instances), hosts in inventory order,
//! zone by zone. The host stages and the ranking scan 100,000 hosts a job; reading a few
//! contiguous vectors instead of one separate allocation per host keeps the scan within what the
//! processor prefetches.
//!
//! [`Fixed`] holds what only an inventory reload changes (power, capacity, where each zone's
//! hosts start); [`Allocated`] what the agent's holds and commits change, refreshed host by host.

use crate::model::{Host, Inventory, PowerState};

/// Per host, what only a new inventory changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fixed {
    /// Position of each zone's first host; one more entry than zones (the total last).
    zone_start: Vec<usize>,
    /// Powered on.
    on: Vec<bool>,
    /// Capacity: cores.
    cpu: Vec<u64>,
    /// Capacity: memory bytes.
    memory: Vec<u128>,
    /// Capacity: instances (0 = not limited).
    instances: Vec<u64>,
}

/// Per host, what is allocated (the inventory's allocations plus what the agent holds), and
/// what follows from it for planning: what is left of each resource and the host's load. The
/// host stages and the ranking read only the derived columns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Allocated {
    /// Cores.
    cpu: Vec<u64>,
    /// Memory bytes.
    memory: Vec<u128>,
    /// Instances.
    instances: Vec<u64>,
    /// Cores left: capacity − allocated, saturating at 0.
    free_cpu: Vec<u64>,
    /// Memory bytes left: capacity − allocated, saturating at 0.
    free_memory: Vec<u128>,
    /// Instances left: capacity − allocated, saturating at 0; `u64::MAX` when the host declares
    /// no instance capacity (not limited).
    free_instances: Vec<u64>,
    /// [`host_load`] of the host's allocations.
    load: Vec<f64>,
    /// Over the powered-on hosts: capacity cores, allocated cores, capacity memory bytes,
    /// allocated memory bytes (the cluster load's sums, kept as allocations change).
    sums: [u128; 4],
}

impl Fixed {
    /// The columns of every host of `inv` (one pass).
    pub fn new(inv: &Inventory) -> Self {
        let mut f = Fixed::with_capacity(inv);
        for z in &inv.zones {
            f.open_zone();
            for h in &z.hosts {
                f.push(h);
            }
        }
        f.close();
        f
    }

    /// Empty columns with room for every host of `inv` (then [`Fixed::open_zone`] per zone,
    /// [`Fixed::push`] per host, [`Fixed::close`] once).
    pub fn with_capacity(inv: &Inventory) -> Self {
        let n = inv.zones.iter().map(|z| z.hosts.len()).sum();
        Fixed {
            zone_start: Vec::with_capacity(inv.zones.len() + 1),
            on: Vec::with_capacity(n),
            cpu: Vec::with_capacity(n),
            memory: Vec::with_capacity(n),
            instances: Vec::with_capacity(n),
        }
    }

    /// Starts the next zone: the hosts pushed from now on are its hosts.
    pub fn open_zone(&mut self) {
        self.zone_start.push(self.on.len());
    }

    /// Adds host `h` to the zone opened last; returns its capacity (cores, memory bytes,
    /// instances).
    pub fn push(&mut self, h: &Host) -> (u64, u128, u64) {
        let cap = &h.capacity;
        self.on.push(h.power == PowerState::On);
        self.cpu.push(cap.cpu);
        self.memory.push(cap.memory.0);
        self.instances.push(cap.instances);
        (cap.cpu, cap.memory.0, cap.instances)
    }

    /// Ends the last zone (after every host was pushed).
    pub fn close(&mut self) {
        self.zone_start.push(self.on.len());
    }

    /// True when `inv` has as many zones, each with as many hosts, as the inventory these
    /// columns were built from.
    pub fn same_shape(&self, inv: &Inventory) -> bool {
        self.zone_start.len() == inv.zones.len() + 1
            && inv
                .zones
                .iter()
                .zip(self.zone_start.windows(2))
                .all(|(z, w)| w[1] - w[0] == z.hosts.len())
    }

    /// Position of host `host` of zone `zone` (inventory order), if there is one.
    pub fn at(&self, zone: usize, host: usize) -> Option<usize> {
        let (start, end) = (*self.zone_start.get(zone)?, *self.zone_start.get(zone + 1)?);
        let at = start.checked_add(host)?;
        (at < end).then_some(at)
    }

    /// Position of the first host of `zone` (the host count past the last zone).
    pub fn zone_start(&self, zone: usize) -> usize {
        self.zone_start.get(zone).copied().unwrap_or(self.on.len())
    }

    /// Hosts in all zones.
    pub fn hosts(&self) -> usize {
        self.on.len()
    }

    /// Host `at` is powered on (false past the end).
    pub fn on(&self, at: usize) -> bool {
        self.on.get(at).copied().unwrap_or(false)
    }

    /// Host `at`'s capacity: (cores, memory bytes, instances); zeros past the end.
    pub fn capacity(&self, at: usize) -> (u64, u128, u64) {
        (
            self.cpu.get(at).copied().unwrap_or(0),
            self.memory.get(at).copied().unwrap_or(0),
            self.instances.get(at).copied().unwrap_or(0),
        )
    }
}

impl Allocated {
    /// What every host of `inv` has allocated (one pass), with `fixed` = [`Fixed::new`] of
    /// `inv`.
    pub fn new(inv: &Inventory, fixed: &Fixed) -> Self {
        let mut a = Allocated::with_capacity(fixed.hosts());
        for (at, h) in inv.zones.iter().flat_map(|z| &z.hosts).enumerate() {
            a.push(h, fixed.capacity(at), fixed.on(at));
        }
        a
    }

    /// Empty columns with room for `n` hosts (then [`Allocated::push`] per host).
    pub fn with_capacity(n: usize) -> Self {
        Allocated {
            cpu: Vec::with_capacity(n),
            memory: Vec::with_capacity(n),
            instances: Vec::with_capacity(n),
            free_cpu: Vec::with_capacity(n),
            free_memory: Vec::with_capacity(n),
            free_instances: Vec::with_capacity(n),
            load: Vec::with_capacity(n),
            sums: [0; 4],
        }
    }

    /// Adds host `h`, of capacity `cap` (cores, memory bytes, instances), powered on or not.
    pub fn push(&mut self, h: &Host, cap: (u64, u128, u64), on: bool) {
        let r = &h.allocated;
        if on {
            let [cc, ac, cm, am] = &mut self.sums;
            *cc += u128::from(cap.0);
            *ac += u128::from(r.cpu);
            *cm += cap.1;
            *am += r.memory.0;
        }
        self.cpu.push(r.cpu);
        self.memory.push(r.memory.0);
        self.instances.push(r.instances);
        let (cpu, memory, instances) = self.derive(cap, (r.cpu, r.memory.0, r.instances));
        self.free_cpu.push(cpu);
        self.free_memory.push(memory);
        self.free_instances.push(instances);
        self.load.push(host_load((r.cpu, r.memory.0), (cap.0, cap.1)));
    }

    /// What is left of capacity `cap` with `used` allocated: (cores, memory bytes, instances;
    /// `u64::MAX` instances without an instance capacity).
    fn derive(&self, cap: (u64, u128, u64), used: (u64, u128, u64)) -> (u64, u128, u64) {
        let instances = if cap.2 == 0 {
            u64::MAX
        } else {
            cap.2.saturating_sub(used.2)
        };
        (cap.0.saturating_sub(used.0), cap.1.saturating_sub(used.1), instances)
    }

    /// Re-reads the allocations of the hosts `hosts` (zone index, host index in the zone) from
    /// `inv`, which has the shape these columns were built from; other hosts keep theirs.
    /// Positions outside `fixed` or `inv` are skipped.
    pub fn refresh(&mut self, fixed: &Fixed, inv: &Inventory, hosts: impl IntoIterator<Item = (usize, usize)>) {
        for (zi, hi) in hosts {
            let (Some(at), Some(h)) = (fixed.at(zi, hi), inv.zones.get(zi).and_then(|z| z.hosts.get(hi))) else {
                continue;
            };
            let r = &h.allocated;
            let cap = fixed.capacity(at);
            let (cpu, memory, instances) = self.derive(cap, (r.cpu, r.memory.0, r.instances));
            let load = host_load((r.cpu, r.memory.0), (cap.0, cap.1));
            let columns = (
                self.cpu.get_mut(at),
                self.memory.get_mut(at),
                self.instances.get_mut(at),
                self.free_cpu.get_mut(at),
                self.free_memory.get_mut(at),
                self.free_instances.get_mut(at),
                self.load.get_mut(at),
            );
            if let (Some(c), Some(m), Some(i), Some(fc), Some(fm), Some(fi), Some(l)) = columns {
                if fixed.on(at) {
                    let [_, ac, _, am] = &mut self.sums;
                    *ac = *ac - u128::from(*c) + u128::from(r.cpu);
                    *am = *am - *m + r.memory.0;
                }
                (*c, *m, *i) = (r.cpu, r.memory.0, r.instances);
                (*fc, *fm, *fi) = (cpu, memory, instances);
                *l = load;
            }
        }
    }

    /// Host `at`'s allocations: (cores, memory bytes, instances); zeros past the end.
    pub fn get(&self, at: usize) -> (u64, u128, u64) {
        (
            self.cpu.get(at).copied().unwrap_or(0),
            self.memory.get(at).copied().unwrap_or(0),
            self.instances.get(at).copied().unwrap_or(0),
        )
    }

    /// True when `cpu` cores, `memory` bytes and `instances` fit in what host `at` has left
    /// (instances only when the host declares an instance capacity); false past the end.
    pub fn fits(&self, at: usize, cpu: u64, memory: u128, instances: u64) -> bool {
        let (Some(fc), Some(fm), Some(fi)) = (
            self.free_cpu.get(at),
            self.free_memory.get(at),
            self.free_instances.get(at),
        ) else {
            return false;
        };
        cpu <= *fc && memory <= *fm && instances <= *fi
    }

    /// Host `at`'s load ([`host_load`] of its allocations) and free memory bytes; (1, 0) past
    /// the end.
    pub fn load_and_free_memory(&self, at: usize) -> (f64, u128) {
        (
            self.load.get(at).copied().unwrap_or(1.0),
            self.free_memory.get(at).copied().unwrap_or(0),
        )
    }

    /// Cluster load in [0, 1] over the powered-on hosts: the larger of allocated / capacity
    /// for cores and for memory (0 without capacity); what the funnel's `cluster_load`
    /// computes from the hosts themselves (from sums kept as hosts are pushed and refreshed).
    pub fn load(&self) -> f64 {
        let [cpu_cap, cpu_alloc, mem_cap, mem_alloc] = self.sums;
        load_ratio(cpu_alloc, cpu_cap).max(load_ratio(mem_alloc, mem_cap))
    }
}

/// Load of one host in [0, 1] as host ranking compares it: the larger of cores and memory
/// `used` / `capacity` (each (cores, memory bytes)); a resource with no capacity counts as
/// full when anything is in use, else empty.
pub fn host_load(used: (u64, u128), capacity: (u64, u128)) -> f64 {
    let ratio = |a: u128, c: u128| match (a, c) {
        (0, _) => 0.0,
        (_, 0) => 1.0,
        (a, c) => (to_f64(a) / to_f64(c)).min(1.0),
    };
    ratio(used.0.into(), capacity.0.into()).max(ratio(used.1, capacity.1))
}

/// `v as f64` (the nearest double), through the hardware conversion when `v` fits in 64 bits
/// (the same double: both round the same integer to nearest).
fn to_f64(v: u128) -> f64 {
    match u64::try_from(v) {
        Ok(v) => v as f64,
        Err(_) => v as f64,
    }
}

/// `allocated / capacity`, at most 1 (0 without capacity): one resource's part of the cluster
/// load.
pub fn load_ratio(allocated: u128, capacity: u128) -> f64 {
    if capacity == 0 {
        0.0
    } else {
        (allocated as f64 / capacity as f64).min(1.0)
    }
}
