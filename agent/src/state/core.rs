//! The agent's state machine: plan (optionally holding what it chose), commit, release,
//! complete and the sweep of lapsed holds. Every change is written to the store before the
//! method returns (the service makes it durable before an answer that acknowledges it:
//! [`super::store::Store::sync_through`]), and the effective inventory is rebuilt, so the next
//! plan sees it.
//!
//! Driver work (creating and deleting assets) is asynchronous and slow, so commit and complete
//! come in two halves: `begin_*` checks and returns the work, the caller runs the drivers
//! without holding the state, and `finish_*` records the outcome.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use fedvol_common::decision::{Action, NewVolume, Reason};
use fedvol_common::funnel::{ClusterState, VolumeId, plan_cluster};
use fedvol_common::model::{
    ClaimRef, Inventory, NodeAffinity, PersistentVolume, Provisioner, ReclaimPolicy, VolumePhase,
};
use fedvol_common::wire::{
    ActionReply, HoldInfo, HoldSummary, ManagedVolumeInfo, PlanMsg, PlanReply, StatusReply, VERSION, VolumeEvent,
    VolumeOutcome,
};

use super::ledger::{InventoryIndex, Ledger};
use super::records::{Commit, CommittedVolume, Hold, Holding, ManagedVolume};
use super::store::{Batch, Store, StoreError};

/// How long a completed commit (with the records of the volumes its completion deleted) is
/// kept after its completion, ms: 10 minutes. Within it a repeated `complete` gets the stored
/// answer; coordinators answer later repeats from their own store, and keep nothing waiting on
/// an agent's completed commit beyond their commit phase's bound (minutes). Without pruning,
/// every workflow ever completed stayed in memory and in `status`, which outgrew NATS's
/// payload limit after some thousand workflows and slowed every change.
pub const COMPLETED_RETENTION_MS: u64 = 10 * 60 * 1000;

/// How often the sweep looks for completed commits past their retention, ms.
pub const PRUNE_EVERY_MS: u64 = 1000;

/// Errors of state operations that callers must surface as internal errors.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The durable store failed; the operation did not take effect.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A provisioning the caller must run for a commit.
#[derive(Debug, Clone)]
pub struct ProvisionWork {
    /// The workflow's volume key.
    pub key: String,
    /// The provisioner (its driver).
    pub provisioner: Provisioner,
    /// The volume to create.
    pub volume: NewVolume,
}

/// A deletion the caller must run for a completion.
#[derive(Debug, Clone)]
pub struct DeleteWork {
    /// The workflow's volume key.
    pub key: String,
    /// The provisioner (its driver).
    pub provisioner: Provisioner,
    /// The volume.
    pub id: VolumeId,
    /// Its asset, when fedvol created it.
    pub source: Option<String>,
}

/// What the first half of commit or complete decided: run drivers, or answer right away.
#[derive(Debug, Clone)]
pub enum Next<W> {
    /// Run this work, then call the matching `finish_*`.
    Run(W),
    /// Answer this now (a repeated id's stored reply, or a refusal).
    Answer(ActionReply),
}

/// The outcome of one driver call, as the caller reports it back.
#[derive(Debug, Clone)]
pub enum DriverResult {
    /// Done; the asset's source (provision) or a message (delete).
    Ok(String),
    /// Failed, with the driver's message.
    Failed(String),
}

/// The agent's state for one cluster.
#[derive(Debug)]
pub struct Core {
    cluster: String,
    base: Arc<Inventory>,
    /// Where each host of `base` is (rebuilt with `base`).
    index: InventoryIndex,
    /// The time sweep last pruned completed commits, ms since the epoch.
    pruned_ms: u64,
    /// `base`'s volumes merged with the managed ones, and the ledger's volumes generation they
    /// were merged at (holds and releases, most changes, do not change them).
    merged: Option<(u64, Vec<Arc<PersistentVolume>>)>,
    effective: Arc<Inventory>,
    state: Arc<ClusterState>,
    ledger: Ledger,
    store: std::sync::Arc<Store>,
    in_flight: HashSet<String>,
    default_ttl_ms: u64,
}

fn event(now_ms: u64, reason: &str, message: impl Into<String>) -> VolumeEvent {
    VolumeEvent {
        at_ms: now_ms,
        reason: reason.to_string(),
        message: message.into(),
    }
}

fn refusal(cluster: &str, request_id: &str, code: &str, message: impl Into<String>) -> ActionReply {
    ActionReply {
        v: VERSION,
        request_id: request_id.to_string(),
        cluster: cluster.to_string(),
        ok: false,
        volumes: Vec::new(),
        error: Some(Reason::new(code, message)),
    }
}

/// The claimRef a committed volume carries: the claim's own for Kubernetes claims, else
/// `fedvol/<workflow>.<volume key>` with the request id as uid.
fn claim_ref_for(nv_claim: Option<&ClaimRef>, workflow: &str, key: &str, request_id: &str) -> ClaimRef {
    nv_claim.cloned().unwrap_or_else(|| ClaimRef {
        namespace: "fedvol".to_string(),
        name: format!("{workflow}.{key}"),
        uid: Some(request_id.to_string()),
    })
}

impl Core {
    /// Opens the state for `cluster` on `store` (already loaded into `ledger`) serving `base`.
    pub fn new(cluster: &str, base: Inventory, store: Store, ledger: Ledger, default_ttl_ms: u64) -> Self {
        let base = Arc::new(base);
        let index = InventoryIndex::new(&base);
        let (eff, state) = ledger.effective(&base, &index);
        Core {
            cluster: cluster.to_string(),
            base,
            index,
            pruned_ms: 0,
            merged: None,
            effective: Arc::new(eff),
            state: Arc::new(state),
            ledger,
            store: std::sync::Arc::new(store),
            in_flight: HashSet::new(),
            default_ttl_ms,
        }
    }

    /// The cluster's name.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The inventory files' version being served.
    pub fn inventory_version(&self) -> &str {
        &self.base.version
    }

    /// The durable store, to wait for the disk outside the lock ([`Store::sync_through`]
    /// through [`Store::written`]) before answering.
    pub fn store(&self) -> std::sync::Arc<Store> {
        self.store.clone()
    }

    /// The effective inventory and live state (for read-only plans run outside the lock).
    pub fn snapshot(&self) -> (Arc<Inventory>, Arc<ClusterState>) {
        (self.effective.clone(), self.state.clone())
    }

    /// The view a dry-run plan of `request_id` must see: the usual one, or, when the request
    /// already holds or committed something, the view without it (replay gives the original
    /// answer).
    pub fn snapshot_for(&self, request_id: &str) -> (Arc<Inventory>, Arc<ClusterState>) {
        if !self.ledger.knows(request_id) {
            return self.snapshot();
        }
        let (inv, state) = self.ledger.without(request_id).effective(&self.base, &self.index);
        (Arc::new(inv), Arc::new(state))
    }

    /// Number of live holds.
    pub fn hold_count(&self) -> usize {
        self.ledger.holds().len()
    }

    /// Replaces the inventory (after a validated reload).
    pub fn replace_inventory(&mut self, base: Inventory) {
        self.index = InventoryIndex::new(&base);
        self.base = Arc::new(base);
        self.merged = None;
        self.rebuild();
    }

    fn rebuild(&mut self) {
        let generation = self.ledger.volumes_generation();
        let volumes = match &self.merged {
            Some((g, v)) if *g == generation => v.clone(),
            _ => {
                let v = self.ledger.merged_volumes(&self.base, &self.index);
                self.merged = Some((generation, v.clone()));
                v
            }
        };
        let (eff, state) = self.ledger.effective_with(&self.base, &self.index, volumes);
        self.effective = Arc::new(eff);
        self.state = Arc::new(state);
    }

    /// Removes holds whose lease lapsed (not those being committed), and prunes commits
    /// completed more than [`COMPLETED_RETENTION_MS`] ago with the records of the volumes their
    /// completion deleted (volumes left Released or Failed stay: they are still there). Returns
    /// the ids of the lapsed holds.
    ///
    /// Errors: the store write failed (nothing is removed).
    pub fn sweep(&mut self, now_ms: u64) -> Result<Vec<String>, CoreError> {
        let expired = self.ledger.expired(now_ms, &self.in_flight);
        let cutoff = now_ms.saturating_sub(COMPLETED_RETENTION_MS);
        // Looking for prunable commits reads every commit: at most once per PRUNE_EVERY_MS,
        // not at every plan (with thousands of live commits that dominated a plan's cost).
        let prune_now = now_ms.saturating_sub(self.pruned_ms) >= PRUNE_EVERY_MS;
        if prune_now {
            self.pruned_ms = now_ms;
        }
        let pruned: Vec<String> = if !prune_now {
            Vec::new()
        } else {
            self.ledger
                .commits()
                .values()
                .filter(|c| c.completion.is_some() && c.completed_ms <= cutoff)
                .map(|c| c.request_id.clone())
                .collect()
        };
        let mut gone_volumes = Vec::new();
        for id in &pruned {
            if let Some(c) = self.ledger.commits().get(id) {
                for cv in &c.volumes {
                    if self.ledger.volume(&cv.id).is_some_and(|mv| mv.deleted) {
                        gone_volumes.push(super::store::volume_key(&cv.id));
                    }
                }
            }
        }
        if expired.is_empty() && pruned.is_empty() {
            return Ok(expired);
        }
        self.store.write(&Batch {
            remove_holds: expired.clone(),
            remove_commits: pruned.clone(),
            remove_volumes: gone_volumes.clone(),
            ..Batch::default()
        })?;
        for id in &expired {
            self.ledger.remove_hold(id);
        }
        for id in &pruned {
            self.ledger.remove_commit(id);
        }
        for key in &gone_volumes {
            self.ledger.remove_volume(key);
        }
        if !pruned.is_empty() {
            tracing::info!(
                commits = pruned.len(),
                volumes = gone_volumes.len(),
                "completed commits pruned"
            );
        }
        self.rebuild();
        Ok(expired)
    }

    /// A plan that holds what it chose (`msg.reserve`). Serialised by the caller's lock, so
    /// concurrent reserving plans never get the same capacity. The same request id returns the
    /// stored answer and never a second hold. `elapsed_ms` is left for the caller.
    ///
    /// Errors: the store write failed (nothing is held).
    pub fn plan_and_hold(&mut self, msg: &PlanMsg, now_ms: u64) -> Result<PlanReply, CoreError> {
        let id = &msg.request.request_id;
        if let Some(h) = self.ledger.holds().get(id) {
            return Ok(h.reply.clone());
        }
        if let Some(c) = self.ledger.commits().get(id) {
            return Ok(c.plan_reply.clone());
        }
        self.sweep(now_ms)?;
        let decision = plan_cluster(&self.effective, &self.state, &msg.request);
        let mut reply = PlanReply {
            v: VERSION,
            request_id: id.clone(),
            cluster: self.cluster.clone(),
            decision,
            hold: None,
            error: None,
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
        let hold = Hold {
            request_id: id.clone(),
            workflow: msg.request.workflow.name.clone(),
            expires_ms,
            reply: reply.clone(),
            committing: false,
            claims: msg
                .request
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
        };
        self.store.write(&Batch {
            put_holds: vec![hold.clone()],
            ..Batch::default()
        })?;
        self.ledger.put_hold(hold);
        self.rebuild();
        Ok(reply)
    }

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
                "commit_in_progress",
                "a commit of this request is already running; retry with the same request id",
            )));
        }
        let Some(hold) = self.ledger.holds().get(request_id).cloned() else {
            return Ok(Next::Answer(refusal(
                &self.cluster,
                request_id,
                "no_hold",
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
                "hold_expired",
                "the hold expired before the commit",
            )));
        }
        let mut work = Vec::new();
        for (key, nv) in hold.new_volumes() {
            let Some(p) = self.base.provisioners.iter().find(|p| p.name == nv.provisioner) else {
                return Ok(Next::Answer(refusal(
                    &self.cluster,
                    request_id,
                    "no_such_provisioner",
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
                "no_hold",
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
            let mut reply = refusal(&self.cluster, request_id, "provisioning_failed", failures.join("; "));
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
                    let pv = PersistentVolume {
                        name: nv.name.clone(),
                        provisioner: Some(nv.provisioner.clone()),
                        capacity: nv.capacity,
                        access_modes: nv.access_modes,
                        volume_mode: nv.volume_mode,
                        labels: nv.labels.clone(),
                        annotations: nv.annotations.clone(),
                        phase: VolumePhase::Bound,
                        claim_ref: Some(claim_ref_for(nv.claim_ref.as_ref(), &workflow, key, request_id)),
                        reclaim_policy: nv.reclaim_policy,
                        being_deleted: false,
                        node_affinity: nv.host.as_ref().map(|h| NodeAffinity {
                            terms: vec![vec![fedvol_common::model::LabelRequirement {
                                key: "kubernetes.io/hostname".into(),
                                operator: fedvol_common::model::SelectorOperator::In,
                                values: vec![h.clone()],
                            }]],
                        }),
                        origin: Default::default(),
                    };
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
        let reply = ActionReply {
            v: VERSION,
            request_id: request_id.to_string(),
            cluster: self.cluster.clone(),
            ok: true,
            volumes: outcomes,
            error: None,
        };
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

    /// Frees the hold of `request_id`. Releasing an unknown or already released id succeeds
    /// (idempotent); a hold being committed, or a committed request, is refused.
    ///
    /// Errors: the store write failed.
    pub fn release(&mut self, request_id: &str) -> Result<ActionReply, CoreError> {
        if self.in_flight.contains(request_id) {
            return Ok(refusal(
                &self.cluster,
                request_id,
                "commit_in_progress",
                "the hold is being committed",
            ));
        }
        if self.ledger.commits().contains_key(request_id) {
            return Ok(refusal(
                &self.cluster,
                request_id,
                "committed",
                "the request is committed: use complete to end it",
            ));
        }
        if self.ledger.holds().contains_key(request_id) {
            self.store.write(&Batch {
                remove_holds: vec![request_id.to_string()],
                ..Batch::default()
            })?;
            self.ledger.remove_hold(request_id);
            self.rebuild();
        }
        Ok(ActionReply {
            v: VERSION,
            request_id: request_id.to_string(),
            cluster: self.cluster.clone(),
            ok: true,
            volumes: Vec::new(),
            error: None,
        })
    }

    /// First half of complete: the deletions to run (volumes with reclaim policy Delete whose
    /// provisioner is known), or the reply to give now (a repeated id gets the stored reply; an
    /// unknown id is refused).
    pub fn begin_complete(&mut self, request_id: &str) -> Next<Vec<DeleteWork>> {
        let Some(c) = self.ledger.commits().get(request_id) else {
            return Next::Answer(refusal(
                &self.cluster,
                request_id,
                "not_committed",
                "no committed request with this id",
            ));
        };
        if let Some(done) = &c.completion {
            return Next::Answer(done.clone());
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
            // Seed 001: the deleter is the provisioner that made the volume. A volume fedvol did
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
                "not_committed",
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
        let reply = ActionReply {
            v: VERSION,
            request_id: request_id.to_string(),
            cluster: self.cluster.clone(),
            ok: true,
            volumes: outcomes,
            error: None,
        };
        commit.completion = Some(reply.clone());
        commit.completed_ms = now_ms;
        // Kept for the retention only to answer a repeated complete: the plan's trace and the
        // allocations (no longer counted) are dropped, so a completed workflow costs a small
        // record, not its whole decision (the soak: ~20 KB of memory per completed workflow
        // for 10 minutes, hundreds of MiB per agent at ~50 completions/s).
        commit.plan_reply.decision.trace = Vec::new();
        commit.plan_reply.decision.allocations = Vec::new();
        commit.allocations = Vec::new();
        self.store.write(&Batch {
            put_commits: vec![commit.clone()],
            put_volumes: put_volumes.clone(),
            ..Batch::default()
        })?;
        self.ledger.put_commit(commit);
        for mv in put_volumes {
            self.ledger.put_volume(mv);
        }
        self.rebuild();
        Ok(reply)
    }

    /// Cluster load in [0, 1] on the effective inventory (what heartbeats report).
    pub fn load(&self) -> f64 {
        fedvol_common::funnel::cluster_load(&self.effective)
    }

    /// The agent's status: holds, live commits, managed volumes with events (not those whose
    /// asset was deleted: they are history, and listing them made the answer grow with every
    /// workflow ever completed), capacity in use.
    pub fn status(&self) -> StatusReply {
        StatusReply {
            v: VERSION,
            cluster: self.cluster.clone(),
            inventory_version: self.base.version.clone(),
            holds: self
                .ledger
                .holds()
                .values()
                .map(|h| HoldSummary {
                    request_id: h.request_id.clone(),
                    workflow: h.workflow.clone(),
                    expires_ms: h.expires_ms,
                })
                .collect(),
            committed: self
                .ledger
                .commits()
                .values()
                .filter(|c| c.completion.is_none())
                .map(|c| c.request_id.clone())
                .collect(),
            volumes: self
                .ledger
                .volumes()
                .values()
                .filter(|mv| !mv.deleted)
                .map(|mv| ManagedVolumeInfo {
                    name: mv.pv.name.clone(),
                    provisioner: mv.pv.provisioner.clone(),
                    capacity: mv.pv.capacity,
                    phase: format!("{:?}", mv.pv.phase),
                    request_id: mv.pv.claim_ref.as_ref().and_then(|c| c.uid.clone()),
                    events: mv.events.clone(),
                })
                .collect(),
            host_use: self.ledger.host_use(),
            load: self.load(),
        }
    }
}

fn outcome(key: &str, volume: &str, provisioner: Option<String>, what: &str, detail: Option<String>) -> VolumeOutcome {
    VolumeOutcome {
        key: key.to_string(),
        volume: volume.to_string(),
        provisioner,
        outcome: what.to_string(),
        detail,
    }
}
