//! Cost of one cluster's plan (the whole funnel: volume resolution and placement) against
//! synthetic clusters of 1k, 10k and 100k hosts with 100k existing persistent volumes.
//! Target: linear in hosts, at most 20 ms for 100k hosts on one core.
//!
//! Run: `cargo bench -p fedvol-common --bench plan`.

// A benchmark driver, not product code: a panic here is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
use fedvol_common::synth::{SynthSizes, cluster, workflow};

fn plan(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan_cluster");
    g.sample_size(20);
    for hosts in [1_000usize, 10_000, 100_000] {
        let inv = cluster(
            "bench",
            SynthSizes {
                hosts,
                provisioners: 20,
                volumes: 100_000,
            },
        );
        let req = PlanRequest::new("bench-1", workflow(2, 10), "u")
            .with_groups(["g"])
            .with_seed(7);
        let state = ClusterState::default();
        // Sanity: the plan must succeed, or the figure would measure an early exit.
        assert!(
            plan_cluster(&inv, &state, &req).feasible,
            "synthetic plan must be feasible"
        );
        g.throughput(Throughput::Elements(hosts as u64));
        g.bench_with_input(BenchmarkId::new("hosts", hosts), &inv, |b, inv| {
            b.iter(|| black_box(plan_cluster(black_box(inv), &state, &req)))
        });
    }
    g.finish();
}

criterion_group!(benches, plan);
criterion_main!(benches);
