//! Why no cluster was chosen for a workflow, when "nothing fits" would not be the truth:
//!
//! - **unanswered**: some clusters gave no usable answer that may come later (timed out,
//!   unreachable, or an error in [`NOT_ANSWERING`] such as `restoring`), or no cluster is known
//!   at all. The workflow may fit there, so the
//!   answer is "ask again", never "nothing fits";
//! - **unresolvable**: every cluster answered, and on each one some volume or job fails only
//!   for reasons that no completion of other work can change (an unknown project, a
//!   permission no group of the user holds, an annotation, hard constraint or network nothing
//!   carries). This is kube-scheduler's `UnschedulableAndUnresolvable` (scheduling framework:
//!   "preemption would not change anything"): here, waiting for capacity would not change
//!   anything, so such a workflow is not queued;
//! - **drained** ([`drained_fits`]): the clusters that can place it answered, but an operator
//!   drained every one of them; another cluster, or the drain's end, may place it;
//! - otherwise nothing fits now, and room may free up.
//!
//! The rule is conservative: an element counts as unresolvable only when its error code is in
//! [`UNRESOLVABLE`], or its error is an aggregate (`no_zone`, `no_provisioner`) and every
//! rejection its funnel stages recorded (the exact per-code counts, which summaries keep) is in
//! [`UNRESOLVABLE`]. A rejection that capacity, power, readiness or other workflows' volumes
//! could lift (`insufficient`, `project_limit`, `powered_off`, `not_ready`, `reserved`,
//! `no_such_volume`...) makes the element resolvable. Pure: no I/O.

use indexmap::IndexMap;

use crate::decision::{ClusterDecision, ClusterStatus, codes};

/// Reason codes that depend only on the cluster's inventory and the workflow itself, never on
/// what other work holds: no completion, release or restore makes a candidate rejected with one
/// of them pass.
pub const UNRESOLVABLE: &[&str] = &[
    codes::ANNOTATION_MISSING,
    codes::ANNOTATION_MISMATCH,
    codes::PERMISSION_DENIED,
    codes::NO_SUCH_PROVISIONER,
    codes::ACCESS_MODES,
    codes::VOLUME_MODE,
    codes::SELECTOR,
    codes::CLASS_MISMATCH,
    codes::VOLUME_NAME,
    codes::NO_DYNAMIC_PROVISIONING,
    codes::NO_SUCH_CLASS,
    codes::NOT_IN_PROJECT,
    codes::NO_SUCH_PROJECT,
    codes::IMAGE_PROFILE,
    codes::FLAVOR_PROFILE,
    codes::STORAGE_UNREACHABLE,
    codes::HARD_CONSTRAINT,
    codes::NETWORK,
    codes::NODE_AFFINITY,
];

/// Error codes of an `error` slot that say the cluster could not answer now (the protocol's
/// codes, `fedvol_proto::Code`, as text): it is waiting for its restore, busy, failing or out
/// of reach, so the workflow may fit there once it answers. Any other error (`reply_too_large`,
/// `bad_request`, an answer in another cluster's name...) recurs as it is: that cluster is
/// counted as one that answered and cannot place the workflow.
pub const NOT_ANSWERING: &[&str] = &[
    "restoring",
    "overloaded",
    "internal",
    "nats_error",
    "store_unavailable",
    "timed_out",
    "unreachable",
];

/// True when `c` gave no usable answer that may come later: timed out, unreachable, or an
/// error in [`NOT_ANSWERING`].
pub fn not_answering(c: &ClusterDecision) -> bool {
    match c.status {
        ClusterStatus::Answered => false,
        ClusterStatus::TimedOut | ClusterStatus::Unreachable => true,
        ClusterStatus::Error => c
            .error
            .as_ref()
            .is_none_or(|e| NOT_ANSWERING.contains(&e.code.as_str())),
    }
}

/// Aggregate errors whose cause is in their subject's funnel stages.
const AGGREGATES: &[&str] = &[codes::NO_ZONE, codes::NO_PROVISIONER];

/// True when `code` is in [`UNRESOLVABLE`].
pub fn unresolvable_code(code: &str) -> bool {
    UNRESOLVABLE.contains(&code)
}

/// What makes a workflow unplaceable on one cluster for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    /// `volume <name>` or `job <name>`.
    pub subject: String,
    /// The reason codes, sorted (the error's own code, or its stages' codes for an aggregate).
    pub codes: Vec<String>,
}

/// Why no cluster was chosen (module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum Unplaced<'a> {
    /// These clusters gave no usable answer, each with its slot (empty: no cluster is known).
    Unanswered(Vec<(&'a str, &'a ClusterDecision)>),
    /// Every cluster answered, and each has a [`Blocker`].
    Unresolvable(Vec<(&'a str, Blocker)>),
    /// Every cluster answered, and room may free up on some.
    NothingFits,
}

/// Why none of `clusters` (a decision's slots, in their order) was chosen (module docs).
pub fn why_unplaced(clusters: &IndexMap<String, ClusterDecision>) -> Unplaced<'_> {
    let unanswered: Vec<(&str, &ClusterDecision)> = clusters
        .iter()
        .filter(|(_, c)| not_answering(c))
        .map(|(n, c)| (n.as_str(), c))
        .collect();
    if clusters.is_empty() || !unanswered.is_empty() {
        return Unplaced::Unanswered(unanswered);
    }
    let mut blockers = Vec::with_capacity(clusters.len());
    for (name, c) in clusters {
        match (c.status, c.feasible, blocker(c)) {
            (ClusterStatus::Answered, false, Some(b)) => blockers.push((name.as_str(), b)),
            _ => return Unplaced::NothingFits,
        }
    }
    Unplaced::Unresolvable(blockers)
}

/// The clusters of `clusters` (a decision's slots, in their order) that answered and can place
/// the workflow but that an operator drained (`drained`, the decision's drains), each with its
/// drain. When nothing was chosen and this is not empty, the workflow was not placed because
/// of the drains (`clusters_drained`), not because nothing fits: every cluster that can place it
/// is drained ([`crate::choice`]'s `drained` rule drops them all).
pub fn drained_fits<'a>(
    clusters: &'a IndexMap<String, ClusterDecision>,
    drained: &'a crate::drain::Drains,
) -> Vec<(&'a str, &'a crate::drain::Drain)> {
    if drained.is_empty() {
        return Vec::new();
    }
    clusters
        .iter()
        .filter(|(_, c)| c.status == ClusterStatus::Answered && c.feasible)
        .filter_map(|(name, _)| drained.get(name).map(|d| (name.as_str(), d)))
        .collect()
}

/// The first volume or job (in workflow order, volumes first) that `c`'s answer fails for good,
/// if any (module docs).
pub fn blocker(c: &ClusterDecision) -> Option<Blocker> {
    let volumes = c
        .volumes
        .iter()
        .filter_map(|(name, v)| v.error.as_ref().map(|e| ("volume", name, e)));
    let jobs = c
        .jobs
        .iter()
        .filter_map(|(name, j)| j.error.as_ref().map(|e| ("job", name, e)));
    volumes.chain(jobs).find_map(|(kind, name, e)| {
        let found = if unresolvable_code(&e.code) {
            Some(vec![e.code.clone()])
        } else if AGGREGATES.contains(&e.code.as_str()) {
            stage_codes(c, name).filter(|cs| cs.iter().all(|code| unresolvable_code(code)))
        } else {
            None
        };
        found.map(|codes| Blocker {
            subject: format!("{kind} {name}"),
            codes,
        })
    })
}

/// Every reason code the funnel stages of `subject` recorded in `c`, sorted, once each;
/// `None` when they recorded none.
fn stage_codes(c: &ClusterDecision, subject: &str) -> Option<Vec<String>> {
    let mut all: Vec<String> = c
        .trace
        .iter()
        .filter(|t| t.subject == subject)
        .flat_map(|t| t.reason_counts.keys().cloned())
        .collect();
    all.sort();
    all.dedup();
    (!all.is_empty()).then_some(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{JobDecision, Mode, Reason, StageTrace, VolumeDecision};

    fn answered(feasible: bool) -> ClusterDecision {
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 1.0, None);
        c.feasible = feasible;
        c
    }

    /// Only the feasible, answering, drained clusters count: a drained cluster that cannot place
    /// the workflow anyway is not why it was not placed.
    #[test]
    fn drained_fits_names_the_drained_clusters_that_could_place_it() {
        let drain = crate::drain::Drain {
            by: "ops".into(),
            at_ms: 1,
            reason: "r".into(),
        };
        let mut cs = IndexMap::new();
        cs.insert("a".to_string(), answered(true));
        cs.insert("full".to_string(), answered(false));
        cs.insert("b".to_string(), answered(true));
        let none = crate::drain::Drains::new();
        assert!(drained_fits(&cs, &none).is_empty());
        let drained: crate::drain::Drains = [("a", &drain), ("full", &drain)]
            .into_iter()
            .map(|(n, d)| (n.to_string(), d.clone()))
            .collect();
        let names: Vec<&str> = drained_fits(&cs, &drained).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a"]);
    }

    fn job_error(c: &mut ClusterDecision, job: &str, code: &str) {
        c.jobs.insert(
            job.into(),
            JobDecision {
                error: Some(Reason::new(code, "x")),
                ..Default::default()
            },
        );
    }

    fn stage(c: &mut ClusterDecision, subject: &str, counts: &[(&str, usize)]) {
        c.trace.push(StageTrace {
            stage: "s".into(),
            subject: subject.into(),
            considered: 2,
            passed: 0,
            rejected: Vec::new(),
            omitted: 2,
            reason_counts: counts.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
        });
    }

    fn slots(cs: Vec<(&str, ClusterDecision)>) -> IndexMap<String, ClusterDecision> {
        cs.into_iter().map(|(n, c)| (n.to_string(), c)).collect()
    }

    #[test]
    fn a_cluster_that_did_not_answer_is_never_nothing_fits() {
        let mut full = answered(false);
        job_error(&mut full, "j", codes::NO_ZONE);
        stage(&mut full, "j", &[(codes::INSUFFICIENT, 2)]);
        let down = ClusterDecision::without_answer(ClusterStatus::Unreachable, 0.0, None);
        let restoring = ClusterDecision::without_answer(ClusterStatus::Error, 1.0, Some(Reason::new("restoring", "x")));
        let s = slots(vec![("a", full.clone()), ("b", down), ("c", restoring)]);
        let Unplaced::Unanswered(u) = why_unplaced(&s) else {
            panic!("unanswered")
        };
        assert_eq!(u.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(why_unplaced(&IndexMap::new()), Unplaced::Unanswered(Vec::new()));
        // An answer too large for NATS recurs as it is: that cluster answered, nothing fits.
        let too_large =
            ClusterDecision::without_answer(ClusterStatus::Error, 1.0, Some(Reason::new("reply_too_large", "x")));
        assert_eq!(why_unplaced(&slots(vec![("d", too_large)])), Unplaced::NothingFits);
        assert_eq!(why_unplaced(&slots(vec![("a", full)])), Unplaced::NothingFits);
    }

    #[test]
    fn unresolvable_only_when_every_cluster_fails_for_good() {
        // a: the project is unknown; b: the only zone fails a hard constraint and the other
        // is not the project's.
        let mut a = answered(false);
        job_error(&mut a, "j", codes::NO_SUCH_PROJECT);
        let mut b = answered(false);
        job_error(&mut b, "j", codes::NO_ZONE);
        stage(&mut b, "j", &[(codes::NOT_IN_PROJECT, 1)]);
        stage(&mut b, "j", &[(codes::HARD_CONSTRAINT, 4)]);
        let both = slots(vec![("a", a.clone()), ("b", b.clone())]);
        let Unplaced::Unresolvable(why) = why_unplaced(&both) else {
            panic!("unresolvable")
        };
        assert_eq!(why[0].1.codes, [codes::NO_SUCH_PROJECT]);
        assert_eq!(why[1].1.subject, "job j");
        assert_eq!(why[1].1.codes, [codes::HARD_CONSTRAINT, codes::NOT_IN_PROJECT]);

        // One capacity rejection anywhere in the job's stages: room may free up.
        let mut c = answered(false);
        job_error(&mut c, "j", codes::NO_ZONE);
        stage(&mut c, "j", &[(codes::HARD_CONSTRAINT, 1), (codes::INSUFFICIENT, 1)]);
        assert_eq!(
            why_unplaced(&slots(vec![("a", a.clone()), ("c", c)])),
            Unplaced::NothingFits
        );
        // A feasible cluster (a commit refused for contention) is never unresolvable.
        assert_eq!(
            why_unplaced(&slots(vec![("a", a), ("d", answered(true))])),
            Unplaced::NothingFits
        );
    }

    #[test]
    fn a_volume_nobody_may_create_blocks_and_its_job_is_not_counted_twice() {
        let mut c = answered(false);
        c.volumes.insert(
            "data".into(),
            VolumeDecision {
                mode: Mode::Automatic,
                provisioner: None,
                volume: None,
                action: None,
                error: Some(Reason::new(codes::NO_PROVISIONER, "none")),
                passed: Some(0),
                new_volume: None,
            },
        );
        stage(&mut c, "data", &[(codes::PERMISSION_DENIED, 3)]);
        job_error(&mut c, "j", codes::VOLUME_UNRESOLVED);
        let b = blocker(&c).unwrap();
        assert_eq!(
            (b.subject.as_str(), b.codes.as_slice()),
            ("volume data", &[codes::PERMISSION_DENIED.to_string()][..])
        );
        // Not READY may change: resolvable.
        c.trace.clear();
        stage(&mut c, "data", &[(codes::NOT_READY, 3)]);
        assert_eq!(blocker(&c), None);
        // A named volume that does not exist yet may be created by another workflow.
        if let Some(v) = c.volumes.get_mut("data") {
            v.error = Some(Reason::new(codes::NO_SUCH_VOLUME, "none"));
        }
        assert_eq!(blocker(&c), None);
    }
}
