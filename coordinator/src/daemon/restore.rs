//! Restoring the commits an agent forgot: an agent started on a new state
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
//! - the agent commits it: a new attempt is recorded and the decision stays `committed`; the
//!   batch jobs the decision stores for the commit (already submitted to Slurm) go with the
//!   commit, and the agent follows them from their ids instead of submitting them again;
//! - it no longer fits (the capacity went to others meanwhile) or the commit fails: the decision
//!   becomes `failed`, its last attempt saying why, so nobody is told a commit holds that does
//!   not;
//! - its outcome is unknown: the attempt is recorded and the decision stays `committed` (a
//!   later complete or the agent's status settles it).
//!
//! A cluster seen for the first time has its generation recorded; its commits are restored
//! too when its agent says it starts fresh (`restoring`), since an earlier generation may have
//! come and gone unseen.
//!
//! An agent started fresh admits no new commit until it is told `restored` for its generation
//! (`fedvol_agent::restore_gate`): a new request committed on the "empty" cluster before the
//! restore would take the capacity of a decision committed and acknowledged to its user, whose
//! restore would then fail (`no_longer_fits`). An acknowledged commit is never revoked by a
//! restart.

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
use fedvol_proto::coordinator::DecisionSummary;
use futures::StreamExt;

/// The bucket key holding the last state generation seen of `cluster`.
pub fn generation_key(cluster: &str) -> String {
    format!("fedvol/generation/{cluster}")
}

/// Checks every alive cluster's state generation against the last one recorded, restoring the
/// commits of each cluster whose agent starts from a new state. `known` caches what this
/// reconciler already recorded (cluster → generation).
///
/// An agent that waits for its restore (its heartbeat says `restoring`: it admits no new commit
/// meanwhile) is told `restored` once the restore of its generation ran to its end and the
/// generation is recorded, and again at each tick while its heartbeat still says `restoring`
/// (the message is idempotent; one lost, or sent by a coordinator that died, is sent again).
pub async fn check_generations(co: &Arc<Coordinator>, known: &mut HashMap<String, String>) {
    let seen = co.registry().state_generations(now_ms());
    // One listing of the bucket per tick, read only if a cluster needs a restore and shared
    // by all of them (it was read once per cluster: 1,000 agents started at once cost 1,000
    // listings).
    let listing = tokio::sync::OnceCell::new();
    let todo: Vec<(String, String, bool, bool)> = seen
        .into_iter()
        .filter_map(|(cluster, generation, restoring)| {
            let known_now = known.get(&cluster) == Some(&generation);
            (!known_now || restoring).then_some((cluster, generation, restoring, known_now))
        })
        .collect();
    // Clusters are checked RESTORE_CONCURRENCY at a time: each takes a few round trips (its
    // generation key, its agent's status, the record, `restored`), and one at a time 1,000
    // agents started together waited minutes for their gate to open.
    let checked: Vec<Option<(String, String)>> = futures::stream::iter(todo)
        .map(|(cluster, generation, restoring, known_now)| {
            check_one(co, &listing, cluster, generation, restoring, known_now)
        })
        .buffer_unordered(RESTORE_CONCURRENCY)
        .collect()
        .await;
    for (cluster, generation) in checked.into_iter().flatten() {
        known.insert(cluster, generation);
    }
}

/// Clusters whose generations [`check_generations`] checks at once.
pub const RESTORE_CONCURRENCY: usize = 32;

/// What one tick's restores share: the bucket's decisions, listed at most once.
type Listing = tokio::sync::OnceCell<Vec<DecisionSummary>>;

/// Checks one cluster's generation (see [`check_generations`]); the (cluster, generation) to
/// remember as handled, or `None` to check again at the next tick.
async fn check_one(
    co: &Arc<Coordinator>,
    listing: &Listing,
    cluster: String,
    generation: String,
    restoring: bool,
    known_now: bool,
) -> Option<(String, String)> {
    if known_now {
        tell_restored(co, &cluster, &generation, None).await;
        return None;
    }
    let key = generation_key(&cluster);
    let recorded = match co.store.get_raw(&key).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(cluster = %cluster, error = %e, "reconciler: the cluster's state generation could not be read");
            return None;
        }
    };
    let revision = recorded.as_ref().map(|(_, r)| *r);
    let same = recorded
        .as_ref()
        .is_some_and(|(value, _)| value.as_ref() == generation.as_bytes());
    // The same generation restores nothing. A first sight restores too when the agent says
    // it starts fresh: its earlier generation may have come and gone between two ticks
    // (or before any coordinator ran), and the bucket may hold commits on the cluster.
    let mut outcome = None;
    if !same && (recorded.is_some() || restoring) {
        tracing::warn!(
            cluster = %cluster,
            previous = %recorded.as_ref().map(|(v, _)| String::from_utf8_lossy(v).into_owned()).unwrap_or_default(),
            generation = %generation,
            "reconciler: the cluster's agent starts from a new state; restoring its commits"
        );
        match restore(co, &cluster, listing).await {
            Ok(o) => {
                tracing::warn!(cluster = %cluster, restored = o.restored, failed = o.failed, "reconciler: the cluster's commits are restored");
                outcome = Some(o);
            }
            Err(e) => {
                // Not recorded: tried again at the next tick.
                tracing::warn!(cluster = %cluster, error = %e, "reconciler: commits not restored yet; trying again");
                return None;
            }
        }
    }
    if !same {
        let body = bytes::Bytes::from(generation.clone());
        match co.store.put_raw(&key, body, revision).await {
            Ok(Write::Done(_)) => {}
            Ok(Write::Conflict) => {
                tracing::warn!(cluster = %cluster, "reconciler: the state generation changed meanwhile; checked again");
                return None;
            }
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "reconciler: the state generation could not be recorded");
                return None;
            }
        }
    }
    if restoring {
        tell_restored(co, &cluster, &generation, outcome).await;
    }
    Some((cluster, generation))
}

/// Tells `cluster`'s agent that the commits stored for it were restored onto `generation`
/// (`outcome`: what this restore did, when it ran here). A failure is logged: the next tick
/// sends it again while the agent's heartbeat says `restoring`.
async fn tell_restored(co: &Arc<Coordinator>, cluster: &str, generation: &str, outcome: Option<Restore>) {
    let subject = co.subjects.cluster(cluster, agent::Restored::OP);
    let outcome = outcome.unwrap_or_default();
    let msg = agent::RestoredMsg {
        generation: generation.to_string(),
        restored: outcome.restored,
        failed: outcome.failed,
    };
    let wait = Duration::from_millis(co.cfg.commit_timeout_ms.max(1000));
    match call::<agent::Restored>(&co.client, &subject, &msg, wait, "coordinator").await {
        Ok(Ok(r)) => {
            tracing::info!(
                cluster,
                generation,
                admitting = r.admitting,
                "reconciler: told the agent its commits are restored"
            )
        }
        Ok(Err(f)) => tracing::warn!(cluster, error = %f.error, "reconciler: the agent refused `restored`; sent again"),
        Err(e) => tracing::warn!(cluster, error = %e, "reconciler: `restored` not delivered; sent again"),
    }
}

/// What a restore did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restore {
    /// Decisions the agent holds again.
    pub restored: usize,
    /// Decisions that could not be committed again (stored `failed`).
    pub failed: usize,
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
pub async fn restore(co: &Arc<Coordinator>, cluster: &str, listing: &Listing) -> Result<Restore, RestoreError> {
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
    let decisions = listing.get_or_try_init(|| co.store.list()).await?;
    let lost: Vec<String> = decisions
        .iter()
        .filter(|s| s.state == DecisionState::Committed && s.chosen_cluster.as_deref() == Some(cluster))
        .filter(|s| !held.contains(s.request_id.as_str()))
        .map(|s| s.request_id.clone())
        .collect();
    let mut done = Restore::default();
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
        match recommit(co, cluster, stored, rev).await? {
            Some(true) => done.restored += 1,
            Some(false) => done.failed += 1,
            None => {}
        }
    }
    Ok(done)
}

/// Commits `stored` on `cluster` again and stores the outcome over revision `rev`. Returns
/// whether the agent holds the commit again (`None`: in doubt, or another coordinator changed
/// the decision meanwhile).
///
/// Errors: the decision could not be written back (another coordinator changed it meanwhile is
/// not an error: its version stands).
async fn recommit(
    co: &Arc<Coordinator>,
    cluster: &str,
    mut stored: StoredDecision,
    rev: u64,
) -> Result<Option<bool>, StoreError> {
    let id = stored.decision.request_id.clone();
    let mut pending = pending_attempt(&stored, cluster);
    let n = pending.attempt;
    // Recorded pending first, as every attempt is (a coordinator dying here leaves it to be
    // settled like any other).
    stored.attempts.push(pending.clone());
    stored.updated_ms = now_ms();
    let rev = match co.store.update(&id, &stored, rev).await? {
        Write::Done(r) => r,
        Write::Conflict => return Ok(None),
    };
    // The jobs the commit runs, as last stored: already in Slurm, so followed, not submitted.
    let jobs = stored
        .attempts
        .iter()
        .rev()
        .find(|a| a.ok && a.cluster == cluster)
        .map(|a| a.jobs.clone())
        .unwrap_or_default();
    let tried = commit_on(co, cluster, &stored.request, n, Some(&jobs)).await;
    stored.attempts.pop();
    pending = tried.attempt;
    let ok = pending.ok;
    let in_doubt = tried.in_doubt;
    if !ok && !in_doubt {
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
    let written = co.store.update(&id, &stored, rev).await?;
    if matches!(written, Write::Done(_))
        && let Some(kind) = stored.failure()
    {
        co.metrics.failed(kind);
    }
    match written {
        Write::Done(_) if in_doubt && !ok => Ok(None),
        Write::Done(_) => Ok(Some(ok)),
        Write::Conflict => Ok(None),
    }
}
