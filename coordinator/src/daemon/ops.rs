//! The operations other than submit: complete, why_not, clusters, list, get, replay. Each
//! takes its decoded request and answers with its reply type or a [`Failure`] (codes of
//! [`fedvol_proto::Code`], or the agent's own), never a missing answer.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use fedvol_common::choice::choose_cluster;
use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision};
use fedvol_proto::agent::{self as agent, AgentOp, PlanMsg, WhyNotMsg, WhyNotReply};
use fedvol_proto::coordinator::{ClustersReply, DecisionRef, ListReply, ReplayReply, SubmitReply, WhyNotQuery};
use fedvol_proto::decisions::DecisionState;
use fedvol_proto::rpc::{RpcError, call, request};
use fedvol_proto::{Code, Endpoint, Failure, now_ms, subject_token};

use super::Coordinator;
use super::commit::{ActionError, action};
use super::fanout::AgentAnswer;
use super::replay::compare_cluster;
use super::store::Write;

/// A submit-shaped reply with an error only.
fn error_reply(code: Code, message: impl Into<String>) -> SubmitReply {
    SubmitReply::error(code.error(message))
}

/// `get`: the stored decision, or `not_found`.
pub async fn get(co: &Coordinator, q: &DecisionRef) -> SubmitReply {
    match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => SubmitReply::stored(s),
        Ok(None) => not_found(&q.request_id),
        Err(e) => error_reply(Code::StoreUnavailable, e.to_string()),
    }
}

fn not_found(id: &str) -> SubmitReply {
    error_reply(Code::NotFound, format!("no decision is stored under request id `{id}`"))
}

/// `complete`: sends `complete` to the decision's cluster (which frees its allocations and
/// reclaims its volumes) and stores the decision as `completed` with the agent's answer.
/// Completing a completed decision returns it unchanged; a decision that is not committed is
/// refused (`not_committed`); an agent's refusal comes back as the error, with the decision
/// unchanged. Only the decision's owner (the user who submitted it) may complete it: anyone
/// else gets `not_owner` and nothing changes.
pub async fn complete(co: &Arc<Coordinator>, q: &DecisionRef, user: &str) -> SubmitReply {
    for _ in 0..3 {
        let (mut stored, rev) = match co.store.get(&q.request_id).await {
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
        let cluster = match (stored.state, stored.decision.chosen_cluster.clone()) {
            (DecisionState::Completed, _) => return SubmitReply::stored(stored),
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
                };
            }
        };
        let reply = match action::<agent::Complete>(co, &cluster, &q.request_id, co.cfg.commit_timeout_ms).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "complete failed");
                return SubmitReply {
                    stored: Some(stored),
                    error: Some(e.error()),
                };
            }
        };
        if !reply.ok {
            let err = reply
                .error
                .clone()
                .unwrap_or_else(|| Code::BadAnswer.error("complete refused without a reason"));
            tracing::warn!(cluster = %cluster, code = %err.code, "complete refused");
            return SubmitReply {
                stored: Some(stored),
                error: Some(err),
            };
        }
        stored.state = DecisionState::Completed;
        stored.completion = Some(reply);
        stored.updated_ms = now_ms();
        match co.store.update(&q.request_id, &stored, rev).await {
            Ok(Write::Done(_)) => {
                tracing::info!(cluster = %cluster, "decision completed");
                return SubmitReply::stored(stored);
            }
            // Changed meanwhile (another complete): read again; the agent answers a repeated
            // complete with its stored answer.
            Ok(Write::Conflict) => continue,
            Err(e) => {
                return SubmitReply {
                    stored: Some(stored),
                    error: Some(Code::StoreUnavailable.error(e.to_string())),
                };
            }
        }
    }
    error_reply(Code::StoreUnavailable, "the decision kept changing; try again")
}

/// `why_not`: asks the named cluster to explain, for the stored request, why a zone, host or
/// provisioner was not chosen; the agent's answer (or failure) is returned as it is.
pub async fn why_not(co: &Coordinator, q: &WhyNotQuery) -> Result<WhyNotReply, Failure> {
    let fail = |code: Code, message: String| Failure::new(code, message).from_cluster(&q.cluster);
    if subject_token(&q.cluster) != q.cluster {
        return Err(fail(Code::BadRequest, format!("`{}` is not a cluster name", q.cluster)));
    }
    let stored = match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => s,
        Ok(None) => {
            return Err(fail(
                Code::NotFound,
                format!("no decision is stored under request id `{}`", q.request_id),
            ));
        }
        Err(e) => return Err(fail(Code::StoreUnavailable, e.to_string())),
    };
    let wait = co.cfg.deadline_ms.max(1000);
    let msg = WhyNotMsg {
        request: stored.request,
        deadline_ms: now_ms() + wait,
        zone: q.zone.clone(),
        host: q.host.clone(),
        provisioner: q.provisioner.clone(),
    };
    let subject = co.subjects.cluster(&q.cluster, AgentOp::WhyNot);
    match call::<agent::WhyNot>(
        &co.client,
        &subject,
        &msg,
        Duration::from_millis(wait + 200),
        "coordinator",
    )
    .await
    {
        Ok(answer) => answer,
        Err(e) => {
            let code = match e {
                RpcError::NoResponders(_) => Code::Unreachable,
                RpcError::TimedOut { .. } => Code::TimedOut,
                RpcError::BadAnswer { .. } => Code::BadAnswer,
                RpcError::Nats { .. } | RpcError::TooLarge { .. } => Code::NatsError,
            };
            Err(fail(code, e.to_string()))
        }
    }
}

/// `clusters`: the registry, sorted by name.
pub fn clusters(co: &Coordinator) -> ClustersReply {
    ClustersReply {
        clusters: co.registry().info(now_ms()),
    }
}

/// `list`: every stored decision's summary, newest first.
///
/// Errors: the store failed (`store_unavailable`).
pub async fn list(co: &Coordinator) -> Result<ListReply, Failure> {
    co.store
        .list()
        .await
        .map(|decisions| ListReply { decisions })
        .map_err(|e| Failure::new(Code::StoreUnavailable, e.to_string()))
}

/// Asks one cluster to plan `msg` (never holding) and returns its slot.
async fn replan(co: &Coordinator, cluster: &str, msg: &PlanMsg, wait: Duration) -> ClusterDecision {
    let started = std::time::Instant::now();
    let subject = co.subjects.cluster(cluster, AgentOp::Plan);
    let r = request(&co.client, &subject, agent::Plan::encode_request(msg), wait).await;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    match r {
        Ok(body) => match AgentAnswer::decode(&body) {
            Ok(a) => a.slot(elapsed),
            Err(e) => ClusterDecision::without_answer(
                ClusterStatus::Error,
                elapsed,
                Some(Code::BadAnswer.reason(format!("plan answer: {e}"))),
            ),
        },
        Err(e) => {
            let status = match e {
                RpcError::TimedOut { .. } => ClusterStatus::TimedOut,
                _ => ClusterStatus::Unreachable,
            };
            let reason = ActionError::Rpc(e).error();
            ClusterDecision::without_answer(status, elapsed, Some(reason.into()))
        }
    }
}

/// `replay`: re-sends the stored request, with its stored seed, as a dry-run plan to each
/// cluster that answered it, and compares each answer's volumes and jobs with the stored ones
/// (never the measured times). `identical` is true when they all match; `differences` lists
/// every difference and every cluster whose inventory version changed since.
///
/// Errors: no such decision, nothing to replay, or the store failed.
pub async fn replay(co: &Coordinator, q: &DecisionRef) -> Result<ReplayReply, Failure> {
    let stored = match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => s,
        Ok(None) => {
            return Err(Failure::new(
                Code::NotFound,
                format!("no decision is stored under request id `{}`", q.request_id),
            ));
        }
        Err(e) => return Err(Failure::new(Code::StoreUnavailable, e.to_string())),
    };
    let answered: Vec<String> = stored
        .decision
        .clusters
        .iter()
        .filter(|(_, d)| d.status == ClusterStatus::Answered)
        .map(|(n, _)| n.clone())
        .collect();
    if answered.is_empty() {
        return Err(Failure::new(
            Code::NotFound,
            format!("no cluster answered decision `{}`: nothing to replay", q.request_id),
        ));
    }
    let wait = Duration::from_millis(co.cfg.deadline_ms);
    let msg = PlanMsg {
        request: stored.request.clone(),
        deadline_ms: now_ms() + co.cfg.deadline_ms,
        reserve: false,
        ttl_ms: 0,
    };
    let answers = futures::future::join_all(answered.iter().map(|c| replan(co, c, &msg, wait))).await;
    let mut clusters: IndexMap<String, ClusterDecision> = IndexMap::new();
    let mut differences = Vec::new();
    let mut notes = Vec::new();
    for (name, replayed) in answered.iter().zip(answers) {
        if let Some(old) = stored.decision.clusters.get(name) {
            let d = compare_cluster(name, old, &replayed);
            differences.extend(d.differences);
            notes.extend(d.notes);
        }
        clusters.insert(name.clone(), replayed);
    }
    let identical = differences.is_empty();
    tracing::info!(identical, differences = differences.len(), "replayed");
    let (chosen, choice) = choose_cluster(&stored.request.workflow, &clusters, stored.decision.seed);
    differences.extend(notes);
    Ok(ReplayReply {
        identical,
        differences,
        replayed: Some(Decision {
            request_id: stored.decision.request_id.clone(),
            workflow: stored.decision.workflow.clone(),
            seed: stored.decision.seed,
            chosen_cluster: chosen,
            clusters,
            choice,
        }),
    })
}
