//! The coordinators' operations (queue group `coordinator`, subject
//! `<prefix>.coordinator.<op>.<user>`, or `<prefix>.operator.<op>.<user>` for the operators'
//! own, [`CoordinatorOp::for_operators`]) and their bodies, one module per family of
//! operations: the table below is the whole list ([`CoordinatorOp`] shows it with its bodies).

mod changes;
mod clusters;
mod drain;
mod list;
mod stored;
mod submit;
mod what_if;

pub use changes::{ChangeKind, ChangesQuery, ChangesReply, DecisionChange, MAX_CHANGES_WAIT_MS};
pub use clusters::{ClusterInfo, ClusterRef, ClusterReply, ClustersReply};
pub use drain::{ClusterDrain, DRAIN_KEY_PREFIX, DrainMsg, DrainReply, drain_key};
pub use list::{ClusterCounts, CountReply, DecisionSummary, ListReply, REASON_CHARS, reason};
pub use stored::{DecisionRef, ReplayReply, WhyNotQuery};
pub use submit::{StoredRecord, SubmitMsg, SubmitReply};
pub use what_if::{
    DEFAULT_SINCE_MS, DEFAULT_STATES, MAX_WHAT_IF_DECISIONS, WhatIfChanges, WhatIfCluster, WhatIfCut, WhatIfQuery,
    WhatIfReply,
};

use crate::agent::WhyNotReply;
use crate::endpoint::NoArgs;
use crate::operations::operations;

operations! {
    /// The coordinators' operations: the `<op>` token of `<prefix>.coordinator.<op>.<user>`.
    pub enum CoordinatorOp, served as CoordinatorEndpoint {
        /// Plan a workflow across the federation and, unless dry-run, commit it.
        Submit = "submit": SubmitMsg => SubmitReply;
        /// End a committed workflow (its cluster frees allocations and reclaims volumes).
        Complete = "complete": DecisionRef => SubmitReply;
        /// Explain why a cluster did not choose a zone, host or provisioner for a decision.
        WhyNot = "why_not": WhyNotQuery => WhyNotReply;
        /// The cluster registry.
        Clusters = "clusters": NoArgs => ClustersReply;
        /// Stored decisions, newest first.
        List = "list": NoArgs => ListReply;
        /// One stored decision.
        Get = "get": DecisionRef => SubmitReply;
        /// Re-run a stored request with its seed and compare.
        Replay = "replay": DecisionRef => ReplayReply;
        /// One cluster in detail: the registry's view and its agent's effective inventory and
        /// status (`fedvol clusters show`).
        Cluster = "cluster": ClusterRef => ClusterReply;
        /// The decisions changed after a bucket revision, waiting up to a bound for one (a long
        /// poll): how `fedvol decisions watch` and `fedvol ui` follow the decision store without a
        /// JetStream consumer of their own.
        Changes = "changes": ChangesQuery => ChangesReply;
        /// How many stored decisions are in each state, in all and per chosen cluster.
        Count = "count": NoArgs => CountReply;
        /// Recorded decisions planned again under hypothetical changes (a cluster drained,
        /// removed, added or with another inventory), holding and committing nothing
        /// (docs/design.md §2.7).
        WhatIf = "what_if": WhatIfQuery => WhatIfReply;
        /// An operator drains a cluster: it still answers plans, but no coordinator chooses it
        /// for new work; what is committed there runs on (`fedvol clusters drain`).
        Drain = "drain": DrainMsg => DrainReply;
        /// An operator ends a cluster's drain (`fedvol clusters undrain`).
        Undrain = "undrain": ClusterRef => DrainReply;
    }
}

impl CoordinatorOp {
    /// True for the operators' operations (`drain`, `undrain`): served on
    /// `<prefix>.operator.<op>.<user>` rather than `<prefix>.coordinator.<op>.<user>`, so that
    /// what the shipped NATS permissions let every user publish
    /// (`fedvol.v1.coordinator.*.<user>`) never reaches them; only an operator's identity may
    /// publish there, and the coordinator also refuses a user not among its `operators`
    /// (`not_operator`).
    pub const fn for_operators(self) -> bool {
        matches!(self, CoordinatorOp::Drain | CoordinatorOp::Undrain)
    }

    /// The subject family of the operation: `operator` ([`CoordinatorOp::for_operators`]) or
    /// `coordinator`.
    pub const fn family(self) -> &'static str {
        if self.for_operators() {
            "operator"
        } else {
            "coordinator"
        }
    }
}

/// A request id for workflow `workflow`: its name reduced to key characters (letters, digits,
/// `-`, `_`; anything else becomes `-`; at most 64 of them), a dash, and `unique` (e.g. a NUID);
/// just `unique` when nothing of the name is left. The coordinator makes one this way when a
/// submit carries none, and so does the CLI before it sends (a retry must carry the
/// id of the first attempt).
pub fn request_id_for(workflow: &str, unique: &str) -> String {
    let stem: String = workflow
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let stem = stem.trim_matches('-');
    if stem.is_empty() {
        unique.to_string()
    } else {
        format!("{stem}-{unique}")
    }
}

/// A fresh unique token from `client`: the last token of a new inbox name (a NUID, 22
/// characters, unique across processes).
pub fn unique_token(client: &async_nats::Client) -> String {
    let inbox = client.new_inbox();
    inbox.rsplit('.').next().unwrap_or(&inbox).to_string()
}

#[cfg(test)]
mod request_id_tests {
    use super::request_id_for;

    #[test]
    fn request_ids_keep_the_workflow_name_as_key_characters() {
        assert_eq!(request_id_for("train", "N1"), "train-N1");
        assert_eq!(request_id_for("a b/c.d", "N1"), "a-b-c-d-N1");
        assert_eq!(request_id_for("--x--", "N1"), "x-N1");
        assert_eq!(request_id_for("", "N1"), "N1");
        assert_eq!(request_id_for("***", "N1"), "N1");
        assert_eq!(request_id_for(&"w".repeat(100), "N").len(), 64 + 2);
    }
}
