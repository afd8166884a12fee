//! `fedvol-coordinator`: the federation's coordinator daemon (see `fedvol-coordinator --help`
//! and `fedvol_coordinator::daemon`).

use std::path::PathBuf;

use clap::Parser;

/// mimalloc instead of glibc's malloc: decoding and encoding decisions allocates many small
/// strings, and glibc's malloc and free took about a quarter of the coordinator's CPU per plan
/// (`scripts/profile`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's own API, linked by `libmimalloc-sys` (its `extended` feature would only add this
// declaration): `mi_collect(true)` frees what the calling thread's heap keeps, returning
// empty pages to the OS (mimalloc docs: "mi_collect: eagerly free memory").
unsafe extern "C" {
    fn mi_collect(force: bool);
}

/// Minimum time between two collections on one runtime thread.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    static LAST_COLLECT: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

/// Run by each runtime thread as it goes idle: at most once a second, it hands what its
/// mimalloc heap keeps back to the OS. mimalloc keeps freed pages in the heap of the thread
/// that used them, and an idle thread never revisits them: after a burst (5,000 requests at
/// once) the coordinator's RSS stayed at its peak (RELIABILITY.md, scenario 16).
fn collect_when_idle() {
    let now = std::time::Instant::now();
    let due = LAST_COLLECT.with(|c| c.get().is_none_or(|t| now.duration_since(t) >= COLLECT_EVERY));
    if due {
        LAST_COLLECT.with(|c| c.set(Some(now)));
        // SAFETY: mi_collect takes no pointer and may be called from any thread at any time;
        // mimalloc is this process's allocator (ALLOCATOR above).
        unsafe { mi_collect(true) };
    }
}
use fedvol_coordinator::daemon::CoordinatorConfig;

/// fedvol's coordinator: plans workflows on every cluster at once, chooses, commits, and
/// stores the decisions in JetStream.
#[derive(Debug, Parser)]
#[command(name = "fedvol-coordinator", version, about)]
struct Args {
    /// Configuration file (YAML); flags and environment variables override it.
    #[arg(short, long, env = "FEDVOL_COORDINATOR_CONFIG")]
    config: Option<PathBuf>,
    /// NATS connection, body and in-flight bounds, subject prefix, metrics listener.
    #[command(flatten)]
    daemon: fedvol_daemon_config::DaemonArgs,
    /// Requests of one user in progress at once; beyond, that user's requests are answered
    /// `overloaded` (default 64).
    #[arg(long, env = "FEDVOL_MAX_IN_FLIGHT_PER_USER")]
    max_in_flight_per_user: Option<usize>,
    /// Rejected candidates listed per funnel stage in stored decisions (0 = all; default 5).
    #[arg(long, env = "FEDVOL_TRACE_LIMIT")]
    trace_limit: Option<usize>,
    /// How long a submit waits for the clusters, ms.
    #[arg(long, env = "FEDVOL_DEADLINE_MS")]
    deadline_ms: Option<u64>,
    /// No longer read (`holdTtlMs`): accepted, and ignored with a warning.
    #[arg(long, env = "FEDVOL_HOLD_TTL_MS", hide = true)]
    hold_ttl_ms: Option<u64>,
    /// Commit failures tolerated (clusters tried in ranking order; a cluster whose capacity
    /// went to another request meanwhile does not count) before a decision fails.
    #[arg(long, env = "FEDVOL_COMMIT_ATTEMPTS")]
    commit_attempts: Option<u32>,
    /// How long one commit or complete may take on an agent, ms.
    #[arg(long, env = "FEDVOL_COMMIT_TIMEOUT_MS")]
    commit_timeout_ms: Option<u64>,
    /// Users-to-groups directory file (without one: dev mode, claimed groups are trusted).
    #[arg(long, env = "FEDVOL_DIRECTORY")]
    directory: Option<PathBuf>,
    /// A user who may drain and undrain clusters (repeat for several; replaces `operators:`
    /// of the file; FEDVOL_OPERATORS takes a comma-separated list).
    #[arg(
        long = "operator",
        value_name = "USER",
        env = "FEDVOL_OPERATORS",
        value_delimiter = ','
    )]
    operators: Vec<String>,
    /// Decision bucket name.
    #[arg(long, env = "FEDVOL_KV_BUCKET")]
    kv_bucket: Option<String>,
    /// Revisions kept per decision.
    #[arg(long, env = "FEDVOL_KV_HISTORY")]
    kv_history: Option<i64>,
    /// Replicas of the decision bucket's stream.
    #[arg(long, env = "FEDVOL_KV_REPLICAS")]
    kv_replicas: Option<usize>,
    /// NATS user of the decision bucket's own connection (with a password or password
    /// file; URL and TLS as --nats). The shipped NATS files' `coordinator-kv`: the bucket's
    /// watches must not log in as an identity with `allow_responses` (deploy/nats/README.md).
    #[arg(long, env = "FEDVOL_KV_NATS_USER")]
    kv_nats_user: Option<String>,
    /// Password of --kv-nats-user (prefer --kv-nats-password-file for a daemon).
    #[arg(long, env = "FEDVOL_KV_NATS_PASSWORD", hide_env_values = true)]
    kv_nats_password: Option<String>,
    /// File holding --kv-nats-user's password (its first line).
    #[arg(long, env = "FEDVOL_KV_NATS_PASSWORD_FILE")]
    kv_nats_password_file: Option<PathBuf>,
    /// NATS credentials file of the decision bucket's connection.
    #[arg(long, env = "FEDVOL_KV_NATS_CREDS")]
    kv_nats_creds: Option<PathBuf>,
    /// Reply inbox prefix of the decision bucket's connection (`_INBOX_coordinator-kv` with
    /// deploy/nats/secure.conf).
    #[arg(long, env = "FEDVOL_KV_NATS_INBOX_PREFIX")]
    kv_nats_inbox_prefix: Option<String>,
    /// How long start-up discovery waits for agents, ms.
    #[arg(long, env = "FEDVOL_DISCOVERY_MS")]
    discovery_ms: Option<u64>,
    /// How often the reconciler looks for decisions left planned by a coordinator that died,
    /// ms (0 = this coordinator never reconciles).
    #[arg(long, env = "FEDVOL_RECONCILE_EVERY_MS")]
    reconcile_every_ms: Option<u64>,
    /// How long a cluster may go unheard before the registry forgets it, ms (default 600000).
    #[arg(long, env = "FEDVOL_FORGET_CLUSTER_AFTER_MS")]
    forget_cluster_after_ms: Option<u64>,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "FEDVOL_LOG_JSON")]
    log_json: bool,
    /// Print this program's man page (roff) and exit; `scripts/install` writes it.
    #[arg(long, hide = true)]
    man: bool,
}

fn config(a: Args) -> Result<CoordinatorConfig, String> {
    let mut cfg = match &a.config {
        Some(p) => CoordinatorConfig::load(p).map_err(|d| format!("{d}"))?,
        None => CoordinatorConfig::default(),
    };
    a.daemon.apply(&mut cfg.daemon);
    if let Some(v) = a.max_in_flight_per_user {
        cfg.max_in_flight_per_user = v;
    }
    if let Some(v) = a.trace_limit {
        cfg.trace_limit = v;
    }
    if let Some(v) = a.deadline_ms {
        cfg.deadline_ms = v;
    }
    if a.hold_ttl_ms.is_some() {
        let w = fedvol_coordinator::daemon::config::HOLD_TTL_MS.as_flag("--hold-ttl-ms or FEDVOL_HOLD_TTL_MS");
        cfg.daemon.warnings.push(w);
    }
    if let Some(v) = a.commit_attempts {
        cfg.commit_attempts = v;
    }
    if let Some(v) = a.commit_timeout_ms {
        cfg.commit_timeout_ms = v;
    }
    if a.directory.is_some() {
        cfg.directory = a.directory;
    }
    if !a.operators.is_empty() {
        cfg.operators = a.operators;
    }
    if let Some(v) = a.kv_bucket {
        cfg.kv.bucket = v;
    }
    if let Some(v) = a.kv_history {
        cfg.kv.history = v;
    }
    if let Some(v) = a.kv_replicas {
        cfg.kv.replicas = v;
    }
    if a.kv_nats_user.is_some()
        || a.kv_nats_password.is_some()
        || a.kv_nats_password_file.is_some()
        || a.kv_nats_creds.is_some()
        || a.kv_nats_inbox_prefix.is_some()
    {
        let login = cfg.kv.login.get_or_insert_with(|| fedvol_proto::nats::NatsAuth {
            url: String::new(),
            ..fedvol_proto::nats::NatsAuth::local()
        });
        if a.kv_nats_user.is_some() {
            login.user = a.kv_nats_user;
        }
        // A password given here replaces the file's password file, and the other way round.
        if a.kv_nats_password.is_some() {
            login.password = a.kv_nats_password;
            login.password_file = None;
        } else if a.kv_nats_password_file.is_some() {
            login.password_file = a.kv_nats_password_file;
            login.password = None;
        }
        if a.kv_nats_creds.is_some() {
            login.creds_file = a.kv_nats_creds;
        }
        if a.kv_nats_inbox_prefix.is_some() {
            login.inbox_prefix = a.kv_nats_inbox_prefix;
        }
    }
    if let Some(v) = a.discovery_ms {
        cfg.discovery_ms = v;
    }
    if let Some(v) = a.reconcile_every_ms {
        cfg.reconcile_every_ms = v;
    }
    if let Some(v) = a.forget_cluster_after_ms {
        cfg.forget_cluster_after_ms = v;
    }
    Ok(cfg)
}

/// The sections of `fedvol-coordinator.1` clap does not know.
const MAN: fedvol_obs::man::Extra<'static> = fedvol_obs::man::Extra {
    environment: &[
        fedvol_obs::man::DAEMON_VARIABLES,
        (
            "FEDVOL_NATS_PASSWORD_FILE",
            "A file holding the NATS user's password, readable by the coordinator's account alone (systemd's LoadCredential=).",
        ),
        fedvol_obs::man::DAEMON_NATS_PASSWORD,
        (
            "FEDVOL_KV_NATS_PASSWORD_FILE",
            "A file holding the password of the decision bucket's NATS login (--kv-nats-user), readable by the coordinator's account alone.",
        ),
        (
            "RUST_LOG",
            "The log filter (default info), e.g. fedvol_coordinator=debug.",
        ),
    ],
    exit_status: &[
        fedvol_obs::man::DAEMON_STOPPED,
        (
            "1",
            "Bad configuration or user directory, NATS unreachable, or the decision bucket could not be opened; the message says which.",
        ),
    ],
    examples: &[
        (
            "fedvol-coordinator --config /etc/fedvol/coordinator.yaml",
            "As the systemd unit runs it; start it on several hosts for availability.",
        ),
        (
            "FEDVOL_NATS_PASSWORD=... fedvol-coordinator --nats nats://nats.example:4222 --nats-user coordinator",
            "Without a configuration file, as the shipped NATS files' coordinator user.",
        ),
        (
            "systemctl reload fedvol-coordinator",
            "Re-read the user directory (SIGHUP).",
        ),
    ],
};

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let daemon = fedvol_obs::daemon::Daemon {
        program: "fedvol-coordinator",
        log_json: args.log_json,
        escape: fedvol_common::limits::printable,
        on_thread_park: Some(collect_when_idle),
    };
    daemon.main_or_man::<Args, _, _, _>(args.man, &MAN, || config(args), fedvol_coordinator::daemon::run::run)
}
