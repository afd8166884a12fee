//! Job placement (Cloud Assembly's provisioning funnel, docs/design.md §2 "Placement"): every job or service (with or without volumes) is
//! placed, in workflow order, within the workflow's project, through named stages that each
//! record every rejected zone or host with all its reasons:
//!
//! `zone.project` → `zone.power` → `zone.limits` → `zone.profiles` (module `zones`) →
//! `host.power` → `host.hard_constraints` → `host.affinity` → `host.anti_affinity` →
//! `host.network` → `host.storage` (module `hosts`) → `host.capacity` (module `capacity`) → `zone.multi_host`
//! (hosts ranked by soft constraints met, then the zone's placement policy) → `zone.choice` →
//! `host.choice` (the chosen zone's other fitting hosts and why they were not taken; module
//! `select`).
//!
//! Jobs placed earlier in the same workflow count: their capacity on hosts (when they may run
//! concurrently), their usage against project limits, the new volumes whose storage they
//! counted, the node-local volumes they pinned, and affinity rules naming them.

/// The placement stages' names, as they appear in the trace (candidates: zone names for
/// `zone.*` stages, `zone/host` for `host.*` stages).
pub mod stages {
    /// Cloud Assembly's provisioning funnel step 1: zones assigned to the workflow's project.
    pub const ZONE_PROJECT: &str = "zone.project";
    /// Cloud Assembly's provisioning funnel step 2.1: zones with at least one powered-on host.
    pub const ZONE_POWER: &str = "zone.power";
    /// Cloud Assembly's provisioning funnel step 2.2: zones within the project's limits (instances, memory, cpu, storage).
    pub const ZONE_LIMITS: &str = "zone.limits";
    /// Cloud Assembly's provisioning funnel steps 2.3-2.5: image, flavor and storage profiles.
    pub const ZONE_PROFILES: &str = "zone.profiles";
    /// Cloud Assembly's provisioning funnel step 3.1: powered-on hosts.
    pub const HOST_POWER: &str = "host.power";
    /// Cloud Assembly's provisioning funnel step 3.2: hard constraints on host tags united with zone tags.
    pub const HOST_HARD_CONSTRAINTS: &str = "host.hard_constraints";
    /// Cloud Assembly's provisioning funnel step 3.3: affinity with other jobs of the workflow.
    pub const HOST_AFFINITY: &str = "host.affinity";
    /// Cloud Assembly's provisioning funnel step 3.4: anti-affinity with other jobs of the workflow.
    pub const HOST_ANTI_AFFINITY: &str = "host.anti_affinity";
    /// Cloud Assembly's provisioning funnel: the job's networks.
    pub const HOST_NETWORK: &str = "host.network";
    /// Cloud Assembly's provisioning funnel: storage reachability (a node-local volume pins its host).
    pub const HOST_STORAGE: &str = "host.storage";
    /// Cloud Assembly's provisioning funnel step 3.6: free capacity for the job.
    pub const HOST_CAPACITY: &str = "host.capacity";
    /// Cloud Assembly's provisioning funnel step 3.5: enough fitting hosts sharing a network for a multi-host job.
    pub const ZONE_MULTI_HOST: &str = "zone.multi_host";
    /// Cloud Assembly's provisioning funnel steps 4 and 4.1: lowest priority number, most soft constraints, seeded draw.
    pub const ZONE_CHOICE: &str = "zone.choice";
    /// Cloud Assembly's provisioning funnel steps 3 and 3.8: why each other fitting host of the chosen zone was not taken.
    pub const HOST_CHOICE: &str = "host.choice";
}

mod capacity;
mod hosts;
mod ledger;
mod needs;
mod select;
mod zones;

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use indexmap::IndexMap;

use super::PlanRequest;
use crate::decision::{HostAllocation, JobDecision, Reason, StageTrace, VolumeDecision, codes};
use crate::funnel::prepared::Prepared;
use crate::funnel::trace::{Trace, run_rule, run_rules};
use crate::model::Inventory;

use ledger::{Ledger, PlacedJob};
use needs::{Dependencies, JobNeeds};

/// The outcome of placing every job.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Per job, in workflow order: its zone and host(s), or why none.
    pub jobs: IndexMap<String, JobDecision>,
    /// Capacity held on hosts: one entry per host per placed job, resources per node.
    pub allocations: Vec<HostAllocation>,
    /// Soft constraints met, summed over placed jobs.
    pub soft_matched: u32,
    /// Node-local new volumes (hostpath `local: true`): workflow volume key → the host of the
    /// first job that mounts it (where the volume will be created; `NewVolume.host`).
    pub volume_hosts: IndexMap<String, String>,
}

/// What every stage of one job's placement reads.
pub(crate) struct JobCtx<'a> {
    /// The seed for random choices.
    pub seed: u64,
    /// What the job needs.
    pub needs: &'a JobNeeds<'a>,
    /// What this workflow placed before it.
    pub ledger: &'a Ledger,
    /// Which jobs may run at the same time.
    pub deps: &'a Dependencies,
    /// The inventory's hosts in columns and their tag sets.
    pub prepared: &'a Prepared,
}

impl JobCtx<'_> {
    /// The job's name (the trace subject).
    pub fn job(&self) -> &str {
        &self.needs.job.name
    }

    /// True when the job named `other` may run at the same time as this one.
    pub fn concurrent(&self, other: &str) -> bool {
        self.deps.concurrent(self.job(), other)
    }
}

/// Places every job (Cloud Assembly's provisioning funnel), in workflow order, appending each stage's
/// record to `trace`.
///
/// - A job that mounts a volume that failed to resolve (or that the workflow does not define)
///   gets error `volume_unresolved` and is not placed.
/// - A workflow project (default `default`) unknown to an inventory that defines projects gives
///   every job error `no_such_project`.
/// - A job no zone can take gets error `no_zone` with a one-line summary naming the stage that
///   rejected the last candidates.
///
/// Deterministic for a fixed `req.seed`; never panics. Prepares the inventory first
/// ([`Prepared::for_one_plan`]); [`place_prepared`] takes a prepared one.
pub fn place_jobs(
    inv: &Inventory,
    req: &PlanRequest,
    volumes: &IndexMap<String, VolumeDecision>,
    trace: &mut Trace,
) -> Placement {
    place_prepared(inv, &Prepared::for_one_plan(inv), req, volumes, trace)
}

/// [`place_jobs`] with `prepared` = [`Prepared::new`] of `inv` (the caller checks that it
/// [`fits`](Prepared::fits)).
pub fn place_prepared(
    inv: &Inventory,
    prepared: &Prepared,
    req: &PlanRequest,
    volumes: &IndexMap<String, VolumeDecision>,
    trace: &mut Trace,
) -> Placement {
    let wf = &req.workflow;
    let deps = Dependencies::new(&wf.jobs);
    let project = wf.project.as_deref().unwrap_or("default");
    let mut ledger = Ledger::default();
    let mut out = Placement::default();
    // Every job is placed, with or without volumes: Cloud Assembly's provisioning funnel places
    // every compute resource by its constraints and the zone limits.
    for job in &wf.jobs {
        let decision = match needs::job_needs(inv, job, volumes) {
            Err(reason) => JobDecision {
                error: Some(reason),
                ..JobDecision::default()
            },
            Ok(needs) => {
                let ctx = JobCtx {
                    seed: req.seed,
                    needs: &needs,
                    ledger: &ledger,
                    deps: &deps,
                    prepared,
                };
                match place_one(trace, inv, &ctx, project) {
                    Err(reason) => JobDecision {
                        error: Some(reason),
                        ..JobDecision::default()
                    },
                    Ok(chosen) => {
                        let d = JobDecision {
                            zone: Some(chosen.zone.clone()),
                            host: chosen.hosts.first().cloned(),
                            error: None,
                            hosts: chosen.hosts.clone(),
                            soft_matched: chosen.soft,
                        };
                        record(&mut ledger, &needs, chosen);
                        d
                    }
                }
            }
        };
        out.soft_matched = out.soft_matched.saturating_add(decision.soft_matched);
        out.jobs.insert(job.name.clone(), decision);
    }
    out.allocations = ledger.allocations();
    out.volume_hosts = ledger.pins.iter().map(|(k, (_, h))| (k.clone(), h.clone())).collect();
    out
}

/// Where one job goes.
struct Chosen {
    zone: String,
    hosts: Vec<String>,
    soft: u32,
}

/// Runs every stage for one job. Errors: `no_such_project` or `no_zone`.
fn place_one(trace: &mut Trace, inv: &Inventory, ctx: &JobCtx<'_>, project: &str) -> Result<Chosen, Reason> {
    let job = ctx.job();
    let zs = zones::project(trace, inv, job, project)?;
    let zs = nonempty(zs, trace, job)?;
    let zs = nonempty(zones::power(trace, job, zs), trace, job)?;
    let zs = nonempty(zones::limits(trace, ctx, zs), trace, job)?;
    let zs = nonempty(zones::profiles(trace, ctx, zs), trace, job)?;
    let hs = nonempty(hosts::candidates(&zs, ctx.prepared), trace, job)?;
    let touched = hosts::Touched::new(ctx.ledger, &zs, ctx.prepared);
    let stages = [
        hosts::power(ctx),
        hosts::hard_constraints(ctx, &zs),
        hosts::affinity(ctx),
        hosts::anti_affinity(ctx),
        hosts::network(ctx),
        hosts::storage(ctx),
        capacity::capacity(ctx, &touched),
    ];
    let hs = if reference() {
        let mut hs = hs;
        for st in &stages {
            hs = nonempty(run_rule(trace, job, hs, hosts::HostCand::name, &**st), trace, job)?;
        }
        hs
    } else {
        nonempty(run_rules(trace, job, hs, hosts::HostCand::name, &stages), trace, job)?
    };
    let picks = nonempty(select::multi_host(trace, ctx, &hs, &touched), trace, job)?;
    let (pick, soft) = select::choose_zone(trace, ctx, picks).ok_or_else(|| no_zone(trace, job))?;
    select::record_host_choice(trace, ctx, &pick);
    Ok(Chosen {
        zone: pick.zone.zone.name.clone(),
        hosts: pick.hosts().map(|h| h.name.clone()).collect(),
        soft,
    })
}

#[cfg(test)]
thread_local! {
    /// Test switch for [`reference`].
    pub(crate) static REFERENCE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True when a test asks for the reference path: every host stage a pass of its own with its
/// check run on every host (none skipped as having nothing to check), and every host's use
/// summed from the ledger. Tests compare it with the fast path; always false outside tests.
pub(crate) fn reference() -> bool {
    #[cfg(test)]
    {
        REFERENCE.get()
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// Passes `v` on, or stops with `no_zone` when the last stage left nothing.
fn nonempty<T>(v: Vec<T>, trace: &[StageTrace], job: &str) -> Result<Vec<T>, Reason> {
    if v.is_empty() { Err(no_zone(trace, job)) } else { Ok(v) }
}

/// The `no_zone` error: one line naming the stage that left no candidate and its most common
/// reason code.
fn no_zone(trace: &[StageTrace], job: &str) -> Reason {
    let last = trace.iter().rev().find(|t| t.subject == job);
    let msg = match last {
        None => format!("no zone can run job `{job}`"),
        Some(t) if t.considered == 0 => {
            format!(
                "no zone can run job `{job}`: no candidate reached stage {} (the cluster has no zones)",
                t.stage
            )
        }
        Some(t) => {
            let top = t.reason_counts.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
            let top = top
                .map(|(c, n)| format!("; most common reason: {c} ({n}x)"))
                .unwrap_or_default();
            format!(
                "no zone can run job `{job}`: stage {} rejected all {} remaining candidates{top} (see the trace)",
                t.stage, t.considered
            )
        }
    };
    Reason::new(codes::NO_ZONE, msg)
}

/// Enters a placed job into the ledger: its hosts, the new volumes whose storage it counted, and
/// the node-local volumes it pins.
fn record(ledger: &mut Ledger, needs: &JobNeeds<'_>, chosen: Chosen) {
    let mut storage = 0u128;
    for m in &needs.mounts {
        if m.decision.new_volume.is_some() && ledger.counted.insert(m.key.to_string()) {
            storage = storage.saturating_add(m.new_bytes());
        }
        if m.is_node_local_new()
            && !ledger.pins.contains_key(m.key)
            && let Some(h) = chosen.hosts.first()
        {
            ledger.pins.insert(m.key.to_string(), (chosen.zone.clone(), h.clone()));
        }
    }
    let job = needs.job;
    ledger.placed.push(PlacedJob {
        name: job.name.clone(),
        zone: chosen.zone,
        hosts: chosen.hosts,
        per_node: needs.per_node.clone(),
        exclusive: needs.exclusive(),
        with: job.affinity.with.clone(),
        apart_from: job.affinity.apart_from.clone(),
        storage,
    });
}
