//! Why not: the request re-planned on today's effective inventory with every rejection listed,
//! and each stage that rejected the named zone, host or provisioner
//! ([`fedvol_common::funnel::why_not`]).

use std::sync::Arc;

use fedvol_common::funnel::why_not::why_not;
use fedvol_proto::Failure;
use fedvol_proto::agent::{WhyNotMsg, WhyNotReply};

use crate::service::{Shared, internal, lock};

/// Answers a why_not.
pub async fn handle(shared: Arc<Shared>, msg: WhyNotMsg) -> Option<Result<WhyNotReply, Failure>> {
    let sh = shared.clone();
    let r = tokio::task::spawn_blocking(move || {
        let (inv, state) = lock(&sh).snapshot();
        let e = why_not(&sh.cluster, &inv, &state, &msg.request, &msg.target());
        WhyNotReply {
            cluster: sh.cluster.clone(),
            blockers: e.blockers,
            summary: e.summary,
        }
    })
    .await;
    Some(r.map_err(internal))
}
