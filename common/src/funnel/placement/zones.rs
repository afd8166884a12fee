//! Cloud zone filters (Cloud Assembly's provisioning funnel stages 1 and 2): the zones of the workflow's project, then
//! power state, project limits and profiles (image, flavor, storage). Each is a named stage that
//! records every rejected zone with all its reasons.

use super::stages;
use crate::decision::{Reason, codes};
use crate::funnel::run_filter;
use crate::funnel::trace::Trace;
use crate::model::{Inventory, Reachability, Zone, ZoneAssignment};
use crate::size::ByteSize;

use super::JobCtx;

/// A cloud zone still in the running for one job, with the priority its project gives it.
#[derive(Debug, Clone)]
pub(crate) struct ZoneCand<'a> {
    /// The zone.
    pub zone: &'a Zone,
    /// Its position in the inventory's zones (where its hosts' columns start:
    /// [`crate::funnel::columns::Fixed::zone_start`]).
    pub index: usize,
    /// Lower = preferred: the project assignment's priority, or the zone's own when the
    /// inventory defines no projects.
    pub priority: i64,
    /// The project's assignment (limits and usage); `None` when the inventory defines no
    /// projects (no limits).
    pub assignment: Option<&'a ZoneAssignment>,
}

/// Stage 1 (`zone.project`): the zones of `project`, in inventory order. With no projects in the
/// inventory every zone belongs to every project with its own priority and no limits.
///
/// Errors: `no_such_project` when projects exist but none is named `project` (the stage is
/// still recorded, every zone rejected with that reason).
pub(crate) fn project<'a>(
    trace: &mut Trace,
    inv: &'a Inventory,
    job: &str,
    project: &str,
) -> Result<Vec<ZoneCand<'a>>, Reason> {
    let all: Vec<&Zone> = inv.zones.iter().collect();
    if inv.projects.is_empty() {
        let cands = all.into_iter().enumerate().map(|(index, z)| ZoneCand {
            zone: z,
            index,
            priority: z.priority,
            assignment: None,
        });
        return Ok(run_filter(
            trace,
            stages::ZONE_PROJECT,
            job,
            cands.collect(),
            |c| c.zone.name.clone(),
            |_, _| {},
        ));
    }
    let Some(p) = inv.projects.iter().find(|p| p.name == project) else {
        let known: Vec<&str> = inv.projects.iter().map(|p| p.name.as_str()).collect();
        let reason = Reason::new(
            codes::NO_SUCH_PROJECT,
            format!(
                "project `{project}` is not defined in cluster `{}` (projects: {})",
                inv.cluster,
                known.join(", ")
            ),
        );
        run_filter(
            trace,
            stages::ZONE_PROJECT,
            job,
            all,
            |z| z.name.clone(),
            |_, r| r.push(reason.clone()),
        );
        return Err(reason);
    };
    let cands = all
        .into_iter()
        .enumerate()
        .map(|(index, z)| {
            let a = p.zones.iter().find(|a| a.zone == z.name);
            ZoneCand {
                zone: z,
                index,
                priority: a.map_or(z.priority, |a| a.priority),
                assignment: a,
            }
        })
        .collect();
    Ok(run_filter(
        trace,
        stages::ZONE_PROJECT,
        job,
        cands,
        |c| c.zone.name.clone(),
        |c, r| {
            if c.assignment.is_none() {
                r.push(Reason::new(
                    codes::NOT_IN_PROJECT,
                    format!("zone `{}` is not assigned to project `{project}`", c.zone.name),
                ));
            }
        },
    ))
}

/// Stage 2.1 (`zone.power`): drops zones with no powered-on host.
pub(crate) fn power<'a>(trace: &mut Trace, job: &str, zones: Vec<ZoneCand<'a>>) -> Vec<ZoneCand<'a>> {
    run_filter(
        trace,
        stages::ZONE_POWER,
        job,
        zones,
        |c| c.zone.name.clone(),
        |c, r| {
            let hosts = &c.zone.hosts;
            if !hosts.iter().any(|h| h.power == crate::model::PowerState::On) {
                let msg = if hosts.is_empty() {
                    format!("zone `{}` has no hosts", c.zone.name)
                } else {
                    format!(
                        "zone `{}` has no powered-on host (all {} hosts are off)",
                        c.zone.name,
                        hosts.len()
                    )
                };
                r.push(Reason::new(codes::NO_POWERED_ON_HOST, msg));
            }
        },
    )
}

/// Stage 2.2 (`zone.limits`): drops zones where the project's usage, plus what concurrent jobs
/// of this workflow already hold there, plus this job's request would exceed a project limit
/// (instances, memory bytes, cpu cores, storage bytes). Storage is the size of the new volumes
/// this job mounts that no earlier job of the workflow has counted. Every exceeded limit is
/// reported.
///
/// Cloud Assembly's provisioning funnel row 2.2 reads "Zone with full memory or instances are filtered out". A zone with no
/// project assignment (an inventory without `projects`) has no limits to be full against, so
/// nothing is dropped here: a zone whose hosts are full in memory or instances loses every host
/// at `host.capacity` (step 3.6) instead, which names each full host and what it lacks, and the
/// job fails with `no_zone` just the same. Checking the hosts' capacity here too would only say
/// it twice.
pub(crate) fn limits<'a>(trace: &mut Trace, ctx: &JobCtx<'_>, zones: Vec<ZoneCand<'a>>) -> Vec<ZoneCand<'a>> {
    let (inst, cpu, mem) = ctx.needs.totals();
    let storage = ctx
        .needs
        .mounts
        .iter()
        .filter(|m| !ctx.ledger.counted.contains(m.key))
        .fold(0u128, |a, m| a.saturating_add(m.new_bytes()));
    run_filter(
        trace,
        stages::ZONE_LIMITS,
        ctx.job(),
        zones,
        |c| c.zone.name.clone(),
        |c, r| {
            let Some(a) = c.assignment else { return };
            let zone = c.zone.name.as_str();
            let (wi, wc, wm) = ctx.ledger.zone_compute(zone, |p| ctx.concurrent(&p.name));
            let ws = ctx.ledger.zone_storage(zone);
            let (l, u) = (&a.limits, &a.usage);
            let num = |v: u128| v.to_string();
            let bytes = |v: u128| ByteSize(v).to_string();
            let mut check =
                |what: &str, limit: Option<u128>, used: u128, wf: u128, job: u128, fmt: &dyn Fn(u128) -> String| {
                    let Some(limit) = limit else { return };
                    let total = used.saturating_add(wf).saturating_add(job);
                    if total > limit {
                        r.push(Reason::new(
                            codes::PROJECT_LIMIT,
                            format!(
                                "{what}: project uses {} + this workflow {} + job {} = {} > limit {} in zone `{zone}`",
                                fmt(used),
                                fmt(wf),
                                fmt(job),
                                fmt(total),
                                fmt(limit)
                            ),
                        ));
                    }
                };
            check(
                "instances",
                l.instances.map(u128::from),
                u.instances.into(),
                wi.into(),
                inst.into(),
                &num,
            );
            check("memory", l.memory.map(|m| m.0), u.memory.0, wm, mem, &bytes);
            check("cpu", l.cpu.map(u128::from), u.cpu.into(), wc.into(), cpu.into(), &num);
            check("storage", l.storage.map(|s| s.0), u.storage.0, ws, storage, &bytes);
        },
    )
}

/// Stage 2.3 (`zone.profiles`): image profile (no allowed prefixes, or the job's image starts
/// with one; a job without an image passes), flavor profile (no flavors, or one with cpu and
/// memory at least the per-node need) and storage profile (every mounted volume's provisioner
/// reaches the zone, or the zone's `storage` list names it). Each failing volume is reported.
pub(crate) fn profiles<'a>(trace: &mut Trace, ctx: &JobCtx<'_>, zones: Vec<ZoneCand<'a>>) -> Vec<ZoneCand<'a>> {
    let needs = ctx.needs;
    run_filter(
        trace,
        stages::ZONE_PROFILES,
        ctx.job(),
        zones,
        |c| c.zone.name.clone(),
        |c, r| {
            let z = c.zone;
            if let (false, Some(img)) = (z.images.is_empty(), needs.job.image.as_deref())
                && !z.images.iter().any(|p| img.starts_with(p.as_str()))
            {
                r.push(Reason::new(
                    codes::IMAGE_PROFILE,
                    format!(
                        "image `{img}` is not allowed by zone `{}` (allowed: {})",
                        z.name,
                        z.images.join(", ")
                    ),
                ));
            }
            let (cpu, mem) = (needs.per_node.cpu, needs.per_node.memory);
            if !z.flavors.is_empty() && !z.flavors.iter().any(|f| f.cpu >= cpu && f.memory >= mem) {
                let offered: Vec<String> = z
                    .flavors
                    .iter()
                    .map(|f| format!("{} {} cores/{}", f.name, f.cpu, f.memory))
                    .collect();
                r.push(Reason::new(
                    codes::FLAVOR_PROFILE,
                    format!(
                        "no flavor of zone `{}` fits {cpu} cores and {mem} per node (flavors: {})",
                        z.name,
                        offered.join(", ")
                    ),
                ));
            }
            for m in &needs.mounts {
                let Some(pname) = m.provisioner_name() else {
                    continue;
                };
                let by_reach = m
                    .provisioner
                    .is_none_or(|p| p.reachability.reaches(&z.name, z.segment.as_deref()));
                if by_reach || z.storage.iter().any(|s| s == pname) {
                    continue;
                }
                let reach = m
                    .provisioner
                    .map(|p| describe_reach(&p.reachability))
                    .unwrap_or_default();
                let seg = z
                    .segment
                    .as_deref()
                    .map(|s| format!(" (segment `{s}`)"))
                    .unwrap_or_default();
                r.push(Reason::new(
                codes::STORAGE_UNREACHABLE,
                format!(
                    "volume `{}`: provisioner `{pname}` is reachable from {reach}, not from zone `{}`{seg}, and the zone's storage profile does not list it",
                    m.key, z.name
                ),
            ));
            }
        },
    )
}

/// Text form of a provisioner's reachability for messages.
fn describe_reach(r: &Reachability) -> String {
    let zones = if r.zones.is_empty() {
        "any zone".to_string()
    } else {
        format!("zones [{}]", r.zones.join(", "))
    };
    match &r.segment {
        Some(s) => format!("{zones} in segment `{s}`"),
        None => zones,
    }
}
