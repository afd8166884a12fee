//! A whole federation on one machine, as separate processes, for `fedvol dev` and `fedvol
//! demo`: a real nats-server on a free loopback port with JetStream in a temporary directory, a
//! coordinator, and one agent per cluster inventory (each with its own state directory and a
//! storage sandbox, so volumes are directories under the temporary directory, which the first
//! progress lines say). Everything is
//! stopped and removed when the value is dropped.

use std::fs::File;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why the federation could not come up.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// nats-server is not installed (or not where `--nats-server` says).
    #[error(
        "nats-server not found{0}: install it (Debian/Ubuntu: `sudo apt-get install nats-server`) or pass --nats-server PATH"
    )]
    NoNatsServer(String),
    /// A fedvol binary is missing.
    #[error(
        "{name} not found next to this fedvol ({dir}) or on PATH: build the workspace first (`cargo build --release`)"
    )]
    NoBinary {
        /// Which binary.
        name: &'static str,
        /// Where it was looked for.
        dir: String,
    },
    /// No cluster inventory in the clusters directory.
    #[error("no cluster inventory (*.yaml with `cluster:`) in {0}")]
    NoClusters(String),
    /// A process did not start or become ready.
    #[error("{what} did not start: {message}; its log: {log}")]
    Start {
        /// Which process.
        what: String,
        /// What happened.
        message: String,
        /// Its log file.
        log: String,
    },
    /// `--slurm` was asked for and a Slurm or munge program is missing.
    #[error(
        "`{0}` not found: `fedvol dev --slurm` needs Slurm, munge and sudo (Debian: apt-get install slurmctld slurmd munge sudo)"
    )]
    NoSlurm(String),
    /// The temporary directory could not be made.
    #[error("cannot create a temporary directory: {0}")]
    Temp(std::io::Error),
}

/// The cluster whose agent reads the local Slurm (`fedvol dev --slurm`).
pub const SLURM_CLUSTER: &str = "slurm-local";

/// One started process and its log.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// A running local federation.
pub struct DevFederation {
    procs: Vec<Proc>,
    /// The NATS URL (`nats://127.0.0.1:<port>`).
    pub url: String,
    /// Cluster names, in start order.
    pub clusters: Vec<String>,
    /// Where logs, state and volumes live (removed on drop).
    pub dir: tempfile::TempDir,
    /// The built-in examples, written under `dir` (absolute paths).
    pub examples: crate::examples::Written,
    /// With [`DevOptions::metrics`]: each daemon and its metrics URL
    /// (`http://127.0.0.1:<port>/metrics`), in start order.
    pub metrics: Vec<(String, String)>,
}

/// What [`DevFederation::start`] runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DevOptions<'a> {
    /// The nats-server program (default: `nats-server` on PATH).
    pub nats_server: Option<&'a Path>,
    /// Directory of cluster inventories, one agent each (default: the built-in examples,
    /// [`crate::examples`]).
    pub clusters_dir: Option<&'a Path>,
    /// Where `fedvol-agent` and `fedvol-coordinator` are (default: next to this `fedvol`, else
    /// PATH).
    pub bin_dir: Option<&'a Path>,
    /// Also run a local Slurm and an agent reading it ([`SLURM_CLUSTER`]).
    pub slurm: bool,
    /// Start the coordinator and every agent with a metrics listener on a free loopback port
    /// (`--metrics-listen`); [`DevFederation::metrics`] lists them.
    pub metrics: bool,
}

/// A process of the federation that exited while it ran.
#[derive(Debug)]
pub struct Exited {
    /// Its name (`coordinator`, `agent-cluster-a`, `nats-server`).
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// How it ended.
    pub status: std::process::ExitStatus,
    /// Its log file.
    pub log: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|c| c.is_file()))
        .unwrap_or(None)
}

/// Finds a fedvol binary: in `bin_dir`, else next to the running `fedvol`, else on PATH.
pub fn find_binary(name: &'static str, bin_dir: Option<&Path>) -> Result<PathBuf, DevError> {
    let here = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let dir = bin_dir.map(Path::to_path_buf).or(here);
    if let Some(d) = &dir
        && d.join(name).is_file()
    {
        return Ok(d.join(name));
    }
    on_path(name).ok_or(DevError::NoBinary {
        name,
        dir: dir.map(|d| d.display().to_string()).unwrap_or_default(),
    })
}

fn free_port() -> Result<u16, DevError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| DevError::Start {
            what: "nats-server".into(),
            message: format!("no free port: {e}"),
            log: String::new(),
        })
}

/// The cluster inventories of `dir`: top-level `*.yaml`/`*.yml`/`*.json` files that are fedvol
/// inventories, sorted by name, with their cluster names.
pub fn cluster_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, DevError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|_| DevError::NoClusters(dir.display().to_string()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !p.is_file() || !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        if let Ok(l) = fedvol_formats::load_inventory(&p)
            && fedvol_formats::classify(
                &p.display().to_string(),
                &std::fs::read_to_string(&p).unwrap_or_default(),
            )
            .is_ok_and(|k| k == fedvol_formats::FileKind::Inventory)
        {
            out.push((l.value.cluster, p));
        }
    }
    if out.is_empty() {
        return Err(DevError::NoClusters(dir.display().to_string()));
    }
    Ok(out)
}

impl DevFederation {
    fn spawn(&mut self, name: &str, program: &Path, args: &[String]) -> Result<usize, DevError> {
        let log = self.dir.path().join(format!("{name}.log"));
        let out = File::create(&log).map_err(DevError::Temp)?;
        let err = out.try_clone().map_err(DevError::Temp)?;
        // Its own process group: Ctrl-C in the terminal reaches `fedvol dev` alone, which
        // stops the processes in order (agents first, nats-server last).
        let child = Command::new(program)
            .args(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| DevError::Start {
                what: name.to_string(),
                message: e.to_string(),
                log: log.display().to_string(),
            })?;
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log,
        });
        Ok(self.procs.len() - 1)
    }

    fn wait_for(&mut self, i: usize, ready: impl Fn(&str) -> bool, timeout: Duration) -> Result<(), DevError> {
        let start = Instant::now();
        loop {
            let p = &mut self.procs[i];
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            if ready(&text) {
                return Ok(());
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                return Err(DevError::Start {
                    what: p.name.clone(),
                    message: format!("exited with {status}: {}", text.lines().last().unwrap_or("")),
                    log: p.log.display().to_string(),
                });
            }
            if start.elapsed() > timeout {
                return Err(DevError::Start {
                    what: p.name.clone(),
                    message: format!("not ready within {} s", timeout.as_secs()),
                    log: p.log.display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts nats-server, a coordinator and one agent per inventory (those of
    /// `opts.clusters_dir`, or the built-in examples written to the state directory), plus, with
    /// `opts.slurm`, a local Slurm ([`crate::devslurm`]: munged, slurmctld, two slurmd) and an
    /// agent of cluster [`SLURM_CLUSTER`] whose zones and hosts are that Slurm's partitions and
    /// nodes, read every second, which runs the workflows committed there (`slurm.jobs`: jobs
    /// submitted with `sbatch`, followed, the workflow completed when they end). One progress
    /// line per step goes through `progress`.
    ///
    /// Errors: a missing program, no inventory, or a process that does not become ready (with
    /// its log file named); with `slurm`, a missing Slurm or munge program or a daemon that does
    /// not come up.
    pub fn start(opts: &DevOptions<'_>, mut progress: impl FnMut(&str)) -> Result<DevFederation, DevError> {
        let DevOptions {
            nats_server,
            clusters_dir,
            bin_dir,
            slurm,
            metrics,
        } = *opts;
        if slurm
            && let Some(p) = crate::devslurm::PROGRAMS
                .iter()
                .find(|p| crate::devslurm::which(p).is_none())
        {
            return Err(DevError::NoSlurm(p.to_string()));
        }
        let nats_bin = match nats_server {
            Some(p) if p.is_file() => p.to_path_buf(),
            Some(p) => return Err(DevError::NoNatsServer(format!(" at {}", p.display()))),
            None => on_path("nats-server").ok_or(DevError::NoNatsServer(" on PATH".into()))?,
        };
        let agent_bin = find_binary("fedvol-agent", bin_dir)?;
        let coord_bin = find_binary("fedvol-coordinator", bin_dir)?;
        let dir = tempfile::Builder::new()
            .prefix("fedvol-dev-")
            .tempdir()
            .map_err(DevError::Temp)?;
        let examples = crate::examples::write(&dir.path().join("examples")).map_err(DevError::Temp)?;
        let clusters = cluster_files(clusters_dir.unwrap_or(&examples.clusters))?;
        let port = free_port()?;
        let url = format!("nats://127.0.0.1:{port}");
        let mut fed = DevFederation {
            procs: Vec::new(),
            url: url.clone(),
            clusters: Vec::new(),
            dir,
            examples,
            metrics: Vec::new(),
        };

        progress(&format!(
            "state directory  {} (logs, JetStream, volumes)",
            fed.dir.path().display()
        ));
        // The agents' storage sandbox (`--storage-root`, fedvol_agent::drivers::Drivers::with_storage_root):
        // said before anything is created, so that nobody looks for volumes at the inventories' paths.
        let storage = fed.dir.path().join("storage");
        progress("volumes          sandboxed: a hostpath or nfs path such as /scratch is made under");
        progress(&format!(
            "                 {}/<cluster>/scratch (free space not checked)",
            storage.display()
        ));
        let t = Instant::now();
        let js = fed.dir.path().join("jetstream");
        let i = fed.spawn(
            "nats-server",
            &nats_bin,
            &[
                "-a".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
                "-js".into(),
                "-sd".into(),
                js.display().to_string(),
            ],
        )?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(DevError::Start {
                    what: "nats-server".into(),
                    message: "not accepting connections within 10 s".into(),
                    log: fed.procs[i].log.display().to_string(),
                });
            }
            if let Ok(Some(s)) = fed.procs[i].child.try_wait() {
                return Err(DevError::Start {
                    what: "nats-server".into(),
                    message: format!("exited with {s}"),
                    log: fed.procs[i].log.display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = fed.procs[i].child.id();
        progress(&format!(
            "nats-server      {url}  pid {pid}  {:.1} s",
            t.elapsed().as_secs_f64()
        ));

        let t = Instant::now();
        let mut args: Vec<String> = vec![
            "--nats".into(),
            url.clone(),
            "--deadline-ms".into(),
            "2000".into(),
            "--discovery-ms".into(),
            "300".into(),
            // The dev federation's one user may also drain and undrain its clusters, to try
            // it (`fedvol clusters drain cluster-a --reason test`); a real coordinator names
            // its operators in `operators:`.
            "--operator".into(),
            "alice".into(),
        ];
        fed.metrics_args("coordinator", metrics, &mut args)?;
        let i = fed.spawn("coordinator", &coord_bin, &args)?;
        fed.wait_for(i, |l| l.contains("coordinator ready"), Duration::from_secs(30))?;
        progress(&format!(
            "coordinator      ready  pid {}  {:.1} s",
            fed.procs[i].child.id(),
            t.elapsed().as_secs_f64()
        ));

        for (name, file) in clusters {
            let t = Instant::now();
            let mut args = vec![
                "--inventory".to_string(),
                file.display().to_string(),
                "--nats".into(),
                url.clone(),
                "--data-dir".into(),
                fed.dir.path().join("agents").join(&name).display().to_string(),
                "--storage-root".into(),
                fed.dir.path().join("storage").join(&name).display().to_string(),
                "--heartbeat-ms".into(),
                "500".into(),
                // A fresh sandbox: the agent creates its state file, with the restore gate
                // as shipped (fedvol_agent::restore_gate): the coordinator restores it, with
                // nothing to restore, on its first heartbeat.
                "--init".into(),
            ];
            fed.metrics_args(&format!("agent {name}"), metrics, &mut args)?;
            let i = fed.spawn(&format!("agent-{name}"), &agent_bin, &args)?;
            fed.wait_for(i, |l| l.contains("endpoints ready"), Duration::from_secs(30))?;
            progress(&format!(
                "agent {name:<10} {}  pid {}  {:.1} s",
                file.display(),
                fed.procs[i].child.id(),
                t.elapsed().as_secs_f64()
            ));
            fed.clusters.push(name);
        }
        if slurm {
            fed.start_slurm(&agent_bin, metrics, &mut progress)?;
        }
        Ok(fed)
    }

    /// The local Slurm's `slurm.conf`, when it runs (`SLURM_CONF=... sinfo`).
    pub fn slurm_conf(&self) -> Option<PathBuf> {
        let conf = self.dir.path().join("slurm/slurm.conf");
        conf.is_file().then_some(conf)
    }

    /// Where the local Slurm's jobs run and write their output: `<this>/<account>/<request
    /// id>/<job>-<job id>.out`, when Slurm runs.
    pub fn slurm_jobs_output(&self) -> Option<PathBuf> {
        self.slurm_conf().map(|_| self.dir.path().join("slurm/jobs"))
    }

    /// Where the local Slurm's agent creates volumes (each a directory of its workflow's user),
    /// when Slurm runs.
    pub fn slurm_volumes(&self) -> Option<PathBuf> {
        self.slurm_conf()
            .map(|_| self.dir.path().join("storage").join(SLURM_CLUSTER))
    }

    fn start_slurm(
        &mut self,
        agent_bin: &Path,
        metrics: bool,
        progress: &mut impl FnMut(&str),
    ) -> Result<(), DevError> {
        use crate::devslurm::{REAL_NODES, which, write_cluster};
        let t = Instant::now();
        let dir = self.dir.path().join("slurm");
        // Jobs are submitted as their users' accounts (never as root): they read slurm.conf and
        // reach munged's socket below here, and create their working directories and volumes.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(self.dir.path(), std::fs::Permissions::from_mode(0o711))
                .map_err(DevError::Temp)?;
            std::fs::create_dir_all(&dir).map_err(DevError::Temp)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(DevError::Temp)?;
        }
        let files = write_cluster(&dir).map_err(DevError::Temp)?;
        let prog = |name: &str| which(name).ok_or_else(|| DevError::NoSlurm(name.to_string()));
        let conf = files.conf.display().to_string();
        let i = self.spawn("munged", &prog("munged")?, &files.munged_args())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !files.munge_socket.exists() {
            if Instant::now() > deadline {
                return Err(DevError::Start {
                    what: "munged".into(),
                    message: "no socket within 10 s".into(),
                    log: self.procs[i].log.display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.spawn(
            "slurmctld",
            &prog("slurmctld")?,
            &["-D".into(), "-f".into(), conf.clone()],
        )?;
        for n in REAL_NODES {
            let args = ["-D".into(), "-f".into(), conf.clone(), "-N".into(), n.to_string()];
            self.spawn(&format!("slurmd-{n}"), &prog("slurmd")?, &args)?;
        }
        let sinfo = prog("sinfo")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(&sinfo)
                .args(["-h", "-N", "-n", "n1,n2", "-o", "%N %T"])
                .env("SLURM_CONF", &files.conf)
                .output();
            let idle = out
                .as_ref()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .filter(|l| l.ends_with(" idle"))
                        .count()
                })
                .unwrap_or(0);
            if idle >= REAL_NODES.len() {
                break;
            }
            if Instant::now() > deadline {
                return Err(DevError::Start {
                    what: "slurm".into(),
                    message: "the nodes did not become idle within 30 s".into(),
                    log: dir.join("log/slurmctld.log").display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        progress(&format!(
            "slurm            SLURM_CONF={}  {:.1} s",
            files.conf.display(),
            t.elapsed().as_secs_f64()
        ));

        let t = Instant::now();
        let agent_dir = self.dir.path().join("agents").join(SLURM_CLUSTER);
        let scratch = self.dir.path().join("storage").join(SLURM_CLUSTER);
        std::fs::create_dir_all(&agent_dir).map_err(DevError::Temp)?;
        let jobs_out = dir.join("jobs");
        // Sticky bases every account may create its own entries in, not remove others'.
        for base in [&scratch, &jobs_out] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::create_dir_all(base).map_err(DevError::Temp)?;
            std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1733)).map_err(DevError::Temp)?;
        }
        {
            use std::os::unix::fs::PermissionsExt;
            let storage = self.dir.path().join("storage");
            std::fs::set_permissions(&storage, std::fs::Permissions::from_mode(0o711)).map_err(DevError::Temp)?;
        }
        let (inventory, config) =
            crate::devslurm::agent_files(SLURM_CLUSTER, &files.conf, &scratch, 1000, Some(&jobs_out));
        std::fs::write(agent_dir.join("inventory.yaml"), inventory).map_err(DevError::Temp)?;
        let cfg = agent_dir.join("agent.yaml");
        std::fs::write(&cfg, format!("{config}dataDir: data\nheartbeatMs: 500\n")).map_err(DevError::Temp)?;
        let mut args = vec![
            "--config".to_string(),
            cfg.display().to_string(),
            "--nats".into(),
            self.url.clone(),
            "--init".into(),
        ];
        self.metrics_args(&format!("agent {SLURM_CLUSTER}"), metrics, &mut args)?;
        let i = self.spawn(&format!("agent-{SLURM_CLUSTER}"), agent_bin, &args)?;
        self.wait_for(i, |l| l.contains("endpoints ready"), Duration::from_secs(30))?;
        progress(&format!(
            "agent {SLURM_CLUSTER:<10} zones and hosts from Slurm  {:.1} s",
            t.elapsed().as_secs_f64()
        ));
        self.clusters.push(SLURM_CLUSTER.to_string());
        Ok(())
    }

    /// Adds `--metrics-listen 127.0.0.1:<free port>` to `args` when `on`, and records the
    /// endpoint under `who`.
    fn metrics_args(&mut self, who: &str, on: bool, args: &mut Vec<String>) -> Result<(), DevError> {
        if on {
            let port = free_port()?;
            args.extend(["--metrics-listen".to_string(), format!("127.0.0.1:{port}")]);
            self.metrics
                .push((who.to_string(), format!("http://127.0.0.1:{port}/metrics")));
        }
        Ok(())
    }

    /// The first process found to have exited (each is reported once: it is then forgotten,
    /// and [`DevFederation::stop`] does not wait for it).
    pub fn exited(&mut self) -> Option<Exited> {
        let i = self
            .procs
            .iter_mut()
            .position(|p| matches!(p.child.try_wait(), Ok(Some(_))))?;
        let mut p = self.procs.remove(i);
        let status = p.child.wait().ok()?;
        Some(Exited {
            name: p.name,
            pid: p.child.id(),
            status,
            log: p.log,
        })
    }

    /// Keeps the state directory (logs included) when the federation is dropped; its path.
    pub fn keep_dir(&mut self) -> PathBuf {
        self.dir.disable_cleanup(true);
        self.dir.path().to_path_buf()
    }

    /// The log files, by process name.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        self.procs.iter().map(|p| (p.name.clone(), p.log.clone())).collect()
    }

    /// Stops every process (SIGTERM, then SIGKILL after 3 s), agents first, nats-server last.
    pub fn stop(&mut self) {
        // Jobs of the local Slurm outlive its slurmd (slurmstepd runs them): cancel them first.
        if let (Some(conf), Some(scancel)) = (self.slurm_conf(), crate::devslurm::which("scancel"))
            && !self.procs.is_empty()
        {
            let _ = Command::new(scancel)
                .args(["--full", "-u", "root"])
                .env("SLURM_CONF", conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        for p in self.procs.iter_mut().rev() {
            let pid = nix::unistd::Pid::from_raw(p.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        self.procs.clear();
    }
}

impl Drop for DevFederation {
    fn drop(&mut self) {
        self.stop();
    }
}
