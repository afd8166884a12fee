//! Slurm nodes and partitions → fedvol zones and hosts (the documented mapping; pure).
//!
//! | Slurm | fedvol |
//! |---|---|
//! | partition | zone of the same name |
//! | partition `State` not `UP` | every host of its zone off |
//! | partition `PriorityTier` | zone priority `-PriorityTier` unless the configuration gives one |
//! | node | host of the same name, in the zone of the first of its partitions that is `UP` (partitions in the configuration's order, then Slurm's), else of the first |
//! | node `State` | power on for `IDLE`, `MIXED`, `ALLOCATED`, `COMPLETING` with no flag of [`OFF_FLAGS`]; off otherwise |
//! | `CPUEfctv` (or `CPUTot`), `RealMemory` MiB | capacity cpu, memory (bytes) |
//! | `CPUAlloc`, `AllocMem` MiB | allocated cpu, memory (bytes) |
//! | `Gres` / `GresUsed` `name[:type]:count` | capacity / allocated device `devices[name]` (`gpu` → `nvidia.com/gpu`), types summed; each `name:type` also a host tag |
//! | `ActiveFeatures` | host tags (`key` or `key:value`) |
//!
//! Instances are left unbounded (0): Slurm bounds a node by its CPUs, memory and GRES.

use std::collections::BTreeMap;
use std::sync::Arc;

use fedvol_common::model::{Host, Origin, PlacementPolicy, PowerState, Resources, Tag, Zone};
use fedvol_common::size::ByteSize;

use super::config::SlurmConfig;
use super::node::{Gres, SlurmNode, SlurmPartition};

#[cfg(doc)]
use super::node::OFF_FLAGS;

/// The zones made from one reading of Slurm, and what the mapping noticed on the way
/// (sentences: a node in no zone, a feature that is not a tag, a configured partition Slurm
/// does not have).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mapped {
    /// Zones in preference order, each with its hosts in Slurm's node order.
    pub zones: Vec<Zone>,
    /// Notices, one sentence each.
    pub notes: Vec<String>,
}

const MIB: u128 = 1 << 20;

fn devices(g: &[Gres], cfg: &SlurmConfig) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in g {
        let c: &mut u64 = out.entry(cfg.device_name(&e.name)).or_default();
        *c = c.saturating_add(e.count);
    }
    out
}

fn host(n: &SlurmNode, partition_up: bool, cfg: &SlurmConfig, notes: &mut Vec<String>) -> Host {
    let mut tags: Vec<Tag> = Vec::new();
    for f in &n.features {
        match Tag::parse(f) {
            Ok(t) if !tags.contains(&t) => tags.push(t),
            Ok(_) => {}
            Err(e) => notes.push(format!("node {}: feature {e}; skipped", n.name)),
        }
    }
    for g in &n.gres {
        if let Some(kind) = &g.kind {
            let t = Tag {
                key: g.name.clone(),
                value: Some(kind.clone()),
            };
            if !tags.contains(&t) {
                tags.push(t);
            }
        }
    }
    Host {
        name: n.name.clone(),
        power: if n.state.is_on() && partition_up {
            PowerState::On
        } else {
            PowerState::Off
        },
        tags,
        capacity: Resources {
            cpu: n.cpus,
            memory: ByteSize(u128::from(n.memory_mib) * MIB),
            instances: 0,
            devices: devices(&n.gres, cfg),
        },
        allocated: Resources {
            cpu: n.cpus_alloc,
            memory: ByteSize(u128::from(n.memory_alloc_mib) * MIB),
            instances: 0,
            devices: devices(&n.gres_used, cfg),
        },
        networks: Vec::new(),
    }
}

/// Maps one reading of Slurm to zones (see the module's table).
pub fn map_zones(nodes: &[SlurmNode], partitions: &[SlurmPartition], cfg: &SlurmConfig) -> Mapped {
    let mut notes = Vec::new();
    let by_name: BTreeMap<&str, &SlurmPartition> = partitions.iter().map(|p| (p.name.as_str(), p)).collect();
    // Preference order: the configuration's, then Slurm's.
    let mut order: Vec<&SlurmPartition> = Vec::new();
    for s in &cfg.partitions {
        match by_name.get(s.name.as_str()) {
            Some(p) => order.push(p),
            None => notes.push(format!(
                "partition {} is in the configuration but not in Slurm; it is no zone",
                s.name
            )),
        }
    }
    if !cfg.only_listed {
        for p in partitions {
            if cfg.settings(&p.name).is_none() {
                order.push(p);
            }
        }
    }
    let rank: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, p)| (p.name.as_str(), i)).collect();
    let mut hosts: Vec<Vec<Arc<Host>>> = vec![Vec::new(); order.len()];
    for n in nodes {
        let mut mine: Vec<usize> = n
            .partitions
            .iter()
            .filter_map(|p| rank.get(p.as_str()).copied())
            .collect();
        mine.sort_unstable();
        let chosen = mine.iter().find(|i| order[**i].is_up()).or(mine.first()).copied();
        match chosen {
            Some(i) => hosts[i].push(Arc::new(host(n, order[i].is_up(), cfg, &mut notes))),
            None if n.partitions.is_empty() => {
                notes.push(format!("node {} is in no partition; it is no host", n.name));
            }
            None => notes.push(format!(
                "node {} is only in partitions that are no zone ({}); it is no host",
                n.name,
                n.partitions.join(", ")
            )),
        }
    }
    let zones = order
        .iter()
        .zip(hosts)
        .map(|(p, hosts)| {
            let s = cfg.settings(&p.name);
            Zone {
                name: p.name.clone(),
                tags: s.map(|s| s.tags.clone()).unwrap_or_default(),
                placement_policy: s.and_then(|s| s.placement_policy).unwrap_or(PlacementPolicy::Default),
                priority: s
                    .and_then(|s| s.priority)
                    .unwrap_or_else(|| -(i64::try_from(p.priority_tier).unwrap_or(i64::MAX))),
                segment: s.and_then(|s| s.segment.clone()),
                images: Vec::new(),
                flavors: Vec::new(),
                storage: Vec::new(),
                hosts,
                host_cost_per_hour: s.and_then(|s| s.host_cost_per_hour).map(|p| p.0),
                origin: Origin {
                    file: "slurm".to_string(),
                    line: 0,
                },
            }
        })
        .collect();
    Mapped { zones, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::config::PartitionSettings;
    use crate::slurm::records::parse_records;

    fn captured() -> (Vec<SlurmNode>, Vec<SlurmPartition>) {
        let nodes = parse_records(include_str!("testdata/nodes-22.05.8.txt"))
            .iter()
            .map(|r| SlurmNode::from_record(r).unwrap())
            .collect();
        let parts = parse_records(include_str!("testdata/partitions-22.05.8.txt"))
            .iter()
            .map(|r| SlurmPartition::from_record(r).unwrap())
            .collect();
        (nodes, parts)
    }

    fn zone<'a>(m: &'a Mapped, name: &str) -> &'a Zone {
        m.zones.iter().find(|z| z.name == name).unwrap()
    }

    #[test]
    fn captured_output_maps_to_zones_and_hosts() {
        let (nodes, parts) = captured();
        let m = map_zones(&nodes, &parts, &SlurmConfig::default());
        assert_eq!(
            m.zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(),
            ["batch", "gpu", "maint"]
        );
        let batch = zone(&m, "batch");
        // n1 is in batch and gpu: the first UP one in Slurm's order is batch.
        let names: Vec<&str> = batch.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2", "n3", "n4"]);
        assert_eq!(batch.priority, -1);
        assert_eq!(zone(&m, "gpu").priority, -10);
        let n1 = &batch.hosts[0];
        assert_eq!(n1.power, PowerState::On);
        assert_eq!(n1.capacity.cpu, 4);
        assert_eq!(n1.capacity.memory, ByteSize(8000 * MIB));
        assert_eq!(n1.capacity.devices["nvidia.com/gpu"], 2);
        assert_eq!(n1.allocated.cpu, 2);
        assert_eq!(n1.allocated.memory, ByteSize(1000 * MIB));
        assert_eq!(n1.allocated.devices["nvidia.com/gpu"], 1);
        let tags: Vec<String> = n1.tags.iter().map(ToString::to_string).collect();
        assert_eq!(tags, ["intel", "ib", "gpu:a100"]);
        // drained, FUTURE, DOWN: off
        for h in &batch.hosts[1..] {
            assert_eq!(h.power, PowerState::Off, "{}", h.name);
        }
        assert!(m.notes.is_empty(), "{:?}", m.notes);
    }

    #[test]
    fn configured_order_settings_and_only_listed() {
        let (nodes, parts) = captured();
        let cfg = SlurmConfig {
            only_listed: true,
            partitions: vec![
                PartitionSettings {
                    name: "gpu".into(),
                    priority: Some(1),
                    placement_policy: Some(PlacementPolicy::Binpack),
                    tags: vec![Tag::parse("accel:gpu").unwrap()],
                    segment: Some("rack-1".into()),
                    host_cost_per_hour: Some(crate::slurm::config::Price(2.5)),
                },
                PartitionSettings {
                    name: "batch".into(),
                    ..Default::default()
                },
                PartitionSettings {
                    name: "nope".into(),
                    ..Default::default()
                },
            ],
            devices: [("gpu".to_string(), "gpu".to_string())].into(),
            ..Default::default()
        };
        let m = map_zones(&nodes, &parts, &cfg);
        assert_eq!(
            m.zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(),
            ["gpu", "batch"]
        );
        let gpu = zone(&m, "gpu");
        assert_eq!(gpu.hosts.len(), 1, "n1 goes to gpu, listed first");
        assert_eq!(gpu.placement_policy, PlacementPolicy::Binpack);
        assert_eq!(gpu.priority, 1);
        assert_eq!(gpu.segment.as_deref(), Some("rack-1"));
        assert_eq!(gpu.host_cost_per_hour, Some(2.5));
        assert_eq!(zone(&m, "batch").host_cost_per_hour, None);
        assert_eq!(gpu.hosts[0].capacity.devices["gpu"], 2);
        assert_eq!(
            zone(&m, "batch").hosts.len(),
            3,
            "n4 is in batch and maint: batch is UP"
        );
        assert!(m.notes.iter().any(|n| n.contains("partition nope")), "{:?}", m.notes);
    }

    #[test]
    fn a_node_only_in_a_down_partition_is_off() {
        let rs = parse_records(
            "NodeName=a State=IDLE CPUTot=2 RealMemory=10 Partitions=p\nNodeName=b State=IDLE CPUTot=2 RealMemory=10\n",
        );
        let nodes: Vec<SlurmNode> = rs.iter().map(|r| SlurmNode::from_record(r).unwrap()).collect();
        let parts = vec![SlurmPartition {
            name: "p".into(),
            state: "DOWN".into(),
            priority_tier: 1,
            default: false,
        }];
        let m = map_zones(&nodes, &parts, &SlurmConfig::default());
        assert_eq!(m.zones[0].hosts[0].power, PowerState::Off);
        assert!(m.notes[0].contains("node b is in no partition"), "{:?}", m.notes);
    }
}
