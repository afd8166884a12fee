//! `fedvol plan --prefer-cost`, offline: two clusters whose inventories differ only
//! in their prices and load; the `cost` step picks the cheaper one, although least loaded
//! alone would not, and says why with the figures.

// Test support: a panic here is a failed test (unwrap/expect are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

/// A cluster with a priced hostpath provisioner and one zone whose only host has `allocated`
/// cores of 8 in use; `host_cost` adds the zone's `hostCostPerHour`.
fn cluster(name: &str, gb_hour: &str, allocated: u32, host_cost: Option<&str>) -> String {
    let zone_cost = host_cost.map_or(String::new(), |c| format!("    hostCostPerHour: {c}\n"));
    format!(
        "cluster: {name}
provisioners:
  scratch:
    driver: {{type: hostpath, path: /mnt/scratch}}
    ephemeral: all
    costPerGbHour: {gb_hour}
zones:
  z1:
{zone_cost}    hosts:
      - name: h1
        capacity: {{cpu: 8, memory: 32GiB, instances: 4}}
        allocated: {{cpu: {allocated}, memory: 1GiB}}
"
    )
}

/// A 10 GB scratch volume and a job that may run 2 hours.
const WORKFLOW: &str = "\
version: v4
volumes:
  scratch:
    size: 10GB
jobs:
  run:
    image: {uri: docker://alpine:3.20}
    command: [\"true\"]
    policy: {timeout: {execute: 2h0m0s}}
    mounts:
      /scratch: scratch
";

fn plan(dir: &std::path::Path, extra: &[&str]) -> Run {
    let mut args = vec!["plan", "-i", "dear.yaml", "-i", "cheap.yaml"];
    args.extend_from_slice(extra);
    args.push("wf.yaml");
    fedvol_in(Some(dir), &args)
}

#[test]
fn prefer_cost_picks_the_cheaper_cluster_and_explains_it() {
    let tmp = tempfile::tempdir().unwrap();
    // cheap is busier (6 of 8 cores in use), so least loaded alone picks dear.
    write(tmp.path(), "dear.yaml", &cluster("dear", "0.5", 0, None));
    write(tmp.path(), "cheap.yaml", &cluster("cheap", "0.1", 6, None));
    write(tmp.path(), "wf.yaml", WORKFLOW);

    let plain = plan(tmp.path(), &["-o", "json"]);
    assert_eq!(plain.code, 0, "{}", plain.describe());
    let doc = plain.json();
    assert_eq!(doc["chosen_cluster"], "dear", "{}", plain.describe());
    let rules: Vec<&str> = doc["choice"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rule"].as_str().unwrap())
        .collect();
    assert!(!rules.contains(&"cost"), "no cost step unless asked: {rules:?}");
    // The estimate is in the document either way: 10 GB x 0.1 x 2 h.
    assert_eq!(
        doc["clusters"]["cheap"]["cost"]["total"], 2.0,
        "{}",
        doc["clusters"]["cheap"]["cost"]
    );
    assert_eq!(doc["clusters"]["dear"]["cost"]["hours_from"], "declared");

    let json = plan(tmp.path(), &["--prefer-cost", "-o", "json"]);
    assert_eq!(json.code, 0, "{}", json.describe());
    let doc = json.json();
    assert_eq!(doc["chosen_cluster"], "cheap", "{}", json.describe());
    let step = doc["choice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == "cost")
        .unwrap();
    assert_eq!(step["kept"], serde_json::json!(["cheap"]));
    assert_eq!(step["dropped"][0]["candidate"], "dear");
    assert_eq!(step["dropped"][0]["reasons"][0]["code"], "not_chosen");
    assert_eq!(
        step["dropped"][0]["reasons"][0]["message"],
        "estimated cost 10.00 > 2.00 (cheap): storage 10 GB x 0.5/GB-h x 2 h (declared) = 10.00; \
         unpriced (counted 0): job(s) run"
    );
    let cost = &doc["clusters"]["cheap"]["cost"];
    assert_eq!(cost["volumes"]["scratch"]["capacity"], 10_000_000_000u64);
    assert_eq!(cost["volumes"]["scratch"]["cost_per_gb_hour"], 0.1);

    let table = plan(tmp.path(), &["--prefer-cost"]);
    assert_eq!(table.code, 0, "{}", table.describe());
    for want in [
        "EST. COST",
        "chosen cluster: cheap",
        "estimated cost 2.00: storage 10 GB x 0.1/GB-h x 2 h (declared) = 2.00",
        "cost: kept [cheap], dropped:",
        "estimated cost 10.00 > 2.00 (cheap)",
    ] {
        assert!(table.stdout.contains(want), "missing {want:?}\n{}", table.describe());
    }
}

#[test]
fn host_prices_and_default_hours_count() {
    let tmp = tempfile::tempdir().unwrap();
    // Same storage price; dear's hosts cost 3 per hour, cheap's 1.
    write(tmp.path(), "dear.yaml", &cluster("dear", "0.1", 0, Some("3")));
    write(tmp.path(), "cheap.yaml", &cluster("cheap", "0.1", 6, Some("1")));
    write(
        tmp.path(),
        "wf.yaml",
        &WORKFLOW.replace("    policy: {timeout: {execute: 2h0m0s}}\n", ""),
    );
    let run = plan(tmp.path(), &["--prefer-cost", "--cost-hours", "4", "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.describe());
    let doc = run.json();
    assert_eq!(doc["chosen_cluster"], "cheap", "{}", run.describe());
    let step = doc["choice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == "cost")
        .unwrap();
    // No timeout: 4 default hours. dear: 10 x 0.1 x 4 + 1 x 3 x 4 = 16; cheap: 4 + 4 = 8.
    assert_eq!(
        step["dropped"][0]["reasons"][0]["message"],
        "estimated cost 16.00 > 8.00 (cheap): storage 10 GB x 0.1/GB-h x 4 h (default) = 4.00; \
         hosts: run 1 x 3/h x 4 h (default) = 12.00"
    );
}

#[test]
fn cost_hours_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "dear.yaml", &cluster("dear", "0.5", 0, None));
    write(tmp.path(), "cheap.yaml", &cluster("cheap", "0.1", 6, None));
    write(tmp.path(), "wf.yaml", WORKFLOW);
    let zero = plan(tmp.path(), &["--prefer-cost", "--cost-hours", "0"]);
    assert_ne!(zero.code, 0, "{}", zero.describe());
    assert!(
        zero.stderr.contains("default hours must be a number > 0"),
        "{}",
        zero.describe()
    );
    let alone = plan(tmp.path(), &["--cost-hours", "2"]);
    assert_ne!(alone.code, 0, "{}", alone.describe());
    assert!(alone.stderr.contains("--prefer-cost"), "{}", alone.describe());
}
