//! Commit, the state halves: `begin_commit` checks the hold and marks it `committing`;
//! `finish_commit` records the drivers' results (the saga around them is the commit endpoint's).

use std::collections::BTreeMap;
use std::sync::Arc;

use fedvol_common::decision::{Action, NewVolume};
use fedvol_common::funnel::{PlanRequest, VolumeId};
use fedvol_common::model::{PersistentVolume, VolumePhase};
use fedvol_proto::Code;
use fedvol_proto::agent::{ActionMsg, ActionReply, HoldInfo, PlanReply, VolumeOutcome};

use super::core::{Core, CoreError, DriverResult, Next, ProvisionWork, claim_ref_for, event, outcome, refusal};
use super::hold::new_hold;
use super::records::{Commit, CommittedVolume, Hold, Holding, ManagedVolume};
use super::store::Batch;

impl Core {
    /// First half of commit: finds the hold, or (admission at commit) plans `msg.request` now
    /// and holds what it chose, and returns the provisionings to run; or the reply to give now:
    /// a repeated id gets the stored reply; a commit in progress, a fenced attempt
    /// (`released`), no hold and no request, a lapsed hold, or a request that no longer fits
    /// (`no_longer_fits`, or `capacity_in_flight` when it would fit without other requests'
    /// holds) is refused, and nothing changes.
    ///
    /// Errors: the store write failed.
    pub fn begin_commit(&mut self, msg: &ActionMsg, now_ms: u64) -> Result<Next<Vec<ProvisionWork>>, CoreError> {
        let request_id = msg.request_id.as_str();
        if let Some(c) = self.ledger.commits().get(request_id) {
            let mut reply = c.reply.clone();
            reply.decision = Some(c.plan_reply.read(request_id)?.decision);
            return Ok(Next::Answer(Box::new(reply)));
        }
        if self.in_flight.contains(request_id) {
            return Ok(Next::Answer(Box::new(refusal(
                &self.cluster,
                request_id,
                Code::CommitInProgress,
                "a commit of this request is already running; retry with the same request id",
            ))));
        }
        if let Some((fenced, _)) = self.released.get(request_id)
            && msg.attempt <= *fenced
        {
            return Ok(Next::Answer(Box::new(refusal(
                &self.cluster,
                request_id,
                Code::Released,
                format!(
                    "attempt {} of this request was released on this cluster: it never commits here",
                    msg.attempt
                ),
            ))));
        }
        let hold = match (self.ledger.holds().get(request_id).cloned(), &msg.request) {
            (Some(hold), _) => hold,
            (None, Some(request)) => match self.admit(request, now_ms)? {
                Ok(hold) => hold,
                Err(refused) => return Ok(Next::Answer(refused)),
            },
            (None, None) => {
                return Ok(Next::Answer(Box::new(refusal(
                    &self.cluster,
                    request_id,
                    Code::NoHold,
                    "no hold for this request: it was never made, was released, or expired",
                ))));
            }
        };
        if hold.expires_ms <= now_ms {
            self.apply(Batch {
                remove_holds: vec![request_id.to_string()],
                ..Batch::default()
            })?;
            return Ok(Next::Answer(Box::new(refusal(
                &self.cluster,
                request_id,
                Code::HoldExpired,
                "the hold expired before the commit",
            ))));
        }
        let mut work = Vec::new();
        for (key, nv) in hold.new_volumes() {
            let Some(p) = self.base.provisioners.iter().find(|p| p.name == nv.provisioner) else {
                return Ok(Next::Answer(Box::new(refusal(
                    &self.cluster,
                    request_id,
                    Code::NoSuchProvisioner,
                    format!("provisioner `{}` is no longer in the inventory", nv.provisioner),
                ))));
            };
            work.push(ProvisionWork {
                key,
                provisioner: p.clone(),
                volume: nv,
            });
        }
        if !hold.committing {
            let mut marked = hold;
            marked.committing = true;
            marked.committing_since_ms = now_ms;
            self.apply(Batch {
                put_holds: vec![marked],
                ..Batch::default()
            })?;
        }
        self.in_flight.insert(request_id.to_string());
        Ok(Next::Run(work))
    }

    /// Admission at commit: plans `request` on the current state (under the caller's lock, so
    /// no concurrent commit can take the same capacity) and, when it fits, holds what it chose,
    /// marked `committing`, in one write. Returns the hold, or the refusal (with the re-plan)
    /// when it does not fit.
    ///
    /// Errors: the store write failed (nothing is held).
    fn admit(&mut self, request: &PlanRequest, now_ms: u64) -> Result<Result<Hold, Box<ActionReply>>, CoreError> {
        let decision = self.plan_now(request, now_ms)?;
        if !decision.feasible {
            let (code, why) = if self.fits_without_holds(request) {
                (
                    Code::CapacityInFlight,
                    "it does not fit now, but would without the commits of other requests in progress here: ask again shortly",
                )
            } else {
                (
                    Code::NoLongerFits,
                    "re-planned on this cluster's current state, the request no longer fits",
                )
            };
            let mut reply = refusal(&self.cluster, &request.request_id, code, why);
            reply.decision = Some(decision);
            return Ok(Err(Box::new(reply)));
        }
        let expires_ms = now_ms.saturating_add(self.default_ttl_ms);
        let reply = PlanReply {
            request_id: request.request_id.clone(),
            cluster: self.cluster.clone(),
            decision,
            hold: Some(HoldInfo { expires_ms }),
        };
        let mut hold = new_hold(request, reply, expires_ms, true);
        hold.committing_since_ms = now_ms;
        self.apply(Batch {
            put_holds: vec![hold.clone()],
            ..Batch::default()
        })?;
        Ok(Ok(hold))
    }

    /// True when `request` would fit if no other request held anything here (their commits
    /// are in progress, or their holds not yet released): what tells `capacity_in_flight`
    /// from `no_longer_fits`. Plans once more, on this rare path only.
    fn fits_without_holds(&self, request: &PlanRequest) -> bool {
        if self.ledger.holds().is_empty() {
            return false;
        }
        let mut without = self.ledger.clone();
        let ids: Vec<String> = without.holds().keys().cloned().collect();
        for id in ids {
            without.remove_hold(&id);
        }
        let (inv, state) = without.effective(&self.base, &self.index);
        let (prepared, _) = self.prepare(&inv, &without);
        super::core::plan_with(self.runner.as_ref(), &inv, &prepared, &state, request).feasible
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
        self.finish_commit_with_jobs(request_id, results, Vec::new(), now_ms)
    }

    /// [`Core::finish_commit`] of a commit that submitted `jobs` to the cluster's resource
    /// manager: they are recorded with the commit, in the same write.
    ///
    /// Errors: the store write failed (the commit did not happen).
    pub fn finish_commit_with_jobs(
        &mut self,
        request_id: &str,
        results: Vec<(ProvisionWork, DriverResult)>,
        jobs: Vec<fedvol_proto::batch::BatchJob>,
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
        if results.iter().any(|(_, r)| matches!(r, DriverResult::Failed(_))) {
            return self.record_failed_commit(hold, &results);
        }
        let sources: BTreeMap<String, String> = results
            .into_iter()
            .filter_map(|(w, r)| match r {
                DriverResult::Ok(src) => Some((w.key, src)),
                DriverResult::Failed(_) => None,
            })
            .collect();
        self.record_commit(hold, &sources, jobs, now_ms)
    }

    /// A commit whose drivers failed: the hold stays, no longer `committing`; the reply says
    /// what became of each volume tried (`failed`, or `rolled_back` when created, then removed).
    fn record_failed_commit(
        &mut self,
        hold: Hold,
        results: &[(ProvisionWork, DriverResult)],
    ) -> Result<ActionReply, CoreError> {
        let mut failures = Vec::new();
        let mut outcomes = Vec::new();
        for (w, r) in results {
            let (what, detail) = match r {
                DriverResult::Ok(_) => (
                    "rolled_back",
                    "created, then removed because another volume failed".to_string(),
                ),
                DriverResult::Failed(m) => {
                    failures.push(format!("volume `{}`: {m}", w.key));
                    ("failed", m.clone())
                }
            };
            outcomes.push(outcome(
                &w.key,
                &w.volume.name,
                Some(w.volume.provisioner.clone()),
                what,
                Some(detail),
            ));
        }
        let request_id = hold.request_id.clone();
        let mut unmarked = hold;
        unmarked.committing = false;
        self.apply(Batch {
            put_holds: vec![unmarked],
            ..Batch::default()
        })?;
        let mut reply = refusal(
            &self.cluster,
            &request_id,
            Code::ProvisioningFailed,
            failures.join("; "),
        );
        reply.volumes = outcomes;
        Ok(reply)
    }

    /// A commit whose drivers all succeeded (`sources`: each provisioned volume's asset, by
    /// volume key): the hold becomes a commit, with its allocations and volumes, in one write.
    fn record_commit(
        &mut self,
        hold: Hold,
        sources: &BTreeMap<String, String>,
        jobs: Vec<fedvol_proto::batch::BatchJob>,
        now_ms: u64,
    ) -> Result<ActionReply, CoreError> {
        let request_id = hold.request_id.clone();
        let mut rec = Recorded::default();
        for (key, vd) in &hold.reply.decision.volumes {
            let (Some(action), Some(name)) = (vd.action, vd.volume.clone()) else {
                continue;
            };
            let id = VolumeId {
                provisioner: vd.provisioner.clone(),
                name: name.clone(),
            };
            let (holding, what, detail, name) = match action {
                Action::Existing => (Holding::Existing, "existing", None, name),
                Action::Bind => {
                    let Some(mv) = self.bound(&hold, key, &id, now_ms) else {
                        continue;
                    };
                    rec.put_volumes.push(mv);
                    (Holding::Bound, "bound", None, name)
                }
                Action::Provision => {
                    let Some(nv) = vd.new_volume.as_ref() else { continue };
                    let source = sources.get(key).cloned();
                    rec.put_volumes
                        .push(provisioned(&hold, key, nv, source.clone(), now_ms));
                    (Holding::Provisioned, "provisioned", source, nv.name.clone())
                }
            };
            rec.outcomes
                .push(outcome(key, &name, vd.provisioner.clone(), what, detail));
            rec.volumes.push(CommittedVolume {
                key: key.clone(),
                id,
                holding,
            });
        }
        let mut reply = ActionReply::done(&self.cluster, &request_id, rec.outcomes);
        reply.jobs = jobs.clone();
        let mut answer = reply.clone();
        // The commit keeps the hold's answer as the text the hold already encoded: no copy of
        // the decision, no second encoding ([`super::reply`]).
        let commit = Commit {
            request_id: request_id.clone(),
            workflow: hold.workflow.clone(),
            allocations: hold.allocations().to_vec(),
            volumes: rec.volumes,
            reply,
            plan_reply: hold.reply.text().clone(),
            completion: None,
            completed_ms: 0,
            jobs,
        };
        self.apply(Batch {
            remove_holds: vec![request_id],
            put_commits: vec![commit],
            put_volumes: rec.put_volumes,
            ..Batch::default()
        })?;
        // The ledger no longer holds the hold: its decision is moved into the answer, not copied.
        answer.decision = Some(hold.reply.into_reply().decision);
        Ok(answer)
    }

    /// The existing volume `id` bound to volume `key` of `hold` (phase Bound; its claimRef set
    /// to the claim when it had none), with a `Bound` event. `None` when the volume is gone
    /// from the inventory.
    fn bound(&self, hold: &Hold, key: &str, id: &VolumeId, now_ms: u64) -> Option<ManagedVolume> {
        let pv = self
            .effective
            .volumes
            .iter()
            .find(|v| v.name == id.name && v.provisioner == id.provisioner)?;
        let mut pv: PersistentVolume = (**pv).clone();
        let mut mv = self.ledger.volume(id).cloned().unwrap_or(ManagedVolume {
            pv: Arc::new(pv.clone()),
            source: None,
            provisioned: false,
            deleted: false,
            events: Vec::new(),
        });
        pv.phase = VolumePhase::Bound;
        // A pre-bound volume keeps its claimRef, with the uid filled in when it had none (as
        // Kubernetes' binder does); any other gets one naming this request's claim.
        let uid = pv.claim_ref.as_ref().and_then(|r| r.uid.clone()).unwrap_or_default();
        if pv.claim_ref.is_none() || uid.is_empty() {
            let claim = hold.claims.get(key);
            let mut named = pv.claim_ref.clone().or_else(|| claim.cloned());
            if let (Some(n), Some(c)) = (named.as_mut(), claim) {
                n.uid = c.uid.clone();
            }
            pv.claim_ref = Some(claim_ref_for(named.as_ref(), &hold.workflow, key, &hold.request_id));
        }
        mv.pv = Arc::new(pv);
        mv.events.push(bound_event(hold, key, now_ms));
        Some(mv)
    }
}

/// What a commit records, volume by volume.
#[derive(Default)]
struct Recorded {
    /// The commit's volumes.
    volumes: Vec<CommittedVolume>,
    /// Volumes fedvol now manages (bound or provisioned).
    put_volumes: Vec<ManagedVolume>,
    /// What happened to each, for the reply.
    outcomes: Vec<VolumeOutcome>,
}

/// The `Bound` event of volume `key` of `hold`.
fn bound_event(hold: &Hold, key: &str, now_ms: u64) -> fedvol_proto::agent::VolumeEvent {
    event(
        now_ms,
        "Bound",
        format!("bound to request {} ({}.{key})", hold.request_id, hold.workflow),
    )
}

/// The new volume `nv` of volume `key` of `hold`, created at `source`: Bound to its claim, with
/// its `Provisioning`, `ProvisioningSucceeded` and `Bound` events (the Kubernetes volume provisioning design vocabulary).
fn provisioned(hold: &Hold, key: &str, nv: &NewVolume, source: Option<String>, now_ms: u64) -> ManagedVolume {
    let pv = nv.to_persistent_volume(
        VolumePhase::Bound,
        Some(claim_ref_for(
            nv.claim_ref.as_ref(),
            &hold.workflow,
            key,
            &hold.request_id,
        )),
    );
    let detail = source.clone().unwrap_or_default();
    ManagedVolume {
        pv: Arc::new(pv),
        source,
        provisioned: true,
        deleted: false,
        events: vec![
            event(
                // Provisioning began when the commit did.
                if hold.committing_since_ms > 0 {
                    hold.committing_since_ms
                } else {
                    now_ms
                },
                "Provisioning",
                format!("provisioning for request {}", hold.request_id),
            ),
            event(now_ms, "ProvisioningSucceeded", format!("created {detail}")),
            bound_event(hold, key, now_ms),
        ],
    }
}

impl Core {
    /// Holds whose commit was interrupted (the agent stopped after marking them `committing`
    /// and before recording the outcome), with the provisionings that commit may have started:
    /// their assets may exist without a record. See
    /// [`Core::finish_interrupted`].
    pub fn interrupted(&self) -> Vec<(String, Vec<ProvisionWork>)> {
        self.ledger
            .holds()
            .values()
            .filter(|h| h.committing && !self.in_flight.contains(&h.request_id))
            .map(|h| {
                let work = h
                    .new_volumes()
                    .into_iter()
                    .filter_map(|(key, nv)| {
                        let p = self.base.provisioners.iter().find(|p| p.name == nv.provisioner)?;
                        Some(ProvisionWork {
                            key,
                            provisioner: p.clone(),
                            volume: nv,
                        })
                    })
                    .collect();
                (h.request_id.clone(), work)
            })
            .collect()
    }

    /// Records that the interrupted commit of `request_id` was rolled back (its assets deleted
    /// by the caller): the hold is no longer `committing`, and lapses or is released as any.
    ///
    /// Errors: the store write failed.
    pub fn finish_interrupted(&mut self, request_id: &str) -> Result<(), CoreError> {
        let Some(mut hold) = self.ledger.holds().get(request_id).cloned() else {
            return Ok(());
        };
        hold.committing = false;
        self.apply(Batch {
            put_holds: vec![hold],
            ..Batch::default()
        })?;
        Ok(())
    }
}
