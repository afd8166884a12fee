//! Commit, the whole saga: the hold becomes durable allocations and new volumes are provisioned
//! through their drivers.
//!
//! 1. [`crate::state::Core::begin_commit`] checks the hold (a repeated id gets its stored
//!    answer; no hold, a lapsed one or a commit in progress is refused) and marks it
//!    `committing`;
//! 2. that mark reaches the disk before any driver runs, so an agent restarted after a crash
//!    knows assets may exist;
//! 3. each new volume is provisioned in turn; at the first failure the others are not tried;
//! 4. on a failure every asset already created is deleted again (the Kubernetes volume provisioning design: an asset whose
//!    volume cannot be recorded is deleted; nothing leaks);
//! 5. on a cluster that runs jobs (`slurm.jobs`), the new volumes were created as the account
//!    the workflow's user maps to (they belong to it), and the placed jobs are submitted to
//!    Slurm as that account ([`crate::slurm::follow::submit`]); a refusal deletes the volumes again and refuses the
//!    commit with Slurm's message (`submit_failed`). A restore submits nothing: it records the
//!    jobs the coordinators stored for the commit (`ActionMsg::jobs`), which are then followed;
//! 6. [`crate::state::Core::finish_commit_with_jobs`] records the outcome (with the Slurm job
//!    ids) in one transaction, which reaches the disk before the answer.

use std::sync::Arc;

use fedvol_proto::agent::{ActionMsg, ActionReply};
use fedvol_proto::{Code, Failure, now_ms};

use crate::restore_gate::RestoreGate;
use crate::shared::{Shared, durable, internal, lock, store_failed, sync};
use crate::state::core::{DriverResult, Next, ProvisionWork};

/// Time a failed commit's rollback may take to delete what it created, ms. Not the request's
/// deadline: a commit cut short by that deadline must still delete its assets.
pub const ROLLBACK_BUDGET_MS: u64 = 30_000;

/// Answers a commit.
pub async fn handle(shared: Arc<Shared>, msg: ActionMsg) -> Option<Result<ActionReply, Failure>> {
    let id = msg.request_id.clone();
    // A fresh state admits only the coordinators' restore, and requests it already holds,
    // until the restore is confirmed (crate::restore_gate).
    if shared.restore.closed() && !msg.restore && !lock(&shared).knows(&id) {
        tracing::info!(request_id = %id, "commit refused: waiting for the coordinators' restore");
        return Some(Ok(ActionReply::refused(
            &shared.cluster,
            &id,
            Code::Restoring.error(RestoreGate::refusal(&shared.cluster)),
        )));
    }
    let begun = lock(&shared).begin_commit(&msg, now_ms());
    let work = match begun {
        Err(e) => store_failed(&e),
        Ok(Next::Answer(reply)) => return Some(durable(&shared, *reply).await),
        Ok(Next::Run(work)) => work,
    };
    match sync(&shared).await {
        Ok(()) => {}
        Err(crate::shared::SyncError::Store(e)) => store_failed(&e),
        Err(e) => return Some(Err(internal(e))),
    }
    // On a cluster that runs jobs as their users, the new volumes belong to the workflow's
    // user: created as its account through the grant.
    let owner = match (&shared.runner, &msg.request) {
        (Some(r), Some(req)) => r.resolve(&req.user).ok().map(|a| a.name),
        _ => None,
    };
    let results = provision(&shared, &id, msg.deadline_ms, work, owner.as_deref()).await;
    if results.iter().any(|(_, r)| matches!(r, DriverResult::Failed(_))) {
        // The request's deadline may be what failed it: the rollback gets its own time.
        roll_back(&shared, &id, now_ms() + ROLLBACK_BUDGET_MS, &results).await;
    }
    let provisioned = results.iter().all(|(_, r)| matches!(r, DriverResult::Ok(_)));
    let mut jobs = restored_jobs(&shared, &msg);
    // 5. On a cluster that runs jobs, the placed jobs are submitted once their volumes exist;
    //    a job Slurm refuses rolls the commit back with Slurm's message. A restore submits
    //    nothing (the jobs ran, or run, under the commit restored: they are followed from the
    //    ids the coordinators stored).
    if let (Some(slurm), Some(runner), Some(request), true, false) =
        (&shared.batch, &shared.runner, &msg.request, provisioned, msg.restore)
    {
        let decision = lock(&shared).held_decision(&id);
        if let Some(d) = decision.filter(|d| d.resource_manager.as_deref() == Some("slurm")) {
            // The jobs as the agent counted them (a site's default memory per core included).
            let counted = crate::state::core::JobRunner::counted(runner.as_ref(), request);
            match crate::slurm::follow::submit(slurm, runner, &counted, &d, &crate::slurm::follow::paths(&results))
                .await
            {
                Ok(j) => jobs = j,
                Err(message) => {
                    roll_back(&shared, &id, now_ms() + ROLLBACK_BUDGET_MS, &results).await;
                    let aborted = lock(&shared).abort_commit(&id, &results, &message);
                    return Some(match aborted {
                        Ok(reply) => durable(&shared, reply).await,
                        Err(e) => store_failed(&e),
                    });
                }
            }
        }
    }
    let finished = lock(&shared).finish_commit_with_jobs(&id, results, jobs, now_ms());
    Some(match finished {
        Ok(reply) => {
            let answer = durable(&shared, reply).await;
            tracing::info!(request_id = %id, ok = answer.as_ref().is_ok_and(|r| r.ok), "commit answered");
            answer
        }
        Err(e) => store_failed(&e),
    })
}

/// The jobs a restore commit brings (`msg.jobs`: those the coordinators stored for the commit
/// restored, already in Slurm), to be recorded with the commit and followed; none for another
/// commit, or on an agent that runs no jobs (logged: nothing here would follow them).
fn restored_jobs(shared: &Shared, msg: &ActionMsg) -> Vec<fedvol_proto::batch::BatchJob> {
    if !msg.restore || msg.jobs.is_empty() {
        return Vec::new();
    }
    if shared.batch.is_none() {
        tracing::warn!(request_id = %msg.request_id, jobs = msg.jobs.len(), "a restored commit runs Slurm jobs, but this agent runs none (no slurm.jobs): they are not followed; complete the request when they ended");
        return Vec::new();
    }
    tracing::info!(request_id = %msg.request_id, jobs = msg.jobs.len(), "restored commit: its Slurm jobs are followed again, not submitted");
    msg.jobs.clone()
}

/// Provisions each new volume in turn, stopping at the first failure. Returns what was tried,
/// with each driver's result.
async fn provision(
    shared: &Shared,
    id: &str,
    deadline_ms: u64,
    work: Vec<ProvisionWork>,
    owner: Option<&str>,
) -> Vec<(ProvisionWork, DriverResult)> {
    let mut results = Vec::new();
    for w in work {
        tracing::info!(request_id = %id, volume = %w.volume.name, provisioner = %w.provisioner.name, owner, "provisioning");
        let r = shared
            .drivers
            .provision_as(&w.provisioner, &w.volume, id, deadline_ms, owner)
            .await;
        let failed = r.is_err();
        results.push(match r {
            Ok(created) => (w, DriverResult::Ok(created.source)),
            Err(e) => {
                tracing::warn!(request_id = %id, volume = %w.volume.name, error = %e, "provisioning failed");
                (w, DriverResult::Failed(e.to_string()))
            }
        });
        if failed {
            break;
        }
    }
    results
}

/// Deletes every asset a failed commit created (the Kubernetes volume provisioning design: nothing leaks). A deletion that fails
/// is logged; the commit is refused either way.
async fn roll_back(shared: &Shared, id: &str, deadline_ms: u64, results: &[(ProvisionWork, DriverResult)]) {
    for (w, r) in results {
        if let DriverResult::Ok(source) = r {
            let del = shared
                .drivers
                .delete(&w.provisioner, &w.volume.name, Some(source), id, deadline_ms)
                .await;
            if let Err(e) = del {
                tracing::error!(request_id = %id, volume = %w.volume.name, error = %e, "rollback delete failed");
            }
        }
    }
}
