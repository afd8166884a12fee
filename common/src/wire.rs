//! Wire types of the NATS contract (DESIGN §5): subjects and the JSON bodies agents,
//! coordinators and external provisioners exchange. Every body carries `v` (the protocol
//! version, [`VERSION`]); every request carries a `request_id` (idempotency key: the same id
//! gives the same answer and never a second reservation) and an absolute deadline in
//! milliseconds since the Unix epoch, after which it is dropped rather than answered late.

use crate::decision::{ClusterDecision, NewVolume, Reason};
use crate::funnel::PlanRequest;
use crate::model::Resources;
use crate::size::ByteSize;

/// Protocol version carried in every body's `v` field.
pub const VERSION: u32 = 1;

/// Default largest request body an agent or coordinator accepts, bytes (1 MiB, nats-server's
/// default `max_payload`). Larger bodies are refused with an error saying so; both daemons
/// take `maxBodyBytes` to change it.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The error message for a body of `size` bytes over a `limit` of bytes, naming `what` (e.g.
/// "submit request") and the setting that raises the limit.
pub fn body_too_large(what: &str, size: usize, limit: usize) -> String {
    format!("{what} body of {size} bytes is larger than this server's limit of {limit} bytes (maxBodyBytes)")
}

/// Decodes a `what` request body as `T`: it must be a JSON object (serde would otherwise fill a
/// struct's fields from an array, in order) whose `v` is the whole number [`VERSION`]; then the
/// same bytes are decoded straight as `T` (a `serde_json::Value` detour would lose byte sizes
/// above 2^64). `speaker` ("agent", "coordinator") names this side in the version error.
///
/// Errors: one sentence naming `what` and the problem (not a JSON object, missing `v`, a `v`
/// that is not a whole number or not [`VERSION`], a field of the wrong shape).
pub fn decode_body<T: serde::de::DeserializeOwned>(payload: &[u8], what: &str, speaker: &str) -> Result<T, String> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        v: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct PeekNumber {
        v: u64,
    }
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(format!("{what}: not a JSON object"));
    }
    let peek: Peek = serde_json::from_slice(payload).map_err(|e| format!("{what}: not a JSON object: {e}"))?;
    if peek.v.is_none() {
        return Err(format!("{what}: missing protocol version field `v`"));
    }
    match serde_json::from_slice::<PeekNumber>(payload) {
        Ok(p) if p.v == u64::from(VERSION) => {}
        Ok(p) => {
            return Err(format!(
                "{what}: protocol version {} is not supported (this {speaker} speaks {VERSION})",
                p.v
            ));
        }
        Err(_) => return Err(format!("{what}: the protocol version `v` must be a whole number")),
    }
    serde_json::from_slice(payload).map_err(|e| format!("{what}: {e}"))
}

/// Default subject prefix (`fedvol.v1`).
pub const DEFAULT_PREFIX: &str = "fedvol.v1";

/// Builds every subject of the contract from a prefix (default [`DEFAULT_PREFIX`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Default for Subjects {
    fn default() -> Self {
        Subjects::new(DEFAULT_PREFIX)
    }
}

/// Turns any name into one NATS subject token: characters other than ASCII letters, digits,
/// `-` and `_` become `_` (so `example.com/nfs` → `example_com_nfs`); empty becomes `_`.
pub fn subject_token(name: &str) -> String {
    let t: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() { "_".to_string() } else { t }
}

impl Subjects {
    /// Subjects under `prefix` (e.g. `fedvol.v1`).
    pub fn new(prefix: &str) -> Self {
        Subjects {
            prefix: prefix.trim_end_matches('.').to_string(),
        }
    }

    /// The prefix, without a trailing dot.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>.plan`: broadcast to every cluster (one answer per cluster via its queue group).
    pub fn plan(&self) -> String {
        format!("{}.plan", self.prefix)
    }

    /// `<prefix>.cluster.<cluster>.<op>` for `op` in plan, commit, release, complete, why_not,
    /// status, inventory.
    pub fn cluster(&self, cluster: &str, op: &str) -> String {
        format!("{}.cluster.{}.{}", self.prefix, cluster, op)
    }

    /// `<prefix>.heartbeat.<cluster>`: an agent's periodic [`Heartbeat`].
    pub fn heartbeat(&self, cluster: &str) -> String {
        format!("{}.heartbeat.{}", self.prefix, cluster)
    }

    /// `<prefix>.heartbeat.*`: every cluster's heartbeat.
    pub fn heartbeats(&self) -> String {
        format!("{}.heartbeat.*", self.prefix)
    }

    /// `<prefix>.provisioner.<cluster>.<name as token>.<op>` (op: provision, delete): an
    /// out-of-tree provisioner's endpoint (seed 001).
    pub fn provisioner(&self, cluster: &str, name: &str, op: &str) -> String {
        format!("{}.provisioner.{}.{}.{}", self.prefix, cluster, subject_token(name), op)
    }

    /// `<prefix>.coordinator.<op>.<user>`: a user's request to the coordinators (queue group
    /// `coordinator`). With auth on, NATS permissions tie the `<user>` token to the user's
    /// credentials, so it is the user's identity.
    pub fn coordinator(&self, op: &str, user: &str) -> String {
        format!("{}.coordinator.{}.{}", self.prefix, op, subject_token(user))
    }

    /// `<prefix>.coordinator.<op>.*`: what coordinators subscribe to for `op`.
    pub fn coordinator_all(&self, op: &str) -> String {
        format!("{}.coordinator.{}.*", self.prefix, op)
    }

    /// The coordinators' queue group.
    pub const COORDINATOR_QUEUE: &'static str = "coordinator";

    /// The queue group of one cluster's agents: `agent.<cluster>`.
    pub fn agent_queue(cluster: &str) -> String {
        format!("agent.{cluster}")
    }
}

/// The current time in milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `fedvol.v1.plan` / `cluster.<c>.plan`: run the funnel, optionally holding what it chose.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanMsg {
    /// Protocol version.
    pub v: u32,
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
    /// Protocol version.
    pub v: u32,
    /// The request's id.
    pub request_id: String,
    /// The answering cluster.
    pub cluster: String,
    /// The cluster's part of the decision document.
    pub decision: ClusterDecision,
    /// The hold, when one was asked for and the plan was feasible.
    #[serde(default)]
    pub hold: Option<HoldInfo>,
    /// Why the request could not be served (malformed, expired, internal).
    #[serde(default)]
    pub error: Option<Reason>,
}

/// `cluster.<c>.{commit,release,complete}`: act on the hold or allocation of `request_id`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActionMsg {
    /// Protocol version.
    pub v: u32,
    /// The request whose hold or allocation this is about.
    pub request_id: String,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
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
    /// `bound`, `provisioned`, `existing`, `released`, `deleted`, `retained` or `failed`.
    pub outcome: String,
    /// Detail (path created, driver error...).
    #[serde(default)]
    pub detail: Option<String>,
}

/// The answer to commit, release or complete.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActionReply {
    /// Protocol version.
    pub v: u32,
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
    pub error: Option<Reason>,
}

/// `cluster.<c>.why_not`: explain why a zone, host or provisioner was not chosen for a request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotMsg {
    /// Protocol version.
    pub v: u32,
    /// The request to explain (re-planned in full, without holding anything).
    pub request: PlanRequest,
    /// Absolute deadline, ms since the epoch.
    pub deadline_ms: u64,
    /// A zone name.
    #[serde(default)]
    pub zone: Option<String>,
    /// A host name.
    #[serde(default)]
    pub host: Option<String>,
    /// A provisioner name.
    #[serde(default)]
    pub provisioner: Option<String>,
}

/// One stage that blocked a candidate, with every rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Blocker {
    /// Stage name.
    pub stage: String,
    /// The volume or job the stage ran for.
    pub subject: String,
    /// The candidate as the stage names it (`zone/host` for hosts).
    pub candidate: String,
    /// Every reason.
    pub reasons: Vec<Reason>,
    /// A hint where one exists ("fits if size <= 800GiB").
    #[serde(default)]
    pub hint: Option<String>,
}

/// The answer to why_not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotReply {
    /// Protocol version.
    pub v: u32,
    /// The answering cluster.
    pub cluster: String,
    /// Every stage that rejected the named candidate(s); empty when it passed every stage.
    pub blockers: Vec<Blocker>,
    /// A one-line summary.
    pub summary: String,
    /// Why the request could not be served.
    #[serde(default)]
    pub error: Option<Reason>,
}

/// A volume-lifecycle event (seed 001 vocabulary).
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

/// The answer to status / inventory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatusReply {
    /// Protocol version.
    pub v: u32,
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
    pub host_use: std::collections::BTreeMap<String, Resources>,
    /// Cluster load in [0, 1].
    pub load: f64,
}

/// An agent's heartbeat on `<prefix>.heartbeat.<cluster>`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Heartbeat {
    /// Protocol version.
    pub v: u32,
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
}

/// `provisioner.<c>.<name>.provision`: ask an out-of-tree provisioner for a volume (seed 001).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProvisionMsg {
    /// Protocol version.
    pub v: u32,
    /// Idempotency key: the same id must not create a second asset.
    pub request_id: String,
    /// The volume to create (its name is deterministic).
    pub volume: NewVolume,
    /// The storage class parameters, as written in the inventory: a parameter whose key looks
    /// like a credential holds a secret *reference* (`file:/path`, `env:NAME`,
    /// [`crate::secrets::SecretRef`]) that the provisioner resolves itself; the agent never
    /// reads or sends the secret.
    pub parameters: std::collections::BTreeMap<String, String>,
}

/// `provisioner.<c>.<name>.delete`: ask an out-of-tree provisioner to delete a volume's asset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteMsg {
    /// Protocol version.
    pub v: u32,
    /// Idempotency key.
    pub request_id: String,
    /// The volume's name.
    pub volume: String,
    /// Its provisioner / storage class.
    pub provisioner: String,
}

/// An out-of-tree provisioner's answer to provision or delete.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProvisionerReply {
    /// Protocol version.
    pub v: u32,
    /// True when the asset was created (or deleted).
    pub ok: bool,
    /// Where the asset is (a path, a volume id), for provision.
    #[serde(default)]
    pub source: Option<String>,
    /// Why not.
    #[serde(default)]
    pub error: Option<String>,
}

/// Coordinator operations (the `<op>` token of [`Subjects::coordinator`]).
pub mod ops {
    /// Plan a workflow across the federation and, unless dry-run, commit it.
    pub const SUBMIT: &str = "submit";
    /// End a committed workflow (its cluster frees allocations and reclaims volumes).
    pub const COMPLETE: &str = "complete";
    /// Explain why a cluster did not choose a zone, host or provisioner for a decision.
    pub const WHY_NOT: &str = "why_not";
    /// The cluster registry.
    pub const CLUSTERS: &str = "clusters";
    /// Stored decisions, newest first.
    pub const LIST: &str = "list";
    /// One stored decision.
    pub const GET: &str = "get";
    /// Re-run a stored request with its seed and compare.
    pub const REPLAY: &str = "replay";
}

/// The lifecycle state of a stored decision (each change is a new KV revision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionState {
    /// Planned (dry-run, or about to commit).
    Planned,
    /// Committed on the chosen cluster.
    Committed,
    /// Completed: allocations freed, volumes reclaimed.
    Completed,
    /// Nothing fits, or every commit attempt failed.
    Failed,
}

/// One attempt to commit on a cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitAttempt {
    /// The cluster tried.
    pub cluster: String,
    /// True when it committed.
    pub ok: bool,
    /// Why not.
    #[serde(default)]
    pub error: Option<Reason>,
    /// What the commit did per volume.
    #[serde(default)]
    pub volumes: Vec<VolumeOutcome>,
}

/// A decision as the coordinators store it in the `fedvol_decisions` KV bucket, keyed by
/// request id.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredDecision {
    /// Protocol version.
    pub v: u32,
    /// Lifecycle state.
    pub state: DecisionState,
    /// The decision document (DESIGN §4).
    pub decision: crate::decision::Decision,
    /// The request as planned (for replay).
    pub request: PlanRequest,
    /// Commit attempts, in order.
    #[serde(default)]
    pub attempts: Vec<CommitAttempt>,
    /// The completion's outcome, once completed.
    #[serde(default)]
    pub completion: Option<ActionReply>,
    /// Last change, ms since the epoch.
    pub updated_ms: u64,
    /// True for a dry run (nothing held or committed).
    #[serde(default)]
    pub dry_run: bool,
}

/// `coordinator.submit.<user>`: plan a workflow everywhere; commit unless `dry_run`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SubmitMsg {
    /// Protocol version.
    pub v: u32,
    /// Idempotency key (the same id returns the same stored decision); empty = the coordinator
    /// picks one.
    #[serde(default)]
    pub request_id: String,
    /// The workflow.
    pub workflow: crate::model::Workflow,
    /// Only plan; hold and commit nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Seed (default: derived from the request id).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Groups the user claims. Used only when the coordinator runs without a directory (dev
    /// mode, with a warning); with a directory, groups come from it.
    #[serde(default)]
    pub groups: Vec<String>,
    /// How long to wait for clusters, ms (0 = the coordinator's default).
    #[serde(default)]
    pub timeout_ms: u64,
    /// Rejected candidates listed per funnel stage in the stored decision (0 = all; `None` = the
    /// coordinator's `traceLimit`, default [`crate::funnel::trace::STORED_TRACE_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_limit: Option<usize>,
}

/// The answer to submit (and to get): the stored decision, or why there is none.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SubmitReply {
    /// Protocol version.
    pub v: u32,
    /// The stored decision.
    #[serde(default)]
    pub stored: Option<StoredDecision>,
    /// Why the request failed before a decision existed.
    #[serde(default)]
    pub error: Option<Reason>,
}

/// `coordinator.{complete,get,replay}.<user>`: act on a stored decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionRef {
    /// Protocol version.
    pub v: u32,
    /// The decision's request id.
    pub request_id: String,
}

/// `coordinator.why_not.<user>`: ask the cluster of a stored decision why not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotQuery {
    /// Protocol version.
    pub v: u32,
    /// The decision's request id.
    pub request_id: String,
    /// The cluster to ask.
    pub cluster: String,
    /// A zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// A host.
    #[serde(default)]
    pub host: Option<String>,
    /// A provisioner.
    #[serde(default)]
    pub provisioner: Option<String>,
}

/// One cluster in the coordinator's registry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterInfo {
    /// Name.
    pub name: String,
    /// Heard from within three heartbeat intervals.
    pub alive: bool,
    /// Timed out on recent requests and not heard from since: not waited for.
    pub suspect: bool,
    /// Last heartbeat, ms since the epoch.
    pub last_seen_ms: u64,
    /// Inventory version of the last heartbeat.
    pub inventory_version: String,
    /// Load of the last heartbeat.
    pub load: f64,
    /// Live holds of the last heartbeat.
    pub holds: usize,
    /// Replica instances heard from.
    pub instances: Vec<String>,
}

/// The answer to clusters.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClustersReply {
    /// Protocol version.
    pub v: u32,
    /// Every cluster ever heard from, by name.
    #[serde(default)]
    pub clusters: Vec<ClusterInfo>,
    /// Why the coordinator could not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Reason>,
}

/// One line of the decisions list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionSummary {
    /// Request id (the KV key).
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Lifecycle state.
    pub state: DecisionState,
    /// Chosen cluster.
    pub chosen_cluster: Option<String>,
    /// Last change, ms since the epoch.
    pub updated_ms: u64,
}

/// The answer to list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListReply {
    /// Protocol version.
    pub v: u32,
    /// Newest first.
    #[serde(default)]
    pub decisions: Vec<DecisionSummary>,
    /// Why the coordinator could not answer (e.g. the decision store is unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Reason>,
}

/// The answer to replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReply {
    /// Protocol version.
    pub v: u32,
    /// True when every cluster that answered gave the same volumes and jobs as stored.
    pub identical: bool,
    /// Each difference, in words (including inventory versions that changed since).
    pub differences: Vec<String>,
    /// The replayed decision.
    #[serde(default)]
    pub replayed: Option<crate::decision::Decision>,
    /// Why no replay was possible.
    #[serde(default)]
    pub error: Option<Reason>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_follow_the_contract() {
        let s = Subjects::default();
        assert_eq!(s.plan(), "fedvol.v1.plan");
        assert_eq!(s.cluster("cluster-a", "commit"), "fedvol.v1.cluster.cluster-a.commit");
        assert_eq!(s.heartbeat("c"), "fedvol.v1.heartbeat.c");
        assert_eq!(
            s.provisioner("c", "example.com/nfs", "provision"),
            "fedvol.v1.provisioner.c.example_com_nfs.provision"
        );
        assert_eq!(Subjects::agent_queue("c"), "agent.c");
        assert_eq!(Subjects::new("x.v1.").plan(), "x.v1.plan");
    }

    #[test]
    fn tokens_never_contain_separators() {
        for n in ["a.b", "a b", "a/b", "*", ">", ""] {
            let t = subject_token(n);
            assert!(
                !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{t}"
            );
        }
    }
}
