//! Inventory: the effective inventory (files plus fedvol's changes) and the status. Driver
//! parameter values are shown only for known non-secret keys and secret references
//! ([`fedvol_common::secrets::shown_value`]); every other value reads `<redacted>`. Past the
//! NATS server's `max_payload` (thousands of commits), the lists that grow with commits are cut
//! and counted ([`InventoryReply::fit`]), so the answer always arrives.

use std::sync::Arc;

use fedvol_proto::agent::InventoryReply;
use fedvol_proto::{Failure, NoArgs};

use crate::shared::{Shared, lock};

/// Answers an inventory.
pub async fn handle(shared: Arc<Shared>, _: NoArgs) -> Option<Result<InventoryReply, Failure>> {
    let core = lock(&shared);
    let mut inventory = (*core.snapshot().0).clone();
    for p in &mut inventory.provisioners {
        if let fedvol_common::model::Driver::External { parameters, .. } = &mut p.driver {
            for (k, v) in parameters.iter_mut() {
                *v = fedvol_common::secrets::shown_value(k, v).to_string();
            }
        }
    }
    let mut reply = InventoryReply {
        cluster: shared.cluster.clone(),
        inventory,
        status: core.status(),
        cut: None,
    };
    drop(core);
    let max_payload = shared.max_payload.load(std::sync::atomic::Ordering::Relaxed);
    if reply.fit(max_payload.saturating_sub(fedvol_proto::agent::INVENTORY_ENVELOPE_BYTES)) {
        tracing::info!(
            committed = reply.totals().committed,
            kept = reply.status.committed.len(),
            max_payload,
            "inventory answer cut to fit max_payload"
        );
    }
    Some(Ok(reply))
}
