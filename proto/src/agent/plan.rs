//! The plan and answer operations' bodies: [`PlanMsg`] (run the funnel, optionally holding what
//! it chose; optionally answered with the summary), [`AnswerMsg`] (the whole answer kept for a
//! plan answered with its summary) and their reply, [`PlanReply`].

use fedvol_common::decision::ClusterDecision;
use fedvol_common::funnel::PlanRequest;

use crate::checks::{choice_options, workflow_limits};
use crate::code::ProtoError;
use crate::endpoint::{ReplyBody, RequestBody};

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
    /// form) and keep the whole answer for [`Answer`](crate::agent::Answer) (docs/design.md §4, "Summarized
    /// answers"): a coordinator asking many clusters stores only a few whole answers, so the
    /// others need not cross NATS. Agents of earlier releases ignore it and answer whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
    /// No commit follows this plan (a dry run, a replay): the agent keeps nothing of it for
    /// admission at commit (keeping a copy of every answer for a commit that never comes was
    /// 15% of an agent's CPU under a stream of dry runs). Absent (false) from coordinators of
    /// earlier releases; agents of earlier releases ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
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
