//! Orchestration: one federation measured in every asked mode and number in flight
//! ([`run_federation`]), the full sweep of the issue ([`sweep`]), the CI smoke form
//! ([`smoke`]), and re-rendering stored results ([`render`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use fedvol_proto::Subjects;
use fedvol_proto::coordinator::CoordinatorOp;

use crate::bench::driver::{LoopSpec, client_count, closed_loop, id_prefix};
use crate::bench::inventory::Shape;
use crate::bench::procs::{
    DEFAULT_DEADLINE_MS, DEFAULT_MAX_PAYLOAD_BYTES, FedSpec, Federation, Member, agent_groups, agent_processes,
    connect, this_process,
};
use crate::bench::raw::{Responders, probe_answer_bytes, scatter_gather};
use crate::bench::report::{ModeResult, RunConfig, RunResult, append_jsonl, markdown_tables, read_jsonl, render_run};
use crate::bench::workflow::{USER, plan_body, submit_body, users, workflow};
use crate::bench::{fedvol, plot, timeline};

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A dry-run submit: fan-out, gather, choice, the decision answered; nothing held or
    /// stored.
    Plan,
    /// A submit: fan-out holding, choice, commit (a hostpath `mkdir`), releases, stores.
    Submit,
    /// The raw scatter-gather to trivial responders.
    Raw,
}

impl Mode {
    /// `plan`, `submit`, `raw`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Submit => "submit",
            Mode::Raw => "raw",
        }
    }

    /// Every mode, in the order they are measured.
    pub const ALL: [Mode; 3] = [Mode::Plan, Mode::Submit, Mode::Raw];
}

/// One federation's measurements.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Clusters.
    pub clusters: usize,
    /// Each cluster's size.
    pub shape: Shape,
    /// Numbers in flight, each measured in every mode.
    pub in_flight: Vec<usize>,
    /// Modes, in order.
    pub modes: Vec<Mode>,
    /// Warm-up before each window.
    pub warmup: Duration,
    /// Each measured window.
    pub window: Duration,
    /// How long one request waits for its answer.
    pub answer_wait: Duration,
    /// Agent processes (0: the default).
    pub agent_processes: usize,
    /// The coordinator's plan deadline, ms.
    pub deadline_ms: u64,
    /// nats-server's `max_payload`, bytes (0: the server's default, 1 MiB).
    pub max_payload_bytes: usize,
    /// The agents' heartbeat interval, ms (default: the shipped one,
    /// [`fedvol_agent::config::DEFAULT_HEARTBEAT_MS`]). At rest and during every window each
    /// agent heartbeats at this rate, and what that costs is in every process's CPU.
    pub heartbeat_ms: u64,
    /// Where results are appended (`results.jsonl`), if anywhere.
    pub out: Option<PathBuf>,
}

impl RunSpec {
    /// The defaults of `fedvol-bench run`: 4 clusters of 1,000 hosts, 4 provisioners, 1,000
    /// volumes, 1 in flight, every mode, 1 s warm-up, 10 s windows, 30 s answer wait,
    /// nats-server's `max_payload` at [`DEFAULT_MAX_PAYLOAD_BYTES`], the shipped heartbeat.
    pub fn new() -> RunSpec {
        RunSpec {
            clusters: 4,
            shape: Shape {
                hosts: 1000,
                provisioners: 4,
                volumes: 1000,
            },
            in_flight: vec![1],
            modes: Mode::ALL.to_vec(),
            warmup: Duration::from_secs(1),
            window: Duration::from_secs(10),
            answer_wait: Duration::from_secs(30),
            agent_processes: 0,
            deadline_ms: DEFAULT_DEADLINE_MS,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            heartbeat_ms: fedvol_agent::config::DEFAULT_HEARTBEAT_MS,
            out: None,
        }
    }
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec::new()
    }
}

/// The cargo profile the fedvol binaries come from (`release`, `debug`, ...).
pub fn profile() -> String {
    crate::bins::bin_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into())
}

async fn clients(url: &str, n: usize) -> Result<Vec<async_nats::Client>, String> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(connect(url, &format!("fedvol-bench driver {i}")).await?);
    }
    Ok(out)
}

/// Starts a federation for `spec`, measures every number in flight in every mode, prints each
/// configuration's tables and appends its result to `spec.out`.
///
/// Errors: the federation cannot start or dies, or a result cannot be written. Failed requests
/// are not errors: they are counted in the results.
pub async fn run_federation(spec: &RunSpec) -> Result<Vec<RunResult>, String> {
    let processes = agent_processes(spec.clusters.max(1), spec.agent_processes);
    eprintln!(
        "fedvol-bench: starting nats-server, a coordinator and {} agents of {} hosts in {processes} process(es)...",
        spec.clusters, spec.shape.hosts
    );
    let mut fed = Federation::start(&FedSpec {
        clusters: spec.clusters,
        shape: spec.shape,
        agent_processes: spec.agent_processes,
        deadline_ms: spec.deadline_ms,
        heartbeat_ms: spec.heartbeat_ms,
        max_payload_bytes: spec.max_payload_bytes,
    })
    .await?;
    let clusters = fed.clusters.len();
    let url = fed.nats.url();
    let probe_client = fed.client().await?;
    let wf = Arc::new(workflow()?);
    let summary = clusters > fedvol_common::summary::AGENT_SUMMARIES_PAST;
    let plan = plan_body(&wf, "probe-0", false, summary, 30_000);
    let answer_bytes = probe_answer_bytes(&probe_client, plan.clone(), clusters, Duration::from_secs(30)).await?;
    let responders = if spec.modes.contains(&Mode::Raw) {
        let groups = agent_groups(clusters, processes);
        Some(Responders::start(&probe_client, &url, &groups, answer_bytes).await?)
    } else {
        None
    };
    let decision_bytes = probe_decision_bytes(&probe_client, &wf, clusters, spec.answer_wait).await;
    eprintln!(
        "fedvol-bench: {clusters} clusters at rest for {:.1} s...",
        spec.window.as_secs_f64()
    );
    let idle = crate::bench::idle::measure(&probe_client, &fed.members(), spec.window).await?;
    let max_in_flight = spec.in_flight.iter().copied().max().unwrap_or(1);
    let pool = clients(&url, client_count(max_in_flight)).await?;
    let me = this_process();
    let mut results = Vec::new();
    for &n in &spec.in_flight {
        let n = n.max(1);
        let drivers = &pool[..client_count(n)];
        let loop_spec = LoopSpec {
            in_flight: n,
            warmup: spec.warmup,
            warmup_cap: spec.warmup.max(spec.answer_wait),
            window: spec.window,
        };
        let mut modes = Vec::new();
        for &mode in &spec.modes {
            eprintln!(
                "fedvol-bench: {clusters} clusters × {} hosts, {n} in flight: {} for {:.1} s after warm-up...",
                spec.shape.hosts,
                mode.name(),
                spec.window.as_secs_f64()
            );
            let (members, measured) = match (mode, &responders) {
                (Mode::Raw, Some(r)) => {
                    let mut members: Vec<Member> =
                        fed.members().into_iter().filter(|m| m.label == "nats-server").collect();
                    members.extend(r.members());
                    members.push(me.clone());
                    let body = Bytes::from(plan.clone());
                    let wait = spec.answer_wait;
                    let m = closed_loop(drivers, loop_spec, &members, move |client, _| {
                        let body = body.clone();
                        async move { scatter_gather(&client, body, clusters, wait).await }
                    })
                    .await?;
                    (members, m)
                }
                (Mode::Raw, None) => continue,
                (Mode::Plan | Mode::Submit, _) => {
                    let mut members = fed.members();
                    members.push(me.clone());
                    let dry_run = mode == Mode::Plan;
                    // Several users past 32 in flight: the per-user cap is not what is measured.
                    let subjects: Arc<[Arc<str>]> = users(n)
                        .iter()
                        .map(|u| Subjects::default().coordinator(CoordinatorOp::Submit, u).into())
                        .collect();
                    let prefix: Arc<str> = id_prefix(mode.name()).into();
                    let (wf, wait) = (wf.clone(), spec.answer_wait);
                    let before = timeline::read(fed.coordinator_metrics, &fed.agent_metrics).await;
                    let m = closed_loop(drivers, loop_spec, &members, move |client, i| {
                        let subject = subjects[i as usize % subjects.len()].clone();
                        let (prefix, wf) = (prefix.clone(), wf.clone());
                        async move {
                            let id = format!("{prefix}-{i}");
                            fedvol::request(&client, &subject, &wf, &id, dry_run, clusters, wait).await
                        }
                    })
                    .await?;
                    if mode == Mode::Submit {
                        match (
                            before,
                            timeline::read(fed.coordinator_metrics, &fed.agent_metrics).await,
                        ) {
                            (Ok(b), Ok(a)) => eprint!("{}", timeline::render(&b, &a)),
                            (Err(e), _) | (_, Err(e)) => eprintln!("fedvol-bench: no submit time line: {e}"),
                        }
                    }
                    (members, m)
                }
            };
            fed.check_alive()?;
            modes.push(ModeResult::new(mode.name(), &measured, &members));
        }
        let result = RunResult {
            config: RunConfig {
                clusters,
                hosts: spec.shape.hosts,
                provisioners: spec.shape.provisioners.max(1),
                volumes: spec.shape.volumes,
                in_flight: n,
                warmup_ms: spec.warmup.as_millis() as u64,
                window_ms: spec.window.as_millis() as u64,
                agent_processes: processes,
                deadline_ms: spec.deadline_ms,
                nats_max_payload_bytes: spec.max_payload_bytes,
                heartbeat_ms: spec.heartbeat_ms,
                profile: profile(),
            },
            unix_ms: fedvol_proto::now_ms(),
            submit_bytes: submit_body(&wf, "b0000000000000-0-submit-0", false).len(),
            plan_bytes: plan.len(),
            answer_bytes,
            decision_bytes,
            idle: Some(idle.clone()),
            modes,
        };
        println!("{}", render_run(&result));
        if let Some(out) = &spec.out {
            append_jsonl(out, &result)?;
        }
        results.push(result);
    }
    Ok(results)
}

/// The sweep.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Numbers of clusters (default 1, 4, 16, 64).
    pub clusters: Vec<usize>,
    /// Hosts per cluster (default 100, 1,000, 10,000).
    pub hosts: Vec<usize>,
    /// Numbers in flight (default 1, 64).
    pub in_flight: Vec<usize>,
    /// Everything else, as for one run (its `clusters`, `shape.hosts` and `in_flight` are
    /// replaced by each configuration's).
    pub base: RunSpec,
    /// The output directory (default `bench-results`).
    pub out: PathBuf,
    /// The command line, written into the tables.
    pub command: String,
}

/// A one-paragraph description of the machine (cores, CPU model, memory, kernel).
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(str::trim)
        .unwrap_or("unknown CPU")
        .to_string();
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cores} cores ({model}), {:.0} GiB, Linux {}",
        mem_kib as f64 / 1024.0 / 1024.0,
        kernel.trim()
    )
}

/// Writes `<out>/tables.md` (the markdown tables of `results`, with how they were made) and
/// every SVG plot. Returns the files written.
///
/// Errors: a file cannot be written.
pub fn write_outputs(out: &Path, results: &[RunResult], command: &str) -> Result<Vec<PathBuf>, String> {
    write_outputs_under(out, results, &provenance(results, command))
}

/// The first paragraph of `tables.md`: the command that measured `results`, this machine, and
/// the runs' settings.
fn provenance(results: &[RunResult], command: &str) -> String {
    let first = results.first().map(|r| &r.config);
    format!(
        "Made by `{command}` on {}; binaries: {} profile; nats-server max_payload: {}; agents heartbeat every {} ms. Each configuration and mode: at least {} ms of warm-up (longer until every request in flight had an answer), then a {} ms window.",
        machine(),
        first.map(|c| c.profile.as_str()).unwrap_or("?"),
        match first.map(|c| c.nats_max_payload_bytes).unwrap_or(0) {
            0 => "default (1 MiB)".to_string(),
            n => format!("{n} bytes"),
        },
        first.map(|c| c.heartbeat_ms).unwrap_or(0),
        first.map(|c| c.warmup_ms).unwrap_or(0),
        first.map(|c| c.window_ms).unwrap_or(0),
    )
}

/// [`write_outputs`] with `header` as the first paragraph of `tables.md`.
fn write_outputs_under(out: &Path, results: &[RunResult], header: &str) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut md = format!("{header}\n\n");
    md.push_str(&markdown_tables(results));
    let tables = out.join("tables.md");
    std::fs::write(&tables, md).map_err(|e| format!("cannot write {}: {e}", tables.display()))?;
    let mut files = vec![tables];
    files.extend(plot::sweep_plots(out, results)?);
    Ok(files)
}

/// Runs every configuration of `spec` (one federation per clusters × hosts, measured at every
/// number in flight in every mode), writing `results.jsonl` (replaced), `tables.md` and the
/// SVG plots into `spec.out`.
///
/// Errors: the output cannot be written, or some configurations could not run (the others are
/// still measured and written; the message lists the failures).
pub async fn sweep(spec: &SweepSpec) -> Result<Vec<RunResult>, String> {
    std::fs::create_dir_all(&spec.out).map_err(|e| format!("cannot create {}: {e}", spec.out.display()))?;
    let jsonl = spec.out.join("results.jsonl");
    if jsonl.exists() {
        std::fs::remove_file(&jsonl).map_err(|e| format!("cannot replace {}: {e}", jsonl.display()))?;
    }
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for &c in &spec.clusters {
        for &h in &spec.hosts {
            let mut run = spec.base.clone();
            run.clusters = c;
            run.shape.hosts = h;
            run.in_flight = spec.in_flight.clone();
            run.out = Some(spec.out.clone());
            match run_federation(&run).await {
                Ok(r) => results.extend(r),
                Err(e) => {
                    eprintln!("fedvol-bench: {c} clusters × {h} hosts could not run: {e}");
                    failures.push(format!("{c} clusters × {h} hosts: {e}"));
                }
            }
        }
    }
    let files = write_outputs(&spec.out, &results, &spec.command)?;
    for f in &files {
        eprintln!("fedvol-bench: wrote {}", f.display());
    }
    if failures.is_empty() {
        Ok(results)
    } else {
        Err(format!(
            "some configurations could not run:\n  {}",
            failures.join("\n  ")
        ))
    }
}

/// Re-renders `tables.md` and the plots from `<out>/results.jsonl`. The first paragraph of the
/// `tables.md` there (`Made by` the command that measured, on the machine that ran it) is kept:
/// the figures are that machine's, not the one rendering them. Without one, it names
/// `command` and says the machine was not recorded.
///
/// Errors: the results cannot be read, or the outputs written.
pub fn render(out: &Path, command: &str) -> Result<Vec<PathBuf>, String> {
    let results = read_jsonl(&out.join("results.jsonl"))?;
    if results.is_empty() {
        return Err(format!("{} holds no results", out.join("results.jsonl").display()));
    }
    let kept = std::fs::read_to_string(out.join("tables.md")).ok().and_then(|t| {
        t.split("\n\n")
            .next()
            .filter(|p| p.starts_with("Made by "))
            .map(str::to_string)
    });
    let header = kept.unwrap_or_else(|| {
        format!("Rendered by `{command}` from `results.jsonl`, measured on a machine it does not record.")
    });
    write_outputs_under(out, &results, &header)
}

/// The CI smoke form: 1 cluster of 100 hosts, 2 in flight, every mode for 300 ms after
/// 100 ms of warm-up, then the tables and a plot of the result written into `out` (a temporary
/// directory when `None`).
///
/// Errors: something cannot run, or a mode had no successful request at all. Slowness is never
/// an error.
pub async fn smoke(out: Option<PathBuf>) -> Result<RunResult, String> {
    let tmp = tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let out = out.unwrap_or_else(|| tmp.path().to_path_buf());
    let spec = RunSpec {
        clusters: 1,
        shape: Shape {
            hosts: 100,
            provisioners: 2,
            volumes: 20,
        },
        in_flight: vec![2],
        modes: Mode::ALL.to_vec(),
        warmup: Duration::from_millis(100),
        window: Duration::from_millis(300),
        answer_wait: Duration::from_secs(10),
        agent_processes: 0,
        deadline_ms: 5000,
        max_payload_bytes: 0,
        heartbeat_ms: fedvol_agent::config::DEFAULT_HEARTBEAT_MS,
        out: Some(out.clone()),
    };
    let result = run_federation(&spec)
        .await?
        .pop()
        .ok_or("smoke: nothing was measured")?;
    write_outputs(&out, std::slice::from_ref(&result), "fedvol-bench smoke")?;
    let points: Vec<plot::Series> = result
        .modes
        .iter()
        .map(|m| plot::Series {
            name: m.mode.clone(),
            points: vec![(1.0, m.throughput_rps.max(0.001))],
        })
        .collect();
    plot::line_chart(
        &out.join("smoke.svg"),
        "smoke",
        "clusters",
        "requests per second",
        &points,
    )?;
    let dead: Vec<String> = result
        .modes
        .iter()
        .filter(|m| m.ok == 0)
        .map(|m| format!("{} ({})", m.mode, m.errors_text()))
        .collect();
    if dead.is_empty() {
        Ok(result)
    } else {
        Err(format!("smoke: every request failed in: {}", dead.join("; ")))
    }
}

/// The size of the coordinator's answer to one plan (a dry-run submit): the stored decision
/// with its request, bytes; 0, with the reason on stderr, when the plan failed.
async fn probe_decision_bytes(
    client: &async_nats::Client,
    wf: &fedvol_common::model::Workflow,
    clusters: usize,
    wait: Duration,
) -> usize {
    let subject = Subjects::default().coordinator(CoordinatorOp::Submit, USER);
    let body = submit_body(wf, "probe-decision", true);
    match crate::load::call_raw(client, &subject, body, wait).await {
        Ok(bytes) => match fedvol::judge(&bytes, true, clusters) {
            Ok(()) => bytes.len(),
            Err(f) => {
                eprintln!("fedvol-bench: the probe plan failed: {}: {}", f.kind, f.detail);
                0
            }
        },
        Err(e) => {
            eprintln!("fedvol-bench: the probe plan failed: {e}");
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::tests::sample;

    /// `render` redraws from the results; the paragraph saying where they were measured stays
    /// (it used to describe the machine rendering them).
    #[test]
    fn render_keeps_where_the_figures_were_measured() {
        let dir = tempfile::tempdir().unwrap();
        let results = [sample(4, 100, 1), sample(16, 100, 1)];
        for r in &results {
            append_jsonl(dir.path(), r).unwrap();
        }
        let made = "Made by `fedvol-bench sweep --out x` on 2 cores (Machine Z), 24 GiB; binaries: release profile.";
        write_outputs_under(dir.path(), &results, made).unwrap();
        render(dir.path(), "fedvol-bench render").unwrap();
        let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
        assert!(tables.starts_with(&format!("{made}\n\n### Throughput")), "{tables}");
        // Without a tables.md, the header says what it does not know.
        std::fs::remove_file(dir.path().join("tables.md")).unwrap();
        render(dir.path(), "fedvol-bench render").unwrap();
        let tables = std::fs::read_to_string(dir.path().join("tables.md")).unwrap();
        assert!(tables.starts_with("Rendered by `fedvol-bench render`"), "{tables}");
    }
}
