//! Test-only builders for inventories, workflows and volume decisions.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use super::{Placement, place_jobs};
use crate::decision::{Action, Mode, NewVolume, Reason, StageTrace, VolumeDecision, codes};
use crate::funnel::PlanRequest;
use crate::funnel::trace::Trace;
use crate::model::*;
use crate::size::ByteSize;

/// `n` GiB.
pub fn gib(n: u128) -> ByteSize {
    ByteSize(n << 30)
}

/// Applies `f` to `t` and returns it: `with(host(..), |h| h.power = PowerState::Off)`.
pub fn with<T>(mut t: T, f: impl FnOnce(&mut T)) -> T {
    f(&mut t);
    t
}

/// Tags from `key[:value]` strings.
pub fn tags(s: &[&str]) -> Vec<Tag> {
    s.iter().map(|t| Tag::parse(t).unwrap()).collect()
}

/// Constraints from `[!]key[:value][:hard|:soft]` strings.
pub fn cons(s: &[&str]) -> Vec<Constraint> {
    s.iter().map(|c| Constraint::parse(c).unwrap()).collect()
}

/// Strings.
pub fn strs(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// A powered-on host with `cpu` cores and `mem` GiB, nothing allocated, no tags or networks.
pub fn host(name: &str, cpu: u64, mem: u128) -> Host {
    Host {
        name: name.into(),
        power: PowerState::On,
        tags: Vec::new(),
        capacity: Resources {
            cpu,
            memory: gib(mem),
            instances: 0,
            devices: BTreeMap::new(),
        },
        allocated: Resources::default(),
        networks: Vec::new(),
    }
}

/// `host` with `cpu` cores and `mem` GiB already allocated.
pub fn loaded(name: &str, cpu: u64, mem: u128, acpu: u64, amem: u128) -> Host {
    with(host(name, cpu, mem), |h| {
        h.allocated.cpu = acpu;
        h.allocated.memory = gib(amem);
    })
}

/// A zone (DEFAULT policy, priority 0, no tags or profiles).
pub fn zone(name: &str, hosts: Vec<Host>) -> Zone {
    Zone {
        name: name.into(),
        tags: Vec::new(),
        placement_policy: PlacementPolicy::Default,
        priority: 0,
        segment: None,
        images: Vec::new(),
        flavors: Vec::new(),
        storage: Vec::new(),
        hosts: hosts.into_iter().map(std::sync::Arc::new).collect(),
        host_cost_per_hour: None,
        origin: Origin::default(),
    }
}

/// An inventory of `zones`, no projects, one open NFS provisioner `nfs`.
pub fn inv(zones: Vec<Zone>) -> Inventory {
    Inventory {
        cluster: "c1".into(),
        provisioners: vec![prov(
            "nfs",
            Driver::Nfs {
                target: "srv:/export".into(),
                mount: None,
                version: None,
                options: None,
                sub_path: None,
            },
        )],
        volumes: Vec::new(),
        projects: Vec::new(),
        zones,
        version: "v".into(),
    }
}

/// A provisioner reachable from everywhere.
pub fn prov(name: &str, driver: Driver) -> Provisioner {
    Provisioner::new(name, driver)
}

/// A node-local hostpath provisioner.
pub fn local_prov(name: &str) -> Provisioner {
    prov(
        name,
        Driver::Hostpath {
            path: "/scratch".into(),
            local: true,
            sub_path: None,
        },
    )
}

/// A project with `(zone, priority)` assignments and no limits.
pub fn project(name: &str, zones: &[(&str, i64)]) -> Project {
    Project {
        name: name.into(),
        zones: zones
            .iter()
            .map(|(z, p)| ZoneAssignment {
                zone: z.to_string(),
                priority: *p,
                limits: ProjectLimits::default(),
                usage: ProjectUsage::default(),
            })
            .collect(),
    }
}

/// A job mounting `mounts`, needing 1 core and 1 GiB on one node.
pub fn job(name: &str, mounts: &[&str]) -> Job {
    Job {
        name: name.into(),
        kind: JobKind::Job,
        image: Some("docker://docker.io/library/alpine:3".into()),
        mounts: mounts
            .iter()
            .map(|m| Mount {
                volume: m.to_string(),
                path: format!("/{m}"),
            })
            .collect(),
        resources: JobResources {
            cpu: 1,
            memory: gib(1),
            ..JobResources::default()
        },
        nodes: 1,
        depends_on: Vec::new(),
        constraints: Vec::new(),
        affinity: Affinity::default(),
        networks: Vec::new(),
        timeout_ms: None,
        line: 1,
    }
}

/// `job` needing `cpu` cores and `mem` GiB.
pub fn sized(name: &str, mounts: &[&str], cpu: u64, mem: u128) -> Job {
    with(job(name, mounts), |j| {
        j.resources.cpu = cpu;
        j.resources.memory = gib(mem);
    })
}

/// A request for a workflow of `jobs` with `seed`.
pub fn req(jobs: Vec<Job>, seed: u64) -> PlanRequest {
    PlanRequest::new(
        "r-1",
        Workflow {
            priority: None,
            name: "wf".into(),
            format: WorkflowFormat::FuzzfileV4,
            volumes: Vec::new(),
            jobs,
            project: None,
            clusters: Vec::new(),
            annotations: BTreeMap::new(),
        },
        "u",
    )
    .with_seed(seed)
    .with_trace_limit(0)
}

/// An existing volume `name` of provisioner `prov`.
pub fn existing(prov: &str, name: &str) -> VolumeDecision {
    VolumeDecision {
        mode: Mode::ByName,
        provisioner: Some(prov.into()),
        volume: Some(name.into()),
        action: Some(Action::Existing),
        error: None,
        passed: None,
        new_volume: None,
    }
}

/// A new `gib` GiB volume `name` from provisioner `prov`.
pub fn provisioned(prov: &str, name: &str, size: u128) -> VolumeDecision {
    VolumeDecision {
        mode: Mode::Automatic,
        provisioner: Some(prov.into()),
        volume: Some(name.into()),
        action: Some(Action::Provision),
        error: None,
        passed: Some(1),
        new_volume: Some(NewVolume {
            name: name.into(),
            provisioner: prov.into(),
            capacity: gib(size),
            access_modes: AccessModes::of(&[AccessMode::ReadWriteOnce]),
            volume_mode: VolumeMode::Filesystem,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            reclaim_policy: ReclaimPolicy::Delete,
            ephemeral: true,
            host: None,
            claim_ref: None,
        }),
    }
}

/// A volume that failed to resolve.
pub fn failed() -> VolumeDecision {
    VolumeDecision {
        mode: Mode::Automatic,
        provisioner: None,
        volume: None,
        action: None,
        error: Some(Reason::new(codes::NO_PROVISIONER, "no provisioner passed")),
        passed: Some(0),
        new_volume: None,
    }
}

/// Volume decisions by key.
pub fn vols(list: Vec<(&str, VolumeDecision)>) -> IndexMap<String, VolumeDecision> {
    list.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// One existing NFS volume `data`: what most tests mount.
pub fn data() -> IndexMap<String, VolumeDecision> {
    vols(vec![("data", existing("nfs", "data"))])
}

/// Runs `place_jobs`.
pub fn run(
    inv: &Inventory,
    req: &PlanRequest,
    volumes: &IndexMap<String, VolumeDecision>,
) -> (Placement, Vec<StageTrace>) {
    let mut trace = Trace::default();
    let p = place_jobs(inv, req, volumes, &mut trace);
    (p, trace.into_stages())
}

/// The record of `stage` for `job` (panics when absent).
pub fn stage<'t>(trace: &'t [StageTrace], stage: &str, job: &str) -> &'t StageTrace {
    trace
        .iter()
        .find(|t| t.stage == stage && t.subject == job)
        .unwrap_or_else(|| panic!("no stage {stage} for {job} in {trace:#?}"))
}

/// Every reason `candidate` was rejected with in `stage` for `job` (empty when not rejected).
pub fn reasons(trace: &[StageTrace], st: &str, job: &str, candidate: &str) -> Vec<Reason> {
    stage(trace, st, job)
        .rejected
        .iter()
        .find(|r| r.candidate == candidate)
        .map(|r| r.reasons.clone())
        .unwrap_or_default()
}

/// The codes of [`reasons`].
pub fn codes_of(trace: &[StageTrace], st: &str, job: &str, candidate: &str) -> Vec<String> {
    reasons(trace, st, job, candidate).into_iter().map(|r| r.code).collect()
}

/// (zone, host) chosen for `job`, panicking with its error when not placed.
pub fn placed<'p>(p: &'p Placement, job: &str) -> (&'p str, &'p str) {
    let d = &p.jobs[job];
    match (&d.zone, &d.host) {
        (Some(z), Some(h)) => (z, h),
        _ => panic!("job {job} not placed: {:?}", d.error),
    }
}

/// The error code of `job`.
pub fn error_code(p: &Placement, job: &str) -> Option<String> {
    p.jobs[job].error.as_ref().map(|e| e.code.clone())
}
