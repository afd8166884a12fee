//! The bodies of the operations on one stored decision: [`DecisionRef`] (complete, get, replay),
//! [`WhyNotQuery`] (why_not, answered with the agent's [`crate::agent::WhyNotReply`]) and
//! [`ReplayReply`].

use fedvol_common::funnel::why_not::Target;

use crate::endpoint::{ReplyBody, RequestBody};
use crate::failure::Failure;

/// Complete, get and replay: act on a stored decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionRef {
    /// The decision's request id.
    pub request_id: String,
    /// Complete only: cancel the workflow's batch jobs on its cluster first (`fedvol cancel`).
    /// Absent (false) from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel: bool,
    /// Get only: a cluster whose answer the decision stores as a summary, to be answered whole
    /// as its agent still keeps it (`answer`, docs/design.md §5); the stored decision is not
    /// changed. When the agent keeps it no longer, the answer is the stored one. Absent from
    /// earlier releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole: Option<String>,
}

impl RequestBody for DecisionRef {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// Why not: ask the cluster of a stored decision why not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WhyNotQuery {
    /// The decision's request id.
    pub request_id: String,
    /// The cluster to ask.
    pub cluster: String,
    /// What to explain: the body's `zone`, `host` and `provisioner` fields.
    #[serde(flatten)]
    pub target: Target,
}

impl RequestBody for WhyNotQuery {
    fn request_id(&self) -> Option<&str> {
        Some(&self.request_id)
    }
}

/// The answer to replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReply {
    /// True when every cluster that answered gave the same volumes and jobs as stored.
    pub identical: bool,
    /// Each difference, in words (including inventory versions that changed since).
    pub differences: Vec<String>,
    /// The replayed decision.
    #[serde(default)]
    pub replayed: Option<fedvol_common::decision::Decision>,
}

impl ReplyBody for ReplayReply {
    /// The fields the previous release's readers of [`ReplayReply`] required.
    fn legacy_failure_fields(_f: &Failure) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("identical".into(), false.into());
        m.insert("differences".into(), serde_json::Value::Array(Vec::new()));
        m
    }
}
