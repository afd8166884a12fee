//! `clusters` and `cluster`: the registry's view of every known cluster, and one cluster with
//! its agent's `inventory` answer.

use std::time::Duration;

use fedvol_proto::agent::{self as agent, AgentOp};
use fedvol_proto::coordinator::{ClusterDrain, ClustersReply};
use fedvol_proto::rpc::{RpcError, call};
use fedvol_proto::{Code, Failure, now_ms, subject_token};

use crate::daemon::Coordinator;

/// The least a `cluster` answer waits for the agent's `inventory`, ms.
const INVENTORY_WAIT_MS: u64 = 5000;

/// `cluster`: one cluster in detail (`fedvol clusters show`): its registry entry and its
/// agent's effective inventory and status, asked of the agent on `cluster.<c>.inventory`. Past
/// `max_payload` the lists that grow with commits are cut and counted
/// ([`fedvol_proto::agent::InventoryReply::fit`]), by the agent and again here if need be.
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
    // A cluster holding thousands of commits takes a while to list them (the answer is cut to
    // `max_payload` by the agent): more than a plan's deadline, well within the CLI's wait.
    let wait = co.cfg.deadline_ms.max(INVENTORY_WAIT_MS);
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
        Ok(Ok(mut agent)) => {
            // The agent cut its answer to its own `max_payload`; this answer adds the registry
            // entry, and this coordinator's server may take less.
            let info_bytes = serde_json::to_vec(&info).map_or(0, |b| b.len());
            agent.fit(
                co.client
                    .max_payload()
                    .saturating_sub(info_bytes + agent::INVENTORY_ENVELOPE_BYTES),
            );
            Ok(fedvol_proto::coordinator::ClusterReply { info, agent })
        }
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
/// `forgetClusterAfterMs` (forgotten now), each with its drain if an operator drained it; the
/// drains of clusters the registry does not know in `drained_unknown`.
pub fn clusters(co: &Coordinator) -> ClustersReply {
    let now = now_ms();
    let mut infos = {
        let mut reg = co.registry();
        for (name, seen_ms) in reg.forget_silent(now, co.cfg.forget_cluster_after_ms) {
            tracing::warn!(cluster = %name, silent_ms = now.saturating_sub(seen_ms), "cluster forgotten: not heard from for longer than forgetClusterAfterMs");
        }
        reg.info(now)
    };
    let mut drains = co.drains.all();
    for c in &mut infos {
        c.drain = drains.remove(&c.name);
    }
    ClustersReply {
        clusters: infos,
        drained_unknown: drains
            .into_iter()
            .map(|(cluster, drain)| ClusterDrain { cluster, drain })
            .collect(),
    }
}
