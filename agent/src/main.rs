//! `fedvol-agent`: the per-cluster agent (see the crate docs and `fedvol-agent --help`).

use std::path::PathBuf;

use clap::Parser;

/// mimalloc instead of glibc's malloc: decoding and encoding decisions allocates many small
/// strings, and glibc's malloc and free took about a quarter of the coordinator's CPU per plan
/// (`scripts/profile`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use fedvol_agent::config::AgentConfig;

/// fedvol's per-cluster agent: serves placement for one cluster over NATS.
#[derive(Debug, Parser)]
#[command(name = "fedvol-agent", version, about)]
struct Args {
    /// Configuration file (YAML); flags and environment variables override it.
    #[arg(short, long, env = "FEDVOL_AGENT_CONFIG")]
    config: Option<PathBuf>,
    /// The cluster inventory file.
    #[arg(short, long, env = "FEDVOL_INVENTORY")]
    inventory: Option<PathBuf>,
    /// The cluster name (checked against the inventory).
    #[arg(long, env = "FEDVOL_CLUSTER")]
    cluster: Option<String>,
    /// NATS connection, body and in-flight bounds, subject prefix, metrics listener.
    #[command(flatten)]
    daemon: fedvol_daemon_config::DaemonArgs,
    /// Directory for the state file.
    #[arg(long, env = "FEDVOL_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where the state is kept: redb (a file in --data-dir) or jetstream (a stream replicated
    /// with the NATS cluster, shared by the cluster's agent replicas; one serves).
    #[arg(long, env = "FEDVOL_STATE_STORE", value_enum)]
    state_store: Option<fedvol_agent::config::StateStore>,
    /// Copies of the state stream with --state-store jetstream.
    #[arg(long, env = "FEDVOL_STATE_REPLICAS")]
    state_replicas: Option<usize>,
    /// Heartbeat interval, ms.
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Default hold lease, ms.
    #[arg(long)]
    hold_ttl_ms: Option<u64>,
    /// After `--init`: how long to wait for the coordinators to restore the cluster's commits
    /// before admitting new commits anyway, ms (default 60000).
    #[arg(long, env = "FEDVOL_RESTORE_WAIT_MS")]
    restore_wait_ms: Option<u64>,
    /// Development sandbox: every hostpath/nfs volume becomes a directory under this root (and
    /// unmounted NFS exports are simulated there). Not for production.
    #[arg(long, env = "FEDVOL_STORAGE_ROOT")]
    storage_root: Option<PathBuf>,
    /// Create the state file if it is missing (a new cluster, or a deliberate reset). Without
    /// it, a missing or empty state file is an error: an agent that forgot its commits would
    /// give their capacity away again.
    #[arg(long)]
    init: bool,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// Print this program's man page (roff) and exit; `scripts/install` writes it.
    #[arg(long, hide = true)]
    man: bool,
}

/// The configuration: the file (or defaults with `--inventory`), then every flag given.
///
/// Errors: the file's problems, or neither a file nor an inventory.
fn config(a: Args) -> Result<AgentConfig, String> {
    let mut cfg = match &a.config {
        Some(p) => AgentConfig::load(p).map_err(|d| format!("{d}"))?,
        None => {
            let inv = a.inventory.clone().ok_or("give --inventory FILE (or --config FILE)")?;
            AgentConfig::new(inv, PathBuf::from("fedvol-agent-data"))
        }
    };
    if let Some(v) = a.inventory {
        cfg.inventory = v;
    }
    if a.cluster.is_some() {
        cfg.cluster = a.cluster;
    }
    a.daemon.apply(&mut cfg.daemon);
    cfg.init = a.init;
    if let Some(v) = a.data_dir {
        cfg.data_dir = v;
    }
    if let Some(v) = a.state_store {
        cfg.state_store = v;
    }
    if let Some(v) = a.state_replicas {
        cfg.state_replicas = v;
    }
    if let Some(v) = a.heartbeat_ms {
        cfg.heartbeat_ms = v;
    }
    if let Some(v) = a.hold_ttl_ms {
        cfg.hold_ttl_ms = v;
    }
    if let Some(v) = a.restore_wait_ms {
        cfg.restore_wait_ms = v;
    }
    if a.storage_root.is_some() {
        cfg.storage_root = a.storage_root;
    }
    Ok(cfg)
}

/// The sections of `fedvol-agent.1` clap does not know.
const MAN: fedvol_obs::man::Extra<'static> = fedvol_obs::man::Extra {
    environment: &[
        fedvol_obs::man::DAEMON_VARIABLES,
        (
            "FEDVOL_NATS_PASSWORD_FILE",
            "A file holding the NATS user's password, readable by the agent's account alone (systemd's LoadCredential=). Preferred to FEDVOL_NATS_PASSWORD: a password in the environment is inherited by what the agent starts.",
        ),
        fedvol_obs::man::DAEMON_NATS_PASSWORD,
        ("RUST_LOG", "The log filter (default info), e.g. fedvol_agent=debug."),
    ],
    exit_status: &[
        fedvol_obs::man::DAEMON_STOPPED,
        (
            "1",
            "Bad configuration or inventory, a missing or foreign state file (a first start takes --init), or NATS unreachable; the message says which.",
        ),
        (
            "75",
            "The state file was deleted or replaced while it ran: it was written again from memory; the supervisor restarts the agent on it (EX_TEMPFAIL).",
        ),
    ],
    examples: &[
        (
            "fedvol-agent --config /etc/fedvol/agent-cluster-a.yaml --init",
            "The first start of a new cluster's agent: creates its state file.",
        ),
        (
            "fedvol-agent --inventory cluster-a.yaml --nats nats://nats.example:4222 --data-dir /var/lib/fedvol-agent",
            "Without a configuration file.",
        ),
        (
            "systemctl reload fedvol-agent@cluster-a",
            "Re-read the inventory (SIGHUP).",
        ),
    ],
};

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let daemon = fedvol_obs::daemon::Daemon {
        program: "fedvol-agent",
        log_json: args.log_json,
        escape: fedvol_common::limits::printable,
        on_thread_park: None,
    };
    daemon.main_or_man::<Args, _, _, _>(args.man, &MAN, || config(args), fedvol_agent::run::run)
}
