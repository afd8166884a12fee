//! No user starves another, and what the federation keeps and answers is bounded: real
//! nats-server under the shipped `single.conf`, `fedvol-coordinator` and `fedvol-agent`
//! processes, and the `fedvol` CLI where a user would use it.
//!
//! - One user's long polls (`changes`) count against its `maxInFlightPerUser` and the
//!   coordinator's watch pool is shared fairly among users, so another user's `fedvol
//!   decisions watch` works whatever the first one holds; the refusals are logged once per user
//!   and interval, not once each; `decisions watch` and `fedvol ui` ride out an `overloaded`
//!   answer.
//! - A user's reads of the decisions are bounded in bytes per second.
//! - `fedvol clusters show` answers at 5,000 commits.
//! - Final decisions older than `decisionRetentionMs` are removed, live ones kept; a user
//!   without a quota stores at most `maxDecisionsPerUser` decisions.

use std::process::Output;
use std::time::{Duration, Instant};

use futures::StreamExt;

use fedvol_proto::Endpoint;
use fedvol_proto::coordinator::{self as api, ChangesQuery, ChangesReply};
use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::load::{coordinator_op, roomy_inventory, small_workflow, submit_msg};
use fedvol_tests::{NatsServer, Spawned};

/// One test at a time (each runs thousands of requests on a 2-core machine).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn out(o: &Output) -> String {
    fedvol_tests::cli::shown(o)
}

const WORKFLOW: &str = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}\n";

/// A coordinator whose configuration file is `config` (kept alive by the returned guard).
async fn coordinator(nats: &NatsServer, config: &str) -> (CoordinatorProc, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coordinator.yaml");
    std::fs::write(&path, config).unwrap();
    let p = path.display().to_string();
    let args = ["--config", p.as_str(), "--deadline-ms", "1500", "--discovery-ms", "300"];
    (CoordinatorProc::start(nats, &args).await, dir)
}

/// Sends `n` `changes` long polls of `user` (waiting `wait_ms` for a change after a revision
/// that never comes) on one connection, without waiting; returns the connection and the
/// subscription their answers arrive on.
async fn long_polls(
    nats: &NatsServer,
    user: &str,
    n: usize,
    wait_ms: u64,
) -> (async_nats::Client, async_nats::Subscriber) {
    let client = nats.client_as(user).await;
    let inbox = client.new_inbox();
    let sub = client.subscribe(format!("{inbox}.*")).await.unwrap();
    let subject = fedvol_proto::Subjects::default().coordinator(api::CoordinatorOp::Changes, user);
    let body = api::Changes::encode_request(&ChangesQuery {
        after: u64::MAX / 2,
        wait_ms,
    });
    for i in 0..n {
        client
            .publish_with_reply(subject.clone(), format!("{inbox}.{i}"), body.clone())
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    (client, sub)
}

/// How many answers arrive on `sub` within `within` that are `overloaded` refusals, and how
/// many are other answers.
async fn count_answers(sub: &mut async_nats::Subscriber, within: Duration) -> (usize, usize) {
    let (mut refused, mut answered) = (0, 0);
    let end = tokio::time::Instant::now() + within;
    while let Ok(Some(m)) = tokio::time::timeout_at(end, sub.next()).await {
        match api::Changes::decode_reply(&m.payload, "test") {
            Ok(Err(f)) if f.error.code == fedvol_proto::Code::Overloaded => refused += 1,
            _ => answered += 1,
        }
    }
    (refused, answered)
}

/// The request id a plain submit's output names on stderr (`request id: ...`), else the one
/// given.
fn submit(nats: &NatsServer, user: &str, wf: &str, id: &str) -> Output {
    fedvol_tests::cli::fedvol_as(nats, user, &["submit", wf, "--request-id", id])
}

/// Issue: alice held about 2,300 `changes` long polls and bob's `fedvol decisions watch` was
/// refused `overloaded: 1024 watches are waiting on this coordinator` and exited; the
/// coordinator wrote a WARN line per refusal. Now alice holds at most her `maxInFlightPerUser`
/// (64), sixteen more users filling the rest of the pool do not keep bob out either (a user
/// holding fewer takes the oldest watch of the user holding the most), and the refusals are
/// a few lines per user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_long_polls_of_one_user_leave_another_users_watch_working() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let crowd: Vec<String> = (0..16).map(|i| format!("crowd{i}")).collect();
    let mut users: Vec<String> = vec!["alice".into(), "bob".into()];
    users.extend(crowd.iter().cloned());
    // Every identity exists before the federation starts (adding one reloads the server).
    nats.ensure_users(&users);
    let (coord, _cfg) = coordinator(&nats, "").await;
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // alice: 2,000 long polls at once, each waiting 30 s for a change that never comes.
    let (_alice, mut alice_answers) = long_polls(&nats, "alice", 2000, 30_000).await;
    let (refused, answered) = count_answers(&mut alice_answers, Duration::from_secs(5)).await;
    eprintln!("alice: {refused} of 2000 long polls refused overloaded within 5 s");
    assert_eq!(answered, 0, "none of alice's polls has anything to answer yet");
    assert!(
        refused >= 2000 - 64,
        "alice holds at most maxInFlightPerUser (64) long polls: {refused} of 2000 refused"
    );
    // Sixteen more users, 64 each: with alice's, more than the pool's 1,024.
    let mut crowd_conns = Vec::new();
    for u in &crowd {
        crowd_conns.push(long_polls(&nats, u, 64, 30_000).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    // bob's watch is admitted, and follows his submit.
    let url = nats.url();
    let mut watch = Spawned::bin("fedvol", ["--nats", url.as_str(), "-u", "bob", "decisions", "watch"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        watch.try_status().is_none(),
        "bob's watch is still running: {}",
        watch.log()
    );
    let o = submit(&nats, "bob", &wf, "bob-1");
    assert!(o.status.success(), "{}", out(&o));
    watch.wait_for_log("bob-1", Duration::from_secs(20)).await;
    assert!(!watch.log().contains("error"), "{}", watch.log());

    // The refusals (about 1,940 of alice's, the crowd's beyond the pool) are a few lines per
    // user, each with how many it stands for.
    let log = coord.proc.log();
    let lines = |user: &str| {
        log.lines()
            .filter(|l| l.contains("overloaded") && l.contains(&format!("user={user} ")))
            .count()
    };
    assert!(
        (1..=3).contains(&lines("alice")),
        "alice's refusals: {} lines\n{log}",
        lines("alice")
    );
    let all = log.lines().filter(|l| l.contains("overloaded")).count();
    eprintln!(
        "coordinator log: {} lines about alice's refusals, {all} about refusals in all",
        lines("alice")
    );
    assert!(all <= 3 * users.len(), "{all} lines about refusals:\n{log}");
    drop(crowd_conns);
}

/// `fedvol decisions watch` and `fedvol ui` refused `overloaded` (bob already holds his
/// `maxInFlightPerUser` of long polls) say so and ask again after a pause instead of exiting;
/// once bob's other polls end they follow the decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_ui_ride_out_an_overloaded_coordinator() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    nats.ensure_users(&["bob"]);
    let (_coord, _cfg) = coordinator(&nats, "maxInFlightPerUser: 8\n").await;
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // bob holds all 8 of his places for 4 s.
    let (_held, mut answers) = long_polls(&nats, "bob", 8, 4000).await;
    let url = nats.url();
    let mut watch = Spawned::bin("fedvol", ["--nats", url.as_str(), "-u", "bob", "decisions", "watch"]);
    let mut ui = Spawned::bin(
        "fedvol",
        ["--nats", url.as_str(), "-u", "bob", "ui", "--listen", "127.0.0.1:0"],
    );
    watch
        .wait_for_log("the coordinator is busy", Duration::from_secs(10))
        .await;
    ui.wait_for_log("the coordinator is busy", Duration::from_secs(10))
        .await;
    let said = watch.log().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        said.contains("maxInFlightPerUser") && said.contains("asking again in 1."),
        "{}",
        watch.log()
    );
    assert!(watch.log().lines().all(|l| l.chars().count() <= 100), "{}", watch.log());
    // bob's polls end (empty answers at their timeout); both get in.
    let (_, answered) = count_answers(&mut answers, Duration::from_secs(6)).await;
    assert_eq!(answered, 8, "bob's held polls were answered at their timeout");
    ui.wait_for_log("serving the read-only view", Duration::from_secs(30))
        .await;
    let o = submit(&nats, "bob", &wf, "bob-after-busy");
    assert!(o.status.success(), "{}", out(&o));
    watch.wait_for_log("bob-after-busy", Duration::from_secs(30)).await;
    assert!(watch.try_status().is_none(), "{}", watch.log());
    assert!(ui.try_status().is_none(), "{}", ui.log());
}

/// Issue: repeated `changes` from revision 0 pulled 4.6 GB in 20 s and slowed every other
/// user. With `readBytesPerSecondPerUser: 65536`, alice's reads over `t` seconds stay within
/// `65536 * (t + 1)` bytes plus one answer, while bob, reading at the same time, gets his
/// whole answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_from_revision_zero_are_bounded_in_bytes_per_second_per_user() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    nats.ensure_users(&["alice", "bob"]);
    let rate = 65_536u64;
    let (_coord, _cfg) = coordinator(&nats, &format!("readBytesPerSecondPerUser: {rate}\n")).await;
    let a = AgentProc::start(&nats, 200, |d| roomy_inventory("a", 4, 64, d)).await;
    let _ = &a;
    let client = nats.client_as("alice").await;
    // 200 kept dry runs: a store of about 100 KB of changes.
    let wf = small_workflow("read-me", 1);
    let ids: Vec<String> = (0..200).map(|i| format!("read-{i:03}")).collect();
    futures::stream::iter(ids.iter())
        .for_each_concurrent(16, |id| {
            let (client, wf) = (&client, &wf);
            async move {
                let r =
                    coordinator_op::<api::Submit>(client, "alice", &submit_msg(id, wf, true), Duration::from_secs(30))
                        .await
                        .unwrap();
                assert!(r.error.is_none(), "{:?}", r.error);
            }
        })
        .await;
    let whole = loop {
        let r: ChangesReply = coordinator_op::<api::Changes>(
            &client,
            "alice",
            &ChangesQuery { after: 0, wait_ms: 0 },
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        if r.changes.len() == 200 {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let one = serde_json::to_vec(&whole).unwrap().len();
    assert!(one > 50_000, "{one}");

    // alice reads from revision 0 again and again for 4 s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let mut read = 0usize;
    let mut answers = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let bytes = fedvol_tests::load::call_raw(
            &client,
            &fedvol_proto::Subjects::default().coordinator(api::CoordinatorOp::Changes, "alice"),
            api::Changes::encode_request(&ChangesQuery {
                after: 0,
                wait_ms: 1000,
            })
            .to_vec(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        read += bytes.len();
        answers += 1;
        // bob, meanwhile, is not held back by alice's budget: his whole answer, at once.
        if answers == 3 {
            let bob = nats.client_as("bob").await;
            let r: ChangesReply = coordinator_op::<api::Changes>(
                &bob,
                "bob",
                &ChangesQuery { after: 0, wait_ms: 0 },
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            assert_eq!(r.changes.len(), 200, "bob reads everything at once");
        }
    }
    let t = started.elapsed().as_secs_f64();
    eprintln!("alice read {read} bytes in {t:.1} s, {answers} answers of up to {one} bytes");
    let bound = rate as f64 * (t + 1.0) + 1024.0 * 1024.0;
    assert!(
        (read as f64) <= bound,
        "alice read {read} bytes in {t:.1} s ({answers} answers of up to {one} bytes): more than {bound:.0}"
    );
    assert!(read >= one, "alice was answered: {read}");
}

/// Issue: `fedvol clusters show` failed `reply_too_large` (1,432,418 bytes > 1 MiB) once a
/// cluster held about 1,400 commits.
///
/// The state is built fast, as an agent state fixture: one real commit (sent to the agent's
/// `commit` with the request, provisioning a 1 MiB hostpath volume), the agent killed, its
/// state file read with the agent's own store and written back holding that commit and its
/// managed volume 5,000 times under distinct request ids and volume names, and the agent
/// started again on it (as after a restart). 5,000 real commits through NATS take about 80 s
/// in a debug build here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_show_answers_at_five_thousand_commits() {
    use fedvol_agent::state::store::{RedbStore, Snapshot};
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let (_coord, _cfg) = coordinator(&nats, "").await;
    let mut agent = AgentProc::start(&nats, 200, |d| roomy_inventory("a", 1, 5000, d)).await;
    let observer = nats.client().await;
    // A fresh agent admits no commit until the coordinator restored it (the gate as shipped).
    fedvol_tests::faultkit::wait_ready(&observer, &["a"]).await;
    let template = "fixture-00000";
    let request = fedvol_common::funnel::PlanRequest::new(template.to_string(), small_workflow("many", 1), "alice")
        .with_groups(vec!["physics".to_string()]);
    let mut msg = fedvol_proto::agent::ActionMsg::new(template, fedvol_proto::now_ms() + 30_000);
    msg.request = Some(request);
    let subject = fedvol_proto::Subjects::default().cluster("a", fedvol_proto::agent::AgentOp::Commit);
    let r: fedvol_proto::agent::ActionReply = fedvol_tests::load::call(
        &observer,
        &subject,
        fedvol_proto::encode(&msg).to_vec(),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(r.ok, "{:?}", r.error);

    // The fixture: that commit 5,000 times in the agent's state file.
    agent.proc.kill();
    let path = agent.dir.path().join("data").join("state.redb");
    let (store, snapshot) = RedbStore::open(&path).unwrap();
    let identity = store.identity().unwrap().unwrap();
    drop(store);
    assert_eq!((snapshot.commits.len(), snapshot.volumes.len()), (1, 1), "{snapshot:?}");
    let volume = snapshot.volumes[0].pv.name.clone();
    let commit = serde_json::to_string(&snapshot.commits[0]).unwrap();
    let managed = serde_json::to_string(&snapshot.volumes[0]).unwrap();
    let mut many = Snapshot::default();
    for i in 0..5000 {
        let renamed = |text: &str| {
            text.replace(template, &format!("fixture-{i:05}"))
                .replace(&volume, &format!("{volume}-{i:05}"))
        };
        many.commits.push(serde_json::from_str(&renamed(&commit)).unwrap());
        many.volumes.push(serde_json::from_str(&renamed(&managed)).unwrap());
    }
    std::fs::remove_file(&path).unwrap();
    RedbStore::create_from(&path, &many, &identity).unwrap();
    agent.crash_and_restart().await;

    let o = fedvol_tests::cli::fedvol_as(&nats, "alice", &["clusters", "show", "a"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("committed workflows 5000;"), "{text}");
    assert!(words.contains("volumes fedvol manages: 5000"), "{text}");
    assert!(words.contains("cut to fit the NATS server's max_payload"), "{text}");
    let o = fedvol_tests::cli::fedvol_as(&nats, "alice", &["clusters", "show", "a", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(&o)));
    assert_eq!(doc["agent"]["cut"]["committed"], 5000, "{}", doc["agent"]["cut"]);
    let kept = doc["agent"]["status"]["committed"].as_array().unwrap().len();
    assert!(kept > 0 && kept < 5000, "{kept}");
}

/// Final decisions (completed, failed, kept dry runs) older than `decisionRetentionMs` are
/// removed; committed ones are kept however old. The rule is Nomad's: its core scheduler
/// garbage-collects evaluations once terminal and older than `eval_gc_threshold`, never a
/// live one (Nomad: `nomad/core_sched.go`, `evalGC`). Here the retention is 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_removes_old_final_decisions_and_keeps_live_ones() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let (_coord, _cfg) = coordinator(&nats, "decisionRetentionMs: 3000\nreconcileEveryMs: 500\n").await;
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 4, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();
    let huge = dir.path().join("huge.yaml");
    std::fs::write(&huge, WORKFLOW.replace("cores: 1", "cores: 1000")).unwrap();
    let huge = huge.display().to_string();
    let alice = |args: &[&str]| fedvol_tests::cli::fedvol_as(&nats, "alice", args);

    // Live: committed first, so it is the oldest of all.
    let o = alice(&["submit", &wf, "--request-id", "live"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = alice(&["submit", &wf, "--request-id", "done"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = alice(&["complete", "done"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = alice(&["submit", &huge, "--request-id", "nothing-fits"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let o = alice(&["submit", &wf, "--request-id", "kept-dry-run", "--dry-run", "--keep"]);
    assert!(o.status.success(), "{}", out(&o));
    let listed = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let all = listed(&alice(&["decisions", "list", "-o", "wide"]));
    for id in ["live", "done", "nothing-fits", "kept-dry-run"] {
        assert!(all.contains(id), "{id} stored first: {all}");
    }

    // Within 30 s every final one is gone, and the live one, older than each, is kept.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let now = listed(&alice(&["decisions", "list", "-o", "wide"]));
        let gone = ["done", "nothing-fits", "kept-dry-run"]
            .iter()
            .all(|id| !now.contains(id));
        if gone {
            assert!(now.contains("live"), "the committed decision is kept: {now}");
            break;
        }
        assert!(Instant::now() < end, "final decisions still listed after 30 s: {now}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let o = alice(&["decisions", "show", "done"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("not_found") || out(&o).contains("no decision"),
        "{}",
        out(&o)
    );
    let o = alice(&["decisions", "show", "live"]);
    assert!(o.status.success() && listed(&o).contains("committed"), "{}", out(&o));
    // Nothing else was touched: the live decision completes as usual.
    let o = alice(&["complete", "live"]);
    assert!(o.status.success(), "{}", out(&o));
}

/// Without a quota, nothing bounded how many decisions one user stores. With
/// `maxDecisionsPerUser: 3`, alice's fourth new request id is refused `too_many_decisions`
/// (nothing stored), a stored id is still answered, bob is not affected, and carol, whom a
/// quota bounds, is not capped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_quota_stores_at_most_max_decisions_per_user() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    nats.ensure_users(&["alice", "bob", "carol"]);
    let (_coord, _cfg) = coordinator(
        &nats,
        "maxDecisionsPerUser: 3\nquotas:\n  - {user: carol, volumes: 100}\n",
    )
    .await;
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 8, d, "all")).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    for i in 0..3 {
        let o = submit(&nats, "alice", &wf, &format!("alice-{i}"));
        assert!(o.status.success(), "{}", out(&o));
    }
    let o = submit(&nats, "alice", &wf, "alice-3");
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("too_many_decisions"), "{text}");
    assert!(text.contains("maxDecisionsPerUser: 3"), "{text}");
    let o = fedvol_tests::cli::fedvol_as(&nats, "alice", &["decisions", "show", "alice-3"]);
    assert_eq!(o.status.code(), Some(1), "nothing was stored: {}", out(&o));
    // A stored request id is answered from the store.
    let o = submit(&nats, "alice", &wf, "alice-0");
    assert!(o.status.success(), "{}", out(&o));
    for (user, n) in [("bob", 1), ("carol", 4)] {
        for i in 0..n {
            let o = submit(&nats, user, &wf, &format!("{user}-{i}"));
            assert!(o.status.success(), "{user}: {}", out(&o));
        }
    }
}
