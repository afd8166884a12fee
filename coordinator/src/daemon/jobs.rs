//! Following the batch jobs of committed decisions (clusters whose agent submits jobs to
//! Slurm): the reconciler's holder asks each such decision's agent (`jobs`, on
//! `<prefix>.cluster.<c>.jobs`) on every tick and stores what changed: the jobs' states in the
//! committed attempt, and, once the agent completed the request by itself (every job ended),
//! the decision `completed`, or `failed` with [`fedvol_proto::decisions::StoredDecision::run_failure`] naming the job
//! and its exit code, with the completion's volume outcomes; its quota ledgers are released.
//!
//! Nothing is decided on a guess: an agent that does not answer, or no longer keeps the
//! request, leaves the decision as it is (logged).

use std::collections::HashSet;

use fedvol_proto::agent;
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::commit::action;
use super::store::Write;

/// What the reconciler reads of a change to know whether the decision runs jobs.
#[derive(serde::Deserialize)]
pub struct PeekJobs {
    state: DecisionState,
    #[serde(default)]
    attempts: Vec<PeekAttempt>,
}

#[derive(serde::Deserialize)]
struct PeekAttempt {
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    jobs: Vec<serde::de::IgnoredAny>,
}

impl PeekJobs {
    /// True for a committed decision whose commit submitted jobs.
    pub fn runs_jobs(&self) -> bool {
        self.state == DecisionState::Committed && self.attempts.iter().any(|a| a.ok && !a.jobs.is_empty())
    }
}

/// Notes a change of the bucket in `running` (the decisions to follow).
pub fn track(running: &mut HashSet<String>, e: &async_nats::jetstream::kv::Entry) {
    if e.key.contains('/') {
        return;
    }
    match serde_json::from_slice::<PeekJobs>(&e.value) {
        Ok(p) if p.runs_jobs() => {
            running.insert(e.key.clone());
        }
        _ => {
            running.remove(&e.key);
        }
    }
}

/// Asks the agent of every decision in `running` for its jobs and stores what changed.
pub async fn follow(co: &Coordinator, running: &mut HashSet<String>) {
    let ids: Vec<String> = running.iter().cloned().collect();
    for id in ids {
        if !follow_one(co, &id).await {
            running.remove(&id);
        }
    }
}

/// One decision; returns false once it no longer needs following.
async fn follow_one(co: &Coordinator, id: &str) -> bool {
    let (mut stored, rev) = match co.store.get(id).await {
        Ok(Some(x)) => x,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(request_id = %id, error = %e, "jobs: the decision cannot be read");
            return true;
        }
    };
    let Some(cluster) = stored.decision.chosen_cluster.clone() else {
        return false;
    };
    if stored.state != DecisionState::Committed {
        return false;
    }
    let reply = match action::<agent::Jobs>(co, &cluster, id, co.cfg.commit_timeout_ms).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(request_id = %id, cluster = %cluster, error = %e, "jobs: the agent did not answer; asked again at the next tick");
            return true;
        }
    };
    if !reply.ok {
        let why = reply
            .error
            .map(|e| format!("{}: {}", e.code, e.message))
            .unwrap_or_default();
        tracing::warn!(request_id = %id, cluster = %cluster, error = %why, "jobs: the agent keeps no jobs for this decision; it stays committed until `fedvol complete` or `fedvol cancel`");
        return !reply_is(&why, &Code::NotCommitted);
    }
    let done = reply.completed_ms > 0;
    let Some(attempt) = stored.attempts.iter_mut().rev().find(|a| a.ok) else {
        return false;
    };
    if attempt.jobs == reply.jobs && !done {
        return true;
    }
    attempt.jobs = reply.jobs.clone();
    if done {
        let failure = fedvol_proto::batch::failure(&reply.jobs);
        stored.state = if failure.is_some() {
            DecisionState::Failed
        } else {
            DecisionState::Completed
        };
        stored.run_failure = failure;
        stored.completion = Some(reply);
    }
    stored.updated_ms = now_ms();
    match co.store.update(id, &stored, rev).await {
        Ok(Write::Done(_)) if done => {
            tracing::info!(request_id = %id, cluster = %cluster, state = stored.state.as_str(), failure = ?stored.run_failure, "every job ended: decision stored");
            crate::daemon::quota::release(co, id, &stored.decision.quota).await;
            false
        }
        Ok(Write::Done(_)) => true,
        Ok(Write::Conflict) => true,
        Err(e) => {
            tracing::warn!(request_id = %id, error = %e, "jobs: the decision could not be stored");
            true
        }
    }
}

fn reply_is(text: &str, code: &Code) -> bool {
    text.starts_with(&format!("{code}:"))
}
