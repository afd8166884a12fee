//! Start-up discovery of the running agents through the NATS service API: who answers
//! `$SRV.INFO.fedvol-agent` names clusters, and a named cluster counts only once its own
//! subject answers in its name. Used by the coordinator's start-up and by a plan that finds no
//! cluster known yet.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use fedvol_proto::now_ms;
use fedvol_proto::rpc::is_no_responders;
use fedvol_proto::subjects::AGENT_SERVICE;

use super::Coordinator;

/// Asks the NATS service API for every running `fedvol-agent` (`$SRV.INFO.fedvol-agent`) and
/// registers each cluster they name (service metadata `cluster`), waiting at most
/// `discoveryMs`. Anyone who may answer `$SRV.INFO` can name any cluster (NATS docs: Services),
/// so a named cluster is registered only once its own subject answers: a `status` request on
/// `<prefix>.cluster.<c>.status`, which only cluster `c`'s agents receive under the shipped
/// permissions, answered in `c`'s name. No instance is counted from discovery (replicas come
/// from heartbeats, [`super::registry::Registry::heartbeat`]).
pub async fn discover(co: &Arc<Coordinator>) {
    let subject = format!("$SRV.INFO.{AGENT_SERVICE}");
    let inbox = co.client.new_inbox();
    let Ok(mut sub) = co.client.subscribe(inbox.clone()).await else {
        return;
    };
    if co
        .client
        .publish_with_reply(subject, inbox, Bytes::new())
        .await
        .is_err()
    {
        return;
    }
    let end = tokio::time::Instant::now() + Duration::from_millis(co.cfg.discovery_ms);
    let mut named: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(end, sub.next()).await {
        if is_no_responders(&m) {
            break;
        }
        match serde_json::from_slice::<async_nats::service::Info>(&m.payload) {
            Ok(info) => match info.metadata.get("cluster") {
                Some(c) if !fedvol_common::limits::is_token(c) => {
                    tracing::warn!(id = %info.id, "an agent whose cluster name is not a subject token ignored")
                }
                Some(c) => {
                    named.insert(c.clone());
                }
                None => tracing::debug!(id = %info.id, "an agent without cluster metadata ignored"),
            },
            Err(e) => tracing::debug!(error = %e, "unreadable service info ignored"),
        }
    }
    let _ = sub.unsubscribe().await;
    let wait = Duration::from_millis(co.cfg.discovery_ms.max(100));
    let confirmed = futures::stream::iter(named)
        .map(|c| async move {
            let subject = co.subjects.cluster(&c, fedvol_proto::agent::AgentOp::Status);
            let r = fedvol_proto::rpc::call::<fedvol_proto::agent::Status>(
                &co.client,
                &subject,
                &fedvol_proto::NoArgs {},
                wait,
                "coordinator",
            )
            .await;
            let ok = matches!(&r, Ok(Ok(status)) if status.cluster == c);
            (c, ok)
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let mut found = 0;
    for (c, ok) in confirmed {
        if ok {
            co.registry().discovered(&c, now_ms());
            found += 1;
        } else {
            tracing::warn!(cluster = %c, "a discovered cluster that does not answer on its own subject ignored");
        }
    }
    tracing::info!(clusters_confirmed = found, clusters = ?co.registry().names(), "discovery done");
}
