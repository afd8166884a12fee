//! Replicated state: a cluster's agent replicas share their state through JetStream,
//! replicated with the NATS cluster, and one of them (the one holding the cluster's lease)
//! serves.
//!
//! **The state stream.** Stream `FEDVOL_STATE_<cluster>` (file storage, `stateReplicas`
//! copies), one subject `fedvol_state.<cluster>`. Each message is one of:
//! `{"batches": [...]}` (state changes, each an atomic [`Batch`], grouped as they came),
//! `{"snapshot": {...}}` (the whole state; every message before it is purged), or
//! `{"leader": "<instance>"}` (a replica took over). The state is the replay of the stream.
//!
//! **One writer, fenced.** Every message is published with `Nats-Expected-Last-Sequence` = the
//! last sequence its writer knows. A replica that takes over first replays the stream, then
//! appends its `leader` message after the last sequence it read: from then on, any write of the
//! replica it replaced is refused by the server (wrong last sequence), and that replica stops
//! ([`StreamStore::fenced`]): a replica paused past its lease and woken up cannot acknowledge
//! anything, so two replicas never commit the same capacity. Safety rests on the stream's
//! sequence, not on clocks; the lease only decides who tries.
//!
//! **The lease.** Key `<cluster>` of the KV bucket `fedvol_agent_leases`: `{holder,
//! expires_ms}`, written by compare-and-set and renewed with every heartbeat; valid for three
//! heartbeat intervals. A standby tries to take it every interval, so service resumes within
//! about four heartbeat intervals of the active replica's death, plus the replay.
//!
//! **Durability.** [`StreamStore::write`] queues the batch and returns its number; a publisher
//! task sends everything queued as one message and waits for the server's acknowledgement
//! (stored, and replicated when the stream is); [`StreamStore::sync_through`] waits for that, so
//! answers acknowledge only what JetStream holds, and concurrent answers share one publish.
//! Every [`SNAPSHOT_EVERY`] messages the publisher writes a snapshot and purges what precedes
//! it, so a take-over replays little.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;

use super::records::{Commit, Hold, ManagedVolume};
use super::store::{Batch, Snapshot, StoreError, volume_key};

/// Messages between two snapshots.
pub const SNAPSHOT_EVERY: u64 = 500;

/// The lease bucket.
pub const LEASE_BUCKET: &str = "fedvol_agent_leases";

/// One message of the state stream.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    /// State changes, in order.
    Batches(Vec<Batch>),
    /// The whole state.
    Snapshot(Snapshot),
    /// A replica took over.
    Leader(String),
}

/// The state as the stream says, kept by key so that batches apply cheaply.
#[derive(Debug, Default)]
struct Mirror {
    holds: BTreeMap<String, Hold>,
    commits: BTreeMap<String, Commit>,
    volumes: BTreeMap<String, ManagedVolume>,
}

impl Mirror {
    fn from_snapshot(s: Snapshot) -> Mirror {
        Mirror {
            holds: s.holds.into_iter().map(|h| (h.request_id.clone(), h)).collect(),
            commits: s.commits.into_iter().map(|c| (c.request_id.clone(), c)).collect(),
            volumes: s.volumes.into_iter().map(|v| (volume_key(&v.id()), v)).collect(),
        }
    }

    fn apply(&mut self, batch: Batch) {
        for h in batch.put_holds {
            self.holds.insert(h.request_id.clone(), h);
        }
        for id in &batch.remove_holds {
            self.holds.remove(id);
        }
        for c in batch.put_commits {
            self.commits.insert(c.request_id.clone(), c);
        }
        for id in &batch.remove_commits {
            self.commits.remove(id);
        }
        for v in batch.put_volumes {
            self.volumes.insert(volume_key(&v.id()), v);
        }
        for key in &batch.remove_volumes {
            self.volumes.remove(key);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            holds: self.holds.values().cloned().collect(),
            commits: self.commits.values().cloned().collect(),
            volumes: self.volumes.values().cloned().collect(),
        }
    }
}

/// How far the stream has acknowledged this replica's writes.
#[derive(Debug, Default)]
struct Durable {
    /// The highest batch number JetStream acknowledged.
    through: u64,
    /// Why writing stopped (fenced by another replica, or the stream failed), if it did.
    failed: Option<String>,
}

/// The cluster's state stream, written by this replica (see the module docs).
pub struct StreamStore {
    cluster: String,
    written: AtomicU64,
    durable: Arc<(Mutex<Durable>, Condvar)>,
    queue: tokio::sync::mpsc::UnboundedSender<(u64, Batch)>,
    fenced: tokio::sync::watch::Receiver<Option<String>>,
}

impl std::fmt::Debug for StreamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamStore").field("cluster", &self.cluster).finish()
    }
}

/// The stream's name for `cluster`.
pub fn stream_name(cluster: &str) -> String {
    format!("FEDVOL_STATE_{cluster}")
}

/// The stream's subject for `cluster`.
pub fn subject(cluster: &str) -> String {
    format!("fedvol_state.{cluster}")
}

fn stream_err(cluster: &str, message: impl std::fmt::Display) -> StoreError {
    StoreError::Stream {
        cluster: cluster.to_string(),
        message: message.to_string(),
    }
}

/// Creates (or opens) the state stream of `cluster` with `replicas` copies.
///
/// Errors: JetStream is not enabled or refuses the stream.
pub async fn open_stream(
    js: &jetstream::Context,
    cluster: &str,
    replicas: usize,
) -> Result<jetstream::stream::Stream, StoreError> {
    use jetstream::stream::{Config, StorageType};
    js.get_or_create_stream(Config {
        name: stream_name(cluster),
        description: Some(format!("fedvol agent state of cluster {cluster}")),
        subjects: vec![subject(cluster)],
        storage: StorageType::File,
        allow_direct: true,
        num_replicas: replicas.max(1),
        ..Default::default()
    })
    .await
    .map_err(|e| stream_err(cluster, format!("cannot create or open the state stream: {e}")))
}

/// Replays the state stream: the state it holds and its last sequence (0 when empty).
///
/// Errors: the stream could not be read, or holds a message that is not a state entry.
pub async fn replay(stream: &mut jetstream::stream::Stream, cluster: &str) -> Result<(Snapshot, u64), StoreError> {
    let info = stream
        .info()
        .await
        .map_err(|e| stream_err(cluster, format!("cannot read the state stream: {e}")))?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut mirror = Mirror::default();
    if last == 0 {
        return Ok((mirror.snapshot(), 0));
    }
    for seq in first.max(1)..=last {
        let msg = match stream.direct_get(seq).await {
            Ok(m) => m,
            // A message purged meanwhile (a snapshot written by a replica being replaced) or
            // never stored: the next snapshot covers it.
            Err(e) if e.kind() == jetstream::stream::DirectGetErrorKind::NotFound => continue,
            Err(e) => return Err(stream_err(cluster, format!("cannot read message {seq}: {e}"))),
        };
        match serde_json::from_slice::<Entry>(&msg.payload) {
            Ok(Entry::Batches(batches)) => batches.into_iter().for_each(|b| mirror.apply(b)),
            Ok(Entry::Snapshot(s)) => mirror = Mirror::from_snapshot(s),
            Ok(Entry::Leader(_)) => {}
            Err(e) => return Err(stream_err(cluster, format!("message {seq} is not a state entry: {e}"))),
        }
    }
    Ok((mirror.snapshot(), last))
}

/// Appends the `leader` entry of `instance` right after sequence `last`, fencing every other
/// writer. Returns its sequence.
///
/// Errors: another replica wrote after `last` (replay again), or the stream failed.
pub async fn claim(js: &jetstream::Context, cluster: &str, instance: &str, last: u64) -> Result<u64, StoreError> {
    publish(js, cluster, &Entry::Leader(instance.to_string()), last).await
}

async fn publish(js: &jetstream::Context, cluster: &str, entry: &Entry, last: u64) -> Result<u64, StoreError> {
    let body = Bytes::from(serde_json::to_vec(entry).map_err(|e| stream_err(cluster, e))?);
    let msg = jetstream::message::PublishMessage::build()
        .payload(body)
        .expected_last_sequence(last);
    let ack = js
        .send_publish(subject(cluster), msg)
        .await
        .map_err(|e| stream_err(cluster, e))?
        .await
        .map_err(|e| stream_err(cluster, e))?;
    Ok(ack.sequence)
}

impl StreamStore {
    /// The store of `cluster`, writing after sequence `last` (this replica's `leader` entry)
    /// with the state `snapshot` (what the replay gave). Starts the publisher task.
    pub fn start(
        js: jetstream::Context,
        stream: jetstream::stream::Stream,
        cluster: &str,
        snapshot: Snapshot,
        last: u64,
    ) -> StreamStore {
        let (queue, rx) = tokio::sync::mpsc::unbounded_channel();
        let durable = Arc::new((Mutex::new(Durable::default()), Condvar::new()));
        let (fence_tx, fenced) = tokio::sync::watch::channel(None);
        let publisher = Publisher {
            js,
            stream,
            cluster: cluster.to_string(),
            last,
            since_snapshot: 0,
            mirror: Mirror::from_snapshot(snapshot),
            durable: durable.clone(),
            fence: fence_tx,
        };
        tokio::spawn(publisher.run(rx));
        StreamStore {
            cluster: cluster.to_string(),
            written: AtomicU64::new(0),
            durable,
            queue,
            fenced,
        }
    }

    /// Changes to `Some(reason)` when this replica may no longer write: another replica took
    /// over (or the stream failed). The agent must then stop serving.
    pub fn fenced(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.fenced.clone()
    }

    /// Sequence number of the last write made (0 before any).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// True when JetStream acknowledged every write up to `seq`.
    pub fn is_durable(&self, seq: u64) -> bool {
        self.durable.0.lock().unwrap_or_else(|p| p.into_inner()).through >= seq
    }

    /// Waits (blocking) until JetStream acknowledged every write up to `seq`.
    ///
    /// Errors: writing stopped (fenced, or the stream failed).
    pub fn sync_through(&self, seq: u64) -> Result<(), StoreError> {
        let (lock, cv) = &*self.durable;
        let mut d = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(why) = &d.failed {
                return Err(stream_err(&self.cluster, why));
            }
            if d.through >= seq {
                return Ok(());
            }
            d = cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Queues `batch` for the publisher; returns its number.
    ///
    /// Errors: writing stopped (fenced, or the stream failed).
    pub fn write(&self, batch: &Batch) -> Result<u64, StoreError> {
        if let Some(why) = &self.durable.0.lock().unwrap_or_else(|p| p.into_inner()).failed {
            return Err(stream_err(&self.cluster, why));
        }
        if batch.is_empty() {
            return Ok(self.written());
        }
        let n = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        self.queue
            .send((n, batch.clone()))
            .map_err(|_| stream_err(&self.cluster, "the state publisher stopped"))?;
        Ok(n)
    }
}

/// The task that appends queued batches to the stream, in order, one message per group.
struct Publisher {
    js: jetstream::Context,
    stream: jetstream::stream::Stream,
    cluster: String,
    last: u64,
    since_snapshot: u64,
    mirror: Mirror,
    durable: Arc<(Mutex<Durable>, Condvar)>,
    fence: tokio::sync::watch::Sender<Option<String>>,
}

/// Most batches in one message (a message stays far below `max_payload` for ordinary batches).
const MAX_GROUP: usize = 64;

impl Publisher {
    async fn run(mut self, mut rx: tokio::sync::mpsc::UnboundedReceiver<(u64, Batch)>) {
        while let Some(first) = rx.recv().await {
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(b) => group.push(b),
                    Err(_) => break,
                }
            }
            let through = group.last().map_or(0, |(n, _)| *n);
            let batches: Vec<Batch> = group.into_iter().map(|(_, b)| b).collect();
            let entry = Entry::Batches(batches);
            match publish(&self.js, &self.cluster, &entry, self.last).await {
                Ok(seq) => {
                    self.last = seq;
                    if let Entry::Batches(batches) = entry {
                        batches.into_iter().for_each(|b| self.mirror.apply(b));
                    }
                    self.done(through, None);
                    self.since_snapshot += 1;
                    if self.since_snapshot >= SNAPSHOT_EVERY {
                        self.snapshot().await;
                    }
                }
                Err(e) => {
                    let why = format!("writing the state stream failed (another replica took over?): {e}");
                    tracing::error!(cluster = %self.cluster, error = %why, "this replica stops writing");
                    // Fenced first, then the waiters woken: whoever learns that a write was
                    // refused finds the replica already marked as no longer writing.
                    self.fence.send_replace(Some(why.clone()));
                    self.done(0, Some(why));
                    return;
                }
            }
        }
    }

    fn done(&self, through: u64, failed: Option<String>) {
        let (lock, cv) = &*self.durable;
        let mut d = lock.lock().unwrap_or_else(|p| p.into_inner());
        d.through = d.through.max(through);
        if failed.is_some() {
            d.failed = failed;
        }
        cv.notify_all();
    }

    /// Writes a snapshot after the last message and purges every message before it. A failure
    /// is logged; the next snapshot tries again (the replay is then longer, never wrong).
    async fn snapshot(&mut self) {
        let entry = Entry::Snapshot(self.mirror.snapshot());
        match publish(&self.js, &self.cluster, &entry, self.last).await {
            Ok(seq) => {
                self.last = seq;
                self.since_snapshot = 0;
                if let Err(e) = self.stream.purge().sequence(seq).await {
                    tracing::warn!(cluster = %self.cluster, error = %e, "state stream not purged before the snapshot");
                }
            }
            Err(e) => tracing::warn!(cluster = %self.cluster, error = %e, "state snapshot not written"),
        }
    }
}

/// The cluster's lease (see the module docs).
pub struct Lease {
    kv: jetstream::kv::Store,
    cluster: String,
    instance: String,
    ttl: Duration,
}

/// The lease as stored.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LeaseRecord {
    holder: String,
    expires_ms: u64,
}

impl Lease {
    /// Opens the lease bucket (creating its stream by hand, as nats-server 2.9 needs) for
    /// `cluster`, as replica `instance`; a lease lasts `ttl`.
    ///
    /// Errors: JetStream is not enabled or refuses the bucket.
    pub async fn open(
        js: &jetstream::Context,
        cluster: &str,
        instance: &str,
        ttl: Duration,
        replicas: usize,
    ) -> Result<Lease, StoreError> {
        use jetstream::stream::{Config, DiscardPolicy, StorageType};
        js.get_or_create_stream(Config {
            name: format!("KV_{LEASE_BUCKET}"),
            subjects: vec![format!("$KV.{LEASE_BUCKET}.>")],
            max_messages_per_subject: 1,
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: replicas.max(1),
            ..Default::default()
        })
        .await
        .map_err(|e| stream_err(cluster, format!("cannot create the lease bucket: {e}")))?;
        let kv = js
            .get_key_value(LEASE_BUCKET)
            .await
            .map_err(|e| stream_err(cluster, format!("cannot open the lease bucket: {e}")))?;
        Ok(Lease {
            kv,
            cluster: cluster.to_string(),
            instance: instance.to_string(),
            ttl,
        })
    }

    /// Takes the lease when it is free or lapsed, or renews it when this replica holds it.
    /// Returns whether this replica holds it now.
    ///
    /// Errors: the bucket could not be read or written.
    pub async fn take_or_renew(&self) -> Result<bool, StoreError> {
        let now = fedvol_proto::now_ms();
        let mine = LeaseRecord {
            holder: self.instance.clone(),
            expires_ms: now + self.ttl.as_millis() as u64,
        };
        let body = Bytes::from(serde_json::to_vec(&mine).map_err(|e| stream_err(&self.cluster, e))?);
        let current = self
            .kv
            .entry(self.cluster.as_str())
            .await
            .map_err(|e| stream_err(&self.cluster, e))?;
        let written = match current {
            Some(e) if e.operation == jetstream::kv::Operation::Put => {
                match serde_json::from_slice::<LeaseRecord>(&e.value) {
                    Ok(l) if l.holder != self.instance && l.expires_ms > now => return Ok(false),
                    _ => self.kv.update(self.cluster.as_str(), body, e.revision).await.is_ok(),
                }
            }
            _ => self.kv.create(self.cluster.as_str(), body).await.is_ok(),
        };
        Ok(written)
    }
}
