//! The listings of the decisions this coordinator writes, kept from just before each write
//! until its watch of the bucket delivers the value ([`super::index`]): the index takes a
//! decision's listing from here instead of reading it again from the value it just encoded. A
//! submit writes its decision twice (`planned`, then the outcome), 26 KB each at 4 clusters;
//! reading each back from the watch was about 8% of a coordinator's CPU per submit (`perf
//! record` of a `fedvol-bench` submit window, BENCHMARKS.md).
//!
//! Exactly the listing the value gives: it is computed from the decision written
//! ([`DecisionSummary::of`], [`ClusterCounts::of`]), which `fedvol_proto::listing` reads from
//! the bytes (a proto test holds the two equal), and it is taken only for a value of the same
//! key with the very bytes written, whoever wrote them. Kept before the write, not after: the
//! watch often delivers a value before the write's own answer arrives (keeping it after the
//! write, half of them were missed). A write that failed is forgotten; one the watch never
//! delivers (a watch opened again past it) goes when [`MAX_PENDING`] newer ones are kept.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;

use fedvol_proto::coordinator::{ClusterCounts, DecisionSummary};
use fedvol_proto::decisions::StoredDecision;

/// At most this many listings wait for their value (a watch far behind its writes reads the
/// others from their bytes).
pub const MAX_PENDING: usize = 4096;

/// A decision's listing: its summary and its cluster counts.
pub type Listing = (Box<DecisionSummary>, ClusterCounts);

/// One write's listing, waiting for its value.
struct Pending {
    ticket: u64,
    body: Bytes,
    listing: Listing,
}

#[derive(Default)]
struct Inner {
    /// Key → its writes waiting, oldest first.
    by_key: HashMap<String, Vec<Pending>>,
    /// Ticket → key, oldest first (to let the oldest go).
    order: BTreeMap<u64, String>,
    next: u64,
}

impl Inner {
    fn remove(&mut self, ticket: u64) -> Option<Pending> {
        let key = self.order.remove(&ticket)?;
        let writes = self.by_key.get_mut(&key)?;
        let i = writes.iter().position(|p| p.ticket == ticket)?;
        let p = writes.remove(i);
        if writes.is_empty() {
            self.by_key.remove(&key);
        }
        Some(p)
    }
}

/// Listings of this coordinator's writes, until the watch delivers their values.
#[derive(Default)]
pub struct OwnWrites {
    inner: Mutex<Inner>,
}

/// A write whose listing is kept ([`OwnWrites::expect`]), to settle once it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

impl OwnWrites {
    /// Keeps the listing of `stored`, about to be written under `key` as `body`.
    pub fn expect(&self, key: &str, body: &Bytes, stored: &StoredDecision) -> Ticket {
        let listing = (
            Box::new(DecisionSummary::of(key.to_string(), stored)),
            ClusterCounts::of(stored),
        );
        let mut inner = self.lock();
        let ticket = inner.next;
        inner.next += 1;
        inner.by_key.entry(key.to_string()).or_default().push(Pending {
            ticket,
            body: body.clone(),
            listing,
        });
        inner.order.insert(ticket, key.to_string());
        while inner.order.len() > MAX_PENDING {
            let Some(oldest) = inner.order.first_key_value().map(|(t, _)| *t) else {
                break;
            };
            inner.remove(oldest);
        }
        Ticket(ticket)
    }

    /// The write of `ticket` was answered: a write not `done` is forgotten (its value is not
    /// stored, or not known to be).
    pub fn settle(&self, ticket: Ticket, done: bool) {
        if !done {
            self.lock().remove(ticket.0);
        }
    }

    /// The listing of `value`, delivered under `key`, when this coordinator wrote those bytes
    /// there and the listing is still kept; it is then forgotten.
    pub fn take(&self, key: &str, value: &[u8]) -> Option<Listing> {
        let mut inner = self.lock();
        let ticket = inner.by_key.get(key)?.iter().find(|p| p.body[..] == *value)?.ticket;
        inner.remove(ticket).map(|p| p.listing)
    }

    /// Forgets every listing: the bucket is read whole again (it may have been made again).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.by_key.clear();
        inner.order.clear();
    }

    /// How many listings wait.
    pub fn len(&self) -> usize {
        self.lock().order.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::what_if::tests::stored;
    use fedvol_proto::decisions::DecisionState;

    #[test]
    fn a_listing_is_taken_once_for_the_bytes_written_under_its_key() {
        let own = OwnWrites::default();
        let s = stored(DecisionState::Committed);
        let body = fedvol_proto::encode(&s);
        let t = own.expect("r1", &body, &s);
        assert!(own.take("other", &body).is_none(), "another key is not ours");
        assert!(own.take("r1", b"{}").is_none(), "other bytes are not ours");
        let (summary, counts) = own.take("r1", &body).expect("our write");
        // What the index would have read from the value written.
        let read = fedvol_proto::listing::listing("r1".into(), &body).expect("a listing");
        assert_eq!((*summary, counts), read);
        assert_eq!(counts.asked, 2);
        assert!(own.take("r1", &body).is_none(), "taken once");
        own.settle(t, true);
        assert!(own.is_empty());
    }

    #[test]
    fn a_failed_write_is_forgotten_and_a_delivered_one_settles_to_nothing() {
        let own = OwnWrites::default();
        let (a, b) = (stored(DecisionState::Planned), stored(DecisionState::Committed));
        let (ba, bb) = (fedvol_proto::encode(&a), fedvol_proto::encode(&b));
        let ta = own.expect("r", &ba, &a);
        let tb = own.expect("r", &bb, &b);
        own.settle(ta, false);
        assert!(own.take("r", &ba).is_none(), "the failed write's listing is gone");
        // The watch delivered the second value before its write was answered.
        assert_eq!(own.take("r", &bb).map(|(s, _)| s.state), Some(DecisionState::Committed));
        own.settle(tb, true);
        assert!(own.is_empty());
    }

    #[test]
    fn at_most_max_pending_wait() {
        let own = OwnWrites::default();
        let s = stored(DecisionState::Planned);
        let bodies: Vec<Bytes> = (0..MAX_PENDING + 10).map(|i| Bytes::from(format!("{i}"))).collect();
        for b in &bodies {
            own.expect("k", b, &s);
        }
        assert_eq!(own.len(), MAX_PENDING);
        assert!(own.take("k", &bodies[0]).is_none(), "the oldest went");
        assert!(own.take("k", &bodies[10]).is_some());
    }
}
