//! What one cluster's plan costs the funnel, in process: no NATS, no agent, no encoding. One
//! cluster of the benchmark's shape (`fedvol-bench`'s inventory: 4 hostpath provisioners, 1,000
//! existing volumes, H hosts) and the benchmark's workflow (two jobs, one new volume), planned
//! N times per round on one thread with the stored trace limit, as an agent answers a
//! coordinator's plan. Prints the time per plan for each of 5 rounds.
//!
//! `cargo run --release -p fedvol-tests --example plan_loop -- [PLANS=2000] [HOSTS=1000]`
//!
//! Deterministic in what it plans (one request, one seed), so two builds compare on one machine
//! without the federation's noise (run them in turn, a few times, and compare the lowest
//! rounds); BENCHMARKS.md, "Submits (issue 39, eighth part)".

use std::time::Instant;

use fedvol_common::funnel::prepared::Prepared;
use fedvol_common::funnel::trace::STORED_TRACE_LIMIT;
use fedvol_common::funnel::{ClusterState, PlanRequest, plan_prepared};
use fedvol_tests::bench::inventory::{Shape, inventory};
use fedvol_tests::bench::workflow::{GROUP, USER, workflow};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("PLANS and HOSTS are numbers"))
        .collect();
    let plans = args.first().copied().unwrap_or(2000).max(1);
    let hosts = args.get(1).copied().unwrap_or(1000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shape = Shape {
        hosts,
        provisioners: 4,
        volumes: 1000,
    };
    let inv = inventory("c00", shape, &dir.path().join("storage")).expect("the bench's inventory");
    let wf = workflow().expect("the bench's workflow");
    let request = PlanRequest::new(String::from("loop"), wf, USER)
        .with_groups([GROUP])
        .with_seed(1)
        .with_trace_limit(STORED_TRACE_LIMIT);
    let state = ClusterState::default();
    let prepared = Prepared::new(&inv);
    let first = plan_prepared(&inv, &prepared, &state, &request);
    assert!(
        first.feasible,
        "the bench's workflow fits the bench's cluster: {first:?}"
    );
    println!(
        "{plans} plans per round, one cluster of {hosts} hosts (1,000 volumes, 4 provisioners), one thread, {} stage records",
        first.trace.len()
    );
    for round in 1..=5 {
        let t = Instant::now();
        for _ in 0..plans {
            std::hint::black_box(plan_prepared(&inv, &prepared, &state, &request));
        }
        println!(
            "round {round}: {:.1} us per plan",
            t.elapsed().as_secs_f64() * 1e6 / plans as f64
        );
    }
}
