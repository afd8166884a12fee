//! Why not: the request re-planned on today's effective inventory with every rejection listed,
//! and each stage that rejected the named zone, host or provisioner
//! ([`fedvol_common::funnel::why_not`]).

use std::sync::Arc;

use fedvol_common::funnel::why_not::{unknown_names, why_not, why_not_as};
use fedvol_proto::agent::{WhyNotMsg, WhyNotReply};
use fedvol_proto::{Code, Failure};

use crate::shared::{Shared, internal, lock};

/// Answers a why_not: today's re-plan, or `not_found` when the cluster has no zone, host or
/// provisioner of a name given (not "not rejected").
pub async fn handle(shared: Arc<Shared>, msg: WhyNotMsg) -> Option<Result<WhyNotReply, Failure>> {
    let sh = shared.clone();
    let r = tokio::task::spawn_blocking(move || {
        let (inv, state, runner) = {
            let core = lock(&sh);
            let (inv, state) = core.snapshot();
            (inv, state, core.runner())
        };
        let unknown = unknown_names(&inv, &msg.target);
        if !unknown.is_empty() {
            return Err(Failure::new(
                Code::NotFound,
                format!("cluster {} has no {}", sh.cluster, unknown.join(", no ")),
            ));
        }
        let e = match &runner {
            None => why_not(&sh.cluster, &inv, &state, &msg.request, &msg.target),
            Some(r) => why_not_as(
                &sh.cluster,
                &inv,
                &state,
                &r.counted(&msg.request),
                &msg.target,
                Some(&r.run_as(&msg.request.user)),
            ),
        };
        Ok(WhyNotReply {
            cluster: sh.cluster.clone(),
            blockers: e.blockers,
            summary: e.summary,
            inventory_version: Some(inv.version.clone()),
            record: None,
        })
    })
    .await;
    Some(r.map_err(internal).and_then(|x| x))
}
