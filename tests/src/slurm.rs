//! A real Slurm on loopback for tests (issue 17): Debian's `slurmctld`, `slurmd` and `munged`
//! as child processes with their configuration, state, spool and munge key in a temporary
//! directory and free loopback ports, so tests never touch `/etc/slurm` or a system munge.
//!
//! The cluster ([`SlurmCluster::start`]): four nodes, two of them real (one `slurmd -N` each,
//! all on 127.0.0.1 with their own port, as Slurm's multiple-slurmd support allows), one
//! `FUTURE` and one configured `DOWN`; three partitions, one of them `DOWN`:
//!
//! | node | CPUs | RealMemory | features | GRES | state |
//! |---|---|---|---|---|---|
//! | n1 | 4 | 8000 | intel, ib | gpu:a100:2 | a slurmd |
//! | n2 | 4 | 4000 | amd | | a slurmd |
//! | n3 | 8 | 16000 | | | FUTURE |
//! | n4 | 2 | 2000 | | | DOWN |
//!
//! Partitions: `batch` (n1–n4, default, PriorityTier 1), `gpu` (n1, PriorityTier 10), `maint`
//! (n4, State=DOWN). The GPUs are `/dev/null` and `/dev/zero` (Slurm counts device files).
//! Everything is killed when the value is dropped (jobs cancelled first).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::Spawned;
use crate::nats::free_port;

/// The daemons and commands the harness needs.
pub const PROGRAMS: &[&str] = &["munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "scancel", "squeue"];

/// Where `name` is: PATH, then /usr/sbin and /usr/bin (root's PATH may lack sbin).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A running Slurm cluster with its daemons; see the module's table.
pub struct SlurmCluster {
    /// The temporary directory: `slurm.conf`, `gres.conf`, state, spool, logs, munge key.
    pub dir: tempfile::TempDir,
    munged: Option<Spawned>,
    slurmctld: Option<Spawned>,
    slurmds: Vec<Spawned>,
}

/// The nodes that run a slurmd.
pub const REAL_NODES: &[&str] = &["n1", "n2"];

fn conf_text(dir: &Path, ctld_port: u16, node_ports: &[u16; 4]) -> String {
    let d = dir.display();
    format!(
        "ClusterName=fedvoltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MailProg=/bin/true
GresTypes=gpu
SlurmdTimeout=300
MessageTimeout=5
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=4 RealMemory=8000 Features=intel,ib Gres=gpu:a100:2
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=4 RealMemory=4000 Features=amd
NodeName=n3 NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=8 RealMemory=16000 State=FUTURE
NodeName=n4 NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=2 RealMemory=2000 State=DOWN
PartitionName=batch Nodes=n1,n2,n3,n4 Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=gpu Nodes=n1 MaxTime=INFINITE State=UP PriorityTier=10
PartitionName=maint Nodes=n4 State=DOWN
",
        node_ports[0], node_ports[1], node_ports[2], node_ports[3]
    )
}

impl SlurmCluster {
    /// True when every program of [`PROGRAMS`] is installed.
    pub fn available() -> bool {
        PROGRAMS.iter().all(|p| which(p).is_some())
    }

    /// Writes the configuration, starts munged, slurmctld and one slurmd per real node, and
    /// waits (30 s at most) until `sinfo` shows the real nodes idle.
    ///
    /// Panics (test failure) when a program is missing or a daemon does not come up, with its
    /// log.
    pub async fn start() -> SlurmCluster {
        for p in PROGRAMS {
            assert!(
                which(p).is_some(),
                "`{p}` not found: the Slurm tests need Debian's slurmctld, slurmd and munge packages \
                 (`apt-get install slurmctld slurmd munge`; .ci/run installs them)"
            );
        }
        let dir = tempfile::tempdir().expect("a temporary directory for Slurm");
        let d = dir.path();
        for sub in ["munge", "state", "log", "spool/n1", "spool/n2"] {
            std::fs::create_dir_all(d.join(sub)).expect("a Slurm directory");
        }
        use std::os::unix::fs::PermissionsExt;
        let key: Vec<u8> = (0..1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let key_path = d.join("munge/munge.key");
        std::fs::write(&key_path, key).expect("the munge key");
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o400)).expect("key mode");
        std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o755)).expect("munge dir mode");
        let ports = [free_port(), free_port(), free_port(), free_port()];
        std::fs::write(d.join("slurm.conf"), conf_text(d, free_port(), &ports)).expect("slurm.conf");
        std::fs::write(
            d.join("gres.conf"),
            "AutoDetect=off\nNodeName=n1 Name=gpu Type=a100 File=/dev/null\nNodeName=n1 Name=gpu Type=a100 File=/dev/zero\n",
        )
        .expect("gres.conf");

        let mut munge = Command::new(which("munged").expect("munged"));
        munge.args([
            "-F",
            "-f",
            &format!("--socket={}", d.join("munge/munge.socket").display()),
            &format!("--key-file={}", key_path.display()),
            &format!("--log-file={}", d.join("log/munged.log").display()),
            &format!("--pid-file={}", d.join("munge/munged.pid").display()),
            &format!("--seed-file={}", d.join("munge/munged.seed").display()),
        ]);
        let mut cluster = SlurmCluster {
            munged: Some(Spawned::start(munge)),
            slurmctld: None,
            slurmds: Vec::new(),
            dir,
        };
        let socket = cluster.dir.path().join("munge/munge.socket");
        let end = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < end, "munged did not create its socket:\n{}", cluster.logs());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cluster.start_controller();
        for n in REAL_NODES {
            let mut cmd = Command::new(which("slurmd").expect("slurmd"));
            cmd.args(["-D", "-N", n]).env("SLURM_CONF", cluster.conf());
            cluster.slurmds.push(Spawned::start(cmd));
        }
        let ok = crate::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
            let out = cluster.command("sinfo", &["-h", "-N", "-n", "n1,n2", "-o", "%N %T"]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            out.status.success() && text.lines().filter(|l| l.ends_with(" idle")).count() >= 3
        })
        .await;
        assert!(ok, "the Slurm nodes did not become idle:\n{}", cluster.logs());
        cluster
    }

    /// `slurm.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// Starts slurmctld (again) and waits until it answers.
    pub fn start_controller(&mut self) {
        let mut cmd = Command::new(which("slurmctld").expect("slurmctld"));
        cmd.args(["-D"]).env("SLURM_CONF", self.conf());
        self.slurmctld = Some(Spawned::start(cmd));
        let end = Instant::now() + Duration::from_secs(20);
        while !self.command("scontrol", &["ping"]).status.success() {
            assert!(Instant::now() < end, "slurmctld did not answer:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops slurmctld (SIGTERM, then SIGKILL): Slurm's commands fail until
    /// [`Self::start_controller`].
    pub fn stop_controller(&mut self) {
        if let Some(mut c) = self.slurmctld.take() {
            c.terminate(Duration::from_secs(5));
        }
    }

    /// Runs Slurm command `name` with `args` against this cluster.
    pub fn command(&self, name: &str, args: &[&str]) -> Output {
        Command::new(which(name).unwrap_or_else(|| PathBuf::from(name)))
            .args(args)
            .env("SLURM_CONF", self.conf())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
    }

    /// Runs `name args`, asserting it succeeds; returns its stdout.
    pub fn run(&self, name: &str, args: &[&str]) -> String {
        let out = self.command(name, args);
        assert!(
            out.status.success(),
            "{name} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Submits `sbatch args --wrap 'sleep 120'` and waits (30 s at most) until the job runs.
    /// Returns its id.
    pub async fn run_job(&self, args: &[&str]) -> String {
        let mut all = vec!["--parsable", "-o", "/dev/null"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wrap", "sleep 120"]);
        let id = self.run("sbatch", &all).trim().to_string();
        let ok = crate::wait_until(Duration::from_secs(30), Duration::from_millis(200), || {
            self.run("squeue", &["-h", "-j", &id, "-o", "%T"]).trim() == "RUNNING"
        })
        .await;
        assert!(ok, "job {id} did not start:\n{}", self.logs());
        id
    }

    /// The daemons' log files, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let mut procs: Vec<&Spawned> = self.munged.iter().chain(self.slurmctld.iter()).collect();
        procs.extend(self.slurmds.iter());
        for p in procs {
            out.push_str(&format!("--- process {} ---\n{}\n", p.pid(), p.log()));
        }
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("log")) {
            for e in entries.flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                out.push_str(&format!("--- {} (last lines) ---\n", e.path().display()));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        if self.slurmctld.is_some() {
            let _ = self.command("scancel", &["--full", "-u", "root"]);
            let _ = self.command("scancel", &["-u", "root"]);
        }
        for mut d in self.slurmds.drain(..) {
            d.terminate(Duration::from_secs(5));
        }
        if let Some(mut c) = self.slurmctld.take() {
            c.terminate(Duration::from_secs(5));
        }
        if let Some(mut m) = self.munged.take() {
            m.terminate(Duration::from_secs(5));
        }
    }
}
