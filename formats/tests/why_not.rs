//! Tests of the why-not search on the example clusters (`fedvol_common::funnel::why_not`). They live in this crate because the core crate does
//! not depend on the file readers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fedvol_common::funnel::PlanRequest;
use fedvol_common::funnel::why_not::*;
use fedvol_common::model::Inventory;
use fedvol_formats::{load_inventory, load_workflow};

fn examples() -> (Vec<Inventory>, PlanRequest) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    let invs: Vec<Inventory> = ["cluster-a", "cluster-b", "cluster-c"]
        .iter()
        .map(|c| load_inventory(&root.join(format!("clusters/{c}.yaml"))).unwrap().value)
        .collect();
    let workflow = load_workflow(&root.join("workflows/scratch-fast.yaml")).unwrap().value;
    let req = PlanRequest::new("r", workflow, "alice")
        .with_groups(["researchers"])
        .with_seed(7)
        .with_trace_limit(5);
    (invs, req)
}

#[test]
fn the_record_says_how_a_host_lost_and_how_its_cluster_lost() {
    let (invs, req) = examples();
    let d = fedvol_common::offline::plan_locally(&invs, &req);
    let chosen = d.chosen_cluster.clone().unwrap();
    let loser = d.clusters.keys().find(|c| **c != chosen).unwrap().clone();
    // A host of the losing cluster that its placement policy did not pick.
    let lost_host = host_that_lost_the_policy(&d, &loser);
    let target = Target {
        host: Some(lost_host.clone()),
        ..Target::default()
    };
    let r = from_record(&d, &loser, &target);
    assert_eq!(r.blockers[0].stage, "host.choice", "{r:?}");
    let lost = r.cluster_choice.as_ref().expect("the cluster lost the choice");
    assert!(lost.stage.starts_with("cluster."), "{lost:?}");
    assert!(r.summary.contains("lost the cluster choice"), "{}", r.summary);
    assert_eq!(r.inventory_version, d.clusters[&loser].inventory_version);
    // The chosen host of the chosen cluster: chosen, not rejected.
    let host = d.clusters[&chosen].jobs.values().next().unwrap().host.clone().unwrap();
    let r = from_record(
        &d,
        &chosen,
        &Target {
            host: Some(host),
            ..Target::default()
        },
    );
    assert!(r.blockers.is_empty() && r.cluster_choice.is_none(), "{r:?}");
    assert_eq!(r.chosen_for.len(), 1, "{r:?}");
    assert!(r.summary.contains("chosen in cluster"), "{}", r.summary);
    // A cluster that took no part.
    assert!(from_record(&d, "nowhere", &target).summary.contains("took no part"));
}

#[test]
fn names_nobody_has_are_reported() {
    let (invs, _) = examples();
    let t = Target {
        zone: Some("atlantis".into()),
        host: Some(invs[0].zones[0].hosts[0].name.clone()),
        provisioner: Some("nope".into()),
    };
    assert_eq!(unknown_names(&invs[0], &t), ["zone `atlantis`", "provisioner `nope`"]);
}

#[test]
fn a_summarized_answer_says_its_listing_is_with_the_agent() {
    let (invs, req) = examples();
    let mut d = fedvol_common::offline::plan_locally(&invs, &req);
    let chosen = d.chosen_cluster.clone().unwrap();
    let loser = d.clusters.keys().find(|c| **c != chosen).unwrap().clone();
    let lost_host = host_that_lost_the_policy(&d, &loser);
    d.clusters.get_mut(&loser).unwrap().summarize();
    let r = from_record(
        &d,
        &loser,
        &Target {
            host: Some(lost_host),
            ..Target::default()
        },
    );
    assert!(r.blockers.is_empty(), "{r:?}");
    assert!(r.summary.contains("stored as a summary"), "{}", r.summary);
    assert!(r.summary.contains("lost the cluster choice"), "{}", r.summary);
}

/// A host of cluster `loser` that its placement policy did not pick (`host.choice`).
fn host_that_lost_the_policy(d: &fedvol_common::decision::Decision, loser: &str) -> String {
    d.clusters[loser]
        .trace
        .iter()
        .find(|t| t.stage == "host.choice")
        .and_then(|t| t.rejected.first())
        .map(|r| r.candidate.split_once('/').unwrap().1.to_string())
        .expect("a host lost the placement policy")
}
