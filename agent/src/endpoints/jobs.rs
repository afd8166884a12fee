//! Jobs: the batch jobs a committed request runs on the cluster's resource manager, with the
//! states the agent last read, and the completion the agent made by itself once they all ended
//! (`completed_ms` and the volumes' outcomes). The coordinators ask it to keep the stored
//! decision current, for every committed request of the cluster in one call
//! (`more_request_ids`, answered in `more`); it changes nothing.

use std::sync::Arc;

use fedvol_proto::agent::{ActionMsg, ActionReply};
use fedvol_proto::{Code, Failure};

use crate::shared::{Shared, lock};

/// Answers a jobs request: for `request_id`, and for each of `more_request_ids` in `more`, the
/// commit's jobs, or `not_committed` when the agent keeps no commit of the request (never
/// committed here, or completed and pruned).
pub async fn handle(shared: Arc<Shared>, msg: ActionMsg) -> Option<Result<ActionReply, Failure>> {
    let mut reply = one(&shared, &msg.request_id);
    reply.more = msg.more_request_ids.iter().map(|id| one(&shared, id)).collect();
    Some(Ok(reply))
}

/// The answer for one request.
fn one(shared: &Shared, request_id: &str) -> ActionReply {
    let view = lock(shared).jobs_of(request_id);
    let Some(view) = view else {
        return ActionReply::refused(
            &shared.cluster,
            request_id,
            Code::NotCommitted.error("no committed request with this id is kept on this cluster"),
        );
    };
    let mut reply = match view.completion {
        Some(done) => {
            let mut r = done;
            r.completed_ms = view.completed_ms.max(1);
            r
        }
        None => ActionReply::done(&shared.cluster, request_id, Vec::new()),
    };
    reply.jobs = view.jobs;
    reply
}
