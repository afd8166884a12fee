//! A what-if's report (docs/design.md §2.7): per decision what it was and what it would be,
//! and whole counts: transitions in all, per cluster and per project, and per cluster the
//! capacity the work moving there needs against what is free there.

use std::collections::BTreeMap;

use super::own::add_resources;
use super::{Federations, Outcome, Transition};
use crate::model::Resources;

/// One decision planned again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecisionWhatIf {
    /// Its request id.
    pub request_id: String,
    /// The workflow's name.
    pub workflow: String,
    /// The user it was made for.
    pub user: String,
    /// The workflow's project (`default` when it names none).
    pub project: String,
    /// Its stored state (`committed`...).
    pub state: String,
    /// From `was` to `would_be`.
    pub transition: Transition,
    /// Today's federation alone (no change) would already move it: the federation changed
    /// since it was made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drift: bool,
    /// It stays on its recorded cluster, which ties with the cluster the choice picks today on
    /// every rule but the load and the seeded draw (the pick alone would have moved it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept_on_tie: bool,
    /// The policy tried (`--policy`) gives it another quota verdict than today's: refused
    /// where it passes today, or the other way round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quota_changed: bool,
    /// What it was, as recorded.
    pub was: Outcome,
    /// What it would be with the changes.
    pub would_be: Outcome,
    /// What today's federation alone would give, when that differs from `would_be`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub today: Option<Outcome>,
}

impl DecisionWhatIf {
    /// True when the decision changes cluster, or is placed or refused otherwise.
    pub fn changed(&self) -> bool {
        self.transition != Transition::Stays
    }

    /// True when it stays on its cluster with another provisioner, volume, zone or host.
    pub fn placed_otherwise(&self) -> bool {
        self.was.placed_otherwise(&self.would_be)
    }
}

/// How many decisions went from one cluster (or refused) to another (or refused).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TransitionCount {
    /// The kind.
    pub transition: Transition,
    /// Where they were; absent: refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Where they would be; absent: refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How many.
    pub decisions: u64,
}

/// One cluster's counts.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ClusterTally {
    /// The change that applies to it (`drained`, `removed`, `inventory replaced`, `added`);
    /// absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// Decisions placed on it as recorded.
    pub was: u64,
    /// Decisions it would take with the changes.
    pub would_be: u64,
    /// Decisions placed on it that stay.
    pub stays: u64,
    /// Decisions that move to it from another cluster.
    pub moved_in: u64,
    /// Decisions that move from it to another cluster.
    pub moved_out: u64,
    /// Decisions placed on it that would be refused.
    pub to_refused: u64,
    /// Refused decisions it would take.
    pub from_refused: u64,
    /// What the work moving to it (and the refused work it would take) allocates in all:
    /// cores, bytes of memory, instances, devices.
    pub need: Resources,
    /// What the live commits leaving it give back.
    pub freed: Resources,
    /// What its powered-on hosts have free today (with the changes); zero for a removed
    /// cluster.
    pub free: Resources,
    /// `need` fits in `free` (summed over the cluster: a job still needs one host with room).
    pub fits: bool,
}

/// One project's counts.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProjectTally {
    /// Decisions planned again.
    pub planned: u64,
    /// Of them, those that stay.
    pub stays: u64,
    /// That move to another cluster.
    pub moves: u64,
    /// Placed, would be refused.
    pub placed_to_refused: u64,
    /// Refused, would be placed.
    pub refused_to_placed: u64,
}

impl ProjectTally {
    fn count(&mut self, t: Transition) {
        self.planned += 1;
        match t {
            Transition::Stays => self.stays += 1,
            Transition::Moves => self.moves += 1,
            Transition::PlacedToRefused => self.placed_to_refused += 1,
            Transition::RefusedToPlaced => self.refused_to_placed += 1,
        }
    }
}

/// A what-if's whole report.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Decisions planned again.
    pub planned: u64,
    /// Of them, those whose cluster-level outcome changes (any transition but `stays`).
    pub changed: u64,
    /// Of them, those today's federation alone already changes (drift).
    pub drift: u64,
    /// Those the changes move against today's federation (the change's own effect).
    pub by_change: u64,
    /// Those that stay on their cluster with another provisioner, volume, zone or host.
    pub placed_otherwise: u64,
    /// Those that stay on their cluster although the choice's load or seeded draw would pick
    /// another one as good for them ([`DecisionWhatIf::kept_on_tie`]).
    pub kept_on_tie: u64,
    /// Those whose quota verdict the policy tried changes ([`DecisionWhatIf::quota_changed`]).
    #[serde(default)]
    pub quota_changed: u64,
    /// Per transition and pair of clusters, most first.
    pub transitions: Vec<TransitionCount>,
    /// Per cluster, by name.
    pub clusters: BTreeMap<String, ClusterTally>,
    /// Per project, by name.
    pub projects: BTreeMap<String, ProjectTally>,
    /// Every decision: the changed ones first, then those placed otherwise, then the rest,
    /// each group by request id.
    pub decisions: Vec<DecisionWhatIf>,
}

/// `need` is within `free` in every amount.
fn within(need: &Resources, free: &Resources) -> bool {
    need.cpu <= free.cpu
        && need.memory.0 <= free.memory.0
        && need.instances <= free.instances
        && need
            .devices
            .iter()
            .all(|(k, n)| free.devices.get(k).copied().unwrap_or(0) >= *n)
}

/// The report of `results` (each decision, the cluster its work would move to with what it
/// needs, the cluster its commit leaves with what it frees) planned on `fed`.
pub(super) fn tally(
    fed: &Federations,
    results: impl Iterator<Item = (DecisionWhatIf, Option<(String, Resources)>, Option<(String, Resources)>)>,
) -> Report {
    let mut r = Report::default();
    for m in &fed.changed {
        let view = &fed.views[m.view];
        let c = r.clusters.entry(view.name.clone()).or_default();
        c.free = view.free();
    }
    for (name, change) in &fed.changes {
        r.clusters.entry(name.clone()).or_default().change = Some(change.clone());
    }
    let mut pairs: BTreeMap<(Transition, Option<String>, Option<String>), u64> = BTreeMap::new();
    for (d, need, freed) in results {
        r.planned += 1;
        let t = d.transition;
        r.changed += u64::from(d.changed());
        r.drift += u64::from(d.drift);
        let today = d.today.as_ref().unwrap_or(&d.would_be);
        r.by_change += u64::from(Transition::of(today, &d.would_be) != Transition::Stays);
        r.placed_otherwise += u64::from(d.placed_otherwise());
        r.kept_on_tie += u64::from(d.kept_on_tie);
        r.quota_changed += u64::from(d.quota_changed);
        *pairs
            .entry((t, d.was.cluster.clone(), d.would_be.cluster.clone()))
            .or_default() += 1;
        r.projects.entry(d.project.clone()).or_default().count(t);
        if let Some(c) = &d.was.cluster {
            let tally = r.clusters.entry(c.clone()).or_default();
            tally.was += 1;
            match t {
                Transition::Stays => tally.stays += 1,
                Transition::Moves => tally.moved_out += 1,
                Transition::PlacedToRefused => tally.to_refused += 1,
                Transition::RefusedToPlaced => {}
            }
        }
        if let Some(c) = &d.would_be.cluster {
            let tally = r.clusters.entry(c.clone()).or_default();
            tally.would_be += 1;
            match t {
                Transition::Moves => tally.moved_in += 1,
                Transition::RefusedToPlaced => tally.from_refused += 1,
                Transition::Stays | Transition::PlacedToRefused => {}
            }
        }
        if let Some((c, n)) = need {
            add_resources(&mut r.clusters.entry(c).or_default().need, &n);
        }
        if let Some((c, f)) = freed {
            add_resources(&mut r.clusters.entry(c).or_default().freed, &f);
        }
        r.decisions.push(d);
    }
    for c in r.clusters.values_mut() {
        c.fits = within(&c.need, &c.free);
    }
    let mut transitions: Vec<TransitionCount> = pairs
        .into_iter()
        .map(|((transition, from, to), decisions)| TransitionCount {
            transition,
            from,
            to,
            decisions,
        })
        .collect();
    transitions.sort_by(|a, b| {
        b.decisions
            .cmp(&a.decisions)
            .then_with(|| a.transition.cmp(&b.transition))
    });
    r.transitions = transitions;
    r.decisions.sort_by(|a, b| {
        let rank = |d: &DecisionWhatIf| u8::from(!d.changed()) * 2 + u8::from(!d.placed_otherwise());
        rank(a).cmp(&rank(b)).then_with(|| a.request_id.cmp(&b.request_id))
    });
    r
}
