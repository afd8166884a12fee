//! Committing a decision: `commit` on the chosen cluster (request/reply, fresh inbox, bounded
//! wait); if it fails (an error, the hold lapsed, no answer, nobody listening) the cluster is
//! dropped and the choice re-run over the rest ([`choose_cluster`] without it), up to
//! `commitAttempts` clusters. Every attempt is recorded; every other hold is released once
//! the outcome is known.
//!
//! A commit that times out is not assumed lost: the coordinator asks the agent to release the
//! hold, again and again for up to one more commit timeout ([`settle`]): "released" means it
//! did not commit and never will (a commit needs the hold); "committed" means it did, and the
//! commit is asked again for its stored outcome (agents answer a repeated request id with the
//! same answer); "commit in progress" or no answer means wait and ask again. When the outcome
//! is still unknown after that, the commit is **in doubt**: no other cluster is tried (the
//! agent may yet finish its commit, and committing elsewhere too would book the request
//! twice), the decision stays `planned`, and a later submit of the same request id settles it
//! (see `submit`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fedvol_common::choice::{choose_cluster, rules};
use fedvol_common::decision::{ChoiceStep, ClusterStatus, Rejection};
use fedvol_proto::agent::{self as agent, ActionMsg, ActionReply, AgentEndpoint};
use fedvol_proto::decisions::{CommitAttempt, DecisionState, StoredDecision};
use fedvol_proto::rpc::{RpcError, call};
use fedvol_proto::{Code, ProtoError, now_ms};

use super::Coordinator;

/// The longest wait for a release, ms.
pub const RELEASE_WAIT_MS: u64 = 5000;

/// Why an action (commit, release, complete) on a cluster did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// The request got no answer, or an unreadable one.
    #[error("{0}")]
    Rpc(#[from] RpcError),
    /// The agent refused.
    #[error("{0}")]
    Refused(ProtoError),
}

impl ActionError {
    /// The error with a stable code.
    pub fn error(&self) -> ProtoError {
        match self {
            ActionError::Rpc(RpcError::NoResponders(_)) => Code::Unreachable.error(self.to_string()),
            ActionError::Rpc(RpcError::TimedOut { .. }) => Code::TimedOut.error(self.to_string()),
            ActionError::Rpc(RpcError::BadAnswer { .. }) => Code::BadAnswer.error(self.to_string()),
            ActionError::Rpc(RpcError::Nats { .. } | RpcError::TooLarge { .. }) => {
                Code::NatsError.error(self.to_string())
            }
            ActionError::Refused(e) => e.clone(),
        }
    }
}

/// Sends action `E` (commit, release, complete) for `request_id` to `cluster` and waits up to
/// `wait_ms` for its [`ActionReply`]. The reply is returned whether or not `ok`; a failure body
/// (e.g. `bad_request`) comes back as a reply that is not `ok`.
///
/// Errors: no answer or an unreadable one ([`ActionError::Rpc`]).
pub async fn action<E>(
    co: &Coordinator,
    cluster: &str,
    request_id: &str,
    wait_ms: u64,
) -> Result<ActionReply, ActionError>
where
    E: AgentEndpoint<Request = ActionMsg, Reply = ActionReply>,
{
    let msg = ActionMsg {
        request_id: request_id.to_string(),
        deadline_ms: now_ms() + wait_ms,
    };
    let subject = co.subjects.cluster(cluster, E::OP);
    // A little longer than the agent's own deadline, so an answer sent at the deadline arrives.
    let wait = Duration::from_millis(wait_ms + 200);
    Ok(
        match call::<E>(&co.client, &subject, &msg, wait, "coordinator").await? {
            Ok(reply) => reply,
            Err(f) => ActionReply::refused(cluster, request_id, f.error),
        },
    )
}

/// Releases the hold of `request_id` on `cluster` (idempotent on the agent).
///
/// Errors: no answer, or the agent refused (e.g. `committed`).
pub async fn release(co: &Coordinator, cluster: &str, request_id: &str) -> Result<(), ActionError> {
    let wait = co.cfg.commit_timeout_ms.min(RELEASE_WAIT_MS);
    let r = action::<agent::Release>(co, cluster, request_id, wait).await?;
    if r.ok {
        Ok(())
    } else {
        Err(ActionError::Refused(r.error.unwrap_or_else(|| {
            Code::BadAnswer.error("release refused without a reason")
        })))
    }
}

/// What asking an agent about a commit it did not answer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The hold is released: the agent did not commit, and no longer can.
    Released,
    /// The agent committed.
    Committed,
    /// Still unknown when the probing window closed (the last thing heard, in words).
    Unknown(String),
}

/// Pause between two probes of a commit in progress, ms.
const PROBE_PAUSE_MS: u64 = 200;

/// How long [`settle`] keeps asking, ms: one more commit timeout.
pub fn settle_window_ms(co: &Coordinator) -> u64 {
    co.cfg.commit_timeout_ms
}

/// Asks `cluster` to release the hold of `request_id` until its answer settles what became of
/// a commit that was not answered in time: released, committed, or (after
/// [`settle_window_ms`] of commits in progress and unanswered probes) unknown.
pub async fn settle(co: &Coordinator, cluster: &str, request_id: &str) -> Settled {
    let end = tokio::time::Instant::now() + Duration::from_millis(settle_window_ms(co));
    loop {
        let last = match release(co, cluster, request_id).await {
            Ok(()) => return Settled::Released,
            Err(ActionError::Refused(r)) if r.is(&Code::Committed) => return Settled::Committed,
            Err(ActionError::Refused(r)) if r.is(&Code::CommitInProgress) => format!("{}: {}", r.code, r.message),
            Err(ActionError::Refused(r)) => return Settled::Unknown(format!("{}: {}", r.code, r.message)),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= end {
            return Settled::Unknown(last);
        }
        tokio::time::sleep(Duration::from_millis(PROBE_PAUSE_MS)).await;
    }
}

/// One commit attempt as recorded, and whether its outcome is in doubt (see the module docs).
#[derive(Debug, Clone)]
pub struct Tried {
    /// The attempt.
    pub attempt: CommitAttempt,
    /// The agent may still commit: no other cluster may be tried.
    pub in_doubt: bool,
}

/// Commits `request_id` on `cluster`, settling a timed-out commit through release probes
/// ([`settle`]). Returns the attempt as recorded.
pub async fn commit_on(co: &Coordinator, cluster: &str, request_id: &str) -> Tried {
    let wait = co.cfg.commit_timeout_ms;
    let attempt = |ok: bool, error: Option<ProtoError>, reply: Option<ActionReply>| Tried {
        attempt: CommitAttempt {
            cluster: cluster.to_string(),
            ok,
            error,
            volumes: reply.map(|r| r.volumes).unwrap_or_default(),
        },
        in_doubt: false,
    };
    match action::<agent::Commit>(co, cluster, request_id, wait).await {
        Ok(r) if r.ok => attempt(true, None, Some(r)),
        Ok(r) => {
            let reason = r
                .error
                .clone()
                .unwrap_or_else(|| Code::BadAnswer.error("commit refused without a reason"));
            tracing::warn!(cluster, code = %reason.code, error = %reason.message, "commit refused");
            if let Err(e) = release(co, cluster, request_id).await {
                tracing::debug!(cluster, error = %e, "release after a refused commit");
            }
            attempt(false, Some(reason), Some(r))
        }
        // Not answered, or answered unreadably (e.g. an answer too large for NATS): the agent
        // may have committed. Ask it until that is settled.
        Err(e @ ActionError::Rpc(RpcError::TimedOut { .. } | RpcError::BadAnswer { .. })) => {
            let what = match &e {
                ActionError::Rpc(RpcError::BadAnswer { .. }) => format!("the commit's answer was unreadable ({e})"),
                _ => format!("commit not answered within {wait} ms"),
            };
            tracing::warn!(cluster, wait_ms = wait, error = %e, "commit outcome unknown; asking the agent what happened");
            match settle(co, cluster, request_id).await {
                Settled::Released => attempt(
                    false,
                    Some(Code::TimedOut.error(format!("{what}; the hold was released"))),
                    None,
                ),
                Settled::Committed => match action::<agent::Commit>(co, cluster, request_id, wait).await {
                    Ok(r) if r.ok => attempt(true, None, Some(r)),
                    Ok(r) => attempt(false, r.error.clone(), Some(r)),
                    // The agent says it committed; only its answer (the volumes' outcomes) is
                    // missing.
                    Err(e) => attempt(
                        true,
                        Some(Code::BadAnswer.error(format!(
                            "committed (the agent says so), but its answer could not be had: {e}"
                        ))),
                        None,
                    ),
                },
                Settled::Unknown(why) => {
                    tracing::warn!(cluster, why = %why, "commit outcome in doubt: no other cluster is tried");
                    let mut t = attempt(false, Some(in_doubt_reason(&what, &why)), None);
                    t.in_doubt = true;
                    t
                }
            }
        }
        Err(e) => {
            tracing::warn!(cluster, error = %e, "commit failed");
            attempt(false, Some(e.error()), None)
        }
    }
}

/// The reason of an in-doubt commit: `what` happened to the commit, `why` it is still unknown.
fn in_doubt_reason(what: &str, why: &str) -> ProtoError {
    Code::CommitOutcomeUnknown.error(format!(
        "{what}, and its outcome is still unknown ({why}); no other cluster was tried, so the request cannot be booked twice: submit the same request id again to settle it"
    ))
}

/// Runs the commit phase on a planned, non-dry-run decision: tries the chosen cluster, then
/// the next in the ranking, up to `commitAttempts` clusters; records each attempt; releases
/// every cluster in `held` that did not commit. Sets the state to `committed` (with
/// `chosen_cluster` the cluster that committed) or `failed` (with `chosen_cluster` null), and
/// prepends a `commit_failed` step to the decision's choice when a cluster was dropped.
///
/// Returns the reason when a commit is in doubt ([`commit_on`]): the decision is then left
/// `planned` with `chosen_cluster` the cluster in doubt (its hold is kept, every other one is
/// released), and must not be stored as an outcome.
pub async fn commit_phase(
    co: &Arc<Coordinator>,
    stored: &mut StoredDecision,
    held: &BTreeSet<String>,
) -> Option<ProtoError> {
    let id = stored.decision.request_id.clone();
    let seed = stored.decision.seed;
    let mut candidates = stored.decision.clusters.clone();
    let mut chosen = stored.decision.chosen_cluster.clone();
    let mut failed: Vec<Rejection> = Vec::new();
    let mut committed: Option<String> = None;
    let mut steps: Vec<ChoiceStep> = stored.decision.choice.clone();
    while let Some(c) = chosen.clone() {
        if stored.attempts.len() >= co.cfg.commit_attempts as usize {
            steps.push(ChoiceStep {
                rule: rules::COMMIT_ATTEMPTS.into(),
                kept: Vec::new(),
                dropped: vec![Rejection {
                    candidate: c.clone(),
                    reasons: vec![Code::CommitAttemptsExhausted.reason(format!(
                        "not tried: {} commit attempts were used up",
                        co.cfg.commit_attempts
                    ))],
                }],
            });
            break;
        }
        let Tried { attempt: a, in_doubt } = commit_on(co, &c, &id).await;
        tracing::info!(cluster = %c, ok = a.ok, in_doubt, attempt = stored.attempts.len() + 1, "commit attempt");
        let ok = a.ok;
        let error = a.error.clone();
        stored.attempts.push(a);
        if in_doubt {
            let reason = error.unwrap_or_else(|| in_doubt_reason("the commit was not answered", "no answer"));
            stored.decision.chosen_cluster = Some(c.clone());
            stored.state = DecisionState::Planned;
            let others: Vec<String> = held.iter().filter(|h| **h != c).cloned().collect();
            release_all(co, &id, &others).await;
            return Some(reason);
        }
        if ok {
            committed = Some(c);
            break;
        }
        failed.push(Rejection {
            candidate: c.clone(),
            reasons: vec![Code::CommitFailed.reason(match error {
                Some(e) => format!("commit failed: {}: {}", e.code, e.message),
                None => "commit failed".to_string(),
            })],
        });
        candidates.shift_remove(&c);
        let (next, s) = choose_cluster(&stored.request.workflow, &candidates, seed);
        chosen = next;
        steps = s;
    }
    if !failed.is_empty() {
        let kept = candidates
            .iter()
            .filter(|(_, d)| d.status == ClusterStatus::Answered)
            .map(|(n, _)| n.clone())
            .collect();
        steps.insert(
            0,
            ChoiceStep {
                rule: rules::COMMIT_FAILED.into(),
                kept,
                dropped: failed,
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
    let tried: BTreeSet<&str> = stored.attempts.iter().map(|a| a.cluster.as_str()).collect();
    let to_release: Vec<String> = held
        .iter()
        .filter(|c| Some(c.as_str()) != committed.as_deref() && !tried.contains(c.as_str()))
        .cloned()
        .collect();
    release_all(co, &id, &to_release).await;
    None
}

/// Releases the holds of `request_id` on every cluster in `clusters`, concurrently, logging
/// failures (a hold that cannot be released lapses at its TTL).
pub async fn release_all(co: &Arc<Coordinator>, request_id: &str, clusters: &[String]) {
    let jobs = clusters
        .iter()
        .map(|c| async move { (c, release(co, c, request_id).await) });
    for (c, r) in futures::future::join_all(jobs).await {
        match r {
            Ok(()) => tracing::info!(cluster = %c, "hold released"),
            Err(e) => tracing::warn!(cluster = %c, error = %e, "hold not released; it lapses at its TTL"),
        }
    }
}
