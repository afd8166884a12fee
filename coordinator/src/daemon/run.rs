//! Starting and running a coordinator: check the configuration, read the directory, connect,
//! open (creating if needed) the decision bucket, follow heartbeats, discover the agents that
//! are already up, then serve `<prefix>.coordinator.<op>.*` in queue group `coordinator`.
//!
//! Every request runs in its own task under a `request` span carrying the operation, the user
//! (the subject's last token) and the request id, so every log line names them. SIGHUP
//! re-reads the directory (a bad file is logged and the old one kept).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_nats::Message;
use bytes::Bytes;
use futures::StreamExt;
use tracing::Instrument;

use fedvol_obs::Outcome;
use fedvol_proto::agent::Heartbeat;
use fedvol_proto::coordinator::{self as api, CoordinatorOp};
use fedvol_proto::serve::{Server, answer};
use fedvol_proto::{Endpoint, Failure, Subjects, now_ms};

use super::config::CoordinatorConfig;
use super::directory::Directory;
use super::discovery::discover;
use super::registry::Registry;
use super::store::DecisionStore;
use super::submit::submit;
use super::{Coordinator, ops as op_handlers};

pub use fedvol_proto::subjects::AGENT_SERVICE;

/// Why the coordinator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is inconsistent.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Config(Vec<String>),
    /// The directory file has errors.
    #[error("directory {path} is invalid:\n{diagnostics}")]
    Directory {
        /// The file.
        path: String,
        /// Every problem.
        diagnostics: fedvol_formats::yaml::Diagnostics,
    },
    /// NATS could not be reached, or a subscription failed.
    #[error("{0}")]
    Nats(String),
    /// The metrics server could not listen on its address.
    #[error(transparent)]
    Metrics(#[from] fedvol_obs::ServeError),
    /// The decision bucket could not be created or opened (is JetStream enabled?).
    #[error("{0} (the coordinator needs JetStream: start nats-server with -js)")]
    Store(String),
}

fn load_directory(cfg: &CoordinatorConfig) -> Result<Option<Directory>, StartError> {
    match &cfg.directory {
        None => Ok(None),
        Some(p) => Directory::load(p).map(Some).map_err(|d| StartError::Directory {
            path: p.display().to_string(),
            diagnostics: d,
        }),
    }
}

/// What the metrics server reads: counted metrics, readiness, and the collectors given the
/// connection and the coordinator once they exist. Without `metricsListen` nothing listens.
#[derive(Default)]
struct Obs {
    metrics: super::metrics::CoordinatorMetrics,
    readiness: fedvol_obs::Readiness,
    nats: fedvol_obs::NatsCollector,
    clusters: super::metrics::ClustersCollector,
}

/// Starts the metrics server when `metricsListen` is set.
///
/// Errors: the address cannot be bound.
async fn start_obs(cfg: &CoordinatorConfig) -> Result<Obs, StartError> {
    let obs = Obs::default();
    if let Some(addr) = cfg.metrics_listen {
        let mut registry = fedvol_obs::Registry::new("coordinator", env!("CARGO_PKG_VERSION"));
        obs.metrics.register(&mut registry);
        registry.register_collector(obs.nats.clone());
        registry.register_collector(obs.clusters.clone());
        fedvol_obs::serve(addr, Arc::new(registry), obs.readiness.clone()).await?;
    }
    Ok(obs)
}

/// The coordinator's readiness once it serves: connected to NATS and the decision bucket
/// answers.
fn ready_check(co: &Arc<Coordinator>) -> fedvol_obs::ready::ReadyCheck {
    let co = Arc::downgrade(co);
    Arc::new(move || {
        let co = co.upgrade();
        Box::pin(async move {
            let Some(co) = co else {
                return Err("stopping".to_string());
            };
            fedvol_obs::ready::nats_connected(&co.client)?;
            co.store.reachable().await.map_err(|e| e.to_string())
        })
    })
}

/// Runs the coordinator until SIGINT or SIGTERM.
///
/// Errors: any [`StartError`] before serving begins, or a subscription that fails.
pub async fn run(cfg: CoordinatorConfig) -> Result<(), StartError> {
    cfg.validate().map_err(StartError::Config)?;
    let directory = load_directory(&cfg)?;
    match &directory {
        Some(d) => tracing::info!(users = d.len(), "directory loaded: groups come from it"),
        None => tracing::warn!(
            "no directory configured: DEV MODE, the groups clients claim are trusted; configure `directory:` in production"
        ),
    }
    let obs = start_obs(&cfg).await?;
    obs.readiness.starting("connecting to NATS");
    let client = fedvol_proto::nats::connect("fedvol-coordinator", &cfg.nats)
        .await
        .map_err(|e| StartError::Nats(e.to_string()))?;
    obs.nats.set(client.clone());
    obs.readiness.starting("opening the decision bucket");
    let js = async_nats::jetstream::new(client.clone());
    let store = DecisionStore::open(&js, &cfg.kv)
        .await
        .map_err(|e| StartError::Store(e.to_string()))?
        .with_metrics(obs.metrics.kv.clone());
    tracing::info!(bucket = %cfg.kv.bucket, history = cfg.kv.history, replicas = cfg.kv.replicas, "decision store open");
    let co = Arc::new(Coordinator {
        client: client.clone(),
        subjects: Subjects::new(&cfg.subject_prefix),
        cfg: cfg.clone(),
        store,
        registry: Mutex::new(Registry::new()),
        directory: RwLock::new(directory),
        admission: Arc::new(tokio::sync::Semaphore::new(cfg.max_in_flight)),
        per_user: Arc::default(),
        replies: super::replies::Replies::new(&client),
        metrics: obs.metrics.clone(),
        index: Arc::new(super::changes::DecisionIndex::new()),
        watchers: Arc::new(tokio::sync::Semaphore::new(super::MAX_WATCHERS)),
        listing: tokio::sync::Semaphore::new(1),
    });
    super::changes::spawn(co.clone());
    obs.clusters.set(&co);
    obs.readiness.starting("discovering clusters");

    follow_heartbeats(&co).await?;
    discover(&co).await;

    let mut tasks = Vec::new();
    for op in CoordinatorOp::ALL {
        let subject = co.subjects.coordinator_all(op);
        let mut sub = client
            .queue_subscribe(subject.clone(), Subjects::COORDINATOR_QUEUE.to_string())
            .await
            .map_err(|e| StartError::Nats(format!("cannot subscribe to {subject}: {e}")))?;
        let co = co.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                let admitted = admit(&co, op, &user_of(&m));
                tokio::spawn(handle(co.clone(), op, m, admitted));
            }
        }));
    }
    client
        .flush()
        .await
        .map_err(|e| StartError::Nats(format!("cannot reach NATS: {e}")))?;
    obs.readiness.ready_when(ready_check(&co));
    tracing::info!(
        prefix = %cfg.subject_prefix,
        queue = Subjects::COORDINATOR_QUEUE,
        clusters = ?co.registry().names(),
        "coordinator ready"
    );
    let instance = format!(
        "{}-{}",
        std::process::id(),
        co.client.new_inbox().rsplit('.').next().unwrap_or_default()
    );
    super::reconcile::spawn(co.clone(), instance, Duration::from_millis(cfg.reconcile_every_ms));
    reload_on_hup(&co, cfg);
    wait_for_stop().await;
    obs.readiness.starting("stopping");
    tracing::info!("stopping: in-flight requests are finished first");
    if let Err(e) = client.drain().await {
        tracing::warn!(error = %e, "drain failed");
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

async fn wait_for_stop() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn reload_on_hup(co: &Arc<Coordinator>, cfg: CoordinatorConfig) {
    let co = co.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the directory is read only at start-up");
            return;
        };
        while hup.recv().await.is_some() {
            match load_directory(&cfg) {
                Ok(d) => {
                    let users = d.as_ref().map_or(0, Directory::len);
                    *co.directory.write().unwrap_or_else(|p| p.into_inner()) = d;
                    tracing::info!(users, "SIGHUP: directory reloaded");
                }
                Err(e) => tracing::error!(error = %e, "SIGHUP: directory reload refused; the previous one stays"),
            }
        }
    });
}

/// Subscribes to every heartbeat and feeds the registry from a task that drains the
/// subscription at once (a full buffer would drop messages silently).
async fn follow_heartbeats(co: &Arc<Coordinator>) -> Result<(), StartError> {
    let subject = co.subjects.heartbeats();
    let mut sub = co
        .client
        .subscribe(subject.clone())
        .await
        .map_err(|e| StartError::Nats(format!("cannot subscribe to {subject}: {e}")))?;
    let co = co.clone();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            match fedvol_proto::decode::<Heartbeat>(&m.payload, "heartbeat", "coordinator") {
                // The subject is what NATS permissions tie to the agent's credentials: a
                // heartbeat naming another cluster in its body is a spoof.
                Ok(hb) if m.subject.rsplit('.').next() != Some(hb.cluster.as_str()) => tracing::warn!(
                    subject = %m.subject,
                    claimed = %hb.cluster.chars().take(80).collect::<String>(),
                    "a heartbeat naming another cluster than its subject: ignored"
                ),
                Ok(hb) => co.registry().heartbeat(&hb, now_ms()),
                Err(e) => tracing::debug!(subject = %m.subject, error = %e, "unreadable heartbeat ignored"),
            }
        }
    });
    Ok(())
}

/// How many times `client` has connected (a reconnect changes it).
fn connects(client: &async_nats::Client) -> u64 {
    client.statistics().connects.load(Ordering::Relaxed)
}

/// The user of a request: its subject's last token.
fn user_of(m: &Message) -> String {
    m.subject.rsplit('.').next().unwrap_or_default().to_string()
}

/// Records the request id (user input: escaped, see [`fedvol_common::limits::printable`]) in the
/// current request span.
fn record_id(id: &str) {
    let shown = fedvol_common::limits::printable(&id.chars().take(256).collect::<String>());
    tracing::Span::current().record("request_id", tracing::field::display(shown));
}

/// What admitting a request holds while it is served: a place among `maxInFlight` and one
/// among its user's `maxInFlightPerUser`.
/// A request's admission: its permit, and its slot among its user's requests (none for a
/// `changes` long poll, which waits rather than works).
type Admitted = (tokio::sync::OwnedSemaphorePermit, Option<super::per_user::Slot>);

/// Admits a request of `user` within `maxInFlightPerUser` ([`super::per_user`]) and
/// `maxInFlight`; the refusal's message otherwise.
///
/// A `changes` long poll is admitted within [`super::MAX_WATCHERS`] instead: it holds no work
/// while it waits, and must not keep submits out.
fn admit(co: &Arc<Coordinator>, op: CoordinatorOp, user: &str) -> Result<Admitted, String> {
    if op == CoordinatorOp::Changes {
        return match co.watchers.clone().try_acquire_owned() {
            Ok(permit) => Ok((permit, None)),
            Err(_) => {
                let limit = super::MAX_WATCHERS;
                tracing::warn!(limit, "overloaded: watch refused");
                Err(format!(
                    "{limit} watches are waiting on this coordinator, its limit: ask again later"
                ))
            }
        };
    }
    let per_user = co.cfg.max_in_flight_per_user;
    let Some(slot) = co.per_user.admit(user, per_user) else {
        tracing::debug!(
            user,
            limit = per_user,
            "overloaded: a user's request refused (maxInFlightPerUser)"
        );
        return Err(super::per_user::refusal(user, per_user));
    };
    match co.admission.clone().try_acquire_owned() {
        Ok(permit) => Ok((permit, Some(slot))),
        Err(_) => {
            let limit = co.cfg.max_in_flight;
            tracing::warn!(limit, "overloaded: request refused");
            Err(format!(
                "{limit} requests are in progress, this coordinator's limit (maxInFlight): ask again later"
            ))
        }
    }
}

/// Answers request `m` of operation `op` with `overloaded` and `message`, reading nothing of
/// its body.
async fn refuse(co: &Coordinator, op: CoordinatorOp, m: Message, message: String) {
    let f = Failure::new(fedvol_proto::Code::Overloaded, message);
    let body = match op {
        CoordinatorOp::Submit => api::Submit::encode_failure(&f),
        CoordinatorOp::Complete => api::Complete::encode_failure(&f),
        CoordinatorOp::Get => api::Get::encode_failure(&f),
        CoordinatorOp::Replay => api::Replay::encode_failure(&f),
        CoordinatorOp::WhyNot => api::WhyNot::encode_failure(&f),
        CoordinatorOp::Clusters => api::Clusters::encode_failure(&f),
        CoordinatorOp::List => api::List::encode_failure(&f),
        CoordinatorOp::Cluster => api::Cluster::encode_failure(&f),
        CoordinatorOp::Changes => api::Changes::encode_failure(&f),
    };
    if let Some(reply) = m.reply
        && let Err(e) = co.client.publish(reply, body).await
    {
        tracing::warn!(error = %e, "the answer could not be sent");
    }
}

/// Answers one request of operation `op` (in a `request` span naming the operation, the user
/// and, once known, the request id).
async fn handle(co: Arc<Coordinator>, op: CoordinatorOp, m: Message, admitted: Result<Admitted, String>) {
    let started = std::time::Instant::now();
    let connection = connects(&co.client);
    let user = user_of(&m);
    let span = tracing::info_span!("request", op = %op.name(), user = %fedvol_common::limits::printable(&user), request_id = tracing::field::Empty);
    async move {
        // What the handlers borrow (references are copied into their `async move` blocks).
        let (c, u) = (&co, user.as_str());
        let _admitted = match admitted {
            Ok(a) => a,
            Err(message) => {
                co.metrics.request(op.name(), Outcome::Overloaded, started.elapsed());
                refuse(&co, op, m, message).await;
                return;
            }
        };
        // What the handler returned, if it ran; and whether a submit's reply carried an error.
        let ran = AtomicU8::new(NOT_RUN);
        let submit_failed = std::sync::atomic::AtomicBool::new(false);
        let (r, failed) = (&ran, &submit_failed);
        let body = match op {
            CoordinatorOp::Submit => {
                serve::<api::Submit, _, _>(&co, &user, &m.payload, r, |req| {
                    let co = co.clone();
                    let user = user.clone();
                    async move {
                        // submit records the request id (given or generated) itself.
                        let reply = submit(co.clone(), &user, req).await;
                        if let Some(e) = &reply.error {
                            failed.store(true, Ordering::Relaxed);
                            tracing::warn!(code = %e.code, error = %fedvol_common::limits::printable(&e.message), "submit answered with an error");
                        }
                        if let Some(stored) = &reply.stored {
                            co.metrics.decision(stored.state.as_str());
                        }
                        Some(Ok(reply))
                    }
                })
                .await
            }
            CoordinatorOp::Complete => {
                serve::<api::Complete, _, _>(&co, &user, &m.payload, r, |q| async move {
                    record_id(&q.request_id);
                    Some(Ok(op_handlers::complete(c, &q, u).await))
                })
                .await
            }
            CoordinatorOp::Get => {
                serve::<api::Get, _, _>(&co, &user, &m.payload, r, |q| async move {
                    record_id(&q.request_id);
                    Some(Ok(op_handlers::get(c, &q).await))
                })
                .await
            }
            CoordinatorOp::Replay => {
                serve::<api::Replay, _, _>(&co, &user, &m.payload, r, |q| async move {
                    record_id(&q.request_id);
                    Some(op_handlers::replay(c, &q).await)
                })
                .await
            }
            CoordinatorOp::WhyNot => {
                serve::<api::WhyNot, _, _>(&co, &user, &m.payload, r, |q| async move {
                    record_id(&q.request_id);
                    Some(op_handlers::why_not(c, &q).await)
                })
                .await
            }
            CoordinatorOp::Clusters => {
                serve::<api::Clusters, _, _>(&co, &user, &m.payload, r, |_| async {
                    Some(Ok(op_handlers::clusters(&co)))
                })
                .await
            }
            CoordinatorOp::List => {
                serve::<api::List, _, _>(&co, &user, &m.payload, r, |_| async {
                    Some(super::changes::list(&co).await)
                })
                .await
            }
            CoordinatorOp::Changes => {
                serve::<api::Changes, _, _>(&co, &user, &m.payload, r, |q| async move {
                    Some(Ok(super::changes::changes(c, &q).await))
                })
                .await
            }
            CoordinatorOp::Cluster => {
                serve::<api::Cluster, _, _>(&co, &user, &m.payload, r, |q| async move {
                    Some(op_handlers::cluster(c, &q).await)
                })
                .await
            }
        };
        let outcome = match (ran.load(Ordering::Relaxed), &body) {
            (NOT_RUN, Some(_)) => Outcome::BadRequest,
            (NOT_RUN, None) => Outcome::Dropped,
            _ if submit_failed.load(Ordering::Relaxed) => Outcome::Error,
            (seen, _) => Outcome::ALL.get(usize::from(seen)).copied().unwrap_or(Outcome::Ok),
        };
        co.metrics.request(op.name(), outcome, started.elapsed());
        match (body, m.reply) {
            // A `changes` long poll that came on an earlier connection (the server restarted
            // or the link broke while it waited): under `allow_responses` the server lets a
            // reply go only to a request it delivered on this connection (NATS docs:
            // Authorization, allow_responses), so the answer would be refused, and the CLI
            // asks again after its own reconnect anyway. Other answers are still sent: without
            // reply permissions they reach a requester whose inbox came back with it.
            (Some(_), Some(_)) if op == CoordinatorOp::Changes && connects(&co.client) != connection => {
                tracing::debug!("answer dropped: the request came on an earlier NATS connection")
            }
            (Some(body), Some(reply)) => {
                if let Err(e) = co.client.publish(reply, body).await {
                    tracing::warn!(error = %e, "the answer could not be sent");
                }
            }
            (Some(_), None) => tracing::debug!("request without a reply subject: answered to nobody"),
            (None, _) => {}
        }
    }
    .instrument(span)
    .await
}

/// The handler of a request did not run (see `serve`).
const NOT_RUN: u8 = u8::MAX;

/// Answers one request of endpoint `E` ([`fedvol_proto::serve::answer`]), after refusing a
/// user token that is not a valid user name (`bad_request`, the body unread). When the
/// handler runs, `ran` is set to the [`Outcome`] (as `u8`) of what it returned.
async fn serve<E, F, Fut>(co: &Coordinator, user: &str, payload: &[u8], ran: &AtomicU8, handler: F) -> Option<Bytes>
where
    E: Endpoint,
    F: FnOnce(E::Request) -> Fut,
    Fut: std::future::Future<Output = Option<Result<E::Reply, Failure>>>,
{
    if let Err(e) = fedvol_common::limits::check_user(user) {
        tracing::warn!(error = %e, "request refused unread");
        return Some(E::encode_failure(&Failure::bad_request(e.to_string())));
    }
    let server = Server {
        speaker: "coordinator",
        cluster: None,
        max_body_bytes: co.cfg.max_body_bytes,
        max_payload: co.client.max_payload(),
        too_large_hint: "the decision is stored: read it with `fedvol decisions watch`, or raise max_payload",
    };
    answer::<E, _, _>(&server, payload, |req| {
        let work = handler(req);
        async move {
            let result = work.await;
            let seen = Outcome::of_answer(&result);
            ran.store(seen as u8, Ordering::Relaxed);
            result
        }
    })
    .await
}
