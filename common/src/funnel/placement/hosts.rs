//! Host filters (Cloud Assembly's provisioning funnel stage 3.1-3.7) over every host of the zones that survived the zone
//! filters, named `zone/host`. Each is a named stage recording every rejected host with all its
//! reasons. The capacity stage (3.6) is in the sibling module `capacity`; the candidates, the
//! stage shape and [`Touched`] it shares are here.
//!
//! Each stage function prepares its check for one job and returns it as a
//! [`Rule`](crate::rule::Rule); `place_one` runs them all over the hosts with
//! [`run_rules`](crate::funnel::trace::run_rules), each stage over the hosts the stages before
//! it kept, in one call of `sift` (the same records as one `run_rule` per stage). A
//! stage with nothing to check for the job (no hard constraint, no affinity partner placed yet,
//! no network wanted, no volume with node affinity or pin) is idle: recorded without looking at
//! any host.

use super::stages;
use std::cell::Cell;
use std::collections::BTreeMap;

use crate::decision::codes;
use crate::funnel::prepared::Prepared;
use crate::model::{Constraint, Host, NodeAffinity, PowerState, Resources, Tag, Zone};
use crate::rule::{Reasons, Rule, rule};
use crate::size::ByteSize;

use super::JobCtx;
use super::ledger::{Ledger, PlacedJob};
use super::zones::ZoneCand;

/// A host of a surviving zone: 16 bytes (the stages move 100,000 of them a job).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostCand<'z, 'a> {
    /// Its zone, as the zone filters left it.
    pub zone: &'z ZoneCand<'a>,
    /// Its position in the zone's hosts.
    index: u32,
    /// Its position in inventory order (its row in [`Prepared`]'s columns).
    row: u32,
}

/// What [`HostCand::host`] gives for a position past the zone's hosts (never, as
/// [`candidates`] makes them).
static NO_HOST: Host = Host {
    name: String::new(),
    power: PowerState::Off,
    tags: Vec::new(),
    capacity: Resources {
        cpu: 0,
        memory: ByteSize(0),
        instances: 0,
        devices: BTreeMap::new(),
    },
    allocated: Resources {
        cpu: 0,
        memory: ByteSize(0),
        instances: 0,
        devices: BTreeMap::new(),
    },
    networks: Vec::new(),
};

impl<'a> HostCand<'_, 'a> {
    /// The host.
    pub fn host(&self) -> &'a Host {
        self.zone.zone.hosts.get(self.index as usize).map_or(&NO_HOST, |h| &**h)
    }

    /// Its row in [`Prepared`]'s columns (its position in inventory order).
    pub fn at(&self) -> usize {
        self.row as usize
    }

    /// `zone/host`, the candidate name in the trace.
    pub fn name(&self) -> String {
        format!("{}/{}", self.zone.zone.name, self.host().name)
    }

    /// Its zone's name.
    pub fn zone_name(&self) -> &str {
        &self.zone.zone.name
    }
}

/// Every host of `zones`, zone by zone in inventory order, with its row in `prepared`.
pub(crate) fn candidates<'z, 'a>(zones: &'z [ZoneCand<'a>], prepared: &Prepared) -> Vec<HostCand<'z, 'a>> {
    let mut out = Vec::with_capacity(zones.iter().map(|z| z.zone.hosts.len()).sum());
    for z in zones {
        let start = prepared.fixed().zone_start(z.index);
        let n = z.zone.hosts.len();
        out.extend((0..n).map(|i| HostCand {
            zone: z,
            index: u32::try_from(i).unwrap_or(u32::MAX),
            row: u32::try_from(start + i).unwrap_or(u32::MAX),
        }));
    }
    out
}

/// A host stage prepared for one job.
pub(crate) type HostStage<'c, 'z, 'a> = Box<dyn Rule<HostCand<'z, 'a>> + 'c>;

/// The stage `name` with `check`; with `idle` (the check can reject no host for this job) it is
/// recorded without running (tests asking for the reference path run it all the same).
pub(super) fn stage<'c, 'z, 'a>(
    name: &'static str,
    idle: bool,
    check: impl Fn(&HostCand<'z, 'a>, &mut Reasons) + 'c,
) -> HostStage<'c, 'z, 'a> {
    Box::new(rule(name, check).with_idle(idle && !super::reference()))
}

/// The hosts earlier jobs of this workflow were placed on, per zone candidate: a host outside
/// them holds nothing of this workflow, so its use is what the inventory says (`allocated`)
/// without summing the ledger (the capacity stage and host ranking look at every host).
///
/// Kept as the hosts' rows in [`Prepared`]'s columns ([`HostCand::at`]), found once per job by
/// name: asking a host is then a search among a few numbers, not a compare of every placed
/// host's name with the host's own (which read every host's name through its pointer, for
/// every host in every pass of the job's placement).
pub(crate) struct Touched<'z, 'a> {
    /// Per zone holding placed jobs: the rows of its hosts they run on, ascending.
    zones: Vec<(&'z ZoneCand<'a>, Vec<usize>)>,
    /// Every host may hold something (the reference path of tests).
    all: bool,
}

impl<'z, 'a> Touched<'z, 'a> {
    /// The hosts of `zones` that placed jobs of `ledger` run on (by zone and host name, as
    /// [`PlacedJob::on`] matches them), as rows of `prepared`.
    pub fn new(ledger: &Ledger, zones: &'z [ZoneCand<'a>], prepared: &Prepared) -> Self {
        let mut out = Vec::new();
        if !ledger.placed.is_empty() {
            for z in zones {
                let names: Vec<&str> = ledger
                    .placed
                    .iter()
                    .filter(|p| p.zone == z.zone.name)
                    .flat_map(|p| p.hosts.iter().map(String::as_str))
                    .collect();
                if names.is_empty() {
                    continue;
                }
                let start = prepared.fixed().zone_start(z.index);
                let rows: Vec<usize> = z
                    .zone
                    .hosts
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| names.contains(&h.name.as_str()))
                    .map(|(i, _)| start + i)
                    .collect();
                if !rows.is_empty() {
                    out.push((z, rows));
                }
            }
        }
        Touched {
            zones: out,
            all: super::reference(),
        }
    }

    /// The rows of the hosts of `zone` that placed jobs run on (empty for most zones).
    pub fn in_zone(&self, zone: &ZoneCand<'_>) -> &[usize] {
        self.zones
            .iter()
            .find(|(z, _)| std::ptr::eq(*z, zone))
            .map_or(&[], |(_, rows)| rows.as_slice())
    }

    /// False when no placed job of this workflow runs on `c` (true when one may).
    pub fn may_hold(&self, c: &HostCand<'_, '_>) -> bool {
        self.holds_in(self.in_zone(c.zone), c.at())
    }

    /// [`Touched::may_hold`] for the host at `row` of a zone, given `rows` = [`Touched::in_zone`]
    /// of that zone.
    pub fn holds_in(&self, rows: &[usize], row: usize) -> bool {
        self.all || (!rows.is_empty() && rows.binary_search(&row).is_ok())
    }
}

/// Stage 3.1 (`host.power`): drops powered-off hosts (read from the power column; from the host
/// itself on the reference path).
pub(crate) fn power<'c, 'z, 'a>(ctx: &'c JobCtx<'c>) -> HostStage<'c, 'z, 'a> {
    let fixed = ctx.prepared.fixed();
    let reference = super::reference();
    stage(stages::HOST_POWER, false, move |c, r| {
        let on = if reference {
            c.host().power == PowerState::On
        } else {
            fixed.on(c.at())
        };
        if !on {
            r.fail(codes::POWERED_OFF, || {
                format!("host `{}` is powered off", c.host().name)
            });
        }
    })
}

/// Stage 3.2 (`host.hard_constraints`): every hard constraint of the job and every resource
/// annotation (`key` with exactly `value`; a bare tag counts as value "") must hold on the
/// union of host and zone capability tags. Every failing one is listed.
///
/// Each constraint and annotation is looked up among each zone's tags once (for the `zones`
/// the hosts belong to) and among each distinct host tag set once
/// ([`crate::funnel::tagsets`]); a host then looks up its set's answers. (The reference path
/// of tests judges every host's tags united with its zone's.)
pub(crate) fn hard_constraints<'c, 'z: 'c, 'a: 'c>(
    ctx: &'c JobCtx<'c>,
    zones: &'z [ZoneCand<'a>],
) -> HostStage<'c, 'z, 'a> {
    let needs = ctx.needs;
    let hard: Vec<&Constraint> = needs.hard().collect();
    let annotations: Vec<(&String, &String)> = needs.annotations().iter().collect();
    let idle = hard.is_empty() && annotations.is_empty();
    let reference = super::reference();
    let sets = ctx.prepared.tags();
    // Per distinct host tag set: which of `hard`, then of `annotations`, its tags meet.
    let answers = if idle || reference {
        Default::default()
    } else {
        sets.judge(hard.len() + annotations.len(), |k, t| match hard.get(k) {
            Some(con) => con.matches(t),
            None => annotations
                .get(k - hard.len())
                .is_some_and(|(key, v)| annotated(t, key, v)),
        })
    };
    // Per zone, in `zones` order: which of `hard`, then of `annotations`, its tags meet.
    let in_zones: Vec<Vec<bool>> = zones
        .iter()
        .map(|z| {
            let tags = &z.zone.tags;
            let cons = hard.iter().map(|c| tags.iter().any(|t| c.matches(t)));
            let anns = annotations.iter().map(|(k, v)| tags.iter().any(|t| annotated(t, k, v)));
            cons.chain(anns).collect()
        })
        .collect();
    let last = Cell::new(0usize);
    stage(stages::HOST_HARD_CONSTRAINTS, idle, move |c, r| {
        // Hosts come zone by zone: the zone is looked for only when it changes.
        let mut i = last.get();
        if !zones.get(i).is_some_and(|z| std::ptr::eq(z, c.zone)) {
            i = zones.iter().position(|z| std::ptr::eq(z, c.zone)).unwrap_or(usize::MAX);
            last.set(i);
        }
        let in_zone = |k: usize| in_zones.get(i).and_then(|v| v.get(k)).copied().filter(|_| !reference);
        let set = sets.of(c.at());
        let tags = || c.zone.zone.tags.iter().chain(&c.host().tags);
        for (k, con) in hard.iter().enumerate() {
            let holds = match in_zone(k) {
                Some(z) => (z || answers.met(set, k)) != con.negated,
                None => con.holds(tags()),
            };
            if holds {
                continue;
            }
            r.fail(codes::HARD_CONSTRAINT, || {
                let have = tags_with_key(&tags().collect::<Vec<_>>(), &con.key);
                let verb = if con.negated { "hold" } else { "have" };
                format!("hard constraint `{con}` fails: host ∪ zone tags {verb} {have}")
            });
        }
        for (k, (key, v)) in annotations.iter().enumerate() {
            let holds = match in_zone(hard.len() + k) {
                Some(z) => z || answers.met(set, hard.len() + k),
                None => tags().any(|t| annotated(t, key, v)),
            };
            if holds {
                continue;
            }
            r.fail(codes::HARD_CONSTRAINT, || {
                let have = tags_with_key(&tags().collect::<Vec<_>>(), key);
                format!("resource annotation `{key}={v}` fails: host ∪ zone tags have {have}")
            });
        }
    })
}

/// True when `t` is the resource annotation `key` = `value` (a bare tag counts as value "").
fn annotated(t: &Tag, key: &str, value: &str) -> bool {
    t.key == key && t.value.as_deref().unwrap_or("") == value
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
pub(crate) fn affinity<'c, 'z, 'a>(ctx: &'c JobCtx<'c>) -> HostStage<'c, 'z, 'a> {
    let with = partners(ctx, &ctx.needs.job.affinity.with, |p| &p.with);
    stage(stages::HOST_AFFINITY, with.is_empty(), move |c, r| {
        for p in &with {
            if !p.on(c.zone_name(), &c.host().name) {
                r.fail(codes::AFFINITY, || {
                    format!("must share a host with job `{}`, which runs on {}", p.name, where_(p))
                });
            }
        }
    })
}

/// Stage 3.4 (`host.anti_affinity`): the host must not run any already placed job this job must
/// stay apart from (its `affinity.apart_from`, or theirs naming it).
pub(crate) fn anti_affinity<'c, 'z, 'a>(ctx: &'c JobCtx<'c>) -> HostStage<'c, 'z, 'a> {
    let apart = partners(ctx, &ctx.needs.job.affinity.apart_from, |p| &p.apart_from);
    stage(stages::HOST_ANTI_AFFINITY, apart.is_empty(), move |c, r| {
        for p in &apart {
            if p.on(c.zone_name(), &c.host().name) {
                r.fail(codes::ANTI_AFFINITY, || {
                    format!("must not share a host with job `{}`, which runs on this host", p.name)
                });
            }
        }
    })
}

fn where_(p: &PlacedJob) -> String {
    p.hosts
        .iter()
        .map(|h| format!("{}/{h}", p.zone))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Stage 3.6 (`host.network`): the host must be attached to every network the job names.
pub(crate) fn network<'c, 'z, 'a>(ctx: &'c JobCtx<'c>) -> HostStage<'c, 'z, 'a> {
    let wanted = &ctx.needs.job.networks;
    stage(stages::HOST_NETWORK, wanted.is_empty(), move |c, r| {
        for n in wanted {
            if !c.host().networks.contains(n) {
                r.fail(codes::NETWORK, || {
                    let have = if c.host().networks.is_empty() {
                        "none".to_string()
                    } else {
                        c.host().networks.join(", ")
                    };
                    format!("host is not attached to network `{n}` (attached: {have})")
                });
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
pub(crate) fn storage<'c, 'z, 'a>(ctx: &'c JobCtx<'c>) -> HostStage<'c, 'z, 'a> {
    let needs = ctx.needs;
    let idle = needs.mounts.iter().all(|m| {
        m.pv.is_none_or(|pv| pv.node_affinity.is_none())
            && !(m.is_node_local_new() && ctx.ledger.pins.contains_key(m.key))
    });
    stage(stages::HOST_STORAGE, idle, move |c, r| {
        for m in &needs.mounts {
            if let Some((pv, Some(na))) = m.pv.map(|pv| (pv, pv.node_affinity.as_ref()))
                && !na.matches(&host_labels(c.zone.zone, c.host()))
            {
                r.fail(codes::NODE_AFFINITY, || {
                    format!(
                        "volume `{}`: persistent volume `{}` is usable only from hosts matching {}",
                        m.key,
                        pv.name,
                        describe_affinity(na)
                    )
                });
            }
            if !m.is_node_local_new() {
                continue;
            }
            if let Some((z, h)) = ctx.ledger.pins.get(m.key)
                && (z != c.zone_name() || h != &c.host().name)
            {
                r.fail(codes::PINNED_ELSEWHERE, || {
                    format!(
                        "volume `{}` is node-local and lives on {z}/{h}, placed there by an earlier job",
                        m.key
                    )
                });
            }
        }
    })
}
