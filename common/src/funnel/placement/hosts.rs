//! Host filters (seed 002 stage 3.1-3.7) over every host of the zones that survived the zone
//! filters, named `zone/host`. Each is a named stage recording every rejected host with all its
//! reasons.

use super::stages;
use std::collections::BTreeMap;

use crate::decision::{Reason, codes};
use crate::funnel::run_filter;
use crate::funnel::trace::Trace;
use crate::model::{Host, NodeAffinity, PowerState, Resources, Tag, Zone};
use crate::size::ByteSize;

use super::JobCtx;
use super::ledger::{PlacedJob, add, is_empty};
use super::zones::ZoneCand;

/// A host of a surviving zone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostCand<'z, 'a> {
    /// Its zone, as the zone filters left it.
    pub zone: &'z ZoneCand<'a>,
    /// The host.
    pub host: &'a Host,
}

impl HostCand<'_, '_> {
    /// `zone/host`, the candidate name in the trace.
    pub fn name(&self) -> String {
        format!("{}/{}", self.zone.zone.name, self.host.name)
    }

    fn zone_name(&self) -> &str {
        &self.zone.zone.name
    }
}

/// Every host of `zones`, zone by zone in inventory order.
pub(crate) fn candidates<'z, 'a>(zones: &'z [ZoneCand<'a>]) -> Vec<HostCand<'z, 'a>> {
    zones
        .iter()
        .flat_map(|z| z.zone.hosts.iter().map(move |h| HostCand { zone: z, host: h }))
        .collect()
}

/// Stage 3.1 (`host.power`): drops powered-off hosts.
pub(crate) fn power<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    run_filter(trace, stages::HOST_POWER, ctx.job(), hosts, HostCand::name, |c, r| {
        if c.host.power != PowerState::On {
            r.fail(codes::POWERED_OFF, || format!("host `{}` is powered off", c.host.name));
        }
    })
}

/// Stage 3.2 (`host.hard_constraints`): every hard constraint of the job and every resource
/// annotation (`key` with exactly `value`; a bare tag counts as value "") must hold on the
/// union of host and zone capability tags. Every failing one is listed.
pub(crate) fn hard_constraints<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let needs = ctx.needs;
    run_filter(
        trace,
        stages::HOST_HARD_CONSTRAINTS,
        ctx.job(),
        hosts,
        HostCand::name,
        |c, r| {
            let tags = || c.zone.zone.tags.iter().chain(&c.host.tags);
            for con in needs.hard() {
                if con.holds(tags()) {
                    continue;
                }
                r.fail(codes::HARD_CONSTRAINT, || {
                    let have = tags_with_key(&tags().collect::<Vec<_>>(), &con.key);
                    let verb = if con.negated { "hold" } else { "have" };
                    format!("hard constraint `{con}` fails: host ∪ zone tags {verb} {have}")
                });
            }
            for (k, v) in needs.annotations() {
                if tags().any(|t| &t.key == k && t.value.as_deref().unwrap_or("") == v) {
                    continue;
                }
                r.fail(codes::HARD_CONSTRAINT, || {
                    let have = tags_with_key(&tags().collect::<Vec<_>>(), k);
                    format!("resource annotation `{k}={v}` fails: host ∪ zone tags have {have}")
                });
            }
        },
    )
}

/// `k:v, k:w` for the tags with key `k`, or `no tag k`.
fn tags_with_key(tags: &[&Tag], key: &str) -> String {
    let found: Vec<String> = tags.iter().filter(|t| t.key == key).map(|t| t.to_string()).collect();
    if found.is_empty() {
        format!("no tag `{key}`")
    } else {
        found.join(", ")
    }
}

/// The placed jobs tied to this job by a rule: those this job names in its own list, and those
/// whose list names this job (rules are symmetric).
fn partners<'l>(ctx: &'l JobCtx<'_>, own: &[String], theirs: impl Fn(&PlacedJob) -> &[String]) -> Vec<&'l PlacedJob> {
    let me = ctx.job();
    ctx.ledger
        .placed
        .iter()
        .filter(|p| own.iter().any(|n| n == &p.name) || theirs(p).iter().any(|n| n == me))
        .collect()
}

/// Stage 3.3 (`host.affinity`): the host must run every already placed job this job must share
/// a host with (its `affinity.with`, or theirs naming it).
pub(crate) fn affinity<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let with = partners(ctx, &ctx.needs.job.affinity.with, |p| &p.with);
    run_filter(
        trace,
        stages::HOST_AFFINITY,
        ctx.job(),
        hosts,
        HostCand::name,
        |c, r| {
            for p in &with {
                if !p.on(c.zone_name(), &c.host.name) {
                    r.push(Reason::new(
                        codes::AFFINITY,
                        format!("must share a host with job `{}`, which runs on {}", p.name, where_(p)),
                    ));
                }
            }
        },
    )
}

/// Stage 3.4 (`host.anti_affinity`): the host must not run any already placed job this job must
/// stay apart from (its `affinity.apart_from`, or theirs naming it).
pub(crate) fn anti_affinity<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let apart = partners(ctx, &ctx.needs.job.affinity.apart_from, |p| &p.apart_from);
    run_filter(
        trace,
        stages::HOST_ANTI_AFFINITY,
        ctx.job(),
        hosts,
        HostCand::name,
        |c, r| {
            for p in &apart {
                if p.on(c.zone_name(), &c.host.name) {
                    r.push(Reason::new(
                        codes::ANTI_AFFINITY,
                        format!("must not share a host with job `{}`, which runs on this host", p.name),
                    ));
                }
            }
        },
    )
}

fn where_(p: &PlacedJob) -> String {
    p.hosts
        .iter()
        .map(|h| format!("{}/{h}", p.zone))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Stage 3.6 (`host.network`): the host must be attached to every network the job names.
pub(crate) fn network<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let wanted = &ctx.needs.job.networks;
    run_filter(trace, stages::HOST_NETWORK, ctx.job(), hosts, HostCand::name, |c, r| {
        for n in wanted {
            if !c.host.networks.contains(n) {
                let have = if c.host.networks.is_empty() {
                    "none".to_string()
                } else {
                    c.host.networks.join(", ")
                };
                r.push(Reason::new(
                    codes::NETWORK,
                    format!("host is not attached to network `{n}` (attached: {have})"),
                ));
            }
        }
    })
}

/// The labels a persistent volume's node affinity is matched against: the host's tags
/// (`key:value` → key=value, bare `key` → key="") plus `kubernetes.io/hostname` and
/// `topology.kubernetes.io/zone`.
pub(crate) fn host_labels(zone: &Zone, host: &Host) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = host
        .tags
        .iter()
        .map(|t| (t.key.clone(), t.value.clone().unwrap_or_default()))
        .collect();
    labels.insert("kubernetes.io/hostname".into(), host.name.clone());
    labels.insert("topology.kubernetes.io/zone".into(), zone.name.clone());
    labels
}

fn describe_affinity(a: &NodeAffinity) -> String {
    a.terms
        .iter()
        .map(|t| format!("({})", t.iter().map(|r| r.describe()).collect::<Vec<_>>().join(" and ")))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Stage 3.7 (`host.storage`): a mounted existing persistent volume with node affinity must
/// match the host's labels; a node-local new volume already placed by an earlier job pins this
/// job to that host.
pub(crate) fn storage<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let needs = ctx.needs;
    run_filter(trace, stages::HOST_STORAGE, ctx.job(), hosts, HostCand::name, |c, r| {
        for m in &needs.mounts {
            if let Some((pv, Some(na))) = m.pv.map(|pv| (pv, pv.node_affinity.as_ref()))
                && !na.matches(&host_labels(c.zone.zone, c.host))
            {
                r.push(Reason::new(
                    codes::NODE_AFFINITY,
                    format!(
                        "volume `{}`: persistent volume `{}` is usable only from hosts matching {}",
                        m.key,
                        pv.name,
                        describe_affinity(na)
                    ),
                ));
            }
            if !m.is_node_local_new() {
                continue;
            }
            if let Some((z, h)) = ctx.ledger.pins.get(m.key)
                && (z != c.zone_name() || h != &c.host.name)
            {
                r.push(Reason::new(
                    codes::PINNED_ELSEWHERE,
                    format!(
                        "volume `{}` is node-local and lives on {z}/{h}, placed there by an earlier job",
                        m.key
                    ),
                ));
            }
        }
    })
}

/// What a host has left for a job: capacity − allocated − what concurrent earlier jobs of this
/// workflow hold there, per resource (saturating at 0).
pub(crate) struct Free {
    /// Allocated from the inventory plus this workflow's concurrent jobs.
    pub used: Resources,
    /// This workflow's part of `used`.
    pub workflow: Resources,
}

/// Computes [`Free`] for `host` of `zone` as seen by the job of `ctx`, and the concurrent jobs
/// of this workflow on it.
pub(crate) fn usage<'l>(ctx: &'l JobCtx<'_>, zone: &str, host: &Host) -> (Free, Vec<&'l PlacedJob>) {
    let (workflow, holders) = ctx.ledger.host_use(zone, &host.name, |p| ctx.concurrent(&p.name));
    let mut used = host.allocated.clone();
    add(&mut used, &workflow);
    (Free { used, workflow }, holders)
}

/// Stage 3.5 / capacity (`host.capacity`): free = capacity − allocated − what concurrent
/// earlier jobs of this workflow hold on the host. Every resource short of the per-node need is
/// reported (cpu cores, memory bytes, instances when the host declares an instance capacity
/// (0 = not limited), each device); an exclusive job needs a host with nothing allocated, and a
/// host held by a concurrent exclusive job of the workflow takes nothing else.
pub(crate) fn capacity<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: Vec<HostCand<'z, 'a>>,
) -> Vec<HostCand<'z, 'a>> {
    let need = &ctx.needs.per_node;
    run_filter(
        trace,
        stages::HOST_CAPACITY,
        ctx.job(),
        hosts,
        HostCand::name,
        |c, r| {
            let h = c.host;
            let (free, holders) = usage(ctx, c.zone_name(), h);
            let (cap, alloc, wf, used) = (&h.capacity, &h.allocated, &free.workflow, &free.used);
            let mut short =
                |what: &str, need: u128, cap: u128, alloc: u128, wf: u128, used: u128, f: &dyn Fn(u128) -> String| {
                    let left = cap.saturating_sub(used);
                    if need > left {
                        r.fail(codes::INSUFFICIENT, || {
                            format!(
                                "{what}: needs {}, {} free (capacity {}, allocated {}, this workflow {})",
                                f(need),
                                f(left),
                                f(cap),
                                f(alloc),
                                f(wf)
                            )
                        });
                    }
                };
            let cores = |v: u128| format!("{v} cores");
            let bytes = |v: u128| ByteSize(v).to_string();
            let count = |v: u128| v.to_string();
            short(
                "cpu",
                need.cpu.into(),
                cap.cpu.into(),
                alloc.cpu.into(),
                wf.cpu.into(),
                used.cpu.into(),
                &cores,
            );
            short(
                "memory",
                need.memory.0,
                cap.memory.0,
                alloc.memory.0,
                wf.memory.0,
                used.memory.0,
                &bytes,
            );
            if cap.instances > 0 {
                let (n, c, a, w, u) = (
                    need.instances,
                    cap.instances,
                    alloc.instances,
                    wf.instances,
                    used.instances,
                );
                short("instances", n.into(), c.into(), a.into(), w.into(), u.into(), &count);
            }
            for (d, n) in need.devices.iter().filter(|(_, n)| **n > 0) {
                let get = |m: &BTreeMap<String, u64>| u128::from(m.get(d).copied().unwrap_or(0));
                let what = format!("device {d}");
                short(
                    &what,
                    (*n).into(),
                    get(&cap.devices),
                    get(&alloc.devices),
                    get(&wf.devices),
                    get(&used.devices),
                    &count,
                );
            }
            if ctx.needs.exclusive() && !is_empty(used) {
                let mut parts = Vec::new();
                if !is_empty(alloc) {
                    parts.push(format!("allocated {}", describe(alloc)));
                }
                for p in &holders {
                    parts.push(format!("job `{}` of this workflow", p.name));
                }
                r.push(Reason::new(
                    codes::INSUFFICIENT,
                    format!(
                        "exclusive job needs a host with nothing allocated; host has {}",
                        parts.join(", ")
                    ),
                ));
            }
            for p in holders.iter().filter(|p| p.exclusive) {
                r.push(Reason::new(
                    codes::INSUFFICIENT,
                    format!("host is held exclusively by job `{}` of this workflow", p.name),
                ));
            }
        },
    )
}

/// Non-zero parts of `r`, e.g. `cpu 4 cores, memory 8GiB, device nvidia.com/gpu 1`.
fn describe(r: &Resources) -> String {
    let mut parts = Vec::new();
    if r.cpu > 0 {
        parts.push(format!("cpu {} cores", r.cpu));
    }
    if r.memory.0 > 0 {
        parts.push(format!("memory {}", r.memory));
    }
    if r.instances > 0 {
        parts.push(format!("{} instances", r.instances));
    }
    for (d, n) in r.devices.iter().filter(|(_, n)| **n > 0) {
        parts.push(format!("device {d} {n}"));
    }
    parts.join(", ")
}
