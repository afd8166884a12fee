//! The selection funnel (docs/design.md §2): pure and deterministic. Given one cluster's
//! inventory, its live state and a request, it resolves every volume (Fuzzball's Annotations
//! and Selection, Kubernetes volume binding and provisioning) and places every job that mounts
//! volumes (Cloud Assembly's provisioning funnel), recording each named stage's rejections.

pub mod allocated;
pub mod columns;
pub mod cost;
pub mod identity;
pub mod placement;
pub mod prepared;
pub mod tagsets;
pub mod trace;
pub mod volume;
pub mod volume_names;
pub mod why_not;

use std::collections::BTreeMap;

use crate::decision::{ClusterDecision, ClusterStatus};
use crate::model::Inventory;

pub use crate::request::PlanRequest;
pub use identity::RunAs;
pub use prepared::Prepared;
pub use trace::{Trace, run_filter, seed_from_request_id, seeded_pick};

/// Identifies one persistent volume: its provisioner (storage class; `None` = no class) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct VolumeId {
    /// Provisioner / storage class, `None` for a classless volume.
    pub provisioner: Option<String>,
    /// Volume name.
    pub name: String,
}

/// Live state the inventory files do not show: volumes held by other requests' reservations.
/// (Committed allocations and volumes are merged into the [`Inventory`] by the agent before
/// planning, so the funnel sees one consistent snapshot.)
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ClusterState {
    /// Volumes reserved by a request, with that request's id.
    pub reserved_volumes: BTreeMap<VolumeId, String>,
}

/// Runs the whole funnel for one cluster and returns its part of the decision document.
///
/// `elapsed_ms` is left at 0 (the caller times the call). Never panics on any inventory or
/// workflow the parsers accept. Prepares the inventory first ([`Prepared::for_one_plan`], a
/// pass over its hosts); a caller planning the same inventory more than once keeps a [`Prepared`] and calls
/// [`plan_prepared`].
pub fn plan_cluster(inv: &Inventory, state: &ClusterState, req: &PlanRequest) -> ClusterDecision {
    plan_prepared(inv, &Prepared::for_one_plan(inv), state, req)
}

/// [`plan_cluster`] on an inventory already prepared: `prepared` is [`Prepared::new`] of `inv`
/// (or refreshed to it, [`Prepared::refreshed`]). One of another version or shape than `inv` is
/// not used: the inventory is prepared afresh. The decision is the same either way.
pub fn plan_prepared(inv: &Inventory, prepared: &Prepared, state: &ClusterState, req: &PlanRequest) -> ClusterDecision {
    plan_prepared_as(inv, prepared, state, req, None)
}

/// [`plan_prepared`] on a cluster that runs jobs as their users: `run_as` is the agent's
/// verdict on the request's user ([`identity`]), recorded as stage `identity.user` before
/// every other. An unmapped user's jobs are not placed (each gets the reason as its error)
/// and the cluster is not feasible. `None`: a cluster that runs no job as anyone (the stage
/// is not run), as [`plan_prepared`].
pub fn plan_prepared_as(
    inv: &Inventory,
    prepared: &Prepared,
    state: &ClusterState,
    req: &PlanRequest,
    run_as: Option<&RunAs>,
) -> ClusterDecision {
    let fresh;
    let prepared = if prepared.fits(inv) {
        prepared
    } else {
        fresh = Prepared::for_one_plan(inv);
        &fresh
    };
    let mut trace = Trace::new(req.trace_limit);
    let refused = run_as.and_then(|r| identity::check(&mut trace, &req.user, r));
    let names = prepared.volume_names(inv).filter(|_| !placement::reference());
    let mut volumes = volume::resolve_named(inv, names, state, req, &mut trace);
    let placed = match &refused {
        None => placement::place_prepared(inv, prepared, req, &volumes, &mut trace),
        Some(reason) => placement::Placement {
            jobs: req
                .workflow
                .jobs
                .iter()
                .map(|j| {
                    let d = crate::decision::JobDecision {
                        error: Some(reason.clone()),
                        ..Default::default()
                    };
                    (j.name.clone(), d)
                })
                .collect(),
            ..Default::default()
        },
    };
    // A node-local new volume is created on the host of the first job that mounts it.
    for (key, host) in &placed.volume_hosts {
        if let Some(nv) = volumes.get_mut(key).and_then(|v| v.new_volume.as_mut()) {
            nv.host = Some(host.clone());
        }
    }
    let feasible = refused.is_none()
        && volumes.values().all(|v| v.error.is_none())
        && placed.jobs.values().all(|j| j.error.is_none());
    let holds_named_volume = volumes
        .values()
        .any(|v| v.action == Some(crate::decision::Action::Existing));
    let cost = cost::estimate(inv, req, &volumes, &placed.jobs);
    ClusterDecision {
        status: ClusterStatus::Answered,
        elapsed_ms: 0.0,
        inventory_version: Some(inv.version.clone()),
        feasible,
        volumes,
        jobs: placed.jobs,
        trace: trace.into_stages(),
        error: None,
        soft_matched: placed.soft_matched,
        load: if placement::reference() {
            cluster_load(inv)
        } else {
            prepared.load()
        },
        holds_named_volume,
        allocations: placed.allocations,
        resource_manager: None,
        cost,
        summarized: false,
    }
}

/// Cluster load in [0, 1]: over all powered-on hosts, the larger of allocated/capacity for cpu
/// and for memory (0 for a cluster with no capacity).
pub fn cluster_load(inv: &Inventory) -> f64 {
    let (mut cpu_cap, mut cpu_alloc, mut mem_cap, mut mem_alloc) = (0u128, 0u128, 0u128, 0u128);
    for h in inv.zones.iter().flat_map(|z| &z.hosts) {
        if h.power != crate::model::PowerState::On {
            continue;
        }
        cpu_cap += u128::from(h.capacity.cpu);
        cpu_alloc += u128::from(h.allocated.cpu);
        mem_cap += h.capacity.memory.0;
        mem_alloc += h.allocated.memory.0;
    }
    columns::load_ratio(cpu_alloc, cpu_cap).max(columns::load_ratio(mem_alloc, mem_cap))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::synth::{SynthSizes, cluster, workflow};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The whole funnel: never panics, deterministic for a fixed seed, the same on placement's
        /// reference path and on an inventory prepared with its volume index, and never gives a host more than its free capacity (allocated + this
        /// plan's allocations <= capacity).
        #[test]
        fn whole_funnel_is_deterministic_and_within_capacity(
            hosts in 0usize..400,
            provisioners in 1usize..6,
            volumes in 0usize..300,
            jobs in 0usize..5,
            size in 0u128..100,
            seed in any::<u64>(),
        ) {
            let inv = cluster("p", SynthSizes { hosts, provisioners, volumes });
            let req = PlanRequest::new(format!("r-{seed}"), workflow(jobs, size), "u")
                .with_seed(seed)
                .with_trace_limit(10);
            let a = plan_cluster(&inv, &ClusterState::default(), &req);
            let b = plan_cluster(&inv, &ClusterState::default(), &req);
            prop_assert_eq!(&a, &b);
            let prepared = Prepared::new(&inv);
            prop_assert!(prepared.volume_names(&inv).is_some(), "the volume index is used");
            prop_assert_eq!(&plan_prepared(&inv, &prepared, &ClusterState::default(), &req), &a);
            placement::REFERENCE.set(true);
            let reference = plan_cluster(&inv, &ClusterState::default(), &req);
            placement::REFERENCE.set(false);
            prop_assert_eq!(&a, &reference);
            for h in inv.zones.iter().flat_map(|z| &z.hosts) {
                let (mut cpu, mut mem) = (h.allocated.cpu, h.allocated.memory.0);
                for al in a.allocations.iter().filter(|al| al.host == h.name) {
                    cpu += al.resources.cpu;
                    mem += al.resources.memory.0;
                }
                // Synthetic jobs are independent, so all of them run at once.
                prop_assert!(cpu <= h.capacity.cpu, "host {} cpu {} > {}", h.name, cpu, h.capacity.cpu);
                prop_assert!(mem <= h.capacity.memory.0, "host {} memory over capacity", h.name);
            }
            prop_assert_eq!(a.feasible, a.volumes.values().all(|v| v.error.is_none()) && a.jobs.values().all(|j| j.error.is_none()));
        }
    }

    /// Regression: `plan_cluster` listed `DEFAULT_TRACE_LIMIT` candidates whatever the request
    /// asked (so `--trace-limit` and `why_not`'s full listing had no effect).
    #[test]
    fn the_requests_trace_limit_bounds_each_stages_listing() {
        let inv = cluster(
            "p",
            SynthSizes {
                hosts: 300,
                provisioners: 4,
                volumes: 50,
            },
        );
        let mut req = PlanRequest::new("r", workflow(2, 10), "u")
            .with_seed(1)
            .with_trace_limit(3);
        let short = plan_cluster(&inv, &ClusterState::default(), &req);
        let busiest = short.trace.iter().map(|t| t.considered - t.passed).max().unwrap_or(0);
        assert!(
            busiest > 3,
            "the synthetic cluster rejects more than 3 hosts in some stage"
        );
        for t in &short.trace {
            assert!(t.rejected.len() <= 3, "{}: {} listed", t.stage, t.rejected.len());
            assert_eq!(t.rejected.len() + t.omitted, t.considered - t.passed, "{}", t.stage);
        }
        req.trace_limit = 0;
        let full = plan_cluster(&inv, &ClusterState::default(), &req);
        for t in &full.trace {
            assert_eq!(t.rejected.len(), t.considered - t.passed, "{}: all listed", t.stage);
            assert_eq!(t.omitted, 0);
        }
        assert_eq!(
            (&short.volumes, &short.jobs),
            (&full.volumes, &full.jobs),
            "the limit changes no choice"
        );
    }
}
