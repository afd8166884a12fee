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
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

use fedvol_obs::{Outcome, Registry};

use crate::service::{Shared, lock};

/// Labels of one request count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The endpoint's name (`plan`, `cluster_plan`, `commit`, `release`, `complete`, `why_not`,
    /// `status`, `inventory`).
    pub endpoint: &'static str,
    /// [`Outcome::as_str`].
    pub outcome: &'static str,
}

/// The label of a per-endpoint histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabel {
    /// The endpoint's name.
    pub endpoint: &'static str,
}

/// The label of an inventory reload count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabel {
    /// `applied` (a new version serves), `unchanged` (same version) or `refused` (the file has
    /// errors; the previous inventory keeps serving).
    pub outcome: &'static str,
}

/// A histogram of the shared duration buckets.
fn duration_histogram() -> Histogram {
    Histogram::new(fedvol_obs::registry::duration_buckets())
}

/// The agent's request and reload metrics: handles cheap to clone (atomics behind `Arc`s),
/// updated whether or not a metrics server runs.
#[derive(Debug, Clone)]
pub struct AgentMetrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<EndpointLabel, Histogram, fn() -> Histogram>,
    reloads: Family<ReloadLabel, Counter>,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        AgentMetrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            reloads: Family::default(),
        }
    }
}

impl AgentMetrics {
    /// Registers these metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedvol_agent_requests",
            "Requests served, by endpoint and outcome (ok, error, bad_request, dropped, overloaded)",
            self.requests.clone(),
        );
        registry.register(
            "fedvol_agent_request_duration_seconds",
            "Time from a request's arrival to its answer, by endpoint (plan and cluster_plan: the funnel; commit: the whole commit with its drivers)",
            self.durations.clone(),
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
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                outcome: outcome.as_str(),
            })
            .inc();
        if outcome != Outcome::Overloaded {
            self.durations
                .get_or_create(&EndpointLabel { endpoint })
                .observe(took.as_secs_f64());
        }
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
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// Encodes one gauge family: one sample per label set.
fn gauges<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (S, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
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
