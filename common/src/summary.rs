//! Keeping a many-cluster decision small (docs/design.md §4, "Summarized answers"): the chosen
//! cluster and the runners-up a failed commit would try next keep their whole answer; every
//! other cluster's answer is stored as its summary ([`ClusterDecision::summarize`]).
//!
//! Without it a decision grows with clusters × trace: about 8 KB per cluster of 100 hosts, so
//! NATS's default 1 MiB payload could not hold a decision past about 120 clusters. A summary
//! keeps what the choice and the explanation by counts need; the listing of which candidate
//! failed which stage is recomputed on the agent by `why_not` when asked.

use crate::choice::pick_among_drained;
use crate::decision::Decision;
use crate::request::PlanRequest;

/// Clusters whose answers a decision keeps in full: the chosen one and two runners-up.
pub const LISTED_CLUSTERS: usize = 3;

/// Past this many clusters, a coordinator asks the agents to answer with summaries and fetches
/// the [`LISTED_CLUSTERS`] whole answers it keeps (docs/design.md §5, `summary`); up to it,
/// whole answers cross NATS and the coordinator summarizes them itself. Below it, the three
/// extra requests would cost more than the whole answers they save (about 8 KB per cluster of
/// 100 hosts, 23 KB at 1,000).
pub const AGENT_SUMMARIES_PAST: usize = 16;

/// Summarizes every answer of `decision` except those of the first `listed` clusters in the
/// order the commit would try them: the chosen cluster, then each cluster the choice
/// ([`crate::choice::choose_cluster`] with the decision's seed and drains) picks once those before it are
/// set aside, exactly as a commit falls back after a failure (the others in the order asked,
/// as the commit's candidates stay: the seeded draw picks by position). The answers are
/// summarized in place; a decision of at most `listed` clusters is left as it is; the clusters
/// keep their order.
///
/// Returns the clusters kept in full, in that order.
pub fn summarize_unlisted(req: &PlanRequest, decision: &mut Decision, listed: usize) -> Vec<String> {
    if decision.clusters.len() <= listed {
        return decision.clusters.keys().cloned().collect();
    }
    let mut kept: Vec<String> = Vec::with_capacity(listed);
    if let Some(chosen) = &decision.chosen_cluster
        && decision.clusters.contains_key(chosen)
    {
        kept.push(chosen.clone());
    }
    // The clusters not yet kept, in the order asked (as the commit's candidates stay: the
    // seeded draw picks by position).
    while kept.len() < listed {
        let among = decision
            .clusters
            .iter()
            .filter(|(name, _)| !kept.contains(name))
            .map(|(name, answer)| (name.as_str(), answer))
            .collect();
        match pick_among_drained(req, among, decision.seed, &decision.drained) {
            Some(next) => kept.push(next),
            None => break,
        }
    }
    for (name, answer) in decision.clusters.iter_mut() {
        if !kept.contains(name) {
            answer.summarize();
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice::choose_cluster;
    use crate::decision::ClusterDecision;
    use crate::funnel::{ClusterState, plan_cluster};
    use crate::synth::{SynthSizes, cluster, workflow};
    use indexmap::IndexMap;

    fn request() -> PlanRequest {
        PlanRequest::new("r", workflow(2, 1), "u")
            .with_seed(7)
            .with_trace_limit(crate::funnel::trace::STORED_TRACE_LIMIT)
    }

    /// A decision of `n` clusters of `hosts` hosts each (the same synthetic cluster under `n`
    /// names, each with its own load so that the choice ranks them), chosen as the coordinator
    /// chooses.
    pub(super) fn decision(n: usize, hosts: usize) -> (PlanRequest, Decision) {
        let req = request();
        let inv = cluster(
            "c",
            SynthSizes {
                hosts,
                provisioners: 4,
                volumes: 50,
            },
        );
        let answer = plan_cluster(&inv, &ClusterState::default(), &req);
        let clusters: IndexMap<String, ClusterDecision> = (0..n)
            .map(|i| {
                let mut a = answer.clone();
                a.load = (i % 97) as f64 / 100.0;
                (format!("c{i:04}"), a)
            })
            .collect();
        let (chosen, choice) = choose_cluster(&req, &clusters, req.seed);
        let d = Decision {
            request_id: "r".into(),
            workflow: "w".into(),
            seed: req.seed,
            chosen_cluster: chosen,
            clusters,
            choice,
            quota: vec![],
            refused: None,
            drained: Default::default(),
        };
        (req, d)
    }

    /// A drained cluster is never one a commit would fall back to, so it is summarized even
    /// when it would rank among the runners-up.
    #[test]
    fn a_drained_cluster_is_no_runner_up() {
        let (req, mut d) = decision(10, 50);
        let kept_plain = summarize_unlisted(&req, &mut d.clone(), LISTED_CLUSTERS);
        let runner_up = kept_plain[1].clone();
        d.drained.insert(
            runner_up.clone(),
            crate::drain::Drain {
                by: "ops".into(),
                at_ms: 1,
                reason: "r".into(),
            },
        );
        let kept = summarize_unlisted(&req, &mut d, LISTED_CLUSTERS);
        assert_eq!(kept.len(), 3);
        assert!(!kept.contains(&runner_up), "{kept:?}");
        assert!(d.clusters[&runner_up].summarized);
    }

    #[test]
    fn the_chosen_cluster_and_the_commits_fallbacks_keep_their_whole_answer() {
        let (req, mut d) = decision(10, 50);
        let before = d.clone();
        let kept = summarize_unlisted(&req, &mut d, LISTED_CLUSTERS);
        assert_eq!(kept.len(), 3);
        assert_eq!(Some(&kept[0]), d.chosen_cluster.as_ref());
        // The order a commit falls back in: choose again without the ones before.
        let mut rest = before.clusters.clone();
        for k in &kept {
            let (next, _) = choose_cluster(&req, &rest, d.seed);
            assert_eq!(next.as_ref(), Some(k));
            rest.shift_remove(k);
        }
        for (name, c) in &d.clusters {
            let full = &before.clusters[name];
            if kept.contains(name) {
                assert_eq!(c, full, "{name} kept whole");
                continue;
            }
            assert!(c.summarized, "{name}");
            assert!(c.trace.iter().all(|t| t.rejected.is_empty() && t.passed < t.considered));
            // Every stage that rejected something keeps its counts and reasons; the ranking
            // stages (`*.choice`) are left out, the picks kept.
            let rejecting: Vec<_> = full
                .trace
                .iter()
                .filter(|t| t.passed < t.considered && !t.stage.ends_with(".choice"))
                .collect();
            assert!(
                full.trace
                    .iter()
                    .any(|t| t.stage == "host.choice" && t.passed < t.considered)
            );
            assert_eq!(c.trace.len(), rejecting.len());
            for (s, f) in c.trace.iter().zip(rejecting) {
                assert_eq!(
                    (&s.stage, &s.subject, s.considered, s.passed),
                    (&f.stage, &f.subject, f.considered, f.passed)
                );
                assert_eq!(s.omitted, f.omitted + f.rejected.len());
                assert_eq!(s.reason_counts, f.reason_counts);
            }
            assert_eq!((c.feasible, &c.jobs), (full.feasible, &full.jobs));
            assert!(c.allocations.is_empty() && c.volumes.values().all(|v| v.new_volume.is_none()));
        }
        // The clusters keep their order, and the choice ranks the summaries as it ranked the
        // whole answers.
        assert!(d.clusters.keys().eq(before.clusters.keys()));
        assert_eq!(
            choose_cluster(&req, &d.clusters, d.seed),
            choose_cluster(&req, &before.clusters, d.seed)
        );
    }

    /// A commit falls back in the order the choice ranks the clusters left, asked in their
    /// original order (`daemon::commit::choose_in`, the candidates `shift_remove`d). When every
    /// rule ties, the seeded draw picks by position, so the runners-up kept whole must be drawn
    /// from the clusters in that same order, or a commit could fall back onto a cluster that
    /// kept only its summary.
    #[test]
    fn the_fallbacks_kept_whole_are_the_commits_when_the_seeded_draw_decides() {
        for seed in 0..40 {
            let (req, mut d) = decision(40, 20);
            for c in d.clusters.values_mut() {
                c.load = 0.5;
            }
            d.seed = seed;
            (d.chosen_cluster, d.choice) = choose_cluster(&req, &d.clusters, seed);
            let before = d.clone();
            let kept = summarize_unlisted(&req, &mut d, LISTED_CLUSTERS);
            let mut rest = before.clusters.clone();
            let mut fallbacks = Vec::new();
            while fallbacks.len() < LISTED_CLUSTERS {
                let (next, _) = choose_cluster(&req, &rest, seed);
                let next = next.unwrap();
                rest.shift_remove(&next);
                fallbacks.push(next);
            }
            assert_eq!(kept, fallbacks, "seed {seed}");
        }
    }

    #[test]
    fn an_answers_summary_equals_the_answer_summarized_in_place() {
        let (_, d) = decision(2, 100);
        for c in d.clusters.values() {
            assert!(!c.allocations.is_empty() && c.trace.iter().any(|t| !t.rejected.is_empty()));
            // What the summary drops is there to drop: new volumes' specifications, stages that
            // rejected nothing and ranking stages.
            assert!(c.volumes.values().any(|v| v.new_volume.is_some()));
            assert!(c.trace.iter().any(|t| t.passed == t.considered));
            assert!(c.trace.iter().any(|t| t.stage.ends_with(".choice")));
            let mut in_place = c.clone();
            in_place.summarize();
            assert_eq!(c.summary(), in_place);
            assert_eq!(c.summary().summary(), in_place, "idempotent");
        }
    }

    #[test]
    fn a_small_federation_is_left_whole() {
        let (req, mut d) = decision(3, 20);
        let before = d.clone();
        summarize_unlisted(&req, &mut d, LISTED_CLUSTERS);
        assert_eq!(d, before);
    }

    /// The size a user's NATS must carry: a decision of many clusters of 100 hosts, stored and
    /// answered as one message, against NATS's default `max_payload` of 1 MiB. 1,000 clusters
    /// fit in 512 KB (the summaries and the choice's steps in their array forms, `dense`).
    #[test]
    fn a_thousand_clusters_fit_in_half_of_natss_default_payload() {
        for (n, bound) in [(500, 280_000), (1000, 512_000)] {
            let (req, mut d) = decision(n, 100);
            let whole = serde_json::to_vec(&d).map(|v| v.len()).unwrap_or(0);
            summarize_unlisted(&req, &mut d, LISTED_CLUSTERS);
            let summarized = serde_json::to_vec(&d).map(|v| v.len()).unwrap_or(0);
            println!("{n} clusters x 100 hosts: {whole} bytes whole, {summarized} bytes summarized");
            assert!(summarized <= bound, "{n} clusters: {summarized} bytes");
            assert!(summarized * 17 < whole, "{n} clusters: {summarized} of {whole} bytes");
            let back: Decision = serde_json::from_slice(&serde_json::to_vec(&d).unwrap_or_default()).unwrap();
            assert_eq!(back, d, "read back as written");
        }
    }
}
