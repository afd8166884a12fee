//! Synthetic inventories and workflows of any size, for benchmarks and property tests.
//!
//! Everything is derived from the arguments alone (no randomness), so two calls with the same
//! sizes give identical data.

use std::collections::BTreeMap;

use crate::model::*;
use crate::size::ByteSize;

const GIB: u128 = 1 << 30;

/// Sizes of a synthetic cluster.
#[derive(Debug, Clone, Copy)]
pub struct SynthSizes {
    /// Hosts in total (spread over zones of at most 1,000 hosts).
    pub hosts: usize,
    /// Provisioners (the last one carries `tier: fast`; the others `tier: slow`).
    pub provisioners: usize,
    /// Existing persistent volumes, spread over the provisioners, 1–64 GiB, mostly Available.
    pub volumes: usize,
}

/// A cluster named `name` of the given sizes. Hosts are 64 cores / 256 GiB / 16 instances,
/// partly allocated, every 10th powered off, every 7th tagged `gpu`; zones get priorities 1..n,
/// policies cycling through BINPACK, SPREAD, SPREAD_MEMORY, DEFAULT.
pub fn cluster(name: &str, s: SynthSizes) -> Inventory {
    let provisioners: Vec<Provisioner> = (0..s.provisioners.max(1))
        .map(|i| {
            let fast = i + 1 == s.provisioners.max(1);
            let driver = Driver::Nfs {
                target: format!("nfs-{i}:/export"),
                mount: None,
                version: None,
                options: None,
                sub_path: None,
            };
            Provisioner::new(format!("prov-{i}"), driver)
                .with_annotation("tier", if fast { "fast" } else { "slow" })
                .with_default(i == 0)
        })
        .collect();
    let np = provisioners.len();
    let volumes = (0..s.volumes)
        .map(|i| PersistentVolume {
            name: format!("vol-{i}"),
            provisioner: Some(format!("prov-{}", i % np)),
            capacity: ByteSize(GIB * (1 + (i as u128 * 7919) % 64)),
            access_modes: if i % 3 == 0 {
                AccessModes::of(&[AccessMode::ReadWriteOnce, AccessMode::ReadWriteMany])
            } else {
                AccessModes::of(&[AccessMode::ReadWriteOnce])
            },
            volume_mode: VolumeMode::Filesystem,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            phase: if i % 5 == 0 {
                VolumePhase::Bound
            } else {
                VolumePhase::Available
            },
            claim_ref: None,
            reclaim_policy: ReclaimPolicy::Retain,
            being_deleted: false,
            node_affinity: None,
            origin: Origin::default(),
        })
        .map(std::sync::Arc::new)
        .collect();
    let per_zone = 1000usize;
    let nzones = s.hosts.div_ceil(per_zone).max(1);
    let policies = [
        PlacementPolicy::Binpack,
        PlacementPolicy::Spread,
        PlacementPolicy::SpreadMemory,
        PlacementPolicy::Default,
    ];
    let zones = (0..nzones)
        .map(|z| {
            let hosts = (z * per_zone..((z + 1) * per_zone).min(s.hosts))
                .map(|h| Host {
                    name: format!("host-{h}"),
                    power: if h % 10 == 9 { PowerState::Off } else { PowerState::On },
                    tags: if h % 7 == 0 {
                        vec![Tag {
                            key: "gpu".into(),
                            value: None,
                        }]
                    } else {
                        Vec::new()
                    },
                    capacity: Resources {
                        cpu: 64,
                        memory: ByteSize(256 * GIB),
                        instances: 16,
                        devices: BTreeMap::new(),
                    },
                    allocated: Resources {
                        cpu: (h as u64 * 13) % 64,
                        memory: ByteSize(GIB * ((h as u128 * 31) % 256)),
                        instances: (h as u64 * 3) % 16,
                        devices: BTreeMap::new(),
                    },
                    networks: vec!["eth0".into()],
                })
                .map(std::sync::Arc::new)
                .collect();
            Zone {
                name: format!("zone-{z}"),
                tags: vec![Tag {
                    key: "region".into(),
                    value: Some(format!("r{}", z % 3)),
                }],
                placement_policy: policies[z % policies.len()],
                priority: 1 + z as i64,
                segment: None,
                images: Vec::new(),
                flavors: Vec::new(),
                storage: Vec::new(),
                hosts,
                host_cost_per_hour: None,
                origin: Origin::default(),
            }
        })
        .collect();
    Inventory {
        cluster: name.to_string(),
        provisioners,
        volumes,
        projects: Vec::new(),
        zones,
        version: format!("synth-{}-{}-{}", s.hosts, s.provisioners, s.volumes),
    }
}

/// A workflow with one automatic `tier: fast` volume of `size_gib` GiB and `jobs` independent
/// jobs of 8 cores / 32 GiB each mounting it, the first with a hard `!maintenance` constraint and
/// a soft `gpu` constraint.
pub fn workflow(jobs: usize, size_gib: u128) -> Workflow {
    Workflow {
        priority: None,
        name: "synthetic".into(),
        format: WorkflowFormat::FuzzfileV4,
        volumes: vec![VolumeRequest {
            key: "scratch".into(),
            source: VolumeSource::Fuzzball(FuzzballVolume {
                use_: None,
                name: None,
                size: Some(ByteSize(size_gib * GIB)),
                annotations: BTreeMap::from([("tier".to_string(), "fast".to_string())]),
                reference: None,
            }),
            access_modes: AccessModes::of(&[if jobs > 1 {
                AccessMode::ReadWriteMany
            } else {
                AccessMode::ReadWriteOnce
            }]),
            line: 1,
        }],
        jobs: (0..jobs)
            .map(|j| Job {
                name: format!("job-{j}"),
                kind: JobKind::Job,
                image: Some("docker://alpine:3".into()),
                mounts: vec![Mount {
                    volume: "scratch".into(),
                    path: "/scratch".into(),
                }],
                resources: JobResources {
                    cpu: 8,
                    memory: ByteSize(32 * GIB),
                    ..Default::default()
                },
                nodes: 1,
                depends_on: Vec::new(),
                constraints: if j == 0 {
                    vec![
                        Constraint {
                            negated: true,
                            key: "maintenance".into(),
                            value: None,
                            strength: Strength::Hard,
                        },
                        Constraint {
                            negated: false,
                            key: "gpu".into(),
                            value: None,
                            strength: Strength::Soft,
                        },
                    ]
                } else {
                    Vec::new()
                },
                affinity: Affinity::default(),
                networks: Vec::new(),
                timeout_ms: None,
                line: 1,
            })
            .collect(),
        project: None,
        clusters: Vec::new(),
        annotations: BTreeMap::new(),
    }
}
