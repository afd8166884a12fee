//! The agent's metrics read from its state at each scrape ([`StateCollector`], one lock of the
//! state): `fedvol_agent_inventory_info{version}`, `fedvol_agent_holds`,
//! `fedvol_agent_commits_in_flight`, `fedvol_agent_commits_live`, `fedvol_agent_load`,
//! `fedvol_agent_jobs{state}` (batch jobs of live commits by state) and per
//! zone `fedvol_agent_zone_{cpu,memory,instances}_{capacity,in_use}[_cores|_bytes]{zone}`.
//! The counters updated where requests are served are [`crate::metrics`]; this module sits
//! above the shared state ([`crate::shared`]), which counts into those.

use std::sync::{Arc, OnceLock, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::shared::{Shared, lock};

/// Reads the agent's state at each scrape ([`crate::state::Core::gauges`]). Registered before
/// the state exists; [`StateCollector::set`] gives it the state once the agent serves. Holds
/// the state weakly, so it never keeps a stopped agent's state alive.
#[derive(Clone, Default)]
pub struct StateCollector(Arc<OnceLock<Weak<Shared>>>);

impl std::fmt::Debug for StateCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateCollector")
    }
}

impl StateCollector {
    /// Reads `shared` from now on.
    pub fn set(&self, shared: &Arc<Shared>) {
        let _ = self.0.set(Arc::downgrade(shared));
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabel {
    zone: String,
}

/// Encodes one gauge without labels.
fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> Result<(), std::fmt::Error> {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, &format!("{help}."), None, MetricType::Gauge)?)
}

/// Encodes one gauge family: one sample per label set.
fn gauges<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (S, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, &format!("{help}."), None, MetricType::Gauge)?;
    for (labels, value) in samples {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for StateCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(shared) = self.0.get().and_then(Weak::upgrade) else {
            return Ok(());
        };
        let g = lock(&shared).gauges();
        drop(shared);
        gauges(
            &mut e,
            "fedvol_agent_inventory_info",
            "Always 1; the label version is the served inventory files' version (sha256 of the files read)",
            [(
                VersionLabel {
                    version: g.inventory_version.clone(),
                },
                1.0,
            )],
        )?;
        gauge(&mut e, "fedvol_agent_holds", "Live holds", g.holds as f64)?;
        gauge(
            &mut e,
            "fedvol_agent_commits_in_flight",
            "Commits being run (marked committing, drivers running, not yet recorded)",
            g.commits_in_flight as f64,
        )?;
        gauge(
            &mut e,
            "fedvol_agent_commits_live",
            "Commits recorded and not completed",
            g.commits_live as f64,
        )?;
        gauge(
            &mut e,
            "fedvol_agent_load",
            "Cluster load in [0, 1] on the effective inventory, as heartbeats report it",
            g.load,
        )?;
        gauges(
            &mut e,
            "fedvol_agent_jobs",
            "Batch jobs of live commits submitted to Slurm, by state (pending, running, completed, failed, cancelled, timeout, node_fail, lost)",
            g.jobs
                .iter()
                .map(|(s, n)| (StateLabel { state: s.as_str() }, *n as f64)),
        )?;
        let zone = |z: &crate::state::status::ZoneGauges| ZoneLabel { zone: z.zone.clone() };
        type Read = fn(&fedvol_common::model::Resources) -> f64;
        let per_zone: [(&str, &str, &str, Read); 3] = [
            ("cpu", "_cores", "CPU cores", |r| r.cpu as f64),
            ("memory", "_bytes", "memory (bytes)", |r| r.memory.0 as f64),
            ("instances", "", "instances (job nodes)", |r| r.instances as f64),
        ];
        for (what, unit, help, read) in per_zone {
            gauges(
                &mut e,
                &format!("fedvol_agent_zone_{what}_capacity{unit}"),
                &format!("The {help} of the zone's hosts"),
                g.zones.iter().map(|z| (zone(z), read(&z.capacity))),
            )?;
            gauges(
                &mut e,
                &format!("fedvol_agent_zone_{what}_in_use{unit}"),
                &format!("The {help} of the zone's hosts held by holds and live commits"),
                g.zones.iter().map(|z| (zone(z), read(&z.in_use))),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_obs::Registry;

    #[test]
    fn state_series_are_read_at_each_scrape() {
        let dir = tempfile::tempdir().unwrap();
        let shared = crate::shared::one_host_for_tests(dir.path());
        let version = lock(&shared).inventory_version().to_string();
        let mut r = Registry::new("agent", "0");
        let state = StateCollector::default();
        r.register_collector(state.clone());
        assert!(
            !r.encode().unwrap().contains("fedvol_agent_holds"),
            "nothing before the state exists"
        );
        state.set(&shared);
        let text = r.encode().unwrap();
        for line in [
            format!("fedvol_agent_inventory_info{{version=\"{version}\"}} 1.0"),
            "fedvol_agent_holds 0.0".to_string(),
            "fedvol_agent_commits_in_flight 0.0".to_string(),
            "fedvol_agent_zone_cpu_capacity_cores{zone=\"z1\"} 8.0".to_string(),
            "fedvol_agent_zone_memory_capacity_bytes{zone=\"z1\"} 34359738368.0".to_string(),
            "fedvol_agent_zone_instances_in_use{zone=\"z1\"} 0.0".to_string(),
            "# HELP fedvol_agent_holds Live holds.".to_string(),
        ] {
            assert!(text.contains(&line), "{line} missing from:\n{text}");
        }
        drop(shared);
        assert!(
            !r.encode().unwrap().contains("fedvol_agent_holds"),
            "a stopped agent's state is not kept"
        );
    }
}
