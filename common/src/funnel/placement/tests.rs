//! Placement tests: one or more per row of Cloud Assembly's provisioning funnel's table, plus workflow-level accounting.

use super::testkit::*;
use crate::decision::codes;
use crate::funnel::seeded_pick;
use crate::model::*;

// ---- who takes part ---------------------------------------------------------------------

/// Cloud Assembly's provisioning funnel places every compute resource by its constraints and
/// the zone limits: a job without volumes is placed too.
#[test]
fn every_job_is_placed_and_unresolved_volumes_block() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let r = req(
        vec![
            job("mounts", &["data"]),
            job("plain", &[]),
            job("broken", &["data", "bad"]),
        ],
        1,
    );
    let v = vols(vec![("data", existing("nfs", "data")), ("bad", failed())]);
    let (p, trace) = run(&i, &r, &v);
    assert_eq!(p.jobs.keys().collect::<Vec<_>>(), ["mounts", "plain", "broken"]);
    assert_eq!(placed(&p, "mounts"), ("a", "h1"));
    assert_eq!(placed(&p, "plain"), ("a", "h1"));
    assert_eq!(error_code(&p, "broken").as_deref(), Some(codes::VOLUME_UNRESOLVED));
    assert!(p.jobs["broken"].error.as_ref().unwrap().message.contains("`bad`"));
    assert!(
        trace.iter().all(|t| t.subject != "broken"),
        "an unresolved job runs no stage"
    );
    assert_eq!(p.allocations.len(), 2);
    assert_eq!(p.allocations[0].resources.instances, 1);
}

/// A job without volumes that no host can take makes the workflow infeasible, as one with
/// volumes does (it was reported feasible when only jobs mounting volumes were placed).
#[test]
fn a_job_without_volumes_that_fits_nowhere_is_not_placed() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let (p, trace) = run(&i, &req(vec![sized("huge", &[], 100_000, 8)], 1), &data());
    assert_eq!(error_code(&p, "huge").as_deref(), Some(codes::NO_ZONE));
    let rs = reasons(&trace, "host.capacity", "huge", "a/h1");
    assert!(rs[0].message.contains("needs 100000 cores"), "{}", rs[0].message);
    assert!(p.allocations.is_empty());
}

#[test]
fn mount_of_undefined_volume_is_unresolved() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let (p, _) = run(&i, &req(vec![job("j", &["ghost"])], 1), &data());
    assert_eq!(error_code(&p, "j").as_deref(), Some(codes::VOLUME_UNRESOLVED));
}

// ---- stage 1: zones of the project ------------------------------------------------------

#[test]
fn zones_outside_the_project_are_filtered() {
    let mut i = inv(vec![
        zone("a", vec![host("ha", 8, 32)]),
        zone("b", vec![host("hb", 8, 32)]),
        zone("c", vec![host("hc", 8, 32)]),
    ]);
    i.projects = vec![
        project("research", &[("c", 1), ("b", 2)]),
        project("default", &[("a", 1)]),
    ];
    let mut r = req(vec![job("j", &["data"])], 1);
    r.workflow.project = Some("research".into());
    let (p, trace) = run(&i, &r, &data());
    assert_eq!(placed(&p, "j").0, "c", "priority 1 from the project's assignment wins");
    assert_eq!(codes_of(&trace, "zone.project", "j", "a"), [codes::NOT_IN_PROJECT]);
    assert_eq!(stage(&trace, "zone.project", "j").passed, 2);

    // The default project is `default`.
    r.workflow.project = None;
    let (p, _) = run(&i, &r, &data());
    assert_eq!(placed(&p, "j").0, "a");
}

#[test]
fn unknown_project_is_an_error() {
    let mut i = inv(vec![zone("a", vec![host("ha", 8, 32)])]);
    i.projects = vec![project("research", &[("a", 1)])];
    let mut r = req(vec![job("j", &["data"])], 1);
    r.workflow.project = Some("nope".into());
    let (p, trace) = run(&i, &r, &data());
    assert_eq!(error_code(&p, "j").as_deref(), Some(codes::NO_SUCH_PROJECT));
    assert!(p.jobs["j"].error.as_ref().unwrap().message.contains("research"));
    assert_eq!(codes_of(&trace, "zone.project", "j", "a"), [codes::NO_SUCH_PROJECT]);
}

#[test]
fn without_projects_every_zone_belongs_with_its_own_priority() {
    let i = inv(vec![
        with(zone("a", vec![host("ha", 8, 32)]), |z| z.priority = 5),
        with(zone("b", vec![host("hb", 8, 32)]), |z| z.priority = 2),
    ]);
    let mut r = req(vec![job("j", &["data"])], 1);
    r.workflow.project = Some("anything".into());
    let (p, trace) = run(&i, &r, &data());
    assert_eq!(placed(&p, "j").0, "b");
    assert_eq!(stage(&trace, "zone.project", "j").passed, 2);
}

// ---- stage 2.1: zone power --------------------------------------------------------------

#[test]
fn zones_without_powered_on_hosts_are_filtered() {
    let off = |n: &str| with(host(n, 8, 32), |h| h.power = PowerState::Off);
    let i = inv(vec![
        zone("dark", vec![off("d1"), off("d2")]),
        zone("empty", vec![]),
        zone("lit", vec![host("l1", 8, 32)]),
    ]);
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert_eq!(placed(&p, "j").0, "lit");
    assert_eq!(codes_of(&trace, "zone.power", "j", "dark"), [codes::NO_POWERED_ON_HOST]);
    assert_eq!(
        codes_of(&trace, "zone.power", "j", "empty"),
        [codes::NO_POWERED_ON_HOST]
    );
}

// ---- stage 2.2: capacity / project limits -----------------------------------------------

fn limited(limits: ProjectLimits, usage: ProjectUsage) -> Inventory {
    let hosts = |z: &str| (1..=3).map(|n| host(&format!("{z}{n}"), 64, 256)).collect();
    let mut i = inv(vec![zone("a", hosts("a")), zone("b", hosts("b"))]);
    let mut p = project("default", &[("a", 1), ("b", 2)]);
    p.zones[0].limits = limits;
    p.zones[0].usage = usage;
    i.projects = vec![p];
    i
}

#[test]
fn project_limits_report_every_exceeded_limit() {
    let i = limited(
        ProjectLimits {
            instances: Some(4),
            memory: Some(gib(64)),
            cpu: Some(16),
            storage: None,
        },
        ProjectUsage {
            instances: 1,
            memory: gib(60),
            cpu: 14,
            storage: gib(0),
        },
    );
    let (p, trace) = run(&i, &req(vec![sized("j", &["data"], 4, 8)], 1), &data());
    assert_eq!(placed(&p, "j").0, "b", "zone a is over its limits");
    let rs = reasons(&trace, "zone.limits", "j", "a");
    let codes: Vec<&str> = rs.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(
        codes,
        [codes::PROJECT_LIMIT, codes::PROJECT_LIMIT],
        "memory and cpu both reported"
    );
    assert!(rs[0].message.starts_with("memory:"), "{}", rs[0].message);
    assert!(
        rs[0]
            .message
            .contains("60GiB + this workflow 0B + job 8GiB = 68GiB > limit 64GiB"),
        "{}",
        rs[0].message
    );
    assert!(rs[1].message.starts_with("cpu:"), "{}", rs[1].message);
}

#[test]
fn instance_limit_counts_nodes_and_concurrent_jobs_of_the_workflow() {
    let lim = ProjectLimits {
        instances: Some(3),
        ..Default::default()
    };
    let i = limited(
        lim,
        ProjectUsage {
            instances: 1,
            ..Default::default()
        },
    );
    // Two concurrent jobs of 1 node each fit (1 + 1 + 1 = 3); a third concurrent one does not.
    let jobs = vec![job("a", &["data"]), job("b", &["data"]), job("c", &["data"])];
    let (p, trace) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "a").0, "a");
    assert_eq!(placed(&p, "b").0, "a");
    assert_eq!(placed(&p, "c").0, "b");
    assert_eq!(codes_of(&trace, "zone.limits", "c", "a"), [codes::PROJECT_LIMIT]);
    // When c waits for b, they never run together: c fits in zone a again.
    let jobs = vec![
        job("a", &["data"]),
        job("b", &["data"]),
        with(job("c", &["data"]), |j| j.depends_on = strs(&["b"])),
    ];
    let (p, _) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "c").0, "a");
    // A 3-node job alone exceeds 1 + 3 > 3.
    let (p, _) = run(&i, &req(vec![with(job("m", &["data"]), |j| j.nodes = 3)], 1), &data());
    assert_eq!(placed(&p, "m").0, "b");
}

#[test]
fn storage_limit_counts_each_new_volume_once() {
    let lim = ProjectLimits {
        storage: Some(gib(15)),
        ..Default::default()
    };
    let i = limited(lim, ProjectUsage::default());
    let v = vols(vec![
        ("scratch", provisioned("nfs", "scratch", 10)),
        ("more", provisioned("nfs", "more", 10)),
    ]);
    let jobs = vec![
        job("first", &["scratch"]),
        job("second", &["scratch"]),
        job("third", &["more"]),
    ];
    let (p, trace) = run(&i, &req(jobs, 1), &v);
    assert_eq!(placed(&p, "first").0, "a");
    assert_eq!(placed(&p, "second").0, "a", "scratch was already counted by `first`");
    assert_eq!(placed(&p, "third").0, "b", "10GiB + 10GiB > 15GiB");
    let rs = reasons(&trace, "zone.limits", "third", "a");
    assert_eq!(rs.len(), 1);
    assert!(
        rs[0].message.starts_with("storage:") && rs[0].message.contains("this workflow 10GiB + job 10GiB"),
        "{}",
        rs[0].message
    );
    // Existing volumes add no storage.
    let (p, _) = run(&i, &req(vec![job("x", &["data"])], 1), &data());
    assert_eq!(placed(&p, "x").0, "a");
}

// ---- stage 2.3: profiles ----------------------------------------------------------------

#[test]
fn image_profile() {
    let i = inv(vec![
        with(zone("nv", vec![host("h1", 8, 32)]), |z| {
            z.images = strs(&["docker://nvcr.io/"])
        }),
        with(zone("any", vec![host("h2", 8, 32)]), |z| z.priority = 9),
    ]);
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert_eq!(placed(&p, "j").0, "any");
    assert_eq!(codes_of(&trace, "zone.profiles", "j", "nv"), [codes::IMAGE_PROFILE]);
    let r = req(
        vec![with(job("j", &["data"]), |j| {
            j.image = Some("docker://nvcr.io/nvidia/pytorch:24.01".into())
        })],
        1,
    );
    let (p, _) = run(&i, &r, &data());
    assert_eq!(placed(&p, "j").0, "nv");
}

#[test]
fn flavor_profile() {
    let small = Flavor {
        name: "small".into(),
        cpu: 2,
        memory: gib(4),
    };
    let large = Flavor {
        name: "large".into(),
        cpu: 16,
        memory: gib(64),
    };
    let i = inv(vec![
        with(zone("small", vec![host("h1", 32, 128)]), |z| {
            z.flavors = vec![small.clone()]
        }),
        with(zone("large", vec![host("h2", 32, 128)]), |z| {
            z.flavors = vec![small.clone(), large.clone()];
            z.priority = 9;
        }),
    ]);
    let (p, trace) = run(&i, &req(vec![sized("j", &["data"], 4, 8)], 1), &data());
    assert_eq!(placed(&p, "j").0, "large");
    let rs = reasons(&trace, "zone.profiles", "j", "small");
    assert_eq!(rs[0].code, codes::FLAVOR_PROFILE);
    assert!(rs[0].message.contains("small 2 cores/4GiB"), "{}", rs[0].message);
}

#[test]
fn storage_profile_reports_each_unreachable_volume() {
    let mut i = inv(vec![
        with(zone("east", vec![host("h1", 8, 32)]), |z| {
            z.segment = Some("s-east".into())
        }),
        with(zone("west", vec![host("h2", 8, 32)]), |z| {
            z.segment = Some("s-west".into());
            z.priority = 9;
        }),
        with(zone("listed", vec![host("h3", 8, 32)]), |z| {
            z.storage = strs(&["fast", "seg"]);
            z.priority = 5;
        }),
    ]);
    let mut fast = prov(
        "fast",
        Driver::Nfs {
            target: "f:/x".into(),
            mount: None,
            version: None,
            options: None,
            sub_path: None,
        },
    );
    fast.reachability.zones = strs(&["west"]);
    let mut seg = prov(
        "seg",
        Driver::Nfs {
            target: "s:/x".into(),
            mount: None,
            version: None,
            options: None,
            sub_path: None,
        },
    );
    seg.reachability.segment = Some("s-west".into());
    i.provisioners.extend([fast, seg]);
    let v = vols(vec![("a", existing("fast", "a")), ("b", existing("seg", "b"))]);
    let (p, trace) = run(&i, &req(vec![job("j", &["a", "b"])], 1), &v);
    assert_eq!(
        placed(&p, "j").0,
        "listed",
        "the zone's storage profile names both provisioners"
    );
    let rs = reasons(&trace, "zone.profiles", "j", "east");
    assert_eq!(rs.len(), 2, "both volumes reported: {rs:?}");
    assert!(rs.iter().all(|r| r.code == codes::STORAGE_UNREACHABLE));
    assert!(rs[0].message.contains("volume `a`") && rs[1].message.contains("volume `b`"));
    assert!(reasons(&trace, "zone.profiles", "j", "west").is_empty());
}

// ---- stage 3.1: powered-off hosts -------------------------------------------------------

#[test]
fn powered_off_hosts_are_filtered() {
    let i = inv(vec![zone(
        "a",
        vec![
            with(host("h1", 8, 32), |h| h.power = PowerState::Off),
            host("h2", 8, 32),
        ],
    )]);
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert_eq!(placed(&p, "j"), ("a", "h2"));
    assert_eq!(codes_of(&trace, "host.power", "j", "a/h1"), [codes::POWERED_OFF]);
}

// ---- stage 3.2: hard constraints on host ∪ zone tags --------------------------------------

#[test]
fn hard_constraints_hold_on_the_union_of_host_and_zone_tags() {
    let i = inv(vec![
        with(
            zone(
                "eu",
                vec![
                    with(host("gpu", 8, 32), |h| h.tags = tags(&["gpu:a100"])),
                    host("cpu", 8, 32),
                ],
            ),
            |z| z.tags = tags(&["region:eu"]),
        ),
        zone(
            "us",
            vec![with(host("gpu-us", 8, 32), |h| h.tags = tags(&["gpu:a100"]))],
        ),
    ]);
    let j = with(job("j", &["data"]), |j| {
        j.constraints = cons(&["gpu:a100", "region:eu", "!maintenance"])
    });
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(
        placed(&p, "j"),
        ("eu", "gpu"),
        "neither host nor zone alone has both tags"
    );
    assert_eq!(
        codes_of(&trace, "host.hard_constraints", "j", "eu/cpu"),
        [codes::HARD_CONSTRAINT]
    );
    let rs = reasons(&trace, "host.hard_constraints", "j", "us/gpu-us");
    assert_eq!(rs.len(), 1);
    assert!(
        rs[0].message.contains("region:eu") && rs[0].message.contains("no tag `region`"),
        "{}",
        rs[0].message
    );
}

#[test]
fn negated_constraints_and_resource_annotations_are_hard() {
    let i = inv(vec![zone(
        "a",
        vec![
            with(host("down", 8, 32), |h| {
                h.tags = tags(&["maintenance", "nvidia.com/gpu.model:NVIDIA H100"])
            }),
            with(host("a100", 8, 32), |h| {
                h.tags = tags(&["nvidia.com/gpu.model:NVIDIA A100"])
            }),
            with(host("h100", 8, 32), |h| {
                h.tags = tags(&["nvidia.com/gpu.model:NVIDIA H100"])
            }),
        ],
    )]);
    let j = with(job("j", &["data"]), |j| {
        j.constraints = cons(&["!maintenance"]);
        j.resources
            .annotations
            .insert("nvidia.com/gpu.model".into(), "NVIDIA H100".into());
    });
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(placed(&p, "j").1, "h100");
    assert_eq!(
        codes_of(&trace, "host.hard_constraints", "j", "a/down"),
        [codes::HARD_CONSTRAINT]
    );
    let rs = reasons(&trace, "host.hard_constraints", "j", "a/a100");
    assert!(
        rs[0].message.contains("nvidia.com/gpu.model:NVIDIA A100"),
        "{}",
        rs[0].message
    );
}

#[test]
fn a_rejected_host_lists_all_failing_constraints() {
    let i = inv(vec![zone(
        "a",
        vec![with(host("h", 8, 32), |h| h.tags = tags(&["maintenance"]))],
    )]);
    let j = with(job("j", &["data"]), |j| {
        j.constraints = cons(&["gpu", "!maintenance", "ssd:nvme:hard", "fast:soft"]);
        j.resources.annotations.insert("arch".into(), "x86".into());
    });
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(error_code(&p, "j").as_deref(), Some(codes::NO_ZONE));
    let rs = reasons(&trace, "host.hard_constraints", "j", "a/h");
    assert_eq!(
        rs.len(),
        4,
        "gpu, !maintenance, ssd:nvme and the annotation, not the soft one: {rs:?}"
    );
}

// ---- stages 3.3 / 3.4: affinity and anti-affinity ---------------------------------------

fn three_hosts(policy: PlacementPolicy) -> Inventory {
    inv(vec![with(
        zone("a", vec![host("h1", 8, 32), host("h2", 8, 32), host("h3", 8, 32)]),
        |z| z.placement_policy = policy,
    )])
}

#[test]
fn affinity_puts_jobs_together_both_ways() {
    let i = three_hosts(PlacementPolicy::Spread);
    // Spread alone would move `b` to an idle host.
    let jobs = vec![
        job("a", &["data"]),
        with(job("b", &["data"]), |j| j.affinity.with = strs(&["a"])),
    ];
    let (p, trace) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "b").1, placed(&p, "a").1);
    assert_eq!(stage(&trace, "host.affinity", "b").passed, 1);
    assert_eq!(codes_of(&trace, "host.affinity", "b", "a/h2"), [codes::AFFINITY]);
    // Declared on the earlier job only.
    let jobs = vec![
        with(job("a", &["data"]), |j| j.affinity.with = strs(&["b"])),
        job("b", &["data"]),
    ];
    let (p, _) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "b").1, placed(&p, "a").1);
}

#[test]
fn anti_affinity_keeps_jobs_apart_both_ways() {
    let i = three_hosts(PlacementPolicy::Binpack);
    // Binpack alone would stack `b` on `a`'s host.
    let jobs = vec![
        job("a", &["data"]),
        with(job("b", &["data"]), |j| j.affinity.apart_from = strs(&["a"])),
    ];
    let (p, trace) = run(&i, &req(jobs, 1), &data());
    let ha = placed(&p, "a").1;
    assert_ne!(placed(&p, "b").1, ha);
    assert_eq!(
        codes_of(&trace, "host.anti_affinity", "b", &format!("a/{ha}")),
        [codes::ANTI_AFFINITY]
    );
    let jobs = vec![
        with(job("a", &["data"]), |j| j.affinity.apart_from = strs(&["b"])),
        job("b", &["data"]),
    ];
    let (p, _) = run(&i, &req(jobs, 1), &data());
    assert_ne!(placed(&p, "b").1, placed(&p, "a").1);
    // Without the rule, binpack stacks them.
    let (p, _) = run(&i, &req(vec![job("a", &["data"]), job("b", &["data"])], 1), &data());
    assert_eq!(placed(&p, "b").1, placed(&p, "a").1);
}

// ---- stage 3.5: multi-host jobs ---------------------------------------------------------

#[test]
fn multi_host_jobs_need_enough_hosts_in_one_zone_sharing_a_network() {
    let net = |n: &str, nets: &[&str]| with(host(n, 8, 32), |h| h.networks = strs(nets));
    let i = inv(vec![
        zone("two", vec![host("t1", 8, 32), host("t2", 8, 32)]),
        zone(
            "split",
            vec![net("s1", &["n1"]), net("s2", &["n1"]), net("s3", &["n2"])],
        ),
        zone(
            "ok",
            vec![
                net("o1", &["n1"]),
                net("o2", &["n2"]),
                net("o3", &["n2", "n1"]),
                net("o4", &["n1"]),
            ],
        ),
    ]);
    let j = with(job("mpi", &["data"]), |j| j.nodes = 3);
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    let d = &p.jobs["mpi"];
    assert_eq!(d.zone.as_deref(), Some("ok"));
    let mut hosts = d.hosts.clone();
    hosts.sort();
    assert_eq!(hosts, ["o1", "o3", "o4"], "the hosts on n1");
    assert_eq!(d.host.as_deref(), Some(d.hosts[0].as_str()));
    let two = reasons(&trace, "zone.multi_host", "mpi", "two");
    assert!(two[0].code == codes::MULTI_HOST && two[0].message.contains("2 fitting hosts, the job needs 3"));
    let split = reasons(&trace, "zone.multi_host", "mpi", "split");
    assert!(
        split[0].message.contains("at most 2 share a network"),
        "{}",
        split[0].message
    );
    assert_eq!(p.allocations.len(), 3);
}

#[test]
fn hosts_without_networks_share_the_default_network() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32), host("h2", 8, 32)])]);
    let (p, _) = run(&i, &req(vec![with(job("mpi", &["data"]), |j| j.nodes = 2)], 1), &data());
    assert_eq!(p.jobs["mpi"].hosts.len(), 2);
}

#[test]
fn each_node_of_a_multi_host_job_must_fit() {
    let i = inv(vec![zone(
        "a",
        vec![host("big1", 8, 32), host("small", 2, 32), host("big2", 8, 32)],
    )]);
    let j = with(sized("mpi", &["data"], 4, 4), |j| j.nodes = 2);
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    let mut hosts = p.jobs["mpi"].hosts.clone();
    hosts.sort();
    assert_eq!(hosts, ["big1", "big2"]);
    assert_eq!(
        codes_of(&trace, "host.capacity", "mpi", "a/small"),
        [codes::INSUFFICIENT]
    );
}

// ---- stage 3.6: networks ----------------------------------------------------------------

#[test]
fn hosts_must_be_on_every_network_of_the_job() {
    let i = inv(vec![zone(
        "a",
        vec![
            with(host("eth", 8, 32), |h| h.networks = strs(&["eth"])),
            with(host("both", 8, 32), |h| h.networks = strs(&["eth", "ib"])),
        ],
    )]);
    let j = with(job("j", &["data"]), |j| j.networks = strs(&["ib", "eth"]));
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(placed(&p, "j").1, "both");
    let rs = reasons(&trace, "host.network", "j", "a/eth");
    assert_eq!(rs.len(), 1);
    assert!(rs[0].code == codes::NETWORK && rs[0].message.contains("`ib`"));
}

// ---- stage 3.7: storage -----------------------------------------------------------------

#[test]
fn node_local_volume_pins_later_jobs_to_its_host() {
    let mut i = three_hosts(PlacementPolicy::Spread);
    i.provisioners.push(local_prov("local"));
    let v = vols(vec![
        ("scratch", provisioned("local", "scratch", 1)),
        ("data", existing("nfs", "data")),
    ]);
    let jobs = vec![
        job("a", &["scratch"]),
        job("other", &["data"]),
        job("b", &["scratch", "data"]),
    ];
    let (p, trace) = run(&i, &req(jobs, 1), &v);
    let ha = placed(&p, "a").1.to_string();
    assert_eq!(
        placed(&p, "b").1,
        ha,
        "spread would choose an idle host; the volume pins b"
    );
    assert_eq!(p.volume_hosts.get("scratch"), Some(&ha));
    let other = p.jobs["other"].host.clone().unwrap();
    assert_eq!(
        codes_of(&trace, "host.storage", "b", &format!("a/{other}")),
        [codes::PINNED_ELSEWHERE]
    );
    // Shared (non-local) new volumes pin nothing.
    let v = vols(vec![("scratch", provisioned("nfs", "scratch", 1))]);
    let (p, _) = run(&i, &req(vec![job("a", &["scratch"]), job("b", &["scratch"])], 1), &v);
    assert!(p.volume_hosts.is_empty());
    assert_ne!(placed(&p, "a").1, placed(&p, "b").1);
}

#[test]
fn persistent_volume_node_affinity_limits_hosts() {
    let mut i = inv(vec![zone(
        "z1",
        vec![
            host("h1", 8, 32),
            with(host("h2", 8, 32), |h| h.tags = tags(&["disk:ssd", "rack"])),
        ],
    )]);
    let req_of = |key: &str, op: SelectorOperator, values: &[&str]| LabelRequirement {
        key: key.into(),
        operator: op,
        values: strs(values),
    };
    i.volumes.push(std::sync::Arc::new(PersistentVolume {
        name: "pv".into(),
        provisioner: Some("nfs".into()),
        capacity: gib(10),
        access_modes: AccessModes::of(&[AccessMode::ReadWriteOnce]),
        volume_mode: VolumeMode::Filesystem,
        labels: Default::default(),
        annotations: Default::default(),
        phase: VolumePhase::Available,
        claim_ref: None,
        reclaim_policy: ReclaimPolicy::Retain,
        being_deleted: false,
        node_affinity: Some(NodeAffinity {
            terms: vec![
                vec![req_of("kubernetes.io/hostname", SelectorOperator::In, &["elsewhere"])],
                vec![
                    req_of("disk", SelectorOperator::In, &["ssd"]),
                    req_of("rack", SelectorOperator::Exists, &[]),
                    req_of("topology.kubernetes.io/zone", SelectorOperator::In, &["z1"]),
                ],
            ],
        }),
        origin: Origin::default(),
    }));
    let v = vols(vec![("pv", existing("nfs", "pv"))]);
    let (p, trace) = run(&i, &req(vec![job("j", &["pv"])], 1), &v);
    assert_eq!(placed(&p, "j").1, "h2");
    let rs = reasons(&trace, "host.storage", "j", "z1/h1");
    assert_eq!(rs[0].code, codes::NODE_AFFINITY);
    assert!(
        rs[0].message.contains("kubernetes.io/hostname in (elsewhere)"),
        "{}",
        rs[0].message
    );
}

// ---- stage 3.5/capacity and workflow concurrency ----------------------------------------

#[test]
fn independent_jobs_share_a_host_only_if_both_fit() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let jobs = vec![sized("a", &["data"], 6, 8), sized("b", &["data"], 6, 8)];
    let (p, trace) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "a"), ("a", "h1"));
    assert_eq!(error_code(&p, "b").as_deref(), Some(codes::NO_ZONE));
    assert!(p.jobs["b"].error.as_ref().unwrap().message.contains("host.capacity"));
    let rs = reasons(&trace, "host.capacity", "b", "a/h1");
    assert_eq!(rs.len(), 1);
    assert!(
        rs[0].message.contains("cpu: needs 6 cores, 2 cores free") && rs[0].message.contains("this workflow 6 cores"),
        "{}",
        rs[0].message
    );
    assert_eq!(p.allocations.len(), 1);
}

#[test]
fn dependent_jobs_reuse_the_same_capacity() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let jobs = vec![
        sized("a", &["data"], 6, 8),
        job("mid", &[]),
        with(sized("b", &["data"], 6, 8), |j| j.depends_on = strs(&["mid"])),
    ];
    let mut r = req(jobs, 1);
    r.workflow.jobs[1].depends_on = strs(&["a"]);
    let (p, _) = run(&i, &r, &data());
    assert_eq!(placed(&p, "a").1, "h1");
    assert_eq!(placed(&p, "b").1, "h1", "b transitively waits for a");
    assert_eq!(p.allocations.len(), 3, "mid, without volumes, is placed too");
}

#[test]
fn a_rejected_host_lists_every_insufficient_resource() {
    let h = with(loaded("h", 8, 16, 6, 12), |h| {
        h.capacity.instances = 1;
        h.allocated.instances = 1;
        h.capacity.devices.insert("nvidia.com/gpu".into(), 1);
    });
    let i = inv(vec![zone("a", vec![h])]);
    let j = with(sized("j", &["data"], 4, 8), |j| {
        j.resources.devices.insert("nvidia.com/gpu".into(), 2);
    });
    let (_, trace) = run(&i, &req(vec![j], 1), &data());
    let rs = reasons(&trace, "host.capacity", "j", "a/h");
    let what: Vec<&str> = rs.iter().map(|r| r.message.split(':').next().unwrap()).collect();
    assert_eq!(what, ["cpu", "memory", "instances", "device nvidia.com/gpu"]);
    assert!(rs.iter().all(|r| r.code == codes::INSUFFICIENT));
    assert!(rs[1].message.contains("needs 8GiB, 4GiB free"), "{}", rs[1].message);
}

#[test]
fn exclusive_jobs_need_idle_hosts_and_keep_them() {
    let i = inv(vec![with(
        zone("a", vec![loaded("busy", 64, 256, 1, 1), host("idle", 64, 256)]),
        |z| z.placement_policy = PlacementPolicy::Binpack,
    )]);
    let jobs = vec![
        with(job("x", &["data"]), |j| j.resources.exclusive = true),
        job("y", &["data"]),
    ];
    let (p, trace) = run(&i, &req(jobs, 1), &data());
    assert_eq!(placed(&p, "x").1, "idle");
    assert_eq!(codes_of(&trace, "host.capacity", "x", "a/busy"), [codes::INSUFFICIENT]);
    assert_eq!(placed(&p, "y").1, "busy", "idle is held exclusively by x");
    assert!(
        reasons(&trace, "host.capacity", "y", "a/idle")[0]
            .message
            .contains("exclusively by job `x`")
    );
}

// ---- stage 3.8: placement policies ------------------------------------------------------

fn policy_zone(policy: PlacementPolicy) -> Inventory {
    // load: h1 0.25, h2 0.75 (cpu), h3 0.5 but the most free memory, h4 too full to fit.
    inv(vec![with(
        zone(
            "a",
            vec![
                loaded("h1", 8, 32, 2, 8),
                loaded("h2", 8, 32, 6, 8),
                loaded("h3", 16, 256, 8, 64),
                loaded("h4", 8, 32, 8, 32),
            ],
        ),
        |z| z.placement_policy = policy,
    )])
}

#[test]
fn binpack_chooses_the_most_loaded_host_that_fits() {
    let (p, _) = run(
        &policy_zone(PlacementPolicy::Binpack),
        &req(vec![job("j", &["data"])], 1),
        &data(),
    );
    assert_eq!(placed(&p, "j").1, "h2");
}

#[test]
fn spread_chooses_the_least_used_host() {
    let (p, _) = run(
        &policy_zone(PlacementPolicy::Spread),
        &req(vec![job("j", &["data"])], 1),
        &data(),
    );
    assert_eq!(placed(&p, "j").1, "h1");
}

#[test]
fn spread_memory_chooses_the_most_free_memory() {
    let (p, _) = run(
        &policy_zone(PlacementPolicy::SpreadMemory),
        &req(vec![job("j", &["data"])], 1),
        &data(),
    );
    assert_eq!(placed(&p, "j").1, "h3");
}

#[test]
fn default_policy_is_seeded_random_over_fitting_hosts() {
    let i = policy_zone(PlacementPolicy::Default);
    let fitting = ["h1", "h2", "h3"];
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let (p, _) = run(&i, &req(vec![job("j", &["data"])], seed), &data());
        let want = fitting[seeded_pick(seed, "host:j:a", 3)];
        assert_eq!(placed(&p, "j").1, want);
        seen.insert(want);
    }
    assert!(seen.len() > 1);
}

#[test]
fn policies_count_earlier_jobs_of_the_workflow() {
    let i = inv(vec![with(zone("a", vec![host("h1", 8, 32), host("h2", 8, 32)]), |z| {
        z.placement_policy = PlacementPolicy::Spread
    })]);
    let (p, _) = run(&i, &req(vec![job("a", &["data"]), job("b", &["data"])], 1), &data());
    assert_eq!((placed(&p, "a").1, placed(&p, "b").1), ("h1", "h2"));
}

// ---- stage 4: zone choice ---------------------------------------------------------------

#[test]
fn zone_with_lowest_priority_number_wins() {
    let mut i = inv(vec![
        zone("a", vec![host("ha", 8, 32)]),
        zone("b", vec![host("hb", 8, 32)]),
    ]);
    i.projects = vec![project("default", &[("a", 3), ("b", 1)])];
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert_eq!(placed(&p, "j").0, "b");
    let rs = reasons(&trace, "zone.choice", "j", "a");
    assert_eq!(rs[0].code, codes::LOWER_PRIORITY);
    assert_eq!(rs[0].message, "priority 3 > 1 of zone `b`");
}

#[test]
fn equal_priority_goes_to_most_soft_constraints_on_zone_and_host_tags() {
    let i = inv(vec![
        with(zone("plain", vec![host("p1", 8, 32)]), |z| z.tags = tags(&["ssd"])),
        with(
            zone("rich", vec![with(host("r1", 8, 32), |h| h.tags = tags(&["gpu"]))]),
            |z| z.tags = tags(&["ssd"]),
        ),
        with(
            zone(
                "far",
                vec![with(host("f1", 8, 32), |h| h.tags = tags(&["gpu", "ssd", "fast"]))],
            ),
            |z| z.priority = 1,
        ),
    ]);
    let j = with(job("j", &["data"]), |j| {
        j.constraints = cons(&["ssd:soft", "gpu:soft", "fast:soft"])
    });
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(placed(&p, "j").0, "rich");
    assert_eq!(p.jobs["j"].soft_matched, 2);
    assert_eq!(p.soft_matched, 2);
    assert_eq!(
        codes_of(&trace, "zone.choice", "j", "plain"),
        [codes::FEWER_SOFT_MATCHES]
    );
    assert_eq!(
        codes_of(&trace, "zone.choice", "j", "far"),
        [codes::LOWER_PRIORITY],
        "priority comes first"
    );
}

/// Cloud Assembly's provisioning funnel step 3: "After a cloud zone is selected, a host is selected by matching a series of
/// filters, including hard & soft constraints". Within a zone, hosts meeting more soft
/// constraints (host tags ∪ zone tags) come first; BINPACK then orders the rest. Recorded in
/// `host.choice`.
#[test]
fn soft_constraints_rank_hosts_before_the_placement_policy() {
    for policy in [
        PlacementPolicy::Binpack,
        PlacementPolicy::Spread,
        PlacementPolicy::SpreadMemory,
        PlacementPolicy::Default,
    ] {
        let i = inv(vec![with(
            zone(
                "a",
                vec![
                    loaded("busy", 8, 32, 6, 24),
                    with(loaded("gpu", 8, 32, 1, 1), |h| h.tags = tags(&["gpu"])),
                    loaded("idle", 8, 32, 0, 0),
                ],
            ),
            |z| {
                z.placement_policy = policy;
                z.tags = tags(&["ssd"]);
            },
        )]);
        let j = with(job("j", &["data"]), |j| j.constraints = cons(&["gpu:soft", "ssd:soft"]));
        for seed in 0..8 {
            let (p, trace) = run(&i, &req(vec![j.clone()], seed), &data());
            assert_eq!(placed(&p, "j"), ("a", "gpu"), "{policy:?} seed {seed}");
            assert_eq!(p.jobs["j"].soft_matched, 2, "zone tag ssd + host tag gpu");
            let hc = stage(&trace, "host.choice", "j");
            assert_eq!((hc.considered, hc.passed), (3, 1));
            assert_eq!(
                codes_of(&trace, "host.choice", "j", "a/busy"),
                [codes::FEWER_SOFT_MATCHES]
            );
            let rs = reasons(&trace, "host.choice", "j", "a/idle");
            assert_eq!(rs[0].message, "meets 1 of 2 soft constraint(s); host `gpu` meets 2");
        }
    }
    // Without soft constraints the policy alone decides (BINPACK: the busiest host), and the
    // others are recorded as ranked after it.
    let i = inv(vec![with(
        zone("a", vec![loaded("busy", 8, 32, 6, 24), loaded("idle", 8, 32, 0, 0)]),
        |z| z.placement_policy = PlacementPolicy::Binpack,
    )]);
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert_eq!(placed(&p, "j").1, "busy");
    assert_eq!(codes_of(&trace, "host.choice", "j", "a/idle"), [codes::POLICY_ORDER]);
}

/// `host.choice` counts the hosts past its listing without asking each one
/// (`record_ranking`'s tally): at every listing limit its record is the full listing's, cut
/// after the limit, with the same per-code counts, passed and considered, for every policy,
/// single- and multi-host jobs, soft constraints some hosts meet and hosts on two networks.
#[test]
fn host_choice_counts_the_unlisted_hosts_as_the_full_listing_does() {
    use crate::funnel::trace::Trace;
    let hosts: Vec<Host> = (0..40u64)
        .map(|k| {
            with(loaded(&format!("h{k}"), 16, 64, k % 7, u128::from(k % 5) * 4), |h| {
                if k % 3 == 0 {
                    h.tags = tags(&["gpu"]);
                }
                h.networks = strs(if k % 4 == 0 { &["ib0"] } else { &["eth0"] });
            })
        })
        .collect();
    for policy in [
        PlacementPolicy::Binpack,
        PlacementPolicy::Spread,
        PlacementPolicy::SpreadMemory,
        PlacementPolicy::Default,
    ] {
        let i = inv(vec![with(zone("a", hosts.clone()), |z| z.placement_policy = policy)]);
        for (nodes, soft) in [
            (1, &[][..]),
            (1, &["gpu:soft"][..]),
            (3, &["gpu:soft"][..]),
            (4, &[][..]),
        ] {
            let j = with(job("j", &["data"]), |j| {
                j.nodes = nodes;
                j.constraints = cons(soft);
            });
            for seed in 0..4 {
                let r = req(vec![j.clone()], seed);
                let mut all = Trace::new(0);
                super::place_jobs(&i, &r, &data(), &mut all);
                let all = all.into_stages();
                let full = stage(&all, "host.choice", "j");
                assert!(
                    !full.reason_counts.is_empty() && full.omitted == 0,
                    "{policy:?} {nodes} {soft:?}"
                );
                for limit in [1, 2, 5, 39] {
                    let mut cut = Trace::new(limit);
                    super::place_jobs(&i, &r, &data(), &mut cut);
                    let cut = cut.into_stages();
                    let hc = stage(&cut, "host.choice", "j");
                    let case = format!("{policy:?} nodes {nodes} soft {soft:?} seed {seed} limit {limit}");
                    assert_eq!((hc.considered, hc.passed), (full.considered, full.passed), "{case}");
                    assert_eq!(hc.reason_counts, full.reason_counts, "{case}");
                    assert_eq!(
                        hc.rejected[..],
                        full.rejected[..limit.min(full.rejected.len())],
                        "{case}"
                    );
                    assert_eq!(hc.omitted, full.rejected.len() - hc.rejected.len(), "{case}");
                }
            }
        }
    }
}

/// Cloud Assembly's provisioning funnel step 4.1: zones of equal priority are "sorted by matching soft constraints, using a
/// combination of the cloud zone and compute capabilities": a zone scores what its best
/// remaining host meets, not what the host its policy would pick without them meets.
#[test]
fn a_zone_scores_the_soft_constraints_of_its_best_remaining_host() {
    let i = inv(vec![
        with(
            zone(
                "binpacked",
                vec![
                    loaded("full-ish", 8, 32, 7, 30),
                    with(host("tagged", 8, 32), |h| h.tags = tags(&["gpu"])),
                ],
            ),
            |z| z.placement_policy = PlacementPolicy::Binpack,
        ),
        zone("plain", vec![host("p1", 8, 32)]),
    ]);
    let j = with(job("j", &["data"]), |j| j.constraints = cons(&["gpu:soft"]));
    for seed in 0..8 {
        let (p, trace) = run(&i, &req(vec![j.clone()], seed), &data());
        assert_eq!(placed(&p, "j"), ("binpacked", "tagged"), "seed {seed}");
        let rs = reasons(&trace, "zone.choice", "j", "plain");
        assert_eq!(rs[0].code, codes::FEWER_SOFT_MATCHES);
        assert_eq!(
            rs[0].message,
            "its best host meets 0 soft constraint(s) < 1 in zone `binpacked`"
        );
    }
}

/// A multi-host job takes the hosts meeting the most soft constraints first.
#[test]
fn multi_host_jobs_take_soft_matching_hosts_first() {
    let i = inv(vec![with(
        zone(
            "a",
            vec![
                loaded("b1", 8, 32, 6, 24),
                with(host("g1", 8, 32), |h| h.tags = tags(&["gpu"])),
                loaded("b2", 8, 32, 6, 24),
                with(host("g2", 8, 32), |h| h.tags = tags(&["gpu"])),
            ],
        ),
        |z| z.placement_policy = PlacementPolicy::Binpack,
    )]);
    let j = with(job("j", &["data"]), |j| {
        j.nodes = 2;
        j.constraints = cons(&["gpu:soft"]);
    });
    let (p, _) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(p.jobs["j"].hosts, ["g1", "g2"]);
    assert_eq!(p.jobs["j"].soft_matched, 1);
}

#[test]
fn full_ties_are_broken_by_a_seeded_draw() {
    let i = inv((0..4)
        .map(|n| zone(&format!("z{n}"), vec![host(&format!("h{n}"), 8, 32)]))
        .collect());
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let r = req(vec![job("j", &["data"])], seed);
        let (p1, t1) = run(&i, &r, &data());
        let (p2, t2) = run(&i, &r, &data());
        assert_eq!(p1.jobs, p2.jobs, "same seed, same answer");
        assert_eq!(t1, t2);
        let z = placed(&p1, "j").0.to_string();
        assert_eq!(z, format!("z{}", seeded_pick(seed, "zone:j", 4)));
        let choice = stage(&t1, "zone.choice", "j");
        assert_eq!((choice.considered, choice.passed), (4, 1));
        assert!(choice.rejected.iter().all(|r| r.reasons[0].code == codes::SEEDED_DRAW));
        seen.insert(z);
    }
    assert!(seen.len() > 1, "different seeds reach different zones");
}

// ---- the whole trace --------------------------------------------------------------------

#[test]
fn stages_run_in_order_and_stop_when_nothing_is_left() {
    let i = inv(vec![zone("a", vec![host("h1", 8, 32)])]);
    let (p, trace) = run(&i, &req(vec![job("j", &["data"])], 1), &data());
    assert!(p.jobs["j"].error.is_none());
    let names: Vec<&str> = trace.iter().map(|t| t.stage.as_str()).collect();
    assert_eq!(
        names,
        [
            "zone.project",
            "zone.power",
            "zone.limits",
            "zone.profiles",
            "host.power",
            "host.hard_constraints",
            "host.affinity",
            "host.anti_affinity",
            "host.network",
            "host.storage",
            "host.capacity",
            "zone.multi_host",
            "zone.choice",
            "host.choice"
        ]
    );
    let j = with(job("j", &["data"]), |j| j.networks = strs(&["ib"]));
    let (p, trace) = run(&i, &req(vec![j], 1), &data());
    assert_eq!(trace.last().unwrap().stage, "host.network");
    let e = p.jobs["j"].error.clone().unwrap();
    assert_eq!(e.code, codes::NO_ZONE);
    assert!(
        e.message.contains("host.network") && e.message.contains("network (1x)"),
        "{}",
        e.message
    );
    assert!(!e.message.contains('\n'));
    let (p, _) = run(&inv(vec![]), &req(vec![job("j", &["data"])], 1), &data());
    assert!(p.jobs["j"].error.as_ref().unwrap().message.contains("no zones"));
}
