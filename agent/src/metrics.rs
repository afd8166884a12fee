//! The agent's metrics (`metricsListen`, docs/metrics.md):
//!
//! - per request, updated where it is served ([`crate::service`]): `fedvol_agent_requests_total
//!   {endpoint, outcome}` and `fedvol_agent_request_duration_seconds{endpoint}` (the plan and
//!   commit latency histograms are its `plan`/`cluster_plan` and `commit` series);
//! - per inventory reload ([`crate::run::reload`]): `fedvol_agent_inventory_reloads_total
//!   {outcome}`;
//! - read from the state at each scrape ([`crate::scrape::StateCollector`], one lock of the state):
//!   `fedvol_agent_inventory_info{version}`, `fedvol_agent_holds`,
//!   `fedvol_agent_commits_in_flight`, `fedvol_agent_commits_live`, `fedvol_agent_load` and per
//!   zone `fedvol_agent_zone_{cpu,memory,instances}_{capacity,in_use}[_cores|_bytes]{zone}`.
//!
//! Every series also carries the registry's constant label `cluster`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use fedvol_obs::{Outcome, Registry, RequestMetrics};
use fedvol_proto::agent::AgentOp;

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

/// The name an operation's endpoint is registered and counted under: its wire name, but
/// `cluster_plan` for the per-cluster plan (`plan` is the broadcast of earlier releases'
/// coordinators, [`BROADCAST_PLAN`]).
pub fn endpoint_name(op: AgentOp) -> &'static str {
    match op {
        AgentOp::Plan => "cluster_plan",
        op => op.name(),
    }
}

/// The endpoint name of the broadcast plan (`<prefix>.plan`).
pub const BROADCAST_PLAN: &str = "plan";

/// The endpoints the agent serves (the `endpoint` label), as [`crate::service::serve`] names
/// them: the broadcast plan, then every operation of the table.
pub fn endpoints() -> impl Iterator<Item = &'static str> {
    std::iter::once(BROADCAST_PLAN).chain(AgentOp::ALL.map(endpoint_name))
}

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
            endpoints(),
            "Requests served, by endpoint and outcome (ok, error, bad_request, dropped, overloaded; refused: a commit, release or complete answered with ok false)",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every endpoint the service registers has its series from the start (at 0), so that
    /// rates see its first request.
    #[test]
    fn every_endpoint_the_service_registers_is_counted_from_the_start() {
        let m = AgentMetrics::default();
        let mut r = Registry::with_labels("agent", "0", &[("cluster", "c1".to_string())]);
        m.register(&mut r);
        let text = r.encode().unwrap();
        let served = std::iter::once(BROADCAST_PLAN).chain(AgentOp::ALL.map(endpoint_name));
        for name in served {
            let line = format!("fedvol_agent_requests_total{{cluster=\"c1\",endpoint=\"{name}\",outcome=\"ok\"}} 0");
            assert!(text.contains(&line), "{line} missing from:\n{text}");
        }
    }

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
}
