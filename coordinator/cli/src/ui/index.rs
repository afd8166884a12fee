//! The web view's decisions list: one row per stored decision, kept from the coordinators'
//! `changes` answers ([`crate::feed`]), with the bucket revision of its last change so that a
//! browser's live updates can ask for "everything after revision N". The filters of the list
//! page and of the live updates are the same [`Filter`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use fedvol_proto::coordinator::{ClusterCounts, DecisionSummary};
use fedvol_proto::decisions::StoredDecision;
use tokio::sync::watch;

use crate::client::Client;
use crate::feed::{DecisionFeed, FeedEvent};

/// One decision of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Request id, workflow, state, chosen cluster, last change.
    pub summary: DecisionSummary,
    /// Who submitted it.
    pub user: String,
    /// A dry run (nothing held or committed).
    pub dry_run: bool,
    /// Clusters that answered the plan.
    pub answered: usize,
    /// Clusters asked.
    pub asked: usize,
    /// Clusters that could place the workflow.
    pub feasible: usize,
}

impl Row {
    /// The row of `stored`, kept under `key`.
    pub fn of(key: String, stored: &StoredDecision) -> Row {
        Row::of_summary(DecisionSummary::of(key, stored), ClusterCounts::of(stored))
    }

    /// The row of a decision summarised as `summary`, its plan reaching `clusters`.
    pub fn of_summary(summary: DecisionSummary, clusters: ClusterCounts) -> Row {
        Row {
            user: summary.user.clone(),
            dry_run: summary.dry_run,
            summary,
            answered: clusters.answered,
            asked: clusters.asked,
            feasible: clusters.feasible,
        }
    }
}

/// What the index holds under a key.
#[derive(Debug, Clone)]
pub enum Slot {
    /// A readable decision.
    Live(Box<Row>),
    /// A value that does not decode (shown as such, never hidden).
    Unreadable(String),
    /// Deleted or purged (kept so that live updates can remove its row).
    Gone,
}

/// The list filters, as query parameters of `/decisions` and `/events`: an absent or empty
/// parameter does not filter.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct Filter {
    /// The submitting user, exactly.
    #[serde(default)]
    pub user: Option<String>,
    /// Part of the workflow name, any case.
    #[serde(default)]
    pub workflow: Option<String>,
    /// The lifecycle state (`planned`, `committed`, `completed`, `failed`).
    #[serde(default)]
    pub state: Option<String>,
    /// The chosen cluster, exactly.
    #[serde(default)]
    pub cluster: Option<String>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl Filter {
    /// The user filter, when given.
    pub fn user(&self) -> Option<&str> {
        given(&self.user)
    }
    /// The workflow filter, when given.
    pub fn workflow(&self) -> Option<&str> {
        given(&self.workflow)
    }
    /// The state filter, when given.
    pub fn state(&self) -> Option<&str> {
        given(&self.state)
    }
    /// The cluster filter, when given.
    pub fn cluster(&self) -> Option<&str> {
        given(&self.cluster)
    }

    /// True when any filter is given.
    pub fn any(&self) -> bool {
        self.user().is_some() || self.workflow().is_some() || self.state().is_some() || self.cluster().is_some()
    }

    /// True when `slot` passes every given filter. An unreadable value passes only when no
    /// filter is given (nothing is known to match).
    pub fn matches(&self, slot: &Slot) -> bool {
        let row = match slot {
            Slot::Live(r) => r,
            Slot::Unreadable(_) => return !self.any(),
            Slot::Gone => return false,
        };
        self.user().is_none_or(|u| row.user == u)
            && self
                .workflow()
                .is_none_or(|w| row.summary.workflow.to_lowercase().contains(&w.to_lowercase()))
            && self
                .state()
                .is_none_or(|s| crate::render::words::state(row.summary.state) == s)
            && self
                .cluster()
                .is_none_or(|c| row.summary.chosen_cluster.as_deref() == Some(c))
    }
}

#[derive(Default)]
struct Inner {
    /// Key → (revision of its last change, what it holds).
    slots: HashMap<String, (u64, Slot)>,
    /// The highest revision applied.
    last: u64,
    /// Why the watch is not running, when it is not.
    broken: Option<String>,
}

/// The decisions list, shared by the page handlers and the watch task.
pub struct Index {
    inner: RwLock<Inner>,
    changed: watch::Sender<u64>,
}

/// At most this many rows on the list page (newest first); filters narrow it.
pub const MAX_ROWS: usize = 500;

impl Index {
    /// An empty index.
    pub fn new() -> Index {
        Index {
            inner: RwLock::new(Inner::default()),
            changed: watch::channel(0).0,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one change of the bucket. A change older than the key's last one (a watch
    /// restarted from history) changes nothing.
    pub fn apply(&self, event: FeedEvent) {
        let (key, revision, slot) = match event {
            FeedEvent::Put {
                key,
                revision,
                summary,
                clusters,
            } => (key, revision, Slot::Live(Box::new(Row::of_summary(*summary, clusters)))),
            FeedEvent::Unreadable { key, revision, error } => (key, revision, Slot::Unreadable(error)),
            FeedEvent::Removed { key, revision } => (key, revision, Slot::Gone),
        };
        let last = {
            let mut inner = self.write();
            if inner.slots.get(&key).is_some_and(|(r, _)| *r >= revision) {
                return;
            }
            inner.slots.insert(key, (revision, slot));
            inner.last = inner.last.max(revision);
            inner.broken = None;
            inner.last
        };
        self.changed.send_replace(last);
    }

    /// Records why the watch stopped (shown on the list page until it runs again).
    pub fn set_broken(&self, why: String) {
        self.write().broken = Some(why);
        let last = self.read().last;
        self.changed.send_replace(last);
    }

    /// Why the watch is not running, if it is not.
    pub fn broken(&self) -> Option<String> {
        self.read().broken.clone()
    }

    /// The highest revision applied (0 before the first).
    pub fn last_revision(&self) -> u64 {
        self.read().last
    }

    /// A receiver woken at every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The rows passing `filter`, newest first (then by request id), at most [`MAX_ROWS`];
    /// and how many passed in all.
    pub fn rows(&self, filter: &Filter) -> (Vec<(String, Slot)>, usize) {
        let inner = self.read();
        let mut all: Vec<(&String, &Slot)> = inner
            .slots
            .iter()
            .filter(|(_, (_, s))| filter.matches(s))
            .map(|(k, (_, s))| (k, s))
            .collect();
        let updated = |s: &Slot| match s {
            Slot::Live(r) => r.summary.updated_ms,
            _ => u64::MAX,
        };
        all.sort_by(|a, b| updated(b.1).cmp(&updated(a.1)).then_with(|| a.0.cmp(b.0)));
        let total = all.len();
        let rows = all
            .into_iter()
            .take(MAX_ROWS)
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        (rows, total)
    }

    /// Every key changed after revision `after`, oldest change first, with its revision and
    /// what it holds now.
    pub fn changes_after(&self, after: u64) -> Vec<(u64, String, Slot)> {
        let inner = self.read();
        let mut out: Vec<(u64, String, Slot)> = inner
            .slots
            .iter()
            .filter(|(_, (r, _))| *r > after)
            .map(|(k, (r, s))| (*r, k.clone(), s.clone()))
            .collect();
        out.sort_by_key(|(r, _, _)| *r);
        out
    }

    /// The users, workflows and chosen clusters seen, each sorted (the filter form offers
    /// them).
    pub fn choices(&self) -> Choices {
        let inner = self.read();
        let mut c = Choices::default();
        for (_, s) in inner.slots.values() {
            if let Slot::Live(r) = s {
                c.users.push(r.user.clone());
                if let Some(x) = &r.summary.chosen_cluster {
                    c.clusters.push(x.clone());
                }
            }
        }
        for v in [&mut c.users, &mut c.clusters] {
            v.sort();
            v.dedup();
        }
        c
    }
}

impl Default for Index {
    fn default() -> Self {
        Index::new()
    }
}

/// Values seen in the bucket, for the filter form.
#[derive(Debug, Default)]
pub struct Choices {
    /// Submitting users.
    pub users: Vec<String>,
    /// Chosen clusters.
    pub clusters: Vec<String>,
}

/// Keeps `index` up to date from `feed` (asking the coordinators through `client`), and when
/// a query fails, asks again every 2 s (from where it was; after a query refused `overloaded`,
/// after a pause growing from 1 s to 16 s) until one is answered, recording why on the index
/// meanwhile. Runs until the process ends.
pub async fn follow(index: Arc<Index>, client: Arc<Client>, mut feed: DecisionFeed) {
    let mut backoff = crate::feed::Backoff::new();
    loop {
        match feed.next(&client).await {
            Ok(e) => {
                backoff.reset();
                index.apply(e)
            }
            // A busy coordinator: asked again after a growing pause (the page says why).
            Err(e) if e.is_overloaded() => {
                let pause = backoff.next_pause();
                tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "the coordinator is busy; asking again");
                index.set_broken(e.to_string());
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                if index.broken().is_none() {
                    tracing::warn!(error = %e, "decisions watch failed; asking again");
                }
                index.set_broken(e.to_string());
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_proto::decisions::DecisionState;

    fn row(user: &str, wf: &str, state: DecisionState, cluster: Option<&str>) -> Slot {
        Slot::Live(Box::new(Row {
            summary: DecisionSummary {
                priority_class: None,
                priority: 0,
                queued_ms: None,
                jobs: Vec::new(),
                failure: None,
                completing_since_ms: None,
                request_id: "r".into(),
                workflow: wf.into(),
                state,
                chosen_cluster: cluster.map(String::from),
                updated_ms: 1,
                user: user.into(),
                dry_run: false,
                reason: None,
            },
            user: user.into(),
            dry_run: false,
            answered: 2,
            asked: 2,
            feasible: 1,
        }))
    }

    #[test]
    fn filters_combine_and_empty_ones_do_not_filter() {
        let r = row("alice", "Train-Big", DecisionState::Committed, Some("east"));
        let f = |u: &str, w: &str, s: &str, c: &str| Filter {
            user: Some(u.into()),
            workflow: Some(w.into()),
            state: Some(s.into()),
            cluster: Some(c.into()),
        };
        assert!(Filter::default().matches(&r));
        assert!(f("", "", "", "").matches(&r));
        assert!(f("alice", "train", "committed", "east").matches(&r));
        assert!(!f("bob", "", "", "").matches(&r));
        assert!(!f("", "infer", "", "").matches(&r));
        assert!(!f("", "", "failed", "").matches(&r));
        assert!(!f("", "", "", "west").matches(&r));
        assert!(!Filter::default().matches(&Slot::Gone));
        assert!(Filter::default().matches(&Slot::Unreadable("x".into())));
        assert!(!f("alice", "", "", "").matches(&Slot::Unreadable("x".into())));
    }
}
