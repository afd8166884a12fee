//! Tests of the state machine against a real redb file in a temporary directory.

use std::sync::{Arc, Mutex};

use fedvol_common::funnel::PlanRequest;
use fedvol_common::model::{Inventory, Workflow};
use fedvol_formats::{parse_inventory_str, parse_workflow_str};
use fedvol_proto::agent::{ActionMsg, PlanMsg};

use super::backend::Store;
use super::core::{Core, DriverResult, Next};
use super::ledger::Ledger;

/// A cluster with one zone of `hosts` hosts, each fitting exactly one 8-core job, a hostpath
/// scratch provisioner (Delete), a Retain NFS one, and an Available 10Gi claimable volume.
fn inventory(hosts: usize) -> Inventory {
    let mut text = String::from(
        "cluster: c1\nprovisioners:\n  scratch:\n    driver: {type: hostpath, path: /tmp/x}\n    ephemeral: all\n    create: all\n  keep:\n    driver: {type: nfs, target: 'nfs:/export'}\n    reclaimPolicy: Retain\n    create: all\nvolumes:\n  - {name: pv-10, provisioner: keep, size: 10Gi, accessModes: [ReadWriteOnce]}\nzones:\n  z1:\n    hosts:\n",
    );
    for i in 0..hosts {
        text.push_str(&format!(
            "      - {{name: h{i}, capacity: {{cpu: 8, memory: 32GiB, instances: 4}}}}\n"
        ));
    }
    parse_inventory_str("inv.yaml", &text, None).expect("inventory").value
}

fn workflow() -> Workflow {
    let text = "version: v4\nvolumes:\n  scratch:\n    size: 1GiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";
    parse_workflow_str("wf.yaml", "wf", text).expect("workflow").value
}

fn claim_workflow() -> Workflow {
    let text = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  storageClassName: keep\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 5Gi}}\n";
    parse_workflow_str("claim.yaml", "claim", text).expect("claim").value
}

fn msg(id: &str, wf: Workflow) -> PlanMsg {
    PlanMsg {
        request: PlanRequest::new(id, wf, "u").with_seed(1).with_trace_limit(10),
        deadline_ms: u64::MAX,
        reserve: true,
        ttl_ms: 10_000,
        summary: false,
        dry_run: false,
    }
}

fn open(dir: &std::path::Path, hosts: usize) -> Core {
    let (store, snap) = Store::open(&dir.join("state.redb")).expect("store");
    Core::new("c1", inventory(hosts), store, Ledger::from_snapshot(snap), 30_000)
}

/// A commit that carries its request (admission at commit), attempt 1.
fn with_request(id: &str) -> ActionMsg {
    ActionMsg {
        request: Some(msg(id, workflow()).request),
        attempt: 1,
        ..ActionMsg::new(id, 0)
    }
}

/// Commits a hold whose provisionings all succeed.
fn commit(core: &mut Core, id: &str) -> fedvol_proto::agent::ActionReply {
    let Next::Run(work) = core.begin_commit(&ActionMsg::new(id, 0), 1_000).expect("store") else {
        panic!("no work")
    };
    let results = work
        .into_iter()
        .map(|w| (w, DriverResult::Ok("/tmp/x/vol".into())))
        .collect();
    core.finish_commit(id, results, 1_000).expect("store")
}

#[test]
fn same_request_id_gives_the_same_answer_and_one_hold() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 3);
    let a = core.plan_and_hold(&msg("r1", workflow()), 1_000).unwrap();
    let b = core.plan_and_hold(&msg("r1", workflow()), 1_001).unwrap();
    assert_eq!(a, b);
    assert!(a.hold.is_some());
    assert_eq!(core.hold_count(), 1);
}

#[test]
fn two_hundred_racing_plans_for_ten_slots_get_exactly_ten_holds() {
    let dir = tempfile::tempdir().unwrap();
    let core = Arc::new(Mutex::new(open(dir.path(), 10)));
    let threads: Vec<_> = (0..200)
        .map(|i| {
            let core = core.clone();
            std::thread::spawn(move || {
                let reply = core
                    .lock()
                    .unwrap()
                    .plan_and_hold(&msg(&format!("r{i}"), workflow()), 1_000)
                    .unwrap();
                reply.hold.is_some()
            })
        })
        .collect();
    let granted = threads.into_iter().map(|t| t.join().unwrap()).filter(|g| *g).count();
    assert_eq!(granted, 10);
    let core = core.lock().unwrap();
    assert_eq!(core.hold_count(), 10);
    // Every host holds exactly one job: 8 of 8 cores.
    for (host, used) in core.status().host_use {
        assert_eq!(used.cpu, 8, "{host}");
    }
}

#[test]
fn a_lapsed_hold_frees_its_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    assert!(
        core.plan_and_hold(&msg("r1", workflow()), 1_000)
            .unwrap()
            .hold
            .is_some()
    );
    assert!(
        core.plan_and_hold(&msg("r2", workflow()), 1_000)
            .unwrap()
            .hold
            .is_none(),
        "host is full"
    );
    assert_eq!(core.sweep(1_000 + 10_000).unwrap(), vec!["r1".to_string()]);
    assert!(
        core.plan_and_hold(&msg("r3", workflow()), 20_000)
            .unwrap()
            .hold
            .is_some()
    );
    // A commit of the lapsed hold is refused.
    let Next::Answer(refused) = core.begin_commit(&ActionMsg::new("r1", 0), 20_000).unwrap() else {
        panic!("not refused")
    };
    assert_eq!(refused.error.unwrap().code.as_str(), "no_hold");
}

#[test]
fn commit_survives_a_restart_and_a_repeated_commit_does_not_double_book() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let mut core = open(dir.path(), 2);
        core.plan_and_hold(&msg("r1", workflow()), 1_000).unwrap();
        let reply = commit(&mut core, "r1");
        assert!(reply.ok, "{reply:?}");
        assert_eq!(reply.volumes[0].outcome, "provisioned");
        reply
    };
    // "kill -9": the Core is dropped without any shutdown step; reopen from the file.
    let mut core = open(dir.path(), 2);
    let Next::Answer(again) = core.begin_commit(&ActionMsg::new("r1", 0), 2_000).unwrap() else {
        panic!("no stored reply")
    };
    assert_eq!(*again, first);
    let status = core.status();
    assert_eq!(status.committed, vec!["r1".to_string()]);
    assert_eq!(
        status.host_use.values().map(|r| r.cpu).sum::<u64>(),
        8,
        "one job's capacity, once"
    );
    assert_eq!(status.volumes.len(), 1);
    let events: Vec<&str> = status.volumes[0].events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(events, ["Provisioning", "ProvisioningSucceeded", "Bound"]);
}

#[test]
fn a_failed_provisioning_keeps_the_hold_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    core.plan_and_hold(&msg("r1", workflow()), 1_000).unwrap();
    let Next::Run(work) = core.begin_commit(&ActionMsg::new("r1", 0), 1_000).unwrap() else {
        panic!("no work")
    };
    let results = work
        .into_iter()
        .map(|w| (w, DriverResult::Failed("disk full".into())))
        .collect();
    let reply = core.finish_commit("r1", results, 1_000).unwrap();
    assert!(!reply.ok);
    assert!(reply.error.unwrap().message.contains("disk full"));
    assert!(core.status().committed.is_empty());
    assert_eq!(core.hold_count(), 1);
    assert!(core.release("r1", 0, 1_000).unwrap().ok);
    assert_eq!(core.hold_count(), 0);
    assert!(core.release("r1", 0, 1_000).unwrap().ok, "release is idempotent");
}

#[test]
fn complete_applies_reclaim_policies_and_released_volumes_are_not_bound_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    // A claim binds the Retain volume pv-10.
    let p = core.plan_and_hold(&msg("c1", claim_workflow()), 1_000).unwrap();
    assert_eq!(p.decision.volumes["data"].volume.as_deref(), Some("pv-10"));
    assert!(commit(&mut core, "c1").ok);
    // An ephemeral scratch volume (Delete) for a workflow.
    core.plan_and_hold(&msg("w1", workflow()), 1_000).unwrap();
    assert!(commit(&mut core, "w1").ok);

    let Next::Run(work) = core.begin_complete("c1") else {
        panic!("no work")
    };
    assert!(work.is_empty(), "Retain: nothing to delete");
    let done = core.finish_complete("c1", vec![], 2_000).unwrap();
    assert_eq!(done.volumes[0].outcome, "retained");
    let Next::Run(work) = core.begin_complete("w1") else {
        panic!("no work")
    };
    assert_eq!(work.len(), 1, "Delete: the driver deletes the asset");
    let results = work
        .into_iter()
        .map(|w| (w, DriverResult::Ok("removed".into())))
        .collect();
    let done = core.finish_complete("w1", results, 2_000).unwrap();
    assert_eq!(done.volumes[0].outcome, "deleted");
    // Repeated complete: the stored answer.
    let Next::Answer(again) = core.begin_complete("w1") else {
        panic!("no stored reply")
    };
    assert_eq!(*again, done);
    // Capacity is free again; pv-10 stays Released and is not bound by a new claim.
    assert!(core.status().host_use.is_empty());
    let p = core.plan_and_hold(&msg("c2", claim_workflow()), 3_000).unwrap();
    assert_ne!(p.decision.volumes["data"].volume.as_deref(), Some("pv-10"));
}

/// Regression (found by the soak): completed commits and the records of their deleted
/// volumes were kept forever, in memory and in `status`, whose answer outgrew NATS's 1 MiB
/// payload limit after about 1 500 completed workflows (and every change got slower). Deleted
/// volumes are no longer listed, and completed commits are pruned after the retention.
#[test]
fn completed_commits_are_pruned_after_the_retention_and_status_stays_small() {
    use super::core::COMPLETED_RETENTION_MS;
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    // A claim binds the Retain volume pv-10 (left Released by its completion: still listed).
    core.plan_and_hold(&msg("keep", claim_workflow()), 1_000).unwrap();
    assert!(commit(&mut core, "keep").ok);
    let Next::Run(work) = core.begin_complete("keep") else {
        panic!("no work")
    };
    core.finish_complete(
        "keep",
        work.into_iter().map(|w| (w, DriverResult::Ok("x".into()))).collect(),
        2_000,
    )
    .unwrap();
    // Ten workflows, each with a scratch volume (Delete), committed and completed at 2 000 ms.
    for i in 0..10 {
        let id = format!("w{i}");
        core.plan_and_hold(&msg(&id, workflow()), 1_000).unwrap();
        assert!(commit(&mut core, &id).ok);
        let Next::Run(work) = core.begin_complete(&id) else {
            panic!("no work")
        };
        let results = work
            .into_iter()
            .map(|w| (w, DriverResult::Ok("removed".into())))
            .collect();
        assert!(core.finish_complete(&id, results, 2_000).unwrap().ok);
    }
    // One still running.
    core.plan_and_hold(&msg("live", workflow()), 1_000).unwrap();
    assert!(commit(&mut core, "live").ok);
    let st = core.status();
    assert_eq!(st.committed, ["live"]);
    let listed: Vec<&str> = st.volumes.iter().map(|v| v.phase.as_str()).collect();
    assert_eq!(
        listed.len(),
        2,
        "pv-10 (Released) and live's volume, not the deleted ones: {listed:?}"
    );

    // Within the retention a repeated complete gets the stored answer.
    core.sweep(2_000 + COMPLETED_RETENTION_MS - 1).unwrap();
    assert!(matches!(core.begin_complete("w3"), Next::Answer(r) if r.ok));
    // After it, the completed commits and their deleted volumes are gone, in memory and on
    // disk; the live commit and the Released volume stay. (The sweep looks for them at most
    // once per PRUNE_EVERY_MS.)
    core.sweep(2_000 + COMPLETED_RETENTION_MS - 1 + super::core::PRUNE_EVERY_MS)
        .unwrap();
    assert!(matches!(core.begin_complete("w3"), Next::Answer(r) if !r.ok));
    drop(core);
    let mut core = open(dir.path(), 1);
    assert!(matches!(core.begin_complete("w3"), Next::Answer(r) if !r.ok));
    let st = core.status();
    assert_eq!(st.committed, ["live"]);
    assert_eq!(st.volumes.len(), 2);
    assert_eq!(st.host_use.values().map(|r| r.cpu).sum::<u64>(), 8);
    // pv-10 is still Released: not bound again.
    let p = core.plan_and_hold(&msg("c2", claim_workflow()), 3_000).unwrap();
    assert_ne!(p.decision.volumes["data"].volume.as_deref(), Some("pv-10"));
}

/// Regression (found by the soak): a completed commit kept its whole decision (trace,
/// allocations) for the retention, ~20 KB per completed workflow; now only what a repeated
/// `complete` needs stays, in memory and on disk, and that repeat still gets the stored answer.
#[test]
fn a_completed_commit_keeps_a_small_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    let planned = core.plan_and_hold(&msg("small", workflow()), 1_000).unwrap();
    assert!(!planned.decision.trace.is_empty() && !planned.decision.allocations.is_empty());
    assert!(commit(&mut core, "small").ok);
    let Next::Run(work) = core.begin_complete("small") else {
        panic!("no work")
    };
    let done = core
        .finish_complete(
            "small",
            work.into_iter()
                .map(|w| (w, DriverResult::Ok("removed".into())))
                .collect(),
            2_000,
        )
        .unwrap();
    assert!(done.ok);
    assert!(matches!(core.begin_complete("small"), Next::Answer(r) if *r == done));
    drop(core);
    let (_store, snap) = Store::open(&dir.path().join("state.redb")).unwrap();
    let c = snap
        .commits
        .iter()
        .find(|c| c.request_id == "small")
        .expect("kept for the retention");
    assert!(c.completion.is_some());
    let kept = c.plan_reply.decode().unwrap();
    assert!(kept.decision.trace.is_empty(), "no trace kept");
    assert!(c.allocations.is_empty() && kept.decision.allocations.is_empty());
}

/// Admission at commit: a commit that carries its request and finds no hold plans
/// it on the current state and commits what it chose, in one step; when the capacity is gone it
/// is refused with the re-plan, `capacity_in_flight` while another request's commit holds it,
/// `no_longer_fits` once it is committed, and nothing changes.
#[test]
fn a_commit_with_its_request_plans_and_commits_on_the_current_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    // r1 is admitted: its hold is made `committing` at once.
    let Next::Run(work) = core.begin_commit(&with_request("r1"), 1_000).unwrap() else {
        panic!("r1 fits")
    };
    assert_eq!(core.hold_count(), 1);
    // While r1 commits, r2 is told to ask again: the capacity is promised, not committed.
    let Next::Answer(busy) = core.begin_commit(&with_request("r2"), 1_000).unwrap() else {
        panic!("r2 cannot fit now")
    };
    assert_eq!(
        busy.error.as_ref().unwrap().code.as_str(),
        "capacity_in_flight",
        "{busy:?}"
    );
    assert!(!busy.decision.as_ref().unwrap().feasible, "the re-plan comes back");
    let results = work
        .into_iter()
        .map(|w| (w, DriverResult::Ok("/tmp/x/v".into())))
        .collect();
    let done = core.finish_commit("r1", results, 1_000).unwrap();
    assert!(
        done.ok && done.decision.as_ref().is_some_and(|d| d.feasible),
        "{done:?}"
    );
    // Committed: now r2 no longer fits, for good.
    let Next::Answer(full) = core.begin_commit(&with_request("r2"), 1_000).unwrap() else {
        panic!("r2 cannot fit")
    };
    assert_eq!(full.error.unwrap().code.as_str(), "no_longer_fits");
    assert_eq!(core.status().committed, vec!["r1".to_string()]);
    assert_eq!(core.hold_count(), 0, "a refused admission holds nothing");
}

/// A release fences the attempts up to its number: a commit of a fenced attempt arriving late
/// never takes effect (the coordinator that settled it as released may have committed
/// elsewhere), while a later attempt may still commit.
#[test]
fn a_released_attempt_never_commits() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    let attempt = |n: u32| ActionMsg {
        request: Some(msg("r1", workflow()).request),
        attempt: n,
        ..ActionMsg::new("r1", 0)
    };
    assert!(core.release("r1", 1, 1_000).unwrap().ok, "an unknown request releases");
    let Next::Answer(fenced) = core.begin_commit(&attempt(1), 1_000).unwrap() else {
        panic!("attempt 1 was released")
    };
    assert_eq!(fenced.error.unwrap().code.as_str(), "released");
    assert_eq!(core.hold_count(), 0);
    assert!(matches!(core.begin_commit(&attempt(2), 1_000).unwrap(), Next::Run(_)));
    // Pruned with completed commits, after the retention.
    core.sweep(1_000 + super::core::COMPLETED_RETENTION_MS + 1).unwrap();
    assert!(core.released.is_empty());
}

#[test]
fn gauges_count_holds_commits_and_capacity_per_zone() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 3);
    let g = core.gauges();
    assert_eq!((g.holds, g.commits_in_flight, g.commits_live), (0, 0, 0));
    assert_eq!(g.inventory_version, core.inventory_version());
    assert_eq!(g.zones.len(), 1);
    assert_eq!(g.zones[0].zone, "z1");
    assert_eq!(g.zones[0].capacity.cpu, 24);
    assert_eq!(g.zones[0].capacity.instances, 12);
    assert_eq!(g.zones[0].in_use.cpu, 0);

    core.plan_and_hold(&msg("r1", workflow()), 1_000).unwrap();
    core.plan_and_hold(&msg("r2", workflow()), 1_000).unwrap();
    let g = core.gauges();
    assert_eq!(g.holds, 2);
    assert_eq!(g.zones[0].in_use.cpu, 16);
    assert_eq!(g.zones[0].in_use.memory.0, 16 * 1024 * 1024 * 1024);

    let Next::Run(work) = core.begin_commit(&ActionMsg::new("r1", 0), 1_000).unwrap() else {
        panic!("no work")
    };
    assert_eq!(core.gauges().commits_in_flight, 1, "between the mark and the record");
    let results = work
        .into_iter()
        .map(|w| (w, DriverResult::Ok("/tmp/x/vol".into())))
        .collect();
    core.finish_commit("r1", results, 1_000).unwrap();
    let g = core.gauges();
    assert_eq!((g.holds, g.commits_in_flight, g.commits_live), (1, 0, 1));
    assert_eq!(g.zones[0].in_use.cpu, 16, "the commit holds what its hold held");
}

/// A commit's batch jobs: a pending job's capacity is fedvol's to count; once it runs, Slurm's
/// allocation counts it (read with the inventory), so the commit's share leaves `in_use`, and
/// the states survive a restart from the file.
#[test]
fn a_started_job_leaves_its_capacity_to_slurm_and_its_state_is_durable() {
    use fedvol_proto::batch::{BatchJob, JobState};
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 1);
    core.plan_and_hold(&msg("r1", workflow()), 1_000).unwrap();
    commit(&mut core, "r1");
    let cpu = |core: &Core| core.gauges().zones.iter().map(|z| z.in_use.cpu).sum::<u64>();
    assert_eq!(cpu(&core), 8, "the committed job holds its 8 cores");
    let job = |state| BatchJob {
        job: "j".into(),
        id: "7".into(),
        state,
        exit_code: None,
        signal: None,
        reason: None,
        submitted_ms: 1,
        started_ms: None,
        ended_ms: None,
        user: None,
        output: None,
    };
    core.set_jobs("r1", vec![job(JobState::Pending)]).unwrap();
    assert_eq!(cpu(&core), 8, "pending: Slurm has allocated nothing yet");
    assert_eq!(core.followed().len(), 1);
    core.set_jobs("r1", vec![job(JobState::Running)]).unwrap();
    assert_eq!(cpu(&core), 0, "running: counted once, by Slurm");
    drop(core);
    let core = open(dir.path(), 1);
    let v = core.jobs_of("r1").expect("the commit");
    assert_eq!(v.jobs[0].state, JobState::Running);
    assert_eq!(cpu(&core), 0);
}

/// The prepared form plans reuse follows every change of the effective inventory (holds,
/// commits, releases, lapses, reloads): it equals preparing the effective inventory afresh, its
/// volume index covers the effective volumes (pending and provisioned ones included), and the
/// load heartbeats report is the effective inventory's. A plan after a release sees the freed
/// host.
#[test]
fn the_prepared_inventory_follows_holds_commits_releases_and_reloads() {
    use fedvol_common::funnel::{Prepared, cluster_load};
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 2);
    let in_step = |core: &Core, when: &str| {
        assert_eq!(*core.prepared, Prepared::new(&core.effective), "{when}");
        assert_eq!(core.load(), cluster_load(&core.effective), "{when}");
        assert!(
            core.prepared.volume_names(&core.effective).is_some(),
            "{when}: volume index"
        );
    };
    in_step(&core, "opened");
    assert!(
        core.plan_and_hold(&msg("r1", workflow()), 1_000)
            .unwrap()
            .hold
            .is_some()
    );
    in_step(&core, "one hold");
    assert!(commit(&mut core, "r1").ok);
    in_step(&core, "committed");
    assert!(
        core.plan_and_hold(&msg("r2", workflow()), 1_000)
            .unwrap()
            .hold
            .is_some()
    );
    in_step(&core, "two hosts held");
    assert_eq!(core.load(), 1.0, "both hosts' cores are held");
    assert!(
        core.plan_and_hold(&msg("r3", workflow()), 1_000)
            .unwrap()
            .hold
            .is_none(),
        "full"
    );
    assert!(core.release("r2", 0, 1_000).unwrap().ok);
    in_step(&core, "released");
    assert!(
        core.plan_and_hold(&msg("r3", workflow()), 1_000)
            .unwrap()
            .hold
            .is_some(),
        "freed"
    );
    assert_eq!(core.sweep(1_000 + 10_000).unwrap(), vec!["r3".to_string()]);
    in_step(&core, "lapsed");
    core.replace_inventory(inventory(3));
    in_step(&core, "reloaded with a third host");
    assert!(
        core.plan_and_hold(&msg("r4", workflow()), 20_000)
            .unwrap()
            .hold
            .is_some()
    );
    in_step(&core, "held after the reload");
}

/// Holds, commits, releases, completions and lapses at random, with a plan holding the last
/// snapshot now and then (the inventory is then built afresh, not edited): after each change
/// the effective inventory, its prepared form and the live state are those built afresh from
/// the ledger, and every host the ledger does not use is `base`'s own (what editing in place,
/// `Ledger::effective_patched`, relies on).
#[test]
fn the_effective_inventory_edited_in_place_is_the_one_built_afresh() {
    use fedvol_common::funnel::Prepared;
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 12);
    let mut next = draws(0x2545_f491_4f6c_dd1d);
    let mut snapshot = None;
    let (mut edited, mut fresh) = (0, 0);
    for step in 0..400u64 {
        let now = 1_000 + step * 100;
        // A plan in flight keeps the last snapshot, half of the time.
        snapshot = (next(2) == 0).then(|| core.snapshot());
        let was = Arc::as_ptr(&core.effective);
        let id = format!("r{}", next(16));
        let wf = if next(4) == 0 { claim_workflow() } else { workflow() };
        match next(5) {
            0 | 1 => {
                core.plan_and_hold(&msg(&id, wf), now).expect("store");
            }
            2 => {
                if let Next::Run(work) = core.begin_commit(&ActionMsg::new(&id, 0), now).expect("store") {
                    let results = work
                        .into_iter()
                        .map(|w| (w, DriverResult::Ok("/tmp/x/vol".into())))
                        .collect();
                    core.finish_commit(&id, results, now).expect("store");
                }
            }
            3 => {
                core.release(&id, 0, now).expect("store");
            }
            _ => {
                if let Next::Run(work) = core.begin_complete(&id) {
                    let results = work.into_iter().map(|w| (w, DriverResult::Ok("gone".into()))).collect();
                    core.finish_complete(&id, results, now).expect("store");
                }
                core.sweep(now).expect("store");
            }
        }
        if snapshot.is_none() && Arc::as_ptr(&core.effective) == was {
            edited += 1;
        } else {
            fresh += 1;
        }
        let (eff, state) = core.ledger.effective(&core.base, &core.index);
        assert_eq!(*core.effective, eff, "step {step}: the effective inventory");
        assert_eq!(*core.state, state, "step {step}: the live state");
        assert_eq!(*core.prepared, Prepared::new(&core.effective), "step {step}: prepared");
        // The volume index (with the managed volumes as a sorted run) finds what a walk finds.
        let names = core.prepared.volume_names(&core.effective).expect("the volume index");
        let walk = |p: &str, n: &str| {
            core.effective
                .volumes
                .iter()
                .find(|v| v.name == n && v.provisioner.as_deref() == Some(p))
                .map(Arc::as_ptr)
        };
        for v in core.effective.volumes.iter().chain(core.base.volumes.iter()) {
            for p in ["scratch", "keep"] {
                let found = names.find(&core.effective, p, &v.name).map(|v| v as *const _);
                assert_eq!(found, walk(p, &v.name), "step {step}: lookup of {p}/{}", v.name);
            }
        }
        let used = core.ledger.hosts_in_use(&core.index);
        for (zi, z) in core.effective.zones.iter().enumerate() {
            for (hi, h) in z.hosts.iter().enumerate() {
                if !used.contains(&(zi, hi)) {
                    assert!(
                        Arc::ptr_eq(h, &core.base.zones[zi].hosts[hi]),
                        "step {step}: host {zi}/{hi} is base's"
                    );
                }
            }
        }
    }
    drop(snapshot);
    assert!(
        edited > 50 && fresh > 50,
        "both ways were taken: {edited} edited, {fresh} fresh"
    );
}

/// The volumes the agent's commits made run sorted after the inventory's own, and a plan's
/// name lookup searches them by halves (`Prepared::refreshed_sorted`): after every commit and
/// completion, made in an order their names do not sort in, every lookup finds what a walk
/// over the inventory finds.
#[test]
fn name_lookups_search_the_volumes_commits_made_and_find_what_a_walk_finds() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 60);
    let check = |core: &Core, when: &str| {
        let names = core.prepared.volume_names(&core.effective).expect("the volume index");
        // Every live volume the commits made (the inventory has none of them) is in the run.
        let live = core.ledger.volumes().values().filter(|mv| !mv.deleted).count();
        assert_eq!(
            names.indexed(),
            core.base.volumes.len(),
            "{when}: the inventory's own indexed"
        );
        assert_eq!(names.run_end() - names.indexed(), live, "{when}: the run");
        assert_eq!(
            names.run_end(),
            core.effective.volumes.len() - core.ledger.holds().len(),
            "{when}: the run ends where the holds' pending volumes begin"
        );
        let asked: Vec<String> = core
            .effective
            .volumes
            .iter()
            .map(|v| v.name.clone())
            .chain(["none".to_string(), "c1-zz-scratch".to_string()])
            .collect();
        for n in &asked {
            for p in ["scratch", "keep", "other"] {
                let walk = core
                    .effective
                    .volumes
                    .iter()
                    .find(|v| &v.name == n && v.provisioner.as_deref() == Some(p))
                    .map(Arc::as_ptr);
                let found = names.find(&core.effective, p, n).map(|v| v as *const _);
                assert_eq!(found, walk, "{when}: {p}/{n}");
            }
        }
    };
    for i in 0..40u64 {
        let id = format!("r{:02}", (i * 17) % 40);
        let Next::Run(work) = core.begin_commit(&with_request(&id), 1_000).unwrap() else {
            panic!("{id} refused")
        };
        let results = work
            .into_iter()
            .map(|w| (w, DriverResult::Ok("/tmp/x/vol".into())))
            .collect();
        core.finish_commit(&id, results, 1_000).unwrap();
        check(&core, &format!("commit {id}"));
        if i % 5 == 4 {
            let done = format!("r{:02}", (i * 3) % 40);
            if let Next::Run(work) = core.begin_complete(&done) {
                let results = work.into_iter().map(|w| (w, DriverResult::Ok("gone".into()))).collect();
                core.finish_complete(&done, results, 1_000).unwrap();
            }
            check(&core, &format!("complete {done}"));
        }
    }
    let names = core.prepared.volume_names(&core.effective).unwrap();
    assert!(
        names.run_end() - names.indexed() > 20,
        "the run holds the commits' volumes"
    );
}

/// Admission at commit takes the plan kept for the request when nothing plans read changed
/// since it was planned (the same inputs decide the same), and plans again otherwise: a plan
/// kept before another request's hold is not used.
#[test]
fn admission_at_commit_takes_the_plan_kept_on_the_same_state_only() {
    use crate::state::core::plan_with;
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 4);
    let held_decision = |core: &Core, id: &str| core.ledger.holds()[id].reply.decision.clone();
    // A plan as the plan endpoint makes it, on the snapshot, kept at its generation; marked,
    // so that the test can tell it from a plan made again.
    let keep_marked = |core: &mut Core, id: &str| {
        let req = msg(id, workflow()).request;
        let (inv, prepared, state) = core.snapshot_for(id);
        let mut d = plan_with(None, &inv, &prepared, &state, &req);
        let fresh = d.clone();
        d.elapsed_ms = 42.0;
        let generation = core.generation();
        core.keep_plan(&req, generation, &d, 0);
        fresh
    };

    let fresh = keep_marked(&mut core, "r1");
    assert!(matches!(
        core.begin_commit(&with_request("r1"), 1_000).unwrap(),
        Next::Run(_)
    ));
    let mut held = held_decision(&core, "r1");
    assert_eq!(held.elapsed_ms, 42.0, "the kept plan was taken");
    held.elapsed_ms = fresh.elapsed_ms;
    assert_eq!(held, fresh, "and it is the decision planning again gives");

    // r2 is planned, then r1's hold changes what plans read: r2 is planned again.
    keep_marked(&mut core, "r2");
    core.plan_and_hold(&msg("r3", workflow()), 1_000).unwrap();
    assert!(matches!(
        core.begin_commit(&with_request("r2"), 1_000).unwrap(),
        Next::Run(_)
    ));
    assert_eq!(
        held_decision(&core, "r2").elapsed_ms,
        0.0,
        "planned again, not the kept plan"
    );
    assert!(core.kept.is_empty(), "the stale plan was dropped");
}

/// A plan answered while another request's commit runs is not kept: that commit changes what
/// plans read when it ends, so the copy would almost never be taken (copying and dropping every
/// answer was 9% of an agent's CPU under a stream of submits). Once no commit runs, plans are
/// kept again.
#[test]
fn no_plan_is_kept_while_a_commit_runs() {
    use crate::state::core::plan_with;
    let dir = tempfile::tempdir().unwrap();
    let mut core = open(dir.path(), 4);
    let keep = |core: &mut Core, id: &str| {
        let req = msg(id, workflow()).request;
        let (inv, prepared, state) = core.snapshot_for(id);
        let d = plan_with(None, &inv, &prepared, &state, &req);
        let generation = core.generation();
        core.keep_plan(&req, generation, &d, 0);
    };
    let Next::Run(work) = core.begin_commit(&with_request("r1"), 1_000).unwrap() else {
        panic!("r1's commit starts");
    };
    keep(&mut core, "r2");
    assert!(core.kept.is_empty(), "not kept while r1's commit runs");
    let results = work.into_iter().map(|w| (w, DriverResult::Ok("/x".into()))).collect();
    core.finish_commit("r1", results, 1_001).unwrap();
    keep(&mut core, "r3");
    assert_eq!(core.kept.len(), 1, "kept once no commit runs");
}

/// A seeded draw in `0..n` (xorshift64), for the randomized tests of this module and
/// `merged`'s: the same seed gives the same steps on every run.
pub(super) fn draws(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
