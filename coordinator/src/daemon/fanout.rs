//! The plan broadcast: one [`PlanMsg`] on `<prefix>.plan` (each cluster's agents answer once,
//! through their queue group `agent.<cluster>`), one fresh reply inbox, answers gathered until
//! every cluster the registry expects has answered or the deadline passed.
//!
//! Each cluster gets a slot:
//! - `answered`: the agent's [`ClusterDecision`], with `elapsed_ms` measured here from the
//!   publish to the answer's arrival;
//! - `error`: the agent answered with an error;
//! - `timed_out`: expected, but no answer by the deadline (counts towards suspicion);
//! - `unreachable`: known dead or suspect (not waited for), or NATS said "no responders" at
//!   once (nobody serves `<prefix>.plan`).
//!
//! Answers from clusters the registry does not know are kept (and registered). Answers that
//! arrive after the gather ended are ignored, and any hold they carry is released at once, so
//! a late cluster never keeps capacity for a decision that does not include it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use indexmap::IndexMap;
use tracing::Instrument;

use fedvol_common::decision::{ClusterDecision, ClusterStatus, Reason};
use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::{Plan, PlanMsg, PlanReply};
use fedvol_proto::rpc::{RpcError, is_no_responders};
use fedvol_proto::{Code, Endpoint, Failure, now_ms};

use super::Coordinator;
use super::commit::release;
use super::registry::Expectation;

/// How long after the agents' deadline late answers are still listened for (to release their
/// holds), ms: covers clock differences between hosts.
pub const LATE_GRACE_MS: u64 = 2000;

/// An agent's answer to a plan: its reply, or the failure it sent instead (which names the
/// cluster when the agent could tell; one that names none cannot be given a slot).
#[derive(Debug, Clone)]
pub enum AgentAnswer {
    /// The cluster's plan.
    Reply(Box<PlanReply>),
    /// Why the agent could not plan.
    Failed(Failure),
}

impl AgentAnswer {
    /// Decodes a plan answer. An answer that is neither a [`PlanReply`] nor a [`Failure`] but
    /// names its cluster is that cluster's `bad_answer` failure (its slot says so at once,
    /// rather than waiting for the deadline).
    ///
    /// Errors: an answer that cannot be read and names no cluster (the decoding error).
    pub fn decode(payload: &[u8]) -> Result<AgentAnswer, fedvol_proto::DecodeError> {
        #[derive(serde::Deserialize)]
        struct Named {
            cluster: String,
        }
        match Plan::decode_reply(payload, "coordinator") {
            Ok(Ok(reply)) => Ok(AgentAnswer::Reply(Box::new(reply))),
            Ok(Err(f)) => Ok(AgentAnswer::Failed(f)),
            Err(e) => match serde_json::from_slice::<Named>(payload) {
                Ok(n) => Ok(AgentAnswer::Failed(
                    Failure::new(Code::BadAnswer, format!("the agent's answer could not be read: {e}"))
                        .from_cluster(&n.cluster),
                )),
                Err(_) => Err(e),
            },
        }
    }

    /// The answering cluster, when the answer names one.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            AgentAnswer::Reply(r) => Some(&r.cluster),
            AgentAnswer::Failed(f) => f.cluster.as_deref(),
        }
    }

    /// The request the answer is for, when it names one.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            AgentAnswer::Reply(r) => Some(&r.request_id),
            AgentAnswer::Failed(f) => f.request_id.as_deref(),
        }
    }

    /// True when the answer carries a hold.
    pub fn holds(&self) -> bool {
        matches!(self, AgentAnswer::Reply(r) if r.hold.is_some())
    }

    /// The slot this answer gives its cluster, with `elapsed_ms` as measured by the coordinator.
    pub fn slot(&self, elapsed_ms: f64) -> ClusterDecision {
        match self {
            AgentAnswer::Reply(r) => {
                let mut d = r.decision.clone();
                d.status = ClusterStatus::Answered;
                d.elapsed_ms = elapsed_ms;
                d
            }
            AgentAnswer::Failed(f) => {
                ClusterDecision::without_answer(ClusterStatus::Error, elapsed_ms, Some(f.error.clone().into()))
            }
        }
    }
}

/// The result of one broadcast.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// Every cluster's slot, sorted by cluster name (a deterministic order, so the seeded
    /// cluster choice replays identically).
    pub slots: IndexMap<String, ClusterDecision>,
    /// Clusters whose answer carries a hold.
    pub held: BTreeSet<String>,
    /// How long the gather took, ms.
    pub gather_ms: f64,
}

/// Broadcasts `request` (holding what each cluster chooses when `reserve`, for `ttl_ms`) and
/// gathers the answers for at most `wait`.
///
/// Errors: only when NATS itself fails (publish or subscribe); unanswered clusters are slots,
/// not errors.
pub async fn fan_out(
    co: &Arc<Coordinator>,
    request: &PlanRequest,
    reserve: bool,
    ttl_ms: u64,
    wait: Duration,
) -> Result<Gathered, RpcError> {
    let subject = co.subjects.plan();
    let nats_err = |e: &dyn std::fmt::Display| RpcError::Nats {
        subject: subject.clone(),
        message: e.to_string(),
    };
    let asked_ms = now_ms();
    let mut wait_for = BTreeSet::new();
    let mut skipped: BTreeMap<String, Reason> = BTreeMap::new();
    {
        let reg = co.registry();
        for name in reg.names() {
            match reg.expectation(&name, asked_ms) {
                Expectation::Wait => {
                    wait_for.insert(name);
                }
                Expectation::Skip(reason) => {
                    skipped.insert(name, reason);
                }
            }
        }
    }
    let deadline_ms = asked_ms + wait.as_millis() as u64;
    let msg = PlanMsg {
        request: request.clone(),
        deadline_ms,
        reserve,
        ttl_ms,
    };
    let inbox = co.client.new_inbox();
    let mut sub = co.client.subscribe(inbox.clone()).await.map_err(|e| nats_err(&e))?;
    let started = Instant::now();
    co.client
        .publish_with_reply(subject.clone(), inbox, Plan::encode_request(&msg))
        .await
        .map_err(|e| nats_err(&e))?;
    tracing::info!(
        waiting_for = ?wait_for,
        not_waited_for = ?skipped.keys().collect::<Vec<_>>(),
        wait_ms = wait.as_millis() as u64,
        reserve,
        "plan broadcast"
    );
    let end = tokio::time::Instant::from_std(started + wait);
    let mut answers: BTreeMap<String, (AgentAnswer, f64)> = BTreeMap::new();
    let mut pending = wait_for.clone();
    let mut no_responders = false;
    loop {
        if !wait_for.is_empty() && pending.is_empty() {
            break;
        }
        let m = match tokio::time::timeout_at(end, sub.next()).await {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => break,
        };
        if is_no_responders(&m) {
            no_responders = true;
            break;
        }
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        match AgentAnswer::decode(&m.payload) {
            Ok(a) => {
                let Some(cluster) = a.cluster().map(str::to_string) else {
                    tracing::warn!(answer = ?a, "a plan answer names no cluster: ignored");
                    continue;
                };
                if a.request_id().is_some_and(|id| id != request.request_id) {
                    tracing::warn!(cluster = %cluster, "a plan answer for another request: ignored");
                    continue;
                }
                if answers.contains_key(&cluster) {
                    continue;
                }
                tracing::debug!(cluster = %cluster, elapsed_ms = elapsed, "plan answer");
                pending.remove(&cluster);
                answers.insert(cluster, (a, elapsed));
            }
            Err(e) => tracing::warn!(error = %e, "an unreadable plan answer: ignored"),
        }
    }
    let gather_ms = started.elapsed().as_secs_f64() * 1000.0;
    let ended_ms = now_ms();
    {
        let mut reg = co.registry();
        for c in answers.keys() {
            reg.answered(c, ended_ms);
        }
        if !no_responders {
            for c in &pending {
                reg.timed_out(c, ended_ms);
            }
        }
    }

    let mut names: BTreeSet<String> = wait_for.clone();
    names.extend(skipped.keys().cloned());
    names.extend(answers.keys().cloned());
    let mut slots = IndexMap::new();
    let mut held = BTreeSet::new();
    for name in names {
        let slot = if let Some((a, elapsed)) = answers.get(&name) {
            if a.holds() {
                held.insert(name.clone());
            }
            a.slot(*elapsed)
        } else if let Some(reason) = skipped.get(&name) {
            ClusterDecision::without_answer(ClusterStatus::Unreachable, 0.0, Some(reason.clone()))
        } else if no_responders {
            ClusterDecision::without_answer(
                ClusterStatus::Unreachable,
                gather_ms,
                Some(Code::Unreachable.reason(format!("no responders: no agent serves {subject}"))),
            )
        } else {
            ClusterDecision::without_answer(
                ClusterStatus::TimedOut,
                gather_ms,
                Some(Code::TimedOut.reason(format!("no answer within {} ms", wait.as_millis()))),
            )
        };
        slots.insert(name, slot);
    }
    tracing::info!(
        answered = answers.len(),
        timed_out = if no_responders { 0 } else { pending.len() },
        unreachable = skipped.len(),
        no_responders,
        gather_ms,
        "plan gathered"
    );

    if reserve && !no_responders {
        let answered: BTreeSet<String> = answers.keys().cloned().collect();
        let co = co.clone();
        let request_id = request.request_id.clone();
        let listen = Duration::from_millis(deadline_ms.saturating_sub(now_ms()) + LATE_GRACE_MS);
        tokio::spawn(
            async move {
                let until = tokio::time::Instant::now() + listen;
                while let Ok(Some(m)) = tokio::time::timeout_at(until, sub.next()).await {
                    if is_no_responders(&m) {
                        continue;
                    }
                    let Ok(a) = AgentAnswer::decode(&m.payload) else {
                        continue;
                    };
                    let Some(cluster) = a.cluster().map(str::to_string) else {
                        continue;
                    };
                    if answered.contains(&cluster) {
                        continue;
                    }
                    tracing::warn!(
                        cluster = %cluster,
                        held = a.holds(),
                        "late plan answer ignored: the gather had ended"
                    );
                    if a.holds() {
                        match release(&co, &cluster, &request_id, 0).await {
                            Ok(()) => tracing::info!(cluster = %cluster, "late hold released"),
                            Err(e) => tracing::warn!(cluster = %cluster, error = %e, "late hold not released"),
                        }
                    }
                }
            }
            .in_current_span(),
        );
    }
    Ok(Gathered { slots, held, gather_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_slots_with_the_coordinators_timing() {
        let mut d = ClusterDecision::without_answer(ClusterStatus::TimedOut, 1.0, None);
        d.feasible = true;
        let plan = serde_json::json!({
            "v": 1, "request_id": "r", "cluster": "a", "decision": d, "hold": {"expires_ms": 5}
        });
        let a = AgentAnswer::decode(plan.to_string().as_bytes()).unwrap();
        assert!(a.holds());
        let slot = a.slot(12.5);
        assert_eq!(
            (slot.status, slot.elapsed_ms, slot.feasible),
            (ClusterStatus::Answered, 12.5, true)
        );

        // The agent's internal error body of the previous release (shaped like an action
        // reply) is an `error` slot.
        let internal = br#"{"v":1,"request_id":"r","cluster":"a","ok":false,"volumes":[],"error":{"code":"internal","message":"disk full"}}"#;
        let a = AgentAnswer::decode(internal).unwrap();
        assert!(!a.holds());
        let slot = a.slot(3.0);
        assert_eq!(slot.status, ClusterStatus::Error);
        assert_eq!(slot.error.unwrap().code, "internal");

        // A bad_request body names no cluster: it cannot be given a slot.
        let bad = AgentAnswer::decode(br#"{"v":1,"error":{"code":"bad_request","message":"x"}}"#).unwrap();
        assert!(bad.cluster().is_none());
        // An answer with neither a decision nor an error is the cluster's bad answer.
        let empty = AgentAnswer::decode(br#"{"v":1,"cluster":"a"}"#).unwrap();
        assert_eq!(empty.slot(1.0).error.unwrap().code, Code::BadAnswer.as_str());
        assert!(AgentAnswer::decode(br#"{"v":1}"#).is_err());
    }
}
