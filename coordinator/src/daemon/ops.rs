//! The operations other than submit: complete, why_not, clusters, list, get, replay. Each
//! takes its decoded request and answers with its reply type; problems are errors in the reply
//! (codes in [`super::codec::codes`] or the agent's own), never a missing answer.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use fedvol_common::choice::choose_cluster;
use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision, Reason};
use fedvol_common::wire::{
    ClustersReply, DecisionRef, DecisionState, ListReply, PlanMsg, ReplayReply, SubmitReply, VERSION, WhyNotMsg,
    WhyNotQuery, WhyNotReply, now_ms, subject_token,
};

use super::Coordinator;
use super::codec::{codes, decode, to_bytes};
use super::commit::{ActionError, action};
use super::fanout::AgentAnswer;
use super::replay::compare_cluster;
use super::rpc::{RpcError, request};
use super::store::Write;
use super::submit::{error_reply, stored_reply};

/// `get`: the stored decision, or `not_found`.
pub async fn get(co: &Coordinator, q: &DecisionRef) -> SubmitReply {
    match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => stored_reply(s),
        Ok(None) => not_found(&q.request_id),
        Err(e) => error_reply(codes::STORE, e.to_string()),
    }
}

fn not_found(id: &str) -> SubmitReply {
    error_reply(
        codes::NOT_FOUND,
        format!("no decision is stored under request id `{id}`"),
    )
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
            Err(e) => return error_reply(codes::STORE, e.to_string()),
        };
        if stored.request.user != user {
            tracing::warn!(owner = %stored.request.user, "complete of another user's decision refused");
            return error_reply(
                codes::NOT_OWNER,
                format!(
                    "decision `{}` belongs to user `{}`: only they may complete it",
                    q.request_id, stored.request.user
                ),
            );
        }
        let cluster = match (stored.state, stored.decision.chosen_cluster.clone()) {
            (DecisionState::Completed, _) => return stored_reply(stored),
            (DecisionState::Committed, Some(c)) => c,
            (state, _) => {
                let why = match state {
                    DecisionState::Planned if stored.dry_run => "it is a dry run, which holds nothing",
                    DecisionState::Planned => "it is still being committed",
                    _ => "it failed, so nothing was committed",
                };
                return SubmitReply {
                    v: VERSION,
                    stored: Some(stored),
                    error: Some(Reason::new(
                        codes::NOT_COMMITTED,
                        format!("decision `{}` cannot be completed: {why}", q.request_id),
                    )),
                };
            }
        };
        let reply = match action(co, &cluster, "complete", &q.request_id, co.cfg.commit_timeout_ms).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "complete failed");
                return SubmitReply {
                    v: VERSION,
                    stored: Some(stored),
                    error: Some(e.reason()),
                };
            }
        };
        if !reply.ok {
            let err = reply
                .error
                .clone()
                .unwrap_or_else(|| Reason::new(codes::BAD_ANSWER, "complete refused without a reason"));
            tracing::warn!(cluster = %cluster, code = %err.code, "complete refused");
            return SubmitReply {
                v: VERSION,
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
                return stored_reply(stored);
            }
            // Changed meanwhile (another complete): read again; the agent answers a repeated
            // complete with its stored answer.
            Ok(Write::Conflict) => continue,
            Err(e) => {
                return SubmitReply {
                    v: VERSION,
                    stored: Some(stored),
                    error: Some(Reason::new(codes::STORE, e.to_string())),
                };
            }
        }
    }
    error_reply(codes::STORE, "the decision kept changing; try again")
}

fn why_not_error(cluster: &str, code: &str, message: String) -> WhyNotReply {
    WhyNotReply {
        v: VERSION,
        cluster: cluster.to_string(),
        blockers: Vec::new(),
        summary: message.clone(),
        error: Some(Reason::new(code, message)),
    }
}

/// `why_not`: asks the named cluster to explain, for the stored request, why a zone, host or
/// provisioner was not chosen; the agent's answer is returned as it is.
pub async fn why_not(co: &Coordinator, q: &WhyNotQuery) -> WhyNotReply {
    if subject_token(&q.cluster) != q.cluster {
        return why_not_error(
            &q.cluster,
            codes::BAD_REQUEST,
            format!("`{}` is not a cluster name", q.cluster),
        );
    }
    let stored = match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => s,
        Ok(None) => {
            return why_not_error(
                &q.cluster,
                codes::NOT_FOUND,
                format!("no decision is stored under request id `{}`", q.request_id),
            );
        }
        Err(e) => return why_not_error(&q.cluster, codes::STORE, e.to_string()),
    };
    let wait = co.cfg.deadline_ms.max(1000);
    let msg = WhyNotMsg {
        v: VERSION,
        request: stored.request,
        deadline_ms: now_ms() + wait,
        zone: q.zone.clone(),
        host: q.host.clone(),
        provisioner: q.provisioner.clone(),
    };
    let subject = co.subjects.cluster(&q.cluster, "why_not");
    match request(&co.client, &subject, to_bytes(&msg), Duration::from_millis(wait + 200)).await {
        Ok(body) => decode::<WhyNotReply>(&body, "why_not answer")
            .unwrap_or_else(|e| why_not_error(&q.cluster, codes::BAD_ANSWER, format!("{}: {e}", q.cluster))),
        Err(e) => {
            let code = match e {
                RpcError::NoResponders(_) => codes::UNREACHABLE,
                RpcError::TimedOut { .. } => codes::TIMED_OUT,
                RpcError::Nats { .. } => codes::NATS,
            };
            why_not_error(&q.cluster, code, e.to_string())
        }
    }
}

/// `clusters`: the registry, sorted by name.
pub fn clusters(co: &Coordinator) -> ClustersReply {
    ClustersReply {
        v: VERSION,
        clusters: co.registry().info(now_ms()),
        error: None,
    }
}

/// `list`: every stored decision's summary, newest first.
///
/// Errors: the store failed (a reason).
pub async fn list(co: &Coordinator) -> Result<ListReply, Reason> {
    co.store
        .list()
        .await
        .map(|decisions| ListReply {
            v: VERSION,
            decisions,
            error: None,
        })
        .map_err(|e| Reason::new(codes::STORE, e.to_string()))
}

fn replay_error(code: &str, message: String) -> ReplayReply {
    ReplayReply {
        v: VERSION,
        identical: false,
        differences: Vec::new(),
        replayed: None,
        error: Some(Reason::new(code, message)),
    }
}

/// Asks one cluster to plan `msg` (never holding) and returns its slot.
async fn replan(co: &Coordinator, cluster: &str, msg: &PlanMsg, wait: Duration) -> ClusterDecision {
    let started = std::time::Instant::now();
    let subject = co.subjects.cluster(cluster, "plan");
    let r = request(&co.client, &subject, to_bytes(msg), wait).await;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    match r {
        Ok(body) => match decode::<AgentAnswer>(&body, "plan answer") {
            Ok(a) => a.slot(elapsed),
            Err(e) => {
                ClusterDecision::without_answer(ClusterStatus::Error, elapsed, Some(Reason::new(codes::BAD_ANSWER, e)))
            }
        },
        Err(e) => {
            let status = match e {
                RpcError::TimedOut { .. } => ClusterStatus::TimedOut,
                _ => ClusterStatus::Unreachable,
            };
            let reason = ActionError::Rpc(e).reason();
            ClusterDecision::without_answer(status, elapsed, Some(reason))
        }
    }
}

/// `replay`: re-sends the stored request, with its stored seed, as a dry-run plan to each
/// cluster that answered it, and compares each answer's volumes and jobs with the stored ones
/// (never the measured times). `identical` is true when they all match; `differences` lists
/// every difference and every cluster whose inventory version changed since.
pub async fn replay(co: &Coordinator, q: &DecisionRef) -> ReplayReply {
    let stored = match co.store.get(&q.request_id).await {
        Ok(Some((s, _))) => s,
        Ok(None) => {
            return replay_error(
                codes::NOT_FOUND,
                format!("no decision is stored under request id `{}`", q.request_id),
            );
        }
        Err(e) => return replay_error(codes::STORE, e.to_string()),
    };
    let answered: Vec<String> = stored
        .decision
        .clusters
        .iter()
        .filter(|(_, d)| d.status == ClusterStatus::Answered)
        .map(|(n, _)| n.clone())
        .collect();
    if answered.is_empty() {
        return replay_error(
            codes::NOT_FOUND,
            format!("no cluster answered decision `{}`: nothing to replay", q.request_id),
        );
    }
    let wait = Duration::from_millis(co.cfg.deadline_ms);
    let msg = PlanMsg {
        v: VERSION,
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
    ReplayReply {
        v: VERSION,
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
        error: None,
    }
}
