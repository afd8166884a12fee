//! The grant: how the agent runs a program as the local account a workflow's user maps to,
//! on a cluster that runs jobs as their users (`slurm.jobs`): `sudo -n -u <account> --
//! <program> <args>`, allowed by the narrow rule `deploy/sudo/fedvol-agent` (only `sbatch`,
//! `scancel`, `mkdir` and `rm`, only as the members of group `fedvol-users`, never root).
//!
//! Nothing of the agent's environment crosses it: the command starts with an empty
//! environment but `PATH` and `SLURM_CONF` (when the agent's configuration names one), and
//! sudo's `env_reset` keeps only what its policy allows (the shipped rule keeps
//! `SLURM_CONF`). An agent running as root asks sudo to keep `SLURM_CONF` itself
//! (`--preserve-env=SLURM_CONF`, which root's own rule allows); an unprivileged agent relies on
//! the rule's `env_keep`.
//!
//! Why sudo: it is what Slurm sites already grant and audit (Open OnDemand's per-user
//! processes start through a sudo rule of this shape; slurmrestd's `auth/jwt` impersonation is
//! the other way the issue names, not implemented here).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The `PATH` a command run through the grant starts with (sudo looks the program up in its
/// own `secure_path`).
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How to run a program as another local account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The `sudo` program.
    pub sudo: PathBuf,
    /// Variables the command keeps (`SLURM_CONF`), with their values.
    pub keep: Vec<(String, OsString)>,
}

impl Grant {
    /// A grant through `sudo`, keeping `SLURM_CONF=slurm_conf` when given.
    pub fn sudo(sudo: impl Into<PathBuf>, slurm_conf: Option<&Path>) -> Grant {
        Grant {
            sudo: sudo.into(),
            keep: slurm_conf
                .map(|c| ("SLURM_CONF".to_string(), c.as_os_str().to_os_string()))
                .into_iter()
                .collect(),
        }
    }

    /// The arguments before the program: `-n -u <account> [--preserve-env=...] --`.
    fn prefix(&self, account: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-n".into(), "-u".into(), account.into()];
        if nix::unistd::geteuid().is_root() && !self.keep.is_empty() {
            let names: Vec<&str> = self.keep.iter().map(|(k, _)| k.as_str()).collect();
            args.push(format!("--preserve-env={}", names.join(",")).into());
        }
        args.push("--".into());
        args
    }

    /// `program args` as `account`, for tokio: an empty environment but `PATH` and the kept
    /// variables.
    pub fn command(&self, account: &str, program: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.sudo);
        cmd.env_clear().env("PATH", PATH);
        for (k, v) in &self.keep {
            cmd.env(k, v);
        }
        cmd.args(self.prefix(account)).arg(program);
        cmd
    }

    /// [`Grant::command`] as a blocking `std::process::Command` (the drivers' file work runs on
    /// tokio's blocking pool).
    pub fn std_command(&self, account: &str, program: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.sudo);
        cmd.env_clear().env("PATH", PATH);
        for (k, v) in &self.keep {
            cmd.env(k, v);
        }
        cmd.args(self.prefix(account)).arg(program);
        cmd
    }

    /// The command line, for messages: `sudo -n -u alice -- mkdir ...`.
    pub fn describe(&self, account: &str, program: &Path, args: &[String]) -> String {
        let mut words: Vec<String> = std::iter::once(self.sudo.display().to_string())
            .chain(self.prefix(account).iter().map(|a| a.to_string_lossy().into_owned()))
            .chain(std::iter::once(program.display().to_string()))
            .collect();
        words.extend(args.iter().cloned());
        words.join(" ")
    }
}

/// Runs `account`'s `program args` through `grant` to its end (blocking), killed after
/// `timeout`. Returns `Ok(())` when it exits 0.
///
/// Errors: a sentence with the command line, its status and what it printed on stderr.
pub fn run_blocking(
    grant: &Grant,
    account: &str,
    program: &Path,
    args: &[String],
    timeout: std::time::Duration,
) -> Result<(), String> {
    use std::io::Read;
    let line = grant.describe(account, program, args);
    let mut child = grant
        .std_command(account, program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{line}`: {e}"))?;
    let end = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() < end => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{line}` did not finish within {} ms", timeout.as_millis()));
            }
            Err(e) => return Err(format!("`{line}`: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let err: String = err
        .trim()
        .replace('\n', "; ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(400)
        .collect();
    Err(format!("`{line}` failed ({status}): {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_runs_through_sudo_with_nothing_of_the_agents_environment() {
        let g = Grant::sudo("/usr/bin/sudo", Some(Path::new("/etc/x/slurm.conf")));
        let cmd = g.std_command("alice", Path::new("sbatch"));
        assert_eq!(cmd.get_program(), "/usr/bin/sudo");
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(&args[..3], ["-n", "-u", "alice"]);
        assert_eq!(args.last().map(String::as_str), Some("sbatch"));
        assert_eq!(args[args.len() - 2], "--");
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert!(envs.contains(&("SLURM_CONF".into(), Some("/etc/x/slurm.conf".into()))));
        assert!(envs.contains(&("PATH".into(), Some(PATH.into()))));
        assert_eq!(envs.len(), 2, "{envs:?}");
    }
}
