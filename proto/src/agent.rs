//! The agent's operations (one agent service per cluster, queue group `agent.<cluster>`, subject
//! `<prefix>.cluster.<c>.<op>`; plan also on the broadcast `<prefix>.plan` of earlier releases)
//! and their bodies, plus the heartbeat an agent publishes: the table below is the whole list
//! ([`AgentOp`] shows it with its bodies).
//!
//! Every request that changes or reads state carries the request id (the idempotency key: the
//! same id gives the same answer and never a second reservation) and an absolute deadline in ms
//! since the epoch, after which it is dropped rather than answered late.

use std::collections::BTreeMap;

use fedvol_common::decision::ClusterDecision;
use fedvol_common::funnel::PlanRequest;
use fedvol_common::funnel::why_not::{Blocker, Target};
use fedvol_common::model::Resources;
use fedvol_common::size::ByteSize;

use crate::code::ProtoError;
use crate::endpoint::{NoArgs, ReplyBody, RequestBody, decode_unread};
use crate::failure::Failure;
use crate::operations::operations;

operations! {
    /// The agent's operations: the `<op>` token of `<prefix>.cluster.<c>.<op>` and the name of
    /// each service endpoint.
    pub enum AgentOp, served as AgentEndpoint {
        /// Run the funnel; with `reserve`, hold what it chose.
        Plan = "plan": PlanMsg => PlanReply;
        /// Turn a hold into allocations, provisioning new volumes.
        Commit = "commit": ActionMsg => ActionReply;
        /// Free a hold.
        Release = "release": ActionMsg => ActionReply;
        /// End a committed request: free its allocations, apply reclaim policies.
        Complete = "complete": ActionMsg => ActionReply;
        /// Explain why a zone, host or provisioner was not chosen.
        WhyNot = "why_not": WhyNotMsg => WhyNotReply;
        /// Holds, commits, managed volumes, capacity in use (the body is not read).
        Status = "status": NoArgs => StatusReply, decode_request = decode_unread;
        /// The effective inventory and the status (the body is not read).
        Inventory = "inventory": NoArgs => InventoryReply, decode_request = decode_unread;
        /// A coordinator says the commits it stored for the cluster were restored onto the agent's
        /// current state generation: an agent started on a fresh state admits new commits again.
        Restored = "restored": RestoredMsg => RestoredReply;
        /// The batch jobs a committed request runs on the cluster's resource manager, their states,
        /// and whether the agent completed the request once they all ended (`ActionReply::jobs`).
        Jobs = "jobs": ActionMsg => ActionReply;
        /// The whole answer to a plan the agent answered with its summary ([`PlanMsg::summary`]),
        /// while the agent keeps it.
        Answer = "answer": AnswerMsg => PlanReply;
    }
}

/// The workflow limits of [`fedvol_common::limits`], as a `bad_request` error naming `what`.
pub(crate) fn workflow_limits(what: &str, wf: &fedvol_common::model::Workflow) -> Result<(), ProtoError> {
    let problems = fedvol_common::limits::workflow_problems(wf);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(crate::Code::BadRequest.error(format!("{what}: {}", fedvol_common::limits::join_problems(&problems))))
    }
}

/// A request's choice options with default hours out of range are `bad_request`.
pub(crate) fn choice_options(what: &str, o: Option<&fedvol_common::choice::ChoiceOptions>) -> Result<(), ProtoError> {
    match o.map(fedvol_common::choice::ChoiceOptions::check) {
        Some(Err(e)) => Err(crate::Code::BadRequest.error(format!("{what}: choice: {e}"))),
        _ => Ok(()),
    }
}

/// Plan: run the funnel, optionally holding what it chose.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanMsg {
    /// The request (its `request_id` is the idempotency key).
    pub request: PlanRequest,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
    /// Hold the chosen volumes and host capacity under a lease.
    #[serde(default)]
    pub reserve: bool,
    /// Lease length in ms when reserving (the agent's default when 0).
    #[serde(default)]
    pub ttl_ms: u64,
    /// Answer with the summary of the answer ([`ClusterDecision::summarize`], in its compact
    /// form) and keep the whole answer for [`Answer`] (docs/design.md §4, "Summarized
    /// answers"): a coordinator asking many clusters stores only a few whole answers, so the
    /// others need not cross NATS. Agents of earlier releases ignore it and answer whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
}

impl RequestBody for PlanMsg {
    /// The workflow limits and the choice options' hours.
    fn check(&self, what: &str) -> Result<(), ProtoError> {
        workflow_limits(what, &self.request.workflow)?;
        choice_options(what, self.request.choice.as_ref())
    }

    fn deadline_ms(&self) -> Option<u64> {
        Some(self.deadline_ms)
    }

    fn request_id(&self) -> Option<&str> {
        Some(&self.request.request_id)
    }
}

/// Answer: the whole answer an agent kept for a plan it answered with its summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AnswerMsg {
    /// The request whose plan it was.
    pub request_id: String,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
}

impl RequestBody for AnswerMsg {
    fn deadline_ms(&self) -> Option<u64> {
        Some(self.deadline_ms)
    }

    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// A reservation (hold) an agent keeps for a request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HoldInfo {
    /// When the hold lapses, ms since the epoch.
    pub expires_ms: u64,
}

/// An agent's answer to a plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanReply {
    /// The request's id.
    pub request_id: String,
    /// The answering cluster.
    pub cluster: String,
    /// The cluster's part of the decision document (a summary, in its compact form, when the
    /// plan asked for [`PlanMsg::summary`]).
    #[serde(
        serialize_with = "fedvol_common::dense::write_answer",
        deserialize_with = "fedvol_common::dense::read_answer"
    )]
    pub decision: ClusterDecision,
    /// The hold, when one was asked for and the plan was feasible.
    #[serde(default)]
    pub hold: Option<HoldInfo>,
}

impl ReplyBody for PlanReply {}

/// Commit, release or complete: act on the hold or allocation of `request_id`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActionMsg {
    /// The request whose hold or allocation this is about.
    pub request_id: String,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
    /// Commit only: the request itself. With no hold for `request_id`, the agent plans it now,
    /// on its current state and under the same lock as every other change, and commits what it
    /// chose, or refuses with `no_longer_fits` / `capacity_in_flight` and the re-plan
    /// (admission at commit: nothing is held while a coordinator chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PlanRequest>,
    /// The coordinator's attempt number for this request on this cluster (commit and release;
    /// 0 when absent). A release fences every attempt up to its number: a commit of a fenced
    /// attempt is refused with `released`, so a commit that arrives after a coordinator
    /// settled it as released never takes effect.
    #[serde(default, skip_serializing_if = "crate::decisions::is_zero")]
    pub attempt: u32,
    /// Commit only: this commit restores a decision the coordinators stored committed on the
    /// cluster, onto an agent that starts from a fresh state. Such commits are the only ones an
    /// agent admits while it waits for its restore ([`Restored`]); others are refused with
    /// `restoring`. Absent (false) from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore: bool,
    /// Complete only: cancel the request's batch jobs first (`scancel`), then complete it
    /// (`fedvol cancel`). Without it, a complete of a request whose jobs still run is refused
    /// `jobs_running`. Absent (false) from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
    /// Commit with `restore` only: the batch jobs the restored commit runs, as the decision
    /// stores them (Slurm job ids and the states last read). An agent that runs jobs records
    /// them with the commit and follows them from there, instead of submitting the jobs again
    /// (they are in Slurm already). Absent (empty) from earlier releases, and for a commit
    /// that runs no jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::batch::BatchJob>,
    /// Jobs only: more requests asked about in the same call (one call per cluster and tick
    /// follows every committed workflow of the cluster); their answers come in
    /// [`ActionReply::more`]. An agent of an earlier release ignores it and answers
    /// `request_id` alone; the asker then asks for the others one by one. Absent (empty) from
    /// earlier releases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_request_ids: Vec<String>,
}

impl ActionMsg {
    /// An action on `request_id` before `deadline_ms`, with no request and attempt 0.
    pub fn new(request_id: &str, deadline_ms: u64) -> Self {
        ActionMsg {
            request_id: request_id.to_string(),
            deadline_ms,
            request: None,
            attempt: 0,
            restore: false,
            cancel: false,
            jobs: Vec::new(),
            more_request_ids: Vec::new(),
        }
    }
}

impl RequestBody for ActionMsg {
    fn deadline_ms(&self) -> Option<u64> {
        Some(self.deadline_ms)
    }

    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// What happened to one volume in a commit or a completion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VolumeOutcome {
    /// The workflow's volume key.
    pub key: String,
    /// The volume's name.
    pub volume: String,
    /// Its provisioner / storage class.
    pub provisioner: Option<String>,
    /// `bound`, `provisioned`, `existing`, `released`, `deleted`, `retained`, `rolled_back` or
    /// `failed`.
    pub outcome: String,
    /// Detail (path created, driver error...).
    #[serde(default)]
    pub detail: Option<String>,
}

/// The answer to commit, release or complete. It carries its own `error` beside the volumes'
/// outcomes: a commit that failed after creating some volumes says what became of each.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ActionReply {
    /// The request's id.
    pub request_id: String,
    /// The answering cluster.
    pub cluster: String,
    /// True when the action took effect (or had already, for a repeated id).
    pub ok: bool,
    /// Per volume, what was done.
    #[serde(default)]
    pub volumes: Vec<VolumeOutcome>,
    /// Why not, when `ok` is false.
    #[serde(default)]
    pub error: Option<ProtoError>,
    /// Commit with a request: the cluster's decision the commit was made with (it may differ
    /// from the broadcast plan: the state changed since), or the re-plan that no longer fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ClusterDecision>,
    /// Commit, jobs and complete on a cluster that runs jobs: the request's batch jobs with
    /// the states last seen (empty elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::batch::BatchJob>,
    /// Jobs only: when the agent completed the request by itself once every job ended, ms
    /// since the epoch (`volumes` then says what the completion did); 0 while it runs.
    #[serde(default, skip_serializing_if = "crate::decisions::is_zero")]
    pub completed_ms: u64,
    /// Jobs only: the answer for each of the request's [`ActionMsg::more_request_ids`], in
    /// their order, each as the answer to that request alone would be. Absent (empty) from
    /// earlier releases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<ActionReply>,
}

impl ActionReply {
    /// A success of `cluster` for `request_id` with `volumes`' outcomes.
    pub fn done(cluster: &str, request_id: &str, volumes: Vec<VolumeOutcome>) -> Self {
        ActionReply {
            request_id: request_id.to_string(),
            cluster: cluster.to_string(),
            ok: true,
            volumes,
            error: None,
            decision: None,
            jobs: Vec::new(),
            completed_ms: 0,
            more: Vec::new(),
        }
    }

    /// A refusal of `cluster` for `request_id` with `error` (nothing changed).
    pub fn refused(cluster: &str, request_id: &str, error: ProtoError) -> Self {
        ActionReply {
            request_id: request_id.to_string(),
            cluster: cluster.to_string(),
            ok: false,
            volumes: Vec::new(),
            error: Some(error),
            decision: None,
            jobs: Vec::new(),
            completed_ms: 0,
            more: Vec::new(),
        }
    }
}

impl ReplyBody for ActionReply {
    const CARRIES_ERROR: bool = true;

    /// The fields the previous release's readers of [`ActionReply`] required.
    fn legacy_failure_fields(f: &Failure) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("volumes".into(), serde_json::Value::Array(Vec::new()));
        if f.cluster.is_none() {
            m.insert("cluster".into(), "".into());
        }
        if f.request_id.is_none() {
            m.insert("request_id".into(), "".into());
        }
        m
    }
}

/// Why not: explain why a zone, host or provisioner was not chosen for a request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotMsg {
    /// The request to explain (re-planned in full, without holding anything).
    pub request: PlanRequest,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
    /// What to explain: the body's `zone`, `host` and `provisioner` fields.
    #[serde(flatten)]
    pub target: Target,
}

impl RequestBody for WhyNotMsg {
    /// The workflow limits (the choice options are not read: nothing is chosen).
    fn check(&self, what: &str) -> Result<(), ProtoError> {
        workflow_limits(what, &self.request.workflow)
    }

    fn deadline_ms(&self) -> Option<u64> {
        Some(self.deadline_ms)
    }

    fn request_id(&self) -> Option<&str> {
        Some(&self.request.request_id)
    }
}

/// The answer to why_not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotReply {
    /// The answering cluster.
    pub cluster: String,
    /// Every stage that rejected the named candidate(s) when re-planned today; empty when it
    /// passed every stage.
    pub blockers: Vec<Blocker>,
    /// A one-line summary of today's re-plan.
    pub summary: String,
    /// The inventory version the agent re-planned on (absent from earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_version: Option<String>,
    /// What the stored decision itself says (set by the coordinator, which keeps the
    /// record; absent from agents and earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<fedvol_common::funnel::why_not::RecordedExplanation>,
}

impl ReplyBody for WhyNotReply {
    /// The fields the previous release's readers of [`WhyNotReply`] required.
    fn legacy_failure_fields(f: &Failure) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if f.cluster.is_none() {
            m.insert("cluster".into(), "".into());
        }
        m.insert("blockers".into(), serde_json::Value::Array(Vec::new()));
        m.insert("summary".into(), f.error.message.clone().into());
        m
    }
}

/// A volume-lifecycle event (the Kubernetes volume provisioning design vocabulary).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VolumeEvent {
    /// When, ms since the epoch.
    pub at_ms: u64,
    /// `Provisioning`, `ProvisioningSucceeded`, `ProvisioningFailed`, `Bound`, `Released`,
    /// `Deleted` or `VolumeFailedDelete`.
    pub reason: String,
    /// Detail.
    pub message: String,
}

/// A volume fedvol created or bound, as an agent reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManagedVolumeInfo {
    /// Name.
    pub name: String,
    /// Provisioner / storage class.
    pub provisioner: Option<String>,
    /// Capacity in bytes.
    pub capacity: ByteSize,
    /// `Bound`, `Released`, `Failed`...
    pub phase: String,
    /// The request that holds it, if any.
    pub request_id: Option<String>,
    /// Events, oldest first.
    pub events: Vec<VolumeEvent>,
}

/// A hold as `status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HoldSummary {
    /// The request.
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Lapse time, ms since the epoch.
    pub expires_ms: u64,
}

/// The answer to status.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatusReply {
    /// The cluster.
    pub cluster: String,
    /// Version of the inventory being served.
    pub inventory_version: String,
    /// Live holds.
    pub holds: Vec<HoldSummary>,
    /// Committed requests (ids).
    pub committed: Vec<String>,
    /// Volumes fedvol created or bound, with their events.
    pub volumes: Vec<ManagedVolumeInfo>,
    /// Capacity held per host (holds and commits together).
    pub host_use: BTreeMap<String, Resources>,
    /// Cluster load in [0, 1].
    pub load: f64,
    /// Where the zones and hosts come from when not from the inventory file (`slurm`),
    /// and whether the last reading worked. Absent with the files source and from earlier
    /// releases (an optional addition: docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
}

impl ReplyBody for StatusReply {}

/// The state of a live inventory source: the agent reads its zones and hosts from
/// the cluster's resource manager on an interval, and keeps serving its last good reading when
/// a reading fails.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceStatus {
    /// The source: `slurm`.
    pub source: String,
    /// When the zones and hosts being served were read, ms since the epoch; 0 = never (the
    /// agent serves no zones yet).
    pub read_ms: u64,
    /// Readings that failed in a row since the last good one.
    #[serde(default)]
    pub failures: u64,
    /// The last reading's error, when it failed: the cluster is degraded (it serves an
    /// inventory that may be stale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SourceStatus {
    /// The one-line reason the cluster is degraded, when it is: `slurm unreadable since ...
    /// (N failed readings): <error>; serving the reading of <ms>`.
    pub fn degraded(&self) -> Option<String> {
        let e = self.error.as_ref()?;
        let serving = if self.read_ms == 0 {
            "no zones read yet".to_string()
        } else {
            format!("serving the reading of {} ms since the epoch", self.read_ms)
        };
        Some(format!(
            "{} unreadable ({} failed readings in a row): {e}; {serving}",
            self.source, self.failures
        ))
    }
}

/// The answer to inventory: the effective inventory (files plus fedvol's changes; driver
/// parameters that hold credentials are references, never secrets) and the status.
///
/// Lists that grow with what fedvol commits (the inventory's persistent volumes, the managed
/// volumes, the committed requests, the holds) are cut to fit the NATS server's `max_payload`
/// ([`InventoryReply::fit`]); `cut` then gives how many each holds in all.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InventoryReply {
    /// The cluster.
    pub cluster: String,
    /// The effective inventory.
    pub inventory: fedvol_common::model::Inventory,
    /// The status.
    pub status: StatusReply,
    /// Present when the lists were cut to fit the answer: how many each holds in all. Absent
    /// from whole answers and from agents of earlier releases (an optional addition:
    /// docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<InventoryCut>,
}

impl ReplyBody for InventoryReply {}

/// How many entries each list of a cut [`InventoryReply`] holds in all (the answer carries the
/// first ones of each, the same number of every list that was cut).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InventoryCut {
    /// `inventory.volumes`: persistent volumes of the effective inventory.
    pub volumes: usize,
    /// `status.volumes`: volumes fedvol created or bound.
    pub managed_volumes: usize,
    /// `status.committed`: committed requests.
    pub committed: usize,
    /// `status.holds`: live holds.
    pub holds: usize,
}

/// Room an [`InventoryReply`] leaves below `max_payload` for what wraps it (the coordinator's
/// `cluster` answer adds its registry entry and the version envelope), bytes.
pub const INVENTORY_ENVELOPE_BYTES: usize = 16 * 1024;

/// The encoded size of `v`, bytes (0 when it cannot be encoded, which plain data never fails).
fn encoded_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

impl InventoryReply {
    /// The counts of this answer's lists.
    pub fn totals(&self) -> InventoryCut {
        self.cut.clone().unwrap_or(InventoryCut {
            volumes: self.inventory.volumes.len(),
            managed_volumes: self.status.volumes.len(),
            committed: self.status.committed.len(),
            holds: self.status.holds.len(),
        })
    }

    /// Cuts the answer to at most `budget` bytes encoded, when it is larger: keeps the first `n`
    /// entries of each list that grows with commits (persistent volumes, managed volumes,
    /// committed requests, holds), `n` the largest that fits, and records the whole counts in
    /// `cut`. The rest (provisioners, zones and hosts, capacity in use) is kept whole: an
    /// answer whose inventory alone exceeds `budget` stays over it. Returns whether it cut.
    /// Each entry is encoded once to be measured (no whole encoding besides).
    pub fn fit(&mut self, budget: usize) -> bool {
        let totals = self.totals();
        let volumes = std::mem::take(&mut self.inventory.volumes);
        let managed = std::mem::take(&mut self.status.volumes);
        let committed = std::mem::take(&mut self.status.committed);
        let holds = std::mem::take(&mut self.status.holds);
        // Prefix sums of each list's entries as encoded, a comma each.
        fn sums<T: serde::Serialize>(v: &[T]) -> Vec<usize> {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.push(0);
            for x in v {
                let last = out.last().copied().unwrap_or(0);
                out.push(last + encoded_len(x) + 1);
            }
            out
        }
        let lists = [sums(&volumes), sums(&managed), sums(&committed), sums(&holds)];
        let cost = |n: usize| -> usize { lists.iter().map(|s| s[n.min(s.len() - 1)]).sum() };
        let longest = lists.iter().map(|s| s.len() - 1).max().unwrap_or(0);
        let keep = if encoded_len(self) + cost(longest) <= budget {
            longest
        } else {
            self.cut = Some(totals);
            let room = budget.saturating_sub(encoded_len(self));
            // The largest n whose first n entries of every list fit (cost grows with n).
            let (mut lo, mut hi) = (0, longest);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if cost(mid) <= room { lo = mid } else { hi = mid - 1 }
            }
            lo
        };
        self.inventory.volumes = volumes;
        self.status.volumes = managed;
        self.status.committed = committed;
        self.status.holds = holds;
        if keep == longest {
            return false;
        }
        self.inventory.volumes.truncate(keep);
        self.status.volumes.truncate(keep);
        self.status.committed.truncate(keep);
        self.status.holds.truncate(keep);
        true
    }
}

/// An agent's heartbeat on `<prefix>.heartbeat.<cluster>` (published, not requested).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Heartbeat {
    /// The cluster.
    pub cluster: String,
    /// This replica's id (unique per process).
    pub instance: String,
    /// Inventory version being served.
    pub inventory_version: String,
    /// Number of live holds.
    pub holds: usize,
    /// Cluster load in [0, 1].
    pub load: f64,
    /// Send time, ms since the epoch.
    pub sent_ms: u64,
    /// Heartbeat interval, ms (a cluster silent for 3 intervals is presumed dead).
    pub interval_ms: u64,
    /// The generation of the agent's state file (a random id made when the file was created
    /// with `--init`; empty for replicated state or an earlier release). A new generation tells
    /// the coordinators' reconciler that the agent starts from an empty state, so that the
    /// commits it had are restored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state_generation: String,
    /// Why the cluster is degraded, when it is (its live inventory source could not
    /// be read and it serves its last good reading). Absent when healthy and from earlier
    /// releases (an optional addition: docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// True while the agent, started on a fresh state (`--init`), waits for the coordinators to
    /// restore the commits they stored for its cluster, admitting no new commit meanwhile. The
    /// reconciler answers it with [`Restored`] once the restore ran to its end. Absent (false)
    /// otherwise and from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restoring: bool,
}

/// Restored: the coordinators' restore of the cluster's committed decisions onto state
/// generation `generation` ran to its end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoredMsg {
    /// The agent's state generation the restore was made for (from its heartbeat); an agent on
    /// another generation ignores the message.
    pub generation: String,
    /// Decisions committed again by this restore.
    #[serde(default)]
    pub restored: usize,
    /// Decisions this restore could not commit again (stored `failed`).
    #[serde(default)]
    pub failed: usize,
}

impl RequestBody for RestoredMsg {}

/// The agent's answer to [`RestoredMsg`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoredReply {
    /// The answering cluster.
    pub cluster: String,
    /// True when the agent admits new commits now (the generation was its own, or it was not
    /// waiting).
    pub admitting: bool,
}

impl ReplyBody for RestoredReply {}

#[cfg(test)]
mod inventory_fit_tests {
    use super::*;

    fn reply(commits: usize) -> InventoryReply {
        let status = StatusReply {
            cluster: "a".into(),
            inventory_version: "v".into(),
            holds: vec![HoldSummary {
                request_id: "held".into(),
                workflow: "w".into(),
                expires_ms: 1,
            }],
            committed: (0..commits).map(|i| format!("request-{i:06}")).collect(),
            volumes: (0..commits)
                .map(|i| ManagedVolumeInfo {
                    name: format!("pv-{i:06}"),
                    provisioner: Some("scratch".into()),
                    capacity: ByteSize(1 << 30),
                    phase: "Bound".into(),
                    request_id: Some(format!("request-{i:06}")),
                    events: vec![VolumeEvent {
                        at_ms: 1,
                        reason: "ProvisioningSucceeded".into(),
                        message: "created by the hostpath driver".into(),
                    }],
                })
                .collect(),
            host_use: BTreeMap::new(),
            load: 0.5,
            source: None,
        };
        InventoryReply {
            cluster: "a".into(),
            inventory: fedvol_common::model::Inventory::default(),
            status,
            cut: None,
        }
    }

    #[test]
    fn an_answer_over_the_budget_keeps_the_first_entries_and_every_count() {
        let mut small = reply(3);
        assert!(!small.fit(1 << 20), "a small answer is whole");
        assert_eq!(small.cut, None);
        let mut big = reply(5000);
        let whole = encoded_len(&big);
        assert!(whole > 1 << 20, "{whole}");
        assert!(big.fit(256 * 1024));
        assert!(encoded_len(&big) <= 256 * 1024, "{}", encoded_len(&big));
        let cut = big.cut.clone().unwrap();
        assert_eq!(
            (cut.committed, cut.managed_volumes, cut.holds, cut.volumes),
            (5000, 5000, 1, 0)
        );
        assert_eq!(big.totals(), cut);
        let kept = big.status.committed.len();
        assert!(kept > 100 && kept < 5000, "{kept}");
        assert_eq!(big.status.volumes.len(), kept, "the same number of each list");
        assert_eq!(big.status.committed[0], "request-000000", "the first ones");
        // It reads back, and an earlier reader's answer (no `cut`) reads as whole.
        let back: InventoryReply = serde_json::from_slice(&serde_json::to_vec(&big).unwrap()).unwrap();
        assert_eq!(back, big);
        let mut old = serde_json::to_value(reply(2)).unwrap();
        old.as_object_mut().unwrap().remove("cut");
        let old: InventoryReply = serde_json::from_value(old).unwrap();
        assert_eq!(old.cut, None);
    }
}
