//! Committing a decision: `commit` on the chosen cluster (request/reply, fresh inbox, bounded
//! wait); if it fails (an error, the hold lapsed, no answer, nobody listening) the cluster is
//! dropped and the choice re-run over the rest ([`choose_cluster`] without it), up to
//! `commitAttempts` clusters. Every attempt is recorded; every other hold is released once
//! the outcome is known.
//!
//! A commit that times out is not assumed lost: the coordinator asks the agent to release the
//! hold; an agent that answers "committed" did commit, and the commit is asked again for its
//! stored outcome (agents answer a repeated request id with the same answer).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fedvol_common::choice::choose_cluster;
use fedvol_common::decision::{ChoiceStep, ClusterStatus, Reason, Rejection};
use fedvol_common::wire::{ActionMsg, ActionReply, CommitAttempt, DecisionState, StoredDecision, VERSION, now_ms};

use super::Coordinator;
use super::codec::{codes, decode, to_bytes};
use super::rpc::{RpcError, request};

/// The longest wait for a release, ms.
pub const RELEASE_WAIT_MS: u64 = 5000;

/// Why an action (commit, release, complete) on a cluster did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// The request got no answer.
    #[error("{0}")]
    Rpc(#[from] RpcError),
    /// The agent's answer could not be read.
    #[error("unreadable answer from {cluster}: {message}")]
    BadAnswer {
        /// The cluster.
        cluster: String,
        /// The decoding error.
        message: String,
    },
    /// The agent refused.
    #[error("{}: {}", .0.code, .0.message)]
    Refused(Reason),
}

impl ActionError {
    /// The error as a reason with a stable code.
    pub fn reason(&self) -> Reason {
        match self {
            ActionError::Rpc(RpcError::NoResponders(_)) => Reason::new(codes::UNREACHABLE, self.to_string()),
            ActionError::Rpc(RpcError::TimedOut { .. }) => Reason::new(codes::TIMED_OUT, self.to_string()),
            ActionError::Rpc(RpcError::Nats { .. }) => Reason::new(codes::NATS, self.to_string()),
            ActionError::BadAnswer { .. } => Reason::new(codes::BAD_ANSWER, self.to_string()),
            ActionError::Refused(r) => r.clone(),
        }
    }
}

/// Sends `op` (commit, release, complete) for `request_id` to `cluster` and waits up to
/// `wait_ms` for its [`ActionReply`]. The reply is returned whether or not `ok`.
///
/// Errors: no answer or an unreadable one ([`ActionError`]).
pub async fn action(
    co: &Coordinator,
    cluster: &str,
    op: &str,
    request_id: &str,
    wait_ms: u64,
) -> Result<ActionReply, ActionError> {
    let msg = ActionMsg {
        v: VERSION,
        request_id: request_id.to_string(),
        deadline_ms: now_ms() + wait_ms,
    };
    let subject = co.subjects.cluster(cluster, op);
    // A little longer than the agent's own deadline, so an answer sent at the deadline arrives.
    let body = request(
        &co.client,
        &subject,
        to_bytes(&msg),
        Duration::from_millis(wait_ms + 200),
    )
    .await?;
    let reply: ActionReply = decode(&body, op).map_err(|message| ActionError::BadAnswer {
        cluster: cluster.to_string(),
        message,
    })?;
    Ok(reply)
}

/// Releases the hold of `request_id` on `cluster` (idempotent on the agent).
///
/// Errors: no answer, or the agent refused (e.g. `committed`).
pub async fn release(co: &Coordinator, cluster: &str, request_id: &str) -> Result<(), ActionError> {
    let wait = co.cfg.commit_timeout_ms.min(RELEASE_WAIT_MS);
    let r = action(co, cluster, "release", request_id, wait).await?;
    if r.ok {
        Ok(())
    } else {
        Err(ActionError::Refused(r.error.unwrap_or_else(|| {
            Reason::new(codes::BAD_ANSWER, "release refused without a reason")
        })))
    }
}

/// Commits `request_id` on `cluster`, resolving a timed-out commit through a release probe.
/// Returns the attempt as recorded.
pub async fn commit_on(co: &Coordinator, cluster: &str, request_id: &str) -> CommitAttempt {
    let wait = co.cfg.commit_timeout_ms;
    let attempt = |ok: bool, error: Option<Reason>, reply: Option<ActionReply>| CommitAttempt {
        cluster: cluster.to_string(),
        ok,
        error,
        volumes: reply.map(|r| r.volumes).unwrap_or_default(),
    };
    match action(co, cluster, "commit", request_id, wait).await {
        Ok(r) if r.ok => attempt(true, None, Some(r)),
        Ok(r) => {
            let reason = r
                .error
                .clone()
                .unwrap_or_else(|| Reason::new(codes::BAD_ANSWER, "commit refused without a reason"));
            tracing::warn!(cluster, code = %reason.code, error = %reason.message, "commit refused");
            if let Err(e) = release(co, cluster, request_id).await {
                tracing::debug!(cluster, error = %e, "release after a refused commit");
            }
            attempt(false, Some(reason), Some(r))
        }
        Err(ActionError::Rpc(RpcError::TimedOut { .. })) => {
            tracing::warn!(
                cluster,
                wait_ms = wait,
                "commit timed out; asking the agent what happened"
            );
            match release(co, cluster, request_id).await {
                Ok(()) => attempt(
                    false,
                    Some(Reason::new(
                        codes::TIMED_OUT,
                        format!("commit not answered within {wait} ms; the hold was released"),
                    )),
                    None,
                ),
                Err(ActionError::Refused(r)) if r.code == "committed" => {
                    match action(co, cluster, "commit", request_id, wait).await {
                        Ok(r) if r.ok => attempt(true, None, Some(r)),
                        Ok(r) => attempt(false, r.error.clone(), Some(r)),
                        Err(e) => attempt(false, Some(e.reason()), None),
                    }
                }
                Err(e) => attempt(
                    false,
                    Some(Reason::new(
                        codes::TIMED_OUT,
                        format!("commit not answered within {wait} ms; outcome unknown ({e})"),
                    )),
                    None,
                ),
            }
        }
        Err(e) => {
            tracing::warn!(cluster, error = %e, "commit failed");
            attempt(false, Some(e.reason()), None)
        }
    }
}

/// Runs the commit phase on a planned, non-dry-run decision: tries the chosen cluster, then
/// the next in the ranking, up to `commitAttempts` clusters; records each attempt; releases
/// every cluster in `held` that did not commit. Sets the state to `committed` (with
/// `chosen_cluster` the cluster that committed) or `failed` (with `chosen_cluster` null), and
/// prepends a `commit_failed` step to the decision's choice when a cluster was dropped.
pub async fn commit_phase(co: &Arc<Coordinator>, stored: &mut StoredDecision, held: &BTreeSet<String>) {
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
                rule: "commit_attempts".into(),
                kept: Vec::new(),
                dropped: vec![Rejection {
                    candidate: c.clone(),
                    reasons: vec![Reason::new(
                        codes::ATTEMPTS_EXHAUSTED,
                        format!("not tried: {} commit attempts were used up", co.cfg.commit_attempts),
                    )],
                }],
            });
            break;
        }
        let a = commit_on(co, &c, &id).await;
        tracing::info!(cluster = %c, ok = a.ok, attempt = stored.attempts.len() + 1, "commit attempt");
        let ok = a.ok;
        let error = a.error.clone();
        stored.attempts.push(a);
        if ok {
            committed = Some(c);
            break;
        }
        failed.push(Rejection {
            candidate: c.clone(),
            reasons: vec![Reason::new(
                codes::COMMIT_FAILED,
                match error {
                    Some(e) => format!("commit failed: {}: {}", e.code, e.message),
                    None => "commit failed".to_string(),
                },
            )],
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
                rule: "commit_failed".into(),
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
