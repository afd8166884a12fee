//! `fedvol-burst`: bursts of submits against scarce capacity (`fedvol_tests::burst`,
//! RELIABILITY.md). Prints committed, refused, refused-while-free, over-committed and the
//! answer times of each burst.
//!
//! ```sh
//! cargo build --release --workspace
//! target/release/fedvol-burst --slots 100 --clusters 4 --submits 100,400
//! ```
//!
//! It runs the `fedvol-agent` and `fedvol-coordinator` next to it (`target/<profile>/`, where
//! cargo builds them with the workspace) or in `--bin-dir`, and never builds anything.
//!
//! Exit codes: 0 when every burst committed min(N, S), refused the rest only once capacity was
//! gone, and over-committed nothing; 1 otherwise; 2 on bad arguments or a missing binary.

use std::process::ExitCode;

use clap::Parser;

use fedvol_tests::bins;
use fedvol_tests::burst::{BurstSpec, run};

/// Bursts of N concurrent submits on S one-job slots over C clusters (each cluster its own
/// fedvol-agent process; 2 coordinators; nats-server on loopback).
#[derive(Debug, Parser)]
#[command(name = "fedvol-burst", version)]
struct Cli {
    /// Free slots in the federation (S).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    slots: u64,
    /// Clusters (C).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=16))]
    clusters: u64,
    /// Burst sizes (N), comma-separated; one fresh federation each.
    #[arg(long, value_delimiter = ',', default_value = "100,400")]
    submits: Vec<usize>,
    /// Users the submits come from.
    #[arg(long, default_value_t = 8)]
    users: usize,
    /// Coordinators.
    #[arg(long, default_value_t = 2)]
    coordinators: usize,
    /// Directory of the `fedvol-agent` and `fedvol-coordinator` binaries to run (default: this
    /// executable's own directory, `target/<profile>/`). They are run as they are: nothing is
    /// built and nothing is written into a checkout.
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(dir) = cli.bin_dir.clone().or_else(bins::own_dir) else {
        eprintln!("fedvol-burst: cannot tell this executable's directory: pass --bin-dir");
        return ExitCode::from(2);
    };
    if let Err(e) = bins::use_given_dir(dir, &["fedvol-agent", "fedvol-coordinator"]) {
        eprintln!("fedvol-burst: {e}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fedvol-burst: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    for n in &cli.submits {
        let mut spec = BurstSpec::new(cli.slots as usize, cli.clusters as usize, *n);
        spec.users = cli.users;
        spec.coordinators = cli.coordinators;
        let report = rt.block_on(run(&spec));
        println!("{report}\n");
        let expect = (*n).min(spec.slots);
        ok &= report.committed == expect
            && report.refused == n - expect
            && report.refused_while_free == 0
            && report.over_committed() == 0
            && report.errors.is_empty();
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
