//! Starting and running an agent: load and validate the inventory, open the state file,
//! connect, serve, heartbeat, sweep lapsed holds, and reload the inventory on SIGHUP or when
//! the file changes (a bad file is logged with its errors and the old inventory keeps serving).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fedvol_proto::agent::Heartbeat;
use fedvol_proto::{Subjects, now_ms};

use crate::config::{AgentConfig, InventorySource, StateStore};
use crate::drivers::Drivers;
use crate::restore_gate::RestoreGate;
use crate::service::serve;
use crate::shared::{Shared, lock};
pub use crate::start::{StartError, check_cluster, load_checked};
use crate::state::Core;
use crate::state::backend::Store;
use crate::state::ledger::Ledger;

fn mtime(p: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Re-reads the inventory; on success swaps it in, on failure logs every error and keeps the
/// old one. Returns true when the served inventory changed. Counted in
/// `fedvol_agent_inventory_reloads_total{outcome}` (applied, unchanged, refused).
pub fn reload(cfg: &AgentConfig, shared: &Shared) -> bool {
    match load_checked(cfg) {
        Ok(inv) => {
            let mut core = lock(shared);
            if inv.version == core.inventory_version() {
                shared.metrics.reload("unchanged");
                return false;
            }
            let old = core.inventory_version().to_string();
            let new = inv.version.clone();
            core.replace_inventory(inv);
            shared.metrics.reload("applied");
            tracing::info!(old_version = %old, new_version = %new, "inventory reloaded");
            true
        }
        Err(e) => {
            shared.metrics.reload("refused");
            tracing::error!(error = %e, "inventory reload refused; the previous inventory keeps serving");
            false
        }
    }
}

/// Watches the state file: deleted or replaced while the agent runs, its commits
/// would vanish at the next restart. Once a second it checks the file is still the one opened;
/// when it is not, the agent writes what it holds in memory to a new file at the same path
/// (with the same identity) and exits (75) so that its supervisor restarts it on that file.
fn watch_state_file(shared: Arc<Shared>, path: std::path::PathBuf, identity: crate::state::store::Identity) {
    use std::os::unix::fs::MetadataExt;
    let Ok(opened) = std::fs::metadata(&path).map(|m| (m.dev(), m.ino())) else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let now = std::fs::metadata(&path).map(|m| (m.dev(), m.ino())).ok();
            if now == Some(opened) {
                continue;
            }
            tracing::error!(state = %path.display(), "the state file was deleted or replaced while the agent ran");
            let snapshot = lock(&shared).snapshot_state();
            if now.is_some() {
                let aside = path.with_extension("redb.replaced");
                let _ = std::fs::rename(&path, &aside);
                tracing::error!(moved_to = %aside.display(), "the file found in its place was set aside");
            }
            match crate::state::store::RedbStore::create_from(&path, &snapshot, &identity) {
                Ok(()) => tracing::warn!(
                    state = %path.display(),
                    holds = snapshot.holds.len(),
                    commits = snapshot.commits.len(),
                    "the state held in memory was written to a new state file"
                ),
                Err(e) => tracing::error!(error = %e, "the state could not be saved again"),
            }
            crate::shared::store_failed(&"the state file was deleted or replaced while the agent ran");
        }
    });
}

/// Rolls back every commit the agent was running when it stopped: the durable
/// `committing` mark says assets may have been created with no record. Slurm jobs it may have
/// submitted are cancelled by name; each new volume's asset
/// is deleted (names are deterministic, deleting a missing asset succeeds), then the hold is
/// unmarked; its coordinator settles the attempt (a release probe now finds it released), or
/// commits it again. Runs before serving, so no request can see the half-done commit.
async fn roll_back_interrupted(shared: &Arc<Shared>) {
    let interrupted = lock(shared).interrupted();
    for (id, work) in interrupted {
        // Jobs the commit may have submitted before it stopped are cancelled by their names
        // (`fedvol.<request id>.<job>`): their volumes are about to go.
        if let Some(slurm) = &shared.batch {
            let (jobs, user): (Vec<String>, Option<String>) = {
                let core = lock(shared);
                (
                    core.held_decision(&id)
                        .map(|d| d.jobs.keys().cloned().collect())
                        .unwrap_or_default(),
                    core.held_user(&id),
                )
            };
            let runner = shared.runner.as_deref();
            let account = user.and_then(|u| runner.and_then(|r| r.resolve(&u).ok()));
            crate::slurm::follow::cancel_by_name(slurm, runner, account.as_ref().map(|a| a.name.as_str()), &id, &jobs)
                .await;
        }
        let mut deleted = 0;
        for w in &work {
            let r = shared
                .drivers
                .delete(&w.provisioner, &w.volume.name, None, &id, now_ms() + 30_000)
                .await;
            match r {
                Ok(_) => deleted += 1,
                Err(e) => tracing::error!(
                    request_id = %id,
                    volume = %w.volume.name,
                    error = %e,
                    "an asset of an interrupted commit could not be deleted; delete it by hand"
                ),
            }
        }
        match lock(shared).finish_interrupted(&id) {
            Ok(()) => {
                tracing::warn!(request_id = %id, volumes = work.len(), deleted, "an interrupted commit was rolled back")
            }
            Err(e) => crate::shared::store_failed(&e),
        }
    }
    if let Err(e) = crate::shared::sync(shared).await {
        tracing::error!(error = %e, "the rollback of interrupted commits is not known durable");
    }
}

/// What the metrics server reads: counted metrics, readiness, and the collectors given the
/// connection and the state once they exist. Without `metricsListen` nothing listens, and the
/// same handles count into nothing anyone reads.
#[derive(Default)]
struct Obs {
    metrics: crate::metrics::AgentMetrics,
    readiness: fedvol_obs::Readiness,
    nats: fedvol_obs::NatsCollector,
    state: crate::scrape::StateCollector,
}

/// Starts the metrics server when `metricsListen` is set, its series labelled `cluster`.
///
/// Errors: the address cannot be bound.
async fn start_obs(cfg: &AgentConfig, cluster: &str) -> Result<Obs, StartError> {
    let obs = Obs::default();
    if let Some(addr) = cfg.daemon.metrics_listen {
        let mut registry =
            fedvol_obs::Registry::with_labels("agent", env!("CARGO_PKG_VERSION"), &[("cluster", cluster.to_string())]);
        obs.metrics.register(&mut registry);
        registry.register_collector(obs.nats.clone());
        registry.register_collector(obs.state.clone());
        fedvol_obs::serve(addr, Arc::new(registry), obs.readiness.clone()).await?;
    }
    Ok(obs)
}

/// Creates `dir` (the data directory) readable by the agent's account alone (0700), and takes
/// group and other rights away from an existing one the agent owns: the state file holds
/// every user's workflows, and a job must not read or write it.
///
/// Errors: the directory cannot be created, one sentence.
fn private_dir(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    if let Ok(m) = std::fs::metadata(dir)
        && m.uid() == nix::unistd::geteuid().as_raw()
        && m.permissions().mode() & 0o077 != 0
    {
        match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
            Ok(()) => tracing::warn!(dir = %dir.display(), "the data directory was open to others: made 0700"),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the data directory is open to others and could not be made 0700")
            }
        }
    }
    Ok(())
}

/// Makes `file` (the state file) readable by its owner alone (0600), best effort.
fn private_file(file: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)) {
        tracing::warn!(file = %file.display(), error = %e, "the state file could not be made 0600");
    }
}

/// Who the jobs of a cluster that runs them (`slurm.jobs`) run as: the user map read, the
/// grant set up. `None` without `slurm.jobs`.
///
/// Errors: the user map cannot be read.
fn job_runner(cfg: &AgentConfig, cluster: &str) -> Result<Option<Arc<crate::slurm::identity::Runner>>, StartError> {
    let InventorySource::Slurm(slurm) = &cfg.source else {
        return Ok(None);
    };
    let Some(jobs) = &slurm.jobs else { return Ok(None) };
    let r = crate::slurm::identity::Runner::new(cluster, jobs, slurm.slurm_conf.as_deref())
        .map_err(|e| StartError::Config(vec![e]))?;
    tracing::info!(
        user_map = %r.map.file.as_ref().map_or_else(|| "none: each user runs as the account of the same name".to_string(), |f| f.display().to_string()),
        mapped = r.map.entries.len(),
        min_uid = r.min_uid,
        sudo = %r.grant.sudo.display(),
        "jobs run as their users' accounts, through sudo"
    );
    Ok(Some(Arc::new(r)))
}

/// Runs the agent until the process is stopped.
///
/// Errors: any [`StartError`] before serving begins.
pub async fn run(cfg: AgentConfig) -> Result<(), StartError> {
    cfg.validate().map_err(StartError::Config)?;
    cfg.daemon.log_warnings();
    let (inv, live) = match &cfg.source {
        InventorySource::Files => (load_checked(&cfg)?, None),
        InventorySource::Slurm(slurm) => {
            let (live, inv) = crate::slurm::source::Live::start(&cfg, slurm).await?;
            (inv, Some(live))
        }
    };
    let cluster = inv.cluster.clone();
    let subjects = Subjects::new(&cfg.daemon.subject_prefix);
    let obs = start_obs(&cfg, &cluster).await?;
    obs.readiness.starting("connecting to NATS");
    let readiness = obs.readiness.clone();
    let client = fedvol_proto::nats::connect_patiently(
        &format!("fedvol-agent {cluster}"),
        &cfg.daemon.nats,
        Default::default(),
        |e| readiness.starting(format!("connecting to NATS (retrying): {e}")),
    )
    .await
    .map_err(|e| StartError::Nats(e.to_string()))?;
    obs.nats.set(client.clone());
    let instance = format!("{}-{}", cluster, std::process::id());
    let (store, snapshot, state_file, stop) = match cfg.state_store {
        StateStore::Redb => {
            obs.readiness.starting("opening the state file");
            private_dir(&cfg.data_dir).map_err(StartError::State)?;
            let state_path = cfg.data_dir.join("state.redb");
            let (store, snapshot, identity) =
                Store::open_checked(&state_path, &cluster, cfg.init).map_err(|e| StartError::State(e.to_string()))?;
            private_file(&state_path);
            tracing::info!(state = %state_path.display(), generation = %identity.generation, "state file open");
            (store, snapshot, Some((state_path, identity)), None)
        }
        StateStore::Jetstream => {
            obs.readiness.starting("standby: waiting for the cluster's lease");
            let (store, snapshot, stop) = replica::take_over(&client, &cfg, &cluster, &instance).await?;
            (store, snapshot, None, Some(stop))
        }
    };
    tracing::info!(
        cluster = %cluster,
        holds = snapshot.holds.len(),
        commits = snapshot.commits.len(),
        volumes = snapshot.volumes.len(),
        "state loaded"
    );
    let mut core = Core::new(&cluster, inv, store, Ledger::from_snapshot(snapshot), cfg.hold_ttl_ms);
    core.set_source(live.as_ref().map(|l| l.status()));
    let runner = job_runner(&cfg, &cluster)?;
    core.set_runner(runner.clone().map(|r| r as Arc<dyn crate::state::core::JobRunner>));
    let mut drivers = Drivers::new(Some(client.clone()), &cluster, subjects.clone(), Default::default());
    if let Some(r) = &runner {
        drivers = drivers.with_grant(r.grant.clone());
    }
    if let Some(root) = &cfg.storage_root {
        tracing::warn!(root = %root.display(), "development sandbox: every volume is a directory under this root");
        drivers = drivers.with_storage_root(root.clone());
    }
    let gate = match &state_file {
        Some((_, identity)) => RestoreGate::new(&identity.generation, identity.pending_restore),
        None => RestoreGate::open(),
    };
    let shared = Arc::new(
        Shared::new(
            core,
            drivers,
            &cluster,
            cfg.daemon.max_body_bytes,
            cfg.daemon.max_in_flight,
        )
        .with_obs(obs.metrics.clone(), obs.readiness.clone())
        .with_restore_gate(gate)
        .with_batch(
            match &cfg.source {
                InventorySource::Slurm(s) => Some(s),
                InventorySource::Files => None,
            },
            runner,
        ),
    );
    if shared.restore.closed() {
        tracing::warn!(
            generation = %shared.restore.generation(),
            wait_ms = cfg.restore_wait_ms,
            "fresh state: no new commit is admitted until the coordinators restore the commits they stored for this cluster"
        );
        let (shared, wait) = (shared.clone(), cfg.restore_wait_ms);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            if shared.restore.give_up_waiting() {
                tracing::error!(
                    wait_ms = wait,
                    "no coordinator restored this cluster's commits within restoreWaitMs (is a coordinator running?): admitting new commits now; a commit restored later may find its capacity taken"
                );
            }
        });
    }
    obs.state.set(&shared);

    // Heartbeat and sweep.
    {
        let (client, shared, subjects) = (client.clone(), shared.clone(), subjects.clone());
        let interval = cfg.heartbeat_ms;
        let generation = state_file
            .as_ref()
            .map(|(_, identity)| identity.generation.clone())
            .unwrap_or_default();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(interval));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    // Served, or restored: said at once (`RestoreGate::serving`).
                    _ = shared.restore.heartbeat_due() => {}
                }
                let (version, holds, load, degraded) = {
                    let mut core = lock(&shared);
                    match core.sweep(now_ms()) {
                        Ok(gone) if !gone.is_empty() => tracing::info!(expired = ?gone, "holds expired"),
                        Ok(_) => {}
                        Err(e) => crate::shared::store_failed(&e),
                    }
                    (
                        core.inventory_version().to_string(),
                        core.hold_count(),
                        core.load(),
                        core.degraded(),
                    )
                };
                let hb = Heartbeat {
                    cluster: shared.cluster.clone(),
                    instance: instance.clone(),
                    inventory_version: version,
                    holds,
                    load,
                    sent_ms: now_ms(),
                    interval_ms: interval,
                    state_generation: generation.clone(),
                    degraded,
                    restoring: shared.restore.pending(),
                };
                let body = fedvol_proto::encode(&hb);
                if let Err(e) = client.publish(subjects.heartbeat(&shared.cluster), body).await {
                    tracing::warn!(error = %e, "heartbeat not sent");
                }
            }
        });
    }

    // Reload on SIGHUP and on file change; with Slurm, also read it on its interval.
    if let Some(live) = live {
        crate::slurm::source::spawn(live, shared.clone());
        crate::slurm::follow::spawn(shared.clone());
    } else {
        let (cfg, shared) = (cfg.clone(), shared.clone());
        tokio::spawn(async move {
            let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGHUP; reload only on file change");
                    None
                }
            };
            let poll = Duration::from_millis(if cfg.reload_poll_ms == 0 {
                3_600_000
            } else {
                cfg.reload_poll_ms
            });
            let mut seen = mtime(&cfg.inventory);
            loop {
                let hup_fired = async {
                    match hup.as_mut() {
                        Some(h) => h.recv().await.is_some(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    fired = hup_fired => {
                        if fired {
                            tracing::info!("SIGHUP: reloading the inventory");
                            reload(&cfg, &shared);
                        }
                    }
                    _ = tokio::time::sleep(poll), if cfg.reload_poll_ms > 0 => {
                        let now = mtime(&cfg.inventory);
                        if now != seen {
                            seen = now;
                            tracing::info!("inventory file changed: reloading");
                            reload(&cfg, &shared);
                        }
                    }
                }
            }
        });
    }

    if let Some((path, identity)) = state_file {
        watch_state_file(shared.clone(), path, identity);
    }
    obs.readiness.starting("rolling back interrupted commits");
    roll_back_interrupted(&shared).await;
    obs.readiness.starting("subscribing its endpoints");
    tracing::info!(cluster = %cluster, nats = %fedvol_proto::nats::redact_url(&cfg.daemon.nats.url), "agent starting its service");
    let served = serve(client, &subjects, shared);
    match stop {
        None => served
            .await
            .map_err(|e| StartError::Nats(format!("service stopped: {e}"))),
        Some(mut stop) => tokio::select! {
            r = served => r.map_err(|e| StartError::Nats(format!("service stopped: {e}"))),
            why = stop.recv() => Err(StartError::SteppedDown(why.unwrap_or_else(|| "the lease task ended".into()))),
        },
    }
}

/// Start-up of a replica whose state is the cluster's JetStream stream
/// ([`crate::state::replicated`]).
mod replica {
    use std::time::Duration;

    use async_nats::jetstream;

    use super::StartError;
    use crate::config::AgentConfig;
    use crate::state::backend::Store;
    use crate::state::replicated::{Lease, StreamStore, claim, open_stream, replay};
    use crate::state::store::Snapshot;

    /// Waits (as a standby) until this replica holds the cluster's lease, then replays the state
    /// stream and claims it. Returns the store, the state, and a channel that says why this
    /// replica must stop serving (lease lost, or fenced by another replica).
    ///
    /// Errors: JetStream is not enabled or refuses the stream or the bucket.
    pub async fn take_over(
        client: &async_nats::Client,
        cfg: &AgentConfig,
        cluster: &str,
        instance: &str,
    ) -> Result<(Store, Snapshot, tokio::sync::mpsc::Receiver<String>), StartError> {
        let js = jetstream::new(client.clone());
        let every = Duration::from_millis(cfg.heartbeat_ms);
        let state = |e: crate::state::store::StoreError| StartError::State(e.to_string());
        let lease = Lease::open(&js, cluster, instance, every * 3, cfg.state_replicas)
            .await
            .map_err(state)?;
        let mut announced = false;
        loop {
            match lease.take_or_renew().await {
                Ok(true) => break,
                Ok(false) if !announced => {
                    tracing::info!(cluster, instance, "standby: another replica serves this cluster");
                    announced = true;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "the lease could not be read or written"),
            }
            tokio::time::sleep(every).await;
        }
        let mut stream = open_stream(&js, cluster, cfg.state_replicas).await.map_err(state)?;
        let (snapshot, claimed) = loop {
            let (snapshot, last) = replay(&mut stream, cluster).await.map_err(state)?;
            match claim(&js, cluster, instance, last).await {
                Ok(seq) => break (snapshot, seq),
                Err(e) => {
                    tracing::warn!(error = %e, "the state stream moved while it was replayed; again");
                    tokio::time::sleep(every).await;
                }
            }
        };
        tracing::info!(
            cluster,
            instance,
            sequence = claimed,
            "lease taken: this replica serves the cluster"
        );
        let store = StreamStore::start(js, stream, cluster, snapshot.clone(), claimed);
        let (stop_tx, stop) = tokio::sync::mpsc::channel(1);
        let mut fenced = store.fenced();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        match lease.take_or_renew().await {
                            Ok(true) => {}
                            Ok(false) => {
                                let _ = stop_tx.send("another replica holds the cluster's lease".to_string()).await;
                                return;
                            }
                            Err(e) => tracing::warn!(error = %e, "the lease could not be renewed"),
                        }
                    }
                    changed = fenced.changed() => {
                        let why = match changed {
                            Ok(()) => fenced.borrow().clone().unwrap_or_default(),
                            Err(_) => "the state publisher stopped".to_string(),
                        };
                        let _ = stop_tx.send(why).await;
                        return;
                    }
                }
            }
        });
        Ok((Store::Stream(store), snapshot, stop))
    }
}
