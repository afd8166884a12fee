//! The agent end to end: a real nats-server, `fedvol-agent` as a real process, requests over
//! NATS.

use std::path::Path;
use std::time::Duration;

use fedvol_common::funnel::PlanRequest;
use fedvol_common::funnel::why_not::Target;
use fedvol_formats::parse_workflow_str;
use fedvol_proto::agent::{ActionMsg, ActionReply, AgentOp, PlanMsg, PlanReply, StatusReply};
use fedvol_proto::{Subjects, now_ms};
use fedvol_tests::federation::{AgentProc, slots_inventory};
use fedvol_tests::versioned_body;
use fedvol_tests::{NatsServer, Spawned};
use futures::StreamExt;

/// An agent of cluster `name` with `hosts` one-job hosts and an open hostpath provisioner.
/// These tests talk to agents alone, with no coordinator to restore a fresh state, so the
/// agents admit commits at once ([`AgentProc::start_alone`]).
async fn agent(nats: &NatsServer, name: &str, hosts: usize) -> AgentProc {
    AgentProc::start_alone(nats, 100, |d| slots_inventory(name, hosts, d, "all")).await
}

/// An agent for the inventory `text(scratch dir)` (no coordinator: [`AgentProc::start_alone`]).
async fn agent_with(nats: &NatsServer, text: impl FnOnce(&Path) -> String) -> AgentProc {
    AgentProc::start_alone(nats, 100, |d| {
        let scratch = d.join("scratch");
        std::fs::create_dir_all(&scratch).unwrap();
        text(&scratch)
    })
    .await
}

fn workflow() -> fedvol_common::model::Workflow {
    let text = "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";
    parse_workflow_str("wf.yaml", "wf", text).unwrap().value
}

fn plan_msg(id: &str, reserve: bool, ttl_ms: u64) -> PlanMsg {
    PlanMsg {
        request: PlanRequest::new(id, workflow(), "u").with_seed(1).with_trace_limit(20),
        deadline_ms: now_ms() + 10_000,
        reserve,
        ttl_ms,
        summary: false,
        dry_run: false,
    }
}

fn action(id: &str) -> ActionMsg {
    ActionMsg::new(id, now_ms() + 10_000)
}

/// Scatter-gather: one fresh inbox, one publish, replies until `want` or `wait`.
async fn gather(
    client: &async_nats::Client,
    subject: &str,
    body: Vec<u8>,
    want: usize,
    wait: Duration,
) -> Vec<serde_json::Value> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, body.into())
        .await
        .unwrap();
    client.flush().await.unwrap();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while out.len() < want {
        match tokio::time::timeout_at(deadline, sub.next()).await {
            Ok(Some(m)) => {
                if m.status.is_some() && m.payload.is_empty() {
                    continue; // no responders
                }
                out.push(serde_json::from_slice(&m.payload).unwrap());
            }
            _ => break,
        }
    }
    out
}

async fn ask<T: serde::de::DeserializeOwned>(
    client: &async_nats::Client,
    subject: &str,
    body: &impl serde::Serialize,
) -> T {
    let mut r = gather(client, subject, versioned_body(body), 1, Duration::from_secs(10)).await;
    assert_eq!(r.len(), 1, "no answer on {subject}");
    serde_json::from_value(r.remove(0)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_reserve_commit_complete_release_and_expiry_round_trips() {
    let nats = NatsServer::start();
    let agent = agent(&nats, "t1", 2).await;
    let client = nats.client().await;
    let s = Subjects::default();
    let plan = s.cluster("t1", AgentOp::Plan);

    let dry: PlanReply = ask(&client, &plan, &plan_msg("dry", false, 0)).await;
    assert!(dry.decision.feasible && dry.hold.is_none());

    let r1: PlanReply = ask(&client, &plan, &plan_msg("r1", true, 60_000)).await;
    assert!(r1.hold.is_some(), "{r1:?}");
    let again: PlanReply = ask(&client, &plan, &plan_msg("r1", true, 60_000)).await;
    assert_eq!(again.hold, r1.hold, "same request id, same hold");
    assert_eq!(again.decision.volumes, r1.decision.volumes);

    let c1: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Commit), &action("r1")).await;
    assert!(c1.ok, "{c1:?}");
    let vol = &c1.volumes[0];
    assert_eq!(vol.outcome, "provisioned");
    let dir = agent.scratch().join(&vol.volume);
    assert!(dir.is_dir(), "hostpath directory {} created", dir.display());
    let c1_again: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Commit), &action("r1")).await;
    assert_eq!(c1_again, c1, "a repeated commit gets the stored answer");

    let st: StatusReply = ask(&client, &s.cluster("t1", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert_eq!(st.committed, vec!["r1".to_string()]);
    assert_eq!(st.host_use.values().map(|r| r.cpu).sum::<u64>(), 8);
    let events: Vec<&str> = st.volumes[0].events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(events, ["Provisioning", "ProvisioningSucceeded", "Bound"]);

    let done: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Complete), &action("r1")).await;
    assert!(done.ok && done.volumes[0].outcome == "deleted", "{done:?}");
    assert!(!dir.exists(), "reclaim policy Delete removes the directory");
    let done_again: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Complete), &action("r1")).await;
    assert_eq!(done_again, done);

    // Release frees a hold; releasing again is fine.
    let r2: PlanReply = ask(&client, &plan, &plan_msg("r2", true, 60_000)).await;
    assert!(r2.hold.is_some());
    let rel: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Release), &action("r2")).await;
    assert!(rel.ok);
    let st: StatusReply = ask(&client, &s.cluster("t1", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert!(st.holds.is_empty());

    // A hold with a short lease lapses and its commit is refused.
    let r3: PlanReply = ask(&client, &plan, &plan_msg("r3", true, 200)).await;
    assert!(r3.hold.is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let st: StatusReply = ask(&client, &s.cluster("t1", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert!(st.holds.is_empty(), "swept: {:?}", st.holds);
    let late: ActionReply = ask(&client, &s.cluster("t1", AgentOp::Commit), &action("r3")).await;
    assert!(!late.ok);
    assert_eq!(late.error.unwrap().code.as_str(), "no_hold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_racing_reservations_for_ten_slots_get_exactly_ten() {
    let nats = NatsServer::start();
    let _agent = agent(&nats, "race", 10).await;
    let client = nats.client().await;
    let subject = Subjects::default().cluster("race", AgentOp::Plan);
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (client, subject) = (client.clone(), subject.clone());
            tokio::spawn(async move {
                let r: PlanReply = ask(&client, &subject, &plan_msg(&format!("race-{i}"), true, 60_000)).await;
                r.hold.is_some()
            })
        })
        .collect();
    let mut granted = 0;
    for t in tasks {
        if t.await.unwrap() {
            granted += 1;
        }
    }
    assert_eq!(granted, 10, "every request answered, exactly one hold per free slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_cluster_and_each_cluster_answers_a_broadcast_once() {
    let nats = NatsServer::start();
    let a1 = agent(&nats, "a", 1).await;
    let a2 = agent(&nats, "a", 1).await;
    let _b = agent(&nats, "b", 1).await;
    let client = nats.client().await;
    let subject = Subjects::default().plan();
    // 24 broadcasts at once; each waits long enough that a duplicate answer would show up.
    let all = futures::future::join_all((0..24).map(|i| {
        let body = versioned_body(&plan_msg(&format!("bc-{i}"), false, 0));
        let (client, subject) = (client.clone(), subject.clone());
        async move { gather(&client, &subject, body, 3, Duration::from_millis(1500)).await }
    }))
    .await;
    for (i, replies) in all.iter().enumerate() {
        let mut clusters: Vec<String> = replies
            .iter()
            .map(|r| r["cluster"].as_str().unwrap().to_string())
            .collect();
        clusters.sort();
        assert_eq!(clusters, ["a", "b"], "broadcast {i}: one answer per cluster");
    }
    let (n1, n2) = (a1.proc.log_count("plan answered"), a2.proc.log_count("plan answered"));
    assert_eq!(n1 + n2, 24);
    assert!(n1 > 0 && n2 > 0, "both replicas of cluster a served ({n1} + {n2})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_an_acknowledged_commit_loses_nothing_and_never_double_books() {
    let nats = NatsServer::start();
    let mut agent = agent(&nats, "k", 2).await;
    let client = nats.client().await;
    let s = Subjects::default();
    let _: PlanReply = ask(&client, &s.cluster("k", AgentOp::Plan), &plan_msg("k1", true, 60_000)).await;
    let acked: ActionReply = ask(&client, &s.cluster("k", AgentOp::Commit), &action("k1")).await;
    assert!(acked.ok);
    let _: PlanReply = ask(&client, &s.cluster("k", AgentOp::Plan), &plan_msg("k2", true, 60_000)).await;

    agent.crash_and_restart().await;

    let again: ActionReply = ask(&client, &s.cluster("k", AgentOp::Commit), &action("k1")).await;
    assert_eq!(
        again, acked,
        "the acknowledged commit survived, and retrying it changes nothing"
    );
    let st: StatusReply = ask(&client, &s.cluster("k", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert_eq!(st.committed, vec!["k1".to_string()]);
    assert_eq!(st.holds.len(), 1, "the hold of k2 survived too");
    assert_eq!(
        st.host_use.values().map(|r| r.cpu).sum::<u64>(),
        16,
        "k1 and k2, each counted once"
    );
    // Both slots are taken: a third reservation gets nothing.
    let k3: PlanReply = ask(&client, &s.cluster("k", AgentOp::Plan), &plan_msg("k3", true, 60_000)).await;
    assert!(k3.hold.is_none());
    assert_eq!(
        std::fs::read_dir(agent.scratch()).unwrap().count(),
        1,
        "one volume directory, not two"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_the_middle_of_a_commit_then_a_retry_commits_once() {
    let nats = NatsServer::start();
    // The volume comes from the example external provisioner, slowed down so that the agent can
    // be killed while the commit is under way (after the hold is marked, before the reply).
    let mut agent = agent_with(&nats, |_| {
        "cluster: x\nprovisioners:\n  dirs:\n    driver: {type: external, provisioner: example.com/dirs}\n    ephemeral: all\nzones:\n  z1:\n    hosts:\n      - {name: h0, capacity: {cpu: 8, memory: 32GiB}}\n      - {name: h1, capacity: {cpu: 8, memory: 32GiB}}\n".to_string()
    })
    .await;
    let root = agent.dir.path().join("external");
    std::fs::create_dir_all(&root).unwrap();
    let root_arg = root.display().to_string();
    let url = nats.url();
    let args = [
        "--nats",
        &url,
        "--cluster",
        "x",
        "--name",
        "example.com/dirs",
        "--root",
        &root_arg,
        "--delay-ms",
        "1500",
    ];
    let mut provisioner = Spawned::bin("fedvol-example-provisioner", args);
    provisioner.wait_for_log("listening", Duration::from_secs(20)).await;
    let client = nats.client().await;
    let s = Subjects::default();
    let _: PlanReply = ask(&client, &s.cluster("x", AgentOp::Plan), &plan_msg("m1", true, 60_000)).await;
    let body = versioned_body(&action("m1"));
    client
        .publish(s.cluster("x", AgentOp::Commit), body.into())
        .await
        .unwrap();
    agent.proc.wait_for_log("provisioning", Duration::from_secs(10)).await;
    agent.crash_and_restart().await;

    let st: StatusReply = ask(&client, &s.cluster("x", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert!(
        st.committed.is_empty(),
        "the commit was never acknowledged, so it did not happen"
    );
    assert_eq!(st.holds.len(), 1, "the hold is still there");
    let done: ActionReply = ask(&client, &s.cluster("x", AgentOp::Commit), &action("m1")).await;
    assert!(done.ok, "{done:?}");
    let again: ActionReply = ask(&client, &s.cluster("x", AgentOp::Commit), &action("m1")).await;
    assert_eq!(again, done);
    let st: StatusReply = ask(&client, &s.cluster("x", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert_eq!(st.committed, vec!["m1".to_string()]);
    assert_eq!(st.host_use.values().map(|r| r.cpu).sum::<u64>(), 8, "booked once");
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        1,
        "one asset, created once or idempotently twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_not_names_the_blocking_stage_every_rule_and_a_hint() {
    let nats = NatsServer::start();
    let _agent = agent_with(&nats, |scratch| {
        format!(
            "cluster: w\nprovisioners:\n  keep:\n    driver: {{type: hostpath, path: '{}'}}\n    access: all\n    create: all\nvolumes:\n  - {{name: small, provisioner: keep, size: 2Gi, accessModes: [ReadWriteOnce]}}\nzones:\n  z1:\n    hosts:\n      - {{name: big, capacity: {{cpu: 64, memory: 256GiB}}}}\n      - {{name: tiny, capacity: {{cpu: 2, memory: 4GiB}}, power: OFF}}\n",
            scratch.display()
        )
    })
    .await;
    let client = nats.client().await;
    let s = Subjects::default();
    let mut req = plan_msg("q1", false, 0).request;
    req.workflow = parse_workflow_str(
        "c.yaml",
        "c",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  storageClassName: keep\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 5Gi}}\n",
    )
    .unwrap()
    .value;
    let msg = fedvol_proto::agent::WhyNotMsg {
        request: req.clone(),
        deadline_ms: now_ms() + 10_000,
        target: Target {
            provisioner: Some("keep".into()),
            ..Target::default()
        },
    };
    let r: fedvol_proto::agent::WhyNotReply = ask(&client, &s.cluster("w", AgentOp::WhyNot), &msg).await;
    assert!(r.blockers.is_empty(), "provisioner keep is not rejected: {r:?}");
    // The volume: why was `small` not bound? Capacity, with a hint.
    let d: PlanReply = ask(
        &client,
        &s.cluster("w", AgentOp::Plan),
        &PlanMsg {
            request: req.clone(),
            ..plan_msg("q1", false, 0)
        },
    )
    .await;
    let rej = d
        .decision
        .trace
        .iter()
        .flat_map(|t| &t.rejected)
        .find(|r| r.candidate == "small")
        .expect("small rejected");
    assert_eq!(rej.reasons[0].code, "capacity");

    // A host that is powered off: every rule and a hint.
    req.workflow = workflow();
    let msg = fedvol_proto::agent::WhyNotMsg {
        request: req,
        target: Target {
            host: Some("tiny".into()),
            ..Target::default()
        },
        ..msg
    };
    let r: fedvol_proto::agent::WhyNotReply = ask(&client, &s.cluster("w", AgentOp::WhyNot), &msg).await;
    let b = &r.blockers[0];
    assert_eq!((b.stage.as_str(), b.candidate.as_str()), ("host.power", "z1/tiny"));
    assert_eq!(b.hint.as_deref(), Some("fits once the host is powered on"));
    assert!(r.summary.contains("host.power"), "{}", r.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_inventory_on_reload_keeps_the_old_one_serving() {
    let nats = NatsServer::start();
    let mut agent = agent(&nats, "r", 1).await;
    let client = nats.client().await;
    let s = Subjects::default();
    let before: StatusReply = ask(&client, &s.cluster("r", AgentOp::Status), &serde_json::json!({"v": 1})).await;

    let good = std::fs::read_to_string(agent.inventory()).unwrap();
    std::fs::write(agent.inventory(), good.replace("provisioners:", "provisoners:")).unwrap();
    agent.proc.signal(nix::sys::signal::Signal::SIGHUP);
    agent
        .proc
        .wait_for_log("inventory reload refused", Duration::from_secs(10))
        .await;
    assert!(
        agent.proc.log().contains("did you mean `provisioners`"),
        "the errors are logged"
    );
    let still: PlanReply = ask(&client, &s.cluster("r", AgentOp::Plan), &plan_msg("p1", false, 0)).await;
    assert!(still.decision.feasible);
    assert_eq!(
        still.decision.inventory_version.as_deref(),
        Some(before.inventory_version.as_str())
    );

    std::fs::write(agent.inventory(), good.replace("h0", "h0-renamed")).unwrap();
    agent.proc.signal(nix::sys::signal::Signal::SIGHUP);
    agent
        .proc
        .wait_for_log("inventory reloaded", Duration::from_secs(10))
        .await;
    let after: StatusReply = ask(&client, &s.cluster("r", AgentOp::Status), &serde_json::json!({"v": 1})).await;
    assert_ne!(after.inventory_version, before.inventory_version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_an_error_and_the_agent_keeps_serving() {
    let nats = NatsServer::start();
    let _agent = agent(&nats, "m", 1).await;
    let client = nats.client().await;
    let s = Subjects::default();
    for body in [
        &b"not json"[..],
        br#"{"v": 9, "request": {}}"#,
        br#"{"v": 1, "request": 5}"#,
    ] {
        let r = gather(
            &client,
            &s.cluster("m", AgentOp::Plan),
            body.to_vec(),
            1,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(r[0]["error"]["code"], "bad_request", "{r:?}");
    }
    let ok: PlanReply = ask(&client, &s.cluster("m", AgentOp::Plan), &plan_msg("fine", false, 0)).await;
    assert!(ok.decision.feasible);
    // A request past its deadline is dropped, not answered late.
    let mut late = plan_msg("late", false, 0);
    late.deadline_ms = now_ms().saturating_sub(1);
    let r = gather(
        &client,
        &s.cluster("m", AgentOp::Plan),
        versioned_body(&late),
        1,
        Duration::from_millis(500),
    )
    .await;
    assert!(r.is_empty(), "no late answer: {r:?}");
}

#[test]
fn plan_messages_round_trip_through_json() {
    let m = plan_msg("x", true, 5);
    let back: PlanMsg = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
    assert_eq!(back, m);
}
