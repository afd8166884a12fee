//! The operations other than submit: complete, why_not, clusters, list, get, replay. Each
//! takes its decoded request and answers with its reply type or a [`Failure`] (codes of
//! [`fedvol_proto::Code`], or the agent's own), never a missing answer.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use fedvol_common::choice::{choose_cluster, rules};
use fedvol_common::decision::{ChoiceStep, ClusterDecision, ClusterStatus, Decision, Rejection};
use fedvol_common::limits::printable;
use fedvol_proto::agent::{self as agent, AgentOp, PlanMsg, WhyNotMsg, WhyNotReply};
use fedvol_proto::coordinator::{ClustersReply, DecisionRef, ReplayReply, SubmitReply, WhyNotQuery};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::rpc::{RpcError, call, request};
use fedvol_proto::{Code, Endpoint, Failure, now_ms, subject_token};

use super::Coordinator;
use super::commit::{ActionError, action, settle_pending};
use super::lifecycle::commit_phase_bound_ms;
use super::replay::compare_cluster;
use super::replies::AgentAnswer;
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

/// `not_found` for request id `id` (user input, shown escaped: it may hold ESC, CR, LF).
fn not_found(id: &str) -> SubmitReply {
    error_reply(
        Code::NotFound,
        format!("no decision is stored under request id `{}`", printable(id)),
    )
}

/// How often `complete` looks again at a decision another coordinator is committing, ms.
const POLL_MS: u64 = 100;

/// `complete`: sends `complete` to the decision's cluster (which frees its allocations and
/// reclaims its volumes) and stores the decision as `completed` with the agent's answer.
/// Completing a completed decision returns it unchanged; a dry run or a failed decision is
/// refused (`not_committed`); an agent's refusal comes back as the error, with the decision
/// unchanged. Only the decision's owner (the user who submitted it) may complete it: anyone
/// else gets `not_owner` and nothing changes.
///
/// A decision still `planned` is waited for while a live coordinator may be
/// committing it (up to the commit phase's bound, [`commit_phase_bound_ms`]); past that bound
/// its coordinator is taken to be gone and the decision is settled here, as a take-over does
/// but committing nothing new ([`settle_planned`]): a cluster that committed it is recorded and
/// completed; when none did, the decision is stored `failed` and the answer says nothing was
/// committed (`not_committed`); a commit still in doubt is the error, the decision unchanged.
pub async fn complete(co: &Arc<Coordinator>, q: &DecisionRef, user: &str) -> SubmitReply {
    let bound = commit_phase_bound_ms(co);
    let give_up = tokio::time::Instant::now() + Duration::from_millis(bound.saturating_mul(2));
    let answer_by = tokio::time::Instant::now() + Duration::from_millis(super::lifecycle::ANSWER_WITHIN_MS);
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
                    return super::lifecycle::still_settling(co, stored, age);
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
                super::quota::release(co, &q.request_id, &stored.decision.quota).await;
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
                };
            }
        }
    }
    error_reply(Code::StoreUnavailable, "the decision kept changing; try again")
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
            super::waiting::withdrawn(co, &stored.decision.request_id).await;
            Some(SubmitReply::stored(stored))
        }
        Ok(Write::Conflict) => None,
        Err(e) => Some(SubmitReply {
            stored: Some(stored),
            error: Some(Code::StoreUnavailable.error(e.to_string())),
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
            super::quota::release(co, &stored.decision.request_id, &stored.decision.quota).await;
            Settle::Answer(Box::new(SubmitReply {
                stored: Some(stored.clone()),
                error: Some(Code::NotCommitted.error(format!(
                    "decision `{}` was left planned by a coordinator that stopped; its commit attempts are settled and none had committed, so it is now failed and nothing needs completing",
                    stored.decision.request_id
                ))),
            }))
        }
        Ok(Write::Conflict) => Settle::Changed,
        Err(e) => Settle::Answer(Box::new(SubmitReply {
            stored: Some(stored.clone()),
            error: Some(Code::StoreUnavailable.error(e.to_string())),
        })),
    }
}

/// `why_not` (from the record first): what the stored decision says of the named
/// zone, host or provisioner in the named cluster (its stored trace, whether it was chosen, how
/// the cluster fared in the cluster choice: [`fedvol_common::funnel::why_not::from_record`]),
/// with the cluster's agent's re-plan on today's inventory and state beside it, and the
/// inventory version it re-planned on, so that the reader sees whether today's answer can
/// still be the decision's.
///
/// Errors: `bad_request` for a cluster name that is no subject token; `not_found` for an
/// unknown request id, a cluster that took no part in the decision (naming those that did), or
/// a name the cluster does not have (the agent's answer). An agent that cannot be asked is not
/// an error: the record is answered alone, with a summary saying why there is no re-plan.
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
                format!("no decision is stored under request id `{}`", printable(&q.request_id)),
            ));
        }
        Err(e) => return Err(fail(Code::StoreUnavailable, e.to_string())),
    };
    if !stored.decision.clusters.contains_key(&q.cluster) {
        let took_part: Vec<&str> = stored.decision.clusters.keys().map(String::as_str).collect();
        return Err(fail(
            Code::NotFound,
            format!(
                "cluster `{}` took no part in decision `{}` (clusters: {})",
                q.cluster,
                q.request_id,
                took_part.join(", ")
            ),
        ));
    }
    let target = fedvol_common::funnel::why_not::Target {
        zone: q.zone.clone(),
        host: q.host.clone(),
        provisioner: q.provisioner.clone(),
    };
    let record = fedvol_common::funnel::why_not::from_record(&stored.decision, &q.cluster, &target);
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
        Ok(Ok(mut today)) => {
            today.record = Some(record);
            Ok(today)
        }
        Ok(Err(f)) => Err(f),
        Err(e) => Ok(WhyNotReply {
            cluster: q.cluster.clone(),
            blockers: Vec::new(),
            summary: format!("no re-plan today: the cluster's agent could not be asked ({e})"),
            inventory_version: None,
            record: Some(record),
        }),
    }
}

/// `cluster`: one cluster in detail (`fedvol clusters show`): its registry entry and its
/// agent's effective inventory and status, asked of the agent on `cluster.<c>.inventory`.
///
/// Errors: `bad_request` for a name that is no subject token; `not_found` for a cluster the
/// registry does not know (naming those it knows); `unreachable`/`timed_out`/`bad_answer`/
/// `nats_error` when the agent cannot be asked; the agent's own failure as it is.
pub async fn cluster(
    co: &Coordinator,
    q: &fedvol_proto::coordinator::ClusterRef,
) -> Result<fedvol_proto::coordinator::ClusterReply, Failure> {
    let fail = |code: Code, message: String| Failure::new(code, message).from_cluster(&q.cluster);
    if subject_token(&q.cluster) != q.cluster {
        return Err(fail(Code::BadRequest, format!("`{}` is not a cluster name", q.cluster)));
    }
    let known = clusters(co).clusters;
    let Some(info) = known.iter().find(|c| c.name == q.cluster).cloned() else {
        let names: Vec<&str> = known.iter().map(|c| c.name.as_str()).collect();
        return Err(fail(
            Code::NotFound,
            format!(
                "no cluster named `{}` is known (known: {})",
                q.cluster,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ));
    };
    let wait = co.cfg.deadline_ms.max(1000);
    let subject = co.subjects.cluster(&q.cluster, AgentOp::Inventory);
    match call::<agent::Inventory>(
        &co.client,
        &subject,
        &fedvol_proto::NoArgs {},
        Duration::from_millis(wait),
        "coordinator",
    )
    .await
    {
        Ok(Ok(agent)) => Ok(fedvol_proto::coordinator::ClusterReply { info, agent }),
        Ok(Err(f)) => Err(f),
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

/// `clusters`: the registry, sorted by name, without the clusters not heard from for
/// `forgetClusterAfterMs` (forgotten now).
pub fn clusters(co: &Coordinator) -> ClustersReply {
    let now = now_ms();
    let mut reg = co.registry();
    for (name, seen_ms) in reg.forget_silent(now, co.cfg.forget_cluster_after_ms) {
        tracing::warn!(cluster = %name, silent_ms = now.saturating_sub(seen_ms), "cluster forgotten: not heard from for longer than forgetClusterAfterMs");
    }
    ClustersReply {
        clusters: reg.info(now),
    }
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
                format!("no decision is stored under request id `{}`", printable(&q.request_id)),
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
    let (chosen, choice) = choose_cluster(&stored.request, &clusters, stored.decision.seed);
    differences.extend(notes);
    Ok(ReplayReply {
        identical,
        differences,
        replayed: Some(Decision {
            quota: Vec::new(),
            refused: None,
            request_id: stored.decision.request_id.clone(),
            workflow: stored.decision.workflow.clone(),
            seed: stored.decision.seed,
            chosen_cluster: chosen,
            clusters,
            choice,
        }),
    })
}
