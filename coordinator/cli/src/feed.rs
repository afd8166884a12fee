//! The decisions as they change, read from the client side through the coordinators: the
//! `changes` operation asked again and again (a long poll: "every decision changed after
//! revision R, waiting up to a bound for one"), yielding the latest value of every decision
//! first, then every change as it happens. `fedvol decisions watch` prints it; `fedvol ui`
//! keeps its decisions list and live updates from it.
//!
//! Users hold no JetStream consumer: a consumer is a shared resource of the bucket's stream
//! (its `max_consumers`), so the shipped NATS permissions give users no JetStream API at all
//! and the coordinators, which follow the bucket anyway, answer for it (NATS docs: JetStream,
//! Consumers; Authorization). Only the latest change of each decision is kept, so a watcher
//! that asks less often than a decision changes may skip an intermediate state.

use std::collections::VecDeque;
use std::time::Duration;

use fedvol_proto::coordinator::{self as api, ChangeKind, ChangesQuery, ClusterCounts, DecisionSummary};

use crate::client::{Client, ClientError};

/// How long one `changes` query waits at the coordinator for a change, ms.
pub const WAIT_MS: u64 = 10_000;

/// Why the feed could not go on.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// No coordinator answered, or NATS failed (the feed may be read again).
    #[error("the watch of the decision store failed: {0}")]
    Call(#[from] ClientError),
    /// A coordinator answered with an error (the feed may be read again).
    #[error("the watch of the decision store failed: {message} ({code})")]
    Refused {
        /// The error code.
        code: String,
        /// The coordinator's message.
        message: String,
    },
}

impl FeedError {
    /// True when a coordinator refused the query for its load (`overloaded`: its watch pool,
    /// the user's `maxInFlightPerUser`, or the user's read budget): nothing is wrong with the
    /// query, ask again after a pause ([`Backoff`]).
    pub fn is_overloaded(&self) -> bool {
        matches!(self, FeedError::Refused { code, .. } if code == fedvol_proto::Code::Overloaded.as_str())
    }
}

/// The pauses between queries refused `overloaded`: 1 s, doubling to 16 s, each with up to a
/// quarter more drawn at random (so many watchers refused together do not come back together:
/// exponential backoff with jitter, as the AWS Architecture Blog's "Exponential Backoff And
/// Jitter" recommends).
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    /// The first pause.
    pub const FIRST: Duration = Duration::from_secs(1);
    /// The longest pause.
    pub const MOST: Duration = Duration::from_secs(16);

    /// Starts at [`Backoff::FIRST`].
    pub fn new() -> Backoff {
        Backoff { next: Self::FIRST }
    }

    /// The next pause (then doubled, up to [`Backoff::MOST`]).
    pub fn next_pause(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(Self::MOST);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
    }

    /// Starts again at [`Backoff::FIRST`] (a query was answered).
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
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
        /// The decision's summary.
        summary: Box<DecisionSummary>,
        /// How many clusters its plan reached, answered and could place it on.
        clusters: ClusterCounts,
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

/// A watch of the decisions through the coordinators: where it is up to, and the changes
/// received but not read yet.
#[derive(Debug, Default)]
pub struct DecisionFeed {
    after: u64,
    pending: VecDeque<api::DecisionChange>,
}

impl DecisionFeed {
    /// A feed from the start: the latest value of every decision first.
    pub fn new() -> DecisionFeed {
        DecisionFeed::default()
    }

    /// The bucket revision the feed has delivered everything up to.
    pub fn revision(&self) -> u64 {
        self.after
    }

    /// The request ids of the changes received but not read yet (`decisions watch` shows ids
    /// by a start unique among these and those already read).
    pub fn pending_ids(&self) -> impl Iterator<Item = &str> {
        self.pending.iter().map(|c| c.request_id.as_str())
    }

    /// The next change, asking the coordinators (`client`) when none is pending; waits as long
    /// as nothing changes.
    ///
    /// Errors: [`FeedError`] when a query fails; the feed may be read again and goes on from
    /// where it was.
    pub async fn next(&mut self, client: &Client) -> Result<FeedEvent, FeedError> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Ok(event(c));
            }
            self.fill(client).await?;
        }
    }

    /// Asks once for the changes after the feed's revision (waiting up to [`WAIT_MS`]) and
    /// keeps them pending.
    ///
    /// Errors: [`FeedError`].
    pub async fn fill(&mut self, client: &Client) -> Result<(), FeedError> {
        self.fill_waiting(client, WAIT_MS).await
    }

    /// As [`DecisionFeed::fill`], waiting up to `wait_ms` for a change (0: what is there now,
    /// e.g. a page's first look at an empty store).
    ///
    /// Errors: [`FeedError`].
    pub async fn fill_waiting(&mut self, client: &Client, wait_ms: u64) -> Result<(), FeedError> {
        let q = ChangesQuery {
            after: self.after,
            wait_ms,
        };
        let within = Duration::from_millis(wait_ms) + client.timeout;
        match client.call_within::<api::Changes>(&q, within).await? {
            Ok(reply) => {
                self.after = self.after.max(reply.last);
                self.pending
                    .extend(reply.changes.into_iter().filter(|c| c.revision > q.after));
                Ok(())
            }
            Err(f) => Err(FeedError::Refused {
                code: f.error.code.to_string(),
                message: f.error.message,
            }),
        }
    }
}

fn event(c: api::DecisionChange) -> FeedEvent {
    let (key, revision) = (c.request_id, c.revision);
    match c.change {
        ChangeKind::Put { summary, clusters } => FeedEvent::Put {
            key,
            revision,
            summary,
            clusters,
        },
        ChangeKind::Unreadable { error } => FeedEvent::Unreadable { key, revision, error },
        ChangeKind::Removed => FeedEvent::Removed { key, revision },
    }
}
