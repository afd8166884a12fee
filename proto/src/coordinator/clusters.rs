//! The cluster registry's bodies: [`ClustersReply`] (every cluster, as [`ClusterInfo`]) and the
//! cluster operation's [`ClusterRef`] and [`ClusterReply`] (one cluster in detail, with its
//! agent's inventory and status).

use crate::endpoint::{ReplyBody, RequestBody};

/// The cluster `cluster` asks about (the `cluster` operation).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterRef {
    /// The cluster's name.
    pub cluster: String,
}

impl RequestBody for ClusterRef {}

/// The answer to `cluster`: what the coordinator's registry knows of it and what its agent
/// serves (provisioners with status and policies, zones and hosts, capacity in use), as
/// `kubectl describe node` shows a node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterReply {
    /// The registry's entry.
    pub info: ClusterInfo,
    /// The agent's effective inventory and status (driver secrets redacted by the agent).
    pub agent: crate::agent::InventoryReply,
}

impl ReplyBody for ClusterReply {}

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
    /// Why the cluster is degraded, from its last heartbeat (its live inventory
    /// source is unreadable and it serves its last good reading); absent when healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// The cluster's agent started on a fresh state (`--init`) and its last heartbeat says it
    /// waits for the coordinators to restore the commits they stored for it: until then it
    /// answers plans and new commits `restoring` (docs/design.md §6). Absent when false, and
    /// from coordinators of earlier releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restoring: bool,
    /// An operator drained the cluster (`fedvol clusters drain`): who, when and why. It
    /// still answers plans, but is never chosen for new work. Absent when not drained, and
    /// from coordinators of earlier releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<fedvol_common::drain::Drain>,
}

/// The answer to clusters.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClustersReply {
    /// Every cluster ever heard from, by name.
    #[serde(default)]
    pub clusters: Vec<ClusterInfo>,
    /// Drains of clusters this coordinator does not know (drained before they joined, or
    /// forgotten since), by name. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drained_unknown: Vec<super::ClusterDrain>,
}

impl ReplyBody for ClustersReply {}
