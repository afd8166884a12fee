//! Commit, the state halves: `begin_commit` checks the hold and marks it `committing`;
//! `finish_commit` records the drivers' results (the saga around them is the commit endpoint's).

use std::collections::BTreeMap;
use std::sync::Arc;

use fedvol_common::decision::Action;
use fedvol_common::funnel::VolumeId;
use fedvol_common::model::{PersistentVolume, VolumePhase};
use fedvol_proto::Code;
use fedvol_proto::agent::{ActionReply, VolumeOutcome};

use super::core::{Core, CoreError, DriverResult, Next, ProvisionWork, claim_ref_for, event, outcome, refusal};
use super::records::{Commit, CommittedVolume, Holding, ManagedVolume};
use super::store::Batch;

impl Core {
    /// First half of commit: checks the hold and returns the provisionings to run, or the reply
    /// to give now (a repeated id gets the stored reply; no hold or a lapsed one is refused).
    ///
    /// Errors: the store write failed.
    pub fn begin_commit(&mut self, request_id: &str, now_ms: u64) -> Result<Next<Vec<ProvisionWork>>, CoreError> {
        if let Some(c) = self.ledger.commits().get(request_id) {
            return Ok(Next::Answer(c.reply.clone()));
        }
        if self.in_flight.contains(request_id) {
            return Ok(Next::Answer(refusal(
                &self.cluster,
                request_id,
                Code::CommitInProgress,
                "a commit of this request is already running; retry with the same request id",
            )));
        }
        let Some(hold) = self.ledger.holds().get(request_id).cloned() else {
            return Ok(Next::Answer(refusal(
                &self.cluster,
                request_id,
                Code::NoHold,
                "no hold for this request: it was never made, was released, or expired",
            )));
        };
        if hold.expires_ms <= now_ms {
            self.store.write(&Batch {
                remove_holds: vec![request_id.to_string()],
                ..Batch::default()
            })?;
            self.ledger.remove_hold(request_id);
            self.rebuild();
            return Ok(Next::Answer(refusal(
                &self.cluster,
                request_id,
                Code::HoldExpired,
                "the hold expired before the commit",
            )));
        }
        let mut work = Vec::new();
        for (key, nv) in hold.new_volumes() {
            let Some(p) = self.base.provisioners.iter().find(|p| p.name == nv.provisioner) else {
                return Ok(Next::Answer(refusal(
                    &self.cluster,
                    request_id,
                    Code::NoSuchProvisioner,
                    format!("provisioner `{}` is no longer in the inventory", nv.provisioner),
                )));
            };
            work.push(ProvisionWork {
                key,
                provisioner: p.clone(),
                volume: nv,
            });
        }
        let mut marked = hold;
        marked.committing = true;
        self.store.write(&Batch {
            put_holds: vec![marked.clone()],
            ..Batch::default()
        })?;
        self.ledger.put_hold(marked);
        self.in_flight.insert(request_id.to_string());
        Ok(Next::Run(work))
    }

    /// Second half of commit: records the drivers' results. When every provisioning succeeded
    /// the hold becomes a durable commit (allocations, bound and provisioned volumes with their
    /// events) in one transaction; otherwise the hold stays (until release or expiry) and the
    /// failed volumes record `ProvisioningFailed`. Returns the reply to give.
    ///
    /// Errors: the store write failed (the commit did not happen).
    pub fn finish_commit(
        &mut self,
        request_id: &str,
        results: Vec<(ProvisionWork, DriverResult)>,
        now_ms: u64,
    ) -> Result<ActionReply, CoreError> {
        self.in_flight.remove(request_id);
        let Some(hold) = self.ledger.holds().get(request_id).cloned() else {
            return Ok(refusal(
                &self.cluster,
                request_id,
                Code::NoHold,
                "the hold disappeared during the commit",
            ));
        };
        let failures: Vec<String> = results
            .iter()
            .filter_map(|(w, r)| match r {
                DriverResult::Failed(m) => Some(format!("volume `{}`: {m}", w.key)),
                DriverResult::Ok(_) => None,
            })
            .collect();
        if !failures.is_empty() {
            let mut unmarked = hold.clone();
            unmarked.committing = false;
            let mut outcomes = Vec::new();
            for (w, r) in &results {
                let (outcome, detail) = match r {
                    DriverResult::Ok(_) => (
                        "rolled_back",
                        "created, then removed because another volume failed".to_string(),
                    ),
                    DriverResult::Failed(m) => ("failed", m.clone()),
                };
                outcomes.push(VolumeOutcome {
                    key: w.key.clone(),
                    volume: w.volume.name.clone(),
                    provisioner: Some(w.volume.provisioner.clone()),
                    outcome: outcome.to_string(),
                    detail: Some(detail),
                });
            }
            self.store.write(&Batch {
                put_holds: vec![unmarked.clone()],
                ..Batch::default()
            })?;
            self.ledger.put_hold(unmarked);
            let mut reply = refusal(&self.cluster, request_id, Code::ProvisioningFailed, failures.join("; "));
            reply.volumes = outcomes;
            return Ok(reply);
        }

        let workflow = hold.workflow.clone();
        let sources: BTreeMap<String, String> = results
            .into_iter()
            .filter_map(|(w, r)| match r {
                DriverResult::Ok(src) => Some((w.key, src)),
                DriverResult::Failed(_) => None,
            })
            .collect();
        let mut volumes = Vec::new();
        let mut put_volumes = Vec::new();
        let mut outcomes = Vec::new();
        for (key, vd) in &hold.reply.decision.volumes {
            let (Some(action), Some(name)) = (vd.action, vd.volume.clone()) else {
                continue;
            };
            let id = VolumeId {
                provisioner: vd.provisioner.clone(),
                name: name.clone(),
            };
            match action {
                Action::Existing => {
                    volumes.push(CommittedVolume {
                        key: key.clone(),
                        id,
                        holding: Holding::Existing,
                    });
                    outcomes.push(outcome(key, &name, vd.provisioner.clone(), "existing", None));
                }
                Action::Bind => {
                    let pv = self
                        .effective
                        .volumes
                        .iter()
                        .find(|v| v.name == name && v.provisioner == vd.provisioner);
                    let Some(pv) = pv.cloned() else { continue };
                    let mut pv: PersistentVolume = (*pv).clone();
                    let mut mv = self.ledger.volume(&id).cloned().unwrap_or(ManagedVolume {
                        pv: Arc::new(pv.clone()),
                        source: None,
                        provisioned: false,
                        deleted: false,
                        events: Vec::new(),
                    });
                    pv.phase = VolumePhase::Bound;
                    if pv.claim_ref.is_none() {
                        pv.claim_ref = Some(claim_ref_for(hold.claims.get(key), &workflow, key, request_id));
                    }
                    mv.pv = Arc::new(pv);
                    mv.events.push(event(
                        now_ms,
                        "Bound",
                        format!("bound to request {request_id} ({workflow}.{key})"),
                    ));
                    put_volumes.push(mv);
                    volumes.push(CommittedVolume {
                        key: key.clone(),
                        id,
                        holding: Holding::Bound,
                    });
                    outcomes.push(outcome(key, &name, vd.provisioner.clone(), "bound", None));
                }
                Action::Provision => {
                    let Some(nv) = vd.new_volume.as_ref() else { continue };
                    let source = sources.get(key).cloned();
                    let pv = nv.to_persistent_volume(
                        VolumePhase::Bound,
                        Some(claim_ref_for(nv.claim_ref.as_ref(), &workflow, key, request_id)),
                    );
                    let detail = source.clone().unwrap_or_default();
                    put_volumes.push(ManagedVolume {
                        pv: Arc::new(pv),
                        source: source.clone(),
                        provisioned: true,
                        deleted: false,
                        events: vec![
                            event(now_ms, "Provisioning", format!("provisioning for request {request_id}")),
                            event(now_ms, "ProvisioningSucceeded", format!("created {detail}")),
                            event(
                                now_ms,
                                "Bound",
                                format!("bound to request {request_id} ({workflow}.{key})"),
                            ),
                        ],
                    });
                    volumes.push(CommittedVolume {
                        key: key.clone(),
                        id,
                        holding: Holding::Provisioned,
                    });
                    outcomes.push(outcome(
                        key,
                        &nv.name,
                        Some(nv.provisioner.clone()),
                        "provisioned",
                        source,
                    ));
                }
            }
        }
        let reply = ActionReply::done(&self.cluster, request_id, outcomes);
        let commit = Commit {
            request_id: request_id.to_string(),
            workflow,
            allocations: hold.allocations().to_vec(),
            volumes,
            reply: reply.clone(),
            plan_reply: hold.reply.clone(),
            completion: None,
            completed_ms: 0,
        };
        self.store.write(&Batch {
            remove_holds: vec![request_id.to_string()],
            put_commits: vec![commit.clone()],
            put_volumes: put_volumes.clone(),
            ..Batch::default()
        })?;
        self.ledger.remove_hold(request_id);
        self.ledger.put_commit(commit);
        for mv in put_volumes {
            self.ledger.put_volume(mv);
        }
        self.rebuild();
        Ok(reply)
    }
}
