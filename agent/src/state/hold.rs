//! Plan-and-hold: a reserving plan holds what it chose, serialised with every other change.

use fedvol_common::funnel::PlanRequest;
use fedvol_common::model::ClaimRef;
use fedvol_proto::agent::{HoldInfo, PlanMsg, PlanReply};

use super::core::{Core, CoreError};
use super::records::Hold;
use super::store::Batch;

impl Core {
    /// A plan that holds what it chose (`msg.reserve`). Serialised by the caller's lock, so
    /// concurrent reserving plans never get the same capacity. The same request id returns the
    /// stored answer and never a second hold. `elapsed_ms` is left for the caller.
    ///
    /// Errors: the store write failed (nothing is held).
    pub fn plan_and_hold(&mut self, msg: &PlanMsg, now_ms: u64) -> Result<PlanReply, CoreError> {
        let id = &msg.request.request_id;
        if let Some(h) = self.ledger.holds().get(id) {
            return Ok(PlanReply::clone(&h.reply));
        }
        if let Some(c) = self.ledger.commits().get(id) {
            return c.plan_reply.read(id);
        }
        let decision = self.plan_now(&msg.request, now_ms)?;
        let mut reply = PlanReply {
            request_id: id.clone(),
            cluster: self.cluster.clone(),
            decision,
            hold: None,
        };
        if !reply.decision.feasible {
            return Ok(reply);
        }
        let ttl = if msg.ttl_ms == 0 {
            self.default_ttl_ms
        } else {
            msg.ttl_ms
        };
        let expires_ms = now_ms.saturating_add(ttl);
        reply.hold = Some(HoldInfo { expires_ms });
        let hold = new_hold(&msg.request, reply.clone(), expires_ms, false);
        self.apply(Batch {
            put_holds: vec![hold],
            ..Batch::default()
        })?;
        Ok(reply)
    }
}

/// The hold of `request` for the plan `reply`, lapsing at `expires_ms`; `committing` when a
/// commit of it starts at once (admission at commit). The Kubernetes claims of the request are
/// kept by volume key (a bound volume's claimRef names them).
pub(super) fn new_hold(request: &PlanRequest, reply: PlanReply, expires_ms: u64, committing: bool) -> Hold {
    Hold {
        request_id: request.request_id.clone(),
        workflow: request.workflow.name.clone(),
        expires_ms,
        reply: reply.into(),
        committing,
        committing_since_ms: 0,
        claims: request
            .workflow
            .volumes
            .iter()
            .filter_map(|v| match &v.source {
                fedvol_common::model::VolumeSource::Claim(c) => Some((
                    v.key.clone(),
                    ClaimRef {
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        uid: c.uid.clone(),
                    },
                )),
                fedvol_common::model::VolumeSource::Fuzzball(_) => None,
            })
            .collect(),
        user: request.user.clone(),
    }
}
