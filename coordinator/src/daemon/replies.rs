//! Where plan answers arrive (issue 14): one long-lived subscription per cluster instead of one
//! per cluster per request.
//!
//! A coordinator process has one inbox, `<inbox prefix>.<nuid>`, made when it starts. A plan
//! for cluster `c` carries the reply subject `<inbox>.<c>`, and the coordinator subscribes to
//! that literal subject once, the first time it asks `c`. A forwarding task per cluster reads
//! each answer once and routes it by the request id it names to the gathers waiting for that
//! request ([`Replies::open`]); an answer for no waiting gather (late, after its deadline) is
//! dropped. Subscribing and unsubscribing once per cluster per request doubled a plan's latency
//! at 64 clusters (`fedvol-bench run --clusters 64`: p50 41 ms against 22 ms).
//!
//! - NATS's "no responders" status carries no request id: it says nobody serves `c`'s plan
//!   subject, so it goes to every gather waiting for `c` at that moment. (A cluster whose agent
//!   comes back in that instant may be marked unreachable for a request it would have answered.)
//! - An answer that names no request id goes to the gathers waiting for `c` when there is
//!   exactly one; otherwise it cannot be attributed and is dropped (logged).
//! - The subscription is literal, so nats-server 2.9 still sends "no responders" to it (it does
//!   not for a wildcard subscription), and its subject has the shape a secure leaf's login may
//!   publish (`_INBOX_coordinator.*.<its cluster>`, `deploy/nats/leaf/secure-hub.conf`): the
//!   hub passes its interest over that leaf's connection and no other.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::mpsc;

use fedvol_proto::rpc::{RpcError, is_no_responders};

use super::fanout::AgentAnswer;

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
    /// The cluster the subject is for (an answer naming another is an impersonation).
    pub cluster: String,
    /// When the forwarding task read it.
    pub at: Instant,
    /// What it was.
    pub arrived: Arrived,
}

/// A waiting gather: the clusters it asked, and where its answers go.
#[derive(Debug)]
struct Waiter {
    id: u64,
    clusters: HashSet<String>,
    tx: mpsc::UnboundedSender<Arc<Routed>>,
}

/// Gathers in progress by request id (two concurrent submits of one id each get both rounds'
/// answers, and take the first per cluster).
#[derive(Debug, Default)]
struct Table {
    next: u64,
    by_request: HashMap<String, Vec<Waiter>>,
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
    pub answers: mpsc::UnboundedReceiver<Arc<Routed>>,
    request_id: String,
    id: u64,
    table: Shared,
}

impl Drop for Gather {
    fn drop(&mut self) {
        let mut t = lock(&self.table);
        if let Some(ws) = t.by_request.get_mut(&self.request_id) {
            ws.retain(|w| w.id != self.id);
            if ws.is_empty() {
                t.by_request.remove(&self.request_id);
            }
        }
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

    /// The reply subject of a plan for `cluster`: `<inbox>.<cluster>`.
    pub fn reply_subject(&self, cluster: &str) -> String {
        format!("{}.{cluster}", self.inbox)
    }

    /// Makes sure `cluster`'s answers are listened for: subscribes [`Self::reply_subject`] the
    /// first time and starts its forwarding task. The subscription reaches the server before
    /// any later publish on the same connection.
    ///
    /// Errors: the subscription failed ([`RpcError::Nats`]).
    pub async fn watch(&self, client: &async_nats::Client, cluster: &str) -> Result<(), RpcError> {
        let mut watched = self.watched.lock().await;
        if watched.contains(cluster) {
            return Ok(());
        }
        let subject = self.reply_subject(cluster);
        let mut sub = client.subscribe(subject.clone()).await.map_err(|e| RpcError::Nats {
            subject: subject.clone(),
            message: e.to_string(),
        })?;
        watched.insert(cluster.to_string());
        let table = self.table.clone();
        let cluster = cluster.to_string();
        tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                forward(&table, &cluster, &m);
            }
            tracing::warn!(%subject, "plan answer subscription ended");
        });
        Ok(())
    }

    /// Starts a gather for `request_id` from `clusters`.
    pub fn open<'a>(&self, request_id: &str, clusters: impl IntoIterator<Item = &'a String>) -> Gather {
        let (tx, answers) = mpsc::unbounded_channel();
        let mut t = lock(&self.table);
        t.next += 1;
        let id = t.next;
        t.by_request.entry(request_id.to_string()).or_default().push(Waiter {
            id,
            clusters: clusters.into_iter().cloned().collect(),
            tx,
        });
        Gather {
            answers,
            request_id: request_id.to_string(),
            id,
            table: self.table.clone(),
        }
    }
}

/// Routes one message that arrived on `cluster`'s reply subject (module docs).
fn forward(table: &Shared, cluster: &str, m: &async_nats::Message) {
    let at = Instant::now();
    let (arrived, request_id) = if is_no_responders(m) {
        (Arrived::NoResponders, None)
    } else {
        match AgentAnswer::decode(&m.payload) {
            Ok(a) => {
                let id = a.request_id().map(str::to_string);
                (Arrived::Answer(a), id)
            }
            Err(e) => (Arrived::Unreadable(e.to_string()), None),
        }
    };
    let routed = Arc::new(Routed {
        cluster: cluster.to_string(),
        at,
        arrived,
    });
    let t = lock(table);
    let targets: Vec<&Waiter> = match &request_id {
        Some(id) => t.by_request.get(id).map(|ws| ws.iter().collect()).unwrap_or_default(),
        None => {
            let all: Vec<&Waiter> = t
                .by_request
                .values()
                .flatten()
                .filter(|w| w.clusters.contains(cluster))
                .collect();
            if matches!(routed.arrived, Arrived::NoResponders) || all.len() <= 1 {
                all
            } else {
                tracing::warn!(
                    cluster,
                    "a plan answer naming no request, with several waiting: dropped"
                );
                Vec::new()
            }
        }
    };
    if targets.is_empty() {
        tracing::debug!(cluster, request_id = ?request_id, "a plan answer no gather waits for: dropped");
    }
    for w in targets {
        // The gather may have ended meanwhile: then the answer is dropped.
        let _ = w.tx.send(routed.clone());
    }
}
