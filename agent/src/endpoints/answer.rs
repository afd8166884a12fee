//! Answer: the whole answer kept for a plan answered with its summary ([`crate::answers`]).

use std::sync::Arc;

use fedvol_proto::agent::{AnswerMsg, PlanReply};
use fedvol_proto::{Code, Failure, now_ms};

use crate::shared::{Shared, internal};

/// Answers with the whole answer kept for the request, or `not_found` saying why there is none.
pub async fn handle(shared: Arc<Shared>, msg: AnswerMsg) -> Option<Result<PlanReply, Failure>> {
    Some(match shared.answers.get(&msg.request_id, now_ms()) {
        Some(Ok(decision)) => Ok(PlanReply {
            request_id: msg.request_id,
            cluster: shared.cluster.clone(),
            decision,
            hold: None,
        }),
        Some(Err(e)) => Err(internal(format!("the whole answer kept for this request does not read back: {e}"))
            .from_cluster(&shared.cluster)
            .for_request(&msg.request_id)),
        None => Err(Failure::new(
            Code::NotFound,
            format!(
                "cluster {} keeps no whole answer for request `{}`: it keeps them {} min after the plan (at most {}), and none across a restart",
                shared.cluster,
                fedvol_common::limits::printable(&msg.request_id),
                crate::answers::RETENTION_MS / 60_000,
                crate::answers::KEPT
            ),
        )
        .from_cluster(&shared.cluster)
        .for_request(&msg.request_id)),
    })
}
