//! The per-user bound on requests in progress (`maxInFlightPerUser`): one user's flood (say
//! 5,000 `fedvol plan` or `submit --dry-run` at once) is refused beyond the bound with
//! `overloaded`, naming the limit, instead of taking the whole `maxInFlight` and the memory its
//! requests hold while in progress; other users are served meanwhile.
//!
//! This follows Kubernetes' API Priority and Fairness (Kubernetes: APF, per-flow fair queuing;
//! a request beyond its flow's share is answered 429 "Too Many Requests" with Retry-After):
//! here a flow is a user and the share a fixed bound, checked before the request's body is
//! read, so a refusal costs nothing but the answer.
//!
//! The counts live in a map that holds only users with requests in progress (an entry is
//! removed when its last request ends), and whose capacity is shrunk once it is empty again,
//! so a burst from many users leaves nothing behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Requests in progress per user.
#[derive(Debug, Default)]
pub struct PerUser {
    counts: Mutex<HashMap<String, usize>>,
}

/// One admitted request of a user: its count is given back when this is dropped.
#[derive(Debug)]
pub struct Slot {
    owner: Arc<PerUser>,
    user: String,
}

impl PerUser {
    /// Admits one more request of `user` unless it already has `limit` in progress.
    pub fn admit(self: &Arc<Self>, user: &str, limit: usize) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(user.to_string()).or_insert(0);
        if *n >= limit {
            if *n == 0 {
                counts.remove(user);
            }
            return None;
        }
        *n += 1;
        Some(Slot {
            owner: self.clone(),
            user: user.to_string(),
        })
    }

    /// Requests of `user` in progress.
    pub fn in_flight(&self, user: &str) -> usize {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(user).copied().unwrap_or(0)
    }

    /// Users with requests in progress.
    pub fn users(&self) -> usize {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.user);
                if counts.is_empty() {
                    counts.shrink_to_fit();
                }
            }
        }
    }
}

/// The refusal message of a request beyond the bound.
pub fn refusal(user: &str, limit: usize) -> String {
    format!(
        "user {user} has {limit} requests in progress, this coordinator's limit per user (maxInFlightPerUser): ask again when some are answered"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_bounded_and_others_are_not() {
        let p = Arc::new(PerUser::default());
        let a: Vec<Slot> = (0..3).filter_map(|_| p.admit("alice", 3)).collect();
        assert_eq!(a.len(), 3);
        assert!(p.admit("alice", 3).is_none(), "the fourth is refused");
        let b = p.admit("bob", 3);
        assert!(b.is_some(), "another user is served");
        drop(a);
        assert_eq!(p.in_flight("alice"), 0);
        assert!(p.admit("alice", 3).is_some());
        drop(b);
        assert_eq!(p.users(), 0, "nothing is left behind");
    }
}
