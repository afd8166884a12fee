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
    let (inventory, config) = fedvol_cli::devslurm::agent_files(CLUSTER, &slurm.conf(), &scratch, refresh_ms, None);
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

/// The agent of `cfg`, started with `--init` and the restore gate as shipped (the
/// coordinator restores the new cluster, with nothing to restore, on its first heartbeat).
async fn start_agent(nats: &NatsServer, cfg: &Path) -> Spawned {
    start_agent_with(nats, cfg, &[]).await
}

/// [`start_agent`] for a test with no coordinator: nothing would restore the fresh state, so
/// the agent admits plans and commits at once (`--restore-wait-ms 0`).
async fn start_agent_alone(nats: &NatsServer, cfg: &Path) -> Spawned {
    start_agent_with(nats, cfg, &["--restore-wait-ms", "0"]).await
}

async fn start_agent_with(nats: &NatsServer, cfg: &Path, extra: &[&str]) -> Spawned {
    let cfg = cfg.display().to_string();
    let url = nats.url();
    let mut args = vec!["--config", cfg.as_str(), "--nats", url.as_str(), "--init"];
    args.extend_from_slice(extra);
    let mut a = Spawned::bin("fedvol-agent", args);
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
        summary: false,
        dry_run: false,
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
    let agent = start_agent_alone(&nats, &agent_files(dir.path(), &slurm)).await;
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
    let agent = start_agent_alone(&nats, &agent_files_every(dir.path(), &slurm, 600_000)).await;
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

// ---------------------------------------------------------------------------------------------
// Committed workflows run on Slurm (`slurm.jobs`): submitted at commit, followed, completed by
// themselves.

/// The Unix account the jobs of these tests' user `u` run as (jobs run as their user's
/// account, which the test creates when missing: [`fedvol_tests::slurm::account`]).
const JOB_USER: &str = "u";

/// The agent's files with `slurm.jobs` (run directly, job states read every 300 ms, each
/// request's working directory and output under `dir/work/<account>`), and a second
/// provisioner `keep` whose volumes are retained. The volume bases and `dir/work` are sticky
/// directories every job account may create entries in, as docs/deploying.md tells an
/// operator; account `u` (the tests' user) is made when missing.
fn running_agent_files(dir: &Path, slurm: &SlurmCluster) -> std::path::PathBuf {
    fedvol_tests::slurm::account(JOB_USER);
    let cfg = agent_files(dir, slurm);
    let keep = dir.join("keep");
    for base in [dir.join("scratch"), keep.clone(), dir.join("work"), marks(dir)] {
        fedvol_tests::slurm::shared_base(&base);
    }
    let inv = std::fs::read_to_string(dir.join("inventory.yaml")).unwrap();
    std::fs::write(
        dir.join("inventory.yaml"),
        format!(
            "{inv}  keep:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: all\n    create: all\n    access: all\n    reclaimPolicy: Retain\n",
            keep.display()
        ),
    )
    .unwrap();
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "slurm:\n",
        &format!(
            "slurm:\n  jobs:\n    run: directly\n    pollMs: 300\n    workDir: '{}/%u'\n",
            dir.join("work").display()
        ),
    ) + "metricsListen: 127.0.0.1:0\n";
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// A directory under `dir` where jobs (running as their accounts) leave marker files for the
/// test to find.
fn marks(dir: &Path) -> std::path::PathBuf {
    dir.join("marks")
}

/// `fedvol ARGS` as user `u`: exit code, stdout and stderr together.
fn fedvol_code(nats: &NatsServer, args: &[&str]) -> (i32, String) {
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
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The stored decision `id` as `fedvol decisions show -o json` prints it (`Null` while none is
/// stored).
fn shown(nats: &NatsServer, id: &str) -> serde_json::Value {
    let (code, out) = fedvol_code(nats, &["decisions", "show", id, "-o", "json"]);
    if code != 0 {
        assert!(out.contains("no decision is stored"), "{out}");
        return serde_json::Value::Null;
    }
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The jobs of the committed attempt of a shown decision, by job name.
fn jobs_of(d: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    d["attempts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .rev()
        .find(|a| a["ok"] == true)
        .and_then(|a| a["jobs"].as_array())
        .map(|js| {
            js.iter()
                .map(|j| (j["job"].as_str().unwrap().to_string(), j.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (20 s at most) until decision `id` is in `state`; returns it.
async fn until_state(nats: &NatsServer, id: &str, state: &str) -> serde_json::Value {
    poll(Duration::from_secs(20), || async {
        let d = shown(nats, id);
        (d["state"] == state).then_some(d)
    })
    .await
    .unwrap_or_else(|| panic!("{id} never became {state}: {:#}", shown(nats, id)))
}

/// A workflow of job `a` (2 cores on the intel node, running `a`) and, when `b` is given, job
/// `b` (1 core on the amd node, after `a`, running `b`), both mounting volume `data` (`use`:
/// its provisioner, or automatic selection when empty).
fn two_jobs(dir: &Path, name: &str, use_: &str, a: &str, b: Option<&str>) -> String {
    let volume = if use_.is_empty() {
        "{size: 1MiB}".to_string()
    } else {
        format!("{{use: {use_}, size: 1MiB}}")
    };
    let mut text = format!(
        "version: v4\nvolumes:\n  data: {volume}\njobs:\n  a:\n    image: {{uri: docker://alpine}}\n    script: \"{a}\"\n    mounts: {{/data: data}}\n    resource: {{cpu: {{cores: 2}}, memory: {{size: 100MiB}}}}\n    constraints: [intel]\n"
    );
    if let Some(b) = b {
        text.push_str(&format!(
            "  b:\n    image: {{uri: docker://alpine}}\n    command: [/bin/sh, -c, \"{b}\"]\n    depends-on: [{{name: a}}]\n    mounts: {{/data: data}}\n    resource: {{cpu: {{cores: 1}}, memory: {{size: 100MiB}}}}\n    constraints: [amd]\n"
        ));
    }
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

async fn jobs_federation(slurm: &SlurmCluster, dir: &Path) -> (NatsServer, Spawned, CoordinatorProc) {
    let nats = NatsServer::start();
    let agent = start_agent(&nats, &running_agent_files(dir, slurm)).await;
    let co = CoordinatorProc::start(&nats, &["--reconcile-every-ms", "300"]).await;
    (nats, agent, co)
}

/// Subdirectories of `dir` (the volumes a hostpath provisioner holds).
fn volumes_in(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_workflow_runs_in_order_and_completes_by_itself() {
    let slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (nats, agent, _co) = jobs_federation(&slurm, dir.path()).await;
    let client = nats.client().await;
    let marker = marks(dir.path()).join("b-ran");

    // Delete: `a` writes into the volume after 4 s, `b` runs after it and finds the file.
    let wf = two_jobs(
        dir.path(),
        "ordered",
        "",
        "sleep 4; touch $FEDVOL_VOLUME_DATA/a-done",
        Some(&format!(
            "test -f $FEDVOL_VOLUME_DATA/a-done && touch {}",
            marker.display()
        )),
    );
    let url = nats.url();
    let mut watch = std::process::Command::new(fedvol_tests::bin_path("fedvol"))
        .args(["--nats", &url, "-u", "u", "decisions", "watch"])
        .env_remove("FEDVOL_OUTPUT")
        .env("COLUMNS", "100")
        .logged_in()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let follow = std::process::Command::new(fedvol_tests::bin_path("fedvol"))
        .args([
            "--nats",
            &url,
            "-u",
            "u",
            "submit",
            &wf,
            "--request-id",
            "run-1",
            "--follow",
        ])
        .env_remove("FEDVOL_OUTPUT")
        .logged_in()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    // While `a` runs on n1 (2 of its 4 CPUs), its capacity is counted once: Slurm's allocation
    // replaces fedvol's, so 2 more cores still fit there, 3 do not.
    let running = poll(Duration::from_secs(20), || async {
        let d = shown(&nats, "run-1");
        (jobs_of(&d).get("a").is_some_and(|j| j["state"] == "running")).then_some(d)
    })
    .await
    .expect("job a running");
    let ja = &jobs_of(&running)["a"];
    let squeue = slurm.run("squeue", &["-h", "-j", ja["id"].as_str().unwrap(), "-o", "%T %P %N %C"]);
    assert_eq!(squeue.trim(), "RUNNING gpu n1 2", "the job runs where fedvol placed it");
    assert_eq!(jobs_of(&running)["b"]["state"], "pending", "b waits for a");
    let (_, metrics) = fedvol_tests::http::get(fedvol_tests::http::metrics_addr(&agent), "/metrics")
        .await
        .unwrap();
    let jobs_in = |state: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with("fedvol_agent_jobs{") && l.contains(&format!("state=\"{state}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    assert_eq!(jobs_in("running"), Some(1.0), "{metrics}");
    assert_eq!(jobs_in("pending"), Some(1.0), "{metrics}");
    let seen_once = poll(Duration::from_secs(5), || async {
        let i = inventory(&client).await.inventory;
        (host(&i, "n1").1.allocated.cpu == 2).then_some(())
    })
    .await;
    assert!(seen_once.is_some(), "Slurm's allocation of n1 not read");
    let p = plan(&client, "during-1", 2, "intel").await;
    assert_eq!(
        p.decision.jobs["j"].host.as_deref(),
        Some("n1"),
        "2 cores of n1 are free while a runs (counted once): {:?}",
        p.decision.jobs
    );
    let p = plan(&client, "during-2", 3, "intel").await;
    assert!(
        !p.decision.feasible,
        "3 cores do not fit beside a: {:?}",
        p.decision.jobs
    );

    // The workflow ends by itself: --follow exits 0 with the outcome.
    let out = follow.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", agent.log());
    assert!(text.contains("run-1: completed on slurm-a"), "{text}");
    assert!(text.contains("job b (Slurm job"), "{text}");
    assert!(marker.exists(), "b did not find a's file: {text}");
    let d = until_state(&nats, "run-1", "completed").await;
    let jobs = jobs_of(&d);
    assert_eq!(jobs["a"]["state"], "completed");
    assert_eq!(jobs["b"]["state"], "completed");
    assert_eq!(jobs["a"]["exit_code"], 0);
    assert!(
        jobs["b"]["started_ms"].as_u64().unwrap() + 1000 >= jobs["a"]["ended_ms"].as_u64().unwrap(),
        "b started before a ended: {jobs:?}"
    );
    let outcome = d["completion"]["volumes"][0]["outcome"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(outcome, "deleted", "{:#}", d["completion"]);
    assert!(
        volumes_in(&dir.path().join("scratch")).is_empty(),
        "the Delete volume is gone"
    );
    eprintln!("--- fedvol submit --follow ---\n{text}");
    // `decisions watch` showed each change of the jobs, with their times.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = watch.kill();
    let watched = watch.wait_with_output().unwrap();
    let watched = String::from_utf8_lossy(&watched.stdout);
    eprintln!("--- fedvol decisions watch ---\n{watched}");
    assert!(watched.contains("job a (Slurm job"), "{watched}");
    assert!(watched.contains(": running, started 20"), "{watched}");
    assert!(watched.contains(": completed, exit code 0, started 20"), "{watched}");
    assert!(watched.lines().all(|l| l.chars().count() <= 100), "{watched}");
    let (_, show) = fedvol_code(&nats, &["decisions", "show", "run-1"]);
    eprintln!("--- fedvol decisions show ---\n{show}");
    assert!(show.contains("jobs (run by Slurm on the chosen cluster):"), "{show}");
    assert!(show.lines().all(|l| l.chars().count() <= 100), "{show}");
    assert!(!show.contains("submits no job"), "{show}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    // Retain: the volume is kept after the workflow.
    let wf = two_jobs(dir.path(), "kept", "keep", "touch $FEDVOL_VOLUME_DATA/x", None);
    let (code, text) = fedvol_code(&nats, &["submit", &wf, "--request-id", "run-2", "--follow"]);
    assert_eq!(code, 0, "{text}");
    let d = until_state(&nats, "run-2", "completed").await;
    assert_eq!(
        d["completion"]["volumes"][0]["outcome"], "retained",
        "{:#}",
        d["completion"]
    );
    let kept = volumes_in(&dir.path().join("keep"));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].join("x").exists(), "the job wrote into the retained volume");
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
    assert!(!agent.log().contains("panicked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_fails_the_decision_cancel_ends_jobs_and_a_killed_agent_resumes() {
    let mut slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (nats, mut agent, _co) = jobs_federation(&slurm, dir.path()).await;

    // `a` exits 3: the decision fails naming it, `b` (after it) is cancelled by Slurm.
    let wf = two_jobs(dir.path(), "failing", "", "exit 3", Some("true"));
    let (code, text) = fedvol_code(&nats, &["submit", &wf, "--request-id", "fail-1", "--follow"]);
    eprintln!("--- fedvol submit --follow (failing) ---\n{text}");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("job `a`"), "{text}");
    assert!(text.contains("exit code 3"), "{text}");
    let d = until_state(&nats, "fail-1", "failed").await;
    assert!(d["run_failure"].as_str().unwrap().contains("exit code 3"), "{d:#}");
    let jobs = jobs_of(&d);
    assert_eq!(jobs["a"]["state"], "failed");
    assert_eq!(jobs["a"]["exit_code"], 3);
    assert_eq!(jobs["b"]["state"], "cancelled", "{jobs:?}");
    assert!(jobs["b"].get("started_ms").is_none(), "b never started: {jobs:?}");
    assert!(
        volumes_in(&dir.path().join("scratch")).is_empty(),
        "completed: the volume is gone"
    );

    // A job with nothing to run is not submitted: the commit is rolled back (its volume
    // deleted) and refused with why; the decision fails, nothing stays held.
    let text = std::fs::read_to_string(&wf)
        .unwrap()
        .replace("    command: [/bin/sh, -c, \"true\"]\n", "");
    std::fs::write(&wf, text).unwrap();
    let (code, text) = fedvol_code(&nats, &["submit", &wf, "--request-id", "nothing-1"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("job `b` gives no `command` or `script`"), "{text}");
    assert!(text.contains("submit_failed"), "{text}");
    assert_eq!(shown(&nats, "nothing-1")["state"], "failed");
    assert!(
        volumes_in(&dir.path().join("scratch")).is_empty(),
        "rolled back: no volume left"
    );
    let queue = slurm.run("squeue", &["-h", "-o", "%j"]);
    assert!(!queue.contains("nothing-1"), "nothing reaches Slurm: {queue}");

    // `fedvol cancel`: the running job is cancelled in Slurm, and its volume reclaimed only
    // once Slurm reports it ended. This job traps SIGTERM and writes into its volume for 3 s
    // more (Slurm shows it COMPLETING meanwhile): the volume must still be there for that
    // write, and gone for good afterwards (reclaimed under the job, it was re-created by the
    // job's `mkdir -p` and left on disk, untracked). The run is stored `cancelled`.
    let late = marks(dir.path()).join("late-write");
    let trapping = marks(dir.path()).join("trap-set");
    let wf = two_jobs(
        dir.path(),
        "long",
        "",
        &format!(
            "trap 'echo TERM; sleep 3; mkdir -p $FEDVOL_VOLUME_DATA; echo late > $FEDVOL_VOLUME_DATA/late && touch {}; echo trap done; exit 0' TERM; touch {}; sleep 120 & wait",
            late.display(),
            trapping.display()
        ),
        None,
    );
    let (code, text) = fedvol_code(&nats, &["submit", &wf, "--request-id", "cancel-1"]);
    assert_eq!(code, 0, "{text}");
    let d = poll(Duration::from_secs(20), || async {
        let d = shown(&nats, "cancel-1");
        (jobs_of(&d).get("a").is_some_and(|j| j["state"] == "running")).then_some(d)
    })
    .await
    .expect("the long job runs");
    let id = jobs_of(&d)["a"]["id"].as_str().unwrap().to_string();
    // Slurm says RUNNING before the script's first line: wait until its trap is set.
    let trap_set = fedvol_tests::wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        trapping.exists()
    })
    .await;
    assert!(trap_set, "the job set its trap");
    let (code, text) = fedvol_code(&nats, &["complete", "cancel-1"]);
    assert_ne!(code, 0, "complete under a running job is refused: {text}");
    assert!(text.contains("jobs_running"), "{text}");
    let (code, text) = fedvol_code(&nats, &["cancel", "cancel-1"]);
    eprintln!("--- fedvol cancel ---\n{text}");
    assert_eq!(code, 0, "{text}");
    let about = |log: String| -> String {
        log.lines()
            .filter(|l| l.contains("cancel-1") || l.contains("jobs cancelled"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        text.contains("cancel-1: cancelled on slurm-a"),
        "{text}\n--- the agent on cancel-1 ---\n{}",
        about(agent.log())
    );
    // When the cancel answers, Slurm reports the job ended (not COMPLETING), its last write
    // went into the volume before the volume was deleted, and nothing is left on disk.
    let state = slurm.run("scontrol", &["-o", "show", "job", &id]);
    assert!(state.contains("JobState=CANCELLED"), "{state}");
    assert!(
        late.exists(),
        "the job's write after SIGTERM went into its volume: {text}\n--- its output ---\n{}\n--- the agent ---\n{}",
        std::fs::read_to_string(dir.path().join("work/u/cancel-1").join(format!("a-{id}.out"))).unwrap_or_default(),
        about(agent.log())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        volumes_in(&dir.path().join("scratch")).is_empty(),
        "the volume was reclaimed after the job ended, not re-created under a job still running"
    );
    let d = until_state(&nats, "cancel-1", "cancelled").await;
    assert_eq!(jobs_of(&d)["a"]["state"], "cancelled");
    assert_eq!(d["completion"]["volumes"][0]["outcome"], "deleted", "{d:#}");
    assert!(d.get("run_failure").is_none(), "{d:#}");

    // kill -9 of the agent while a job runs; restarted from its state, it follows the job
    // again and the decision completes.
    let wf = two_jobs(dir.path(), "crash", "", "sleep 3", None);
    let (code, text) = fedvol_code(&nats, &["submit", &wf, "--request-id", "crash-1"]);
    assert_eq!(code, 0, "{text}");
    poll(Duration::from_secs(20), || async {
        (jobs_of(&shown(&nats, "crash-1"))
            .get("a")
            .is_some_and(|j| j["state"] == "running"))
        .then_some(())
    })
    .await
    .expect("the job runs");
    agent.kill();
    // Slurm unreachable too while the agent is away: the restarted agent cannot read the job,
    // and nothing completes on a guess until Slurm answers again.
    slurm.stop_controller();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        shown(&nats, "crash-1")["state"],
        "committed",
        "nothing completes without its agent"
    );
    let cfg = dir.path().join("agent.yaml");
    let mut again = Spawned::bin(
        "fedvol-agent",
        ["--config", &cfg.display().to_string(), "--nats", &nats.url()],
    );
    again.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    again
        .wait_for_log("Slurm could not be asked", Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = shown(&nats, "crash-1");
    assert_eq!(d["state"], "committed", "Slurm unreachable: no guess");
    assert_eq!(jobs_of(&d)["a"]["state"], "running", "the last state read stays");
    slurm.start_controller();
    let d = poll(Duration::from_secs(60), || async {
        let d = shown(&nats, "crash-1");
        (d["state"] == "completed").then_some(d)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "crash-1 did not complete: {:#}\n{}",
            shown(&nats, "crash-1"),
            again.log()
        )
    });
    assert_eq!(jobs_of(&d)["a"]["state"], "completed");
    assert_eq!(d["completion"]["volumes"][0]["outcome"], "deleted");
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
    assert!(!again.log().contains("panicked"));
}

// ---------------------------------------------------------------------------------------------
// `fedvol dev --slurm`, as a user runs it: the example Slurm workflow goes committed → running →
// completed.

/// `fedvol ARGS` as a user of `fedvol dev` runs it: in `cwd`, no `FEDVOL_*` setting inherited
/// but the context file `ctx` (which holds the dev federation's URL), at 100 columns.
fn dev_fedvol(cwd: &Path, ctx: &Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(fedvol_tests::bin_path("fedvol"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FEDVOL_") {
            c.env_remove(&k);
        }
    }
    c.env("FEDVOL_CONTEXT", ctx)
        .env("COLUMNS", "100")
        .current_dir(cwd)
        .args(args);
    c
}

/// A running `fedvol dev`, stopped as a user stops it (SIGTERM, then its own tear-down) when
/// dropped, a failed assertion included: killed outright, it would leave its daemons (each in
/// a process group of its own) running.
struct DevRun(Spawned);

impl Drop for DevRun {
    fn drop(&mut self) {
        if self.0.try_status().is_none() {
            self.0.signal(nix::sys::signal::Signal::SIGTERM);
            let end = std::time::Instant::now() + Duration::from_secs(30);
            while self.0.try_status().is_none() && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_slurm_runs_the_example_workflow_to_completion() {
    for p in fedvol_cli::devslurm::PROGRAMS {
        assert!(
            fedvol_tests::slurm::which(p).is_some(),
            "`{p}` not found: `fedvol dev --slurm` needs Slurm and munge"
        );
    }
    // The example's jobs run as alice's account, made when missing; bob's account is there
    // too, so the banner names both.
    let alice = fedvol_tests::slurm::account("alice");
    let bob = fedvol_tests::slurm::account("bob");
    let cwd = tempfile::tempdir().unwrap();
    let ctx = cwd.path().join("dev.env");
    let mut run = DevRun(Spawned::start(dev_fedvol(cwd.path(), &ctx, &["dev", "--slurm"])));
    let dev = &mut run.0;
    dev.wait_for_log("if a process exits", Duration::from_secs(120)).await;
    let banner = dev.log();
    eprintln!("--- fedvol dev --slurm ---\n{banner}");
    assert!(banner.lines().all(|l| l.chars().count() <= 100), "{banner}");
    // The hint names the example workflow by an absolute path; it is run as printed.
    let hint = banner
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("fedvol submit ") && l.contains(" --follow "))
        .unwrap_or_else(|| panic!("a --follow hint: {banner}"));
    // Its last word (before it: the user and groups of the other hints).
    let workflow = hint.split_whitespace().last().unwrap_or_default().to_string();
    assert!(Path::new(&workflow).is_file(), "{hint}");
    assert!(
        banner.contains(&format!("alice: runs as account alice (uid {alice})")),
        "the banner says which accounts jobs run as: {banner}"
    );
    let out_dir = banner
        .lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix("ls ").and_then(|r| r.split_whitespace().next()))
        .map(|p| std::path::PathBuf::from(p.trim_end_matches("/*")))
        .unwrap_or_else(|| panic!("where the jobs' output goes: {banner}"))
        .join("dev-train");

    let volumes_dir = banner
        .lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix("ls -l ").and_then(|r| r.split_whitespace().next()))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("where the volumes are: {banner}"));

    // alice follows her run; bob runs the same workflow beside it: each volume is its user's.
    let follow = dev_fedvol(
        cwd.path(),
        &ctx,
        &[
            "submit",
            "-u",
            "alice",
            "--follow",
            &workflow,
            "--request-id",
            "dev-train",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let committed = fedvol_tests::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        let o = dev_fedvol(cwd.path(), &ctx, &["decisions", "show", "dev-train", "-o", "json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok_and(|d| d["state"] == "committed")
    })
    .await;
    assert!(committed, "{}", dev.log());
    let o = dev_fedvol(
        cwd.path(),
        &ctx,
        &["submit", "-u", "bob", &workflow, "--request-id", "dev-bob"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let owners = fedvol_tests::wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        use std::os::unix::fs::MetadataExt;
        let mut owners: Vec<(u32, u32)> = std::fs::read_dir(&volumes_dir)
            .map(|r| {
                r.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| (m.uid(), m.mode() & 0o777))
                    .collect()
            })
            .unwrap_or_default();
        owners.sort();
        owners == [(alice, 0o700), (bob, 0o700)]
    })
    .await;
    let listing = std::process::Command::new("ls")
        .arg("-l")
        .arg(&volumes_dir)
        .output()
        .unwrap();
    eprintln!(
        "--- ls -l {} ---\n{}",
        volumes_dir.display(),
        String::from_utf8_lossy(&listing.stdout)
    );
    assert!(
        owners,
        "alice's and bob's volumes, each theirs alone: {}",
        String::from_utf8_lossy(&listing.stdout)
    );
    let o = follow.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    eprintln!("--- fedvol submit --follow (stdout) ---\n{stdout}\n--- (stderr) ---\n{stderr}");
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}\n{}", dev.log());
    // Committed on the Slurm cluster, on the node with the GPU...
    assert!(stdout.to_lowercase().starts_with("state: committed\n"), "{stdout}");
    assert!(stdout.contains("chosen cluster: slurm-local"), "{stdout}");
    assert!(stdout.contains("train → gpu/n1"), "{stdout}");
    // ... its job seen pending, then running, then completed with exit code 0 ...
    let at = |needle: &str| {
        stderr
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` not followed: {stderr}"))
    };
    let pending = at("(Slurm job 1): pending");
    let running = at("(Slurm job 1): running, started 20");
    let completed = at("(Slurm job 1): completed, exit code 0, started 20");
    assert!(pending < running && running < completed, "{stderr}");
    // ... and the workflow completed by itself, its scratch volume deleted.
    assert!(stdout.contains("dev-train: completed on slurm-local"), "{stdout}");
    assert!(
        stdout.contains("volumes: pvc-") && stdout.contains(" deleted"),
        "{stdout}"
    );
    for text in [&stdout, &stderr] {
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }
    let show = dev_fedvol(cwd.path(), &ctx, &["decisions", "show", "dev-train", "-o", "json"])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(d["state"], "completed", "{d:#}");
    assert_eq!(jobs_of(&d)["train"]["exit_code"], 0, "{d:#}");
    // The job ran the workflow's script: it wrote into its scratch volume through
    // FEDVOL_VOLUME_SCRATCH on the node fedvol chose.
    let outputs: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let printed = std::fs::read_to_string(&outputs[0]).unwrap();
    assert!(printed.contains("training on n1 (Slurm job 1)"), "{printed}");
    assert!(printed.contains("wrote 8 steps"), "{printed}");
    // It ran as alice, in a directory of hers, and the decision says where its output is.
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&out_dir).unwrap().uid(), alice);
        assert_eq!(std::fs::metadata(&outputs[0]).unwrap().uid(), alice);
    }
    assert_eq!(jobs_of(&d)["train"]["user"], "alice", "{d:#}");
    assert_eq!(
        jobs_of(&d)["train"]["output"].as_str(),
        Some(outputs[0].display().to_string().as_str()),
        "{d:#}"
    );

    let bob_done = fedvol_tests::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        let o = dev_fedvol(cwd.path(), &ctx, &["decisions", "show", "dev-bob", "-o", "json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok_and(|d| d["state"] == "completed")
    })
    .await;
    assert!(bob_done, "bob's run completes too: {}", dev.log());
    dev.signal(nix::sys::signal::Signal::SIGTERM);
    let stopped = fedvol_tests::wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
        dev.try_status().is_some()
    })
    .await;
    assert!(stopped, "{}", dev.log());
}

// ---------------------------------------------------------------------------------------------
// A commit restored onto a fresh agent: its jobs, already in Slurm, are followed again.

/// An agent that lost its state file while its job ran (kill -9, data directory wiped, started
/// again with `--init`, waiting for the coordinators' restore as it does by default): the
/// reconciler commits the decision there again; the job Slurm runs is not submitted a second
/// time, the new agent follows it from the ids stored in the decision, and the decision
/// completes when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_restored_onto_a_fresh_agent_follows_its_jobs_to_the_end() {
    let slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (nats, mut agent, _co) = jobs_federation(&slurm, dir.path()).await;
    let marker = marks(dir.path()).join("restored-ran");
    // 1 core: the restore re-plans the request while Slurm counts the running job, which then
    // counts twice on n1 until the restored agent reads its state (4 CPUs hold both).
    let wf = two_jobs(dir.path(), "restored", "", "sleep 10", None);
    let text = std::fs::read_to_string(&wf).unwrap().replace("cores: 2", "cores: 1");
    let text = text.replace("sleep 10", &format!("sleep 10; touch {}", marker.display()));
    std::fs::write(&wf, text).unwrap();
    let (code, out) = fedvol_code(&nats, &["submit", &wf, "--request-id", "restore-1"]);
    assert_eq!(code, 0, "{out}");
    let d = poll(Duration::from_secs(20), || async {
        let d = shown(&nats, "restore-1");
        (jobs_of(&d).get("a").is_some_and(|j| j["state"] == "running")).then_some(d)
    })
    .await
    .expect("the job runs");
    let slurm_id = jobs_of(&d)["a"]["id"].as_str().unwrap().to_string();

    // The agent loses its state while the job runs.
    agent.kill();
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    let cfg = dir.path().join("agent.yaml");
    let mut fresh = Spawned::bin(
        "fedvol-agent",
        ["--config", &cfg.display().to_string(), "--nats", &nats.url(), "--init"],
    );
    fresh.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    fresh
        .wait_for_log("new commits are admitted", Duration::from_secs(30))
        .await;

    let d = poll(Duration::from_secs(40), || async {
        let d = shown(&nats, "restore-1");
        (d["state"] != "committed").then_some(d)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "restore-1 never ended: {:#}\n--- fresh agent ---\n{}",
            shown(&nats, "restore-1"),
            fresh.log()
        )
    });
    eprintln!("--- the restored decision ---\n{:#}", d["attempts"]);
    assert_eq!(d["state"], "completed", "{d:#}\n{}", fresh.log());
    let attempts = d["attempts"].as_array().unwrap();
    assert!(
        attempts.len() >= 2 && attempts.last().unwrap()["ok"] == true,
        "the restore is an attempt of its own: {attempts:#?}"
    );
    let jobs = jobs_of(&d);
    assert_eq!(jobs["a"]["id"], slurm_id.as_str(), "the same Slurm job: {jobs:?}");
    assert_eq!(jobs["a"]["state"], "completed", "{jobs:?}");
    assert_eq!(jobs["a"]["exit_code"], 0, "{jobs:?}");
    assert!(marker.exists(), "the job ran to its end");
    // Submitted once: Slurm knows one job of that name.
    let named = slurm.run("squeue", &["-h", "-t", "all", "-n", "fedvol.restore-1.a", "-o", "%i"]);
    assert_eq!(
        named.split_whitespace().collect::<Vec<_>>(),
        [slurm_id.as_str()],
        "{named}"
    );
    assert_eq!(
        d["completion"]["volumes"][0]["outcome"], "deleted",
        "{:#}",
        d["completion"]
    );
    assert!(
        volumes_in(&dir.path().join("scratch")).is_empty(),
        "completed: the volume is gone"
    );
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
    assert!(!fresh.log().contains("panicked"));
}

// ---------------------------------------------------------------------------------------------
// A job Slurm no longer knows is `lost`: the decision fails, it never completes silently.

/// The controller loses its state while a job runs (slurmctld restarted on an empty
/// `StateSaveLocation`: the legitimate way a job id becomes unknown to Slurm without waiting
/// out `MinJobAge`, 300 s by default, after the job's end). The agent asks for the job, Slurm
/// says `Invalid job id specified`: the job is `lost`, the request is completed (its volume
/// deleted) and the decision stored `failed` naming the job, and `submit --follow` exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_slurm_no_longer_knows_is_lost_and_fails_the_decision() {
    let mut slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (nats, agent, _co) = jobs_federation(&slurm, dir.path()).await;
    // The job outlives its controller's memory of it, not the test: its batch shell's pid is
    // kept, so the test waits for its end while slurmd still runs (a slurmstepd whose slurmd is
    // gone lingers).
    let pid_file = marks(dir.path()).join("forgotten.pid");
    let wf = two_jobs(
        dir.path(),
        "forgotten",
        "",
        &format!("echo $$ > {}; sleep 10", pid_file.display()),
        None,
    );
    let url = nats.url();
    let follow = std::process::Command::new(fedvol_tests::bin_path("fedvol"))
        .args([
            "--nats",
            &url,
            "-u",
            "u",
            "submit",
            &wf,
            "--request-id",
            "lost-1",
            "--follow",
        ])
        .env_remove("FEDVOL_OUTPUT")
        .env("COLUMNS", "100")
        .logged_in()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let d = poll(Duration::from_secs(20), || async {
        let d = shown(&nats, "lost-1");
        (jobs_of(&d).get("a").is_some_and(|j| j["state"] == "running")).then_some(d)
    })
    .await
    .expect("the job runs");
    let id = jobs_of(&d)["a"]["id"].as_str().unwrap().to_string();

    slurm.restart_controller_without_state();
    let gone = slurm.command("scontrol", &["-o", "show", "job", &id]);
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("Invalid job id specified"),
        "the controller no longer knows job {id}: {gone:?}"
    );

    let out = follow.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("--- fedvol submit --follow (lost) ---\n{text}");
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", agent.log());
    assert!(text.contains(&format!("job a (Slurm job {id}): lost")), "{text}");
    assert!(text.contains("lost-1: failed on slurm-a"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let d = until_state(&nats, "lost-1", "failed").await;
    let jobs = jobs_of(&d);
    assert_eq!(jobs["a"]["state"], "lost", "{jobs:?}");
    assert!(jobs["a"].get("exit_code").is_none(), "its end is unknown: {jobs:?}");
    let why = d["run_failure"].as_str().unwrap_or_default();
    assert!(why.contains("job `a`") && why.contains("ended lost"), "{d:#}");
    assert!(why.contains("Slurm no longer knows the job"), "{why}");
    assert_eq!(
        d["completion"]["volumes"][0]["outcome"], "deleted",
        "{:#}",
        d["completion"]
    );
    assert!(
        agent.log().contains("Slurm no longer knows the job: lost"),
        "{}",
        agent.log()
    );
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
    assert!(!agent.log().contains("panicked"));
    // The orphan ends (its sleep, or slurmd killing it for the new controller), then its
    // slurmstepd reports to slurmd and exits.
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    let proc_dir = Path::new("/proc").join(&pid);
    let ended = fedvol_tests::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
        !proc_dir.exists()
    })
    .await;
    assert!(ended, "the orphaned job {pid} did not end");
    tokio::time::sleep(Duration::from_secs(2)).await;
}

// ---------------------------------------------------------------------------------------------
// Several workflows followed at once: one `jobs` call per cluster and tick.

/// The value of the first metric line starting with `prefix` and holding every one of
/// `labels`. Panics (test failure) when there is none: a series that disappeared (renamed,
/// relabelled) must fail the test that counts it, not read as 0.
fn metric(text: &str, prefix: &str, labels: &[&str]) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix) && labels.iter().all(|x| l.contains(x)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no series {prefix}...{labels:?} in:\n{text}"))
}

/// Three workflows run at once on one cluster: the reconciler asks their agent about all three
/// in one `jobs` call per tick (the agent's `jobs` requests grow with the reconciler's ticks,
/// counted by its lease writes: neither three times as fast nor not at all), and all three
/// complete, under the shipped NATS permissions. Both series must be there: a series that
/// disappeared once read as 0 calls and passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_followed_together_are_asked_about_in_one_call_per_tick() {
    let slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start();
    let agent = start_agent(&nats, &running_agent_files(dir.path(), &slurm)).await;
    let co = CoordinatorProc::start(
        &nats,
        &["--reconcile-every-ms", "300", "--metrics-listen", "127.0.0.1:0"],
    )
    .await;
    let ids = ["many-1", "many-2", "many-3"];
    for id in ids {
        // 1 core each: the three fit on n1 (4 CPUs) together.
        let wf = two_jobs(dir.path(), id, "", "sleep 12", None);
        let text = std::fs::read_to_string(&wf).unwrap().replace("cores: 2", "cores: 1");
        std::fs::write(&wf, text).unwrap();
        let (code, out) = fedvol_code(&nats, &["submit", &wf, "--request-id", id]);
        assert_eq!(code, 0, "{out}");
    }
    let all_running = poll(Duration::from_secs(20), || async {
        ids.iter()
            .all(|id| {
                jobs_of(&shown(&nats, id))
                    .get("a")
                    .is_some_and(|j| j["state"] == "running")
            })
            .then_some(())
    })
    .await;
    assert!(all_running.is_some(), "the three jobs run: {}", agent.log());

    let scrape = || async {
        let (_, a) = fedvol_tests::http::get(fedvol_tests::http::metrics_addr(&agent), "/metrics")
            .await
            .unwrap();
        let (_, c) = fedvol_tests::http::get(fedvol_tests::http::metrics_addr(&co.proc), "/metrics")
            .await
            .unwrap();
        (
            metric(&a, "fedvol_agent_requests_total{", &["endpoint=\"jobs\""]),
            metric(
                &c,
                "fedvol_coordinator_kv_writes_total{",
                &["op=\"lease\"", "outcome=\"done\""],
            ),
        )
    };
    let (jobs0, ticks0) = scrape().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (jobs1, ticks1) = scrape().await;
    let (calls, ticks) = (jobs1 - jobs0, ticks1 - ticks0);
    eprintln!("while 3 workflows ran: {calls} jobs calls in {ticks} reconciler ticks");
    assert!(ticks >= 5.0, "the reconciler ticks every 300 ms: {ticks}");
    // One call per tick: not one per decision (3 × ticks), and not none (the workflows are
    // followed: asked about at every tick).
    assert!(
        calls + 1.0 >= ticks && calls <= ticks + 1.0,
        "one jobs call per tick for the three decisions: {calls} calls, {ticks} ticks"
    );
    for id in ids {
        let d = until_state(&nats, id, "completed").await;
        assert_eq!(jobs_of(&d)["a"]["exit_code"], 0, "{d:#}");
    }
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
    assert!(!agent.log().contains("panicked"));
}

// ---------------------------------------------------------------------------------------------
// Jobs run as the people who submitted them: no workflow author can become the agent.

/// The attack of a workflow author, replayed on the real Slurm under the shipped
/// `secure.conf`, the agent started as an operator starts it: as the unprivileged account
/// `fedvol` (deploy/systemd), its configuration in a 0600 file, its NATS password in a 0600
/// file named by `FEDVOL_NATS_PASSWORD_FILE` (the unit's `LoadCredential=`), its data directory
/// created by itself, the shipped sudo rule installed (deploy/sudo/fedvol-agent). bob keeps
/// a secret in a retained volume; alice's job then tries to read and write everything of the
/// agent's and bob's, and logs in to NATS as the agent with whatever it found. Her job runs as
/// alice (`id -un`), in a working directory and with a volume of hers, with none of the
/// agent's variables; every attempt is denied and the login refused. carol, who has no
/// account on the cluster, is refused there in the funnel (`unmapped_user`), with the reason
/// `why-not` gives. The test creates the Unix accounts `alice`, `bob` and `fedvol` (root only:
/// [`fedvol_tests::slurm::accounts_unavailable`] says why otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_as_their_users_and_reach_nothing_of_the_agent() {
    use fedvol_tests::shipped::Shipped;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    if let Some(why) = fedvol_tests::slurm::accounts_unavailable() {
        panic!("this test runs jobs as alice and bob and the agent as `fedvol`: {why}");
    }
    let alice = fedvol_tests::slurm::account("alice");
    let bob = fedvol_tests::slurm::account("bob");
    let (agent_uid, agent_gid) = fedvol_tests::slurm::system_account("fedvol");
    assert!(
        nix::unistd::User::from_name("carol").unwrap().is_none(),
        "this test needs a user without a Unix account: carol has one here"
    );
    let _rule = fedvol_tests::slurm::SudoRule::install();
    let slurm = SlurmCluster::start().await;
    let nats = NatsServer::shipped(Shipped::Secure);
    nats.ensure_users(&["alice", "bob", "carol"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711)).unwrap();
    let chown = |p: &Path| {
        nix::unistd::chown(
            p,
            Some(nix::unistd::Uid::from_raw(agent_uid)),
            Some(nix::unistd::Gid::from_raw(agent_gid)),
        )
        .unwrap()
    };
    // The programs, where every account may run them.
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    for b in ["fedvol-agent", "fedvol"] {
        std::fs::copy(fedvol_tests::bin_path(b), bin.join(b)).unwrap();
    }
    // /etc/fedvol and /var/lib/fedvol-agent as the install makes them.
    let (etc, var) = (d.join("etc"), d.join("var"));
    for p in [&etc, &var] {
        std::fs::create_dir(p).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    chown(&var);
    let (scratch, keep, work) = (d.join("scratch"), d.join("keep"), d.join("work"));
    for base in [&scratch, &keep, &work, &marks(d)] {
        fedvol_tests::slurm::shared_base(base);
        chown(base);
    }
    let (inventory, config) = fedvol_cli::devslurm::agent_files("cluster-c", &slurm.conf(), &scratch, 500, Some(&work));
    let inventory = format!(
        "{inventory}  keep:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: all\n    create: all\n    access: all\n    reclaimPolicy: Retain\n",
        keep.display()
    );
    let data = var.join("cluster-c");
    let cfg = etc.join("agent-cluster-c.yaml");
    let secret_file = etc.join("agent-cluster-c.password");
    let password = fedvol_tests::kit::password("agent-cluster-c");
    let marker = format!("agent-only-{}", std::process::id());
    for (path, text) in [
        (etc.join("inventory.yaml"), inventory),
        (
            cfg.clone(),
            format!(
                "{config}dataDir: {}\nheartbeatMs: 300\nnats:\n  user: agent-cluster-c\n  inboxPrefix: _INBOX_agent-cluster-c\n",
                data.display()
            ),
        ),
        (secret_file.clone(), format!("{password}\n")),
    ] {
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        chown(&path);
    }
    let mut cmd = std::process::Command::new(bin.join("fedvol-agent"));
    cmd.args([
        "--config",
        &cfg.display().to_string(),
        "--nats",
        &nats.url(),
        "--nats-user",
        "agent-cluster-c",
        "--init",
        "--restore-wait-ms",
        "0",
    ])
    .env_clear()
    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
    .env("FEDVOL_NATS_PASSWORD_FILE", &secret_file)
    .env("FEDVOL_AGENT_MARKER", &marker)
    .current_dir(&var)
    .uid(agent_uid)
    .gid(agent_gid);
    let mut agent = Spawned::start(cmd);
    agent.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    let _co = CoordinatorProc::start(&nats, &["--reconcile-every-ms", "300"]).await;
    assert_eq!(
        std::fs::metadata(&data).unwrap().permissions().mode() & 0o777,
        0o700,
        "the agent makes its data directory its own"
    );
    let submit = |user: &str, wf: &str, id: &str| {
        let o = fedvol_tests::cli::fedvol_as(&nats, user, &["submit", wf, "--request-id", id]);
        (o.status.code(), fedvol_tests::cli::shown(&o))
    };
    let show = |user: &str, id: &str| -> serde_json::Value {
        let o = fedvol_tests::cli::fedvol_as(&nats, user, &["decisions", "show", id, "-o", "json"]);
        serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
    };
    let ended = |user: &'static str, id: &'static str| {
        let show = &show;
        async move {
            poll(Duration::from_secs(40), || async {
                let d = show(user, id);
                matches!(d["state"].as_str(), Some("completed" | "failed" | "cancelled")).then_some(d)
            })
            .await
            .unwrap_or_else(|| panic!("{id} did not end: {:#}", show(user, id)))
        }
    };

    // bob keeps a secret in a volume of his (Retain).
    let wf = two_jobs(
        d,
        "bob-keeps",
        "keep",
        "echo bob-secret > $FEDVOL_VOLUME_DATA/secret",
        None,
    );
    let (code, out) = submit("bob", &wf, "bob-1");
    assert_eq!(code, Some(0), "{out}\n{}", agent.log());
    let db = ended("bob", "bob-1").await;
    assert_eq!(db["state"], "completed", "{db:#}\n{}", agent.log());
    let kept = volumes_in(&keep);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let bobs = &kept[0];
    let m = std::fs::metadata(bobs).unwrap();
    assert_eq!(
        (m.uid(), m.permissions().mode() & 0o777),
        (bob, 0o700),
        "bob's volume is his alone"
    );
    assert_eq!(std::fs::read_to_string(bobs.join("secret")).unwrap(), "bob-secret\n");

    // alice's job: everything a workflow author would try.
    let probe = marks(d).join("probe.sh");
    let script = format!(
        r#"echo "whoami=$(id -un)"
echo "volume=$(stat -c '%U %a' "$FEDVOL_VOLUME_DATA")"
echo "cwd=$(pwd) $(stat -c %U .)"
echo '--- env'; env; echo '--- end env'
try() {{ if "$@" >/dev/null 2>&1; then echo "ALLOWED $*"; else echo "DENIED $*"; fi; }}
try ls {data}
try cat {data}/state.redb
try touch {data}/planted
try cat {cfg}
try cat {secret}
try cat /proc/{pid}/environ
try ls {bobs}
try cat {bobs}/secret
try touch {bobs}/planted
echo mine > "$FEDVOL_VOLUME_DATA/mine" && echo "WROTE own volume"
found=$(cat {secret} 2>/dev/null; tr '\0' '\n' < /proc/{pid}/environ 2>/dev/null | sed -n 's/^FEDVOL_NATS_PASSWORD=//p'; printf %s "$FEDVOL_NATS_PASSWORD")
[ -n "$found" ] || found=guessed
FEDVOL_NATS_PASSWORD="$found" {fedvol} --nats {url} --nats-user agent-cluster-c --nats-inbox-prefix _INBOX_agent-cluster-c clusters 2>&1
echo "impersonation-exit=$?"
"#,
        data = data.display(),
        cfg = cfg.display(),
        secret = secret_file.display(),
        pid = agent.pid(),
        bobs = bobs.display(),
        fedvol = bin.join("fedvol").display(),
        url = nats.url(),
    );
    std::fs::write(&probe, script).unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o644)).unwrap();
    let wf = two_jobs(d, "alice-probes", "", &format!("sh {}", probe.display()), None);
    let (code, out) = submit("alice", &wf, "alice-1");
    assert_eq!(code, Some(0), "{out}\n{}", agent.log());
    let da = ended("alice", "alice-1").await;
    assert_eq!(da["state"], "completed", "{da:#}\n{}", agent.log());
    let job = &jobs_of(&da)["a"];
    assert_eq!(job["user"], "alice", "{job:#}");
    let output = std::path::PathBuf::from(job["output"].as_str().expect("the decision says where the output is"));
    let printed = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    eprintln!("--- alice's job ---\n{printed}");
    assert_eq!(std::fs::metadata(&output).unwrap().uid(), alice, "its output is hers");
    assert!(printed.contains("whoami=alice\n"), "{printed}");
    assert!(
        printed.contains("volume=alice 700\n"),
        "her volume is hers alone: {printed}"
    );
    let cwd = work.join("alice").join("alice-1");
    assert!(printed.contains(&format!("cwd={} alice\n", cwd.display())), "{printed}");
    assert!(printed.contains("WROTE own volume"), "{printed}");
    // Nothing of the agent's environment: no variable of its own, no value of it, no FEDVOL_*
    // variable but those a job is promised.
    let env: Vec<&str> = printed
        .split("--- env\n")
        .nth(1)
        .and_then(|r| r.split("--- end env").next())
        .unwrap_or_default()
        .lines()
        .collect();
    assert!(!env.is_empty(), "{printed}");
    for line in &env {
        let name = line.split('=').next().unwrap_or_default();
        assert!(
            !name.starts_with("FEDVOL_")
                || ["FEDVOL_REQUEST_ID", "FEDVOL_JOB"].contains(&name)
                || name.starts_with("FEDVOL_VOLUME_"),
            "the job got {line}"
        );
        assert!(
            !line.contains(&marker) && !line.contains(&password),
            "the job got {line}"
        );
        assert!(
            !line.contains(&secret_file.display().to_string()),
            "the job learnt where the password is: {line}"
        );
    }
    assert!(!printed.contains(&password), "the agent's password reached the job");
    for denied in [
        format!("ls {}", data.display()),
        format!("cat {}/state.redb", data.display()),
        format!("touch {}/planted", data.display()),
        format!("cat {}", cfg.display()),
        format!("cat {}", secret_file.display()),
        format!("cat /proc/{}/environ", agent.pid()),
        format!("ls {}", bobs.display()),
        format!("cat {}/secret", bobs.display()),
        format!("touch {}/planted", bobs.display()),
    ] {
        assert!(printed.contains(&format!("DENIED {denied}\n")), "{denied}: {printed}");
    }
    assert!(!printed.contains("ALLOWED"), "{printed}");
    // The impersonation: logging in as the agent with what the job found is refused.
    assert!(!printed.contains("impersonation-exit=0"), "{printed}");
    assert!(printed.to_lowercase().contains("authorization"), "{printed}");
    assert!(!data.join("planted").exists() && !bobs.join("planted").exists());

    // carol has no account on the cluster: refused there, in the funnel, with the reason.
    let wf = two_jobs(d, "carol-tries", "", "true", None);
    let (code, out) = submit("carol", &wf, "carol-1");
    assert_eq!(code, Some(2), "nothing fits: {out}");
    let dc = show("carol", "carol-1");
    let c = &dc["decision"]["clusters"]["cluster-c"];
    assert_eq!(c["feasible"], false, "{dc:#}");
    assert_eq!(c["jobs"]["a"]["error"]["code"], "unmapped_user", "{dc:#}");
    assert!(
        c["trace"]
            .as_array()
            .is_some_and(|t| t.iter().any(|s| s["stage"] == "identity.user" && s["passed"] == 0)),
        "{dc:#}"
    );
    let o = fedvol_tests::cli::fedvol_as(&nats, "carol", &["why-not", "carol-1", "--cluster", "cluster-c"]);
    let why = fedvol_tests::cli::shown(&o);
    eprintln!("--- why-not carol-1 ---\n{why}");
    assert!(
        why.contains("which does not exist on cluster cluster-c") && why.contains("useradd -m carol"),
        "{why}"
    );
    assert!(volumes_in(&scratch).is_empty(), "nothing was created for carol");
    assert!(!agent.log().contains("panicked"));
}

// ---------------------------------------------------------------------------------------------
// What fedvol counts is what Slurm allots; job names safe in `%x`.

/// Three jobs that give no memory, 1 core each on n1 (4 CPUs, 8000 MiB): fedvol counted them
/// as using no memory and placed all three there, while Slurm gave each the node's whole memory
/// (no `--mem`), so they ran one after another, `PENDING` while the decision said `committed`.
/// Now each is counted, and asked for, the site's memory per core (`memPerCore`, 1 GiB by
/// default): the three run at once, each allotted 1 GiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_without_memory_get_what_fedvol_counted_and_run_together() {
    let slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (nats, agent, _co) = jobs_federation(&slurm, dir.path()).await;
    let ids = ["mem-1", "mem-2", "mem-3"];
    for id in ids {
        let wf = dir.path().join(format!("{id}.yaml"));
        std::fs::write(
            &wf,
            "version: v4\njobs:\n  a:\n    image: {uri: docker://alpine}\n    script: sleep 8\n    resource: {cpu: {cores: 1}}\n    constraints: [intel]\n",
        )
        .unwrap();
        let (code, out) = fedvol_code(&nats, &["submit", &wf.display().to_string(), "--request-id", id]);
        assert_eq!(code, 0, "{out}");
        let d = shown(&nats, id);
        let counted: u64 = d["decision"]["clusters"][CLUSTER]["allocations"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x["resources"]["memory"].as_u64()).sum())
            .unwrap_or(0);
        assert_eq!(counted, 1 << 30, "fedvol counts 1 GiB for the job: {d:#}");
    }
    let together = poll(Duration::from_secs(20), || async {
        let q = slurm.run("squeue", &["-h", "-t", "RUNNING", "-o", "%j %m %N"]);
        let running: Vec<&str> = q.lines().filter(|l| l.starts_with("fedvol.mem-")).collect();
        (running.len() == 3).then(|| q.clone())
    })
    .await;
    let q = slurm.run("squeue", &["-h", "-t", "all", "-o", "%j %T %m %N %r"]);
    let q = together.unwrap_or_else(|| panic!("the three jobs never ran together:\n{q}\n{}", agent.log()));
    eprintln!("--- running together ---\n{q}");
    for l in q.lines().filter(|l| l.starts_with("fedvol.mem-")) {
        assert!(
            l.contains(" 1G n1"),
            "each allotted the 1 GiB fedvol counted, on n1: {l}"
        );
    }
    for id in ids {
        until_state(&nats, id, "completed").await;
    }
}

/// A `/` in a job name (the Fuzzfile parser accepts it) made `--output=.../%x-%j.out` name a
/// missing directory: the job failed at launch (`Could not open stdout file`). The Slurm job
/// name is made safe, the job runs in its own working directory, and the decision says where
/// its output is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_name_with_a_slash_runs_and_its_output_is_where_the_decision_says() {
    let slurm = SlurmCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = running_agent_files(dir.path(), &slurm);
    // The operator's `%x` pattern, as the README documents it.
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "    pollMs: 300\n",
        &format!(
            "    pollMs: 300\n    output: '{}/%x-%j.out'\n",
            marks(dir.path()).display()
        ),
    );
    std::fs::write(&cfg, text).unwrap();
    let nats = NatsServer::start();
    let agent = start_agent(&nats, &cfg).await;
    let _co = CoordinatorProc::start(&nats, &["--reconcile-every-ms", "300"]).await;
    let wf = dir.path().join("slash.yaml");
    std::fs::write(
        &wf,
        "version: v4\njobs:\n  pre/post:\n    image: {uri: docker://alpine}\n    script: echo hello from $FEDVOL_JOB\n    resource: {cpu: {cores: 1}}\n",
    )
    .unwrap();
    let (code, out) = fedvol_code(
        &nats,
        &[
            "submit",
            &wf.display().to_string(),
            "--request-id",
            "slash-1",
            "--follow",
        ],
    );
    assert_eq!(code, 0, "{out}\n{}", agent.log());
    let d = until_state(&nats, "slash-1", "completed").await;
    let job = &jobs_of(&d)["pre/post"];
    assert_eq!(job["exit_code"], 0, "{d:#}");
    let output = job["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output path: {d:#}"));
    assert_eq!(
        output,
        format!(
            "{}/fedvol.slash-1.pre_post-{}.out",
            marks(dir.path()).display(),
            job["id"].as_str().unwrap()
        )
    );
    let printed = std::fs::read_to_string(output).unwrap();
    assert_eq!(printed, "hello from pre/post\n");
}
