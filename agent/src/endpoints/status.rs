//! Status: holds, live commits, managed volumes with their events, capacity in use.

use std::sync::Arc;

use fedvol_proto::agent::StatusReply;
use fedvol_proto::{Failure, NoArgs};

use crate::shared::{Shared, lock};

/// Answers a status.
pub async fn handle(shared: Arc<Shared>, _: NoArgs) -> Option<Result<StatusReply, Failure>> {
    Some(Ok(lock(&shared).status()))
}
