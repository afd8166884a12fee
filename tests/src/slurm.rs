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

/// The daemons and commands the harness needs (`sudo`: the agent runs each job as its user's
/// account through it).
pub const PROGRAMS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmd",
    "scontrol",
    "sinfo",
    "sbatch",
    "scancel",
    "squeue",
    "sudo",
];

/// The group the shipped sudo rule (`deploy/sudo/fedvol-agent`) lets the agent run jobs as.
pub const JOB_GROUP: &str = "fedvol-users";

/// Why local accounts cannot be made here, if they cannot: jobs run as their users' Unix
/// accounts, which a test creates with `useradd` (and `groupadd`/`usermod`), as root only.
pub fn accounts_unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: the Slurm job tests create the Unix accounts jobs run as with useradd".into());
    }
    for p in ["useradd", "groupadd", "usermod", "sudo"] {
        if which(p).is_none() {
            return Some(format!(
                "`{p}` not found: the Slurm job tests create the Unix accounts jobs run as"
            ));
        }
    }
    None
}

/// Makes sure local account `name` exists (a normal account, uid 1000 or more, with its home
/// directory, in group [`JOB_GROUP`]), creating it with `useradd` when missing; returns its
/// uid. Jobs run as their user's account, so a test that runs jobs as `alice` needs one.
/// Accounts are left in place (they are shared by every test of the run, and by later runs):
/// creating one is serialised across processes by a lock file.
///
/// Panics (test failure) when it cannot be made ([`accounts_unavailable`] says why first).
pub fn account(name: &str) -> u32 {
    if let Some(why) = accounts_unavailable() {
        panic!("account `{name}`: {why}");
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/fedvol-tests-accounts.lock")
        .expect("the accounts lock file");
    let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).expect("the accounts lock");
    let run = |program: &str, args: &[&str]| {
        let out = Command::new(which(program).expect("program"))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run("groupadd", &["-f", JOB_GROUP]);
    assert_eq!(code, Some(0), "groupadd {JOB_GROUP}: {err}");
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        let (code, err) = run("useradd", &["-m", "-s", "/bin/sh", "-G", JOB_GROUP, name]);
        // 9: the name is taken (another process made it since the look-up).
        assert!(matches!(code, Some(0 | 9)), "useradd {name}: {err}");
    } else {
        let (code, err) = run("usermod", &["-a", "-G", JOB_GROUP, name]);
        assert_eq!(code, Some(0), "usermod {name}: {err}");
    }
    let user = nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("account `{name}` still missing after useradd"));
    user.uid.as_raw()
}

/// Makes sure system account `name` exists (no home, no login shell, not in
/// [`JOB_GROUP`]): the unprivileged account an agent runs as (`deploy/systemd`'s `fedvol`).
/// Returns its (uid, gid).
///
/// Panics (test failure) as [`account`].
pub fn system_account(name: &str) -> (u32, u32) {
    if let Some(why) = accounts_unavailable() {
        panic!("account `{name}`: {why}");
    }
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        let out = Command::new(which("useradd").expect("useradd"))
            .args(["-r", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", name])
            .output()
            .expect("useradd runs");
        assert!(
            matches!(out.status.code(), Some(0 | 9)),
            "useradd -r {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let u = nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("system account `{name}` still missing"));
    (u.uid.as_raw(), u.gid.as_raw())
}

/// The shipped sudo rule (`deploy/sudo/fedvol-agent`) installed as an operator installs it
/// (`/etc/sudoers.d/fedvol-agent`, 0440 root, checked with `visudo -c`), removed when dropped.
pub struct SudoRule(std::path::PathBuf);

impl SudoRule {
    /// Installs the rule.
    ///
    /// Panics (test failure) when it cannot be written or `visudo -c` refuses it.
    pub fn install() -> SudoRule {
        use std::os::unix::fs::PermissionsExt;
        let shipped = crate::kit::shipped().join("../sudo/fedvol-agent");
        let to = std::path::PathBuf::from("/etc/sudoers.d/fedvol-agent");
        std::fs::copy(&shipped, &to).unwrap_or_else(|e| panic!("installing {}: {e}", shipped.display()));
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o440)).expect("chmod 0440");
        let visudo = which("visudo").expect("visudo (package sudo)");
        let out = Command::new(visudo).arg("-c").output().expect("visudo runs");
        assert!(
            out.status.success(),
            "visudo -c refuses the shipped rule: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        SudoRule(to)
    }
}

impl Drop for SudoRule {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Makes `dir` a base directory where every job account may create entries but not list or
/// remove others' (`1733`: sticky, write and search for all), as the docs tell an operator
/// to make a volume or job-directory base, and every directory above it searchable (a test's
/// temporary directories are `0700`).
pub fn shared_base(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("a base directory");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1733)).expect("chmod 1733");
    searchable_above(dir);
}

/// Makes every directory from `/tmp`'s children down to `dir`'s parent searchable by all
/// (`o+x`, and `o+r` for none that was not), so that a job account reaches what is below.
pub fn searchable_above(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut p = dir.parent();
    while let Some(d) = p {
        if d == std::path::Path::new("/") || d == std::path::Path::new("/tmp") {
            break;
        }
        if let Ok(m) = std::fs::metadata(d) {
            let mode = m.permissions().mode() & 0o7777;
            if mode & 0o011 != 0o011 {
                let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o011));
            }
        }
        p = d.parent();
    }
}

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
        // Jobs are submitted as their users' accounts: they read slurm.conf and reach munged's
        // socket here.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("the Slurm directory readable by job accounts");
        }
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
            // Every job, whoever runs it (the tests' jobs run as their users' accounts).
            let ids = self.command("squeue", &["-h", "-o", "%i"]);
            let ids: Vec<String> = String::from_utf8_lossy(&ids.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect();
            if !ids.is_empty() {
                let mut args: Vec<&str> = vec!["--full"];
                args.extend(ids.iter().map(String::as_str));
                let _ = self.command("scancel", &args);
                let _ = self.command("scancel", &args[1..]);
            }
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
