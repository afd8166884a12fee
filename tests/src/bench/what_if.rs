//! `fedvol-bench what-if`: how long `fedvol what-if` takes on a federation with many recorded
//! decisions (docs/design.md §2.7; BENCHMARKS.md, "What-if").
//!
//! It starts the benchmark federation ([`Federation`]: nats-server from the shipped
//! `single.conf`, a coordinator, N agents of H hosts), records D decisions with real submits
//! (the benchmark workflow, committed; a fixed number in flight), then asks the coordinator's
//! `what_if` operation, as `fedvol what-if` does, for the baseline (no change) and for the drain
//! of the cluster most decisions chose, each timed from the request to its answer. It prints,
//! per what-if: decisions planned and changed, the wall time, the coordinator's planning time
//! (the rest is reading the decisions from the bucket, asking each agent for its inventory,
//! encoding the answer), the coordinator's CPU time and the answer's size.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fedvol_proto::NoArgs;
use fedvol_proto::coordinator::{CoordinatorOp, Count, WhatIf, WhatIfChanges, WhatIfQuery, WhatIfReply};
use fedvol_proto::{Subjects, now_ms};

use crate::bench::driver::id_prefix;
use crate::bench::fedvol;
use crate::bench::inventory::Shape;
use crate::bench::procs::{FedSpec, Federation, cpu_ms};
use crate::bench::workflow::{USER, workflow};
use crate::load::coordinator_op;

/// What `fedvol-bench what-if` measures.
#[derive(Debug, Clone)]
pub struct WhatIfSpec {
    /// Clusters (agents).
    pub clusters: usize,
    /// Each cluster's size.
    pub shape: Shape,
    /// Decisions to record.
    pub decisions: usize,
    /// Submits in flight while recording.
    pub in_flight: usize,
    /// Agent processes (0: the benchmark's default).
    pub agent_processes: usize,
    /// nats-server's `max_payload`, bytes.
    pub max_payload_bytes: usize,
    /// How long one what-if may take (its deadline), and one submit waits.
    pub wait: Duration,
}

/// One what-if as measured.
struct Measured {
    what: String,
    wall_ms: f64,
    coordinator_cpu_ms: u64,
    answer_bytes: usize,
    reply: WhatIfReply,
}

/// Asks the coordinator for the what-if of `changes`, timed.
async fn measure(
    fed: &Federation,
    client: &async_nats::Client,
    what: &str,
    changes: WhatIfChanges,
    wait: Duration,
) -> Result<Measured, String> {
    let q = WhatIfQuery {
        deadline_ms: now_ms() + wait.as_millis() as u64,
        since_ms: None,
        user: None,
        project: None,
        workflow: None,
        states: Vec::new(),
        changes,
    };
    let pid = fed.coordinator.pid();
    let cpu0 = cpu_ms(pid).unwrap_or(0);
    let t0 = Instant::now();
    let reply = coordinator_op::<WhatIf>(client, USER, &q, wait).await.map_err(|e| {
        let log = fed.coordinator.log();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains("what-if")).collect();
        format!(
            "what-if ({what}): {e}; the coordinator's what-if lines:\n{}\nits last lines:\n{}",
            lines.join("\n"),
            crate::bench::procs::log_tail(&fed.coordinator, 10)
        )
    })?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let coordinator_cpu_ms = cpu_ms(pid).unwrap_or(0).saturating_sub(cpu0);
    let answer_bytes = serde_json::to_vec(&reply).map_or(0, |b| b.len());
    Ok(Measured {
        what: what.to_string(),
        wall_ms,
        coordinator_cpu_ms,
        answer_bytes,
        reply,
    })
}

/// Records `spec.decisions` committed decisions, `spec.in_flight` submits at a time. Returns
/// how many were committed and the failures by kind.
async fn record(fed: &Federation, spec: &WhatIfSpec) -> Result<(usize, Vec<(String, String)>), String> {
    let wf = Arc::new(workflow()?);
    let subject: Arc<str> = Subjects::default().coordinator(CoordinatorOp::Submit, USER).into();
    let prefix: Arc<str> = id_prefix("whatif").into();
    let next = Arc::new(AtomicUsize::new(0));
    let clusters = fed.clusters.len();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..spec.in_flight.max(1) {
        let client = fed.client().await?;
        let (wf, subject, prefix, next) = (wf.clone(), subject.clone(), prefix.clone(), next.clone());
        let (total, wait) = (spec.decisions, spec.wait);
        tasks.spawn(async move {
            let mut ok = 0usize;
            let mut failed = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                if n > 0 && n % 1000 == 0 {
                    eprintln!("fedvol-bench what-if: {n} submits sent");
                }
                let id = format!("{prefix}-{n}");
                match fedvol::request(&client, &subject, &wf, &id, false, clusters, wait).await {
                    Ok(()) => ok += 1,
                    Err(f) => failed.push((f.kind, f.detail)),
                }
            }
            (ok, failed)
        });
    }
    let (mut ok, mut failed) = (0, Vec::new());
    while let Some(j) = tasks.join_next().await {
        let (o, f) = j.map_err(|e| format!("a submit task failed: {e}"))?;
        ok += o;
        failed.extend(f);
    }
    Ok((ok, failed))
}

/// Waits (at most 5 minutes) until no recorded decision is left `planned` (a submit whose
/// commit outcome its coordinator did not learn is settled by the reconciler), so that the
/// what-ifs are timed on a federation at rest.
async fn settle(fed: &Federation, client: &async_nats::Client, wait: Duration) -> Result<(), String> {
    let end = Instant::now() + Duration::from_secs(300);
    loop {
        let counts = coordinator_op::<Count>(client, USER, &NoArgs {}, wait)
            .await
            .map_err(|e| {
                format!(
                    "count: {e}; the coordinator's last lines:\n{}",
                    crate::bench::procs::log_tail(&fed.coordinator, 30)
                )
            })?;
        let planned = counts.states.get("planned").copied().unwrap_or(0);
        if planned == 0 {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!("{planned} decisions still planned after 5 minutes"));
        }
        eprintln!("fedvol-bench what-if: {planned} decisions still planned; waiting for the reconciler...");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// The cluster most committed decisions chose (by the coordinators' `count`).
async fn most_chosen(client: &async_nats::Client, wait: Duration) -> Result<String, String> {
    let counts = coordinator_op::<Count>(client, USER, &NoArgs {}, wait)
        .await
        .map_err(|e| format!("count: {e}"))?;
    counts
        .clusters
        .iter()
        .map(|(c, states)| (states.get("committed").copied().unwrap_or(0), c.clone()))
        .max()
        .map(|(_, c)| c)
        .ok_or_else(|| "no decision was committed".to_string())
}

/// Runs the benchmark (module docs) and prints its figures.
///
/// Errors: the federation cannot start, no decision could be recorded, or a what-if failed.
pub async fn run(spec: &WhatIfSpec) -> Result<(), String> {
    eprintln!(
        "fedvol-bench what-if: starting nats-server, a coordinator and {} agents of {} hosts...",
        spec.clusters, spec.shape.hosts
    );
    let mut fed = Federation::start(&FedSpec {
        clusters: spec.clusters,
        shape: spec.shape,
        agent_processes: spec.agent_processes,
        deadline_ms: crate::bench::procs::DEFAULT_DEADLINE_MS,
        heartbeat_ms: fedvol_agent::config::DEFAULT_HEARTBEAT_MS,
        max_payload_bytes: spec.max_payload_bytes,
    })
    .await?;
    let client = fed.client().await?;
    eprintln!(
        "fedvol-bench what-if: recording {} decisions ({} submits in flight)...",
        spec.decisions, spec.in_flight
    );
    let t0 = Instant::now();
    let (ok, failed) = record(&fed, spec).await?;
    let record_s = t0.elapsed().as_secs_f64();
    fed.check_alive()?;
    println!(
        "recorded: {ok} committed decisions of {} submits in {record_s:.1} s ({:.0}/s); failed: {}",
        spec.decisions,
        ok as f64 / record_s.max(1e-9),
        failed.len()
    );
    if let Some((kind, detail)) = failed.first() {
        println!("  first failure: {kind}: {detail}");
    }
    if ok == 0 {
        return Err("no decision could be recorded".into());
    }
    settle(&fed, &client, spec.wait).await?;
    let drained = most_chosen(&client, spec.wait).await?;
    println!(
        "\n{} clusters × {} hosts, {} provisioners, {} existing volumes each; nats max_payload {} bytes\n",
        spec.clusters, spec.shape.hosts, spec.shape.provisioners, spec.shape.volumes, spec.max_payload_bytes
    );
    println!(
        "| what-if | planned | changed | wall s | reading and planning s | rest s | coordinator CPU s | answer KB | listed |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let drain = WhatIfChanges {
        drain: vec![drained.clone()],
        ..WhatIfChanges::default()
    };
    let mut runs = Vec::new();
    for (what, changes) in [
        ("baseline (no change)".to_string(), WhatIfChanges::default()),
        (format!("drain {drained}"), drain.clone()),
        (format!("drain {drained} (again)"), drain),
    ] {
        let m = measure(&fed, &client, &what, changes, spec.wait).await?;
        let r = &m.reply;
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {} |",
            m.what,
            r.report.planned,
            r.report.changed,
            m.wall_ms / 1000.0,
            r.planning_ms / 1000.0,
            (m.wall_ms - r.planning_ms) / 1000.0,
            m.coordinator_cpu_ms as f64 / 1000.0,
            m.answer_bytes as f64 / 1024.0,
            r.cut.map_or(r.report.decisions.len() as u64, |c| c.listed),
        );
        runs.push(m);
    }
    fed.check_alive()?;
    let log = fed.coordinator.log();
    for l in log.lines().filter(|l| l.contains("what-if")) {
        println!("coordinator: {l}");
    }
    for c in &runs[0].reply.clusters {
        if let Some(n) = &c.note {
            println!("note: {}: {n}", c.name);
        }
    }
    Ok(())
}
