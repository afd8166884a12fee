//! Times `whatif::run` on synthetic clusters, for profiling (`perf record`) and quick timing:
//! `cargo run --release -p fedvol-common --example whatif_synth -- CLUSTERS HOSTS DECISIONS THREADS`.
//!
//! Each decision is a plan of the synthetic workflow (its own request id and seed) recorded as
//! placed where the choice put it; the federation is planned as it is (the baseline) and with
//! the first cluster drained. Prints the time of each phase.

// A benchmark driver, not product code: a panic here is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use fedvol_common::funnel::PlanRequest;
use fedvol_common::synth::{SynthSizes, cluster, workflow};
use fedvol_common::whatif::{Federations, Member, Outcome, Recorded, View, run};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let clusters = args.first().copied().unwrap_or(16);
    let hosts = args.get(1).copied().unwrap_or(100);
    let decisions = args.get(2).copied().unwrap_or(10_000);
    let threads = args.get(3).copied().unwrap_or(1);
    let sizes = SynthSizes {
        hosts,
        provisioners: 4,
        volumes: 1000,
    };
    let inventories: Vec<_> = (0..clusters).map(|i| cluster(&format!("c{i:02}"), sizes)).collect();
    let t = Instant::now();
    let recorded: Vec<Recorded> = (0..decisions)
        .map(|i| {
            let req = PlanRequest::new(format!("r-{i}"), workflow(2, 1), "u").with_seed(i as u64 * 7919);
            let d = fedvol_common::offline::plan_locally(&inventories[..clusters.min(2)], &req);
            let c = d.chosen_cluster.clone().unwrap();
            Recorded {
                request_id: req.request_id.clone(),
                state: "completed".into(),
                project: "default".into(),
                was: Outcome::placed(&c, &d.clusters[&c]),
                own: None,
                run_as: Vec::new(),
                request: req,
                quota_today: None,
                quota_tried: None,
            }
        })
        .collect();
    eprintln!("recorded {decisions} in {:.2} s", t.elapsed().as_secs_f64());
    let views: Vec<View> = inventories
        .iter()
        .map(|i| View::new(i.cluster.clone(), i.clone()))
        .collect();
    let today: Vec<Member> = (0..views.len()).map(|view| Member { view, drained: false }).collect();
    let mut changed = today.clone();
    changed[0].drained = true;
    for (what, changed) in [("baseline", today.clone()), ("drain c00", changed)] {
        let fed = Federations {
            views: views.clone(),
            today: today.clone(),
            changed,
            changes: Default::default(),
            drains: Default::default(),
        };
        let t = Instant::now();
        let r = run(&fed, &recorded, threads, &AtomicBool::new(false)).unwrap();
        let s = t.elapsed().as_secs_f64();
        println!(
            "{what}: {decisions} decisions × {clusters} clusters of {hosts} hosts, {threads} thread(s): {s:.2} s ({:.1} µs per cluster plan), changed {}",
            s * 1e6 / (decisions * clusters) as f64,
            r.changed
        );
    }
}
