//! Starting and running a coordinator: check the configuration, read the directory, connect,
//! open (creating if needed) the decision bucket, follow heartbeats, discover the agents that
//! are already up, then serve `<prefix>.coordinator.<op>.*` (and the operators'
//! `<prefix>.operator.<op>.*`) in queue group `coordinator`.
//!
//! Every request runs in its own task under a `request` span carrying the operation, the user
//! (the subject's last token) and the request id, so every log line names them. SIGHUP
//! re-reads the directory (a bad file is logged and the old one kept).

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;

use fedvol_proto::agent::Heartbeat;
use fedvol_proto::coordinator::CoordinatorOp;
use fedvol_proto::{Subjects, now_ms};

use super::Coordinator;
use super::config::CoordinatorConfig;
use super::directory::Directory;
use super::discovery::discover;
use super::registry::Registry;
use super::serving::{admit, handle, user_of};
use super::store::DecisionStore;

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
    if let Some(addr) = cfg.daemon.metrics_listen {
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

/// The connection the decision bucket is reached over: a second one, logged in as
/// `kv.nats`'s identity, when the configuration gives one ([`super::config::KvConfig::login`]:
/// the bucket's watches must not be delivered to an identity with `allow_responses`); else
/// `client`.
///
/// Errors: the bucket's login is refused, or its credentials cannot be read.
async fn bucket_connection(
    cfg: &CoordinatorConfig,
    client: &async_nats::Client,
    readiness: &fedvol_obs::Readiness,
) -> Result<async_nats::Client, StartError> {
    let Some(auth) = cfg.kv.auth(&cfg.daemon.nats) else {
        return Ok(client.clone());
    };
    let who = auth.user.clone().unwrap_or_else(|| "its credentials".into());
    fedvol_proto::nats::connect_patiently("fedvol-coordinator-kv", &auth, Default::default(), |e| {
        readiness.starting(format!(
            "connecting the decision bucket's login to NATS (retrying): {e}"
        ))
    })
    .await
    .map_err(|e| StartError::Nats(format!("the decision bucket's NATS login (kv.nats, {who}): {e}")))
}

/// Runs the coordinator until SIGINT or SIGTERM.
///
/// Errors: any [`StartError`] before serving begins, or a subscription that fails.
pub async fn run(cfg: CoordinatorConfig) -> Result<(), StartError> {
    cfg.validate().map_err(StartError::Config)?;
    cfg.daemon.log_warnings();
    let directory = load_directory(&cfg)?;
    match &directory {
        Some(d) => tracing::info!(users = d.len(), "directory loaded: groups come from it"),
        None => tracing::warn!(
            "no directory configured: DEV MODE, the groups clients claim are trusted; configure `directory:` in production"
        ),
    }
    let obs = start_obs(&cfg).await?;
    obs.readiness.starting("connecting to NATS");
    let readiness = obs.readiness.clone();
    let client =
        fedvol_proto::nats::connect_patiently("fedvol-coordinator", &cfg.daemon.nats, Default::default(), |e| {
            readiness.starting(format!("connecting to NATS (retrying): {e}"))
        })
        .await
        .map_err(|e| StartError::Nats(e.to_string()))?;
    obs.nats.set(client.clone());
    obs.readiness.starting("opening the decision bucket");
    let bucket_client = bucket_connection(&cfg, &client, &obs.readiness).await?;
    let js = async_nats::jetstream::new(bucket_client.clone());
    let store = DecisionStore::open(&js, &cfg.kv)
        .await
        .map_err(|e| {
            StartError::Store(match cfg.kv.login {
                Some(_) => e.to_string(),
                None => format!(
                    "{e}; without `kv.nats` the bucket is reached as the NATS user of `nats:`, which under the shipped deploy/nats files has no JetStream rights: give the bucket's own login (kv.nats, --kv-nats-user coordinator-kv)"
                ),
            })
        })?
        .with_metrics(obs.metrics.kv.clone());
    tracing::info!(
        bucket = %cfg.kv.bucket,
        history = cfg.kv.history,
        replicas = cfg.kv.replicas,
        login = cfg.kv.login.as_ref().and_then(|l| l.user.as_deref()).unwrap_or("the coordinator's"),
        "decision store open"
    );
    let co = Arc::new(Coordinator {
        client: client.clone(),
        subjects: Subjects::new(&cfg.daemon.subject_prefix),
        cfg: cfg.clone(),
        store,
        registry: Mutex::new(Registry::new()),
        directory: RwLock::new(directory),
        admission: Arc::new(tokio::sync::Semaphore::new(cfg.daemon.max_in_flight)),
        per_user: Arc::default(),
        replies: super::replies::Replies::new(&client),
        metrics: obs.metrics.clone(),
        index: Arc::new(super::index::DecisionIndex::new()),
        watchers: Arc::new(super::watchers::WatchPool::new(super::MAX_WATCHERS)),
        reads: super::per_user::ReadBudget::new(cfg.read_bytes_per_second_per_user),
        log_throttle: fedvol_obs::throttle::Throttle::new(super::LOG_EVERY),
        listing: tokio::sync::Semaphore::new(1),
        restore_due: tokio::sync::Notify::new(),
        drains: super::drains::DrainTable::new(),
        completing: Mutex::default(),
    });
    // The drains in force before the first choice (the index's watch keeps them current).
    obs.readiness.starting("reading the drained clusters");
    let drained = co
        .drains
        .load(&co.store)
        .await
        .map_err(|e| StartError::Store(e.to_string()))?;
    if drained > 0 {
        tracing::info!(drained = ?co.drains.all().keys().collect::<Vec<_>>(), "drained clusters: never chosen for new work");
    }
    if co.cfg.operators.is_empty() {
        tracing::info!(
            "no operators configured (`operators:`, --operator): nobody may drain or undrain clusters through this coordinator"
        );
    }
    super::index::spawn(co.clone());
    super::serving::spawn_quiet_summaries(co.clone());
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
        prefix = %cfg.daemon.subject_prefix,
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
    fedvol_obs::daemon::stop_signal().await;
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
                Ok(hb) => {
                    co.registry().heartbeat(&hb, now_ms());
                    // A fresh agent admits nothing until it is restored: the reconciler's
                    // holder restores it now rather than at its next tick.
                    if hb.restoring {
                        co.restore_due.notify_one();
                    }
                }
                Err(e) => tracing::debug!(subject = %m.subject, error = %e, "unreadable heartbeat ignored"),
            }
        }
    });
    Ok(())
}
