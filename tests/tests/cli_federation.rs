//! The `fedvol` CLI against a live federation: nats-server, a coordinator and two agents as
//! real processes; every federation command run as a user would.

use std::process::{Command, Output};
use std::time::Duration;

use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::{NatsServer, Spawned, bin_path};

fn fedvol(nats: &NatsServer, args: &[&str]) -> Output {
    let url = nats.url();
    let mut all = vec!["--nats", url.as_str(), "-u", "alice"];
    all.extend_from_slice(args);
    Command::new(bin_path("fedvol"))
        .args(&all)
        .env_remove("FEDVOL_OUTPUT")
        .env_remove("FEDVOL_USER")
        .output()
        .expect("fedvol runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const WORKFLOW: &str = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_federation_command_works_against_a_live_federation() {
    let nats = NatsServer::start();
    let _coord = CoordinatorProc::start(&nats, &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    // Cluster `big` has room; cluster `none` grants nobody the scratch provisioner.
    let big = AgentProc::start(&nats, 200, |d| slots_inventory("big", 2, d, "all")).await;
    let _none = AgentProc::start(&nats, 200, |d| slots_inventory("none", 2, d, "[physics]")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // clusters: both known and alive.
    let mut listed = false;
    for _ in 0..50 {
        let o = fedvol(&nats, &["clusters"]);
        let (out, _) = text(&o);
        if o.status.success() && out.contains("big") && out.contains("none") {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed, "fedvol clusters lists both clusters");

    // submit: exit 0, the table names the chosen cluster and why the other lost.
    let o = fedvol(&nats, &["submit", &wf, "--request-id", "cli-1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("state: committed"), "{out}");
    assert!(out.contains("chosen cluster: big"), "{out}");
    assert!(out.contains("why not:") && out.contains("permission denied"), "{out}");
    assert_eq!(
        std::fs::read_dir(big.scratch()).unwrap().count(),
        1,
        "the volume directory exists"
    );

    // decisions list / show (json).
    let (out, _) = text(&fedvol(&nats, &["decisions", "list"]));
    assert!(out.contains("cli-1") && out.contains("committed"), "{out}");
    let o = fedvol(&nats, &["decisions", "show", "cli-1", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(doc["decision"]["chosen_cluster"], "big");
    assert_eq!(doc["decision"]["clusters"]["none"]["status"], "answered");
    assert_eq!(doc["decision"]["clusters"]["none"]["feasible"], false);

    // why-not: the other cluster's provisioner, with the permission reason.
    let o = fedvol(
        &nats,
        &["why-not", "cli-1", "--cluster", "none", "--provisioner", "scratch"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("provisioner.permission") && out.contains("permission_denied"),
        "{out}"
    );

    // replay: identical.
    let (out, err) = text(&fedvol(&nats, &["decisions", "replay", "cli-1"]));
    assert!(out.contains("identical"), "{out}\n{err}");

    // watch: sees the completion as a new revision.
    let url = nats.url();
    let mut watch = Spawned::bin("fedvol", ["--nats", url.as_str(), "decisions", "watch"]);
    watch.wait_for_log("cli-1", Duration::from_secs(10)).await;
    let o = fedvol(&nats, &["complete", "cli-1"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("state: completed"), "{out}");
    assert_eq!(
        std::fs::read_dir(big.scratch()).unwrap().count(),
        0,
        "reclaim policy Delete removed it"
    );
    watch.wait_for_log("completed", Duration::from_secs(10)).await;

    // Nothing fits: exit 2, the decision still printed.
    let o = fedvol(
        &nats,
        &["submit", &wf, "--request-id", "cli-2", "--dry-run", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "a dry run that fits");
    let big_wf = dir.path().join("big.yaml");
    std::fs::write(&big_wf, WORKFLOW.replace("cores: 8", "cores: 64")).unwrap();
    let o = fedvol(
        &nats,
        &["submit", &big_wf.display().to_string(), "--request-id", "cli-3"],
    );
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("chosen cluster: none"), "{out}");
}

#[test]
fn without_a_coordinator_or_nats_the_cli_says_so_in_one_line() {
    let nats = NatsServer::start();
    let o = fedvol(&nats, &["clusters"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("no coordinator is answering"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = Command::new(bin_path("fedvol"))
        .args(["--nats", "nats://127.0.0.1:1", "clusters"])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("cannot connect to NATS"), "{err}");
}
