//! The coordinator end to end: a real nats-server, `fedvol-agent`s and
//! `fedvol-coordinator`s as real processes, requests over NATS as the CLI sends them.
//!
//! Tests run one at a time (they measure waits against short deadlines, and the machine may
//! have two cores).

use fedvol_tests::shipped::LoggedIn;
use std::time::{Duration, Instant};

use fedvol_common::decision::ClusterStatus;
use fedvol_common::funnel::why_not::Target;
use fedvol_common::model::Workflow;
use fedvol_formats::parse_workflow_str;
use fedvol_proto::agent::{AgentOp, StatusReply, WhyNotReply};
use fedvol_proto::coordinator::{self as api, CoordinatorEndpoint};
use fedvol_proto::coordinator::{
    ClustersReply, DecisionRef, ListReply, ReplayReply, SubmitMsg, SubmitReply, WhyNotQuery,
};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{NoArgs, Subjects};
use fedvol_tests::federation::{AgentProc, CoordinatorProc, example_inventory, slots_inventory};
use fedvol_tests::{NatsServer, Spawned, wait_until};
use futures::StreamExt;
use nix::sys::signal::Signal;

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const DEADLINE_MS: u64 = 800;

// ---------------------------------------------------------------------------------------------
// Processes

/// An agent of cluster `name` with `hosts` one-job hosts whose scratch provisioner only group
/// `physics` may use.
async fn slots(nats: &NatsServer, name: &str, hosts: usize, heartbeat_ms: u64) -> AgentProc {
    AgentProc::start(nats, heartbeat_ms, |dir| slots_inventory(name, hosts, dir, "[physics]")).await
}

/// A coordinator with the test timings and `extra` arguments.
async fn coordinator(nats: &NatsServer, extra: &[&str]) -> CoordinatorProc {
    let deadline = DEADLINE_MS.to_string();
    let mut args = vec![
        "--deadline-ms",
        deadline.as_str(),
        "--commit-timeout-ms",
        "3000",
        "--discovery-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    CoordinatorProc::start(nats, &args).await
}

// ---------------------------------------------------------------------------------------------
// Requests

/// One request with its own inbox; the first answer, decoded straight from the bytes.
async fn call<T: serde::de::DeserializeOwned>(client: &async_nats::Client, subject: &str, body: Vec<u8>) -> T {
    let bytes = call_bytes(client, subject, body).await;
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{subject}: {e}: {}", String::from_utf8_lossy(&bytes)))
}

/// One request with its own inbox; the first answer's bytes.
async fn call_bytes(client: &async_nats::Client, subject: &str, body: Vec<u8>) -> Vec<u8> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, body.into())
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(30), sub.next())
        .await
        .unwrap_or_else(|_| panic!("no answer on {subject}"))
        .unwrap();
    assert!(m.status.is_none(), "no responders on {subject}");
    m.payload.to_vec()
}

/// Coordinator endpoint `E` as `user`: its reply (a failure the coordinator answered with
/// instead fails the test, naming it).
async fn op<E: CoordinatorEndpoint>(client: &async_nats::Client, user: &str, body: &E::Request) -> E::Reply {
    let subject = Subjects::default().coordinator(E::OP, user);
    let bytes: Vec<u8> = call_bytes(client, &subject, E::encode_request(body).to_vec()).await;
    match E::decode_reply(&bytes, "client") {
        Ok(Ok(r)) => r,
        Ok(Err(f)) => panic!("{subject}: the coordinator answered with a failure: {f}"),
        Err(e) => panic!("{subject}: {e}: {}", String::from_utf8_lossy(&bytes)),
    }
}

fn submit_msg(id: &str, workflow: Workflow) -> SubmitMsg {
    SubmitMsg {
        priority: None,
        wait_for_capacity: false,
        request_id: id.into(),
        workflow,
        dry_run: false,
        seed: None,
        groups: vec!["physics".into()],
        timeout_ms: 0,
        trace_limit: None,
        keep: false,
        choice: None,
    }
}

/// Submits as `user`; returns the stored decision (panics on an error reply) and how long the
/// answer took.
async fn submit(client: &async_nats::Client, user: &str, msg: &SubmitMsg) -> (StoredDecision, Duration) {
    let started = Instant::now();
    let r: SubmitReply = op::<api::Submit>(client, user, msg).await;
    let took = started.elapsed();
    assert!(r.error.is_none(), "{:?}", r.error);
    (r.stored.expect("a stored decision"), took)
}

async fn get(client: &async_nats::Client, id: &str) -> SubmitReply {
    op::<api::Get>(
        client,
        "alice",
        &DecisionRef {
            request_id: id.into(),
            cancel: false,
            whole: None,
        },
    )
    .await
}

async fn status(client: &async_nats::Client, cluster: &str) -> StatusReply {
    call(
        client,
        &Subjects::default().cluster(cluster, AgentOp::Status),
        br#"{"v":1}"#.to_vec(),
    )
    .await
}

async fn clusters(client: &async_nats::Client) -> ClustersReply {
    call(
        client,
        &Subjects::default().coordinator(fedvol_proto::coordinator::CoordinatorOp::Clusters, "alice"),
        br#"{"v":1}"#.to_vec(),
    )
    .await
}

/// Waits until the coordinator's registry says `cluster` is `alive` (true/false); alive
/// means heard by heartbeat and restored too (a fresh agent is `restoring` until the
/// coordinators restored it).
async fn wait_alive(client: &async_nats::Client, cluster: &str, alive: bool) {
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let r = clusters(client).await;
        if r.clusters.iter().any(|c| {
            c.name == cluster
                && if alive {
                    !c.instances.is_empty() && c.alive && !c.restoring
                } else {
                    !c.alive
                }
        }) {
            return;
        }
        assert!(Instant::now() < end, "{cluster} never became alive={alive}: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// True when nobody serves `subject` any more (NATS answers "no responders").
async fn nobody_serves(client: &async_nats::Client, subject: &str) -> bool {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, br#"{"v":1}"#.to_vec().into())
        .await
        .unwrap();
    // A probe the server routed to the killed agent's connection before it noticed the close
    // gets no answer at all: a short wait, and the caller probes again.
    match tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        Ok(Some(m)) => m.status == Some(async_nats::StatusCode::NO_RESPONDERS),
        _ => false,
    }
}

/// A workflow with one 1MiB scratch volume and one job of 8 cores.
fn job_workflow(name: &str) -> Workflow {
    let text = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";
    parse_workflow_str("wf.yaml", name, text).unwrap().value
}

fn example_workflow(stem: &str) -> Workflow {
    let p = fedvol_tests::bins::workspace_root().join(format!("deploy/examples/workflows/{stem}.yaml"));
    let text = std::fs::read_to_string(&p).unwrap();
    parse_workflow_str(&p.display().to_string(), stem, &text).unwrap().value
}

fn slot_status(stored: &StoredDecision, cluster: &str) -> ClusterStatus {
    stored
        .decision
        .clusters
        .get(cluster)
        .unwrap_or_else(|| panic!("no slot for {cluster}: {:?}", stored.decision.clusters.keys()))
        .status
}

fn cpu_in_use(st: &StatusReply) -> u64 {
    st.host_use.values().map(|r| r.cpu).sum()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_example_clusters_the_seeds_choose_commit_and_release() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let mut agents = Vec::new();
    for c in ["cluster-a", "cluster-b", "cluster-c"] {
        agents.push(AgentProc::start(&nats, 100, |dir| example_inventory(c, dir)).await);
    }
    let coord = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    for c in ["cluster-a", "cluster-b", "cluster-c"] {
        wait_alive(&client, c, true).await;
    }

    // Cloud Assembly's provisioning funnel: `train` needs a GPU (hard) and prefers an H100 (soft): cluster-a fits without
    // the soft constraint, cluster-c lacks the memory, cluster-b has H100s.
    let msg = submit_msg("gpu-1", example_workflow("gpu-soft-constraints"));
    let (stored, _) = submit(&client, "alice", &msg).await;
    assert_eq!(stored.state, DecisionState::Committed, "{:?}", stored.attempts);
    assert_eq!(stored.decision.chosen_cluster.as_deref(), Some("cluster-b"));
    assert_eq!(stored.attempts.len(), 1);
    assert!(stored.attempts[0].ok && stored.attempts[0].cluster == "cluster-b");
    let soft = stored
        .decision
        .choice
        .iter()
        .find(|s| s.rule == "soft_constraints")
        .unwrap();
    assert_eq!(soft.kept, ["cluster-b"]);

    let got = get(&client, "gpu-1").await.stored.expect("stored");
    assert_eq!(got, stored, "get returns what submit answered");
    assert_eq!(got.decision.clusters.len(), 3);
    for c in ["cluster-a", "cluster-b", "cluster-c"] {
        let slot = &got.decision.clusters[c];
        assert_eq!(slot.status, ClusterStatus::Answered, "{c}");
        assert!(slot.elapsed_ms > 0.0 && slot.elapsed_ms < DEADLINE_MS as f64, "{c}");
        assert!(slot.inventory_version.is_some(), "{c}");
    }
    assert!(got.decision.clusters["cluster-a"].feasible);
    assert!(!got.decision.clusters["cluster-c"].feasible);
    let train = &got.decision.clusters["cluster-b"].jobs["train"];
    assert!(
        train.host.as_deref().is_some_and(|h| h.starts_with("b-gpu-")),
        "{train:?}"
    );

    let b = status(&client, "cluster-b").await;
    assert_eq!(b.committed, ["gpu-1"]);
    assert!(b.holds.is_empty());
    assert_eq!(cpu_in_use(&b), 16, "train's 16 cores are booked on cluster-b");
    for c in ["cluster-a", "cluster-c"] {
        let st = status(&client, c).await;
        assert!(st.holds.is_empty(), "{c} holds nothing afterwards: {:?}", st.holds);
        assert!(st.committed.is_empty(), "{c}");
    }
    // Admission at commit: the broadcast held nothing anywhere, so there was no hold
    // to release on cluster-a.
    assert!(!coord.proc.log().contains("hold released"), "nothing was held");
    // The gather's log line counts the answers it gathered (it once counted them after they
    // had been moved into the decision, and said 0).
    assert!(
        coord
            .proc
            .log()
            .lines()
            .any(|l| l.contains("plan gathered") && l.contains("answered=3")),
        "{}",
        coord.proc.log()
    );

    // why_not: cluster-c's GPU host node-1 lacks memory for train.
    let w: WhyNotReply = op::<api::WhyNot>(
        &client,
        "alice",
        &WhyNotQuery {
            request_id: "gpu-1".into(),
            cluster: "cluster-c".into(),
            target: Target {
                host: Some("node-1".into()),
                ..Target::default()
            },
        },
    )
    .await;
    assert_eq!(w.cluster, "cluster-c");
    assert!(!w.blockers.is_empty(), "{w:?}");

    // The registry and the list.
    let reg = clusters(&client).await;
    let names: Vec<&str> = reg.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cluster-a", "cluster-b", "cluster-c"]);
    assert!(
        reg.clusters
            .iter()
            .all(|c| c.alive && !c.suspect && !c.inventory_version.is_empty())
    );
    let list: ListReply = op::<api::List>(&client, "alice", &NoArgs {}).await;
    assert_eq!(list.decisions.len(), 1);
    assert_eq!(list.decisions[0].chosen_cluster.as_deref(), Some("cluster-b"));
    drop(agents);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agent_is_unreachable_at_once_then_presumed_dead() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    // Heartbeats every 400 ms: a killed agent is presumed dead 1.2 s after its last one, long
    // after "no responders" is seen, even on a loaded machine (at 100 ms, a slow probe let the
    // presumption come first).
    let a = slots(&nats, "a", 2, 400).await;
    let b = slots(&nats, "b", 2, 400).await;
    let mut c = slots(&nats, "c", 2, 400).await;
    let _coord = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    wait_alive(&client, "c", true).await;
    // The coordinator may know c from start-up discovery alone; a cluster that never sent a
    // heartbeat is forgotten when nobody serves it. Wait for c's heartbeat (last seen moves).
    let seen = |r: &fedvol_proto::coordinator::ClustersReply| {
        r.clusters.iter().find(|x| x.name == "c").map_or(0, |x| x.last_seen_ms)
    };
    let first_seen = seen(&clusters(&client).await);
    let end = Instant::now() + Duration::from_secs(15);
    while seen(&clusters(&client).await) <= first_seen {
        assert!(Instant::now() < end, "no heartbeat from c");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Each cluster is asked on its own subject: once the server dropped the dead
    // agent's subscriptions, NATS says "no responders" for c at once, and the submit does not
    // wait for it (with the broadcast, it waited until the deadline).
    c.proc.kill();
    let subject = Subjects::default().cluster("c", AgentOp::Plan);
    let end = Instant::now() + Duration::from_secs(15);
    while !nobody_serves(&client, &subject).await {
        assert!(Instant::now() < end, "c still served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (first, took) = submit(&client, "alice", &submit_msg("k-1", job_workflow("k"))).await;
    assert!(
        took < Duration::from_millis(DEADLINE_MS / 2),
        "not waiting for a cluster nobody serves: {took:?}"
    );
    assert_eq!(slot_status(&first, "c"), ClusterStatus::Unreachable);
    let slot = &first.decision.clusters["c"];
    assert!(
        slot.error.as_ref().unwrap().message.contains("no responders"),
        "{slot:?}"
    );
    for ok in ["a", "b"] {
        assert_eq!(slot_status(&first, ok), ClusterStatus::Answered, "{ok} intact");
        assert!(first.decision.clusters[ok].feasible);
    }
    assert_eq!(first.state, DecisionState::Committed);
    assert!(matches!(first.decision.chosen_cluster.as_deref(), Some("a" | "b")));

    // Three silent heartbeat intervals later c is presumed dead and no longer waited for.
    wait_alive(&client, "c", false).await;
    for i in 2..=3 {
        let (later, took) = submit(&client, "alice", &submit_msg(&format!("k-{i}"), job_workflow("k"))).await;
        assert!(
            took < Duration::from_millis(DEADLINE_MS / 2),
            "not waiting for a dead cluster: {took:?}"
        );
        assert_eq!(slot_status(&later, "c"), ClusterStatus::Unreachable);
        let why = later.decision.clusters["c"].error.clone().unwrap();
        assert!(why.message.contains("presumed dead"), "{why:?}");
        assert_eq!(later.state, DecisionState::Committed);
    }
    // Four slots, three commits, no holds left.
    let (sa, sb) = (status(&client, "a").await, status(&client, "b").await);
    assert_eq!(sa.committed.len() + sb.committed.len(), 3);
    assert!(sa.holds.is_empty() && sb.holds.is_empty());

    // Every agent gone, though a and b still count as alive: NATS says "no responders" at
    // once, and the submit says so instead of waiting.
    let (mut a, mut b) = (a, b);
    a.proc.kill();
    b.proc.kill();
    for c in ["a", "b"] {
        let subject = Subjects::default().cluster(c, AgentOp::Status);
        let gone = {
            let end = Instant::now() + Duration::from_secs(5);
            loop {
                if nobody_serves(&client, &subject).await {
                    break true;
                }
                if Instant::now() >= end {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        assert!(gone, "{c} still served");
    }
    // No cluster answers: not "nothing fits", but the retryable `clusters_unavailable`.
    let started = Instant::now();
    let r: SubmitReply = op::<api::Submit>(&client, "alice", &submit_msg("k-4", job_workflow("k"))).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(DEADLINE_MS / 2), "{took:?}");
    assert_eq!(
        r.error.as_ref().map(|e| e.code.as_str()),
        Some("clusters_unavailable"),
        "{r:?}"
    );
    let none = r.stored.expect("the decision");
    assert_eq!(none.state, DecisionState::Failed);
    assert_eq!(none.failure(), Some(fedvol_proto::decisions::FailureKind::Unavailable));
    assert_eq!(none.decision.chosen_cluster, None);
    for c in ["a", "b"] {
        let slot = &none.decision.clusters[c];
        assert_eq!(slot.status, ClusterStatus::Unreachable, "{c}");
        assert!(
            slot.error.as_ref().unwrap().message.contains("no responders"),
            "{slot:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_falls_back_to_the_next_cluster_within_the_attempts() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    // `bad` plans fine but cannot create its volume: its base path lies under a regular file.
    let bad = AgentProc::start(&nats, 100, |dir| {
        std::fs::write(dir.join("blocker"), "not a directory").unwrap();
        slots_inventory("bad", 2, dir, "[physics]").replace(
            &dir.join("scratch").display().to_string(),
            &dir.join("blocker/scratch").display().to_string(),
        )
    })
    .await;
    let good = slots(&nats, "good", 2, 100).await;
    let _spare = slots(&nats, "spare", 2, 100).await;
    let mut coord = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    for c in ["bad", "good", "spare"] {
        wait_alive(&client, c, true).await;
    }
    let mut wf = job_workflow("fallback");
    wf.clusters = vec!["bad".into(), "good".into()];

    let (d, _) = submit(&client, "alice", &submit_msg("fb-1", wf.clone())).await;
    assert_eq!(d.state, DecisionState::Committed);
    assert_eq!(d.decision.chosen_cluster.as_deref(), Some("good"));
    let tried: Vec<(&str, bool)> = d.attempts.iter().map(|a| (a.cluster.as_str(), a.ok)).collect();
    assert_eq!(tried, [("bad", false), ("good", true)]);
    assert!(d.attempts[0].error.is_some());
    let first = &d.decision.choice[0];
    assert_eq!(first.rule, "commit_failed");
    assert_eq!(first.dropped[0].candidate, "bad");
    assert_eq!(first.dropped[0].reasons[0].code, "commit_failed");
    let order = d.decision.choice.iter().find(|s| s.rule == "workflow_order").unwrap();
    assert_eq!(order.kept, ["good"], "the re-run choice ranks what is left");
    for c in ["bad", "spare"] {
        let st = status(&client, c).await;
        assert!(st.holds.is_empty() && st.committed.is_empty(), "{c}: {st:?}");
    }
    assert_eq!(status(&client, "good").await.committed, ["fb-1"]);

    // With a single attempt allowed, the failure is final and nothing stays held.
    coord.args.extend(["--commit-attempts".to_string(), "1".to_string()]);
    coord.restart().await;
    let (d, _) = submit(&client, "alice", &submit_msg("fb-2", wf)).await;
    assert_eq!(d.state, DecisionState::Failed);
    assert_eq!(d.decision.chosen_cluster, None);
    assert_eq!(d.attempts.len(), 1);
    assert!(
        d.decision
            .choice
            .iter()
            .any(|s| s.rule == "commit_attempts" && s.dropped[0].candidate == "good"),
        "{:?}",
        d.decision.choice
    );
    for c in ["bad", "good", "spare"] {
        let st = status(&client, c).await;
        assert!(st.holds.is_empty(), "{c}: {:?}", st.holds);
    }
    assert_eq!(status(&client, "good").await.committed, ["fb-1"]);
    drop((bad, good));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_agent_becomes_suspect_and_its_late_answer_is_released() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let a = slots(&nats, "a", 2, 100).await;
    let b = slots(&nats, "b", 2, 100).await;
    // c heartbeats slowly, so it stays "alive" for 9 s while frozen.
    let c = slots(&nats, "c", 2, 3000).await;
    let _coord = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    wait_alive(&client, "c", true).await;

    c.proc.signal(Signal::SIGSTOP);
    for i in 1..=2 {
        let (d, took) = submit(&client, "alice", &submit_msg(&format!("f-{i}"), job_workflow("f"))).await;
        assert!(took >= Duration::from_millis(DEADLINE_MS - 50), "{took:?}");
        assert_eq!(slot_status(&d, "c"), ClusterStatus::TimedOut);
    }
    let reg = clusters(&client).await;
    let info = reg.clusters.iter().find(|x| x.name == "c").unwrap();
    assert!(info.alive && info.suspect, "two timeouts in a row: {info:?}");

    // Not waited for any more; this submit gives the agents 5 s, so c, thawed right after the
    // answer, still answers it (late) and holds a slot.
    let mut msg = submit_msg("f-3", job_workflow("f"));
    msg.timeout_ms = 5000;
    let (third, took) = submit(&client, "alice", &msg).await;
    assert!(took < Duration::from_millis(DEADLINE_MS / 2), "{took:?}");
    assert_eq!(slot_status(&third, "c"), ClusterStatus::Unreachable);
    let why = third.decision.clusters["c"].error.clone().unwrap();
    assert!(why.message.contains("suspect"), "{why:?}");
    let chosen = third.decision.chosen_cluster.clone().expect("a or b");

    c.proc.signal(Signal::SIGCONT);
    // Its late answer holds nothing (the broadcast asks for no holds: admission happens at
    // commit), and is not waited for.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let st = status(&client, "c").await;
    assert!(st.holds.is_empty() && st.committed.is_empty(), "{st:?}");
    // The late answer changed nothing stored.
    let after = get(&client, "f-3").await.stored.unwrap();
    assert_eq!(after, third);
    assert_eq!(after.decision.chosen_cluster.as_deref(), Some(chosen.as_str()));

    // Heard from again: waited for and answering.
    let end = Instant::now() + Duration::from_secs(10);
    while clusters(&client)
        .await
        .clusters
        .iter()
        .any(|x| x.name == "c" && x.suspect)
    {
        assert!(Instant::now() < end, "c's heartbeat did not lift the suspicion");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (fourth, _) = submit(&client, "alice", &submit_msg("f-4", job_workflow("f"))).await;
    assert_eq!(slot_status(&fourth, "c"), ClusterStatus::Answered);
    drop((a, b));
}

/// A federation whose cluster `a` left a `complete` unanswered: the parts, kept alive together,
/// and the complete's answer.
struct FrozenComplete {
    a: AgentProc,
    coord: CoordinatorProc,
    client: async_nats::Client,
    /// The answer to the complete sent while `a` was frozen.
    reply: SubmitReply,
    /// Just before the complete was sent, ms since the epoch.
    asked_ms: u64,
    _nats: NatsServer,
}

/// Starts NATS, agent `a` (2 hosts) and a coordinator with a 1 s commit timeout and `extra`
/// arguments; commits `id` on `a`, freezes `a` (SIGSTOP) and asks to complete `id` as alice.
async fn complete_on_a_frozen_agent(id: &str, extra: &[&str]) -> FrozenComplete {
    let nats = NatsServer::start();
    let a = slots(&nats, "a", 2, 100).await;
    let mut args = vec![
        "--deadline-ms",
        "800",
        "--commit-timeout-ms",
        "1000",
        "--discovery-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    let coord = CoordinatorProc::start(&nats, &args).await;
    let client = nats.client().await;
    wait_alive(&client, "a", true).await;
    let (d, _) = submit(&client, "alice", &submit_msg(id, job_workflow("l"))).await;
    assert_eq!(d.state, DecisionState::Committed);

    a.proc.signal(Signal::SIGSTOP);
    let asked_ms = fedvol_proto::now_ms();
    let reply: SubmitReply = op::<api::Complete>(
        &client,
        "alice",
        &DecisionRef {
            request_id: id.into(),
            cancel: false,
            whole: None,
        },
    )
    .await;
    FrozenComplete {
        a,
        coord,
        client,
        reply,
        asked_ms,
        _nats: nats,
    }
}

/// Waits (`within` at most) until `id` is stored `completed`, and returns it.
async fn wait_completed(client: &async_nats::Client, id: &str, within: Duration) -> StoredDecision {
    let end = Instant::now() + within;
    loop {
        let s = get(client, id).await.stored.unwrap();
        if s.state == DecisionState::Completed {
            return s;
        }
        assert!(
            Instant::now() < end,
            "still {:?}, completing {:?}",
            s.state,
            s.completing
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `complete` its cluster does not answer (the agent frozen) is answered `timed_out`,
/// saying the coordinator keeps completing it; once the agent answers again the coordinator's
/// background try stores the decision `completed` and the agent holds nothing, with no retry by
/// the user. Before, the decision stayed `committed` in the bucket while its agent had released
/// it (a fault run's checker: lost=1, when the agent was killed right after applying the
/// complete and the load did not try again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_complete_is_finished_by_the_coordinator() {
    let _serial = SERIAL.lock().await;
    let f = complete_on_a_frozen_agent("late-1", &[]).await;
    let e = f.reply.error.expect("the frozen agent does not answer");
    assert_eq!(e.code, fedvol_proto::Code::TimedOut, "{e:?}");
    assert!(e.message.contains("keeps completing it on a"), "{}", e.message);
    assert_eq!(
        get(&f.client, "late-1").await.stored.unwrap().state,
        DecisionState::Committed
    );

    f.a.proc.signal(Signal::SIGCONT);
    wait_completed(&f.client, "late-1", Duration::from_secs(20)).await;
    let st = status(&f.client, "a").await;
    assert!(!st.committed.contains(&"late-1".to_string()), "{st:?}");
}

/// The same unanswered `complete`, but the coordinator that was asked is killed (`kill -9`)
/// right after answering `timed_out`: its own tries die with it. The decision says so in the
/// bucket (`completing`, since when), and the coordinator started in its place, holding the
/// reconciler's lease, completes it once the agent answers again. Before, the decision stayed
/// `committed` for good while the agent, once thawed, still held it (and a fault run's agent
/// that had applied the complete before dying had released it: RELIABILITY.md, bugs 13, 20).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_complete_is_finished_after_its_coordinator_died() {
    let _serial = SERIAL.lock().await;
    let mut f = complete_on_a_frozen_agent("orphaned-1", &["--reconcile-every-ms", "300"]).await;
    let client = f.client.clone();
    assert_eq!(
        f.reply.error.take().expect("the frozen agent does not answer").code,
        fedvol_proto::Code::TimedOut
    );
    let stored = get(&client, "orphaned-1").await.stored.unwrap();
    assert_eq!(stored.state, DecisionState::Committed);
    let since = stored
        .completing
        .as_ref()
        .expect("the unanswered complete is in the record")
        .since_ms;
    assert!(since >= f.asked_ms, "{since} < {}", f.asked_ms);
    // `decisions list` says so too (from the coordinator's index, which follows the bucket).
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let listed: ListReply = op::<api::List>(&client, "alice", &NoArgs {}).await;
        let row = listed.decisions.into_iter().find(|s| s.request_id == "orphaned-1");
        if row.as_ref().and_then(|r| r.completing_since_ms) == Some(since) {
            break;
        }
        assert!(Instant::now() < end, "listed as {row:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The coordinator that was asked dies with its tries; another starts in its place.
    f.coord.restart().await;
    f.a.proc.signal(Signal::SIGCONT);
    let s = wait_completed(&client, "orphaned-1", Duration::from_secs(30)).await;
    assert!(s.completing.is_none(), "{:?}", s.completing);
    assert!(
        f.coord
            .proc
            .log()
            .contains("reconciler: completing a decision whose complete its cluster has not answered"),
        "the new coordinator's reconciler did it"
    );
    let st = status(&client, "a").await;
    assert!(!st.committed.contains(&"orphaned-1".to_string()), "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_survive_a_coordinator_kill_and_a_second_one_serves_meanwhile() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = slots(&nats, "a", 6, 100).await;
    let _b = slots(&nats, "b", 6, 100).await;
    let mut first = coordinator(&nats, &[]).await;
    let second = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    for c in ["a", "b"] {
        wait_alive(&client, c, true).await;
    }

    let mut decided = Vec::new();
    for i in 0..4 {
        let id = format!("s-{i}");
        let (d, _) = submit(&client, "alice", &submit_msg(&id, job_workflow("s"))).await;
        assert_eq!(d.state, DecisionState::Committed);
        decided.push(d);
    }
    let served = |p: &Spawned| p.log_count("decision stored");
    assert_eq!(served(&first.proc) + served(&second.proc), 4);

    first.proc.kill();
    for i in 4..6 {
        let (d, _) = submit(&client, "bob", &submit_msg(&format!("s-{i}"), job_workflow("s"))).await;
        assert_eq!(d.state, DecisionState::Committed);
        decided.push(d);
    }
    assert!(
        served(&second.proc) >= 2,
        "the second coordinator served while the first was down"
    );
    for d in &decided {
        let got = get(&client, &d.decision.request_id).await.stored.unwrap();
        assert_eq!(&got, d);
    }

    // The first comes back after kill -9 (and the second goes): every decision is there.
    first.restart().await;
    drop(second);
    for d in &decided {
        let got = get(&client, &d.decision.request_id).await.stored.unwrap();
        assert_eq!(&got, d, "survived in the KV bucket");
    }
    let list: ListReply = op::<api::List>(&client, "alice", &NoArgs {}).await;
    assert_eq!(list.decisions.len(), 6);
    assert!(
        list.decisions.windows(2).all(|w| w[0].updated_ms >= w[1].updated_ms),
        "newest first"
    );
    // A repeated id after the restart is still one decision.
    let (again, _) = submit(&client, "alice", &submit_msg("s-0", job_workflow("s"))).await;
    assert_eq!(again, decided[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_submits_for_ten_slots_never_over_commit() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let sizes = [("a", 4usize), ("b", 3), ("c", 3)];
    let mut agents = Vec::new();
    for (name, hosts) in sizes {
        agents.push(slots(&nats, name, hosts, 200).await);
    }
    let _coord = coordinator(&nats, &[]).await;
    let _coord2 = coordinator(&nats, &[]).await;

    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(nats.client().await);
    }
    for (c, _) in sizes {
        wait_alive(&clients[0], c, true).await;
    }
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            tokio::spawn(async move {
                let mut msg = submit_msg(&format!("c-{i}"), job_workflow("storm"));
                msg.timeout_ms = 3000;
                let r: SubmitReply = op::<api::Submit>(&client, &format!("user{}", i % 5), &msg).await;
                r
            })
        })
        .collect();
    let mut committed: Vec<(String, String)> = Vec::new();
    let mut refused = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.error.is_none(), "{:?}", r.error);
        let s = r.stored.expect("every submit gets a decision");
        match s.state {
            DecisionState::Committed => committed.push((
                s.decision.chosen_cluster.clone().unwrap(),
                s.decision.request_id.clone(),
            )),
            DecisionState::Failed => {
                assert!(s.decision.chosen_cluster.is_none());
                refused.push(s);
            }
            other => panic!("unexpected state {other:?}"),
        }
    }
    let client = &clients[0];
    // Admission at commit (docs/design.md): a request is refused only once every cluster it
    // fitted on said it no longer fits, i.e. once its capacity went to acknowledged requests.
    // Nothing completes during the burst, so exactly the 10 places are committed.
    assert_eq!(
        committed.len(),
        10,
        "exactly the 10 free places are committed; committed: {committed:?}\nfirst refusal: {:#?}",
        refused.first().map(|s| (&s.decision.choice, &s.attempts))
    );

    let check = |label: &str, st: &StatusReply, hosts: usize| {
        assert!(st.host_use.len() <= hosts, "{label}: {st:?}");
        for (h, r) in &st.host_use {
            assert!(r.cpu <= 8, "{label}: host {h} over-committed: {r:?}");
        }
    };
    for (name, hosts) in sizes {
        let st = status(client, name).await;
        check(name, &st, hosts);
        let mut mine: Vec<String> = committed
            .iter()
            .filter(|(c, _)| c == name)
            .map(|(_, id)| id.clone())
            .collect();
        let mut theirs = st.committed.clone();
        mine.sort();
        theirs.sort();
        assert_eq!(
            mine, theirs,
            "{name}: the agent committed exactly what the decisions say"
        );
        assert_eq!(cpu_in_use(&st), 8 * theirs.len() as u64, "{name}");
    }
    // No hold leaked: one at a time, the remaining slots fill up exactly, then nothing fits.
    let mut total = committed.len();
    for i in 0..=(10 - committed.len()) {
        let (d, _) = submit(client, "alice", &submit_msg(&format!("fill-{i}"), job_workflow("fill"))).await;
        if d.state == DecisionState::Committed {
            total += 1;
        } else {
            assert_eq!(total, 10, "failed before every slot was used: {:?}", d.decision.choice);
        }
    }
    assert_eq!(total, 10);
    for (name, hosts) in sizes {
        let st = status(client, name).await;
        check(name, &st, hosts);
        assert_eq!(st.committed.len(), hosts, "{name} is full");
        assert!(st.holds.is_empty(), "{name}: {:?}", st.holds);
    }
    drop(agents);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_submit_complete_dry_run_replay_directory_and_bad_input() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let a = slots(&nats, "a", 1, 100).await;
    let dir = tempfile::tempdir().unwrap();
    let directory = dir.path().join("directory.yaml");
    std::fs::write(&directory, "users:\n  alice: [physics]\n  bob: [chem]\n").unwrap();
    let coord = coordinator(&nats, &["--directory", &directory.display().to_string()]).await;
    let client = nats.client().await;
    wait_alive(&client, "a", true).await;

    // Same request id twice: one decision, one commit.
    let msg = submit_msg("idem-1", job_workflow("idem"));
    let (one, _) = submit(&client, "alice", &msg).await;
    assert_eq!(one.state, DecisionState::Committed);
    let (two, _) = submit(&client, "alice", &msg).await;
    assert_eq!(two, one);
    let st = status(&client, "a").await;
    assert_eq!(st.committed, ["idem-1"]);
    assert_eq!(cpu_in_use(&st), 8);
    assert_eq!(std::fs::read_dir(a.scratch()).unwrap().count(), 1, "one volume");
    let line = coord
        .proc
        .log()
        .lines()
        .find(|l| l.contains("decision stored"))
        .unwrap()
        .to_string();
    assert!(
        line.contains("request_id=idem-1") && line.contains("user=alice") && line.contains("op=submit"),
        "every line names the request: {line}"
    );

    // The only slot is taken: bob (chem, not physics) gets nothing, and so does mallory even
    // though she claims physics (the directory decides).
    for user in ["bob", "mallory"] {
        let mut m = submit_msg(&format!("perm-{user}"), job_workflow("perm"));
        m.dry_run = true;
        let (d, _) = submit(&client, user, &m).await;
        let v = &d.decision.clusters["a"].volumes["scratch"];
        assert_eq!(
            v.error.as_ref().map(|e| e.code.as_str()),
            Some("no_provisioner"),
            "{user}: {v:?}"
        );
        assert!(
            d.request.groups.iter().all(|g| g != "physics"),
            "{user}: {:?}",
            d.request.groups
        );
    }

    // Complete frees the capacity and removes the volume (reclaim policy Delete).
    let done: SubmitReply = op::<api::Complete>(
        &client,
        "alice",
        &DecisionRef {
            request_id: "idem-1".into(),
            cancel: false,
            whole: None,
        },
    )
    .await;
    assert!(done.error.is_none(), "{:?}", done.error);
    let done = done.stored.unwrap();
    assert_eq!(done.state, DecisionState::Completed);
    assert!(done.completion.as_ref().is_some_and(|c| c.ok));
    let st = status(&client, "a").await;
    assert!(st.committed.is_empty());
    assert_eq!(cpu_in_use(&st), 0);
    assert_eq!(std::fs::read_dir(a.scratch()).unwrap().count(), 0);
    assert_eq!(
        get(&client, "idem-1").await.stored.unwrap().state,
        DecisionState::Completed
    );

    // A dry run holds nothing, and replays identically.
    let mut dry = submit_msg("dry-1", job_workflow("dry"));
    dry.dry_run = true;
    dry.keep = true;
    let (d, _) = submit(&client, "alice", &dry).await;
    assert_eq!((d.state, d.dry_run), (DecisionState::Planned, true));
    assert_eq!(d.decision.chosen_cluster.as_deref(), Some("a"));
    assert!(d.attempts.is_empty());
    let st = status(&client, "a").await;
    assert!(st.holds.is_empty() && st.committed.is_empty());
    let replay: ReplayReply = op::<api::Replay>(
        &client,
        "alice",
        &DecisionRef {
            request_id: "dry-1".into(),
            cancel: false,
            whole: None,
        },
    )
    .await;
    assert!(replay.identical, "{:?}", replay.differences);
    assert_eq!(replay.replayed.unwrap().chosen_cluster.as_deref(), Some("a"));
    // Completing a dry run is refused and changes nothing.
    let refused: SubmitReply = op::<api::Complete>(
        &client,
        "alice",
        &DecisionRef {
            request_id: "dry-1".into(),
            cancel: false,
            whole: None,
        },
    )
    .await;
    assert_eq!(refused.error.unwrap().code.as_str(), "not_committed");
    // A dry run not asked to be kept is answered in full but not stored: the bucket
    // does not know its id.
    let mut unkept = submit_msg("dry-2", job_workflow("dry"));
    unkept.dry_run = true;
    let (d, _) = submit(&client, "alice", &unkept).await;
    assert_eq!((d.state, d.dry_run), (DecisionState::Planned, true));
    assert_eq!(d.decision.chosen_cluster.as_deref(), Some("a"));
    assert!(
        !d.decision.clusters["a"].trace.is_empty(),
        "the answer carries the trace"
    );
    let missing = get(&client, "dry-2").await;
    assert!(missing.stored.is_none(), "{missing:?}");
    assert_eq!(missing.error.unwrap().code.as_str(), "not_found");

    // Bad input gets an error and changes nothing.
    let before: ListReply = op::<api::List>(&client, "alice", &NoArgs {}).await;
    let subject = Subjects::default().coordinator(fedvol_proto::coordinator::CoordinatorOp::Submit, "alice");
    for body in [
        b"not json".to_vec(),
        br#"{"v": 2, "workflow": {}}"#.to_vec(),
        br#"{"v": 1, "workflow": 5}"#.to_vec(),
        fedvol_tests::versioned_body(&submit_msg("bad id!", job_workflow("x"))),
        fedvol_tests::versioned_body(&submit_msg(&"x".repeat(300), job_workflow("x"))),
    ] {
        let r: SubmitReply = call(&client, &subject, body).await;
        assert_eq!(r.error.unwrap().code.as_str(), "bad_request");
        assert!(r.stored.is_none());
    }
    let r = get(&client, "never-submitted").await;
    assert_eq!(r.error.unwrap().code.as_str(), "not_found");
    let after: ListReply = op::<api::List>(&client, "alice", &NoArgs {}).await;
    assert_eq!(after, before);
    let st = status(&client, "a").await;
    assert!(st.holds.is_empty() && st.committed.is_empty());

    // Five clients racing with one request id: one decision, one commit, the same answer.
    let racers: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                submit(&client, "alice", &submit_msg("race-1", job_workflow("race")))
                    .await
                    .0
            })
        })
        .collect();
    let mut answers = Vec::new();
    for r in racers {
        answers.push(r.await.unwrap());
    }
    assert_eq!(answers[0].state, DecisionState::Committed);
    assert!(
        answers.iter().all(|a| a == &answers[0]),
        "every racer got the stored decision"
    );
    assert_eq!(answers[0].attempts.len(), 1);
    let st = status(&client, "a").await;
    assert_eq!(st.committed, ["race-1"]);
    assert_eq!(cpu_in_use(&st), 8);
    assert!(st.holds.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_exits_1_with_a_clear_error() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("coordinator.yaml");
    std::fs::write(&cfg, "deadlineMS: 5\n").unwrap();
    let run = |args: Vec<String>| {
        std::process::Command::new(fedvol_tests::bin_path("fedvol-coordinator"))
            .args(args)
            .logged_in()
            .output()
            .unwrap()
    };
    let out = run(vec!["--config".into(), cfg.display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean `deadlineMs`"), "{err}");
}

/// `holdTtlMs` is read by no coordinator (plans hold nothing; a commit is admitted on the
/// agent). A configuration written for an earlier release that still sets it, in the file or as
/// `--hold-ttl-ms`, starts and serves, and the coordinator says that it ignores it, naming the
/// key and where it was set (docs/design.md §3: the contract only grows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_still_sets_hold_ttl_ms_starts_with_a_warning_naming_it() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("coordinator.yaml");
    std::fs::write(&cfg, "deadlineMs: 800\nholdTtlMs: 30000\ndiscoveryMs: 100\n").unwrap();
    let cfg = cfg.display().to_string();
    let mut co = Spawned::bin(
        "fedvol-coordinator",
        ["--config", &cfg, "--nats", &nats.url(), "--hold-ttl-ms", "5000"],
    );
    co.wait_for_log("coordinator ready", Duration::from_secs(30)).await;
    let log = co.log();
    assert!(
        log.contains("coordinator.yaml:2:12: holdTtlMs: no longer read") && log.contains("ignored"),
        "the file's key is named with its place:\n{log}"
    );
    assert!(
        log.contains("--hold-ttl-ms or FEDVOL_HOLD_TTL_MS (`holdTtlMs`): no longer read"),
        "the flag is named:\n{log}"
    );
    co.kill();
}

/// A daemon started before its NATS server (or in a start storm the server cannot take at
/// once) waits with backoff and jitter, saying so, and comes up when the server does; an
/// identity the server refuses is an error at once (exit 1), since waiting cannot fix it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_started_before_nats_waits_for_it_but_a_refused_login_exits_1() {
    let _serial = SERIAL.lock().await;
    let mut nats = NatsServer::start();
    nats.stop();
    let mut co = Spawned::bin("fedvol-coordinator", ["--nats", &nats.url(), "--discovery-ms", "100"]);
    co.wait_for_log("cannot connect to NATS yet; retrying", Duration::from_secs(20))
        .await;
    assert!(
        co.try_status().is_none(),
        "the coordinator waits instead of exiting:\n{}",
        co.log()
    );
    nats.restart();
    co.wait_for_log("coordinator ready", Duration::from_secs(30)).await;
    co.kill();

    let out = std::process::Command::new(fedvol_tests::bin_path("fedvol-coordinator"))
        .args([
            "--nats",
            &nats.url(),
            "--nats-user",
            "coordinator",
            "--nats-password",
            "wrong",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot connect to NATS") && err.contains("authorization violation"),
        "{err}"
    );
}

/// The reconciler: a coordinator killed (-9) while its commit runs leaves the
/// decision `planned`; another coordinator's reconciler takes it over without anyone submitting
/// it again, settles the pending attempt with the agent (which did commit) and stores it
/// `committed`, once, with the agent's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_settles_a_decision_its_coordinator_abandoned() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let root = tempfile::tempdir().unwrap();
    // A slow out-of-tree provisioner: each volume takes 1.5 s, time to kill the coordinator.
    let mut provisioner = Spawned::bin(
        "fedvol-example-provisioner",
        [
            "--nats",
            &nats.url(),
            "--cluster",
            "slow",
            "--name",
            "example.com/dirs",
            "--delay-ms",
            "1500",
            "--root",
            &root.path().display().to_string(),
        ],
    );
    provisioner.wait_for_log("listening", Duration::from_secs(30)).await;
    let mut agent = AgentProc::start(&nats, 200, |_| {
        "cluster: slow\nprovisioners:\n  dirs:\n    driver: {type: external, provisioner: example.com/dirs}\n    ephemeral: all\nzones:\n  z1:\n    hosts:\n      - {name: h0, capacity: {cpu: 8, memory: 32GiB, instances: 4}}\n".to_string()
    })
    .await;
    let args = [
        "--commit-timeout-ms",
        "2500",
        "--commit-attempts",
        "1",
        "--discovery-ms",
        "300",
        "--reconcile-every-ms",
        "300",
    ];
    let mut first = CoordinatorProc::start(&nats, &args).await;
    let client = nats.client().await;
    let body = fedvol_tests::versioned_body(&submit_msg("abandoned-1", job_workflow("slow")));
    client
        .publish(Subjects::default().coordinator(api::Submit::OP, "alice"), body.into())
        .await
        .unwrap();
    agent.proc.wait_for_log("provisioning", Duration::from_secs(10)).await;
    first.proc.kill();
    // Nobody submits it again: the second coordinator's reconciler settles it, once the commit
    // phase's bound has passed (it is `planned`, with its attempt pending, until then).
    let second = CoordinatorProc::start(&nats, &args).await;
    let left = get(&client, "abandoned-1")
        .await
        .stored
        .expect("stored before the commit");
    assert_eq!(left.state, DecisionState::Planned, "{left:?}");
    assert!(
        left.attempts.iter().any(|a| a.pending && a.cluster == "slow"),
        "{:?}",
        left.attempts
    );
    let settled = wait_until(Duration::from_secs(40), Duration::from_millis(200), || {
        second.proc.log().contains("reconciler: decision settled")
    })
    .await;
    assert!(settled, "{}", second.proc.log());
    let d = get(&client, "abandoned-1").await.stored.unwrap();
    assert_eq!(d.state, DecisionState::Committed, "{d:?}");
    assert_eq!(d.decision.chosen_cluster.as_deref(), Some("slow"));
    assert!(d.attempts.iter().all(|a| !a.pending), "{:?}", d.attempts);
    assert_eq!(d.attempts.iter().filter(|a| a.ok).count(), 1, "{:?}", d.attempts);
    let st = status(&client, "slow").await;
    assert_eq!(st.committed, ["abandoned-1"], "committed once");
    assert!(st.holds.is_empty());
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1, "one volume");
}

/// Past three clusters a decision keeps the whole answer only of the chosen cluster and of the
/// two a failed commit would try next; the others are stored as summaries (docs/design.md §4),
/// and `decisions show` says so. Without it a decision grows with clusters × trace and a
/// default NATS cannot carry one past about 120 clusters (BENCHMARKS.md). With 5 clusters the
/// agents answer whole and the coordinator summarizes; past 16 the agents answer with
/// summaries and keep their whole answers, and the coordinator fetches the three it keeps
/// (`answer`); both under the shipped permissions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_three_clusters_the_unlisted_answers_are_stored_as_summaries() {
    let _serial = SERIAL.lock().await;
    for n in [5, fedvol_common::summary::AGENT_SUMMARIES_PAST + 1] {
        summaries_of(n).await;
    }
}

async fn summaries_of(n: usize) {
    let nats = NatsServer::start();
    let names: Vec<String> = (0..n).map(|i| format!("s{i:02}")).collect();
    let mut agents = Vec::new();
    for name in &names {
        agents.push(slots(&nats, name, 2, 300).await);
    }
    let _co = coordinator(&nats, &[]).await;
    let client = nats.client().await;
    for name in &names {
        wait_alive(&client, name, true).await;
    }
    let (stored, _) = submit(&client, "alice", &submit_msg("summaries-1", job_workflow("w"))).await;
    assert_eq!(stored.state, DecisionState::Committed);
    let d = &stored.decision;
    let chosen = d.chosen_cluster.clone().unwrap();
    let whole: Vec<&String> = d
        .clusters
        .iter()
        .filter(|(_, c)| !c.summarized)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(whole.len(), 3, "{n} clusters: {whole:?}");
    assert!(whole.contains(&&chosen));
    assert!(d.clusters.keys().eq(names.iter()), "the clusters keep their order");
    for (name, c) in &d.clusters {
        assert!(c.feasible && c.jobs["j"].host.is_some(), "{name} keeps its picks");
        if c.summarized {
            assert!(c.allocations.is_empty(), "{name}");
            assert!(c.volumes.values().all(|v| v.new_volume.is_none()), "{name}");
            assert!(
                c.trace.iter().all(|t| t.rejected.is_empty() && t.passed < t.considered),
                "{name}"
            );
        } else {
            assert!(!c.allocations.is_empty() && !c.trace.is_empty(), "{name} whole");
        }
    }
    // What the user reads, at 100 columns.
    let out = fedvol_tests::cli::fedvol_as(&nats, "alice", &["decisions", "show", "summaries-1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains(&format!("{} of {n} clusters' answers are stored as summaries", n - 3)),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    if n > 12 {
        assert!(text.contains(&format!("{n} clusters by outcome")), "{text}");
    }

    // Past 16 clusters a summarized cluster's agent keeps its whole answer; an unknown request
    // has none. (Up to 16, the agents were not asked to keep any.)
    let (summarized, _) = d.clusters.iter().find(|(_, c)| c.summarized).unwrap();
    let ask = |id: &str| fedvol_proto::agent::AnswerMsg {
        request_id: id.into(),
        deadline_ms: fedvol_proto::now_ms() + 5_000,
    };
    let subject = Subjects::default().cluster(summarized, AgentOp::Answer);
    let kept = fedvol_proto::rpc::call::<fedvol_proto::agent::Answer>(
        &client,
        &subject,
        &ask("summaries-1"),
        Duration::from_secs(5),
        "test",
    )
    .await
    .unwrap();
    if n > fedvol_common::summary::AGENT_SUMMARIES_PAST {
        let kept = kept.expect("the agent keeps the whole answer");
        assert!(!kept.decision.summarized && !kept.decision.allocations.is_empty());
    } else {
        assert!(kept.is_err(), "{n} clusters: whole answers were sent, none kept");
    }
    // `decisions show --cluster C` shows C's whole answer while its agent keeps it, and says
    // when it keeps it no longer; the stored decision is left as it is.
    let out = fedvol_tests::cli::fedvol_as(
        &nats,
        "alice",
        &[
            "decisions",
            "show",
            "summaries-1",
            "--cluster",
            summarized,
            "-o",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", fedvol_tests::kit::output_text(&out));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let slot = &shown["decision"]["clusters"][summarized.as_str()];
    let stderr = String::from_utf8_lossy(&out.stderr);
    if n > fedvol_common::summary::AGENT_SUMMARIES_PAST {
        assert!(slot["allocations"].is_array() && slot["summarized"].is_null(), "{slot}");
        assert!(!stderr.contains("shown as its summary"), "{stderr}");
    } else {
        assert!(slot.is_array(), "{slot}");
        assert!(
            stderr.contains(&format!("cluster {summarized}'s answer is shown as its summary")),
            "{stderr}"
        );
    }
    // The web view: a summary links to its whole answer, which the page then shows.
    let mut cmd = std::process::Command::new(fedvol_tests::bin_path("fedvol"));
    let url = nats.url();
    cmd.args(["--nats", url.as_str(), "-u", "alice", "ui", "--listen", "127.0.0.1:0"]);
    let mut ui = Spawned::start(cmd);
    ui.wait_for_log("serving the read-only view on http://", Duration::from_secs(20))
        .await;
    let addr: std::net::SocketAddr = ui
        .log()
        .split("view on http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|a| a.parse().ok())
        .expect("the ui's address");
    let card = |page: &str| -> String {
        let at = page
            .find(&format!("id=\"cluster-{summarized}\""))
            .expect("the cluster's card");
        let rest = &page[at + 1..];
        rest[..rest.find("id=\"cluster-").unwrap_or(rest.len())].to_string()
    };
    let (code, page) = fedvol_tests::http::get(addr, "/decisions/summaries-1").await.unwrap();
    assert_eq!(code, 200);
    assert!(
        card(&page).contains(&format!("href=\"?whole={summarized}#cluster-{summarized}\"")),
        "{}",
        card(&page)
    );
    let (code, page) = fedvol_tests::http::get(addr, &format!("/decisions/summaries-1?whole={summarized}"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    if n > fedvol_common::summary::AGENT_SUMMARIES_PAST {
        assert!(!card(&page).contains("Stored as a summary"), "{}", card(&page));
    } else {
        assert!(
            card(&page).contains("keeps no whole answer for this request any more"),
            "{}",
            card(&page)
        );
    }
    assert!(get(&client, "summaries-1").await.stored.unwrap().decision.clusters[summarized].summarized);
    let out = fedvol_tests::cli::fedvol_as(
        &nats,
        "alice",
        &["decisions", "show", "summaries-1", "--cluster", "nowhere"],
    );
    assert_eq!(out.status.code(), Some(64), "{}", fedvol_tests::kit::output_text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cluster `nowhere` took no part"));

    let none = fedvol_proto::rpc::call::<fedvol_proto::agent::Answer>(
        &client,
        &subject,
        &ask("never-planned"),
        Duration::from_secs(5),
        "test",
    )
    .await
    .unwrap()
    .expect_err("nothing kept");
    assert!(
        none.error
            .message
            .contains("keeps no whole answer for request `never-planned`"),
        "{none:?}"
    );

    // A dry run keeps three whole answers too.
    let mut dry = submit_msg("summaries-2", job_workflow("w"));
    dry.dry_run = true;
    let (planned, _) = submit(&client, "alice", &dry).await;
    assert_eq!(planned.decision.clusters.values().filter(|c| !c.summarized).count(), 3);
    assert!(
        planned
            .decision
            .clusters
            .values()
            .filter(|c| !c.summarized)
            .all(|c| !c.allocations.is_empty()),
        "{:?}",
        planned.decision
    );
    assert!(nats.violations().is_empty(), "{:?}", nats.violations());
}
