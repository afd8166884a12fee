//! Agent replicas on the existing engine: two `fedvol-agent` processes of one
//! cluster with `--state-store jetstream` share its state through a JetStream stream; the one
//! holding the cluster's lease serves, the other stands by. Against real processes:
//!
//! - racing submits through the active replica never over-commit, and kill -9 of it loses
//!   nothing acknowledged: the standby takes over (within a bound printed here) with every
//!   commit, and serves;
//! - a replica frozen (SIGSTOP) past its lease is replaced; woken up, it cannot write (the
//!   stream refuses its appends: fenced) and steps down, so the two never book the same
//!   capacity.
//!
//! Under the shipped `single.conf`: an agent may use its own cluster's state stream
//! (`FEDVOL_STATE_<cluster>`) and its own key of the lease bucket (`fedvol_agent_leases`), and
//! each test ends with no permission violation in the server's log.

use std::time::{Duration, Instant};

use fedvol_proto::coordinator::{self as api, SubmitReply};
use fedvol_proto::decisions::DecisionState;
use fedvol_tests::checker::{check, fetch_status, observe};
use fedvol_tests::faultkit::coordinator_on;
use fedvol_tests::federation::slots_inventory;
use fedvol_tests::load::{Acked, coordinator_op, small_workflow, submit_msg};
use fedvol_tests::{NatsServer, Spawned, wait_until};
use nix::sys::signal::Signal;

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const HEARTBEAT_MS: u64 = 200;

/// A replica of cluster `r` (`hosts` one-job slots) on the inventory written in `dir`, its
/// state in the cluster's JetStream stream. Not waited for: a standby never gets ready.
fn replica(nats: &NatsServer, dir: &std::path::Path, hosts: usize) -> Spawned {
    let inv = dir.join("inventory.yaml");
    if !inv.exists() {
        std::fs::write(&inv, slots_inventory("r", hosts, dir, "all")).unwrap();
    }
    Spawned::bin(
        "fedvol-agent",
        [
            "--inventory",
            &inv.display().to_string(),
            "--nats",
            &nats.url(),
            "--state-store",
            "jetstream",
            "--heartbeat-ms",
            &HEARTBEAT_MS.to_string(),
            "--data-dir",
            &dir.join("unused").display().to_string(),
        ],
    )
}

/// Submits `n` requests at once (ids `<prefix>-<i>`); returns the committed ids.
async fn burst(client: &async_nats::Client, prefix: &str, n: usize) -> Vec<String> {
    let wf = small_workflow("rep", 8);
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            let mut msg = submit_msg(&format!("{prefix}-{i}"), &wf, false);
            msg.timeout_ms = 3000;
            tokio::spawn(async move {
                let r: SubmitReply =
                    coordinator_op::<api::Submit>(&client, &format!("user{}", i % 4), &msg, Duration::from_secs(60))
                        .await
                        .unwrap();
                r
            })
        })
        .collect();
    let mut committed = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        let s = r.stored.unwrap_or_else(|| panic!("a decision: {:?}", r.error));
        if s.state == DecisionState::Committed {
            committed.push(s.decision.request_id);
        }
    }
    committed
}

/// Checks every acknowledged commit against the serving replica's state: nothing lost, nothing
/// over-committed.
async fn assert_consistent(client: &async_nats::Client, dir: &std::path::Path, acked: &[String]) {
    let acked: std::collections::BTreeMap<String, Acked> = acked
        .iter()
        .map(|id| {
            (
                id.clone(),
                Acked {
                    cluster: "r".into(),
                    completed: false,
                },
            )
        })
        .collect();
    let obs = observe(
        client,
        &[("r".to_string(), dir.join("inventory.yaml"))],
        acked.keys().cloned(),
        &acked,
        false,
    )
    .await
    .unwrap();
    let report = check(&obs);
    eprintln!("checker: {report}");
    report.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_over_commit_and_kill_9_of_the_active_loses_nothing() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut first = replica(&nats, dir.path(), 10);
    first.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    let mut second = replica(&nats, dir.path(), 10);
    second
        .wait_for_log("standby: another replica serves this cluster", Duration::from_secs(30))
        .await;
    let _coord = coordinator_on(&nats.url(), &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let client = nats.client().await;

    // 25 racing submits for 10 slots, then kill -9 of the active replica right away.
    let committed = burst(&client, "a", 25).await;
    assert!(!committed.is_empty() && committed.len() <= 10, "{committed:?}");
    let killed = Instant::now();
    first.kill();
    second.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    let resumed = killed.elapsed();
    eprintln!(
        "the standby serves {:.2} s after kill -9 of the active replica (heartbeat {HEARTBEAT_MS} ms, lease {} ms)",
        resumed.as_secs_f64(),
        3 * HEARTBEAT_MS
    );
    assert!(
        second.log().contains("lease taken: this replica serves the cluster"),
        "{}",
        second.log()
    );
    // Everything acknowledged is there, and nothing is over-committed.
    let st = fetch_status(&client, "r").await.unwrap();
    let mut theirs = st.committed.clone();
    theirs.sort();
    let mut mine = committed.clone();
    mine.sort();
    assert_eq!(theirs, mine, "the new active replica has every acknowledged commit");
    // The rest of the capacity is still there, once.
    let more = burst(&client, "b", 25).await;
    assert_eq!(committed.len() + more.len(), 10, "{committed:?} + {more:?}");
    let all: Vec<String> = committed.into_iter().chain(more).collect();
    assert_consistent(&client, dir.path(), &all).await;
    assert_eq!(
        nats.violations(),
        Vec::<String>::new(),
        "the shipped permissions refused something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_active_replica_is_replaced_and_steps_down_when_it_wakes() {
    let _serial = SERIAL.lock().await;
    // A frozen process keeps its connection, and its subscriptions get requests, until the
    // server finds it stale: pings every second, two missed (docs/agent.md, "Replicas").
    let nats = NatsServer::shipped_with(
        fedvol_tests::shipped::Shipped::Single,
        "ping_interval: \"1s\"\nping_max: 2",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut first = replica(&nats, dir.path(), 6);
    first.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    let mut second = replica(&nats, dir.path(), 6);
    second
        .wait_for_log("standby: another replica serves this cluster", Duration::from_secs(30))
        .await;
    let _coord = coordinator_on(&nats.url(), &["--deadline-ms", "1500", "--discovery-ms", "300"]).await;
    let client = nats.client().await;
    let mut acked = burst(&client, "a", 3).await;
    assert_eq!(acked.len(), 3);

    // Frozen past its lease: the standby takes over with everything acknowledged, and commits.
    first.signal(Signal::SIGSTOP);
    second.wait_for_log("endpoints ready", Duration::from_secs(30)).await;
    // Until the server drops the frozen replica's connection (stale after its missed pings),
    // its queue subscriptions still take a share of the cluster's requests, unanswered: a plan
    // that lands there fails (nothing is held). On a loaded machine that can last longer than
    // the pings' nominal 2-3 s, so ask again, under new ids, until two commit.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end = Instant::now() + Duration::from_secs(30);
    let mut round = 0;
    let mut more: Vec<String> = Vec::new();
    while more.len() < 2 && Instant::now() < end {
        more.extend(burst(&client, &format!("b{round}"), 2 - more.len()).await);
        round += 1;
    }
    acked.extend(more);
    assert_eq!(acked.len(), 5);

    // Woken: its lease is gone; it steps down and the process ends.
    first.signal(Signal::SIGCONT);
    let stepped = wait_until(Duration::from_secs(20), Duration::from_millis(50), || {
        first.log().contains("stepped down")
    })
    .await;
    assert!(stepped, "the old replica stops serving:\n{}", first.log());
    acked.extend(burst(&client, "c", 4).await);
    assert_eq!(acked.len(), 6, "every slot, once: {acked:?}");
    assert_consistent(&client, dir.path(), &acked).await;
    assert_eq!(
        nats.violations(),
        Vec::<String>::new(),
        "the shipped permissions refused something"
    );
}

/// The fence itself, deterministically: once a second writer has claimed the cluster's state
/// stream, every append of the first is refused by the server (wrong last sequence), nothing
/// of it is acknowledged, and the stream's state is the second writer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_writer_cannot_append_to_the_state_stream() {
    use std::sync::Arc;

    use fedvol_agent::state::records::Hold;
    use fedvol_agent::state::replicated::{StreamStore, claim, open_stream, replay};
    use fedvol_agent::state::store::Batch;
    use fedvol_common::decision::{ClusterDecision, ClusterStatus};
    use fedvol_proto::agent::PlanReply;

    let nats = NatsServer::start();
    let js = async_nats::jetstream::new(nats.client().await);
    let stream = open_stream(&js, "f", 1).await.unwrap();
    let (snap, last) = replay(&mut stream.clone(), "f").await.unwrap();
    let claimed = claim(&js, "f", "one", last).await.unwrap();
    let one = Arc::new(StreamStore::start(js.clone(), stream.clone(), "f", snap, claimed));
    let hold = |id: &str| Batch {
        put_holds: vec![Hold {
            request_id: id.into(),
            workflow: "w".into(),
            expires_ms: u64::MAX,
            reply: PlanReply {
                request_id: id.into(),
                cluster: "f".into(),
                decision: ClusterDecision::without_answer(ClusterStatus::Answered, 0.0, None),
                hold: None,
            }
            .into(),
            committing: true,
            committing_since_ms: 1,
            claims: Default::default(),
            user: String::new(),
        }],
        ..Batch::default()
    };
    let sync = |n: u64| {
        let one = one.clone();
        tokio::task::spawn_blocking(move || one.sync_through(n))
    };
    let n = one.write(&hold("x1")).unwrap();
    sync(n)
        .await
        .unwrap()
        .expect("acknowledged while it is the only writer");

    // A second writer replays what the first acknowledged, and claims the stream.
    let (snap, last) = replay(&mut stream.clone(), "f").await.unwrap();
    assert_eq!(snap.holds.len(), 1, "the first writer's acknowledged hold");
    claim(&js, "f", "two", last).await.unwrap();

    // The first writer's next append is refused: not acknowledged, and it knows it is fenced.
    let n = one.write(&hold("x2")).unwrap();
    let refused = sync(n).await.unwrap();
    assert!(refused.is_err(), "{refused:?}");
    assert!(one.fenced().borrow().is_some());
    assert!(one.write(&hold("x3")).is_err(), "and it writes nothing more");
    let (snap, _) = replay(&mut stream.clone(), "f").await.unwrap();
    let ids: Vec<&str> = snap.holds.iter().map(|h| h.request_id.as_str()).collect();
    assert_eq!(ids, ["x1"], "nothing of the fenced writer reached the stream");
}
