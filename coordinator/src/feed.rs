//! The decisions bucket read from the client side: a watch of the JetStream key-value bucket
//! the coordinators store decisions in (DESIGN §5), yielding the latest value of every
//! decision first, then every change as it happens, each decoded as a [`StoredDecision`].
//! `fedvol decisions watch` prints it; `fedvol ui` keeps its decisions list and live updates
//! from it. Reading the bucket needs the user's NATS credentials to allow it, as for every
//! client command.

use futures::StreamExt;

use async_nats::jetstream::kv;
use fedvol_proto::decisions::StoredDecision;

/// The bucket the coordinators store decisions in unless configured otherwise
/// (`kv.bucket` in the coordinator's configuration).
pub const DEFAULT_BUCKET: &str = "fedvol_decisions";

/// Why the feed could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The bucket does not exist or cannot be read with these credentials.
    #[error("cannot open the decision store (JetStream KV `{bucket}`): {message}")]
    Open {
        /// The bucket.
        bucket: String,
        /// The client's error.
        message: String,
    },
    /// The watch could not start, or ended with an error.
    #[error("the watch of the decision store (JetStream KV `{bucket}`) failed: {message}")]
    Watch {
        /// The bucket.
        bucket: String,
        /// The client's error.
        message: String,
    },
}

/// One change of the bucket.
#[derive(Debug)]
pub enum FeedEvent {
    /// A decision was stored (or was there when the watch started).
    Put {
        /// The key: the request id.
        key: String,
        /// The bucket's revision of this value (grows with every change of the bucket).
        revision: u64,
        /// The decoded value.
        stored: Box<StoredDecision>,
    },
    /// A value under a request id that does not decode as a stored decision.
    Unreadable {
        /// The key.
        key: String,
        /// The revision.
        revision: u64,
        /// Why it does not decode.
        error: String,
    },
    /// A decision was deleted or purged.
    Removed {
        /// The key.
        key: String,
        /// The revision of the deletion.
        revision: u64,
    },
}

/// A running watch of the decisions bucket (one JetStream consumer, however many readers the
/// caller serves from it).
pub struct DecisionFeed {
    bucket: String,
    watch: kv::Watch,
}

impl DecisionFeed {
    /// Opens `bucket` with `nats` and starts the watch from the latest value of every key.
    ///
    /// Errors: [`FeedError::Open`] (no bucket, JetStream off, not permitted),
    /// [`FeedError::Watch`].
    pub async fn open(nats: &async_nats::Client, bucket: &str) -> Result<DecisionFeed, FeedError> {
        let js = async_nats::jetstream::new(nats.clone());
        let kv = js.get_key_value(bucket).await.map_err(|e| FeedError::Open {
            bucket: bucket.to_string(),
            message: e.to_string(),
        })?;
        let watch = kv.watch_with_history(">").await.map_err(|e| FeedError::Watch {
            bucket: bucket.to_string(),
            message: e.to_string(),
        })?;
        Ok(DecisionFeed {
            bucket: bucket.to_string(),
            watch,
        })
    }

    /// The next change; `None` when the watch ended. Keys that are not request ids (those
    /// holding `/`: the reconciler's lease) are skipped.
    ///
    /// Errors: [`FeedError::Watch`] when the watch failed; the feed may be read again.
    pub async fn next(&mut self) -> Option<Result<FeedEvent, FeedError>> {
        loop {
            let entry = match self.watch.next().await? {
                Ok(e) => e,
                Err(e) => {
                    return Some(Err(FeedError::Watch {
                        bucket: self.bucket.clone(),
                        message: e.to_string(),
                    }));
                }
            };
            if entry.key.contains('/') {
                continue;
            }
            return Some(Ok(event(entry)));
        }
    }
}

fn event(e: kv::Entry) -> FeedEvent {
    match e.operation {
        kv::Operation::Delete | kv::Operation::Purge => FeedEvent::Removed {
            key: e.key,
            revision: e.revision,
        },
        kv::Operation::Put => match fedvol_proto::decode::<StoredDecision>(&e.value, "stored decision", "client") {
            Ok(s) => FeedEvent::Put {
                key: e.key,
                revision: e.revision,
                stored: Box::new(s),
            },
            Err(err) => FeedEvent::Unreadable {
                key: e.key,
                revision: e.revision,
                error: err.to_string(),
            },
        },
    }
}
