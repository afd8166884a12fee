//! Operators drain clusters (`fedvol clusters drain|undrain`), end to end on the shipped NATS
//! configurations with real processes: two coordinators, two agents, the CLI as alice (a user)
//! and as ops (the operator of `deploy/nats`).
//!
//! - under `secure.conf`: alice's drain is refused by the server (her identity may not publish
//!   the operators' subjects) and says so; an identity the permissions let through but that is
//!   no operator of the coordinators is refused by them (`not_operator`); the operator's drain
//!   reaches both coordinators within a second; work committed on the drained cluster before
//!   completes; no new decision of either coordinator chooses it (a workflow that fits only
//!   there is refused `clusters_drained`, or queued with `--wait-for-capacity`); `why-not`,
//!   `clusters` and `clusters show` say who drained it, when and why; the undrain puts it back
//!   and the queued workflow is placed there;
//! - under `single.conf`: parallel drains and undrains of one cluster (one of each changes it,
//!   the others are told what is in force), an unknown cluster (refused with a suggestion, nothing
//!   stored; or drained before it joins, and never chosen once it has), and both coordinators
//!   killed and restarted (the drain survives).
//!
//! Kubernetes' `kubectl drain`/cordon and Slurm's DRAIN state are the models: no new work, what
//! runs goes on.

use std::net::SocketAddr;
use std::process::Output;
use std::time::{Duration, Instant};

use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::http::metrics_addr;
use fedvol_tests::shipped::Shipped;
use fedvol_tests::{NatsServer, wait_until};

/// One test at a time: each runs a server, two coordinators and two or three agents.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One 8-core job: each host of [`slots_inventory`] takes one.
const WORKFLOW: &str = "version: v4\nclusters: [cluster-a]\nvolumes:\n  scratch:\n    size: 1MiB\njobs:\n  j:\n    image: {uri: docker://a}\n    mounts: {/s: scratch}\n    resource: {cpu: {cores: 8}, memory: {size: 8GiB}}\n";

fn cli(nats: &NatsServer, user: &str, args: &[&str]) -> Output {
    fedvol_tests::cli::fedvol_as(nats, user, args)
}

fn shown(o: &Output) -> String {
    fedvol_tests::cli::shown(o)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(o)))
}

/// Every line of `out` fits 100 columns.
fn fits_100(what: &str, out: &str) {
    for l in out.lines() {
        assert!(
            l.chars().count() <= 100,
            "{what}: a line over 100 columns:\n{l}\n\n{out}"
        );
    }
}

/// A drain request sent on `client` as `user` (the subject's user token), past the CLI's own
/// checks: what the coordinators answer.
async fn raw_drain(
    client: &async_nats::Client,
    user: &str,
    cluster: &str,
    reason: &str,
) -> Result<fedvol_proto::coordinator::DrainReply, fedvol_tests::load::CallError> {
    fedvol_tests::load::coordinator_op::<fedvol_proto::coordinator::Drain>(
        client,
        user,
        &fedvol_proto::coordinator::DrainMsg {
            cluster: cluster.into(),
            reason: reason.into(),
            before_join: false,
        },
        Duration::from_secs(5),
    )
    .await
}

/// Two coordinators, the operators `ops`, each serving metrics on a port of its own.
async fn coordinators(nats: &NatsServer) -> Vec<CoordinatorProc> {
    let mut out = Vec::new();
    for _ in 0..2 {
        out.push(
            CoordinatorProc::start(
                nats,
                &[
                    "--operator",
                    "ops",
                    "--metrics-listen",
                    "127.0.0.1:0",
                    "--deadline-ms",
                    "2000",
                    "--discovery-ms",
                    "300",
                    "--reconcile-every-ms",
                    "500",
                ],
            )
            .await,
        );
    }
    out
}

/// The value of `series` (the whole series text, labels included) on the coordinator whose
/// metrics are at `addr`, if it has it.
async fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, text) = fedvol_tests::http::get(addr, "/metrics").await.ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Waits (up to `within`) until every coordinator's `fedvol_coordinator_cluster_drained` for
/// `cluster` is `value`; returns how long each took, or panics naming the coordinator that
/// never did.
async fn seen_by_all(coords: &[CoordinatorProc], cluster: &str, value: f64, within: Duration) -> Vec<Duration> {
    let series = format!("fedvol_coordinator_cluster_drained{{cluster=\"{cluster}\"}}");
    let start = Instant::now();
    let mut took = Vec::new();
    for (i, c) in coords.iter().enumerate() {
        let addr = metrics_addr(&c.proc);
        loop {
            if metric(addr, &series).await == Some(value) {
                took.push(start.elapsed());
                break;
            }
            assert!(
                start.elapsed() < within,
                "coordinator {i} does not show {series} {value} within {within:?}: {:?}",
                metric(addr, &series).await
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    took
}

/// How many submits coordinator `c` answered, by its metrics.
async fn submits_served(c: &CoordinatorProc) -> u64 {
    let (_, text) = fedvol_tests::http::get(metrics_addr(&c.proc), "/metrics")
        .await
        .expect("the coordinator's metrics");
    text.lines()
        .filter(|l| l.starts_with("fedvol_coordinator_requests_total{endpoint=\"submit\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits until both agents are heard by the coordinators (alive, restored).
async fn wait_clusters(nats: &NatsServer, names: &[&str]) {
    let ok = wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
        let o = cli(nats, "alice", &["clusters", "-o", "json"]);
        o.status.success()
            && serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok_and(|d| {
                names.iter().all(|n| {
                    d["clusters"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["name"] == *n && c["alive"] == true))
                })
            })
    })
    .await;
    assert!(ok, "clusters {names:?} never all alive");
}

/// The acceptance test: under the shipped `secure.conf`, with two coordinators.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_operators_drain_and_a_drained_cluster_takes_no_new_work_while_its_own_completes() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::shipped(Shipped::Secure);
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("cluster-a", 2, d, "all")).await;
    let _b = AgentProc::start(&nats, 200, |d| slots_inventory("cluster-b", 2, d, "all")).await;
    let coords = coordinators(&nats).await;
    wait_clusters(&nats, &["cluster-a", "cluster-b"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // Committed on cluster-a (the workflow prefers it) before any drain.
    let o = cli(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "before-1", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    assert_eq!(json(&o)["state"], "committed", "{}", shown(&o));
    assert_eq!(json(&o)["decision"]["chosen_cluster"], "cluster-a", "{}", shown(&o));

    // alice may not drain: the server refuses her publish on the operators' subject, and the
    // CLI says so at once.
    let o = cli(
        &nats,
        "alice",
        &["clusters", "drain", "cluster-a", "--reason", "mine now"],
    );
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("refused") && text.contains("only operators may drain"),
        "alice is told she may not: {text}"
    );
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            nats.log().lines().any(|l| {
                l.contains("Publish Violation")
                    && l.contains("\"alice\"")
                    && l.contains("fedvol.v1.operator.drain.alice")
            })
        })
        .await,
        "the server logged alice's refused publish:\n{}",
        nats.log()
    );
    // An identity whose NATS permissions let it through but that no coordinator names an
    // operator (the observer plays it) is refused by the coordinators themselves.
    let observer = nats.client().await;
    let r = raw_drain(&observer, "mallory", "cluster-a", "not an operator").await;
    let refused = r.expect_err("a non-operator's drain is refused").to_string();
    assert!(
        refused.contains("not_operator") && refused.contains("only operators may (ops)"),
        "{refused}"
    );
    let o = cli(&nats, "alice", &["clusters", "-o", "json"]);
    assert!(
        json(&o)["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.get("drain").is_none()),
        "nothing was drained: {}",
        shown(&o)
    );

    // The operator's drain: every coordinator knows it within a second.
    let o = cli(
        &nats,
        "ops",
        &["clusters", "drain", "cluster-a", "--reason", "disk swap in rack 4"],
    );
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("cluster cluster-a drained by ops at "), "{text}");
    assert!(text.contains("disk swap in rack 4"), "{text}");
    fits_100("clusters drain", &String::from_utf8_lossy(&o.stdout));
    let took = seen_by_all(&coords, "cluster-a", 1.0, Duration::from_secs(1)).await;
    eprintln!("the drain was seen by both coordinators after {took:?}");

    // New work: never on cluster-a, whichever coordinator plans it (dry runs, then real ones).
    let before: Vec<u64> = futures::future::join_all(coords.iter().map(submits_served)).await;
    for i in 0..12 {
        let id = format!("dry-{i}");
        let o = cli(
            &nats,
            "alice",
            &["submit", &wf, "--request-id", &id, "--dry-run", "-o", "json"],
        );
        assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
        let d = json(&o);
        assert_eq!(d["decision"]["chosen_cluster"], "cluster-b", "{id}: {}", shown(&o));
        assert_eq!(d["decision"]["drained"]["cluster-a"]["by"], "ops", "{id}: {d:#}");
    }
    let after: Vec<u64> = futures::future::join_all(coords.iter().map(submits_served)).await;
    assert!(
        before.iter().zip(&after).all(|(b, a)| a > b),
        "both coordinators planned some of the submits (before {before:?}, after {after:?})"
    );
    for id in ["after-1", "after-2"] {
        let o = cli(&nats, "alice", &["submit", &wf, "--request-id", id, "-o", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
        assert_eq!(json(&o)["decision"]["chosen_cluster"], "cluster-b", "{}", shown(&o));
    }
    // cluster-b is full; only drained cluster-a has room: refused, saying so (exit 2).
    let o = cli(&nats, "alice", &["submit", &wf, "--request-id", "after-3"]);
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("clusters_drained")
            && text.contains("fits only on drained clusters: cluster-a (drained by ops at"),
        "{text}"
    );
    assert!(text.contains("disk swap in rack 4"), "{text}");
    // Why cluster-a lost, from the record: the drain, who, when, why.
    let o = cli(&nats, "alice", &["why-not", "after-1", "--cluster", "cluster-a"]);
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("drained") && text.contains("by ops") && text.contains("disk swap in rack 4"),
        "{text}"
    );
    // Waiting for capacity: queued, never placed on the drained cluster.
    let o = cli(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "queued-1", "--wait-for-capacity"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let state = |id: &str| {
        let o = cli(&nats, "alice", &["decisions", "show", id, "-o", "json"]);
        json(&o)
    };
    // The reconciler's holder takes a queued decision (`planned` while it tries to place it,
    // every 500 ms here) and puts it back: read it between tries.
    let between_tries = |id: &str| {
        let mut q = state(id);
        for _ in 0..100 {
            if q["state"] != "planned" {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            q = state(id);
        }
        q
    };
    assert_eq!(between_tries("queued-1")["state"], "queued");

    // Committed work on the drained cluster runs on and completes; the room it frees stays
    // unused while the drain lasts (the queue is tried on the completion and every 500 ms).
    let o = cli(&nats, "alice", &["complete", "before-1"]);
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    assert_eq!(state("before-1")["state"], "completed");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let q = between_tries("queued-1");
    assert_eq!(q["state"], "queued", "{q:#}");
    assert_eq!(q["decision"]["refused"]["code"], "clusters_drained", "{q:#}");
    assert!(q["decision"]["chosen_cluster"].is_null(), "{q:#}");

    // Seen by people: `clusters`, `clusters show` (who, when, why), the metric (above).
    let o = cli(&nats, "alice", &["clusters"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("DRAINED"), "{out}");
    assert!(
        out.contains("cluster-a is drained by ops") && out.contains("disk swap in rack 4"),
        "{out}"
    );
    fits_100("clusters", &out);
    let o = cli(&nats, "alice", &["clusters", "show", "cluster-a"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("drained: by ops at ") && out.contains("disk swap in rack 4"),
        "{out}"
    );
    fits_100("clusters show", &out);

    // alice may not undrain either; the operator does, and every coordinator knows it within
    // a second; the queued workflow is placed there.
    let o = cli(&nats, "alice", &["clusters", "undrain", "cluster-a"]);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let o = cli(&nats, "ops", &["clusters", "undrain", "cluster-a"]);
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("cluster cluster-a undrained (it was drained by ops at"),
        "{text}"
    );
    let took = seen_by_all(&coords, "cluster-a", 0.0, Duration::from_secs(1)).await;
    eprintln!("the undrain was seen by both coordinators after {took:?}");
    let placed = wait_until(Duration::from_secs(10), Duration::from_millis(200), || {
        state("queued-1")["state"] == "committed"
    })
    .await;
    let q = state("queued-1");
    assert!(placed, "the queued workflow is placed once the drain ends: {q:#}");
    assert_eq!(q["decision"]["chosen_cluster"], "cluster-a", "{q:#}");
}

/// Under the shipped `single.conf`: many operators at once, names no coordinator knows, and
/// both coordinators killed and restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drains_hold_under_races_unknown_names_and_coordinator_restarts() {
    let _serial = SERIAL.lock().await;
    let nats = NatsServer::shipped(Shipped::Single);
    let _a = AgentProc::start(&nats, 200, |d| slots_inventory("cluster-a", 2, d, "all")).await;
    let _b = AgentProc::start(&nats, 200, |d| slots_inventory("cluster-b", 2, d, "all")).await;
    let mut coords = coordinators(&nats).await;
    wait_clusters(&nats, &["cluster-a", "cluster-b"]).await;
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let wf = wf.display().to_string();

    // alice is refused under this file too.
    let o = cli(&nats, "alice", &["clusters", "drain", "cluster-a", "--reason", "x"]);
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(shown(&o).contains("only operators may drain"), "{}", shown(&o));

    // Eight drains of one cluster at once, each with its own reason: one drains it, the seven
    // others are told the drain in force (the same operator, time and reason for all).
    let drains: Vec<Output> = {
        let runs: Vec<_> = (0..8)
            .map(|i| {
                let url = nats.url();
                let reason = format!("reason {i}");
                std::thread::spawn(move || {
                    let mut cmd = std::process::Command::new(fedvol_tests::bin_path("fedvol"));
                    cmd.args([
                        "--nats",
                        &url,
                        "-u",
                        "ops",
                        "clusters",
                        "drain",
                        "cluster-a",
                        "--reason",
                    ])
                    .arg(&reason)
                    .args(["-o", "json"])
                    .env_remove("FEDVOL_OUTPUT");
                    fedvol_tests::shipped::login(&mut cmd);
                    cmd.output().expect("fedvol runs")
                })
            })
            .collect();
        runs.into_iter().map(|t| t.join().unwrap()).collect()
    };
    let answers: Vec<serde_json::Value> = drains.iter().map(json).collect();
    assert_eq!(
        answers.iter().filter(|a| a["changed"] == true).count(),
        1,
        "exactly one drain changed it: {answers:#?}"
    );
    let first = &answers[0]["drain"];
    assert!(
        answers.iter().all(|a| &a["drain"] == first),
        "every answer names the one drain in force: {answers:#?}"
    );
    seen_by_all(&coords, "cluster-a", 1.0, Duration::from_secs(1)).await;
    // Eight undrains at once: one ends it.
    let undrains: Vec<serde_json::Value> = {
        let runs: Vec<_> = (0..8)
            .map(|_| {
                let url = nats.url();
                std::thread::spawn(move || {
                    let mut cmd = std::process::Command::new(fedvol_tests::bin_path("fedvol"));
                    cmd.args([
                        "--nats",
                        &url,
                        "-u",
                        "ops",
                        "clusters",
                        "undrain",
                        "cluster-a",
                        "-o",
                        "json",
                    ])
                    .env_remove("FEDVOL_OUTPUT");
                    fedvol_tests::shipped::login(&mut cmd);
                    cmd.output().expect("fedvol runs")
                })
            })
            .collect();
        runs.into_iter().map(|t| json(&t.join().unwrap())).collect()
    };
    assert_eq!(
        undrains.iter().filter(|a| a["changed"] == true).count(),
        1,
        "exactly one undrain changed it: {undrains:#?}"
    );
    assert_eq!(
        undrains.iter().filter(|a| a["ended"] == *first).count(),
        1,
        "{undrains:#?}"
    );
    seen_by_all(&coords, "cluster-a", 0.0, Duration::from_secs(1)).await;

    // Drains and undrains interleaved: whatever order they ran in, every coordinator ends up
    // with what the bucket holds (checked against a last, lone drain).
    let mixed: Vec<Output> = {
        let runs: Vec<_> = (0..10)
            .map(|i| {
                let url = nats.url();
                std::thread::spawn(move || {
                    let mut cmd = std::process::Command::new(fedvol_tests::bin_path("fedvol"));
                    cmd.args(["--nats", &url, "-u", "ops", "clusters"]);
                    if i % 2 == 0 {
                        cmd.args(["drain", "cluster-a", "--reason", "mixed"]);
                    } else {
                        cmd.args(["undrain", "cluster-a"]);
                    }
                    cmd.env_remove("FEDVOL_OUTPUT");
                    fedvol_tests::shipped::login(&mut cmd);
                    cmd.output().expect("fedvol runs")
                })
            })
            .collect();
        runs.into_iter().map(|t| t.join().unwrap()).collect()
    };
    for o in &mixed {
        assert_eq!(o.status.code(), Some(0), "{}", shown(o));
    }
    let o = cli(
        &nats,
        "ops",
        &["clusters", "drain", "cluster-a", "--reason", "settled", "-o", "json"],
    );
    let now_in_force = json(&o)["drain"].clone();
    assert!(now_in_force.is_object(), "{}", shown(&o));
    seen_by_all(&coords, "cluster-a", 1.0, Duration::from_secs(1)).await;

    // A reason that is not one visible line is refused before anything is sent (a wrong
    // command line, exit 64), and by the coordinators for a client that sends it anyway.
    let o = cli(
        &nats,
        "ops",
        &["clusters", "drain", "cluster-b", "--reason", "a\u{1b}[31mred"],
    );
    assert_eq!(o.status.code(), Some(64), "{}", shown(&o));
    assert!(shown(&o).contains("U+001B (a control character)"), "{}", shown(&o));
    let r = raw_drain(&nats.client().await, "ops", "cluster-b", "line\nbreak").await;
    let refused = r.expect_err("a reason with a line break is refused").to_string();
    assert!(
        refused.contains("bad_request") && refused.contains("U+000A"),
        "{refused}"
    );

    // A name no coordinator knows: refused with the closest known name, nothing stored.
    let o = cli(&nats, "ops", &["clusters", "drain", "clsuter-b", "--reason", "typo"]);
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("no cluster named `clsuter-b` is known") && text.contains("did you mean `cluster-b`?"),
        "{text}"
    );
    let o = cli(&nats, "alice", &["clusters", "-o", "json"]);
    assert!(
        json(&o).get("drained_unknown").is_none(),
        "nothing stored: {}",
        shown(&o)
    );
    // Drained before it joins: listed as such, and never chosen once it has joined.
    let o = cli(
        &nats,
        "ops",
        &[
            "clusters",
            "drain",
            "cluster-c",
            "--reason",
            "burn-in first",
            "--before-join",
        ],
    );
    let text = shown(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("no coordinator knows cluster-c yet"), "{text}");
    let o = cli(&nats, "alice", &["clusters"]);
    assert!(
        shown(&o).contains("cluster-c (not known yet) is drained by ops"),
        "{}",
        shown(&o)
    );
    let _c = AgentProc::start(&nats, 200, |d| slots_inventory("cluster-c", 2, d, "all")).await;
    wait_clusters(&nats, &["cluster-a", "cluster-b", "cluster-c"]).await;
    for i in 0..6 {
        let id = format!("joined-{i}");
        let o = cli(
            &nats,
            "alice",
            &["submit", &wf, "--request-id", &id, "--dry-run", "-o", "json"],
        );
        assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
        let d = json(&o);
        assert_eq!(d["decision"]["chosen_cluster"], "cluster-b", "{id}: {d:#}");
        assert!(
            d["decision"]["clusters"]["cluster-c"].is_object(),
            "cluster-c was asked: {d:#}"
        );
    }

    // Both coordinators killed and started again: the drains are still in force the moment
    // each is ready, and still no new work goes to cluster-a or cluster-c.
    for c in &mut coords {
        c.restart().await;
    }
    for c in &coords {
        let addr = metrics_addr(&c.proc);
        for cluster in ["cluster-a", "cluster-c"] {
            let series = format!("fedvol_coordinator_cluster_drained{{cluster=\"{cluster}\"}}");
            assert_eq!(metric(addr, &series).await, Some(1.0), "{series} after the restart");
        }
    }
    wait_clusters(&nats, &["cluster-a", "cluster-b", "cluster-c"]).await;
    let o = cli(
        &nats,
        "alice",
        &["submit", &wf, "--request-id", "restarted-1", "-o", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let d = json(&o);
    assert_eq!(d["decision"]["chosen_cluster"], "cluster-b", "{d:#}");
    assert_eq!(d["decision"]["drained"]["cluster-a"], now_in_force, "{d:#}");
}
