//! Inventory: the effective inventory (files plus fedvol's changes) and the status. Driver
//! parameters that hold credentials are references (`file:`, `env:`), never secrets.

use std::sync::Arc;

use fedvol_proto::agent::InventoryReply;
use fedvol_proto::{Failure, NoArgs};

use crate::service::{Shared, lock};

/// Answers an inventory.
pub async fn handle(shared: Arc<Shared>, _: NoArgs) -> Option<Result<InventoryReply, Failure>> {
    let core = lock(&shared);
    Some(Ok(InventoryReply {
        cluster: shared.cluster.clone(),
        inventory: (*core.snapshot().0).clone(),
        status: core.status(),
    }))
}
