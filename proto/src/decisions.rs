//! The decision record the coordinators keep in the JetStream KV bucket `fedvol_decisions`,
//! keyed by request id: the decision document (docs/design.md §4) with its lifecycle. Each state
//! change is a new revision (compare-and-set), and the record is a versioned body like every
//! message ([`crate::encode`]).

use fedvol_common::decision::Decision;
use fedvol_common::funnel::PlanRequest;

use crate::agent::{ActionReply, VolumeOutcome};
use crate::code::ProtoError;

/// The bucket the coordinators store decisions in unless configured otherwise
/// (`kv.bucket` in the coordinator's configuration; `fedvol ui --bucket`'s default).
pub const DEFAULT_BUCKET: &str = "fedvol_decisions";

/// The lifecycle state of a stored decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionState {
    /// Planned (dry-run, or about to commit).
    Planned,
    /// Committed on the chosen cluster.
    Committed,
    /// Completed: allocations freed, volumes reclaimed.
    Completed,
    /// Nothing fits, or every commit attempt failed (which of its meanings holds:
    /// [`StoredDecision::failure`]).
    Failed,
    /// Waiting for capacity (a `wait_for_capacity` submit that did not fit, or was
    /// over a quota): placed by the coordinators' queue, by priority then age, when room frees.
    /// Nothing is held or counted while queued.
    Queued,
    /// Ended by `fedvol cancel`: its batch jobs were cancelled, and its volumes reclaimed
    /// once the resource manager reported every job ended. A final state, like `completed`.
    Cancelled,
}

impl DecisionState {
    /// The state's wire name (`planned`, `committed`, `completed`, `failed`, `queued`,
    /// `cancelled`): the
    /// one spelling used in tables, metrics labels and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionState::Planned => "planned",
            DecisionState::Committed => "committed",
            DecisionState::Completed => "completed",
            DecisionState::Failed => "failed",
            DecisionState::Queued => "queued",
            DecisionState::Cancelled => "cancelled",
        }
    }
}

/// What became of a decision stored `failed` (docs/design.md §4: the record's `state` stays
/// `failed`, for every reader; this says which of its meanings holds). Derived from the record
/// ([`StoredDecision::failure`]), so records of earlier releases are classified too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Every cluster answered and none can place the workflow now (including every commit
    /// refused because the capacity went to others, and a workflow no cluster can ever place:
    /// `unresolvable`).
    NothingFits,
    /// The coordinators' policy refused it: a quota (`quota_exceeded`), the queue
    /// (`queue_full`, `queue_timeout`), or it was withdrawn from the queue (`not_committed`).
    Refused,
    /// No answering cluster can place it and some clusters did not answer
    /// (`clusters_unavailable`): retryable, nothing was booked.
    Unavailable,
    /// A commit failed (a driver, a resource manager, a cluster that never said), or a commit
    /// its cluster forgot could not be restored.
    CommitFailed,
    /// It was committed, then a batch job failed, timed out, was cancelled or lost
    /// (`run_failure`).
    JobFailed,
}

impl FailureKind {
    /// The kind's wire name (`nothing_fits`, `refused`, `unavailable`, `commit_failed`,
    /// `job_failed`), the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NothingFits => "nothing_fits",
            FailureKind::Refused => "refused",
            FailureKind::Unavailable => "unavailable",
            FailureKind::CommitFailed => "commit_failed",
            FailureKind::JobFailed => "job_failed",
        }
    }

    /// Every kind.
    pub const ALL: [FailureKind; 5] = [
        FailureKind::NothingFits,
        FailureKind::Refused,
        FailureKind::Unavailable,
        FailureKind::CommitFailed,
        FailureKind::JobFailed,
    ];

    /// The kind of a decision in `state` whose `refused` code is `refused`, that has a
    /// `run_failure` or not, and whose commit attempts ended as `attempts` (ok, and the
    /// error's code): `None` unless the state is `failed`. The rule of
    /// [`StoredDecision::failure`], on the fields the coordinators' listing reads.
    pub fn of<'a>(
        state: DecisionState,
        refused: Option<&str>,
        run_failure: bool,
        attempts: impl IntoIterator<Item = (bool, Option<&'a str>)>,
    ) -> Option<FailureKind> {
        use crate::code::Code;
        if state != DecisionState::Failed {
            return None;
        }
        if run_failure {
            return Some(FailureKind::JobFailed);
        }
        match refused.map(Code::parse) {
            Some(Code::ClustersUnavailable) => return Some(FailureKind::Unavailable),
            Some(Code::Unresolvable) => return Some(FailureKind::NothingFits),
            Some(_) => return Some(FailureKind::Refused),
            None => {}
        }
        // Refused for contention only (the capacity went to others): nothing fits now. An
        // attempt that committed (then was lost and not restored), or failed otherwise, is a
        // failed commit.
        let contention = |code: Option<&str>| {
            code.map(Code::parse)
                .is_some_and(|c| matches!(c, Code::NoLongerFits | Code::CapacityInFlight | Code::Restoring))
        };
        let mut failed_commit = false;
        for (ok, code) in attempts {
            failed_commit |= ok || !contention(code);
        }
        Some(if failed_commit {
            FailureKind::CommitFailed
        } else {
            FailureKind::NothingFits
        })
    }
}

/// One attempt to commit on a cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitAttempt {
    /// The cluster tried.
    pub cluster: String,
    /// The attempt's number on that cluster (1, 2... ; 0 in records of earlier releases): a
    /// release with this number fences it (see [`crate::agent::ActionMsg::attempt`]).
    #[serde(default)]
    pub attempt: u32,
    /// The commit was sent (or is about to be) and its outcome is not recorded yet: a
    /// coordinator that takes the decision over asks the cluster what became of it first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// True when it committed.
    pub ok: bool,
    /// Why not.
    #[serde(default)]
    pub error: Option<ProtoError>,
    /// What the commit did per volume.
    #[serde(default)]
    pub volumes: Vec<VolumeOutcome>,
    /// The batch jobs the commit submitted to the cluster's resource manager, with the states
    /// the coordinators last learnt from its agent (empty on clusters that run no jobs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::batch::BatchJob>,
}

/// A decision as the coordinators store it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredDecision {
    /// Lifecycle state.
    pub state: DecisionState,
    /// The decision document (docs/design.md §4).
    pub decision: Decision,
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
    /// The submit's [`crate::coordinator::SubmitMsg::digest`]: a later submit under the same
    /// request id must carry the same one (`request_id_conflict` otherwise). Absent in records
    /// of earlier releases, which are not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<String>,
    /// The request's priority class (the coordinator's `priorityClasses`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// The priority's value (0 when no class applies); the queue places higher first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    /// The submit asked to wait for capacity (`--wait-for-capacity`): when nothing
    /// fits, or a quota is exceeded, the decision is `queued` instead of `failed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_capacity: bool,
    /// When the decision was first queued, ms since the epoch (the queue's age order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// Why the workflow failed on its cluster once committed (a batch job that failed, timed
    /// out, was cancelled or lost: [`crate::batch::failure`]); the decision is then `failed`
    /// with its `completion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_failure: Option<String>,
    /// A `complete` its cluster did not answer (`timed_out`, `unreachable`): the user asked
    /// for it and the coordinators keep sending it until the cluster answers (the agent answers
    /// a repeated complete with its first answer), the lease holder too when the coordinator
    /// that was asked is gone. Absent otherwise, and once a complete was answered (the decision
    /// is then `completed`, or stays `committed` when its cluster refused, e.g. `jobs_running`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completing: Option<Completing>,
}

/// A `complete` asked for and not answered yet by the decision's cluster
/// ([`StoredDecision::completing`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Completing {
    /// When the first complete its cluster left unanswered was sent, ms since the epoch.
    pub since_ms: u64,
    /// The complete asked to cancel the workflow's batch jobs first (`fedvol cancel`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
}

impl StoredDecision {
    /// Room to reserve for this record's encoding ([`crate::encode_sized`]), bytes: an
    /// estimate on the large side, so that the buffer never grows while a decision is written
    /// (4 KiB, and per cluster 1 KiB for a summary, 16 KiB for a whole answer; at 100 hosts a
    /// summary is about 0.5 KB and a whole answer about 8 KB). `encode_sized` gives back room
    /// of more than four times what it wrote.
    pub fn encoded_size_hint(&self) -> usize {
        let clusters: usize = self
            .decision
            .clusters
            .values()
            .map(|c| if c.summarized { 1 << 10 } else { 16 << 10 })
            .sum();
        (4 << 10) + clusters
    }

    /// The batch jobs of the committed attempt (empty when none ran or nothing committed).
    pub fn jobs(&self) -> &[crate::batch::BatchJob] {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.ok)
            .map(|a| a.jobs.as_slice())
            .unwrap_or_default()
    }

    /// Which of `failed`'s meanings holds ([`FailureKind`]); `None` unless the state is
    /// `failed`.
    pub fn failure(&self) -> Option<FailureKind> {
        FailureKind::of(
            self.state,
            self.decision.refused.as_ref().map(|r| r.code.as_str()),
            self.run_failure.is_some(),
            self.attempts
                .iter()
                .map(|a| (a.ok, a.error.as_ref().map(|e| e.code.as_str()))),
        )
    }

    /// Ends the decision with its cluster's `completion`: `failed`, naming the job that failed
    /// ([`crate::batch::failure`] of [`StoredDecision::jobs`]), `cancelled` when `fedvol
    /// cancel` ended its jobs ([`crate::batch::cancelled_by_fedvol`]), or `completed`. The
    /// caller sets `updated_ms` and stores it.
    pub fn end(&mut self, completion: ActionReply) {
        let failure = crate::batch::failure(self.jobs());
        self.state = if failure.is_some() {
            DecisionState::Failed
        } else if crate::batch::cancelled_by_fedvol(self.jobs()) {
            DecisionState::Cancelled
        } else {
            DecisionState::Completed
        };
        self.run_failure = failure;
        self.completion = Some(completion);
        self.completing = None;
    }
}

/// True for 0 (serde's `skip_serializing_if` for optional numeric fields).
pub(crate) fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
