//! Multi-agent mode: many clusters' agents in one process (`fedvol-bench agents`, a hidden
//! subcommand the benchmark starts itself).
//!
//! Above [`crate::bench::procs::MAX_SINGLE_AGENT_PROCESSES`] clusters a 2-core machine cannot
//! usefully run one `fedvol-agent` process per cluster (64 runtimes of 2 worker threads each,
//! 64 × the start-up memory), so the benchmark groups them: each group process runs one tokio
//! runtime and, per inventory, exactly what `fedvol-agent` runs —
//! [`fedvol_agent::run::run`] with the same configuration (`AgentConfig::new` defaults, the
//! given NATS URL and heartbeat, the state in `<data-dir>/agent-<i>/state.redb`). Each agent
//! therefore still has its **own NATS connection**, its own queue group `agent.<cluster>`, its
//! own service registration, heartbeat, redb file and lock; only the process, the runtime's
//! worker threads and the allocator are shared. What this mode does not measure is the
//! per-process overhead of N separate agents (N × runtime threads, N × RSS baseline).

use std::path::PathBuf;

use fedvol_agent::config::AgentConfig;

use crate::bench::procs::product_log_level;

/// What `fedvol-bench agents` runs.
#[derive(Debug, Clone)]
pub struct AgentsSpec {
    /// One inventory file per cluster.
    pub inventories: Vec<PathBuf>,
    /// NATS URL.
    pub nats: String,
    /// State directories go under it, one per inventory (`<data_dir>/agent-<i>`).
    pub data_dir: PathBuf,
    /// Heartbeat interval, ms.
    pub heartbeat_ms: u64,
    /// Each agent logs in as `agent-<cluster>` with the example password `example-agent-<cluster>`
    /// (a shipped configuration; [`crate::shipped`]).
    pub shipped_logins: bool,
}

/// Runs every agent of `spec` in this process until one of them stops (which is an error: an
/// agent runs until the process is killed).
///
/// Errors: no inventory, the runtime cannot start, or an agent stopped (its start error, e.g.
/// an invalid inventory).
pub fn serve_agents(spec: AgentsSpec) -> Result<(), String> {
    if spec.inventories.is_empty() {
        return Err("agents: give at least one --inventory".into());
    }
    let filter = tracing_subscriber::EnvFilter::try_new(product_log_level())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let configs: Vec<(String, AgentConfig)> = spec
        .inventories
        .iter()
        .enumerate()
        .map(|(i, inv)| {
            let mut cfg = AgentConfig::new(inv.clone(), spec.data_dir.join(format!("agent-{i}")));
            cfg.daemon.nats.url = spec.nats.clone();
            if spec.shipped_logins
                && let Some(cluster) = crate::shipped::top_level(inv, "cluster")
            {
                let user = format!("agent-{cluster}");
                cfg.daemon.nats.password = Some(crate::kit::password(&user));
                cfg.daemon.nats.user = Some(user);
            }
            cfg.heartbeat_ms = spec.heartbeat_ms;
            cfg.init = true;
            (inv.display().to_string(), cfg)
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("agents: cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let mut set = tokio::task::JoinSet::new();
        for (inv, cfg) in configs {
            set.spawn(async move { (inv, fedvol_agent::run::run(cfg).await) });
        }
        match set.join_next().await {
            Some(Ok((inv, Ok(())))) => Err(format!("agents: the agent of {inv} stopped")),
            Some(Ok((inv, Err(e)))) => Err(format!("agents: the agent of {inv} failed: {e}")),
            Some(Err(e)) => Err(format!("agents: an agent task failed: {e}")),
            None => Ok(()),
        }
    })
}
