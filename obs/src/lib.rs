//! fedvol-obs: what the two daemons (`fedvol-agent`, `fedvol-coordinator`) share to be watched
//! by Prometheus and by their supervisors.
//!
//! - [`registry`]: [`Registry`], the metrics of one process (a `prometheus-client` registry
//!   plus `fedvol_build_info`), encoded as OpenMetrics text; the duration buckets every
//!   fedvol histogram uses; the `outcome` of a served request ([`Outcome`]).
//! - [`requests`]: [`RequestMetrics`], requests by endpoint and outcome and their durations.
//! - [`nats`]: [`NatsCollector`], the NATS connection's state and reconnects, read from the
//!   client at each scrape.
//! - [`ready`]: [`Readiness`], what `/readyz` answers: starting (with what it is doing), or the
//!   result of the daemon's check (connected to NATS, inventory loaded, bucket reachable).
//! - [`daemon`]: [`daemon::Daemon`], the one start-up of both daemons' `main` (logs, runtime,
//!   exit code), and [`daemon::stop_signal`].
//! - [`man`]: [`man::render`], the man page of a program from its clap definition with the
//!   ENVIRONMENT, EXIT STATUS and EXAMPLES sections clap does not know (all three programs).
//! - [`logs`]: [`logs::escaped_fields`], text log lines whose fields (user input among them)
//!   are escaped, so no value forges a line or drives a terminal.
//! - [`throttle`]: [`throttle::Throttle`], repeated log lines rate-limited per key (one line per
//!   key and interval, with the count of those kept quiet).
//! - [`server`]: [`serve`], the HTTP server of `/metrics`, `/healthz` and `/readyz` on the
//!   configured listen address; [`parse_listen`] for the `metricsListen` key and flag.
//!
//! Metrics are updated on the hot path with atomic counters and histograms only; values that
//! live in a daemon's state (holds, capacity in use, inventory version, clusters) are read by
//! collectors when Prometheus scrapes, never kept up to date per request. Label values are
//! bounded: endpoint names, outcomes, cluster and zone names; never request ids or users.
//!
//! This crate does I/O (an HTTP listener) and knows NATS only as a client whose state it reads;
//! it knows nothing of the agent or the coordinator, which both depend on it.

#![warn(missing_docs)]

pub mod daemon;
pub mod logs;
pub mod man;
pub mod nats;
pub mod ready;
pub mod registry;
pub mod requests;
pub mod server;
pub mod throttle;

pub use nats::NatsCollector;
pub use ready::Readiness;
pub use registry::{Outcome, Registry};
pub use requests::RequestMetrics;
pub use server::{ServeError, parse_listen, serve};

/// Re-exported so that the daemons name the same metric types this crate registers.
pub use prometheus_client;
