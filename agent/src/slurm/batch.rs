//! Slurm batch jobs, the pure part: what `sbatch` is given for one placed job (arguments and
//! script), the order jobs are submitted in, and what `scontrol -o show job` says of a job.
//!
//! | fedvol | `sbatch` |
//! |---|---|
//! | the job's zone | `--partition` |
//! | its host(s) | `--nodelist`, `--nodes` |
//! | cores, memory per node | `--ntasks-per-node=1 --cpus-per-task`, `--mem` (MiB, rounded up) |
//! | devices per node | `--gres=<name>:<count>` (device names mapped back to GRES names) |
//! | exclusive | `--exclusive` |
//! | `policy.timeout.execute` (`timeout_ms`) | `--time` (minutes, rounded up) |
//! | `depends-on` jobs | `--dependency=afterok:<ids> --kill-on-invalid-dep=yes` |
//! | request id, job name | `--job-name=fedvol.<request id>.<job>`, every character but letters, digits, `.`, `_`, `+`, `-` written `_` (safe in `%x`) |
//! | image | `--comment=fedvol image <uri>` (and the runtime's image in `container` mode) |
//! | each mount | `export FEDVOL_VOLUME_<NAME>=<path>` in the script |
//! | the request's working directory (its user's) | `--chdir`, and `--output=<dir>/<job>-%j.out` unless `output:` is configured |
//! | nothing of the agent's environment | `--export=NONE` (the script exports the `FEDVOL_*` variables) |
//! | the workflow's project, priority class | `--account`, `--qos` (when configured) |

use std::collections::BTreeMap;

use fedvol_common::decision::JobDecision;
use fedvol_common::model::{Job, JobKind, Workflow};
use fedvol_common::run::{script_of, shell_quote};
use fedvol_proto::batch::JobState;

use super::config::{RunMode, SlurmConfig};
use super::records::Record;

/// One job to submit, with everything `sbatch` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// The workflow's job name.
    pub job: String,
    /// Jobs (workflow names) it waits for, each submitted before it.
    pub after: Vec<String>,
    /// `sbatch` arguments, without the dependency (added once the ids are known).
    pub args: Vec<String>,
    /// The batch script, given on stdin.
    pub script: String,
    /// Where its output goes: `sbatch --output`'s pattern (`%j` is the job id).
    pub output: String,
}

/// Where a request's jobs run and who pays: its working directory (existing, its user's),
/// and the Slurm account and QOS, when configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement<'a> {
    /// The working directory (`--chdir`; the output's default directory).
    pub work_dir: &'a str,
    /// `--account`.
    pub account: Option<&'a str>,
    /// `--qos`.
    pub qos: Option<&'a str>,
}

/// The Slurm job name of job `job` of `request_id`: `fedvol.<request id>.<job>` with every
/// character other than ASCII letters, digits, `.`, `_`, `+` and `-` written `_`, so that it
/// is one safe file name wherever `%x` puts it (a `/` in a job name made `--output=...%x...`
/// name a missing directory, and the job fail at launch).
pub fn slurm_job_name(request_id: &str, job: &str) -> String {
    format!("fedvol.{}.{}", safe_name(request_id), safe_name(job))
}

/// `s` as one safe file name part (see [`slurm_job_name`]).
pub fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The output file of a job submitted as Slurm job `id`: `pattern` with `%j` (and `%A`) the id,
/// `%x` the job name, `%u` the account and `%%` a `%`; other codes are left as written.
pub fn output_path(pattern: &str, id: &str, job_name: &str, account: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j' | 'A') => out.push_str(id),
            Some('x') => out.push_str(job_name),
            Some('u') => out.push_str(account),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

pub use fedvol_common::run::volume_env;

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// The jobs of `wf` to submit, in an order where each comes after the jobs it depends on, with
/// their arguments and scripts. `placed` is the cluster's decision per job; `paths` each
/// volume's path on the hosts (by volume key). Only batch jobs (not services) with a host are
/// submitted.
///
/// Errors: a placed job with no command or script (nothing to run), one sentence.
/// `at` says where they run and who pays ([`Placement`]); every job gets `--export=NONE`
/// and its `--mem` (the memory fedvol counted, given in the request as the agent counted it).
///
/// Errors also: two volume keys whose variables collide (`data-1`, `data_1`).
#[allow(clippy::too_many_arguments)]
pub fn submissions(
    cfg: &SlurmConfig,
    run: &RunMode,
    output: Option<&str>,
    request_id: &str,
    wf: &Workflow,
    placed: &indexmap::IndexMap<String, JobDecision>,
    paths: &BTreeMap<String, String>,
    at: &Placement<'_>,
) -> Result<Vec<Submission>, String> {
    if let Some((a, b, var)) = fedvol_common::run::colliding_volume_env(wf.volumes.iter().map(|v| v.key.as_str())) {
        return Err(format!(
            "volumes `{a}` and `{b}` would both be exported as {var}: rename one of them"
        ));
    }
    let runs: Vec<&Job> = wf
        .jobs
        .iter()
        .filter(|j| j.kind == JobKind::Job && placed.get(&j.name).is_some_and(|d| d.host.is_some()))
        .collect();
    let names: Vec<&str> = runs.iter().map(|j| j.name.as_str()).collect();
    // Kahn's order over depends_on, keeping workflow order among ready jobs.
    let mut order: Vec<&Job> = Vec::new();
    let mut left: Vec<&Job> = runs.clone();
    while !left.is_empty() {
        let ready = left.iter().position(|j| {
            j.depends_on
                .iter()
                .filter(|d| names.contains(&d.as_str()))
                .all(|d| order.iter().any(|o| &o.name == d))
        });
        match ready {
            Some(i) => order.push(left.remove(i)),
            None => {
                return Err(format!(
                    "jobs {} depend on each other in a cycle",
                    left.iter()
                        .map(|j| format!("`{}`", j.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    let mut out = Vec::new();
    for j in order {
        let Some(d) = placed.get(&j.name) else { continue };
        let Some(body) = script_of(&wf.annotations, &j.name) else {
            return Err(format!(
                "job `{}` gives no `command` or `script`: there is nothing to run",
                j.name
            ));
        };
        let hosts = if d.hosts.is_empty() {
            d.host.clone().into_iter().collect()
        } else {
            d.hosts.clone()
        };
        let name = slurm_job_name(request_id, &j.name);
        let mut args = vec![
            "--parsable".to_string(),
            format!("--job-name={name}"),
            "--export=NONE".to_string(),
        ];
        if !at.work_dir.is_empty() {
            args.push(format!("--chdir={}", at.work_dir));
        }
        if let Some(a) = at.account {
            args.push(format!("--account={a}"));
        }
        if let Some(q) = at.qos {
            args.push(format!("--qos={q}"));
        }
        if let Some(z) = &d.zone {
            args.push(format!("--partition={z}"));
        }
        args.push(format!("--nodelist={}", hosts.join(",")));
        args.push(format!("--nodes={}", hosts.len().max(1)));
        args.push("--ntasks-per-node=1".into());
        args.push(format!("--cpus-per-task={}", j.resources.cpu.max(1)));
        if j.resources.memory.0 > 0 {
            args.push(format!("--mem={}M", ceil_div(j.resources.memory.0, 1 << 20)));
        }
        let gres: Vec<String> = j
            .resources
            .devices
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(dev, n)| format!("{}:{n}", cfg.gres_name(dev)))
            .collect();
        if !gres.is_empty() {
            args.push(format!("--gres={}", gres.join(",")));
        }
        if j.resources.exclusive {
            args.push("--exclusive".into());
        }
        if let Some(ms) = j.timeout_ms {
            args.push(format!("--time={}", ceil_div(u128::from(ms), 60_000).max(1)));
        }
        if let Some(img) = &j.image {
            args.push(format!("--comment=fedvol image {img}"));
        }
        let output = match output {
            Some(o) => o.to_string(),
            None if at.work_dir.is_empty() => "slurm-%j.out".to_string(),
            None => format!("{}/{}-%j.out", at.work_dir.trim_end_matches('/'), safe_name(&j.name)),
        };
        args.push(format!("--output={output}"));
        let mut script = format!(
            "#!/bin/sh\n# fedvol: request {request_id}, workflow {}, job {}\nexport FEDVOL_REQUEST_ID={}\nexport FEDVOL_JOB={}\n",
            printable_line(&wf.name),
            j.name,
            shell_quote(request_id),
            shell_quote(&j.name)
        );
        for m in &j.mounts {
            if let Some(p) = paths.get(&m.volume) {
                script.push_str(&format!("export {}={}\n", volume_env(&m.volume), shell_quote(p)));
            }
        }
        match run {
            RunMode::Directly => script.push_str(body),
            RunMode::Container { runtime } => {
                let Some(img) = &j.image else {
                    return Err(format!(
                        "job `{}` has no image, and this cluster runs jobs in containers",
                        j.name
                    ));
                };
                let words: Vec<String> = runtime
                    .iter()
                    .chain([img, &"/bin/sh".to_string(), &"-c".to_string()])
                    .map(|w| shell_quote(w))
                    .collect();
                script.push_str(&format!("exec {} {}\n", words.join(" "), shell_quote(body)));
            }
        }
        out.push(Submission {
            job: j.name.clone(),
            after: j
                .depends_on
                .iter()
                .filter(|d| names.contains(&d.as_str()))
                .cloned()
                .collect(),
            args,
            script,
            output,
        });
    }
    Ok(out)
}

/// `s` on one line (a workflow name in a script comment).
fn printable_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// What `scontrol -o show job <id>` says of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Its state.
    pub state: JobState,
    /// `ExitCode=code:signal`, once ended.
    pub exit_code: Option<i32>,
    /// The signal, when not 0.
    pub signal: Option<i32>,
    /// `Reason`, unless `None`.
    pub reason: Option<String>,
    /// `RunTime`, seconds.
    pub run_secs: Option<u64>,
}

/// Reads one job record. `None` when it has no `JobState` this release knows.
pub fn observe(r: &Record) -> Option<Observed> {
    let word = r.get("JobState")?;
    let state = JobState::from_slurm(word)?;
    let (exit_code, signal) = match r.get("ExitCode").and_then(|e| e.split_once(':')) {
        Some((c, s)) if state.ended() => (c.parse().ok(), s.parse().ok().filter(|s: &i32| *s != 0)),
        _ => (None, None),
    };
    Some(Observed {
        state,
        exit_code,
        signal,
        reason: r.get("Reason").filter(|r| *r != "None").map(str::to_string),
        run_secs: r.get("RunTime").and_then(duration_secs),
    })
}

/// Slurm's `[D-]HH:MM:SS` → seconds.
fn duration_secs(s: &str) -> Option<u64> {
    let (days, hms) = match s.split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().ok()?, rest),
        None => (0, s),
    };
    let mut secs = 0u64;
    for part in hms.split(':') {
        secs = secs.checked_mul(60)?.checked_add(part.parse().ok()?)?;
    }
    days.checked_mul(86_400)?.checked_add(secs)
}

/// True when `stderr` of `scontrol show job` says the id is unknown to the controller.
pub fn is_unknown_job(stderr: &str) -> bool {
    stderr.contains("Invalid job id specified")
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::size::ByteSize;

    fn wf() -> Workflow {
        let text = "version: v4\nvolumes:\n  scratch: {size: 1MiB}\njobs:\n  b:\n    image: {uri: docker://a}\n    command: [/bin/sh, -c, 'exit 3']\n    mounts: {/s: scratch}\n    depends-on: [{name: a}]\n    policy: {timeout: {execute: 90s}}\n    resource: {cpu: {cores: 2}, memory: {size: 1GiB}, devices: {nvidia.com/gpu: 1}}\n  a:\n    image: {uri: docker://a}\n    script: sleep 2\n    mounts: {/s: scratch}\n";
        fedvol_formats::parse_workflow_str("wf.yaml", "wf", text).unwrap().value
    }

    fn placed() -> indexmap::IndexMap<String, JobDecision> {
        ["a", "b"]
            .iter()
            .map(|j| {
                (
                    j.to_string(),
                    JobDecision {
                        zone: Some("gpu".into()),
                        host: Some("n1".into()),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    #[test]
    fn jobs_come_after_their_dependencies_with_their_resources() {
        let paths = BTreeMap::from([("scratch".to_string(), "/data/x y".to_string())]);
        let subs = submissions(
            &SlurmConfig::default(),
            &RunMode::Directly,
            Some("/tmp/%j.out"),
            "r-1",
            &wf(),
            &placed(),
            &paths,
            &Placement::default(),
        )
        .unwrap();
        assert_eq!(subs.iter().map(|s| s.job.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(subs[1].after, ["a"]);
        let b = &subs[1].args;
        for want in [
            "--job-name=fedvol.r-1.b",
            "--partition=gpu",
            "--nodelist=n1",
            "--cpus-per-task=2",
            "--mem=1024M",
            "--gres=gpu:1",
            "--time=2",
            "--output=/tmp/%j.out",
        ] {
            assert!(b.iter().any(|a| a == want), "{want} not in {b:?}");
        }
        assert!(subs[1].script.contains("export FEDVOL_VOLUME_SCRATCH='/data/x y'\n"));
        assert!(
            subs[1].script.ends_with("'/bin/sh' '-c' 'exit 3'\n"),
            "{}",
            subs[1].script
        );
        assert!(subs[0].script.ends_with("sleep 2\n"));
        let c = submissions(
            &SlurmConfig::default(),
            &RunMode::Container {
                runtime: vec!["apptainer".into(), "exec".into()],
            },
            None,
            "r-1",
            &wf(),
            &placed(),
            &paths,
            &Placement::default(),
        )
        .unwrap();
        assert!(
            c[0].script
                .ends_with("exec 'apptainer' 'exec' 'docker://a' '/bin/sh' '-c' 'sleep 2\n'\n"),
            "{}",
            c[0].script
        );
    }

    /// A `/` in a job name (the Fuzzfile parser accepts one) made `--output=dir/%x-%j.out`
    /// name a missing directory: Slurm failed the job at launch (`Could not open stdout
    /// file`). The Slurm name, and the output file of the default, hold no `/`.
    #[test]
    fn job_names_are_safe_for_percent_x_and_jobs_run_in_their_working_directory() {
        assert_eq!(slurm_job_name("r-1", "pre/post step"), "fedvol.r-1.pre_post_step");
        assert_eq!(
            output_path("/o/%x-%j.%u.100%%", "7", "fedvol.r.a", "alice"),
            "/o/fedvol.r.a-7.alice.100%"
        );
        let text = "version: v4\njobs:\n  x/y:\n    image: {uri: docker://a}\n    script: true\n";
        let w = fedvol_formats::parse_workflow_str("wf.yaml", "wf", text).unwrap().value;
        let mut p = placed();
        p.insert("x/y".into(), p["a"].clone());
        let at = Placement {
            work_dir: "/home/alice/fedvol/r-1",
            account: Some("proj"),
            qos: Some("high"),
        };
        let subs = submissions(
            &SlurmConfig::default(),
            &RunMode::Directly,
            None,
            "r-1",
            &w,
            &p,
            &BTreeMap::new(),
            &at,
        )
        .unwrap();
        let a = subs.iter().find(|s| s.job == "x/y").unwrap();
        for want in [
            "--job-name=fedvol.r-1.x_y",
            "--export=NONE",
            "--chdir=/home/alice/fedvol/r-1",
            "--output=/home/alice/fedvol/r-1/x_y-%j.out",
            "--account=proj",
            "--qos=high",
        ] {
            assert!(a.args.iter().any(|x| x == want), "{want} not in {:?}", a.args);
        }
        assert_eq!(a.output, "/home/alice/fedvol/r-1/x_y-%j.out");
    }

    #[test]
    fn a_job_without_a_command_is_refused() {
        let mut w = wf();
        w.annotations.clear();
        let e = submissions(
            &SlurmConfig::default(),
            &RunMode::Directly,
            None,
            "r",
            &w,
            &placed(),
            &BTreeMap::new(),
            &Placement::default(),
        )
        .unwrap_err();
        assert!(e.contains("job `a` gives no `command` or `script`"), "{e}");
        let _ = ByteSize(0);
    }

    #[test]
    fn job_records_are_read() {
        let r = Record {
            line: 1,
            fields: super::super::records::parse_line(
                "JobId=7 JobName=x JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 RunTime=00:01:02",
            ),
        };
        let o = observe(&r).unwrap();
        assert_eq!(o.state, JobState::Failed);
        assert_eq!((o.exit_code, o.signal), (Some(3), None));
        assert_eq!(o.reason.as_deref(), Some("NonZeroExitCode"));
        assert_eq!(o.run_secs, Some(62));
        assert_eq!(duration_secs("1-00:00:01"), Some(86_401));
        assert!(is_unknown_job("slurm_load_jobs error: Invalid job id specified"));
    }
}
