//! Metrics and health end to end: a live federation (a real nats-server, two
//! `fedvol-agent`s and a `fedvol-coordinator` with `--metrics-listen`) scraped by a real
//! Prometheus (Debian's `prometheus` package), whose API must see the counters move after
//! submits; every metric the Grafana dashboard (`deploy/grafana/fedvol.json`) queries exists;
//! `/healthz` and `/readyz` follow the NATS connection.
//!
//! Tests run one at a time (two cores are shared with the other tests' processes).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fedvol_proto::coordinator as api;
use fedvol_tests::federation::{AgentProc, CoordinatorProc, slots_inventory};
use fedvol_tests::http::{get, metrics_addr};
use fedvol_tests::load::{coordinator_op, small_workflow, submit_msg};
use fedvol_tests::prometheus::{self, Prometheus};
use fedvol_tests::{NatsServer, faultkit};

/// One test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long Prometheus may take to see what the test expects (it scrapes every second).
const SCRAPE_WAIT: Duration = Duration::from_secs(20);

/// Two agents (`east`, `west`, four one-job hosts each, usable by group `physics`) and a
/// coordinator, each serving metrics on a free loopback port.
struct Federation {
    nats: NatsServer,
    agents: Vec<AgentProc>,
    coordinator: CoordinatorProc,
}

impl Federation {
    async fn start() -> Federation {
        let nats = NatsServer::start();
        let mut agents = Vec::new();
        for name in ["east", "west"] {
            agents.push(
                faultkit::agent_on(&nats.url(), 200, &["--metrics-listen", "127.0.0.1:0"], |dir| {
                    slots_inventory(name, 4, dir, "[physics]")
                })
                .await,
            );
        }
        let coordinator = faultkit::coordinator_on(
            &nats.url(),
            &[
                "--metrics-listen",
                "127.0.0.1:0",
                "--deadline-ms",
                "2000",
                "--discovery-ms",
                "300",
            ],
        )
        .await;
        Federation {
            nats,
            agents,
            coordinator,
        }
    }

    /// Every daemon's metrics address: the agents', then the coordinator's.
    fn targets(&self) -> Vec<SocketAddr> {
        let mut t: Vec<SocketAddr> = self.agents.iter().map(|a| metrics_addr(&a.proc)).collect();
        t.push(metrics_addr(&self.coordinator.proc));
        t
    }

    /// `n` committed submits of a one-core workflow.
    async fn submit(&self, n: usize) {
        let client = self.nats.client().await;
        let wf = small_workflow("obs", 1);
        for i in 0..n {
            let reply = coordinator_op::<api::Submit>(
                &client,
                "alice",
                &submit_msg(&format!("obs-{i}"), &wf, false),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("submit {i}: {e}"));
            assert!(reply.error.is_none(), "submit {i}: {:?}", reply.error);
        }
    }
}

/// GETs `path`, panicking with the error.
async fn must_get(addr: SocketAddr, path: &str) -> (u16, String) {
    get(addr, path).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Every `fedvol_*` name the dashboard's queries use.
fn dashboard_metrics() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/grafana/fedvol.json");
    let text = std::fs::read_to_string(path).expect("deploy/grafana/fedvol.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is valid JSON");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().expect("every target has an expr").to_string());
        }
    }
    assert!(exprs.len() >= 20, "the dashboard queries the metrics: {exprs:?}");
    let mut names = BTreeSet::new();
    for e in exprs {
        let mut rest = e.as_str();
        while let Some(at) = rest.find("fedvol_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    names
}

/// The scrape test: Prometheus sees every target up, then sees the request, gather, commit and
/// bucket-write counters move after submits; the dashboard queries only metrics that exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_live_federation_and_sees_the_counters_move() {
    let _one = SERIAL.lock().await;
    if prometheus::binary().is_none() {
        fedvol_testenv::skip(
            fedvol_testenv::Missing::Tool,
            "no `prometheus` binary (install Debian's `prometheus` package, or set PROMETHEUS_BIN); .ci/run installs it",
        );
        return;
    }
    let fed = Federation::start().await;
    let targets = fed.targets();
    let prom = Prometheus::start(&targets)
        .await
        .expect("prometheus binary found above");

    // Every target scraped and up.
    let end = Instant::now() + SCRAPE_WAIT;
    let mut up = None;
    while Instant::now() < end {
        up = prom.scalar("sum(up{job=\"fedvol\"})").await;
        if up == Some(3.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(up, Some(3.0), "every target up; prometheus log:\n{}", prom.log());

    fed.submit(4).await;

    // What a user of the dashboard would see move, each at least this much.
    let expected: [(&str, f64); 8] = [
        (
            "sum(fedvol_coordinator_requests_total{endpoint=\"submit\",outcome=\"ok\"})",
            4.0,
        ),
        ("sum(fedvol_coordinator_decisions_total{state=\"committed\"})", 4.0),
        (
            "sum(fedvol_agent_requests_total{endpoint=\"cluster_plan\",outcome=\"ok\"})",
            8.0,
        ),
        ("sum(fedvol_coordinator_gather_total{status=\"answered\"})", 8.0),
        ("count(fedvol_coordinator_gather_total{status=\"answered\"})", 2.0),
        (
            "sum(fedvol_agent_request_duration_seconds_count{endpoint=\"commit\"})",
            4.0,
        ),
        (
            "sum(fedvol_coordinator_kv_write_duration_seconds_count{op=\"create\"})",
            4.0,
        ),
        ("sum(fedvol_agent_zone_cpu_in_use_cores)", 4.0),
    ];
    let end = Instant::now() + SCRAPE_WAIT;
    let mut seen = Vec::new();
    loop {
        seen.clear();
        for (q, _) in &expected {
            seen.push(prom.scalar(q).await);
        }
        let all = expected
            .iter()
            .zip(&seen)
            .all(|((_, want), got)| got.is_some_and(|g| g >= *want));
        if all || Instant::now() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for ((q, want), got) in expected.iter().zip(&seen) {
        assert!(
            got.is_some_and(|g| g >= *want),
            "{q}: expected at least {want}, prometheus has {got:?}"
        );
    }
    // One inventory version per agent, labelled with its cluster.
    let versions = prom.query("fedvol_agent_inventory_info").await.expect("the query");
    let clusters: BTreeSet<&str> = versions
        .iter()
        .filter_map(|s| s.labels.get("cluster").and_then(|c| c.as_str()))
        .collect();
    assert_eq!(clusters, BTreeSet::from(["east", "west"]), "{versions:?}");
    assert!(
        versions
            .iter()
            .all(|s| s.labels.get("version").is_some_and(|v| v != "")),
        "{versions:?}"
    );

    // Every metric the Grafana dashboard queries is exported by some daemon.
    let mut exported = String::new();
    for t in &targets {
        let (status, body) = must_get(*t, "/metrics").await;
        assert_eq!(status, 200);
        exported.push_str(&body);
    }
    let missing: Vec<String> = dashboard_metrics()
        .into_iter()
        .filter(|name| {
            !exported
                .lines()
                .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics nobody exports: {missing:?}"
    );
}

/// The example scrape configuration in `deploy/prometheus/` is one Prometheus accepts.
#[test]
fn the_shipped_scrape_config_is_valid() {
    let Some(prometheus) = prometheus::binary() else {
        fedvol_testenv::skip(
            fedvol_testenv::Missing::Tool,
            "no `prometheus` binary (nor its promtool); .ci/run installs Debian's `prometheus`",
        );
        return;
    };
    let promtool = prometheus.with_file_name("promtool");
    if !promtool.is_file() {
        fedvol_testenv::skip(
            fedvol_testenv::Missing::Tool,
            &format!("no promtool beside {}", prometheus.display()),
        );
        return;
    }
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/prometheus/prometheus.yml");
    let out = std::process::Command::new(&promtool)
        .args(["check", "config", config])
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool check config {config}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `/healthz` is 200 while the process runs; `/readyz` is 200 once the daemon serves, 503
/// with the reason while NATS is down, 200 again once it reconnected (counted in
/// `fedvol_nats_reconnects_total`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_nats_connection() {
    let _one = SERIAL.lock().await;
    let mut fed = Federation::start().await;
    let targets = fed.targets();
    for t in &targets {
        assert_eq!(must_get(*t, "/healthz").await, (200, "ok\n".to_string()), "{t}");
        assert_eq!(must_get(*t, "/readyz").await, (200, "ready\n".to_string()), "{t}");
        let (_, metrics) = must_get(*t, "/metrics").await;
        assert!(metrics.contains("fedvol_nats_connected"), "{metrics}");
    }

    fed.nats.stop();
    let poll = |want: u16| {
        let targets = targets.clone();
        async move {
            let end = Instant::now() + Duration::from_secs(15);
            let mut last = Vec::new();
            while Instant::now() < end {
                last.clear();
                for t in &targets {
                    last.push(get(*t, "/readyz").await);
                }
                if last.iter().all(|r| matches!(r, Ok((s, _)) if *s == want)) {
                    return last;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("/readyz did not all answer {want} within 15 s: {last:?}")
        }
    };
    for answer in poll(503).await {
        let (_, body) = answer.expect("an answer");
        assert!(body.starts_with("not ready: not connected to NATS"), "{body}");
    }
    for t in &targets {
        assert_eq!(must_get(*t, "/healthz").await.0, 200, "the process is up without NATS");
        let (_, metrics) = must_get(*t, "/metrics").await;
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("fedvol_nats_connected") && l.ends_with(" 0")),
            "{metrics}"
        );
    }

    fed.nats.restart();
    poll(200).await;
    for t in &targets {
        let (_, metrics) = must_get(*t, "/metrics").await;
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("fedvol_nats_reconnects_total") && l.ends_with(" 1")),
            "one reconnect counted at {t}:\n{metrics}"
        );
    }
}
