//! A whole federation on one machine, as separate processes, for `fedvol dev` and `fedvol
//! demo`: a real nats-server on a free loopback port with JetStream in a temporary directory, a
//! coordinator, and one agent per cluster inventory (each with its own state directory and a
//! storage sandbox, so volumes are directories under the temporary directory). Everything is
//! stopped and removed when the value is dropped.

use std::fs::File;
use std::net::TcpStream;
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
    /// The temporary directory could not be made.
    #[error("cannot create a temporary directory: {0}")]
    Temp(std::io::Error),
}

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
        if let Ok(l) = fedvol_common::format::load_inventory(&p)
            && fedvol_common::format::classify(
                &p.display().to_string(),
                &std::fs::read_to_string(&p).unwrap_or_default(),
            )
            .is_ok_and(|k| k == fedvol_common::format::FileKind::Inventory)
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
        let child = Command::new(program)
            .args(args)
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

    /// Starts nats-server, a coordinator and one agent per inventory in `clusters_dir`,
    /// printing one progress line per step through `progress`.
    ///
    /// Errors: a missing program, no inventory, or a process that does not become ready (with
    /// its log file named).
    pub fn start(
        nats_server: Option<&Path>,
        clusters_dir: &Path,
        bin_dir: Option<&Path>,
        mut progress: impl FnMut(&str),
    ) -> Result<DevFederation, DevError> {
        let nats_bin = match nats_server {
            Some(p) if p.is_file() => p.to_path_buf(),
            Some(p) => return Err(DevError::NoNatsServer(format!(" at {}", p.display()))),
            None => on_path("nats-server").ok_or(DevError::NoNatsServer(" on PATH".into()))?,
        };
        let agent_bin = find_binary("fedvol-agent", bin_dir)?;
        let coord_bin = find_binary("fedvol-coordinator", bin_dir)?;
        let clusters = cluster_files(clusters_dir)?;
        let dir = tempfile::Builder::new()
            .prefix("fedvol-dev-")
            .tempdir()
            .map_err(DevError::Temp)?;
        let port = free_port()?;
        let url = format!("nats://127.0.0.1:{port}");
        let mut fed = DevFederation {
            procs: Vec::new(),
            url: url.clone(),
            clusters: Vec::new(),
            dir,
        };

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
        progress(&format!(
            "nats-server      {url} (JetStream in {})  {:.1} s",
            js.display(),
            t.elapsed().as_secs_f64()
        ));

        let t = Instant::now();
        let i = fed.spawn(
            "coordinator",
            &coord_bin,
            &[
                "--nats".into(),
                url.clone(),
                "--deadline-ms".into(),
                "2000".into(),
                "--discovery-ms".into(),
                "300".into(),
            ],
        )?;
        fed.wait_for(i, |l| l.contains("coordinator ready"), Duration::from_secs(30))?;
        progress(&format!("coordinator      ready  {:.1} s", t.elapsed().as_secs_f64()));

        for (name, file) in clusters {
            let t = Instant::now();
            let args = vec![
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
                // A fresh sandbox: the agent creates its state file.
                "--init".into(),
            ];
            let i = fed.spawn(&format!("agent-{name}"), &agent_bin, &args)?;
            fed.wait_for(i, |l| l.contains("endpoints ready"), Duration::from_secs(30))?;
            progress(&format!(
                "agent {name:<10} {}  {:.1} s",
                file.display(),
                t.elapsed().as_secs_f64()
            ));
            fed.clusters.push(name);
        }
        Ok(fed)
    }

    /// The log files, by process name.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        self.procs.iter().map(|p| (p.name.clone(), p.log.clone())).collect()
    }

    /// Stops every process (SIGTERM, then SIGKILL after 3 s), agents first, nats-server last.
    pub fn stop(&mut self) {
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
