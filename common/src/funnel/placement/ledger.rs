//! What this workflow has placed so far: the jobs already on hosts, the new volumes whose
//! storage was already counted against project limits, and node-local volume pins. Later jobs of
//! the same workflow see this (Cloud Assembly's provisioning funnel capacity filters, affinity, node-local pinning).

use std::collections::BTreeSet;

use indexmap::IndexMap;

use crate::decision::HostAllocation;
use crate::model::Resources;

/// One job this workflow has placed.
#[derive(Debug, Clone)]
pub(crate) struct PlacedJob {
    /// Job name.
    pub name: String,
    /// Zone it runs in.
    pub zone: String,
    /// Its hosts (one per node).
    pub hosts: Vec<String>,
    /// What it holds on each host.
    pub per_node: Resources,
    /// It holds its hosts exclusively.
    pub exclusive: bool,
    /// Jobs it must share a host with (its own `affinity.with`).
    pub with: Vec<String>,
    /// Jobs it must not share a host with (its own `affinity.apart_from`).
    pub apart_from: Vec<String>,
    /// Bytes of new-volume storage it counted in its zone.
    pub storage: u128,
}

impl PlacedJob {
    /// True when the job runs on `host` of `zone`.
    pub fn on(&self, zone: &str, host: &str) -> bool {
        self.zone == zone && self.hosts.iter().any(|h| h == host)
    }
}

/// The running record of one `place_jobs` call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger {
    /// Placed jobs, in placement order.
    pub placed: Vec<PlacedJob>,
    /// Keys of new volumes whose size was already counted against a project storage limit.
    pub counted: BTreeSet<String>,
    /// Node-local new volumes: volume key → (zone, host) of the first job that mounts it.
    pub pins: IndexMap<String, (String, String)>,
}

impl Ledger {
    /// Sum of what placed jobs accepted by `keep` hold on `host` of `zone`, and the names of
    /// those jobs.
    pub fn host_use(&self, zone: &str, host: &str, keep: impl Fn(&PlacedJob) -> bool) -> (Resources, Vec<&PlacedJob>) {
        let mut sum = Resources::default();
        let mut jobs = Vec::new();
        for p in self.placed.iter().filter(|p| p.on(zone, host) && keep(p)) {
            add(&mut sum, &p.per_node);
            jobs.push(p);
        }
        (sum, jobs)
    }

    /// (instances, cpu cores, memory bytes) held in `zone` by placed jobs accepted by `keep`.
    pub fn zone_compute(&self, zone: &str, keep: impl Fn(&PlacedJob) -> bool) -> (u64, u64, u128) {
        let mut out = (0u64, 0u64, 0u128);
        for p in self.placed.iter().filter(|p| p.zone == zone && keep(p)) {
            let n = p.hosts.len() as u64;
            out.0 = out.0.saturating_add(n);
            out.1 = out.1.saturating_add(p.per_node.cpu.saturating_mul(n));
            out.2 = out.2.saturating_add(p.per_node.memory.0.saturating_mul(u128::from(n)));
        }
        out
    }

    /// Bytes of new-volume storage this workflow counted in `zone`.
    pub fn zone_storage(&self, zone: &str) -> u128 {
        self.placed
            .iter()
            .filter(|p| p.zone == zone)
            .fold(0u128, |a, p| a.saturating_add(p.storage))
    }

    /// One allocation per host per placed job (resources per node), in placement order.
    pub fn allocations(&self) -> Vec<HostAllocation> {
        self.placed
            .iter()
            .flat_map(|p| {
                p.hosts.iter().map(move |h| HostAllocation {
                    zone: p.zone.clone(),
                    host: h.clone(),
                    job: p.name.clone(),
                    resources: p.per_node.clone(),
                })
            })
            .collect()
    }
}

/// Adds `b` into `a` (saturating).
pub(crate) fn add(a: &mut Resources, b: &Resources) {
    a.cpu = a.cpu.saturating_add(b.cpu);
    a.memory.0 = a.memory.0.saturating_add(b.memory.0);
    a.instances = a.instances.saturating_add(b.instances);
    for (k, v) in &b.devices {
        let e = a.devices.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

/// True when nothing at all is held.
pub(crate) fn is_empty(r: &Resources) -> bool {
    r.cpu == 0 && r.memory.0 == 0 && r.instances == 0 && r.devices.values().all(|v| *v == 0)
}
