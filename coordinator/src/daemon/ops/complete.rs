//! `complete`: a workflow's end: its commit completed on its cluster (volumes deleted or kept
//! by their reclaim policy), a queued decision withdrawn, a decision left `planned` settled first.

use std::sync::Arc;
use std::time::Duration;

use fedvol_common::choice::rules;
use fedvol_common::decision::{ChoiceStep, Rejection};
use fedvol_proto::agent;
use fedvol_proto::coordinator::{DecisionRef, SubmitReply};
use fedvol_proto::decisions::{Completing, DecisionState, StoredDecision};
use fedvol_proto::rpc::RpcError;
use fedvol_proto::{Code, now_ms};

use super::get::not_found;
use crate::daemon::Coordinator;
use crate::daemon::actions::{ActionError, send};
use crate::daemon::commit::settle_pending;
use crate::daemon::lifecycle::commit_phase_bound_ms;
use crate::daemon::lifecycle::error_reply;
use crate::daemon::store::Write;

/// How often `complete` looks again at a decision another coordinator is committing, ms.
const POLL_MS: u64 = 100;

/// `complete` (and `fedvol cancel`, `q.cancel`: the cluster cancels the workflow's batch jobs
/// first; a decision whose jobs all ended is stored `failed` when one did not complete, with
/// [`StoredDecision::run_failure`]): sends `complete` to the decision's cluster (which frees its allocations and
/// reclaims its volumes) and stores the decision as `completed` with the agent's answer.
/// Completing a completed decision returns it unchanged; a dry run or a failed decision is
/// refused (`not_committed`); an agent's refusal comes back as the error, with the decision
/// unchanged. Only the decision's owner (the user who submitted it) may complete it: anyone
/// else gets `not_owner` and nothing changes.
///
/// A decision still `planned` is waited for while a live coordinator may be
/// committing it (up to the commit phase's bound, [`commit_phase_bound_ms`]); past that bound
/// its coordinator is taken to be gone and the decision is settled here, as a take-over does
/// but committing nothing new (`settle_planned`): a cluster that committed it is recorded and
/// completed; when none did, the decision is stored `failed` and the answer says nothing was
/// committed (`not_committed`); a commit still in doubt is the error, the decision unchanged.
pub async fn complete(co: &Arc<Coordinator>, q: &DecisionRef, user: &str) -> SubmitReply {
    let bound = commit_phase_bound_ms(co);
    let give_up = tokio::time::Instant::now() + Duration::from_millis(bound.saturating_mul(2));
    let answer_by = tokio::time::Instant::now() + Duration::from_millis(crate::daemon::lifecycle::ANSWER_WITHIN_MS);
    let mut conflicts = 0;
    loop {
        let (mut stored, mut rev) = match co.store.get(&q.request_id).await {
            Ok(Some(x)) => x,
            Ok(None) => return not_found(&q.request_id),
            Err(e) => return error_reply(Code::StoreUnavailable, e.to_string()),
        };
        if stored.request.user != user {
            tracing::warn!(owner = %stored.request.user, "complete of another user's decision refused");
            return error_reply(
                Code::NotOwner,
                format!(
                    "decision `{}` belongs to user `{}`: only they may complete it",
                    q.request_id, stored.request.user
                ),
            );
        }
        if stored.state == DecisionState::Planned && !stored.dry_run {
            let age = now_ms().saturating_sub(stored.updated_ms);
            if age <= bound && tokio::time::Instant::now() < give_up {
                // Its coordinator may still be committing it: wait for the outcome, but answer
                // within the client's wait that it is being settled.
                if tokio::time::Instant::now() >= answer_by {
                    return crate::daemon::lifecycle::still_settling(co, stored, age);
                }
                tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
                continue;
            }
            tracing::warn!(
                age_ms = age,
                "complete of a decision left planned: settling its commit attempts"
            );
            match settle_planned(co, &mut stored, rev).await {
                Settle::Committed(r) => rev = r,
                Settle::Answer(reply) => return *reply,
                Settle::Changed => {
                    conflicts += 1;
                    if conflicts >= 3 {
                        break;
                    }
                    continue;
                }
            }
        }
        if stored.state == DecisionState::Queued {
            match withdraw(co, stored, rev).await {
                Some(reply) => return reply,
                None => {
                    conflicts += 1;
                    if conflicts >= 3 {
                        break;
                    }
                    continue;
                }
            }
        }
        let cluster = match (stored.state, stored.decision.chosen_cluster.clone()) {
            (DecisionState::Completed | DecisionState::Cancelled, _) => return SubmitReply::stored(stored),
            (DecisionState::Failed, _) if stored.completion.is_some() => return SubmitReply::stored(stored),
            (DecisionState::Committed, Some(c)) => c,
            (state, _) => {
                let why = match state {
                    DecisionState::Planned if stored.dry_run => "it is a dry run, which holds nothing",
                    DecisionState::Planned => "it is still being committed",
                    _ => "it failed, so nothing was committed",
                };
                return SubmitReply {
                    stored: Some(stored),
                    error: Some(
                        Code::NotCommitted.error(format!("decision `{}` cannot be completed: {why}", q.request_id)),
                    ),
                    stored_record: None,
                };
            }
        };
        let wait = co.cfg.commit_timeout_ms;
        let asked_ms = now_ms();
        let msg = agent::ActionMsg {
            cancel: q.cancel,
            ..agent::ActionMsg::new(&q.request_id, now_ms() + wait)
        };
        let reply = match send::<agent::Complete>(co, &cluster, msg, wait).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "complete failed");
                let mut error = e.error();
                let unanswered = matches!(
                    e,
                    ActionError::Rpc(RpcError::TimedOut { .. } | RpcError::NoResponders(_))
                );
                if unanswered {
                    mark_completing(co, &mut stored, rev, asked_ms, q.cancel).await;
                }
                if unanswered && finish_later(co, q, user) {
                    error.message = format!(
                        "{}; the coordinator keeps completing it on {cluster} for the next {} min (the agent answers a repeated complete with its first answer): `fedvol decisions show {}` says when it did",
                        error.message,
                        FINISH_LATER_FOR.as_secs() / 60,
                        q.request_id
                    );
                }
                return SubmitReply {
                    stored: Some(stored),
                    error: Some(error),
                    stored_record: None,
                };
            }
        };
        if !reply.ok {
            let err = reply
                .error
                .clone()
                .unwrap_or_else(|| Code::BadAnswer.error("complete refused without a reason"));
            tracing::warn!(cluster = %cluster, code = %err.code, "complete refused");
            if stored.completing.is_some() {
                // Answered at last, with a refusal: nobody completes it on its own any more.
                stored.completing = None;
                stored.updated_ms = now_ms();
                if let Err(e) = co.store.update(&q.request_id, &stored, rev).await {
                    tracing::warn!(error = %e, "the end of an unanswered complete could not be stored");
                }
            }
            return SubmitReply {
                stored: Some(stored),
                error: Some(err),
                stored_record: None,
            };
        }
        // The final states of the jobs, when the cluster ran some (`fedvol cancel`).
        if !reply.jobs.is_empty()
            && let Some(a) = stored.attempts.iter_mut().rev().find(|a| a.ok)
        {
            a.jobs = reply.jobs.clone();
        }
        stored.end(reply);
        stored.updated_ms = now_ms();
        match co.store.update(&q.request_id, &stored, rev).await {
            Ok(Write::Done(_)) => {
                tracing::info!(cluster = %cluster, state = stored.state.as_str(), "decision completed");
                co.metrics.ended(stored.state.as_str());
                crate::daemon::quota::release(co, &q.request_id, &stored.decision.quota).await;
                return SubmitReply::stored(stored);
            }
            // Changed meanwhile (another complete): read again; the agent answers a repeated
            // complete with its stored answer.
            Ok(Write::Conflict) => {
                conflicts += 1;
                if conflicts >= 3 {
                    break;
                }
            }
            Err(e) => {
                return SubmitReply {
                    stored: Some(stored),
                    error: Some(Code::StoreUnavailable.error(e.to_string())),
                    stored_record: None,
                };
            }
        }
    }
    error_reply(Code::StoreUnavailable, "the decision kept changing; try again")
}

/// Stores that `stored` (revision `rev`) has a `complete` its cluster did not answer
/// ([`StoredDecision::completing`], sent at `asked_ms`, ms since the epoch; the first such
/// complete is kept): the lease holder finishes it
/// when the coordinator that was asked is gone ([`finish_marked`]). Best effort: a failed or
/// conflicting write is logged, and this coordinator still tries again ([`finish_later`]).
async fn mark_completing(co: &Coordinator, stored: &mut StoredDecision, rev: u64, asked_ms: u64, cancel: bool) {
    if stored.completing.is_some() {
        return;
    }
    stored.completing = Some(Completing {
        since_ms: asked_ms,
        cancel,
    });
    stored.updated_ms = now_ms();
    match co.store.update(&stored.decision.request_id, stored, rev).await {
        Ok(Write::Done(_)) => {}
        Ok(Write::Conflict) => {
            tracing::info!("an unanswered complete not marked: the decision changed meanwhile")
        }
        Err(e) => tracing::warn!(error = %e, "an unanswered complete could not be marked"),
    }
}

/// The lease holder's part of an unanswered `complete` (the reconciler, each tick): every
/// decision stored `committed` with [`StoredDecision::completing`] older than the commit
/// phase's bound ([`commit_phase_bound_ms`]) is completed again in the background here as its
/// coordinator would ([`finish_later`]; one task per id, so a tick while one runs adds
/// nothing): the coordinator that was asked may be gone, and with it its own tries. Two
/// coordinators completing one decision at once is safe: the agent answers a repeated
/// complete with its first answer, and the record is changed by compare-and-set.
pub async fn finish_marked(co: &Arc<Coordinator>) {
    let bound = commit_phase_bound_ms(co);
    let now = now_ms();
    for (id, (since, user)) in co.index.completing() {
        let running = || co.completing.lock().unwrap_or_else(|p| p.into_inner()).contains(&id);
        if now.saturating_sub(since) <= bound || running() {
            continue;
        }
        // Whether the complete asked to cancel the jobs is in the record only.
        let cancel = match co.store.get(&id).await {
            Ok(Some((s, _))) => match s.completing {
                Some(c) if s.state == DecisionState::Committed => c.cancel,
                _ => continue,
            },
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(request_id = %id, error = %e, "reconciler: cannot read a decision being completed");
                continue;
            }
        };
        let q = DecisionRef {
            request_id: id,
            cancel,
            whole: None,
        };
        if finish_later(co, &q, &user) {
            tracing::warn!(request_id = %q.request_id, since_ms = since, "reconciler: completing a decision whose complete its cluster has not answered");
        }
    }
}

/// How long a coordinator keeps completing a decision whose `complete` went unanswered.
pub const FINISH_LATER_FOR: Duration = Duration::from_secs(600);

/// The longest pause between two tries of [`finish_later`].
const FINISH_LATER_MAX_PAUSE: Duration = Duration::from_secs(30);

/// After a `complete` that its cluster did not answer (timed out, or no agent listening): the
/// agent may have completed it and lost only its answer (killed right after), or not received
/// it; either way the user asked for it, and a repeated complete is answered with the agent's
/// first answer. So this coordinator tries the whole `complete` again in the background (1 s,
/// then twice as long each time up to 30 s, for [`FINISH_LATER_FOR`]) until it is answered,
/// which stores the decision `completed` as a user's retry would: no decision stays
/// `committed` on the coordinators while its cluster released it. One task per request id
/// ([`Coordinator::completing`]); true when one was started (false: one runs already).
fn finish_later(co: &Arc<Coordinator>, q: &DecisionRef, user: &str) -> bool {
    if !co
        .completing
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(q.request_id.clone())
    {
        return false;
    }
    let (co, q, user) = (co.clone(), q.clone(), user.to_string());
    let task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(async move {
        let end = tokio::time::Instant::now() + FINISH_LATER_FOR;
        let mut pause = Duration::from_secs(1);
        loop {
            tokio::time::sleep(pause).await;
            let r = complete(&co, &q, &user).await;
            let retry = r
                .error
                .as_ref()
                .is_some_and(|e| matches!(e.code, Code::TimedOut | Code::Unreachable));
            if !retry {
                match &r.error {
                    None => {
                        tracing::info!(request_id = %q.request_id, "an unanswered complete completed in the background")
                    }
                    Some(e) => {
                        tracing::warn!(request_id = %q.request_id, code = %e.code, error = %e.message, "an unanswered complete, tried again, was refused")
                    }
                }
                break;
            }
            if tokio::time::Instant::now() + pause > end {
                // The record's `completing` mark, when stored, outlives this task: the
                // reconciler's lease holder starts the tries again (`finish_marked`).
                tracing::warn!(
                    request_id = %q.request_id,
                    "an unanswered complete still unanswered after {} min: this coordinator stops; the reconciler's lease holder tries again while the decision is marked completing",
                    FINISH_LATER_FOR.as_secs() / 60
                );
                break;
            }
            pause = (pause * 2).min(FINISH_LATER_MAX_PAUSE);
        }
        co.completing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&q.request_id);
    });
    tokio::spawn(task);
    true
}

/// `complete` of a queued decision: withdraws it from the queue, stored `failed`
/// (`not_committed`: withdrawn before it was placed; nothing was held). `None` when the
/// decision changed meanwhile (read it again).
async fn withdraw(co: &Coordinator, mut stored: StoredDecision, rev: u64) -> Option<SubmitReply> {
    stored.state = DecisionState::Failed;
    stored.decision.refused = Some(
        Code::NotCommitted
            .reason("withdrawn from the queue by `fedvol complete` before it was placed; nothing was held"),
    );
    stored.updated_ms = now_ms();
    match co.store.update(&stored.decision.request_id, &stored, rev).await {
        Ok(Write::Done(_)) => {
            tracing::info!("complete: a queued decision withdrawn");
            crate::daemon::waiting::withdrawn(co, &stored.decision.request_id).await;
            Some(SubmitReply::stored(stored))
        }
        Ok(Write::Conflict) => None,
        Err(e) => Some(SubmitReply {
            stored: Some(stored),
            error: Some(Code::StoreUnavailable.error(e.to_string())),
            stored_record: None,
        }),
    }
}

/// What settling a decision left `planned` came to, for `complete`.
enum Settle {
    /// A cluster had committed it: `stored` now says so, stored at this revision.
    Committed(u64),
    /// The answer to give (nothing had committed, a commit is in doubt, or the store failed).
    Answer(Box<SubmitReply>),
    /// Another coordinator changed the decision meanwhile: read it again.
    Changed,
}

/// Settles the pending commit attempts of `stored` (revision `rev`), a decision its coordinator
/// left `planned`, committing nothing new ([`settle_pending`]), and stores the outcome:
/// `committed` on the cluster that committed it, or `failed` (with a `commit_failed` step
/// naming the settled attempts) when none did.
async fn settle_planned(co: &Coordinator, stored: &mut StoredDecision, rev: u64) -> Settle {
    let committed = match settle_pending(co, stored).await {
        Ok(c) => c,
        Err(doubt) => {
            tracing::warn!(code = %doubt.code, error = %doubt.message, "complete: a commit attempt is still in doubt");
            return Settle::Answer(Box::new(SubmitReply {
                stored: Some(stored.clone()),
                error: Some(doubt),
                stored_record: None,
            }));
        }
    };
    let failed = committed.is_none();
    match committed {
        Some(c) => {
            stored.state = DecisionState::Committed;
            stored.decision.chosen_cluster = Some(c);
        }
        None => {
            stored.state = DecisionState::Failed;
            stored.decision.chosen_cluster = None;
            let dropped = stored
                .attempts
                .iter()
                .map(|a| Rejection {
                    candidate: a.cluster.clone(),
                    reasons: vec![Code::CommitFailed.reason(
                        "its coordinator stopped before the outcome; settled by `complete`: it had not committed",
                    )],
                })
                .collect();
            stored.decision.choice.insert(
                0,
                ChoiceStep {
                    rule: rules::COMMIT_FAILED.into(),
                    kept: Vec::new(),
                    dropped,
                },
            );
        }
    }
    stored.updated_ms = now_ms();
    match co.store.update(&stored.decision.request_id, stored, rev).await {
        Ok(Write::Done(r)) if !failed => {
            tracing::info!(chosen = ?stored.decision.chosen_cluster, "complete: the decision left planned was committed; completing it");
            Settle::Committed(r)
        }
        Ok(Write::Done(_)) => {
            tracing::info!("complete: the decision left planned had committed nowhere: stored failed");
            crate::daemon::quota::release(co, &stored.decision.request_id, &stored.decision.quota).await;
            Settle::Answer(Box::new(SubmitReply {
                stored: Some(stored.clone()),
                error: Some(Code::NotCommitted.error(format!(
                    "decision `{}` was left planned by a coordinator that stopped; its commit attempts are settled and none had committed, so it is now failed and nothing needs completing",
                    stored.decision.request_id
                ))),
                stored_record: None,
            }))
        }
        Ok(Write::Conflict) => Settle::Changed,
        Err(e) => Settle::Answer(Box::new(SubmitReply {
            stored: Some(stored.clone()),
            error: Some(Code::StoreUnavailable.error(e.to_string())),
            stored_record: None,
        })),
    }
}
