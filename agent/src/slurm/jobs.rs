//! Slurm batch jobs, the impure part: `sbatch` (the script on stdin) and `scancel`, run as the
//! job's user through the grant ([`crate::grant`]), and `scontrol -o show job` (every job the
//! controller knows, in one call, as the agent), each with the configured `SLURM_CONF` and
//! killed past `timeoutMs`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::batch::{Observed, is_unknown_job, observe};
use super::config::SlurmConfig;
use super::records::parse_records;
use super::runner::SlurmError;
use crate::grant::Grant;

/// What a command printed and how it ended.
struct Ran {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// `stderr` on one line, control characters blanked, at most 400 bytes.
fn one_line(s: &str) -> String {
    let mut out: String = s
        .trim()
        .replace('\n', "; ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > 400 {
        let mut end = 400;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push_str("...");
    }
    out
}

/// Who runs a command: the agent itself, or an account through the grant.
#[derive(Debug, Clone, Copy)]
pub enum As<'a> {
    /// The agent's own account (reading Slurm).
    Agent,
    /// `account`, through `grant` (submitting and cancelling its jobs).
    User(&'a Grant, &'a str),
}

async fn exec(
    cfg: &SlurmConfig,
    who: As<'_>,
    program: &Path,
    args: &[String],
    stdin: Option<&str>,
) -> Result<Ran, SlurmError> {
    let (name, mut cmd) = match who {
        As::Agent => {
            let mut cmd = tokio::process::Command::new(program);
            if let Some(conf) = &cfg.slurm_conf {
                cmd.env("SLURM_CONF", conf);
            }
            (program.display().to_string(), cmd)
        }
        As::User(grant, account) => (grant.describe(account, program, &[]), grant.command(account, program)),
    };
    let command = format!("{name} {}", args.join(" "));
    cmd.args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|source| SlurmError::Spawn {
        program: name.clone(),
        source,
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .map_err(|source| SlurmError::Spawn {
                program: name.clone(),
                source,
            })?;
        drop(pipe);
    }
    let out = match tokio::time::timeout(Duration::from_millis(cfg.timeout_ms), child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(source)) => return Err(SlurmError::Spawn { program: name, source }),
        Err(_) => {
            return Err(SlurmError::Timeout {
                command,
                ms: cfg.timeout_ms,
            });
        }
    };
    Ok(Ran {
        ok: out.status.success(),
        status: out.status.to_string(),
        stdout: String::from_utf8(out.stdout).map_err(|_| SlurmError::NotText { command })?,
        stderr: one_line(&String::from_utf8_lossy(&out.stderr)),
    })
}

/// Submits one job: `sbatch args` with `script` on stdin. Returns Slurm's job id
/// (`--parsable`: the id, then `;cluster` on a federated Slurm).
///
/// Errors: `sbatch` could not run, timed out, or refused the job (its message).
pub async fn submit(
    cfg: &SlurmConfig,
    who: As<'_>,
    sbatch: &Path,
    args: &[String],
    script: &str,
) -> Result<String, SlurmError> {
    let ran = exec(cfg, who, sbatch, args, Some(script)).await?;
    let id = ran.stdout.trim().split(';').next().unwrap_or_default().to_string();
    if !ran.ok || id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(SlurmError::Failed {
            command: format!("{} {}", sbatch.display(), args.join(" ")),
            status: ran.status,
            stderr: if ran.stderr.is_empty() {
                one_line(&ran.stdout)
            } else {
                ran.stderr
            },
        });
    }
    Ok(id)
}

/// What Slurm says of job `id`: `Ok(None)` when the controller no longer knows it (past its
/// `MinJobAge`, or never), `Ok(Some(_))` with its state otherwise. One call for one job: the
/// poll reads every job at once ([`query_all`]) and asks this only about a job missing there.
///
/// Errors: Slurm could not be asked (controller down, timeout): the state is unknown.
pub async fn query(cfg: &SlurmConfig, id: &str) -> Result<Option<Observed>, SlurmError> {
    let args = ["-o".to_string(), "show".into(), "job".into(), id.to_string()];
    let ran = exec(cfg, As::Agent, &cfg.scontrol, &args, None).await?;
    if !ran.ok {
        if is_unknown_job(&ran.stderr) {
            return Ok(None);
        }
        return Err(SlurmError::Failed {
            command: format!("{} {}", cfg.scontrol.display(), args.join(" ")),
            status: ran.status,
            stderr: ran.stderr,
        });
    }
    // An array or heterogeneous job prints several records; fedvol submits neither, so the one
    // whose JobId is `id` is the job.
    let records = parse_records(&ran.stdout);
    let rec = records.iter().find(|r| r.get("JobId") == Some(id)).or(records.first());
    Ok(rec.and_then(observe))
}

/// Every job the controller knows, by job id: `scontrol -o show job` without an id, one call
/// however many jobs are followed (one `scontrol show job <id>` per job took 6-10 s per poll
/// at 1,000 jobs). A record this release cannot read is left out (its job is then asked
/// about alone, [`query`]).
///
/// Errors: Slurm could not be asked: every state is unknown for this poll.
pub async fn query_all(cfg: &SlurmConfig) -> Result<std::collections::HashMap<String, Observed>, SlurmError> {
    let args = ["-o".to_string(), "show".into(), "job".into()];
    let ran = exec(cfg, As::Agent, &cfg.scontrol, &args, None).await?;
    if !ran.ok {
        return Err(SlurmError::Failed {
            command: format!("{} {}", cfg.scontrol.display(), args.join(" ")),
            status: ran.status,
            stderr: ran.stderr,
        });
    }
    Ok(parse_records(&ran.stdout)
        .iter()
        .filter_map(|r| Some((r.get("JobId")?.to_string(), observe(r)?)))
        .collect())
}

/// Cancels jobs: `scancel args`, `args` being job ids or a selection such as
/// `--name=<job name>`. A job already ended is no error; no argument, nothing to do.
///
/// Errors: `scancel` could not run, timed out or failed.
pub async fn cancel(cfg: &SlurmConfig, who: As<'_>, scancel: &Path, args: &[String]) -> Result<(), SlurmError> {
    if args.is_empty() {
        return Ok(());
    }
    let ids = args;
    let ran = exec(cfg, who, scancel, ids, None).await?;
    if !ran.ok && !ran.stderr.contains("already completing or completed") && !is_unknown_job(&ran.stderr) {
        return Err(SlurmError::Failed {
            command: format!("{} {}", scancel.display(), ids.join(" ")),
            status: ran.status,
            stderr: ran.stderr,
        });
    }
    Ok(())
}

/// Runs `mkdir -p -m 0700 -- dir` as `account` through `grant`: the directory (a request's
/// working directory) exists and, when created now, belongs to the account alone.
///
/// Errors: the command failed (its words).
pub async fn make_dir(cfg: &SlurmConfig, grant: &Grant, account: &str, dir: &str) -> Result<(), SlurmError> {
    let args = [
        "-p".to_string(),
        "-m".into(),
        "0700".into(),
        "--".into(),
        dir.to_string(),
    ];
    let ran = exec(cfg, As::User(grant, account), Path::new("mkdir"), &args, None).await?;
    if !ran.ok {
        return Err(SlurmError::Failed {
            command: grant.describe(account, Path::new("mkdir"), &args),
            status: ran.status,
            stderr: ran.stderr,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `scontrol` on a path that counts its calls: 1,000 followed jobs cost one call.
    #[tokio::test]
    async fn every_job_is_read_in_one_call() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let listing = dir.path().join("jobs.txt");
        let mut text = String::new();
        for id in 1..=1000 {
            let state = if id % 2 == 0 { "RUNNING" } else { "COMPLETED" };
            text.push_str(&format!(
                "JobId={id} JobName=fedvol.r{id}.a UserId=alice(1001) JobState={state} Reason=None ExitCode=0:0 RunTime=00:00:01\n"
            ));
        }
        std::fs::write(&listing, text).unwrap();
        let fake = dir.path().join("scontrol");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}\ncat {}\n",
                calls.display(),
                listing.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = SlurmConfig {
            scontrol: fake,
            ..Default::default()
        };
        let all = query_all(&cfg).await.unwrap();
        assert_eq!(all.len(), 1000);
        assert_eq!(all["2"].state, fedvol_proto::batch::JobState::Running);
        assert_eq!(all["999"].state, fedvol_proto::batch::JobState::Completed);
        assert_eq!(std::fs::read_to_string(&calls).unwrap(), "-o show job\n");
    }
}
