//! Real fedvol processes for end-to-end tests: an agent with its inventory and state in a
//! temporary directory, and a coordinator, each started and awaited until ready.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{NatsServer, Spawned};

/// A running `fedvol-agent` with its own directory (inventory, state, scratch space).
pub struct AgentProc {
    /// The process.
    pub proc: Spawned,
    /// Its arguments (for restarts).
    pub args: Vec<String>,
    /// Its directory: `inventory.yaml`, `data/`, and whatever the inventory text made.
    pub dir: tempfile::TempDir,
}

impl AgentProc {
    /// Starts an agent for the inventory `text(dir)`, written to `<dir>/inventory.yaml`,
    /// heartbeating every `heartbeat_ms`, with `--init` and the restore gate as shipped (a
    /// coordinator's reconciler restores the new cluster, with nothing to restore, on its first
    /// heartbeat: `fedvol_agent::restore_gate`); waits until its endpoints are ready (30 s at
    /// most).
    pub async fn start(nats: &NatsServer, heartbeat_ms: u64, text: impl FnOnce(&Path) -> String) -> AgentProc {
        AgentProc::start_with(nats, heartbeat_ms, &[], text).await
    }

    /// [`AgentProc::start`] for a test with no coordinator reconciling (none at all, or
    /// `reconcileEveryMs: 0`): nothing would ever restore the fresh state, so the agent admits
    /// commits at once (`--restore-wait-ms 0`) instead of answering `restoring` for the
    /// shipped 60 s.
    pub async fn start_alone(nats: &NatsServer, heartbeat_ms: u64, text: impl FnOnce(&Path) -> String) -> AgentProc {
        AgentProc::start_with(nats, heartbeat_ms, &["--restore-wait-ms", "0"], text).await
    }

    async fn start_with(
        nats: &NatsServer,
        heartbeat_ms: u64,
        extra: &[&str],
        text: impl FnOnce(&Path) -> String,
    ) -> AgentProc {
        let dir = tempfile::tempdir().expect("a temporary directory for the agent");
        let inv = dir.path().join("inventory.yaml");
        std::fs::write(&inv, text(dir.path())).expect("the inventory file");
        let mut args = vec![
            "--inventory".to_string(),
            inv.display().to_string(),
            "--nats".into(),
            nats.url(),
            "--data-dir".into(),
            dir.path().join("data").display().to_string(),
            "--heartbeat-ms".into(),
            heartbeat_ms.to_string(),
            "--init".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let proc = AgentProc::spawn(&args).await;
        AgentProc { proc, args, dir }
    }

    async fn spawn(args: &[String]) -> Spawned {
        let mut proc = Spawned::bin("fedvol-agent", args);
        proc.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
        proc
    }

    /// The inventory file.
    pub fn inventory(&self) -> PathBuf {
        self.dir.path().join("inventory.yaml")
    }

    /// `<dir>/scratch`, where [`slots_inventory`] puts hostpath volumes.
    pub fn scratch(&self) -> PathBuf {
        self.dir.path().join("scratch")
    }

    /// kill -9, then start again on the same files.
    pub async fn crash_and_restart(&mut self) {
        self.proc.kill();
        self.proc = AgentProc::spawn(&self.args).await;
    }
}

/// The text of example cluster `cluster` (`deploy/examples/clusters/<cluster>.yaml`, as `fedvol
/// dev` runs it) for an agent in `dir`: its node-local path `/mnt/nvme` moved under `dir`, and
/// the Kubernetes manifests it includes written beside it (`<dir>/k8s/storage.yaml`).
///
/// Panics (test failure) when the example files cannot be read or written.
pub fn example_inventory(cluster: &str, dir: &Path) -> String {
    let root = crate::bins::workspace_root().join("deploy/examples/clusters");
    let nvme = dir.join("nvme");
    std::fs::create_dir_all(nvme.join("k8s")).expect("the nvme directory");
    let fix = |t: String| t.replace("/mnt/nvme", &nvme.display().to_string());
    std::fs::create_dir_all(dir.join("k8s")).expect("the k8s directory");
    std::fs::write(
        dir.join("k8s/storage.yaml"),
        fix(std::fs::read_to_string(root.join("k8s/storage.yaml")).expect("the example manifests")),
    )
    .expect("the manifests beside the inventory");
    fix(std::fs::read_to_string(root.join(format!("{cluster}.yaml"))).expect("the example inventory"))
}

/// Cluster `name`: a hostpath provisioner `scratch` (under `<dir>/scratch`, created here) whose
/// ephemeral volumes `ephemeral` may use (`all` or a YAML list such as `[physics]`), and
/// `hosts` hosts of 8 cores / 32 GiB / 4 instances in zone `z1`.
pub fn slots_inventory(name: &str, hosts: usize, dir: &Path, ephemeral: &str) -> String {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).expect("the scratch directory");
    let mut t = format!(
        "cluster: {name}\nprovisioners:\n  scratch:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: {ephemeral}\n    create: {ephemeral}\nzones:\n  z1:\n    hosts:\n",
        scratch.display()
    );
    for i in 0..hosts {
        t.push_str(&format!(
            "      - {{name: h{i}, capacity: {{cpu: 8, memory: 32GiB, instances: 4}}}}\n"
        ));
    }
    t
}

/// Waits (20 s at most) until every cluster the coordinators know is heard by heartbeat, alive
/// and not `restoring` ([`crate::faultkit::heard_and_restored`]).
///
/// Panics (test failure) naming the clusters that never are.
async fn known_clusters_restored(nats: &NatsServer) {
    use fedvol_proto::coordinator::Clusters;
    let client = nats.client().await;
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = crate::load::coordinator_op::<Clusters>(
            &client,
            crate::checker::CHECKER_USER,
            &fedvol_proto::NoArgs {},
            Duration::from_secs(5),
        )
        .await;
        let waiting: Vec<String> = match &r {
            Ok(r) => r
                .clusters
                .iter()
                .filter(|c| c.alive && !crate::faultkit::heard_and_restored(c))
                .map(|c| c.name.clone())
                .collect(),
            Err(e) => vec![format!("(clusters not answered: {e})")],
        };
        if waiting.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "clusters never restored after the coordinator started: {waiting:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running `fedvol-coordinator`.
pub struct CoordinatorProc {
    /// The process.
    pub proc: Spawned,
    /// Its arguments (for restarts).
    pub args: Vec<String>,
}

impl CoordinatorProc {
    /// Starts a coordinator on `nats` with `extra` arguments; waits until it is ready and every
    /// cluster it knows by then is heard by heartbeat and restored (agents started before it
    /// with `--init` and the gate as shipped admit work once its reconciler restored them), as
    /// a user waits for `fedvol clusters` before submitting.
    pub async fn start(nats: &NatsServer, extra: &[&str]) -> CoordinatorProc {
        let mut args = vec!["--nats".to_string(), nats.url()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let proc = CoordinatorProc::spawn(&args).await;
        known_clusters_restored(nats).await;
        CoordinatorProc { proc, args }
    }

    async fn spawn(args: &[String]) -> Spawned {
        let mut proc = Spawned::bin("fedvol-coordinator", args);
        proc.wait_for_log("coordinator ready", Duration::from_secs(30)).await;
        proc
    }

    /// kill -9, then start again with the same arguments.
    pub async fn restart(&mut self) {
        self.proc.kill();
        self.proc = CoordinatorProc::spawn(&self.args).await;
    }
}
