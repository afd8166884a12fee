//! Slurm batch jobs, the impure part: `sbatch` (the script on stdin), `scontrol -o show job`
//! and `scancel`, each with the configured `SLURM_CONF` and killed past `timeoutMs`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::batch::{Observed, is_unknown_job, observe};
use super::config::SlurmConfig;
use super::records::parse_records;
use super::runner::SlurmError;

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

async fn exec(cfg: &SlurmConfig, program: &Path, args: &[String], stdin: Option<&str>) -> Result<Ran, SlurmError> {
    let name = program.display().to_string();
    let command = format!("{name} {}", args.join(" "));
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(conf) = &cfg.slurm_conf {
        cmd.env("SLURM_CONF", conf);
    }
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
pub async fn submit(cfg: &SlurmConfig, sbatch: &Path, args: &[String], script: &str) -> Result<String, SlurmError> {
    let ran = exec(cfg, sbatch, args, Some(script)).await?;
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
/// `MinJobAge`, or never), `Ok(Some(_))` with its state otherwise.
///
/// Errors: Slurm could not be asked (controller down, timeout): the state is unknown.
pub async fn query(cfg: &SlurmConfig, id: &str) -> Result<Option<Observed>, SlurmError> {
    let args = ["-o".to_string(), "show".into(), "job".into(), id.to_string()];
    let ran = exec(cfg, &cfg.scontrol, &args, None).await?;
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

/// Cancels jobs: `scancel args`, `args` being job ids or a selection such as
/// `--name=<job name>`. A job already ended is no error; no argument, nothing to do.
///
/// Errors: `scancel` could not run, timed out or failed.
pub async fn cancel(cfg: &SlurmConfig, scancel: &Path, args: &[String]) -> Result<(), SlurmError> {
    if args.is_empty() {
        return Ok(());
    }
    let ids = args;
    let ran = exec(cfg, scancel, ids, None).await?;
    if !ran.ok && !ran.stderr.contains("already completing or completed") && !is_unknown_job(&ran.stderr) {
        return Err(SlurmError::Failed {
            command: format!("{} {}", scancel.display(), ids.join(" ")),
            status: ran.status,
            stderr: ran.stderr,
        });
    }
    Ok(())
}
