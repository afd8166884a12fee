//! The why_not operation's bodies: [`WhyNotMsg`] (re-plan a request in full and explain a named
//! zone, host or provisioner) and [`WhyNotReply`] (also the coordinator's why_not answer).

use fedvol_common::funnel::PlanRequest;
use fedvol_common::funnel::why_not::{Blocker, Target};

use crate::checks::workflow_limits;
use crate::code::ProtoError;
use crate::endpoint::{ReplyBody, RequestBody};
use crate::failure::Failure;

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
