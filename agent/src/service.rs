//! The agent's NATS service: one queue group per cluster (`agent.<cluster>`, so replicas share
//! the load and each cluster answers a broadcast once), registered with the NATS service API as
//! `fedvol-agent` with the cluster in its metadata, serving every [`AgentOp`] (one module each
//! in [`crate::endpoints`]).
//!
//! Around each handler, [`fedvol_proto::serve::answer`] refuses bodies over `maxBodyBytes`
//! and malformed ones (`bad_request`, nothing changes), drops requests past their deadline,
//! and replaces an answer over the server's `max_payload` with `reply_too_large`. State changes
//! go through one lock ([`Core`]) and reach the disk before the reply ([`durable`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::BoxFuture;

use fedvol_obs::Outcome;
use fedvol_proto::agent::{self as ops, AgentOp};
use fedvol_proto::serve::{Server, answer};
use fedvol_proto::subjects::AGENT_SERVICE;
use fedvol_proto::{Endpoint, Failure, Subjects};

use crate::drivers::Drivers;
use crate::endpoints;
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
    /// What `/readyz` answers: [`serve`] makes it ready once every endpoint is subscribed.
    pub readiness: fedvol_obs::Readiness,
    /// Whether new commits wait for the coordinators' restore ([`crate::restore_gate`]).
    pub restore: crate::restore_gate::RestoreGate,
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
        }
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
/// Answers waiting together share one fsync ([`crate::state::store::Store::sync_through`]).
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

/// The handler of a request did not run (see `add`).
const NOT_RUN: u8 = u8::MAX;

/// An endpoint's handler: the decoded, checked, in-time request in; `None` (drop), the reply, or
/// a failure out.
pub type Handler<E> =
    fn(Arc<Shared>, <E as Endpoint>::Request) -> BoxFuture<'static, Option<Result<<E as Endpoint>::Reply, Failure>>>;

/// Registers endpoint `E` as `name` on `subject` and serves it from a task, each request in a
/// task of its own (a slow commit never holds up a plan).
///
/// Errors: the endpoint could not be registered.
async fn add<E: Endpoint>(
    service: &async_nats::service::Service,
    client: &async_nats::Client,
    shared: &Arc<Shared>,
    name: &'static str,
    subject: String,
    handler: Handler<E>,
) -> Result<tokio::task::JoinHandle<()>, async_nats::Error> {
    let mut endpoint = service.endpoint_builder().name(name).add(subject.clone()).await?;
    tracing::info!(endpoint = name, subject = %subject, queue = %Subjects::agent_queue(&shared.cluster), "serving");
    let (shared, client) = (shared.clone(), client.clone());
    Ok(tokio::spawn(async move {
        while let Some(request) = endpoint.next().await {
            let (shared, client) = (shared.clone(), client.clone());
            let permit = shared.admission.clone().try_acquire_owned();
            tokio::spawn(async move {
                let server = Server {
                    speaker: "agent",
                    cluster: Some(&shared.cluster),
                    max_body_bytes: shared.max_body_bytes,
                    max_payload: client.max_payload(),
                    too_large_hint: "raise max_payload in the NATS server's configuration",
                };
                let started = std::time::Instant::now();
                let Ok(_permit) = permit else {
                    shared.metrics.request(name, Outcome::Overloaded, started.elapsed());
                    tracing::warn!(
                        endpoint = name,
                        limit = shared.max_in_flight,
                        "overloaded: request refused"
                    );
                    let body = fedvol_proto::serve::overloaded::<E>(&server, shared.max_in_flight);
                    if let Err(e) = request.respond(Ok(body)).await {
                        tracing::warn!(error = %e, endpoint = name, "reply could not be sent");
                    }
                    return;
                };
                let payload = request.message.payload.clone();
                // What the handler returned, if it ran (the serve layer refuses or drops some
                // requests before it): read after the answer, for the request's outcome.
                let ran = std::sync::atomic::AtomicU8::new(NOT_RUN);
                let body = answer::<E, _, _>(&server, &payload, |req| {
                    let work = handler(shared.clone(), req);
                    let ran = &ran;
                    async move {
                        let result = work.await;
                        let seen = Outcome::of_answer(&result);
                        ran.store(seen as u8, std::sync::atomic::Ordering::Relaxed);
                        result
                    }
                })
                .await;
                let outcome = match (ran.load(std::sync::atomic::Ordering::Relaxed), &body) {
                    (NOT_RUN, Some(_)) => Outcome::BadRequest,
                    (NOT_RUN, None) => Outcome::Dropped,
                    (seen, _) => Outcome::ALL.get(usize::from(seen)).copied().unwrap_or(Outcome::Ok),
                };
                shared.metrics.request(name, outcome, started.elapsed());
                if let Some(body) = body
                    && let Err(e) = request.respond(Ok(body)).await
                {
                    tracing::warn!(error = %e, endpoint = name, "reply could not be sent");
                }
            });
        }
    }))
}

/// Registers the service and serves until the client closes. Returns when every endpoint
/// stream ends.
///
/// Errors: the service or an endpoint could not be registered.
pub async fn serve(
    client: async_nats::Client,
    subjects: &Subjects,
    shared: Arc<Shared>,
) -> Result<(), async_nats::Error> {
    use async_nats::service::ServiceExt;
    let cluster = shared.cluster.clone();
    let service = client
        .service_builder()
        .description(format!("fedvol agent of cluster {cluster}"))
        .metadata(HashMap::from([("cluster".to_string(), cluster.clone())]))
        .queue_group(Subjects::agent_queue(&cluster))
        .start(AGENT_SERVICE, env!("CARGO_PKG_VERSION"))
        .await?;
    let on = |op: AgentOp| subjects.cluster(&cluster, op);
    let (s, c, sh) = (&service, &client, &shared);
    let tasks = vec![
        add::<ops::Plan>(s, c, sh, "plan", subjects.plan(), |s, r| {
            Box::pin(endpoints::plan::handle(s, r))
        })
        .await?,
        add::<ops::Plan>(s, c, sh, "cluster_plan", on(AgentOp::Plan), |s, r| {
            Box::pin(endpoints::plan::handle(s, r))
        })
        .await?,
        add::<ops::Commit>(s, c, sh, "commit", on(AgentOp::Commit), |s, r| {
            Box::pin(endpoints::commit::handle(s, r))
        })
        .await?,
        add::<ops::Release>(s, c, sh, "release", on(AgentOp::Release), |s, r| {
            Box::pin(endpoints::release::handle(s, r))
        })
        .await?,
        add::<ops::Complete>(s, c, sh, "complete", on(AgentOp::Complete), |s, r| {
            Box::pin(endpoints::complete::handle(s, r))
        })
        .await?,
        add::<ops::WhyNot>(s, c, sh, "why_not", on(AgentOp::WhyNot), |s, r| {
            Box::pin(endpoints::why_not::handle(s, r))
        })
        .await?,
        add::<ops::Status>(s, c, sh, "status", on(AgentOp::Status), |s, r| {
            Box::pin(endpoints::status::handle(s, r))
        })
        .await?,
        add::<ops::Inventory>(s, c, sh, "inventory", on(AgentOp::Inventory), |s, r| {
            Box::pin(endpoints::inventory::handle(s, r))
        })
        .await?,
        add::<ops::Restored>(s, c, sh, "restored", on(AgentOp::Restored), |s, r| {
            Box::pin(endpoints::restored::handle(s, r))
        })
        .await?,
    ];
    // Make sure the server has every subscription before anyone is told we are ready.
    client.flush().await?;
    shared.readiness.ready_when(ready_check(client.clone()));
    tracing::info!(cluster = %cluster, "endpoints ready");
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// The agent's readiness once it serves: connected to NATS. (Its inventory is loaded before it
/// serves, and a refused reload keeps the previous one, so it always has one.)
fn ready_check(client: async_nats::Client) -> fedvol_obs::ready::ReadyCheck {
    Arc::new(move || {
        let up = fedvol_obs::ready::nats_connected(&client);
        Box::pin(async move { up })
    })
}
