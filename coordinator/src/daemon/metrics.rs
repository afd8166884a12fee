//! The coordinator's metrics (`metricsListen`, docs/metrics.md):
//!
//! - per request, where it is served ([`super::serving`]): `fedvol_coordinator_requests_total
//!   {endpoint, outcome}`, `fedvol_coordinator_request_duration_seconds{endpoint}`, and for a
//!   submit answered with a decision `fedvol_coordinator_decisions_total{state}` and, when it
//!   failed, `fedvol_coordinator_failed_decisions_total{failure}` (also counted when the
//!   reconciler's holder stores a decision failed: a job, a restore, the queue);
//! - per submit, in the steps of a decision's life ([`super::lifecycle`]; commit failures in
//!   [`super::commit`]): `fedvol_coordinator_plan_duration_seconds` (the fan-out
//!   until every expected cluster answered or the deadline), `fedvol_coordinator_gather_total
//!   {cluster, status}` (each cluster's slot: answered, timed_out, unreachable, error),
//!   `fedvol_coordinator_commit_duration_seconds` and `fedvol_coordinator_commits_in_flight`
//!   (the commit phase, with its fallbacks);
//! - per write to the decision bucket ([`super::store`]):
//!   `fedvol_coordinator_kv_write_duration_seconds{op}` and
//!   `fedvol_coordinator_kv_writes_total{op, outcome}`;
//! - read from the registry at each scrape ([`ClustersCollector`]):
//!   `fedvol_coordinator_cluster_up{cluster}`, `fedvol_coordinator_cluster_suspect{cluster}`,
//!   `fedvol_coordinator_cluster_load{cluster}`, `fedvol_coordinator_cluster_inventory_info
//!   {cluster, version}`; and from the drains ([`super::drains`]):
//!   `fedvol_coordinator_cluster_drained{cluster}`,
//!   `fedvol_coordinator_cluster_drained_since_timestamp_seconds{cluster, by}`.
//!
//! Cluster names are the registry's (agents' heartbeats and discovery, confined by NATS
//! permissions to each cluster's own subject), so their number is the federation's; a drain
//! names a cluster too, but only operators write drains.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;

use fedvol_common::decision::ClusterStatus;
use fedvol_obs::registry::duration_histogram;
use fedvol_obs::{Outcome, Registry, RequestMetrics};
use fedvol_proto::decisions::FailureKind;

use super::Coordinator;

/// Labels of one cluster's slot in a gathered plan.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GatherLabels {
    /// The cluster.
    pub cluster: String,
    /// `answered`, `timed_out`, `unreachable` or `error`.
    pub status: &'static str,
}

/// The label of a decision count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// The stored decision's state: `planned` (a dry run), `committed`, `failed`, `completed`.
    pub state: &'static str,
}

/// The label of a failed decision count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabel {
    /// What failed ([`FailureKind::as_str`]): `nothing_fits`, `refused`, `unavailable`,
    /// `commit_failed`, `job_failed`.
    pub failure: &'static str,
}

/// The label of a KV write histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabel {
    /// `create` (a new decision), `update` (a decision's next state), `lease` (the
    /// reconciler's lease and restore records).
    pub op: &'static str,
}

/// Labels of one KV write count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// As [`OpLabel::op`].
    pub op: &'static str,
    /// `done`, `conflict` (someone else wrote first: compare-and-set) or `error`.
    pub outcome: &'static str,
}

/// The label value of a cluster's slot status.
pub fn status_label(s: ClusterStatus) -> &'static str {
    match s {
        ClusterStatus::Answered => "answered",
        ClusterStatus::TimedOut => "timed_out",
        ClusterStatus::Unreachable => "unreachable",
        ClusterStatus::Error => "error",
    }
}

/// The writes to the decision bucket: handles shared by every clone of the store.
#[derive(Debug, Clone)]
pub struct KvMetrics {
    durations: Family<OpLabel, Histogram, fn() -> Histogram>,
    writes: Family<WriteLabels, Counter>,
}

impl Default for KvMetrics {
    fn default() -> Self {
        KvMetrics {
            durations: Family::new_with_constructor(duration_histogram),
            writes: Family::default(),
        }
    }
}

impl KvMetrics {
    /// Counts one write of `op` that ended `outcome` (`done`, `conflict`, `error`) after `took`.
    pub fn write(&self, op: &'static str, outcome: &'static str, took: Duration) {
        self.durations
            .get_or_create(&OpLabel { op })
            .observe(took.as_secs_f64());
        self.writes.get_or_create(&WriteLabels { op, outcome }).inc();
    }
}

/// The labels of a failed commit attempt.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommitFailureLabels {
    /// The cluster the attempt was sent to.
    pub cluster: String,
    /// The reason's code.
    pub code: String,
}

/// The coordinator's counted metrics: handles cheap to clone, updated whether or not a
/// metrics server runs.
#[derive(Debug, Clone)]
pub struct CoordinatorMetrics {
    requests: RequestMetrics,
    decisions: Family<StateLabel, Counter>,
    failures: Family<FailureLabel, Counter>,
    /// Decisions ended (completed, failed once committed, cancelled), by final state.
    ended: Family<StateLabel, Counter>,
    gather: Family<GatherLabels, Counter>,
    plan: Histogram,
    commit: Histogram,
    commits_in_flight: Gauge,
    commit_failures: Family<CommitFailureLabels, Counter>,
    /// The decision bucket's writes (given to the store).
    pub kv: KvMetrics,
}

impl Default for CoordinatorMetrics {
    fn default() -> Self {
        CoordinatorMetrics {
            requests: RequestMetrics::default(),
            decisions: Family::default(),
            failures: Family::default(),
            ended: Family::default(),
            gather: Family::default(),
            plan: duration_histogram(),
            commit: duration_histogram(),
            commits_in_flight: Gauge::default(),
            commit_failures: Family::default(),
            kv: KvMetrics::default(),
        }
    }
}

/// Decrements the commits-in-flight gauge when the commit phase ends, however it ends.
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl CoordinatorMetrics {
    /// Registers these metrics in `registry`, with the series of successful requests and of
    /// committed and failed decisions present (at 0) from the start, so that rates see their
    /// first increase.
    pub fn register(&self, r: &mut Registry) {
        for state in ["committed", "failed"] {
            let _ = self.decisions.get_or_create(&StateLabel { state });
        }
        for kind in FailureKind::ALL {
            let _ = self.failures.get_or_create(&FailureLabel { failure: kind.as_str() });
        }
        for state in ["completed", "failed", "cancelled"] {
            let _ = self.ended.get_or_create(&StateLabel { state });
        }
        self.requests.register(
            r,
            "fedvol_coordinator",
            fedvol_proto::coordinator::CoordinatorOp::ALL.map(|op| op.name()),
            "Requests served, by endpoint and outcome (ok, error, bad_request, dropped, overloaded); a submit answered with an error counts as error",
            "Time from a request's arrival to its answer, by endpoint",
        );
        r.register(
            "fedvol_coordinator_decisions",
            "Decisions answered by submit, by stored state (planned for a dry run, committed, failed)",
            self.decisions.clone(),
        );
        r.register(
            "fedvol_coordinator_failed_decisions",
            "Decisions that failed, by what failed (nothing_fits, refused by policy, unavailable: clusters did not answer, commit_failed, job_failed): answered by submit, or stored by the reconciler's holder",
            self.failures.clone(),
        );
        r.register(
            "fedvol_coordinator_decisions_ended",
            "Committed decisions that ended, by final state: completed, failed (a job of it failed), cancelled (`fedvol cancel`)",
            self.ended.clone(),
        );
        r.register(
            "fedvol_coordinator_gather",
            "Clusters' slots in gathered plans, by cluster and status (answered, timed_out, unreachable, error)",
            self.gather.clone(),
        );
        r.register(
            "fedvol_coordinator_plan_duration_seconds",
            "Time a submit spent asking every cluster to plan and gathering the answers",
            self.plan.clone(),
        );
        r.register(
            "fedvol_coordinator_commit_duration_seconds",
            "Time a submit spent committing (on the chosen cluster and any fallbacks)",
            self.commit.clone(),
        );
        r.register(
            "fedvol_coordinator_commit_failures",
            "Commit attempts that did not commit, by cluster and code (the agent's refusal, e.g. provisioning_failed or no_longer_fits; timed_out; commit_outcome_unknown for one in doubt)",
            self.commit_failures.clone(),
        );
        r.register(
            "fedvol_coordinator_commits_in_flight",
            "Submits in their commit phase now",
            self.commits_in_flight.clone(),
        );
        r.register(
            "fedvol_coordinator_kv_write_duration_seconds",
            "Time of one compare-and-set write to the decision bucket, by op (create, update, lease)",
            self.kv.durations.clone(),
        );
        r.register(
            "fedvol_coordinator_kv_writes",
            "Writes to the decision bucket, by op and outcome (done, conflict, error)",
            self.kv.writes.clone(),
        );
    }

    /// Counts one request of `endpoint` that ended `outcome` after `took` (a refused
    /// `overloaded` request is counted, not timed).
    pub fn request(&self, endpoint: &'static str, outcome: Outcome, took: Duration) {
        self.requests.request(endpoint, outcome, took);
    }

    /// Counts a decision a submit answered with, in state `state`.
    pub fn decision(&self, state: &'static str) {
        self.decisions.get_or_create(&StateLabel { state }).inc();
    }

    /// Counts a decision that failed as `kind` (a submit's answer, or the reconciler's holder
    /// storing it failed).
    pub fn failed(&self, kind: FailureKind) {
        self.failures
            .get_or_create(&FailureLabel { failure: kind.as_str() })
            .inc();
    }

    /// Counts a committed decision that ended in state `state` (`completed`, `failed`,
    /// `cancelled`).
    pub fn ended(&self, state: &'static str) {
        self.ended.get_or_create(&StateLabel { state }).inc();
    }

    /// Records a gathered plan: its duration and every cluster's slot status.
    pub fn gathered<'a>(&self, took: Duration, slots: impl IntoIterator<Item = (&'a str, ClusterStatus)>) {
        self.plan.observe(took.as_secs_f64());
        for (cluster, status) in slots {
            self.gather
                .get_or_create(&GatherLabels {
                    cluster: cluster.to_string(),
                    status: status_label(status),
                })
                .inc();
        }
    }

    /// A commit phase begins: counted in flight until the guard drops.
    pub fn commit_started(&self) -> InFlight {
        self.commits_in_flight.inc();
        InFlight(self.commits_in_flight.clone())
    }

    /// A commit attempt on `cluster` did not commit, for reason code `code`.
    pub fn commit_failed(&self, cluster: &str, code: &str) {
        self.commit_failures
            .get_or_create(&CommitFailureLabels {
                cluster: cluster.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    /// A commit phase took `took`.
    pub fn commit_took(&self, took: Duration) {
        self.commit.observe(took.as_secs_f64());
    }
}

/// Reads the cluster registry at each scrape. Registered before the coordinator exists;
/// [`ClustersCollector::set`] gives it the coordinator (held weakly).
#[derive(Clone, Default)]
pub struct ClustersCollector(Arc<OnceLock<Weak<Coordinator>>>);

impl std::fmt::Debug for ClustersCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClustersCollector")
    }
}

impl ClustersCollector {
    /// Reads `co`'s registry from now on.
    pub fn set(&self, co: &Arc<Coordinator>) {
        let _ = self.0.set(Arc::downgrade(co));
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DrainLabels {
    cluster: String,
    by: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    cluster: String,
    version: String,
}

fn gauges<S: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (S, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(name, &format!("{help}."), None, MetricType::Gauge)?;
    for (labels, value) in samples {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for ClustersCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(co) = self.0.get().and_then(Weak::upgrade) else {
            return Ok(());
        };
        let clusters = co.registry().info(fedvol_proto::now_ms());
        let drains = co.drains.all();
        drop(co);
        let label = |c: &fedvol_proto::coordinator::ClusterInfo| ClusterLabel {
            cluster: c.name.clone(),
        };
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_up",
            "1 when the cluster was heard from within 3 heartbeat intervals, else 0",
            clusters.iter().map(|c| (label(c), f64::from(u8::from(c.alive)))),
        )?;
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_suspect",
            "1 when the cluster missed 2 plans in a row and sent no heartbeat since, else 0",
            clusters.iter().map(|c| (label(c), f64::from(u8::from(c.suspect)))),
        )?;
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_load",
            "The cluster's load in [0, 1] from its last heartbeat",
            clusters.iter().map(|c| (label(c), c.load)),
        )?;
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_inventory_info",
            "Always 1; the label version is the cluster's inventory version from its last heartbeat",
            clusters.iter().map(|c| {
                (
                    VersionLabels {
                        cluster: c.name.clone(),
                        version: c.inventory_version.clone(),
                    },
                    1.0,
                )
            }),
        )?;
        // Every known cluster (0 or 1), and every drained one the registry does not know.
        let mut drained: Vec<(ClusterLabel, f64)> = clusters
            .iter()
            .map(|c| (label(c), f64::from(u8::from(drains.contains_key(&c.name)))))
            .collect();
        drained.extend(
            drains
                .keys()
                .filter(|n| !clusters.iter().any(|c| &c.name == *n))
                .map(|n| (ClusterLabel { cluster: n.clone() }, 1.0)),
        );
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_drained",
            "1 when an operator drained the cluster (it answers plans but is never chosen for new work), else 0",
            drained,
        )?;
        gauges(
            &mut e,
            "fedvol_coordinator_cluster_drained_since_timestamp_seconds",
            "When an operator drained the cluster, seconds since the epoch; the label by is the operator (the reason: fedvol clusters show)",
            drains.iter().map(|(n, d)| {
                (
                    DrainLabels {
                        cluster: n.clone(),
                        by: d.by.clone(),
                    },
                    d.at_ms as f64 / 1000.0,
                )
            }),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_series_with_their_labels() {
        let m = CoordinatorMetrics::default();
        let mut r = Registry::new("coordinator", "0");
        m.register(&mut r);
        m.request("submit", Outcome::Ok, Duration::from_millis(20));
        m.request("get", Outcome::BadRequest, Duration::from_millis(1));
        m.decision("committed");
        m.failed(FailureKind::Unavailable);
        m.gathered(
            Duration::from_millis(5),
            [
                ("east", ClusterStatus::Answered),
                ("west", ClusterStatus::TimedOut),
                ("north", ClusterStatus::Unreachable),
                ("south", ClusterStatus::Error),
            ],
        );
        m.kv.write("create", "done", Duration::from_millis(2));
        m.kv.write("update", "conflict", Duration::from_millis(2));
        m.ended("cancelled");
        {
            let _in_flight = m.commit_started();
            assert!(r.encode().unwrap().contains("fedvol_coordinator_commits_in_flight 1\n"));
            m.commit_took(Duration::from_millis(40));
        }
        let text = r.encode().unwrap();
        for line in [
            "fedvol_coordinator_requests_total{endpoint=\"submit\",outcome=\"ok\"} 1",
            "fedvol_coordinator_requests_total{endpoint=\"list\",outcome=\"ok\"} 0",
            "fedvol_coordinator_requests_total{endpoint=\"get\",outcome=\"bad_request\"} 1",
            "fedvol_coordinator_decisions_total{state=\"committed\"} 1",
            "fedvol_coordinator_decisions_total{state=\"failed\"} 0",
            "fedvol_coordinator_failed_decisions_total{failure=\"unavailable\"} 1",
            "fedvol_coordinator_failed_decisions_total{failure=\"job_failed\"} 0",
            "fedvol_coordinator_decisions_ended_total{state=\"cancelled\"} 1",
            "fedvol_coordinator_decisions_ended_total{state=\"completed\"} 0",
            "fedvol_coordinator_gather_total{cluster=\"east\",status=\"answered\"} 1",
            "fedvol_coordinator_gather_total{cluster=\"west\",status=\"timed_out\"} 1",
            "fedvol_coordinator_gather_total{cluster=\"north\",status=\"unreachable\"} 1",
            "fedvol_coordinator_gather_total{cluster=\"south\",status=\"error\"} 1",
            "fedvol_coordinator_plan_duration_seconds_count 1",
            "fedvol_coordinator_commit_duration_seconds_count 1",
            "fedvol_coordinator_commits_in_flight 0",
            "fedvol_coordinator_kv_write_duration_seconds_count{op=\"create\"} 1",
            "fedvol_coordinator_kv_writes_total{op=\"update\",outcome=\"conflict\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
