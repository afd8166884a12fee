//! The coordinator daemon (`fedvol-coordinator`): the federation (docs/design.md §1, §4–§6).
//!
//! A submitted workflow is planned by every known cluster at once (one [`PlanMsg`] sent to each
//! cluster's own `<prefix>.cluster.<c>.plan`, its answer expected on that cluster's token of a
//! fresh reply inbox), the answers are gathered until every cluster expected to answer did or
//! the deadline passed, the cluster is chosen ([`fedvol_common::choice::choose_cluster`]), the
//! workflow is committed there (admission at commit), and the decision is stored in a
//! JetStream key-value bucket. One slow or dead
//! cluster never discards the others' answers: each cluster's slot says `answered`,
//! `timed_out`, `unreachable` or `error`.
//!
//! Modules, one job each, from the entry points down:
//! - [`run`]: start-up (configuration, directory, connect, bucket, heartbeats, discovery) and
//!   `serving`: each request admitted (`maxInFlight`, per user, the watch pool) and handed to
//!   `ops::dispatch`; `answer`: one request of one endpoint, decoded and bounded.
//! - [`ops`]: the operations, one module each (`submit`, `complete`, `get`, `replay`,
//!   `why_not`, `clusters`, `list`, `changes`, `count`, the operators' `drain` and `undrain`),
//!   each an entry point over [`lifecycle`].
//! - [`reconcile`]: one coordinator at a time (a lease in the bucket) settles decisions left
//!   `planned` by a coordinator that died; [`restore`]: it also commits again what an agent
//!   started on a new state file forgot; [`jobs`]: it follows committed decisions' batch jobs
//!   and stores them `completed` or `failed`; [`retention`]: it removes final decisions after
//!   `decisionRetentionMs` (and the per-user cap on stored decisions); [`queue`]: submits that
//!   wait for capacity, placed by priority then age when room frees.
//! - [`lifecycle`]: the steps every entry point shares (quota admission, planning and choosing,
//!   committing and storing the outcome, taking over); [`fanout`]: the plan sent to each known
//!   cluster and the per-cluster slots, answers arriving through [`replies`], whole answers
//!   fetched by [`whole`]; [`commit`]: the commit phase, with fallback to the next cluster;
//!   [`actions`]: commit, release and complete sent to an agent, and settling an unanswered
//!   commit; [`waiting`]: the queue's record.
//! - [`store`]: the decision bucket; [`index`]: the latest change of every decision, from this
//!   coordinator's watch of the bucket (`list` and `changes` answer from it), taking the
//!   listings of this coordinator's own writes from [`own_writes`]; [`quota`]: the
//!   usage ledgers in the bucket, admission by compare-and-set; [`replay`]: comparing a
//!   replayed decision with the stored one; [`what_if`]: a stored record and the agents'
//!   inventories read for a what-if.
//! - [`drains`]: the clusters operators drained (keys `fedvol/drain/<c>` of the bucket, followed
//!   by the index's watch); the `drain` and `undrain` operations change them.
//! - [`registry`]: clusters from heartbeats and [`discovery`] (alive, suspect, forgotten);
//!   [`config`]: the configuration file; [`policy`]: quotas, priority classes and the queue's
//!   bounds; [`directory`]: users to groups; [`per_user`] and [`watchers`]: what one user may
//!   hold and read; [`metrics`]: what `/metrics` shows (`metricsListen`; the server is
//!   `fedvol_obs`).
//! - Bodies, subjects, errors, serving and calling come from [`fedvol_proto`].
//!
//! Several coordinators may run at once: requests arrive in queue group `coordinator`, and
//! every decision change is a compare-and-set on the bucket.
//!
//! [`PlanMsg`]: fedvol_proto::agent::PlanMsg

pub mod actions;
mod answer;
pub mod commit;
pub mod config;
pub mod directory;
pub mod discovery;
pub mod drains;
pub mod fanout;
pub mod index;
pub mod jobs;
pub mod lifecycle;
pub mod metrics;
pub mod ops;
pub mod own_writes;
pub mod per_user;
pub mod policy;
pub mod queue;
pub mod quota;
pub mod reconcile;
pub mod registry;
pub mod replay;
pub mod replies;
pub mod restore;
pub mod retention;
pub mod run;
mod serving;
pub mod store;
pub mod waiting;
pub mod watchers;
pub mod what_if;
pub mod whole;

use std::sync::{Mutex, MutexGuard, RwLock};

use fedvol_proto::Subjects;

pub use config::CoordinatorConfig;
pub use directory::Directory;
pub use registry::Registry;
pub use store::DecisionStore;

/// What every request handler shares.
pub struct Coordinator {
    /// The NATS connection.
    pub client: async_nats::Client,
    /// Subjects under the configured prefix.
    pub subjects: Subjects,
    /// The configuration.
    pub cfg: CoordinatorConfig,
    /// The decision bucket.
    pub store: DecisionStore,
    /// The cluster registry (never locked across an await).
    pub registry: Mutex<Registry>,
    /// Users to groups; `None` = dev mode (claimed groups are trusted).
    pub directory: RwLock<Option<Directory>>,
    /// Requests in progress at once (`maxInFlight`); beyond, a request is answered
    /// `overloaded` at once instead of queueing without end.
    pub admission: std::sync::Arc<tokio::sync::Semaphore>,
    /// Requests in progress per user (`maxInFlightPerUser`, [`per_user`]).
    pub per_user: std::sync::Arc<per_user::PerUser>,
    /// Where plan answers arrive: one subscription per cluster ([`replies`]).
    pub replies: replies::Replies,
    /// Counted metrics (requests, gathers, commits, bucket writes).
    pub metrics: metrics::CoordinatorMetrics,
    /// The latest change of every decision, from this coordinator's watch of the bucket
    /// (`list` and `changes` answer from it).
    pub index: std::sync::Arc<index::DecisionIndex>,
    /// `changes` long polls waiting at once ([`MAX_WATCHERS`], shared fairly among users:
    /// [`watchers`]); they do not count against `admission`, so watchers never crowd out
    /// submits, but they count against their user's `maxInFlightPerUser`.
    pub watchers: std::sync::Arc<watchers::WatchPool>,
    /// Bytes of decisions each user may read per second (`readBytesPerSecondPerUser`,
    /// [`per_user::ReadBudget`]).
    pub reads: per_user::ReadBudget,
    /// Repeated warnings (refused requests, answers that could not be sent) rate-limited per
    /// kind and user ([`fedvol_obs::throttle`]).
    pub log_throttle: fedvol_obs::throttle::Throttle<(&'static str, String)>,
    /// One listing of the bucket's keys at a time (`list` when the index is behind).
    pub listing: tokio::sync::Semaphore,
    /// Woken by a heartbeat saying its agent waits for its restore (`restoring`): the
    /// reconciler's holder checks the clusters' state generations at once instead of at its
    /// next tick ([`restore::check_generations`]), so a brand-new cluster admits commits
    /// within a round trip of its first heartbeat.
    pub restore_due: tokio::sync::Notify,
    /// The clusters operators drained ([`drains`]): read from the bucket before serving, kept
    /// current by the decision index's watch.
    pub drains: drains::DrainTable,
    /// The request ids whose `complete` went unanswered and that this coordinator keeps
    /// completing in the background (`ops::complete::finish_later`): one task per id.
    pub completing: Mutex<std::collections::HashSet<String>>,
}

/// How often repeated warnings are written per kind and user ([`Coordinator::log_throttle`]).
pub const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The most `changes` long polls one coordinator holds at once; beyond, the user holding the
/// most gives up its oldest to a user holding fewer, and a user holding as many as anyone is
/// answered `overloaded` (the CLI asks again after a pause).
pub const MAX_WATCHERS: usize = 1024;

impl Coordinator {
    /// Locks the registry. A panic while it was held (a bug) does not wedge the coordinator:
    /// the registry is rebuilt from heartbeats anyway.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The groups a request of `user` runs with: from the directory when there is one (none
    /// for a user it does not list), else the groups the client claims (dev mode).
    pub fn groups(&self, user: &str, claimed: &[String]) -> Vec<String> {
        let dir = self.directory.read().unwrap_or_else(|p| p.into_inner());
        match dir.as_ref() {
            Some(d) => d.groups(user),
            None => claimed.to_vec(),
        }
    }
}
