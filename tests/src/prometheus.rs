//! A real Prometheus server per test (Debian's `prometheus` package): scraping given loopback
//! targets every second, with its TSDB in a temporary directory, on a free loopback port,
//! killed when dropped. Queried through its HTTP API (`/api/v1/query`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Spawned;
use crate::http::{get, query_value};
use crate::nats::free_port;

/// The `prometheus` binary: `$PROMETHEUS_BIN`, else `prometheus` on `PATH`, else
/// `/usr/bin/prometheus`; `None` when there is none.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROMETHEUS_BIN") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .iter()
        .chain(std::iter::once(&PathBuf::from("/usr/bin")))
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// A running Prometheus.
#[derive(Debug)]
pub struct Prometheus {
    proc: Spawned,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

/// One sample of an instant query: the series' labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels (`__name__` included when the query keeps it).
    pub labels: serde_json::Map<String, serde_json::Value>,
    /// The value.
    pub value: f64,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (job `fedvol`) every second, and waits until it
    /// is ready (30 s at most). Returns `None` when there is no `prometheus` binary ([`binary`]).
    ///
    /// Panics (test failure) when it does not come up, with its log.
    pub async fn start(targets: &[SocketAddr]) -> Option<Prometheus> {
        let bin = binary()?;
        let dir = tempfile::tempdir().expect("a temporary directory for prometheus");
        let config = dir.path().join("prometheus.yml");
        let list = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: fedvol\n    static_configs:\n      - targets: [{list}]\n"
            ),
        )
        .expect("the prometheus configuration");
        let mut last = String::new();
        // Another process may take the free port between probing and binding: try a few.
        for _ in 0..5 {
            let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let mut cmd = Command::new(&bin);
            cmd.arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn");
            let mut proc = Spawned::start(cmd);
            let end = Instant::now() + Duration::from_secs(30);
            while Instant::now() < end {
                if let Ok((200, _)) = get(addr, "/-/ready").await {
                    return Some(Prometheus { proc, addr, _dir: dir });
                }
                if proc.try_status().is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            last = proc.log();
            if !last.contains("address already in use") {
                break;
            }
        }
        panic!("prometheus did not become ready:\n{last}")
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        self.proc.log()
    }

    /// The samples of the instant query `promql` now.
    ///
    /// Errors: the API could not be reached or refused the query (a sentence with its answer).
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, String> {
        let (status, body) = get(self.addr, &format!("/api/v1/query?query={}", query_value(promql))).await?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("query {promql}: {e}: {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!("query {promql}: HTTP {status}: {body}"));
        }
        let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
        Ok(result
            .into_iter()
            .filter_map(|r| {
                let labels = r["metric"].as_object().cloned().unwrap_or_default();
                let value = r["value"][1].as_str()?.parse().ok()?;
                Some(Sample { labels, value })
            })
            .collect())
    }

    /// The value of the single-sample query `promql` now (`None` when it has no sample, or
    /// the query failed).
    pub async fn scalar(&self, promql: &str) -> Option<f64> {
        match self.query(promql).await {
            Ok(s) if s.len() == 1 => Some(s[0].value),
            _ => None,
        }
    }
}
