//! The metrics of one process: a `prometheus-client` registry that every metric is registered
//! in at start-up, then shared read-only with the HTTP server, which encodes it at each scrape.

use prometheus_client::collector::Collector;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Metric;

/// The content type of `/metrics`: OpenMetrics 1.0 text, which Prometheus (2.x and later)
/// asks for and parses; its lines are also plain Prometheus text for humans and `curl`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds, seconds, of the buckets of every fedvol duration histogram: 0.5 ms doubling up
/// to about 33 s (17 buckets plus `+Inf`). A plan on a small cluster takes about a millisecond;
/// a commit with slow drivers or a submit waiting for a dead cluster, seconds.
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 17)
}

/// A histogram of [`duration_buckets`].
pub fn duration_histogram() -> prometheus_client::metrics::histogram::Histogram {
    prometheus_client::metrics::histogram::Histogram::new(duration_buckets())
}

/// How one request ended, the `outcome` label of `fedvol_*_requests_total`: a small fixed set
/// (never an error message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answered with a reply (which may itself say "nothing fits").
    Ok,
    /// Answered with a failure (a protocol error code).
    Error,
    /// Refused before its handler ran: over the body limit, malformed, or over a limit.
    BadRequest,
    /// Dropped unanswered: past its deadline on arrival, or dropped by its handler.
    Dropped,
    /// Refused at once: too many requests in progress (`maxInFlight`).
    Overloaded,
    /// Answered with a reply saying the action did not take effect (an agent's commit,
    /// release or complete with `ok: false`: a provisioner that refused, a re-plan that no
    /// longer fits).
    Refused,
}

impl Outcome {
    /// Every outcome, in declaration order (so `ALL[o as usize] == o`).
    pub const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::Error,
        Outcome::BadRequest,
        Outcome::Dropped,
        Outcome::Overloaded,
        Outcome::Refused,
    ];

    /// How a handler's answer ended: none (dropped), a reply (ok) or a failure (error).
    pub fn of_answer<T, E>(answer: &Option<Result<T, E>>) -> Outcome {
        match answer {
            None => Outcome::Dropped,
            Some(Ok(_)) => Outcome::Ok,
            Some(Err(_)) => Outcome::Error,
        }
    }

    /// The label value: `ok`, `error`, `bad_request`, `dropped`, `overloaded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::BadRequest => "bad_request",
            Outcome::Dropped => "dropped",
            Outcome::Overloaded => "overloaded",
            Outcome::Refused => "refused",
        }
    }
}

/// The metrics of one daemon. Metrics and collectors are registered while it is `&mut`
/// (start-up); the server then holds it in an `Arc` and encodes it at each scrape.
#[derive(Debug)]
pub struct Registry {
    inner: prometheus_client::registry::Registry,
}

impl Registry {
    /// A registry for `daemon` (`agent` or `coordinator`) holding `fedvol_build_info{daemon,
    /// version}` = 1, the version being `version` (the daemon's crate version).
    pub fn new(daemon: &'static str, version: &'static str) -> Self {
        Self::with_labels(daemon, version, &[])
    }

    /// As [`Registry::new`], every series also carrying the constant `labels` (the agent's
    /// `cluster`), so that dashboards group by them without relabelling.
    pub fn with_labels(daemon: &'static str, version: &'static str, labels: &[(&'static str, String)]) -> Self {
        let constant = labels
            .iter()
            .map(|(k, v)| (std::borrow::Cow::Borrowed(*k), std::borrow::Cow::Owned(v.clone())))
            .collect::<Vec<_>>();
        let mut inner = prometheus_client::registry::Registry::with_labels(constant.into_iter());
        let info = prometheus_client::metrics::family::Family::<[(&'static str, &'static str); 2], Gauge>::default();
        info.get_or_create(&[("daemon", daemon), ("version", version)]).set(1);
        inner.register(
            "fedvol_build_info",
            "Always 1; labels name the daemon and its version",
            info,
        );
        Registry { inner }
    }

    /// Registers `metric` as `name` (the full name without the `_total` a counter gets when
    /// encoded) with `help` (one sentence without its final full stop, which is added).
    pub fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.inner.register(name, help, metric);
    }

    /// Registers a collector: metrics read from the daemon's state at each scrape.
    pub fn register_collector(&mut self, collector: impl Collector) {
        self.inner.register_collector(Box::new(collector));
    }

    /// The OpenMetrics text of every metric, ending with `# EOF`.
    ///
    /// Errors: a collector failed to encode (it is reported, the scrape fails).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.inner)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::histogram::Histogram;

    #[test]
    fn text_names_types_labels_and_units() {
        let mut r = Registry::new("agent", "9.9.9");
        let requests = Family::<[(&'static str, &'static str); 2], Counter>::default();
        r.register("fedvol_test_requests", "Requests", requests.clone());
        let h = Histogram::new(duration_buckets());
        r.register("fedvol_test_duration_seconds", "Time taken", h.clone());
        requests
            .get_or_create(&[("endpoint", "plan"), ("outcome", Outcome::Ok.as_str())])
            .inc();
        h.observe(0.003);
        let text = r.encode().unwrap();
        assert!(
            text.contains("fedvol_build_info{daemon=\"agent\",version=\"9.9.9\"} 1"),
            "{text}"
        );
        assert!(text.contains("# TYPE fedvol_test_requests counter"), "{text}");
        assert!(
            text.contains("fedvol_test_requests_total{endpoint=\"plan\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("# HELP fedvol_test_duration_seconds Time taken."),
            "{text}"
        );
        assert!(
            text.contains("fedvol_test_duration_seconds_bucket{le=\"0.004\"} 1"),
            "{text}"
        );
        assert!(text.contains("fedvol_test_duration_seconds_count 1"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn constant_labels_are_on_every_series() {
        let mut r = Registry::with_labels("agent", "1", &[("cluster", "east".to_string())]);
        let c = Counter::<u64>::default();
        r.register("fedvol_test_things", "Things", c.clone());
        c.inc();
        r.register_collector(crate::NatsCollector::default());
        let text = r.encode().unwrap();
        assert!(
            text.contains("fedvol_build_info{cluster=\"east\",daemon=\"agent\",version=\"1\"} 1"),
            "{text}"
        );
        assert!(text.contains("fedvol_test_things_total{cluster=\"east\"} 1"), "{text}");
        assert!(text.contains("fedvol_nats_connected{cluster=\"east\"} 0"), "{text}");
    }

    #[test]
    fn buckets_span_half_a_millisecond_to_half_a_minute() {
        let b: Vec<f64> = duration_buckets().collect();
        assert_eq!(b.len(), 17);
        assert_eq!(b[0], 0.0005);
        assert!(b[16] > 30.0 && b[16] < 35.0, "{b:?}");
    }

    #[test]
    fn outcomes_are_distinct_label_values() {
        let names: std::collections::BTreeSet<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names.len(), Outcome::ALL.len());
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(
                *o as usize, i,
                "ALL is in declaration order (daemons index it by `as u8`)"
            );
        }
    }
}
