//! The hosts' fixed numbers laid out column by column: one vector per field (power, capacity
//! cores, memory and instances), hosts in inventory order, zone by zone, and the per-host load
//! function ranking compares. The host stages and the ranking scan 100,000 hosts a job; reading a few
//! contiguous vectors instead of one separate allocation per host keeps the scan within what the
//! processor prefetches.
//!
//! [`Fixed`] holds what only an inventory reload changes (power, capacity, where each zone's
//! hosts start); [`super::allocated`] what the agent's holds and commits change.

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
