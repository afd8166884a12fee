//! The decisions as users read them: each coordinator follows the decision bucket with one
//! watch of its own (the latest value of every key, then every change) and keeps the latest
//! change of each decision in a [`DecisionIndex`]. `list` ([`super::ops::list::list`]) and
//! `changes` ([`super::ops::changes::changes`]) are answered from it, so `fedvol decisions
//! list`, `fedvol decisions watch` and `fedvol ui` read the store through the coordinators'
//! request subjects and never hold a JetStream consumer themselves (users have no JetStream
//! permission at all in the shipped NATS configurations: a user able to create consumers could
//! fill the stream's `max_consumers` and lock everyone out; NATS docs: JetStream, Consumers;
//! Authorization).
//!
//! The reconciler's holder reads the same index (the decisions left `planned`, those whose jobs
//! it follows, and a completion that freed room: [`DecisionIndex::room_freed`]) instead of a
//! watch of its own: each change of the bucket is delivered to a coordinator once and decoded
//! once (a second watch doubled both, and decoding 26 KB records to skip most of them was a
//! fifth of a coordinator's CPU per submit).
//!
//! The coordinator's own consumers stay bounded: this watch (one per coordinator) and a
//! short-lived key listing now and then (the quota sweep, and `list` only when the index cannot
//! catch up, one at a time).

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;
use tokio::sync::watch;

use fedvol_proto::coordinator::{ChangeKind, ChangesReply, DecisionChange, DecisionSummary};
use fedvol_proto::decisions::DecisionState;

use super::Coordinator;

/// At most this many changes in one `changes` answer (besides the `max_payload` bound).
pub const MAX_CHANGES_PER_ANSWER: usize = 2000;

/// How long the watch waits before it is opened again after it failed or ended.
const REOPEN_MS: u64 = 1000;

#[derive(Default)]
struct Inner {
    /// Request id → its latest change.
    decisions: HashMap<String, DecisionChange>,
    /// The highest revision of a decision change applied.
    last_change: u64,
    /// The highest revision seen of any key (decisions and the coordinators' own keys).
    seen: u64,
    /// Whether the watch runs.
    running: bool,
    /// Whether the running watch has delivered an entry with nothing pending after it: from
    /// then on the index holds every key the bucket held then, and each change after it.
    caught_up: bool,
    /// User → decisions stored under their name (the per-user cap, `daemon::retention`).
    per_user: HashMap<String, usize>,
}

/// The user a change stores a decision of, if it does.
fn owner(c: &DecisionChange) -> Option<&str> {
    match &c.change {
        ChangeKind::Put { summary, .. } => Some(summary.user.as_str()),
        _ => None,
    }
}

/// The latest change of every decision, kept from the coordinator's watch of the bucket.
pub struct DecisionIndex {
    inner: RwLock<Inner>,
    /// Woken with `last_change` at every decision change.
    changed: watch::Sender<u64>,
    /// Woken with `seen` at every change of any key.
    seen: watch::Sender<u64>,
    /// Notified when a change freed room (a decision completed or cancelled, a drain ended)
    /// once the watch has caught up with the bucket ([`DecisionIndex::room_freed`]).
    freed: tokio::sync::Notify,
}

impl Default for DecisionIndex {
    fn default() -> Self {
        DecisionIndex::new()
    }
}

impl DecisionIndex {
    /// An empty index.
    pub fn new() -> DecisionIndex {
        DecisionIndex {
            inner: RwLock::new(Inner::default()),
            changed: watch::channel(0).0,
            seen: watch::channel(0).0,
            freed: tokio::sync::Notify::new(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one entry of the bucket's watch, with the listing of its value when this
    /// coordinator wrote it (`own`: [`super::own_writes`]; the value is then not read again).
    /// An entry not newer than what the index holds for its key (a watch opened again replays
    /// the latest values) changes nothing.
    pub fn apply(&self, entry: &kv::Entry, own: Option<super::own_writes::Listing>) {
        let change = (!entry.key.contains('/')).then(|| DecisionChange {
            request_id: entry.key.clone(),
            revision: entry.revision,
            change: match own {
                Some((summary, clusters)) if entry.operation == kv::Operation::Put => {
                    ChangeKind::Put { summary, clusters }
                }
                _ => kind_of(entry),
            },
        });
        let freed = match &change {
            Some(DecisionChange {
                change: ChangeKind::Put { summary, .. },
                ..
            }) => matches!(summary.state, DecisionState::Completed | DecisionState::Cancelled),
            Some(_) => false,
            None => {
                entry.key.starts_with(fedvol_proto::coordinator::DRAIN_KEY_PREFIX)
                    && entry.operation != kv::Operation::Put
            }
        };
        self.apply_change(entry.revision, change);
        if entry.delta == 0 {
            self.write().caught_up = true;
        }
        if freed && entry.delta == 0 {
            self.freed.notify_one();
        }
    }

    /// Waits until a change frees room (a decision completed or cancelled, a drain ended),
    /// seen once the watch had caught up with the bucket; a change made while nobody waited
    /// wakes the next wait at once. The reconciler's holder then places what waits in the
    /// queue.
    pub async fn room_freed(&self) {
        self.freed.notified().await;
    }

    /// The decisions left `planned` by a real submit (not a dry run), each with its last
    /// change's time, ms since the epoch: what the reconciler settles once they are older than
    /// the commit phase's bound.
    pub fn planned(&self) -> HashMap<String, u64> {
        self.pick(|s| (s.state == DecisionState::Planned && !s.dry_run).then_some(s.updated_ms))
    }

    /// The committed decisions with a `complete` their cluster has not answered yet: request
    /// id → (since when, ms since the epoch; the decision's user). The reconciler finishes them
    /// (`ops::complete::finish_marked`).
    pub fn completing(&self) -> HashMap<String, (u64, String)> {
        self.pick(|s| {
            (s.state == DecisionState::Committed)
                .then_some(s.completing_since_ms)
                .flatten()
                .map(|t| (t, s.user.clone()))
        })
    }

    /// The committed decisions whose commit submitted batch jobs: the ones the reconciler
    /// follows (`daemon::jobs`).
    pub fn running_jobs(&self) -> std::collections::HashSet<String> {
        self.pick::<(), Vec<_>>(|s| (s.state == DecisionState::Committed && !s.jobs.is_empty()).then_some(()))
            .into_iter()
            .map(|(id, ())| id)
            .collect()
    }

    /// `(request id, f(summary))` of every decision whose latest change is a stored decision
    /// and `f` gives something for.
    fn pick<T, C: FromIterator<(String, T)>>(&self, f: impl Fn(&DecisionSummary) -> Option<T>) -> C {
        self.read()
            .decisions
            .values()
            .filter_map(|c| match &c.change {
                ChangeKind::Put { summary, .. } => f(summary).map(|t| (c.request_id.clone(), t)),
                _ => None,
            })
            .collect()
    }

    /// Applies a change at `revision`: of a decision (`Some`), or of another key (`None`).
    fn apply_change(&self, revision: u64, change: Option<DecisionChange>) {
        let (last_change, seen, decision_changed) = {
            let mut inner = self.write();
            inner.seen = inner.seen.max(revision);
            let mut decision_changed = false;
            if let Some(c) = change
                && inner
                    .decisions
                    .get(&c.request_id)
                    .is_none_or(|old| old.revision < c.revision)
            {
                inner.last_change = inner.last_change.max(c.revision);
                if let Some(user) = owner(&c) {
                    *inner.per_user.entry(user.to_string()).or_default() += 1;
                }
                if let Some(old) = inner.decisions.insert(c.request_id.clone(), c)
                    && let Some(user) = owner(&old)
                    && let Some(n) = inner.per_user.get_mut(user)
                {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        inner.per_user.remove(user);
                    }
                }
                decision_changed = true;
            }
            (inner.last_change, inner.seen, decision_changed)
        };
        if decision_changed {
            self.changed.send_replace(last_change);
        }
        self.seen.send_replace(seen);
    }

    fn set_running(&self, running: bool) {
        let mut inner = self.write();
        inner.running = running;
        inner.caught_up = false;
    }

    /// True when the index can say that no decision is stored under `request_id`: its watch
    /// runs and has caught up with the bucket, and no stored decision of that id has reached it.
    /// A decision stored in the last moments may not have (the watch's lag): a caller that
    /// creates the key on this word must take a conflict as "stored after all" (the submit
    /// does: [`super::ops::submit`]).
    pub fn vouches_absent(&self, request_id: &str) -> bool {
        let inner = self.read();
        inner.running
            && inner.caught_up
            && inner
                .decisions
                .get(request_id)
                .is_none_or(|c| matches!(c.change, ChangeKind::Removed))
    }

    /// The highest revision seen of any key of the bucket.
    pub fn seen(&self) -> u64 {
        self.read().seen
    }

    /// The decisions changed after `after`, oldest change first, cut to `budget` bytes of
    /// encoded changes and [`MAX_CHANGES_PER_ANSWER`] (at least one change when any).
    pub fn changes_after(&self, after: u64, budget: usize) -> ChangesReply {
        self.changes_after_sized(after, budget).0
    }

    /// As [`DecisionIndex::changes_after`], with the bytes of its changes encoded.
    pub fn changes_after_sized(&self, after: u64, budget: usize) -> (ChangesReply, usize) {
        let inner = self.read();
        let mut newer: Vec<&DecisionChange> = inner.decisions.values().filter(|c| c.revision > after).collect();
        newer.sort_by_key(|c| c.revision);
        let mut changes = Vec::new();
        let mut used = 0;
        let mut more = false;
        for c in newer {
            let size = serde_json::to_vec(c).map_or(0, |v| v.len()) + 1;
            if !changes.is_empty() && (used + size > budget || changes.len() >= MAX_CHANGES_PER_ANSWER) {
                more = true;
                break;
            }
            used += size;
            changes.push(c.clone());
        }
        let last = match (more, changes.last()) {
            (true, Some(c)) => c.revision,
            _ => inner.seen.max(after),
        };
        (ChangesReply { changes, last, more }, used)
    }

    /// How many decisions of `user` are stored, as far as the index has seen.
    pub fn stored_by(&self, user: &str) -> usize {
        self.read().per_user.get(user).copied().unwrap_or(0)
    }

    /// Waits up to `within` until the index has seen the bucket's last revision (read from the
    /// server now); returns whether it has.
    pub async fn catch_up(&self, store: &super::DecisionStore, within: Duration) -> bool {
        match store.last_revision().await {
            Ok(last) => self.reaches(last, within).await,
            Err(_) => false,
        }
    }

    /// Waits up to `within` until the index has seen revision `last` of the bucket; returns
    /// whether it has.
    pub async fn reaches(&self, last: u64, within: Duration) -> bool {
        let mut rx = self.seen.subscribe();
        tokio::time::timeout(within, rx.wait_for(|seen| *seen >= last))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits until a decision changes after revision `after` (at once when one did).
    pub async fn changed_after(&self, after: u64) {
        let mut rx = self.changed.subscribe();
        // The sender lives as long as the index, which outlives this borrow.
        let _ = rx.wait_for(|last| *last > after).await;
    }

    /// Whether the index follows the bucket now.
    pub fn running(&self) -> bool {
        self.read().running
    }

    /// The decisions whose latest change matches `pick` (given its summary), each with the
    /// revision of that change.
    pub fn select(&self, pick: impl Fn(&DecisionSummary) -> bool) -> Vec<(String, u64)> {
        self.read()
            .decisions
            .values()
            .filter_map(|c| match &c.change {
                ChangeKind::Put { summary, .. } if pick(summary) => Some((c.request_id.clone(), c.revision)),
                _ => None,
            })
            .collect()
    }

    /// Every decision's summary, newest first (then by request id); unreadable values are
    /// left out, as the bucket's own listing does.
    pub fn summaries(&self) -> Vec<DecisionSummary> {
        let inner = self.read();
        let mut out: Vec<DecisionSummary> = inner
            .decisions
            .values()
            .filter_map(|c| match &c.change {
                ChangeKind::Put { summary, .. } => Some(DecisionSummary::clone(summary)),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| a.request_id.cmp(&b.request_id))
        });
        out
    }
}

/// What a watched entry holds: its listing, read without decoding the clusters' answers
/// ([`fedvol_proto::listing`]: at 1,000 clusters a whole decode took about 10 ms per change).
fn kind_of(e: &kv::Entry) -> ChangeKind {
    match e.operation {
        kv::Operation::Delete | kv::Operation::Purge => ChangeKind::Removed,
        kv::Operation::Put => match fedvol_proto::listing::listing(e.key.clone(), &e.value) {
            Ok((summary, clusters)) => ChangeKind::Put {
                summary: Box::new(summary),
                clusters,
            },
            Err(err) => ChangeKind::Unreadable { error: err.to_string() },
        },
    }
}

/// Follows the decision bucket into `co.index` (and its drain keys into `co.drains`,
/// [`super::drains`]) until the process ends: one watch, opened again `REOPEN_MS` after it
/// fails or ends. The first reads the latest value of every key; a watch opened again resumes
/// after the last revision the index saw. (Reading the whole bucket again on every restart
/// made a coordinator with ~10,000 decisions of 16 clusters pull ~400 MB each time its watch
/// missed a heartbeat under load; the server, busy pushing it, timed out the writes, and the
/// watch missed its heartbeat again.) A bucket whose last revision is below what the index
/// saw (made again) is read whole.
pub fn spawn(co: Arc<Coordinator>) {
    tokio::spawn(async move {
        loop {
            let seen = co.index.seen();
            let resume = seen > 0 && co.store.last_revision().await.is_ok_and(|last| last >= seen);
            let watch = if resume {
                co.store.watch_from(seen + 1).await
            } else {
                co.store.own_writes().clear();
                co.store.watch().await
            };
            match watch {
                Ok(mut w) => {
                    co.index.set_running(true);
                    while let Some(entry) = w.next().await {
                        match entry {
                            Ok(e) => {
                                co.drains.apply(&e);
                                let own = co.store.own_writes().take(&e.key, &e.value);
                                co.index.apply(&e, own);
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "decisions index: the bucket watch failed; it restarts");
                                break;
                            }
                        }
                    }
                    co.index.set_running(false);
                }
                Err(e) => tracing::warn!(error = %e, "decisions index: cannot watch the decision bucket"),
            }
            tokio::time::sleep(Duration::from_millis(REOPEN_MS)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(id: &str, revision: u64) -> DecisionChange {
        DecisionChange {
            request_id: id.into(),
            revision,
            change: ChangeKind::Put {
                summary: Box::new(DecisionSummary {
                    request_id: id.into(),
                    workflow: "w".repeat(100),
                    state: DecisionState::Committed,
                    chosen_cluster: Some("c".into()),
                    updated_ms: revision,
                    user: "alice".into(),
                    dry_run: false,
                    priority_class: None,
                    priority: 0,
                    queued_ms: None,
                    jobs: Vec::new(),
                    reason: None,
                    failure: None,
                    completing_since_ms: None,
                }),
                clusters: fedvol_proto::coordinator::ClusterCounts::default(),
            },
        }
    }

    #[test]
    fn changes_are_the_latest_per_key_oldest_first_and_paged() {
        let ix = DecisionIndex::new();
        ix.apply_change(1, Some(change("a", 1)));
        ix.apply_change(2, Some(change("b", 2)));
        ix.apply_change(3, None);
        ix.apply_change(4, Some(change("a", 4)));
        // An older value of a key (a replay) changes nothing.
        ix.apply_change(1, Some(change("a", 1)));
        let all = ix.changes_after(0, usize::MAX);
        let seen: Vec<(String, u64)> = all.changes.iter().map(|c| (c.request_id.clone(), c.revision)).collect();
        assert_eq!(seen, vec![("b".to_string(), 2), ("a".to_string(), 4)]);
        assert_eq!((all.last, all.more), (4, false));
        assert!(ix.changes_after(4, usize::MAX).changes.is_empty());
        // A budget of one change: one at a time, each answer saying where to go on from.
        let one = serde_json::to_vec(&change("b", 2)).unwrap().len() + 1;
        let first = ix.changes_after(0, one);
        assert_eq!((first.changes.len(), first.last, first.more), (1, 2, true));
        let second = ix.changes_after(first.last, one);
        assert_eq!((second.changes.len(), second.last, second.more), (1, 4, false));
        assert_eq!(
            ix.summaries().iter().map(|s| s.request_id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!((ix.stored_by("alice"), ix.stored_by("bob")), (2, 0), "one per key");
        ix.apply_change(
            5,
            Some(DecisionChange {
                request_id: "a".into(),
                revision: 5,
                change: ChangeKind::Removed,
            }),
        );
        assert_eq!(ix.stored_by("alice"), 1, "a removed decision is not counted");
        assert_eq!(ix.select(|s| s.updated_ms < 3), vec![("b".to_string(), 2)]);
        // Only a running watch that has caught up vouches for an absent id.
        assert!(!ix.vouches_absent("z"), "not running");
        ix.set_running(true);
        assert!(!ix.vouches_absent("z"), "running, not caught up");
        ix.write().caught_up = true;
        assert!(ix.vouches_absent("z") && ix.vouches_absent("a"), "unknown, and removed");
        assert!(!ix.vouches_absent("b"), "stored");
        ix.set_running(false);
        assert!(!ix.vouches_absent("z"), "a watch that stopped vouches for nothing");
        // The coordinators' own keys move `seen`, not the changes.
        ix.apply_change(9, None);
        assert_eq!((ix.seen(), ix.changes_after(5, usize::MAX).last), (9, 9));
    }
}
