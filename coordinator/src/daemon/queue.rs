//! The queue of submits that wait for capacity (priority without eviction).
//!
//! A submit with `wait_for_capacity` that finds no room (nothing feasible, every commit refused
//! because the capacity went to others, or a quota exceeded) is stored `queued` instead of
//! `failed`, holding nothing and counted in no quota. The queue itself is one key of the
//! decision bucket, [`QUEUE_KEY`](super::waiting::QUEUE_KEY), holding each queued request id with its priority and when it
//! was queued, written by compare-and-set: so its bound (`queue.maxQueued`, past it a submit is
//! refused `queue_full`) holds across every coordinator.
//!
//! The coordinator holding the reconciler's lease places queued decisions ([`drain`]) when a
//! decision is completed (room was freed) and on every reconciler tick: in **priority order,
//! highest first, then oldest first**, each taken over by compare-and-set (`queued` →
//! `planned`) and planned, admitted and committed like a fresh submit. One that still finds no
//! room goes back to `queued` with its new decision (so `decisions show` says why it waits),
//! keeping its place; a lower one that fits may then go first (no head-of-line blocking, as
//! kube-scheduler's active queue), but only if the one ahead still finds no room when the
//! lower one fits: room freed during a pass (a completion between the two plans) goes to the
//! one ahead, and the pass starts again from the top (at most 3 times per drain). One that no cluster can ever place (`unresolvable`: the
//! inventories changed under it) fails at once. Committed work is never preempted. A decision queued longer
//! than `queue.maxWaitMs` fails `queue_timeout`.

use std::sync::Arc;

use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::lifecycle::{admit_quota, commit_phase_bound_ms, no_room, plan, save};
use super::store::Write;
use super::waiting::{Queue, Waiting, dequeue, read};

/// Passes over the queue stop after this many decisions in a row found no room: each try is a
/// plan on every cluster, and a full federation would otherwise be asked once per queued
/// decision on every tick.
const MAX_MISSES_PER_PASS: usize = 16;

/// Queued request ids in placement order: priority (highest first), then queued time (oldest
/// first), then request id.
fn order(q: &Queue) -> Vec<(String, Waiting)> {
    let mut v: Vec<(String, Waiting)> = q.entries.iter().map(|(k, w)| (k.clone(), *w)).collect();
    v.sort_by(|a, b| {
        b.1.priority
            .cmp(&a.1.priority)
            .then(a.1.queued_ms.cmp(&b.1.queued_ms))
            .then(a.0.cmp(&b.0))
    });
    v
}

/// What trying one queued decision came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tried {
    /// Committed, failed or no longer queued: out of the queue.
    Left,
    /// Still no room: back in the queue.
    Waits,
    /// Not tried now (taken by someone else, the store failed).
    Skipped,
    /// It fits, but so does now a decision before it that found no room earlier in this
    /// pass (room was freed meanwhile): put back, and the pass starts again from the top.
    Yields,
}

/// Passes started again in one [`drain`] because room was freed during a pass ([`Tried::Yields`]).
const MAX_RESTARTS_PER_DRAIN: usize = 3;

/// One pass over the queue (module docs): places what fits, in priority then age order.
/// Returns how many decisions left the queue.
pub async fn drain(co: &Arc<Coordinator>) -> usize {
    let q = match read(co).await {
        Ok((q, _)) => q,
        Err(e) => {
            tracing::warn!(error = %e, "queue: cannot be read");
            return 0;
        }
    };
    if q.entries.is_empty() {
        return 0;
    }
    let mut left = 0;
    let mut entries = order(&q);
    let mut restarts = 0;
    'pass: loop {
        let mut misses = 0;
        // The first decision of this pass that found no room: a later one that fits is
        // placed before it only if it still finds none (no head-of-line blocking, but no
        // overtaking because room was freed between the two plans either).
        let mut first_miss: Option<String> = None;
        for (id, w) in &entries {
            let span = tracing::info_span!("queue", request_id = %id, priority = w.priority);
            let before = if restarts < MAX_RESTARTS_PER_DRAIN {
                first_miss.as_deref()
            } else {
                None
            };
            let tried = tracing::Instrument::instrument(place(co, id, *w, before), span).await;
            match tried {
                Tried::Left => {
                    left += 1;
                    misses = 0;
                }
                Tried::Waits => {
                    misses += 1;
                    first_miss.get_or_insert_with(|| id.clone());
                }
                Tried::Skipped => {}
                Tried::Yields => {
                    restarts += 1;
                    entries = match read(co).await {
                        Ok((q, _)) => order(&q),
                        Err(_) => return left,
                    };
                    continue 'pass;
                }
            }
            if misses >= MAX_MISSES_PER_PASS {
                break;
            }
        }
        return left;
    }
}

/// Whether queued decision `id` finds room now: a plan of it that stores, holds and counts
/// nothing (the check before a later decision overtakes it, [`drain`]). One that waits for a
/// quota, not for room, never does here (a plan does not check quotas; the lower one may go
/// first, as before).
async fn fits_now(co: &Arc<Coordinator>, id: &str) -> bool {
    let Ok(Some((mut stored, _))) = co.store.get(id).await else {
        return false;
    };
    let for_quota = stored
        .decision
        .refused
        .as_ref()
        .is_some_and(|r| Code::QuotaExceeded.is(r));
    if stored.state != DecisionState::Queued || for_quota {
        return false;
    }
    stored.state = DecisionState::Planned;
    stored.decision.refused = None;
    plan(co, &mut stored, co.cfg.deadline_ms).await.is_ok() && stored.state == DecisionState::Planned
}

/// Tries to place queued decision `id`. When `before` names a decision ahead of it in this
/// pass that found no room, and `id` fits, `before` is planned again first: if it fits now
/// (room was freed between the two plans), `id` is put back and [`Tried::Yields`].
async fn place(co: &Arc<Coordinator>, id: &str, w: Waiting, before: Option<&str>) -> Tried {
    let (mut stored, rev) = match co.store.get(id).await {
        Ok(Some(x)) => x,
        Ok(None) => {
            // Queued by a submit that has not stored its decision yet, or never will.
            if now_ms().saturating_sub(w.queued_ms) > commit_phase_bound_ms(co) {
                dequeue(co, id).await;
                return Tried::Left;
            }
            return Tried::Skipped;
        }
        Err(e) => {
            tracing::warn!(error = %e, "queue: the decision cannot be read");
            return Tried::Skipped;
        }
    };
    if stored.state != DecisionState::Queued {
        if stored.state != DecisionState::Planned {
            dequeue(co, id).await;
            return Tried::Left;
        }
        return Tried::Skipped;
    }
    let waited = now_ms().saturating_sub(stored.queued_ms.unwrap_or(w.queued_ms));
    if waited > co.cfg.policy.queue.max_wait_ms {
        stored.state = DecisionState::Failed;
        stored.decision.refused = Some(Code::QueueTimeout.reason(format!(
            "queued for {} s without room (queue.maxWaitMs {} ms)",
            waited / 1000,
            co.cfg.policy.queue.max_wait_ms
        )));
        stored.updated_ms = now_ms();
        if let Ok(Write::Done(_)) = co.store.update(id, &stored, rev).await {
            tracing::info!(waited_ms = waited, "queue: waited too long; failed");
            co.metrics.failed(fedvol_proto::decisions::FailureKind::Refused);
            dequeue(co, id).await;
            return Tried::Left;
        }
        return Tried::Skipped;
    }
    // Take it: `queued` → `planned`, by compare-and-set (a second drainer, or a submit of the
    // same id, gets a conflict).
    stored.state = DecisionState::Planned;
    stored.decision.refused = None;
    stored.updated_ms = now_ms();
    let mut rev = match co.store.update(id, &stored, rev).await {
        Ok(Write::Done(r)) => r,
        _ => return Tried::Skipped,
    };
    if let Err(r) = admit_quota(co, &mut stored).await {
        tracing::warn!(error = ?r.error, "queue: quota usage unavailable");
        return back(co, stored, rev).await;
    }
    if stored.decision.refused.is_none()
        && let Err(r) = plan(co, &mut stored, co.cfg.deadline_ms).await
    {
        tracing::warn!(error = ?r.error, "queue: planning failed");
        super::quota::release(co, id, &stored.decision.quota).await;
        return back(co, stored, rev).await;
    }
    if stored.state != DecisionState::Planned {
        if !no_room(&stored) {
            // No cluster can ever place it (`unresolvable`): waiting would not help.
            return refuse(co, stored, rev).await;
        }
        // Still no room (a quota, nothing feasible, clusters that did not answer): back in
        // the queue, with the reasons.
        return requeue(co, stored, rev).await;
    }
    if let Some(first) = before
        && fits_now(co, first).await
    {
        tracing::info!(ahead = %first, "queue: room was freed during the pass; the decision ahead goes first");
        super::quota::release(co, id, &stored.decision.quota).await;
        back(co, stored, rev).await;
        return Tried::Yields;
    }
    if let Some(c) = stored.decision.chosen_cluster.clone() {
        stored.attempts.push(super::commit::pending_attempt(&stored, &c));
    }
    rev = match co.store.update(id, &stored, rev).await {
        Ok(Write::Done(r)) => r,
        _ => {
            super::quota::release(co, id, &stored.decision.quota).await;
            return Tried::Skipped;
        }
    };
    let phase = super::commit::commit_phase(co, &mut stored, &mut rev, super::commit::Start::Fresh).await;
    match phase {
        super::commit::Phase::Done => {
            let reply = save(co, stored, rev).await;
            if let Some(kind) = reply.stored.as_ref().and_then(StoredDecision::failure) {
                co.metrics.failed(kind);
            }
            match reply.stored.map(|s| s.state) {
                Some(DecisionState::Queued) => Tried::Waits,
                Some(state) => {
                    tracing::info!(?state, "queue: placed");
                    dequeue(co, id).await;
                    Tried::Left
                }
                None => Tried::Skipped,
            }
        }
        // In doubt (the reconciler settles it) or taken over: out of this pass.
        _ => Tried::Skipped,
    }
}

/// Puts a decision taken for placement back to `queued` unchanged in substance (the store or
/// NATS failed meanwhile).
async fn back(co: &Coordinator, mut stored: StoredDecision, rev: u64) -> Tried {
    stored.state = DecisionState::Queued;
    stored.updated_ms = now_ms();
    let _ = co.store.update(&stored.decision.request_id.clone(), &stored, rev).await;
    Tried::Skipped
}

/// Stores a queued decision that no cluster can ever place (`unresolvable`) as `failed`, out
/// of the queue and of the quota ledgers.
async fn refuse(co: &Coordinator, mut stored: StoredDecision, rev: u64) -> Tried {
    let id = stored.decision.request_id.clone();
    super::quota::release(co, &id, &stored.decision.quota).await;
    stored.updated_ms = now_ms();
    match co.store.update(&id, &stored, rev).await {
        Ok(Write::Done(_)) => {
            tracing::info!("queue: no cluster can ever place it; failed");
            co.metrics.failed(fedvol_proto::decisions::FailureKind::NothingFits);
            dequeue(co, &id).await;
            Tried::Left
        }
        _ => Tried::Skipped,
    }
}

/// Stores a decision that still found no room as `queued` again, with its new reasons.
async fn requeue(co: &Coordinator, mut stored: StoredDecision, rev: u64) -> Tried {
    let id = stored.decision.request_id.clone();
    super::quota::release(co, &id, &stored.decision.quota).await;
    stored.state = DecisionState::Queued;
    stored.decision.chosen_cluster = None;
    stored.updated_ms = now_ms();
    match co.store.update(&id, &stored, rev).await {
        Ok(Write::Done(_)) => Tried::Waits,
        _ => Tried::Skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_age_then_id() {
        let mut q = Queue::default();
        for (id, priority, queued_ms) in [("a", 0, 1), ("b", 10, 5), ("c", 10, 2), ("d", -5, 0), ("e", 0, 1)] {
            q.entries.insert(id.into(), Waiting { priority, queued_ms });
        }
        let ids: Vec<String> = order(&q).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, ["c", "b", "a", "e", "d"]);
    }
}
