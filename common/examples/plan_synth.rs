//! Plans a synthetic cluster repeatedly, for profiling (`perf record`) and quick timing:
//! `cargo run --release -p fedvol-common --example plan_synth -- HOSTS VOLUMES ITERATIONS`.

// A benchmark driver, not product code: a panic here is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
use fedvol_common::synth::{SynthSizes, cluster, workflow};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let hosts = args.first().copied().unwrap_or(100_000);
    let volumes = args.get(1).copied().unwrap_or(100_000);
    let iterations = args.get(2).copied().unwrap_or(20);
    let inv = cluster(
        "synth",
        SynthSizes {
            hosts,
            provisioners: 20,
            volumes,
        },
    );
    let req = PlanRequest::new("profile-1", workflow(2, 10), "u")
        .with_seed(7)
        .with_trace_limit(
            std::env::var("FEDVOL_TRACE_LIMIT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(fedvol_common::funnel::trace::DEFAULT_TRACE_LIMIT),
        );
    let state = ClusterState::default();
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..iterations {
        let t = Instant::now();
        let d = plan_cluster(&inv, &state, &req);
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        bytes = serde_json::to_vec(&d).map(|v| v.len()).unwrap_or(0);
    }
    println!("hosts={hosts} volumes={volumes} best={best:.2} ms decision_json={bytes} bytes");
    // FEDVOL_DUMP=<path> writes the last decision there (to see where its bytes go).
    if let Ok(path) = std::env::var("FEDVOL_DUMP") {
        let d = plan_cluster(&inv, &state, &req);
        let json = serde_json::to_vec_pretty(&d).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("{path}: {e}");
        }
    }
}
