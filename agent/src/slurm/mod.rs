//! The Slurm inventory source: an agent with `inventorySource: slurm` reads its
//! zones and hosts from the cluster's Slurm controller instead of its inventory file, which
//! still gives provisioners, volumes and projects.
//!
//! - [`runner`] runs `scontrol -d -o --future show node` and `scontrol -o --all show partition`
//!   (the one impure part; a timeout kills a command that hangs);
//! - [`records`] splits their one-line `Key=Value` output into records, keeping unknown keys;
//! - [`node`] reads the fields fedvol maps (typed, with errors naming line, node and field);
//! - [`map`] turns nodes and partitions into zones and hosts (the documented table);
//! - [`config`] is the configuration's `slurm:` block;
//! - [`batch`] builds what `sbatch` is given for a committed job and reads `scontrol show
//!   job` (pure); [`jobs`] runs `sbatch` and `scancel` as the job's user and `scontrol show
//!   job` for every job at once; [`follow`] submits a commit's jobs, follows their states and
//!   completes the request when they ended; [`identity`] maps a workflow's user to the local
//!   account its jobs and volumes belong to;
//! - [`source`] refreshes on an interval and on SIGHUP, combines the zones with the file's
//!   inventory under one version, and keeps the last good reading when Slurm cannot be read.

pub mod batch;
pub mod config;
pub mod follow;
pub mod identity;
pub mod jobs;
pub mod map;
pub mod node;
pub mod records;
pub mod runner;
pub mod source;

pub use config::SlurmConfig;

use map::Mapped;
use node::{SlurmNode, SlurmPartition};
use records::parse_records;

/// Interprets one reading (pure): parses both outputs and maps them to zones. A record that
/// cannot be read is skipped with a notice naming its line, record and field; the rest is
/// used.
pub fn interpret(out: &runner::Output, cfg: &SlurmConfig) -> Mapped {
    let mut skipped = Vec::new();
    let nodes: Vec<SlurmNode> = parse_records(&out.nodes)
        .iter()
        .filter_map(|r| {
            SlurmNode::from_record(r)
                .map_err(|e| skipped.push(format!("node output {e}; node skipped")))
                .ok()
        })
        .collect();
    let partitions: Vec<SlurmPartition> = parse_records(&out.partitions)
        .iter()
        .filter_map(|r| {
            SlurmPartition::from_record(r)
                .map_err(|e| skipped.push(format!("partition output {e}; partition skipped")))
                .ok()
        })
        .collect();
    let mut m = map::map_zones(&nodes, &partitions, cfg);
    skipped.append(&mut m.notes);
    m.notes = skipped;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_record_is_skipped_with_a_notice() {
        let out = runner::Output {
            nodes: "NodeName=a State=IDLE CPUTot=2 RealMemory=10 Partitions=p\nNodeName=b State=IDLE CPUTot=x RealMemory=10 Partitions=p\n".into(),
            partitions: "PartitionName=p State=UP\n".into(),
        };
        let m = interpret(&out, &SlurmConfig::default());
        assert_eq!(m.zones[0].hosts.len(), 1);
        assert_eq!(
            m.notes,
            ["node output line 2: node b: CPUTot: `x` is not a whole number; node skipped"]
        );
    }
}
