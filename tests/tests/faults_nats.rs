//! NATS faults and slow or cut-off clusters under load, against real nats-server
//! processes on loopback:
//!
//! - the server restarted mid-load, gracefully and with `kill -9` (same port, same JetStream
//!   store): every client reconnects by itself, requests in flight fail with a clear status,
//!   nothing acknowledged is lost, throughput recovers;
//! - a 3-node cluster with the decision bucket replicated 3 times loses the node leading it;
//! - an agent frozen with SIGSTOP, and an agent whose leaf server is stopped: the frozen one is
//!   reported `timed_out` at the deadline then `unreachable`, the one cut off `unreachable` at
//!   once (nobody serves its subjects), the other clusters answer as usual, and both come back.
//!
//! Every run ends with the checker. Tests run one at a time.

use fedvol_tests::shipped::LoggedIn;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fedvol_common::decision::ClusterStatus;
use fedvol_proto::decisions::StoredDecision;
use fedvol_tests::checker::fetch_decision;
use fedvol_tests::faultkit::{agent_on, coordinator_on, final_check, named_inventories, roomy_agent, wait_ready};
use fedvol_tests::federation::AgentProc;
use fedvol_tests::load::{Load, LoadResult, LoadSpec, Outcome, roomy_inventory, small_workflow};
use fedvol_tests::nats::free_port;
use fedvol_tests::{NatsServer, bin_path, wait_until};

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const DEADLINE_MS: u64 = 800;

fn coordinator_args() -> Vec<&'static str> {
    vec![
        "--deadline-ms",
        "800",
        "--commit-timeout-ms",
        "1500",
        "--discovery-ms",
        "300",
    ]
}

/// As [`roomy`], heartbeating every 500 ms: presumed dead after 1.5 s of silence, so requests
/// sent in between wait for it until the deadline.
async fn roomy_slow_heartbeat(url: &str, name: &str) -> AgentProc {
    agent_on(url, 500, &[], |dir| roomy_inventory(name, 4, 64, dir)).await
}

async fn connect(url: &str) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .name("fedvol-fault-tests")
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

fn spec(prefix: &str) -> LoadSpec {
    let mut s = LoadSpec::new(4, prefix, small_workflow("nats", 1));
    s.dry_run_every = 5;
    s.complete_every = 2;
    s.answer_wait = Duration::from_secs(3);
    s.retry_for = Duration::from_secs(60);
    s
}

/// The rate before `t` (over `window`), the time from `t` to the first decision after `back`,
/// and the rate over `window` starting a second after that.
fn recovery(r: &LoadResult, t: Instant, back: Instant, window: Duration) -> (f64, Duration, f64) {
    let before = r.rate(t - window, t);
    let first = r.first_decision_after(back).unwrap_or(back);
    let after = r.rate(first + Duration::from_secs(1), first + Duration::from_secs(1) + window);
    (before, first.saturating_duration_since(t), after)
}

/// Outcome labels of the submit attempts sent in `[from, to)`.
fn outcomes_between(r: &LoadResult, from: Instant, to: Instant) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for a in r.attempts.iter().filter(|a| a.sent >= from && a.sent < to) {
        *out.entry(format!("{}:{}", a.op, a.outcome.label())).or_insert(0) += 1;
    }
    out
}

/// Checks that every error answer carries one of the codes a client can act on: one it asks
/// again under the same request id (`load::RETRYABLE`, `clusters_unavailable` among them: a
/// fan-out sent while the agents were still reconnecting), or a deadline it reports.
fn clear_statuses(r: &LoadResult) {
    for a in &r.attempts {
        if let Outcome::Error(code) = &a.outcome {
            assert!(
                fedvol_tests::load::RETRYABLE.contains(&code.as_str())
                    || ["timed_out", "unreachable"].contains(&code.as_str()),
                "{}: an unexpected error code {code}",
                a.id
            );
        }
        if let Outcome::ClientError(e) = &a.outcome {
            assert!(!e.is_empty(), "{}: a client error says what happened", a.id);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_nats_server_loses_nothing_and_throughput_recovers() {
    let _serial = SERIAL.lock().await;
    let mut nats = NatsServer::start();
    let url = nats.url();
    let names = ["a", "b", "c"];
    let mut agents = Vec::new();
    for n in names {
        agents.push(roomy_agent(&url, n).await);
    }
    let coord = coordinator_on(&url, &coordinator_args()).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(nats.client().await);
    }
    wait_ready(&clients[0], &names).await;
    let load = Load::start(&clients, spec("rs"));
    assert!(load.wait_answers(5, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // 1. Graceful restart (SIGTERM, then the same port and store).
    let t1 = Instant::now();
    nats.restart();
    let back1 = Instant::now();
    assert!(
        load.wait_answers(10, Duration::from_secs(60)).await,
        "no decisions after the restart"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // 2. Crash (kill -9) and a restart after one second; meanwhile the CLI fails at once with
    //    one clear line.
    let t2 = Instant::now();
    nats.kill();
    let wf = agents[0].dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        "version: v4\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n",
    )
    .unwrap();
    let cli = std::process::Command::new(bin_path("fedvol"))
        .args(["--nats", &url, "-u", "alice", "submit", &wf.display().to_string()])
        .logged_in()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(cli.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot connect to NATS"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.restart();
    let back2 = Instant::now();
    assert!(
        load.wait_answers(10, Duration::from_secs(60)).await,
        "no decisions after the crash"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());

    let window = Duration::from_secs(3);
    for (what, t, back) in [("graceful restart", t1, back1), ("kill -9 + 1 s", t2, back2)] {
        let (before, gap, after) = recovery(&result, t, back, window);
        eprintln!(
            "{what}: {before:.1} decisions/s before, first decision {:.2} s after the fault ({:.2} s after the server was back), {after:.1} decisions/s after; attempts sent during the outage: {:?}",
            gap.as_secs_f64(),
            (t + gap).saturating_duration_since(back).as_secs_f64(),
            outcomes_between(&result, t, back + Duration::from_secs(1))
        );
        // Recovery means decisions go on in the window after the server is back; how fast is a
        // figure (printed above, recorded in RELIABILITY.md), not a timed assertion: under CI
        // load it dipped to 0.3 of the rate before, 0.6-0.7 when run alone.
        assert!(
            after > 0.0,
            "{what}: no decisions in the {window:?} after the server was back ({before:.1} before)"
        );
    }
    clear_statuses(&result);
    assert!(result.unanswered().is_empty(), "{:?}", result.unanswered());

    // Everyone reconnected by themselves: the processes are the same ones, twice disconnected.
    for (name, log) in [("coordinator", coord.proc.log())]
        .into_iter()
        .chain(names.iter().zip(&agents).map(|(n, a)| (*n, a.proc.log())))
    {
        assert!(
            log.matches("NATS connection lost").count() >= 2,
            "{name} saw both outages:\n{log}"
        );
    }
    let report = final_check(
        &clients[0],
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed > 0);
}

/// Config of node `i` of a 3-node cluster (routes to every node, JetStream in `store`).
fn cluster_conf(i: usize, client: &[u16], route: &[u16], store: &Path) -> String {
    let routes: Vec<String> = route.iter().map(|p| format!("nats-route://127.0.0.1:{p}")).collect();
    format!(
        "server_name: n{}\nlisten: 127.0.0.1:{}\njetstream {{ store_dir: \"{}\" }}\ncluster {{\n  name: fedvol\n  listen: 127.0.0.1:{}\n  routes: [{}]\n}}\n",
        i + 1,
        client[i],
        store.display(),
        route[i],
        routes.join(", ")
    )
}

/// The JSON answer of JetStream API `subject`, retried until it has no error (30 s).
async fn js_api(client: &async_nats::Client, subject: &str) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = fedvol_tests::load::call_raw(client, subject, Vec::new(), Duration::from_secs(2)).await;
        if let Ok(b) = &r
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(b)
            && v.get("error").is_none()
        {
            return v;
        }
        assert!(Instant::now() < end, "{subject} never answered: {r:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_three_node_cluster_loses_the_buckets_leader_mid_load_and_nothing_acknowledged_is_lost() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let route_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let store = dir.path().join(format!("n{}", i + 1));
        let conf = dir.path().join(format!("n{}.conf", i + 1));
        std::fs::write(&conf, cluster_conf(i, &client_ports, &route_ports, &store)).unwrap();
        nodes.push(NatsServer::start_config_file(&conf, client_ports[i]));
    }
    let urls = nodes.iter().map(NatsServer::url).collect::<Vec<_>>().join(",");
    let probe = connect(&nodes[0].url()).await;
    js_api(&probe, "$JS.API.INFO").await; // the meta leader is elected

    let mut args = coordinator_args();
    args.extend(["--kv-replicas", "3"]);
    let _c1 = coordinator_on(&urls, &args).await;
    let _c2 = coordinator_on(&urls, &args).await;
    let names = ["a", "b"];
    let mut agents = Vec::new();
    for n in names {
        agents.push(roomy_agent(&urls, n).await);
    }
    let mut clients = Vec::new();
    for i in 0..3 {
        clients.push(connect(&urls.split(',').nth(i).unwrap().to_string().replace(' ', "")).await);
    }
    wait_ready(&clients[0], &names).await;
    let load = Load::start(&clients, spec("ha"));
    assert!(load.wait_answers(10, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let info = js_api(&probe, "$JS.API.STREAM.INFO.KV_fedvol_decisions").await;
    assert_eq!(info["config"]["num_replicas"], 3, "{info:#}");
    let leader = info["cluster"]["leader"].as_str().unwrap().to_string();
    let victim: usize = leader.trim_start_matches('n').parse::<usize>().unwrap() - 1;
    let t = Instant::now();
    nodes[victim].kill();
    eprintln!("killed {leader}, the decision bucket's leader");
    assert!(
        load.wait_answers(20, Duration::from_secs(60)).await,
        "service did not continue without {leader}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());
    let (before, gap, after) = recovery(&result, t, t, Duration::from_secs(2));
    eprintln!(
        "node loss: {before:.1} decisions/s before, first decision {:.2} s after, {after:.1} decisions/s after; attempts sent in the 5 s after: {:?}",
        gap.as_secs_f64(),
        outcomes_between(&result, t, t + Duration::from_secs(5))
    );
    clear_statuses(&result);
    assert!(result.unanswered().is_empty(), "{:?}", result.unanswered());

    let survivor = connect(&nodes[(victim + 1) % 3].url()).await;
    let report = final_check(
        &survivor,
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed > 0);
}

/// The stored decisions of the submits sent in `[from, to)`, by request id.
async fn decisions_sent(
    client: &async_nats::Client,
    load: &Load,
    from: Instant,
    to: Instant,
) -> Vec<(Instant, StoredDecision)> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for a in load.attempts() {
        if a.op != "submit" || a.sent < from || a.sent >= to || !seen.insert(a.id.clone()) {
            continue;
        }
        if let Some(d) = fetch_decision(client, &a.id).await.unwrap() {
            out.push((a.sent, d));
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

/// Statuses of `cluster` in `decisions` sent from `cut` on (those sent before may have been
/// answered), and checks on the others: answered before the deadline.
fn statuses_of(cluster: &str, cut: Instant, decisions: &[(Instant, StoredDecision)]) -> Vec<(ClusterStatus, f64)> {
    let mut out = Vec::new();
    for (sent, d) in decisions {
        for (name, slot) in &d.decision.clusters {
            if name == cluster {
                if *sent >= cut || slot.status != ClusterStatus::Answered {
                    out.push((slot.status, slot.elapsed_ms));
                }
            } else {
                assert_eq!(
                    slot.status,
                    ClusterStatus::Answered,
                    "{}: {name} is unaffected",
                    d.decision.request_id
                );
                assert!(
                    slot.elapsed_ms < DEADLINE_MS as f64,
                    "{name} answered before the deadline"
                );
            }
        }
    }
    out
}

/// Asserts the pattern of a lost cluster: timed out at the deadline first (when `times_out`:
/// its agent still holds its subscriptions but does not answer), then not waited for. A cluster
/// whose subscriptions are gone (its leaf server stopped) is `unreachable` at once: each cluster
/// is asked on its own subject, and NATS says "no responders".
fn cut_off_pattern(what: &str, statuses: &[(ClusterStatus, f64)], times_out: bool) {
    eprintln!(
        "{what}: {} decisions while cut off: {} timed_out, {} unreachable",
        statuses.len(),
        statuses.iter().filter(|s| s.0 == ClusterStatus::TimedOut).count(),
        statuses.iter().filter(|s| s.0 == ClusterStatus::Unreachable).count()
    );
    if times_out {
        assert!(
            statuses.iter().any(|s| s.0 == ClusterStatus::TimedOut),
            "{what}: requests in flight waited for it until the deadline"
        );
    } else {
        assert!(!statuses.is_empty(), "{what}: decisions were made meanwhile");
    }
    for (s, elapsed) in statuses {
        match s {
            ClusterStatus::TimedOut => assert!(
                *elapsed >= (DEADLINE_MS - 50) as f64 && *elapsed < (DEADLINE_MS + 500) as f64,
                "{what}: timed out at the deadline, not {elapsed} ms"
            ),
            ClusterStatus::Unreachable => {}
            other => panic!("{what}: unexpected status {other:?}"),
        }
    }
    assert_eq!(
        statuses.last().map(|s| s.0),
        Some(ClusterStatus::Unreachable),
        "{what}: no longer waited for"
    );
}

/// Waits until a decision sent after `since` has `cluster` answered; returns how long it took.
async fn recovered(client: &async_nats::Client, load: &Load, cluster: &str, since: Instant) -> Duration {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let ds = decisions_sent(client, load, since, Instant::now()).await;
        if let Some((t, _)) = ds.iter().find(|(_, d)| {
            d.decision
                .clusters
                .get(cluster)
                .is_some_and(|s| s.status == ClusterStatus::Answered)
        }) {
            return t.saturating_duration_since(since);
        }
        assert!(Instant::now() < end, "{cluster} never answered again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_agent_is_reported_at_the_deadline_and_comes_back() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::start();
    let url = nats.url();
    let names = ["a", "b", "c"];
    let mut agents = Vec::new();
    for n in names {
        agents.push(roomy_slow_heartbeat(&url, n).await);
    }
    let _coord = coordinator_on(&url, &coordinator_args()).await;
    let client = nats.client().await;
    wait_ready(&client, &names).await;
    // A workflow committed on c, to complete while c is frozen.
    let mut on_c = small_workflow("on-c", 1);
    on_c.clusters = vec!["c".into()];
    let r: fedvol_proto::coordinator::SubmitReply =
        fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Submit>(
            &client,
            "alice",
            &fedvol_tests::load::submit_msg("on-c", &on_c, false),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(r.stored.and_then(|s| s.decision.chosen_cluster).as_deref(), Some("c"));
    let mut s = spec("fz");
    s.submitters = 3;
    s.complete_every = 0;
    let load = Load::start(std::slice::from_ref(&client), s);
    assert!(load.wait_answers(10, Duration::from_secs(30)).await);

    let t = Instant::now();
    agents[2].proc.signal(nix::sys::signal::Signal::SIGSTOP);
    // While c is frozen, completing a workflow committed there fails with a clear status and
    // exit code 1 (regression: the CLI printed the unchanged decision and exited 0).
    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            std::process::Command::new(bin_path("fedvol"))
                .args(["--nats", &url, "-u", "alice", "complete", "on-c", "-o", "json"])
                .logged_in()
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(timed_out)"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["state"], "committed", "the decision is unchanged");
    assert!(load.wait_answers(6, Duration::from_secs(30)).await);
    let thawed = Instant::now();
    agents[2].proc.signal(nix::sys::signal::Signal::SIGCONT);
    let during = decisions_sent(&client, &load, t - Duration::from_secs(1), thawed).await;
    cut_off_pattern("frozen agent c", &statuses_of("c", t, &during), true);
    let back = recovered(&client, &load, "c", thawed).await;
    eprintln!(
        "frozen agent c: frozen {:.1} s, answering again {:.2} s after SIGCONT",
        thawed.duration_since(t).as_secs_f64(),
        back.as_secs_f64()
    );
    let mut result = load.stop().await;
    eprintln!("load: {}", result.summary());
    // The complete c did not answer is finished by the coordinator in the background once c
    // answers again (RELIABILITY.md, bug 13): on-c ends completed on c and in the store. Waited
    // for before the check, which reads the agents, then the store (a completion between the
    // two reads is not a disagreement).
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let d = fetch_decision(&client, "on-c").await.unwrap().expect("on-c is stored");
        if d.state == fedvol_proto::decisions::DecisionState::Completed {
            break;
        }
        assert!(Instant::now() < end, "on-c still {:?} 30 s after c came back", d.state);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    result.ids.insert("on-c".into());
    result.acked.insert(
        "on-c".into(),
        fedvol_tests::load::Acked {
            cluster: "c".into(),
            completed: true,
        },
    );
    let report = final_check(
        &client,
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert_eq!(report.holds, 0, "late holds were released or lapsed");
}

/// A hub with JetStream listening for leaf servers, and leaf server configs pointing at it.
struct LeafTopology {
    hub: NatsServer,
    leaves: Vec<NatsServer>,
    _dir: tempfile::TempDir,
}

fn leaf_topology(n: usize) -> LeafTopology {
    let dir = tempfile::tempdir().unwrap();
    let (hub_port, leaf_port) = (free_port(), free_port());
    let hub_conf: PathBuf = dir.path().join("hub.conf");
    std::fs::write(
        &hub_conf,
        format!(
            "server_name: hub\nlisten: 127.0.0.1:{hub_port}\njetstream {{ store_dir: \"{}\" }}\nleafnodes {{ listen: 127.0.0.1:{leaf_port} }}\n",
            dir.path().join("hub-store").display()
        ),
    )
    .unwrap();
    let hub = NatsServer::start_config_file(&hub_conf, hub_port);
    let leaves = (0..n)
        .map(|i| {
            let port = free_port();
            let conf = dir.path().join(format!("leaf-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "server_name: leaf-{i}\nlisten: 127.0.0.1:{port}\nleafnodes {{ remotes: [ {{ url: \"nats-leaf://127.0.0.1:{leaf_port}\" }} ] }}\n"
                ),
            )
            .unwrap();
            NatsServer::start_config_file(&conf, port)
        })
        .collect();
    LeafTopology { hub, leaves, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_whose_leaf_server_stops_is_reported_and_comes_back() {
    let _serial = SERIAL.lock().await;
    let mut topo = leaf_topology(3);
    let linked = wait_until(Duration::from_secs(15), Duration::from_millis(50), || {
        topo.hub.log().matches("Leafnode connection created").count() >= 3
    })
    .await;
    assert!(linked, "the leaf servers connect to the hub:\n{}", topo.hub.log());
    let hub_url = topo.hub.url();
    let _coord = coordinator_on(&hub_url, &coordinator_args()).await;
    let names = ["a", "b", "c"];
    let mut agents = Vec::new();
    for (i, n) in names.iter().enumerate() {
        agents.push(roomy_slow_heartbeat(&topo.leaves[i].url(), n).await);
    }
    let client = connect(&hub_url).await;
    let registered = wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
        agents.iter().all(|a| a.proc.log().contains("endpoints ready"))
    })
    .await;
    assert!(registered);
    wait_ready(&client, &names).await;
    let mut s = spec("lf");
    s.submitters = 3;
    s.complete_every = 0;
    let load = Load::start(std::slice::from_ref(&client), s);
    assert!(load.wait_answers(10, Duration::from_secs(30)).await);

    let t = Instant::now();
    topo.leaves[2].stop();
    assert!(load.wait_answers(8, Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted = Instant::now();
    topo.leaves[2].restart();
    let during = decisions_sent(&client, &load, t - Duration::from_secs(1), restarted).await;
    cut_off_pattern(
        "cluster c behind its stopped leaf server",
        &statuses_of("c", t, &during),
        false,
    );
    let back = recovered(&client, &load, "c", restarted).await;
    eprintln!(
        "leaf server of c: stopped {:.1} s, c answering again {:.2} s after the leaf server restarted",
        restarted.duration_since(t).as_secs_f64(),
        back.as_secs_f64()
    );
    let result = load.stop().await;
    eprintln!("load: {}", result.summary());
    assert!(result.unanswered().is_empty(), "{:?}", result.unanswered());
    let report = final_check(
        &client,
        &named_inventories(&names, &agents),
        &result,
        Duration::from_secs(15),
    )
    .await;
    eprintln!("checker: {report}");
    report.assert_clean();
    assert!(report.committed > 0);
}
