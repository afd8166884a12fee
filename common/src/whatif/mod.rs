//! What-if (docs/design.md §2.7): recorded decisions planned again on a federation as it
//! stands today and as it would stand with hypothetical changes, holding and committing
//! nothing. Each decision's stored request (workflow, user, groups, seed, choice options) runs
//! through **the same funnel** ([`crate::funnel::plan_prepared_as`]) on every cluster and
//! **the same cluster choice** ([`crate::choice::choose_among_drained`]) as a plan; nothing of
//! either is copied here. A drained cluster (an operator's drain in force, or one the what-if
//! asks for) is planned like any other and dropped by the choice's `drained` rule, as a
//! coordinator does; a workflow only drained clusters can place is refused `clusters_drained`. Pure: the caller (the coordinator's `what_if` operation) fetches the
//! inventories and the records and applies the changes to the [`Federations`].
//!
//! - A live commit is planned on its own cluster without itself ([`own::without`]), so it never
//!   blocks itself.
//! - Each decision is planned alone on today's state; moving work is not stacked. The report
//!   gives per cluster what the work moving there needs against what is free there.
//! - A recorded placement keeps its cluster while that cluster still ties with the choice's
//!   pick on every rule of substance ([`ties`]): the load and the seeded draw alone never move
//!   recorded work (they tell apart clusters that are equally good for it).
//! - Two federations are planned: **today** (no change; its differences from the record are
//!   drift) and **changed**. Clusters whose view is the same in both are planned once.

pub mod outcome;
pub mod own;
pub mod quota;
pub mod report;

use std::sync::atomic::{AtomicBool, Ordering};

use indexmap::IndexMap;

use crate::choice::{choose_among_drained, rules};
use crate::decision::{ChoiceStep, ClusterDecision, Reason};
use crate::drain::{Drain, Drains};
use crate::funnel::{ClusterState, PlanRequest, Prepared, RunAs, plan_prepared_as};
use crate::model::{Inventory, PowerState, Resources};

pub use outcome::{JobPick, Outcome, Transition, VolumePick, codes};
pub use report::{ClusterTally, DecisionWhatIf, ProjectTally, Report, TransitionCount};

/// The trace limit of a what-if's plans: one listed rejection per stage (counts per reason
/// stay exact), since only the outcome is compared.
pub const TRACE_LIMIT: usize = 1;

/// One cluster's state as a what-if plans on it: its name, its (effective) inventory, prepared
/// for planning once.
#[derive(Debug, Clone)]
pub struct View {
    /// The cluster.
    pub name: String,
    /// The inventory plans see (an agent's effective inventory, or one a change gave).
    pub inventory: Inventory,
    /// `inventory` prepared ([`Prepared::new`]).
    pub prepared: Prepared,
}

impl View {
    /// `inventory` of cluster `name`, prepared.
    pub fn new(name: impl Into<String>, inventory: Inventory) -> View {
        let prepared = Prepared::new(&inventory);
        View {
            name: name.into(),
            inventory,
            prepared,
        }
    }

    /// What the powered-on hosts have free in all (capacity minus allocations, per host,
    /// saturating at 0): cores, bytes of memory, instances, devices.
    pub fn free(&self) -> Resources {
        let mut sum = Resources::default();
        for h in self.inventory.zones.iter().flat_map(|z| &z.hosts) {
            if h.power != PowerState::On {
                continue;
            }
            let mut left = h.capacity.clone();
            own::sub_resources(&mut left, &h.allocated);
            own::add_resources(&mut sum, &left);
        }
        sum
    }
}

/// One cluster of a federation: which [`View`] it plans on, and whether it is drained (planned,
/// then dropped by the choice's `drained` rule; its drain is in [`Federations::drains`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index into [`Federations::views`].
    pub view: usize,
    /// The cluster takes no new work.
    pub drained: bool,
}

/// The two federations a what-if plans on, clusters in the order a coordinator asks them.
#[derive(Debug, Clone, Default)]
pub struct Federations {
    /// Every distinct cluster state either federation uses.
    pub views: Vec<View>,
    /// Today's federation (no change).
    pub today: Vec<Member>,
    /// The federation with the changes.
    pub changed: Vec<Member>,
    /// Per cluster name, the change that applies to it, in words (`drained`, `removed`,
    /// `inventory replaced`, `added`).
    pub changes: IndexMap<String, String>,
    /// Who drained each cluster a member drains, when and why (an operator's drain in force, or
    /// the what-if's own); a drained member missing here is said to be drained by `what-if`.
    pub drains: Drains,
}

impl Federations {
    /// The views either federation plans on, each once (drained members too: a drained
    /// cluster still answers plans).
    fn planned_views(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.today.iter().chain(&self.changed).map(|m| m.view).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// One recorded decision as a what-if takes it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its request id.
    pub request_id: String,
    /// Its state's wire name (`committed`...).
    pub state: String,
    /// The workflow's project (`default` when it names none).
    pub project: String,
    /// The request it was made for, with its seed and choice options.
    pub request: PlanRequest,
    /// What it was.
    pub was: Outcome,
    /// Its live commit: the cluster and the answer it committed with, whose allocations and
    /// volumes are given back when it is planned there ([`own::without`]).
    pub own: Option<(String, ClusterDecision)>,
    /// The `identity.user` verdict each cluster recorded for it (clusters that run jobs as
    /// their users, docs/design.md §2.6).
    pub run_as: Vec<(String, RunAs)>,
    /// Its quota refusal under the coordinators' policy today, when a what-if tries another
    /// policy and today's refuses it ([`quota`]): today's federation then refuses it so.
    pub quota_today: Option<Reason>,
    /// Its quota refusal under the policy tried: the changed federation refuses it so.
    pub quota_tried: Option<Reason>,
}

/// What one decision's plans gave.
struct One {
    result: DecisionWhatIf,
    /// The cluster its work would move to and what that work allocates there.
    need: Option<(String, Resources)>,
    /// The cluster its live commit would leave and what it gives back there.
    freed: Option<(String, Resources)>,
}

/// What one choice gave: the outcome, what its work allocates on the chosen cluster, and
/// whether the recorded cluster was kept on a tie ([`ties`]).
#[derive(Clone)]
struct Choice {
    outcome: Outcome,
    need: Option<Resources>,
    kept_on_tie: bool,
}

/// True when `cluster` is still among the clusters the choice ranks first on every rule of
/// substance (`feasible`, `workflow_order`, `named_volume`, `soft_constraints`, and `cost` when
/// asked): the rules before `least_loaded` in `steps`. Such a cluster differs from the pick only
/// by load or the seeded draw, which a recorded placement keeps (docs/design.md §2.7: work is
/// not moved for balance).
fn ties(steps: &[ChoiceStep], cluster: &str) -> bool {
    steps
        .iter()
        .take_while(|s| s.rule != rules::LEAST_LOADED)
        .last()
        .is_some_and(|s| s.kept.iter().any(|k| k == cluster))
}

/// The drain of member cluster `name`: the one in `drains`, else the what-if's own.
fn drain_of(drains: &Drains, name: &str) -> Drain {
    drains.get(name).cloned().unwrap_or_else(|| Drain {
        by: "what-if".into(),
        at_ms: 0,
        reason: "drained by this what-if".into(),
    })
}

/// Plans `rec` on both federations and compares.
fn one(fed: &Federations, planned: &[usize], rec: &Recorded) -> One {
    let mut req = rec.request.clone();
    req.trace_limit = TRACE_LIMIT;
    let state = ClusterState::default();
    let mut answers: Vec<Option<ClusterDecision>> = vec![None; fed.views.len()];
    for &v in planned {
        let view = &fed.views[v];
        let run_as = rec.run_as.iter().find(|(c, _)| *c == view.name).map(|(_, r)| r);
        let slot = match &rec.own {
            Some((cluster, own)) if *cluster == view.name => {
                let (inv, prep) = own::without(&view.inventory, &view.prepared, own, &rec.request_id);
                plan_prepared_as(&inv, &prep, &state, &req, run_as)
            }
            _ => plan_prepared_as(&view.inventory, &view.prepared, &state, &req, run_as),
        };
        answers[v] = Some(slot);
    }
    let choose = |members: &[Member]| -> Choice {
        let slots: Vec<(&str, &ClusterDecision)> = members
            .iter()
            .filter_map(|m| answers[m.view].as_ref().map(|s| (fed.views[m.view].name.as_str(), s)))
            .collect();
        let drains: Drains = members
            .iter()
            .filter(|m| m.drained)
            .map(|m| {
                let name = &fed.views[m.view].name;
                (name.clone(), drain_of(&fed.drains, name))
            })
            .collect();
        let (mut chosen, steps) = choose_among_drained(&req, slots.clone(), req.seed, &drains);
        let mut kept_on_tie = false;
        if let (Some(was), Some(c)) = (rec.was.cluster.as_deref(), chosen.as_deref())
            && was != c
            && ties(&steps, was)
        {
            chosen = Some(was.to_string());
            kept_on_tie = true;
        }
        match chosen.and_then(|c| slots.iter().find(|(n, _)| *n == c).copied()) {
            Some((name, slot)) => {
                let mut need = Resources::default();
                for a in &slot.allocations {
                    own::add_resources(&mut need, &a.resources);
                }
                Choice {
                    outcome: Outcome::placed(name, slot),
                    need: Some(need),
                    kept_on_tie,
                }
            }
            None => {
                let all: IndexMap<String, ClusterDecision> =
                    slots.into_iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
                Choice {
                    outcome: Outcome::unplaced_drained(&all, &drains, &fed.drains),
                    need: None,
                    kept_on_tie,
                }
            }
        }
    };
    // A quota refusal comes before any cluster is chosen, as in a coordinator's submit.
    let refused = |r: &Reason| Choice {
        outcome: Outcome::refused(&r.code, r.message.clone()),
        need: None,
        kept_on_tie: false,
    };
    let today = match &rec.quota_today {
        Some(r) => refused(r),
        None => choose(&fed.today),
    };
    let changed = match &rec.quota_tried {
        Some(r) => refused(r),
        None if fed.changed == fed.today && rec.quota_today.is_none() => today.clone(),
        None => choose(&fed.changed),
    };
    let (today, would_be, need, kept_on_tie) = (today.outcome, changed.outcome, changed.need, changed.kept_on_tie);
    let transition = Transition::of(&rec.was, &would_be);
    let drift = Transition::of(&rec.was, &today) != Transition::Stays;
    let need = match (transition, need, would_be.cluster.as_ref()) {
        (Transition::Moves | Transition::RefusedToPlaced, Some(n), Some(c)) => Some((c.clone(), n)),
        _ => None,
    };
    let freed = match (transition, &rec.own) {
        (Transition::Moves | Transition::PlacedToRefused, Some((cluster, slot))) => {
            let mut r = Resources::default();
            for a in &slot.allocations {
                own::add_resources(&mut r, &a.resources);
            }
            Some((cluster.clone(), r))
        }
        _ => None,
    };
    let result = DecisionWhatIf {
        quota_changed: rec.quota_today.is_some() != rec.quota_tried.is_some(),
        kept_on_tie,
        request_id: rec.request_id.clone(),
        workflow: rec.request.workflow.name.clone(),
        user: rec.request.user.clone(),
        project: rec.project.clone(),
        state: rec.state.clone(),
        transition,
        drift,
        today: (today != would_be).then_some(today),
        was: rec.was.clone(),
        would_be,
    };
    One { result, need, freed }
}

/// Plans every decision of `recorded` on both federations of `fed`, on `threads` threads (at
/// least one), and reports ([`Report`]). Returns `None` when `stop` was set before it finished
/// (it is read between decisions).
pub fn run(fed: &Federations, recorded: &[Recorded], threads: usize, stop: &AtomicBool) -> Option<Report> {
    let planned = fed.planned_views();
    let threads = threads.clamp(1, recorded.len().max(1));
    let chunk = recorded.len().div_ceil(threads).max(1);
    let parts: Vec<Option<Vec<One>>> = std::thread::scope(|s| {
        let handles: Vec<_> = recorded
            .chunks(chunk)
            .map(|part| {
                let planned = &planned;
                s.spawn(move || {
                    let mut out = Vec::with_capacity(part.len());
                    for rec in part {
                        if stop.load(Ordering::Relaxed) {
                            return None;
                        }
                        out.push(one(fed, planned, rec));
                    }
                    Some(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    let mut ones = Vec::with_capacity(recorded.len());
    for p in parts {
        ones.extend(p?);
    }
    Some(report::tally(
        fed,
        ones.into_iter().map(|o| (o.result, o.need, o.freed)),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::decision::VolumeDecision;
    use crate::model::VolumePhase;
    use crate::offline::plan_locally;
    use crate::synth::{SynthSizes, cluster, workflow};

    /// Three synthetic clusters, and one request planned and committed on the one the choice
    /// picked: its allocations counted on its hosts, its new volume Bound (the agent's
    /// effective inventory after the commit).
    fn committed_federation() -> (Vec<Inventory>, Vec<Inventory>, Recorded, String) {
        let base: Vec<Inventory> = ["a", "b", "c"]
            .iter()
            .map(|n| {
                cluster(
                    n,
                    SynthSizes {
                        hosts: 30,
                        provisioners: 2,
                        volumes: 5,
                    },
                )
            })
            .collect();
        let req = PlanRequest::new("r-1", workflow(2, 10), "u").with_seed(11);
        let d = plan_locally(&base, &req);
        let chosen = d.chosen_cluster.clone().unwrap();
        let slot = d.clusters[&chosen].clone();
        let mut eff = base.clone();
        let inv = eff.iter_mut().find(|i| i.cluster == chosen).unwrap();
        for a in &slot.allocations {
            let z = inv.zones.iter_mut().find(|z| z.name == a.zone).unwrap();
            let h = z.hosts.iter_mut().find(|h| h.name == a.host).unwrap();
            own::add_resources(&mut Arc::make_mut(h).allocated, &a.resources);
        }
        for v in slot.volumes.values() {
            if let Some(nv) = &v.new_volume {
                inv.volumes
                    .push(Arc::new(nv.to_persistent_volume(VolumePhase::Bound, None)));
            }
        }
        let rec = Recorded {
            request_id: "r-1".into(),
            state: "committed".into(),
            project: "default".into(),
            was: Outcome::placed(&chosen, &slot),
            own: Some((chosen.clone(), slot)),
            run_as: Vec::new(),
            request: req,
            quota_today: None,
            quota_tried: None,
        };
        (base, eff, rec, chosen)
    }

    fn federations(eff: &[Inventory], drain: Option<&str>) -> Federations {
        let views: Vec<View> = eff.iter().map(|i| View::new(i.cluster.clone(), i.clone())).collect();
        let today: Vec<Member> = (0..views.len()).map(|view| Member { view, drained: false }).collect();
        let changed = today
            .iter()
            .map(|m| Member {
                drained: Some(views[m.view].name.as_str()) == drain,
                ..*m
            })
            .collect();
        Federations {
            views,
            today,
            changed,
            changes: drain
                .map(|d| (d.to_string(), "drained".to_string()))
                .into_iter()
                .collect(),
            drains: Drains::new(),
        }
    }

    #[test]
    fn a_committed_decision_planned_on_an_unchanged_federation_stays_where_it_is() {
        let (_, eff, rec, chosen) = committed_federation();
        let r = run(
            &federations(&eff, None),
            std::slice::from_ref(&rec),
            2,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(
            (r.planned, r.changed, r.drift, r.placed_otherwise),
            (1, 0, 0, 0),
            "{r:#?}"
        );
        assert_eq!(
            r.decisions[0].would_be, rec.was,
            "the same provisioner, volume, zone and hosts"
        );
        assert_eq!(r.clusters[&chosen].stays, 1);
        // Without giving its own allocation and volume back, the same plan is not the one
        // recorded: its deterministic volume name is taken (by itself).
        let mut blind = rec.clone();
        blind.own = None;
        let r = run(&federations(&eff, None), &[blind], 1, &AtomicBool::new(false)).unwrap();
        assert!(r.decisions[0].would_be != rec.was, "{:#?}", r.decisions[0]);
    }

    #[test]
    fn draining_its_cluster_moves_it_where_a_plan_without_that_cluster_goes() {
        let (base, eff, rec, chosen) = committed_federation();
        let r = run(
            &federations(&eff, Some(&chosen)),
            std::slice::from_ref(&rec),
            2,
            &AtomicBool::new(false),
        )
        .unwrap();
        let others: Vec<Inventory> = base.iter().filter(|i| i.cluster != chosen).cloned().collect();
        let fresh = plan_locally(&others, &rec.request);
        let target = fresh.chosen_cluster.clone().unwrap();
        let d = &r.decisions[0];
        assert_eq!(d.transition, Transition::Moves);
        assert_eq!(d.would_be, Outcome::placed(&target, &fresh.clusters[&target]));
        assert_eq!((r.changed, r.drift, r.by_change), (1, 0, 1));
        assert_eq!(r.clusters[&chosen].moved_out, 1);
        assert_eq!(r.clusters[&chosen].change.as_deref(), Some("drained"));
        let t = &r.clusters[&target];
        assert_eq!(t.moved_in, 1);
        let mut need = Resources::default();
        for a in &fresh.clusters[&target].allocations {
            own::add_resources(&mut need, &a.resources);
        }
        assert_eq!(t.need, need);
        assert!(t.fits && need.cpu > 0, "{t:#?}");
        assert_eq!(r.clusters[&chosen].freed.cpu, need.cpu, "the same work leaves");
        assert_eq!(
            r.transitions,
            vec![TransitionCount {
                transition: Transition::Moves,
                from: Some(chosen.clone()),
                to: Some(target.clone()),
                decisions: 1
            }]
        );
        // Draining every cluster refuses it as a coordinator would (`clusters_drained`), naming
        // the drained clusters that could place it with their drains.
        let mut all = federations(&eff, None);
        for m in &mut all.changed {
            m.drained = true;
        }
        all.drains.insert(
            chosen.clone(),
            Drain {
                by: "ops".into(),
                at_ms: 0,
                reason: "disk swap".into(),
            },
        );
        let r = run(&all, std::slice::from_ref(&rec), 1, &AtomicBool::new(false)).unwrap();
        let refused = r.decisions[0].would_be.refused.clone().unwrap();
        assert_eq!(refused.code, codes::CLUSTERS_DRAINED);
        assert!(
            refused.message.contains(&format!("{chosen} (drained by ops at "))
                && refused.message.contains(": disk swap)")
                && refused.message.contains("(drained by this what-if)"),
            "{refused:?}"
        );
        assert_eq!(r.decisions[0].transition, Transition::PlacedToRefused);
    }

    #[test]
    fn a_drain_in_force_moves_work_in_todays_federation_too() {
        let (base, eff, rec, chosen) = committed_federation();
        let mut fed = federations(&eff, None);
        for m in fed.today.iter_mut().chain(fed.changed.iter_mut()) {
            m.drained = fed.views[m.view].name == chosen;
        }
        let r = run(&fed, std::slice::from_ref(&rec), 1, &AtomicBool::new(false)).unwrap();
        let others: Vec<Inventory> = base.iter().filter(|i| i.cluster != chosen).cloned().collect();
        let target = plan_locally(&others, &rec.request).chosen_cluster.unwrap();
        let d = &r.decisions[0];
        assert_eq!(d.would_be.cluster.as_deref(), Some(target.as_str()));
        assert!(d.drift, "today's state alone moves it: drift, not the change's doing");
        assert_eq!((r.changed, r.drift, r.by_change), (1, 1, 0), "{r:#?}");
    }

    #[test]
    fn a_stop_ends_the_run_without_a_report() {
        let (_, eff, rec, _) = committed_federation();
        assert!(run(&federations(&eff, None), &[rec], 1, &AtomicBool::new(true)).is_none());
    }

    #[test]
    fn a_volume_pick_keeps_provisioner_volume_and_action() {
        let (_, _, rec, _) = committed_federation();
        let (_, slot) = rec.own.as_ref().unwrap();
        let (key, v): (&String, &VolumeDecision) = slot.volumes.first().unwrap();
        let pick = &rec.was.volumes[key];
        assert_eq!(
            (&pick.provisioner, &pick.volume, pick.action),
            (&v.provisioner, &v.volume, v.action)
        );
    }
}
