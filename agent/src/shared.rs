//! What the agent's endpoints share: the state behind its one lock ([`Shared`], [`lock`]), and
//! the steps every state change takes before it is answered: make it durable ([`durable`],
//! [`sync`]), or stop the agent when the store fails ([`store_failed`]). It sits below
//! [`crate::service`] and every endpoint, which import it; it imports neither.

use std::sync::{Arc, Mutex};

use fedvol_proto::Failure;

use crate::drivers::Drivers;
use crate::state::Core;

/// What every handler shares.
pub struct Shared {
    /// The state, behind one lock (never held across an await).
    pub core: Mutex<Core>,
    /// Storage drivers.
    pub drivers: Drivers,
    /// Cluster name.
    pub cluster: String,
    /// Largest request body served, bytes; larger ones get `bad_request` unread.
    pub max_body_bytes: usize,
    /// One sync of the store at a time; answers waiting for the disk wait here without
    /// holding a thread (a blocked thread per waiter made the blocking pool grow to hundreds
    /// of threads under load, and memory with it).
    pub sync_turn: tokio::sync::Mutex<()>,
    /// Plans computed at once: the number of cores (more only adds threads and switching).
    pub plan_slots: tokio::sync::Semaphore,
    /// Requests in progress at once (`maxInFlight`); beyond, a request is answered
    /// `overloaded` at once instead of queueing without end.
    pub admission: Arc<tokio::sync::Semaphore>,
    /// The admission limit.
    pub max_in_flight: usize,
    /// Request and reload metrics (counted whether or not a metrics server runs).
    pub metrics: crate::metrics::AgentMetrics,
    /// What `/readyz` answers: [`crate::service::serve`] makes it ready once every endpoint is subscribed.
    pub readiness: fedvol_obs::Readiness,
    /// Whether new commits wait for the coordinators' restore ([`crate::restore_gate`]).
    pub restore: crate::restore_gate::RestoreGate,
    /// The Slurm settings of an agent that submits committed jobs (`slurm.jobs` given);
    /// `None`: commits submit nothing.
    pub batch: Option<Arc<crate::slurm::SlurmConfig>>,
    /// Who the jobs run as (`slurm.jobs`): the user map and the grant; `None` with `batch`.
    pub runner: Option<Arc<crate::slurm::identity::Runner>>,
    /// The whole answers of plans answered with their summary, for the `answer` operation.
    pub answers: crate::answers::Answers,
    /// The NATS server's `max_payload`, bytes, once connected (answers that grow with
    /// commits, `inventory`'s, are cut to fit it).
    pub max_payload: std::sync::atomic::AtomicUsize,
}

impl Shared {
    /// What every handler shares, for `core` served with `drivers`.
    pub fn new(core: Core, drivers: Drivers, cluster: &str, max_body_bytes: usize, max_in_flight: usize) -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Shared {
            admission: Arc::new(tokio::sync::Semaphore::new(max_in_flight)),
            max_in_flight,
            core: Mutex::new(core),
            drivers,
            cluster: cluster.to_string(),
            max_body_bytes,
            sync_turn: tokio::sync::Mutex::new(()),
            plan_slots: tokio::sync::Semaphore::new(cores),
            metrics: crate::metrics::AgentMetrics::default(),
            readiness: fedvol_obs::Readiness::default(),
            restore: crate::restore_gate::RestoreGate::open(),
            batch: None,
            runner: None,
            answers: Default::default(),
            max_payload: std::sync::atomic::AtomicUsize::new(fedvol_proto::DEFAULT_MAX_BODY_BYTES),
        }
    }

    /// The same, submitting committed jobs to the Slurm of `slurm` when it has `jobs`, as the
    /// accounts `runner` maps users to.
    pub fn with_batch(
        mut self,
        slurm: Option<&crate::slurm::SlurmConfig>,
        runner: Option<Arc<crate::slurm::identity::Runner>>,
    ) -> Self {
        self.batch = slurm.filter(|s| s.jobs.is_some()).map(|s| Arc::new(s.clone()));
        self.runner = runner.filter(|_| self.batch.is_some());
        self
    }

    /// The same, with new commits waiting for the restore `gate` says.
    pub fn with_restore_gate(mut self, gate: crate::restore_gate::RestoreGate) -> Self {
        self.restore = gate;
        self
    }

    /// The same, counting into `metrics` and reporting readiness to `readiness` (those of the
    /// metrics server).
    pub fn with_obs(mut self, metrics: crate::metrics::AgentMetrics, readiness: fedvol_obs::Readiness) -> Self {
        self.metrics = metrics;
        self.readiness = readiness;
        self
    }
}

/// Locks the state. A panic while holding the lock (a bug) must not wedge the agent: the
/// state on disk is the truth, and the in-memory copy is only changed after a write succeeds.
pub fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Core> {
    shared.core.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An `internal` failure: the request did not take effect (the serve layer names the cluster
/// and the request).
pub fn internal(e: impl std::fmt::Display) -> Failure {
    Failure::new(fedvol_proto::Code::Internal, e.to_string())
}

/// The state store failed (a full or broken disk, a lost JetStream stream, or this replica was
/// fenced by another): memory may hold a change the store did not take, and redb refuses every
/// write after an I/O error. The agent exits (code 75, EX_TEMPFAIL) so that its supervisor
/// starts it again on what is durable; the request is not answered, which its
/// coordinator settles like any lost answer. Never returns.
pub fn store_failed(e: &dyn std::fmt::Display) -> ! {
    tracing::error!(error = %e, "the state store failed: exiting so that the supervisor restarts the agent on its durable state");
    eprintln!("fedvol-agent: the state store failed: {e}; exiting (75) for the supervisor to restart the agent");
    std::process::exit(75)
}

/// Makes every state change so far durable, then gives `answer` back: called before any answer
/// that acknowledges state (a hold, a commit, a release, a completion), including one read from
/// memory (a repeated request may see a change another task made and has not yet synced).
/// Answers waiting together share one fsync ([`crate::state::backend::Store::sync_through`]).
///
/// Errors: the blocking task failed (`internal`). A store that fails ends the process
/// ([`store_failed`]).
pub async fn durable<T>(shared: &Shared, answer: T) -> Result<T, Failure> {
    match sync(shared).await {
        Ok(()) => Ok(answer),
        Err(SyncError::Store(e)) => store_failed(&e),
        Err(e) => Err(internal(e)),
    }
}

/// Waits until every state change made so far is on disk (one fsync shared with every caller
/// waiting at the same moment).
///
/// Errors: the disk failed, or the blocking task did not finish.
pub async fn sync(shared: &Shared) -> Result<(), SyncError> {
    let store = lock(shared).store();
    let seq = store.written();
    let _turn = shared.sync_turn.lock().await;
    if store.is_durable(seq) {
        return Ok(());
    }
    match tokio::task::spawn_blocking(move || store.sync_through(seq)).await {
        Ok(r) => r.map_err(SyncError::Store),
        Err(e) => Err(SyncError::Task(e.to_string())),
    }
}

/// Why the state could not be made durable.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The store's sync failed.
    #[error(transparent)]
    Store(#[from] crate::state::store::StoreError),
    /// The blocking task running the sync failed.
    #[error("the disk sync task failed: {0}")]
    Task(String),
}

/// What an endpoint's unit tests serve from: the state of cluster `c1` in `dir` (a fresh redb
/// file), one zone `z1` with one host `h0` of 8 cores, 32 GiB and 4 instances, no NATS
/// connection, at most 16 requests in flight.
#[cfg(test)]
pub(crate) fn one_host_for_tests(dir: &std::path::Path) -> Arc<Shared> {
    let inv = fedvol_formats::parse_inventory_str(
        "inv.yaml",
        "cluster: c1\nzones:\n  z1:\n    hosts:\n      - {name: h0, capacity: {cpu: 8, memory: 32GiB, instances: 4}}\n",
        None,
    )
    .expect("the test inventory")
    .value;
    let (store, snap) = crate::state::backend::Store::open(&dir.join("state.redb")).expect("the test state");
    let core = Core::new(
        "c1",
        inv,
        store,
        crate::state::ledger::Ledger::from_snapshot(snap),
        30_000,
    );
    let drivers = Drivers::new(None, "c1", fedvol_proto::Subjects::new("fedvol.v1"), Default::default());
    Arc::new(Shared::new(core, drivers, "c1", 1 << 20, 16))
}
