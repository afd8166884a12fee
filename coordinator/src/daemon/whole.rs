//! The whole answers a decision keeps (docs/design.md §4, "Summarized answers"): when the
//! gather asked for summaries ([`fedvol_proto::agent::PlanMsg::summary`]), the clusters kept
//! whole (the chosen one and the commit's fallbacks) are asked for the whole answer their agent
//! kept ([`fedvol_proto::agent::Answer`]), all at once.
//!
//! A cluster that cannot give it (its agent restarted or is gone, or kept it no longer) keeps
//! its summary, which the decision shows as such; nothing else changes, since the choice ranks
//! a summary as it ranks the whole answer and a commit re-plans on the agent anyway.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use fedvol_common::decision::ClusterDecision;
use fedvol_proto::agent::{self, AgentOp, AnswerMsg};
use fedvol_proto::now_ms;
use fedvol_proto::rpc::call;

use super::Coordinator;

/// Replaces the summaries of `kept` clusters in `slots` by the whole answers their agents kept
/// for `request_id`, keeping each slot's status and `elapsed_ms` (measured by the gather).
/// Waits at most the coordinator's plan deadline (`deadlineMs`, at least 500 ms).
pub async fn fetch(
    co: &Arc<Coordinator>,
    request_id: &str,
    slots: &mut IndexMap<String, ClusterDecision>,
    kept: &[String],
) {
    let wanted: Vec<&String> = kept
        .iter()
        .filter(|c| slots.get(*c).is_some_and(|s| s.summarized))
        .collect();
    if wanted.is_empty() {
        return;
    }
    let wait = co.cfg.deadline_ms.max(500);
    let msg = AnswerMsg {
        request_id: request_id.to_string(),
        deadline_ms: now_ms() + wait,
    };
    let asks = wanted.iter().map(|c| {
        let subject = co.subjects.cluster(c, AgentOp::Answer);
        let msg = &msg;
        async move {
            call::<agent::Answer>(
                &co.client,
                &subject,
                msg,
                Duration::from_millis(wait + 200),
                "coordinator",
            )
            .await
        }
    });
    let answers = futures::future::join_all(asks).await;
    for (cluster, answer) in wanted.into_iter().zip(answers) {
        match answer {
            Ok(Ok(reply)) if reply.cluster == *cluster && !reply.decision.summarized => {
                if let Some(slot) = slots.get_mut(cluster) {
                    let (status, elapsed_ms) = (slot.status, slot.elapsed_ms);
                    *slot = reply.decision;
                    slot.status = status;
                    slot.elapsed_ms = elapsed_ms;
                }
            }
            Ok(Ok(reply)) => {
                tracing::warn!(cluster = %cluster, named = %fedvol_common::limits::printable(&reply.cluster), "the whole answer came back as a summary or in another cluster's name: the summary is kept");
            }
            Ok(Err(f)) => {
                tracing::warn!(cluster = %cluster, error = %f.error.message, "no whole answer: the summary is kept");
            }
            Err(e) => {
                tracing::warn!(cluster = %cluster, error = %e, "no whole answer: the summary is kept");
            }
        }
    }
}
