//! What an agent publishes and how the coordinators answer it: the [`Heartbeat`] on
//! `<prefix>.heartbeat.<cluster>`, and the restored operation's bodies ([`RestoredMsg`],
//! [`RestoredReply`]) that end an agent's wait for its restore.

use crate::endpoint::{ReplyBody, RequestBody};

/// An agent's heartbeat on `<prefix>.heartbeat.<cluster>` (published, not requested).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Heartbeat {
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
    /// The generation of the agent's state file (a random id made when the file was created
    /// with `--init`; empty for replicated state or an earlier release). A new generation tells
    /// the coordinators' reconciler that the agent starts from an empty state, so that the
    /// commits it had are restored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state_generation: String,
    /// Why the cluster is degraded, when it is (its live inventory source could not
    /// be read and it serves its last good reading). Absent when healthy and from earlier
    /// releases (an optional addition: docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// True while the agent, started on a fresh state (`--init`), waits for the coordinators to
    /// restore the commits they stored for its cluster, admitting no new commit meanwhile. The
    /// reconciler answers it with [`Restored`](crate::agent::Restored) once the restore ran to its end. Absent (false)
    /// otherwise and from earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restoring: bool,
}

/// Restored: the coordinators' restore of the cluster's committed decisions onto state
/// generation `generation` ran to its end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoredMsg {
    /// The agent's state generation the restore was made for (from its heartbeat); an agent on
    /// another generation ignores the message.
    pub generation: String,
    /// Decisions committed again by this restore.
    #[serde(default)]
    pub restored: usize,
    /// Decisions this restore could not commit again (stored `failed`).
    #[serde(default)]
    pub failed: usize,
}

impl RequestBody for RestoredMsg {}

/// The agent's answer to [`RestoredMsg`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoredReply {
    /// The answering cluster.
    pub cluster: String,
    /// True when the agent admits new commits now (the generation was its own, or it was not
    /// waiting).
    pub admitting: bool,
}

impl ReplyBody for RestoredReply {}
