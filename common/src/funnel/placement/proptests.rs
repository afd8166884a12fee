//! Property tests: on random inventories and workflows, `place_jobs` never panics, is
//! deterministic for a fixed seed, and never commits a host beyond its free capacity for any set
//! of jobs that may run at the same time.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::testkit::*;
use crate::decision::HostAllocation;
use crate::model::*;

#[derive(Debug, Clone)]
struct HostSpec {
    cpu: u64,
    mem: u128,
    alloc: (u64, u128, u64, u64),
    instances: u64,
    gpus: u64,
    off: bool,
    tags: u8,
    nets: u8,
}

#[derive(Debug, Clone)]
struct ZoneSpec {
    hosts: Vec<HostSpec>,
    policy: u8,
    priority: i64,
    tags: u8,
    limit: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
struct JobSpec {
    cpu: u64,
    mem: u128,
    gpus: u64,
    nodes: u64,
    exclusive: bool,
    deps: u8,
    cons: u8,
    with: Option<usize>,
    apart: Option<usize>,
    mounts: u8,
    nets: u8,
}

const TAGS: [&str; 3] = ["gpu", "ssd", "fast"];
const NETS: [&str; 2] = ["n1", "n2"];

fn pick<'a>(mask: u8, from: &[&'a str]) -> Vec<&'a str> {
    from.iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, s)| *s)
        .collect()
}

fn host_spec() -> impl Strategy<Value = HostSpec> {
    let sizes = (0u64..=32, 0u128..=128, 0u64..=4, 0u64..=2);
    let raw = (any::<u64>(), any::<u128>(), any::<u64>(), any::<u64>());
    (sizes, raw, any::<bool>(), 0u8..8, 0u8..4).prop_map(
        |((cpu, mem, instances, gpus), (a, b, c, d), off, tags, nets)| HostSpec {
            cpu,
            mem,
            // Allocations never exceed capacity in a consistent inventory; most hosts have room.
            alloc: if a % 5 == 0 {
                (cpu, mem, instances, gpus)
            } else {
                (
                    a % (cpu / 2 + 1),
                    b % (mem / 2 + 1),
                    c % (instances / 2 + 1),
                    d % (gpus + 1),
                )
            },
            instances,
            gpus,
            off: off && tags % 3 == 0,
            tags,
            nets,
        },
    )
}

fn zone_spec() -> impl Strategy<Value = ZoneSpec> {
    (
        prop::collection::vec(host_spec(), 0..7),
        0u8..4,
        0i64..3,
        0u8..8,
        prop::option::of((1u64..6, 1u64..24)),
    )
        .prop_map(|(hosts, policy, priority, tags, limit)| ZoneSpec {
            hosts,
            policy,
            priority,
            tags,
            limit,
        })
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    let size = (
        0u64..=6,
        0u128..=12,
        0u64..=1,
        prop_oneof![3 => Just(1u64), 1 => 2u64..=3],
        any::<bool>(),
    );
    let cons = prop_oneof![2 => Just(0u8), 1 => 0u8..64];
    let rules = (
        any::<u8>(),
        cons,
        prop::option::of(0usize..6),
        prop::option::of(0usize..6),
    );
    (size, rules, (0u8..8, 0u8..4)).prop_map(
        |((cpu, mem, gpus, nodes, ex), (deps, cons, with, apart), (mounts, nets))| JobSpec {
            cpu,
            mem,
            gpus: if cons % 5 == 0 { gpus } else { 0 },
            nodes,
            exclusive: ex && deps % 4 == 0,
            deps,
            cons,
            with,
            apart,
            mounts,
            nets: if deps % 3 == 0 { nets } else { 0 },
        },
    )
}

fn build(zones: &[ZoneSpec], jobs: &[JobSpec], with_projects: bool) -> (Inventory, Vec<Job>) {
    let mut zs = Vec::new();
    let mut n = 0;
    for (zi, z) in zones.iter().enumerate() {
        let hosts = z
            .hosts
            .iter()
            .map(|h| {
                n += 1;
                with(host(&format!("h{n}"), h.cpu, h.mem), |x| {
                    x.power = if h.off { PowerState::Off } else { PowerState::On };
                    x.allocated.cpu = h.alloc.0;
                    x.allocated.memory = gib(h.alloc.1);
                    x.capacity.instances = h.instances;
                    x.allocated.instances = h.alloc.2;
                    x.capacity.devices.insert("gpu".into(), h.gpus);
                    x.allocated.devices.insert("gpu".into(), h.alloc.3);
                    x.tags = tags(&pick(h.tags, &TAGS));
                    x.networks = strs(&pick(h.nets, &NETS));
                })
            })
            .collect();
        zs.push(with(zone(&format!("z{zi}"), hosts), |x| {
            x.placement_policy = [
                PlacementPolicy::Default,
                PlacementPolicy::Binpack,
                PlacementPolicy::Spread,
                PlacementPolicy::SpreadMemory,
            ][usize::from(z.policy % 4)];
            x.priority = z.priority;
            x.tags = tags(&pick(z.tags, &TAGS));
        }));
    }
    let mut i = inv(zs);
    i.provisioners.push(local_prov("local"));
    if with_projects {
        // Zones with all three tags stay outside the project.
        let zone_names: Vec<String> = (0..zones.len()).map(|zi| format!("z{zi}")).collect();
        let members: Vec<(usize, &ZoneSpec)> = zones.iter().enumerate().filter(|(_, z)| z.tags != 7).collect();
        let assigned: Vec<(&str, i64)> = members
            .iter()
            .map(|(zi, z)| (zone_names[*zi].as_str(), z.priority))
            .collect();
        let mut p = project("default", &assigned);
        for (a, (_, z)) in p.zones.iter_mut().zip(&members) {
            if let Some((inst, cpu)) = z.limit {
                a.limits.instances = Some(inst);
                a.limits.cpu = Some(cpu);
                a.limits.storage = Some(gib(2));
            }
        }
        i.projects = vec![p];
    }
    let names: Vec<String> = (0..jobs.len()).map(|k| format!("j{k}")).collect();
    let js = jobs
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut mounts = pick(s.mounts, &["data", "scratch", "shared"]);
            if mounts.is_empty() && k % 2 == 0 {
                mounts.push("data");
            }
            with(sized(&names[k], &mounts, s.cpu, s.mem), |j| {
                if s.gpus > 0 {
                    j.resources.devices.insert("gpu".into(), s.gpus);
                }
                j.nodes = s.nodes;
                j.resources.exclusive = s.exclusive;
                j.depends_on = (0..k)
                    .filter(|d| s.deps & (1 << d) != 0)
                    .map(|d| names[d].clone())
                    .collect();
                let all = ["gpu", "!ssd", "fast:soft", "ssd:soft", "gpu:soft", "!fast"];
                j.constraints = cons(&pick(s.cons, &all));
                j.affinity.with = s
                    .with
                    .filter(|w| *w != k && *w < names.len())
                    .map(|w| vec![names[w].clone()])
                    .unwrap_or_default();
                j.affinity.apart_from = s
                    .apart
                    .filter(|w| *w != k && *w < names.len())
                    .map(|w| vec![names[w].clone()])
                    .unwrap_or_default();
                j.networks = strs(&pick(s.nets, &NETS));
            })
        })
        .collect();
    (i, js)
}

/// Independent transitive closure: `dep[a][b]` when job a waits for job b.
fn closure(jobs: &[Job]) -> Vec<Vec<bool>> {
    let n = jobs.len();
    let idx: BTreeMap<&str, usize> = jobs.iter().enumerate().map(|(i, j)| (j.name.as_str(), i)).collect();
    let mut dep = vec![vec![false; n]; n];
    for (a, j) in jobs.iter().enumerate() {
        for d in &j.depends_on {
            if let Some(b) = idx.get(d.as_str()) {
                dep[a][*b] = true;
            }
        }
    }
    for k in 0..n {
        for a in 0..n {
            for b in 0..n {
                if dep[a][k] && dep[k][b] {
                    dep[a][b] = true;
                }
            }
        }
    }
    dep
}

fn check_capacity(inv: &Inventory, jobs: &[Job], allocs: &[HostAllocation]) -> Result<(), TestCaseError> {
    let dep = closure(jobs);
    let idx = |name: &str| jobs.iter().position(|j| j.name == name).unwrap();
    let mut by_host: BTreeMap<(&str, &str), Vec<&HostAllocation>> = BTreeMap::new();
    for a in allocs {
        by_host.entry((a.zone.as_str(), a.host.as_str())).or_default().push(a);
    }
    for ((z, h), list) in by_host {
        let host = inv
            .zones
            .iter()
            .find(|x| x.name == z)
            .and_then(|x| x.hosts.iter().find(|y| y.name == h))
            .unwrap();
        prop_assert_eq!(host.power, PowerState::On);
        let n = list.len();
        prop_assert!(n <= 12);
        for mask in 1u32..(1 << n) {
            let members: Vec<&HostAllocation> = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| list[i]).collect();
            let concurrent = members.iter().enumerate().all(|(x, a)| {
                members.iter().skip(x + 1).all(|b| {
                    let (ia, ib) = (idx(&a.job), idx(&b.job));
                    ia != ib && !dep[ia][ib] && !dep[ib][ia]
                })
            });
            if !concurrent {
                continue;
            }
            let (mut cpu, mut mem, mut inst, mut gpu) = (
                host.allocated.cpu,
                host.allocated.memory.0,
                host.allocated.instances,
                host.allocated.devices["gpu"],
            );
            for m in &members {
                cpu += m.resources.cpu;
                mem += m.resources.memory.0;
                inst += m.resources.instances;
                gpu += m.resources.devices.get("gpu").copied().unwrap_or(0);
            }
            let cap = &host.capacity;
            prop_assert!(cpu <= cap.cpu, "cpu over on {}/{}: {} > {}", z, h, cpu, cap.cpu);
            prop_assert!(mem <= cap.memory.0, "memory over on {}/{}", z, h);
            prop_assert!(
                cap.instances == 0 || inst <= cap.instances,
                "instances over on {}/{}",
                z,
                h
            );
            prop_assert!(gpu <= cap.devices["gpu"], "gpus over on {}/{}", z, h);
            let exclusive = members.iter().any(|m| jobs[idx(&m.job)].resources.exclusive);
            if exclusive {
                prop_assert!(members.len() == 1, "exclusive job shares {}/{}", z, h);
                let a = &host.allocated;
                prop_assert!(a.cpu == 0 && a.memory.0 == 0 && a.instances == 0 && a.devices["gpu"] == 0);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn placement_respects_capacity_and_is_deterministic(
        zones in prop::collection::vec(zone_spec(), 1..4),
        jobs in prop::collection::vec(job_spec(), 1..6),
        seed in any::<u64>(),
        with_projects in any::<bool>(),
    ) {
        let (inv, js) = build(&zones, &jobs, with_projects);
        let r = req(js.clone(), seed);
        let v = vols(vec![
            ("data", existing("nfs", "data")),
            ("scratch", provisioned("local", "scratch", 1)),
            ("shared", provisioned("nfs", "shared", 2)),
        ]);
        let (p1, t1) = run(&inv, &r, &v);
        let (p2, t2) = run(&inv, &r, &v);
        prop_assert_eq!(&p1.jobs, &p2.jobs);
        prop_assert_eq!(&p1.allocations, &p2.allocations);
        prop_assert_eq!(&p1.volume_hosts, &p2.volume_hosts);
        prop_assert_eq!(&t1, &t2);
        check_capacity(&inv, &js, &p1.allocations)?;

        let mut soft = 0;
        for j in &js {
            let d = &p1.jobs[&j.name];
            soft += d.soft_matched;
            match (&d.zone, &d.error) {
                (Some(z), None) => {
                    let distinct: BTreeSet<&String> = d.hosts.iter().collect();
                    prop_assert_eq!(distinct.len() as u64, j.nodes);
                    prop_assert_eq!(d.host.as_ref(), d.hosts.first());
                    let zone = inv.zones.iter().find(|x| &x.name == z).unwrap();
                    prop_assert!(d.hosts.iter().all(|h| zone.hosts.iter().any(|x| &x.name == h)));
                    if j.mounts.iter().any(|m| m.volume == "scratch") {
                        let pin = p1.volume_hosts.get("scratch");
                        prop_assert!(pin.is_some_and(|h| d.hosts.contains(h)), "node-local volume not on {:?}", pin);
                    }
                }
                (None, Some(_)) => prop_assert!(d.hosts.is_empty() && d.host.is_none()),
                other => prop_assert!(false, "inconsistent decision {:?}", other),
            }
        }
        prop_assert_eq!(p1.soft_matched, soft);
        prop_assert!(js.iter().all(|j| p1.jobs.contains_key(&j.name)), "every job is placed or refused");
    }
}

/// Places `r`'s jobs on the fast path and on the reference path ([`super::reference`]: one
/// `run_rule` per host stage, every check run on every host, every host's use summed from the
/// ledger).
fn both_paths(
    inv: &Inventory,
    r: &crate::funnel::PlanRequest,
    v: &indexmap::IndexMap<String, crate::decision::VolumeDecision>,
) -> [(super::Placement, Vec<crate::decision::StageTrace>); 2] {
    [true, false].map(|reference| {
        super::REFERENCE.set(reference);
        let mut trace = crate::funnel::trace::Trace::new(r.trace_limit);
        let p = super::place_jobs(inv, r, v, &mut trace);
        super::REFERENCE.set(false);
        (p, trace.into_stages())
    })
}

fn three_volumes() -> indexmap::IndexMap<String, crate::decision::VolumeDecision> {
    vols(vec![
        ("data", existing("nfs", "data")),
        ("scratch", provisioned("local", "scratch", 1)),
        ("shared", provisioned("nfs", "shared", 2)),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The fast path (all host stages in one `run_rules`, stages with nothing to check
    /// recorded without running, hosts no earlier job of the workflow runs on checked against
    /// their `allocated` alone) gives exactly the reference path's decisions and trace, with
    /// listing limits that cut stages' listings short (1, 2) or list everything (0).
    #[test]
    fn fast_path_matches_the_reference(
        zones in prop::collection::vec(zone_spec(), 1..4),
        jobs in prop::collection::vec(job_spec(), 1..6),
        seed in any::<u64>(),
        with_projects in any::<bool>(),
        limit in 0usize..3,
    ) {
        let (inv, js) = build(&zones, &jobs, with_projects);
        let mut r = req(js, seed);
        r.trace_limit = limit;
        let [(slow, slow_trace), (fast, fast_trace)] = both_paths(&inv, &r, &three_volumes());
        prop_assert_eq!(&fast.jobs, &slow.jobs);
        prop_assert_eq!(&fast.allocations, &slow.allocations);
        prop_assert_eq!(&fast.volume_hosts, &slow.volume_hosts);
        prop_assert_eq!(fast.soft_matched, slow.soft_matched);
        prop_assert_eq!(&fast_trace, &slow_trace);
    }
}

/// The comparison above meets what the fast path skips: on a fixed sample of generated cases,
/// the paths agree and the sample has hosts rejected while earlier jobs of the same workflow
/// hold capacity on them, affinity partners, node-local pins and wanted networks.
#[test]
fn the_fast_path_comparison_covers_hosts_held_by_earlier_jobs() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let strategy = (
        prop::collection::vec(zone_spec(), 1..4),
        prop::collection::vec(job_spec(), 1..6),
        any::<u64>(),
        any::<bool>(),
    );
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..400 {
        let (zones, jobs, seed, with_projects) = strategy.new_tree(&mut runner).unwrap().current();
        let (inv, js) = build(&zones, &jobs, with_projects);
        let r = req(js, seed);
        let [(slow, slow_trace), (fast, fast_trace)] = both_paths(&inv, &r, &three_volumes());
        assert_eq!((&fast.jobs, &fast.allocations), (&slow.jobs, &slow.allocations));
        assert_eq!(fast_trace, slow_trace);
        for rej in fast_trace.iter().flat_map(|t| &t.rejected) {
            for reason in &rej.reasons {
                let m = &reason.message;
                let kind = if m.contains("of this workflow")
                    || (m.contains("this workflow ") && !m.contains("this workflow 0"))
                {
                    "held by an earlier job"
                } else {
                    reason.code.as_str()
                };
                *seen
                    .entry(match kind {
                        "held by an earlier job" => "held by an earlier job",
                        crate::decision::codes::AFFINITY => "affinity",
                        crate::decision::codes::ANTI_AFFINITY => "anti_affinity",
                        crate::decision::codes::PINNED_ELSEWHERE => "pinned_elsewhere",
                        crate::decision::codes::NETWORK => "network",
                        _ => "other",
                    })
                    .or_default() += 1;
            }
        }
    }
    for kind in [
        "held by an earlier job",
        "affinity",
        "anti_affinity",
        "pinned_elsewhere",
        "network",
    ] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) > 0,
            "no `{kind}` rejection in the sample: {seen:?}"
        );
    }
}
