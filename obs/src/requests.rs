//! Request metrics every daemon keeps the same way: `<prefix>_requests_total{endpoint,
//! outcome}` and `<prefix>_request_duration_seconds{endpoint}` (the agent's endpoints, the
//! coordinator's operations).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::registry::{Outcome, Registry, duration_histogram};

/// Labels of one request count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The endpoint's (operation's) name.
    pub endpoint: &'static str,
    /// [`Outcome::as_str`].
    pub outcome: &'static str,
}

/// The label of a per-endpoint histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabel {
    /// The endpoint's (operation's) name.
    pub endpoint: &'static str,
}

/// Requests by endpoint and outcome, and their durations by endpoint: handles cheap to clone
/// (atomics behind `Arc`s), updated whether or not a metrics server runs.
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<EndpointLabel, Histogram, fn() -> Histogram>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl RequestMetrics {
    /// Registers `<prefix>_requests` (a counter: encoded `_total`) and
    /// `<prefix>_request_duration_seconds` with their help sentences, with the `ok` series of
    /// every one of `endpoints` present (at 0) from the start, so that rates see their first
    /// increase.
    pub fn register(
        &self,
        registry: &mut Registry,
        prefix: &str,
        endpoints: impl IntoIterator<Item = &'static str>,
        requests_help: &str,
        durations_help: &str,
    ) {
        for endpoint in endpoints {
            let _ = self.requests.get_or_create(&RequestLabels {
                endpoint,
                outcome: Outcome::Ok.as_str(),
            });
        }
        registry.register(&format!("{prefix}_requests"), requests_help, self.requests.clone());
        registry.register(
            &format!("{prefix}_request_duration_seconds"),
            durations_help,
            self.durations.clone(),
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
}
