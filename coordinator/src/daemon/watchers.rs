//! The `changes` long polls a coordinator holds at once ([`super::MAX_WATCHERS`]), shared
//! fairly among users: while the pool has room every watch is admitted; when it is full, a
//! user holding fewer watches than the user holding the most takes the oldest watch of that
//! user, which is answered at once with what it has (an empty answer is an ordinary answer: its
//! client asks again). Only a user already holding as many as anyone is refused
//! (`overloaded`). So no user, however many long polls they open, keeps another user's watch
//! out: shares converge to equal, as in max-min fair sharing (Kubernetes' API Priority and
//! Fairness shuffles flows into queues for the same reason: one flow must not starve the
//! others; here a flow is a user and the resource a waiting slot).
//!
//! Each user's watches also count against `maxInFlightPerUser` (`daemon::per_user`), so one
//! user holds at most that many whatever the pool's room.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    /// Each user's watches, oldest first: (id, its end signal).
    by_user: HashMap<String, VecDeque<(u64, Arc<Notify>)>>,
    /// Watches held.
    total: usize,
    /// The next watch's id.
    next: u64,
}

/// The pool of waiting `changes` long polls (see the module docs).
#[derive(Debug)]
pub struct WatchPool {
    capacity: usize,
    inner: Mutex<Inner>,
}

/// One admitted watch: its place is given back when this is dropped. [`Watch::ended`] fires
/// when another user took the place (answer now).
#[derive(Debug)]
pub struct Watch {
    pool: Arc<WatchPool>,
    user: String,
    id: u64,
    ended: Arc<Notify>,
}

impl Watch {
    /// Completes when the watch's place was given to another user: the long poll is to be
    /// answered now with what it has.
    pub async fn ended(&self) {
        self.ended.notified().await
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut inner = self.pool.lock();
        let Some(q) = inner.by_user.get_mut(&self.user) else {
            return;
        };
        let Some(at) = q.iter().position(|(id, _)| *id == self.id) else {
            // Taken by another user: its place is theirs now.
            return;
        };
        q.remove(at);
        if q.is_empty() {
            inner.by_user.remove(&self.user);
        }
        inner.total = inner.total.saturating_sub(1);
        if inner.by_user.is_empty() {
            inner.by_user.shrink_to_fit();
        }
    }
}

impl WatchPool {
    /// A pool of `capacity` watches.
    pub fn new(capacity: usize) -> WatchPool {
        WatchPool {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a watch of `user`: into free room, else in place of the oldest watch of the user
    /// holding the most when that user holds at least two more than `user` (that watch is
    /// answered at once). `None` when `user` holds as many as anyone (or one fewer) and the
    /// pool is full.
    pub fn admit(self: &Arc<Self>, user: &str) -> Option<Watch> {
        let mut inner = self.lock();
        if inner.total >= self.capacity {
            let mine = inner.by_user.get(user).map_or(0, VecDeque::len);
            let heaviest = inner
                .by_user
                .iter()
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(a.0)))
                .map(|(u, q)| (u.clone(), q.len()))?;
            if heaviest.1 < mine + 2 {
                return None;
            }
            let q = inner.by_user.get_mut(&heaviest.0)?;
            let (_, ended) = q.pop_front()?;
            // `notify_one` keeps the signal when the watch is not waiting yet.
            ended.notify_one();
            inner.total = inner.total.saturating_sub(1);
            tracing::debug!(
                user = %fedvol_common::limits::printable(user),
                from = %fedvol_common::limits::printable(&heaviest.0),
                "watch pool full: the oldest watch of the user holding the most answered to make room"
            );
        }
        inner.next += 1;
        let id = inner.next;
        let ended = Arc::new(Notify::new());
        inner
            .by_user
            .entry(user.to_string())
            .or_default()
            .push_back((id, ended.clone()));
        inner.total += 1;
        Some(Watch {
            pool: self.clone(),
            user: user.to_string(),
            id,
            ended,
        })
    }

    /// Watches held now, in all.
    pub fn held(&self) -> usize {
        self.lock().total
    }

    /// Watches `user` holds now.
    pub fn held_by(&self, user: &str) -> usize {
        self.lock().by_user.get(user).map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_pool_makes_room_for_a_user_holding_fewer() {
        let pool = Arc::new(WatchPool::new(4));
        let alice: Vec<Watch> = (0..4).map(|_| pool.admit("alice").unwrap()).collect();
        assert_eq!(pool.held(), 4);
        // Bob holds none: alice's oldest watch makes room, and is told to answer.
        let bob = pool.admit("bob").expect("bob gets a place");
        tokio::time::timeout(std::time::Duration::from_secs(1), alice[0].ended())
            .await
            .expect("alice's oldest watch is ended");
        assert_eq!((pool.held(), pool.held_by("alice"), pool.held_by("bob")), (4, 3, 1));
        // Alice, holding the most, is refused while the pool is full.
        assert!(pool.admit("alice").is_none());
        let bob2 = pool.admit("bob").expect("bob (1) below alice (3)");
        assert_eq!((pool.held_by("alice"), pool.held_by("bob")), (2, 2));
        assert!(pool.admit("bob").is_none(), "equal shares: nobody takes from anyone");
        // The ended watch's drop gives back nothing twice.
        drop(alice);
        assert_eq!((pool.held(), pool.held_by("alice")), (2, 0));
        drop((bob, bob2));
        assert_eq!(pool.held(), 0);
        assert!(pool.lock().by_user.is_empty(), "nothing left behind");
    }
}
