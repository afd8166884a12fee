//! Asking every known cluster to plan (one request per cluster, never the broadcast).
//!
//! The [`PlanMsg`] is sent to each cluster the registry knows (from heartbeats or start-up
//! discovery) on that cluster's own subject `<prefix>.cluster.<c>.plan` (asking for summaries
//! past `fedvol_common::summary::AGENT_SUMMARIES_PAST` clusters), with the reply subject
//! `<inbox>.<c>.<n>` (the coordinator's inbox, subscribed once per cluster; `n` numbers the
//! gather, so every request has reply subjects of its own: [`super::replies`]). An answer belongs to the
//! cluster whose token it arrived on, and only that cluster's agents can send it there: with
//! the secure NATS configurations an agent receives only its own cluster's subjects and may
//! publish only replies to requests it received (`allow_responses`), so agent-a's credentials
//! can never answer on cluster-b's token. The body must name that cluster too: an answer naming
//! another one is refused and logged, and the cluster it arrived for gets an `error` slot
//! (`bad_answer`); a second answer for one cluster is logged and ignored. Clusters the
//! registry does not know are never asked, so an answer can no longer invent one.
//!
//! Answers are gathered until every cluster the registry expects has answered or the deadline
//! passed. Each cluster gets a slot:
//! - `answered`: the agent's [`ClusterDecision`], with `elapsed_ms` measured here from the
//!   publish to the answer's arrival;
//! - `error`: the agent answered with an error (or in another cluster's name);
//! - `timed_out`: expected, but no answer by the deadline (counts towards suspicion);
//! - `unreachable`: known dead or suspect (asked, but not waited for), or NATS said "no
//!   responders" for its subject (nobody serves it). A cluster known only through discovery
//!   (never a heartbeat) whose subject has no responders is forgotten at once: discovery
//!   answers are not authenticated, so such an entry may be an invention.
//!
//! Plans hold nothing (admission happens at commit: see `commit`), so an answer that arrives
//! after the gather ended is simply dropped with the inbox.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;

use fedvol_common::decision::{ClusterDecision, ClusterStatus, Reason};
use fedvol_common::funnel::PlanRequest;
use fedvol_proto::agent::{AgentOp, Plan, PlanMsg};
use fedvol_proto::rpc::RpcError;
use fedvol_proto::{Code, Endpoint, now_ms};

use super::Coordinator;
use super::registry::Expectation;
use super::replies::{AgentAnswer, Arrived};

/// Up to this many clusters, a plan's log line names them all; past it, it counts them (and
/// names the first clusters not waited for, which are the unusual ones).
const LOGGED_NAMES: usize = 16;

/// The result of one round of plans.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// Every asked cluster's slot, sorted by cluster name (a deterministic order, so the seeded
    /// cluster choice replays identically).
    pub slots: IndexMap<String, ClusterDecision>,
    /// How long the gather took, ms.
    pub gather_ms: f64,
}

/// Asks every known cluster to plan `request` (holding nothing; `dry_run`: no commit follows,
/// so the agents keep nothing of their plans for one) and gathers the answers for at most
/// `wait` (module docs). When the registry knows no cluster yet (a coordinator that just
/// started), agents are discovered first.
///
/// Errors: only when NATS itself fails (publish or subscribe); unanswered clusters are slots,
/// not errors.
pub async fn fan_out(
    co: &Arc<Coordinator>,
    request: &PlanRequest,
    dry_run: bool,
    wait: Duration,
) -> Result<Gathered, RpcError> {
    fan_out_to(co, request, None, dry_run, wait).await
}

/// [`fan_out`] to the known clusters among `only` (all of them when `None`): how a plan asks
/// again the clusters whose agents were waiting for their restore
/// ([`super::lifecycle::plan`]).
///
/// Errors: as [`fan_out`].
pub async fn fan_out_to(
    co: &Arc<Coordinator>,
    request: &PlanRequest,
    only: Option<&BTreeSet<String>>,
    dry_run: bool,
    wait: Duration,
) -> Result<Gathered, RpcError> {
    if only.is_none() && co.registry().is_empty() {
        super::discovery::discover(co).await;
    }
    let asked_ms = now_ms();
    // Every asked cluster, sorted by name, and what became of it: one entry each instead of a
    // set or map per outcome (at 1,000 clusters the ordered lookups were a visible share of a
    // plan).
    let (names, mut asked): (Vec<String>, Vec<Asked>) = {
        let mut reg = co.registry();
        for (name, seen_ms) in reg.forget_silent(asked_ms, co.cfg.forget_cluster_after_ms) {
            tracing::warn!(cluster = %name, silent_ms = asked_ms.saturating_sub(seen_ms), "cluster forgotten: not heard from for longer than forgetClusterAfterMs");
        }
        reg.targets(only, asked_ms)
            .into_iter()
            .map(|(name, expectation)| {
                let skipped = match expectation {
                    Expectation::Wait => None,
                    Expectation::Skip(reason) => Some(reason),
                };
                (name, Asked { skipped, got: None })
            })
            .unzip()
    };
    let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let waited = asked.iter().filter(|a| a.skipped.is_none()).count();
    let mut pending = waited;
    let deadline_ms = asked_ms + wait.as_millis() as u64;
    let msg = PlanMsg {
        request: request.clone(),
        deadline_ms,
        reserve: false,
        ttl_ms: 0,
        // The decision keeps only three whole answers: past a few more, those are fetched
        // (`super::whole`) and the others cross NATS as summaries.
        summary: names.len() > fedvol_common::summary::AGENT_SUMMARIES_PAST,
        dry_run,
    };
    let body = Plan::encode_request(&msg);
    // Answers arrive on each cluster's long-lived subscription, routed here by request id
    // (`replies`).
    co.replies.watch(&co.client, names.iter().map(String::as_str)).await?;
    let mut gather = co.replies.open();
    let started = Instant::now();
    for name in &names {
        let subject = co.subjects.cluster(name, AgentOp::Plan);
        co.client
            .publish_with_reply(subject.clone(), gather.reply_subject(name), body.clone())
            .await
            .map_err(|e| RpcError::Nats {
                subject,
                message: e.to_string(),
            })?;
    }
    let not_waited_for = || {
        names
            .iter()
            .zip(&asked)
            .filter(|(_, a)| a.skipped.is_some())
            .map(|(n, _)| n)
    };
    // Names only while they fit a line: at 1,000 clusters the list was 15 KB per plan.
    if names.len() <= LOGGED_NAMES {
        let waiting_for: Vec<&String> = names
            .iter()
            .zip(&asked)
            .filter(|(_, a)| a.skipped.is_none())
            .map(|(n, _)| n)
            .collect();
        tracing::info!(
            ?waiting_for,
            not_waited_for = ?not_waited_for().collect::<Vec<_>>(),
            wait_ms = wait.as_millis() as u64,
            "plan sent to each cluster"
        );
    } else {
        tracing::info!(
            waiting_for = waited,
            not_waited_for = ?not_waited_for().take(LOGGED_NAMES).collect::<Vec<_>>(),
            not_waited_for_count = names.len() - waited,
            wait_ms = wait.as_millis() as u64,
            "plan sent to each cluster"
        );
    }
    let end = tokio::time::Instant::from_std(started + wait);
    while pending > 0 {
        let routed = match tokio::time::timeout_at(end, gather.answers.recv()).await {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => break,
        };
        let elapsed = routed.at.saturating_duration_since(started).as_secs_f64() * 1000.0;
        let token = &*routed.cluster;
        let Some(&i) = index.get(token) else {
            tracing::warn!(cluster = %token, "a plan answer from a cluster this request did not ask: ignored");
            continue;
        };
        if asked[i].got.is_some() {
            tracing::warn!(cluster = %token, "a second plan answer for one cluster: ignored");
            continue;
        }
        let got = match routed.arrived {
            Arrived::NoResponders => Got::NoResponders,
            Arrived::Answer(a) if a.request_id().is_some_and(|id| id != request.request_id) => {
                tracing::warn!(cluster = %token, "a plan answer for another request on this request's reply subject: ignored");
                continue;
            }
            Arrived::Answer(a) => match a.cluster() {
                Some(named) if named != token => {
                    let named: String = fedvol_common::limits::printable(named).chars().take(80).collect();
                    tracing::warn!(
                        cluster = %token,
                        named = %named,
                        "a plan answer in another cluster's name: refused (the cluster that sent it gets an error slot)"
                    );
                    let reason = Code::BadAnswer.reason(format!(
                        "the answer on this cluster's reply subject named cluster `{named}`: refused"
                    ));
                    Got::Refused(reason, elapsed)
                }
                _ => {
                    tracing::debug!(cluster = %token, elapsed_ms = elapsed, "plan answer");
                    Got::Answer(a, elapsed)
                }
            },
            Arrived::Unreadable(e) => {
                tracing::warn!(cluster = %token, error = %e, "an unreadable plan answer: ignored");
                continue;
            }
        };
        asked[i].got = Some(got);
        if asked[i].skipped.is_none() {
            pending -= 1;
        }
    }
    drop(gather);
    let gather_ms = started.elapsed().as_secs_f64() * 1000.0;
    let ended_ms = now_ms();
    let (mut answered, mut refused, mut no_responders) = (0, 0, 0);
    {
        let mut reg = co.registry();
        for (name, a) in names.iter().zip(&asked) {
            match &a.got {
                Some(Got::Answer(..)) => {
                    answered += 1;
                    reg.answered(name, ended_ms);
                }
                Some(Got::Refused(..)) => {
                    refused += 1;
                    reg.answered(name, ended_ms);
                }
                Some(Got::NoResponders) => {
                    no_responders += 1;
                    if reg.forget_if_unconfirmed(name) {
                        tracing::warn!(cluster = %name, "a cluster known only through discovery has no agent serving its subjects: forgotten");
                    }
                }
                None if a.skipped.is_none() => reg.timed_out(name, ended_ms),
                None => {}
            }
        }
    }

    let skipped = names.len() - waited;
    let mut slots = IndexMap::with_capacity(names.len());
    for (name, a) in names.into_iter().zip(asked) {
        let slot = match (a.got, a.skipped) {
            (Some(Got::Answer(answer, elapsed)), _) => answer.slot(elapsed),
            (Some(Got::Refused(reason, elapsed)), _) => {
                ClusterDecision::without_answer(ClusterStatus::Error, elapsed, Some(reason))
            }
            (_, Some(reason)) => ClusterDecision::without_answer(ClusterStatus::Unreachable, 0.0, Some(reason)),
            (Some(Got::NoResponders), None) => {
                let subject = co.subjects.cluster(&name, AgentOp::Plan);
                ClusterDecision::without_answer(
                    ClusterStatus::Unreachable,
                    gather_ms,
                    Some(Code::Unreachable.reason(format!("no responders: no agent serves {subject}"))),
                )
            }
            (None, None) => ClusterDecision::without_answer(
                ClusterStatus::TimedOut,
                gather_ms,
                Some(Code::TimedOut.reason(format!("no answer within {} ms", wait.as_millis()))),
            ),
        };
        slots.insert(name, slot);
    }
    tracing::info!(
        answered,
        refused,
        timed_out = pending,
        unreachable = skipped + no_responders,
        gather_ms,
        "plan gathered"
    );
    if slots.is_empty() {
        tracing::warn!("no cluster is known (no heartbeat, nothing discovered): nothing was asked");
    }
    Ok(Gathered { slots, gather_ms })
}

/// One asked cluster during a gather: why it is not waited for (known dead or suspect), and
/// what arrived from it.
struct Asked {
    skipped: Option<Reason>,
    got: Option<Got>,
}

/// What arrived from one asked cluster (the first of it; a second is ignored).
enum Got {
    /// Its answer, with the time from the publish to its arrival, ms.
    Answer(AgentAnswer, f64),
    /// An answer refused (in another cluster's name), and when it arrived, ms.
    Refused(Reason, f64),
    /// NATS said nobody serves its plan subject.
    NoResponders,
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
