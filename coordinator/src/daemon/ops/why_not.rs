//! `why_not`: why a cluster, zone, host or provisioner was not chosen, asked of the cluster's
//! agent with the stored request (or answered from the record).

use std::time::Duration;

use fedvol_common::limits::printable;
use fedvol_proto::agent::{self as agent, AgentOp, WhyNotMsg, WhyNotReply};
use fedvol_proto::coordinator::WhyNotQuery;
use fedvol_proto::rpc::call;
use fedvol_proto::{Code, Failure, now_ms, subject_token};

use crate::daemon::Coordinator;

/// `why_not` (from the record first): with only a cluster named, why it lost
/// ([`super::why_lost::cluster_record`], from the record alone); else what the stored
/// decision says of the named zone, host or provisioner in the named cluster (its stored trace, whether it was chosen, how
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
    if q.target.is_empty() {
        // Only the cluster named: why it lost, from the record; nothing for its agent to
        // re-plan.
        return Ok(WhyNotReply {
            cluster: q.cluster.clone(),
            blockers: Vec::new(),
            summary: "not re-planned: name a --zone, --host or --provisioner to have the cluster re-plan it on today's inventory".into(),
            inventory_version: None,
            record: Some(super::why_lost::cluster_record(&stored.decision, &q.cluster)),
        });
    }
    let record = fedvol_common::funnel::why_not::from_record(&stored.decision, &q.cluster, &q.target);
    let wait = co.cfg.deadline_ms.max(1000);
    let msg = WhyNotMsg {
        request: stored.request,
        deadline_ms: now_ms() + wait,
        target: q.target.clone(),
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
