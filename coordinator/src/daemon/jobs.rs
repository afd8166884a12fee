//! Following the batch jobs of committed decisions (clusters whose agent submits jobs to
//! Slurm): the reconciler's holder asks each such decision's agent (`jobs`, on
//! `<prefix>.cluster.<c>.jobs`, every decision of one cluster in one call) on every tick and
//! stores what changed: the jobs' states in the
//! committed attempt, and, once the agent completed the request by itself (every job ended),
//! the decision `completed`, or `failed` with [`fedvol_proto::decisions::StoredDecision::run_failure`] naming the job
//! and its exit code, with the completion's volume outcomes; its quota ledgers are released.
//!
//! Nothing is decided on a guess: an agent that does not answer, or no longer keeps the
//! request, leaves the decision as it is (logged).

use std::collections::{BTreeMap, HashMap, HashSet};

use fedvol_proto::agent;
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::actions::{action, send};
use super::store::Write;

/// Decisions asked about in one `jobs` call: a cluster following more asks in several calls,
/// so an answer stays far below NATS' `max_payload` (each decision's answer is a few hundred
/// bytes per job).
pub const JOBS_PER_CALL: usize = 64;

/// A decision to follow, as read from the bucket.
struct Followed {
    id: String,
    stored: StoredDecision,
    rev: u64,
}

/// Asks the agents of the decisions in `running` for their jobs and stores what changed: one
/// `jobs` call per cluster (per [`JOBS_PER_CALL`] decisions) each tick, not one per decision.
pub async fn follow(co: &Coordinator, running: &mut HashSet<String>) {
    let ids: Vec<String> = running.iter().cloned().collect();
    let mut by_cluster: BTreeMap<String, Vec<Followed>> = BTreeMap::new();
    for id in ids {
        match read(co, &id).await {
            Read::Follow(cluster, f) => by_cluster.entry(cluster).or_default().push(*f),
            Read::Drop => {
                running.remove(&id);
            }
            Read::Later => {}
        }
    }
    for (cluster, mut group) in by_cluster {
        while !group.is_empty() {
            let rest = group.split_off(group.len().min(JOBS_PER_CALL));
            for (f, reply) in ask(co, &cluster, std::mem::replace(&mut group, rest)).await {
                let id = f.id.clone();
                let keep = match reply {
                    Some(r) => apply(co, &cluster, f, r).await,
                    None => true,
                };
                if !keep {
                    running.remove(&id);
                }
            }
        }
    }
}

/// What became of one decision's read.
enum Read {
    /// Committed on this cluster: follow it.
    Follow(String, Box<Followed>),
    /// No longer to follow (gone, not committed, no cluster).
    Drop,
    /// Unreadable now: asked again at the next tick.
    Later,
}

async fn read(co: &Coordinator, id: &str) -> Read {
    let (stored, rev) = match co.store.get(id).await {
        Ok(Some(x)) => x,
        Ok(None) => return Read::Drop,
        Err(e) => {
            tracing::warn!(request_id = %id, error = %e, "jobs: the decision cannot be read");
            return Read::Later;
        }
    };
    match stored.decision.chosen_cluster.clone() {
        Some(cluster) if stored.state == DecisionState::Committed => Read::Follow(
            cluster,
            Box::new(Followed {
                id: id.to_string(),
                stored,
                rev,
            }),
        ),
        _ => Read::Drop,
    }
}

/// One `jobs` call to `cluster` for every decision of `group` (the first as `request_id`, the
/// others as `more_request_ids`); each decision with the agent's answer for it, `None` when
/// the agent did not answer (asked again at the next tick). An agent of an earlier release
/// answers the first alone: the others are then asked one by one.
async fn ask(co: &Coordinator, cluster: &str, group: Vec<Followed>) -> Vec<(Followed, Option<agent::ActionReply>)> {
    let wait = co.cfg.commit_timeout_ms;
    let Some(first) = group.first().map(|f| f.id.clone()) else {
        return Vec::new();
    };
    let msg = agent::ActionMsg {
        more_request_ids: group.iter().skip(1).map(|f| f.id.clone()).collect(),
        ..agent::ActionMsg::new(&first, now_ms() + wait)
    };
    let mut answers: HashMap<String, agent::ActionReply> = HashMap::new();
    match send::<agent::Jobs>(co, cluster, msg, wait).await {
        Ok(mut r) => {
            for m in std::mem::take(&mut r.more) {
                answers.insert(m.request_id.clone(), m);
            }
            // A refusal of the whole call (not per request) answers none of the others.
            answers.insert(first.clone(), r);
        }
        Err(e) => {
            tracing::debug!(cluster = %cluster, decisions = group.len(), error = %e, "jobs: the agent did not answer; asked again at the next tick");
            return group.into_iter().map(|f| (f, None)).collect();
        }
    }
    let mut out = Vec::with_capacity(group.len());
    for f in group {
        let reply = match answers.remove(&f.id) {
            Some(r) => Some(r),
            None => match action::<agent::Jobs>(co, cluster, &f.id, wait).await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::debug!(request_id = %f.id, cluster = %cluster, error = %e, "jobs: the agent did not answer; asked again at the next tick");
                    None
                }
            },
        };
        out.push((f, reply));
    }
    out
}

/// Stores what the agent's `reply` says of decision `f`; returns false once it no longer
/// needs following.
async fn apply(co: &Coordinator, cluster: &str, f: Followed, reply: agent::ActionReply) -> bool {
    let Followed { id, mut stored, rev } = f;
    let id = id.as_str();
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
        stored.end(reply);
    }
    stored.updated_ms = now_ms();
    match co.store.update(id, &stored, rev).await {
        Ok(Write::Done(_)) if done => {
            tracing::info!(request_id = %id, cluster = %cluster, state = stored.state.as_str(), failure = ?stored.run_failure, "every job ended: decision stored");
            if let Some(kind) = stored.failure() {
                co.metrics.failed(kind);
            }
            co.metrics.ended(stored.state.as_str());
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
