//! A throw-away Slurm cluster on loopback, for `fedvol dev --slurm` and the tests:
//! the configuration of Debian's `munged`, `slurmctld` and `slurmd` in one directory, with
//! free loopback ports, so nothing touches `/etc/slurm` or a system munge. Starting the
//! daemons is the caller's (each keeps its own processes and logs): `munged` with
//! [`SlurmFiles::munged_args`], `slurmctld -D -f <conf>`, and one `slurmd -D -f <conf> -N
//! <node>` per node of [`REAL_NODES`].
//!
//! | node | CPUs | RealMemory | features | GRES | state |
//! |---|---|---|---|---|---|
//! | n1 | 4 | 8000 | intel, ib | gpu:a100:2 | a slurmd |
//! | n2 | 4 | 4000 | amd | | a slurmd |
//! | n3 | 8 | 16000 | | | FUTURE |
//! | n4 | 2 | 2000 | | | DOWN |
//!
//! Partitions: `batch` (n1–n4, default, PriorityTier 1), `gpu` (n1, PriorityTier 10), `maint`
//! (n4, State=DOWN). Every node is a `slurmd -N` on 127.0.0.1 with its own port (Slurm's
//! multiple-slurmd support); the GPUs are `/dev/null` and `/dev/zero` (Slurm counts device
//! files); `SlurmdParameters=config_overrides` lets the nodes claim more than the machine has.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

/// The nodes that run a slurmd.
pub const REAL_NODES: &[&str] = &["n1", "n2"];

/// The Slurm and munge programs a local cluster needs, and `sudo`, through which its agent
/// runs each job as its user's account.
pub const PROGRAMS: &[&str] = &["munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sudo"];

/// Where program `name` is: PATH, then the sbin and bin directories (root's PATH may lack
/// sbin).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The files of a local cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmFiles {
    /// The directory holding everything.
    pub dir: PathBuf,
    /// `slurm.conf` (give it as `SLURM_CONF` or `-f`).
    pub conf: PathBuf,
    /// munged's socket, which `slurm.conf` names in `AuthInfo`.
    pub munge_socket: PathBuf,
    /// slurmctld's port.
    pub controller_port: u16,
}

impl SlurmFiles {
    /// munged's arguments: foreground, forced (root, a private key directory), everything in
    /// the directory.
    pub fn munged_args(&self) -> Vec<String> {
        let d = &self.dir;
        vec![
            "-F".into(),
            "-f".into(),
            format!("--socket={}", self.munge_socket.display()),
            format!("--key-file={}", d.join("munge/munge.key").display()),
            format!("--log-file={}", d.join("log/munged.log").display()),
            format!("--pid-file={}", d.join("munge/munged.pid").display()),
            format!("--seed-file={}", d.join("munge/munged.seed").display()),
        ]
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

fn conf_text(d: &Path, ctld_port: u16, ports: &[u16; 4]) -> String {
    let d = d.display();
    let [p1, p2, p3, p4] = ports;
    format!(
        "ClusterName=fedvollocal
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
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p1} CPUs=4 RealMemory=8000 Features=intel,ib Gres=gpu:a100:2
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p2} CPUs=4 RealMemory=4000 Features=amd
NodeName=n3 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p3} CPUs=8 RealMemory=16000 State=FUTURE
NodeName=n4 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p4} CPUs=2 RealMemory=2000 State=DOWN
PartitionName=batch Nodes=n1,n2,n3,n4 Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=gpu Nodes=n1 MaxTime=INFINITE State=UP PriorityTier=10
PartitionName=maint Nodes=n4 State=DOWN
"
    )
}

/// Writes a local cluster's configuration into `dir` (which must exist): `slurm.conf`,
/// `gres.conf`, a fresh munge key (1 KiB from `/dev/urandom`, mode 0400), and the state, spool
/// and log directories.
///
/// Errors: a file or directory that could not be written, or no free port.
pub fn write_cluster(dir: &Path) -> std::io::Result<SlurmFiles> {
    use std::os::unix::fs::PermissionsExt;
    for sub in ["munge", "state", "log", "spool/n1", "spool/n2"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::set_permissions(dir.join("munge"), std::fs::Permissions::from_mode(0o755))?;
    let mut key = vec![0u8; 1024];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    let key_path = dir.join("munge/munge.key");
    std::fs::write(&key_path, key)?;
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o400))?;
    let controller_port = free_port()?;
    let ports = [free_port()?, free_port()?, free_port()?, free_port()?];
    let conf = dir.join("slurm.conf");
    std::fs::write(&conf, conf_text(dir, controller_port, &ports))?;
    std::fs::write(
        dir.join("gres.conf"),
        "AutoDetect=off\nNodeName=n1 Name=gpu Type=a100 File=/dev/null\nNodeName=n1 Name=gpu Type=a100 File=/dev/zero\n",
    )?;
    Ok(SlurmFiles {
        dir: dir.to_path_buf(),
        conf,
        munge_socket: dir.join("munge/munge.socket"),
        controller_port,
    })
}

/// The inventory file and agent configuration of a cluster `cluster` whose zones and hosts
/// come from the local Slurm at `conf`: one shared hostpath provisioner `scratch` under
/// `scratch`, Slurm read every `refresh_ms`, partition `gpu` preferred (priority 1, BINPACK,
/// tag `accel:gpu`). With `work_dir` (a directory every job account may create entries in),
/// the agent also runs committed workflows (`slurm.jobs`: each placed job submitted with
/// `sbatch` as the Unix account of its user's name, run directly, its state read every
/// `refresh_ms`, its working directory and output in `<work_dir>/<account>/<request id>`).
/// Returns (inventory text, agent configuration text naming `inventory.yaml` beside it).
pub fn agent_files(
    cluster: &str,
    conf: &Path,
    scratch: &Path,
    refresh_ms: u64,
    work_dir: Option<&Path>,
) -> (String, String) {
    let jobs = work_dir.map_or_else(String::new, |dir| {
        format!(
            "  jobs:\n    run: directly\n    pollMs: {refresh_ms}\n    workDir: '{}/%u'\n",
            dir.display()
        )
    });
    (
        format!(
            "cluster: {cluster}\nprovisioners:\n  scratch:\n    driver: {{type: hostpath, path: '{}'}}\n    ephemeral: all\n    create: all\n    access: all\n",
            scratch.display()
        ),
        format!(
            "inventory: inventory.yaml
inventorySource: slurm
slurm:
  slurmConf: {}
  refreshMs: {refresh_ms}
  timeoutMs: 3000
  partitions:
    gpu: {{priority: 1, placementPolicy: BINPACK, tags: [\"accel:gpu\"]}}
{jobs}",
            conf.display()
        ),
    )
}

/// The users `fedvol dev --slurm` names in its hints, whose jobs run as the Unix account of
/// the same name.
pub const DEV_USERS: &[&str] = &["alice", "bob"];

/// For each of `users`, which account its jobs run as on the local Slurm (the same name,
/// through sudo), or the `useradd` line that makes one: a user without an account is refused
/// there, never run as anyone else. One line each.
pub fn account_lines(users: &[&str]) -> Vec<String> {
    users
        .iter()
        .map(|u| match nix::unistd::User::from_name(u) {
            Ok(Some(a)) if a.uid.as_raw() >= 1000 => format!("{u}: runs as account {u} (uid {})", a.uid),
            Ok(Some(a)) => format!(
                "{u}: account {u} has uid {}, below 1000: refused (jobs never run as system accounts)",
                a.uid
            ),
            _ => format!("{u}: no account {u}: refused until you run `useradd -m {u}`"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_with_free_ports() {
        let dir = tempfile::tempdir().unwrap();
        let f = write_cluster(dir.path()).unwrap();
        let text = std::fs::read_to_string(&f.conf).unwrap();
        assert!(text.contains(&format!("SlurmctldPort={}", f.controller_port)));
        assert!(text.contains(&format!("AuthInfo=socket={}", f.munge_socket.display())));
        assert_eq!(std::fs::read(dir.path().join("munge/munge.key")).unwrap().len(), 1024);
        assert!(f.munged_args().iter().any(|a| a.starts_with("--key-file=")));
    }
}
