//! Where plan answers arrive: one long-lived subscription per cluster instead of one per
//! cluster per request, and a reply subject of its own for every request.
//!
//! A coordinator process has one inbox, `<inbox prefix>.<nuid>`, made when it starts. Each
//! gather (one round of plans for one request) gets a number `n`, and its plan to cluster `c`
//! carries the reply subject `<inbox>.<c>.<n>`. The coordinator subscribes to `<inbox>.<c>.*`
//! once, the first time it asks `c`; a forwarding task per cluster reads each answer once and
//! routes it by the number its subject ends with to the gather that asked ([`Replies::open`]);
//! an answer for no waiting gather (late, after its deadline) is dropped. Subscribing and
//! unsubscribing once per cluster per request doubled a plan's latency at 64 clusters
//! (`fedvol-bench run --clusters 64`: p50 41 ms against 22 ms).
//!
//! - **One reply subject per request.** Under the shipped NATS permissions an agent may publish
//!   only answers, through `allow_responses`, which lets a client answer each reply subject it
//!   received once (NATS docs, "Authorization", `allow_responses` with the default `max: 1`:
//!   the server keeps one entry per reply subject, and a second request with the same reply
//!   subject replaces the first's). When every concurrent plan to a cluster carried the same
//!   reply subject, the server refused all but one answer and the other plans timed out while
//!   capacity was free (`tests/tests/burst.rs`, under `single.conf` and `secure.conf`).
//! - NATS's "no responders" status arrives on the request's own subject, so it reaches the
//!   gather that asked and no other.
//! - The subject still names the cluster: an answer belongs to the cluster whose token it
//!   arrived on, and only that cluster's agents receive requests carrying it. A secure leaf's
//!   login may publish `_INBOX_coordinator.*.<its cluster>.*` (`deploy/nats/leaf/secure-hub.conf`),
//!   so the hub passes the interest in `<inbox>.<c>.*` over that leaf's connection and no other.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::mpsc;

use fedvol_common::decision::{ClusterDecision, ClusterStatus};
use fedvol_proto::agent::{Plan, PlanReply};
use fedvol_proto::rpc::{RpcError, is_no_responders};
use fedvol_proto::{Code, Endpoint, Failure};

/// An agent's answer to a plan: its reply, or the failure it sent instead (which names the
/// cluster when the agent could tell; one that names none cannot be given a slot).
#[derive(Debug, Clone)]
pub enum AgentAnswer {
    /// The cluster's plan.
    Reply(Box<PlanReply>),
    /// Why the agent could not plan.
    Failed(Failure),
}

impl AgentAnswer {
    /// Decodes a plan answer. An answer that is neither a [`PlanReply`] nor a [`Failure`] but
    /// names its cluster is that cluster's `bad_answer` failure (its slot says so at once,
    /// rather than waiting for the deadline).
    ///
    /// Errors: an answer that cannot be read and names no cluster (the decoding error).
    pub fn decode(payload: &[u8]) -> Result<AgentAnswer, fedvol_proto::DecodeError> {
        #[derive(serde::Deserialize)]
        struct Named {
            cluster: String,
        }
        match Plan::decode_reply(payload, "coordinator") {
            Ok(Ok(reply)) => Ok(AgentAnswer::Reply(Box::new(reply))),
            Ok(Err(f)) => Ok(AgentAnswer::Failed(f)),
            Err(e) => match serde_json::from_slice::<Named>(payload) {
                Ok(n) => Ok(AgentAnswer::Failed(
                    Failure::new(Code::BadAnswer, format!("the agent's answer could not be read: {e}"))
                        .from_cluster(&n.cluster),
                )),
                Err(_) => Err(e),
            },
        }
    }

    /// The answering cluster, when the answer names one.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            AgentAnswer::Reply(r) => Some(&r.cluster),
            AgentAnswer::Failed(f) => f.cluster.as_deref(),
        }
    }

    /// The request the answer is for, when it names one.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            AgentAnswer::Reply(r) => Some(&r.request_id),
            AgentAnswer::Failed(f) => f.request_id.as_deref(),
        }
    }

    /// True when the answer carries a hold.
    pub fn holds(&self) -> bool {
        matches!(self, AgentAnswer::Reply(r) if r.hold.is_some())
    }

    /// The slot this answer gives its cluster, with `elapsed_ms` as measured by the coordinator
    /// (the answer is moved into it, not copied: at 1,000 clusters copies were a visible part
    /// of a plan's CPU).
    pub fn slot(self, elapsed_ms: f64) -> ClusterDecision {
        match self {
            AgentAnswer::Reply(r) => {
                let mut d = r.decision;
                d.status = ClusterStatus::Answered;
                d.elapsed_ms = elapsed_ms;
                d
            }
            AgentAnswer::Failed(f) => {
                ClusterDecision::without_answer(ClusterStatus::Error, elapsed_ms, Some(f.error.into()))
            }
        }
    }
}

/// What reached a gather from one cluster.
#[derive(Debug)]
pub enum Arrived {
    /// NATS found nobody serving the cluster's plan subject.
    NoResponders,
    /// The cluster's answer (or the failure it sent).
    Answer(AgentAnswer),
    /// A body that could not be read (the decoding error).
    Unreadable(String),
}

/// One message routed to a gather: the cluster whose reply subject it arrived on, when.
#[derive(Debug)]
pub struct Routed {
    /// The cluster the subject is for (an answer naming another is an impersonation); shared
    /// with its forwarding task, not copied per answer.
    pub cluster: Arc<str>,
    /// When the forwarding task read it.
    pub at: Instant,
    /// What it was.
    pub arrived: Arrived,
}

/// Gathers in progress by their number (the last token of their reply subjects), each with
/// the channel its answers go to.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    by_gather: HashMap<u64, mpsc::UnboundedSender<Routed>>,
}

type Shared = Arc<Mutex<Table>>;

fn lock(t: &Shared) -> MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// The coordinator's plan-answer routing (module docs).
#[derive(Debug)]
pub struct Replies {
    /// `<inbox prefix>.<nuid>`, this process's.
    inbox: String,
    /// Clusters with a subscription.
    watched: tokio::sync::Mutex<HashSet<String>>,
    /// Gathers in progress.
    table: Shared,
}

/// One gather's share of the answers. Dropping it stops the routing to it.
#[derive(Debug)]
pub struct Gather {
    /// The answers of the clusters it asked, as they arrive.
    pub answers: mpsc::UnboundedReceiver<Routed>,
    id: u64,
    inbox: String,
    table: Shared,
}

impl Gather {
    /// The reply subject of this gather's plan to `cluster`: `<inbox>.<cluster>.<n>`.
    pub fn reply_subject(&self, cluster: &str) -> String {
        format!("{}.{cluster}.{}", self.inbox, self.id)
    }
}

impl Drop for Gather {
    fn drop(&mut self) {
        lock(&self.table).by_gather.remove(&self.id);
    }
}

impl Replies {
    /// Routing under a fresh inbox of `client` (`<inbox prefix>.<nuid>`).
    pub fn new(client: &async_nats::Client) -> Replies {
        Replies {
            inbox: client.new_inbox(),
            watched: tokio::sync::Mutex::new(HashSet::new()),
            table: Arc::new(Mutex::new(Table::default())),
        }
    }

    /// Makes sure each of `clusters`' answers are listened for: subscribes `<inbox>.<c>.*`
    /// the first time `c` is asked and starts its forwarding task. The subscriptions reach the
    /// server before any later publish on the same connection. One lock for the whole list: a
    /// plan asks every cluster.
    ///
    /// Errors: a subscription failed ([`RpcError::Nats`]); the clusters before it are watched.
    pub async fn watch<'a>(
        &self,
        client: &async_nats::Client,
        clusters: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), RpcError> {
        let mut watched = self.watched.lock().await;
        for cluster in clusters {
            if watched.contains(cluster) {
                continue;
            }
            let subject = format!("{}.{cluster}.*", self.inbox);
            let mut sub = client.subscribe(subject.clone()).await.map_err(|e| RpcError::Nats {
                subject: subject.clone(),
                message: e.to_string(),
            })?;
            watched.insert(cluster.to_string());
            let table = self.table.clone();
            let cluster: Arc<str> = Arc::from(cluster);
            tokio::spawn(async move {
                while let Some(m) = sub.next().await {
                    forward(&table, &cluster, &m);
                }
                tracing::warn!(%subject, "plan answer subscription ended");
            });
        }
        Ok(())
    }

    /// Starts a gather: its answers arrive on [`Gather::reply_subject`]s of its own.
    pub fn open(&self) -> Gather {
        let (tx, answers) = mpsc::unbounded_channel();
        let mut t = lock(&self.table);
        t.next += 1;
        let id = t.next;
        t.by_gather.insert(id, tx);
        Gather {
            answers,
            id,
            inbox: self.inbox.clone(),
            table: self.table.clone(),
        }
    }
}

/// Routes one message that arrived on `cluster`'s subscription to the gather its subject's
/// last token names (module docs).
fn forward(table: &Shared, cluster: &Arc<str>, m: &async_nats::Message) {
    let at = Instant::now();
    let Some(gather) = m.subject.rsplit('.').next().and_then(|n| n.parse::<u64>().ok()) else {
        tracing::warn!(cluster = %cluster, "a plan answer on a subject naming no gather: dropped");
        return;
    };
    let arrived = if is_no_responders(m) {
        Arrived::NoResponders
    } else {
        match AgentAnswer::decode(&m.payload) {
            Ok(a) => Arrived::Answer(a),
            Err(e) => Arrived::Unreadable(e.to_string()),
        }
    };
    let t = lock(table);
    let Some(tx) = t.by_gather.get(&gather) else {
        tracing::debug!(cluster = %cluster, gather, "a plan answer no gather waits for: dropped");
        return;
    };
    // The gather may have ended meanwhile: then the answer is dropped.
    let _ = tx.send(Routed {
        cluster: cluster.clone(),
        at,
        arrived,
    });
}
