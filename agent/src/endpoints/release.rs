//! Release: a hold freed (idempotent; a committed request or a commit in progress is
//! refused with `committed` / `commit_in_progress`, which is how a coordinator settles a
//! commit whose answer it lost).

use std::sync::Arc;

use fedvol_proto::Failure;
use fedvol_proto::agent::{ActionMsg, ActionReply};

use crate::shared::{Shared, durable, lock, store_failed};

/// Answers a release.
pub async fn handle(shared: Arc<Shared>, msg: ActionMsg) -> Option<Result<ActionReply, Failure>> {
    let r = lock(&shared).release(&msg.request_id, msg.attempt, fedvol_proto::now_ms());
    Some(match r {
        Ok(reply) => durable(&shared, reply).await,
        Err(e) => store_failed(&e),
    })
}
