//! Plans a synthetic cluster repeatedly, for profiling (`perf record`) and quick timing:
//! `cargo run --release -p fedvol-common --example plan_synth -- HOSTS VOLUMES ITERATIONS`.
//!
//! The inventory is prepared once ([`Prepared::new`], as the agent keeps it across plans) and
//! every plan reuses it; `prepare=` is the best time of preparing it. `FEDVOL_PREPARE=each`
//! prepares it again for every plan (`plan_cluster`, what a one-off plan pays).

// A benchmark driver, not product code: a panic here is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use fedvol_common::funnel::{ClusterState, PlanRequest, Prepared, plan_cluster, plan_prepared};
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
    let each = std::env::var("FEDVOL_PREPARE").is_ok_and(|v| v == "each");
    let mut prepare = f64::MAX;
    let mut prepared = Prepared::new(&inv);
    for _ in 0..iterations.clamp(1, 5) {
        let t = Instant::now();
        prepared = Prepared::new(&inv);
        prepare = prepare.min(t.elapsed().as_secs_f64() * 1e3);
    }
    let plan = |inv| {
        if each {
            plan_cluster(inv, &state, &req)
        } else {
            plan_prepared(inv, &prepared, &state, &req)
        }
    };
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..iterations {
        let t = Instant::now();
        let d = plan(&inv);
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        bytes = serde_json::to_vec(&d).map(|v| v.len()).unwrap_or(0);
    }
    let how = if each { " (prepared each plan)" } else { "" };
    println!(
        "hosts={hosts} volumes={volumes} best={best:.2} ms{how} prepare={prepare:.2} ms decision_json={bytes} bytes"
    );
    // FEDVOL_DUMP=<path> writes the last decision there (to see where its bytes go).
    if let Ok(path) = std::env::var("FEDVOL_DUMP") {
        let d = plan(&inv);
        let json = serde_json::to_vec_pretty(&d).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("{path}: {e}");
        }
    }
}
