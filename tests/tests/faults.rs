//! Crash faults and races under load, against real processes on a real nats-server:
//!
//! - agents killed with `kill -9` at random points of a commit (and at random instants),
//!   restarted at once or after a down time longer than the coordinator's commit timeout;
//! - coordinators killed at random points of a submit while a second one serves;
//! - many clients racing for scarce capacity.
//!
//! Every run ends with the checker ([`fedvol_tests::checker`]): nothing acknowledged is lost or
//! duplicated, no orphan commit, no host over its capacity, no volume booked twice, and the
//! coordinators' view equals the agents'.
//!
//! Short by default (CI); `FEDVOL_FAULT_TRIALS=50` runs the long form, `FEDVOL_FAULT_SEED=<n>`
//! replays a fault schedule (each test prints its seed). Tests run one at a time.

use fedvol_tests::shipped::LoggedIn;
use std::time::{Duration, Instant};

use fedvol_proto::agent::StatusReply;
use fedvol_proto::decisions::DecisionState;
use fedvol_tests::NatsServer;
use fedvol_tests::checker::{CHECKER_USER, fetch_status};
use fedvol_tests::faultkit::{
    LogTail, agent_on, coordinator_on, crash_agent, crash_coordinator, field, final_check, inventories,
    named_inventories, roomy_agent, signal_on_line, wait_ready,
};
use fedvol_tests::federation::{AgentProc, slots_inventory};
use fedvol_tests::load::{Load, LoadSpec, Rng, coordinator_op, env_number, small_workflow, submit_msg};

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The coordinators' timings in these tests.
const COORDINATOR_ARGS: [&str; 8] = [
    "--deadline-ms",
    "800",
    "--commit-timeout-ms",
    "1500",
    "--discovery-ms",
    "300",
    "--commit-attempts",
    "3",
];

async fn clients(nats: &NatsServer, n: usize) -> Vec<async_nats::Client> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(nats.client().await);
    }
    out
}

/// Where in its work a process was killed, by what its log says.
fn agent_phase(log: &str, id: Option<&str>) -> &'static str {
    match id {
        None => "at a random instant",
        Some(id) => {
            let answered = log
                .lines()
                .any(|l| l.contains("commit answered") && field(l, "request_id").as_deref() == Some(id));
            if answered {
                "after the commit was recorded and answered"
            } else {
                "during the commit (before its answer)"
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_killed_at_random_points_of_commit_lose_and_duplicate_nothing() {
    let _serial = SERIAL.lock().await;
    let trials = env_number("FEDVOL_FAULT_TRIALS", 5);
    let (mut rng, seed) = Rng::from_env("FEDVOL_FAULT_SEED");
    eprintln!("agent crash faults: {trials} trials, FEDVOL_FAULT_SEED={seed}");
    let nats = NatsServer::start();
    let names = ["a", "b", "c"];
    let mut agents = Vec::new();
    for n in names {
        agents.push(roomy_agent(&nats.url(), n).await);
    }
    let _c1 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let _c2 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let cs = clients(&nats, 3).await;
    let mut spec = LoadSpec::new(4, "ak", small_workflow("crash", 1));
    spec.dry_run_every = 5;
    spec.complete_every = 3;
    wait_ready(&cs[0], &names).await;
    let load = Load::start(&cs, spec);
    assert!(
        load.wait_answers(5, Duration::from_secs(30)).await,
        "the load never got going"
    );

    let mut phases: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in 0..trials {
        let i = rng.below(names.len() as u64) as usize;
        let at_commit = rng.chance(0.75);
        let mut id = None;
        if at_commit {
            let mut tail = LogTail::new(agents[i].proc.log_path());
            if let Some(line) = tail.next_line_with(&["provisioning"], Duration::from_secs(10)).await {
                id = field(&line, "request_id");
                tokio::time::sleep(rng.ms(0, 4)).await;
            }
        } else {
            tokio::time::sleep(rng.ms(0, 400)).await;
        }
        // One restart in four comes after a down time that may outlast the coordinators'
        // commit timeout (1.5 s): the commit's outcome is then unknown to them for a while.
        let down = if rng.chance(0.25) {
            rng.ms(500, 3000)
        } else {
            Duration::ZERO
        };
        let log_before = agents[i].proc.log();
        crash_agent(&mut agents[i], down).await;
        let phase = agent_phase(&log_before, id.as_deref());
        *phases.entry(phase).or_insert(0) += 1;
        eprintln!("trial {t}: killed {} {phase} ({id:?}), down {down:?}", names[i]);
        assert!(
            load.wait_answers(2, Duration::from_secs(60)).await,
            "no progress after trial {t}"
        );
    }
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());
    eprintln!("kills by phase: {phases:?}");
    assert!(
        result.unanswered().is_empty(),
        "requests never answered: {:?}",
        result.unanswered()
    );

    let report = final_check(
        &cs[0],
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed > 0, "{report}");
    assert_eq!(report.holds, 0, "every hold lapsed or was released");
}

/// Agents killed (`kill -9`) and restarted during a steady load, under the shipped
/// `single.conf` and agent defaults. Cluster `a` can place the workflow (4 hosts of 64 cores);
/// cluster `b` cannot (1-core hosts). While `a` is down, no answering cluster can place it
/// and `a` was only unreachable: the truthful answer is the retryable `clusters_unavailable`
/// (the load's careful client asks again under the same request id, and the coordinator plans
/// it afresh), never a decision stored "nothing fits" (a user's script would give up on exit 2).
/// Kube-scheduler likewise tells a pod that failed because a plugin errored or a node was
/// unknown from one that is unschedulable (scheduling framework: `Error` versus
/// `Unschedulable` statuses), and retries the former. Every stored decision is read back at
/// the end: none is `failed (nothing fits)` with a cluster that did not answer.
///
/// Short by default (CI, 5 kills); `FEDVOL_FAULT_TRIALS=40 cargo test -p fedvol-tests --test
/// faults agent_kills_during -- --nocapture` is the long form (RELIABILITY.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agent_kills_during_a_steady_load_never_store_nothing_fits_for_an_unreachable_cluster() {
    use fedvol_proto::decisions::FailureKind;
    use fedvol_tests::checker::fetch_decision;
    let _serial = SERIAL.lock().await;
    let trials = env_number("FEDVOL_FAULT_TRIALS", 5);
    let (mut rng, seed) = Rng::from_env("FEDVOL_FAULT_SEED");
    eprintln!("agent kills under a steady load: {trials} trials, FEDVOL_FAULT_SEED={seed}");
    let nats = NatsServer::start();
    let names = ["a", "b"];
    let mut agents = vec![
        agent_on(&nats.url(), 100, &[], |d| {
            fedvol_tests::load::roomy_inventory("a", 4, 64, d)
        })
        .await,
        agent_on(&nats.url(), 100, &[], |d| {
            fedvol_tests::load::roomy_inventory("b", 2, 1, d)
        })
        .await,
    ];
    let _c1 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let _c2 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let cs = clients(&nats, 2).await;
    let mut spec = LoadSpec::new(4, "uk", small_workflow("steady", 2));
    spec.complete_every = 1;
    wait_ready(&cs[0], &names).await;
    let load = Load::start(&cs, spec);
    assert!(
        load.wait_answers(5, Duration::from_secs(30)).await,
        "the load never got going"
    );
    let began = Instant::now();
    for t in 0..trials {
        // Mostly `a`, the cluster that can place the workflow.
        let i = usize::from(rng.chance(0.2));
        tokio::time::sleep(rng.ms(0, 300)).await;
        let down = rng.ms(200, 1500);
        crash_agent(&mut agents[i], down).await;
        eprintln!("trial {t}: killed {}, down {down:?}", names[i]);
        assert!(
            load.wait_answers(2, Duration::from_secs(60)).await,
            "no progress after trial {t}"
        );
    }
    let took = began.elapsed();
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());
    eprintln!("submit outcomes: {:?}", result.outcomes("submit"));
    assert!(
        result.unanswered().is_empty(),
        "requests never answered: {:?}",
        result.unanswered()
    );

    // Every stored decision, by what became of it.
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    let mut wrong = Vec::new();
    for id in &result.ids {
        let Some(s) = fetch_decision(&cs[0], id).await.unwrap() else {
            continue;
        };
        let silent: Vec<&String> = s
            .decision
            .clusters
            .iter()
            .filter(|(_, c)| c.status != fedvol_common::decision::ClusterStatus::Answered)
            .map(|(n, _)| n)
            .collect();
        let kind = s.failure().map_or(s.state.as_str(), FailureKind::as_str);
        *kinds.entry(kind.to_string()).or_default() += 1;
        if s.failure() == Some(FailureKind::CommitFailed) {
            let why: Vec<String> = s
                .attempts
                .iter()
                .map(|a| format!("{}: {:?}", a.cluster, a.error.as_ref().map(|e| e.code.to_string())))
                .collect();
            eprintln!("{id}: commit failed: {why:?}");
        }
        if s.failure() == Some(FailureKind::NothingFits) && !silent.is_empty() {
            wrong.push(format!("{id}: clusters without an answer {silent:?}"));
        }
    }
    eprintln!(
        "{trials} kills in {:.0} s; {} request ids; stored decisions by outcome: {kinds:?}",
        took.as_secs_f64(),
        result.ids.len()
    );
    assert!(
        wrong.is_empty(),
        "{} decisions stored \"nothing fits\" though a cluster did not answer: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(10)]
    );
    let report = final_check(
        &cs[0],
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed + report.completed > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coordinators_killed_at_random_points_lose_and_duplicate_nothing() {
    let _serial = SERIAL.lock().await;
    let trials = env_number("FEDVOL_FAULT_TRIALS", 5);
    let (mut rng, seed) = Rng::from_env("FEDVOL_FAULT_SEED");
    eprintln!("coordinator crash faults: {trials} trials, FEDVOL_FAULT_SEED={seed}");
    let nats = NatsServer::start();
    let names = ["a", "b", "c"];
    let mut agents = Vec::new();
    for n in names {
        agents.push(roomy_agent(&nats.url(), n).await);
    }
    // One commit attempt: a decision a killed coordinator left `planned` is taken over by the
    // other after the commit phase's bound, which this keeps short (about 13 s).
    let mut args = COORDINATOR_ARGS;
    for (flag, value) in [
        ("--deadline-ms", "800"),
        ("--commit-timeout-ms", "1000"),
        ("--commit-attempts", "1"),
    ] {
        let at = args.iter().position(|a| *a == flag).unwrap();
        args[at + 1] = value;
    }
    let mut coords = [
        coordinator_on(&nats.url(), &args).await,
        coordinator_on(&nats.url(), &args).await,
    ];
    let cs = clients(&nats, 3).await;
    let mut spec = LoadSpec::new(4, "ck", small_workflow("crash", 1));
    spec.dry_run_every = 5;
    spec.complete_every = 3;
    spec.answer_wait = Duration::from_secs(5);
    spec.retry_for = Duration::from_secs(90);
    wait_ready(&cs[0], &names).await;
    let load = Load::start(&cs, spec);
    assert!(
        load.wait_answers(5, Duration::from_secs(30)).await,
        "the load never got going"
    );

    let points = [
        "plan sent to each cluster",
        "plan gathered",
        "decision planned",
        "commit attempt",
        "decision stored",
        "decision completed",
    ];
    let mut hit: std::collections::BTreeMap<String, usize> = Default::default();
    for t in 0..trials {
        let i = rng.below(2) as usize;
        let point = points[rng.below(points.len() as u64) as usize];
        let mut tail = LogTail::new(coords[i].proc.log_path());
        let seen = tail.next_line_with(&[point], Duration::from_secs(10)).await;
        tokio::time::sleep(rng.ms(0, 5)).await;
        let down = rng.ms(0, 1000);
        crash_coordinator(&mut coords[i], down).await;
        let what = if seen.is_some() { point } else { "a random instant" };
        *hit.entry(what.to_string()).or_insert(0) += 1;
        eprintln!("trial {t}: killed coordinator {i} after `{what}`, down {down:?}");
        assert!(
            load.wait_answers(2, Duration::from_secs(60)).await,
            "no progress after trial {t}"
        );
    }
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());
    eprintln!("kills by point: {hit:?}");
    assert!(
        result.unanswered().is_empty(),
        "requests never answered: {:?}",
        result.unanswered()
    );
    let report = final_check(
        &cs[0],
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed > 0, "{report}");
}

fn status_ok(st: &StatusReply, hosts: usize) {
    assert!(st.host_use.len() <= hosts, "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_clients_for_scarce_capacity_never_over_commit_and_all_get_answers() {
    let _serial = SERIAL.lock().await;
    let racers = env_number("FEDVOL_RACE_CLIENTS", 120) as usize;
    let nats = NatsServer::start();
    // 4 + 3 + 3 hosts of 8 cores: ten 8-core jobs fit, no more.
    let sizes = [("a", 4usize), ("b", 3), ("c", 3)];
    let mut agents = Vec::new();
    for (name, hosts) in sizes {
        agents.push(agent_on(&nats.url(), 200, &[], |d| slots_inventory(name, hosts, d, "[physics]")).await);
    }
    let _c1 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let _c2 = coordinator_on(&nats.url(), &COORDINATOR_ARGS).await;
    let cs = clients(&nats, 8).await;
    wait_ready(&cs[0], &["a", "b", "c"]).await;
    let wf = small_workflow("storm", 8);

    // Every racer at once; one in five is a dry run; two ids in ten are shared by two racers:
    // two real submits (idempotency under the race) and a dry run with a real submit (the real
    // one wins: regression, it got `store_unavailable` when the dry run was stored first).
    let started = Instant::now();
    let tasks: Vec<_> = (0..racers)
        .map(|i| {
            let client = cs[i % cs.len()].clone();
            let wf = wf.clone();
            tokio::spawn(async move {
                let n = match i % 10 {
                    9 => i - 2,
                    4 => i - 1,
                    _ => i,
                };
                let id = format!("race-{n}");
                // Racers sharing an id are the same user (only a decision's owner may reuse
                // its id).
                let user = format!("user{}", n % 7);
                let dry = i % 5 == 3;
                let mut msg = submit_msg(&id, &wf, dry);
                msg.timeout_ms = 3000;
                let r: Result<fedvol_proto::coordinator::SubmitReply, _> =
                    coordinator_op::<fedvol_proto::coordinator::Submit>(&client, &user, &msg, Duration::from_secs(60))
                        .await;
                (id, dry, r)
            })
        })
        .collect();
    let mut acked = std::collections::BTreeMap::new();
    let mut ids = std::collections::BTreeSet::new();
    let mut by_id: std::collections::BTreeMap<String, fedvol_proto::decisions::StoredDecision> = Default::default();
    let mut states: std::collections::BTreeMap<String, usize> = Default::default();
    for t in tasks {
        let (id, dry, r) = t.await.unwrap();
        let r = r.unwrap_or_else(|e| panic!("{id}: every racer gets an answer: {e}"));
        // A dry run racing a real submit of its id is a different request under one id (issue
        // 12): when the real one was stored first, the dry run is refused; the real one wins.
        if dry
            && r.error
                .as_ref()
                .is_some_and(|e| e.is(&fedvol_proto::Code::RequestIdConflict))
        {
            ids.insert(id);
            continue;
        }
        assert!(r.error.is_none(), "{id}: {:?}", r.error);
        let s = r.stored.expect("a decision");
        if !dry {
            assert!(!s.dry_run, "{id}: a real submit gets a real decision");
        }
        *states.entry(format!("{:?}", s.state)).or_insert(0) += 1;
        if s.state == DecisionState::Committed {
            acked.insert(
                id.clone(),
                fedvol_tests::load::Acked {
                    cluster: s.decision.chosen_cluster.clone().unwrap(),
                    completed: false,
                },
            );
        }
        if !s.dry_run
            && let Some(prev) = by_id.insert(id.clone(), s.clone())
        {
            assert_eq!(prev, s, "{id}: two racers with one id got the same decision");
        }
        ids.insert(id);
    }
    eprintln!(
        "{racers} racers answered in {:.1} s: {states:?}",
        started.elapsed().as_secs_f64()
    );
    assert!(!acked.is_empty() && acked.len() <= 10, "{acked:?}");

    let load = fedvol_tests::load::LoadResult {
        attempts: Vec::new(),
        acked,
        ids,
        started,
        elapsed: started.elapsed(),
    };
    let names: Vec<&str> = sizes.iter().map(|(n, _)| *n).collect();
    let report = final_check(
        &cs[0],
        &named_inventories(&names, &agents),
        &load,
        Duration::from_secs(10),
    )
    .await;
    eprintln!("checker after the race: {report}");
    report.assert_clean();

    // No hold leaked: the remaining slots fill up one by one, exactly.
    let mut total = report.committed;
    let mut n = 0;
    loop {
        let msg = submit_msg(&format!("fill-{n}"), &wf, false);
        n += 1;
        let r: fedvol_proto::coordinator::SubmitReply =
            coordinator_op::<fedvol_proto::coordinator::Submit>(&cs[0], CHECKER_USER, &msg, Duration::from_secs(30))
                .await
                .unwrap();
        match r.stored.map(|s| s.state) {
            Some(DecisionState::Committed) => total += 1,
            other => {
                assert_eq!(total, 10, "failed before every slot was used: {other:?}");
                break;
            }
        }
        assert!(total <= 10, "over-committed");
    }
    for (name, hosts) in sizes {
        let st = fetch_status(&cs[0], name).await.unwrap();
        status_ok(&st, hosts);
        assert_eq!(st.committed.len(), hosts, "{name} is full");
    }
}

/// A workflow that prefers cluster `a` (so `a` is chosen and committed first).
fn prefers_a() -> fedvol_common::model::Workflow {
    let mut wf = small_workflow("slow", 1);
    wf.clusters = vec!["a".into(), "b".into()];
    wf
}

/// Freezes agent `a` (SIGSTOP) the moment its commit of request `id` starts provisioning, for
/// `frozen`, while `submit` (started here) runs. Returns what `submit` returned, and whether the
/// freeze caught the commit in progress (false when the commit had already been answered: a
/// very busy machine; the caller tries again).
async fn with_a_stalled_commit<T: Send + 'static>(
    a: &AgentProc,
    id: &str,
    frozen: Duration,
    submit: impl FnOnce() -> tokio::task::JoinHandle<T>,
) -> (T, bool) {
    let freezer = signal_on_line(
        a.proc.log_path(),
        "provisioning",
        a.proc.pid(),
        nix::sys::signal::Signal::SIGSTOP,
        Duration::from_secs(10),
    );
    let running = submit();
    let line = tokio::task::spawn_blocking(move || freezer.join().ok().flatten())
        .await
        .unwrap()
        .expect("a's commit starts");
    assert_eq!(field(&line, "request_id").as_deref(), Some(id));
    let caught = !a
        .proc
        .log()
        .lines()
        .any(|l| l.contains("commit answered") && field(l, "request_id").as_deref() == Some(id));
    tokio::time::sleep(frozen).await;
    a.proc.signal(nix::sys::signal::Signal::SIGCONT);
    (running.await.unwrap(), caught)
}

async fn submit_api(client: &async_nats::Client, id: &str) -> fedvol_proto::coordinator::SubmitReply {
    coordinator_op::<fedvol_proto::coordinator::Submit>(
        client,
        "alice",
        &submit_msg(id, &prefers_a(), false),
        Duration::from_secs(60),
    )
    .await
    .expect("an answer")
}

/// Regression: a commit that outlasted the coordinator's wait (a stalled agent, a
/// slow driver) was taken as failed when the agent answered the release probe with
/// `commit_in_progress` or not at all, and the next cluster committed too: when the first
/// agent's commit then finished, the request was booked on two clusters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_slower_than_the_coordinators_wait_is_never_booked_twice() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let a = roomy_agent(&nats.url(), "a").await;
    let b = roomy_agent(&nats.url(), "b").await;
    let args = [
        "--deadline-ms",
        "800",
        "--commit-timeout-ms",
        "1000",
        "--discovery-ms",
        "300",
        "--commit-attempts",
        "2",
    ];
    let _coord = coordinator_on(&nats.url(), &args).await;
    let client = nats.client().await;
    // Both restored before the first submit: a cluster still `restoring` when it is planned
    // is no fallback for a commit that fails on `a` (CI on d5bd444 failed on that).
    wait_ready(&client, &["a", "b"]).await;
    let mut acked = std::collections::BTreeMap::new();

    // Thawed while the coordinator still asks what happened. Either `a`'s commit went through
    // before its deadline and the coordinator learns so, or the agent's bound on driver calls
    // (bounded driver calls) cut it at the deadline, `a` answered the probe `released` (fenced: it
    // never commits) and `b` was tried: booked once either way, never on both.
    let (r, caught) = with_a_stalled_commit(&a, "stall-1", Duration::from_millis(1800), || {
        let client = client.clone();
        tokio::spawn(async move { submit_api(&client, "stall-1").await })
    })
    .await;
    eprintln!("stall-1: the freeze caught the commit in progress: {caught}");
    assert!(r.error.is_none(), "{:?}", r.error);
    let s = r.stored.unwrap();
    assert_eq!(s.state, DecisionState::Committed, "{:?}", s.attempts);
    let chosen = s.decision.chosen_cluster.clone().unwrap();
    if chosen == "b" {
        let first = &s.attempts[0];
        assert!(first.cluster == "a" && !first.ok, "{:?}", s.attempts);
        let a_status = fetch_status(&client, "a").await.unwrap();
        assert!(!a_status.committed.contains(&"stall-1".to_string()), "{a_status:?}");
    }
    acked.insert(
        "stall-1".to_string(),
        fedvol_tests::load::Acked {
            cluster: chosen,
            completed: false,
        },
    );

    // Frozen past every probe: the outcome is in doubt, so no other cluster is tried; the
    // client is told so, and asking again with the same id (once the commit phase's bound
    // passed) settles it: `a`'s commit if it was made, else `b` once `a`'s attempt is fenced.
    // (Through the CLI: it prints the decision, then the error, and exits 1.)
    let wf_file = a.dir.path().join("prefers-a.yaml");
    std::fs::write(
        &wf_file,
        "version: v4\nclusters: [a, b]\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}\n",
    )
    .unwrap();
    let url = nats.url();
    let mut id = String::new();
    let mut out = None;
    for attempt in 0..5 {
        id = format!("stall-2-{attempt}");
        let (o, caught) = with_a_stalled_commit(&a, &id, Duration::from_millis(5000), || {
            let (wf, url, id) = (wf_file.display().to_string(), url.clone(), id.clone());
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(fedvol_tests::bin_path("fedvol"))
                    .args(["--nats", &url, "-u", "alice", "submit", &wf, "--request-id", &id])
                    .args(["-g", "physics", "-o", "json", "--timeout-ms", "30000"])
                    .logged_in()
                    .output()
                    .unwrap()
            })
        })
        .await;
        if caught {
            out = Some(o);
            break;
        }
        eprintln!("{id}: the commit finished before the freeze; again");
        acked.insert(
            id.clone(),
            fedvol_tests::load::Acked {
                cluster: "a".into(),
                completed: false,
            },
        );
    }
    let out = out.expect("a freeze caught a commit in progress within 5 tries");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    if doc["state"] == "committed" {
        // What the fault did before the fix: committed on b, and a's commit went through too.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let obs = fedvol_tests::checker::observe(
            &client,
            &inventories(&[("a", &a), ("b", &b)]),
            [id.clone()],
            &Default::default(),
            false,
        )
        .await
        .unwrap();
        panic!(
            "an in-doubt commit was taken as failed and committed on {}; checker: {}",
            doc["decision"]["chosen_cluster"],
            fedvol_tests::checker::check(&obs)
        );
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("commit_outcome_unknown"), "{stderr}");
    assert_eq!(doc["state"], "planned", "left for a retry to settle: {doc:#}");
    let b_status = fetch_status(&client, "b").await.unwrap();
    assert!(
        !b_status.committed.contains(&id),
        "not committed on b while in doubt: {b_status:?}"
    );
    let end = Instant::now() + Duration::from_secs(40);
    // The same request again (one request id, one workflow): the file the CLI sent.
    let same = fedvol_formats::load_workflow(&wf_file).unwrap().value;
    let settled = loop {
        let r: fedvol_proto::coordinator::SubmitReply = coordinator_op::<fedvol_proto::coordinator::Submit>(
            &client,
            "alice",
            &submit_msg(&id, &same, false),
            Duration::from_secs(40),
        )
        .await
        .unwrap();
        if r.error.is_none() {
            break r.stored.unwrap();
        }
        assert!(Instant::now() < end, "never settled: {:?}", r.error);
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(settled.state, DecisionState::Committed, "{:?}", settled.attempts);
    // `a` if its commit finished before its deadline, else `b` once `a`'s attempt was fenced.
    let chosen = settled.decision.chosen_cluster.clone().unwrap();
    acked.insert(
        id.clone(),
        fedvol_tests::load::Acked {
            cluster: chosen,
            completed: false,
        },
    );

    let acked_count = acked.len();
    let load = fedvol_tests::load::LoadResult {
        attempts: Vec::new(),
        ids: acked.keys().cloned().collect(),
        acked,
        started: Instant::now(),
        elapsed: Duration::ZERO,
    };
    let pairs = [("a", &a), ("b", &b)];
    let report = final_check(&client, &inventories(&pairs), &load, Duration::from_secs(5)).await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert_eq!(report.committed, acked_count, "{report}");
}
