//! The decision document (docs/design.md §4): what every cluster answered for one workflow, which
//! cluster was chosen, and why everything else was not. Field names are stable; fields may be
//! added, never renamed. Maps keep workflow order (volumes, jobs) or answer order (clusters).

use indexmap::IndexMap;

use crate::model::{AccessModes, ReclaimPolicy, Resources, VolumeMode};
use crate::size::ByteSize;

/// One reason a candidate was rejected or a request failed: a stable code plus human text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reason {
    /// Stable machine code, e.g. `annotation_mismatch` (see [`codes`]).
    pub code: String,
    /// What happened, for people, e.g. "annotation tier=slow, volume wants tier=fast".
    pub message: String,
}

impl Reason {
    /// A reason with `code` and `message`.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Reason {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

/// Stable reason codes. Each names the rule (and seed) it comes from.
pub mod codes {
    /// Fuzzball "Annotations and Selection": provisioner status is not READY.
    pub const NOT_READY: &str = "not_ready";
    /// Fuzzball "Annotations and Selection": a requested annotation key is absent.
    pub const ANNOTATION_MISSING: &str = "annotation_missing";
    /// Fuzzball "Annotations and Selection": a requested annotation has another value.
    pub const ANNOTATION_MISMATCH: &str = "annotation_mismatch";
    /// Fuzzball "Annotations and Selection": the user's groups lack the permission for the operation.
    pub const PERMISSION_DENIED: &str = "permission_denied";
    /// Fuzzball "Annotations and Selection": a named provisioner does not exist.
    pub const NO_SUCH_PROVISIONER: &str = "no_such_provisioner";
    /// Fuzzball "Annotations and Selection": no provisioner holds a volume with that name.
    pub const NO_SUCH_VOLUME: &str = "no_such_volume";
    /// Fuzzball "Annotations and Selection": several provisioners hold a volume with that name (add `use:`).
    pub const AMBIGUOUS_VOLUME: &str = "ambiguous_volume";
    /// Fuzzball "Annotations and Selection": no provisioner passed every check.
    pub const NO_PROVISIONER: &str = "no_provisioner";
    /// the Kubernetes volume provisioning design: volume smaller than the request.
    pub const CAPACITY: &str = "capacity";
    /// the Kubernetes volume provisioning design: volume lacks a requested access mode.
    pub const ACCESS_MODES: &str = "access_modes";
    /// the Kubernetes volume provisioning design: volume mode differs.
    pub const VOLUME_MODE: &str = "volume_mode";
    /// the Kubernetes volume provisioning design: volume labels fail the claim's selector.
    pub const SELECTOR: &str = "selector";
    /// the Kubernetes volume provisioning design: volume class differs from the claim's.
    pub const CLASS_MISMATCH: &str = "class_mismatch";
    /// the Kubernetes volume provisioning design: volume is not Available (bound, released, failed, pending).
    pub const NOT_AVAILABLE: &str = "not_available";
    /// the Kubernetes volume provisioning design: volume is pre-bound to another claim.
    pub const CLAIMED_BY_OTHER: &str = "claimed_by_other";
    /// the Kubernetes volume provisioning design: volume is being deleted.
    pub const BEING_DELETED: &str = "being_deleted";
    /// fedvol: volume is held by another request's reservation.
    pub const RESERVED: &str = "reserved";
    /// the Kubernetes volume provisioning design: a claim's `volumeName` names another volume.
    pub const VOLUME_NAME: &str = "volume_name";
    /// the Kubernetes volume provisioning design: provisioning refused (unknown parameter, selector, mode, size).
    pub const PROVISIONING_REFUSED: &str = "provisioning_refused";
    /// the Kubernetes volume provisioning design: no class given and no default class, or class "" (no dynamic provisioning).
    pub const NO_DYNAMIC_PROVISIONING: &str = "no_dynamic_provisioning";
    /// the Kubernetes volume provisioning design: the claim's class has no provisioner definition and nothing binds.
    pub const NO_SUCH_CLASS: &str = "no_such_class";
    /// Cloud Assembly's provisioning funnel: zone not assigned to the workflow's project.
    pub const NOT_IN_PROJECT: &str = "not_in_project";
    /// Cloud Assembly's provisioning funnel: the project is unknown in this cluster.
    pub const NO_SUCH_PROJECT: &str = "no_such_project";
    /// Cloud Assembly's provisioning funnel: zone has no powered-on host.
    pub const NO_POWERED_ON_HOST: &str = "no_powered_on_host";
    /// Cloud Assembly's provisioning funnel: zone over a project limit.
    pub const PROJECT_LIMIT: &str = "project_limit";
    /// Cloud Assembly's provisioning funnel: image profile does not allow the job's image.
    pub const IMAGE_PROFILE: &str = "image_profile";
    /// Cloud Assembly's provisioning funnel: no flavor fits the job.
    pub const FLAVOR_PROFILE: &str = "flavor_profile";
    /// Cloud Assembly's provisioning funnel: a mounted volume's storage is not reachable from the zone.
    pub const STORAGE_UNREACHABLE: &str = "storage_unreachable";
    /// Cloud Assembly's provisioning funnel: host is powered off.
    pub const POWERED_OFF: &str = "powered_off";
    /// Cloud Assembly's provisioning funnel: a hard constraint fails on host ∪ zone tags.
    pub const HARD_CONSTRAINT: &str = "hard_constraint";
    /// Cloud Assembly's provisioning funnel: affinity to another job's host not met.
    pub const AFFINITY: &str = "affinity";
    /// Cloud Assembly's provisioning funnel: anti-affinity violated.
    pub const ANTI_AFFINITY: &str = "anti_affinity";
    /// Cloud Assembly's provisioning funnel: not enough hosts for a multi-host job.
    pub const MULTI_HOST: &str = "multi_host";
    /// Cloud Assembly's provisioning funnel: host lacks a required network.
    pub const NETWORK: &str = "network";
    /// Cloud Assembly's provisioning funnel: a node-local volume pins the job to another host.
    pub const PINNED_ELSEWHERE: &str = "pinned_elsewhere";
    /// Cloud Assembly's provisioning funnel: not enough free cpu / memory / instances / devices.
    pub const INSUFFICIENT: &str = "insufficient";
    /// Cloud Assembly's provisioning funnel: no zone has a host left after the filters.
    pub const NO_ZONE: &str = "no_zone";
    /// the Kubernetes volume provisioning design and Cloud Assembly's provisioning funnel: an existing persistent volume's node affinity excludes the host.
    pub const NODE_AFFINITY: &str = "node_affinity";
    /// Cloud Assembly's provisioning funnel step 4: the zone lost the zone choice to one with a lower priority number.
    pub const LOWER_PRIORITY: &str = "lower_priority";
    /// Cloud Assembly's provisioning funnel step 3.8: a fitting host of the chosen zone ranked after the chosen one(s) by
    /// the zone's placement policy (or its seeded draw).
    pub const POLICY_ORDER: &str = "policy_order";
    /// Cloud Assembly's provisioning funnel step 4.1: the zone lost the zone choice on soft constraints matched; or a host of
    /// the chosen zone met fewer soft constraints than the chosen host (Cloud Assembly's provisioning funnel step 3: hosts
    /// are selected "by matching a series of filters, including hard & soft constraints").
    pub const FEWER_SOFT_MATCHES: &str = "fewer_soft_matches";
    /// Cloud Assembly's provisioning funnel step 4.1: the zone tied and lost the seeded random draw.
    pub const SEEDED_DRAW: &str = "seeded_draw";
    /// fedvol: a volume the job mounts could not be resolved.
    pub const VOLUME_UNRESOLVED: &str = "volume_unresolved";
    /// fedvol (Open OnDemand's user mapping, a grid-mapfile): the workflow's user maps to no
    /// local account on a cluster that runs jobs as their users (stage `identity.user`).
    pub const UNMAPPED_USER: &str = "unmapped_user";
    /// fedvol: the cluster is not in the workflow's list / lost the ranking.
    pub const NOT_CHOSEN: &str = "not_chosen";
    /// fedvol: the cluster found no feasible placement.
    pub const INFEASIBLE: &str = "infeasible";
    /// fedvol: an operator drained the cluster (`fedvol clusters drain`): it answers plans but
    /// is never chosen for new work (as `kubectl drain` cordons a node, and Slurm's DRAIN
    /// state keeps running jobs while starting none).
    pub const DRAINED: &str = "drained";
}

/// How a volume request was resolved (docs/design.md §2 step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `use: <provisioner>`.
    Named,
    /// `name:` without `use:`.
    ByName,
    /// Annotation/permission selection.
    Automatic,
    /// A Kubernetes claim.
    Claim,
}

/// What the chosen volume is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// An Available existing volume is bound (the Kubernetes volume provisioning design).
    Bind,
    /// A new volume is provisioned (the Kubernetes volume provisioning design).
    Provision,
    /// A named persistent volume is used as it is (Fuzzball "Annotations and Selection").
    Existing,
}

/// A new volume the cluster would provision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewVolume {
    /// Deterministic name (the same request never creates two).
    pub name: String,
    /// Its provisioner / storage class.
    pub provisioner: String,
    /// Capacity in bytes (>= the request).
    pub capacity: ByteSize,
    /// Access modes.
    pub access_modes: AccessModes,
    /// Volume mode.
    pub volume_mode: VolumeMode,
    /// Labels (satisfying the claim's selector).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations, including `pv.kubernetes.io/provisioned-by` and the storage class.
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Reclaim policy from the provisioner.
    pub reclaim_policy: ReclaimPolicy,
    /// True for an ephemeral (per-workflow) volume.
    pub ephemeral: bool,
    /// The host a node-local volume lives on (set by placement).
    pub host: Option<String>,
    /// The claim the new volume is bound to from birth (the Kubernetes volume provisioning design: a provisioned PV's claimRef
    /// MUST point to the claim that led to its creation); `None` for Fuzzball volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<crate::model::ClaimRef>,
}

impl NewVolume {
    /// The persistent volume this new volume becomes, in `phase` and bound (or pre-bound) to
    /// `claim_ref` (the Kubernetes volume provisioning design: a dynamically provisioned volume matches its claim, carries its
    /// class and `provisioned-by`, and takes the class's reclaim policy). A node-local volume
    /// (`host` set) is pinned to its host by node affinity `kubernetes.io/hostname In [host]`,
    /// as Kubernetes' local volumes are.
    pub fn to_persistent_volume(
        &self,
        phase: crate::model::VolumePhase,
        claim_ref: Option<crate::model::ClaimRef>,
    ) -> crate::model::PersistentVolume {
        use crate::model::{LabelRequirement, NodeAffinity, SelectorOperator};
        crate::model::PersistentVolume {
            name: self.name.clone(),
            provisioner: Some(self.provisioner.clone()),
            capacity: self.capacity,
            access_modes: self.access_modes,
            volume_mode: self.volume_mode,
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            phase,
            claim_ref,
            reclaim_policy: self.reclaim_policy,
            being_deleted: false,
            node_affinity: self.host.as_ref().map(|h| NodeAffinity {
                terms: vec![vec![LabelRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: SelectorOperator::In,
                    values: vec![h.clone()],
                }]],
            }),
            origin: Default::default(),
        }
    }
}

/// One cluster's answer for one volume.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VolumeDecision {
    /// How it was resolved.
    pub mode: Mode,
    /// The provisioner chosen, if any.
    pub provisioner: Option<String>,
    /// The bound, existing or new volume's name.
    pub volume: Option<String>,
    /// Bind, provision or existing.
    pub action: Option<Action>,
    /// Why it could not be resolved.
    pub error: Option<Reason>,
    /// Automatic mode: how many provisioners passed every check (Fuzzball "Annotations and Selection": the first wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<usize>,
    /// The volume to create, for `provision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_volume: Option<NewVolume>,
}

/// One cluster's answer for one job.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct JobDecision {
    /// Chosen zone.
    pub zone: Option<String>,
    /// Chosen host (the first, for multi-host jobs).
    pub host: Option<String>,
    /// Why no placement was found.
    pub error: Option<Reason>,
    /// Every host of a multi-host job, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Soft constraints met by the chosen zone ∪ host.
    #[serde(default)]
    pub soft_matched: u32,
}

/// A rejected candidate with **every** reason it failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rejection {
    /// Candidate name (provisioner, volume, zone or host).
    pub candidate: String,
    /// All reasons, not just the first.
    pub reasons: Vec<Reason>,
}

/// What one named funnel stage did for one subject.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StageTrace {
    /// Stage name, e.g. `provisioner.annotations` or `host.hard_constraints`.
    pub stage: String,
    /// The volume or job the stage ran for.
    pub subject: String,
    /// Candidates that entered the stage.
    pub considered: usize,
    /// Candidates that left it.
    pub passed: usize,
    /// The others, each with all its reasons, in candidate order: at most the request's trace
    /// limit of them (see `omitted`).
    pub rejected: Vec<Rejection>,
    /// Rejected candidates not listed in `rejected` because the stage hit the trace limit
    /// (`why_not` explains any one of them in full).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// For every reason code, how many rejected candidates (listed or omitted) failed with it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reason_counts: std::collections::BTreeMap<String, usize>,
}

impl StageTrace {
    /// Whether a summary keeps this record: it rejected something, and it is not a ranking
    /// stage (`*.choice`), see [`ClusterDecision::summarize`].
    pub fn kept_in_summary(&self) -> bool {
        self.passed < self.considered && !self.stage.ends_with(".choice")
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Capacity a plan holds on one host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostAllocation {
    /// Zone of the host.
    pub zone: String,
    /// Host name.
    pub host: String,
    /// Job it is for.
    pub job: String,
    /// Amounts (cpu, memory, instances, devices).
    pub resources: Resources,
}

/// How a cluster answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterStatus {
    /// The agent answered within the deadline.
    Answered,
    /// No answer by the deadline.
    TimedOut,
    /// Known dead or no responders; not waited for.
    Unreachable,
    /// The agent answered with an error.
    Error,
}

/// One cluster's part of the decision, an object of these fields; a summary
/// ([`ClusterDecision::summarized`]) inside a [`Decision`] is written as its compact array
/// (`crate::dense`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterDecision {
    /// How the cluster answered.
    pub status: ClusterStatus,
    /// Time from request to answer, milliseconds.
    pub elapsed_ms: f64,
    /// The inventory version the answer used.
    pub inventory_version: Option<String>,
    /// True when every volume resolved and every job was placed.
    pub feasible: bool,
    /// Per volume, in workflow order.
    pub volumes: IndexMap<String, VolumeDecision>,
    /// Per placed job, in workflow order.
    pub jobs: IndexMap<String, JobDecision>,
    /// Every stage's record.
    pub trace: Vec<StageTrace>,
    /// Error for status `error` (or a cluster-level failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Reason>,
    /// Soft constraints met, summed over jobs (cluster choice).
    #[serde(default)]
    pub soft_matched: u32,
    /// Cluster load in [0, 1]: allocated / capacity of cpu and memory, the larger (cluster choice).
    #[serde(default)]
    pub load: f64,
    /// True when a volume requested by name exists here (cluster choice).
    #[serde(default)]
    pub holds_named_volume: bool,
    /// Host capacity the plan needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<HostAllocation>,
    /// The resource manager whose partitions and nodes the zones and hosts are (
    /// `slurm`), when the agent read them from one: a runner then submits each job with
    /// `--partition=<zone> --nodelist=<host(s)>` ([`ClusterDecision::runner_args`]). Absent
    /// for inventory files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_manager: Option<String>,
    /// What the plan would cost: priced volumes and jobs, hours, total; read by the
    /// `cost` cluster-choice step. Absent when nothing the plan uses has a price (and from
    /// agents of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::CostEstimate>,
    /// True when the coordinator stored this answer as a summary ([`ClusterDecision::summarize`],
    /// docs/design.md §4): the stages that rejected nothing, the ranking stages, every stage's
    /// listing of rejected candidates, the host allocations and the new volumes' specifications were left out;
    /// what remains is the status, feasibility, the per-volume and per-job picks, and per
    /// stage that rejected something its counts in and out and its reasons with their counts.
    /// `why_not` re-plans on the agent for what was left out. Absent (false) for a full
    /// answer and in records of earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summarized: bool,
}

impl ClusterDecision {
    /// Reduces this answer to its summary (see [`ClusterDecision::summarized`]), in place:
    /// stages with `considered == passed` are dropped, and so are the ranking stages
    /// (`zone.choice`, `host.choice`: they say why a pick was preferred among feasible
    /// candidates, and the pick itself is kept); the others keep `considered`, `passed`
    /// and `reason_counts` with `rejected` emptied into `omitted`; `allocations` are emptied and
    /// each volume's `new_volume` dropped. What the cluster choice reads (status, feasibility,
    /// soft constraints met, load, a named volume held, cost) is untouched, so the choice
    /// ranks a summarized answer as it ranked the full one. Idempotent: an answer already
    /// summarized (an agent's summary, past 16 clusters) is left as it is, not copied. What
    /// stays is kept where it is (not copied, as [`ClusterDecision::summary`] copies it); the
    /// result equals `summary()`.
    pub fn summarize(&mut self) {
        if self.summarized {
            return;
        }
        for v in self.volumes.values_mut() {
            v.new_volume = None;
        }
        self.trace.retain(StageTrace::kept_in_summary);
        for t in &mut self.trace {
            t.omitted += t.rejected.len();
            t.rejected = Vec::new();
        }
        self.allocations = Vec::new();
        self.summarized = true;
    }

    /// This answer's summary as a new value (the rule of [`ClusterDecision::summarize`]),
    /// without copying what the summary leaves out (the rejected candidates' listings, the
    /// allocations, the new volumes): an agent answering 1,000-cluster plans keeps the whole
    /// answer and sends this.
    pub fn summary(&self) -> ClusterDecision {
        ClusterDecision {
            status: self.status,
            elapsed_ms: self.elapsed_ms,
            inventory_version: self.inventory_version.clone(),
            feasible: self.feasible,
            volumes: self
                .volumes
                .iter()
                .map(|(k, v)| {
                    let v = VolumeDecision {
                        mode: v.mode,
                        provisioner: v.provisioner.clone(),
                        volume: v.volume.clone(),
                        action: v.action,
                        error: v.error.clone(),
                        passed: v.passed,
                        new_volume: None,
                    };
                    (k.clone(), v)
                })
                .collect(),
            jobs: self.jobs.clone(),
            trace: self
                .trace
                .iter()
                .filter(|t| t.kept_in_summary())
                .map(|t| StageTrace {
                    stage: t.stage.clone(),
                    subject: t.subject.clone(),
                    considered: t.considered,
                    passed: t.passed,
                    rejected: Vec::new(),
                    omitted: t.omitted + t.rejected.len(),
                    reason_counts: t.reason_counts.clone(),
                })
                .collect(),
            error: self.error.clone(),
            soft_matched: self.soft_matched,
            load: self.load,
            holds_named_volume: self.holds_named_volume,
            allocations: Vec::new(),
            resource_manager: self.resource_manager.clone(),
            cost: self.cost.clone(),
            summarized: true,
        }
    }

    /// The arguments a workflow runner gives the resource manager to run `job` where this
    /// decision placed it: for Slurm, `--partition=<zone> --nodelist=<host>[,<host>...]`
    /// (`--nodes=<n>` too for a multi-host job). `None` when the cluster has no resource manager
    /// or the job was not placed. An agent configured to run jobs (`slurm.jobs`) submits them
    /// itself, on this partition and node list; otherwise the workflow runner does.
    pub fn runner_args(&self, job: &str) -> Option<String> {
        if self.resource_manager.as_deref() != Some("slurm") {
            return None;
        }
        let j = self.jobs.get(job)?;
        let zone = j.zone.as_deref()?;
        let hosts = if j.hosts.is_empty() {
            vec![j.host.clone()?]
        } else {
            j.hosts.clone()
        };
        let mut args = format!("--partition={zone} --nodelist={}", hosts.join(","));
        if hosts.len() > 1 {
            args.push_str(&format!(" --nodes={}", hosts.len()));
        }
        Some(args)
    }

    /// An answer-less slot (timed out, unreachable, error) with `elapsed_ms`.
    pub fn without_answer(status: ClusterStatus, elapsed_ms: f64, error: Option<Reason>) -> Self {
        ClusterDecision {
            status,
            elapsed_ms,
            inventory_version: None,
            feasible: false,
            volumes: IndexMap::new(),
            jobs: IndexMap::new(),
            trace: Vec::new(),
            error,
            soft_matched: 0,
            load: 0.0,
            holds_named_volume: false,
            allocations: Vec::new(),
            summarized: false,
            resource_manager: None,
            cost: None,
        }
    }
}

/// One step of the cross-cluster choice, with the clusters it dropped and why. Read in either
/// form of its dropped clusters (`crate::dense`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChoiceStep {
    /// Rule name, e.g. `feasible`, `workflow_order`, `named_volume`, `soft_constraints`,
    /// `least_loaded`, `seeded_random`.
    pub rule: String,
    /// Clusters still in the running after the rule.
    #[serde(default)]
    pub kept: Vec<String>,
    /// Clusters the rule dropped, each with its reason.
    pub dropped: Vec<Rejection>,
}

/// The whole decision document. Written and read by `crate::dense`: summarized answers in their
/// compact array form and, when it holds any, its choice steps' dropped clusters compact too;
/// readers take either form.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Idempotency key of the request.
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Seed for every random choice (replayable).
    pub seed: u64,
    /// The cluster chosen, or null when nothing fits.
    pub chosen_cluster: Option<String>,
    /// Every cluster's slot, in the order asked.
    pub clusters: IndexMap<String, ClusterDecision>,
    /// The cross-cluster choice, rule by rule (absent: none).
    pub choice: Vec<ChoiceStep>,
    /// Every federation-wide quota that applies to the request, one entry per limited
    /// resource, with its use before the request, what the request asks and the limit. Empty
    /// when no quota applies (and then absent from the JSON).
    pub quota: Vec<crate::quota::QuotaCheck>,
    /// Why the coordinator refused the request before (or instead of) asking the
    /// clusters: `quota_exceeded` (with every exceeded quota's figures), `queue_full`,
    /// `queue_timeout`. `None` otherwise (and absent from the JSON).
    pub refused: Option<Reason>,
    /// The clusters asked that an operator had drained when the decision was planned, each
    /// with who, when and why ([`crate::drain`]): the choice's `drained` rule drops them, and
    /// every later run of the choice for this decision (a commit falling back, replay,
    /// why-not) reads them from here. Empty when none was (and then absent from the JSON).
    pub drained: crate::drain::Drains,
}

#[cfg(test)]
mod runner_tests {
    use super::*;

    #[test]
    fn runner_args_for_slurm_clusters_only() {
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 1.0, None);
        c.jobs.insert(
            "one".into(),
            JobDecision {
                zone: Some("gpu".into()),
                host: Some("n1".into()),
                ..Default::default()
            },
        );
        c.jobs.insert(
            "many".into(),
            JobDecision {
                zone: Some("batch".into()),
                host: Some("n1".into()),
                hosts: vec!["n1".into(), "n2".into()],
                ..Default::default()
            },
        );
        c.jobs.insert("unplaced".into(), JobDecision::default());
        assert_eq!(c.runner_args("one"), None, "no resource manager");
        c.resource_manager = Some("slurm".into());
        assert_eq!(c.runner_args("one").as_deref(), Some("--partition=gpu --nodelist=n1"));
        assert_eq!(
            c.runner_args("many").as_deref(),
            Some("--partition=batch --nodelist=n1,n2 --nodes=2")
        );
        assert_eq!(c.runner_args("unplaced"), None);
        assert_eq!(c.runner_args("absent"), None);
    }
}
