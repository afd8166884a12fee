//! The queue's record in the decision bucket (key [`QUEUE_KEY`]): the submits that wait for
//! capacity, read and changed by compare-and-set ([`to_queue`], [`withdrawn`]). Below the
//! decision lifecycle ([`super::lifecycle`]) and the queue's drain ([`super::queue`]).

use std::collections::BTreeMap;

use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{Code, now_ms};

use super::Coordinator;
use super::store::{StoreError, Write};

/// The queue's key in the decision bucket (no request id has a `/`).
pub const QUEUE_KEY: &str = "fedvol/queue";

/// The queue as stored.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Queue {
    /// Queued request ids.
    #[serde(default)]
    pub(super) entries: BTreeMap<String, Waiting>,
}

/// One queued request.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Waiting {
    /// Its priority value.
    pub(super) priority: i64,
    /// When it was first queued, ms since the epoch.
    pub(super) queued_ms: u64,
}

/// Reads the queue and its revision (`None` = no queue yet).
pub(super) async fn read(co: &Coordinator) -> Result<(Queue, Option<u64>), StoreError> {
    Ok(co
        .store
        .get_json(QUEUE_KEY)
        .await?
        .map_or((Queue::default(), None), |(q, rev)| (q, Some(rev))))
}

/// Changes the queue with `change` (compare-and-set, retried on conflict). `change` returns
/// `false` to leave it unchanged. Returns what the last call of `change` returned.
pub(super) async fn update(co: &Coordinator, mut change: impl FnMut(&mut Queue) -> bool) -> Result<bool, StoreError> {
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
pub(super) async fn dequeue(co: &Coordinator, request_id: &str) {
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
