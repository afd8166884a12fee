//! Choosing (Cloud Assembly's provisioning funnel steps 3, 3.5, 3.8, 4 and 4.1): hosts within each zone — those meeting
//! more of the job's soft constraints (host tags ∪ zone tags) first, then by the zone's
//! placement policy (enough of them, sharing a network, for a multi-host job) — then one zone
//! among those that still have hosts: lowest priority number, then most soft constraints matched
//! (a zone scores what its best remaining host meets), then a seeded random draw; then the
//! `host.choice` stage records why each other fitting host of the chosen zone was not taken.
//!
//! Cloud Assembly's provisioning funnel: "After a cloud zone is selected, a host is selected by matching a series of
//! filters, including hard & soft constraints", and zones of equal priority are "sorted by
//! matching soft constraints, using a combination of the cloud zone and compute capabilities".

use super::stages;
use crate::decision::{Reason, codes};
use crate::funnel::columns::host_load;
use crate::funnel::tagsets::Answers;
use crate::funnel::trace::{Trace, record_ranking};
use crate::funnel::{run_filter, seeded_pick};
use crate::model::{Constraint, Host, PlacementPolicy, Tag};

use super::JobCtx;
use super::hosts::{HostCand, Touched};
use super::ledger::add;
use super::zones::ZoneCand;

/// A zone with the hosts the job would use there.
#[derive(Debug, Clone)]
pub(crate) struct ZonePick<'z, 'a> {
    /// The zone.
    pub zone: &'z ZoneCand<'a>,
    /// The chosen hosts, one per node, best first, as positions in `fitting` (what the
    /// ranking's record compares, without reading any host); [`ZonePick::hosts`] reads them.
    /// Before [`multi_host`] takes the job's hosts, the zone's whole ranking.
    pub at: Vec<usize>,
    /// Every host of the zone that passed the host filters, in inventory order (a run of the
    /// host stages' survivors).
    pub fitting: &'z [HostCand<'z, 'a>],
    /// How many soft constraints each of `fitting` meets with the zone's tags (same order).
    pub soft: Vec<u32>,
}

impl<'a> ZonePick<'_, 'a> {
    /// The chosen hosts, best first.
    pub fn hosts(&self) -> impl Iterator<Item = &'a Host> + '_ {
        self.at.iter().filter_map(|&i| self.fitting.get(i)).map(HostCand::host)
    }

    /// The zone's soft score: the most soft constraints any of its fitting hosts meets.
    pub fn best_soft(&self) -> u32 {
        self.soft.iter().copied().max().unwrap_or(0)
    }
}

/// How many of the job's soft constraints hold on `zone_tags` united with `host`'s tags.
fn host_soft(ctx: &JobCtx<'_>, zone_tags: &[Tag], host: &Host) -> u32 {
    let count = ctx
        .needs
        .soft()
        .filter(|c| c.holds(zone_tags.iter().chain(&host.tags)))
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// The job's soft constraints judged on every distinct host tag set ([`crate::funnel::tagsets`]):
/// answer `k` of a set = a tag of the set meets soft constraint `k` (none computed on the
/// reference path of tests, or without soft constraints).
fn soft_answers(ctx: &JobCtx<'_>) -> Answers {
    let soft: Vec<&Constraint> = ctx.needs.soft().collect();
    if soft.is_empty() || super::reference() {
        return Answers::default();
    }
    ctx.prepared
        .tags()
        .judge(soft.len(), |k, t| soft.get(k).is_some_and(|c| c.matches(t)))
}

/// Soft scores of `hosts` in `zone` (all 0, computed without looking, when the job
/// has no soft constraints): [`host_soft`], with each constraint looked up among the zone's tags
/// once and among the host tag sets once (`answers`, [`soft_answers`]; the reference path of
/// tests reads every host's tags).
fn soft_scores(ctx: &JobCtx<'_>, zone: &ZoneCand<'_>, hosts: &[HostCand<'_, '_>], answers: &Answers) -> Vec<u32> {
    let soft: Vec<(&Constraint, bool)> = ctx
        .needs
        .soft()
        .map(|c| (c, zone.zone.tags.iter().any(|t| c.matches(t))))
        .collect();
    if soft.is_empty() {
        return vec![0; hosts.len()];
    }
    let score = |met: usize| u32::try_from(met).unwrap_or(u32::MAX);
    if super::reference() {
        return hosts
            .iter()
            .map(|h| {
                let met = soft
                    .iter()
                    .filter(|(c, _)| c.holds(zone.zone.tags.iter().chain(&h.host().tags)));
                score(met.count())
            })
            .collect();
    }
    let sets = ctx.prepared.tags();
    hosts
        .iter()
        .map(|h| {
            let set = sets.of(h.at());
            let met = soft
                .iter()
                .enumerate()
                .filter(|(k, (c, in_zone))| (*in_zone || answers.met(set, *k)) != c.negated);
            score(met.count())
        })
        .collect()
}

/// Load of a host in [0, 1] ([`host_load`]), counting the inventory's allocations and every
/// earlier job of this workflow on it; and its free memory bytes. `held`: an earlier job of
/// this workflow may run on the host ([`Touched::holds_in`]); when false the ledger is not
/// summed (it holds nothing there) and both come from the prepared columns, computed when the
/// inventory was prepared. A held host (every host on the reference path of tests) is read from
/// the host itself and the ledger.
fn metrics(ctx: &JobCtx<'_>, zone: &str, host: &Host, at: usize, held: bool) -> (f64, u128) {
    if !held {
        return ctx.prepared.allocated().load_and_free_memory(at);
    }
    let (mut used, _) = ctx.ledger.host_use(zone, &host.name, |_| true);
    add(&mut used, &host.allocated);
    let cap = &host.capacity;
    let load = host_load((used.cpu, used.memory.0), (cap.cpu, cap.memory.0));
    (load, cap.memory.0.saturating_sub(used.memory.0))
}

/// Orders a zone's fitting hosts, best first: hosts meeting more soft constraints first
/// (Cloud Assembly's provisioning funnel step 3), then, among equal scores, the zone's placement policy (Cloud Assembly's provisioning funnel step
/// 3.8): BINPACK most loaded first, SPREAD least loaded first, SPREAD_MEMORY most free memory
/// first (ties keep inventory order), DEFAULT a seeded random order: draw `i` (from 0, counted
/// over the whole zone) takes `seeded_pick(seed, "host:<job>:<zone>", n)` for `i = 0` and
/// context `host:<job>:<zone>:<i>` after, from the hosts left in the best remaining score group.
/// Without soft constraints every host scores 0 and the order is the policy's alone.
///
/// With `only_best` (single-host jobs) only the first host of that order is computed, in one
/// linear pass: the same host the full order would put first. `touched`: where earlier jobs of
/// this workflow run (for the loads). Returns positions in `hosts`, best first.
pub(crate) fn rank_hosts<'a>(
    ctx: &JobCtx<'_>,
    zone: &ZoneCand<'a>,
    hosts: &[HostCand<'_, 'a>],
    soft: &[u32],
    only_best: bool,
    touched: &Touched<'_, '_>,
) -> Vec<usize> {
    let z = zone.zone;
    let rows = touched.in_zone(zone);
    if only_best {
        return best_host(ctx, zone, hosts, soft, |at| touched.holds_in(rows, at))
            .into_iter()
            .collect();
    }
    let mut keyed: Vec<(u32, f64, u128, usize)> = hosts
        .iter()
        .zip(soft.iter().copied())
        .enumerate()
        .map(|(i, (c, s))| {
            let (load, free) = metrics(ctx, &z.name, c.host(), c.at(), touched.holds_in(rows, c.at()));
            (s, load, free, i)
        })
        .collect();
    let by_soft = |a: &(u32, f64, u128, usize), b: &(u32, f64, u128, usize)| b.0.cmp(&a.0);
    match z.placement_policy {
        PlacementPolicy::Binpack => keyed.sort_by(|a, b| by_soft(a, b).then(b.1.total_cmp(&a.1))),
        PlacementPolicy::Spread => keyed.sort_by(|a, b| by_soft(a, b).then(a.1.total_cmp(&b.1))),
        PlacementPolicy::SpreadMemory => keyed.sort_by(|a, b| by_soft(a, b).then(b.2.cmp(&a.2))),
        PlacementPolicy::Default => {
            let mut out = Vec::with_capacity(keyed.len());
            let mut i = 0usize;
            while let Some(top) = keyed.iter().map(|k| k.0).max() {
                let group: Vec<usize> = (0..keyed.len()).filter(|&j| keyed[j].0 == top).collect();
                let context = if i == 0 {
                    format!("host:{}:{}", ctx.job(), z.name)
                } else {
                    format!("host:{}:{}:{i}", ctx.job(), z.name)
                };
                let k = seeded_pick(ctx.seed, &context, group.len()).min(group.len() - 1);
                out.push(keyed.remove(group[k]));
                i += 1;
            }
            keyed = out;
        }
    }
    keyed.into_iter().map(|(_, _, _, i)| i).collect()
}

/// The first host of [`rank_hosts`]' order, found in one pass (stable sorts keep the earliest of
/// equal keys, so ties go to the earliest host here too): its position in `hosts`.
fn best_host<'a>(
    ctx: &JobCtx<'_>,
    zone: &ZoneCand<'a>,
    hosts: &[HostCand<'_, 'a>],
    soft: &[u32],
    held: impl Fn(usize) -> bool,
) -> Option<usize> {
    let z = zone.zone;
    let top = soft.iter().copied().max()?;
    if z.placement_policy == PlacementPolicy::Default {
        let group: Vec<usize> = (0..hosts.len().min(soft.len())).filter(|&i| soft[i] == top).collect();
        let k = seeded_pick(ctx.seed, &format!("host:{}:{}", ctx.job(), z.name), group.len());
        return group.get(k.min(group.len().saturating_sub(1))).copied();
    }
    // Each policy compares one of the two metrics (both were computed with the prepared form).
    let mut best: Option<(f64, u128, usize)> = None;
    for (i, (c, s)) in hosts.iter().zip(soft).enumerate() {
        if *s != top {
            continue;
        }
        let (load, free) = metrics(ctx, &z.name, c.host(), c.at(), held(c.at()));
        let better = match (&best, z.placement_policy) {
            (None, _) => true,
            (Some(b), PlacementPolicy::Binpack) => load > b.0,
            (Some(b), PlacementPolicy::Spread) => load < b.0,
            (Some(b), _) => free > b.1,
        };
        if better {
            best = Some((load, free, i));
        }
    }
    best.map(|b| b.2)
}

/// The networks a host is on for multi-host purposes: its declared ones, or one implicit
/// default network (`None`) shared by every host that declares none.
fn nets(h: &Host) -> Vec<Option<&str>> {
    if h.networks.is_empty() {
        vec![None]
    } else {
        h.networks.iter().map(|n| Some(n.as_str())).collect()
    }
}

fn net_name(n: Option<&str>) -> String {
    n.map_or_else(|| "the default network".to_string(), |n| format!("network `{n}`"))
}

/// Takes `n` hosts from `ranked` (positions in `fitting`, policy order) that share a network:
/// the first network, in order of first appearance among the ranked hosts, with at least `n`
/// hosts gives its best `n`. Returns their positions in `fitting`.
///
/// Errors: text saying how many hosts fit and how many share a network at most.
fn take_sharing(zone: &str, fitting: &[HostCand<'_, '_>], ranked: &[usize], n: u64) -> Result<Vec<usize>, String> {
    if n <= 1 {
        return ranked
            .first()
            .map(|i| vec![*i])
            .ok_or_else(|| format!("zone `{zone}` has no fitting host"));
    }
    let host = |i: usize| fitting.get(i).map(HostCand::host);
    if (ranked.len() as u64) < n {
        return Err(format!(
            "zone `{zone}` has {} fitting hosts, the job needs {n}",
            ranked.len()
        ));
    }
    let mut order: Vec<Option<&str>> = Vec::new();
    for h in ranked.iter().filter_map(|&i| host(i)) {
        for net in nets(h) {
            if !order.contains(&net) {
                order.push(net);
            }
        }
    }
    let mut best: Option<(Option<&str>, usize)> = None;
    for net in order {
        let group: Vec<usize> = ranked
            .iter()
            .copied()
            .filter(|&i| host(i).is_some_and(|h| nets(h).contains(&net)))
            .collect();
        if group.len() as u64 >= n {
            return Ok(group.into_iter().take(n as usize).collect());
        }
        if best.is_none_or(|(_, k)| group.len() > k) {
            best = Some((net, group.len()));
        }
    }
    let (net, k) = best.unwrap_or((None, 0));
    Err(format!(
        "zone `{zone}` has {} fitting hosts but at most {k} share a network ({}), the job needs {n}",
        ranked.len(),
        net_name(net)
    ))
}

/// Stage 3.5 (`zone.multi_host`): for every zone with at least one fitting host, picks the
/// job's hosts by the zone's placement policy; a zone without `nodes` fitting hosts that share
/// a network is rejected.
pub(crate) fn multi_host<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    hosts: &'z [HostCand<'z, 'a>],
    touched: &Touched<'_, '_>,
) -> Vec<ZonePick<'z, 'a>> {
    let n = ctx.needs.nodes;
    let answers = soft_answers(ctx);
    // The host stages keep the candidates' order, zone by zone in inventory order: each zone's
    // fitting hosts are one run of `hosts`, and the runs come in zone order.
    let cands: Vec<ZonePick<'z, 'a>> = hosts
        .chunk_by(|a, b| std::ptr::eq(a.zone, b.zone))
        .filter_map(|fitting| {
            let z = fitting.first()?.zone;
            let soft = soft_scores(ctx, z, fitting, &answers);
            // Until the zone's hosts are taken below, `at` is the whole ranking.
            Some(ZonePick {
                zone: z,
                at: rank_hosts(ctx, z, fitting, &soft, n <= 1, touched),
                fitting,
                soft,
            })
        })
        .collect();
    let mut chosen: Vec<Vec<usize>> = Vec::new();
    let survivors = run_filter(
        trace,
        stages::ZONE_MULTI_HOST,
        ctx.job(),
        cands,
        |p| p.zone.zone.name.clone(),
        |p, r| match take_sharing(&p.zone.zone.name, p.fitting, &p.at, n) {
            Ok(h) => chosen.push(h),
            Err(msg) => r.push(Reason::new(codes::MULTI_HOST, msg)),
        },
    );
    survivors
        .into_iter()
        .zip(chosen)
        .map(|(p, at)| ZonePick { at, ..p })
        .collect()
}

/// Soft constraints of the job that hold on the zone's tags united with the tags of each chosen
/// host (for a multi-host job, on every one of them).
pub(crate) fn soft_matched(ctx: &JobCtx<'_>, pick: &ZonePick<'_, '_>) -> u32 {
    let count = ctx
        .needs
        .soft()
        .filter(|c| {
            pick.hosts().all(|h| {
                let tags: Vec<&Tag> = pick.zone.zone.tags.iter().chain(&h.tags).collect();
                c.holds(tags)
            })
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Stage 4 (`zone.choice`): among zones that still have hosts, the lowest priority number wins;
/// ties go to the most soft constraints matched (Cloud Assembly's provisioning funnel step 4.1: a zone scores
/// [`ZonePick::best_soft`], what its best remaining host meets with the zone's tags), then to
/// `seeded_pick(seed, "zone:<job>", n)` over the remaining zones in inventory order. Every other
/// zone is recorded with the reason it lost. Returns the winner and the soft constraints its
/// chosen hosts meet ([`soft_matched`]).
pub(crate) fn choose_zone<'z, 'a>(
    trace: &mut Trace,
    ctx: &JobCtx<'_>,
    picks: Vec<ZonePick<'z, 'a>>,
) -> Option<(ZonePick<'z, 'a>, u32)> {
    let scored: Vec<(ZonePick<'z, 'a>, u32)> = picks
        .into_iter()
        .map(|p| {
            let s = p.best_soft();
            (p, s)
        })
        .collect();
    let best_prio = scored.iter().map(|(p, _)| p.zone.priority).min()?;
    let prio_leader = scored
        .iter()
        .find(|(p, _)| p.zone.priority == best_prio)?
        .0
        .zone
        .zone
        .name
        .clone();
    let best_soft = scored
        .iter()
        .filter(|(p, _)| p.zone.priority == best_prio)
        .map(|(_, s)| *s)
        .max()?;
    let soft_leader = scored
        .iter()
        .find(|(p, s)| p.zone.priority == best_prio && *s == best_soft)?
        .0
        .zone
        .zone
        .name
        .clone();
    let tied: Vec<&str> = scored
        .iter()
        .filter(|(p, s)| p.zone.priority == best_prio && *s == best_soft)
        .map(|(p, _)| p.zone.zone.name.as_str())
        .collect();
    let winner = tied
        .get(seeded_pick(ctx.seed, &format!("zone:{}", ctx.job()), tied.len()))?
        .to_string();
    let n_tied = tied.len();
    let seed = ctx.seed;
    let mut kept = run_filter(
        trace,
        stages::ZONE_CHOICE,
        ctx.job(),
        scored,
        |(p, _)| p.zone.zone.name.clone(),
        |(p, s), r| {
            let name = &p.zone.zone.name;
            if p.zone.priority > best_prio {
                r.push(Reason::new(
                    codes::LOWER_PRIORITY,
                    format!("priority {} > {best_prio} of zone `{prio_leader}`", p.zone.priority),
                ));
            } else if *s < best_soft {
                r.push(Reason::new(
                    codes::FEWER_SOFT_MATCHES,
                    format!("its best host meets {s} soft constraint(s) < {best_soft} in zone `{soft_leader}`"),
                ));
            } else if *name != winner {
                r.push(Reason::new(
                codes::SEEDED_DRAW,
                format!(
                    "tied with {} other zone(s) on priority {best_prio} and {best_soft} soft matches; the seeded draw (seed {seed}) chose zone `{winner}`",
                    n_tied - 1
                ),
            ));
            }
        },
    );
    let winner = kept.pop()?;
    let soft = soft_matched(ctx, &winner.0);
    Some((winner.0, soft))
}

/// Stage `host.choice` (Cloud Assembly's provisioning funnel steps 3 and 3.8): every fitting host of the chosen zone that
/// the job does not use, with why: it meets fewer soft constraints than the first chosen host
/// (`fewer_soft_matches`), or the zone's placement policy ranked it after the chosen one(s)
/// (`policy_order`; for a multi-host job also a host off the network the chosen hosts share).
pub(crate) fn record_host_choice(trace: &mut Trace, ctx: &JobCtx<'_>, pick: &ZonePick<'_, '_>) {
    let Some(first) = pick.hosts().next() else {
        return;
    };
    let zone = pick.zone.zone;
    let first_soft = host_soft(ctx, &zone.tags, first);
    let total = ctx.needs.soft().count();
    let policy = match zone.placement_policy {
        PlacementPolicy::Binpack => "BINPACK (most loaded first)",
        PlacementPolicy::Spread => "SPREAD (least loaded first)",
        PlacementPolicy::SpreadMemory => "SPREAD_MEMORY (most free memory first)",
        PlacementPolicy::Default => "DEFAULT (a seeded random draw)",
    };
    let chosen: Vec<&str> = pick.hosts().map(|h| h.name.as_str()).collect();
    let first_name = &first.name;
    // Every fitting host but the chosen loses: one compare per host, and only a listed host is
    // named and explained (`record_ranking`).
    let host = |i: usize| pick.fitting[i].host();
    // `soft` has a score per fitting host (`multi_host`).
    let n = pick.fitting.len().min(pick.soft.len());
    let soft = |i: usize| pick.soft[i];
    record_ranking(
        trace,
        stages::HOST_CHOICE,
        ctx.job(),
        n,
        |i| {
            // The picks are positions in `fitting` (`rank_hosts`): a compare per candidate,
            // without reading the host.
            if pick.at.contains(&i) {
                None
            } else if soft(i) < first_soft {
                Some(codes::FEWER_SOFT_MATCHES)
            } else {
                Some(codes::POLICY_ORDER)
            }
        },
        |from| {
            // What `lost` says of `from..n`, counted: the chosen pass, the others lost with
            // fewer soft matches or to the policy's order.
            let left = &pick.soft[from..n];
            let chosen_left: Vec<u32> = pick
                .at
                .iter()
                .filter(|&&i| (from..n).contains(&i))
                .map(|&i| soft(i))
                .collect();
            let fewer = (left.iter().filter(|&&s| s < first_soft).count())
                .saturating_sub(chosen_left.iter().filter(|&&s| s < first_soft).count());
            let order = left.len().saturating_sub(chosen_left.len()).saturating_sub(fewer);
            vec![(codes::FEWER_SOFT_MATCHES, fewer), (codes::POLICY_ORDER, order)]
        },
        |i| format!("{}/{}", zone.name, host(i).name),
        |i, code| {
            let s = soft(i);
            if code == codes::FEWER_SOFT_MATCHES {
                format!("meets {s} of {total} soft constraint(s); host `{first_name}` meets {first_soft}")
            } else {
                format!(
                    "as many soft constraints as host `{first_name}`; placement policy {policy} chose {}",
                    chosen.join(", ")
                )
            }
        },
    );
}
