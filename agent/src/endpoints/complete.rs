//! Complete: allocations freed; volumes follow their reclaim policy (Delete: the driver deletes
//! the asset, then the record goes; Retain: Released, never bound again). The Kubernetes volume provisioning design.
//!
//! A request whose batch jobs still run is not completed (its volumes would be reclaimed under
//! them): it is refused `jobs_running`, unless the complete asks to `cancel` them, when they are
//! cancelled (`scancel`) first.

use std::sync::Arc;

use fedvol_proto::Failure;
use fedvol_proto::agent::{ActionMsg, ActionReply};

use fedvol_proto::Code;
use fedvol_proto::batch::all_ended;

use crate::shared::{Shared, lock};
use crate::slurm::follow;

/// Answers a complete.
pub async fn handle(shared: Arc<Shared>, msg: ActionMsg) -> Option<Result<ActionReply, Failure>> {
    let id = msg.request_id.clone();
    let view = lock(&shared).jobs_of(&id);
    if let Some(v) = view.filter(|v| v.completion.is_none() && !all_ended(&v.jobs)) {
        match (&shared.batch, msg.cancel) {
            (Some(slurm), true) => match follow::cancel(&shared, slurm, &id, msg.deadline_ms).await {
                Err(e) => {
                    return Some(Ok(ActionReply::refused(
                        &shared.cluster,
                        &id,
                        Code::Internal.error(format!("the jobs could not be cancelled: {e}")),
                    )));
                }
                Ok(true) => {}
                Ok(false) => {
                    let jobs = lock(&shared).jobs_of(&id).map(|v| v.jobs).unwrap_or_default();
                    return Some(Ok(follow::still_ending(&shared.cluster, &id, &jobs)));
                }
            },
            _ => return Some(Ok(follow::jobs_running(&shared.cluster, &id, &v.jobs))),
        }
    }
    follow::complete(&shared, &id, msg.deadline_ms).await
}
