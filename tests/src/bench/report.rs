//! Results: one record per configuration ([`RunResult`]), printed as tables, appended as JSON
//! lines (`<out>/results.jsonl`), and gathered into the markdown tables of BENCHMARKS.md.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::bench::driver::Measured;
use crate::bench::procs::{Member, peak_rss_kib};

/// The configuration of one measurement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunConfig {
    /// Clusters (agents).
    pub clusters: usize,
    /// Hosts per cluster.
    pub hosts: usize,
    /// Provisioners per cluster.
    pub provisioners: usize,
    /// Existing volumes per cluster.
    pub volumes: usize,
    /// Requests in flight.
    pub in_flight: usize,
    /// Warm-up, ms.
    pub warmup_ms: u64,
    /// Measured window per mode, ms.
    pub window_ms: u64,
    /// Agent processes (= clusters: one `fedvol-agent` each; fewer: multi-agent mode).
    pub agent_processes: usize,
    /// The coordinator's plan deadline, ms.
    pub deadline_ms: u64,
    /// nats-server's `max_payload`, bytes (0: the server's default, 1 MiB).
    #[serde(default)]
    pub nats_max_payload_bytes: usize,
    /// The agents' heartbeat interval, ms. Results written before it was recorded were all
    /// measured with 1,000 ms, which is what reading them gives.
    #[serde(default = "heartbeat_before_it_was_recorded")]
    pub heartbeat_ms: u64,
    /// Cargo profile of the binaries (`release`, `debug`).
    pub profile: String,
}

/// The heartbeat every benchmark run used before [`RunConfig::heartbeat_ms`] was recorded, ms.
fn heartbeat_before_it_was_recorded() -> u64 {
    1000
}

/// What one process cost during a measured window.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcCost {
    /// The process (`coordinator`, `agent c00`, `agents c00-c31`, `nats-server`, ...).
    pub label: String,
    /// CPU time in the window, ms.
    pub cpu_ms: u64,
    /// CPU time per successful request, ms.
    pub cpu_ms_per_request: f64,
    /// Peak resident set size since the process started, at the window's end, KiB.
    pub peak_rss_kib: Option<u64>,
}

/// One mode's measurement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModeResult {
    /// `plan`, `submit` or `raw`.
    pub mode: String,
    /// Successful requests in the window.
    pub ok: u64,
    /// The warm-up's actual length (at least the configured one, longer until every request
    /// in flight had an answer), ms.
    #[serde(default)]
    pub warmup_ms: u64,
    /// The window's actual length, ms.
    #[serde(default)]
    pub window_ms: u64,
    /// Successful requests per second.
    pub throughput_rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 90th percentile latency, ms.
    pub p90_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Largest latency, ms.
    pub max_ms: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Failed requests in the window, by kind.
    pub errors: BTreeMap<String, u64>,
    /// The first failure's detail per kind (window or warm-up).
    #[serde(default)]
    pub error_examples: BTreeMap<String, String>,
    /// Failed requests during the warm-up.
    pub warmup_errors: u64,
    /// Requests outstanding at the window's end (not counted).
    pub late: u64,
    /// CPU time of every measured process together per successful request, ms.
    pub cpu_ms_per_request: f64,
    /// Each process's cost.
    pub procs: Vec<ProcCost>,
}

impl ModeResult {
    /// The result of `mode` from what the driver measured on `members` (same order as its CPU
    /// samples); reads each member's peak RSS now.
    pub fn new(mode: &str, m: &Measured, members: &[Member]) -> ModeResult {
        let per = |ms: u64| if m.ok > 0 { ms as f64 / m.ok as f64 } else { 0.0 };
        let procs: Vec<ProcCost> = members
            .iter()
            .zip(&m.cpu_ms)
            .map(|(member, &cpu)| ProcCost {
                label: member.label.clone(),
                cpu_ms: cpu,
                cpu_ms_per_request: per(cpu),
                peak_rss_kib: peak_rss_kib(member.pid),
            })
            .collect();
        ModeResult {
            mode: mode.to_string(),
            ok: m.ok,
            warmup_ms: (m.warmup_s * 1000.0) as u64,
            window_ms: (m.window_s * 1000.0) as u64,
            throughput_rps: m.throughput(),
            p50_ms: m.quantile_ms(0.50),
            p90_ms: m.quantile_ms(0.90),
            p99_ms: m.quantile_ms(0.99),
            max_ms: m.max_ms(),
            mean_ms: m.mean_ms(),
            errors: m.errors.clone(),
            error_examples: m.error_examples.clone(),
            warmup_errors: m.warmup_errors,
            late: m.late,
            cpu_ms_per_request: per(m.cpu_ms.iter().sum()),
            procs,
        }
    }

    /// Failed requests in the window.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// `none`, or `kind: n, ...`.
    pub fn errors_text(&self) -> String {
        if self.errors.is_empty() {
            "none".into()
        } else {
            self.errors
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// CPU ms per request of the processes whose label starts with `prefix`, summed.
    pub fn cpu_of(&self, prefix: &str) -> f64 {
        self.procs
            .iter()
            .filter(|p| p.label.starts_with(prefix))
            .map(|p| p.cpu_ms_per_request)
            .sum()
    }

    /// The largest peak RSS of the processes whose label starts with `prefix`, MiB.
    pub fn peak_rss_mib_of(&self, prefix: &str) -> Option<f64> {
        self.procs
            .iter()
            .filter(|p| p.label.starts_with(prefix))
            .filter_map(|p| p.peak_rss_kib)
            .max()
            .map(|k| k as f64 / 1024.0)
    }
}

/// One configuration's results.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// The configuration.
    pub config: RunConfig,
    /// When it was measured, ms since the epoch.
    pub unix_ms: u64,
    /// Size of a submit request, bytes.
    pub submit_bytes: usize,
    /// Size of the coordinator's plan broadcast (and of the raw request), bytes.
    pub plan_bytes: usize,
    /// Mean size of one agent's plan answer (and of a raw answer), bytes.
    pub answer_bytes: usize,
    /// Size of the coordinator's answer to one plan (the stored decision with its request),
    /// bytes; 0 when that plan failed (and in results of earlier runs).
    #[serde(default)]
    pub decision_bytes: usize,
    /// The federation at rest before the modes (heartbeats and CPU); absent in results of
    /// earlier runs.
    #[serde(default)]
    pub idle: Option<crate::bench::idle::IdleResult>,
    /// Each mode measured.
    pub modes: Vec<ModeResult>,
}

impl RunResult {
    /// The result of `mode`, if measured.
    pub fn mode(&self, mode: &str) -> Option<&ModeResult> {
        self.modes.iter().find(|m| m.mode == mode)
    }

    /// Throughput of `mode` / throughput of `raw`, when both were measured and raw moved.
    pub fn ratio(&self, mode: &str) -> Option<f64> {
        let raw = self.mode("raw")?.throughput_rps;
        let m = self.mode(mode)?.throughput_rps;
        (raw > 0.0).then(|| m / raw)
    }

    /// True when some mode had no successful request at all.
    pub fn some_mode_failed_entirely(&self) -> bool {
        self.modes.iter().any(|m| m.ok == 0)
    }
}

/// The widest a printed line may be: tables wrap their headers to fit.
pub const COLUMNS: u16 = 100;

/// An empty table in the bench's style, at most [`COLUMNS`] wide.
fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(COLUMNS);
    t
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

fn mib(k: Option<u64>) -> String {
    k.map(|k| format!("{:.1}", k as f64 / 1024.0))
        .unwrap_or_else(|| "-".into())
}

/// The tables of one result, as printed after each configuration.
pub fn render_run(r: &RunResult) -> String {
    let c = &r.config;
    // Four lines of at most 100 columns: the configuration, how it ran, the message sizes.
    let mut out = format!(
        "clusters {} × hosts {} (provisioners {}, volumes {}), in flight {}, {} build\n",
        c.clusters, c.hosts, c.provisioners, c.volumes, c.in_flight, c.profile
    );
    out.push_str(&format!(
        "window {} ms after at least {} ms warm-up, {} agent process(es), heartbeat every {} ms\n",
        c.window_ms, c.warmup_ms, c.agent_processes, c.heartbeat_ms
    ));
    out.push_str(&format!(
        "submit request {} bytes, plan broadcast {} bytes, agent answer {} bytes (mean)\n",
        r.submit_bytes, r.plan_bytes, r.answer_bytes
    ));
    out.push_str(&format!(
        "decision {} bytes, nats-server max_payload {}\n",
        r.decision_bytes,
        match c.nats_max_payload_bytes {
            0 => "default (1 MiB)".to_string(),
            n => format!("{n} bytes"),
        }
    ));
    if let Some(i) = &r.idle {
        out.push_str(&crate::bench::idle::render(i));
    }
    let mut t = table();
    t.set_header(vec![
        "mode",
        "warm-up s",
        "ok",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "CPU ms/req",
        "errors",
        "late",
    ]);
    for m in &r.modes {
        t.add_row(vec![
            Cell::new(&m.mode),
            right(format!("{:.1}", m.warmup_ms as f64 / 1000.0)),
            right(m.ok),
            right(format!("{:.1}", m.throughput_rps)),
            right(format!("{:.2}", m.p50_ms)),
            right(format!("{:.2}", m.p90_ms)),
            right(format!("{:.2}", m.p99_ms)),
            right(format!("{:.2}", m.max_ms)),
            right(format!("{:.2}", m.cpu_ms_per_request)),
            Cell::new(m.errors_text()),
            right(m.late),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    for mode in ["plan", "submit"] {
        if let Some(ratio) = r.ratio(mode) {
            out.push_str(&format!("{mode}/raw throughput: {ratio:.3}\n"));
        }
    }
    // Per process: CPU ms per request in each mode, and the peak RSS at the end.
    let mut labels: Vec<String> = Vec::new();
    for m in &r.modes {
        for p in &m.procs {
            if !labels.contains(&p.label) {
                labels.push(p.label.clone());
            }
        }
    }
    let mut t = table();
    let mut header = vec!["process".to_string()];
    header.extend(r.modes.iter().map(|m| format!("{} CPU ms/req", m.mode)));
    header.push("peak RSS MiB".into());
    t.set_header(header);
    for label in &labels {
        let mut row = vec![Cell::new(label)];
        let mut rss = None;
        for m in &r.modes {
            match m.procs.iter().find(|p| &p.label == label) {
                Some(p) => {
                    row.push(right(format!("{:.3}", p.cpu_ms_per_request)));
                    rss = rss.max(p.peak_rss_kib);
                }
                None => row.push(right("-")),
            }
        }
        row.push(right(mib(rss)));
        t.add_row(row);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let failed: Vec<String> = r
        .modes
        .iter()
        .filter(|m| m.error_count() > 0 || m.warmup_errors > 0)
        .map(|m| format!("{} ({}, warm-up {})", m.mode, m.errors_text(), m.warmup_errors))
        .collect();
    if !failed.is_empty() {
        out.push_str(&format!("WITH ERRORS: {}\n", failed.join("; ")));
        for m in &r.modes {
            for (kind, detail) in &m.error_examples {
                let detail: String = detail.chars().take(300).collect();
                out.push_str(&format!("  {} {kind}, e.g.: {detail}\n", m.mode));
            }
        }
    }
    out
}

/// Appends `r` as one JSON line to `<dir>/results.jsonl` (creating the directory).
///
/// Errors: the directory or file cannot be written.
pub fn append_jsonl(dir: &Path, r: &RunResult) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("results.jsonl");
    let line = serde_json::to_string(r).map_err(|e| format!("cannot encode a result: {e}"))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    writeln!(f, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Every result of a `results.jsonl` file, in order.
///
/// Errors: the file cannot be read, or a line is not a result (its line number).
pub fn read_jsonl(path: &Path) -> Result<Vec<RunResult>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: not a benchmark result: {e}", path.display(), i + 1))
        })
        .collect()
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn f2(x: f64) -> String {
    format!("{x:.2}")
}

/// The markdown tables of BENCHMARKS.md for `results`: throughput and latency per
/// configuration and mode (with the fedvol/raw ratio), then the cost per request per process
/// kind.
pub fn markdown_tables(results: &[RunResult]) -> String {
    let mut rows: Vec<&RunResult> = results.iter().collect();
    rows.sort_by_key(|r| (r.config.clusters, r.config.hosts, r.config.in_flight));
    let mut out = String::new();
    out.push_str("### Throughput and latency\n\n");
    out.push_str(
        "| clusters | hosts | in flight | mode | req/s | p50 ms | p90 ms | p99 ms | max ms | fedvol/raw | errors |\n",
    );
    out.push_str("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
    for r in &rows {
        for m in &r.modes {
            let ratio = match r.ratio(&m.mode) {
                Some(x) if m.mode != "raw" => format!("{x:.3}"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.config.clusters,
                r.config.hosts,
                r.config.in_flight,
                m.mode,
                f1(m.throughput_rps),
                f2(m.p50_ms),
                f2(m.p90_ms),
                f2(m.p99_ms),
                f2(m.max_ms),
                ratio,
                m.errors_text()
            ));
        }
    }
    out.push_str("\n### CPU time per request and peak RSS\n\n");
    out.push_str("CPU ms per successful request, by process kind (agents: all agent processes together; ");
    out.push_str(
        "raw: the responder processes in the agents' column); peak RSS: the largest process of the kind, MiB.\n\n",
    );
    out.push_str("| clusters | hosts | in flight | mode | coordinator | agents | nats-server | driver | RSS coordinator | RSS agent (max) | RSS nats-server |\n");
    out.push_str("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &rows {
        for m in &r.modes {
            let agents = m.cpu_of("agent") + m.cpu_of("responders");
            let rss = |p: &str| m.peak_rss_mib_of(p).map(f1).unwrap_or_else(|| "-".into());
            let agent_rss = if m.mode == "raw" {
                rss("responders")
            } else {
                rss("agent")
            };
            let coordinator = if m.mode == "raw" {
                "-".to_string()
            } else {
                f2(m.cpu_of("coordinator"))
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.config.clusters,
                r.config.hosts,
                r.config.in_flight,
                m.mode,
                coordinator,
                f2(agents),
                f2(m.cpu_of("nats-server")),
                f2(m.cpu_of("driver")),
                rss("coordinator"),
                agent_rss,
                rss("nats-server"),
            ));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A made-up result for tests.
    pub(crate) fn sample(clusters: usize, hosts: usize, in_flight: usize) -> RunResult {
        let mode = |name: &str, rps: f64| ModeResult {
            mode: name.into(),
            ok: (rps * 2.0) as u64,
            warmup_ms: 1000,
            window_ms: 2000,
            throughput_rps: rps,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            max_ms: 4.0,
            mean_ms: 1.2,
            errors: if name == "submit" {
                BTreeMap::from([("timeout".to_string(), 2)])
            } else {
                BTreeMap::new()
            },
            error_examples: BTreeMap::new(),
            warmup_errors: 0,
            late: 1,
            cpu_ms_per_request: 0.5,
            procs: vec![
                ProcCost {
                    label: "coordinator".into(),
                    cpu_ms: 100,
                    cpu_ms_per_request: 0.25,
                    peak_rss_kib: Some(20480),
                },
                ProcCost {
                    label: "agent c00".into(),
                    cpu_ms: 100,
                    cpu_ms_per_request: 0.25,
                    peak_rss_kib: Some(10240),
                },
            ],
        };
        RunResult {
            config: RunConfig {
                clusters,
                hosts,
                provisioners: 4,
                volumes: 100,
                in_flight,
                warmup_ms: 1000,
                window_ms: 2000,
                agent_processes: clusters,
                deadline_ms: 10_000,
                nats_max_payload_bytes: 0,
                heartbeat_ms: 2000,
                profile: "release".into(),
            },
            unix_ms: 1,
            submit_bytes: 900,
            plan_bytes: 1000,
            answer_bytes: 3000,
            decision_bytes: 20_000,
            idle: None,
            modes: vec![mode("plan", 100.0), mode("submit", 50.0), mode("raw", 400.0)],
        }
    }

    #[test]
    fn results_round_trip_through_json_lines_and_render() {
        let dir = tempfile::tempdir().unwrap();
        let a = sample(1, 100, 1);
        let b = sample(4, 1000, 64);
        append_jsonl(dir.path(), &a).unwrap();
        append_jsonl(dir.path(), &b).unwrap();
        let back = read_jsonl(&dir.path().join("results.jsonl")).unwrap();
        assert_eq!(back, vec![a.clone(), b]);
        assert_eq!(a.ratio("plan"), Some(0.25));
        let text = render_run(&a);
        assert!(text.contains("plan/raw throughput: 0.250"), "{text}");
        let header = text.lines().find(|l| l.contains("mode")).unwrap();
        let row = text.lines().find(|l| l.contains("│ plan")).unwrap();
        assert_eq!(header.matches('┆').count(), row.matches('┆').count(), "{text}");
        assert!(text.contains("WITH ERRORS: submit (timeout: 2"), "{text}");
        let md = markdown_tables(&back);
        assert!(md.contains("| 4 | 1000 | 64 | submit | 50.0 |"), "{md}");
        assert!(md.contains("| 1 | 100 | 1 | plan | 0.25 | 0.25 |"), "{md}");
        assert!(read_jsonl(&dir.path().join("missing.jsonl")).is_err());
    }

    /// What a run prints fits 100 columns with the widest figures runs on this machine gave
    /// (a six-digit count and a five-digit rate at 256 raw requests in flight, latencies near
    /// a second, an error count, submit in the mode column, every mode's process columns):
    /// the headers wrap, the figures do not.
    #[test]
    fn a_run_prints_at_most_100_columns() {
        let mut r = sample(1000, 100_000, 256);
        for m in &mut r.modes {
            m.ok = 109_927;
            m.throughput_rps = 13_738.8;
            m.p50_ms = 565.25;
            m.p90_ms = 794.11;
            m.p99_ms = 890.37;
            m.max_ms = 933.89;
            m.cpu_ms_per_request = 326.09;
            m.late = 256;
        }
        r.modes[0].procs[0].label = "agents c500-c999".into();
        r.decision_bytes = 452_890;
        r.idle = Some(crate::bench::idle::IdleResult {
            window_ms: 15_001,
            heartbeats_per_s: 1000.0,
            coordinator_cpu_ms_per_s: 150.7,
            nats_cpu_ms_per_s: 440.7,
            agents_cpu_ms_per_s: 540.0,
        });
        let text = render_run(&r);
        for line in text.lines() {
            assert!(
                line.chars().count() <= usize::from(COLUMNS),
                "{} columns: {line}\n{text}",
                line.chars().count()
            );
        }
        for figure in ["109927", "13738.8", "565.25", "933.89", "326.09", "timeout: 2"] {
            assert!(text.contains(figure), "{figure} whole: {text}");
        }
    }
}
