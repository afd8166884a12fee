//! `replay`: a stored decision planned again with its seed on the clusters that answered, every
//! difference listed.

use std::time::Duration;

use fedvol_common::choice::choose_cluster_drained;
use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision};
use fedvol_common::limits::printable;
use fedvol_proto::agent::{self as agent, AgentOp, PlanMsg};
use fedvol_proto::coordinator::{DecisionRef, ReplayReply};
use fedvol_proto::rpc::{RpcError, request};
use fedvol_proto::{Code, Endpoint, Failure, now_ms};
use indexmap::IndexMap;

use crate::daemon::Coordinator;
use crate::daemon::actions::ActionError;
use crate::daemon::replay::compare_cluster;
use crate::daemon::replies::AgentAnswer;

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
        summary: false,
        // A replay only compares: nothing is committed after it.
        dry_run: true,
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
    // Ranked with the drains the decision was planned under, as its first run was.
    let (chosen, choice) = choose_cluster_drained(
        &stored.request,
        &clusters,
        stored.decision.seed,
        &stored.decision.drained,
    );
    differences.extend(notes);
    Ok(ReplayReply {
        identical,
        differences,
        replayed: Some(Decision {
            quota: Vec::new(),
            refused: None,
            drained: stored.decision.drained.clone(),
            request_id: stored.decision.request_id.clone(),
            workflow: stored.decision.workflow.clone(),
            seed: stored.decision.seed,
            chosen_cluster: chosen,
            clusters,
            choice,
        }),
    })
}
