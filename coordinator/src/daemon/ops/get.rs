//! `get`: a stored decision by request id, or `not_found`.

use std::sync::Arc;

use fedvol_common::limits::printable;
use fedvol_proto::Code;
use fedvol_proto::coordinator::{DecisionRef, SubmitReply};

use crate::daemon::Coordinator;
use crate::daemon::lifecycle::error_reply;

/// `get`: the stored decision, or `not_found`; with `whole`, that cluster's summary replaced in
/// the answer (not in the store) by the whole answer its agent still keeps
/// ([`crate::daemon::whole::fetch`]).
pub async fn get(co: &Arc<Coordinator>, q: &DecisionRef) -> SubmitReply {
    match co.store.get(&q.request_id).await {
        Ok(Some((mut s, _))) => {
            if let Some(cluster) = &q.whole {
                crate::daemon::whole::fetch(
                    co,
                    &q.request_id,
                    &mut s.decision.clusters,
                    std::slice::from_ref(cluster),
                )
                .await;
            }
            SubmitReply::stored(s)
        }
        Ok(None) => not_found(&q.request_id),
        Err(e) => error_reply(Code::StoreUnavailable, e.to_string()),
    }
}

/// `not_found` for request id `id` (user input, shown escaped: it may hold ESC, CR, LF).
pub(super) fn not_found(id: &str) -> SubmitReply {
    error_reply(
        Code::NotFound,
        format!("no decision is stored under request id `{}`", printable(id)),
    )
}
