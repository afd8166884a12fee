//! Complete, the state halves: the deletions to run, then the reclaim policies applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use fedvol_common::model::{ReclaimPolicy, VolumePhase};
use fedvol_proto::Code;
use fedvol_proto::agent::ActionReply;

use super::core::{Core, CoreError, DeleteWork, DriverResult, Next, event, outcome, refusal};
use super::records::Holding;
use super::reply::ReplyText;
use super::store::Batch;

impl Core {
    /// First half of complete: the deletions to run (volumes with reclaim policy Delete whose
    /// provisioner is known), or the reply to give now (a repeated id gets the stored reply; an
    /// unknown id is refused).
    pub fn begin_complete(&mut self, request_id: &str) -> Next<Vec<DeleteWork>> {
        let Some(c) = self.ledger.commits().get(request_id) else {
            return Next::Answer(Box::new(refusal(
                &self.cluster,
                request_id,
                Code::NotCommitted,
                "no committed request with this id",
            )));
        };
        if let Some(done) = &c.completion {
            return Next::Answer(Box::new(done.clone()));
        }
        let mut work = Vec::new();
        for cv in &c.volumes {
            if cv.holding == Holding::Existing {
                continue;
            }
            let Some(mv) = self.ledger.volume(&cv.id) else { continue };
            if mv.pv.reclaim_policy != ReclaimPolicy::Delete {
                continue;
            }
            // The Kubernetes volume provisioning design: the deleter is the provisioner that made the volume. A volume fedvol did
            // not provision is deleted only when it names its provisioner
            // (`pv.kubernetes.io/provisioned-by`); otherwise no deleter is known and it is left
            // Released.
            if !mv.provisioned && !mv.pv.annotations.contains_key("pv.kubernetes.io/provisioned-by") {
                continue;
            }
            let Some(p) = cv
                .id
                .provisioner
                .as_ref()
                .and_then(|n| self.base.provisioners.iter().find(|p| &p.name == n))
            else {
                continue;
            };
            work.push(DeleteWork {
                key: cv.key.clone(),
                provisioner: p.clone(),
                id: cv.id.clone(),
                source: mv.source.clone(),
            });
        }
        Next::Run(work)
    }

    /// Second half of complete: frees the allocations and applies each volume's reclaim policy
    /// (Delete: deleted when the driver succeeded, else `Failed` with `VolumeFailedDelete`;
    /// Retain/Recycle, or Delete with no known deleter: `Released`, never bound again until an
    /// admin resets it). Returns the reply, also stored for repeated ids.
    ///
    /// Errors: the store write failed (nothing changed).
    pub fn finish_complete(
        &mut self,
        request_id: &str,
        results: Vec<(DeleteWork, DriverResult)>,
        now_ms: u64,
    ) -> Result<ActionReply, CoreError> {
        let Some(mut commit) = self.ledger.commits().get(request_id).cloned() else {
            return Ok(refusal(
                &self.cluster,
                request_id,
                Code::NotCommitted,
                "no committed request with this id",
            ));
        };
        if let Some(done) = &commit.completion {
            return Ok(done.clone());
        }
        let by_key: BTreeMap<String, DriverResult> = results.into_iter().map(|(w, r)| (w.key, r)).collect();
        let mut put_volumes = Vec::new();
        let mut outcomes = Vec::new();
        for cv in &commit.volumes {
            if cv.holding == Holding::Existing {
                continue;
            }
            let Some(mut mv) = self.ledger.volume(&cv.id).cloned() else {
                continue;
            };
            let prov = cv.id.provisioner.clone();
            match by_key.get(&cv.key) {
                Some(DriverResult::Ok(msg)) => {
                    mv.deleted = true;
                    Arc::make_mut(&mut mv.pv).phase = VolumePhase::Released;
                    mv.events
                        .push(event(now_ms, "Released", format!("request {request_id} completed")));
                    mv.events
                        .push(event(now_ms, "Deleted", format!("reclaim policy Delete: {msg}")));
                    outcomes.push(outcome(&cv.key, &cv.id.name, prov, "deleted", Some(msg.clone())));
                }
                Some(DriverResult::Failed(msg)) => {
                    Arc::make_mut(&mut mv.pv).phase = VolumePhase::Failed;
                    mv.events
                        .push(event(now_ms, "Released", format!("request {request_id} completed")));
                    mv.events.push(event(now_ms, "VolumeFailedDelete", msg.clone()));
                    outcomes.push(outcome(&cv.key, &cv.id.name, prov, "failed", Some(msg.clone())));
                }
                None => {
                    Arc::make_mut(&mut mv.pv).phase = VolumePhase::Released;
                    let (what, why) = match mv.pv.reclaim_policy {
                        ReclaimPolicy::Delete => (
                            "released",
                            "reclaim policy Delete, but no deleter is known for a volume fedvol did not provision; left Released",
                        ),
                        _ => (
                            "retained",
                            "reclaim policy Retain: kept, Released, not bound again until an admin resets it",
                        ),
                    };
                    mv.events.push(event(
                        now_ms,
                        "Released",
                        format!("request {request_id} completed; {why}"),
                    ));
                    outcomes.push(outcome(&cv.key, &cv.id.name, prov, what, Some(why.to_string())));
                }
            }
            put_volumes.push(mv);
        }
        let reply = ActionReply::done(&self.cluster, request_id, outcomes);
        commit.completion = Some(reply.clone());
        commit.completed_ms = now_ms;
        // Kept for the retention only to answer a repeated complete: the plan's trace and the
        // allocations (no longer counted) are dropped, so a completed workflow costs a small
        // record, not its whole decision (the soak: ~20 KB of memory per completed workflow
        // for 10 minutes, hundreds of MiB per agent at ~50 completions/s).
        let mut kept = commit.plan_reply.read(request_id)?;
        kept.decision.trace = Vec::new();
        kept.decision.allocations = Vec::new();
        commit.plan_reply = ReplyText::encode(&kept);
        commit.allocations = Vec::new();
        self.apply(Batch {
            put_commits: vec![commit],
            put_volumes,
            ..Batch::default()
        })?;
        Ok(reply)
    }
}
