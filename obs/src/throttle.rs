//! Repeated log lines rate-limited per key: the first line of a kind for a key (say, a refused
//! request of one user) is written at once, the next ones within the interval are only counted,
//! and the count is written with the next line after the interval, or by a periodic summary
//! ([`Throttle::take_quiet`]). One hostile or runaway client then costs a few lines per interval
//! instead of one per request (a flood of 2,300 refused long polls wrote 123,738 lines in 30 s
//! before), while every refusal is still counted in the log.
//!
//! This is the rule of syslog's "last message repeated N times" and of journald's per-service
//! rate limit (`RateLimitIntervalSec`, `RateLimitBurst`: messages over the burst are dropped and
//! their number logged), applied per key with a burst of one.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys followed at most; past this, keys whose interval ended are forgotten first, and a new
/// key beyond the bound is written without counting (the map never grows without end).
const MAX_KEYS: usize = 100_000;

#[derive(Debug)]
struct Entry {
    /// When the key's last written line was written (or its last summary).
    since: Instant,
    /// Lines kept quiet since then.
    quiet: u64,
}

/// Per-key rate limit of log lines (see the module docs).
#[derive(Debug)]
pub struct Throttle<K> {
    interval: Duration,
    keys: Mutex<HashMap<K, Entry>>,
}

impl<K: Hash + Eq + Clone> Throttle<K> {
    /// A throttle writing at most one line per key per `interval` (plus its summary).
    pub fn new(interval: Duration) -> Self {
        Throttle {
            interval,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Notes one line of `key`: `Some(quiet)` when it is to be written now, `quiet` being how
    /// many lines of the key were kept quiet since the last one written; `None` when it is only
    /// counted.
    pub fn note(&self, key: &K) -> Option<u64> {
        self.note_at(key, Instant::now())
    }

    fn note_at(&self, key: &K, now: Instant) -> Option<u64> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = keys.get_mut(key) {
            if now.saturating_duration_since(e.since) < self.interval {
                e.quiet += 1;
                return None;
            }
            let quiet = e.quiet;
            *e = Entry { since: now, quiet: 0 };
            return Some(quiet);
        }
        if keys.len() >= MAX_KEYS {
            let interval = self.interval;
            keys.retain(|_, e| now.saturating_duration_since(e.since) < interval || e.quiet > 0);
            if keys.len() >= MAX_KEYS {
                return Some(0);
            }
        }
        keys.insert(key.clone(), Entry { since: now, quiet: 0 });
        Some(0)
    }

    /// The keys whose interval ended with lines kept quiet, each with their number: the caller
    /// writes one summary line for each (say, every interval). Their counts start again; keys
    /// with nothing kept quiet whose interval ended are forgotten.
    pub fn take_quiet(&self) -> Vec<(K, u64)> {
        self.take_quiet_at(Instant::now())
    }

    fn take_quiet_at(&self, now: Instant) -> Vec<(K, u64)> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        let interval = self.interval;
        keys.retain(|k, e| {
            if now.saturating_duration_since(e.since) < interval {
                return true;
            }
            if e.quiet == 0 {
                return false;
            }
            out.push((k.clone(), e.quiet));
            *e = Entry { since: now, quiet: 0 };
            true
        });
        out
    }

    /// Keys followed now (for tests and bounds).
    pub fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when no key is followed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval_with_the_count_of_the_others() {
        let t = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let alice = "alice".to_string();
        let bob = "bob".to_string();
        assert_eq!(t.note_at(&alice, t0), Some(0), "the first line is written");
        for i in 1..=1000 {
            assert_eq!(t.note_at(&alice, t0 + Duration::from_millis(i)), None);
        }
        assert_eq!(
            t.note_at(&bob, t0),
            Some(0),
            "another key is not held back by the first"
        );
        assert!(
            t.take_quiet_at(t0 + Duration::from_secs(5)).is_empty(),
            "within the interval"
        );
        // After the interval: the next line says how many were kept quiet.
        assert_eq!(t.note_at(&alice, t0 + Duration::from_secs(11)), Some(1000));
        assert_eq!(t.note_at(&alice, t0 + Duration::from_secs(12)), None);
        // The summary gives what was kept quiet once the interval ended, then starts again.
        let s = t.take_quiet_at(t0 + Duration::from_secs(22));
        assert_eq!(s, vec![(alice.clone(), 1)]);
        assert!(t.take_quiet_at(t0 + Duration::from_secs(23)).is_empty());
        // Keys with nothing kept quiet are forgotten once their interval ends.
        t.take_quiet_at(t0 + Duration::from_secs(40));
        assert!(t.is_empty());
    }
}
