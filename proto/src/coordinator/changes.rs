//! The changes operation's bodies (a long poll over the decision bucket): [`ChangesQuery`] and
//! [`ChangesReply`], each change a [`DecisionChange`] of one key ([`ChangeKind`]).

use super::list::{ClusterCounts, DecisionSummary};
use crate::endpoint::{ReplyBody, RequestBody};

/// The changes query: every decision whose latest change is after bucket revision `after`,
/// oldest change first; when there is none yet, wait up to `wait_ms` for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangesQuery {
    /// The bucket revision the caller has seen everything up to (0: from the start, i.e. the
    /// latest value of every decision).
    #[serde(default)]
    pub after: u64,
    /// How long to wait for a change when there is none after `after`, ms (0: answer at once;
    /// the coordinator caps it at [`MAX_CHANGES_WAIT_MS`]).
    #[serde(default)]
    pub wait_ms: u64,
}

impl RequestBody for ChangesQuery {}

/// The longest a `changes` query waits for a change, ms.
pub const MAX_CHANGES_WAIT_MS: u64 = 30_000;

/// What a key of the decision bucket holds after a change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeKind {
    /// A decision, as `decisions list` summarises it.
    Put {
        /// The decision's summary.
        summary: Box<DecisionSummary>,
        /// How many clusters its plan reached.
        #[serde(default)]
        clusters: ClusterCounts,
    },
    /// A value that does not decode as a stored decision.
    Unreadable {
        /// Why it does not decode.
        error: String,
    },
    /// The decision was deleted or purged.
    Removed,
}

/// One decision's latest change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionChange {
    /// The key: the request id.
    pub request_id: String,
    /// The bucket revision of the change (grows with every change of the bucket).
    pub revision: u64,
    /// What the key holds now.
    pub change: ChangeKind,
}

/// The answer to changes: the decisions changed after the query's revision, oldest change
/// first, only the latest change of each (so intermediate states may be skipped), cut to fit
/// the server's `max_payload`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangesReply {
    /// The changes, oldest first.
    #[serde(default)]
    pub changes: Vec<DecisionChange>,
    /// The revision the caller is now up to date with: ask again with `after` = this.
    pub last: u64,
    /// True when the answer was cut to fit and more changes wait: ask again at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

impl ReplyBody for ChangesReply {}
