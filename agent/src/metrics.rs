//! The agent's metrics (`metricsListen`, README "Metrics and health"):
//!
//! - per request, updated where it is served ([`crate::service`]): `fedvol_agent_requests_total
//!   {endpoint, outcome}` and `fedvol_agent_request_duration_seconds{endpoint}` (the plan and
//!   commit latency histograms are its `plan`/`cluster_plan` and `commit` series);
//! - per inventory reload ([`crate::run::reload`]): `fedvol_agent_inventory_reloads_total
//!   {outcome}`;
//! - read from the state at each scrape ([`StateCollector`], one lock of the state):
//!   `fedvol_agent_inventory_info{version}`, `fedvol_agent_holds`,
//!   `fedvol_agent_commits_in_flight`, `fedvol_agent_commits_live`, `fedvol_agent_load` and per
//!   zone `fedvol_agent_zone_{cpu,memory,instances}_{capacity,in_use}[_cores|_bytes]{zone}`.
//!
//! Every series also carries the registry's constant label `cluster`.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;

use fedvol_obs::{Outcome, Registry, RequestMetrics};

use crate::service::{Shared, lock};

/// The label of an inventory reload count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabel {
    /// `applied` (a new version serves), `unchanged` (same version) or `refused` (the file has
    /// errors; the previous inventory keeps serving).
    pub outcome: &'static str,
}

/// The agent's request and reload metrics: handles cheap to clone (atomics behind `Arc`s),
/// updated whether or not a metrics server runs.
#[derive(Debug, Clone, Default)]
pub struct AgentMetrics {
    requests: RequestMetrics,
    reloads: Family<ReloadLabel, Counter>,
}

/// The endpoints the agent serves (the `endpoint` label), as [`crate::service::serve`] names
/// them.
pub const ENDPOINTS: [&str; 9] = [
    "plan",
    "cluster_plan",
    "commit",
    "release",
    "complete",
    "why_not",
    "status",
    "inventory",
    "restored",
];

impl AgentMetrics {
    /// Registers these metrics in `registry`, with the series of successful requests and of
    /// reloads present (at 0) from the start, so that rates see their first increase.
    pub fn register(&self, registry: &mut Registry) {
        for outcome in ["applied", "unchanged", "refused"] {
            let _ = self.reloads.get_or_create(&ReloadLabel { outcome });
        }
        self.requests.register(
            registry,
            "fedvol_agent",
            ENDPOINTS,
            "Requests served, by endpoint and outcome (ok, error, bad_request, dropped, overloaded)",
            "Time from a request's arrival to its answer, by endpoint (plan and cluster_plan: the funnel; commit: the whole commit with its drivers)",
        );
        registry.register(
            "fedvol_agent_inventory_reloads",
            "Inventory reloads (SIGHUP or a changed file), by outcome (applied, unchanged, refused)",
            self.reloads.clone(),
        );
    }

    /// Counts one request of `endpoint` that ended `outcome` after `took` (a refused
    /// `overloaded` request is counted, not timed).
    pub fn request(&self, endpoint: &'static str, outcome: Outcome, took: Duration) {
        self.requests.request(endpoint, outcome, took);
    }

    /// Counts one inventory reload: `applied`, `unchanged` or `refused`.
    pub fn reload(&self, outcome: &'static str) {
        self.reloads.get_or_create(&ReloadLabel { outcome }).inc();
    }
}

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

    #[test]
    fn request_and_reload_series_with_their_labels() {
        let m = AgentMetrics::default();
        let mut r = Registry::with_labels("agent", "0", &[("cluster", "c1".to_string())]);
        m.register(&mut r);
        m.request("commit", Outcome::Error, Duration::from_millis(3));
        m.request("plan", Outcome::Overloaded, Duration::ZERO);
        m.reload("refused");
        let text = r.encode().unwrap();
        for line in [
            "fedvol_agent_requests_total{cluster=\"c1\",endpoint=\"cluster_plan\",outcome=\"ok\"} 0",
            "fedvol_agent_requests_total{cluster=\"c1\",endpoint=\"commit\",outcome=\"error\"} 1",
            "fedvol_agent_requests_total{cluster=\"c1\",endpoint=\"plan\",outcome=\"overloaded\"} 1",
            "fedvol_agent_request_duration_seconds_bucket{cluster=\"c1\",le=\"0.004\",endpoint=\"commit\"} 1",
            "fedvol_agent_inventory_reloads_total{cluster=\"c1\",outcome=\"refused\"} 1",
            "fedvol_agent_inventory_reloads_total{cluster=\"c1\",outcome=\"applied\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(
            !text.contains("fedvol_agent_request_duration_seconds_count{cluster=\"c1\",endpoint=\"plan\"}"),
            "an overloaded request is not timed:\n{text}"
        );
    }

    #[test]
    fn state_series_are_read_at_each_scrape() {
        let dir = tempfile::tempdir().unwrap();
        let inv = fedvol_common::format::parse_inventory_str(
            "inv.yaml",
            "cluster: c1\nzones:\n  z1:\n    hosts:\n      - {name: h0, capacity: {cpu: 8, memory: 32GiB, instances: 4}}\n",
            None,
        )
        .unwrap()
        .value;
        let version = inv.version.clone();
        let (store, snap) = crate::state::store::Store::open(&dir.path().join("state.redb")).unwrap();
        let core = crate::state::Core::new(
            "c1",
            inv,
            store,
            crate::state::ledger::Ledger::from_snapshot(snap),
            30_000,
        );
        let drivers =
            crate::drivers::Drivers::new(None, "c1", fedvol_proto::Subjects::new("fedvol.v1"), Default::default());
        let shared = Arc::new(Shared::new(core, drivers, "c1", 1 << 20, 16));
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
