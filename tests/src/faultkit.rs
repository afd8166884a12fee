//! Tools of the fault tests: federations on any NATS URL, processes killed and brought back
//! after a chosen down time, log tails that fire a fault at a precise point of a process's work,
//! and the final check (holds lapsed, then [`crate::checker`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::checker::{Report, check, fetch_status, observe};
use crate::federation::{AgentProc, CoordinatorProc};
use crate::load::LoadResult;
use crate::process::Spawned;

/// How long a process may take to become ready.
const READY: Duration = Duration::from_secs(30);

/// The arguments of an agent for `inventory` on `url` keeping its state in `data`,
/// heartbeating every `heartbeat_ms` (without `--init`: add it for a new state file), with
/// the restore gate as shipped (`fedvol_agent::restore_gate`: a fresh state admits new commits
/// once a coordinator's reconciler restored it, on its first heartbeat; a test without a
/// reconciler adds `--restore-wait-ms 0` and says why).
pub fn agent_args(inventory: &Path, url: &str, data: &Path, heartbeat_ms: u64) -> Vec<String> {
    vec![
        "--inventory".to_string(),
        inventory.display().to_string(),
        "--nats".into(),
        url.to_string(),
        "--data-dir".into(),
        data.display().to_string(),
        "--heartbeat-ms".into(),
        heartbeat_ms.to_string(),
    ]
}

/// Starts an agent on `url` (one or more comma-separated NATS URLs) for the inventory
/// `text(dir)`, heartbeating every `heartbeat_ms`, with `extra` arguments; waits until ready.
pub async fn agent_on(url: &str, heartbeat_ms: u64, extra: &[&str], text: impl FnOnce(&Path) -> String) -> AgentProc {
    let dir = tempfile::tempdir().expect("a temporary directory for the agent");
    let inv = dir.path().join("inventory.yaml");
    std::fs::write(&inv, text(dir.path())).expect("the inventory file");
    let mut args = agent_args(&inv, url, &dir.path().join("data"), heartbeat_ms);
    args.push("--init".into());
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut proc = Spawned::bin("fedvol-agent", &args);
    proc.wait_for_log("endpoints ready", READY).await;
    AgentProc { proc, args, dir }
}

/// An agent of cluster `name` on `url` with 4 hosts of 64 cores ([`crate::load::roomy_inventory`]),
/// heartbeating every 100 ms.
pub async fn roomy_agent(url: &str, name: &str) -> AgentProc {
    agent_on(url, 100, &[], |dir| crate::load::roomy_inventory(name, 4, 64, dir)).await
}

/// Starts a coordinator on `url` with `args`; waits until ready.
pub async fn coordinator_on(url: &str, args: &[&str]) -> CoordinatorProc {
    let mut all = vec!["--nats".to_string(), url.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    let mut proc = Spawned::bin("fedvol-coordinator", &all);
    proc.wait_for_log("coordinator ready", READY).await;
    CoordinatorProc { proc, args: all }
}

/// True when `c` is alive, not suspect, heard from by heartbeat (it lists a replica: a cluster
/// known only through start-up discovery has said nothing yet of its restore) and not
/// `restoring`.
pub fn heard_and_restored(c: &fedvol_proto::coordinator::ClusterInfo) -> bool {
    c.alive && !c.suspect && !c.instances.is_empty() && !c.restoring
}

/// Waits (30 s at most) until the coordinators list every cluster of `names` alive and
/// restored, as a user waits for `fedvol clusters` before sending work: a fresh agent (started
/// with `--init`, gate as shipped) answers `restoring` until a coordinator's reconciler restored
/// it, on its first heartbeat.
///
/// Panics (test failure) naming the clusters when they never are.
pub async fn wait_ready(client: &async_nats::Client, names: &[&str]) {
    use fedvol_proto::coordinator::Clusters;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = crate::load::coordinator_op::<Clusters>(
            client,
            crate::checker::CHECKER_USER,
            &fedvol_proto::NoArgs {},
            Duration::from_secs(5),
        )
        .await;
        if let Ok(r) = &r
            && names
                .iter()
                .all(|n| r.clusters.iter().any(|c| c.name == *n && heard_and_restored(c)))
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "clusters {names:?} never all alive and restored: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `kill -9` the agent, wait `down`, start it again on the same files; waits until ready.
pub async fn crash_agent(agent: &mut AgentProc, down: Duration) {
    agent.proc.kill();
    tokio::time::sleep(down).await;
    let mut proc = Spawned::bin("fedvol-agent", &agent.args);
    proc.wait_for_log("endpoints ready", READY).await;
    agent.proc = proc;
}

/// `kill -9` the coordinator, wait `down`, start it again; waits until ready.
pub async fn crash_coordinator(c: &mut CoordinatorProc, down: Duration) {
    c.proc.kill();
    tokio::time::sleep(down).await;
    let mut proc = Spawned::bin("fedvol-coordinator", &c.args);
    proc.wait_for_log("coordinator ready", READY).await;
    c.proc = proc;
}

/// Follows a process's log from where it ends now.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl LogTail {
    /// A tail of `path` starting at its current end.
    pub fn new(path: &Path) -> LogTail {
        let offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        LogTail {
            path: path.to_path_buf(),
            offset,
            partial: String::new(),
        }
    }

    /// The next new line containing any of `needles`, polling every millisecond; `None`
    /// after `timeout`.
    pub async fn next_line_with(&mut self, needles: &[&str], timeout: Duration) -> Option<String> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(mut f) = std::fs::File::open(&self.path)
                && f.seek(SeekFrom::Start(self.offset)).is_ok()
            {
                let mut buf = Vec::new();
                if let Ok(n) = f.read_to_end(&mut buf) {
                    self.offset += n as u64;
                    self.partial.push_str(&String::from_utf8_lossy(&buf));
                }
            }
            while let Some(i) = self.partial.find('\n') {
                let line = strip_ansi(&self.partial.drain(..=i).collect::<String>());
                if needles.iter().any(|n| line.contains(n)) {
                    return Some(line);
                }
            }
            if Instant::now() >= end {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Sends `signal` to process `pid` the moment a line containing `needle` appears in the log at
/// `path` (past its current end), from a dedicated thread polling every 100 µs, so the signal
/// lands within a millisecond or so of the line even on a busy machine. The thread ends with
/// the line (colours stripped), or `None` after `timeout`.
pub fn signal_on_line(
    path: &Path,
    needle: &str,
    pid: u32,
    signal: nix::sys::signal::Signal,
    timeout: Duration,
) -> std::thread::JoinHandle<Option<String>> {
    let mut offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (path, needle) = (path.to_path_buf(), needle.to_string());
    std::thread::spawn(move || {
        let end = Instant::now() + timeout;
        let mut partial = String::new();
        while Instant::now() < end {
            if let Ok(mut f) = std::fs::File::open(&path)
                && f.seek(SeekFrom::Start(offset)).is_ok()
            {
                let mut buf = Vec::new();
                if let Ok(n) = f.read_to_end(&mut buf) {
                    offset += n as u64;
                    partial.push_str(&String::from_utf8_lossy(&buf));
                }
            }
            while let Some(i) = partial.find('\n') {
                let line: String = partial.drain(..=i).collect();
                if line.contains(&needle) {
                    if let Ok(p) = i32::try_from(pid) {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), signal);
                    }
                    return Some(strip_ansi(&line));
                }
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        None
    })
}

/// `line` without ANSI colour sequences (`ESC [ ... m`), which the processes' text logs carry.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value of `key=` in a text log line (`request_id=abc` → `abc`), colours ignored.
pub fn field(line: &str, key: &str) -> Option<String> {
    let line = strip_ansi(line);
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let rest = &line[at..];
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"').to_string())
}

/// Waits until no agent of `clusters` reports a hold (they lapse at their TTL), up to
/// `timeout`. Returns whether they all cleared.
pub async fn wait_no_holds(client: &async_nats::Client, clusters: &[String], timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    loop {
        let mut any = false;
        for c in clusters {
            match fetch_status(client, c).await {
                Ok(s) if s.holds.is_empty() => {}
                _ => any = true,
            }
        }
        if !any {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The final check of a run: waits (up to `hold_wait`) for holds to lapse, observes every
/// agent of `agents` and every decision the load sent or the agents hold, and checks.
///
/// Panics (test failure) when the observation cannot be made.
pub async fn final_check(
    client: &async_nats::Client,
    agents: &[(String, PathBuf)],
    load: &LoadResult,
    hold_wait: Duration,
) -> Report {
    let names: Vec<String> = agents.iter().map(|(n, _)| n.clone()).collect();
    let cleared = wait_no_holds(client, &names, hold_wait).await;
    let obs = observe(client, agents, load.ids.iter().cloned(), &load.acked, false)
        .await
        .unwrap_or_else(|e| panic!("the checker could not observe the federation: {e}"));
    let report = check(&obs);
    if !cleared {
        eprintln!("holds had not all lapsed after {hold_wait:?}: {} left", report.holds);
    }
    report
}

/// `(cluster, inventory path)` of each agent, as [`final_check`] takes them.
pub fn inventories(agents: &[(&str, &AgentProc)]) -> Vec<(String, PathBuf)> {
    agents.iter().map(|(n, a)| (n.to_string(), a.inventory())).collect()
}

/// [`inventories`] of `agents` named by `names`, in the same order.
pub fn named_inventories(names: &[&str], agents: &[AgentProc]) -> Vec<(String, PathBuf)> {
    names
        .iter()
        .zip(agents)
        .map(|(n, a)| (n.to_string(), a.inventory()))
        .collect()
}

/// Publishes a heartbeat of `cluster` as replica `instance` (inventory version `version`) every
/// `interval_ms` on `client` until the task is aborted: a scripted or forged agent's heartbeat.
pub fn heartbeats(
    client: async_nats::Client,
    cluster: &str,
    instance: &str,
    version: &str,
    interval_ms: u64,
) -> tokio::task::JoinHandle<()> {
    let subject = fedvol_proto::Subjects::default().heartbeat(cluster);
    let (cluster, instance, version) = (cluster.to_string(), instance.to_string(), version.to_string());
    tokio::spawn(async move {
        loop {
            let hb = fedvol_proto::agent::Heartbeat {
                cluster: cluster.clone(),
                instance: instance.clone(),
                inventory_version: version.clone(),
                holds: 0,
                load: 0.0,
                sent_ms: fedvol_proto::now_ms(),
                interval_ms,
                state_generation: String::new(),
                degraded: None,
                restoring: false,
            };
            let _ = client.publish(subject.clone(), fedvol_proto::encode(&hb)).await;
            tokio::time::sleep(Duration::from_millis(interval_ms)).await;
        }
    })
}
