//! The state of a commit's batch jobs (submitted to Slurm by the agent): a commit whose job
//! submission failed is refused and its hold kept, as a failed provisioning's is; the states
//! followed replace the recorded ones; a job that runs or ended gives its capacity back to
//! Slurm's count (the effective inventory reads Slurm's allocations), so it is counted once.

use fedvol_proto::Code;
use fedvol_proto::agent::ActionReply;
use fedvol_proto::batch::{BatchJob, JobState};

use super::core::{Core, CoreError, DriverResult, ProvisionWork, outcome, refusal};
use super::store::Batch;

/// What the agent knows of a committed request's jobs.
#[derive(Debug, Clone)]
pub struct JobsView {
    /// The jobs, with the states last seen.
    pub jobs: Vec<BatchJob>,
    /// The completion, once the request completed.
    pub completion: Option<ActionReply>,
    /// When it completed, ms since the epoch (0 while it runs).
    pub completed_ms: u64,
}

impl Core {
    /// A commit whose volumes were provisioned but whose jobs the resource manager refused
    /// (`message`, Slurm's words): the hold stays, no longer `committing`, and the reply refuses
    /// with `submit_failed`, each volume `rolled_back` (the caller deleted them).
    ///
    /// Errors: the store write failed.
    pub fn abort_commit(
        &mut self,
        request_id: &str,
        results: &[(ProvisionWork, DriverResult)],
        message: &str,
    ) -> Result<ActionReply, CoreError> {
        self.in_flight.remove(request_id);
        if let Some(mut hold) = self.ledger.holds().get(request_id).cloned() {
            hold.committing = false;
            self.apply(Batch {
                put_holds: vec![hold],
                ..Batch::default()
            })?;
        }
        let mut reply = refusal(&self.cluster, request_id, Code::SubmitFailed, message);
        reply.volumes = results
            .iter()
            .map(|(w, _)| {
                outcome(
                    &w.key,
                    &w.volume.name,
                    Some(w.volume.provisioner.clone()),
                    "rolled_back",
                    Some("created, then removed because the jobs could not be submitted".into()),
                )
            })
            .collect();
        Ok(reply)
    }

    /// The cluster decision the hold of `request_id` was made with (where its jobs go).
    pub fn held_decision(&self, request_id: &str) -> Option<fedvol_common::decision::ClusterDecision> {
        self.ledger.holds().get(request_id).map(|h| h.reply.decision.clone())
    }

    /// The (federation) user of the hold of `request_id`, when it has a hold that says.
    pub fn held_user(&self, request_id: &str) -> Option<String> {
        self.ledger
            .holds()
            .get(request_id)
            .map(|h| h.user.clone())
            .filter(|u| !u.is_empty())
    }

    /// The jobs of the commit of `request_id`, `None` when no such commit is kept.
    pub fn jobs_of(&self, request_id: &str) -> Option<JobsView> {
        let c = self.ledger.commits().get(request_id)?;
        Some(JobsView {
            jobs: c.jobs.clone(),
            completion: c.completion.clone(),
            completed_ms: c.completed_ms,
        })
    }

    /// Commits with jobs that are not completed yet: the ones to follow, with their jobs.
    pub fn followed(&self) -> Vec<(String, Vec<BatchJob>)> {
        self.ledger
            .commits()
            .values()
            .filter(|c| c.completion.is_none() && !c.jobs.is_empty())
            .map(|c| (c.request_id.clone(), c.jobs.clone()))
            .collect()
    }

    /// Counts of the jobs of live (not completed) commits by state.
    pub fn jobs_by_state(&self) -> Vec<(JobState, u64)> {
        JobState::ALL
            .iter()
            .map(|s| {
                let n = self
                    .ledger
                    .commits()
                    .values()
                    .filter(|c| c.completion.is_none())
                    .flat_map(|c| &c.jobs)
                    .filter(|j| j.state == *s)
                    .count();
                (*s, n as u64)
            })
            .collect()
    }

    /// Records `jobs` as the states of the commit of `request_id` (nothing when unknown,
    /// unchanged or already completed; a job `fedvol cancel` asked to end keeps that reason).
    /// The allocations of each job no longer pending leave the commit: Slurm's allocation,
    /// read with the inventory, counts them now.
    ///
    /// Errors: the store write failed (nothing changed).
    pub fn set_jobs(&mut self, request_id: &str, mut jobs: Vec<BatchJob>) -> Result<(), CoreError> {
        let Some(mut c) = self.ledger.commits().get(request_id).cloned() else {
            return Ok(());
        };
        // A completed commit's jobs are final; a job `fedvol cancel` asked to end keeps that
        // reason whatever a reading taken before the cancel says (the run ends `cancelled`).
        if c.completion.is_some() {
            return Ok(());
        }
        for j in &mut jobs {
            let asked = c
                .jobs
                .iter()
                .any(|b| b.id == j.id && b.reason.as_deref() == Some(fedvol_proto::batch::CANCELLED_BY_FEDVOL));
            if asked && matches!(j.state, JobState::Pending | JobState::Running | JobState::Cancelled) {
                j.reason = Some(fedvol_proto::batch::CANCELLED_BY_FEDVOL.into());
            }
        }
        if c.jobs == jobs {
            return Ok(());
        }
        let started: Vec<&str> = jobs
            .iter()
            .filter(|j| j.state != JobState::Pending)
            .map(|j| j.job.as_str())
            .collect();
        c.allocations.retain(|a| !started.contains(&a.job.as_str()));
        c.jobs = jobs;
        self.apply(Batch {
            put_commits: vec![c],
            ..Batch::default()
        })?;
        Ok(())
    }
}
