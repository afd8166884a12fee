//! The actions the coordinator sends an agent about one request (`commit`, `release`,
//! `complete`, [`action`] and [`send`]), with their errors as stable codes ([`ActionError`]),
//! and [`settle`]: what became of a commit that was not answered in time, asked by release
//! probes (docs/design.md §5). Below the commit phase ([`super::commit`]) and the operations
//! that complete and follow decisions.

use std::time::Duration;

use fedvol_proto::agent::{self as agent, ActionMsg, ActionReply, AgentEndpoint};
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
    send::<E>(co, cluster, ActionMsg::new(request_id, now_ms() + wait_ms), wait_ms).await
}

/// Sends `msg` (its deadline `wait_ms` from now) as action `E` to `cluster`; see [`action`].
///
/// Errors: no answer or an unreadable one ([`ActionError::Rpc`]).
pub async fn send<E>(co: &Coordinator, cluster: &str, msg: ActionMsg, wait_ms: u64) -> Result<ActionReply, ActionError>
where
    E: AgentEndpoint<Request = ActionMsg, Reply = ActionReply>,
{
    let subject = co.subjects.cluster(cluster, E::OP);
    let request_id = msg.request_id.clone();
    // A little longer than the agent's own deadline, so an answer sent at the deadline arrives.
    let wait = Duration::from_millis(wait_ms + 200);
    Ok(
        match call::<E>(&co.client, &subject, &msg, wait, "coordinator").await? {
            Ok(reply) => reply,
            Err(f) => ActionReply::refused(cluster, &request_id, f.error),
        },
    )
}

/// Releases the hold of `request_id` on `cluster` and fences its attempts up to `attempt`
/// (idempotent on the agent).
///
/// Errors: no answer, or the agent refused (e.g. `committed`).
pub async fn release(co: &Coordinator, cluster: &str, request_id: &str, attempt: u32) -> Result<(), ActionError> {
    let wait = co.cfg.commit_timeout_ms.min(RELEASE_WAIT_MS);
    let msg = ActionMsg {
        attempt,
        ..ActionMsg::new(request_id, now_ms() + wait)
    };
    let r = send::<agent::Release>(co, cluster, msg, wait).await?;
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

/// Asks `cluster` to release attempt `attempt` of `request_id` until its answer settles what
/// became of a commit that was not answered in time: released (and fenced: it never commits),
/// committed, or (after [`settle_window_ms`] of commits in progress and unanswered probes)
/// unknown.
pub async fn settle(co: &Coordinator, cluster: &str, request_id: &str, attempt: u32) -> Settled {
    let end = tokio::time::Instant::now() + Duration::from_millis(settle_window_ms(co));
    loop {
        let last = match release(co, cluster, request_id, attempt).await {
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
