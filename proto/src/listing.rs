//! A stored decision's listing ([`DecisionSummary`], [`ClusterCounts`]) read straight from its
//! bytes, without decoding the clusters' answers: the coordinator's index of the decision
//! bucket reads every change of every decision, and at 1,000 clusters decoding the whole
//! decision took about 10 ms per change (its answers are most of its bytes).
//!
//! What is read is what [`DecisionSummary::of`] and [`ClusterCounts::of`] read; every other
//! part is skipped as JSON, unread. A decision's answers are counted from either of their
//! forms (the object of a whole answer, the array of a summary: docs/design.md §4).

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::batch::BatchJob;
use crate::coordinator::{ClusterCounts, DecisionSummary};
use crate::decisions::DecisionState;
use crate::version::DecodeError;

#[derive(Deserialize)]
struct Peek {
    state: DecisionState,
    decision: PeekDecision,
    request: PeekRequest,
    #[serde(default)]
    attempts: Vec<PeekAttempt>,
    updated_ms: u64,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    priority_class: Option<String>,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    queued_ms: Option<u64>,
    #[serde(default)]
    run_failure: Option<String>,
    #[serde(default)]
    completing: Option<PeekCompleting>,
}

#[derive(Deserialize)]
struct PeekCompleting {
    since_ms: u64,
}

#[derive(Deserialize)]
struct PeekDecision {
    workflow: String,
    chosen_cluster: Option<String>,
    clusters: Counts,
    #[serde(default)]
    refused: Option<fedvol_common::decision::Reason>,
}

#[derive(Deserialize)]
struct PeekRequest {
    user: String,
}

#[derive(Deserialize)]
struct PeekAttempt {
    ok: bool,
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    error: Option<crate::code::ProtoError>,
    #[serde(default)]
    jobs: Vec<BatchJob>,
}

/// The clusters' answers, counted.
struct Counts(ClusterCounts);

/// One answer: answered, feasible.
struct Slot(bool, bool);

impl<'de> Deserialize<'de> for Slot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Slot;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a cluster's answer (an object, or a summary's array)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Slot, A::Error> {
                let (mut answered, mut feasible) = (false, false);
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "status" => answered = m.next_value::<String>()? == "answered",
                        "feasible" => feasible = m.next_value()?,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Slot(answered, feasible))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Slot, A::Error> {
                // [status, elapsed_ms, inventory_version, feasible, ...]
                let status: String = s
                    .next_element()?
                    .ok_or_else(|| serde::de::Error::invalid_length(0, &"a status"))?;
                let answered = status == "answered";
                for _ in 0..2 {
                    if s.next_element::<IgnoredAny>()?.is_none() {
                        return Ok(Slot(answered, false));
                    }
                }
                let feasible = s.next_element::<bool>()?.unwrap_or(false);
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Slot(answered, feasible))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the clusters' answers by name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Counts, A::Error> {
                let mut c = ClusterCounts::default();
                while let Some((_, Slot(answered, feasible))) = m.next_entry::<IgnoredAny, Slot>()? {
                    c.asked += 1;
                    c.answered += usize::from(answered);
                    c.feasible += usize::from(feasible);
                }
                Ok(Counts(c))
            }
        }
        d.deserialize_map(V)
    }
}

/// The listing of the stored decision in `bytes`, kept under `request_id`: what
/// `DecisionSummary::of` and `ClusterCounts::of` give for the decoded decision.
///
/// Errors: the bytes are not a stored decision of this protocol version, or its listed fields
/// do not read ([`DecodeError`]); the parts skipped are checked only as JSON.
pub fn listing(request_id: String, bytes: &[u8]) -> Result<(DecisionSummary, ClusterCounts), DecodeError> {
    let p: Peek = crate::decode(bytes, "stored decision", "coordinator")?;
    let reason = crate::coordinator::reason(
        p.run_failure.as_deref(),
        p.decision.refused.as_ref(),
        p.decision.chosen_cluster.is_some(),
        p.attempts
            .iter()
            .rev()
            .find_map(|a| a.error.as_ref().filter(|_| !a.ok).map(|e| (a.cluster.as_str(), e))),
    );
    let failure = crate::decisions::FailureKind::of(
        p.state,
        p.decision.refused.as_ref().map(|r| r.code.as_str()),
        p.run_failure.is_some(),
        p.attempts
            .iter()
            .map(|a| (a.ok, a.error.as_ref().map(|e| e.code.as_str()))),
    );
    let jobs = p
        .attempts
        .into_iter()
        .rev()
        .find(|a| a.ok)
        .map(|a| a.jobs)
        .unwrap_or_default();
    let summary = DecisionSummary {
        request_id,
        workflow: p.decision.workflow,
        state: p.state,
        chosen_cluster: p.decision.chosen_cluster,
        updated_ms: p.updated_ms,
        user: p.request.user,
        dry_run: p.dry_run,
        priority_class: p.priority_class,
        priority: p.priority,
        queued_ms: p.queued_ms,
        jobs,
        reason,
        failure,
        completing_since_ms: p.completing.map(|c| c.since_ms),
    };
    Ok((summary, p.decision.clusters.0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decisions::StoredDecision;
    use fedvol_common::choice::choose_cluster;
    use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision, Reason};
    use fedvol_common::funnel::{ClusterState, PlanRequest, plan_cluster};
    use fedvol_common::synth::{SynthSizes, cluster, workflow};
    use serde_json::json;

    /// A stored decision of `n` clusters (some infeasible, some without an answer), summarized
    /// as the coordinator stores it, with a failed and a committed attempt.
    pub(crate) fn stored(n: usize) -> StoredDecision {
        let req = PlanRequest::new("r", workflow(2, 1), "alice").with_seed(3);
        let sizes = SynthSizes {
            hosts: 20,
            provisioners: 2,
            volumes: 5,
        };
        let answer = plan_cluster(&cluster("c", sizes), &ClusterState::default(), &req);
        let clusters = (0..n)
            .map(|i| {
                let mut a = answer.clone();
                a.load = i as f64 / 100.0;
                if i % 4 == 1 {
                    a.feasible = false;
                }
                if i % 5 == 2 {
                    a = ClusterDecision::without_answer(
                        ClusterStatus::TimedOut,
                        9.0,
                        Some(Reason::new("timed_out", "late")),
                    );
                }
                (format!("c{i}"), a)
            })
            .collect();
        let (chosen, choice) = choose_cluster(&req, &clusters, 3);
        let mut decision = Decision {
            request_id: "r".into(),
            workflow: "w".into(),
            seed: 3,
            chosen_cluster: chosen,
            clusters,
            choice,
            quota: vec![],
            refused: None,
            drained: Default::default(),
        };
        fedvol_common::summary::summarize_unlisted(&req, &mut decision, fedvol_common::summary::LISTED_CLUSTERS);
        let attempts = json!([
            {"cluster": "c0", "ok": false},
            {"cluster": "c3", "ok": true, "jobs": [{"job": "job-0", "id": "17", "state": "running", "submitted_ms": 5}]}
        ]);
        StoredDecision {
            state: crate::decisions::DecisionState::Committed,
            decision,
            request: req,
            attempts: serde_json::from_value(attempts).unwrap(),
            completion: None,
            updated_ms: 42,
            dry_run: false,
            request_digest: None,
            priority_class: Some("high".into()),
            priority: 10,
            wait_for_capacity: false,
            queued_ms: Some(7),
            run_failure: None,
            completing: None,
        }
    }

    #[test]
    fn the_listing_read_from_the_bytes_is_the_decoded_decisions() {
        for n in [3, 40] {
            let s = stored(n);
            assert_eq!(s.decision.clusters.values().any(|c| c.summarized), n > 3);
            let bytes = crate::encode(&s);
            let (summary, counts) = listing("r".into(), &bytes).unwrap();
            assert_eq!(summary, DecisionSummary::of("r".into(), &s), "{n} clusters");
            assert_eq!(counts, ClusterCounts::of(&s), "{n} clusters");
            assert!(counts.feasible > 0 && counts.answered < counts.asked, "{counts:?}");
            assert_eq!(summary.jobs.len(), 1);
        }
        // A complete its cluster has not answered is listed, read from the bytes as decoded.
        let mut s = stored(3);
        s.completing = Some(crate::decisions::Completing {
            since_ms: 99,
            cancel: true,
        });
        let (summary, _) = listing("r".into(), &crate::encode(&s)).unwrap();
        assert_eq!(summary, DecisionSummary::of("r".into(), &s));
        assert_eq!(summary.completing_since_ms, Some(99));
    }

    /// Why a failed or refused decision is so travels in its summary (`reason`, read by
    /// `fedvol decisions watch`), read from the bytes as from the decoded decision: the failed
    /// jobs, the refusal, or the last failed commit when no cluster took it.
    #[test]
    fn the_reason_of_a_failed_decision_is_listed() {
        let failed = |f: &dyn Fn(&mut StoredDecision)| {
            let mut s = stored(3);
            s.state = crate::decisions::DecisionState::Failed;
            f(&mut s);
            let (summary, _) = listing("r".into(), &crate::encode(&s)).unwrap();
            assert_eq!(summary, DecisionSummary::of("r".into(), &s));
            summary.reason
        };
        assert_eq!(
            failed(&|s| s.run_failure = Some("job `a` (Slurm job 7) ended failed with exit code 3".into())).as_deref(),
            Some("job `a` (Slurm job 7) ended failed with exit code 3")
        );
        assert_eq!(
            failed(&|s| {
                s.decision.chosen_cluster = None;
                s.decision.refused = Some(Reason::new("quota_exceeded", "project p: cores 40 > 32"));
            })
            .as_deref(),
            Some("refused: project p: cores 40 > 32 (quota_exceeded)")
        );
        let commit = failed(&|s| {
            s.decision.chosen_cluster = None;
            s.attempts = serde_json::from_value(json!([
                {"cluster": "c0", "ok": false, "error": {"code": "commit_failed", "message": "disk full"}},
                {"cluster": "c3", "ok": false, "error": {"code": "no_longer_fits", "message": "taken"}}
            ]))
            .unwrap();
        });
        assert_eq!(commit.as_deref(), Some("commit on c3 failed: taken (no_longer_fits)"));
        // Committed, its earlier failed attempt is no reason: none.
        assert_eq!(DecisionSummary::of("r".into(), &stored(3)).reason, None);
        // A long reason is cut.
        let long = failed(&|s| s.run_failure = Some("x".repeat(1000))).unwrap();
        assert!(long.chars().count() <= 300 && long.ends_with('…'), "{long}");
    }

    #[test]
    fn a_failed_decisions_kind_is_read_from_the_bytes_as_decoded() {
        use crate::decisions::{DecisionState, FailureKind};
        let refusal = |code: &str| Some(Reason::new(code, "why"));
        let attempt = |ok: bool, code: Option<&str>| {
            let mut a: crate::decisions::CommitAttempt =
                serde_json::from_value(json!({"cluster": "c0", "ok": ok})).unwrap();
            a.error = code.map(|c| crate::code::Code::parse(c).error("x"));
            a
        };
        let cases: Vec<(Option<Reason>, bool, Vec<crate::decisions::CommitAttempt>, FailureKind)> = vec![
            (None, false, vec![], FailureKind::NothingFits),
            (
                None,
                false,
                vec![attempt(false, Some("no_longer_fits"))],
                FailureKind::NothingFits,
            ),
            (refusal("unresolvable"), false, vec![], FailureKind::NothingFits),
            (refusal("quota_exceeded"), false, vec![], FailureKind::Refused),
            (refusal("clusters_unavailable"), false, vec![], FailureKind::Unavailable),
            (
                None,
                false,
                vec![attempt(false, Some("provisioning_failed"))],
                FailureKind::CommitFailed,
            ),
            (
                None,
                false,
                vec![attempt(true, None), attempt(false, Some("no_longer_fits"))],
                FailureKind::CommitFailed,
            ),
            (None, true, vec![attempt(true, None)], FailureKind::JobFailed),
        ];
        for (refused, run_failure, attempts, kind) in cases {
            let mut s = stored(3);
            s.state = DecisionState::Failed;
            s.decision.refused = refused;
            s.run_failure = run_failure.then(|| "job j failed".to_string());
            s.attempts = attempts;
            assert_eq!(s.failure(), Some(kind));
            let (summary, _) = listing("r".into(), &crate::encode(&s)).unwrap();
            assert_eq!(summary, DecisionSummary::of("r".into(), &s));
            assert_eq!(summary.failure, Some(kind));
        }
        assert_eq!(stored(3).failure(), None, "only a failed decision has a failure kind");
    }

    #[test]
    fn a_value_that_is_no_stored_decision_is_an_error() {
        assert!(listing("r".into(), br#"{"v":1,"state":"planned"}"#).is_err());
        assert!(listing("r".into(), b"not json").is_err());
    }
}
