//! Restored: a coordinator says the commits stored for this cluster were restored onto the
//! agent's state generation; a fresh state admits new commits again
//! ([`crate::restore_gate`]).

use std::sync::Arc;

use fedvol_proto::Failure;
use fedvol_proto::agent::{RestoredMsg, RestoredReply};

use crate::shared::{Shared, lock, store_failed};

/// Answers a restored message: opens the gate and clears the state file's mark (durably) when
/// the message names this agent's generation; ignores another generation's.
pub async fn handle(shared: Arc<Shared>, msg: RestoredMsg) -> Option<Result<RestoredReply, Failure>> {
    let gate = &shared.restore;
    if gate.pending() {
        if gate.generation() == msg.generation {
            let store = lock(&shared).store();
            let cleared = tokio::task::spawn_blocking({
                let generation = msg.generation.clone();
                move || store.clear_pending_restore(&generation)
            })
            .await;
            match cleared {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => store_failed(&e),
                Err(e) => return Some(Err(crate::shared::internal(e))),
            }
            let was_closed = gate.closed();
            gate.restored(&msg.generation);
            tracing::warn!(
                generation = %msg.generation,
                restored = msg.restored,
                failed = msg.failed,
                was_waiting = was_closed,
                "the coordinators restored this cluster's commits: new commits are admitted"
            );
        } else {
            tracing::info!(generation = %msg.generation, ours = %gate.generation(), "a restore of another state generation: ignored");
        }
    }
    Some(Ok(RestoredReply {
        cluster: shared.cluster.clone(),
        admitting: !gate.closed(),
    }))
}
