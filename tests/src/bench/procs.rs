//! The benchmark's federation as real processes, and what each process costs.
//!
//! - nats-server: [`NatsServer::start`] (JetStream in a temporary directory, a free loopback
//!   port), with `max_payload` raised to [`DEFAULT_MAX_PAYLOAD_BYTES`] unless told otherwise.
//! - The coordinator: `fedvol-coordinator` of the benchmark's own profile ([`crate::bin_path`]),
//!   without a directory (dev mode), with a generous deadline (`--deadline-ms`, default
//!   [`DEFAULT_DEADLINE_MS`]) so that a loaded machine measures slow answers rather than
//!   `timed_out` clusters.
//! - The agents: up to [`MAX_SINGLE_AGENT_PROCESSES`] clusters, one `fedvol-agent` process each;
//!   above, by default, [`DEFAULT_AGENT_GROUPS`] processes of `fedvol-bench agents` each hosting
//!   a contiguous share of the clusters ([`agent_groups`]; see [`crate::bench::agents`]).
//!   `--agent-processes N` chooses N processes instead (N = clusters: one per cluster).
//!
//! Every fedvol process logs at `warn` (environment `RUST_LOG=warn`, which both daemons read
//! through `tracing_subscriber::EnvFilter`; `FEDVOL_BENCH_LOG` overrides the level), so that
//! per-request `info` lines do not dominate what is measured. Readiness is therefore checked over
//! NATS, not in the logs: each cluster's `status` endpoint answers, then the coordinator's
//! `clusters` operation lists every cluster alive.
//!
//! Costs: CPU time of a process (`utime + stime` of `/proc/<pid>/stat`, every thread, in clock
//! ticks of [`CLOCK_TICKS_PER_S`]) sampled before and after a measured window, and its peak
//! resident set (`VmHWM` of `/proc/<pid>/status`, KiB).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fedvol_proto::Subjects;
use fedvol_proto::coordinator::{ClustersReply, CoordinatorOp};

use crate::bench::inventory::{Shape, cluster_name, write_inventory};
use crate::bench::workflow::USER;
use crate::load::call_raw;
use crate::shipped::{OBSERVER, Shipped};
use crate::{NatsServer, Spawned};

/// Clock ticks per second in `/proc/<pid>/stat` (Linux's `USER_HZ`, 100 on every architecture
/// fedvol builds for).
pub const CLOCK_TICKS_PER_S: u64 = 100;

/// Clusters up to which every agent is its own `fedvol-agent` process by default.
pub const MAX_SINGLE_AGENT_PROCESSES: usize = 8;

/// Agent processes above [`MAX_SINGLE_AGENT_PROCESSES`] clusters, by default.
pub const DEFAULT_AGENT_GROUPS: usize = 2;

/// The coordinator's plan deadline the benchmark uses by default, ms.
pub const DEFAULT_DEADLINE_MS: u64 = 10_000;

/// nats-server's `max_payload` the benchmark uses by default, bytes (8 MiB, the largest
/// nats-server recommends). A stored decision holds every cluster's answer with its trace
/// (about 23 KB per cluster of 1,000 hosts), so at 64 clusters it passes the server's default of
/// 1 MiB, and the coordinator cannot store it (`store_unavailable`).
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 8 * 1024 * 1024;

/// How long the federation may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// CPU time `pid` used so far (user + system, every thread), ms; `None` once it is gone.
pub fn cpu_ms(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces and parentheses) start after the
    // last ')'; utime and stime are fields 14 and 15 of the line, 12th and 13th after the name.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) * 1000 / CLOCK_TICKS_PER_S)
}

/// Peak resident set size of `pid` (`VmHWM`), KiB; `None` once it is gone.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A measured process: a label for the tables and its process id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `nats-server`, `coordinator`, `agent c00`, `agents c00-c31`, `responders 0-31`,
    /// `driver`.
    pub label: String,
    /// Its process id.
    pub pid: u32,
}

/// CPU time of every member, ms (0 for a process that is gone).
pub fn cpu_sample(members: &[Member]) -> Vec<u64> {
    members.iter().map(|m| cpu_ms(m.pid).unwrap_or(0)).collect()
}

/// The contiguous ranges of cluster indices each of `processes` processes hosts (the first ones
/// take one more when the division is not exact). `processes` is clamped to `1..=clusters`.
pub fn agent_groups(clusters: usize, processes: usize) -> Vec<Range<usize>> {
    let p = processes.clamp(1, clusters.max(1));
    let (base, extra) = (clusters / p, clusters % p);
    let mut start = 0;
    (0..p)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// Agent processes for `clusters` clusters when the user asked for `requested` (0: the
/// default: one per cluster up to [`MAX_SINGLE_AGENT_PROCESSES`], else
/// [`DEFAULT_AGENT_GROUPS`]).
pub fn agent_processes(clusters: usize, requested: usize) -> usize {
    if requested > 0 {
        requested.min(clusters.max(1))
    } else if clusters <= MAX_SINGLE_AGENT_PROCESSES {
        clusters.max(1)
    } else {
        DEFAULT_AGENT_GROUPS
    }
}

/// How to start a federation.
#[derive(Debug, Clone)]
pub struct FedSpec {
    /// Clusters (agents).
    pub clusters: usize,
    /// Each cluster's size.
    pub shape: Shape,
    /// Agent processes (0: the default, see [`agent_processes`]).
    pub agent_processes: usize,
    /// The coordinator's plan deadline, ms.
    pub deadline_ms: u64,
    /// The agents' heartbeat interval, ms.
    pub heartbeat_ms: u64,
    /// nats-server's `max_payload`, bytes (0: the server's default, 1 MiB).
    pub max_payload_bytes: usize,
}

/// The log level given to every fedvol process: `$FEDVOL_BENCH_LOG`, default `warn`.
pub fn product_log_level() -> String {
    std::env::var("FEDVOL_BENCH_LOG").unwrap_or_else(|_| "warn".to_string())
}

/// Runs `f`, turning a panic of the test harness (a missing nats-server, a binary that cannot
/// be built or started) into an error naming `what`.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".into());
        format!("{what}: {msg}")
    })
}

/// Starts `program` with `args`, logging at [`product_log_level`].
fn spawn(program: &Path, args: &[String]) -> Result<Spawned, String> {
    let mut cmd = Command::new(program);
    cmd.args(args).env("RUST_LOG", product_log_level());
    guarded(&format!("starting {}", program.display()), || Spawned::start(cmd))
}

/// The last `n` lines of a process's log.
pub fn log_tail(p: &Spawned, n: usize) -> String {
    let log = p.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running benchmark federation. Everything is stopped and removed when it is dropped.
pub struct Federation {
    /// The NATS server.
    pub nats: NatsServer,
    /// The coordinator.
    pub coordinator: Spawned,
    /// Where the coordinator serves `/metrics` (its histograms give the submit's time line:
    /// [`crate::bench::timeline`]).
    pub coordinator_metrics: std::net::SocketAddr,
    /// The agent processes, each with its label.
    pub agents: Vec<(String, Spawned)>,
    /// Where each `fedvol-agent` process serves `/metrics` (none when agents share processes).
    pub agent_metrics: Vec<std::net::SocketAddr>,
    /// Every cluster's name, in order.
    pub clusters: Vec<String>,
    /// Inventories, state and storage (`<dir>/<cluster>/...`).
    pub dir: tempfile::TempDir,
}

impl Federation {
    /// Writes the inventories, starts nats-server, the agents and the coordinator, and waits
    /// until every cluster answers and the coordinator knows every cluster alive.
    ///
    /// Errors: anything that cannot be written, started or does not become ready (with the
    /// process's last log lines).
    pub async fn start(spec: &FedSpec) -> Result<Federation, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let clusters: Vec<String> = (0..spec.clusters.max(1)).map(cluster_name).collect();
        let mut inventories = Vec::new();
        for c in &clusters {
            inventories.push(write_inventory(c, spec.shape, &dir.path().join(c))?);
        }
        // The shipped single.conf, so that the cost of its permissions is in the figures.
        let nats = if spec.max_payload_bytes > 0 {
            let config = format!("max_payload: {}", spec.max_payload_bytes);
            guarded("starting nats-server", || {
                NatsServer::shipped_with(Shipped::Single, &config)
            })?
        } else {
            guarded("starting nats-server", NatsServer::start)?
        };
        let users: Vec<String> = clusters.iter().map(|c| format!("agent-{c}")).collect();
        guarded("adding the clusters' NATS users", || nats.ensure_users(&users))?;
        let url = nats.url();
        let agent_bin = guarded("locating fedvol-agent", || crate::bin_path("fedvol-agent"))?;
        let coordinator_bin = guarded("locating fedvol-coordinator", || crate::bin_path("fedvol-coordinator"))?;
        let me = std::env::current_exe().map_err(|e| format!("cannot locate fedvol-bench itself: {e}"))?;

        let mut agents = Vec::new();
        let mut agent_metrics = Vec::new();
        let groups = agent_groups(clusters.len(), agent_processes(clusters.len(), spec.agent_processes));
        let single = groups.iter().all(|g| g.len() == 1);
        for g in groups {
            let hb = spec.heartbeat_ms.to_string();
            if single {
                let c = &clusters[g.start];
                let metrics = std::net::SocketAddr::from(([127, 0, 0, 1], crate::nats::free_port()));
                let args = vec![
                    "--inventory".to_string(),
                    inventories[g.start].display().to_string(),
                    "--nats".into(),
                    url.clone(),
                    "--data-dir".into(),
                    dir.path().join(c).join("data").display().to_string(),
                    "--heartbeat-ms".into(),
                    hb,
                    // A fresh cluster, gate as shipped: the coordinator restores it (nothing
                    // to restore) on its first heartbeat.
                    "--init".into(),
                    "--metrics-listen".into(),
                    metrics.to_string(),
                ];
                agent_metrics.push(metrics);
                agents.push((format!("agent {c}"), spawn(&agent_bin, &args)?));
            } else {
                let mut args = vec![
                    "agents".to_string(),
                    "--shipped-logins".into(),
                    "--nats".into(),
                    url.clone(),
                    "--data-dir".into(),
                    dir.path().join(format!("group-{}", g.start)).display().to_string(),
                    "--heartbeat-ms".into(),
                    hb,
                ];
                for i in g.clone() {
                    args.push("--inventory".into());
                    args.push(inventories[i].display().to_string());
                }
                let label = format!("agents {}-{}", clusters[g.start], clusters[g.end - 1]);
                agents.push((label, spawn(&me, &args)?));
            }
        }
        let coordinator_metrics = std::net::SocketAddr::from(([127, 0, 0, 1], crate::nats::free_port()));
        let coordinator = spawn(
            &coordinator_bin,
            &[
                "--nats".to_string(),
                url.clone(),
                "--metrics-listen".into(),
                coordinator_metrics.to_string(),
                "--deadline-ms".into(),
                spec.deadline_ms.to_string(),
                "--discovery-ms".into(),
                "300".into(),
            ],
        )?;
        let mut fed = Federation {
            nats,
            coordinator,
            coordinator_metrics,
            agents,
            agent_metrics,
            clusters,
            dir,
        };
        fed.wait_ready().await?;
        Ok(fed)
    }

    /// Fails with the process's last log lines when any fedvol process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        for (label, p) in &mut self.agents {
            if let Some(status) = p.try_status() {
                return Err(format!(
                    "{label} exited ({status}); its last lines:\n{}",
                    log_tail(p, 30)
                ));
            }
        }
        if let Some(status) = self.coordinator.try_status() {
            return Err(format!(
                "the coordinator exited ({status}); its last lines:\n{}",
                log_tail(&self.coordinator, 30)
            ));
        }
        Ok(())
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let client = self.client().await?;
        let end = Instant::now() + READY_TIMEOUT;
        let subjects = Subjects::default();
        let mut pending: Vec<String> = self.clusters.clone();
        while !pending.is_empty() {
            self.check_alive()?;
            if Instant::now() >= end {
                return Err(format!(
                    "clusters {pending:?} did not answer their status within {READY_TIMEOUT:?}"
                ));
            }
            let mut still = Vec::new();
            for c in pending {
                let subject = subjects.cluster(&c, fedvol_proto::agent::AgentOp::Status);
                if call_raw(&client, &subject, b"{}".to_vec(), Duration::from_millis(2000))
                    .await
                    .is_err()
                {
                    still.push(c);
                }
            }
            pending = still;
            if !pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let subject = subjects.coordinator(CoordinatorOp::Clusters, USER);
        loop {
            self.check_alive()?;
            if let Ok(bytes) = call_raw(&client, &subject, Vec::new(), Duration::from_millis(2000)).await
                && let Ok(reply) = fedvol_proto::decode::<ClustersReply>(&bytes, "clusters answer", "client")
            {
                let alive = reply
                    .clusters
                    .iter()
                    .filter(|c| crate::faultkit::heard_and_restored(c))
                    .count();
                if alive >= self.clusters.len() {
                    break;
                }
            }
            if Instant::now() >= end {
                return Err(format!(
                    "the coordinator did not see every cluster alive within {READY_TIMEOUT:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Agents start on a fresh state (`--init`): each admits no commit until the
        // coordinators' reconciler has restored its cluster and said `restored` (the restore
        // gate, docs/design.md §6). Measured work starts once no heartbeat says `restoring`.
        let mut beats = client
            .subscribe(subjects.heartbeats())
            .await
            .map_err(|e| format!("cannot follow heartbeats: {e}"))?;
        let mut restoring: std::collections::BTreeSet<String> = self.clusters.iter().cloned().collect();
        while !restoring.is_empty() {
            self.check_alive()?;
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, futures::StreamExt::next(&mut beats)).await {
                Ok(Some(m)) => {
                    if let Ok(hb) =
                        fedvol_proto::decode::<fedvol_proto::agent::Heartbeat>(&m.payload, "heartbeat", "client")
                        && !hb.restoring
                    {
                        restoring.remove(&hb.cluster);
                    }
                }
                _ => {
                    return Err(format!(
                        "{} cluster(s) still waited for their restore after {READY_TIMEOUT:?}, e.g. {:?}",
                        restoring.len(),
                        restoring.iter().next()
                    ));
                }
            }
        }
        Ok(())
    }

    /// A new client of the federation's NATS server.
    ///
    /// Errors: the connection fails.
    pub async fn client(&self) -> Result<async_nats::Client, String> {
        connect(&self.nats.url(), "fedvol-bench").await
    }

    /// Every fedvol process and nats-server, labelled.
    pub fn members(&self) -> Vec<Member> {
        let mut m = Vec::new();
        if let Some(pid) = self.nats.pid() {
            m.push(Member {
                label: "nats-server".into(),
                pid,
            });
        }
        m.push(Member {
            label: "coordinator".into(),
            pid: self.coordinator.pid(),
        });
        m.extend(self.agents.iter().map(|(label, p)| Member {
            label: label.clone(),
            pid: p.pid(),
        }));
        m
    }

    /// The directory of cluster `c` (inventory, `data/`, `storage/`).
    pub fn cluster_dir(&self, c: &str) -> PathBuf {
        self.dir.path().join(c)
    }
}

/// Connects to `url` as `name` (async-nats defaults).
///
/// Errors: the connection fails.
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, String> {
    // On a shipped server: the harness's observer (this process's registry, or the login the
    // parent gave a helper process in the environment).
    let login = crate::shipped::logins_for(url)
        .map(|_| (OBSERVER.to_string(), crate::kit::password(OBSERVER)))
        .or_else(|| {
            Some((
                std::env::var("FEDVOL_NATS_USER").ok()?,
                std::env::var("FEDVOL_NATS_PASSWORD").ok()?,
            ))
        });
    let o = match login {
        Some((user, password)) => async_nats::ConnectOptions::with_user_and_password(user, password),
        None => async_nats::ConnectOptions::new(),
    };
    o.name(name)
        .connect(url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))
}

/// This process as a member (`driver`).
pub fn this_process() -> Member {
    Member {
        label: "driver (fedvol-bench)".into(),
        pid: std::process::id(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_are_shared_out_in_contiguous_groups() {
        assert_eq!(agent_groups(64, 2), vec![0..32, 32..64]);
        assert_eq!(agent_groups(5, 2), vec![0..3, 3..5]);
        assert_eq!(agent_groups(3, 8), vec![0..1, 1..2, 2..3]);
        assert_eq!(agent_groups(1, 0), vec![0..1]);
        assert_eq!(agent_processes(4, 0), 4);
        assert_eq!(agent_processes(8, 0), 8);
        assert_eq!(agent_processes(16, 0), DEFAULT_AGENT_GROUPS);
        assert_eq!(agent_processes(16, 4), 4);
        assert_eq!(agent_processes(2, 5), 2);
    }

    #[test]
    fn this_process_has_cpu_time_and_a_peak_rss() {
        let me = std::process::id();
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(cpu_ms(me).is_some());
        assert!(peak_rss_kib(me).is_some_and(|k| k > 0));
        assert_eq!(cpu_ms(u32::MAX), None);
    }
}
