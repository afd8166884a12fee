//! The queue of submits that wait for capacity (issue 18: priority without eviction).
//!
//! A submit with `wait_for_capacity` that finds no room (nothing feasible, every commit refused
//! because the capacity went to others, or a quota exceeded) is stored `queued` instead of
//! `failed`, holding nothing and counted in no quota. The queue itself is one key of the
//! decision bucket, [`QUEUE_KEY`], holding each queued request id with its priority and when it
//! was queued, written by compare-and-set: so its bound (`queue.maxQueued`, past it a submit is
//! refused `queue_full`) holds across every coordinator.
//!
//! The coordinator holding the reconciler's lease places queued decisions ([`drain`]) when a
//! decision is completed (room was freed) and on every reconciler tick: in **priority order,
//! highest first, then oldest first**, each taken over by compare-and-set (`queued` →
//! `planned`) and planned, admitted and committed like a fresh submit. One that still finds no
//! room goes back to `queued` with its new decision (so `decisions show` says why it waits),
//! keeping its place; a lower one that fits may then go first (no head-of-line blocking, as
//! kube-scheduler's active queue). Committed work is never preempted. A decision queued longer
//! than `queue.maxWaitMs` fails `queue_timeout`.

use std::collections::BTreeMap;
use std::sync::Arc;

use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::store::{StoreError, Write};
use super::submit::{admit_quota, commit_phase_bound_ms, plan, save};

/// The queue's key in the decision bucket (no request id has a `/`).
pub const QUEUE_KEY: &str = "fedvol/queue";

/// Passes over the queue stop after this many decisions in a row found no room: each try is a
/// plan on every cluster, and a full federation would otherwise be asked once per queued
/// decision on every tick.
const MAX_MISSES_PER_PASS: usize = 16;

/// The queue as stored.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Queue {
    /// Queued request ids.
    #[serde(default)]
    entries: BTreeMap<String, Waiting>,
}

/// One queued request.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Waiting {
    /// Its priority value.
    priority: i64,
    /// When it was first queued, ms since the epoch.
    queued_ms: u64,
}

/// Reads the queue and its revision (`None` = no queue yet).
async fn read(co: &Coordinator) -> Result<(Queue, Option<u64>), StoreError> {
    Ok(co
        .store
        .get_json(QUEUE_KEY)
        .await?
        .map_or((Queue::default(), None), |(q, rev)| (q, Some(rev))))
}

/// Changes the queue with `change` (compare-and-set, retried on conflict). `change` returns
/// `false` to leave it unchanged. Returns what the last call of `change` returned.
async fn update(co: &Coordinator, mut change: impl FnMut(&mut Queue) -> bool) -> Result<bool, StoreError> {
    loop {
        let (mut q, rev) = read(co).await?;
        if !change(&mut q) {
            return Ok(false);
        }
        match co.store.put_json(QUEUE_KEY, &q, rev).await? {
            Write::Done(_) => return Ok(true),
            Write::Conflict => continue,
        }
    }
}

/// Takes `request_id` out of the queue.
async fn dequeue(co: &Coordinator, request_id: &str) {
    if let Err(e) = update(co, |q| q.entries.remove(request_id).is_some()).await {
        tracing::warn!(request_id, error = %e, "the queue could not be updated");
    }
}

/// Takes a decision withdrawn by `complete` out of the queue.
pub async fn withdrawn(co: &Coordinator, request_id: &str) {
    dequeue(co, request_id).await;
}

/// Turns a decision that found no room into a queued one: takes it out of the quota ledgers,
/// adds it to the queue (keeping its first `queued_ms`) and sets `queued` (no chosen cluster).
/// When the queue is full the decision stays `failed`, refused `queue_full`.
///
/// Errors: the queue could not be read or written.
pub async fn to_queue(co: &Coordinator, stored: &mut StoredDecision) -> Result<(), StoreError> {
    let id = stored.decision.request_id.clone();
    super::quota::release(co, &id, &stored.decision.quota).await;
    let queued_ms = *stored.queued_ms.get_or_insert_with(now_ms);
    let max = co.cfg.policy.queue.max_queued;
    let entry = Waiting {
        priority: stored.priority,
        queued_ms,
    };
    // Whether the id is in the queue, and the queue's length, as of the last read.
    let (mut queued, mut length) = (false, 0);
    update(co, |q| {
        queued = q.entries.contains_key(&id);
        length = q.entries.len();
        if queued || length >= max {
            return false;
        }
        q.entries.insert(id.clone(), entry);
        (queued, length) = (true, length + 1);
        true
    })
    .await?;
    stored.decision.chosen_cluster = None;
    stored.updated_ms = now_ms();
    if queued {
        tracing::info!(priority = stored.priority, queued = length, "no room: queued");
        stored.state = DecisionState::Queued;
    } else {
        tracing::info!(max, "no room, and the queue is full");
        stored.state = DecisionState::Failed;
        stored.decision.refused = Some(Code::QueueFull.reason(format!(
            "no room now, and the queue already holds its maximum of {max} decisions (queue.maxQueued)"
        )));
    }
    Ok(())
}

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
}

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
    let mut misses = 0;
    for (id, w) in order(&q) {
        let span = tracing::info_span!("queue", request_id = %id, priority = w.priority);
        let tried = tracing::Instrument::instrument(place(co, &id, w), span).await;
        match tried {
            Tried::Left => {
                left += 1;
                misses = 0;
            }
            Tried::Waits => misses += 1,
            Tried::Skipped => {}
        }
        if misses >= MAX_MISSES_PER_PASS {
            break;
        }
    }
    left
}

/// Tries to place queued decision `id`.
async fn place(co: &Arc<Coordinator>, id: &str, w: Waiting) -> Tried {
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
        // Still no room (a quota, or nothing feasible): back in the queue, with the reasons.
        return requeue(co, stored, rev).await;
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
