//! A real Slurm on loopback for tests: Debian's `slurmctld`, `slurmd` and `munged`
//! as child processes, configured by [`fedvol_cli::devslurm`] (the cluster `fedvol dev
//! --slurm` runs: four nodes, two with a slurmd, one FUTURE, one DOWN; partitions batch, gpu
//! and a DOWN maint) in a temporary directory with free loopback ports, so tests never touch
//! `/etc/slurm` or a system munge. Everything is killed when the value is dropped (jobs
//! cancelled first).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub use fedvol_cli::devslurm::{REAL_NODES, which};

use crate::Spawned;

/// The daemons and commands the harness needs.
pub const PROGRAMS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmd",
    "scontrol",
    "sinfo",
    "sbatch",
    "scancel",
    "squeue",
];

/// A running Slurm cluster with its daemons; see the module's table.
pub struct SlurmCluster {
    /// The temporary directory: `slurm.conf`, `gres.conf`, state, spool, logs, munge key.
    pub dir: tempfile::TempDir,
    munged: Option<Spawned>,
    slurmctld: Option<Spawned>,
    slurmds: Vec<Spawned>,
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
        let files = fedvol_cli::devslurm::write_cluster(dir.path()).expect("the Slurm configuration");
        let mut munge = Command::new(which("munged").expect("munged"));
        munge.args(files.munged_args());
        let mut cluster = SlurmCluster {
            munged: Some(Spawned::start(munge)),
            slurmctld: None,
            slurmds: Vec::new(),
            dir,
        };
        let socket = files.munge_socket;
        let end = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(
                Instant::now() < end,
                "munged did not create its socket:\n{}",
                cluster.logs()
            );
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

    /// Restarts slurmctld on an empty `StateSaveLocation`: a controller that lost its state
    /// (its disk replaced, its state directory wiped). It knows no job of before: `scontrol
    /// show job <old id>` says `Invalid job id specified`, and the jobs its slurmd still run
    /// are killed as orphans when the nodes register.
    pub fn restart_controller_without_state(&mut self) {
        self.stop_controller();
        let state = self.dir.path().join("state");
        std::fs::remove_dir_all(&state).expect("the controller's state directory removed");
        std::fs::create_dir_all(&state).expect("an empty state directory");
        self.start_controller();
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
