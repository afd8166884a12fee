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

/// Bytes of decisions each user may read per second (`readBytesPerSecondPerUser`): a token
/// bucket per user holding at most one second of reading, from which each `changes` and `list`
/// answer is taken once made. A user in debt (its last answer
/// took more than was left) waits until the debt is paid before the next answer is made, so
/// reading the whole store again and again from revision 0 costs that user time, not the
/// coordinator's CPU and every other user's latency (a loop of such reads once pulled 4.6 GB
/// in 20 s and made other users' dry runs 70 times slower). Over any interval of `t` seconds a
/// user reads at most `rate * (t + 1)` bytes plus one answer (at most `max_payload`).
///
/// Only users with a bucket not full are kept: a full bucket is forgotten, so a burst from many
/// users leaves nothing behind.
#[derive(Debug)]
pub struct ReadBudget {
    /// Bytes per second.
    rate: f64,
    /// The most a bucket holds, bytes.
    capacity: f64,
    /// User → (tokens, when last refilled).
    buckets: Mutex<HashMap<String, (f64, std::time::Instant)>>,
}

impl ReadBudget {
    /// A budget of `rate` bytes per second per user, each bucket holding at most `rate` bytes
    /// (one second). A rate of 0: no bound.
    pub fn new(rate: u64) -> ReadBudget {
        ReadBudget {
            rate: rate as f64,
            capacity: rate as f64,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The bucket of `user` refilled to `now` (a full one is forgotten); its tokens.
    fn refill(
        &self,
        buckets: &mut HashMap<String, (f64, std::time::Instant)>,
        user: &str,
        now: std::time::Instant,
    ) -> f64 {
        let Some((tokens, at)) = buckets.get_mut(user) else {
            return self.capacity;
        };
        *tokens = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * self.rate).min(self.capacity);
        *at = now;
        let t = *tokens;
        if t >= self.capacity {
            buckets.remove(user);
        }
        t
    }

    /// How long `user` must wait before its next answer is made (zero when not in debt).
    pub fn wait(&self, user: &str) -> std::time::Duration {
        if self.rate <= 0.0 {
            return std::time::Duration::ZERO;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = self.refill(&mut buckets, user, std::time::Instant::now());
        if tokens >= 0.0 {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::from_secs_f64(-tokens / self.rate)
        }
    }

    /// Takes `bytes` (an answer sent to `user`) from its bucket, which may go into debt.
    pub fn take(&self, user: &str, bytes: usize) {
        if self.rate <= 0.0 {
            return;
        }
        let now = std::time::Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = self.refill(&mut buckets, user, now);
        buckets.insert(user.to_string(), (tokens - bytes as f64, now));
    }

    /// Users with a bucket not full.
    pub fn users(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
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

    #[test]
    fn reads_past_the_budget_wait_for_it() {
        let b = ReadBudget::new(1000);
        assert_eq!(b.wait("alice"), std::time::Duration::ZERO, "a full bucket");
        b.take("alice", 3000);
        let w = b.wait("alice");
        assert!(
            w > std::time::Duration::from_millis(1900) && w <= std::time::Duration::from_secs(2),
            "{w:?}"
        );
        assert_eq!(
            b.wait("bob"),
            std::time::Duration::ZERO,
            "another user is not held back"
        );
        b.take("bob", 10);
        assert_eq!(b.users(), 2);
        let unbounded = ReadBudget::new(0);
        unbounded.take("alice", 1 << 30);
        assert_eq!(
            (unbounded.wait("alice"), unbounded.users()),
            (std::time::Duration::ZERO, 0)
        );
    }
}
