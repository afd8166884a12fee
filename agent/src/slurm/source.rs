//! The live inventory of an agent reading Slurm: the inventory file's provisioners, volumes
//! and projects combined with the zones and hosts of the last good reading of Slurm, under one
//! version that changes exactly when either changes. Refreshed every `refreshMs`, at once on
//! SIGHUP, and when the file changes. A reading that fails keeps the last good zones serving,
//! marks the source's status (and so heartbeats) degraded, and is logged.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fedvol_common::model::{Inventory, Zone};
use fedvol_formats::load_inventory_without_zones;
use fedvol_proto::agent::SourceStatus;
use fedvol_proto::now_ms;
use sha2::{Digest, Sha256};

use super::SlurmConfig;
use super::runner;
use crate::config::AgentConfig;
use crate::shared::{Shared, lock};
use crate::start::StartError;

/// Failed readings between two log lines while Slurm stays unreadable (the first failure and
/// the recovery are always logged).
const LOG_EVERY_FAILURES: u64 = 30;

/// The file's part and the last good reading, and how the source is doing.
#[derive(Debug)]
pub struct Live {
    cfg: AgentConfig,
    slurm: SlurmConfig,
    file: Inventory,
    zones: Vec<Zone>,
    status: SourceStatus,
    /// The notes and dangling references last logged, so each is logged once per change.
    logged: Vec<String>,
}

/// Loads the inventory file of an agent whose zones come from Slurm (no `zones:`; zone and
/// host references unchecked), and checks its cluster against the configuration's.
///
/// Errors: every problem of the file; a cluster name other than the configuration's.
pub fn load_file(cfg: &AgentConfig) -> Result<Inventory, StartError> {
    let loaded = load_inventory_without_zones(&cfg.inventory, "Slurm").map_err(|d| StartError::Inventory {
        path: cfg.inventory.display().to_string(),
        diagnostics: d,
    })?;
    for n in &loaded.notices {
        tracing::info!(notice = %n, "inventory notice");
    }
    crate::start::check_cluster(cfg, loaded.value)
}

/// The inventory to serve: `file`'s provisioners, volumes and projects with `zones`. Its
/// version is the first 16 hex digits of SHA-256 over the file's version and the zones as JSON,
/// so it changes when either does, and only then.
pub fn combine(file: &Inventory, zones: Vec<Zone>) -> Inventory {
    let mut h = Sha256::new();
    h.update(file.version.as_bytes());
    h.update(b"\nslurm\n");
    h.update(serde_json::to_vec(&zones).unwrap_or_default());
    let version = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    Inventory {
        cluster: file.cluster.clone(),
        provisioners: file.provisioners.clone(),
        volumes: file.volumes.clone(),
        projects: file.projects.clone(),
        zones,
        version,
    }
}

/// References of the file to zones Slurm does not have (project zone assignments, provisioner
/// `zones`), one sentence each: they match nothing until the partition exists.
pub fn dangling(inv: &Inventory) -> Vec<String> {
    let known = |z: &str| inv.zones.iter().any(|x| x.name == z);
    let mut out = Vec::new();
    for p in &inv.projects {
        for a in p.zones.iter().filter(|a| !known(&a.zone)) {
            out.push(format!(
                "project {} is assigned zone {}, which is no Slurm partition",
                p.name, a.zone
            ));
        }
    }
    for p in &inv.provisioners {
        for z in p.reachability.zones.iter().filter(|z| !known(z)) {
            out.push(format!(
                "provisioner {} is reachable from zone {z}, which is no Slurm partition",
                p.name
            ));
        }
    }
    out
}

impl Live {
    /// Loads the file and reads Slurm once. Slurm unreadable at start is no error: the agent
    /// serves no zones (degraded) until a reading works.
    ///
    /// Errors: the file's problems.
    pub async fn start(cfg: &AgentConfig, slurm: &SlurmConfig) -> Result<(Live, Inventory), StartError> {
        let file = load_file(cfg)?;
        let mut live = Live {
            cfg: cfg.clone(),
            slurm: slurm.clone(),
            file,
            zones: Vec::new(),
            status: SourceStatus {
                source: "slurm".to_string(),
                read_ms: 0,
                failures: 0,
                error: None,
            },
            logged: Vec::new(),
        };
        let inv = live.refresh().await;
        Ok((live, inv))
    }

    /// The source's status (for the agent's status and heartbeats).
    pub fn status(&self) -> SourceStatus {
        self.status.clone()
    }

    /// Reads Slurm; on success its zones replace the last good ones. Returns the inventory to
    /// serve either way.
    pub async fn refresh(&mut self) -> Inventory {
        match runner::read(&self.slurm).await {
            Ok(out) => {
                let mapped = super::interpret(&out, &self.slurm);
                if self.status.error.is_some() {
                    tracing::info!(
                        failures = self.status.failures,
                        "Slurm answers again: serving its current zones and hosts"
                    );
                }
                self.status.read_ms = now_ms();
                self.status.failures = 0;
                self.status.error = None;
                self.zones = mapped.zones;
                let inv = combine(&self.file, self.zones.clone());
                let mut notes = mapped.notes;
                notes.extend(dangling(&inv));
                if notes != self.logged {
                    for n in &notes {
                        tracing::warn!(note = %n, "Slurm inventory");
                    }
                    self.logged = notes;
                }
                inv
            }
            Err(e) => {
                self.status.failures += 1;
                self.status.error = Some(e.to_string());
                let kept = self.zones.iter().map(|z| z.hosts.len()).sum::<usize>();
                if self.status.failures == 1 {
                    tracing::error!(
                        error = %e,
                        hosts_kept = kept,
                        read_ms = self.status.read_ms,
                        "Slurm could not be read: the last good inventory keeps serving, the cluster is degraded"
                    );
                } else if self.status.failures.is_multiple_of(LOG_EVERY_FAILURES) {
                    tracing::warn!(error = %e, failures = self.status.failures, hosts_kept = kept, "Slurm still unreadable");
                }
                combine(&self.file, self.zones.clone())
            }
        }
    }

    /// Reads the inventory file again; on success its part replaces the old one, on failure
    /// every error is logged and the old part keeps serving. Returns the inventory to serve.
    pub fn reload_file(&mut self) -> Inventory {
        match load_file(&self.cfg) {
            Ok(f) => self.file = f,
            Err(e) => tracing::error!(error = %e, "inventory reload refused; the previous inventory keeps serving"),
        }
        combine(&self.file, self.zones.clone())
    }
}

/// Serves `inv` and the source's status: swaps the inventory in when its version differs.
pub fn apply(shared: &Shared, inv: Inventory, status: SourceStatus) {
    let mut core = lock(shared);
    if inv.version != core.inventory_version() {
        let old = core.inventory_version().to_string();
        let hosts: usize = inv.zones.iter().map(|z| z.hosts.len()).sum();
        tracing::info!(old_version = %old, new_version = %inv.version, zones = inv.zones.len(), hosts, "inventory refreshed from Slurm");
        core.replace_inventory(inv);
    }
    core.set_source(Some(status));
}

fn mtime(p: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Runs the refresh loop: Slurm every `refreshMs`, Slurm and the file on SIGHUP, the file when
/// it changes (checked every `reloadPollMs`; 0 = only on SIGHUP).
pub fn spawn(mut live: Live, shared: Arc<Shared>) {
    tokio::spawn(async move {
        let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; Slurm is read on the interval only");
                None
            }
        };
        let every = Duration::from_millis(live.slurm.refresh_ms.max(1));
        let poll_ms = live.cfg.reload_poll_ms;
        let poll = Duration::from_millis(if poll_ms == 0 { 3_600_000 } else { poll_ms });
        let mut poll_tick = tokio::time::interval_at(tokio::time::Instant::now() + poll, poll);
        poll_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = mtime(&live.cfg.inventory);
        loop {
            let hup_fired = async {
                match hup.as_mut() {
                    Some(h) => h.recv().await.is_some(),
                    None => std::future::pending().await,
                }
            };
            let inv = tokio::select! {
                fired = hup_fired => {
                    if !fired { continue; }
                    tracing::info!("SIGHUP: reading the inventory file and Slurm");
                    seen = mtime(&live.cfg.inventory);
                    live.reload_file();
                    live.refresh().await
                }
                _ = tick.tick() => live.refresh().await,
                _ = poll_tick.tick(), if poll_ms > 0 => {
                    let now = mtime(&live.cfg.inventory);
                    if now == seen { continue; }
                    seen = now;
                    tracing::info!("inventory file changed: reloading its part");
                    live.reload_file()
                }
            };
            apply(&shared, inv, live.status());
        }
    });
}
