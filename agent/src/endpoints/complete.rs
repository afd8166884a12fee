//! Complete: allocations freed; volumes follow their reclaim policy (Delete: the driver deletes
//! the asset, then the record goes; Retain: Released, never bound again). The Kubernetes volume provisioning design.

use std::sync::Arc;

use fedvol_proto::Failure;
use fedvol_proto::agent::{ActionMsg, ActionReply};

use crate::shared::{Shared, durable, lock, store_failed};
use crate::state::core::{DriverResult, Next};

/// Answers a complete.
pub async fn handle(shared: Arc<Shared>, msg: ActionMsg) -> Option<Result<ActionReply, Failure>> {
    let id = msg.request_id.clone();
    let begun = lock(&shared).begin_complete(&id);
    let work = match begun {
        Next::Answer(reply) => return Some(durable(&shared, *reply).await),
        Next::Run(work) => work,
    };
    let mut results = Vec::new();
    for w in work {
        let r = shared
            .drivers
            .delete(&w.provisioner, &w.id.name, w.source.as_deref(), &id, msg.deadline_ms)
            .await;
        results.push(match r {
            Ok(m) => (w, DriverResult::Ok(m)),
            Err(e) => (w, DriverResult::Failed(e.to_string())),
        });
    }
    let finished = lock(&shared).finish_complete(&id, results, fedvol_proto::now_ms());
    Some(match finished {
        Ok(reply) => durable(&shared, reply).await,
        Err(e) => store_failed(&e),
    })
}
