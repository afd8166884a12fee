//! The consistency checker: compares what clients were told and what the coordinators stored
//! with what every agent holds, after a run with faults (docs/design.md §6).
//!
//! Input ([`Observation`]): the stored decisions (coordinator `get`, by request id), each
//! agent's `status` (committed request ids, holds, capacity in use per host, managed volumes)
//! with its hosts' capacity from its inventory file, and the acknowledgements clients received
//! ([`crate::load::Acked`]). [`check`] verifies:
//!
//! - every decision acknowledged as committed (to a client, or stored `committed`) is committed
//!   on exactly that cluster's agent: missing there = **lost**, committed on another agent
//!   too = **duplicated**;
//! - a client acknowledgement agrees with the store (same cluster; `completed` when the client
//!   was told so), else **lost**;
//! - a decision stored `completed` is no longer committed on any agent (**disagreement**);
//! - no agent holds a commit the store does not list as committed there (**orphan**: the store
//!   says planned, failed or nothing);
//! - no host's use (inventory allocations + holds + commits) exceeds its capacity in cpu,
//!   memory, instances or any device (**over-committed**); when an agent has no holds, its use
//!   equals the allocations of the decisions stored committed there (**disagreement**);
//! - no volume is bound or provisioned for two live decisions of a cluster (**double-booked**),
//!   and no agent volume is Bound to a request it has no live commit for (**stray volume**).
//!
//! [`observe`] gathers an observation over NATS.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;

use fedvol_common::decision::Action;
use fedvol_common::model::{Inventory, Resources};
use fedvol_formats::load_inventory;
use fedvol_proto::agent::{AgentOp, StatusReply};
use fedvol_proto::coordinator::{self as api, DecisionRef, ListReply, SubmitReply};
use fedvol_proto::decisions::{DecisionState, StoredDecision};
use fedvol_proto::{NoArgs, Subjects};

use crate::load::{Acked, CallError, call, coordinator_op};

/// The NATS user the checker asks the coordinators as.
pub const CHECKER_USER: &str = "checker";

/// A host's limits from the inventory file: `allocated` there is use outside fedvol.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLimit {
    /// Total capacity.
    pub capacity: Resources,
    /// Allocated by others (the inventory's `allocated`).
    pub allocated: Resources,
}

/// Every host of `inv` by `zone/host` (the key of `StatusReply::host_use`).
pub fn host_limits(inv: &Inventory) -> BTreeMap<String, HostLimit> {
    inv.zones
        .iter()
        .flat_map(|z| {
            z.hosts.iter().map(move |h| {
                (
                    format!("{}/{}", z.name, h.name),
                    HostLimit {
                        capacity: h.capacity.clone(),
                        allocated: h.allocated.clone(),
                    },
                )
            })
        })
        .collect()
}

/// One agent as observed.
#[derive(Debug, Clone)]
pub struct AgentView {
    /// Its status answer.
    pub status: StatusReply,
    /// Its hosts' limits.
    pub hosts: BTreeMap<String, HostLimit>,
}

/// Everything the checker compares.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Stored decisions by request id (ids with nothing stored are absent).
    pub decisions: BTreeMap<String, StoredDecision>,
    /// Agents by cluster name.
    pub agents: BTreeMap<String, AgentView>,
    /// Acknowledgements clients received, by request id.
    pub acked: BTreeMap<String, Acked>,
}

/// The checker's findings. `lost`, `duplicated`, `over_committed`, `double_booked`,
/// `disagreements` and `stray_volumes` must be 0 for a correct run; `orphans` must be 0 once
/// every abandoned decision was resumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Decisions acknowledged as committed (to a client or in the store), completed ones
    /// included.
    pub acknowledged: usize,
    /// Of those, live (not completed) and found committed on their cluster's agent.
    pub committed: usize,
    /// Of those, completed (and no longer committed anywhere).
    pub completed: usize,
    /// Acknowledged but missing where they should be.
    pub lost: usize,
    /// Committed on more than one agent.
    pub duplicated: usize,
    /// Agent commits the store does not list as committed on that cluster.
    pub orphans: usize,
    /// Hosts whose use exceeds their capacity.
    pub over_committed: usize,
    /// Volumes booked for two live decisions.
    pub double_booked: usize,
    /// The store and an agent disagree (completion, capacity in use).
    pub disagreements: usize,
    /// Volumes Bound to a request without a live commit.
    pub stray_volumes: usize,
    /// Live holds seen on agents (not a fault: they lapse at their TTL).
    pub holds: usize,
    /// Stored decisions by state.
    pub stored: BTreeMap<String, usize>,
    /// One line per problem found.
    pub problems: Vec<String>,
}

impl Report {
    /// True when nothing is lost, duplicated, orphaned, over-committed, double-booked or in
    /// disagreement.
    pub fn is_clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.orphans == 0
            && self.over_committed == 0
            && self.double_booked == 0
            && self.disagreements == 0
            && self.stray_volumes == 0
    }

    /// Panics with the report when it is not clean.
    pub fn assert_clean(&self) {
        assert!(self.is_clean(), "the checker found problems:\n{self}");
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "acknowledged={} committed={} completed={} lost={} duplicated={} orphans={} over_committed={} double_booked={} disagreements={} stray_volumes={} holds={} stored={:?}",
            self.acknowledged,
            self.committed,
            self.completed,
            self.lost,
            self.duplicated,
            self.orphans,
            self.over_committed,
            self.double_booked,
            self.disagreements,
            self.stray_volumes,
            self.holds,
            self.stored
        )?;
        for p in self.problems.iter().take(40) {
            write!(f, "\n  - {p}")?;
        }
        if self.problems.len() > 40 {
            write!(f, "\n  ... and {} more", self.problems.len() - 40)?;
        }
        Ok(())
    }
}

/// `a + b`.
fn plus(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    out.cpu = out.cpu.saturating_add(b.cpu);
    out.memory.0 = out.memory.0.saturating_add(b.memory.0);
    out.instances = out.instances.saturating_add(b.instances);
    for (k, v) in &b.devices {
        let e = out.devices.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
    out
}

/// The dimensions in which `used` exceeds `cap`, in words.
fn excess(used: &Resources, cap: &Resources) -> Vec<String> {
    let mut out = Vec::new();
    if used.cpu > cap.cpu {
        out.push(format!("cpu {} > {}", used.cpu, cap.cpu));
    }
    if used.memory.0 > cap.memory.0 {
        out.push(format!("memory {} > {}", used.memory, cap.memory));
    }
    if used.instances > cap.instances {
        out.push(format!("instances {} > {}", used.instances, cap.instances));
    }
    for (k, v) in &used.devices {
        let c = cap.devices.get(k).copied().unwrap_or(0);
        if *v > c {
            out.push(format!("{k} {v} > {c}"));
        }
    }
    out
}

/// Resources with zero device counts dropped, for comparisons.
fn normal(r: &Resources) -> Resources {
    let mut r = r.clone();
    r.devices.retain(|_, v| *v > 0);
    r
}

/// Compares the observation; see the module docs for every rule.
pub fn check(obs: &Observation) -> Report {
    let mut r = Report::default();
    for d in obs.decisions.values() {
        *r.stored.entry(d.state.as_str().to_string()).or_insert(0) += 1;
    }
    let committed_on: BTreeMap<&str, BTreeSet<&str>> = {
        let mut m: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (cluster, a) in &obs.agents {
            for id in &a.status.committed {
                m.entry(id.as_str()).or_default().insert(cluster.as_str());
            }
        }
        m
    };
    let none = BTreeSet::new();

    // What must be where: the store's committed and completed decisions, and the clients'
    // acknowledgements.
    let mut expected: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for (id, d) in &obs.decisions {
        if d.dry_run {
            continue;
        }
        match (d.state, d.decision.chosen_cluster.as_deref()) {
            (DecisionState::Committed, Some(c)) => {
                expected.insert(id.as_str(), (c, false));
            }
            (DecisionState::Completed, Some(c)) => {
                expected.insert(id.as_str(), (c, true));
            }
            (DecisionState::Committed | DecisionState::Completed, None) => {
                r.lost += 1;
                r.problems
                    .push(format!("{id}: stored {} without a chosen cluster", d.state.as_str()));
            }
            _ => {}
        }
    }
    for (id, ack) in &obs.acked {
        match expected.get(id.as_str()) {
            None => {
                r.lost += 1;
                let stored = obs.decisions.get(id).map(|d| d.state.as_str()).unwrap_or("nothing");
                r.problems.push(format!(
                    "{id}: a client was told committed on {}, the store says {stored}",
                    ack.cluster
                ));
            }
            Some((c, _)) if *c != ack.cluster => {
                r.lost += 1;
                r.problems.push(format!(
                    "{id}: a client was told committed on {}, the store says {c}",
                    ack.cluster
                ));
            }
            Some((_, false)) if ack.completed => {
                r.lost += 1;
                r.problems
                    .push(format!("{id}: a client was told completed, the store says committed"));
            }
            Some(_) => {}
        }
    }
    r.acknowledged = expected.len()
        + obs
            .acked
            .keys()
            .filter(|id| !expected.contains_key(id.as_str()))
            .count();

    for (id, (cluster, completed)) in &expected {
        let on = committed_on.get(id).unwrap_or(&none);
        if *completed {
            if on.is_empty() {
                r.completed += 1;
            } else {
                r.disagreements += 1;
                r.problems
                    .push(format!("{id}: stored completed, still committed on {on:?}"));
            }
            continue;
        }
        if !obs.agents.contains_key(*cluster) {
            r.lost += 1;
            r.problems
                .push(format!("{id}: committed on {cluster}, which was not observed"));
            continue;
        }
        if on.contains(cluster) {
            r.committed += 1;
        } else {
            r.lost += 1;
            r.problems.push(format!(
                "{id}: stored committed on {cluster}, but that agent does not have it (committed on {on:?})"
            ));
        }
        let others: Vec<&&str> = on.iter().filter(|c| *c != cluster).collect();
        if !others.is_empty() {
            r.duplicated += 1;
            r.problems
                .push(format!("{id}: committed on {cluster} and also on {others:?}"));
        }
    }
    for (id, on) in &committed_on {
        let expected_here = expected.get(id).filter(|(_, done)| !done).map(|(c, _)| *c);
        for c in on {
            if Some(*c) == expected_here {
                continue;
            }
            if expected_here.is_some() {
                continue; // counted as duplicated above
            }
            r.orphans += 1;
            let stored = obs.decisions.get(*id).map(|d| d.state.as_str()).unwrap_or("nothing");
            r.problems.push(format!(
                "{id}: committed on {c}, the store says {stored} (an orphan commit)"
            ));
        }
    }

    for (cluster, a) in &obs.agents {
        r.holds += a.status.holds.len();
        for (host, used) in &a.status.host_use {
            let Some(limit) = a.hosts.get(host) else {
                r.over_committed += 1;
                r.problems.push(format!(
                    "{cluster}: capacity in use on {host}, which the inventory lacks"
                ));
                continue;
            };
            let total = plus(&limit.allocated, used);
            let over = excess(&total, &limit.capacity);
            if !over.is_empty() {
                r.over_committed += 1;
                r.problems
                    .push(format!("{cluster}: host {host} over-committed: {}", over.join(", ")));
            }
        }
        // With no holds, the agent's use is exactly its live commits' allocations as stored.
        if a.status.holds.is_empty() {
            let mut want: BTreeMap<String, Resources> = BTreeMap::new();
            for d in obs.decisions.values() {
                if d.state != DecisionState::Committed || d.decision.chosen_cluster.as_deref() != Some(cluster) {
                    continue;
                }
                if let Some(slot) = d.decision.clusters.get(cluster) {
                    for al in &slot.allocations {
                        let key = format!("{}/{}", al.zone, al.host);
                        let e = want.entry(key).or_default();
                        *e = plus(e, &al.resources);
                    }
                }
            }
            let have: BTreeMap<String, Resources> = a
                .status
                .host_use
                .iter()
                .map(|(k, v)| (k.clone(), normal(v)))
                .filter(|(_, v)| *v != Resources::default())
                .collect();
            let want: BTreeMap<String, Resources> = want
                .into_iter()
                .map(|(k, v)| (k, normal(&v)))
                .filter(|(_, v)| *v != Resources::default())
                .collect();
            if have != want {
                r.disagreements += 1;
                r.problems.push(format!(
                    "{cluster}: capacity in use {have:?} differs from its stored commits' {want:?}"
                ));
            }
        }
        // Volumes Bound to a request must belong to a live commit of this agent.
        let live: BTreeSet<&str> = a.status.committed.iter().map(String::as_str).collect();
        for v in &a.status.volumes {
            if v.phase != "Bound" {
                continue;
            }
            if let Some(req) = &v.request_id
                && !live.contains(req.as_str())
            {
                r.stray_volumes += 1;
                r.problems.push(format!(
                    "{cluster}: volume {} is Bound to {req}, which is not committed there",
                    v.name
                ));
            }
        }
    }

    // No volume booked twice among the live decisions of a cluster.
    let mut booked: BTreeMap<(String, Option<String>, String), String> = BTreeMap::new();
    for (id, d) in &obs.decisions {
        if d.state != DecisionState::Committed {
            continue;
        }
        let Some(c) = d.decision.chosen_cluster.as_deref() else {
            continue;
        };
        let Some(slot) = d.decision.clusters.get(c) else {
            continue;
        };
        for vd in slot.volumes.values() {
            if !matches!(vd.action, Some(Action::Bind | Action::Provision)) {
                continue;
            }
            let Some(name) = vd.volume.clone() else { continue };
            let key = (c.to_string(), vd.provisioner.clone(), name.clone());
            if let Some(other) = booked.insert(key, id.clone()) {
                r.double_booked += 1;
                r.problems
                    .push(format!("{c}: volume {name} booked by both {other} and {id}"));
            }
        }
    }
    r
}

/// How long each NATS call of [`observe`] waits.
const CALL_WAIT: Duration = Duration::from_secs(10);

/// Asks again (for up to 60 s) while nobody answers: a coordinator or agent may be restarting.
async fn patiently<T, F, Fut>(what: &str, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CallError>>,
{
    let end = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if std::time::Instant::now() < end => {
                tracing::debug!(what, error = %e, "retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

/// The stored decision of `id` (`None` when nothing is stored).
///
/// Errors: no coordinator answered within 60 s, or it answered with another error.
pub async fn fetch_decision(client: &async_nats::Client, id: &str) -> Result<Option<StoredDecision>, String> {
    let body = DecisionRef {
        request_id: id.to_string(),
        cancel: false,
        whole: None,
    };
    let reply: SubmitReply = patiently(&format!("get {id}"), || {
        coordinator_op::<api::Get>(client, CHECKER_USER, &body, CALL_WAIT)
    })
    .await?;
    match (reply.stored, reply.error) {
        (Some(s), _) => Ok(Some(s)),
        (None, Some(e)) if e.is(&fedvol_proto::Code::NotFound) => Ok(None),
        (None, Some(e)) => Err(format!("get {id}: {}: {}", e.code, e.message)),
        (None, None) => Err(format!("get {id}: an empty answer")),
    }
}

/// Every request id the coordinators list.
///
/// Errors: no coordinator answered, or it answered with an error.
pub async fn list_ids(client: &async_nats::Client) -> Result<Vec<String>, String> {
    let reply: ListReply = patiently("list", || {
        coordinator_op::<api::List>(client, CHECKER_USER, &NoArgs {}, CALL_WAIT)
    })
    .await?;
    Ok(reply.decisions.into_iter().map(|d| d.request_id).collect())
}

/// The `status` of `cluster`'s agent.
///
/// Errors: the agent did not answer within 60 s.
pub async fn fetch_status(client: &async_nats::Client, cluster: &str) -> Result<StatusReply, String> {
    let subject = Subjects::default().cluster(cluster, AgentOp::Status);
    patiently(&format!("status of {cluster}"), || {
        call(client, &subject, br#"{"v":1}"#.to_vec(), CALL_WAIT)
    })
    .await
}

/// Gathers an observation: each agent's status and inventory file (`(cluster, path)`), and the
/// stored decision of every id in `ids`, in the agents' commits, in `acked` and (with
/// `list`) in the coordinators' list.
///
/// Errors: a coordinator or agent did not answer, or an inventory file does not load.
pub async fn observe(
    client: &async_nats::Client,
    agents: &[(String, PathBuf)],
    ids: impl IntoIterator<Item = String>,
    acked: &BTreeMap<String, Acked>,
    list: bool,
) -> Result<Observation, String> {
    let mut obs = Observation {
        acked: acked.clone(),
        ..Observation::default()
    };
    let mut all: BTreeSet<String> = ids.into_iter().collect();
    all.extend(acked.keys().cloned());
    for (cluster, inventory) in agents {
        let inv = load_inventory(inventory)
            .map_err(|d| format!("{}: {d}", inventory.display()))?
            .value;
        let status = fetch_status(client, cluster).await?;
        all.extend(status.committed.iter().cloned());
        obs.agents.insert(
            cluster.clone(),
            AgentView {
                status,
                hosts: host_limits(&inv),
            },
        );
    }
    if list {
        all.extend(list_ids(client).await?);
    }
    let fetched: Vec<(String, Result<Option<StoredDecision>, String>)> = futures::stream::iter(all)
        .map(|id| async move {
            let r = fetch_decision(client, &id).await;
            (id, r)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for (id, r) in fetched {
        if let Some(d) = r? {
            obs.decisions.insert(id, d);
        }
    }
    Ok(obs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedvol_common::decision::{ClusterDecision, ClusterStatus, Decision, HostAllocation, VolumeDecision};
    use fedvol_common::funnel::PlanRequest;
    use fedvol_common::size::ByteSize;
    use fedvol_proto::agent::{HoldSummary, ManagedVolumeInfo};

    fn res(cpu: u64) -> Resources {
        Resources {
            cpu,
            memory: ByteSize(u128::from(cpu) << 30),
            instances: cpu,
            devices: BTreeMap::new(),
        }
    }

    fn decision(id: &str, state: DecisionState, cluster: Option<&str>, host: &str, volume: &str) -> StoredDecision {
        let mut clusters = indexmap::IndexMap::new();
        if let Some(c) = cluster {
            let mut slot = ClusterDecision::without_answer(ClusterStatus::Answered, 1.0, None);
            slot.feasible = true;
            slot.allocations = vec![HostAllocation {
                zone: "z1".into(),
                host: host.into(),
                job: "j".into(),
                resources: res(1),
            }];
            slot.volumes.insert(
                "scratch".into(),
                VolumeDecision {
                    mode: fedvol_common::decision::Mode::Automatic,
                    provisioner: Some("scratch".into()),
                    volume: Some(volume.into()),
                    action: Some(Action::Provision),
                    error: None,
                    passed: None,
                    new_volume: None,
                },
            );
            clusters.insert(c.to_string(), slot);
        }
        StoredDecision {
            priority_class: None,
            priority: 0,
            wait_for_capacity: false,
            queued_ms: None,
            run_failure: None,
            completing: None,
            state,
            decision: Decision {
                quota: Vec::new(),
                refused: None,
                drained: Default::default(),
                request_id: id.into(),
                workflow: "w".into(),
                seed: 1,
                chosen_cluster: cluster.map(str::to_string),
                clusters,
                choice: Vec::new(),
            },
            request: PlanRequest::new(id, crate::load::small_workflow("w", 1), "u")
                .with_seed(1)
                .with_trace_limit(1),
            attempts: Vec::new(),
            completion: None,
            updated_ms: 1,
            dry_run: false,
            request_digest: None,
        }
    }

    fn agent(cluster: &str, committed: &[&str], use_h0: u64) -> AgentView {
        let mut host_use = BTreeMap::new();
        if use_h0 > 0 {
            host_use.insert("z1/h0".to_string(), res(use_h0));
        }
        AgentView {
            status: StatusReply {
                cluster: cluster.into(),
                inventory_version: "x".into(),
                holds: Vec::new(),
                committed: committed.iter().map(|s| s.to_string()).collect(),
                volumes: Vec::new(),
                host_use,
                load: 0.0,
                source: None,
            },
            hosts: BTreeMap::from([(
                "z1/h0".to_string(),
                HostLimit {
                    capacity: res(2),
                    allocated: Resources::default(),
                },
            )]),
        }
    }

    fn ack(cluster: &str) -> Acked {
        Acked {
            cluster: cluster.into(),
            completed: false,
        }
    }

    fn consistent() -> Observation {
        Observation {
            decisions: BTreeMap::from([
                (
                    "r1".into(),
                    decision("r1", DecisionState::Committed, Some("a"), "h0", "v1"),
                ),
                (
                    "r2".into(),
                    decision("r2", DecisionState::Committed, Some("b"), "h0", "v2"),
                ),
                ("r3".into(), decision("r3", DecisionState::Failed, None, "h0", "v3")),
                (
                    "r4".into(),
                    decision("r4", DecisionState::Completed, Some("a"), "h0", "v4"),
                ),
            ]),
            agents: BTreeMap::from([
                ("a".into(), agent("a", &["r1"], 1)),
                ("b".into(), agent("b", &["r2"], 1)),
            ]),
            acked: BTreeMap::from([("r1".into(), ack("a")), ("r2".into(), ack("b"))]),
        }
    }

    #[test]
    fn a_consistent_run_is_clean_with_its_counts() {
        let r = check(&consistent());
        assert!(r.is_clean(), "{r}");
        assert_eq!((r.acknowledged, r.committed, r.completed), (3, 2, 1), "{r}");
        assert_eq!(r.stored["committed"], 2);
    }

    #[test]
    fn a_commit_missing_on_its_agent_is_lost() {
        let mut o = consistent();
        o.agents.insert("a".into(), agent("a", &[], 0));
        let r = check(&o);
        assert_eq!(r.lost, 1, "{r}");
        assert!(r.problems.iter().any(|p| p.contains("r1")), "{r}");
    }

    #[test]
    fn an_ack_the_store_does_not_know_is_lost() {
        let mut o = consistent();
        o.acked.insert("r9".into(), ack("a"));
        o.acked.insert("r3".into(), ack("b"));
        let r = check(&o);
        assert_eq!(r.lost, 2, "{r}");
        let mut o = consistent();
        o.acked.insert("r1".into(), ack("b"));
        assert_eq!(check(&o).lost, 1, "the client was told another cluster");
        let mut o = consistent();
        o.acked.get_mut("r1").unwrap().completed = true;
        assert_eq!(check(&o).lost, 1, "a completion the store lost");
    }

    #[test]
    fn a_commit_on_two_agents_is_duplicated() {
        let mut o = consistent();
        o.agents.insert("b".into(), agent("b", &["r2", "r1"], 2));
        let r = check(&o);
        assert_eq!(r.duplicated, 1, "{r}");
        assert_eq!(r.orphans, 0, "{r}");
    }

    #[test]
    fn a_commit_the_store_does_not_list_is_an_orphan() {
        let mut o = consistent();
        o.agents.insert("b".into(), agent("b", &["r2", "r3"], 2));
        let r = check(&o);
        assert_eq!((r.orphans, r.lost, r.duplicated), (1, 0, 0), "{r}");
        assert!(
            r.problems.iter().any(|p| p.contains("r3") && p.contains("failed")),
            "{r}"
        );
    }

    #[test]
    fn over_commit_completion_and_use_disagreements_are_found() {
        let mut o = consistent();
        o.agents.insert("a".into(), agent("a", &["r1"], 3));
        let r = check(&o);
        assert_eq!(r.over_committed, 1, "{r}");
        assert_eq!(r.disagreements, 1, "3 cores in use, 1 stored: {r}");

        let mut o = consistent();
        o.agents.insert("a".into(), agent("a", &["r1", "r4"], 1));
        let r = check(&o);
        assert_eq!(r.disagreements, 1, "r4 completed yet committed: {r}");

        // With a hold, use may exceed the stored commits'.
        let mut o = consistent();
        let mut a = agent("a", &["r1"], 2);
        a.status.holds.push(HoldSummary {
            request_id: "h".into(),
            workflow: "w".into(),
            expires_ms: 1,
        });
        o.agents.insert("a".into(), a);
        let r = check(&o);
        assert!(r.is_clean(), "{r}");
        assert_eq!(r.holds, 1);
    }

    #[test]
    fn double_booked_and_stray_volumes_are_found() {
        let mut o = consistent();
        o.decisions.insert(
            "r5".into(),
            decision("r5", DecisionState::Committed, Some("a"), "h0", "v1"),
        );
        o.agents.insert("a".into(), agent("a", &["r1", "r5"], 2));
        let r = check(&o);
        assert_eq!(r.double_booked, 1, "{r}");

        let mut o = consistent();
        o.agents.get_mut("a").unwrap().status.volumes.push(ManagedVolumeInfo {
            name: "v9".into(),
            provisioner: Some("scratch".into()),
            capacity: ByteSize(1),
            phase: "Bound".into(),
            request_id: Some("r3".into()),
            events: Vec::new(),
        });
        assert_eq!(check(&o).stray_volumes, 1);
    }
}
