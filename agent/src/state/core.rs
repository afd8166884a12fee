//! The agent's state machine ([`Core`]): what it holds, and the helpers its operations share
//! (the operations themselves are in the sibling modules, one per concern). Every change is one
//! [`Batch`] given to `Core::apply`: written to the store before the method returns (the
//! service makes it durable before an answer that acknowledges it:
//! [`super::backend::Store::sync_through`]), then applied to the ledger, and the effective
//! inventory rebuilt, so the next plan sees it.
//!
//! Driver work (creating and deleting assets) is asynchronous and slow, so commit and complete
//! come in two halves: `begin_*` checks and returns the work, the caller runs the drivers
//! without holding the state, and `finish_*` records the outcome.

use std::collections::HashSet;
use std::sync::Arc;

use fedvol_common::decision::{ClusterDecision, NewVolume};
use fedvol_common::funnel::{ClusterState, PlanRequest, Prepared, VolumeId};
use fedvol_common::model::{ClaimRef, Inventory, Provisioner};
use fedvol_proto::Code;
use fedvol_proto::agent::{ActionReply, VolumeEvent, VolumeOutcome};

use super::backend::Store;
use super::ledger::{InventoryIndex, Ledger};
use super::merged::Merged;
use super::store::{Batch, StoreError};

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
    /// A commit's kept answer did not read back (its text is checked when it is made or
    /// loaded, so only damaged memory gets here); nothing changed.
    #[error("the answer kept for request {request_id} does not read back: {message}")]
    Unreadable {
        /// The request.
        request_id: String,
        /// The decoding error.
        message: String,
    },
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
    Answer(Box<ActionReply>),
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
    pub(super) cluster: String,
    pub(super) base: Arc<Inventory>,
    /// Where each host of `base` is (rebuilt with `base`).
    pub(super) index: InventoryIndex,
    /// The time sweep last pruned completed commits, ms since the epoch.
    pub(super) pruned_ms: u64,
    /// `base`'s volumes merged with the managed ones (holds and releases, most changes, do not
    /// change them), edited by [`Core::apply`] for the volumes a change touches.
    pub(super) merged: Option<Merged>,
    pub(super) effective: Arc<Inventory>,
    /// `effective` prepared for planning (host columns, tag sets, volume index), reused by
    /// every plan: prepared with `base`, then refreshed with `effective` (only the hosts in
    /// `prepared_hosts` and those the ledger now uses are read again).
    pub(super) prepared: Arc<Prepared>,
    /// The hosts (zone index, host index) whose allocations in `prepared` and `effective` may
    /// differ from `base`'s: those the ledger used when they were last built.
    pub(super) prepared_hosts: Vec<(usize, usize)>,
    /// Whether `effective` is the effective inventory of `base` whose hosts other than
    /// `prepared_hosts` are `base`'s own: then [`Core::rebuild`] may edit it in place
    /// ([`Ledger::effective_patched`]). False after a new inventory, until the next rebuild.
    pub(super) patchable: bool,
    pub(super) state: Arc<ClusterState>,
    pub(super) ledger: Ledger,
    pub(super) store: std::sync::Arc<Store>,
    pub(super) in_flight: HashSet<String>,
    /// Released requests: the highest attempt released and when, ms since the epoch. A commit
    /// of an attempt up to it is refused (`released`); kept for [`COMPLETED_RETENTION_MS`],
    /// in memory (a commit delayed past an agent restart is past its deadline and dropped).
    pub(super) released: std::collections::HashMap<String, (u32, u64)>,
    pub(super) default_ttl_ms: u64,
    /// The live inventory source's state, `None` with the files source.
    pub(super) source: Option<fedvol_proto::agent::SourceStatus>,
    /// On a cluster that runs jobs as their users: who each request's user runs as, and what
    /// its jobs count ([`JobRunner`]); `None`: plans as requested, no `identity.user` stage.
    pub(super) runner: Option<Arc<dyn JobRunner>>,
    /// Counts the changes of what plans read (`effective`, `prepared`, `state`, the
    /// inventory): two plans of one request at the same generation decide the same.
    pub(super) generation: u64,
    /// Plans answered on the current state, by request id, for the commit that follows
    /// ([`Core::keep_plan`]).
    pub(super) kept: super::kept::KeptPlans,
}

/// What a cluster that runs committed jobs as their users adds to every plan of a request
/// (implemented by [`crate::slurm::identity::Runner`]): the verdict of the `identity.user`
/// stage, and the request as the jobs will run (what fedvol counts is what the resource
/// manager allots, e.g. a site's default memory per core for a job that asks for none).
pub trait JobRunner: std::fmt::Debug + Send + Sync {
    /// The local account `user` runs as, or why none.
    fn run_as(&self, user: &str) -> fedvol_common::funnel::RunAs;
    /// `req` as its jobs will be counted and run here (borrowed when unchanged).
    fn counted<'a>(&self, req: &'a PlanRequest) -> std::borrow::Cow<'a, PlanRequest>;
}

/// A volume event at `now_ms`.
pub(super) fn event(now_ms: u64, reason: &str, message: impl Into<String>) -> VolumeEvent {
    VolumeEvent {
        at_ms: now_ms,
        reason: reason.to_string(),
        message: message.into(),
    }
}

/// A refusal of `cluster` for `request_id`: nothing changed.
pub(super) fn refusal(cluster: &str, request_id: &str, code: Code, message: impl Into<String>) -> ActionReply {
    ActionReply::refused(cluster, request_id, code.error(message))
}

/// The claimRef a committed volume carries: the claim's own for Kubernetes claims, else
/// `fedvol/<workflow>.<volume key>` with the request id as uid.
///
/// The claimRef always carries a uid, as Kubernetes' binder writes the claim's `metadata.uid`
/// (`pv_controller.go`, `bindVolumeToClaim`): the claim's own, or the request id for a claim
/// whose document has none. So a later claim of the same name (another request) is not taken
/// for this one once the volume is Released (`IsVolumeBoundToClaim` compares a set uid).
pub(super) fn claim_ref_for(nv_claim: Option<&ClaimRef>, workflow: &str, key: &str, request_id: &str) -> ClaimRef {
    let mut r = nv_claim.cloned().unwrap_or_else(|| ClaimRef {
        namespace: "fedvol".to_string(),
        name: format!("{workflow}.{key}"),
        uid: None,
    });
    if r.uid.as_deref().unwrap_or("").is_empty() {
        r.uid = Some(request_id.to_string());
    }
    r
}

impl Core {
    /// Opens the state for `cluster` on `store` (already loaded into `ledger`) serving `base`.
    pub fn new(cluster: &str, base: Inventory, store: Store, ledger: Ledger, default_ttl_ms: u64) -> Self {
        let base = Arc::new(base);
        let index = InventoryIndex::new(&base);
        let (eff, state) = ledger.effective(&base, &index);
        let prepared_hosts = ledger.hosts_in_use(&index);
        let prepared = Arc::new(Prepared::new(&base).refreshed(&eff, prepared_hosts.iter().copied()));
        Core {
            cluster: cluster.to_string(),
            base,
            index,
            pruned_ms: 0,
            merged: None,
            effective: Arc::new(eff),
            prepared,
            prepared_hosts,
            patchable: true,
            state: Arc::new(state),
            ledger,
            store: std::sync::Arc::new(store),
            in_flight: HashSet::new(),
            released: std::collections::HashMap::new(),
            default_ttl_ms,
            source: None,
            runner: None,
            generation: 0,
            kept: Default::default(),
        }
    }

    /// Sets how requests run here (a cluster that runs jobs as their users); `None`: plans as
    /// requested.
    pub fn set_runner(&mut self, runner: Option<Arc<dyn JobRunner>>) {
        self.runner = runner;
        self.generation += 1;
    }

    /// The runner, to plan outside the lock ([`plan_with`]).
    pub fn runner(&self) -> Option<Arc<dyn JobRunner>> {
        self.runner.clone()
    }

    /// Records the live inventory source's state (shown by status, and in heartbeats as
    /// `degraded` while its readings fail).
    pub fn set_source(&mut self, status: Option<fedvol_proto::agent::SourceStatus>) {
        self.source = status;
    }

    /// The resource manager the zones and hosts come from (`slurm`), for the decisions'
    /// `resource_manager`; `None` with inventory files.
    pub fn resource_manager(&self) -> Option<String> {
        self.source.as_ref().map(|s| s.source.clone())
    }

    /// Plans `request` on the state as it is now, lapsed holds swept first ([`Core::sweep`]),
    /// with the decision's `resource_manager` set: what a holding plan and admission at commit
    /// decide on.
    ///
    /// Errors: the sweep's store write failed.
    pub(super) fn plan_now(
        &mut self,
        request: &PlanRequest,
        now_ms: u64,
    ) -> Result<fedvol_common::decision::ClusterDecision, CoreError> {
        self.sweep(now_ms)?;
        let mut decision = match self.kept.take(request, self.generation) {
            Some(d) => d,
            None => plan_with(
                self.runner.as_ref(),
                &self.effective,
                &self.prepared,
                &self.state,
                request,
            ),
        };
        decision.resource_manager = self.resource_manager();
        Ok(decision)
    }

    /// The generation of what plans read now, to give [`Core::keep_plan`] with a plan made on
    /// [`Core::snapshot_for`]'s view of a request it does not know.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Keeps `decision`, planned for `request` on the state of `generation` (read with the
    /// snapshot it planned on), for the commit that follows: admission at commit takes it
    /// instead of planning again when nothing plans read changed since (the same inputs give
    /// the same decision). Kept only when it is still current, on a cluster that does not run
    /// jobs as their users (there a plan also reads the password database, which no generation
    /// follows), and for a request with nothing held or committed here (its view is the usual
    /// one). Not kept while a commit runs here, nor when `others_in_progress` other requests are
    /// being served beside this plan: their commits change the state before this plan's commit
    /// comes, so the copy would only be dropped again (under a stream of submits copying and
    /// dropping each answer for nothing was 9% of an agent's CPU).
    pub fn keep_plan(
        &mut self,
        request: &PlanRequest,
        generation: u64,
        decision: &ClusterDecision,
        others_in_progress: usize,
    ) {
        if generation == self.generation
            && others_in_progress == 0
            && self.in_flight.is_empty()
            && self.runner.is_none()
            && !self.ledger.knows(&request.request_id)
        {
            self.kept.keep(request, generation, decision);
        }
    }

    /// How many plans are kept for admission at commit ([`Core::keep_plan`]).
    #[cfg(test)]
    pub(crate) fn kept_plans(&self) -> usize {
        self.kept.len()
    }

    /// Why the cluster is degraded, when it is: its live inventory source cannot be read
    /// ([`fedvol_proto::agent::SourceStatus::degraded`]).
    pub fn degraded(&self) -> Option<String> {
        self.source.as_ref().and_then(|s| s.degraded())
    }

    /// The cluster's name.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The inventory files' version being served.
    pub fn inventory_version(&self) -> &str {
        &self.base.version
    }

    /// True when `request_id` has a hold or a commit here.
    pub fn knows(&self, request_id: &str) -> bool {
        self.ledger.knows(request_id)
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

    /// Hosts in the cluster's inventory (every zone), to judge what a plan costs.
    pub fn host_count(&self) -> usize {
        self.base.zones.iter().map(|z| z.hosts.len()).sum()
    }

    /// The view a dry-run plan of `request_id` must see, prepared for planning: the usual one,
    /// or, when the request already holds or committed something, the view without it (replay
    /// gives the original answer).
    pub fn snapshot_for(&self, request_id: &str) -> (Arc<Inventory>, Arc<Prepared>, Arc<ClusterState>) {
        if !self.ledger.knows(request_id) {
            return (self.effective.clone(), self.prepared.clone(), self.state.clone());
        }
        let without = self.ledger.without(request_id);
        let (inv, state) = without.effective(&self.base, &self.index);
        let (prepared, _) = self.prepare(&inv, &without);
        (Arc::new(inv), Arc::new(prepared), Arc::new(state))
    }

    /// `inv`, the effective inventory of `ledger`, prepared for planning from `prepared`: only
    /// the hosts either ledger holds capacity on are read again (every other host has its
    /// base allocations in both). Also returns the hosts `ledger` uses.
    pub(super) fn prepare(&self, inv: &Inventory, ledger: &Ledger) -> (Prepared, Vec<(usize, usize)>) {
        let hosts = ledger.hosts_in_use(&self.index);
        let again = self.prepared_hosts.iter().chain(&hosts).copied();
        (self.prepared.refreshed(inv, again), hosts)
    }

    /// Everything the state holds, as the store loads it.
    pub fn snapshot_state(&self) -> super::store::Snapshot {
        self.ledger.snapshot()
    }

    /// Number of live holds.
    pub fn hold_count(&self) -> usize {
        self.ledger.holds().len()
    }

    /// Replaces the inventory (after a validated reload).
    pub fn replace_inventory(&mut self, base: Inventory) {
        self.index = InventoryIndex::new(&base);
        self.prepared = Arc::new(Prepared::new(&base));
        self.prepared_hosts = Vec::new();
        self.patchable = false;
        self.base = Arc::new(base);
        self.merged = None;
        self.rebuild();
    }

    /// Writes `batch` durably, then applies it to the ledger (the one order: what the ledger
    /// counts is on disk), then rebuilds what plans read from the ledger ([`Core::rebuild`]):
    /// every change of the state goes through here. The rebuild is skipped when the batch
    /// cannot change what plans see: it only replaces holds already held with the same plan
    /// (a hold marked or unmarked `committing`).
    ///
    /// Errors: the store write failed (the ledger is unchanged).
    pub(super) fn apply(&mut self, batch: Batch) -> Result<(), CoreError> {
        self.store.write(&batch)?;
        let plans_see_it = !self.only_marks(&batch);
        let touched: Vec<String> = batch
            .put_volumes
            .iter()
            .map(|mv| super::store::volume_key(&mv.id()))
            .chain(batch.remove_volumes.iter().cloned())
            .collect();
        let Batch {
            put_holds,
            remove_holds,
            put_commits,
            put_volumes,
            remove_commits,
            remove_volumes,
        } = batch;
        for id in &remove_holds {
            self.ledger.remove_hold(id);
        }
        for hold in put_holds {
            self.ledger.put_hold(hold);
        }
        for id in &remove_commits {
            self.ledger.remove_commit(id);
        }
        for commit in put_commits {
            self.ledger.put_commit(commit);
        }
        for key in &remove_volumes {
            self.ledger.remove_volume(key);
        }
        for mv in put_volumes {
            self.ledger.put_volume(mv);
        }
        if !touched.is_empty()
            && let Some(m) = &mut self.merged
        {
            m.follow(
                touched.iter().map(String::as_str),
                &self.ledger,
                &self.base,
                &self.index,
            );
        }
        if plans_see_it {
            self.rebuild();
        }
        Ok(())
    }

    /// True when `batch` only replaces holds already held, each with the plan it had (its
    /// allocations and volumes): the counts and reservations plans read stay as they are.
    fn only_marks(&self, batch: &Batch) -> bool {
        let held = self.ledger.holds();
        batch.remove_holds.is_empty()
            && batch.put_commits.is_empty()
            && batch.put_volumes.is_empty()
            && batch.remove_commits.is_empty()
            && batch.remove_volumes.is_empty()
            && batch.put_holds.iter().all(|h| {
                held.get(&h.request_id).is_some_and(|old| {
                    old.reply.decision.allocations == h.reply.decision.allocations
                        && old.reply.decision.volumes == h.reply.decision.volumes
                })
            })
    }

    /// Rebuilds what plans read from the ledger: the effective inventory (edited in place when
    /// no plan holds the last one, [`Ledger::effective_patched`]; else built afresh), its
    /// prepared form (only the hosts whose use may have changed read again) and the live state.
    pub(super) fn rebuild(&mut self) {
        self.generation += 1;
        let generation = self.ledger.volumes_generation();
        let merged = match &mut self.merged {
            Some(m) if m.generation() == generation => m,
            other => other.insert(Merged::new(&self.ledger, &self.base, &self.index)),
        };
        let hosts = self.ledger.hosts_in_use(&self.index);
        let again = || self.prepared_hosts.iter().chain(&hosts).copied();
        // Edited in place when no plan holds the last one (a plan in flight keeps its
        // snapshot): only the hosts whose use may have changed are read again, and the
        // volumes are edited as the merged list was since (`Merged::bring`), not copied.
        let run = merged.sorted_run(&self.base);
        let state = match Arc::get_mut(&mut self.effective).filter(|_| self.patchable) {
            Some(prev) => {
                if !merged.bring(&mut prev.volumes) {
                    prev.volumes = merged.copy();
                }
                self.ledger.effective_patched(prev, &self.base, &self.index, again())
            }
            None => {
                let (eff, state) = self.ledger.effective_with(&self.base, &self.index, merged.copy());
                self.effective = Arc::new(eff);
                state
            }
        };
        // The managed volumes run sorted after the inventory's own: a name lookup searches
        // them by halves instead of walking every volume the agent made.
        self.prepared = Arc::new(self.prepared.refreshed_sorted(&self.effective, again(), run));
        self.prepared_hosts = hosts;
        self.patchable = true;
        self.state = Arc::new(state);
    }

    /// Cluster load in [0, 1] on the effective inventory (what heartbeats report; kept with
    /// its prepared form).
    pub fn load(&self) -> f64 {
        self.prepared.load()
    }
}

/// What happened to one volume, for an [`ActionReply`].
pub(super) fn outcome(
    key: &str,
    volume: &str,
    provisioner: Option<String>,
    what: &str,
    detail: Option<String>,
) -> VolumeOutcome {
    VolumeOutcome {
        key: key.to_string(),
        volume: volume.to_string(),
        provisioner,
        outcome: what.to_string(),
        detail,
    }
}

/// Plans `req` on `inv` as the cluster runs it: through `runner` when it runs jobs as their
/// users (the `identity.user` stage first, the jobs counted as they will run), else as
/// requested. The one place every plan of the agent goes through.
pub fn plan_with(
    runner: Option<&Arc<dyn JobRunner>>,
    inv: &Inventory,
    prepared: &Prepared,
    state: &ClusterState,
    req: &PlanRequest,
) -> fedvol_common::decision::ClusterDecision {
    match runner {
        None => fedvol_common::funnel::plan_prepared(inv, prepared, state, req),
        Some(r) => {
            let run_as = r.run_as(&req.user);
            let counted = r.counted(req);
            fedvol_common::funnel::plan_prepared_as(inv, prepared, state, &counted, Some(&run_as))
        }
    }
}
