//! The cross-cluster choice: which of the clusters that answered a plan request gets the
//! workflow. Used by `fedvol plan` and by the coordinator. Pure and deterministic: the same
//! answers and seed give the same cluster.
//!
//! Rules, in order, each a [`Rule`] set up for the clusters the rules before it kept (its own
//! small function below) and recorded as a [`ChoiceStep`] naming the clusters it dropped and
//! why:
//! 1. `feasible`: only clusters that answered and found a feasible placement (`infeasible`);
//!    then, only when an operator drained a cluster ([`crate::drain`]), `drained`: no drained
//!    cluster (`drained`, naming who, when and why). When it drops every cluster left, nothing
//!    is chosen (the coordinator says so: `clusters_drained`).
//! 2. `workflow_order`: the workflow's `clusters:` list; a listed cluster ranks by its position,
//!    unlisted clusters rank after every listed one (`not_chosen`).
//! 3. `named_volume`: clusters that hold a volume the workflow requests by name, if any does.
//! 4. `soft_constraints`: the most soft constraints matched (Cloud Assembly's provisioning funnel step 4.1, across
//!    clusters).
//! 5. `cost` (only when the request's [`ChoiceOptions::cost`] is set): the lowest
//!    estimated cost ([`crate::cost::CostEstimate::total`], computed by each cluster for this
//!    request), ties within a relative 10^-9 kept; clusters without an estimate rank after
//!    every priced one. When no cluster has an estimate nothing is dropped. Without the option
//!    the step is absent and the choice is what it was before the rule existed.
//! 6. `least_loaded`: the lowest load.
//! 7. `seeded_random`: `seeded_pick(seed, "cluster", n)` over the remaining clusters in answer
//!    order.

use indexmap::IndexMap;

use crate::cost::two_costs;
use crate::decision::{ChoiceStep, ClusterDecision, ClusterStatus, Reason, Rejection, codes};
use crate::drain::Drains;
use crate::funnel::{PlanRequest, seeded_pick};
pub use crate::request::{ChoiceOptions, DEFAULT_HOURS, MAX_HOURS, check_hours};
use crate::rule::{Reasons, Recorder, Rule, rule, sift};

/// Relative difference under which two estimated costs tie in the `cost` rule.
const COST_EPSILON: f64 = 1e-9;

/// The names of the cluster-choice steps recorded in a decision's `choice` (docs/design.md §4), in the
/// order they run; the coordinator's commit phase adds the last two.
pub mod rules {
    /// Only clusters that answered and found everything feasible.
    pub const FEASIBLE: &str = "feasible";
    /// No cluster an operator drained (only when a drain is in force).
    pub const DRAINED: &str = "drained";
    /// The workflow's `clusters:` order: the first listed feasible cluster.
    pub const WORKFLOW_ORDER: &str = "workflow_order";
    /// Clusters that hold a volume the workflow requests by name.
    pub const NAMED_VOLUME: &str = "named_volume";
    /// Most soft constraints matched.
    pub const SOFT_CONSTRAINTS: &str = "soft_constraints";
    /// Lowest estimated cost (only when the request asks for it).
    pub const COST: &str = "cost";
    /// Least loaded.
    pub const LEAST_LOADED: &str = "least_loaded";
    /// The seeded draw among the remaining ties.
    pub const SEEDED_RANDOM: &str = "seeded_random";
    /// Coordinator: clusters dropped because their commit failed (the choice was re-run).
    pub const COMMIT_FAILED: &str = "commit_failed";
    /// Coordinator: a cluster not tried because `commitAttempts` were used up.
    pub const COMMIT_ATTEMPTS: &str = "commit_attempts";
}

/// A cluster in the running: its name and its answer.
type Cand<'a> = (&'a str, &'a ClusterDecision);

/// A cluster-choice rule set up for one request and the clusters still in the running (those
/// the rules before it kept, in answer order).
type ChoiceRule<'a> = Box<dyn Rule<Cand<'a>> + 'a>;

/// What a rule is set up from: the request and its seed.
struct Setup<'a> {
    req: &'a PlanRequest,
    seed: u64,
}

/// Sets up one rule for the clusters still in the running.
type Prepare = for<'a> fn(&Setup<'a>, &[Cand<'a>]) -> ChoiceRule<'a>;

/// Chooses the cluster for `req`'s workflow among `clusters` (answer slots in the order asked),
/// with the rules `req.choice` enables.
///
/// Returns the chosen cluster (or `None` when no cluster answered with a feasible placement)
/// and the steps taken. When nothing is feasible only the `feasible` step is returned;
/// otherwise every step is (six, seven with `cost`), each with the clusters it kept and those
/// it dropped with a reason (`infeasible` for the first step, `not_chosen` for the others).
/// With drains ([`choose_cluster_drained`]) the `drained` step follows `feasible`.
pub fn choose_cluster(
    req: &PlanRequest,
    clusters: &IndexMap<String, ClusterDecision>,
    seed: u64,
) -> (Option<String>, Vec<ChoiceStep>) {
    choose_cluster_drained(req, clusters, seed, &Drains::new())
}

/// [`choose_cluster`] with the clusters an operator drained (`drained`, a decision's
/// [`crate::decision::Decision::drained`]): the `drained` rule drops every one of them that is
/// still in the running after `feasible`.
pub fn choose_cluster_drained(
    req: &PlanRequest,
    clusters: &IndexMap<String, ClusterDecision>,
    seed: u64,
    drained: &Drains,
) -> (Option<String>, Vec<ChoiceStep>) {
    choose_among_drained(
        req,
        clusters.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        seed,
        drained,
    )
}

/// [`choose_cluster`] among `clusters` given as (name, answer) pairs in the order asked, so a
/// caller that sets some clusters aside (a commit falling back) need not copy the answers of
/// the others: copying 1,000 summaries took about 8 ms.
pub fn choose_among<'a>(
    req: &PlanRequest,
    clusters: Vec<(&'a str, &'a ClusterDecision)>,
    seed: u64,
) -> (Option<String>, Vec<ChoiceStep>) {
    choose_among_drained(req, clusters, seed, &Drains::new())
}

/// [`choose_among`] with the clusters an operator drained ([`choose_cluster_drained`]).
pub fn choose_among_drained<'a>(
    req: &PlanRequest,
    clusters: Vec<(&'a str, &'a ClusterDecision)>,
    seed: u64,
    drained: &Drains,
) -> (Option<String>, Vec<ChoiceStep>) {
    let mut steps = Vec::new();
    let chosen = choose(req, clusters, seed, drained, Some(&mut steps));
    (chosen, steps)
}

/// The cluster [`choose_among_drained`] chooses, without its steps: no rule writes why a
/// cluster lost, and no step is built. For a caller that needs the winner alone (the runners-up
/// a decision keeps in full, [`crate::summary::summarize_unlisted`]): at 4 clusters the
/// messages of the runs whose steps were dropped (each load printed at up to six decimals) were
/// 2% of the coordinator's CPU per submit.
pub fn pick_among_drained<'a>(
    req: &PlanRequest,
    clusters: Vec<(&'a str, &'a ClusterDecision)>,
    seed: u64,
    drained: &Drains,
) -> Option<String> {
    choose(req, clusters, seed, drained, None)
}

/// The rules in order over `clusters`; each rule's step pushed onto `steps` when given (else
/// nothing is recorded and no reason is written out).
fn choose<'a>(
    req: &PlanRequest,
    clusters: Vec<(&'a str, &'a ClusterDecision)>,
    seed: u64,
    drained: &Drains,
    mut steps: Option<&mut Vec<ChoiceStep>>,
) -> Option<String> {
    let setup = Setup { req, seed };
    let all: Vec<Cand<'a>> = clusters;
    let mut kept = run(feasible(&setup, &all).as_ref(), all, steps.as_deref_mut());
    if kept.is_empty() {
        return None;
    }
    if !drained.is_empty() {
        kept = run(not_drained(drained).as_ref(), kept, steps.as_deref_mut());
        if kept.is_empty() {
            return None;
        }
    }
    let cost: &[Prepare] = if req.choice.is_some_and(|o| o.cost) {
        &[cost]
    } else {
        &[]
    };
    let ranking: [&[Prepare]; 3] = [
        &[workflow_order, named_volume, soft_constraints],
        cost,
        &[least_loaded, seeded_random],
    ];
    for prepare in ranking.into_iter().flatten() {
        let rule = prepare(&setup, &kept);
        kept = run(rule.as_ref(), kept, steps.as_deref_mut());
    }
    kept.first().map(|(w, _)| w.to_string())
}

/// Runs one rule ([`sift`]): keeps the clusters it accepts and, given `steps`, records the
/// others with every reason as a [`ChoiceStep`] pushed there; without, the rule writes no
/// reason out (a rule's messages are made only for a listed rejection, [`Reasons::fail`]).
fn run<'a>(
    rule: &(dyn Rule<Cand<'a>> + 'a),
    cands: Vec<Cand<'a>>,
    steps: Option<&mut Vec<ChoiceStep>>,
) -> Vec<Cand<'a>> {
    /// The clusters a rule drops, each with every reason, when `listed`.
    struct Dropped {
        listed: bool,
        dropped: Vec<Rejection>,
    }
    impl<'a> Recorder<Cand<'a>> for Dropped {
        fn detailed(&self, _: usize) -> bool {
            self.listed
        }
        fn reject(&mut self, _: usize, (name, _): &Cand<'a>, reasons: &mut Reasons) {
            if self.listed {
                self.dropped.push(Rejection {
                    candidate: name.to_string(),
                    reasons: reasons.take(),
                });
            }
        }
    }
    let mut kept = cands;
    let mut dropped = Dropped {
        listed: steps.is_some(),
        dropped: Vec::new(),
    };
    sift(&mut kept, &[rule], &mut dropped);
    if let Some(steps) = steps {
        steps.push(ChoiceStep {
            rule: rule.name().to_string(),
            kept: kept.iter().map(|(n, _)| n.to_string()).collect(),
            dropped: dropped.dropped,
        });
    }
    kept
}

/// The choice rule `name` with `check`.
fn choice_rule<'a>(name: &'static str, check: impl Fn(&Cand<'a>, &mut Reasons) + 'a) -> ChoiceRule<'a> {
    Box::new(rule(name, check))
}

/// Rule 1 (`feasible`): only clusters that answered and found a feasible placement; every
/// reason one cannot be used ([`infeasibility`]).
fn feasible<'a>(_: &Setup<'a>, _: &[Cand<'a>]) -> ChoiceRule<'a> {
    choice_rule(rules::FEASIBLE, |(_, c), r| r.extend(infeasibility(c)))
}

/// Rule `drained` (after `feasible`, only when a drain is in force): no cluster an operator
/// drained; each dropped one says who drained it, when and why (`kubectl drain` cordons a node
/// the same way: it runs what it has and takes nothing new).
fn not_drained<'a>(drained: &'a Drains) -> ChoiceRule<'a> {
    choice_rule(rules::DRAINED, move |(name, _), r| {
        if let Some(d) = drained.get(*name) {
            r.fail(codes::DRAINED, || {
                format!("{}; it answers plans but is never chosen for new work", d.describe())
            });
        }
    })
}

/// Rule 2 (`workflow_order`): the listed cluster that comes first in the workflow's
/// `clusters:` (unlisted ones rank after every listed one; with none listed all tie).
fn workflow_order<'a>(s: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let listed = &s.req.workflow.clusters;
    let rank = move |name: &str| listed.iter().position(|c| c == name);
    let leader = kept.iter().filter_map(|(n, _)| rank(n).map(|r| (r, *n))).min();
    choice_rule(rules::WORKFLOW_ORDER, move |(n, _), r| match (leader, rank(n)) {
        (None, _) => {}
        (Some((best, _)), Some(mine)) if mine == best => {}
        (Some((best, lead)), mine) => {
            r.fail(codes::NOT_CHOSEN, || {
                let mine = mine.map_or("not listed".to_string(), |m| format!("listed {}", ordinal(m + 1)));
                format!("{mine} in clusters:, {lead} is listed {}", ordinal(best + 1))
            });
        }
    })
}

/// Rule 3 (`named_volume`): when a cluster holds a volume the workflow requests by name, the
/// clusters that do.
fn named_volume<'a>(_: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let holder = kept.iter().find(|(_, c)| c.holds_named_volume).map(|(n, _)| *n);
    choice_rule(rules::NAMED_VOLUME, move |(_, c), r| {
        if let Some(h) = holder
            && !c.holds_named_volume
        {
            r.fail(codes::NOT_CHOSEN, || {
                format!("holds no volume the workflow requests by name; {h} does")
            });
        }
    })
}

/// Rule 4 (`soft_constraints`): the most soft constraints matched.
fn soft_constraints<'a>(_: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let best = kept.iter().map(|(_, c)| c.soft_matched).max().unwrap_or(0);
    let lead = kept
        .iter()
        .find(|(_, c)| c.soft_matched == best)
        .map_or("", |(n, _)| *n);
    choice_rule(rules::SOFT_CONSTRAINTS, move |(_, c), r| {
        if c.soft_matched < best {
            r.fail(codes::NOT_CHOSEN, || {
                format!("soft constraints matched {} < {best} ({lead})", c.soft_matched)
            });
        }
    })
}

/// Rule 5 (`cost`, only when the request asks): keeps the clusters whose estimate ties with
/// the lowest; drops dearer ones with both figures and their own breakdown, and unpriced ones
/// (when any is priced).
fn cost<'a>(_: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let mut lead: Option<(&str, f64)> = None;
    for (n, c) in kept {
        if let Some(e) = &c.cost
            && lead.is_none_or(|(_, best)| e.total.total_cmp(&best).is_lt())
        {
            lead = Some((n, e.total));
        }
    }
    choice_rule(rules::COST, move |(_, c), r| {
        let Some((lead, best)) = lead else {
            return;
        };
        match &c.cost {
            Some(e) if e.total - best <= best.abs() * COST_EPSILON => {}
            Some(e) => {
                r.fail(codes::NOT_CHOSEN, || {
                    let (a, b) = two_costs(e.total, best);
                    format!("estimated cost {a} > {b} ({lead}): {}", e.breakdown())
                });
            }
            None => r.fail(codes::NOT_CHOSEN, || {
                format!(
                    "no cost estimate (no costPerGbHour on the provisioners its plan uses, no \
                 hostCostPerHour on its zones): ranks after priced clusters; {lead} is estimated at {}",
                    crate::cost::money(best)
                )
            }),
        }
    })
}

/// Rule 6 (`least_loaded`): the lowest load.
fn least_loaded<'a>(_: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let best = kept.iter().map(|(_, c)| c.load).min_by(f64::total_cmp).unwrap_or(0.0);
    let lead = kept
        .iter()
        .find(|(_, c)| c.load.total_cmp(&best).is_eq())
        .map_or("", |(n, _)| *n);
    choice_rule(rules::LEAST_LOADED, move |(_, c), r| {
        if c.load.total_cmp(&best).is_gt() {
            r.fail(codes::NOT_CHOSEN, || {
                let (a, b) = loads(c.load, best);
                format!("load {a} > {b} ({lead})")
            });
        }
    })
}

/// Rule 7 (`seeded_random`): the cluster `seeded_pick(seed, "cluster", n)` among the `n` left,
/// in answer order.
fn seeded_random<'a>(s: &Setup<'a>, kept: &[Cand<'a>]) -> ChoiceRule<'a> {
    let (seed, n) = (s.seed, kept.len());
    let winner = kept.get(seeded_pick(seed, "cluster", n)).map_or("", |(w, _)| *w);
    choice_rule(rules::SEEDED_RANDOM, move |(name, _), r| {
        if *name != winner {
            r.fail(codes::NOT_CHOSEN, || {
                format!(
                    "tied with {} other cluster(s); the seeded draw (seed {seed}) chose {winner}",
                    n.saturating_sub(1)
                )
            });
        }
    })
}

/// Every reason a cluster's answer cannot be used (empty when it can): no answer, an error, or
/// each volume and job that failed.
fn infeasibility(c: &ClusterDecision) -> Vec<Reason> {
    let bad = |msg: String| Reason::new(codes::INFEASIBLE, msg);
    let detail = c
        .error
        .as_ref()
        .map(|e| format!(": {}: {}", e.code, e.message))
        .unwrap_or_default();
    match c.status {
        ClusterStatus::TimedOut => {
            return vec![bad(format!("did not answer within the deadline{detail}"))];
        }
        ClusterStatus::Unreachable => return vec![bad(format!("unreachable{detail}"))],
        ClusterStatus::Error => return vec![bad(format!("answered with an error{detail}"))],
        ClusterStatus::Answered => {}
    }
    if c.feasible {
        return Vec::new();
    }
    let mut out: Vec<Reason> = Vec::new();
    if let Some(e) = &c.error {
        out.push(bad(format!("{}: {}", e.code, e.message)));
    }
    for (k, v) in &c.volumes {
        if let Some(e) = &v.error {
            out.push(bad(format!("volume `{k}`: {}: {}", e.code, e.message)));
        }
    }
    for (k, j) in &c.jobs {
        if let Some(e) = &j.error {
            out.push(bad(format!("job `{k}`: {}: {}", e.code, e.message)));
        }
    }
    if out.is_empty() {
        out.push(bad("found no feasible placement".to_string()));
    }
    out
}

/// Two loads as text, with enough decimals to show they differ.
fn loads(a: f64, b: f64) -> (String, String) {
    for digits in 2..=6 {
        let (x, y) = (format!("{a:.digits$}"), format!("{b:.digits$}"));
        if x != y {
            return (x, y);
        }
    }
    (format!("{a}"), format!("{b}"))
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::JobDecision;
    use crate::drain::Drain;
    use crate::model::{Workflow, WorkflowFormat};

    fn wf(clusters: &[&str]) -> PlanRequest {
        PlanRequest::new(
            "r",
            Workflow {
                priority: None,
                name: "wf".into(),
                format: WorkflowFormat::FuzzfileV4,
                volumes: Vec::new(),
                jobs: Vec::new(),
                project: None,
                clusters: clusters.iter().map(|c| c.to_string()).collect(),
                annotations: Default::default(),
            },
            "u",
        )
        .with_seed(0)
        .with_trace_limit(0)
    }

    fn answer(soft: u32, load: f64, named: bool) -> ClusterDecision {
        let mut c = ClusterDecision::without_answer(ClusterStatus::Answered, 1.0, None);
        c.feasible = true;
        c.soft_matched = soft;
        c.load = load;
        c.holds_named_volume = named;
        c
    }

    fn set(items: Vec<(&str, ClusterDecision)>) -> IndexMap<String, ClusterDecision> {
        items.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    fn step<'a>(steps: &'a [ChoiceStep], rule: &str) -> &'a ChoiceStep {
        steps.iter().find(|s| s.rule == rule).unwrap()
    }

    #[test]
    fn only_answered_feasible_clusters() {
        let mut infeasible = answer(5, 0.0, true);
        infeasible.feasible = false;
        infeasible.jobs.insert(
            "train".into(),
            JobDecision {
                error: Some(Reason::new(codes::NO_ZONE, "no zone")),
                ..Default::default()
            },
        );
        let cs = set(vec![
            (
                "slow",
                ClusterDecision::without_answer(ClusterStatus::TimedOut, 5000.0, None),
            ),
            (
                "down",
                ClusterDecision::without_answer(ClusterStatus::Unreachable, 0.0, None),
            ),
            ("full", infeasible),
            ("ok", answer(0, 0.9, false)),
        ]);
        let (chosen, steps) = choose_cluster(&wf(&[]), &cs, 1);
        assert_eq!(chosen.as_deref(), Some("ok"));
        let f = step(&steps, "feasible");
        assert_eq!(f.kept, vec!["ok"]);
        assert_eq!(f.dropped.len(), 3);
        assert!(f.dropped.iter().all(|d| d.reasons[0].code == codes::INFEASIBLE));
        let full = f.dropped.iter().find(|d| d.candidate == "full").unwrap();
        assert!(full.reasons[0].message.contains("job `train`: no_zone"), "{:?}", full);
        assert_eq!(steps.len(), 6);
    }

    #[test]
    fn nothing_feasible_gives_none() {
        let cs = set(vec![(
            "slow",
            ClusterDecision::without_answer(ClusterStatus::TimedOut, 5000.0, None),
        )]);
        let (chosen, steps) = choose_cluster(&wf(&[]), &cs, 1);
        assert_eq!(chosen, None);
        assert_eq!(steps.len(), 1);
        assert!(steps[0].dropped[0].reasons[0].message.contains("deadline"));
        let (chosen, steps) = choose_cluster(&wf(&[]), &IndexMap::new(), 1);
        assert_eq!((chosen, steps.len()), (None, 1));
    }

    #[test]
    fn workflow_order_beats_everything_after_it() {
        // cluster-c is better on every later rule but listed after cluster-a.
        let cs = set(vec![
            ("cluster-c", answer(9, 0.0, true)),
            ("cluster-b", answer(9, 0.0, true)),
            ("cluster-a", answer(0, 0.9, false)),
        ]);
        let (chosen, steps) = choose_cluster(&wf(&["cluster-a", "x", "cluster-c"]), &cs, 7);
        assert_eq!(chosen.as_deref(), Some("cluster-a"));
        let s = step(&steps, "workflow_order");
        let c = s.dropped.iter().find(|d| d.candidate == "cluster-c").unwrap();
        assert_eq!(c.reasons[0].code, codes::NOT_CHOSEN);
        assert_eq!(c.reasons[0].message, "listed 3rd in clusters:, cluster-a is listed 1st");
        let b = s.dropped.iter().find(|d| d.candidate == "cluster-b").unwrap();
        assert_eq!(b.reasons[0].message, "not listed in clusters:, cluster-a is listed 1st");
    }

    #[test]
    fn unlisted_clusters_rank_after_listed_and_tie_among_themselves() {
        let cs = set(vec![("p", answer(0, 0.5, false)), ("q", answer(0, 0.2, false))]);
        // Only an infeasible-or-absent cluster is listed: all feasible ones are unlisted, tie.
        let (chosen, steps) = choose_cluster(&wf(&["gone"]), &cs, 3);
        assert!(step(&steps, "workflow_order").dropped.is_empty());
        assert_eq!(chosen.as_deref(), Some("q"), "least loaded wins after the tie");
    }

    #[test]
    fn named_volume_holder_preferred() {
        let cs = set(vec![("a", answer(5, 0.0, false)), ("b", answer(0, 0.9, true))]);
        let (chosen, steps) = choose_cluster(&wf(&[]), &cs, 3);
        assert_eq!(chosen.as_deref(), Some("b"));
        let s = step(&steps, "named_volume");
        assert_eq!(s.dropped[0].candidate, "a");
        assert!(s.dropped[0].reasons[0].message.contains("b does"));
    }

    #[test]
    fn most_soft_constraints_then_least_load() {
        let cs = set(vec![
            ("a", answer(1, 0.1, false)),
            ("b", answer(3, 0.9, false)),
            ("c", answer(3, 0.72, false)),
        ]);
        let (chosen, steps) = choose_cluster(&wf(&[]), &cs, 3);
        assert_eq!(chosen.as_deref(), Some("c"));
        let s = step(&steps, "soft_constraints");
        assert_eq!(s.dropped[0].reasons[0].message, "soft constraints matched 1 < 3 (b)");
        let l = step(&steps, "least_loaded");
        assert_eq!(l.dropped[0].candidate, "b");
        assert_eq!(l.dropped[0].reasons[0].message, "load 0.90 > 0.72 (c)");
    }

    #[test]
    fn close_loads_show_enough_digits() {
        let cs = set(vec![("a", answer(0, 0.3101, false)), ("b", answer(0, 0.31, false))]);
        let (chosen, steps) = choose_cluster(&wf(&[]), &cs, 3);
        assert_eq!(chosen.as_deref(), Some("b"));
        assert_eq!(
            step(&steps, "least_loaded").dropped[0].reasons[0].message,
            "load 0.3101 > 0.3100 (b)"
        );
    }

    #[test]
    fn seeded_random_breaks_full_ties_reproducibly() {
        let cs = set((0..4)
            .map(|i| (["w", "x", "y", "z"][i], answer(1, 0.5, false)))
            .collect());
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let (a, steps) = choose_cluster(&wf(&[]), &cs, seed);
            let (b, _) = choose_cluster(&wf(&[]), &cs, seed);
            assert_eq!(a, b, "same seed, same answer");
            let s = step(&steps, "seeded_random");
            assert_eq!(s.kept, vec![a.clone().unwrap()]);
            assert_eq!(s.dropped.len(), 3);
            assert!(s.dropped[0].reasons[0].message.contains(&format!("seed {seed}")));
            seen.insert(a.unwrap());
        }
        assert!(seen.len() > 1, "different seeds reach different clusters");
        let expected = ["w", "x", "y", "z"][seeded_pick(9, "cluster", 4)];
        assert_eq!(choose_cluster(&wf(&[]), &cs, 9).0.as_deref(), Some(expected));
    }

    fn priced(load: f64, total: f64) -> ClusterDecision {
        let mut c = answer(0, load, false);
        let mut volumes = IndexMap::new();
        volumes.insert(
            "scratch".to_string(),
            crate::cost::VolumeCost {
                provisioner: "p".into(),
                capacity: crate::size::ByteSize(10_000_000_000),
                cost_per_gb_hour: total / 20.0,
                per_hour: total / 2.0,
            },
        );
        c.cost = Some(crate::cost::CostEstimate {
            total,
            storage_per_hour: total / 2.0,
            hours: 2.0,
            hours_from: crate::cost::HoursFrom::Default,
            volumes,
            jobs: IndexMap::new(),
            unpriced_volumes: Vec::new(),
            unpriced_jobs: Vec::new(),
        });
        c
    }

    fn with_cost(clusters: &[&str]) -> PlanRequest {
        wf(clusters).with_choice(Some(ChoiceOptions {
            cost: true,
            default_hours: None,
        }))
    }

    #[test]
    fn cost_step_prefers_the_cheapest_and_says_why() {
        // The dear cluster is the least loaded: without the option it wins.
        let cs = set(vec![
            ("dear", priced(0.1, 12.4)),
            ("cheap", priced(0.9, 3.1)),
            ("unpriced", answer(0, 0.0, false)),
        ]);
        let (plain, steps) = choose_cluster(&wf(&[]), &cs, 3);
        assert_eq!(plain.as_deref(), Some("unpriced"));
        assert!(steps.iter().all(|s| s.rule != rules::COST), "absent unless asked");
        assert_eq!(steps.len(), 6);

        let (chosen, steps) = choose_cluster(&with_cost(&[]), &cs, 3);
        assert_eq!(chosen.as_deref(), Some("cheap"));
        assert_eq!(steps.len(), 7);
        let names: Vec<&str> = steps.iter().map(|s| s.rule.as_str()).collect();
        assert_eq!(
            names,
            [
                "feasible",
                "workflow_order",
                "named_volume",
                "soft_constraints",
                "cost",
                "least_loaded",
                "seeded_random"
            ]
        );
        let s = step(&steps, rules::COST);
        assert_eq!(s.kept, ["cheap"]);
        let dear = s.dropped.iter().find(|d| d.candidate == "dear").unwrap();
        assert_eq!(dear.reasons[0].code, codes::NOT_CHOSEN);
        assert_eq!(
            dear.reasons[0].message,
            "estimated cost 12.40 > 3.10 (cheap): storage 10 GB x 0.62/GB-h x 2 h (default) = 12.40"
        );
        let unpriced = s.dropped.iter().find(|d| d.candidate == "unpriced").unwrap();
        assert!(
            unpriced.reasons[0].message.contains("no cost estimate")
                && unpriced.reasons[0]
                    .message
                    .contains("ranks after priced clusters; cheap is estimated at 3.10"),
            "{:?}",
            unpriced
        );
    }

    #[test]
    fn cost_ties_go_on_and_unpriced_federations_lose_nothing() {
        let cs = set(vec![("a", priced(0.5, 3.0)), ("b", priced(0.2, 3.0 * (1.0 + 1e-12)))]);
        let (chosen, steps) = choose_cluster(&with_cost(&[]), &cs, 3);
        assert_eq!(step(&steps, rules::COST).kept, ["a", "b"], "within the epsilon: a tie");
        assert_eq!(chosen.as_deref(), Some("b"), "then least loaded");
        let cs = set(vec![("a", answer(0, 0.5, false)), ("b", answer(0, 0.2, false))]);
        let (chosen, steps) = choose_cluster(&with_cost(&[]), &cs, 3);
        let s = step(&steps, rules::COST);
        assert!(s.dropped.is_empty() && s.kept.len() == 2);
        assert_eq!(chosen.as_deref(), Some("b"));
        // Earlier rules still come first: the workflow's order beats the price.
        let cs = set(vec![("dear", priced(0.5, 9.0)), ("cheap", priced(0.5, 1.0))]);
        assert_eq!(choose_cluster(&with_cost(&["dear"]), &cs, 3).0.as_deref(), Some("dear"));
    }

    fn drain(by: &str, reason: &str) -> Drain {
        Drain {
            by: by.into(),
            at_ms: 1_700_000_000_000,
            reason: reason.into(),
        }
    }

    fn drains(items: &[(&str, Drain)]) -> Drains {
        items.iter().map(|(n, d)| (n.to_string(), d.clone())).collect()
    }

    /// A drained cluster answered and fits best on every later rule, yet is never chosen: the
    /// `drained` step, right after `feasible`, drops it with its operator, time and reason.
    #[test]
    fn a_drained_cluster_is_never_chosen_and_says_who_when_and_why() {
        let cs = set(vec![("best", answer(9, 0.0, true)), ("other", answer(0, 0.9, false))]);
        // Without drains, `best` wins on `named_volume`.
        assert_eq!(choose_cluster(&wf(&["best"]), &cs, 3).0.as_deref(), Some("best"));
        let d = drains(&[("best", drain("ops", "disk swap"))]);
        for seed in 0..32 {
            let (chosen, steps) = choose_cluster_drained(&wf(&["best"]), &cs, seed, &d);
            assert_eq!(chosen.as_deref(), Some("other"), "seed {seed}");
            let names: Vec<&str> = steps.iter().map(|s| s.rule.as_str()).collect();
            assert_eq!(&names[..2], ["feasible", "drained"], "{names:?}");
            let s = step(&steps, rules::DRAINED);
            assert_eq!(s.kept, ["other"]);
            assert_eq!(s.dropped.len(), 1);
            assert_eq!(s.dropped[0].candidate, "best");
            assert_eq!(s.dropped[0].reasons[0].code, codes::DRAINED);
            assert_eq!(
                s.dropped[0].reasons[0].message,
                "drained by ops at 2023-11-14T22:13:20Z: disk swap; it answers plans but is never chosen for new work"
            );
        }
        // The same through `choose_among_drained` (the commit's fallback).
        let among = cs.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(choose_among_drained(&wf(&[]), among, 1, &d).0.as_deref(), Some("other"));
    }

    /// Only drained clusters can place it: nothing is chosen, and the steps say it was the drain
    /// (not "nothing fits": `feasible` kept them). No drain in force: no step, as before.
    #[test]
    fn only_drained_clusters_fitting_chooses_nothing_and_no_drain_adds_no_step() {
        let mut full = answer(0, 0.0, false);
        full.feasible = false;
        let cs = set(vec![("a", answer(0, 0.1, false)), ("full", full)]);
        let d = drains(&[("a", drain("ops", "rack 4"))]);
        let (chosen, steps) = choose_cluster_drained(&wf(&[]), &cs, 1, &d);
        assert_eq!(chosen, None);
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert_eq!(steps[0].kept, ["a"], "feasible kept the drained cluster");
        assert!(steps[1].kept.is_empty() && steps[1].dropped[0].candidate == "a");
        // A drain of a cluster that is not in the running (or not asked) drops nothing.
        let d = drains(&[("elsewhere", drain("ops", "gone"))]);
        let (chosen, steps) = choose_cluster_drained(&wf(&[]), &cs, 1, &d);
        assert_eq!(chosen.as_deref(), Some("a"));
        assert!(step(&steps, rules::DRAINED).dropped.is_empty());
        let (_, steps) = choose_cluster_drained(&wf(&[]), &cs, 1, &Drains::new());
        assert!(steps.iter().all(|s| s.rule != rules::DRAINED));
        assert_eq!(steps.len(), 6);
    }

    proptest::proptest! {
        /// The winner alone (no step, no message: the runners-up of `summarize_unlisted`) is
        /// the cluster the full choice picks, whatever decides it: feasibility, drains, the
        /// workflow's order, named volumes, soft constraints, cost, load or the seeded draw.
        #[test]
        fn the_winner_alone_is_the_full_choice_s_winner(
            clusters in proptest::collection::vec(
                (proptest::bool::weighted(0.8), 0u32..3, 0u8..4, proptest::bool::weighted(0.2), proptest::option::of(1u8..4), proptest::bool::weighted(0.2)),
                0..9,
            ),
            listed in proptest::collection::vec(0usize..9, 0..3),
            priced_choice in proptest::bool::ANY,
            seed in 0u64..1_000,
        ) {
            let names: Vec<String> = (0..clusters.len()).map(|i| format!("c{i}")).collect();
            let mut cs = IndexMap::new();
            let mut d = Drains::new();
            for (i, (feasible, soft, load, named, cost, drained)) in clusters.iter().enumerate() {
                let mut c = match cost {
                    Some(total) => priced(f64::from(*load) / 4.0, f64::from(*total)),
                    None => answer(*soft, f64::from(*load) / 4.0, *named),
                };
                c.feasible = *feasible;
                c.soft_matched = *soft;
                c.holds_named_volume = *named;
                if *drained {
                    d.insert(names[i].clone(), drain("ops", "test"));
                }
                cs.insert(names[i].clone(), c);
            }
            let order: Vec<&str> = listed.iter().filter_map(|i| names.get(*i).map(String::as_str)).collect();
            let req = if priced_choice { with_cost(&order) } else { wf(&order) };
            let among = || cs.iter().map(|(k, v)| (k.as_str(), v)).collect::<Vec<_>>();
            proptest::prop_assert_eq!(
                pick_among_drained(&req, among(), seed, &d),
                choose_among_drained(&req, among(), seed, &d).0
            );
        }
    }

    #[test]
    fn choice_options_check_hours() {
        assert!(ChoiceOptions::default().check().is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_HOURS * 2.0] {
            let o = ChoiceOptions {
                cost: true,
                default_hours: Some(bad),
            };
            assert!(o.check().is_err(), "{bad}");
        }
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .iter()
            .map(|n| ordinal(*n))
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"
            ]
        );
    }
}
