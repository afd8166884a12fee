//! The reconciler: a decision left `planned` by a coordinator that died mid-commit,
//! or whose commit was in doubt, is settled without anyone submitting it again.
//!
//! One coordinator at a time reconciles: it holds a lease, the key `fedvol/reconciler` of the
//! decision bucket (a key no request id can be: request ids have no `/`), written by
//! compare-and-set with its holder and expiry, renewed every `reconcileEveryMs` and valid for
//! three of them. At each tick the holder reads the non-dry-run `planned` decisions with their
//! last change from the coordinator's decision index ([`super::index`], which follows the
//! bucket with the coordinator's one watch), and takes over every one older than the commit
//! phase's bound
//! ([`super::lifecycle::commit_phase_bound_ms`]) exactly as a submit of the same id would
//! ([`super::lifecycle::resume`]): it settles the pending commit attempts (release probes, which
//! fence them), then finishes the commit phase. A decision still in doubt is tried again one
//! bound later. Each is read again from the bucket before it is taken over, so an index a
//! little behind the bucket only delays a take-over.
//!
//! The holder also places the queue's decisions ([`super::queue::drain`]) on every
//! tick, whenever a decision is completed and whenever a cluster's drain ends (the index's
//! [`super::index::DecisionIndex::room_freed`]), and every 15
//! ticks drops quota-ledger entries no live decision stands behind ([`super::quota::sweep`]).
//!
//! The holder also completes the committed decisions whose `complete` their cluster did not
//! answer and whose coordinator may be gone with its own tries (`completing` in the record:
//! [`super::ops::complete::finish_marked`]).
//!
//! The holder also follows the batch jobs of committed decisions on clusters that run them
//! ([`super::jobs`]), storing each decision `completed` or `failed` once its jobs ended.
//!
//! The holder also restores the commits of an agent that starts from a new state file
//! ([`super::restore`]): at each tick, and at once when a heartbeat says its agent waits for
//! its restore (`restoring`, [`super::Coordinator::restore_due`]); and it removes final
//! decisions past `decisionRetentionMs` ([`super::retention::collect`], every minute or half
//! the retention if shorter).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use fedvol_proto::decisions::DecisionState;
use fedvol_proto::now_ms;

use super::Coordinator;
use super::lifecycle::{commit_phase_bound_ms, resume};
use super::store::Write;

/// The quota ledgers are swept ([`super::quota::sweep`]) every this many ticks.
const SWEEP_EVERY_TICKS: u64 = 15;

/// The lease's key in the decision bucket.
pub const LEASE_KEY: &str = "fedvol/reconciler";

/// The lease as stored.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Lease {
    /// The coordinator instance holding it.
    holder: String,
    /// When it lapses unless renewed, ms since the epoch.
    expires_ms: u64,
}

/// Runs the reconciler of coordinator `instance` until the process ends: every `every`, it
/// takes or renews the lease; while it holds it, it follows the bucket and settles abandoned
/// decisions. `every` of zero: never.
pub fn spawn(co: Arc<Coordinator>, instance: String, every: Duration) {
    if every.is_zero() {
        tracing::info!("reconciler off (reconcileEveryMs: 0)");
        return;
    }
    tokio::spawn(async move {
        let mut next_try: HashMap<String, u64> = HashMap::new();
        let mut generations: HashMap<String, String> = HashMap::new();
        let mut tick = tokio::time::interval(every);
        let mut ticks: u64 = 0;
        let mut collected: Option<tokio::time::Instant> = None;
        let retention = co.cfg.decision_retention_ms;
        let collect_every = super::retention::COLLECT_EVERY.min(Duration::from_millis(retention / 2).max(every));
        // Whether this coordinator held the lease at its last tick.
        let mut holding = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                // A heartbeat said its agent waits for its restore: restore it now (a
                // brand-new cluster has nothing to restore and admits commits at once), not
                // at the next tick. Only the lease's holder restores.
                _ = co.restore_due.notified() => {
                    if holding {
                        super::restore::check_generations(&co, &mut generations).await;
                    }
                    continue;
                }
                // A completion freed room, or a drain ended: place what waits in the queue.
                _ = co.index.room_freed() => {
                    if holding {
                        super::queue::drain(&co).await;
                    }
                    continue;
                }
            }
            let holds = match lease(&co, &instance, every).await {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(error = %e, "reconciler: the lease could not be read or written");
                    false
                }
            };
            if holds && !holding {
                tracing::info!(instance = %instance, "reconciler: lease held; reconciling from the decision index");
            } else if !holds && holding {
                tracing::info!("reconciler: lease lost; another coordinator reconciles");
            }
            holding = holds;
            if !holds {
                next_try.clear();
                generations.clear();
                collected = None;
                continue;
            }
            let mut planned = co.index.planned();
            settle_abandoned(&co, &mut planned, &mut next_try).await;
            let mut running = co.index.running_jobs();
            super::jobs::follow(&co, &mut running).await;
            super::ops::complete::finish_marked(&co).await;
            super::restore::check_generations(&co, &mut generations).await;
            super::queue::drain(&co).await;
            if retention > 0 && collected.is_none_or(|t| t.elapsed() >= collect_every) {
                collected = Some(tokio::time::Instant::now());
                if let Err(e) = super::retention::collect(&co).await {
                    tracing::warn!(error = %e, "reconciler: expired decisions could not be removed");
                }
            }
            ticks += 1;
            if ticks.is_multiple_of(SWEEP_EVERY_TICKS)
                && let Err(e) = super::quota::sweep(&co, commit_phase_bound_ms(&co)).await
            {
                tracing::warn!(error = %e, "reconciler: the quota ledgers could not be swept");
            }
        }
    });
}

/// Takes over each tracked decision older than the commit phase's bound (once per bound).
async fn settle_abandoned(
    co: &Arc<Coordinator>,
    planned: &mut HashMap<String, u64>,
    next_try: &mut HashMap<String, u64>,
) {
    let bound = commit_phase_bound_ms(co);
    let now = now_ms();
    let due: Vec<String> = planned
        .iter()
        .filter(|(id, updated)| now.saturating_sub(**updated) > bound && next_try.get(*id).is_none_or(|t| now >= *t))
        .map(|(id, _)| id.clone())
        .collect();
    next_try.retain(|id, _| planned.contains_key(id));
    for id in due {
        next_try.insert(id.clone(), now + bound);
        let (stored, rev) = match co.store.get(&id).await {
            Ok(Some(x)) => x,
            Ok(None) => {
                planned.remove(&id);
                continue;
            }
            Err(e) => {
                tracing::warn!(request_id = %id, error = %e, "reconciler: cannot read a planned decision");
                continue;
            }
        };
        let age = now_ms().saturating_sub(stored.updated_ms);
        if stored.state != DecisionState::Planned || stored.dry_run || age <= bound {
            continue;
        }
        tracing::warn!(request_id = %id, age_ms = age, "reconciler: taking over a decision its coordinator left planned");
        let span = tracing::info_span!("reconcile", request_id = %id);
        let reply = resume(co, stored, rev).instrument(span).await;
        match (&reply.stored, &reply.error) {
            (Some(s), None) => {
                tracing::info!(request_id = %id, state = ?s.state, chosen = ?s.decision.chosen_cluster, "reconciler: decision settled")
            }
            (_, Some(e)) => {
                tracing::warn!(request_id = %id, code = %e.code, error = %e.message, "reconciler: not settled yet")
            }
            (None, None) => {}
        }
    }
}

/// Takes the lease, renews it, or finds it held by another live coordinator. Returns whether
/// `instance` holds it now.
///
/// Errors: the bucket could not be read or written.
async fn lease(co: &Coordinator, instance: &str, every: Duration) -> Result<bool, super::store::StoreError> {
    let now = now_ms();
    let mine = Lease {
        holder: instance.to_string(),
        expires_ms: now + 3 * every.as_millis() as u64,
    };
    let body = bytes::Bytes::from(serde_json::to_vec(&mine).unwrap_or_default());
    let current = co.store.get_raw(LEASE_KEY).await?;
    let revision = match &current {
        None => None,
        Some((value, rev)) => match serde_json::from_slice::<Lease>(value) {
            Ok(l) if l.holder != instance && l.expires_ms > now => return Ok(false),
            _ => Some(*rev),
        },
    };
    Ok(matches!(
        co.store.put_raw(LEASE_KEY, body, revision).await?,
        Write::Done(_)
    ))
}
