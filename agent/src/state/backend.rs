//! [`Store`]: where the agent's state is kept, whichever backend keeps it: the redb file of
//! [`super::store`] or the replicated stream of [`super::replicated`]. It sits above both,
//! which share only the record types of [`super::store`].

use std::path::Path;

use super::store::{Batch, Identity, RedbStore, Snapshot, StoreError, new_generation};

/// Where the agent's state is kept: a redb file (the default: one agent per cluster), or a
/// JetStream stream replicated with the NATS cluster, shared by a cluster's agent replicas of
/// which one, holding a lease, serves ([`super::replicated`]). Both make writes durable in
/// groups: [`Store::write`] returns at once, [`Store::sync_through`] waits.
#[derive(Debug)]
pub enum Store {
    /// A redb file.
    Redb(RedbStore),
    /// The cluster's state stream.
    Stream(super::replicated::StreamStore),
}

impl Store {
    /// Opens the redb state of `cluster` at `path`, checked: a missing or empty file
    /// is refused unless `init` (then it is created with a new [`Identity`]); a file of another
    /// cluster is refused; a file without an identity (written by an earlier release) is
    /// adopted. Returns the store, its contents and its identity.
    ///
    /// Errors: [`StoreError::Missing`], [`StoreError::Foreign`], or as [`RedbStore::open`].
    pub fn open_checked(path: &Path, cluster: &str, init: bool) -> Result<(Store, Snapshot, Identity), StoreError> {
        let p = path.display().to_string();
        let present = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        if !present && !init {
            return Err(StoreError::Missing { path: p });
        }
        if !present {
            // A zero-length file would make redb fail; start afresh.
            let _ = std::fs::remove_file(path);
        }
        let (store, snapshot) = RedbStore::open(path)?;
        let identity = match store.identity()? {
            Some(id) if id.cluster != cluster => {
                return Err(StoreError::Foreign {
                    path: p,
                    found: id.cluster,
                    expected: cluster.to_string(),
                });
            }
            Some(id) => id,
            None => {
                let id = Identity {
                    cluster: cluster.to_string(),
                    generation: new_generation(),
                    created_ms: fedvol_proto::now_ms(),
                    // A new file waits for the restore; one adopted from an earlier release
                    // kept its commits.
                    pending_restore: !present,
                };
                store.set_identity(&id)?;
                id
            }
        };
        Ok((Store::Redb(store), snapshot, identity))
    }

    /// Clears the identity's `pending_restore` mark when its generation is `generation` (a
    /// coordinator confirmed the restore: [`crate::restore_gate`]). Returns whether it was
    /// cleared. Replicated state has no identity: nothing to clear.
    ///
    /// Errors: the file could not be read or written.
    pub fn clear_pending_restore(&self, generation: &str) -> Result<bool, StoreError> {
        let Store::Redb(s) = self else {
            return Ok(false);
        };
        match s.identity()? {
            Some(mut id) if id.generation == generation && id.pending_restore => {
                id.pending_restore = false;
                s.set_identity(&id)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Opens (or creates) the redb store at `path` and loads everything in it
    /// ([`RedbStore::open`]), unchecked (tests and tools).
    ///
    /// Errors: as [`RedbStore::open`].
    pub fn open(path: &Path) -> Result<(Store, Snapshot), StoreError> {
        RedbStore::open(path).map(|(s, snap)| (Store::Redb(s), snap))
    }

    /// Sequence number of the last write made (0 before any).
    pub fn written(&self) -> u64 {
        match self {
            Store::Redb(s) => s.written(),
            Store::Stream(s) => s.written(),
        }
    }

    /// True when every write up to `seq` is known durable.
    pub fn is_durable(&self, seq: u64) -> bool {
        match self {
            Store::Redb(s) => s.is_durable(seq),
            Store::Stream(s) => s.is_durable(seq),
        }
    }

    /// Waits (blocking) until every write up to `seq` is durable.
    ///
    /// Errors: the disk or the stream failed; the writes are not known durable.
    pub fn sync_through(&self, seq: u64) -> Result<(), StoreError> {
        match self {
            Store::Redb(s) => s.sync_through(seq),
            Store::Stream(s) => s.sync_through(seq),
        }
    }

    /// Writes `batch` atomically, without waiting for durability; returns its sequence number.
    ///
    /// Errors: the write failed; nothing of the batch is then visible.
    pub fn write(&self, batch: &Batch) -> Result<u64, StoreError> {
        match self {
            Store::Redb(s) => s.write(batch),
            Store::Stream(s) => s.write(batch),
        }
    }
}
