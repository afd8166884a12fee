//! Restoring the commits an agent forgot (issue 20, item 2): an agent started on a new state
//! file (`fedvol-agent --init` after its file was lost) knows none of the commits the decision
//! bucket says it holds, and would give their capacity away again.
//!
//! Each agent's heartbeat carries its state file's generation (made at `--init`). The
//! reconciler (one coordinator at a time, [`super::reconcile`]) remembers the last generation it
//! saw of each cluster in the bucket (key `fedvol/generation/<cluster>`, compare-and-set, so a
//! coordinator restart forgets nothing). When a cluster's generation changes, every decision
//! stored `committed` on that cluster that its agent does not list is committed there again
//! with its stored request (admission at commit: the agent re-plans it on its current state;
//! volume names are deterministic, so a directory that survived is found, not duplicated):
//! - the agent commits it: a new attempt is recorded and the decision stays `committed`;
//! - it no longer fits (the capacity went to others meanwhile) or the commit fails: the decision
//!   becomes `failed`, its last attempt saying why, so nobody is told a commit holds that does
//!   not;
//! - its outcome is unknown: the attempt is recorded and the decision stays `committed` (a
//!   later complete or the agent's status settles it).
//!
//! A cluster seen for the first time has its generation recorded, nothing more: it is a new
//! cluster or an agent of an earlier release.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use fedvol_proto::agent::{self as agent, AgentEndpoint, StatusReply};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::rpc::call;
use fedvol_proto::{NoArgs, now_ms};

use super::Coordinator;
use super::commit::{commit_on, pending_attempt};
use super::store::{StoreError, Write};

/// The bucket key holding the last state generation seen of `cluster`.
pub fn generation_key(cluster: &str) -> String {
    format!("fedvol/generation/{cluster}")
}

/// Checks every alive cluster's state generation against the last one recorded, restoring the
/// commits of each cluster whose agent starts from a new state. `known` caches what this
/// reconciler already recorded (cluster → generation).
pub async fn check_generations(co: &Arc<Coordinator>, known: &mut HashMap<String, String>) {
    let seen = co.registry().state_generations(now_ms());
    for (cluster, generation) in seen {
        if known.get(&cluster) == Some(&generation) {
            continue;
        }
        let key = generation_key(&cluster);
        let recorded = match co.store.get_raw(&key).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "reconciler: the cluster's state generation could not be read");
                continue;
            }
        };
        let revision = recorded.as_ref().map(|(_, r)| *r);
        // A first sight (nothing recorded) or the same generation restores nothing.
        if let Some((value, _)) = &recorded
            && value.as_ref() != generation.as_bytes()
        {
            tracing::warn!(
                cluster = %cluster,
                previous = %String::from_utf8_lossy(value),
                generation = %generation,
                "reconciler: the cluster's agent starts from a new state; restoring its commits"
            );
            if let Err(e) = restore(co, &cluster).await {
                // Not recorded: tried again at the next tick.
                tracing::warn!(cluster = %cluster, error = %e, "reconciler: commits not restored yet; trying again");
                continue;
            }
        }
        let body = bytes::Bytes::from(generation.clone());
        if let Err(e) = co.store.put_raw(&key, body, revision).await {
            tracing::warn!(cluster = %cluster, error = %e, "reconciler: the state generation could not be recorded");
            continue;
        }
        known.insert(cluster, generation);
    }
}

/// Why a restore could not run to its end (it is tried again).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The bucket could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent did not say what it holds.
    #[error("the agent's status could not be had: {0}")]
    Status(String),
}

/// Commits again, on `cluster`, each decision stored `committed` there that its agent does not
/// list (module docs).
///
/// Errors: [`RestoreError`] when the agent's status or the bucket could not be read, or a
/// decision could not be written back.
pub async fn restore(co: &Arc<Coordinator>, cluster: &str) -> Result<usize, RestoreError> {
    let subject = co.subjects.cluster(cluster, agent::Status::OP);
    let wait = Duration::from_millis(co.cfg.commit_timeout_ms.max(1000));
    let status: StatusReply = match call::<agent::Status>(&co.client, &subject, &NoArgs {}, wait, "coordinator").await {
        Ok(Ok(s)) => s,
        Ok(Err(f)) => return Err(RestoreError::Status(f.error.message)),
        Err(e) => return Err(RestoreError::Status(e.to_string())),
    };
    let held: HashSet<&str> = status
        .committed
        .iter()
        .map(String::as_str)
        .chain(status.holds.iter().map(|h| h.request_id.as_str()))
        .collect();
    let lost: Vec<String> = co
        .store
        .list()
        .await?
        .into_iter()
        .filter(|s| s.state == DecisionState::Committed && s.chosen_cluster.as_deref() == Some(cluster))
        .filter(|s| !held.contains(s.request_id.as_str()))
        .map(|s| s.request_id)
        .collect();
    let mut restored = 0;
    for id in lost {
        let Some((stored, rev)) = co.store.get(&id).await? else {
            continue;
        };
        if stored.state != DecisionState::Committed
            || stored.dry_run
            || stored.decision.chosen_cluster.as_deref() != Some(cluster)
        {
            continue;
        }
        if recommit(co, cluster, stored, rev).await? {
            restored += 1;
        }
    }
    Ok(restored)
}

/// Commits `stored` on `cluster` again and stores the outcome over revision `rev`. Returns
/// whether the agent holds the commit again.
///
/// Errors: the decision could not be written back (another coordinator changed it meanwhile is
/// not an error: its version stands).
async fn recommit(
    co: &Arc<Coordinator>,
    cluster: &str,
    mut stored: StoredDecision,
    rev: u64,
) -> Result<bool, StoreError> {
    let id = stored.decision.request_id.clone();
    let mut pending = pending_attempt(&stored, cluster);
    let n = pending.attempt;
    // Recorded pending first, as every attempt is (a coordinator dying here leaves it to be
    // settled like any other).
    stored.attempts.push(pending.clone());
    stored.updated_ms = now_ms();
    let rev = match co.store.update(&id, &stored, rev).await? {
        Write::Done(r) => r,
        Write::Conflict => return Ok(false),
    };
    let tried = commit_on(co, cluster, &stored.request, n).await;
    stored.attempts.pop();
    pending = tried.attempt;
    let ok = pending.ok;
    if !ok && !tried.in_doubt {
        let why = pending.error.as_ref().map_or_else(
            || "the commit failed".to_string(),
            |e| format!("{}: {}", e.code, e.message),
        );
        tracing::error!(
            request_id = %id,
            cluster,
            why = %why,
            "reconciler: a commit the cluster's agent forgot could not be restored; the decision is failed"
        );
        stored.state = DecisionState::Failed;
        stored.decision.chosen_cluster = None;
    } else if ok {
        tracing::warn!(request_id = %id, cluster, attempt = n, "reconciler: a commit the cluster's agent forgot was restored");
        if let Some(d) = tried.decision
            && let Some(old) = stored.decision.clusters.get(cluster)
        {
            let mut d = d;
            d.status = old.status;
            d.elapsed_ms = old.elapsed_ms;
            stored.decision.clusters.insert(cluster.to_string(), d);
        }
    }
    stored.attempts.push(pending);
    stored.updated_ms = now_ms();
    match co.store.update(&id, &stored, rev).await? {
        Write::Done(_) => Ok(ok),
        Write::Conflict => Ok(false),
    }
}
