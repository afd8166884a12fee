//! Running `scontrol` (the thin, impure part of the Slurm source): each command with the
//! configured `SLURM_CONF`, killed when it outlives its timeout, its output handed to the pure
//! readers.
//!
//! Why `scontrol -o` and not `--json`: the one-line `Key=Value` form is printed the same way
//! by every Slurm release in use (new fields are appended, never renamed), while `--json`
//! needs the openapi plugins, is absent from `scontrol` in 22.05 (`scontrol: unrecognized
//! option '--json'`; `sinfo --json` prints `openapi/v0.0.38`), and its shape belongs to a
//! plugin version that later releases replace with others whose fields differ.

use std::process::Stdio;
use std::time::Duration;

use super::config::SlurmConfig;

/// Why Slurm could not be read. The agent keeps serving its last good reading.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// The program could not be started (not installed, not executable).
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The command did not finish in time; it was killed.
    #[error("`{command}` did not answer within {ms} ms")]
    Timeout {
        /// The command line.
        command: String,
        /// The timeout, ms.
        ms: u64,
    },
    /// The command exited with a failure (controller down, munge not running, ...).
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The start of what it printed on stderr.
        stderr: String,
    },
    /// The command printed something that is not UTF-8 text.
    #[error("`{command}` printed text that is not UTF-8")]
    NotText {
        /// The command line.
        command: String,
    },
}

/// What one reading of Slurm printed: the node and partition lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// `scontrol -d -o --future show node`.
    pub nodes: String,
    /// `scontrol -o --all show partition`.
    pub partitions: String,
}

/// The arguments of the node command: details (`-d`, for `GresUsed`), one line per node
/// (`-o`), FUTURE nodes too (`--future`; hidden by default).
pub const NODE_ARGS: &[&str] = &["-d", "-o", "--future", "show", "node"];
/// The arguments of the partition command: one line per partition, hidden ones too.
pub const PARTITION_ARGS: &[&str] = &["-o", "--all", "show", "partition"];

async fn run(cfg: &SlurmConfig, args: &[&str]) -> Result<String, SlurmError> {
    let program = cfg.scontrol.display().to_string();
    let command = format!("{program} {}", args.join(" "));
    let mut cmd = tokio::process::Command::new(&cfg.scontrol);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(conf) = &cfg.slurm_conf {
        cmd.env("SLURM_CONF", conf);
    }
    let child = cmd.spawn().map_err(|source| SlurmError::Spawn { program, source })?;
    let out = match tokio::time::timeout(Duration::from_millis(cfg.timeout_ms), child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(source)) => {
            return Err(SlurmError::Spawn {
                program: cfg.scontrol.display().to_string(),
                source,
            });
        }
        Err(_) => {
            return Err(SlurmError::Timeout {
                command,
                ms: cfg.timeout_ms,
            });
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut stderr: String = stderr
            .trim()
            .replace('\n', "; ")
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if stderr.len() > 400 {
            let mut end = 400;
            while !stderr.is_char_boundary(end) {
                end -= 1;
            }
            stderr.truncate(end);
            stderr.push_str("...");
        }
        return Err(SlurmError::Failed {
            command,
            status: out.status.to_string(),
            stderr,
        });
    }
    String::from_utf8(out.stdout).map_err(|_| SlurmError::NotText { command })
}

/// Reads nodes, then partitions.
///
/// Errors: the first command that could not be run, timed out or failed.
pub async fn read(cfg: &SlurmConfig) -> Result<Output, SlurmError> {
    let nodes = run(cfg, NODE_ARGS).await?;
    let partitions = run(cfg, PARTITION_ARGS).await?;
    Ok(Output { nodes, partitions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &std::path::Path, body: &str) -> SlurmConfig {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("scontrol");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        SlurmConfig {
            scontrol: p,
            timeout_ms: 300,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn failures_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SlurmConfig {
            scontrol: dir.path().join("missing"),
            ..Default::default()
        };
        assert!(matches!(read(&cfg).await, Err(SlurmError::Spawn { .. })));
        let cfg = script(
            dir.path(),
            "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1",
        );
        let e = read(&cfg).await.unwrap_err().to_string();
        assert!(e.contains("Unable to contact slurm controller"), "{e}");
        let cfg = script(dir.path(), "sleep 5");
        let started = std::time::Instant::now();
        assert!(matches!(read(&cfg).await, Err(SlurmError::Timeout { ms: 300, .. })));
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn output_and_slurm_conf_reach_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = script(dir.path(), "echo \"NodeName=x SLURM_CONF=$SLURM_CONF args=$*\"");
        cfg.slurm_conf = Some("/etc/x.conf".into());
        let out = read(&cfg).await.unwrap();
        assert!(
            out.nodes
                .contains("SLURM_CONF=/etc/x.conf args=-d -o --future show node"),
            "{}",
            out.nodes
        );
        assert!(
            out.partitions.contains("args=-o --all show partition"),
            "{}",
            out.partitions
        );
    }
}
