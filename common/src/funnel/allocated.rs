//! Per host, what is allocated (the inventory's allocations plus what the agent holds) and what
//! follows from it for planning: what is left of each resource and the host's load, in
//! columns, hosts in inventory order. The host stages and the ranking read the derived
//! columns; the cluster load's sums are kept beside them.
//!
//! The columns built with the inventory are shared by every refreshed copy; a refresh (the
//! agent's holds and commits changing some hosts' allocations) records the changed hosts' rows
//! beside them (a bit per host says which), so it costs the changed hosts and a copy of the
//! bits, not a copy of every column.

use std::sync::Arc;

use super::columns::{Fixed, host_load, load_ratio};
use crate::model::{Host, Inventory};

/// One host's row.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Row {
    /// Allocated cores.
    cpu: u64,
    /// Allocated memory bytes.
    memory: u128,
    /// Allocated instances.
    instances: u64,
    /// Cores left: capacity − allocated, saturating at 0.
    free_cpu: u64,
    /// Memory bytes left: capacity − allocated, saturating at 0.
    free_memory: u128,
    /// Instances left: capacity − allocated, saturating at 0; `u64::MAX` when the host declares
    /// no instance capacity (not limited).
    free_instances: u64,
    /// [`host_load`] of the allocations.
    load: f64,
}

impl Row {
    /// The row of a host of capacity `cap` (cores, memory bytes, instances) with `h`'s
    /// allocations.
    fn of(h: &Host, cap: (u64, u128, u64)) -> Row {
        let r = &h.allocated;
        let free_instances = if cap.2 == 0 {
            u64::MAX
        } else {
            cap.2.saturating_sub(r.instances)
        };
        Row {
            cpu: r.cpu,
            memory: r.memory.0,
            instances: r.instances,
            free_cpu: cap.0.saturating_sub(r.cpu),
            free_memory: cap.1.saturating_sub(r.memory.0),
            free_instances,
            load: host_load((r.cpu, r.memory.0), (cap.0, cap.1)),
        }
    }
}

/// The rows as built with the inventory, column by column.
#[derive(Debug, Clone, Default)]
struct Columns {
    cpu: Vec<u64>,
    memory: Vec<u128>,
    instances: Vec<u64>,
    free_cpu: Vec<u64>,
    free_memory: Vec<u128>,
    free_instances: Vec<u64>,
    load: Vec<f64>,
}

impl Columns {
    fn push(&mut self, r: Row) {
        self.cpu.push(r.cpu);
        self.memory.push(r.memory);
        self.instances.push(r.instances);
        self.free_cpu.push(r.free_cpu);
        self.free_memory.push(r.free_memory);
        self.free_instances.push(r.free_instances);
        self.load.push(r.load);
    }

    fn row(&self, at: usize) -> Option<Row> {
        Some(Row {
            cpu: *self.cpu.get(at)?,
            memory: *self.memory.get(at)?,
            instances: *self.instances.get(at)?,
            free_cpu: *self.free_cpu.get(at)?,
            free_memory: *self.free_memory.get(at)?,
            free_instances: *self.free_instances.get(at)?,
            load: *self.load.get(at)?,
        })
    }
}

/// Every host's allocations, what it has left and its load (see the module documentation).
/// Two are equal when every host's row and the sums are.
#[derive(Debug, Clone, Default)]
pub struct Allocated {
    /// The rows as the inventory was prepared (shared by refreshed copies).
    base: Arc<Columns>,
    /// One bit per host: its row is in `changed` rather than `base`.
    flags: Vec<u64>,
    /// The rows of refreshed hosts whose rows differ from `base`, sorted by position.
    changed: Vec<(usize, Row)>,
    /// Over the powered-on hosts: capacity cores, allocated cores, capacity memory bytes,
    /// allocated memory bytes (the cluster load's sums, kept as allocations change).
    sums: [u128; 4],
}

impl PartialEq for Allocated {
    fn eq(&self, other: &Allocated) -> bool {
        let n = self.base.cpu.len();
        self.sums == other.sums && n == other.base.cpu.len() && (0..n).all(|at| self.row(at) == other.row(at))
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
        let columns = Columns {
            cpu: Vec::with_capacity(n),
            memory: Vec::with_capacity(n),
            instances: Vec::with_capacity(n),
            free_cpu: Vec::with_capacity(n),
            free_memory: Vec::with_capacity(n),
            free_instances: Vec::with_capacity(n),
            load: Vec::with_capacity(n),
        };
        Allocated {
            base: Arc::new(columns),
            ..Allocated::default()
        }
    }

    /// Adds host `h`, of capacity `cap` (cores, memory bytes, instances), powered on or not
    /// (while the columns are being built: before any refresh).
    pub fn push(&mut self, h: &Host, cap: (u64, u128, u64), on: bool) {
        let row = Row::of(h, cap);
        if on {
            let [cc, ac, cm, am] = &mut self.sums;
            *cc += u128::from(cap.0);
            *ac += u128::from(row.cpu);
            *cm += cap.1;
            *am += row.memory;
        }
        Arc::make_mut(&mut self.base).push(row);
    }

    /// Re-reads the allocations of the hosts `hosts` (zone index, host index in the zone) from
    /// `inv`, which has the shape these columns were built from; other hosts keep theirs.
    /// Positions outside `fixed` or `inv` are skipped.
    pub fn refresh(&mut self, fixed: &Fixed, inv: &Inventory, hosts: impl IntoIterator<Item = (usize, usize)>) {
        for (zi, hi) in hosts {
            let (Some(at), Some(h)) = (fixed.at(zi, hi), inv.zones.get(zi).and_then(|z| z.hosts.get(hi))) else {
                continue;
            };
            let (Some(old), Some(base)) = (self.row(at), self.base.row(at)) else {
                continue;
            };
            let new = Row::of(h, fixed.capacity(at));
            if fixed.on(at) {
                let [_, ac, _, am] = &mut self.sums;
                *ac = *ac - u128::from(old.cpu) + u128::from(new.cpu);
                *am = *am - old.memory + new.memory;
            }
            let found = self.changed.binary_search_by_key(&at, |(k, _)| *k);
            match (found, new == base) {
                (Ok(i), true) => {
                    self.changed.remove(i);
                }
                (Ok(i), false) => {
                    if let Some(slot) = self.changed.get_mut(i) {
                        slot.1 = new;
                    }
                }
                (Err(_), true) => {}
                (Err(i), false) => self.changed.insert(i, (at, new)),
            }
            self.set_flag(at, new != base);
        }
    }

    fn set_flag(&mut self, at: usize, on: bool) {
        if self.flags.len() <= at / 64 {
            if !on {
                return;
            }
            self.flags.resize(self.base.cpu.len().div_ceil(64).max(at / 64 + 1), 0);
        }
        if let Some(word) = self.flags.get_mut(at / 64) {
            let bit = 1u64 << (at % 64);
            if on {
                *word |= bit;
            } else {
                *word &= !bit;
            }
        }
    }

    /// The row of host `at` when a refresh changed it.
    fn changed_row(&self, at: usize) -> Option<&Row> {
        let word = self.flags.get(at / 64)?;
        if (word >> (at % 64)) & 1 == 0 {
            return None;
        }
        let i = self.changed.binary_search_by_key(&at, |(k, _)| *k).ok()?;
        self.changed.get(i).map(|(_, r)| r)
    }

    /// Host `at`'s row; `None` past the end.
    fn row(&self, at: usize) -> Option<Row> {
        match self.changed_row(at) {
            Some(r) => Some(*r),
            None => self.base.row(at),
        }
    }

    /// Host `at`'s allocations: (cores, memory bytes, instances); zeros past the end.
    pub fn get(&self, at: usize) -> (u64, u128, u64) {
        self.row(at).map_or((0, 0, 0), |r| (r.cpu, r.memory, r.instances))
    }

    /// True when `cpu` cores, `memory` bytes and `instances` fit in what host `at` has left
    /// (instances only when the host declares an instance capacity); false past the end.
    pub fn fits(&self, at: usize, cpu: u64, memory: u128, instances: u64) -> bool {
        if let Some(r) = self.changed_row(at) {
            return cpu <= r.free_cpu && memory <= r.free_memory && instances <= r.free_instances;
        }
        let b = &*self.base;
        let (Some(fc), Some(fm), Some(fi)) = (b.free_cpu.get(at), b.free_memory.get(at), b.free_instances.get(at))
        else {
            return false;
        };
        cpu <= *fc && memory <= *fm && instances <= *fi
    }

    /// Host `at`'s load ([`host_load`] of its allocations) and free memory bytes; (1, 0) past
    /// the end.
    pub fn load_and_free_memory(&self, at: usize) -> (f64, u128) {
        if let Some(r) = self.changed_row(at) {
            return (r.load, r.free_memory);
        }
        (
            self.base.load.get(at).copied().unwrap_or(1.0),
            self.base.free_memory.get(at).copied().unwrap_or(0),
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
