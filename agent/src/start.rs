//! What an agent checks before it serves: why it could not start ([`StartError`]), and its
//! inventory loaded and matched against the configured cluster ([`load_checked`],
//! [`check_cluster`]). Used by [`crate::run`] at start and by the live inventory sources
//! ([`crate::slurm`]) on every refresh; it imports neither.

use fedvol_common::model::Inventory;
use fedvol_formats::load_inventory;

use crate::config::AgentConfig;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is inconsistent.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Config(Vec<String>),
    /// The inventory has errors.
    #[error("inventory {path} is invalid:\n{diagnostics}")]
    Inventory {
        /// The file.
        path: String,
        /// Every problem.
        diagnostics: fedvol_formats::yaml::Diagnostics,
    },
    /// The state directory or file could not be used.
    #[error("{0}")]
    State(String),
    /// NATS could not be reached or the service not registered.
    #[error("{0}")]
    Nats(String),
    /// The metrics server could not listen on its address.
    #[error(transparent)]
    Metrics(#[from] fedvol_obs::ServeError),
    /// This replica lost the cluster's lease or was fenced by the replica that took over: it
    /// stopped serving (its supervisor starts it again, as a standby).
    #[error("stepped down: {0}")]
    SteppedDown(String),
}

/// Loads and checks the inventory against the configured cluster name.
pub fn load_checked(cfg: &AgentConfig) -> Result<Inventory, StartError> {
    let loaded = load_inventory(&cfg.inventory).map_err(|d| StartError::Inventory {
        path: cfg.inventory.display().to_string(),
        diagnostics: d,
    })?;
    for n in &loaded.notices {
        tracing::info!(notice = %n, "inventory notice");
    }
    check_cluster(cfg, loaded.value)
}

/// Returns `inv` when its cluster is the one the configuration names (or it names none).
///
/// Errors: [`StartError::Config`] naming both clusters.
pub fn check_cluster(cfg: &AgentConfig, inv: Inventory) -> Result<Inventory, StartError> {
    if let Some(c) = &cfg.cluster
        && c != &inv.cluster
    {
        return Err(StartError::Config(vec![format!(
            "the configuration names cluster `{c}` but {} is the inventory of cluster `{}`",
            cfg.inventory.display(),
            inv.cluster
        )]));
    }
    Ok(inv)
}
