//! What a what-if takes from the coordinator's world (docs/design.md §2.7): a stored record
//! read as a [`Recorded`] decision (what it was, its live commit, the identity verdicts its
//! clusters recorded), and the two [`Federations`] (today's, and with the changes) built from
//! the agents' `inventory` answers. No I/O: `ops::what_if` fetches, this reads.

use fedvol_common::decision::ClusterDecision;
use fedvol_common::funnel::RunAs;
use fedvol_common::funnel::identity::STAGE as IDENTITY_STAGE;
use fedvol_common::whatif::{Federations, Member, Outcome, Recorded, View, codes};
use fedvol_proto::agent::InventoryReply;
use fedvol_proto::coordinator::{WhatIfChanges, WhatIfCluster};
use fedvol_proto::decisions::{DecisionState, FailureKind, StoredDecision};

/// The project of a workflow that names none.
pub const DEFAULT_PROJECT: &str = "default";

/// True when `stored` holds a live commit: `committed`, or `planned` with an attempt that
/// committed (its coordinator has not stored the outcome yet).
pub fn live(stored: &StoredDecision) -> bool {
    match stored.state {
        DecisionState::Committed => true,
        DecisionState::Planned => stored.attempts.iter().any(|a| a.ok),
        _ => false,
    }
}

/// True when the record says its work was placed on its chosen cluster: live, ended there
/// (`completed`, `cancelled`), failed by a job after its commit, or `planned` there (a kept dry
/// run, or one whose commit is under way).
fn was_placed(stored: &StoredDecision) -> bool {
    match stored.state {
        DecisionState::Completed | DecisionState::Cancelled | DecisionState::Committed | DecisionState::Planned => true,
        DecisionState::Failed => stored.failure() == Some(FailureKind::JobFailed),
        DecisionState::Queued => false,
    }
}

/// What `stored` was (docs/design.md §2.7): placed on its chosen cluster with that cluster's
/// picks, or refused with the record's reason: `queued`, its `refused` code, or its failure's
/// kind (`nothing_fits`, `commit_failed`...).
pub fn was(stored: &StoredDecision) -> Outcome {
    let d = &stored.decision;
    if was_placed(stored)
        && let Some(c) = &d.chosen_cluster
        && let Some(slot) = d.clusters.get(c)
    {
        return Outcome::placed(c, slot);
    }
    if stored.state == DecisionState::Queued {
        let why = d.refused.as_ref().map_or("waiting for capacity".to_string(), |r| {
            format!("waiting for capacity: {}", r.message)
        });
        return Outcome::refused(codes::QUEUED, why);
    }
    if let Some(r) = &d.refused {
        return Outcome::refused(&r.code, r.message.clone());
    }
    let kind = stored.failure().unwrap_or(FailureKind::NothingFits);
    if kind == FailureKind::NothingFits {
        // Said from its clusters' answers as a what-if says it of its own plans.
        return Outcome::unplaced(&d.clusters);
    }
    let summary = fedvol_proto::coordinator::DecisionSummary::of(d.request_id.clone(), stored);
    let message = summary
        .reason
        .unwrap_or_else(|| "no cluster could place it".to_string());
    Outcome::refused(kind.as_str(), message)
}

/// The `identity.user` verdict cluster slot `c` recorded for `user`, if it ran the stage: mapped
/// when the stage passed the user, unmapped (with the reason the slot gives) when it did not.
fn run_as(c: &ClusterDecision) -> Option<RunAs> {
    let stage = c.trace.iter().find(|t| t.stage == IDENTITY_STAGE)?;
    if stage.passed > 0 {
        return Some(RunAs::Account(String::new()));
    }
    let why = stage
        .rejected
        .iter()
        .flat_map(|r| &r.reasons)
        .map(|r| r.message.clone())
        .next()
        .or_else(|| {
            c.jobs
                .values()
                .find_map(|j| j.error.as_ref().map(|e| e.message.clone()))
        })
        .unwrap_or_else(|| "the user maps to no account on this cluster".to_string());
    Some(RunAs::Unmapped(why))
}

/// `stored` (kept under `request_id`) as a what-if takes it.
pub fn recorded(request_id: &str, stored: &StoredDecision) -> Recorded {
    let d = &stored.decision;
    let own = live(stored)
        .then(|| {
            let c = d.chosen_cluster.as_ref()?;
            Some((c.clone(), d.clusters.get(c)?.clone()))
        })
        .flatten();
    let mut request = stored.request.clone();
    request.seed = d.seed;
    Recorded {
        request_id: request_id.to_string(),
        state: stored.state.as_str().to_string(),
        project: project_of(stored).to_string(),
        was: was(stored),
        own,
        run_as: d
            .clusters
            .iter()
            .filter_map(|(name, c)| run_as(c).map(|r| (name.clone(), r)))
            .collect(),
        request,
        quota_today: None,
        quota_tried: None,
    }
}

/// A stored record read for a what-if, from its bytes in the bucket: the request, the state,
/// the attempts, and of the decision's cluster slots only those a what-if reads: the chosen
/// cluster's, those that recorded an `identity.user` stage, and every one when no cluster was
/// chosen (the reasons of a refusal). The other slots (kept whole, 8 KB each at 100 hosts, or
/// summarized) and the choice's steps are skipped unread, which makes reading 10,000 records
/// of 16 clusters about four times faster than decoding them whole.
///
/// Errors: not a stored decision of this protocol version (the message says why).
pub fn read_record(bytes: &[u8]) -> Result<StoredDecision, String> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Slim<'a> {
        v: u32,
        state: DecisionState,
        #[serde(borrow)]
        decision: SlimDecision<'a>,
        request: fedvol_common::funnel::PlanRequest,
        #[serde(default)]
        attempts: Vec<fedvol_proto::decisions::CommitAttempt>,
        #[serde(default)]
        updated_ms: u64,
        #[serde(default)]
        dry_run: bool,
        #[serde(default)]
        run_failure: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct SlimDecision<'a> {
        request_id: String,
        workflow: String,
        seed: u64,
        #[serde(default)]
        chosen_cluster: Option<String>,
        #[serde(borrow, default)]
        clusters: indexmap::IndexMap<String, &'a RawValue>,
        #[serde(default)]
        refused: Option<fedvol_common::decision::Reason>,
    }
    let slim: Slim = serde_json::from_slice(bytes).map_err(|e| format!("not a stored decision: {e}"))?;
    if slim.v != fedvol_proto::VERSION {
        return Err(format!(
            "a stored decision of protocol version {}, not {}",
            slim.v,
            fedvol_proto::VERSION
        ));
    }
    let d = slim.decision;
    let every = d.chosen_cluster.is_none();
    let mut clusters = indexmap::IndexMap::new();
    for (name, raw) in &d.clusters {
        let wanted = every || d.chosen_cluster.as_deref() == Some(name.as_str()) || raw.get().contains(IDENTITY_STAGE);
        if wanted {
            let slot: ClusterDecision =
                serde_json::from_str(raw.get()).map_err(|e| format!("cluster `{name}`'s answer: {e}"))?;
            clusters.insert(name.clone(), slot);
        }
    }
    Ok(StoredDecision {
        state: slim.state,
        decision: fedvol_common::decision::Decision {
            request_id: d.request_id,
            workflow: d.workflow,
            seed: d.seed,
            chosen_cluster: d.chosen_cluster,
            clusters,
            choice: Vec::new(),
            quota: Vec::new(),
            refused: d.refused,
            drained: Default::default(),
        },
        request: slim.request,
        attempts: slim.attempts,
        completion: None,
        updated_ms: slim.updated_ms,
        dry_run: slim.dry_run,
        request_digest: None,
        priority_class: None,
        priority: 0,
        wait_for_capacity: false,
        queued_ms: None,
        run_failure: slim.run_failure,
        completing: None,
    })
}

/// The workflow's project, [`DEFAULT_PROJECT`] when it names none.
pub fn project_of(stored: &StoredDecision) -> &str {
    stored.request.workflow.project.as_deref().unwrap_or(DEFAULT_PROJECT)
}

/// A change naming a cluster this coordinator does not know (or, for `add`, one it knows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownCluster(pub String);

/// The federations of a what-if: `asked` is every known cluster in the order a plan asks
/// them, each with its agent's `inventory` answer or why there is none; `changes` as the request
/// gives them; `in_force` the operators' drains in force (by cluster): those clusters are
/// drained in both federations, as a coordinator's choice drops them today. A cluster that did
/// not answer is planned in neither (its note says so). Returns them, the clusters with their
/// notes, and the changes in words.
///
/// Errors: a change naming a cluster not in `asked` (or `add` of one in it), naming the known
/// ones.
pub fn federations(
    asked: &[(String, Result<InventoryReply, String>)],
    changes: &WhatIfChanges,
    in_force: &fedvol_common::drain::Drains,
) -> Result<(Federations, Vec<WhatIfCluster>, Vec<String>), UnknownCluster> {
    let known: Vec<&str> = asked.iter().map(|(n, _)| n.as_str()).collect();
    let unknown = |kind: &str, name: &str| {
        UnknownCluster(format!(
            "{kind}: no cluster named `{name}` is known (known: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
    };
    for (kind, name) in changes
        .drain
        .iter()
        .map(|n| ("drain", n.as_str()))
        .chain(changes.remove.iter().map(|n| ("remove", n.as_str())))
        .chain(changes.inventories.iter().map(|i| ("inventory", i.cluster.as_str())))
    {
        if !known.contains(&name) {
            return Err(unknown(kind, name));
        }
    }
    if let Some(a) = changes.add.iter().find(|a| known.contains(&a.cluster.as_str())) {
        return Err(UnknownCluster(format!(
            "add: cluster `{}` is known already (replace its inventory with an inventory change instead)",
            a.cluster
        )));
    }
    let mut fed = Federations {
        drains: in_force.clone(),
        ..Federations::default()
    };
    let mut clusters = Vec::new();
    let mut words = Vec::new();
    for (name, answer) in asked {
        let reply = match answer {
            Ok(r) => r,
            Err(why) => {
                clusters.push(WhatIfCluster {
                    name: name.clone(),
                    inventory_version: String::new(),
                    note: Some(format!("not planned on: its agent did not answer ({why})")),
                });
                continue;
            }
        };
        let mut note = reply.cut.as_ref().map(|cut| {
            format!(
                "its inventory was cut to fit max_payload ({} of {} persistent volumes seen): answers there may differ",
                reply.inventory.volumes.len(),
                cut.volumes
            )
        });
        let drain_in_force = in_force.get(name);
        if let Some(d) = drain_in_force {
            let n = format!("{} (today and with the changes: never chosen)", d.describe());
            note = Some(note.map_or(n.clone(), |o| format!("{o}; {n}")));
        }
        let today = fed.views.len();
        fed.views.push(View::new(name.clone(), reply.inventory.clone()));
        fed.today.push(Member {
            view: today,
            drained: drain_in_force.is_some(),
        });
        if changes.remove.contains(name) {
            fed.changes.insert(name.clone(), "removed".into());
            words.push(format!("remove {name}"));
        } else {
            let mut view = today;
            if let Some(given) = changes.inventories.iter().find(|i| i.cluster == *name) {
                let managed: Vec<(Option<String>, String)> = reply
                    .status
                    .volumes
                    .iter()
                    .map(|v| (v.provisioner.clone(), v.name.clone()))
                    .collect();
                let (inv, homeless) =
                    fedvol_common::whatif::own::replaced(given, &reply.inventory, &reply.status.host_use, &managed);
                if homeless != Default::default() {
                    let n = format!(
                        "the new inventory lacks hosts fedvol's commits hold {} cores and {} of memory on: not counted",
                        homeless.cpu, homeless.memory
                    );
                    note = Some(note.map_or(n.clone(), |o| format!("{o}; {n}")));
                }
                view = fed.views.len();
                fed.views.push(View::new(name.clone(), inv));
                fed.changes.insert(name.clone(), "inventory replaced".into());
                words.push(format!("inventory of {name} replaced (version {})", given.version));
            }
            let drained = changes.drain.contains(name) && drain_in_force.is_none();
            if drained {
                let c = fed.changes.entry(name.clone()).or_default();
                *c = if c.is_empty() {
                    "drained".into()
                } else {
                    format!("{c}, drained")
                };
                words.push(format!("drain {name}"));
            }
            if let (true, Some(d)) = (changes.drain.contains(name), drain_in_force) {
                words.push(format!("drain {name}: no change, {}", d.describe()));
            }
            fed.changed.push(Member {
                view,
                drained: drained || drain_in_force.is_some(),
            });
        }
        clusters.push(WhatIfCluster {
            name: name.clone(),
            inventory_version: reply.inventory.version.clone(),
            note,
        });
    }
    for added in &changes.add {
        let view = fed.views.len();
        fed.views.push(View::new(added.cluster.clone(), added.clone()));
        fed.changed.push(Member { view, drained: false });
        fed.changes.insert(added.cluster.clone(), "added".into());
        words.push(format!("add {} (version {})", added.cluster, added.version));
    }
    // Changes naming a cluster that did not answer still say what they asked.
    for name in changes.drain.iter().chain(&changes.remove) {
        if !fed.changes.contains_key(name) {
            fed.changes
                .insert(name.clone(), "not planned on: did not answer".into());
        }
    }
    Ok((fed, clusters, words))
}

#[cfg(test)]
pub(crate) mod tests {
    use fedvol_common::funnel::PlanRequest;
    use fedvol_common::synth::{self, SynthSizes};
    use fedvol_proto::agent::InventoryCut;
    use fedvol_proto::decisions::CommitAttempt;

    use super::*;

    /// A decision of request `r1` on two clusters planned for alice, in `state`.
    pub(crate) fn stored(state: DecisionState) -> StoredDecision {
        let sizes = SynthSizes {
            hosts: 6,
            provisioners: 2,
            volumes: 2,
        };
        let inventories = [synth::cluster("a", sizes), synth::cluster("b", sizes)];
        let request = PlanRequest::new("r1", synth::workflow(1, 1), "alice").with_seed(7);
        let decision = fedvol_common::offline::plan_locally(&inventories, &request);
        StoredDecision {
            priority_class: None,
            priority: 0,
            wait_for_capacity: false,
            queued_ms: None,
            completing: None,
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
    fn what_a_record_was_follows_its_state() {
        let s = stored(DecisionState::Committed);
        let chosen = s.decision.chosen_cluster.clone().unwrap();
        let r = recorded("r1", &s);
        assert_eq!(r.was.cluster.as_deref(), Some(chosen.as_str()));
        assert_eq!(
            r.own.as_ref().map(|(c, _)| c.as_str()),
            Some(chosen.as_str()),
            "a live commit"
        );
        assert_eq!(r.project, DEFAULT_PROJECT);
        assert_eq!(r.request.seed, s.decision.seed);

        let r = recorded("r1", &stored(DecisionState::Completed));
        assert!(
            r.was.cluster.is_some() && r.own.is_none(),
            "ended: placed, nothing held"
        );

        let r = recorded("r1", &stored(DecisionState::Queued));
        assert_eq!(r.was.refused.unwrap().code, codes::QUEUED);

        // Failed with a commit that failed: refused, with the failure's kind.
        let mut f = stored(DecisionState::Failed);
        f.decision.chosen_cluster = None;
        f.attempts.push(CommitAttempt {
            cluster: "a".into(),
            attempt: 1,
            pending: false,
            ok: false,
            error: Some(fedvol_proto::Code::ProvisioningFailed.error("disk")),
            volumes: vec![],
            jobs: vec![],
        });
        assert_eq!(recorded("r1", &f).was.refused.unwrap().code, "commit_failed");
        // Failed by a job after its commit: it was placed.
        let mut j = stored(DecisionState::Failed);
        j.run_failure = Some("job j exited 1".into());
        assert!(recorded("r1", &j).was.cluster.is_some());
    }

    /// Reading a record for a what-if skips the slots it does not read, and gives the same
    /// [`Recorded`] as the whole record.
    #[test]
    fn a_record_read_slim_is_recorded_as_the_whole_one() {
        for state in [
            DecisionState::Committed,
            DecisionState::Completed,
            DecisionState::Queued,
        ] {
            let s = stored(state);
            let bytes = fedvol_proto::encode(&s);
            let slim = read_record(&bytes).unwrap();
            assert_eq!(slim.decision.clusters.len(), 1, "only the chosen cluster's slot");
            let (a, b) = (recorded("r1", &s), recorded("r1", &slim));
            assert_eq!(
                (a.was, a.own.map(|o| o.0), a.request),
                (b.was, b.own.map(|o| o.0), b.request)
            );
        }
        let mut none = stored(DecisionState::Failed);
        none.decision.chosen_cluster = None;
        let slim = read_record(&fedvol_proto::encode(&none)).unwrap();
        assert_eq!(
            slim.decision.clusters.len(),
            2,
            "every slot says why nothing was chosen"
        );
        assert_eq!(recorded("r1", &slim).was, recorded("r1", &none).was);
        let mut other = serde_json::to_value(&none).unwrap();
        other["v"] = 2.into();
        let e = read_record(&serde_json::to_vec(&other).unwrap()).unwrap_err();
        assert!(e.contains("protocol version 2"), "{e}");
        assert!(read_record(b"[]").is_err());
    }

    #[test]
    fn changes_must_name_known_clusters_and_build_both_federations() {
        let reply = |name: &str| {
            let inventory = synth::cluster(
                name,
                SynthSizes {
                    hosts: 4,
                    provisioners: 1,
                    volumes: 1,
                },
            );
            InventoryReply {
                cluster: name.into(),
                status: fedvol_proto::agent::StatusReply {
                    cluster: name.into(),
                    inventory_version: inventory.version.clone(),
                    holds: vec![],
                    committed: vec![],
                    volumes: vec![],
                    host_use: Default::default(),
                    load: 0.0,
                    source: None,
                },
                inventory,
                cut: None,
            }
        };
        let mut cut = reply("b");
        cut.cut = Some(InventoryCut {
            volumes: 10,
            ..InventoryCut::default()
        });
        let asked = vec![
            ("a".to_string(), Ok(reply("a"))),
            ("b".to_string(), Ok(cut)),
            ("c".to_string(), Err("timed out".to_string())),
        ];
        let e = federations(
            &asked,
            &WhatIfChanges {
                drain: vec!["z".into()],
                ..Default::default()
            },
            &Default::default(),
        )
        .unwrap_err();
        assert_eq!(e.0, "drain: no cluster named `z` is known (known: a, b, c)");
        let mut added = reply("d").inventory;
        added.cluster = "d".into();
        let (fed, clusters, words) = federations(
            &asked,
            &WhatIfChanges {
                drain: vec!["a".into()],
                remove: vec!["b".into()],
                add: vec![added],
                ..Default::default()
            },
            &Default::default(),
        )
        .unwrap();
        assert_eq!(
            fed.today.len(),
            2,
            "the cluster that did not answer is planned in neither"
        );
        assert_eq!(fed.changed.len(), 2, "a (drained) and d (added); b removed");
        assert!(fed.changed[0].drained);
        let add = format!("add d (version {})", fed.views[2].inventory.version);
        assert_eq!(words, ["drain a", "remove b", add.as_str()]);
        assert!(
            clusters[1]
                .note
                .as_deref()
                .unwrap()
                .contains("cut to fit max_payload (1 of 10")
        );
        assert!(
            clusters[2]
                .note
                .as_deref()
                .unwrap()
                .contains("did not answer (timed out)")
        );
    }
}
