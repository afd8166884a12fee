//! The capacity host stage (Cloud Assembly's provisioning funnel step 3.6, `host.capacity`):
//! free capacity = capacity − allocated − what concurrent earlier jobs of this workflow hold on
//! the host, every shortfall reported. A host no earlier job of the workflow holds is checked
//! against the prepared columns ([`crate::funnel::columns`]); the others against the ledger.

use std::collections::BTreeMap;
use std::fmt;

use super::JobCtx;
use super::hosts::{HostStage, Touched, stage};
use super::ledger::{PlacedJob, add, is_empty};
use super::stages;
use crate::decision::codes;
use crate::model::{Host, Resources};
use crate::rule::Reasons;
use crate::size::ByteSize;

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
///
/// Only the hosts in `touched` sum the ledger ([`usage`]); every other host's use is its
/// `allocated`, read from the columns of [`Prepared`] when the job needs no device and is not
/// exclusive.
pub(crate) fn capacity<'c, 'z, 'a>(ctx: &'c JobCtx<'c>, touched: &'c Touched<'z, 'a>) -> HostStage<'c, 'z, 'a> {
    let nothing = Resources::default();
    let need = &ctx.needs.per_node;
    let (fixed, allocated) = (ctx.prepared.fixed(), ctx.prepared.allocated());
    // Without devices or exclusivity, the full check of a host that holds nothing of this
    // workflow looks at cpu, memory and instances beside `allocated` alone.
    let plain = !ctx.needs.exclusive() && need.devices.values().all(|n| *n == 0);
    stage(stages::HOST_CAPACITY, false, move |c, r| {
        if touched.may_hold(c) {
            let h = c.host();
            let (free, holders) = usage(ctx, c.zone_name(), h);
            check_capacity(ctx, h, &free.used, &free.workflow, &holders, r);
        } else if plain {
            if !allocated.fits(c.at(), need.cpu, need.memory.0, need.instances) {
                if r.detailed {
                    plain_shortfalls(need, fixed.capacity(c.at()), allocated.get(c.at()), r);
                } else {
                    // An unlisted host counts once per reason code, and every shortfall has
                    // the same code: one says it.
                    r.fail(codes::INSUFFICIENT, String::new);
                }
            }
        } else {
            let h = c.host();
            check_capacity(ctx, h, &h.allocated, &nothing, &[], r);
        }
    })
}

/// [`check_capacity`] of a job needing no device and not exclusive, on a host no job of this
/// workflow holds, from its columns: capacity `cap` and allocations `alloc` (cores, memory
/// bytes, instances). The same reasons in the same order.
fn plain_shortfalls(need: &Resources, cap: (u64, u128, u64), alloc: (u64, u128, u64), r: &mut Reasons) {
    shortfall(
        r,
        &"cpu",
        need.cpu.into(),
        cap.0.into(),
        alloc.0.into(),
        0,
        alloc.0.into(),
        &cores,
    );
    shortfall(r, &"memory", need.memory.0, cap.1, alloc.1, 0, alloc.1, &bytes);
    if cap.2 > 0 {
        shortfall(
            r,
            &"instances",
            need.instances.into(),
            cap.2.into(),
            alloc.2.into(),
            0,
            alloc.2.into(),
            &count,
        );
    }
}

fn cores(v: u128) -> String {
    format!("{v} cores")
}

fn bytes(v: u128) -> String {
    ByteSize(v).to_string()
}

fn count(v: u128) -> String {
    v.to_string()
}

/// Records `insufficient` when `need` exceeds `cap` − `used`: `what` (a resource), the
/// host's capacity, its `alloc`ations and this workflow's part `wf` of `used`, each shown
/// with `f`.
#[allow(clippy::too_many_arguments)]
fn shortfall(
    r: &mut Reasons,
    what: &dyn fmt::Display,
    need: u128,
    cap: u128,
    alloc: u128,
    wf: u128,
    used: u128,
    f: &dyn Fn(u128) -> String,
) {
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
}

/// The capacity check of one host: `used` = allocated + `wf` (what `holders`, the concurrent
/// earlier jobs of this workflow on the host, hold there).
fn check_capacity(
    ctx: &JobCtx<'_>,
    h: &Host,
    used: &Resources,
    wf: &Resources,
    holders: &[&PlacedJob],
    r: &mut Reasons,
) {
    let need = &ctx.needs.per_node;
    let (cap, alloc) = (&h.capacity, &h.allocated);
    shortfall(
        r,
        &"cpu",
        need.cpu.into(),
        cap.cpu.into(),
        alloc.cpu.into(),
        wf.cpu.into(),
        used.cpu.into(),
        &cores,
    );
    shortfall(
        r,
        &"memory",
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
        shortfall(
            r,
            &"instances",
            n.into(),
            c.into(),
            a.into(),
            w.into(),
            u.into(),
            &count,
        );
    }
    for (d, n) in need.devices.iter().filter(|(_, n)| **n > 0) {
        let get = |m: &BTreeMap<String, u64>| u128::from(m.get(d).copied().unwrap_or(0));
        shortfall(
            r,
            &format_args!("device {d}"),
            (*n).into(),
            get(&cap.devices),
            get(&alloc.devices),
            get(&wf.devices),
            get(&used.devices),
            &count,
        );
    }
    if ctx.needs.exclusive() && !is_empty(used) {
        r.fail(codes::INSUFFICIENT, || {
            let mut parts = Vec::new();
            if !is_empty(alloc) {
                parts.push(format!("allocated {}", describe(alloc)));
            }
            for p in holders {
                parts.push(format!("job `{}` of this workflow", p.name));
            }
            format!(
                "exclusive job needs a host with nothing allocated; host has {}",
                parts.join(", ")
            )
        });
    }
    for p in holders.iter().filter(|p| p.exclusive) {
        r.fail(codes::INSUFFICIENT, || {
            format!("host is held exclusively by job `{}` of this workflow", p.name)
        });
    }
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
