//! `fedvol-bench`: the federated fan-out benchmark (see `fedvol_tests::bench` and
//! BENCHMARKS.md).
//!
//! ```sh
//! cargo run --release -p fedvol-tests --bin fedvol-bench -- sweep     # every table and plot
//! cargo run --release -p fedvol-tests --bin fedvol-bench -- run --clusters 16 --hosts 1000 --in-flight 64
//! cargo run -p fedvol-tests --bin fedvol-bench -- smoke              # CI's short form
//! cargo run --release -p fedvol-tests --bin fedvol-bench -- what-if   # fedvol what-if, timed
//! ```
//!
//! Exit codes: 0 when everything was measured; 1 when a mode had no successful request at all
//! (or, for `sweep`, a configuration could not run); 2 when it could not run (bad arguments,
//! no nats-server, a process that does not start).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use fedvol_agent::config::DEFAULT_HEARTBEAT_MS;
use fedvol_tests::bench::agents::{AgentsSpec, serve_agents};
use fedvol_tests::bench::inventory::Shape;
use fedvol_tests::bench::procs::{DEFAULT_DEADLINE_MS, DEFAULT_MAX_PAYLOAD_BYTES};
use fedvol_tests::bench::raw::{RespondersSpec, serve_responders};
use fedvol_tests::bench::run::{self, Mode, RunSpec, SweepSpec};

/// The allocator the shipped daemons use (`agent/src/main.rs`): the agents this process hosts
/// must cost what `fedvol-agent` costs. With glibc's malloc, its heap growth alone
/// (`sysmalloc`) was 15% of an agents process's CPU at 1,000 clusters (`perf record`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// fedvol's federated fan-out benchmark: nats-server, a coordinator and N agents as real
/// processes, driven at a fixed number of requests in flight.
///
/// Modes: plan (dry-run submits), submit (with the commit: a real hostpath mkdir), raw (the
/// same scatter-gather through the same server to N trivial responders). Up to 8 clusters each
/// agent is its own fedvol-agent process; above, the agents run in 2 processes of many agents
/// each (one tokio runtime, one NATS connection, queue group, heartbeat and state file per
/// agent); --agent-processes changes that. The fedvol binaries are those of this build's
/// profile, logging at warn (FEDVOL_BENCH_LOG overrides).
#[derive(Debug, Parser)]
#[command(name = "fedvol-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which modes to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    /// Dry-run submits.
    Plan,
    /// Submits (commit included).
    Submit,
    /// The raw scatter-gather to trivial responders (the federation still starts: the size of
    /// a real agent answer is measured on it).
    Raw,
    /// plan, submit and raw.
    All,
}

/// Options shared by `run` and `sweep`.
#[derive(Debug, Clone, clap::Args)]
struct Common {
    /// Provisioners per cluster (hostpath; the last one matches the workflow).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    provisioners: u32,
    /// Existing persistent volumes per cluster.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    volumes: u32,
    /// Measured window per mode, seconds.
    #[arg(long, default_value_t = 10.0, value_parser = positive_secs)]
    secs: f64,
    /// Warm-up before each window, ms.
    #[arg(long, default_value_t = 1000)]
    warmup_ms: u64,
    /// How long one request waits for its answer, ms (then it counts as `timeout`).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    answer_wait_ms: u64,
    /// Agent processes (0: one per cluster up to 8 clusters, else 2 processes of many agents).
    #[arg(long, default_value_t = 0)]
    agent_processes: usize,
    /// The coordinator's plan deadline, ms (`--deadline-ms` of fedvol-coordinator).
    #[arg(long, default_value_t = DEFAULT_DEADLINE_MS, value_parser = clap::value_parser!(u64).range(1..=120_000))]
    deadline_ms: u64,
    /// nats-server's max_payload, bytes (0: the server's default of 1 MiB, with which a
    /// decision of 64 clusters of 1,000 hosts cannot be stored).
    #[arg(long, default_value_t = DEFAULT_MAX_PAYLOAD_BYTES)]
    nats_max_payload: usize,
    /// The agents' heartbeat interval, ms, at most an hour (`heartbeatMs`; default: the shipped
    /// agent's). Every process's CPU includes what the heartbeats cost at this rate.
    #[arg(long, default_value_t = DEFAULT_HEARTBEAT_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    heartbeat_ms: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure one configuration.
    Run {
        /// Clusters (agents).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
        clusters: u32,
        /// Hosts per cluster.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        hosts: u32,
        /// Requests in flight (repeat or comma-separate to measure several on one federation).
        #[arg(long, default_value = "1", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=10_000))]
        in_flight: Vec<u32>,
        /// What to measure.
        #[arg(long, value_enum, default_value_t = ModeArg::All)]
        mode: ModeArg,
        /// Append the result to `<DIR>/results.jsonl`.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Measure the benchmark grid and write `results.jsonl`, `tables.md` and SVG plots (the one
    /// command behind BENCHMARKS.md).
    Sweep {
        /// Numbers of clusters.
        #[arg(long, default_value = "1,4,16,64", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1000))]
        clusters: Vec<u32>,
        /// Hosts per cluster.
        #[arg(long, default_value = "100,1000,10000", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100_000))]
        hosts: Vec<u32>,
        /// Requests in flight.
        #[arg(long, default_value = "1,64", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=10_000))]
        in_flight: Vec<u32>,
        /// Output directory.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// CI's short form: 1 cluster, 100 hosts, a few hundred ms per mode; fails only when
    /// something cannot run or every request of a mode failed.
    Smoke {
        /// Keep the results, tables and plot in this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Record many decisions (real submits), then time `fedvol what-if` on them: the
    /// baseline and the drain of the cluster most of them chose.
    WhatIf {
        /// Clusters (agents).
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
        clusters: u32,
        /// Hosts per cluster.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        hosts: u32,
        /// Decisions to record.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        decisions: u32,
        /// Submits in flight while recording.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        in_flight: u32,
        /// Provisioners per cluster (hostpath; the last one matches the workflow).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        provisioners: u32,
        /// Existing persistent volumes per cluster.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=100_000))]
        volumes: u32,
        /// Agent processes (0: one per cluster up to 8 clusters, else 2 processes of many agents).
        #[arg(long, default_value_t = 0)]
        agent_processes: usize,
        /// nats-server's max_payload, bytes (default: NATS's own 1 MiB).
        #[arg(long, default_value_t = 1024 * 1024)]
        nats_max_payload: usize,
        /// How long one what-if (and one submit) may take, ms.
        #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
        wait_ms: u64,
    },
    /// Re-write `tables.md` and the plots from `<OUT>/results.jsonl`.
    Render {
        /// The directory of a sweep.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
    /// Multi-agent mode: run one agent per inventory in this process (started by the
    /// benchmark itself).
    #[command(hide = true)]
    Agents {
        /// An inventory (one per agent).
        #[arg(long, required = true)]
        inventory: Vec<PathBuf>,
        /// NATS URL.
        #[arg(long)]
        nats: String,
        /// State directories go under it.
        #[arg(long)]
        data_dir: PathBuf,
        /// Heartbeat interval, ms.
        #[arg(long, default_value_t = DEFAULT_HEARTBEAT_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        heartbeat_ms: u64,
        /// Each agent logs in as NATS user `agent-<cluster>` with the example password
        /// `example-agent-<cluster>` (the shipped configurations, as the benchmark runs them).
        #[arg(long)]
        shipped_logins: bool,
    },
    /// Raw responders (started by the benchmark itself).
    #[command(hide = true)]
    Responders {
        /// NATS URL.
        #[arg(long)]
        nats: String,
        /// Index of the first responder.
        #[arg(long, default_value_t = 0)]
        first: usize,
        /// Responders in this process.
        #[arg(long)]
        n: usize,
        /// Size of every answer, bytes.
        #[arg(long, default_value_t = 1024)]
        body_bytes: usize,
    },
}

fn positive_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: give a number of seconds above 0 (at most 86400)"))
    }
}

fn modes(m: ModeArg) -> Vec<Mode> {
    match m {
        ModeArg::Plan => vec![Mode::Plan],
        ModeArg::Submit => vec![Mode::Submit],
        ModeArg::Raw => vec![Mode::Raw],
        ModeArg::All => Mode::ALL.to_vec(),
    }
}

fn base_spec(c: &Common) -> RunSpec {
    let mut spec = RunSpec::new();
    spec.shape = Shape {
        hosts: spec.shape.hosts,
        provisioners: c.provisioners as usize,
        volumes: c.volumes as usize,
    };
    spec.window = Duration::from_secs_f64(c.secs);
    spec.warmup = Duration::from_millis(c.warmup_ms);
    spec.answer_wait = Duration::from_millis(c.answer_wait_ms);
    spec.agent_processes = c.agent_processes;
    spec.deadline_ms = c.deadline_ms;
    spec.max_payload_bytes = c.nats_max_payload;
    spec.heartbeat_ms = c.heartbeat_ms;
    spec
}

/// Runs `work` until it ends, SIGINT or SIGTERM; on a signal `work` is dropped, which stops
/// every process it started and removes its temporary directories.
async fn interruptible<T>(work: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("cannot listen for SIGINT: {e}"))?;
    tokio::select! {
        r = work => r,
        _ = int.recv() => Err("interrupted (SIGINT): every process it started was stopped".into()),
        _ = term.recv() => Err("terminated (SIGTERM): every process it started was stopped".into()),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// What went wrong: 1 = measured but a mode never succeeded (or a sweep configuration failed),
/// 2 = could not run.
enum Failure {
    Measured(String),
    CannotRun(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run {
            clusters,
            hosts,
            in_flight,
            mode,
            out,
            common,
        } => {
            let mut spec = base_spec(&common);
            spec.clusters = clusters as usize;
            spec.shape.hosts = hosts as usize;
            spec.in_flight = in_flight.iter().map(|&n| n as usize).collect();
            spec.modes = modes(mode);
            spec.out = out;
            runtime()
                .and_then(|rt| rt.block_on(interruptible(run::run_federation(&spec))))
                .map_err(Failure::CannotRun)
                .and_then(|results| {
                    let dead: Vec<String> = results
                        .iter()
                        .flat_map(|r| {
                            r.modes
                                .iter()
                                .filter(|m| m.ok == 0)
                                .map(move |m| format!("{} at {} in flight", m.mode, r.config.in_flight))
                        })
                        .collect();
                    if dead.is_empty() {
                        Ok(())
                    } else {
                        Err(Failure::Measured(format!(
                            "no successful request in: {}",
                            dead.join(", ")
                        )))
                    }
                })
        }
        Command::Sweep {
            clusters,
            hosts,
            in_flight,
            out,
            common,
        } => {
            let spec = SweepSpec {
                clusters: clusters.iter().map(|&n| n as usize).collect(),
                hosts: hosts.iter().map(|&n| n as usize).collect(),
                in_flight: in_flight.iter().map(|&n| n as usize).collect(),
                base: base_spec(&common),
                out,
                command: std::iter::once("fedvol-bench".to_string())
                    .chain(std::env::args().skip(1))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            runtime()
                .map_err(Failure::CannotRun)
                .and_then(|rt| rt.block_on(interruptible(run::sweep(&spec))).map_err(Failure::Measured))
                .map(|_| ())
        }
        Command::Smoke { out } => runtime()
            .map_err(Failure::CannotRun)
            .and_then(|rt| {
                rt.block_on(interruptible(run::smoke(out))).map_err(|e| {
                    if e.starts_with("smoke: every request failed") {
                        Failure::Measured(e)
                    } else {
                        Failure::CannotRun(e)
                    }
                })
            })
            .map(|_| eprintln!("fedvol-bench smoke: every mode ran")),
        Command::WhatIf {
            clusters,
            hosts,
            decisions,
            in_flight,
            provisioners,
            volumes,
            agent_processes,
            nats_max_payload,
            wait_ms,
        } => {
            let spec = fedvol_tests::bench::what_if::WhatIfSpec {
                clusters: clusters as usize,
                shape: Shape {
                    hosts: hosts as usize,
                    provisioners: provisioners as usize,
                    volumes: volumes as usize,
                },
                decisions: decisions as usize,
                in_flight: in_flight as usize,
                agent_processes,
                max_payload_bytes: nats_max_payload,
                wait: Duration::from_millis(wait_ms),
            };
            runtime()
                .and_then(|rt| rt.block_on(interruptible(fedvol_tests::bench::what_if::run(&spec))))
                .map_err(Failure::CannotRun)
        }
        Command::Render { out } => run::render(&out, "fedvol-bench render")
            .map(|files| {
                for f in files {
                    eprintln!("fedvol-bench: wrote {}", f.display());
                }
            })
            .map_err(Failure::CannotRun),
        Command::Agents {
            inventory,
            nats,
            data_dir,
            heartbeat_ms,
            shipped_logins,
        } => serve_agents(AgentsSpec {
            inventories: inventory,
            nats,
            data_dir,
            heartbeat_ms,
            shipped_logins,
        })
        .map_err(Failure::CannotRun),
        Command::Responders {
            nats,
            first,
            n,
            body_bytes,
        } => serve_responders(RespondersSpec {
            first,
            n,
            nats,
            body_bytes,
        })
        .map_err(Failure::CannotRun),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Measured(e)) => {
            eprintln!("fedvol-bench: {e}");
            ExitCode::from(1)
        }
        Err(Failure::CannotRun(e)) => {
            eprintln!("fedvol-bench: {e}");
            ExitCode::from(2)
        }
    }
}
