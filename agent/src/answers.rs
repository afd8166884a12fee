//! The whole answers an agent keeps for the plans it answered with their summary
//! ([`fedvol_proto::agent::PlanMsg::summary`], docs/design.md §4): a coordinator asking many
//! clusters fetches the few it stores whole ([`fedvol_proto::agent::Answer`]), and the others
//! never cross NATS.
//!
//! Kept for [`RETENTION_MS`] and at most [`KEPT`] answers, oldest first out; in memory only,
//! so an agent that restarts keeps none (the coordinator then stores the summary and says so).
//!
//! Each is kept encoded (its JSON object form, as [`fedvol_proto::agent::Answer`] sends it):
//! about 8 KB for 100 hosts and the stored trace limit, in one allocation instead of the many
//! small ones of a decoded [`ClusterDecision`] (at 1,000 × 100 the benchmark's agents
//! processes ended a 15 s window about 800 MB smaller, BENCHMARKS.md). Encoding takes about
//! 7 µs per plan; only the few answers a coordinator fetches are decoded again (about 24 µs
//! each).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use fedvol_common::decision::ClusterDecision;

/// How long a whole answer is kept after its plan, ms: well past a coordinator's gather and
/// its fetch of the answers it keeps (a plan's deadline is seconds).
pub const RETENTION_MS: u64 = 10 * 60 * 1000;

/// The most whole answers kept at once (about 8 KB each, encoded, for 100 hosts and the
/// stored trace limit, so at most about 8 MB).
pub const KEPT: usize = 1024;

/// Whole answers by request id, oldest first.
#[derive(Debug, Default)]
pub struct Answers {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, (u64, Arc<[u8]>)>,
    order: VecDeque<(u64, String)>,
}

impl Answers {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `answer`, encoded, for `request_id`, planned at `now_ms` (a later plan of the
    /// same request replaces it), and lets go of what is past the retention or the bound.
    ///
    /// Errors: the answer could not be encoded (nothing is kept; `answer` then says it keeps
    /// none).
    pub fn keep(&self, request_id: &str, answer: &ClusterDecision, now_ms: u64) -> Result<(), serde_json::Error> {
        let encoded: Arc<[u8]> = serde_json::to_vec(answer)?.into();
        let mut g = self.lock();
        g.by_id.insert(request_id.to_string(), (now_ms, encoded));
        g.order.push_back((now_ms, request_id.to_string()));
        g.expire(now_ms);
        Ok(())
    }

    /// The whole answer kept for `request_id` at `now_ms`, if any, decoded.
    ///
    /// Errors: the kept bytes do not read back (they were written by [`Answers::keep`], so
    /// this would be a fault of the decision's serializers).
    pub fn get(&self, request_id: &str, now_ms: u64) -> Option<Result<ClusterDecision, serde_json::Error>> {
        let encoded = {
            let mut g = self.lock();
            g.expire(now_ms);
            g.by_id.get(request_id).map(|(_, a)| a.clone())
        };
        encoded.map(|bytes| serde_json::from_slice(&bytes))
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn expire(&mut self, now_ms: u64) {
        while let Some((at, id)) = self.order.front() {
            let old = now_ms.saturating_sub(*at) > RETENTION_MS || self.order.len() > KEPT;
            if !old {
                break;
            }
            // A request planned again has a newer entry: only its last one removes it.
            if self.by_id.get(id).is_some_and(|(kept_at, _)| kept_at == at) {
                self.by_id.remove(id);
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::decision::ClusterStatus;

    fn answer(ms: f64) -> ClusterDecision {
        ClusterDecision::without_answer(ClusterStatus::Answered, ms, None)
    }

    fn elapsed(a: &Answers, id: &str, now_ms: u64) -> Option<f64> {
        a.get(id, now_ms).map(|d| d.unwrap().elapsed_ms)
    }

    #[test]
    fn answers_are_kept_for_the_retention_and_within_the_bound() {
        let a = Answers::default();
        a.keep("r1", &answer(1.0), 1_000).unwrap();
        assert_eq!(elapsed(&a, "r1", 1_000 + RETENTION_MS), Some(1.0));
        assert!(a.get("r1", 1_001 + RETENTION_MS).is_none(), "past the retention");
        for i in 0..=KEPT {
            a.keep(&format!("q{i}"), &answer(i as f64), 5_000_000).unwrap();
        }
        assert_eq!(a.len(), KEPT);
        assert!(a.get("q0", 5_000_000).is_none(), "the oldest went first");
        assert!(a.get(&format!("q{KEPT}"), 5_000_000).is_some());
    }

    /// A real whole answer (listings, allocations, a new volume's specification) reads back
    /// as it was kept.
    #[test]
    fn a_kept_answer_reads_back_whole() {
        use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
        use fedvol_common::synth::{SynthSizes, cluster, workflow};
        let inv = cluster(
            "c",
            SynthSizes {
                hosts: 100,
                provisioners: 4,
                volumes: 50,
            },
        );
        let req = PlanRequest::new("r", workflow(2, 2), "u").with_trace_limit(5);
        let mut whole = plan_cluster(&inv, &ClusterState::default(), &req);
        whole.elapsed_ms = 1.234_567_891;
        assert!(!whole.allocations.is_empty() && whole.trace.iter().any(|t| !t.rejected.is_empty()));
        assert!(whole.volumes.values().any(|v| v.new_volume.is_some()));
        let a = Answers::default();
        a.keep("r", &whole, 1_000).unwrap();
        assert_eq!(a.get("r", 1_000).unwrap().unwrap(), whole);
    }

    #[test]
    fn a_request_planned_again_keeps_its_last_answer() {
        let a = Answers::default();
        a.keep("r", &answer(1.0), 1_000).unwrap();
        a.keep("r", &answer(2.0), 2_000).unwrap();
        // The first entry's expiry does not take the second answer with it.
        assert_eq!(elapsed(&a, "r", 1_001 + RETENTION_MS), Some(2.0));
        assert!(a.get("r", 2_001 + RETENTION_MS).is_none());
    }
}
