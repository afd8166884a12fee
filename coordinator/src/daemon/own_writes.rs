//! The listings of the decisions this coordinator wrote, kept from its write until its watch of
//! the bucket delivers that revision ([`super::index`]): the index takes a decision's listing
//! from here instead of reading it again from the value it just encoded. A submit writes its
//! decision twice (`planned`, then the outcome), 26 KB each at 4 clusters; reading each back
//! from the watch was about 8% of a coordinator's CPU per submit (`perf record` of a
//! `fedvol-bench` submit window, BENCHMARKS.md).
//!
//! Exactly the listing the value gives: it is computed from the decision written
//! ([`DecisionSummary::of`], [`ClusterCounts::of`]), which `fedvol_proto::listing` reads from
//! the bytes (a proto test holds the two equal). A listing is taken only for the same key at
//! the same revision; a write whose entry the watch delivered before the write returned, or
//! never delivers (a watch opened again past it), is dropped once a later revision is
//! delivered, and the index reads that value from its bytes as before. At most
//! [`MAX_PENDING`] are kept; past it the oldest go.

use std::collections::BTreeMap;
use std::sync::Mutex;

use fedvol_proto::coordinator::{ClusterCounts, DecisionSummary};
use fedvol_proto::decisions::StoredDecision;

/// At most this many listings wait for their revision (a watch far behind its writes reads the
/// others from their bytes).
pub const MAX_PENDING: usize = 4096;

/// A decision's listing: its summary and its cluster counts.
pub type Listing = (Box<DecisionSummary>, ClusterCounts);

/// Listings of this coordinator's writes by revision, until the watch delivers them.
#[derive(Default)]
pub struct OwnWrites {
    pending: Mutex<BTreeMap<u64, (String, Listing)>>,
}

impl OwnWrites {
    /// Records that `stored` was written under `key` at `revision`.
    pub fn wrote(&self, key: &str, revision: u64, stored: &StoredDecision) {
        let listing = (
            Box::new(DecisionSummary::of(key.to_string(), stored)),
            ClusterCounts::of(stored),
        );
        let mut pending = self.lock();
        pending.insert(revision, (key.to_string(), listing));
        while pending.len() > MAX_PENDING {
            pending.pop_first();
        }
    }

    /// The listing written under `key` at `revision`, if this coordinator wrote it and it is
    /// still kept. Every listing of a lower revision is dropped: the watch delivers revisions
    /// in order, so none of them is asked for again.
    pub fn take(&self, key: &str, revision: u64) -> Option<Listing> {
        let mut pending = self.lock();
        while pending.first_key_value().is_some_and(|(r, _)| *r < revision) {
            pending.pop_first();
        }
        match pending.first_key_value() {
            Some((r, (k, _))) if *r == revision && k == key => pending.pop_first().map(|(_, (_, l))| l),
            _ => None,
        }
    }

    /// Forgets every listing: the bucket is read whole again (it may have been made again, its
    /// revisions counting from 1).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many listings wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, (String, Listing)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_proto::decisions::DecisionState;

    /// A decision of two clusters planned for alice, in `state`.
    fn stored(state: DecisionState) -> StoredDecision {
        use fedvol_common::synth::{self, SynthSizes};
        let sizes = SynthSizes {
            hosts: 6,
            provisioners: 2,
            volumes: 2,
        };
        let inventories = [synth::cluster("a", sizes), synth::cluster("b", sizes)];
        let request = fedvol_common::funnel::PlanRequest::new("r", synth::workflow(1, 1), "alice").with_seed(7);
        let decision = fedvol_common::offline::plan_locally(&inventories, &request);
        StoredDecision {
            priority_class: None,
            priority: 0,
            wait_for_capacity: false,
            queued_ms: None,
            run_failure: None,
            state,
            decision,
            request,
            attempts: vec![],
            completion: None,
            updated_ms: 1,
            dry_run: false,
            request_digest: None,
        }
    }

    #[test]
    fn a_listing_is_taken_once_for_its_key_and_revision() {
        let own = OwnWrites::default();
        own.wrote("r", 7, &stored(DecisionState::Committed));
        assert!(
            own.take("other", 7).is_none(),
            "another key at that revision is not ours"
        );
        let (summary, counts) = own.take("r", 7).expect("our write");
        // What the index would have read from the value written.
        let read = fedvol_proto::listing::listing("r".into(), &fedvol_proto::encode(&stored(DecisionState::Committed)))
            .expect("a listing");
        assert_eq!((*summary, counts), read);
        assert_eq!(counts.asked, 2);
        assert!(own.take("r", 7).is_none(), "taken once");
    }

    #[test]
    fn a_later_revision_drops_the_writes_before_it() {
        let own = OwnWrites::default();
        own.wrote("a", 3, &stored(DecisionState::Planned));
        own.wrote("b", 4, &stored(DecisionState::Planned));
        own.wrote("c", 9, &stored(DecisionState::Planned));
        // The watch delivered 3 and 4 before their writes returned; now it delivers 5.
        assert!(own.take("x", 5).is_none());
        assert_eq!(own.len(), 1, "3 and 4 are never asked for again");
        assert!(own.take("c", 9).is_some());
        assert!(own.is_empty());
    }

    #[test]
    fn at_most_max_pending_wait() {
        let own = OwnWrites::default();
        let s = stored(DecisionState::Planned);
        for rev in 1..=(MAX_PENDING as u64 + 10) {
            own.wrote("k", rev, &s);
        }
        assert_eq!(own.len(), MAX_PENDING);
        assert!(own.take("k", 1).is_none(), "the oldest went");
        assert!(own.take("k", 11).is_some());
    }
}
