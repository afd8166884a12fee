//! A decision as the list shows it: [`DecisionSummary`] (one line: state, cluster, user,
//! priority, jobs, why it failed, from [`reason`]), [`ClusterCounts`] (how many clusters its plan
//! reached), and the list operation's [`ListReply`].

use crate::code::ProtoError;
use crate::decisions::{DecisionState, StoredDecision};
use crate::endpoint::ReplyBody;

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
    /// The user the request was made for (absent from coordinators in earlier releases: empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// A kept dry run (nothing was held or committed); absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The request's priority class, if any; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// The priority's value; absent when 0.
    #[serde(default, skip_serializing_if = "crate::decisions::is_zero")]
    pub priority: i64,
    /// When the decision was first queued, ms since the epoch; absent when never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// The batch jobs the decision runs on its cluster's resource manager, with their states;
    /// absent when none (`fedvol decisions watch` shows their changes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::batch::BatchJob>,
    /// Why the decision failed or was refused, one line of at most [`REASON_CHARS`]
    /// characters ([`reason`]); absent otherwise, and from coordinators of earlier releases
    /// (`fedvol decisions watch` shows it under a failed row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a `failed` decision, which of `failed`'s meanings holds
    /// ([`crate::decisions::FailureKind`]); absent otherwise (and from coordinators of
    /// earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<crate::decisions::FailureKind>,
    /// A committed decision whose `complete` its cluster has not answered yet: since when, ms
    /// since the epoch ([`crate::decisions::Completing`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completing_since_ms: Option<u64>,
}

/// The most characters of [`DecisionSummary::reason`]; a longer reason is cut, ending in `…`.
pub const REASON_CHARS: usize = 300;

/// Why a decision failed or was refused, in one line, from its parts: the workflow's failed
/// jobs (`run_failure`), else the refusal of its request (`refused`: a quota, the queue), else,
/// when no cluster took it, its last failed commit attempt (`commit on C failed: message
/// (code)`); `None` when none applies (a committed decision, or one nothing fits, whose reason
/// is per cluster). Cut to [`REASON_CHARS`].
pub fn reason(
    run_failure: Option<&str>,
    refused: Option<&fedvol_common::decision::Reason>,
    chosen: bool,
    last_failed_commit: Option<(&str, &ProtoError)>,
) -> Option<String> {
    let text = if let Some(f) = run_failure {
        f.to_string()
    } else if let Some(r) = refused {
        format!("refused: {} ({})", r.message, r.code)
    } else if let (false, Some((cluster, e))) = (chosen, last_failed_commit) {
        format!("commit on {cluster} failed: {} ({})", e.message, e.code)
    } else {
        return None;
    };
    Some(if text.chars().count() > REASON_CHARS {
        let mut cut: String = text.chars().take(REASON_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        text
    })
}

impl DecisionSummary {
    /// The summary of `stored`, kept under `request_id`.
    pub fn of(request_id: String, stored: &StoredDecision) -> DecisionSummary {
        let last_failed = stored
            .attempts
            .iter()
            .rev()
            .find_map(|a| a.error.as_ref().filter(|_| !a.ok).map(|e| (a.cluster.as_str(), e)));
        DecisionSummary {
            reason: reason(
                stored.run_failure.as_deref(),
                stored.decision.refused.as_ref(),
                stored.decision.chosen_cluster.is_some(),
                last_failed,
            ),
            request_id,
            workflow: stored.decision.workflow.clone(),
            state: stored.state,
            chosen_cluster: stored.decision.chosen_cluster.clone(),
            updated_ms: stored.updated_ms,
            user: stored.request.user.clone(),
            dry_run: stored.dry_run,
            priority_class: stored.priority_class.clone(),
            priority: stored.priority,
            queued_ms: stored.queued_ms,
            jobs: stored.jobs().to_vec(),
            failure: stored.failure(),
            completing_since_ms: stored.completing.as_ref().map(|c| c.since_ms),
        }
    }
}

/// The answer to list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListReply {
    /// Newest first.
    #[serde(default)]
    pub decisions: Vec<DecisionSummary>,
}

impl ReplyBody for ListReply {}

/// The answer to `count` (`fedvol decisions count`): how many stored decisions are in each
/// state, in all and per chosen cluster. Keys of the per-state maps are state wire names
/// ([`DecisionState::as_str`]); a state no decision is in is absent (it counts 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CountReply {
    /// Every stored decision, kept dry runs included.
    pub total: u64,
    /// Per state, over every decision.
    #[serde(default)]
    pub states: std::collections::BTreeMap<String, u64>,
    /// Per chosen cluster (by name), per state.
    #[serde(default)]
    pub clusters: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    /// Per state, the decisions no cluster was chosen for (nothing fits, refused, queued).
    #[serde(default)]
    pub unplaced: std::collections::BTreeMap<String, u64>,
    /// How many of `total` are kept dry runs (nothing was held or committed for them).
    #[serde(default)]
    pub dry_runs: u64,
}

impl ReplyBody for CountReply {}

/// How many clusters a decision's plan reached, answered and could place it on (the web view's
/// list columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterCounts {
    /// Clusters asked.
    pub asked: usize,
    /// Clusters that answered.
    pub answered: usize,
    /// Clusters that could place the workflow.
    pub feasible: usize,
}

impl ClusterCounts {
    /// The counts of `stored`'s plan.
    pub fn of(stored: &StoredDecision) -> ClusterCounts {
        let clusters = &stored.decision.clusters;
        ClusterCounts {
            asked: clusters.len(),
            answered: clusters
                .values()
                .filter(|c| c.status == fedvol_common::decision::ClusterStatus::Answered)
                .count(),
            feasible: clusters.values().filter(|c| c.feasible).count(),
        }
    }
}
