//! The decision store: a JetStream key-value bucket (default `fedvol_decisions`), key = request
//! id, value = [`StoredDecision`] JSON. Every state change is a new revision; the bucket keeps
//! `history` revisions per key, on file storage (so decisions survive `kill -9` of any
//! coordinator, and of the server).
//!
//! async-nats 0.51's `create_key_value` reads the account info first and fails on
//! nats-server 2.9 (its answer lacks fields that client requires), so the bucket's backing
//! stream `KV_<bucket>` is created here with the settings a KV bucket has (subjects
//! `$KV.<bucket>.>`, rollup allowed, delete denied, direct get allowed, one message per
//! subject per history slot), then opened with `get_key_value`, which only reads stream info.
//!
//! Writes are compare-and-set on the key's revision ([`DecisionStore::create`],
//! [`DecisionStore::update`]), so several coordinators never overwrite each other's changes.

use async_nats::jetstream;
use async_nats::jetstream::kv;
use futures::{StreamExt, TryStreamExt};

use fedvol_proto::coordinator::DecisionSummary;
use fedvol_proto::decisions::StoredDecision;

use super::config::KvConfig;
use super::metrics::KvMetrics;
use super::own_writes::OwnWrites;

/// Why the store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// JetStream failed (unavailable, timed out, permission denied...).
    #[error("decision store: {0}")]
    Nats(String),
    /// A stored value is not a decision this coordinator can read.
    #[error("decision store: the value of `{key}` cannot be read: {message}")]
    Corrupt {
        /// The key.
        key: String,
        /// The decoding error.
        message: String,
    },
}

/// The outcome of a compare-and-set write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Written; the new revision.
    Done(u64),
    /// Someone else wrote first (the key exists, or its revision moved on).
    Conflict,
}

/// The bucket of stored decisions.
#[derive(Clone)]
pub struct DecisionStore {
    kv: kv::Store,
    /// Every write's duration and outcome (`fedvol_coordinator_kv_*`).
    metrics: KvMetrics,
    /// The listings of the decisions written here, for the index ([`super::own_writes`]).
    own: std::sync::Arc<OwnWrites>,
}

fn nats(e: impl std::fmt::Display) -> StoreError {
    StoreError::Nats(e.to_string())
}

/// True for a valid key (a request id the store can hold): 1 to 256 characters out of ASCII
/// letters, digits, `-`, `_`, `=` and `.`, not starting or ending with `.`, no `..`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 256
        && !key.starts_with('.')
        && !key.ends_with('.')
        && !key.contains("..")
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=' | '.'))
}

impl DecisionStore {
    /// Creates the bucket if it does not exist (stream `KV_<bucket>`, file storage,
    /// `replicas` copies, `history` revisions per key), then opens it. An existing bucket is
    /// used as it is.
    ///
    /// Errors: JetStream is not enabled, or the stream cannot be created or opened.
    pub async fn open(js: &jetstream::Context, cfg: &KvConfig) -> Result<DecisionStore, StoreError> {
        use jetstream::stream::{Config, DiscardPolicy, StorageType};
        js.get_or_create_stream(Config {
            name: format!("KV_{}", cfg.bucket),
            description: Some("fedvol decisions (key = request id)".into()),
            subjects: vec![format!("$KV.{}.>", cfg.bucket)],
            max_messages_per_subject: cfg.history.max(1),
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: cfg.replicas.max(1),
            max_consumers: cfg.max_consumers,
            ..Default::default()
        })
        .await
        .map_err(|e| StoreError::Nats(format!("cannot create the stream KV_{}: {e}", cfg.bucket)))?;
        let kv = js
            .get_key_value(&cfg.bucket)
            .await
            .map_err(|e| StoreError::Nats(format!("cannot open the bucket {}: {e}", cfg.bucket)))?;
        Ok(DecisionStore {
            kv,
            metrics: KvMetrics::default(),
            own: Default::default(),
        })
    }

    /// The listings of the decisions this store wrote, until the index's watch delivers them
    /// ([`super::own_writes`]).
    pub fn own_writes(&self) -> &OwnWrites {
        &self.own
    }

    /// The same store, counting its writes into `metrics`.
    pub fn with_metrics(mut self, metrics: KvMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Whether the bucket answers now (its stream's information is read): the coordinator's
    /// readiness.
    ///
    /// Errors: [`StoreError::Nats`] naming the bucket.
    pub async fn reachable(&self) -> Result<(), StoreError> {
        self.kv
            .status()
            .await
            .map(|_| ())
            .map_err(|e| StoreError::Nats(format!("the bucket {} does not answer: {e}", self.kv.name)))
    }

    /// The bucket's last revision now (its stream's last sequence, read from the server).
    ///
    /// Errors: [`StoreError::Nats`] naming the bucket.
    pub async fn last_revision(&self) -> Result<u64, StoreError> {
        self.kv
            .stream
            .get_info()
            .await
            .map(|i| i.state.last_sequence)
            .map_err(|e| StoreError::Nats(format!("the bucket {} does not answer: {e}", self.kv.name)))
    }

    /// Counts a write of `op` that ended as `written` after `took`.
    fn count(&self, op: &'static str, written: &Result<Write, StoreError>, started: std::time::Instant) {
        let outcome = match written {
            Ok(Write::Done(_)) => "done",
            Ok(Write::Conflict) => "conflict",
            Err(_) => "error",
        };
        self.metrics.write(op, outcome, started.elapsed());
    }

    /// The stored decision of `key` and its revision, if any.
    ///
    /// Errors: [`StoreError`].
    pub async fn get(&self, key: &str) -> Result<Option<(StoredDecision, u64)>, StoreError> {
        if !valid_key(key) {
            return Ok(None);
        }
        let Some(entry) = self.kv.entry(key).await.map_err(nats)? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let stored =
            fedvol_proto::decode(&entry.value, "stored decision", "coordinator").map_err(|e| StoreError::Corrupt {
                key: key.to_string(),
                message: e.to_string(),
            })?;
        Ok(Some((stored, entry.revision)))
    }

    /// Stores `value` under `key` only if the key has no value yet.
    ///
    /// Errors: [`StoreError`].
    pub async fn create(&self, key: &str, value: &StoredDecision) -> Result<Write, StoreError> {
        self.create_record(key, value, fedvol_proto::encode_sized(value, value.encoded_size_hint()))
            .await
    }

    /// As [`DecisionStore::create`], with `value` already encoded (`body`, from
    /// [`fedvol_proto::encode`]): a caller that answers with the same decision reuses the
    /// bytes ([`fedvol_proto::coordinator::SubmitReply::with_record`]).
    ///
    /// Errors: [`StoreError`].
    pub async fn create_record(
        &self,
        key: &str,
        value: &StoredDecision,
        body: bytes::Bytes,
    ) -> Result<Write, StoreError> {
        let started = std::time::Instant::now();
        let ticket = self.own.expect(key, &body, value);
        let written = match self.kv.create(key, body).await {
            Ok(rev) => Ok(Write::Done(rev)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(Write::Conflict),
            Err(e) => Err(nats(e)),
        };
        self.count("create", &written, started);
        self.own.settle(ticket, matches!(written, Ok(Write::Done(_))));
        written
    }

    /// Stores `value` under `key` only if the key's latest revision is still `revision`.
    ///
    /// Errors: [`StoreError`].
    pub async fn update(&self, key: &str, value: &StoredDecision, revision: u64) -> Result<Write, StoreError> {
        self.update_record(
            key,
            value,
            fedvol_proto::encode_sized(value, value.encoded_size_hint()),
            revision,
        )
        .await
    }

    /// As [`DecisionStore::update`], with `value` already encoded (see
    /// [`DecisionStore::create_record`]).
    ///
    /// Errors: [`StoreError`].
    pub async fn update_record(
        &self,
        key: &str,
        value: &StoredDecision,
        body: bytes::Bytes,
        revision: u64,
    ) -> Result<Write, StoreError> {
        let started = std::time::Instant::now();
        let ticket = self.own.expect(key, &body, value);
        let written = self.update_encoded(key, body, revision).await;
        self.count("update", &written, started);
        self.own.settle(ticket, matches!(written, Ok(Write::Done(_))));
        written
    }

    async fn update_encoded(&self, key: &str, body: bytes::Bytes, revision: u64) -> Result<Write, StoreError> {
        match self.kv.update(key, body, revision).await {
            Ok(rev) => Ok(Write::Done(rev)),
            Err(e) => revision_failure(e),
        }
    }

    /// Removes the decision under `key` with all its revisions, only if the key's latest
    /// revision is still `revision` (a decision changed meanwhile is kept). The bucket keeps
    /// one purge marker in its place, which watchers see as the key's removal.
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn purge(&self, key: &str, revision: u64) -> Result<Write, StoreError> {
        let started = std::time::Instant::now();
        let written = match self.kv.purge_expect_revision(key, Some(revision)).await {
            Ok(()) => Ok(Write::Done(revision)),
            Err(e) => revision_failure(e),
        };
        self.count("purge", &written, started);
        written
    }

    /// The raw value and revision of `key` (a key no request id can be, e.g. a lease).
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn get_raw(&self, key: &str) -> Result<Option<(bytes::Bytes, u64)>, StoreError> {
        let Some(entry) = self.kv.entry(key).await.map_err(nats)? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        Ok(Some((entry.value, entry.revision)))
    }

    /// Writes `value` under `key` only if it has no value (`revision` `None`) or its latest
    /// revision is still `revision`.
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn put_raw(&self, key: &str, value: bytes::Bytes, revision: Option<u64>) -> Result<Write, StoreError> {
        let started = std::time::Instant::now();
        let written = self.put_raw_uncounted(key, value, revision).await;
        self.count("lease", &written, started);
        written
    }

    /// Deletes `key` (a key no request id can be, e.g. a drain) only if its latest revision is
    /// still `revision`: the bucket keeps a delete marker, which watchers see as the key's
    /// removal.
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn delete_raw(&self, key: &str, revision: u64) -> Result<Write, StoreError> {
        let started = std::time::Instant::now();
        let written = match self.kv.delete_expect_revision(key, Some(revision)).await {
            Ok(()) => Ok(Write::Done(revision)),
            Err(e) => {
                let text = e.to_string();
                if text.contains("wrong last sequence") || text.contains("10071") {
                    Ok(Write::Conflict)
                } else {
                    Err(nats(text))
                }
            }
        };
        self.count("lease", &written, started);
        written
    }

    /// The JSON value of `key` (a key no request id can be: a quota ledger, the queue) decoded
    /// as `T`, and its revision.
    ///
    /// Errors: [`StoreError::Nats`]; [`StoreError::Corrupt`] when the value is not a `T`.
    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<(T, u64)>, StoreError> {
        let Some((bytes, rev)) = self.get_raw(key).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(|v| Some((v, rev)))
            .map_err(|e| StoreError::Corrupt {
                key: key.to_string(),
                message: e.to_string(),
            })
    }

    /// Writes `value` as JSON under `key`, compare-and-set as [`DecisionStore::put_raw`].
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn put_json<T: serde::Serialize>(
        &self,
        key: &str,
        value: &T,
        revision: Option<u64>,
    ) -> Result<Write, StoreError> {
        let body = bytes::Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        self.put_raw(key, body, revision).await
    }

    async fn put_raw_uncounted(
        &self,
        key: &str,
        value: bytes::Bytes,
        revision: Option<u64>,
    ) -> Result<Write, StoreError> {
        let written = match revision {
            None => self.kv.create(key, value).await.map_err(|e| {
                (e.kind() == kv::CreateErrorKind::AlreadyExists)
                    .then_some(())
                    .ok_or_else(|| e.to_string())
            }),
            Some(rev) => self.kv.update(key, value, rev).await.map_err(|e| {
                let text = e.to_string();
                (e.kind() == kv::UpdateErrorKind::WrongLastRevision
                    || text.contains("wrong last sequence")
                    || text.contains("10071"))
                .then_some(())
                .ok_or(text)
            }),
        };
        match written {
            Ok(rev) => Ok(Write::Done(rev)),
            Err(Ok(())) => Ok(Write::Conflict),
            Err(Err(e)) => Err(StoreError::Nats(e)),
        }
    }

    /// Every key starting with `prefix` (keys no request id can be, e.g. the quota ledgers).
    ///
    /// Errors: [`StoreError::Nats`].
    pub async fn raw_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.kv
            .keys()
            .await
            .map_err(nats)?
            .try_filter(|k| futures::future::ready(k.starts_with(prefix)))
            .try_collect()
            .await
            .map_err(nats)
    }

    /// Every change to the bucket: first the latest value of each key, then each change as it
    /// happens.
    ///
    /// Errors: [`StoreError::Nats`] when the watch cannot start.
    pub async fn watch(&self) -> Result<kv::Watch, StoreError> {
        self.kv.watch_with_history(">").await.map_err(nats)
    }

    /// Every change to the bucket from revision `revision` on (a watch resumed where an
    /// earlier one stopped: nothing before it is sent again).
    ///
    /// Errors: [`StoreError::Nats`] when the watch cannot start.
    pub async fn watch_from(&self, revision: u64) -> Result<kv::Watch, StoreError> {
        self.kv.watch_all_from_revision(revision).await.map_err(nats)
    }

    /// Every stored decision's summary, newest first (then by request id). Values that cannot
    /// be read are skipped with a warning.
    ///
    /// Errors: [`StoreError`] when the keys cannot be listed.
    pub async fn list(&self) -> Result<Vec<DecisionSummary>, StoreError> {
        // Keys with `/` are not request ids (the reconciler's lease).
        let keys: Vec<String> = self
            .kv
            .keys()
            .await
            .map_err(nats)?
            .try_filter(|k| futures::future::ready(!k.contains('/')))
            .try_collect()
            .await
            .map_err(nats)?;
        let mut out: Vec<DecisionSummary> = futures::stream::iter(keys)
            .map(|k| async move { (self.get(&k).await, k) })
            .buffer_unordered(16)
            .filter_map(|(r, k)| async move {
                match r {
                    Ok(Some((s, _))) => Some(DecisionSummary::of(k, &s)),
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(request_id = %k, error = %e, "stored decision skipped in the list");
                        None
                    }
                }
            })
            .collect()
            .await;
        out.sort_by(|a, b| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| a.request_id.cmp(&b.request_id))
        });
        Ok(out)
    }
}

/// A write that expected a revision and failed: [`Write::Conflict`] when the key had moved on
/// (some servers report that as a plain publish error, `wrong last sequence`, code 10071).
///
/// Errors: any other failure, as [`StoreError::Nats`].
fn revision_failure(e: kv::UpdateError) -> Result<Write, StoreError> {
    if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
        return Ok(Write::Conflict);
    }
    let text = e.to_string();
    if text.contains("wrong last sequence") || text.contains("10071") {
        Ok(Write::Conflict)
    } else {
        Err(nats(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_nats_accepts() {
        for k in ["r1", "wf-abc_DEF=.x", "a.b"] {
            assert!(valid_key(k), "{k}");
        }
        for k in ["", ".a", "a.", "a..b", "a b", "a/b", "a*", "a>", &"x".repeat(257)] {
            assert!(!valid_key(k), "{k}");
        }
    }
}
