//! Federation-wide policy end to end: quotas summed over every cluster's live
//! commits, exact under racing submits to several coordinators; priority classes and the queue
//! of submits that wait for capacity. A real nats-server, `fedvol-agent`s and
//! `fedvol-coordinator`s as processes; the `fedvol` CLI where a user would use it.
//!
//! The quota counts follow Kubernetes' ResourceQuota (kubernetes.io, "Resource Quotas",
//! "Storage Resource Quota": `requests.storage` sums the claims' requests,
//! `persistentvolumeclaims` counts them); priority classes map names to numbers like
//! Kubernetes' PriorityClass (kubernetes.io, "Pod Priority and Preemption", "PriorityClass"),
//! without preemption.

use fedvol_tests::shipped::LoggedIn;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use fedvol_common::quota::{Resource, Scope};
use fedvol_proto::Code;
use fedvol_proto::coordinator::{self as api, DecisionRef, SubmitMsg, SubmitReply};
use fedvol_proto::decisions::DecisionState;
use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::load::{coordinator_op, roomy_inventory, small_workflow};
use fedvol_tests::{NatsServer, bin_path};

/// One test at a time (each runs several processes on a 2-core machine).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

use fedvol_tests::cli::fedvol_as as fedvol;

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A coordinator whose configuration file is `config` (written to a temporary directory kept
/// alive by the returned guard).
async fn coordinator(nats: &NatsServer, config: &str, extra: &[&str]) -> (CoordinatorProc, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coordinator.yaml");
    std::fs::write(&path, config).unwrap();
    let p = path.display().to_string();
    let mut args = vec![
        "--config",
        p.as_str(),
        "--deadline-ms",
        "1500",
        "--discovery-ms",
        "300",
        "--commit-timeout-ms",
        "3000",
    ];
    args.extend_from_slice(extra);
    (CoordinatorProc::start(nats, &args).await, dir)
}

/// A Fuzzfile in project `project` with one `size` scratch volume and one job of `cores` cores.
fn workflow_file(dir: &Path, name: &str, project: &str, size: &str, cores: u64, extra: &str) -> String {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!(
            "version: v4\nproject: {project}\n{extra}volumes:\n  scratch:\n    size: {size}\njobs:\n  j:\n    image: {{uri: docker://a}}\n    mounts: {{/s: scratch}}\n    resource: {{cpu: {{cores: {cores}}}, memory: {{size: 1GiB}}}}\n"
        ),
    )
    .unwrap();
    p.display().to_string()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_refuses_with_exact_figures_survives_a_restart_and_frees_on_complete() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 4, d, "all")).await;
    let config = "quotas:\n  - {project: genomics, storage: 2MiB, cpu: 24}\n  - {user: '*', volumes: 5}\n";
    let (mut coord, _cfg) = coordinator(&nats, config, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "seq", "genomics", "1MiB", 8, "");

    for i in 0..2 {
        let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", &format!("q-{i}")]);
        assert!(o.status.success(), "{}", out(&o));
        assert!(out(&o).contains("state: committed"), "{}", out(&o));
    }
    // The third would make 3MiB of a 2MiB quota: refused before any cluster is asked, with the
    // quota, its use, the request and the limit.
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "q-2"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "refused = not placed: {text}");
    assert!(
        text.contains("refused: quota exceeded: project genomics: storage 2MiB used + 1MiB requested > 2MiB limit"),
        "{text}"
    );
    assert!(text.contains("exceeded (0B left)"), "the quota table: {text}");
    assert!(
        text.contains("user alice"),
        "every quota that applies is listed: {text}"
    );
    assert!(
        text.contains("error: submit: quota exceeded: project genomics: storage"),
        "{text}"
    );

    // The stored decision says the same in JSON, with exact figures (bytes).
    let o = fedvol(&nats, "alice", &["decisions", "show", "q-2", "-o", "json"]);
    let d = json(&o);
    assert_eq!(d["state"], "failed");
    assert_eq!(d["decision"]["refused"]["code"], "quota_exceeded");
    let storage = d["decision"]["quota"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["resource"] == "storage")
        .unwrap()
        .clone();
    assert_eq!(storage["scope"], "project");
    assert_eq!(storage["name"], "genomics");
    assert_eq!(storage["used"], 2 * 1_048_576);
    assert_eq!(storage["requested"], 1_048_576);
    assert_eq!(storage["limit"], 2 * 1_048_576);
    assert_eq!(storage["exceeded"], true);
    assert!(
        d["decision"]["clusters"].as_object().unwrap().is_empty(),
        "no cluster was asked"
    );

    // A dry run shows the refusal too, and counts nothing.
    let o = fedvol(&nats, "alice", &["submit", &wf, "--dry-run"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("storage 2MiB used + 1MiB requested > 2MiB limit"),
        "{}",
        out(&o)
    );
    // Another project is not limited by genomics' quota.
    let other = workflow_file(dir.path(), "other", "physics", "1MiB", 8, "");
    let o = fedvol(&nats, "alice", &["submit", &other, "--dry-run"]);
    assert!(o.status.success(), "{}", out(&o));

    // Usage is in the bucket: a restarted coordinator refuses the same way.
    coord.restart().await;
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "q-3"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("2MiB used + 1MiB requested > 2MiB limit"),
        "{}",
        out(&o)
    );

    // Completing a decision frees its share: the next submit fits.
    let o = fedvol(&nats, "alice", &["complete", "q-0"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "q-4"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = fedvol(&nats, "alice", &["decisions", "show", "q-4", "-o", "json"]);
    let d = json(&o);
    assert_eq!(d["state"], "committed");
    let storage = d["decision"]["quota"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["resource"] == "storage")
        .unwrap()
        .clone();
    assert_eq!(
        (storage["used"].as_u64(), storage["exceeded"].as_bool()),
        (Some(1_048_576), Some(false))
    );

    // A failed decision (nothing fits) leaves nothing counted: a 16-core job fits on no
    // 8-core host, and is within every quota.
    let o = fedvol(&nats, "alice", &["complete", "q-1"]);
    assert!(o.status.success(), "{}", out(&o));
    let big = workflow_file(dir.path(), "big", "genomics", "1MiB", 16, "");
    let o = fedvol(&nats, "alice", &["submit", &big, "--request-id", "q-big"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(!out(&o).contains("quota exceeded"), "{}", out(&o));
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "q-5"]);
    assert!(o.status.success(), "the failed one took no quota: {}", out(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_racing_submits_to_two_coordinators_never_exceed_a_quota() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    // Room for 64 one-core jobs: only the quota can refuse.
    let _a = AgentProc::start(&nats, 200, |d| roomy_inventory("a", 4, 8, d)).await;
    let _b = AgentProc::start(&nats, 200, |d| roomy_inventory("b", 4, 8, d)).await;
    let config = "quotas:\n  - {project: default, volumes: 10, cpu: 12}\n  - {group: physics, instances: 11}\n";
    let (_c1, _g1) = coordinator(&nats, config, &[]).await;
    let (_c2, _g2) = coordinator(&nats, config, &[]).await;

    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(nats.client().await);
    }
    let submit = |i: usize, client: async_nats::Client| async move {
        let msg = SubmitMsg {
            request_id: format!("race-{i}"),
            workflow: small_workflow("race", 1),
            dry_run: false,
            seed: None,
            groups: vec!["physics".into()],
            timeout_ms: 3000,
            trace_limit: None,
            keep: false,
            priority: None,
            wait_for_capacity: false,
            choice: None,
        };
        coordinator_op::<api::Submit>(&client, &format!("user{}", i % 5), &msg, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("race-{i}: {e:?}"))
    };
    let tasks: Vec<_> = (0..50)
        .map(|i| tokio::spawn(submit(i, clients[i % clients.len()].clone())))
        .collect();
    let mut committed = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let r: SubmitReply = t.await.unwrap();
        let s = r.stored.clone().expect("every submit gets a decision");
        match (s.state, &r.error) {
            (DecisionState::Committed, None) => committed.push(s.decision.request_id.clone()),
            (DecisionState::Failed, Some(e)) if e.code == Code::QuotaExceeded => {
                refused += 1;
                let c = s
                    .decision
                    .quota
                    .iter()
                    .find(|c| c.exceeded)
                    .expect("the exceeded quota is named");
                // Usually the project's ten volumes; a refusal may also name the group's
                // instances, counted for a moment by a request the project quota refused next.
                match (c.scope, c.resource) {
                    (Scope::Project, Resource::Volumes) => {
                        assert_eq!((c.used, c.requested, c.limit), (10, 1, 10), "{c:?}")
                    }
                    (Scope::Group, Resource::Instances) => assert!(c.used + c.requested > c.limit, "{c:?}"),
                    other => panic!("{other:?}: {c:?}"),
                }
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!(committed.len(), 10, "exactly the quota: {committed:?}");
    assert_eq!(refused, 40);

    // The agents committed exactly those ten.
    let mut on_agents: Vec<String> = Vec::new();
    for c in ["a", "b"] {
        let st = fedvol_tests::checker::fetch_status(&clients[0], c)
            .await
            .expect("status");
        on_agents.extend(st.committed);
    }
    on_agents.sort();
    committed.sort();
    assert_eq!(on_agents, committed);

    // Completing three makes room for exactly three more.
    for id in &committed[..3] {
        let r = coordinator_op::<api::Complete>(
            &clients[0],
            &format!("user{}", id.trim_start_matches("race-").parse::<usize>().unwrap() % 5),
            &DecisionRef {
                request_id: id.clone(),
                cancel: false,
                whole: None,
            },
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    let tasks: Vec<_> = (50..60)
        .map(|i| tokio::spawn(submit(i, clients[i % clients.len()].clone())))
        .collect();
    let mut more = 0;
    for t in tasks {
        let r: SubmitReply = t.await.unwrap();
        if r.stored.map(|s| s.state) == Some(DecisionState::Committed) {
            more += 1;
        }
    }
    assert_eq!(more, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_submits_are_placed_by_priority_then_age_as_completions_free_room() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    // One host of 8 cores: one 8-core job at a time.
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 1, d, "all")).await;
    let config =
        "priorityClasses: {high: 1000, normal: 0, low: -10}\ndefaultPriorityClass: normal\nqueue: {maxQueued: 4}\n";
    let (_coord, _cfg) = coordinator(&nats, config, &["--reconcile-every-ms", "500"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "job", "default", "1MiB", 8, "");
    let urgent = workflow_file(dir.path(), "urgent", "default", "1MiB", 8, "priority: high\n");

    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "first"]);
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
    // An unknown class is refused, naming the known ones.
    let o = fedvol(&nats, "alice", &["submit", &wf, "--priority", "urgent"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o)
            .contains("priority class `urgent` is not known; the coordinator's priorityClasses are: high, low, normal"),
        "{}",
        out(&o)
    );
    // Without --wait-for-capacity a full federation fails the submit at once.
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "no-wait"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));

    // Four wait, submitted low, normal, high (from the Fuzzfile), high (from the flag).
    let waiting = [
        ("w-low", wf.as_str(), Some("low")),
        ("w-normal", wf.as_str(), None),
        ("w-high-1", urgent.as_str(), None),
        ("w-high-2", wf.as_str(), Some("high")),
    ];
    for (id, file, class) in waiting {
        let mut args = vec!["submit", file, "--request-id", id, "--wait-for-capacity"];
        if let Some(c) = class {
            args.extend(["--priority", c]);
        }
        let o = fedvol(&nats, "alice", &args);
        assert!(o.status.success(), "{}", out(&o));
        assert!(out(&o).contains("state: queued"), "{}", out(&o));
    }
    // Listed in the order they will be placed, with their class. The reconciler's queue pass
    // (every 500 ms here) takes each one to `planned` for the moment it plans it, so the list
    // is asked again until it shows all four queued.
    let mut listed = String::new();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        let o = fedvol(
            &nats,
            "alice",
            &["decisions", "list", "--state", "queued", "--sort", "queue"],
        );
        listed = out(&o);
        if ["w-high-1", "w-high-2", "w-normal", "w-low"]
            .iter()
            .all(|id| listed.contains(id))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at = |id: &str| {
        listed
            .find(id)
            .unwrap_or_else(|| panic!("{id} listed as queued: {listed}"))
    };
    assert!(
        at("w-high-1") < at("w-high-2") && at("w-high-2") < at("w-normal") && at("w-normal") < at("w-low"),
        "{listed}"
    );
    assert!(
        listed.contains("queued (high)") && listed.contains("queued (low)"),
        "{listed}"
    );
    // The queue is bounded.
    let o = fedvol(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "w-5", "--wait-for-capacity"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("(queue_full)"), "{}", out(&o));

    // Each completion frees the one slot: the next placed is the highest priority, oldest first.
    let client = nats.client().await;
    let state = |id: &'static str| {
        let client = client.clone();
        async move {
            let r = coordinator_op::<api::Get>(
                &client,
                "alice",
                &DecisionRef {
                    request_id: id.into(),
                    cancel: false,
                    whole: None,
                },
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            r.stored.map(|s| s.state)
        }
    };
    let mut running = "first";
    for next in ["w-high-1", "w-high-2", "w-normal", "w-low"] {
        let o = fedvol(&nats, "alice", &["complete", running]);
        assert!(o.status.success(), "{}", out(&o));
        let mut placed = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if state(next).await == Some(DecisionState::Committed) {
                placed = Some(next);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if placed != Some(next) {
            // What the coordinator and the agent did meanwhile (the queue's passes, the
            // reconciler's lease and ticks), to tell a slow machine from a lost wake-up.
            let tail = |log: String| {
                log.lines()
                    .rev()
                    .take(60)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            eprintln!("coordinator (last lines):\n{}", tail(_coord.proc.log()));
            eprintln!("agent (last lines):\n{}", tail(_a.proc.log()));
        }
        assert_eq!(placed, Some(next), "after {running} completed");
        for (other, _, _) in waiting {
            let s = state(other).await;
            if other != next && s == Some(DecisionState::Committed) {
                assert!(
                    ["w-high-1", "w-high-2", "w-normal", "w-low"]
                        .iter()
                        .take_while(|x| **x != next)
                        .any(|x| *x == other),
                    "{other} was placed out of order before {next}"
                );
            }
        }
        running = next;
    }
    // A completion during a queue pass (the reconciler's tick is 500 ms here) once let the
    // pass place a lower-priority decision after the one ahead had found no room a moment
    // before; the one ahead is now planned again first (`daemon::queue`, `Tried::Yields`).
    eprintln!(
        "queue passes started again because room was freed during them: {}",
        _coord.proc.log().matches("room was freed during the pass").count()
    );
    // The shown decision of a placed one records its class.
    let o = fedvol(&nats, "alice", &["decisions", "show", "w-low", "-o", "json"]);
    let d = json(&o);
    assert_eq!(
        (d["priority_class"].as_str(), d["priority"].as_i64()),
        (Some("low"), Some(-10))
    );

    // A queued decision can be withdrawn with `complete`.
    let o = fedvol(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "w-gone", "--wait-for-capacity"],
    );
    assert!(out(&o).contains("state: queued"), "{}", out(&o));
    let o = fedvol(&nats, "alice", &["complete", "w-gone"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(state("w-gone").await, Some(DecisionState::Failed));
    let o = fedvol(&nats, "alice", &["decisions", "list", "--state", "queued"]);
    assert!(!out(&o).contains("w-gone"), "withdrawn: {}", out(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_over_quota_can_wait_and_is_placed_when_quota_frees() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 4, d, "all")).await;
    let config = "quotas:\n  - {user: '*', instances: 1}\n";
    let (_coord, _cfg) = coordinator(&nats, config, &["--reconcile-every-ms", "500"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "job", "default", "1MiB", 1, "");
    let o = fedvol(&nats, "bob", &["submit", &wf, "--request-id", "b-1"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = fedvol(
        &nats,
        "bob",
        &["submit", &wf, "--request-id", "b-2", "--wait-for-capacity"],
    );
    assert!(out(&o).contains("state: queued"), "{}", out(&o));
    assert!(
        out(&o).contains("waiting: quota exceeded: user bob: instances 1 used + 1 requested > 1 limit"),
        "why it waits: {}",
        out(&o)
    );
    // Carol's quota is her own: she is placed at once.
    let o = fedvol(&nats, "carol", &["submit", &wf, "--request-id", "c-1"]);
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
    // `--wait` on a queued submit returns once it is placed, when bob's first completes.
    let url = nats.url();
    let waiter = std::thread::spawn(move || {
        Command::new(bin_path("fedvol"))
            .args([
                "--nats",
                url.as_str(),
                "-u",
                "bob",
                "submit",
                &wf,
                "--request-id",
                "b-2",
                "--wait-for-capacity",
                "--wait",
                "--wait-ms",
                "30000",
            ])
            .logged_in()
            .output()
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let o = fedvol(&nats, "bob", &["complete", "b-1"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = waiter.join().unwrap();
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_entry_no_decision_stands_behind_is_dropped_by_the_reconciler() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 2, d, "all")).await;
    // Reconciling every 200 ms: the ledgers are swept every 15 ticks (3 s).
    let config = "quotas:\n  - {project: default, volumes: 1}\n";
    let (_coord, _cfg) = coordinator(&nats, config, &["--reconcile-every-ms", "200"]).await;
    // What a coordinator killed between admitting a request and storing its decision leaves:
    // the request counted in the ledger, and no decision.
    let client = nats.client().await;
    let kv = async_nats::jetstream::new(client.clone())
        .get_key_value("fedvol_decisions")
        .await
        .unwrap();
    kv.put(
        "fedvol/quota/project/default",
        r#"{"entries":{"ghost":{"at_ms":1,"amounts":{"volumes":1}}}}"#.into(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "job", "default", "1MiB", 1, "");
    let o = fedvol(&nats, "alice", &["submit", &wf, "--dry-run"]);
    assert!(
        out(&o).contains("project default: volumes 1 used + 1 requested > 1 limit"),
        "the ghost counts until the sweep: {}",
        out(&o)
    );
    let mut placed = false;
    for _ in 0..50 {
        let o = fedvol(&nats, "alice", &["submit", &wf, "--dry-run"]);
        if o.status.success() {
            placed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(placed, "the reconciler dropped the entry no decision stands behind");
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "real"]);
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_queued_past_max_wait_fails_queue_timeout() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 1, d, "all")).await;
    let config = "queue: {maxQueued: 10, maxWaitMs: 1000}\n";
    let (_coord, _cfg) = coordinator(&nats, config, &["--reconcile-every-ms", "200"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "job", "default", "1MiB", 8, "");
    let o = fedvol(&nats, "alice", &["submit", &wf, "--request-id", "full"]);
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
    let o = fedvol(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "late", "--wait-for-capacity"],
    );
    assert!(out(&o).contains("state: queued"), "{}", out(&o));
    let mut shown = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let o = fedvol(&nats, "alice", &["decisions", "show", "late"]);
        shown = out(&o);
        if shown.contains("state: failed") {
            break;
        }
    }
    assert!(shown.contains("state: failed"), "{shown}");
    assert!(
        shown.contains("without room (queue.maxWaitMs 1000 ms) (queue_timeout)"),
        "{shown}"
    );
}

/// A workflow no cluster can ever place is refused at once, never queued: kube-scheduler calls
/// such a pod `UnschedulableAndUnresolvable` (scheduling framework: "preemption would not
/// change anything") and does not keep retrying it for capacity. Here its volume needs the
/// `ephemeral` permission, which both clusters grant only to group `physics`, and alice is in
/// no group: with `--wait-for-capacity` the submit is answered at once, stored `failed`,
/// refused `unresolvable` naming each cluster's blocker, and the queue stays empty (it used to
/// wait there until `queue.maxWaitMs`). The same submit from a physics user is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolvable_workflow_with_wait_for_capacity_is_refused_at_once_never_queued() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("a", 2, d, "[physics]")).await;
    let _b = AgentProc::start(&nats, 200, |d| slots_inventory("b", 2, d, "[physics]")).await;
    let (_coord, _cfg) = coordinator(&nats, "", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = workflow_file(dir.path(), "never", "any", "1MiB", 1, "");
    let o = fedvol(
        &nats,
        "alice",
        &["submit", &wf, "--wait-for-capacity", "--request-id", "never-1"],
    );
    let text = out(&o);
    eprintln!("{text}");
    assert_eq!(o.status.code(), Some(2), "refused, not queued (0): {text}");
    assert!(text.contains("state: failed (nothing fits)"), "{text}");
    assert!(text.contains("(unresolvable)"), "{text}");
    assert!(text.contains("permission_denied"), "names the blocker: {text}");
    assert!(!text.contains("state: queued"), "{text}");
    let d = json(&fedvol(&nats, "alice", &["decisions", "show", "never-1", "-o", "json"]));
    assert_eq!(d["state"], "failed");
    assert_eq!(d["decision"]["refused"]["code"], "unresolvable");
    let queued = out(&fedvol(&nats, "alice", &["decisions", "list", "--state", "queued"]));
    assert!(!queued.contains("never-1"), "nothing waits in the queue: {queued}");
    // The same workflow from a user of group physics fits.
    let o = fedvol(&nats, "alice", &["submit", &wf, "-g", "physics", "--wait-for-capacity"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains("state: committed"), "{}", out(&o));
}
