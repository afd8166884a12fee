//! The clusters operators drained, as this coordinator knows them (docs/design.md §2.5, §5):
//! each drain is one key of the decision bucket, `fedvol/drain/<cluster>`
//! ([`fedvol_proto::coordinator::drain_key`]) holding a [`ClusterDrain`] (who, when, why); an
//! undrain deletes it. Durable like the decisions (file storage, replicated with the bucket),
//! so a drain outlives every coordinator and server restart.
//!
//! Every coordinator keeps a [`DrainTable`]: read whole from the bucket before it serves
//! ([`DrainTable::load`]), then kept current by the watch the decision index already holds on
//! the bucket ([`super::index::spawn`] hands each `fedvol/drain/` entry to
//! [`DrainTable::apply`]): a drain written by one coordinator reaches the others as the
//! bucket's change is pushed to their watches (milliseconds; `tests/tests/drain.rs` checks
//! within a second), with no consumer and no read per plan. The coordinator that wrote it
//! applies it at once (read-your-writes). Each key's changes are applied in revision order (an
//! older value replayed by a reopened watch changes nothing).
//!
//! A plan marks the drains of the clusters it asked in its decision
//! ([`fedvol_common::decision::Decision::drained`]), where the choice's `drained` rule reads
//! them.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use async_nats::jetstream::kv;

use fedvol_common::drain::{Drain, Drains};
use fedvol_proto::coordinator::{ClusterDrain, DRAIN_KEY_PREFIX};

use super::store::{DecisionStore, StoreError};

#[derive(Default)]
struct Inner {
    /// Cluster → its drain in force.
    drains: BTreeMap<String, Drain>,
    /// Cluster → the revision of its key's latest change applied (a put or a removal).
    revisions: HashMap<String, u64>,
}

/// The drains in force, from the bucket (module docs).
#[derive(Default)]
pub struct DrainTable {
    inner: RwLock<Inner>,
}

impl DrainTable {
    /// An empty table.
    pub fn new() -> DrainTable {
        DrainTable::default()
    }

    /// Applies `cluster`'s drain (`Some`) or its end (`None`) at bucket revision `revision`,
    /// unless a change at that revision or later was applied already. Returns whether it
    /// changed the table's view.
    pub fn set(&self, cluster: &str, drain: Option<Drain>, revision: u64) -> bool {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if inner.revisions.get(cluster).is_some_and(|r| *r >= revision) {
            return false;
        }
        inner.revisions.insert(cluster.to_string(), revision);
        match drain {
            Some(d) => {
                tracing::info!(cluster = %cluster, by = %fedvol_common::limits::printable(&d.by), reason = %fedvol_common::limits::printable(&d.reason), revision, "cluster drained: never chosen for new work");
                inner.drains.insert(cluster.to_string(), d);
            }
            None => {
                if inner.drains.remove(cluster).is_some() {
                    tracing::info!(cluster = %cluster, revision, "cluster undrained: chosen for new work again");
                }
            }
        }
        true
    }

    /// Applies one entry of the bucket's watch, if it is a drain key (others are ignored): a
    /// put holding a readable drain drains its cluster, a delete or purge ends the drain. An
    /// unreadable value is logged and ends nothing.
    pub fn apply(&self, entry: &kv::Entry) {
        let Some(cluster) = entry.key.strip_prefix(DRAIN_KEY_PREFIX) else {
            return;
        };
        match entry.operation {
            kv::Operation::Delete | kv::Operation::Purge => {
                self.set(cluster, None, entry.revision);
            }
            kv::Operation::Put => match serde_json::from_slice::<ClusterDrain>(&entry.value) {
                Ok(d) => {
                    self.set(cluster, Some(d.drain), entry.revision);
                }
                Err(e) => tracing::warn!(key = %entry.key, error = %e, "an unreadable drain record is ignored"),
            },
        }
    }

    /// Reads every drain key of the bucket into the table (before the coordinator serves, so
    /// that its first choice already knows them).
    ///
    /// Errors: [`StoreError`] when the keys cannot be listed or read.
    pub async fn load(&self, store: &DecisionStore) -> Result<usize, StoreError> {
        let keys = store.raw_keys(DRAIN_KEY_PREFIX).await?;
        let mut n = 0;
        for key in keys {
            let Some(cluster) = key.strip_prefix(DRAIN_KEY_PREFIX) else {
                continue;
            };
            match store.get_json::<ClusterDrain>(&key).await {
                Ok(Some((d, rev))) => {
                    self.set(cluster, Some(d.drain), rev);
                    n += 1;
                }
                Ok(None) => {}
                Err(StoreError::Corrupt { key, message }) => {
                    tracing::warn!(%key, error = %message, "an unreadable drain record is ignored")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// `cluster`'s drain in force, if any.
    pub fn get(&self, cluster: &str) -> Option<Drain> {
        self.read().drains.get(cluster).cloned()
    }

    /// Every drain in force, by cluster.
    pub fn all(&self) -> Drains {
        self.read().drains.clone()
    }

    /// The drains in force among `clusters` (a plan's slots).
    pub fn among<'a>(&self, clusters: impl IntoIterator<Item = &'a str>) -> Drains {
        let inner = self.read();
        if inner.drains.is_empty() {
            return Drains::new();
        }
        clusters
            .into_iter()
            .filter_map(|c| inner.drains.get(c).map(|d| (c.to_string(), d.clone())))
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(by: &str) -> Drain {
        Drain {
            by: by.into(),
            at_ms: 1,
            reason: "r".into(),
        }
    }

    /// Changes apply in revision order per cluster: a replayed older value (a reopened watch)
    /// or a late read of the whole bucket never undoes a newer change.
    #[test]
    fn changes_apply_in_revision_order_per_cluster() {
        let t = DrainTable::new();
        assert!(t.set("a", Some(drain("ops")), 5));
        assert!(t.set("b", Some(drain("ops")), 6));
        assert!(!t.set("a", None, 4), "older: ignored");
        assert_eq!(t.get("a").map(|d| d.by), Some("ops".into()));
        assert!(t.set("a", None, 7));
        assert!(
            !t.set("a", Some(drain("late")), 5),
            "a replay of the put does not bring it back"
        );
        assert_eq!(t.get("a"), None);
        assert_eq!(t.all().keys().collect::<Vec<_>>(), ["b"]);
        assert!(t.set("a", Some(drain("again")), 9));
        assert_eq!(t.among(["a", "c"]).keys().collect::<Vec<_>>(), ["a"]);
    }
}
