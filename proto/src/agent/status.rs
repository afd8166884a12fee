//! The status and inventory operations' answers: [`StatusReply`] (holds, commits, managed
//! volumes with their events, capacity in use, the live inventory source's state) and
//! [`InventoryReply`] (the effective inventory with the status, cut to fit `max_payload`).

use std::collections::BTreeMap;

use fedvol_common::model::Resources;
use fedvol_common::size::ByteSize;

use crate::endpoint::ReplyBody;

/// A volume-lifecycle event (the Kubernetes volume provisioning design vocabulary).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VolumeEvent {
    /// When, ms since the epoch.
    pub at_ms: u64,
    /// `Provisioning`, `ProvisioningSucceeded`, `ProvisioningFailed`, `Bound`, `Released`,
    /// `Deleted` or `VolumeFailedDelete`.
    pub reason: String,
    /// Detail.
    pub message: String,
}

/// A volume fedvol created or bound, as an agent reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManagedVolumeInfo {
    /// Name.
    pub name: String,
    /// Provisioner / storage class.
    pub provisioner: Option<String>,
    /// Capacity in bytes.
    pub capacity: ByteSize,
    /// `Bound`, `Released`, `Failed`...
    pub phase: String,
    /// The request that holds it, if any.
    pub request_id: Option<String>,
    /// Events, oldest first.
    pub events: Vec<VolumeEvent>,
}

/// A hold as `status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HoldSummary {
    /// The request.
    pub request_id: String,
    /// Workflow name.
    pub workflow: String,
    /// Lapse time, ms since the epoch.
    pub expires_ms: u64,
}

/// The answer to status.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatusReply {
    /// The cluster.
    pub cluster: String,
    /// Version of the inventory being served.
    pub inventory_version: String,
    /// Live holds.
    pub holds: Vec<HoldSummary>,
    /// Committed requests (ids).
    pub committed: Vec<String>,
    /// Volumes fedvol created or bound, with their events.
    pub volumes: Vec<ManagedVolumeInfo>,
    /// Capacity held per host (holds and commits together).
    pub host_use: BTreeMap<String, Resources>,
    /// Cluster load in [0, 1].
    pub load: f64,
    /// Where the zones and hosts come from when not from the inventory file (`slurm`),
    /// and whether the last reading worked. Absent with the files source and from earlier
    /// releases (an optional addition: docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
}

impl ReplyBody for StatusReply {}

/// The state of a live inventory source: the agent reads its zones and hosts from
/// the cluster's resource manager on an interval, and keeps serving its last good reading when
/// a reading fails.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceStatus {
    /// The source: `slurm`.
    pub source: String,
    /// When the zones and hosts being served were read, ms since the epoch; 0 = never (the
    /// agent serves no zones yet).
    pub read_ms: u64,
    /// Readings that failed in a row since the last good one.
    #[serde(default)]
    pub failures: u64,
    /// The last reading's error, when it failed: the cluster is degraded (it serves an
    /// inventory that may be stale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SourceStatus {
    /// The one-line reason the cluster is degraded, when it is: `slurm unreadable since ...
    /// (N failed readings): <error>; serving the reading of <ms>`.
    pub fn degraded(&self) -> Option<String> {
        let e = self.error.as_ref()?;
        let serving = if self.read_ms == 0 {
            "no zones read yet".to_string()
        } else {
            format!("serving the reading of {} ms since the epoch", self.read_ms)
        };
        Some(format!(
            "{} unreadable ({} failed readings in a row): {e}; {serving}",
            self.source, self.failures
        ))
    }
}

/// The answer to inventory: the effective inventory (files plus fedvol's changes; driver
/// parameters that hold credentials are references, never secrets) and the status.
///
/// Lists that grow with what fedvol commits (the inventory's persistent volumes, the managed
/// volumes, the committed requests, the holds) are cut to fit the NATS server's `max_payload`
/// ([`InventoryReply::fit`]); `cut` then gives how many each holds in all.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InventoryReply {
    /// The cluster.
    pub cluster: String,
    /// The effective inventory.
    pub inventory: fedvol_common::model::Inventory,
    /// The status.
    pub status: StatusReply,
    /// Present when the lists were cut to fit the answer: how many each holds in all. Absent
    /// from whole answers and from agents of earlier releases (an optional addition:
    /// docs/design.md §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<InventoryCut>,
}

impl ReplyBody for InventoryReply {}

/// How many entries each list of a cut [`InventoryReply`] holds in all (the answer carries the
/// first ones of each, the same number of every list that was cut).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InventoryCut {
    /// `inventory.volumes`: persistent volumes of the effective inventory.
    pub volumes: usize,
    /// `status.volumes`: volumes fedvol created or bound.
    pub managed_volumes: usize,
    /// `status.committed`: committed requests.
    pub committed: usize,
    /// `status.holds`: live holds.
    pub holds: usize,
}

/// Room an [`InventoryReply`] leaves below `max_payload` for what wraps it (the coordinator's
/// `cluster` answer adds its registry entry and the version envelope), bytes.
pub const INVENTORY_ENVELOPE_BYTES: usize = 16 * 1024;

/// The encoded size of `v`, bytes (0 when it cannot be encoded, which plain data never fails).
fn encoded_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

impl InventoryReply {
    /// The counts of this answer's lists.
    pub fn totals(&self) -> InventoryCut {
        self.cut.clone().unwrap_or(InventoryCut {
            volumes: self.inventory.volumes.len(),
            managed_volumes: self.status.volumes.len(),
            committed: self.status.committed.len(),
            holds: self.status.holds.len(),
        })
    }

    /// Cuts the answer to at most `budget` bytes encoded, when it is larger: keeps the first `n`
    /// entries of each list that grows with commits (persistent volumes, managed volumes,
    /// committed requests, holds), `n` the largest that fits, and records the whole counts in
    /// `cut`. The rest (provisioners, zones and hosts, capacity in use) is kept whole: an
    /// answer whose inventory alone exceeds `budget` stays over it. Returns whether it cut.
    /// Each entry is encoded once to be measured (no whole encoding besides).
    pub fn fit(&mut self, budget: usize) -> bool {
        let totals = self.totals();
        let volumes = std::mem::take(&mut self.inventory.volumes);
        let managed = std::mem::take(&mut self.status.volumes);
        let committed = std::mem::take(&mut self.status.committed);
        let holds = std::mem::take(&mut self.status.holds);
        // Prefix sums of each list's entries as encoded, a comma each.
        fn sums<T: serde::Serialize>(v: &[T]) -> Vec<usize> {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.push(0);
            for x in v {
                let last = out.last().copied().unwrap_or(0);
                out.push(last + encoded_len(x) + 1);
            }
            out
        }
        let lists = [sums(&volumes), sums(&managed), sums(&committed), sums(&holds)];
        let cost = |n: usize| -> usize { lists.iter().map(|s| s[n.min(s.len() - 1)]).sum() };
        let longest = lists.iter().map(|s| s.len() - 1).max().unwrap_or(0);
        let keep = if encoded_len(self) + cost(longest) <= budget {
            longest
        } else {
            self.cut = Some(totals);
            let room = budget.saturating_sub(encoded_len(self));
            // The largest n whose first n entries of every list fit (cost grows with n).
            let (mut lo, mut hi) = (0, longest);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if cost(mid) <= room { lo = mid } else { hi = mid - 1 }
            }
            lo
        };
        self.inventory.volumes = volumes;
        self.status.volumes = managed;
        self.status.committed = committed;
        self.status.holds = holds;
        if keep == longest {
            return false;
        }
        self.inventory.volumes.truncate(keep);
        self.status.volumes.truncate(keep);
        self.status.committed.truncate(keep);
        self.status.holds.truncate(keep);
        true
    }
}

#[cfg(test)]
mod inventory_fit_tests {
    use super::*;

    fn reply(commits: usize) -> InventoryReply {
        let status = StatusReply {
            cluster: "a".into(),
            inventory_version: "v".into(),
            holds: vec![HoldSummary {
                request_id: "held".into(),
                workflow: "w".into(),
                expires_ms: 1,
            }],
            committed: (0..commits).map(|i| format!("request-{i:06}")).collect(),
            volumes: (0..commits)
                .map(|i| ManagedVolumeInfo {
                    name: format!("pv-{i:06}"),
                    provisioner: Some("scratch".into()),
                    capacity: ByteSize(1 << 30),
                    phase: "Bound".into(),
                    request_id: Some(format!("request-{i:06}")),
                    events: vec![VolumeEvent {
                        at_ms: 1,
                        reason: "ProvisioningSucceeded".into(),
                        message: "created by the hostpath driver".into(),
                    }],
                })
                .collect(),
            host_use: BTreeMap::new(),
            load: 0.5,
            source: None,
        };
        InventoryReply {
            cluster: "a".into(),
            inventory: fedvol_common::model::Inventory::default(),
            status,
            cut: None,
        }
    }

    #[test]
    fn an_answer_over_the_budget_keeps_the_first_entries_and_every_count() {
        let mut small = reply(3);
        assert!(!small.fit(1 << 20), "a small answer is whole");
        assert_eq!(small.cut, None);
        let mut big = reply(5000);
        let whole = encoded_len(&big);
        assert!(whole > 1 << 20, "{whole}");
        assert!(big.fit(256 * 1024));
        assert!(encoded_len(&big) <= 256 * 1024, "{}", encoded_len(&big));
        let cut = big.cut.clone().unwrap();
        assert_eq!(
            (cut.committed, cut.managed_volumes, cut.holds, cut.volumes),
            (5000, 5000, 1, 0)
        );
        assert_eq!(big.totals(), cut);
        let kept = big.status.committed.len();
        assert!(kept > 100 && kept < 5000, "{kept}");
        assert_eq!(big.status.volumes.len(), kept, "the same number of each list");
        assert_eq!(big.status.committed[0], "request-000000", "the first ones");
        // It reads back, and an earlier reader's answer (no `cut`) reads as whole.
        let back: InventoryReply = serde_json::from_slice(&serde_json::to_vec(&big).unwrap()).unwrap();
        assert_eq!(back, big);
        let mut old = serde_json::to_value(reply(2)).unwrap();
        old.as_object_mut().unwrap().remove("cut");
        let old: InventoryReply = serde_json::from_value(old).unwrap();
        assert_eq!(old.cut, None);
    }
}
