//! Committing a decision, with admission at commit: the plan broadcast holds
//! nothing, so concurrent submits never see capacity taken by one another's undecided plans.
//! The coordinator sends `commit` **with the request** to the chosen cluster; the agent plans it
//! again on its current state, under the lock every change takes, and commits what it chose or
//! refuses:
//!
//! - `no_longer_fits` (with the re-plan): the capacity went to someone else since the
//!   broadcast. The cluster's slot becomes the re-plan, the choice is re-run over the others.
//! - `capacity_in_flight`: it would fit but for other requests' commits in progress. The
//!   cluster is asked again after the others, until the phase's bound (`commitTimeoutMs`).
//! - anything else (a driver failed, the hold lapsed...): a commit failure; the next cluster in
//!   the ranking is tried, up to `commitAttempts` such failures.
//!
//! So a request is refused only once every cluster it fitted on has said it no longer fits,
//! i.e. its capacity went to requests that were acknowledged (or are being committed past the
//! bound).
//!
//! Before a commit is sent, its attempt (cluster, number) is stored in the decision record as
//! `pending` (compare-and-set). A commit that gets no answer is settled by asking the cluster to
//! release that attempt, again and again for up to one more commit timeout ([`settle`]):
//! "released" means it did not commit and never will (the agent fences the attempt);
//! "committed" means it did, and the commit is asked again for its stored outcome; "commit in
//! progress" or no answer means wait and ask again. When the outcome is still unknown after
//! that, the commit is **in doubt**: no other cluster is tried (committing elsewhere too could
//! book the request twice), the decision stays `planned`, and whoever takes it over (a submit of
//! the same id, or the reconciler) settles every pending attempt first.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use fedvol_common::choice::rules;
use fedvol_common::decision::{ChoiceStep, ClusterDecision, ClusterStatus, Rejection};
use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::{self as agent, ActionMsg, ActionReply};
use fedvol_proto::decisions::{CommitAttempt, DecisionState, StoredDecision};
use fedvol_proto::rpc::RpcError;
use fedvol_proto::{Code, ProtoError, now_ms};

use super::Coordinator;
use super::actions::{ActionError, Settled, release, send, settle};
use super::store::Write;

/// Pause before asking clusters with commits in progress again, ms.
const BUSY_PAUSE_MS: u64 = 20;

/// One commit attempt as recorded, the agent's decision (the re-plan it committed or refused
/// with), and whether its outcome is in doubt (see the module docs).
#[derive(Debug, Clone)]
pub struct Tried {
    /// The attempt (no longer pending).
    pub attempt: CommitAttempt,
    /// The cluster's decision as the agent planned it at commit time, when it said.
    pub decision: Option<ClusterDecision>,
    /// The agent may still commit: no other cluster may be tried.
    pub in_doubt: bool,
}

impl Tried {
    /// Attempt `n` on `cluster` as answered (not in doubt): `ok`, the agent's `error`, and what
    /// its `reply` said (its decision, the jobs it submitted, the volume outcomes).
    /// The reply's parts are moved, not copied (its decision is a whole answer, ~8 KB).
    fn answered(cluster: &str, n: u32, ok: bool, error: Option<ProtoError>, reply: Option<ActionReply>) -> Tried {
        let (decision, jobs, volumes) = reply.map(|r| (r.decision, r.jobs, r.volumes)).unwrap_or_default();
        Tried {
            decision,
            attempt: CommitAttempt {
                cluster: cluster.to_string(),
                attempt: n,
                pending: false,
                ok,
                error,
                jobs,
                volumes,
            },
            in_doubt: false,
        }
    }
}

/// Commits attempt `n` of `request` on `cluster` (admission at commit), settling a commit that
/// was not answered through release probes ([`settle`]). Returns the attempt as recorded.
///
/// `restore`: `Some(jobs)` when the commit restores a decision stored committed on `cluster`
/// onto an agent that lost it ([`super::restore`]), `jobs` being the batch jobs the decision
/// stores for it (the agent follows them instead of submitting them again); such commits are
/// admitted while the agent waits for its restore (`fedvol_agent::restore_gate`). `None`: an
/// ordinary commit.
pub async fn commit_on(
    co: &Coordinator,
    cluster: &str,
    request: &PlanRequest,
    n: u32,
    restore: Option<&[fedvol_proto::batch::BatchJob]>,
) -> Tried {
    let wait = co.cfg.commit_timeout_ms;
    let request_id = request.request_id.as_str();
    let msg = || ActionMsg {
        request: Some(request.clone()),
        attempt: n,
        restore: restore.is_some(),
        jobs: restore.map(<[_]>::to_vec).unwrap_or_default(),
        ..ActionMsg::new(request_id, now_ms() + wait)
    };
    let attempt = |ok: bool, error: Option<ProtoError>, reply: Option<ActionReply>| {
        if !ok {
            let code = error
                .as_ref()
                .map_or_else(|| "unknown".to_string(), |e| e.code.to_string());
            co.metrics.commit_failed(cluster, &code);
        }
        Tried::answered(cluster, n, ok, error, reply)
    };
    let what = match send::<agent::Commit>(co, cluster, msg(), wait).await {
        Ok(r) if r.ok => return attempt(true, None, Some(r)),
        // Another commit of this request is running there (a coordinator that took the decision
        // over races one that did not die): its outcome is unknown, not a failure.
        Ok(r) if r.error.as_ref().is_some_and(|e| e.is(&Code::CommitInProgress)) => {
            "another commit of this request was in progress on the cluster".to_string()
        }
        Ok(r) => {
            let reason = r
                .error
                .clone()
                .unwrap_or_else(|| Code::BadAnswer.error("commit refused without a reason"));
            tracing::info!(cluster, attempt = n, code = %reason.code, error = %reason.message, "commit refused");
            // A commit that failed after its hold was made (a driver failed) leaves the hold:
            // free it, and fence the attempt.
            if !is_contention(&Some(reason.clone()))
                && let Err(e) = release(co, cluster, request_id, n).await
            {
                tracing::debug!(cluster, error = %e, "release after a refused commit");
            }
            return attempt(false, Some(reason), Some(r));
        }
        // Not answered, or answered unreadably (e.g. an answer too large for NATS): the agent
        // may have committed.
        Err(e @ ActionError::Rpc(RpcError::BadAnswer { .. })) => format!("the commit's answer was unreadable ({e})"),
        Err(ActionError::Rpc(RpcError::TimedOut { .. })) => format!("commit not answered within {wait} ms"),
        Err(e) => {
            tracing::warn!(cluster, error = %e, "commit failed");
            return attempt(false, Some(e.error()), None);
        }
    };
    // Ask the agent until what became of the commit is settled.
    tracing::warn!(cluster, attempt = n, wait_ms = wait, why = %what, "commit outcome unknown; asking the agent what happened");
    match settle(co, cluster, request_id, n).await {
        Settled::Released => attempt(
            false,
            Some(Code::TimedOut.error(format!("{what}; the attempt was released"))),
            None,
        ),
        Settled::Committed => committed_answer(co, cluster, request, n).await,
        Settled::Unknown(why) => {
            tracing::warn!(cluster, why = %why, "commit outcome in doubt: no other cluster is tried");
            let mut t = attempt(false, Some(in_doubt_reason(&what, &why)), None);
            t.in_doubt = true;
            t
        }
    }
}

/// The stored answer of a commit the agent says it made (a repeated commit gets it).
async fn committed_answer(co: &Coordinator, cluster: &str, request: &PlanRequest, n: u32) -> Tried {
    let wait = co.cfg.commit_timeout_ms;
    let msg = ActionMsg {
        request: Some(request.clone()),
        attempt: n,
        ..ActionMsg::new(&request.request_id, now_ms() + wait)
    };
    let (ok, error, reply) = match send::<agent::Commit>(co, cluster, msg, wait).await {
        Ok(r) if r.ok => (true, None, Some(r)),
        Ok(r) => (false, r.error.clone(), Some(r)),
        // The agent says it committed; only its answer (the volumes' outcomes) is missing.
        Err(e) => (
            true,
            Some(Code::BadAnswer.error(format!(
                "committed (the agent says so), but its answer could not be had: {e}"
            ))),
            None,
        ),
    };
    Tried::answered(cluster, n, ok, error, reply)
}

/// The reason of an in-doubt commit: `what` happened to the commit, `why` it is still unknown.
fn in_doubt_reason(what: &str, why: &str) -> ProtoError {
    Code::CommitOutcomeUnknown.error(format!(
        "{what}, and its outcome is still unknown ({why}); no other cluster was tried, so the request cannot be booked twice: it is settled when the decision is taken over (a submit of the same request id, or the coordinators' reconciler)"
    ))
}

/// How a commit phase begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A fresh decision: its one pending attempt (on the chosen cluster) was stored with it and
    /// is sent now.
    Fresh,
    /// A decision taken over from a coordinator that stopped answering: every pending attempt
    /// is settled first.
    TakeOver,
}

/// What a commit phase came to.
#[derive(Debug, Clone)]
pub enum Phase {
    /// The decision is `committed` or `failed`, to be stored over the revision now in hand.
    Done,
    /// A commit is in doubt: the decision stays `planned` (see the module docs).
    InDoubt(ProtoError),
    /// Another coordinator changed the decision meanwhile: its version.
    Superseded(Box<StoredDecision>),
}

/// The next attempt number on `cluster`.
fn next_attempt(stored: &StoredDecision, cluster: &str) -> u32 {
    stored
        .attempts
        .iter()
        .filter(|a| a.cluster == cluster)
        .map(|a| a.attempt)
        .max()
        .unwrap_or(0)
        + 1
}

/// A pending attempt on `cluster`, numbered after the decision's earlier ones there.
pub fn pending_attempt(stored: &StoredDecision, cluster: &str) -> CommitAttempt {
    CommitAttempt {
        cluster: cluster.to_string(),
        attempt: next_attempt(stored, cluster),
        pending: true,
        ok: false,
        error: None,
        volumes: Vec::new(),
        jobs: Vec::new(),
    }
}

/// True for a refusal that is no commit failure: the cluster's capacity changed since the
/// broadcast, or its agent waits for the restore of its commits (`restoring`). It does not
/// count towards `commitAttempts`.
pub fn is_contention(e: &Option<ProtoError>) -> bool {
    e.as_ref()
        .is_some_and(|e| e.is(&Code::NoLongerFits) || e.is(&Code::CapacityInFlight) || e.is(&Code::Restoring))
}

/// The slot `cluster` gets from the agent's commit-time `decision` (timed as the broadcast's).
fn replace_slot(slots: &mut IndexMap<String, ClusterDecision>, cluster: &str, decision: Option<ClusterDecision>) {
    if let (Some(mut d), Some(old)) = (decision, slots.get(cluster)) {
        d.status = ClusterStatus::Answered;
        d.elapsed_ms = old.elapsed_ms;
        slots.insert(cluster.to_string(), d);
    }
}

/// The cluster choice among the `candidates` of `stored`'s slots, in the candidates' order,
/// with the decision's drains and every drain in force now on one of its clusters (added to
/// the decision's `drained` first): a commit falling back never picks a cluster drained since
/// the plan.
fn choose_in(
    co: &Coordinator,
    request: &fedvol_common::funnel::PlanRequest,
    stored: &mut StoredDecision,
    candidates: &indexmap::IndexSet<String>,
    seed: u64,
) -> (Option<String>, Vec<ChoiceStep>) {
    let d = &mut stored.decision;
    for (name, drain) in co.drains.among(d.clusters.keys().map(String::as_str)) {
        d.drained.entry(name).or_insert(drain);
    }
    let among = candidates
        .iter()
        .filter_map(|n| d.clusters.get_key_value(n).map(|(k, c)| (k.as_str(), c)))
        .collect();
    fedvol_common::choice::choose_among_drained(request, among, seed, &d.drained)
}

/// Runs the commit phase of a planned, non-dry-run decision (module docs): tries the chosen
/// cluster, then the next in the ranking; asks clusters with commits in progress again until
/// the phase's bound; records each attempt; stores each new attempt as `pending` before sending
/// it (compare-and-set over `rev`, which it advances). Sets the state to `committed` (with
/// `chosen_cluster` the cluster that committed, its slot the agent's commit-time decision) or
/// `failed` (with `chosen_cluster` null), and prepends a `commit_failed` step to the choice when
/// a cluster was dropped.
pub async fn commit_phase(co: &Arc<Coordinator>, stored: &mut StoredDecision, rev: &mut u64, start: Start) -> Phase {
    let seed = stored.decision.seed;
    let request = stored.request.clone();
    let bound = tokio::time::Instant::now() + Duration::from_millis(co.cfg.commit_timeout_ms);
    // The clusters still in the running, by name in their order (their answers stay in
    // `stored`: copying 1,000 of them cost about 8 ms).
    let mut candidates: indexmap::IndexSet<String> = stored.decision.clusters.keys().cloned().collect();
    let mut dropped: Vec<Rejection> = Vec::new();
    let mut busy: Vec<String> = Vec::new();
    let mut committed: Option<String> = None;
    let mut steps: Vec<ChoiceStep> = stored.decision.choice.clone();
    let mut chosen = stored.decision.chosen_cluster.clone();

    if start == Start::TakeOver {
        match settle_pending(co, stored).await {
            Ok(Some(c)) => committed = Some(c),
            Ok(None) => {}
            Err(doubt) => return Phase::InDoubt(doubt),
        }
        // Clusters tried before the take-over are not tried again.
        for a in stored.attempts.iter().filter(|a| !a.ok && !is_contention(&a.error)) {
            candidates.shift_remove(&a.cluster);
        }
        if committed.is_none() {
            let (c, s) = choose_in(co, &request, stored, &candidates, seed);
            chosen = c;
            steps = s;
        }
    }
    while committed.is_none() {
        let Some(c) = chosen.clone() else {
            if busy.is_empty() || tokio::time::Instant::now() >= bound {
                break;
            }
            // Every candidate left is busy with other requests' commits: ask them again.
            tokio::time::sleep(Duration::from_millis(BUSY_PAUSE_MS)).await;
            for b in busy.drain(..) {
                if stored.decision.clusters.contains_key(&b) {
                    candidates.insert(b);
                }
            }
            let (next, s) = choose_in(co, &request, stored, &candidates, seed);
            chosen = next;
            steps = s;
            continue;
        };
        let failures = stored
            .attempts
            .iter()
            .filter(|a| !a.ok && !a.pending && !is_contention(&a.error))
            .count();
        if failures >= co.cfg.commit_attempts as usize {
            steps.push(ChoiceStep {
                rule: rules::COMMIT_ATTEMPTS.into(),
                kept: Vec::new(),
                dropped: vec![Rejection {
                    candidate: c.clone(),
                    reasons: vec![
                        Code::CommitAttemptsExhausted
                            .reason(format!("not tried: {} commit attempts failed", co.cfg.commit_attempts)),
                    ],
                }],
            });
            break;
        }
        // The attempt is stored as pending before it is sent (a fresh decision's first one was
        // stored with the decision).
        let n = match stored.attempts.last() {
            Some(a) if a.pending && a.cluster == c => a.attempt,
            _ => {
                let a = pending_attempt(stored, &c);
                let n = a.attempt;
                stored.attempts.push(a);
                stored.decision.chosen_cluster = Some(c.clone());
                stored.updated_ms = now_ms();
                match co.store.update(&stored.decision.request_id, stored, *rev).await {
                    Ok(Write::Done(r)) => *rev = r,
                    Ok(Write::Conflict) => return superseded(co, stored).await,
                    Err(e) => {
                        // Not sent: the decision stays `planned` (a take-over finishes it).
                        stored.attempts.pop();
                        tracing::error!(error = %e, "the next commit attempt could not be recorded");
                        return Phase::InDoubt(
                            Code::StoreUnavailable.error(format!("the next commit attempt could not be recorded: {e}")),
                        );
                    }
                }
                n
            }
        };
        let Tried {
            attempt: a,
            decision,
            in_doubt,
        } = commit_on(co, &c, &request, n, None).await;
        tracing::info!(cluster = %c, ok = a.ok, in_doubt, attempt = n, "commit attempt");
        let error = a.error.clone();
        if let Some(last) = stored.attempts.last_mut()
            && last.pending
            && last.cluster == c
        {
            *last = a.clone();
        }
        if in_doubt {
            stored.decision.chosen_cluster = Some(c.clone());
            stored.state = DecisionState::Planned;
            // Still pending: whoever takes the decision over settles it.
            if let Some(last) = stored.attempts.last_mut() {
                last.pending = true;
            }
            return Phase::InDoubt(
                error.unwrap_or_else(|| in_doubt_reason("the commit was not answered", "no answer")),
            );
        }
        if a.ok {
            replace_slot(&mut stored.decision.clusters, &c, decision);
            committed = Some(c);
            break;
        }
        candidates.shift_remove(&c);
        match &error {
            Some(e) if e.is(&Code::CapacityInFlight) => busy.push(c.clone()),
            Some(e) if e.is(&Code::NoLongerFits) => {
                replace_slot(&mut stored.decision.clusters, &c, decision);
                dropped.push(rejection(&c, e));
            }
            Some(e) => dropped.push(rejection(&c, e)),
            None => dropped.push(rejection(&c, &Code::CommitFailed.error("commit failed"))),
        }
        let (next, s) = choose_in(co, &request, stored, &candidates, seed);
        chosen = next;
        steps = s;
    }
    for b in busy {
        dropped.push(rejection(
            &b,
            &Code::CapacityInFlight.error(format!(
                "still busy with other requests' commits after {} ms",
                co.cfg.commit_timeout_ms
            )),
        ));
    }
    if !dropped.is_empty() {
        let kept = candidates
            .iter()
            .filter(|n| {
                stored
                    .decision
                    .clusters
                    .get(*n)
                    .is_some_and(|d| d.status == ClusterStatus::Answered)
            })
            .cloned()
            .collect();
        steps.insert(
            0,
            ChoiceStep {
                rule: rules::COMMIT_FAILED.into(),
                kept,
                dropped,
            },
        );
    }
    stored.decision.choice = steps;
    stored.decision.chosen_cluster = committed.clone();
    stored.state = if committed.is_some() {
        DecisionState::Committed
    } else {
        DecisionState::Failed
    };
    stored.updated_ms = now_ms();
    Phase::Done
}

/// The `commit_failed` rejection of `cluster` for `e`.
fn rejection(cluster: &str, e: &ProtoError) -> Rejection {
    Rejection {
        candidate: cluster.to_string(),
        reasons: vec![Code::CommitFailed.reason(format!("commit failed: {}: {}", e.code, e.message))],
    }
}

/// The decision as another coordinator stored it meanwhile.
async fn superseded(co: &Coordinator, stored: &StoredDecision) -> Phase {
    match co.store.get(&stored.decision.request_id).await {
        Ok(Some((theirs, _))) => Phase::Superseded(Box::new(theirs)),
        _ => Phase::InDoubt(
            Code::StoreUnavailable.error("the decision changed under this coordinator and cannot be read"),
        ),
    }
}

/// Settles every pending attempt of a decision taken over (by a submit of its id, the
/// reconciler, or a `complete`): each is asked (release probes, [`settle`]) what became of it,
/// and recorded as settled in `stored`; a cluster that committed gets its commit-time slot.
/// Nothing new is committed. Returns the cluster that committed, if one did.
///
/// Errors: an attempt still in doubt (the reason); `stored` then keeps it pending.
pub async fn settle_pending(co: &Coordinator, stored: &mut StoredDecision) -> Result<Option<String>, ProtoError> {
    let request = stored.request.clone();
    let mut committed = None;
    for i in 0..stored.attempts.len() {
        let a = stored.attempts[i].clone();
        if !a.pending {
            if a.ok {
                committed = Some(a.cluster.clone());
            }
            continue;
        }
        let settled = match settle(co, &a.cluster, &request.request_id, a.attempt).await {
            Settled::Released => CommitAttempt {
                pending: false,
                error: Some(
                    Code::CommitOutcomeUnknown
                        .error("its coordinator stopped before the outcome; the attempt was released on take-over"),
                ),
                ..a.clone()
            },
            Settled::Committed => {
                let t = committed_answer(co, &a.cluster, &request, a.attempt).await;
                replace_slot(&mut stored.decision.clusters, &a.cluster, t.decision);
                committed = Some(a.cluster.clone());
                t.attempt
            }
            Settled::Unknown(why) => {
                return Err(in_doubt_reason("a commit of the coordinator that stopped", &why));
            }
        };
        stored.attempts[i] = settled;
    }
    Ok(committed)
}
