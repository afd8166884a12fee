//! Cost of one cluster's plan (the whole funnel: volume resolution and placement) against
//! synthetic clusters of 1k, 10k and 100k hosts with 100k existing persistent volumes, on an
//! inventory prepared once and reused across plans (as the agent keeps it:
//! `funnel::plan_prepared`), and the cost of preparing it (`Prepared::new`, paid when the
//! inventory loads or reloads). Target: linear in hosts, at most 5 ms for 100k hosts on one core.
//!
//! Run: `cargo bench -p fedvol-common --bench plan`.

// A benchmark driver, not product code: a panic here is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fedvol_common::funnel::{ClusterState, PlanRequest, Prepared, plan_cluster, plan_prepared};
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
        let prepared = Prepared::new(&inv);
        // Sanity: the plan must succeed, or the figure would measure an early exit; and the
        // prepared form must give the one-off plan's decision.
        let once = plan_cluster(&inv, &state, &req);
        assert!(once.feasible, "synthetic plan must be feasible");
        assert_eq!(plan_prepared(&inv, &prepared, &state, &req), once);
        g.throughput(Throughput::Elements(hosts as u64));
        g.bench_with_input(BenchmarkId::new("hosts", hosts), &inv, |b, inv| {
            b.iter(|| black_box(plan_prepared(black_box(inv), &prepared, &state, &req)))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("prepare");
    g.sample_size(10);
    let inv = cluster(
        "bench",
        SynthSizes {
            hosts: 100_000,
            provisioners: 20,
            volumes: 100_000,
        },
    );
    g.bench_function(BenchmarkId::new("hosts", 100_000), |b| {
        b.iter(|| black_box(Prepared::new(black_box(&inv))))
    });
    g.finish();
}

criterion_group!(benches, plan);
criterion_main!(benches);
