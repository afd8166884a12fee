//! The bodies of the actions on a request's hold or allocation: commit, release, complete and
//! jobs all take an [`ActionMsg`] and answer an [`ActionReply`], which carries its own `error`
//! beside what became of each volume ([`VolumeOutcome`]).

use fedvol_common::decision::ClusterDecision;
use fedvol_common::funnel::PlanRequest;

use crate::code::ProtoError;
use crate::endpoint::{ReplyBody, RequestBody};
use crate::failure::Failure;

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
    /// agent admits while it waits for its restore ([`Restored`](crate::agent::Restored)); others are refused with
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
