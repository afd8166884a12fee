//! The Slurm inventory source against a real Slurm: Debian's slurmctld, two slurmd
//! and munged on loopback (`fedvol_tests::slurm`), a real nats-server and a real `fedvol-agent`
//! with `inventorySource: slurm`, refreshing every 500 ms.

use fedvol_tests::shipped::LoggedIn;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fedvol_common::funnel::PlanRequest;
use fedvol_common::model::{Inventory, PowerState};
use fedvol_formats::parse_workflow_str;
use fedvol_proto::agent::{AgentOp, Heartbeat, InventoryReply, PlanMsg, PlanReply, StatusReply};
use fedvol_proto::{NoArgs, Subjects, now_ms};
use fedvol_tests::federation::CoordinatorProc;
use fedvol_tests::slurm::SlurmCluster;
use fedvol_tests::{NatsServer, Spawned, versioned_body};
use futures::StreamExt;

const CLUSTER: &str = "slurm-a";

/// The agent's files ([`fedvol_cli::devslurm::agent_files`]: one shared hostpath
/// provisioner, no zones; Slurm read every 500 ms, `gpu` first and BINPACK), with its state in
/// `dir/data` and a heartbeat every 200 ms.
fn agent_files(dir: &Path, slurm: &SlurmCluster) -> std::path::PathBuf {
    agent_files_every(dir, slurm, 500)
}

/// [`agent_files`] reading Slurm every `refresh_ms`.
fn agent_files_every(dir: &Path, slurm: &SlurmCluster, refresh_ms: u64) -> std::path::PathBuf {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let (inventory, config) = fedvol_cli::devslurm::agent_files(CLUSTER, &slurm.conf(), &scratch, refresh_ms);
    std::fs::write(dir.join("inventory.yaml"), inventory).unwrap();
    let cfg = dir.join("agent.yaml");
    std::fs::write(
        &cfg,
        format!(
            "{config}dataDir: data
heartbeatMs: 200
"
        ),
    )
    .unwrap();
    cfg
}

async fn start_agent(nats: &NatsServer, cfg: &Path) -> Spawned {
    let mut a = Spawned::bin(
        "fedvol-agent",
        [
            "--config",
            &cfg.display().to_string(),
            "--nats",
            &nats.url(),
            "--init",
            // A new cluster: nothing for a coordinator to restore (fedvol_agent::restore_gate).
            "--restore-wait-ms",
            "0",
        ],
    );
    a.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    a
}

async fn ask<T: serde::de::DeserializeOwned>(
    client: &async_nats::Client,
    op: AgentOp,
    body: &impl serde::Serialize,
) -> T {
    fedvol_tests::load::call(
        client,
        &Subjects::default().cluster(CLUSTER, op),
        versioned_body(body),
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

/// Calls `f` every 100 ms until it gives `Some`, or `None` after `timeout`.
async fn poll<T, F: std::future::Future<Output = Option<T>>>(timeout: Duration, mut f: impl FnMut() -> F) -> Option<T> {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn inventory(client: &async_nats::Client) -> InventoryReply {
    ask(client, AgentOp::Inventory, &NoArgs {}).await
}

async fn status(client: &async_nats::Client) -> StatusReply {
    ask(client, AgentOp::Status, &NoArgs {}).await
}

/// A one-job workflow: `cores` cores and 1 GiB on a host with tag `constraint`.
fn workflow_text(cores: u64, constraint: &str) -> String {
    format!(
        "version: v4\nvolumes:\n  scratch: {{size: 1MiB}}\njobs:\n  j:\n    image: {{uri: docker://a}}\n    mounts: {{/s: scratch}}\n    resource: {{cpu: {{cores: {cores}}}, memory: {{size: 1GiB}}}}\n    constraints: [\"{constraint}\"]\n"
    )
}

/// `fedvol ARGS` as user `u` against `nats`: stdout and stderr together.
fn fedvol_cli(nats: &NatsServer, args: &[&str]) -> String {
    let url = nats.url();
    let mut all = vec!["--nats", url.as_str(), "-u", "u"];
    all.extend_from_slice(args);
    let o = std::process::Command::new(fedvol_tests::bin_path("fedvol"))
        .args(&all)
        .env_remove("FEDVOL_OUTPUT")
        .env_remove("FEDVOL_USER")
        .logged_in()
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Plans [`workflow_text`] on the agent (no hold).
async fn plan(client: &async_nats::Client, id: &str, cores: u64, constraint: &str) -> PlanReply {
    let text = workflow_text(cores, constraint);
    let msg = PlanMsg {
        request: PlanRequest::new(id, parse_workflow_str("wf.yaml", "wf", &text).unwrap().value, "u")
            .with_seed(1)
            .with_trace_limit(50),
        deadline_ms: now_ms() + 10_000,
        reserve: false,
        ttl_ms: 0,
    };
    ask(client, AgentOp::Plan, &msg).await
}

fn host<'a>(inv: &'a Inventory, name: &str) -> (&'a str, &'a fedvol_common::model::Host) {
    inv.zones
        .iter()
        .flat_map(|z| z.hosts.iter().map(move |h| (z.name.as_str(), h.as_ref())))
        .find(|(_, h)| h.name == name)
        .unwrap_or_else(|| panic!("host {name} not in the agent's inventory: {inv:#?}"))
}

/// `scontrol -d -o --future show node`, read here with a plain split (the fields compared have
/// no spaces), independently of the agent's reader.
fn scontrol_nodes(slurm: &SlurmCluster) -> Vec<BTreeMap<String, String>> {
    slurm
        .run("scontrol", &["-d", "-o", "--future", "show", "node"])
        .lines()
        .filter(|l| l.starts_with("NodeName="))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn assert_matches_scontrol(inv: &Inventory, slurm: &SlurmCluster) {
    let nodes = scontrol_nodes(slurm);
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    let hosts: usize = inv.zones.iter().map(|z| z.hosts.len()).sum();
    assert_eq!(hosts, nodes.len(), "one host per node");
    for n in &nodes {
        let (_, h) = host(inv, &n["NodeName"]);
        let mib = |k: &str| u128::from(n[k].parse::<u64>().unwrap()) << 20;
        assert_eq!(h.capacity.cpu, n["CPUTot"].parse::<u64>().unwrap(), "{}", h.name);
        assert_eq!(h.capacity.memory.0, mib("RealMemory"), "{}", h.name);
        assert_eq!(h.allocated.cpu, n["CPUAlloc"].parse::<u64>().unwrap(), "{}", h.name);
        assert_eq!(h.allocated.memory.0, mib("AllocMem"), "{}", h.name);
        let state = n["State"].as_str();
        let on = ["IDLE", "MIXED", "ALLOCATED"].contains(&state);
        assert_eq!(h.power == PowerState::On, on, "{} is {state}", h.name);
        let tags: Vec<String> = h.tags.iter().map(ToString::to_string).collect();
        for f in n["ActiveFeatures"].split(',').filter(|f| *f != "(null)") {
            assert!(tags.contains(&f.to_string()), "{}: feature {f} not in {tags:?}", h.name);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_follows_slurm_nodes_drain_and_jobs() {
    let slurm = SlurmCluster::start().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&nats, &agent_files(dir.path(), &slurm)).await;
    let client = nats.client().await;

    // The agent's inventory matches `scontrol show node`, partitions are zones.
    let inv = inventory(&client).await.inventory;
    assert_matches_scontrol(&inv, &slurm);
    let zones: Vec<&str> = inv.zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(zones, ["gpu", "batch", "maint"], "configured partitions first");
    let (zone, n1) = host(&inv, "n1");
    assert_eq!(zone, "gpu", "n1 is in batch and gpu: gpu is listed first");
    assert_eq!(n1.capacity.devices["nvidia.com/gpu"], 2);
    assert!(n1.tags.iter().any(|t| t.to_string() == "gpu:a100"));
    assert_eq!(inv.zones[0].priority, 1);
    assert_eq!(inv.zones[1].priority, -1, "batch: -PriorityTier");
    assert_eq!(host(&inv, "n3").1.power, PowerState::Off, "FUTURE");
    assert_eq!(host(&inv, "n4").1.power, PowerState::Off, "DOWN");
    let st = status(&client).await;
    let src = st.source.expect("the source's status");
    assert_eq!(src.source, "slurm");
    assert!(src.read_ms > 0 && src.error.is_none(), "{src:?}");

    // An amd job fits n2 only; an intel job of 3 cores fits n1.
    let p = plan(&client, "amd-1", 2, "amd").await;
    assert_eq!(p.decision.jobs["j"].host.as_deref(), Some("n2"), "{:?}", p.decision);
    assert_eq!(p.decision.resource_manager.as_deref(), Some("slurm"));
    assert_eq!(
        p.decision.runner_args("j").as_deref(),
        Some("--partition=batch --nodelist=n2")
    );
    let p = plan(&client, "intel-1", 3, "intel").await;
    assert_eq!(p.decision.jobs["j"].host.as_deref(), Some("n1"), "{:?}", p.decision);

    // Draining n2 takes it out of the next plan within the refresh interval (500 ms; 5 s
    // allowed for a loaded machine).
    let before = inv.version.clone();
    slurm.run("scontrol", &["update", "nodename=n2", "state=drain", "reason=test"]);
    let inv = poll(Duration::from_secs(5), || async {
        let i = inventory(&client).await.inventory;
        (host(&i, "n2").1.power == PowerState::Off).then_some(i)
    })
    .await
    .expect("n2 off after the drain");
    assert_ne!(inv.version, before, "the inventory version changes with Slurm's state");
    assert_matches_scontrol(&inv, &slurm);
    let p = plan(&client, "amd-2", 2, "amd").await;
    assert!(!p.decision.feasible, "a drained node is no host: {:?}", p.decision.jobs);
    let err = p.decision.jobs["j"].error.as_ref().expect("why the job has no host");
    assert!(!err.message.is_empty());
    slurm.run("scontrol", &["update", "nodename=n2", "state=resume"]);

    // A running job on n1 (2 of its 4 CPUs, 1000 MiB) reduces its free capacity: 3 cores no
    // longer fit there.
    let job = slurm.run_job(&["-w", "n1", "-p", "gpu", "-c", "2", "--mem=1000"]).await;
    let inv = poll(Duration::from_secs(5), || async {
        let i = inventory(&client).await.inventory;
        (host(&i, "n1").1.allocated.cpu == 2).then_some(i)
    })
    .await
    .expect("n1's allocation seen");
    assert_eq!(host(&inv, "n1").1.allocated.memory.0, 1000u128 << 20);
    assert_matches_scontrol(&inv, &slurm);
    let p = plan(&client, "intel-2", 3, "intel").await;
    assert!(
        !p.decision.feasible,
        "3 cores on n1 with 2 of 4 allocated: {:?}",
        p.decision.jobs
    );
    let p = plan(&client, "intel-3", 2, "intel").await;
    assert_eq!(p.decision.jobs["j"].host.as_deref(), Some("n1"), "2 cores still fit");
    slurm.run("scancel", &[&job]);
    drop(agent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurm_unreachable_keeps_the_last_inventory_and_degrades() {
    let mut slurm = SlurmCluster::start().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&nats, &agent_files(dir.path(), &slurm)).await;
    let _coordinator = CoordinatorProc::start(&nats, &[]).await;
    let client = nats.client().await;
    let good = inventory(&client).await.inventory;
    assert_eq!(good.zones.iter().map(|z| z.hosts.len()).sum::<usize>(), 4);
    let mut beats = client.subscribe(Subjects::default().heartbeat(CLUSTER)).await.unwrap();

    slurm.stop_controller();
    // A heartbeat says the cluster is degraded.
    let degraded = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let m = beats.next().await.expect("heartbeats");
            let hb: Heartbeat = fedvol_proto::decode(&m.payload, "heartbeat", "test").unwrap();
            if let Some(d) = hb.degraded {
                return d;
            }
        }
    })
    .await
    .expect("a degraded heartbeat");
    assert!(degraded.starts_with("slurm unreadable"), "{degraded}");
    // Status says why; the last good inventory keeps serving, unchanged.
    let st = status(&client).await;
    let src = st.source.unwrap();
    assert!(src.error.is_some() && src.failures >= 1, "{src:?}");
    let inv = inventory(&client).await.inventory;
    assert_eq!(inv.version, good.version);
    assert_eq!(inv.zones, good.zones);
    let p = plan(&client, "while-down", 2, "amd").await;
    assert_eq!(p.decision.jobs["j"].host.as_deref(), Some("n2"), "plans still served");
    assert!(agent.log().contains("Slurm could not be read"), "{}", agent.log());
    // The coordinator's cluster view shows it.
    let shown = poll(Duration::from_secs(5), || async {
        let r = fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Clusters>(
            &client,
            "u",
            &NoArgs {},
            Duration::from_secs(5),
        )
        .await
        .ok()?;
        r.clusters.into_iter().find(|c| c.name == CLUSTER)?.degraded
    })
    .await;
    assert!(shown.is_some(), "the coordinator does not show the cluster degraded");

    // `fedvol clusters` says so; a submitted workflow's decision tells the runner where to run.
    let o = fedvol_cli(&nats, &["clusters"]);
    assert!(o.contains(&format!("{CLUSTER} is degraded: slurm unreadable")), "{o}");
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, workflow_text(2, "amd")).unwrap();
    let o = fedvol_cli(&nats, &["submit", &wf.display().to_string(), "--request-id", "slurm-1"]);
    assert!(o.contains("committed") || o.contains(CLUSTER), "{o}");
    let o = fedvol_cli(&nats, &["decisions", "show", "slurm-1"]);
    assert!(o.contains("sbatch --partition=batch --nodelist=n2"), "{o}");

    // Slurm back: the degradation clears.
    slurm.start_controller();
    let back = poll(Duration::from_secs(10), || async {
        status(&client).await.source.filter(|s| s.error.is_none())
    })
    .await;
    assert!(back.is_some(), "the source did not recover: {}", agent.log());
    assert!(agent.log().contains("Slurm answers again"));
    assert!(!agent.log().contains("panicked"));
}

/// On demand: with a refresh interval of ten minutes, SIGHUP reads Slurm at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reads_slurm_at_once() {
    let slurm = SlurmCluster::start().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&nats, &agent_files_every(dir.path(), &slurm, 600_000)).await;
    let client = nats.client().await;
    let before = inventory(&client).await.inventory;
    assert_eq!(host(&before, "n2").1.power, PowerState::On);
    slurm.run("scontrol", &["update", "nodename=n2", "state=drain", "reason=test"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = inventory(&client).await.inventory;
    assert_eq!(still.version, before.version, "no reading before the interval");
    agent.signal(nix::sys::signal::Signal::SIGHUP);
    let after = poll(Duration::from_secs(5), || async {
        let i = inventory(&client).await.inventory;
        (host(&i, "n2").1.power == PowerState::Off).then_some(i)
    })
    .await
    .expect("n2 off after SIGHUP");
    assert_ne!(after.version, before.version);
    let p = plan(&client, "after-hup", 2, "amd").await;
    assert!(!p.decision.feasible, "{:?}", p.decision.jobs);
}
