//! The agent's durable state in one redb file: holds, commits and managed volumes, as JSON
//! values. Every change is one [`Batch`], applied atomically. A write
//! ([`super::backend::Store::write`]) encodes its batch and queues it, in order, without
//! touching the file; before the agent sends an answer that acknowledges state (a hold, a
//! commit, a release, a completion) it calls [`super::backend::Store::sync_through`], which
//! writes every batch queued so far in one durable transaction: one fsync shared by all the
//! answers waiting at that moment (group commit). So an acknowledged answer survives `kill -9`,
//! and N concurrent requests cost one transaction and one fsync, not N.
//!
//! Why writes are queued, not written: the agent writes while it holds its state's lock, and
//! redb lets one write transaction run at a time, a durable one for as long as its fsync takes.
//! Written at once, every change waited behind the fsync in progress with the state's lock
//! held, and with it every plan and commit of the agent: under a stream of submits the agent
//! spent most of each commit waiting for other commits' fsyncs (BENCHMARKS.md, "Submits").
//! What a crash loses is unchanged: batches not yet synced were never acknowledged, exactly
//! as non-durable redb commits were not.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::records::{Commit, Hold, ManagedVolume};
use fedvol_common::funnel::VolumeId;

/// redb's page cache, bytes (32 MiB).
pub const CACHE_BYTES: usize = 32 << 20;

const HOLDS: TableDefinition<&str, &[u8]> = TableDefinition::new("holds");
const COMMITS: TableDefinition<&str, &[u8]> = TableDefinition::new("commits");
const VOLUMES: TableDefinition<&str, &[u8]> = TableDefinition::new("volumes");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// Which cluster a state file belongs to, written when the file is created with
/// `--init` (or adopted from a file of an earlier release, which had none).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// The cluster.
    pub cluster: String,
    /// A random id of this state's lifetime: a new one only with `--init`.
    pub generation: String,
    /// When it was created, ms since the epoch.
    pub created_ms: u64,
    /// True from `--init` until a coordinator confirms that the commits stored for the
    /// cluster were restored onto this generation ([`crate::restore_gate`]). Files of earlier
    /// releases have none (false).
    #[serde(default)]
    pub pending_restore: bool,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened, read or written.
    #[error("state database {path}: {message}")]
    Db {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The replicated state stream failed, or this replica lost its lease to another (it must
    /// stop serving).
    #[error("state stream of cluster {cluster}: {message}")]
    Stream {
        /// The cluster.
        cluster: String,
        /// What went wrong.
        message: String,
    },
    /// The state file is missing or empty and `--init` was not given: an agent without its state
    /// would give away capacity it already committed.
    #[error(
        "state file {path} is missing or empty: this agent would forget every commit it made and give their capacity away again; if this cluster's agent is new (or its state was deliberately wiped), start it once with --init"
    )]
    Missing {
        /// The file.
        path: String,
    },
    /// The state file is another cluster's.
    #[error(
        "state file {path} belongs to cluster `{found}`, not `{expected}`: point --data-dir at this cluster's state"
    )]
    Foreign {
        /// The file.
        path: String,
        /// Its cluster.
        found: String,
        /// This agent's cluster.
        expected: String,
    },
    /// A record did not decode (a damaged or foreign file).
    #[error("state database {path}: record `{key}` in table {table} is unreadable: {message}")]
    Record {
        /// The file.
        path: String,
        /// The table.
        table: &'static str,
        /// The record's key.
        key: String,
        /// The decoding error.
        message: String,
    },
}

/// Everything in the store, as loaded at start-up.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// Live holds.
    pub holds: Vec<Hold>,
    /// Commits (completed or not).
    pub commits: Vec<Commit>,
    /// Managed volumes.
    pub volumes: Vec<ManagedVolume>,
}

/// A set of changes written in one atomic transaction.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    /// Holds to insert or replace.
    pub put_holds: Vec<Hold>,
    /// Hold ids to remove.
    pub remove_holds: Vec<String>,
    /// Commits to insert or replace.
    pub put_commits: Vec<Commit>,
    /// Managed volumes to insert or replace.
    pub put_volumes: Vec<ManagedVolume>,
    /// Commit ids to remove (completed commits past their retention).
    pub remove_commits: Vec<String>,
    /// Managed volume keys ([`volume_key`]) to remove (deleted volumes of those commits).
    pub remove_volumes: Vec<String>,
}

impl Batch {
    /// True when the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.put_holds.is_empty()
            && self.remove_holds.is_empty()
            && self.put_commits.is_empty()
            && self.put_volumes.is_empty()
            && self.remove_commits.is_empty()
            && self.remove_volumes.is_empty()
    }
}

/// The key of a managed volume: `<provisioner>\u{1f}<name>` (empty provisioner for classless).
pub fn volume_key(id: &VolumeId) -> String {
    format!("{}\u{1f}{}", id.provisioner.as_deref().unwrap_or(""), id.name)
}

/// The redb file.
pub struct RedbStore {
    db: Database,
    path: String,
    /// Sequence number of the last write transaction committed (1, 2, ...; not yet durable
    /// until a sync covers it).
    written: AtomicU64,
    /// The highest write sequence number known durable (only raised, under `sync_lock`).
    durable: AtomicU64,
    /// Makes syncs one at a time, so answers that wait together share one fsync.
    sync_lock: Mutex<()>,
    /// Batches written and not yet in the file, oldest first, each with its sequence number.
    queued: Mutex<Vec<(u64, Encoded)>>,
}

/// At most this many batches wait in memory for a sync: past it, a write puts them in the file
/// at once, without waiting for the disk (changes no answer waits on, such as lapsed holds
/// swept while nothing is acknowledged, do not pile up).
const MAX_QUEUED: usize = 1024;

/// A batch with its records encoded: what a sync writes.
#[derive(Debug, Default)]
struct Encoded {
    put_holds: Vec<(String, Vec<u8>)>,
    remove_holds: Vec<String>,
    put_commits: Vec<(String, Vec<u8>)>,
    remove_commits: Vec<String>,
    put_volumes: Vec<(String, Vec<u8>)>,
    remove_volumes: Vec<String>,
}

impl Encoded {
    fn of(batch: &Batch) -> Encoded {
        Encoded {
            put_holds: batch
                .put_holds
                .iter()
                .map(|h| (h.request_id.clone(), json(h)))
                .collect(),
            remove_holds: batch.remove_holds.clone(),
            put_commits: batch
                .put_commits
                .iter()
                .map(|c| (c.request_id.clone(), json(c)))
                .collect(),
            remove_commits: batch.remove_commits.clone(),
            put_volumes: batch
                .put_volumes
                .iter()
                .map(|v| (volume_key(&v.id()), json(v)))
                .collect(),
            remove_volumes: batch.remove_volumes.clone(),
        }
    }
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").field("path", &self.path).finish()
    }
}

impl RedbStore {
    /// Opens (or creates) the store at `path` and loads everything in it.
    ///
    /// Errors: the file cannot be created or opened (for instance another agent process holds
    /// it: redb locks the file), or a record does not decode.
    pub fn open(path: &Path) -> Result<(RedbStore, Snapshot), StoreError> {
        let p = path.display().to_string();
        // redb caches up to 1 GiB of the file by default, and the file grows with every
        // workflow until completed commits are pruned: the soak saw agents reach 520 MiB. The
        // agent reads the file only at start-up (its state lives in memory), so a small cache
        // costs nothing.
        let db = redb::Builder::new()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| db_err(&p, e))?;
        // Make sure every table exists, so that reads never fail on a fresh file.
        let tx = db.begin_write().map_err(|e| db_err(&p, e))?;
        for t in [HOLDS, COMMITS, VOLUMES, META] {
            tx.open_table(t).map_err(|e| db_err(&p, e))?;
        }
        tx.commit().map_err(|e| db_err(&p, e))?;
        let store = RedbStore {
            db,
            path: p,
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
            queued: Mutex::new(Vec::new()),
        };
        let snapshot = store.load()?;
        Ok((store, snapshot))
    }

    fn load(&self) -> Result<Snapshot, StoreError> {
        let rx = self.db.begin_read().map_err(|e| db_err(&self.path, e))?;
        let mut snap = Snapshot::default();
        for (name, def) in [("holds", HOLDS), ("commits", COMMITS), ("volumes", VOLUMES)] {
            let table = rx.open_table(def).map_err(|e| db_err(&self.path, e))?;
            for entry in table.iter().map_err(|e| db_err(&self.path, e))? {
                let (k, v) = entry.map_err(|e| db_err(&self.path, e))?;
                let key = k.value().to_string();
                let bytes = v.value();
                let bad = |e: serde_json::Error| StoreError::Record {
                    path: self.path.clone(),
                    table: name,
                    key: key.clone(),
                    message: e.to_string(),
                };
                match name {
                    "holds" => snap.holds.push(serde_json::from_slice(bytes).map_err(bad)?),
                    "commits" => snap.commits.push(serde_json::from_slice(bytes).map_err(bad)?),
                    _ => snap.volumes.push(serde_json::from_slice(bytes).map_err(bad)?),
                }
            }
        }
        Ok(snap)
    }

    /// The file's identity, if it has one.
    ///
    /// Errors: the file cannot be read, or the identity does not decode.
    pub fn identity(&self) -> Result<Option<Identity>, StoreError> {
        let rx = self.db.begin_read().map_err(|e| db_err(&self.path, e))?;
        let table = rx.open_table(META).map_err(|e| db_err(&self.path, e))?;
        let Some(v) = table.get("identity").map_err(|e| db_err(&self.path, e))? else {
            return Ok(None);
        };
        serde_json::from_slice(v.value())
            .map(Some)
            .map_err(|e| StoreError::Record {
                path: self.path.clone(),
                table: "meta",
                key: "identity".into(),
                message: e.to_string(),
            })
    }

    /// Writes the file's identity, durably.
    ///
    /// Errors: the write failed.
    pub fn set_identity(&self, id: &Identity) -> Result<(), StoreError> {
        let p = &self.path;
        let tx = self.db.begin_write().map_err(|e| db_err(p, e))?;
        {
            let mut meta = tx.open_table(META).map_err(|e| db_err(p, e))?;
            meta.insert("identity", json(id).as_slice()).map_err(|e| db_err(p, e))?;
        }
        tx.commit().map_err(|e| db_err(p, e))
    }

    /// Creates a state file at `path` (which must not exist) holding `snapshot` and `identity`,
    /// durably: how an agent whose file was deleted while it ran saves what it holds in memory.
    ///
    /// Errors: the file cannot be created or written.
    pub fn create_from(path: &Path, snapshot: &Snapshot, identity: &Identity) -> Result<(), StoreError> {
        let (store, _) = RedbStore::open(path)?;
        store.set_identity(identity)?;
        store.write(&Batch {
            put_holds: snapshot.holds.clone(),
            put_commits: snapshot.commits.clone(),
            put_volumes: snapshot.volumes.clone(),
            ..Batch::default()
        })?;
        store.sync_through(store.written())
    }

    /// Sequence number of the last write made (0 before any): pass it to
    /// [`super::backend::Store::sync_through`] to make everything written so far durable.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// True when every write up to sequence number `seq` is known to be on disk.
    pub fn is_durable(&self, seq: u64) -> bool {
        self.durable.load(Ordering::SeqCst) >= seq
    }

    /// Waits until every write up to sequence number `seq` is on disk. If another sync that
    /// covers `seq` finished meanwhile, returns at once; otherwise every batch queued so far is
    /// written in one durable (fsync) transaction.
    ///
    /// Errors: the transaction failed (the batches it held are not known durable; the agent
    /// exits on it and starts again from the file).
    pub fn sync_through(&self, seq: u64) -> Result<(), StoreError> {
        let _one_at_a_time = self.sync_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_durable(seq) {
            return Ok(());
        }
        // Taken with the queue's lock held: sequence numbers are given out under it, so every
        // write numbered up to `covered` is in `batches` or already in the file (a write that
        // queues after this has a higher number). The transaction is made even when `batches`
        // is empty: it makes durable what the queue's bound wrote without waiting for the disk.
        let (batches, covered) = {
            let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
            (std::mem::take(&mut *queued), self.written())
        };
        self.put(&batches, Durability::Immediate)?;
        self.durable.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }

    /// Queues `batch` to be written by the next sync ([`super::backend::Store::sync_through`]),
    /// without touching the file; returns its sequence number.
    ///
    /// Errors: more than `MAX_QUEUED` (1,024) batches waited and writing them failed.
    pub fn write(&self, batch: &Batch) -> Result<u64, StoreError> {
        if batch.is_empty() {
            return Ok(self.written());
        }
        let encoded = Encoded::of(batch);
        let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        let seq = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        queued.push((seq, encoded));
        if queued.len() > MAX_QUEUED {
            let batches = std::mem::take(&mut *queued);
            self.put(&batches, Durability::None)?;
        }
        Ok(seq)
    }

    /// Writes `batches` in order in one transaction of `durability`.
    fn put(&self, batches: &[(u64, Encoded)], durability: Durability) -> Result<(), StoreError> {
        let p = &self.path;
        let mut tx = self.db.begin_write().map_err(|e| db_err(p, e))?;
        tx.set_durability(durability).map_err(|e| db_err(p, e))?;
        {
            let mut holds = tx.open_table(HOLDS).map_err(|e| db_err(p, e))?;
            let mut commits = tx.open_table(COMMITS).map_err(|e| db_err(p, e))?;
            let mut volumes = tx.open_table(VOLUMES).map_err(|e| db_err(p, e))?;
            for (_, b) in batches {
                for (id, v) in &b.put_holds {
                    holds.insert(id.as_str(), v.as_slice()).map_err(|e| db_err(p, e))?;
                }
                for id in &b.remove_holds {
                    holds.remove(id.as_str()).map_err(|e| db_err(p, e))?;
                }
                for (id, v) in &b.put_commits {
                    commits.insert(id.as_str(), v.as_slice()).map_err(|e| db_err(p, e))?;
                }
                for id in &b.remove_commits {
                    commits.remove(id.as_str()).map_err(|e| db_err(p, e))?;
                }
                for (key, v) in &b.put_volumes {
                    volumes.insert(key.as_str(), v.as_slice()).map_err(|e| db_err(p, e))?;
                }
                for key in &b.remove_volumes {
                    volumes.remove(key.as_str()).map_err(|e| db_err(p, e))?;
                }
            }
        }
        tx.commit().map_err(|e| db_err(p, e))
    }
}

impl Drop for RedbStore {
    /// A store closed in order (the agent stopping) puts what is queued in the file durably,
    /// as the last sync would have.
    fn drop(&mut self) {
        let written = self.written();
        if !self.is_durable(written)
            && let Err(e) = self.sync_through(written)
        {
            tracing::warn!(error = %e, "the state's last changes could not be written at close");
        }
    }
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // The record types are plain data (strings, numbers, maps with string keys): encoding
    // cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

fn db_err(path: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Db {
        path: path.to_string(),
        message: e.to_string(),
    }
}

/// A new random generation id (16 hex digits, from the clock and the process).
pub(super) fn new_generation() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::synth::{SynthSizes, cluster};

    /// Writes wait in memory until a sync, which puts all of them in the file in their order;
    /// past the queue's bound they reach the file before any sync, and the order still holds.
    #[test]
    fn queued_writes_reach_the_file_in_order_with_the_sync_that_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let inv = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 1,
                volumes: 3,
            },
        );
        let mv = |i: usize, deleted: bool| ManagedVolume {
            pv: inv.volumes[i].clone(),
            source: None,
            provisioned: true,
            deleted,
            events: Vec::new(),
        };
        let (store, _) = RedbStore::open(&path).unwrap();
        let n = MAX_QUEUED + 476;
        for i in 0..n {
            let put = Batch {
                put_volumes: vec![mv(i % 3, i % 2 == 1)],
                ..Batch::default()
            };
            assert_eq!(store.write(&put).unwrap(), i as u64 + 1);
        }
        assert!(
            store.queued.lock().unwrap().len() < MAX_QUEUED,
            "the bound wrote the oldest out"
        );
        let last = store
            .write(&Batch {
                remove_volumes: vec![volume_key(&mv(0, false).id())],
                ..Batch::default()
            })
            .unwrap();
        assert!(!store.is_durable(last), "a write alone is not durable");
        store.sync_through(last).unwrap();
        assert!(store.is_durable(last) && store.queued.lock().unwrap().is_empty());
        drop(store);
        let (_store, snap) = RedbStore::open(&path).unwrap();
        let mut found: Vec<(String, bool)> = snap.volumes.iter().map(|v| (v.pv.name.clone(), v.deleted)).collect();
        found.sort();
        // The last write of each volume: 0 removed; 1 at i = n-2 (even: live); 2 at n-1 (odd).
        let expected = vec![
            (inv.volumes[1].name.clone(), (n - 2) % 2 == 1),
            (inv.volumes[2].name.clone(), (n - 1) % 2 == 1),
        ];
        assert_eq!(found, expected);
    }

    /// Threads writing and syncing at once: when a sync returns, the write it covers is in the
    /// file (a later write queued meanwhile is never counted as synced by it).
    #[test]
    fn a_sync_covers_exactly_the_writes_queued_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let inv = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 1,
                volumes: 1,
            },
        );
        let (store, _) = RedbStore::open(&dir.path().join("state.redb")).unwrap();
        let store = std::sync::Arc::new(store);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (store, base) = (store.clone(), inv.volumes[0].clone());
                std::thread::spawn(move || {
                    for i in 0..150 {
                        let mut pv = (*base).clone();
                        pv.name = format!("t{t}-{i}");
                        let mv = ManagedVolume {
                            pv: std::sync::Arc::new(pv),
                            source: None,
                            provisioned: true,
                            deleted: false,
                            events: Vec::new(),
                        };
                        let key = volume_key(&mv.id());
                        let seq = store
                            .write(&Batch {
                                put_volumes: vec![mv],
                                ..Batch::default()
                            })
                            .unwrap();
                        store.sync_through(seq).unwrap();
                        let rx = store.db.begin_read().unwrap();
                        let table = rx.open_table(VOLUMES).unwrap();
                        assert!(
                            table.get(key.as_str()).unwrap().is_some(),
                            "{key} synced but not in the file"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
