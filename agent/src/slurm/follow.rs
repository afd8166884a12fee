//! A committed request's batch jobs, over their life: submitted once its volumes exist (in
//! dependency order, each `afterok` the jobs it depends on), followed every `pollMs` through
//! `scontrol show job`, and, once every job ended, the request completed by the agent itself
//! (volumes deleted or kept by their reclaim policy), exactly as a `complete` would.
//!
//! Faults: a job Slurm no longer knows is `lost` (its end is unknown; never taken for a
//! success); Slurm unreachable leaves every state as it was (nothing completes on a guess) and
//! is tried again at the next poll; an agent restarted reads the jobs from its state and
//! follows them again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::ActionReply;
use fedvol_proto::batch::{BatchJob, JobState, all_ended};
use fedvol_proto::{Code, Failure, now_ms};

use super::SlurmConfig;
use super::batch::submissions;
use super::jobs;
use crate::shared::{Shared, durable, lock, store_failed, sync};
use crate::state::core::{DriverResult, Next, ProvisionWork};

/// Time the agent's own completion may take to delete volumes, ms.
const COMPLETE_BUDGET_MS: u64 = 30_000;

/// Submits the jobs of `request` placed by the commit's decision (`paths`: each new volume's
/// path by volume key). Returns the jobs submitted, each `pending`.
///
/// Errors: Slurm's refusal (or why it could not be asked), one sentence; jobs already
/// submitted are cancelled first.
pub async fn submit(
    slurm: &SlurmConfig,
    request: &PlanRequest,
    decision: &fedvol_common::decision::ClusterDecision,
    paths: &BTreeMap<String, String>,
) -> Result<Vec<BatchJob>, String> {
    let Some(cfg) = &slurm.jobs else {
        return Ok(Vec::new());
    };
    let subs = submissions(
        slurm,
        &cfg.run,
        cfg.output.as_deref(),
        &request.request_id,
        &request.workflow,
        &decision.jobs,
        paths,
    )?;
    let mut done: Vec<BatchJob> = Vec::new();
    for s in subs {
        let mut args = s.args.clone();
        let after: Vec<String> = s
            .after
            .iter()
            .filter_map(|a| done.iter().find(|d| &d.job == a).map(|d| d.id.clone()))
            .collect();
        if !after.is_empty() {
            args.push(format!("--dependency=afterok:{}", after.join(":")));
            args.push("--kill-on-invalid-dep=yes".into());
        }
        match jobs::submit(slurm, &cfg.sbatch, &args, &s.script).await {
            Ok(id) => {
                tracing::info!(request_id = %request.request_id, job = %s.job, slurm_job = %id, "job submitted to Slurm");
                done.push(BatchJob {
                    job: s.job.clone(),
                    id,
                    state: JobState::Pending,
                    exit_code: None,
                    signal: None,
                    reason: None,
                    submitted_ms: now_ms(),
                    started_ms: None,
                    ended_ms: None,
                });
            }
            Err(e) => {
                tracing::warn!(request_id = %request.request_id, job = %s.job, error = %e, "Slurm refused the job; the commit is rolled back");
                let ids: Vec<String> = done.iter().map(|d| d.id.clone()).collect();
                if let Err(c) = jobs::cancel(slurm, &cfg.scancel, &ids).await {
                    tracing::error!(request_id = %request.request_id, error = %c, "cancelling the jobs already submitted failed");
                }
                return Err(format!("Slurm refused job `{}`: {e}", s.job));
            }
        }
    }
    Ok(done)
}

/// Each provisioned volume's path (its driver's source) by volume key.
pub fn paths(results: &[(ProvisionWork, DriverResult)]) -> BTreeMap<String, String> {
    results
        .iter()
        .filter_map(|(w, r)| match r {
            DriverResult::Ok(src) => Some((w.key.clone(), src.clone())),
            DriverResult::Failed(_) => None,
        })
        .collect()
}

/// `jobs` with what Slurm says now: each job not ended is asked about; an unknown one is
/// `lost`. `None` when Slurm could not be asked (every state stays as it was).
async fn observe_all(slurm: &SlurmConfig, request_id: &str, jobs: &[BatchJob]) -> Option<Vec<BatchJob>> {
    let mut out = jobs.to_vec();
    let now = now_ms();
    for j in out.iter_mut().filter(|j| !j.state.ended()) {
        match jobs::query(slurm, &j.id).await {
            Ok(Some(o)) => {
                // A job cancelled while pending (a dependency never met) never started.
                let ran = match o.state {
                    JobState::Pending => false,
                    JobState::Cancelled => o.run_secs.is_some_and(|s| s > 0) || j.started_ms.is_some(),
                    _ => true,
                };
                if ran && j.started_ms.is_none() {
                    j.started_ms = Some(
                        o.run_secs
                            .map_or(now, |s| now.saturating_sub(s.saturating_mul(1000)))
                            .max(j.submitted_ms),
                    );
                }
                if o.state.ended() && j.ended_ms.is_none() {
                    j.ended_ms = Some(now);
                }
                j.state = o.state;
                j.exit_code = if ran { o.exit_code } else { None };
                j.signal = o.signal;
                j.reason = o.reason;
            }
            Ok(None) => {
                tracing::warn!(request_id, job = %j.job, slurm_job = %j.id, "Slurm no longer knows the job: lost");
                j.state = JobState::Lost;
                j.ended_ms = Some(now);
                j.reason = Some("Slurm no longer knows the job (past the controller's MinJobAge, or purged)".into());
            }
            Err(e) => {
                tracing::warn!(request_id, slurm_job = %j.id, error = %e, "job state unknown: Slurm could not be asked; tried again at the next poll");
                return None;
            }
        }
    }
    Some(out)
}

/// Completes the commit of `request_id` (volumes by their reclaim policy, allocations freed),
/// its jobs recorded as `jobs` first when given. The same steps as the `complete` endpoint.
pub async fn complete(shared: &Shared, request_id: &str, deadline_ms: u64) -> Option<Result<ActionReply, Failure>> {
    let begun = lock(shared).begin_complete(request_id);
    let work = match begun {
        Next::Answer(reply) => return Some(durable(shared, *reply).await),
        Next::Run(work) => work,
    };
    let mut results = Vec::new();
    for w in work {
        let r = shared
            .drivers
            .delete(&w.provisioner, &w.id.name, w.source.as_deref(), request_id, deadline_ms)
            .await;
        results.push(match r {
            Ok(m) => (w, DriverResult::Ok(m)),
            Err(e) => (w, DriverResult::Failed(e.to_string())),
        });
    }
    let finished = lock(shared).finish_complete(request_id, results, now_ms());
    Some(match finished {
        Ok(mut reply) => {
            reply.jobs = lock(shared).jobs_of(request_id).map(|v| v.jobs).unwrap_or_default();
            durable(shared, reply).await
        }
        Err(e) => store_failed(&e),
    })
}

/// Cancels the jobs of `request_id` that have not ended (`scancel`) and records them
/// `cancelled`. Errors: `scancel` failed (Slurm's words); nothing recorded.
pub async fn cancel(shared: &Shared, slurm: &SlurmConfig, request_id: &str) -> Result<(), String> {
    let Some(cfg) = &slurm.jobs else { return Ok(()) };
    let Some(view) = lock(shared).jobs_of(request_id) else {
        return Ok(());
    };
    let live: Vec<String> = view
        .jobs
        .iter()
        .filter(|j| !j.state.ended())
        .map(|j| j.id.clone())
        .collect();
    jobs::cancel(slurm, &cfg.scancel, &live)
        .await
        .map_err(|e| e.to_string())?;
    let now = now_ms();
    let jobs: Vec<BatchJob> = view
        .jobs
        .into_iter()
        .map(|mut j| {
            if !j.state.ended() {
                j.state = JobState::Cancelled;
                j.ended_ms = Some(now);
                j.reason = Some(fedvol_proto::batch::CANCELLED_BY_FEDVOL.into());
            }
            j
        })
        .collect();
    tracing::info!(request_id, cancelled = live.len(), "jobs cancelled");
    let set = lock(shared).set_jobs(request_id, jobs);
    set.map_err(|e| e.to_string())?;
    sync(shared).await.map_err(|e| e.to_string())
}

/// Cancels the jobs of an interrupted commit of `request_id` by their names
/// (`fedvol.<request id>.<job>`, one `scancel --name` per job of `jobs`): the agent stopped
/// after `sbatch` and before the commit was recorded, so their ids are unknown. Failures are
/// logged.
pub async fn cancel_by_name(slurm: &SlurmConfig, request_id: &str, jobs: &[String]) {
    let Some(cfg) = &slurm.jobs else { return };
    for job in jobs {
        let args = [format!("--name=fedvol.{request_id}.{job}")];
        if let Err(e) = jobs::cancel(slurm, &cfg.scancel, &args).await {
            tracing::error!(request_id, job = %job, error = %e, "jobs of an interrupted commit could not be cancelled; scancel them by hand");
        }
    }
}

/// One poll: every followed commit's jobs read from Slurm, changes recorded, and each commit
/// whose jobs all ended completed.
pub async fn poll_once(shared: &Shared, slurm: &SlurmConfig) {
    let followed = lock(shared).followed();
    for (id, before) in followed {
        let jobs = if all_ended(&before) {
            before.clone()
        } else {
            match observe_all(slurm, &id, &before).await {
                Some(j) => j,
                None => return,
            }
        };
        if jobs != before {
            for j in jobs
                .iter()
                .filter(|j| before.iter().any(|b| b.job == j.job && b.state != j.state))
            {
                tracing::info!(request_id = %id, job = %j.job, slurm_job = %j.id, state = j.state.as_str(), exit_code = ?j.exit_code, "job state");
            }
            let set = lock(shared).set_jobs(&id, jobs.clone());
            if let Err(e) = set {
                tracing::error!(request_id = %id, error = %e, "job states could not be recorded");
                continue;
            }
            if let Err(e) = sync(shared).await {
                tracing::error!(request_id = %id, error = %e, "job states could not be made durable");
                continue;
            }
        }
        if all_ended(&jobs) {
            let failure = fedvol_proto::batch::failure(&jobs);
            match complete(shared, &id, now_ms() + COMPLETE_BUDGET_MS).await {
                Some(Ok(r)) if r.ok => {
                    tracing::info!(request_id = %id, failure = ?failure, "every job ended: request completed")
                }
                Some(Ok(r)) => {
                    tracing::warn!(request_id = %id, error = ?r.error, "completing after the jobs ended was refused")
                }
                Some(Err(f)) => {
                    tracing::error!(request_id = %id, error = %f.error.message, "completing after the jobs ended failed")
                }
                None => {}
            }
        }
    }
}

/// Follows the jobs of every commit every `pollMs`, from the state (so an agent restarted
/// picks up the jobs it submitted before).
pub fn spawn(shared: Arc<Shared>) {
    let Some(slurm) = shared.batch.clone() else { return };
    let every = Duration::from_millis(slurm.jobs.as_ref().map_or(5_000, |j| j.poll_ms).max(100));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            poll_once(&shared, &slurm).await;
        }
    });
}

/// The refusal of a complete of `request_id` whose jobs still run.
pub fn jobs_running(cluster: &str, request_id: &str, jobs: &[BatchJob]) -> ActionReply {
    let live: Vec<String> = jobs
        .iter()
        .filter(|j| !j.state.ended())
        .map(|j| format!("`{}` (Slurm job {}, {})", j.job, j.id, j.state.as_str()))
        .collect();
    let mut r = ActionReply::refused(
        cluster,
        request_id,
        Code::JobsRunning.error(format!(
            "jobs {} have not ended: completing now would reclaim volumes under them; `fedvol cancel` cancels them, then completes",
            live.join(", ")
        )),
    );
    r.jobs = jobs.to_vec();
    r
}
