//! A committed request's batch jobs, over their life: submitted once its volumes exist (in
//! dependency order, each `afterok` the jobs it depends on), as the local account the
//! workflow's user maps to ([`super::identity`], through the grant), in the request's own
//! working directory; followed every `pollMs` through one `scontrol show job` for every job
//! the agent follows; and, once every job ended, the request completed by the agent itself
//! (volumes deleted or kept by their reclaim policy), exactly as a `complete` would.
//!
//! Faults: a job Slurm no longer knows (absent from the listing and unknown when asked about
//! alone) is `lost` (its end is unknown; never taken for a success); Slurm unreachable leaves
//! every state as it was (nothing completes on a guess) and is tried again at the next poll; a
//! job whose lone query fails keeps its request's states for that poll, the others go on; an
//! agent restarted reads the jobs from its state and follows them again. `fedvol cancel`
//! cancels the jobs and reclaims the volumes only once Slurm reports every job ended
//! (`COMPLETING` is not ended: the job's processes may still write into its volumes).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::ActionReply;
use fedvol_proto::batch::{BatchJob, CANCELLED_BY_FEDVOL, JobState, all_ended};
use fedvol_proto::{Code, Failure, now_ms};

use super::SlurmConfig;
use super::batch::{Observed, Placement, output_path, safe_name, slurm_job_name, submissions};
use super::identity::Runner;
use super::jobs::{self, As};
use crate::shared::{Shared, durable, lock, store_failed, sync};
use crate::state::core::{DriverResult, Next, ProvisionWork};

/// Time the agent's own completion may take to delete volumes, ms.
const COMPLETE_BUDGET_MS: u64 = 30_000;

/// The working directory of `request_id`'s jobs for `account`: `workDir` with `%u` (the
/// account) and `%h` (its home) replaced, then the request id (made a safe file name).
pub fn work_dir(pattern: &str, account: &super::identity::Account, request_id: &str) -> String {
    let base = pattern
        .replace("%u", &account.name)
        .replace("%h", &account.home.display().to_string());
    format!("{}/{}", base.trim_end_matches('/'), safe_name(request_id))
}

/// Submits the jobs of `request` placed by the commit's decision (`paths`: each new volume's
/// path by volume key) as the account `runner` maps its user to, in the request's working
/// directory (created as that account). `request` is the request as the agent counted it
/// ([`crate::state::core::JobRunner::counted`]). Returns the jobs submitted, each `pending`.
///
/// Errors: the user maps to no account, the working directory cannot be made, or Slurm's
/// refusal (or why it could not be asked), one sentence; jobs already submitted are cancelled
/// first.
pub async fn submit(
    slurm: &SlurmConfig,
    runner: &Runner,
    request: &PlanRequest,
    decision: &fedvol_common::decision::ClusterDecision,
    paths: &BTreeMap<String, String>,
) -> Result<Vec<BatchJob>, String> {
    let Some(cfg) = &slurm.jobs else {
        return Ok(Vec::new());
    };
    let account = runner.resolve(&request.user)?;
    let dir = work_dir(&cfg.work_dir, &account, &request.request_id);
    let slurm_account = cfg.account.account(request.workflow.project.as_deref());
    let qos = request
        .workflow
        .priority
        .as_deref()
        .and_then(|p| cfg.qos.get(p))
        .cloned();
    let at = Placement {
        work_dir: &dir,
        account: slurm_account.as_deref(),
        qos: qos.as_deref(),
    };
    let subs = submissions(
        slurm,
        &cfg.run,
        cfg.output.as_deref(),
        &request.request_id,
        &request.workflow,
        &decision.jobs,
        paths,
        &at,
    )?;
    if subs.is_empty() {
        return Ok(Vec::new());
    }
    jobs::make_dir(slurm, &runner.grant, &account.name, &dir)
        .await
        .map_err(|e| {
            format!(
                "the jobs' working directory {dir} could not be made as `{}`: {e}",
                account.name
            )
        })?;
    let who = As::User(&runner.grant, &account.name);
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
        match jobs::submit(slurm, who, &cfg.sbatch, &args, &s.script).await {
            Ok(id) => {
                let output = output_path(
                    &s.output,
                    &id,
                    &slurm_job_name(&request.request_id, &s.job),
                    &account.name,
                );
                tracing::info!(request_id = %request.request_id, job = %s.job, slurm_job = %id, user = %account.name, output = %output, "job submitted to Slurm");
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
                    user: Some(account.name.clone()),
                    output: Some(output),
                });
            }
            Err(e) => {
                tracing::warn!(request_id = %request.request_id, job = %s.job, error = %e, "Slurm refused the job; the commit is rolled back");
                let ids: Vec<String> = done.iter().map(|d| d.id.clone()).collect();
                if let Err(c) = jobs::cancel(slurm, who, &cfg.scancel, &ids).await {
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

/// `before` (one request's jobs) with what Slurm says now: `listed` is every job the
/// controller listed; a job not ended and not listed is asked about alone, and is `lost` when
/// Slurm does not know it. `None` when such a lone query failed (this request's states stay
/// as they were for this poll).
async fn observe(
    slurm: &SlurmConfig,
    request_id: &str,
    before: &[BatchJob],
    listed: &HashMap<String, Observed>,
) -> Option<Vec<BatchJob>> {
    let mut out = before.to_vec();
    let now = now_ms();
    for j in out.iter_mut().filter(|j| !j.state.ended()) {
        let seen = match listed.get(&j.id) {
            Some(o) => Some(o.clone()),
            None => match jobs::query(slurm, &j.id).await {
                Ok(o) => o,
                Err(e) => {
                    tracing::warn!(request_id, slurm_job = %j.id, error = %e, "job state unknown: Slurm could not be asked; tried again at the next poll");
                    return None;
                }
            },
        };
        match seen {
            Some(o) => apply(j, o, now),
            None => {
                tracing::warn!(request_id, job = %j.job, slurm_job = %j.id, "Slurm no longer knows the job: lost");
                j.state = JobState::Lost;
                j.ended_ms = Some(now);
                j.reason = Some("Slurm no longer knows the job (past the controller's MinJobAge, or purged)".into());
            }
        }
    }
    Some(out)
}

/// Records what Slurm says of job `j` at `now`.
fn apply(j: &mut BatchJob, o: Observed, now: u64) {
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
    // `fedvol cancel` asked for this job's end: that stays its reason (the run is `cancelled`,
    // not failed), whatever Slurm's words.
    let by_fedvol = j.reason.as_deref() == Some(CANCELLED_BY_FEDVOL);
    j.state = o.state;
    j.exit_code = if ran { o.exit_code } else { None };
    j.signal = o.signal;
    j.reason = if by_fedvol && matches!(o.state, JobState::Cancelled | JobState::Running | JobState::Pending) {
        Some(CANCELLED_BY_FEDVOL.into())
    } else {
        o.reason
    };
}

/// Every followed request's jobs with what Slurm says now, from one `scontrol show job` for
/// all of them (plus one query per job missing from it): the requests whose states could be
/// read, each with its jobs. `None` when Slurm could not be read at all (nothing changes
/// this poll).
pub async fn observe_followed(
    slurm: &SlurmConfig,
    followed: &[(String, Vec<BatchJob>)],
) -> Option<Vec<(String, Vec<BatchJob>)>> {
    let live: Vec<&(String, Vec<BatchJob>)> = followed.iter().filter(|(_, j)| !all_ended(j)).collect();
    let listed = if live.is_empty() {
        HashMap::new()
    } else {
        match jobs::query_all(slurm).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, requests = live.len(), "job states unknown: Slurm could not be asked; tried again at the next poll");
                return None;
            }
        }
    };
    let mut out = Vec::with_capacity(followed.len());
    for (id, before) in followed {
        if all_ended(before) {
            out.push((id.clone(), before.clone()));
        } else if let Some(now) = observe(slurm, id, before, &listed).await {
            out.push((id.clone(), now));
        }
    }
    Some(out)
}

/// Completes the commit of `request_id` (volumes by their reclaim policy, allocations freed),
/// its jobs recorded as `jobs` first when given. The same steps as the `complete` endpoint.
pub async fn complete(shared: &Shared, request_id: &str, deadline_ms: u64) -> Option<Result<ActionReply, Failure>> {
    let begun = lock(shared).begin_complete(request_id);
    let work = match begun {
        // Completed already (by the poll, when the jobs ended): the same answer, with the
        // jobs' final states (the coordinator stores them, and `cancelled` is read from them).
        Next::Answer(reply) => {
            let mut reply = *reply;
            if reply.ok && reply.jobs.is_empty() {
                reply.jobs = lock(shared).jobs_of(request_id).map(|v| v.jobs).unwrap_or_default();
            }
            return Some(durable(shared, reply).await);
        }
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

/// Cancels the jobs of `request_id` that have not ended (`scancel`, as their user), records
/// `fedvol cancel` as their reason, and waits (until `deadline_ms`) until the poll has read
/// from Slurm that every one ended: `COMPLETING` is not ended, its processes may still write
/// into the volumes the completion reclaims. Returns true when they all ended (the request
/// may be completed now); false when some still end past the deadline (the poll completes the
/// request once they ended). The states are read by the poll alone, so that two readers never
/// record older states over newer ones.
///
/// Errors: `scancel` failed (Slurm's words); nothing recorded.
pub async fn cancel(shared: &Shared, slurm: &SlurmConfig, request_id: &str, deadline_ms: u64) -> Result<bool, String> {
    let Some(cfg) = &slurm.jobs else { return Ok(true) };
    let Some(view) = lock(shared).jobs_of(request_id) else {
        return Ok(true);
    };
    let live: Vec<&BatchJob> = view.jobs.iter().filter(|j| !j.state.ended()).collect();
    // Jobs of earlier releases ran as the agent (no `user`); each user's jobs are cancelled as
    // that user.
    let mut by_user: BTreeMap<Option<&str>, Vec<String>> = BTreeMap::new();
    for j in &live {
        by_user.entry(j.user.as_deref()).or_default().push(j.id.clone());
    }
    for (user, ids) in &by_user {
        let who = match (user, shared.runner.as_deref()) {
            (Some(u), Some(r)) => As::User(&r.grant, u),
            _ => As::Agent,
        };
        jobs::cancel(slurm, who, &cfg.scancel, ids)
            .await
            .map_err(|e| e.to_string())?;
    }
    let marked: Vec<BatchJob> = view
        .jobs
        .iter()
        .cloned()
        .map(|mut j| {
            if !j.state.ended() {
                j.reason = Some(CANCELLED_BY_FEDVOL.into());
            }
            j
        })
        .collect();
    tracing::info!(
        request_id,
        cancelled = live.len(),
        "jobs cancelled; waiting for Slurm to report them ended"
    );
    record(shared, request_id, &view.jobs, marked).await?;
    loop {
        let ended = lock(shared).jobs_of(request_id).is_none_or(|v| all_ended(&v.jobs));
        if ended {
            return Ok(true);
        }
        if now_ms().saturating_add(300) >= deadline_ms {
            tracing::info!(
                request_id,
                "cancelled jobs still ending past the request's deadline: the request completes once Slurm reports them ended"
            );
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records `now` as the jobs of `request_id` (they were `before`), durably, logging each
/// changed state.
async fn record(shared: &Shared, request_id: &str, before: &[BatchJob], now: Vec<BatchJob>) -> Result<(), String> {
    if now == before {
        return Ok(());
    }
    for j in now
        .iter()
        .filter(|j| before.iter().any(|b| b.job == j.job && b.state != j.state))
    {
        tracing::info!(request_id, job = %j.job, slurm_job = %j.id, state = j.state.as_str(), exit_code = ?j.exit_code, "job state");
    }
    let set = lock(shared).set_jobs(request_id, now);
    set.map_err(|e| e.to_string())?;
    sync(shared).await.map_err(|e| e.to_string())
}

/// Cancels the jobs of an interrupted commit of `request_id` by their names
/// (`fedvol.<request id>.<job>`, one `scancel --name` per job of `jobs`), as `account` when
/// known: the agent stopped after `sbatch` and before the commit was recorded, so their ids
/// are unknown. Failures are logged.
pub async fn cancel_by_name(
    slurm: &SlurmConfig,
    runner: Option<&Runner>,
    account: Option<&str>,
    request_id: &str,
    jobs: &[String],
) {
    let Some(cfg) = &slurm.jobs else { return };
    let who = match (runner, account) {
        (Some(r), Some(a)) => As::User(&r.grant, a),
        _ => As::Agent,
    };
    for job in jobs {
        let args = [format!("--name={}", slurm_job_name(request_id, job))];
        if let Err(e) = jobs::cancel(slurm, who, &cfg.scancel, &args).await {
            tracing::error!(request_id, job = %job, error = %e, "jobs of an interrupted commit could not be cancelled; scancel them by hand");
        }
    }
}

/// One poll: every followed commit's jobs read from Slurm in one call, changes recorded, and
/// each commit whose jobs all ended completed.
pub async fn poll_once(shared: &Shared, slurm: &SlurmConfig) {
    let followed = lock(shared).followed();
    let Some(seen) = observe_followed(slurm, &followed).await else {
        return;
    };
    for (id, jobs) in seen {
        let Some((_, before)) = followed.iter().find(|(f, _)| *f == id) else {
            continue;
        };
        if let Err(e) = record(shared, &id, before, jobs.clone()).await {
            tracing::error!(request_id = %id, error = %e, "job states could not be recorded");
            continue;
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
    let every = Duration::from_millis(slurm.jobs.as_ref().map_or(1_000, |j| j.poll_ms).max(100));
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

/// The answer to a `fedvol cancel` whose jobs Slurm is still ending at the request's
/// deadline: refused `jobs_running`, nothing reclaimed yet; the agent completes the request
/// by itself once Slurm reports them ended (the decision is then stored `cancelled`).
pub fn still_ending(cluster: &str, request_id: &str, jobs: &[BatchJob]) -> ActionReply {
    let live: Vec<String> = jobs
        .iter()
        .filter(|j| !j.state.ended())
        .map(|j| format!("`{}` (Slurm job {})", j.job, j.id))
        .collect();
    let mut r = ActionReply::refused(
        cluster,
        request_id,
        Code::JobsRunning.error(format!(
            "jobs {} are cancelled and still ending in Slurm: the volumes are reclaimed, and the workflow recorded cancelled, once Slurm reports them ended",
            live.join(", ")
        )),
    );
    r.jobs = jobs.to_vec();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fake `scontrol` that appends its arguments to `calls` and answers `show job` with
    /// `listing`, `show job <id>` with Slurm's unknown-id error, and fails while the file
    /// `down` exists.
    fn fake(dir: &std::path::Path, listing: &str) -> SlurmConfig {
        std::fs::write(dir.join("jobs.txt"), listing).unwrap();
        let p = dir.join("scontrol");
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$*\" >> {d}/calls\nif [ -e {d}/down ]; then echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1; fi\nif [ $# -gt 3 ]; then echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; fi\ncat {d}/jobs.txt\n",
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        SlurmConfig {
            scontrol: p,
            ..Default::default()
        }
    }

    fn calls(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn job(id: u32, state: JobState) -> BatchJob {
        BatchJob {
            job: "a".into(),
            id: id.to_string(),
            state,
            exit_code: None,
            signal: None,
            reason: None,
            submitted_ms: 1,
            started_ms: None,
            ended_ms: None,
            user: Some("alice".into()),
            output: None,
        }
    }

    /// 1,000 followed requests, one job each, cost one `scontrol show job` per poll (they took
    /// one call per job, one after another: 6-10 s per poll at 1,000 jobs), and each job gets
    /// the state Slurm lists for it.
    #[tokio::test]
    async fn a_thousand_followed_jobs_cost_one_slurm_call_per_poll() {
        let dir = tempfile::tempdir().unwrap();
        let mut listing = String::new();
        for id in 1..=1000 {
            let state = if id % 10 == 0 { "COMPLETED" } else { "RUNNING" };
            listing.push_str(&format!(
                "JobId={id} JobName=fedvol.r{id}.a UserId=alice(1001) JobState={state} Reason=None ExitCode=0:0 RunTime=00:00:02\n"
            ));
        }
        let cfg = fake(dir.path(), &listing);
        let followed: Vec<(String, Vec<BatchJob>)> = (1..=1000)
            .map(|id| (format!("r{id}"), vec![job(id, JobState::Pending)]))
            .collect();
        let seen = observe_followed(&cfg, &followed).await.unwrap();
        assert_eq!(calls(dir.path()), ["-o show job"], "one call for every job");
        assert_eq!(seen.len(), 1000);
        let state = |r: &str| seen.iter().find(|(id, _)| id == r).unwrap().1[0].state;
        assert_eq!(state("r7"), JobState::Running);
        assert_eq!(state("r10"), JobState::Completed);
        // A second poll: one more call.
        observe_followed(&cfg, &seen).await.unwrap();
        assert_eq!(calls(dir.path()).len(), 2);
    }

    /// A job missing from the listing is asked about alone before it is called lost; Slurm
    /// down skips that poll only (nothing changes), and the next poll reads again.
    #[tokio::test]
    async fn a_missing_job_is_asked_about_alone_and_a_failed_read_skips_one_poll() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = fake(
            dir.path(),
            "JobId=1 JobName=x JobState=RUNNING Reason=None ExitCode=0:0 RunTime=00:00:01\n",
        );
        let followed = vec![
            ("r1".to_string(), vec![job(1, JobState::Running)]),
            ("r2".to_string(), vec![job(2, JobState::Running)]),
        ];
        std::fs::write(dir.path().join("down"), "").unwrap();
        assert!(
            observe_followed(&cfg, &followed).await.is_none(),
            "Slurm down: no states this poll"
        );
        std::fs::remove_file(dir.path().join("down")).unwrap();
        let seen = observe_followed(&cfg, &followed).await.unwrap();
        assert_eq!(seen[0].1[0].state, JobState::Running);
        assert_eq!(seen[1].1[0].state, JobState::Lost, "unknown to Slurm when asked alone");
        assert_eq!(calls(dir.path()), ["-o show job", "-o show job", "-o show job 2"]);
    }
}
