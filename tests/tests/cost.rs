//! The cost-aware cluster choice against real processes: a nats-server, two agents
//! whose inventories differ in their prices (and load), a coordinator. `fedvol submit
//! --prefer-cost` commits on the cheaper cluster although least loaded alone picks the other,
//! and `fedvol decisions show` explains the `cost` step with its figures; a coordinator whose
//! configuration says `choice: {cost: true}` applies it without the flag.

use std::process::Output;

use fedvol_tests::NatsServer;
use fedvol_tests::federation::{AgentProc, CoordinatorProc};

fn fedvol(nats: &NatsServer, args: &[&str]) -> Output {
    fedvol_tests::cli::fedvol_as(nats, "alice", args)
}

use fedvol_tests::cli::shown as text;

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", text(o)))
}

/// Cluster `name`: a hostpath provisioner `scratch` under `<dir>/scratch` at `gb_hour` per
/// GB-hour, zone `z1` (at `host_hour` per host-hour when given) with one host of 8 cores of
/// which `busy` are allocated.
fn priced(name: &str, dir: &std::path::Path, gb_hour: &str, host_hour: Option<&str>, busy: u32) -> String {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).expect("the scratch directory");
    let zone_cost = host_hour.map_or(String::new(), |c| format!("    hostCostPerHour: {c}\n"));
    format!(
        "cluster: {name}\nprovisioners:\n  scratch:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: all\n    costPerGbHour: {gb_hour}\nzones:\n  z1:\n{zone_cost}    hosts:\n      - {{name: h1, capacity: {{cpu: 8, memory: 32GiB, instances: 4}}, allocated: {{cpu: {busy}, memory: 1GiB}}}}\n",
        scratch.display()
    )
}

/// A 1 GB scratch volume and a job of one core, with `policy` added to the job.
fn workflow(dir: &std::path::Path, policy: &str) -> String {
    let p = dir.join("wf.yaml");
    std::fs::write(
        &p,
        format!(
            "version: v4\nvolumes:\n  scratch:\n    size: 1GB\njobs:\n  run:\n    image: {{uri: docker://alpine}}\n    mounts: {{/s: scratch}}\n    resource: {{cpu: {{cores: 1}}, memory: {{size: 1GiB}}}}\n{policy}"
        ),
    )
    .expect("the workflow file");
    p.display().to_string()
}

fn cost_step(decision: &serde_json::Value) -> Option<serde_json::Value> {
    decision["choice"]
        .as_array()
        .expect("choice steps")
        .iter()
        .find(|s| s["rule"] == "cost")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_cost_commits_on_the_cheaper_cluster_and_explains_why() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "3000", "--discovery-ms", "300"]).await;
    // `cheap` is busier (6 of 8 cores): least loaded picks `dear`.
    let _dear = AgentProc::start(&nats, 200, |d| priced("dear", d, "0.5", None, 0)).await;
    let cheap = AgentProc::start(&nats, 200, |d| priced("cheap", d, "0.1", None, 6)).await;
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["dear", "cheap"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow(dir.path(), "    policy: {timeout: {execute: 2h0m0s}}\n");

    // Without the option: the default order chooses `dear`, and no cost step is recorded.
    let o = fedvol(
        &nats,
        &["submit", &wf, "--dry-run", "--request-id", "plain", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = json(&o);
    assert_eq!(doc["decision"]["chosen_cluster"], "dear", "{}", text(&o));
    assert!(cost_step(&doc["decision"]).is_none(), "{}", text(&o));

    // With it: committed on `cheap`.
    let o = fedvol(&nats, &["submit", &wf, "--prefer-cost", "--request-id", "cost-1"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("state: committed") && out.contains("chosen cluster: cheap"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_dir(cheap.scratch()).unwrap().count(),
        1,
        "the volume was provisioned on cheap"
    );

    // decisions show -o json: the cost step with the figures, the estimates per cluster.
    let o = fedvol(&nats, &["decisions", "show", "cost-1", "-o", "json"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc = json(&o);
    let d = &doc["decision"];
    assert_eq!(d["chosen_cluster"], "cheap");
    let step = cost_step(d).expect("a cost step");
    assert_eq!(step["kept"], serde_json::json!(["cheap"]), "{step}");
    assert_eq!(step["dropped"][0]["candidate"], "dear");
    assert_eq!(step["dropped"][0]["reasons"][0]["code"], "not_chosen");
    assert_eq!(
        step["dropped"][0]["reasons"][0]["message"],
        "estimated cost 1.00 > 0.20 (cheap): storage 1 GB x 0.5/GB-h x 2 h (declared) = 1.00; \
         unpriced (counted 0): job(s) run"
    );
    assert_eq!(d["clusters"]["cheap"]["cost"]["total"], 0.2);
    assert_eq!(
        doc["request"]["choice"]["cost"], true,
        "the option is stored with the request"
    );

    // decisions show (table): the column, the chosen cluster's estimate and the step.
    let o = fedvol(&nats, &["decisions", "show", "cost-1"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for want in [
        "EST. COST",
        "estimated cost 0.20: storage 1 GB x 0.1/GB-h x 2 h (declared) = 0.20",
        "cost: kept [cheap], dropped:",
        "estimated cost 1.00 > 0.20 (cheap)",
    ] {
        assert!(out.contains(want), "missing {want:?}\n{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_configured_for_cost_applies_it_without_the_flag() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("coordinator.yaml");
    std::fs::write(&config, "choice: {cost: true, defaultHours: 3}\n").unwrap();
    let config = config.display().to_string();
    let _coord = CoordinatorProc::start(
        &nats,
        &["--config", &config, "--deadline-ms", "3000", "--discovery-ms", "300"],
    )
    .await;
    // The same storage price; hosts at 2 and 0.5 per hour, the cheap one busier.
    let _dear = AgentProc::start(&nats, 200, |d| priced("dear", d, "0.1", Some("2"), 0)).await;
    let _cheap = AgentProc::start(&nats, 200, |d| priced("cheap", d, "0.1", Some("0.5"), 6)).await;
    fedvol_tests::cli::wait_ready_as(&nats, "alice", &["dear", "cheap"]).await;
    let wf = workflow(dir.path(), "");

    let o = fedvol(&nats, &["submit", &wf, "--request-id", "by-config", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = json(&o);
    assert_eq!(doc["decision"]["chosen_cluster"], "cheap", "{}", text(&o));
    let step = cost_step(&doc["decision"]).expect("the configured cost step");
    // No timeout: the configured 3 default hours. dear: 1 x 0.1 x 3 + 1 x 2 x 3 = 6.30.
    assert_eq!(
        step["dropped"][0]["reasons"][0]["message"],
        "estimated cost 6.30 > 1.80 (cheap): storage 1 GB x 0.1/GB-h x 3 h (default) = 0.30; \
         hosts: run 1 x 2/h x 3 h (default) = 6.00"
    );
}
