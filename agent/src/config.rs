//! The agent's configuration: a strict YAML file (`--config agent.yaml`), overridden by flags
//! and environment variables. Unknown keys are errors with a hint, like every fedvol file. The
//! keys both daemons take (`nats:`, `subjectPrefix`, `maxInFlight`, `maxBodyBytes`,
//! `metricsListen`), the file's reading and its errors are [`fedvol_daemon_config`]'s; the rest
//! is the agent's own.

use std::path::{Path, PathBuf};

use fedvol_daemon_config::{DaemonConfig, DaemonFile, Retired, relative_to};
use fedvol_formats::yaml::{Ctx, Diagnostics, MapReader};

/// Where an agent keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum StateStore {
    /// A redb file in the data directory: one agent process per cluster.
    #[default]
    Redb,
    /// A JetStream stream: replicas of the cluster's agent share it; one serves.
    Jetstream,
}

/// Where the agent's zones and hosts come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InventorySource {
    /// The inventory file (and its includes): everything, zones and hosts included.
    #[default]
    Files,
    /// Slurm: zones and hosts from the controller, read on an interval; the
    /// inventory file gives provisioners, volumes and projects and has no `zones:`.
    Slurm(crate::slurm::SlurmConfig),
}

/// The heartbeat interval of an agent whose configuration sets none, ms (`heartbeatMs`; the
/// shipped `deploy/config/agent.yaml` sets the same). Benchmarks start agents with it.
pub const DEFAULT_HEARTBEAT_MS: u64 = 2000;

/// Everything the agent needs to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The cluster inventory file (it may `include:` Kubernetes manifests).
    pub inventory: PathBuf,
    /// The cluster name; must match the inventory's `cluster` when both are given.
    pub cluster: Option<String>,
    /// What both daemons take: NATS connection, subject prefix, `maxInFlight` (default 1024),
    /// `maxBodyBytes`, `metricsListen`.
    pub daemon: DaemonConfig,
    /// Directory of the state file (`state.redb`).
    pub data_dir: PathBuf,
    /// Heartbeat interval, ms (default [`DEFAULT_HEARTBEAT_MS`]).
    pub heartbeat_ms: u64,
    /// Hold lease when a plan asks for none, ms (default 30000).
    pub hold_ttl_ms: u64,
    /// How long an agent started on a fresh state (`--init`) waits for the coordinators to
    /// restore its cluster's commits before it admits new commits anyway
    /// ([`crate::restore_gate`]), ms (`restoreWaitMs`, default 60 000).
    pub restore_wait_ms: u64,
    /// How often the inventory file is checked for changes, ms (default 2000; 0 = only SIGHUP).
    pub reload_poll_ms: u64,
    /// Development sandbox: re-root every local driver path under this directory (see
    /// `Drivers::with_storage_root`). Not for production.
    pub storage_root: Option<PathBuf>,
    /// Where the state is kept: `redb` (a file in `dataDir`, the default) or `jetstream` (a
    /// stream replicated with the NATS cluster, shared by the cluster's agent replicas, of
    /// which the one holding the cluster's lease serves; see `state::replicated`).
    pub state_store: StateStore,
    /// Copies of the state stream and lease bucket with `stateStore: jetstream` (default 1; 3 on
    /// a 3-node NATS cluster).
    pub state_replicas: usize,
    /// Create the state file when it is missing (`--init`; never from a configuration file):
    /// without it an agent refuses to start on a missing or empty state file.
    pub init: bool,
    /// Where zones and hosts come from (`inventorySource: files | slurm`, with the `slurm:`
    /// block; default files).
    pub source: InventorySource,
}

impl AgentConfig {
    /// Defaults for everything but the inventory and data directory.
    pub fn new(inventory: PathBuf, data_dir: PathBuf) -> Self {
        AgentConfig {
            inventory,
            cluster: None,
            daemon: DaemonConfig::new(1024),
            data_dir,
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            hold_ttl_ms: 30_000,
            restore_wait_ms: 60_000,
            reload_poll_ms: 2000,
            storage_root: None,
            state_store: StateStore::Redb,
            init: false,
            state_replicas: 1,
            source: InventorySource::Files,
        }
    }

    /// Reads a configuration file ([`fedvol_daemon_config::load`]). Relative paths in it are
    /// relative to the file's directory; `inventory:` is required.
    ///
    /// Errors: every problem in the file, with line, column and field.
    pub fn load(path: &Path) -> Result<AgentConfig, Diagnostics> {
        fedvol_daemon_config::load(path, AgentConfig::new(PathBuf::new(), PathBuf::from(".")))
    }

    /// Checks what the file and flags together must satisfy: what both daemons check
    /// ([`DaemonConfig::check`]: NATS settings, `maxBodyBytes`), a heartbeat, a cluster name
    /// that is a NATS subject token.
    ///
    /// Errors: a list of problems, each a sentence.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut out = self.daemon.check();
        if self.heartbeat_ms == 0 {
            out.push("heartbeatMs must be more than 0".to_string());
        }
        if let Some(c) = &self.cluster
            && !fedvol_common::limits::is_token(c)
        {
            out.push(format!(
                "cluster name `{c}` is not valid: use letters, digits, `-` and `_` (it is a NATS subject token)"
            ));
        }
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

impl DaemonFile for AgentConfig {
    const EMPTY: Option<&'static str> = Some("the configuration file is empty; expected at least `inventory:`");
    const RETIRED: &'static [Retired] = &[];

    fn daemon(&mut self) -> &mut DaemonConfig {
        &mut self.daemon
    }

    /// The agent's own keys: `inventory` (required), `cluster`, `dataDir`, `storageRoot`,
    /// `heartbeatMs`, `holdTtlMs`, `restoreWaitMs`, `reloadPollMs`, `stateStore`,
    /// `stateReplicas`, `inventorySource` and `slurm:`.
    fn read(&mut self, ctx: &mut Ctx, r: &mut MapReader<'_>, base: &Path) {
        let rel = |p: String| relative_to(base, p);
        if let Some(n) = r.require(ctx, "inventory")
            && let Some(s) = ctx.nonempty_string(n, "inventory")
        {
            self.inventory = rel(s);
        }
        if let Some(n) = r.take("cluster") {
            self.cluster = ctx.nonempty_string(n, "cluster");
        }
        if let Some(n) = r.take("dataDir")
            && let Some(s) = ctx.nonempty_string(n, "dataDir")
        {
            self.data_dir = rel(s);
        }
        if let Some(n) = r.take("storageRoot")
            && let Some(s) = ctx.nonempty_string(n, "storageRoot")
        {
            self.storage_root = Some(rel(s));
        }
        for (key, slot) in [
            ("heartbeatMs", &mut self.heartbeat_ms),
            ("holdTtlMs", &mut self.hold_ttl_ms),
            ("restoreWaitMs", &mut self.restore_wait_ms),
            ("reloadPollMs", &mut self.reload_poll_ms),
        ] {
            if let Some(n) = r.take(key)
                && let Some(v) = ctx.u64(n, key)
            {
                *slot = v;
            }
        }
        if let Some(n) = r.take("stateStore")
            && let Some(v) = ctx.string(n, "stateStore")
        {
            match v.as_str() {
                "redb" => self.state_store = StateStore::Redb,
                "jetstream" => self.state_store = StateStore::Jetstream,
                other => ctx.error(
                    n.span,
                    "stateStore",
                    format!("`{other}` is not a state store; expected redb or jetstream"),
                ),
            }
        }
        if let Some(n) = r.take("stateReplicas")
            && let Some(v) = ctx.int(n, "stateReplicas", 1, 5)
        {
            self.state_replicas = v as usize;
        }
        let source = r.take("inventorySource").and_then(|n| {
            ctx.one_of(n, "inventorySource", &["files", "slurm"])
                .map(|v| (v, n.span))
        });
        let slurm = r
            .take("slurm")
            .map(|n| (crate::slurm::config::parse_slurm(ctx, n, base), n.span));
        match (source, slurm) {
            (Some(("slurm", _)), slurm) => {
                self.source = InventorySource::Slurm(slurm.map(|(s, _)| s).unwrap_or_default())
            }
            (_, Some((_, span))) => ctx.error(
                span,
                "slurm",
                "`slurm:` is read only with `inventorySource: slurm`; add it, or remove `slurm:`",
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_with_all_fields_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: inv.yaml\ncluster: a\ndataDir: data\nheartbeatMs: 500\nnats:\n  url: nats://127.0.0.1:4222\n  credsFile: a.creds\n",
        )
        .unwrap();
        let c = AgentConfig::load(&p).unwrap();
        assert_eq!(c.inventory, dir.path().join("inv.yaml"));
        assert_eq!(c.data_dir, dir.path().join("data"));
        assert_eq!(c.heartbeat_ms, 500);
        assert_eq!(c.daemon.nats.creds_file, Some(dir.path().join("a.creds")));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn unknown_keys_and_url_credentials_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(&p, "inventory: i.yaml\nheartbeatMS: 5\n").unwrap();
        let e = AgentConfig::load(&p).unwrap_err();
        assert!(e.to_string().contains("did you mean `heartbeatMs`"), "{e}");
        let mut c = AgentConfig::new("i".into(), "d".into());
        c.daemon.nats.url = "nats://alice:s3cret@127.0.0.1:4222".into();
        let errs = c.validate().unwrap_err();
        assert!(errs[0].contains("carries credentials"));
        assert!(!errs[0].contains("s3cret"), "the password must not be echoed");
    }

    #[test]
    fn metrics_listen_is_an_address() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(&p, "inventory: i.yaml\nmetricsListen: 127.0.0.1:9464\n").unwrap();
        let c = AgentConfig::load(&p).unwrap();
        assert_eq!(c.daemon.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(
            AgentConfig::new("i".into(), "d".into()).daemon.metrics_listen,
            None,
            "off by default"
        );
        std::fs::write(&p, "inventory: i.yaml\nmetricsListen: localhost\n").unwrap();
        let e = AgentConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("agent.yaml:2:"), "{e}");
        assert!(e.contains("metricsListen"), "{e}");
        assert!(
            e.contains("`localhost` is not a listen address; expected IP:PORT"),
            "{e}"
        );
    }

    #[test]
    fn cluster_token_and_body_limit_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: i.yaml
maxBodyBytes: 2048
nats: {inboxPrefix: _INBOX_agent-a}
",
        )
        .unwrap();
        let c = AgentConfig::load(&p).unwrap();
        assert_eq!(c.daemon.max_body_bytes, 2048);
        assert_eq!(c.daemon.nats.inbox_prefix.as_deref(), Some("_INBOX_agent-a"));
        let mut c = AgentConfig::new("i".into(), "d".into());
        c.cluster = Some("a.b".into());
        c.daemon.max_body_bytes = 1;
        let errs = c.validate().unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs.iter().any(|e| e.contains("cluster name `a.b` is not valid")),
            "{errs:?}"
        );
    }
}

#[cfg(test)]
mod slurm_block {
    use super::*;
    use fedvol_common::model::PlacementPolicy;

    #[test]
    fn slurm_source_and_its_settings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: i.yaml
inventorySource: slurm
slurm:
  slurmConf: etc/slurm.conf
  refreshMs: 500
  partitions:
    gpu: {priority: 1, placementPolicy: BINPACK, tags: [\"accel:gpu\"], hostCostPerHour: 1.5}
    batch:
  devices: {gpu: gpu}
",
        )
        .unwrap();
        let c = AgentConfig::load(&p).unwrap();
        let InventorySource::Slurm(s) = c.source else {
            panic!("slurm source")
        };
        assert_eq!(s.slurm_conf, Some(dir.path().join("etc/slurm.conf")));
        assert_eq!(
            s.scontrol,
            PathBuf::from("scontrol"),
            "a bare name is looked up on PATH"
        );
        assert_eq!(s.refresh_ms, 500);
        assert_eq!(s.partitions.len(), 2);
        assert_eq!(s.partitions[0].placement_policy, Some(PlacementPolicy::Binpack));
        assert_eq!(s.partitions[1].name, "batch");
        assert_eq!(
            (s.partitions[0].host_cost_per_hour, s.partitions[1].host_cost_per_hour),
            (Some(crate::slurm::config::Price(1.5)), None)
        );
        assert_eq!(s.device_name("gpu"), "gpu");
    }

    #[test]
    fn slurm_jobs_block() {
        use crate::slurm::config::RunMode;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            "inventory: i.yaml\ninventorySource: slurm\nslurm:\n  jobs: {run: container, runtime: [apptainer, exec], pollMs: 300, sbatch: bin/sbatch, output: /l/%j.out}\n",
        )
        .unwrap();
        let InventorySource::Slurm(s) = AgentConfig::load(&p).unwrap().source else {
            panic!("slurm source")
        };
        let j = s.jobs.unwrap();
        assert_eq!(
            j.run,
            RunMode::Container {
                runtime: vec!["apptainer".into(), "exec".into()]
            }
        );
        assert_eq!((j.poll_ms, j.output.as_deref()), (300, Some("/l/%j.out")));
        assert_eq!(j.sbatch, dir.path().join("bin/sbatch"));
        assert_eq!(j.scancel, PathBuf::from("scancel"));
        std::fs::write(
            &p,
            "inventory: i.yaml\ninventorySource: slurm\nslurm:\n  jobs: {run: container}\n",
        )
        .unwrap();
        let e = AgentConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("agent.yaml:4:"), "{e}");
        assert!(e.contains("`run: container` needs `runtime`"), "{e}");
        std::fs::write(
            &p,
            "inventory: i.yaml\ninventorySource: slurm\nslurm:\n  refreshMs: 500\n",
        )
        .unwrap();
        let InventorySource::Slurm(s) = AgentConfig::load(&p).unwrap().source else {
            panic!("slurm source")
        };
        assert!(s.jobs.is_none(), "without `jobs:` nothing is submitted");
    }

    #[test]
    fn slurm_mistakes_are_positioned() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(&p, "inventory: i.yaml\nslurm:\n  refreshMS: 5\n").unwrap();
        let e = AgentConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("did you mean `refreshMs`"), "{e}");
        assert!(e.contains("agent.yaml:3:"), "{e}");
        assert!(e.contains("only with `inventorySource: slurm`"), "{e}");
        std::fs::write(
            &p,
            "inventory: i.yaml\ninventorySource: slurm\nslurm: {refreshMs: 5, partitions: {p: {placementPolicy: PACK, hostCostPerHour: -2}}}\n",
        )
        .unwrap();
        let e = AgentConfig::load(&p).unwrap_err().to_string();
        assert!(e.contains("slurm.refreshMs"), "{e}");
        assert!(e.contains("slurm.partitions.p.placementPolicy"), "{e}");
        assert!(
            e.contains("slurm.partitions.p.hostCostPerHour: expected a number >= 0 (a price per host-hour)"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// The example configuration shipped in deploy/config is valid.
    #[test]
    fn deploy_config_agent_yaml_loads() {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/config/agent.yaml"));
        let c = AgentConfig::load(p).unwrap();
        assert_eq!(c.cluster.as_deref(), Some("cluster-a"));
        assert!(c.inventory.ends_with("examples/clusters/cluster-a.yaml"));
        assert!(c.validate().is_ok());
        // What the benchmark starts its agents with is what ships.
        assert_eq!(c.heartbeat_ms, DEFAULT_HEARTBEAT_MS);
    }

    /// The Slurm example (deploy/examples/slurm) loads, and its inventory loads without zones.
    #[test]
    fn slurm_example_loads() {
        let p = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/examples/slurm/agent.yaml"
        ));
        let c = AgentConfig::load(p).unwrap();
        let InventorySource::Slurm(s) = &c.source else {
            panic!("the example reads Slurm")
        };
        assert_eq!(s.partitions[0].name, "gpu");
        let jobs = s.jobs.as_ref().expect("the example runs jobs");
        assert_eq!(jobs.account, crate::slurm::config::AccountRule::Project);
        assert_eq!(jobs.mem_per_core, fedvol_common::size::ByteSize(2 << 30));
        assert_eq!(
            (jobs.work_dir.as_str(), jobs.poll_ms, jobs.min_uid),
            ("%h/fedvol", 1000, 1000)
        );
        let inv = fedvol_formats::load_inventory_without_zones(&c.inventory, "Slurm")
            .unwrap()
            .value;
        assert_eq!(inv.cluster, "hpc-a");
    }
}

#[cfg(test)]
mod jobs_settings {
    use super::*;

    fn load(jobs: &str) -> Result<AgentConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.yaml");
        std::fs::write(
            &p,
            format!("inventory: inv.yaml\ninventorySource: slurm\nslurm:\n  jobs:\n{jobs}"),
        )
        .unwrap();
        AgentConfig::load(&p).map_err(|e| e.to_string())
    }

    /// Who jobs run as and what they are given, as configured; mistakes named with their field.
    #[test]
    fn the_identity_and_resource_settings_are_read_and_checked() {
        let c = load("    userMap: users.map\n    minUid: 2000\n    workDir: /shared/%u\n    account: {physics: phys-acct}\n    qos: {high: urgent}\n    memPerCore: 512MiB\n    grant: sudo\n    sudo: /usr/bin/sudo\n").unwrap();
        let InventorySource::Slurm(s) = &c.source else { panic!() };
        let j = s.jobs.as_ref().unwrap();
        assert!(j.user_map.as_ref().unwrap().ends_with("users.map") && j.user_map.as_ref().unwrap().is_absolute());
        assert_eq!((j.min_uid, j.work_dir.as_str()), (2000, "/shared/%u"));
        assert_eq!(j.account.account(Some("physics")).as_deref(), Some("phys-acct"));
        assert_eq!(j.account.account(Some("bio")), None);
        assert_eq!(j.qos["high"], "urgent");
        assert_eq!(j.mem_per_core, fedvol_common::size::ByteSize(512 << 20));
        for (bad, field) in [
            ("    workDir: relative/dir\n", "slurm.jobs.workDir"),
            ("    account: everyone\n", "slurm.jobs.account"),
            ("    memPerCore: lots\n", "slurm.jobs.memPerCore"),
            ("    grant: setuid\n", "slurm.jobs.grant"),
            ("    minUid: 0\n", "slurm.jobs.minUid"),
        ] {
            let e = load(bad).unwrap_err();
            assert!(e.contains(field), "{bad}: {e}");
        }
    }
}
